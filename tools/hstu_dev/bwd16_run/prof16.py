"""One backward of the portable HSTU kernel (kernel_options(sm90=False)) per --cfgs value, bf16 causal B16 H4 D128
(S = --seq), for ncu (branch bwd16, issue 39):
    ncu -k regex:hstu_bwd_pds -c N ... python3 prof16.py --cfgs 0 10 13 [--seq S]
Prints the (query tile, key block) pairs each kernel walks (64 x 128 tiles, causal), so that the digest can give
instructions per warp and pair (8 warps a block)."""
import argparse

import torch

import hstu_attn
from hstu_attn import _ops

ap = argparse.ArgumentParser()
ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
ap.add_argument("--seq", type=int, default=4096)
ap.add_argument("--batch", type=int, default=16)
a = ap.parse_args()
B, S, H, D, BM, BN = a.batch, a.seq, 4, 128, 64, 128
dev, dt = "cuda", torch.bfloat16
gen = torch.Generator(device=dev).manual_seed(1)
q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
for cfg in a.cfgs:
    with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S,
                                              max_seqlen_k=S, window_size=(-1, 0), alpha=D ** -0.5)
    g = torch.autograd.grad(out, [q, k, v], torch.randn_like(out))
    del g, out
torch.cuda.synchronize()
# key block n walks the query tiles from the first that reaches its keys (n BN / BM) to the last
pairs = B * H * sum(S // BM - (n * BN) // BM for n in range(S // BN))
print(f"prof16 pairs {pairs} (warps per pair 8) cfgs {a.cfgs}", torch.cuda.get_device_name())
