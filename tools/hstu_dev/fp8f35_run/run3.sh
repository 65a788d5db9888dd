#!/bin/bash
# fp8f35 run 3 (issue 36, session 32; <= 54 s): part 2, the Vt pre-pass by 128 threads per 64 columns with every V
# load issued before the shared stores (the branch's wheel; kernel_options(fp8_fwd_var=4) = main's pre-pass).
# Tests: test_fp8.py -k "vt_prepass or copy_and_tile_cuts and causal" (the default against the fp64 emulation, var
# 4 bitwise the default by kernel name; D 64 / 128 / 256, five masks / modes). Then vt_ab.py: B16 S16K D128 / D256
# causal H4, the pre-pass, the FP8 kernel and the op timed per variant, alternating, 4 rounds (the pre-pass and the
# kernel by torch.profiler, the op by CUDA events), then FA3's FP8 benchmark method per variant.
# `OUT=DIR timeout 56 bash .carry/fp8f35/run3.sh` from the root of main's tree (carry: WHEEL=1 fp8f35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 18 "vt_prepass or (copy_and_tile_cuts and causal)" tests/hstu/test_fp8.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 54 - SECONDS )) python3 -P $C/vt_ab.py --rounds 4 > $OUT/vt_ab.log 2>&1
echo "vt_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -2  # (pytest's progress lines: the count if the summary is cut)
grep -E "^\||^B16|^pre-pass|rror" $OUT/vt_ab.log | cut -c1-160
echo "fp8f35 run 3 done at $SECONDS s"
