"""fp8b38 (issue 36; from fp8b37_run): one profiled call of each named path of the FP8 backward at the benchmark's inputs (B16 S16K;
fp8p32's path_gaps.py, carried beside this file: its `inputs` and `timeline`): each kernel's start after the L2
flush's end and its length (us), the idle before the first kernel, the gaps, the span. Names: "op" (the default) or
_fp8_bwd.FP8_BWD_VARIANT_BITS's (a name this wheel lacks is skipped). Usage
(GPU, sm_90): python path_ab.py NAME...
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # fp8_bwd_ab.py: carried beside this file, or in the tree
from fp8_bwd_ab import path_ab  # noqa: E402

DIAGS = {"no_reduce": 16, "no_dq": 1}  # (timing-only splits: the op's diag)

if __name__ == "__main__":
    sys.exit(path_ab(DIAGS, sys.argv[1:]))
