"""Issue 39's calls with contexts against plain causal in the portable (sm80-class) forward (branch ctx26): bf16 H4
forward ms of kernel_options(sm90=False, fwd_sm80_cfg=c) at B16 S4K (and a small batch) for causal and for c
contexts per sequence (0: a num_contexts tensor of zeros, which takes the context kernel's path), the variants timed
together (CUDA graphs of n calls, interleaved per round, median of --reps rounds; fwd17_jag.py's timing).

Usage: ctx26_bench.py LABEL [--reps 5] [--dims 64 128] [--cases causal ctx64 ctx64:5 ...] [--batches 16 2]
       ctx26_bench.py LABEL --ncu [--dims ...] [--cases ...]   (one call per case, no graphs: for ncu)
A case: causal | ctxN[:cfg] (N contexts per sequence, cfg the fwd_sm80_cfg, default 0)."""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hstu_attn  # noqa: E402
from hstu_attn import _ops  # noqa: E402
from fwd17_jag import timed  # noqa: E402

H = 4


def call_of(lens, D, case, seed=2):
    """the forward of one case: causal, or ctxN[:cfg]"""
    name, _, cfg = case.partition(":")
    opts = dict(sm90=False, fwd_sm80_cfg=int(cfg or 0))
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    nc = None
    if name.startswith("ctx"):
        n = int(name[3:])
        nc = torch.tensor([min(n, L) for L in lens], device="cuda", dtype=torch.int32)
    S = max(lens)

    def call():
        with torch.no_grad(), _ops.kernel_options(**opts):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5,
                                                   num_contexts=nc)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dims", nargs="*", type=int, default=[64, 128])
    ap.add_argument("--cases", nargs="*", default=["causal", "ctx64"])
    ap.add_argument("--batches", nargs="*", type=int, default=[16])
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    if a.ncu:
        lens = [a.seqlen] * a.batches[0]
        for D in a.dims:
            for c in a.cases:
                call_of(lens, D, c)()
        torch.cuda.synchronize()
        return
    print(f"\n## {a.label}: {torch.cuda.get_device_name()}, bf16 H4, forward ms (ratio to causal), CUDA graphs, "
          f"median of {a.reps} interleaved rounds")
    print(f"| {a.label} | " + " | ".join(a.cases) + " |\n|---|" + "---:|" * len(a.cases))
    for B in a.batches:
        lens = [a.seqlen] * B
        tag = f"B{B} S{a.seqlen}"
        for D in a.dims:
            run = {c: call_of(lens, D, c) for c in a.cases}
            ms = timed(run, a.reps, 10 if B >= 8 else 20)
            base = ms.get("causal")
            print(f"| {tag} D{D} | " + " | ".join(
                f"{ms[c]:.4f}" + (f" ({ms[c] / base:.3f}x)" if base else "") for c in a.cases) + " |", flush=True)
            for c in a.cases:
                print(f"ctx26 {a.label} | {tag} D{D} | {c} | {ms[c]:.5f}", flush=True)
            del run
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
