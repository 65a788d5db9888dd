#!/bin/bash
# fp8f33 run 3 (issue 36, session 30; <= 50 s): the flipped wheel: D128's 192-key tiles take their unmasked-tile
# test by the loop index by default (runs 1-2's var 4; runs 2's vars 7 / 8, P without its copy in a loop unrolled by
# two, measured 1.036-1.037 and are gone); kernel_options(fp8_fwd_var=3) = main 0bb35f74's kernel there (the test
# from each tile's bounds: kFp8FwdTileTest, bit 32). Tests: test_fp8.py -k copy_and_tile_cuts (25: the default
# against the fp64 emulation, bitwise var 2 and, on the 192-key tiles, var 3, by kernel name; five masks);
# compute-sanitizer memcheck of sancase.py with var 3 against the default at D128 192-key (tensor mode; causal, a
# 90-key window, contexts + target groups; jagged with an empty sequence; bit-equal); then fp8_fwd_split.py: burst
# and sustained 1.5 s windows A B A B A (default / var 3) at B16 S16K and S4K D128, causal H4, per-tensor, beside
# nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f33/run3.sh` from the root of main's tree (carry: fp8f33_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 13 "copy_and_tile_cuts" tests/hstu/test_fp8.py
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
(cd $C && PYTHONPATH=/tmp/site_$NAME timeout 14 $CS --tool memcheck --kernel-name kns=hstu_fwd_fp8_sm90_kernel \
    python3 -P $C/sancase.py 3 128:192 > $OUT/san.log 2>&1)
echo "memcheck rc $? ($SECONDS s)"
bench 52 --reps 5 --warmup-ms 25 --fwd-vars 3 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128,B16S4KD128
digest
grep "ERROR SUMMARY\|sancase\|bit-equal\|rror" $OUT/san.log | head -8 | cut -c1-200
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f33 run 3 done at $SECONDS s"
