"""One small D = 256 backward with rab + drab (for compute-sanitizer racecheck): B1 H1 S512 bf16 (mask, rab heads)."""
import sys

import torch

import hstu_attn  # noqa: F401  (registers torch.ops.hstu_attn)

mask, H = sys.argv[1], int(sys.argv[2])
S, D = 512, 256
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v, do = (torch.randn(S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
rab = torch.randn(1, 1, S, S, device="cuda", dtype=torch.bfloat16, generator=g)
cu = torch.tensor([0, S], device="cuda", dtype=torch.int32)
wr = -1 if mask == "none" else 0
dq, dk, dv, drab = torch.ops.hstu_attn.bwd(do, q, k, v, cu, cu, S, S, None, None, 1, -1, wr, 1.0, rab, -1.0, None,
                                           None, True, False)
torch.cuda.synchronize()
print("race case", mask, "H", H, "finite:", all(bool(torch.isfinite(t).all()) for t in (dq, dk, dv, drab)))
