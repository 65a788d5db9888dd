"""The portable (sm80-class) forward's jagged Zipf batch against dense batches of the same tokens (issue 39, branch
fwd19): bf16 H4 forward ms of kernel_options(sm90=False, ...) per variant on benchmarks/hstu_attention.py's jagged
row (Zipf(1.2) B32 max 4K, 3,640 tokens, 3 contexts, causal; --seeds: other Zipf draws of 32 sequences) and the dense
B2 S1820 batch, at D = 256 / 128 / 64. Variants: "c[:n][:np]": fwd_sm80_cfg=c, fwd_split_tiles=n (chunks of at most
n KV tiles; "" the rule), np: fwd_sm80_pack=False (each short sequence its own query tile); "ceil": chunks of the
mean work per block slot rounded up (the rounding before fwd19: 12 / 15, 7 / 9, 4 / 5 KV tiles at D = 256 / 128 /
64, Zipf / dense). Timing as fwd17_jag.py (tools/hstu_dev/fwd17_run): CUDA graphs of 10 calls, variants interleaved
per round, median of --reps rounds. Prints markdown tables and `fwd19 LABEL | case | variant | ms` lines. "c:w:": fwd_split_tiles="wave" (the sm80 rule without its bound of two waves).

Usage: fwd19_jag.py LABEL [--cfgs 0 0::np ceil] [--reps 7] [--seeds 1 2] [--masks]"""
import argparse
import os
import sys

import torch

import hstu_attn
from hstu_attn import _ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd17_run"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fwd17_jag import H, flops, print_row, timed, zipf_lengths  # noqa: E402

CEIL = {("zipf", 256): 12, ("dense", 256): 15, ("zipf", 128): 7, ("dense", 128): 9, ("zipf", 64): 4, ("dense", 64): 5}


def ours(lens, D, var, ctx=0, seed=2):
    cfg, _, rest = var.partition(":")
    split, _, pack = rest.partition(":")
    opts = dict(sm90=False, fwd_sm80_cfg=int(cfg))
    if split:
        opts["fwd_split_tiles"] = "wave" if split == "w" else int(split)
    if pack == "np":
        opts["fwd_sm80_pack"] = False
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    nc = torch.tensor([min(ctx, L) for L in lens], device="cuda", dtype=torch.int32) if ctx else None
    S = max(lens)

    def call():
        with torch.no_grad(), _ops.kernel_options(**opts):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5,
                                                   num_contexts=nc)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--cfgs", nargs="+", default=["0"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seeds", nargs="*", type=int, default=[])
    ap.add_argument("--masks", action="store_true", help="B16 S4K ctx64 against causal at D = 64 / 128")
    ap.add_argument("--only-masks", action="store_true", help="--masks' cases alone")
    ap.add_argument("--no-base", action="store_true", help="without the seed-0 Zipf batch and its dense twin")
    ap.add_argument("--edge", action="store_true", help="dense batches of 2-8 waves at D = 256: B4 S4K ctx3, B2 S4K, "
                    "B16 S4K (variants: --zipf-cfgs)")
    ap.add_argument("--dims", nargs="+", type=int, default=[256, 128, 64])
    ap.add_argument("--zipf-cfgs", nargs="+", default=None, help="the variants of the Zipf / dense cases (default: "
                    "--cfgs)")
    ap.add_argument("--prof", action="store_true", help="each kernel's device time (torch.profiler, mean of 5 "
                    "calls) of the first variant on the seed-0 cases")
    a = ap.parse_args()
    print(f"## fwd19 {a.label}: {torch.cuda.get_device_name()}, bf16 H4, forward ms (TFLOP/s, FA convention per "
          f"sequence), CUDA graphs of 10 calls, median of {a.reps} interleaved rounds")
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    cases = []
    for D in [] if a.no_base else a.dims:
        cases += [(f"zipf D{D} ctx3", "zipf", jag, D, 3), (f"dense B2 S{tok // 2} D{D} ctx3", "dense", [tok // 2] * 2, D, 3)]
    for s in a.seeds:
        z = zipf_lengths(32, 4096, seed=s)
        t = sum(z)
        for D in [d for d in (256, 64) if d in a.dims]:
            cases += [(f"zipf{s} D{D} ctx3", "zipf", z, D, 3), (f"dense{s} B2 S{t // 2} D{D} ctx3", "dense", [t // 2] * 2, D, 3)]
    if a.edge:
        cases += [("B4 S4K D256 ctx3", "edge", [4096] * 4, 256, 3), ("B2 S4K D256", "edge", [4096] * 2, 256, 0),
                  ("B16 S4K D256", "edge", [4096] * 16, 256, 0)]
    if a.only_masks:
        cases = []
    if a.masks or a.only_masks:
        for D in (128, 64):
            cases += [(f"B16 S4K D{D} causal", "", [4096] * 16, D, 0), (f"B16 S4K D{D} ctx64", "", [4096] * 16, D, 64)]
    cols = list(a.cfgs)
    print("| case | tokens | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    res = {}
    for name, kind, lens, D, ctx in cases:
        run = {}
        for c in (a.zipf_cfgs or cols) if kind else cols:
            if c == "ceil":
                if (kind, D) in CEIL:
                    run[c] = ours(lens, D, f"0:{CEIL[kind, D]}", ctx)
            else:
                run[c] = ours(lens, D, c, ctx)
        ms = timed(run, a.reps, 10 if sum(lens) < 20000 else 3)
        fl = flops(lens, D)
        res[name] = (fl, ms)
        print_row(f"fwd19 {a.label}", name, lens, fl, ms, cols)
        del run
        torch.cuda.empty_cache()
    print("\n| Zipf TFLOP/s over dense (same tokens) | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    names = list(res)
    for j in names:
        if not j.startswith("zipf"):
            continue
        d = next(n for n in names if n.startswith("dense" + j[4:j.index(" ")]) and n.endswith(j[j.index(" D"):]))
        (fj, mj), (fd, md) = res[j], res[d]
        print(f"| {j} / {d} | " + " | ".join(
            f"{100 * (fj / mj[c]) / (fd / md[c]):.0f} %" if c in mj and c in md else "" for c in cols) + " |")
    if a.masks or a.only_masks:
        for D in (128, 64):
            c_, x_ = res[f"B16 S4K D{D} causal"][1], res[f"B16 S4K D{D} ctx64"][1]
            print(f"| ctx64 / causal B16 S4K D{D} | " + " | ".join(f"{x_[c] / c_[c]:.3f}x" for c in cols) + " |")
    if a.prof:
        print(f"\n| kernels of {cols[0]} (us, mean of 5 calls) | kernel: us |")
        print("|---|---|")
        for name, kind, lens, D, ctx in [c for c in cases if c[0].startswith(("zipf ", "dense B"))]:
            fn = ours(lens, D, cols[0] if cols[0] != "ceil" else "0", ctx)
            fn()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            per = {}
            for e in prof.key_averages():
                t = getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)
                if t > 0 and ("kernel" in e.key or "Kernel" in e.key or "memset" in e.key.lower()):
                    k = e.key.split("<")[0].split("(")[0].split("::")[-1].split(" ")[-1][:40]
                    per[k] = per.get(k, 0.0) + t / 5
            print(f"| {name} | " + ", ".join(f"{k}: {v:.1f}" for k, v in per.items()) + " |", flush=True)


if __name__ == "__main__":
    main()
