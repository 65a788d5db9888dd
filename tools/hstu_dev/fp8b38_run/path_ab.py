"""fp8b38 (issue 36; from fp8b37_run): one profiled call of each named path of the FP8 backward at the benchmark's inputs (B16 S16K;
fp8p32's path_gaps.py, carried beside this file: its `inputs` and `timeline`): each kernel's start after the L2
flush's end and its length (us), the idle before the first kernel, the gaps, the span. Names: "op" (the default) or
_fp8_bwd.FP8_BWD_VARIANT_BITS's (a name this wheel lacks is skipped). Usage
(GPU, sm_90): python path_ab.py NAME...
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hstu_attn import _fp8_bwd, _ops  # noqa: E402
import path_gaps  # noqa: E402


def main():
    if not torch.cuda.is_available():
        print("path_ab: needs a GPU")
        return 0
    names = sys.argv[1:] or ["op", "main_path"]
    dev = torch.device("cuda")
    opts = _ops.OPTION_BITS["fp8_bwd"]
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    B, S = 16, 16384
    x = path_gaps.inputs(B, S, dev)
    diags = {"no_reduce": 16, "no_dq": 1}  # (timing-only splits: the op's diag)
    for name in names:
        if name != "op" and name not in _fp8_bwd.FP8_BWD_VARIANT_BITS and name not in diags:
            print(f"{name}: not in this wheel")
            continue
        bits = _fp8_bwd.FP8_BWD_VARIANT_BITS.get(name, 0)
        d = diags.get(name, 0)
        ks, _, _ = path_gaps.timeline(lambda: _fp8_bwd.fp8_bwd_cuda(x[0], x[1:], False, opts | bits, diag=d), flush)
        end, gaps = None, []
        for _, s, d in ks:
            if end is not None:
                gaps.append(round(s - end))
            end = s + d
        print(f"{name} B{B} S{S // 1024}K (us): " + "; ".join(f"{k[:32]} @{s:.0f} +{d:.1f}" for k, s, d in ks) +
              f"; idle before the first {ks[0][1]:.0f}; gaps {gaps}; span {end:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
