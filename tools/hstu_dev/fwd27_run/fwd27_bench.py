"""The portable (sm80-class) forward's SiLU forms at D = 64 (issue 39, branch fwd27): bf16 H4 causal forward ms of
kernel_options(sm90=False, fwd_sm80_silu=s) (0 the tanh form, the default; 1 half of each thread's P words in half2
arithmetic; 2 all of them; 3 timing only, WRONG outputs: no MUFU op) on B16 S8K / B16 S4K / B128 S1K D64, with
FA2 (torch's flash SDPA) in the same rounds. Timing as fwd17_jag.py (tools/hstu_dev/fwd17_run): CUDA graphs of n
calls, variants interleaved per round, median of --reps rounds. Prints markdown tables and `fwd LABEL | case |
variant | ms` lines. A wheel without fwd_sm80_silu (main's): --silus 0.

Usage: fwd27_bench.py LABEL [--reps 5] [--silus 0 1 2 3] [--cases s8k s4k b128] [--fa2]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fwd17_run"))
from fwd17_jag import H, fa2, flops, print_row, timed  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _ops  # noqa: E402


def ours(lens, D, silu, seed=2):
    """the default forward (sm90=False) with SiLU form silu (0: no fwd_sm80_silu switch at all)"""
    opts = dict(sm90=False)
    if silu:
        opts["fwd_sm80_silu"] = silu
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    S = max(lens)

    def call():
        with torch.no_grad(), _ops.kernel_options(**opts):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--silus", nargs="*", type=int, default=[0, 1, 2, 3])
    ap.add_argument("--cases", nargs="*", default=["s8k", "s4k", "b128"])
    ap.add_argument("--fa2", action="store_true")
    a = ap.parse_args()
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal D64, forward ms (TFLOP/s, causal FLOPs), "
          f"CUDA graphs, median of {a.reps} interleaved rounds; silu s = kernel_options(fwd_sm80_silu=s)")
    shapes = {"s8k": ("B16 S8K D64", 16, 8192), "s4k": ("B16 S4K D64", 16, 4096), "b128": ("B128 S1K D64", 128, 1024)}
    cols = [f"silu {s}" for s in a.silus] + (["FA2"] if a.fa2 else [])
    print("| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    for key in a.cases:
        name, B, S = shapes[key]
        lens = [S] * B
        run = {f"silu {s}": ours(lens, 64, s) for s in a.silus}
        if a.fa2:
            run["FA2"] = fa2(B, S, 64)
        if "silu 1" in run or "silu 2" in run:  # the forms' outputs against the tanh form's (max |diff| / max)
            o = run["silu 0"]().float() if "silu 0" in run else None
            for s in (1, 2):
                if o is not None and f"silu {s}" in run:
                    d = (run[f"silu {s}"]().float() - o).abs().max().item() / o.abs().max().item()
                    print(f"(silu {s} vs silu 0, {name}: max |diff| / max |out| = {d:.2e})")
        ms = timed(run, a.reps, 3 if sum(lens) > 20000 else 10)
        print_row(f"fwd {a.label}", name, lens, flops(lens, 64), ms, cols)
        base = ms.get("silu 0")
        if base:
            print(f"| {name} silu 0 / x | | " + " | ".join(f"{base / ms[c]:.3f}x" for c in cols) + " |", flush=True)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
