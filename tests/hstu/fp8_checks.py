"""Helpers shared by the FP8 attention tests (test_fp8.py, test_fp8_bwd.py): the masks, the case maker, the
error-relative rule, the poisoned allocator and CUDA-graph capture."""

import random

import torch

from hstu_attn._fp8 import quantize_fp8

# name -> (window, contexts, targets, target_group_size)
MASKS = {
    "none": ((-1, -1), False, False, 1),
    "causal": ((-1, 0), False, False, 1),
    "local": ((9, 4), False, False, 1),
    "context_target_group": ((-1, 0), True, True, 2),
    "local_context_target": ((7, 0), True, True, 1),
}


def make_case(seed, lens_k, H, D, mask, device="cpu", delta_q=True, dtype=torch.bfloat16, targets_max=3,
              contexts_max=4):
    """bf16 q/k/v (std 1, plus a few larger rows so the scale groups differ), lengths, mask tensors (up to
    targets_max targets and contexts_max contexts per sequence where the mask has them)."""
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    window, ctx, tgt, g = MASKS[mask]
    lens_q = [lk - rng.randint(0, lk // 2) if delta_q else lk for lk in lens_k]
    cu_q = torch.tensor([0] + lens_q, device=device).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k, device=device).cumsum(0).to(torch.int32)

    def rand(n):
        x = torch.randn(n, H, D, generator=gen, device=device)
        return (x * (1 + 3 * torch.rand(n, H, 1, generator=gen, device=device))).to(dtype)

    q, k, v = rand(sum(lens_q)), rand(sum(lens_k)), rand(sum(lens_k))
    nt = [rng.randint(0, min(lk, targets_max)) for lk in lens_k] if tgt else None
    nc = [rng.randint(0, min(lk - (nt[b] if nt else 0), contexts_max)) for b, lk in enumerate(lens_k)] if ctx else None
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                max_seqlen_k=max(lens_k), target_group_size=g, window_size=window,
                num_contexts=None if nc is None else torch.tensor(nc, dtype=torch.int32, device=device),
                num_targets=None if nt is None else torch.tensor(nt, dtype=torch.int32, device=device))


def lengths_args(c):
    return {n: c[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "num_contexts",
                              "num_targets", "target_group_size", "window_size")}


def quantized(c, mode):
    q8, qs = quantize_fp8(c["q"], c["cu_seqlens_q"], mode)
    k8, ks = quantize_fp8(c["k"], c["cu_seqlens_k"], mode)
    v8, vs = quantize_fp8(c["v"], c["cu_seqlens_k"], mode)
    return (q8, k8, v8), (qs, ks, vs)


def max_err(a, b):
    return 0.0 if a.numel() == 0 else (a.double() - b.double()).abs().max().item()


def assert_rel(name, got, gold, low, k):
    scale = gold.abs().max().item() if gold.numel() else 0.0
    atol = 1e-6 + 1e-4 * scale
    err, err_lp = max_err(got, gold), max_err(low, gold)
    assert err <= k * err_lp + atol, f"{name}: err {err:.3e} > {k} * same-dtype err {err_lp:.3e} + {atol:.1e}"


def poison_allocator(nbytes):
    """NaN-filled cached block: the next allocations start out as NaN."""
    if nbytes > 0:
        torch.full((nbytes // 2 + 1024,), float("nan"), dtype=torch.float16, device="cuda")


def capture_and_replay(run, fill=None):
    """(run()'s eager result, the result of run() captured into a CUDA graph and replayed): one warm-up call on a
    side stream first (as torch.cuda.graph requires); fill: written into the captured outputs before the replay."""
    eager = run()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    if fill is not None:
        for t in (captured if isinstance(captured, (tuple, list)) else (captured,)):
            t.fill_(fill)
    graph.replay()
    torch.cuda.synchronize()
    return eager, captured
