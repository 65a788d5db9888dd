#!/bin/bash
# fwd30 (issue 39, session 27), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd30/run2.sh > <dir>/stdout.txt 2>&1
# The branch: the bf16 D = 64 long-row default (Q scaled by alpha / 2) runs hstu_fwd_qreg_ilv_kernel, its unmasked
# sub-tiles without rab in 16-key groups with S of group g, P V of g - 2 and the SiLU of g - 1 issued together;
# noilv = kernel_options(fwd_sm80_interleave=False): main's hstu_fwd_qreg_scaled_kernel in the branch's process.
# 1. Tests (the branch's files in .carry/fwd30/tree): test_sm80_forward_qscale (the interleaved default against the
#    fp32 reference and bit for bit against the scaled and the unscaled kernels: masks, windows, targets, delta-q,
#    seqused, rab, alpha 0.125 / 0.5 / 0.3), the defaults at long rows and with contexts / targets at D = 64 (the
#    option bits' test needs the headers: run here on the CPU).
# 2. Time: the branch's wheel (default, noilv, FA2) on B16 S8K / S4K D64, B16 S4K D128 / D256, B256 S256 D256, then
#    main30's wheel (its default) on the D = 64 shapes in its own process.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "qscale or ((long_rows or contexts_run) and 64)" -v $T
echo "== 2. time ($SECONDS s)"
bench() {  # bench SITE LABEL TIMEOUT ARGS...: fwd30_bench.py with SITE's wheel, appended to $OUT/time.log
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $B $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
bench /tmp/site_fwd30 fwd30 16 --reps 5 --variants default noilv --fa2 --cases s8k64 s4k64 s4k128 s4k256 b256
bench /tmp/site_main main30 $(( $(left) - 1 )) --reps 5 --variants default --cases s8k64 s4k64
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'qscale or ((long_rows or contexts_run) and 64)'; -v: PASSED per test)"
grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd30 = the branch's wheel, main30 = main's, own processes; sm90=False; alpha D^-1/2; noilv ="
echo "#### fwd_sm80_interleave=False; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
