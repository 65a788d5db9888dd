"""fp8b37 (issue 36; fp8b35's): one call of the FP8 backward's path for ncu (`--profile-from-start off`: only the call between
torch.cuda.profiler.start / stop is profiled), at the benchmark's inputs (fp8p32's path_gaps.py `inputs`, carried
beside this file). Usage (GPU, sm_90): python ncu_call.py [B] [S] [VARIANT]  (VARIANT: a name of
_fp8_bwd.FP8_BWD_VARIANT_BITS, 'kt_wait_late' (the op's diag kFp8BwdKtWaitLate) or 'default')
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hstu_attn import _fp8_bwd, _ops  # noqa: E402
import path_gaps  # noqa: E402


def main():
    B = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    S = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    var = sys.argv[3] if len(sys.argv) > 3 else "default"
    dev = torch.device("cuda")
    bits = _ops.OPTION_BITS["fp8_bwd"] | _fp8_bwd.FP8_BWD_VARIANT_BITS.get(var, 0)
    x = path_gaps.inputs(B, S, dev)
    diag = -(1 << 31) if var == "kt_wait_late" else 0
    fn = lambda: _fp8_bwd.fp8_bwd_cuda(x[0], x[1:], False, bits, diag=diag)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"ncu_call B{B} S{S} {var}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
