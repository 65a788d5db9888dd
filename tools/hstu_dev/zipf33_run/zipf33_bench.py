"""The portable (sm80-class) forward's split on the Zipf batch and its dense twin with programmatic dependent launches
(issue 39, branch zipf33): bf16 H4 causal, 3 contexts, forward ms of kernel_options(sm90=False[, main's split path])
on benchmarks/hstu_attention.py's jagged row (Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and B2 S1820 (--seed1:
also the seed-1 draw, 9,292 tokens, and B2 S4646), per head dim. Variants: `default` (the wheel's: on sm_90+ the
split's list and split kernels as programmatic dependent launches), `plain` (main's path: run 1's wheel
fwd_sm80_pdl=False, plain launches; later fwd_sm80_split_plain=True, also main's fences and prologue). Prints, per
head dim, Zipf / dense TFLOP/s per variant; --edge: also dense B4 S4K, B2 S4K, B8 S1K (ctx3; the larger batches,
near the split's bound); `prof`: each kernel's us per call (torch.profiler) of both variants on the Zipf pair;
`gaps`: their timeline per call in a CUDA graph of 10 calls (the validation, list and split kernels' durations and
the gaps between them, torch.profiler). Timing as fwd17_jag.py (CUDA graphs of 10 calls, variants interleaved per
round, median of --reps rounds).

Usage: zipf33_bench.py LABEL MODE... (ratio prof gaps) [--dims 64 128 256] [--reps 7] [--seed1] [--edge] [--base]
       (--base: main's wheel, the default only)"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside the scripts below)
for sub in ("fwd17_run", "fwd29_run", "zipf32_run"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))
from fwd17_jag import flops, graphed, ours, zipf_lengths  # noqa: E402
from fwd29_bench import prof, table  # noqa: E402
from zipf32_bench import with_options  # noqa: E402


def plain_option():
    """the wheel's switch to main's split path: run 1's fwd_sm80_pdl=False (plain launches), later
    fwd_sm80_split_plain=True (plain launches, main's fences and prologue)"""
    import inspect

    from hstu_attn import _ops
    names = inspect.signature(_ops.kernel_options).parameters
    return {"fwd_sm80_split_plain": True} if "fwd_sm80_split_plain" in names else {"fwd_sm80_pdl": False}


def variants(lens, D, a):
    run = {"default": ours(lens, D, "0", 3)}
    if not a.base:
        run["plain"] = with_options(ours(lens, D, "0", 3), **plain_option())
    return run


def gaps(rows, n=10):
    """the timeline of each (case, variant) from torch.profiler's kernel records of a CUDA graph of n calls (eager
    calls where capture fails): per call the validation (V), the split's list (L) and split (S) kernels' durations
    and the gaps between them (us, mean over the calls; a negative gap: the split kernel's blocks started under the
    list kernel, as programmatic dependent launches do), and the next call's start"""
    print("\n| case | variant | V | V->L | L | L->S | S | call (V start to S end) | S end to next V |"
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
            calls = [c for c in calls if len(c) == 3]
            if len(calls) < 2:
                print(f"| {name} | {var} | (kernels: {sorted({k for *_, k in ks})[:3]}) |")
                continue
            m = lambda f: sum(f(c) for c in calls) / len(calls)  # noqa: E731
            nxt = sum(b["V"][0] - a["S"][1] for a, b in zip(calls, calls[1:])) / (len(calls) - 1)
            print(f"| {name} | {var} | {m(lambda c: c['V'][1] - c['V'][0]):.2f} | "
                  f"{m(lambda c: c['L'][0] - c['V'][1]):.2f} | {m(lambda c: c['L'][1] - c['L'][0]):.2f} | "
                  f"{m(lambda c: c['S'][0] - c['L'][1]):.2f} | {m(lambda c: c['S'][1] - c['S'][0]):.2f} | "
                  f"{m(lambda c: c['S'][1] - c['V'][0]):.2f} | {nxt:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("modes", nargs="+", choices=["ratio", "prof", "gaps"])
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seed1", action="store_true")
    ap.add_argument("--base", action="store_true")
    ap.add_argument("--edge", action="store_const", const=[(4, 4096), (2, 4096), (8, 1024)], default=[])
    a = ap.parse_args()
    draws = [zipf_lengths(32, 4096)] + ([zipf_lengths(32, 4096, seed=1)] if a.seed1 else [])
    print(f"## zipf33 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal ctx3, forward ms (TFLOP/s), "
          f"CUDA graphs of 10 calls, median of {a.reps} interleaved rounds", flush=True)
    for mode in a.modes:
        for D in a.dims:
            rows = []
            for s, jag in enumerate(draws):
                dense = [sum(jag) // 2] * 2
                rows += [(f"zipf s{s} D{D}", jag, D, variants(jag, D, a)),
                         (f"dense B2 S{dense[0]} D{D}", dense, D, variants(dense, D, a))]
            pairs = len(rows)
            if mode in ("prof", "gaps"):
                (prof if mode == "prof" else gaps)(rows[:2])
                continue
            rows += [(f"B{b} S{S} D{D}", [S] * b, D, variants([S] * b, D, a)) for b, S in a.edge]
            res = table(a.label, f"{mode} D = {D}", rows, a.reps)
            for i in range(0, pairs, 2):
                (zn, zl, _, _), (dn, dl, _, _) = rows[i], rows[i + 1]
                fz, fd = flops(zl, D), flops(dl, D)
                for c in res[zn]:
                    r = 100 * fz / res[zn][c] / (fd / res[dn][c])
                    print(f"(D{D} {zn}: Zipf / dense TFLOP/s, both {c}: {r:.1f} %)")
            print(flush=True)


if __name__ == "__main__":
    main()
