"""Portable (sm80-class) backward time (branch bwdilp: issue 39's causal shapes, contexts, two target cases): the forward runs in
kernel_options(sm90=False) and records it, so torch.autograd.grad runs the sm80-class backward (FA2's warp layout at
D = 128 / 256, the old layouts at D = 64) on the H200; CUDA events, median of --reps after warm-up. Prints a markdown
table (GPU, dtype, ms). Usage: time_ilp.py LABEL [--reps N] [--only SUBSTR]."""
import argparse
import random

import torch

import hstu_attn
from hstu_attn import _ops

# name: (lengths, H, D, targets per sequence, group, contexts, window, rab)
CASES = {
    # contexts first (the gap of query tiles between the context rows and the causal rows), each beside its control
    "B16 S4K ctx64 D128": ([4096] * 16, 4, 128, 0, 1, 64, (-1, 0), False),
    "causal B16 S4K D128": ([4096] * 16, 4, 128, 0, 1, 0, (-1, 0), False),
    "B16 4K ctx64+targets256 g16": ([4096] * 16, 4, 128, 256, 16, 64, (-1, 0), False),
    "B16 S4K ctx64 D256": ([4096] * 16, 4, 256, 0, 1, 64, (-1, 0), False),
    "causal B16 S4K D256": ([4096] * 16, 4, 256, 0, 1, 0, (-1, 0), False),
    # the rest of issue 39's causal shapes (the FA2 comparison's)
    "causal B128 S1K D128": ([1024] * 128, 4, 128, 0, 1, 0, (-1, 0), False),
    "causal B16 S8K D64": ([8192] * 16, 4, 64, 0, 1, 0, (-1, 0), False),
    "causal B16 S16K D128": ([16384] * 16, 4, 128, 0, 1, 0, (-1, 0), False),
    # target controls (no contexts: the same kernels' target paths)
    "dlrmv3 B32 1K+2K g1": ([3072] * 32, 4, 128, 2048, 1, 0, (-1, 0), False),
    "B32 512+128 g1 rab": ([640] * 32, 4, 128, 128, 1, 0, (-1, 0), True),
}


def run(name, reps):
    lens, H, D, nt, g, ctx, window, rab = CASES[name]
    rng = random.Random(7)
    if lens is None:
        lens = [rng.randint(200, 1500) for _ in range(64)]
    targets = [int(L * nt) if isinstance(nt, float) else min(nt, L) for L in lens]
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(1)
    T = sum(lens)
    q, k, v = (torch.randn(T, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
    cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
              num_targets=torch.tensor(targets, device=dev, dtype=torch.int32) if any(targets) else None,
              num_contexts=torch.full((len(lens),), ctx, device=dev, dtype=torch.int32) if ctx else None,
              target_group_size=g, window_size=window, alpha=D ** -0.5)
    leaves = [q, k, v]
    if rab:
        r = torch.randn(len(lens), H, max(lens), max(lens), device=dev, dtype=dt, generator=gen).requires_grad_()
        kw.update(rab=r, has_drab=True)
        leaves.append(r)
    with _ops.kernel_options(sm90=False):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    for _ in range(3):
        torch.autograd.grad(out, leaves, dout, retain_graph=True)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        torch.autograd.grad(out, leaves, dout, retain_graph=True)
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    return ms[len(ms) // 2], ms[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    print(f"### sm80-class backward, {a.label}: {torch.cuda.get_device_name()}, bf16, ms (CUDA events, median / min "
          f"of {a.reps})")
    print("| case | median ms | min ms |\n|---|---|---|")
    for name in CASES:
        if a.only not in name:
            continue
        try:
            med, mn = run(name, a.reps)
        except Exception as e:
            print(f"| {name} | {type(e).__name__}: {str(e)[:80]} | |", flush=True)
            continue
        print(f"| {name} | {med:.4f} | {mn:.4f} |", flush=True)
        print(f"timeilp {a.label} | {name} | {med:.4f}", flush=True)


if __name__ == "__main__":
    main()
