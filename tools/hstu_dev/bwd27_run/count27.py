"""Where B128 S1K D128's backward time goes (branch bwd27, issue 39): the kernels of one backward (torch.profiler,
mean of --iters after warm-up) of ours (kernel_options(sm90=False, bwd_sm80_cfg=n)), bf16 H4, under the causal mask
and without a mask at three lengths whose grids are whole waves on 132 SMs (4,224 CTAs of 8 / 16 / 32 full tile
pairs each: B264 S512, B132 S1K, B66 S2K; heads first at all three). A line fitted through the three no-mask main
kernels gives the cost of a CTA (prologue, epilogue, launch) and of a full (64 x 128) tile pair; with those, the
causal kernel's rest is its diagonal pairs and its tail. Run from the root of the repository (python3 -P),
PYTHONPATH=<site with hstu_attn>.
  python3 -P count27.py --cfgs 0 7"""
import argparse
import collections

import torch

import hstu_attn
from hstu_attn import _ops

SMS = 132  # H100 / H200


def short(name):
    for k, v in (("hstu_bwd_pds", "main"), ("hstu_dq_tile_convert", "dQ convert"), ("FillFunctor", "fill"),
                 ("Memset", "memset")):
        if k in name:
            return v
    return name[:50]


def kernels(B, S, D, window, cfg, iters, H=4):
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(1)
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
    cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
    with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S,
                                              max_seqlen_k=S, window_size=window, alpha=D ** -0.5)
    dout = torch.randn_like(out)

    def f():
        return torch.autograd.grad(out, [q, k, v], dout, retain_graph=True)

    for _ in range(3):
        f()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as pr:
        for _ in range(iters):
            f()
        torch.cuda.synchronize()
    tot = collections.OrderedDict()
    for e in pr.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n = short(e.name)
            tot[n] = tot.get(n, 0.0) + e.time_range.elapsed_us() / iters
    return tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--D", type=int, default=128)
    a = ap.parse_args()
    D = a.D
    print(f"### count27: kernels of one backward (us, mean of {a.iters}), {torch.cuda.get_device_name()}, bf16 H4 D{D}")
    print("| case | cfg | kernels (us) | sum |\n|---|---|---|---:|", flush=True)
    fit = {}
    runs = [("none", B, S, (-1, -1), 0) for B, S in ((264, 512), (132, 1024), (66, 2048))]
    runs += [("causal", 128, 1024, (-1, 0), c) for c in a.cfgs]
    res = {}
    for mask, B, S, w, c in runs:
        t = kernels(B, S, D, w, c, a.iters)
        res[(mask, B, S, c)] = t
        print(f"| B{B} S{S} {mask} | {c} | " + ", ".join(f"{n} {us:.1f}" for n, us in t.items()) +
              f" | {sum(t.values()):.1f} |", flush=True)
        if mask == "none":
            fit[S // 64] = t.get("main", float("nan"))  # full tile pairs a CTA (4,224 CTAs: 32 waves)
        del t
        torch.cuda.empty_cache()
    # main = 32 waves x (a + n p): least squares over n = 8, 16, 32
    xs, ys = list(fit), [fit[n] / 32 for n in fit]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    p = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a0 = my - p * mx
    resid = [y - (a0 + p * x) for x, y in zip(xs, ys)]
    print(f"\nfit (no mask, a CTA = a + n p): a = {a0:.2f} us a CTA, p = {p:.3f} us a full pair (SM time); "
          f"residuals {', '.join(f'{r:+.2f}' for r in resid)} us")
    # causal B128 S1K: 4,096 CTAs; key block j walks 16 - 2 j tiles, two of them diagonal
    ctas, full, diag = 128 * 4 * 8, 128 * 4 * sum(14 - 2 * j for j in range(8)), 128 * 4 * 8 * 2
    for c in a.cfgs:
        m = res[("causal", 128, 1024, c)].get("main", float("nan"))
        base = (ctas * a0 + full * p) / SMS
        print(f"causal B128 S1K cfg {c}: main {m:.1f} us = CTAs {ctas * a0 / SMS:.1f} + full pairs {full * p / SMS:.1f}"
              f" + rest {m - base:.1f} (diagonal pairs {diag} and the tail; if all diagonal: "
              f"{(m - base) * SMS / diag:.3f} us a diagonal pair against {p:.3f})")


if __name__ == "__main__":
    main()
