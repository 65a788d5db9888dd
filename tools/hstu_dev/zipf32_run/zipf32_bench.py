"""The portable (sm80-class) forward's Zipf batch against its dense same-token twin with 64-row query tiles (issue 39,
branch zipf32): bf16 H4 causal, 3 contexts, forward ms of kernel_options(sm90=False[, fwd_sm80_bm64=n][,
fwd_split_tiles=n]) on benchmarks/hstu_attention.py's jagged row (Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and B2
S1820 (--seed1: also the seed-1 draw, 9,292 tokens, and B2 S4646), per head dim. Variants: `default` (the wheel's:
run 1's main's path, run 2's the rule), `b128` (--b128: fwd_sm80_bm64=3, the 128-row tiles: main's path), `w4` /
`w2` (fwd_sm80_bm64=1 / 2: the split in 64 x 64 tiles of 4 warps x 16 rows / 2 warps x 32 rows, D = 64 / 128;
elsewhere the default), `w4 nK` (and exact chunks of K KV tiles, --chunks). Prints, per head dim, Zipf / dense
TFLOP/s for default / default, wN / default (the option on the Zipf batch alone) and wN / wN; --edge: also dense
B4 S4K, B2 S4K, B8 S1K (ctx3: near the split's bound). `prof`: each
kernel's us per call (torch.profiler) of every variant on the Zipf pair. Timing as fwd17_jag.py (CUDA graphs of 10
calls, variants interleaved per round, median of --reps rounds).

Usage: zipf32_bench.py LABEL MODE... (ratio prof) [--dims 64 128 256] [--reps 7] [--bm64 1 2] [--chunks 4 6]
       [--seed1] [--b128] [--edge] [--base] (main's wheel: the default only)"""
import argparse
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside fwd17_jag.py, fwd29_bench.py)
for sub in ("fwd17_run", "fwd29_run"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))
from fwd17_jag import flops, ours, zipf_lengths  # noqa: E402
from fwd29_bench import prof, table  # noqa: E402


def with_options(fn, **extra):
    """fn (an ours() call, which sets its kernel_options inside) with `extra` kernel_options added"""
    from hstu_attn import _ops

    def call():
        real = _ops.kernel_options
        _ops.kernel_options = functools.partial(real, **extra)
        try:
            return fn()
        finally:
            _ops.kernel_options = real
    return call


def variants(lens, D, a):
    run = {"default": ours(lens, D, "0", 3)}
    if a.b128 and not a.base and D != 256:  # (fwd_sm80_bm64=3: the 128-row tiles, main's path)
        run["b128"] = with_options(ours(lens, D, "0", 3), fwd_sm80_bm64=3)
    if not a.base and D != 256:
        for n in a.bm64:
            run[f"w{6 - 2 * n}"] = with_options(ours(lens, D, "0", 3), fwd_sm80_bm64=n)
            for c in a.chunks:
                run[f"w{6 - 2 * n} n{c}"] = with_options(ours(lens, D, f"0:{c}", 3), fwd_sm80_bm64=n)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("modes", nargs="+", choices=["ratio", "prof"])
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--bm64", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--chunks", nargs="*", type=int, default=[])
    ap.add_argument("--seed1", action="store_true")
    ap.add_argument("--base", action="store_true")
    ap.add_argument("--b128", action="store_true")
    ap.add_argument("--edge", action="store_const", const=[(4, 4096), (2, 4096), (8, 1024)], default=[])
    a = ap.parse_args()
    draws = [zipf_lengths(32, 4096)] + ([zipf_lengths(32, 4096, seed=1)] if a.seed1 else [])
    print(f"## zipf32 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal ctx3, forward ms (TFLOP/s), "
          f"CUDA graphs of 10 calls, median of {a.reps} interleaved rounds", flush=True)
    for mode in a.modes:
        for D in a.dims:
            rows = []
            for s, jag in enumerate(draws):
                dense = [sum(jag) // 2] * 2
                rows += [(f"zipf s{s} D{D}", jag, D, variants(jag, D, a)),
                         (f"dense B2 S{dense[0]} D{D}", dense, D, variants(dense, D, a))]
            pairs = len(rows)
            rows += [(f"B{b} S{S} D{D}", [S] * b, D, variants([S] * b, D, a)) for b, S in a.edge]
            if mode == "prof":
                prof(rows[:2])
                continue
            res = table(a.label, f"{mode} D = {D}", rows, a.reps)
            for i in range(0, pairs, 2):
                (zn, zl, _, _), (dn, dl, _, _) = rows[i], rows[i + 1]
                fz, fd = flops(zl, D), flops(dl, D)
                for cz in res[zn]:
                    for cd in sorted({"default", cz} & set(res[dn])):
                        r = 100 * fz / res[zn][cz] / (fd / res[dn][cd])
                        print(f"(D{D} {zn}: Zipf {cz} / dense {cd} TFLOP/s {r:.1f} %)")
            print(flush=True)


if __name__ == "__main__":
    main()
