#!/bin/bash
# fwd24 (issue 39, session 22), run 2 (<= 40 s), from the root of main's tree (main 708f92a on the device):
#   OUT=/tmp/o_fwd24 timeout 60 bash .carry/fwd24/run2.sh > /tmp/o_fwd24/stdout.txt 2>&1
# The wheel (branch fwd24 after run 1): the bf16 default for calls with contexts = candidate 5 at D = 64 and at D =
# 128 where two blocks fit per SM (3's Q-in-registers tile, the warp skip in query tile 0: hstu_fwd_qreg_ctx_kernel;
# cfg 4 = the old default there); cfg 5 at D = 128 only where two blocks fit (the sm_8x code the trap stub); query
# tiles with target rows take the unmasked path on the history sub-tiles all their rows see (the 4-warp tiles: the
# defaults, candidates and the split; was: the mask path on every sub-tile of such a tile).
# 1. Tests (the branch's files in .carry/fwd24/tree; one pytest, -v): every candidate with targets (+ contexts,
#    windows, delta-q, rab) at D = 64 / 128 / 256 against the fp32 reference and the default, the split with targets,
#    the kernel each cfg runs, the defaults' kernels and outputs (long rows, contexts, targets), test_kernels_gpu.py's
#    sm80-class forward against the reference.
# 2. Time: main22's wheel (cfg 0), then the branch's: B16 S8K D64 (the default, the peer, FA2); B16 S4K D64 / D128
#    causal, ctx64 with cfg 0 (5) / 4, tgt256.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "(candidates and target and not convention) or (split and target) or runs_its_kernel or default_long_rows or default_contexts or sm80_and_sm90" -v -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_main main22 6 --reps 5 --dims 64 128 --ctx-cfgs 0
jagp /tmp/site_fwd24 fwd24 $(( $(left) - 1 )) --reps 5 --s8k --peer --fa2 --dims 64 128 --ctx-cfgs 0 4
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k '(candidates and target and not convention) or (split and target) or runs_its_kernel"
echo "#### or default_long_rows or default_contexts'; test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference; -v)"
digest_verbose
digest_time
