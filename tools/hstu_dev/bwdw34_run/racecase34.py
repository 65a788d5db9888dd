"""A small D = 256 backward under kernel_options(sm90=False, bwd_sm80_cfg=0 / 13) for compute-sanitizer (branch
bwdw34): two sequences (300 and 130 rows: full and partial query tiles; heads first), H = 1, causal; prints how far
cfg 13's dQ / dK / dV lie from the default's, relative to their largest value (run 1's wheel: cfg 13 the split S / dP;
run 2's: the default the split, cfg 13 the loop without it)."""
import torch

import hstu_attn
from hstu_attn import _ops

dev, dt = "cuda", torch.bfloat16
lens = [300, 130]
g = torch.Generator(device=dev).manual_seed(3)
q, k, v = (torch.randn(sum(lens), 1, 256, device=dev, dtype=dt, generator=g) for _ in range(3))
cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
dout = torch.randn_like(q)
res = {}
for cfg in (0, 13):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
        out = hstu_attn.hstu_attn_varlen_func(*leaves, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                                              max_seqlen_k=max(lens), window_size=(-1, 0), alpha=0.0625)
    res[cfg] = torch.autograd.grad(out, leaves, dout)
torch.cuda.synchronize()
for i, n in enumerate(("dq", "dk", "dv")):
    a, b = res[13][i].float(), res[0][i].float()
    print(f"cfg 13 {n}: max |diff| / max |default| {((a - b).abs().max() / b.abs().max()).item():.2e}")
