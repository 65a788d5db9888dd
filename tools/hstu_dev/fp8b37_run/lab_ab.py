"""fp8b37 (issue 36): the FP8 backward path's kernels of this wheel in one process at the benchmark's inputs
(fp8p32's path_gaps.py `inputs`: B16 causal H4 D128, block descale): "default", "main_kernel" (option bit 59) and the
lab kernels of the op's diag ("kt_wait_late": kFp8BwdKtWaitLate). Two measures, as benchmarks/hstu_fp8_bwd.py's: (1) the
paths in a fresh random order each rep, L2 flushed before each timed call (CUDA events), medians; (2) back to back:
--rounds rounds, the names in a fresh random order each, --short calls after 5 warm-up ones, mean ms (FA3's
method). Ratios against main_kernel. Usage (GPU, sm_90):
python lab_ab.py [--s 16384] [--reps 20] [--short 15] [--rounds 3] [--names default,main_kernel,kt_wait_late]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # fp8_bwd_ab.py: carried beside this file, or in the tree
from fp8_bwd_ab import lab_ab  # noqa: E402

DIAGS = {"kt_wait_late": -(1 << 31)}  # (fp8b37's lab kernel: the op's diag)

if __name__ == "__main__":
    sys.exit(lab_ab(DIAGS, "default,main_kernel,kt_wait_late", 37))
