"""Backwards of the portable HSTU kernel (kernel_options(sm90=False)) and of FlashAttention-2 for ncu (branch bwd17,
issue 39): bf16 causal B16 H4 D128, one backward per --runs item "S:VAR" or "D:S:VAR" (D the head dim, 128 if left
out (bwd20); S the length; VAR as time17.py's: 0 the default, vN bwd_sm80_variant=N (993224e only), cN
bwd_sm80_cfg=N, fa2 torch SDPA flash), in that order:
    ncu -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c N ... python3 prof17.py --runs 4096:0 16384:0 16384:g2 16384:fa2
Prints the (64 x 128 query tile, key block) pairs of each run (8 warps a pair; FA2's D = 64 tile of 128 x 128 is
counted per the same work)."""
import argparse

import torch

import hstu_attn
from hstu_attn import _ops

ap = argparse.ArgumentParser()
ap.add_argument("--runs", nargs="+", default=["4096:0"])
ap.add_argument("--batch", type=int, default=16)
a = ap.parse_args()
B, H, BM, BN = a.batch, 4, 64, 128
dev, dt = "cuda", torch.bfloat16
for run in a.runs:
    fields = run.split(":")
    D = int(fields[0]) if len(fields) == 3 else 128
    S, var = int(fields[-2]), fields[-1]
    gen = torch.Generator(device=dev).manual_seed(1)
    if var == "fa2":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
        cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
        opt = {} if var == "0" else {"bwd_sm80_cfg" if var[0] == "c" else "bwd_sm80_variant": int(var[1:])}
        with _ops.kernel_options(sm90=False, **opt):
            out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S,
                                                  max_seqlen_k=S, window_size=(-1, 0), alpha=D ** -0.5)
    g = torch.autograd.grad(out, [q, k, v], torch.randn_like(out))
    torch.cuda.synchronize()
    pairs = B * H * sum(S // BM - (n * BN) // BM for n in range(S // BN))
    print(f"prof17 run {run} pairs {pairs} (warps per pair 8)", torch.cuda.get_device_name(), flush=True)
    del g, out, q, k, v
