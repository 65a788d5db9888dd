"""The portable (sm80-class) forward with contexts and the split's workspace (issue 39, branch fwd20): bf16 H4
forward ms of kernel_options(sm90=False, fwd_sm80_cfg=c) on B16 S4K causal / ctx64 at D = 64 / 128 / 256 (the default
against c = the default's tile without the context skip: 1 at D = 64 / 256, 2 at D = 128), the Zipf batch and its
dense same-token twin with 3 contexts (benchmarks/hstu_attention.py's jagged row), and the split's peak device
memory on a dense batch of about three waves (B2 S6144 H4 D256: the query tiles' chunks' fp32 partials).
Timing as fwd17_jag.py (tools/hstu_dev/fwd17_run): CUDA graphs of n calls, variants interleaved per round, median of
--reps rounds. Prints markdown tables and `fwd20 LABEL | case | variant | ms` lines.

Usage: fwd20_bench.py LABEL [--reps 5] [--base] [--fa2]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd17_run"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fwd17_jag import fa2, flops, ours, print_row, timed, zipf_lengths  # noqa: E402

BASE = {64: 1, 128: 2, 256: 1}  # the default's tile without the context skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--base", action="store_true", help="also the default's tile forced (fwd_sm80_cfg 1 / 2)")
    ap.add_argument("--fa2", action="store_true", help="FA2 (torch's flash SDPA) on B16 S4K, and B256 S256 D256")
    ap.add_argument("--ws", action="store_true", help="the split's workspace (peak memory) first")
    ap.add_argument("--exact", action="store_true", help="the workspace with exact chunks too")
    ap.add_argument("--dims", nargs="*", type=int, default=[128, 64, 256], help="head dims of B16 S4K")
    ap.add_argument("--ctx", action="store_true", help="B16 S4K with 64 contexts too")
    ap.add_argument("--zipf", nargs="*", type=int, default=[64, 256], help="head dims of the Zipf / dense pair")
    a = ap.parse_args()
    print(f"## fwd20 {a.label}: {torch.cuda.get_device_name()}, bf16 H4, forward ms (TFLOP/s, FA convention per "
          f"sequence), CUDA graphs, median of {a.reps} interleaved rounds")
    # the split's workspace: peak device memory of one default forward over its inputs and output
    lens, D = [6144] * 2, 256

    def peak(var):
        fn = ours(lens, D, var, 0)
        out = fn()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20, out.numel() * out.element_size() / 2**20

    if a.ws:
        extra, out_mib = peak("0")
        print(f"| split workspace B2 S6144 H4 D256 | peak over inputs: {extra:.1f} MiB, output {out_mib:.1f} MiB |",
              flush=True)
        print(f"fwd20 {a.label} | workspace B2 S6144 D256 | peak MiB | {extra:.2f}")
    if a.exact:  # chunks of the rule's least (94 KV tiles: 2 per walk) forced: the bound of exact chunks
        extra, _ = peak("0:94")
        print(f"| the same, fwd_split_tiles=94 (exact chunks: slots x heads x 2 partials) | peak over inputs: "
              f"{extra:.1f} MiB |", flush=True)
    cols = ["default", "base", "FA2"]
    print("| case | tokens | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    res = {}
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    cases = []
    for D in a.dims:
        cases += [(f"B16 S4K D{D} causal", [4096] * 16, D, 0)] + ([(f"B16 S4K D{D} ctx64", [4096] * 16, D, 64)] if a.ctx else [])
    for D in a.zipf:
        cases += [(f"zipf D{D} ctx3", jag, D, 3), (f"dense B2 S{tok // 2} D{D} ctx3", [tok // 2] * 2, D, 3)]
    if a.fa2:
        cases += [("B256 S256 D256", [256] * 256, 256, 0)]
    for name, lens, D, ctx in cases:
        run = {"default": ours(lens, D, "0", ctx)}
        if a.base and name.startswith("B16"):
            run["base"] = ours(lens, D, str(BASE[D]), ctx)
        if a.fa2 and ctx == 0 and len(set(lens)) == 1 and name.startswith(("B256", "B16")):
            run["FA2"] = fa2(len(lens), lens[0], D)
        ms = timed(run, a.reps, 3 if sum(lens) > 20000 else 10)
        fl = flops(lens, D)
        res[name] = (fl, ms)
        print_row(f"fwd20 {a.label}", name, lens, fl, ms, cols)
        del run
        torch.cuda.empty_cache()
    print("\n| ratio | " + " | ".join(cols[:2]) + " |")
    print("|---|---:|---:|")
    for D in (128, 64, 256):
        if f"B16 S4K D{D} ctx64" not in res:
            continue
        c_, x_ = res[f"B16 S4K D{D} causal"][1], res[f"B16 S4K D{D} ctx64"][1]
        print(f"| ctx64 / causal B16 S4K D{D} (each column's own causal) | " +
              " | ".join(f"{x_[c] / c_[c]:.3f}x" if c in x_ and c in c_ else "" for c in cols[:2]) + " |")
        if "base" in c_:
            print(f"| ctx64 default / base's causal D{D} | {x_['default'] / c_['base']:.3f}x | |")
    for D in [d for d in a.zipf if f"dense B2 S{tok // 2} D{d} ctx3" in res]:
        (fj, mj), (fd, md) = res[f"zipf D{D} ctx3"], res[f"dense B2 S{tok // 2} D{D} ctx3"]
        print(f"| Zipf / dense TFLOP/s D{D} | {100 * (fj / mj['default']) / (fd / md['default']):.0f} % | |")


if __name__ == "__main__":
    main()
