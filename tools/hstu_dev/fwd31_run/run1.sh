#!/bin/bash
# fwd31 (issue 39, session 28), run 1 (<= 48 s; the wheel of 8d1318f, whose D = 128 groups were reverted after it),
# from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd31/run1.sh > <dir>/stdout.txt 2>&1
# The branch: the bf16 D = 128 long-row default where two blocks fit per SM runs hstu_fwd_qreg_ilv_kernel (candidate
# 3's tile, Q unscaled, its unmasked sub-tiles without rab in two interleaved 16-key groups per 32-key sub-tile);
# noilv = kernel_options(fwd_sm80_interleave=False): main's hstu_fwd_qreg_kernel (D = 64: main's scaled kernel) in the
# branch's process.
# 1. Tests (the branch's files in .carry/fwd31/tree): test_sm80_forward_interleave_d128 (the default against the fp32
#    reference and bit for bit against noilv: masks, windows, targets, delta-q, seqused, rab) and the long-row default
#    at D = 128 / 64 (kernel names, bitwise its candidate).
# 2. Time: default, noilv, FA2 on B16 S4K / S16K, B128 S1K D128, B16 S8K D64, B16 S4K D256, B256 S256 D256 (D = 64 /
#    256: main's kernels either way).
# 3. ncu (the pipes, warp states) of the default and noilv at B16 S4K D128 in the time left.
BASE=none source "$(dirname "$0")/setup.sh"  # (no main wheel: noilv is its kernel)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 14 "interleave_d128 or (long_rows and (128 or 64))" -v $T
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd31 fwd31 $(( $(left) - 14 > 20 ? 20 : $(left) - 14 )) --reps 5 --variants default noilv --fa2 \
  --cases s4k128 s16k128 b128s1k128 s8k64 s4k256 b256
echo "== 3. ncu ($SECONDS s)"
NCU_J=$B NCU_LIGHT=1 ncu_case fwd31i /tmp/site_fwd31 2 hstu_fwd_qreg --cases s4k128 --variants default noilv
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'interleave_d128 or (long_rows and (128 or 64))'; -v)"
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd31 = the branch's wheel; sm90=False; alpha D^-1/2; noilv = fwd_sm80_interleave=False (main's"
echo "#### kernel); FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
echo "#### ncu B16 S4K D128 (default, noilv)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd31i.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|pipe_xu.avg.pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch).*ratio|issue_active.avg.pct|inst_executed.sum " \
  $OUT/fwd31i_digest.md 2>/dev/null | cut -c1-200
