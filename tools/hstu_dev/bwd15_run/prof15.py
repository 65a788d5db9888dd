"""One backward each of the portable HSTU kernel (kernel_options(sm90=False): hstu_bwd_pds_kernel on a Hopper GPU)
and of FlashAttention-2 (torch SDPA flash backend), bf16 causal B16 S16K H4 D128, for ncu (branch bwd15, issue 39):
    ncu -k regex:"hstu_bwd_pds_kernel|flash_bwd_dq_dk_dv" -c 2 ... python3 prof15.py [--cfg N] [--seq S] [--no-fa2]
The forwards run first (not matched by the regex), then one backward of each."""
import argparse

import torch

import hstu_attn
from hstu_attn import _ops

ap = argparse.ArgumentParser()
ap.add_argument("--cfg", type=int, default=0)
ap.add_argument("--seq", type=int, default=16384)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--no-fa2", action="store_true", help="ours only")
a = ap.parse_args()
B, S, H, D = a.batch, a.seq, 4, a.dim
dev, dt = "cuda", torch.bfloat16
gen = torch.Generator(device=dev).manual_seed(1)
q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
with _ops.kernel_options(sm90=False, bwd_sm80_cfg=a.cfg):
    out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S, max_seqlen_k=S,
                                          window_size=(-1, 0), alpha=D ** -0.5)
g1 = torch.autograd.grad(out, [q, k, v], torch.randn_like(out))
del g1, out, q, k, v
torch.cuda.synchronize()
if a.no_fa2:
    print("prof15 done (ours only)", torch.cuda.get_device_name())
    raise SystemExit(0)
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
g2 = torch.autograd.grad(out, [q, k, v], torch.randn_like(out))
torch.cuda.synchronize()
print("prof15 done", torch.cuda.get_device_name())
