"""One backward per --cfgs value (kernel_options(sm90=False, bwd_sm80_cfg=n)) of the stmatrix test's first case
(tests/hstu/test_sm80_backward_gpu.py test_sm80_backward_stsm_pds: jagged 0-700 keys, H2, causal, bf16) at D = 64
and 128, each synchronized and printed before the next (branch bwd30: which cfg, if any, does not return), then the
largest |dK - dK of cfg 0| and the same for dV (0 where the cfg's kernel is bitwise the default's). Run from the
carried tree (tests/hstu on sys.path), PYTHONPATH=<site with hstu_attn>:
  python3 -P probe30.py --cfgs 0 12 11 10"""
import argparse
import os
import random
import sys
import zlib

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "hstu"))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_attn import _ops, hstu_attn_varlen_func  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--cfgs", type=int, nargs="+", default=[0, 12, 11, 10])
a = ap.parse_args()
for D in (64, 128):
    rng = random.Random(zlib.crc32(repr(("stsm", D, "causal")).encode()))
    lk = [0, 1, 63, 64, 65, 127, 128, 129, 700] + [rng.randint(0, 700) for _ in range(11)]
    case = kg.make_case(zlib.crc32(repr(("stsm", D, "causal", 0, len(lk))).encode()), lk, 2, D, torch.bfloat16,
                        "causal", 0)
    dout = torch.randn_like(case["q"])
    ref = None
    for cfg in a.cfgs:
        leaves = [case[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
        with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
            out = hstu_attn_varlen_func(*leaves, alpha=0.5, **kg._varlen_kwargs(case))
            g = torch.autograd.grad(out, leaves, dout)
        torch.cuda.synchronize()
        ref = g if ref is None else ref
        dk, dv = ((x.double() - y.double()).abs().max().item() for x, y in zip(g[1:], ref[1:]))
        print(f"probe30 D{D} cfg {cfg}: returned; max |dK - dK0| {dk:.3g}, |dV - dV0| {dv:.3g}", flush=True)
