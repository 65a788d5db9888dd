#!/bin/bash
# fp8b29 run 3 (issue 36, session 26; only if the lead offers a third run): the default with dQ reduce-added in bf16
# (kFp8BwdDqBf16 in kFp8BwdDefault; option bit 59 main_kernel = main29's kernel, fp32 dQ): every GPU test of
# tests/hstu/test_fp8_bwd.py (-m sm90; the CPU ones ran off the device) in two pytest processes side by side on the
# one GPU: the fp64-emulation tests (CPU oracles) and the rest.
# `OUT=DIR timeout 56 bash .carry/fp8b29/run3.sh` from the root of main's tree (carry: fp8b29_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
T=$(( 47 - SECONDS ))
cd $C/tree
PYTHONPATH=/tmp/site_$NAME timeout $T $PT tests/hstu/test_fp8_bwd.py -m sm90 -k "emulating" > $OUT/tests_a.log 2>&1 &
A=$!
PYTHONPATH=/tmp/site_$NAME timeout $T $PT tests/hstu/test_fp8_bwd.py -m sm90 -k "not emulating" -s \
    > $OUT/tests_b.log 2>&1
echo "rest rc $? ($SECONDS s)"
wait $A
echo "emulation rc $? ($SECONDS s)"
cd $R
echo "#### digest: $GPU"
for f in tests_a tests_b; do
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/$f.log | tail -6 | cut -c1-300
done
grep -o "dq at 16K.*" $OUT/tests_b.log | cut -c1-300
echo "fp8b29 run 3 done at $SECONDS s"
