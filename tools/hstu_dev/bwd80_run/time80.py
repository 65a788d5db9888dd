"""Portable (sm80-class) backward time (branch bwd80, session 13): issue 39's causal shapes and a few mask cases,
each under the given kernel_options(bwd_sm80_cfg=...) values (13: the default kernels with dQ-first warps), and
FlashAttention-2's backward (torch SDPA flash, the same causal shapes) with --fa2. The forward runs in
kernel_options(sm90=False, bwd_sm80_cfg=cfg) and records it, so torch.autograd.grad runs the sm80-class backward on
the H200. CUDA events, median of --reps after warm-up, the cfgs of a case interleaved (rounds of one call each).
Prints a markdown table (ms; TFLOP/s in FA's convention for the causal shapes).
Usage: time80.py LABEL [--cfgs 0 13] [--reps N] [--fa2] [--only SUBSTR ...] (cases whose name has any SUBSTR)."""
import argparse
import random

import torch

import hstu_attn
from hstu_attn import _ops

# name: (lengths, H, D, targets per sequence, group, contexts, rab)
CASES = {
    "causal B16 S4K D128": ([4096] * 16, 4, 128, 0, 1, 0, False),
    "causal B16 S16K D128": ([16384] * 16, 4, 128, 0, 1, 0, False),
    "causal B128 S1K D128": ([1024] * 128, 4, 128, 0, 1, 0, False),
    "causal B16 S4K D256": ([4096] * 16, 4, 256, 0, 1, 0, False),
    "causal B16 S8K D64": ([8192] * 16, 4, 64, 0, 1, 0, False),
    "causal B16 S4K D64": ([4096] * 16, 4, 64, 0, 1, 0, False),
    "B16 S4K ctx64 D128": ([4096] * 16, 4, 128, 0, 1, 64, False),
    "dlrmv3 B32 1K+2K g1": ([3072] * 32, 4, 128, 2048, 1, 0, False),
    "jagged B64 200-1500 D128": (None, 4, 128, 0, 1, 0, False),
    "B32 512+128 g1 rab D128": ([640] * 32, 4, 128, 128, 1, 0, True),
}


def setup(name, cfg):
    lens, H, D, nt, g, ctx, rab = CASES[name]
    rng = random.Random(7)
    if lens is None:
        lens = [rng.randint(200, 1500) for _ in range(64)]
    targets = [min(nt, L) for L in lens]
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(1)
    T = sum(lens)
    q, k, v = (torch.randn(T, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
    cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
              num_targets=torch.tensor(targets, device=dev, dtype=torch.int32) if any(targets) else None,
              num_contexts=torch.full((len(lens),), ctx, device=dev, dtype=torch.int32) if ctx else None,
              target_group_size=g, window_size=(-1, 0), alpha=D ** -0.5)
    leaves = [q, k, v]
    if rab:
        r = torch.randn(len(lens), H, max(lens), max(lens), device=dev, dtype=dt, generator=gen).requires_grad_()
        kw.update(rab=r, has_drab=True)
        leaves.append(r)
    with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def setup_fa2(name):
    lens, H, D = CASES[name][:3]
    B, S = len(lens), lens[0]
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, [q, k, v], dout, retain_graph=True)


def time_rounds(fns, reps):
    for f in fns:
        for _ in range(3):
            f()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
          for _ in fns]
    for r in range(reps):
        for f, e in zip(fns, ev):
            e[r][0].record()
            f()
            e[r][1].record()
    torch.cuda.synchronize()
    out = []
    for e in ev:
        ms = sorted(a.elapsed_time(b) for a, b in e)
        out.append(ms[len(ms) // 2])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--only", nargs="*", default=[])
    a = ap.parse_args()
    cols = [f"cfg {c}" for c in a.cfgs] + (["FA2"] if a.fa2 else [])
    print(f"### sm80-class backward, {a.label}: {torch.cuda.get_device_name()}, bf16, ms (CUDA events, median of "
          f"{a.reps}; TFLOP/s FA convention for causal shapes)")
    print("| case | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for name in CASES:
        if a.only and not any(o in name for o in a.only):
            continue
        try:
            fns = [setup(name, c) for c in a.cfgs]
            if a.fa2 and name.startswith("causal"):
                fns.append(setup_fa2(name))
            ms = time_rounds(fns, a.reps)
        except Exception as e:
            print(f"| {name} | {type(e).__name__}: {str(e)[:100]} |", flush=True)
            continue
        lens, H, D = CASES[name][:3]
        fl = 2.5 * 4 * H * D * sum(L * L for L in lens) / 2 if name.startswith("causal") else 0
        cells = [f"{m:.4f}" + (f" ({fl / m / 1e9:.0f})" if fl else "") for m in ms]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        for c, m in zip(cols, ms):
            print(f"time80 {a.label} | {name} | {c} | {m:.4f}", flush=True)
        del fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
