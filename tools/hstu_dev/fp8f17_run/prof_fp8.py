"""One call per listed D:var of the Hopper FP8 forward (kernel_options(fp8_fwd_var=var); var "s" = fp8_sched=True),
causal B4 S8K H4, per-tensor descale, for ncu (branch fp8f17, issue 36):
    ncu -k regex:hstu_fwd_fp8_sm90_kernel -c 3 ... python3 prof_fp8.py 256:0 256:1 256:2"""
import argparse

import torch

from hstu_attn import _ops
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

ap = argparse.ArgumentParser()
ap.add_argument("runs", nargs="+", help="D:var")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seqlen", type=int, default=8192)
a = ap.parse_args()
B, S, H = a.batch, a.seqlen, 4
cu = torch.arange(B + 1, device="cuda", dtype=torch.int32) * S
for r in a.runs:
    D, var = r.split(":")
    D = int(D)
    q, k, v = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, "tensor") for x in (q, k, v))
    sw = dict(fp8_sched=True) if var == "s" else dict(fp8_fwd_var=int(var))
    with _ops.kernel_options(**sw):
        o = _ops._current_options()
    torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0, cu, cu, S, S, None, None,
                                1, -1, 0, D ** -0.5, None, float(S), None, None, o)
    torch.cuda.synchronize()
print("prof_fp8 done", torch.cuda.get_device_name())
