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
# 2. Time: the branch's wheel (default, noilv = main's kernel, FA2) on B16 S8K / S4K, B128 S1K D64, B16 S4K D256 / D128
#    in one process (D = 128 / 256: the same kernels as main's).
# 3. ncu (the pipes, warp states) of the default and noilv at B16 S8K D64 in the time left: did the tensor and MUFU
#    pipes' active cycles overlap, and the `wait` stalls drop?
BASE=none source "$(dirname "$0")/setup.sh"  # (no main30 wheel: noilv is its kernel)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 13 "qscale or ((long_rows or contexts_run) and 64)" -v $T
echo "== 2. time ($SECONDS s)"
bench() {  # bench SITE LABEL TIMEOUT ARGS...: fwd30_bench.py with SITE's wheel, appended to $OUT/time.log
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $B $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
bench /tmp/site_fwd30 fwd30 15 --reps 5 --variants default noilv --fa2 --cases s8k64 s4k64 b128s1k64 s4k256 s4k128
echo "== 3. ncu ($SECONDS s)"
NCU_J=$B NCU_LIGHT=1 ncu_case fwd30i /tmp/site_fwd30 2 hstu_fwd_qreg --cases s8k64 --variants default noilv
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'qscale or ((long_rows or contexts_run) and 64)'; -v: PASSED per test)"
grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd30 = the branch's wheel; sm90=False; alpha D^-1/2; noilv = fwd_sm80_interleave=False (main's"
echo "#### kernel); FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
echo "#### ncu B16 S8K D64 (default, noilv)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd30i.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|pipe_xu.avg.pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch).*ratio|issue_active.avg.pct|inst_executed.sum " \
  $OUT/fwd30i_digest.md 2>/dev/null | cut -c1-200
