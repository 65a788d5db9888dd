#!/bin/bash
# fwd34 (issue 39, session 31), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd34/run2.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 2): 6 passed, bit for bit; x / default at B256 S256 / B128 S512 / B64 S1K / B16 S4K D256:
# vepw 1.011 / 1.006 / 0.990 / 0.992, l2n 1.049 / 1.062 / 1.033 / 1.034, all 1.054 / 1.056 / 1.022 / 1.020 (the L2
# prefetch slower everywhere; all's loop SASS = vepw's: the prefetch itself costs). Run 2's wheel adds, with
# fwd_sm80_interleave=False at D = 256 (D = 64's switch): ve = the first V copy in the prologue alone, l2far = the
# prefetch two SM counts ahead, l2walk = of the next block's last 4 K / V tiles. Questions: does vepw repeat, which
# half of it moves, and why does the prefetch cost (ncu: DRAM bytes, the L2 hit rate, stalls)?
# 1. GPU tests: test_sm80_forward_pairs_fixed_part (4 of its 6 cases, every variant bit for bit the default).
# 2. Time in one process: default and the variants, FA2, at B256 S256, B128 S512, B64 S1K, B16 S4K D256 (7 rounds).
# 3. ncu of default, vepw, l2n at B256 S256 (pipes, warp states, DRAM bytes, L2 hit rate), one launch each.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 18 "pairs_fixed_part and (causal-False-0-False or causal-True or target_group or none)" \
  tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd34 fwd34 12 --reps 7 --variants default vepw l2n ve l2far l2walk --fa2 \
  --cases b256 b128s512d256 b64s1k256 s4k256
echo "== 3. ncu ($SECONDS s)"
ncu34 fwd34n /tmp/site_fwd34 3 "hstu_fwd_xpf" --cases b256 --variants default vepw l2n
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (fwd34 = the branch's wheel: default = main's kernel hstu_fwd_xpf_kernel; hstu_fwd_xpfx_kernel<..., X>:"
echo "#### vepw 3, l2n 4, ve 1, l2far 12, l2walk 20; sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^\| |rror|Traceback|capture|^rc" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-250
echo "#### ncu B256 S256 D256 (default, vepw, l2n)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd34n.log 2>/dev/null | tail -4 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct|dram__bytes_(read|write)|sector_hit_rate|dram__throughput|\
stalled_(wait|short|long|barrier|mio|not_sel).*ratio|inst_executed.sum |sm__cycles_active" \
  $OUT/fwd34n_digest.md 2>/dev/null | cut -c1-200
