"""fp8b38 (issue 36; fp8b37's script): the FP8 backward paths of this wheel in one process at the benchmark's inputs
(fp8p32's path_gaps.py `inputs`: B16 causal H4 D128, block descale): "default" (kFp8BwdDqTma: dQ by bulk tensor
reduce-adds into dq's rows, no finishing pass over dq), "main_kernel" (option bit 59: main 6ca06103's kernel and
path) and the timing-only splits of the op's diag (wrong dq): "no_reduce" (kFp8BwdDiagNoReduce: the default's slots
stored, no bulk reduce-add) and "no_dq" (kFp8BwdDiagNoDq: no dQ adds at all); run 1's dq_tma_now and run 2's
heads_grouped / main_heads_grouped (the wheels of 6e040339 / e7e48eb7) are gone. Two measures, as benchmarks/hstu_fp8_bwd.py's: (1) the
paths in a fresh random order each rep, L2 flushed before each timed call (CUDA events), medians; (2) back to back:
--rounds rounds, the names in a fresh random order each, --short calls after 5 warm-up ones, mean ms (FA3's
method). Ratios against main_kernel. Usage (GPU, sm_90):
python lab_ab.py [--s 16384] [--reps 20] [--short 15] [--rounds 3] [--names default,main_kernel,no_reduce,no_dq]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # fp8_bwd_ab.py: carried beside this file, or in the tree
from fp8_bwd_ab import lab_ab  # noqa: E402

DIAGS = {"no_reduce": 16, "no_dq": 1}  # (timing-only splits: the op's diag)

if __name__ == "__main__":
    sys.exit(lab_ab(DIAGS, "default,main_kernel,no_reduce,no_dq", 38))
