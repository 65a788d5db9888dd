#!/bin/bash
# tidy40 run 1 (<= 52 s), from the root of main's tree:   OUT=/tmp/out_tidy40 timeout 56 bash .carry/tidy40/run1.sh
# The branch is a refactor of the sm80-class backward's launchers (one sm_90+ prologue, bwd_sm80_sm90_smem, for the rab
# / split / dQ-claim launchers and the default's loops; the split's key block once in the op): the same kernels must
# run with the same gradients. same40.py dumps, per case (defaults D = 32-256, contexts, rab through shared memory, the
# split, the dQ claims, cfgs 2 / 6 / 7 / 13 / 15), the backward's kernels (torch.profiler) and dq / dk / dv / drab:
# main40's wheel, the branch's, main40's again (the fp32 atomics' noise); then compares; then the branch's GPU tests
# of the touched launchers for the time left. (The branch's wheel: its bwd sm80 units and hstu_ops.cc (sm_90a)
# linked by mkwheel.sh with main's other objects.)
source "$(dirname "$0")/setup.sh"
for w in main:main $NAME:branch main:main2; do
  PYTHONPATH=/tmp/site_${w%%:*} timeout $(( $(left) > 16 ? 15 : $(left) - 1 )) python3 -P $S dump $OUT/${w#*:}.pt \
      >> $OUT/dump.log 2>&1
  echo "rc $? (${w#*:}, $SECONDS s)"
done
python3 -P $S compare $OUT/main.pt $OUT/branch.pt $OUT/main2.pt > $OUT/compare.log 2>&1
# then the branch's GPU tests of the touched launchers for the time left (kernel names per cfg, the context kernels,
# rab through shared memory, the dQ claims; -v: the PASSED lines count where time runs out)
[ $(left) -gt 8 ] && gpu_tests $(( $(left) - 2 )) tests/hstu/test_sm80_backward_gpu.py \
    -k "one_barrier_runs_its_kernel or context_kernel or rab_smem or dq_claims"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
grep -E "dumped|rror" $OUT/dump.log | cut -c1-120 | head -4
grep -E "DIFF|ERR|rror|^  | diff " $OUT/compare.log | cut -c1-160 | head -6
grep -E "^FLAGS|^SAME" $OUT/compare.log | cut -c1-400
digest_gpu_tests 160
