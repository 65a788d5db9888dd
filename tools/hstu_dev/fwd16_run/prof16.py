"""One forward per listed (D, cfg) of the portable HSTU kernel (kernel_options(sm90=False, fwd_sm80_cfg=cfg)) and, with
--fa2 D, one of FlashAttention-2's (torch SDPA flash), bf16 causal B16 H4 (S4K at D = 256 / 128, S8K at D = 64), for
ncu (branch fwd16, issue 39):
    ncu -k regex:"hstu_fwd_kernel|flash_fwd" ... python3 prof16.py 256:2 256:1 64:0 --fa2 256"""
import argparse

import torch

import hstu_attn
from hstu_attn import _ops

ap = argparse.ArgumentParser()
ap.add_argument("runs", nargs="+", help="D:cfg")
ap.add_argument("--fa2", type=int, nargs="*", default=[])
a = ap.parse_args()
B, H = 16, 4
gen = torch.Generator(device="cuda").manual_seed(1)
for r in a.runs:
    D, cfg = (int(x) for x in r.split(":"))
    S = 8192 if D == 64 else 4096
    q, k, v = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    cu = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * S
    with torch.no_grad(), _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg):
        hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5)
    torch.cuda.synchronize()
for D in a.fa2:
    S = 8192 if D == 64 else 4096
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    with torch.no_grad(), torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.synchronize()
print("prof16 done", torch.cuda.get_device_name())
