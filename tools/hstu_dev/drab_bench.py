"""The portable backward's drab cases (issue 39; branches drab37, drab38: drab37_run/drab37_bench.py and
drab38_run/drab38_bench.py call main() with their tag and default cases): the sm80-class backward
(kernel_options(sm90=False)) of bf16 H4 B16 S4K causal, ms of the raw op hstu_attn::bwd_with_options, every case of
one head dim timed together (CUDA graphs of 4 calls, interleaved per round, median of --reps rounds: fwd17_jag.py's
timing). Each case also prints one line `TAG LABEL | bwd DD | case | ms`.

A case: NAME[~cfg]
  causal | rab (rab of shape (B, H, S, S), q's dtype) | rab1 ((B, 1, S, S)) | rabd / rab1d (with has_drab)
  ~cfg: kernel_options(fwd_sm80_cfg=cfg) (what each value meant is in the entry scripts' docstrings)

Usage: ENTRY.py LABEL [--reps 5] [--dims 128 64 256] [--cases ...] [--batch 16] [--seqlen 4096]
       ENTRY.py LABEL --ncu [--dims ...] [--cases ...]   (one call per case, no graphs)"""
import argparse
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (carried beside fwd17_jag.py)
sys.path.insert(0, os.path.join(HERE, "fwd17_run"))
from hstu_attn import _ops  # noqa: E402
from fwd17_jag import timed  # noqa: E402

H = 4
BWD = torch.ops.hstu_attn.bwd_with_options


def call_of(B, S, D, tensors, case):
    m = re.fullmatch(r"([a-z0-9]+)(?:~(\d+))?", case)
    name, cfg = m.group(1), int(m.group(2) or 0)
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg):
        opts = _ops._current_options()
    q, k, v, do, cu, rabs = tensors
    rab, drab = None, False
    if name.startswith("rab"):
        heads = 1 if name.startswith("rab1") else H
        if heads not in rabs:
            rabs[heads] = torch.randn(B, heads, S, S, device="cuda", dtype=torch.bfloat16)
        rab, drab = rabs[heads], name.endswith("d")
    args = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5, rab, float(S), None, None)
    return lambda: BWD(do, q, k, v, *args, drab, False, opts)


def main(tag, default_cases):
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dims", nargs="*", type=int, default=[128, 64, 256])
    ap.add_argument("--cases", nargs="*", default=default_cases)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    B, S = a.batch, a.seqlen
    if not a.ncu:
        print(f"\n## {a.label}: {torch.cuda.get_device_name()}, bf16 B{B} S{S} H{H} causal bwd, ms (ratio to causal), "
              f"CUDA graphs, median of {a.reps} interleaved rounds; sm90=False")
    for D in a.dims:
        g = torch.Generator(device="cuda").manual_seed(11)
        q, k, v, do = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
        cu = torch.arange(0, B * S + 1, S, device="cuda", dtype=torch.int32)
        tensors = (q, k, v, do, cu, {})
        run = {c: call_of(B, S, D, tensors, c) for c in a.cases}
        if a.ncu:
            for c in a.cases:
                torch.cuda.nvtx.range_push(f"bwd D{D} {c}")
                run[c]()
                torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            continue
        for c in a.cases:  # warm-up, and the rab tensors allocated before the graphs
            run[c]()
        torch.cuda.synchronize()
        ms = timed(run, a.reps, 4)
        base = ms.get("causal")
        print(f"| bwd D{D} | " + " | ".join(f"{c} {ms[c]:.4f}" + (f" ({ms[c] / base:.3f}x)" if base else "")
                                          for c in a.cases) + " |", flush=True)
        for c in a.cases:
            print(f"{tag} {a.label} | bwd D{D} | {c} | {ms[c]:.5f}", flush=True)
        del run, tensors, q, k, v, do
        torch.cuda.empty_cache()
