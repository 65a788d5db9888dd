"""The portable (sm80-class) forward's split without its list kernel on small batches (issue 39, branch zipf35): bf16
H4 causal, 3 contexts, forward ms of kernel_options(sm90=False) on benchmarks/hstu_attention.py's jagged row
(Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and its dense twin B2 S1820 (--seed1: also the seed-1 draw, 9,292
tokens, and B2 S4646), per head dim. Variants: `default` (the wheel's: at most 32 sequences under the rule's chunks,
each split block derives its own item, no list kernel), `main` (kernel_options(fwd_sm80_split_main=True): main's
path, the list kernel then the split kernel as programmatic dependent launches; with branch zipf35's wheel only:
on main the option still selects main29's split). Prints, per head dim, Zipf / dense
TFLOP/s per variant; --edge: also dense B4 S4K, B2 S4K, B8 S1K; `gaps`: each variant's timeline per call in a CUDA
graph of 10 calls (the validation V, the list kernel L where it runs, the split kernel S, the gaps; torch.profiler).
Timing as fwd17_jag.py (CUDA graphs of 10 calls, variants interleaved per round, median of --reps rounds).

`chunks`: main's path under the rule against exact chunks of n KV tiles (--chunks) in the rule's tile.

Usage: zipf35_bench.py LABEL MODE... (ratio gaps chunks) [--dims 64 128 256] [--reps 7] [--seed1] [--edge]
       [--chunks 3 4 6 8 12 16]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside the scripts below)
for sub in ("fwd17_run", "fwd29_run", "zipf32_run"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))
from fwd17_jag import flops, graphed, ours, zipf_lengths  # noqa: E402
from fwd29_bench import table  # noqa: E402
from zipf32_bench import with_options  # noqa: E402


def variants(lens, D):
    return {"default": ours(lens, D, "0", 3),
            "main": with_options(ours(lens, D, "0", 3), fwd_sm80_split_main=True)}


def chunk_variants(lens, D, chunks):
    """main's path (the list kernel) under the rule and with exact chunks of n KV tiles, in the rule's tile (64 x 64
    at D = 64 / 128: fwd_sm80_bm64 2 / 1; exact chunks otherwise keep the 128-row tiles)"""
    bm64 = {64: 2, 128: 1}.get(D, 0)
    run = {"rule": with_options(ours(lens, D, "0", 3), fwd_sm80_split_main=True, fwd_sm80_bm64=bm64)}
    for n in chunks:
        run[f"n{n}"] = with_options(ours(lens, D, "0", 3), fwd_sm80_split_main=True, fwd_sm80_bm64=bm64,
                                    fwd_split_tiles=n)
    return run


def gaps(rows, n=10):
    """per (case, variant) from torch.profiler's kernel records of a CUDA graph of n calls: the validation (V), the
    list kernel (L, main only) and the split kernel (S): durations and gaps (us, mean over the calls; a negative gap:
    a programmatic dependent launch's blocks started under the kernel before it)"""
    print("\n| case | variant | V | V->L | L | ->S | S | call (V start to S end) | S end to next V |"
          "\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, _, run in rows:
        for var, fn in run.items():
            g = graphed(fn, n)
            for _ in range(2):
                g.replay() if g is not None else fn()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                if g is not None:
                    g.replay()
                else:
                    for _ in range(n):
                        fn()
                torch.cuda.synchronize()
            ks = sorted(((e.time_range.start, e.time_range.end, e.name) for e in p.events()
                         if e.device_type == torch.autograd.DeviceType.CUDA and "_kernel" in e.name),
                        key=lambda x: x[0])
            calls, cur = [], {}
            for t0, t1, k in ks:
                tag = "V" if "validate" in k else "L" if "list" in k else "S" if "hstu_fwd_" in k else None
                if tag == "V":
                    cur = {}
                    calls.append(cur)
                if tag is not None:
                    cur[tag] = (t0, t1)
            calls = [c for c in calls if "V" in c and "S" in c]
            if len(calls) < 2:
                print(f"| {name} | {var} | (kernels: {sorted({k for *_, k in ks})[:3]}) |")
                continue
            m = lambda f: sum(f(c) for c in calls) / len(calls)  # noqa: E731
            has_l = all("L" in c for c in calls)
            prev = (lambda c: c["L"][1]) if has_l else (lambda c: c["V"][1])
            nxt = sum(b["V"][0] - a["S"][1] for a, b in zip(calls, calls[1:])) / (len(calls) - 1)
            ltxt = (f"{m(lambda c: c['L'][0] - c['V'][1]):.2f} | {m(lambda c: c['L'][1] - c['L'][0]):.2f}"
                    if has_l else "- | -")
            print(f"| {name} | {var} | {m(lambda c: c['V'][1] - c['V'][0]):.2f} | {ltxt} | "
                  f"{m(lambda c: c['S'][0] - prev(c)):.2f} | {m(lambda c: c['S'][1] - c['S'][0]):.2f} | "
                  f"{m(lambda c: c['S'][1] - c['V'][0]):.2f} | {nxt:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("modes", nargs="+", choices=["ratio", "gaps", "chunks"])
    ap.add_argument("--chunks", nargs="+", type=int, default=[3, 4, 6, 8, 12, 16])
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seed1", action="store_true")
    ap.add_argument("--edge", action="store_const", const=[(4, 4096), (2, 4096), (8, 1024)], default=[])
    a = ap.parse_args()
    draws = [zipf_lengths(32, 4096)] + ([zipf_lengths(32, 4096, seed=1)] if a.seed1 else [])
    print(f"## zipf35 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal ctx3, forward ms (TFLOP/s), "
          f"CUDA graphs of 10 calls, median of {a.reps} interleaved rounds", flush=True)
    for mode in a.modes:
        for D in a.dims:
            rows = []
            vf = (lambda lens, D: chunk_variants(lens, D, a.chunks)) if mode == "chunks" else variants
            for s, jag in enumerate(draws):
                dense = [sum(jag) // 2] * 2
                rows += [(f"zipf s{s} D{D}", jag, D, vf(jag, D)),
                         (f"dense B2 S{dense[0]} D{D}", dense, D, vf(dense, D))]
            pairs = len(rows)
            if mode == "gaps":
                gaps(rows[:2])
                continue
            rows += [(f"B{b} S{S} D{D}", [S] * b, D, vf([S] * b, D)) for b, S in a.edge]
            res = table(a.label, f"{mode} D = {D}", rows, a.reps)
            for i in range(0, pairs, 2):
                (zn, zl, _, _), (dn, dl, _, _) = rows[i], rows[i + 1]
                fz, fd = flops(zl, D), flops(dl, D)
                for c in res[zn]:
                    r = 100 * fz / res[zn][c] / (fd / res[dn][c])
                    print(f"(D{D} {zn}: Zipf / dense TFLOP/s, both {c}: {r:.1f} %)")
            for name in res:
                if "default" in res[name] and "main" in res[name]:
                    print(f"(D{D} {name}: default / main {res[name]['default'] / res[name]['main']:.3f})")
            print(flush=True)


if __name__ == "__main__":
    main()
