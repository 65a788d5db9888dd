"""Localizes a fault of the Hopper FP8 backward (issue 36; `kernel_options(fp8_bwd=True)`): runs the kernel on small
structured cases and prints, per gradient, its error against the fp64 emulation (`hstu_attn_fp8_backward_reference`)
relative to max |g|, and where the error sits (per 64-row block and 32-column group), so that a layout fault shows
its pattern: dV / dK wrong with dQ right points at the Qᵀ / dOᵀ tiles (64-byte swizzle, query permutation), dQ alone
at the dS tile or Kᵀ's key pairs, all three at the Sᵀ / dPᵀ GEMMs or the factors.

Usage (GPU, sm_90, a build with the unit): python tools/hstu_dev/fp8_bwd_diag.py [--small]
Under compute-sanitizer: compute-sanitizer --tool memcheck python tools/hstu_dev/fp8_bwd_diag.py --small
"""

import argparse
import sys

import torch

import hstu_attn
from hstu_attn import _fp8_bwd as fb
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

CASES = {  # name -> (lengths, window, mode)
    "one tile (64 q x 128 k), full": ([64], (-1, -1), "tensor"),
    "one block, causal 128": ([128], (-1, 0), "tensor"),
    "two blocks, causal 256, block mode": ([256], (-1, 0), "block"),
    "jagged causal, head mode": ([300, 77, 129], (-1, 0), "head"),
}


def run(lens, window, mode, H=2, D=128, seed=0):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(seed)
    cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, H, D, generator=gen, device=dev).to(torch.bfloat16) for _ in range(3))
    dout = (torch.randn(total, H, D, generator=gen, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, mode) for x in (q, k, v))
    alpha, L = D ** -0.5, max(lens)
    args = (q8, k8, v8, qs, ks, vs, DESCALE_MODES.index(mode), 0, cu, cu, L, L, None, None, 1, window[0], window[1],
            alpha, None, float(L), None, None, False)
    grads = torch.ops.hstu_attn.fp8_bwd(dout, *args, hstu_attn._ops.OPTION_BITS["fp8_bwd"])
    torch.cuda.synchronize()
    host = [t.cpu() for t in (q8, k8, v8, qs, ks, vs)]
    gold = fb.hstu_attn_fp8_backward_reference(dout.cpu().double(), *host, mode, cu.cpu(), cu.cpu(), L, L,
                                               window_size=window, alpha=alpha, compute_dtype=torch.float64)
    for name, g, r in zip(("dq", "dk", "dv"), grads, gold):
        g, r = g.cpu().double(), r.double()
        scale = max(r.abs().max().item(), 1e-30)
        err = (g - r).abs()
        rows = -(-err.shape[0] // 64)
        blocks = [[err[64 * i:64 * i + 64, :, 32 * j:32 * j + 32].max().item() / scale for j in range(D // 32)]
                  for i in range(rows)]
        nan = int(torch.isnan(g).sum())
        print(f"  {name}: max err {err.max().item() / scale:.2e} of max |g| {scale:.2e}, NaN {nan}; per 64 rows x 32 "
              f"cols: " + " | ".join(" ".join(f"{x:.0e}" for x in row) for row in blocks[:6]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="the first case only")
    args = p.parse_args(argv)
    if not torch.cuda.is_available() or not fb.fp8_bwd_kernel_built(128):
        print("needs an sm_90 GPU and a build with hstu_bwd_sm90_fp8_hdim128")
        return 1
    for name, (lens, window, mode) in list(CASES.items())[:1 if args.small else None]:
        print(f"{name}:")
        run(lens, window, mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
