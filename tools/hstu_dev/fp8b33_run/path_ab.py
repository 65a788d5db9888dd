"""fp8b33 (issue 36): fp8p32's path_gaps.py (carried beside this file) on this branch's wheel, its in-process A/B
"op prepass_late" pointed at this branch's option bit 60 main_path (main 0bb35f74's path outside the kernel: the
pre-pass after the validation, its grid and 272-byte transposes' tile, dq put back through shared memory), so that
its tables and profiled timelines compare the branch's path ("op") with main's ("op prepass_late" = main_path).
Usage (GPU, sm_90): python path_ab.py [path_gaps.py's arguments]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hstu_attn import _fp8_bwd  # noqa: E402

_fp8_bwd.FP8_BWD_VARIANT_BITS["prepass_late"] = _fp8_bwd.FP8_BWD_VARIANT_BITS["main_path"]
import path_gaps  # noqa: E402

if __name__ == "__main__":
    sys.exit(path_gaps.main())
