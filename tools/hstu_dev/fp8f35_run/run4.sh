#!/bin/bash
# fp8f35 run 4 (issue 36, session 32; <= 54 s): the final wheel: the Vt pre-pass by 128 threads per 64 columns, every
# V load issued before the shared stores, on a 1-D grid with the head fastest (run 3's wheel had the (column block,
# head) grid); kernel_options(fp8_fwd_var=4) = main's pre-pass, the rest of the op main's in both. Tests: test_fp8.py
# -k "vt_prepass or (copy_and_tile_cuts and causal)" (10: the default against the fp64 emulation, var 4 bitwise the
# default by kernel name, D 64 / 128 / 256). Then vt_ab.py: B16 S16K D128 / D256 causal H4, the pre-pass, the FP8
# kernel and the op per variant, alternating, 6 rounds (torch.profiler / CUDA events), then FA3's FP8 method per
# variant.
# `OUT=DIR timeout 56 bash .carry/fp8f35/run4.sh` from the root of main's tree (carry: WHEEL=1 fp8f35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 18 "vt_prepass or (copy_and_tile_cuts and causal)" tests/hstu/test_fp8.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 54 - SECONDS )) python3 -P $C/vt_ab.py --rounds 6 > $OUT/vt_ab.log 2>&1
echo "vt_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -2  # (pytest's progress lines: the count if the summary is cut)
grep -E "^\||^B16|^pre-pass|rror" $OUT/vt_ab.log | cut -c1-160
echo "fp8f35 run 4 done at $SECONDS s"
