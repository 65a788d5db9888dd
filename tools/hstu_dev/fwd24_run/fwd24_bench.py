"""Issue 39's portable (sm80-class) forward with contexts / targets against plain causal, and B16 S8K D64 against
NVIDIA's Ampere HSTU (the peer, .carry/peer on PYTHONPATH) and FA2 (branch fwd24): bf16 H4 forward ms of
kernel_options(sm90=False, fwd_sm80_cfg=c). Per head dim (--dims) one row of variants timed together: causal with
the default, 64 contexts per sequence with each --ctx-cfgs value, 256 targets (group 1) with the default. Timing as
fwd17_jag.py (CUDA graphs of n calls, variants interleaved per round, median of --reps rounds).

Usage: fwd24_bench.py LABEL [--reps 5] [--dims 64 128 256] [--ctx-cfgs 0 3 5] [--s8k] [--peer] [--fa2]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fwd17_jag import fa2, flops, ours, print_row, timed  # noqa: E402
from fwd21_bench import peer_fwd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dims", nargs="*", type=int, default=[64, 128, 256])
    ap.add_argument("--ctx-cfgs", nargs="*", default=["0"])
    ap.add_argument("--s8k", action="store_true", help="B16 S8K D64: the default, the peer, FA2")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--fa2", action="store_true")
    a = ap.parse_args()
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4, forward ms (TFLOP/s: causal FLOPs), CUDA graphs, "
          f"median of {a.reps} interleaved rounds")
    tag = f"fwd {a.label}"
    if a.s8k:
        lens = [8192] * 16
        run = {"cfg 0": ours(lens, 64, "0")}
        if a.peer:
            run["peer"] = peer_fwd(lens, 64)
        if a.fa2:
            run["FA2"] = fa2(16, 8192, 64)
        cols = list(run)
        print("| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
        ms = timed(run, a.reps, 3)
        print_row(tag, "B16 S8K D64", lens, flops(lens, 64), ms, cols)
        print("| B16 S8K D64 cfg 0 vs peer / FA2 | " + " | ".join(
            f"{ms[o] / ms['cfg 0']:.3f}x" for o in ("peer", "FA2") if o in ms) + " |", flush=True)
        del run
        torch.cuda.empty_cache()
    lens = [4096] * 16
    cols = ["causal"] + [f"ctx64 cfg {c}" for c in a.ctx_cfgs] + ["tgt256"]
    print("\n| B16 S4K | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    for D in a.dims:
        run = {"causal": ours(lens, D, "0")}
        for c in a.ctx_cfgs:
            run[f"ctx64 cfg {c}"] = ours(lens, D, c, ctx=64)
        run["tgt256"] = ours(lens, D, "0", tgt=256)
        ms = timed(run, a.reps, 10)
        print_row(tag, f"D{D}", lens, flops(lens, D), ms, cols)
        print(f"| D{D} / causal | | " + " | ".join(f"{ms[c] / ms['causal']:.3f}x" for c in cols) + " |", flush=True)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
