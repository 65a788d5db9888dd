"""The portable (sm80-class) forward's Zipf batch against its dense same-token twin (issue 39, branch fwd29): bf16 H4
causal, 3 contexts, forward ms of kernel_options(sm90=False, fwd_sm80_cfg=0[, fwd_split_tiles=n]) on
benchmarks/hstu_attention.py's jagged row (Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and B2 S1820, per head dim.
Modes: `sweep`: the default against exact chunks of n KV tiles (the split's item size; the list's rule picks one per
batch: 12 / 15 at D = 256, 7 / 9 at D = 128, 5 / 5 at D = 64, Zipf / dense); `parts`: the Zipf batch's sequences of
at least one query tile of rows and the shorter ones, each alone, against the whole (what the short sequences cost);
`list`: the default against kernel_options(fwd_sm80_split_main=True) (the split as main has it; run 1's wheel named
it fwd_sm80_list_cache=False, the list kernel alone); `prof`: each kernel of the pair per variant of `list`
(torch.profiler, us per call, mean of 10); `default`: `list`'s cases, the default alone (main's wheel); `edge`:
`list`'s variants on dense batches near the split's bound (B4 S4K ctx3, B2 S4K, B8 S1K). --seed1: also the Zipf
draw of seed 1 (9,292 tokens) and its dense twin. Timing as fwd17_jag.py: CUDA graphs of 10 calls, variants
interleaved per round, median of --reps rounds. Prints markdown tables and `fwd29 LABEL | case | variant | ms` lines.

Usage: fwd29_bench.py LABEL MODE... (sweep parts list prof default edge) [--dims 256 64] [--reps 5] [--seed1]"""
import argparse
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside fwd17_jag.py, fwd21_bench.py)
for sub in ("fwd17_run", "fwd21_run"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))
from fwd17_jag import flops, ours, print_row, timed, zipf_lengths  # noqa: E402

# exact chunks per head dim (Zipf, dense): around the rule's 12 / 15, 7 / 9, 4 / 5
CHUNKS = {256: ([10, 12, 14, 16], [12, 15, 16, 18]), 128: ([6, 7, 8, 10], [8, 9, 10, 12]), 64: ([3, 4, 5, 6],
                                                                                                 [4, 5, 6])}
BM = {256: 64, 128: 128, 64: 128}


def table(label, title, rows, reps):
    """rows: [(name, lens, D, {variant: fn})]; one markdown table, variants as columns"""
    cols = []
    for *_, run in rows:
        cols += [c for c in run if c not in cols]
    print(f"\n### {title}\n| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    res = {}
    for name, lens, D, run in rows:
        ms = timed(run, reps, 10)
        print_row(f"fwd29 {label}", name, lens, flops(lens, D), ms, cols)
        res[name] = ms
        del run
        torch.cuda.empty_cache()
    return res


def variants(lens, D, mode, ctx=3):
    """{variant: fn} of a mode on one batch (ctx contexts per sequence)"""
    if mode == "sweep":
        cz, cd = CHUNKS[D]
        return {"default": ours(lens, D, "0", 3), **{f"n{c}": ours(lens, D, f"0:{c}", 3)
                                                     for c in (cz if len(lens) > 2 else cd)}}
    run = {"default": ours(lens, D, "0", ctx)}
    if mode in ("list", "prof", "edge"):
        from hstu_attn import _ops
        fn = ours(lens, D, "0", ctx)

        def as_main():  # (ours() sets its kernel_options inside: given fwd_sm80_split_main=True here)
            real = _ops.kernel_options
            _ops.kernel_options = functools.partial(real, fwd_sm80_split_main=True)
            try:
                return fn()
            finally:
                _ops.kernel_options = real
        run["split main"] = as_main
    return run


def prof(rows, n=10):
    """the kernels of each (case, variant): us per call, mean of n calls (torch.profiler)"""
    print("\n| case | variant | kernel | us per call |\n|---|---|---|---:|")
    for name, _, _, run in rows:
        for var, fn in run.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                for _ in range(n):
                    fn()
                torch.cuda.synchronize()
            tot = {}
            for e in p.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    k = e.name.split("(")[0].split("<")[0][-32:]
                    tot[k] = tot.get(k, 0.0) + e.device_time / n
            for k, us in sorted(tot.items(), key=lambda x: -x[1]):
                print(f"| {name} | {var} | {k} | {us:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("modes", nargs="+", choices=["sweep", "parts", "list", "prof", "default", "edge"])
    ap.add_argument("--dims", nargs="+", type=int, default=[256, 64])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed1", action="store_true")
    a = ap.parse_args()
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    dense = [tok // 2] * 2
    print(f"## fwd29 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal ctx3, forward ms (TFLOP/s), "
          f"CUDA graphs of 10 calls, median of {a.reps} interleaved rounds", flush=True)
    for mode in a.modes:
        for D in a.dims:
            z, d = f"zipf D{D}", f"dense B2 S{tok // 2} D{D}"
            if mode == "edge":
                rows = [(f"B{b} S{S} D{D}{' ctx3' if c else ''}", [S] * b, D, variants([S] * b, D, "edge", c))
                        for b, S, c in ((4, 4096, 3), (2, 4096, 0), (8, 1024, 0))]
            elif mode == "parts":
                long_ = [L for L in jag if L >= BM[D]]
                short = [L for L in jag if L < BM[D]]
                rows = [(f"{z} all", jag, D, variants(jag, D, mode)),
                        (f"{z} L >= {BM[D]} ({len(long_)})", long_, D, variants(long_, D, mode)),
                        (f"{z} L < {BM[D]} ({len(short)})", short, D, variants(short, D, mode)),
                        (d, dense, D, variants(dense, D, mode))]
            else:
                rows = [(z, jag, D, variants(jag, D, mode)), (d, dense, D, variants(dense, D, mode))]
                if a.seed1 and mode != "sweep":
                    j1 = zipf_lengths(32, 4096, seed=1)
                    d1 = [sum(j1) // 2] * 2
                    rows += [(f"zipf seed 1 D{D}", j1, D, variants(j1, D, mode)),
                             (f"dense B2 S{sum(j1) // 2} D{D}", d1, D, variants(d1, D, mode))]
            if mode == "prof":
                prof(rows)
                continue
            res = table(a.label, f"{mode} D = {D}", rows, a.reps)
            zk = z + (" all" if mode == "parts" else "")
            if zk in res and d in res:
                fz, fd = flops(jag, D), flops(dense, D)
                for c in res[zk]:
                    if c in res[d]:
                        print(f"(D{D} {c}: Zipf / dense TFLOP/s {100 * fz / res[zk][c] / (fd / res[d][c]):.1f} %)")
                bz, bd = min(res[zk].values()), min(res[d].values())
                print(f"(D{D} the best of each: Zipf / dense TFLOP/s {100 * fz / bz / (fd / bd):.1f} %)", flush=True)


if __name__ == "__main__":
    main()
