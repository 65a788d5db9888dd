"""The portable (sm80-class) forward's split with its short work items run several to a block (issue 39, branch
zipf37): bf16 H4 causal, 3 contexts, kernel_options(sm90=False) on benchmarks/hstu_attention.py's jagged row
(Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and its dense twin B2 S1820, per head dim, one process.

Modes:
  ratio  forward ms of `g2` (the branch's default: items of at most chunk / 2 KV tiles two to a block at the list's
         tail, hstu_fwd_split_group_kernel), `place` (fwd_sm80_cfg=12; run 1's wheel: `g3`, three to a block; the
         pairs placed in the list by their weight) and `main`
         (fwd_sm80_cfg=11: one item per block, main's split kernel), then Zipf / dense TFLOP/s per variant and each
         variant / main
  gaps   each variant's timeline per call in a CUDA graph of 10 calls (zipf35_bench.py's: validation V, list kernel
         L, split kernel S)
  bwd    the backward (hstu_attn::bwd_with_options, the same in both wheels: main's portable backward) on the same
         pair: ms and Zipf / dense TFLOP/s (the forward's FLOPs x 2.5 both; the ratio does not depend on the factor)
  bprof  the backward's kernels per call on the same pair (torch.profiler)
Timing as fwd17_jag.py (CUDA graphs of 10 calls, variants interleaved per round, median of --reps rounds).

Usage: zipf37_bench.py LABEL MODE... [--dims 64 128 256] [--reps 5] [--edge]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (carried beside fwd17_jag.py, fwd29_bench.py, zipf35_bench.py, labtime.py)
for sub in ("fwd17_run", "fwd29_run", "zipf32_run", "zipf35_run", "runlib"):
    sys.path.insert(0, os.path.join(HERE, "..", sub))
from fwd17_jag import H, flops, ours, timed, zipf_lengths  # noqa: E402
from fwd29_bench import table  # noqa: E402
from zipf35_bench import gaps  # noqa: E402
import labtime  # noqa: E402


def variants(lens, D):
    return {"g2": ours(lens, D, "0", 3), "place": ours(lens, D, "12", 3), "main": ours(lens, D, "11", 3)}


def bwd_call(lens, D, seed=5):
    """the portable backward of one batch (bf16, causal, 3 contexts, alpha D^-1/2), through the raw op"""
    from hstu_attn import _ops
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    nc = torch.tensor([min(3, L) for L in lens], device="cuda", dtype=torch.int32)
    S = max(lens)
    with _ops.kernel_options(sm90=False):
        opts = _ops._current_options()
    bwd = torch.ops.hstu_attn.bwd_with_options
    return lambda: bwd(do, q, k, v, cu, cu, S, S, nc, None, 1, -1, 0, D ** -0.5, None, float(S), None, None, False,
                       False, opts)


def bprof(jag, dense, dims, n=5):
    """the backward's kernels per call (torch.profiler, us, mean over n eager calls after two warm-up calls) on the
    Zipf batch and its dense twin: where the Zipf backward's time goes"""
    print("\n### backward kernels per call (us)")
    for D in dims:
        for name, lens in (("zipf", jag), ("dense", dense)):
            per = labtime.per_call(labtime.kernel_times(bwd_call(lens, D), n=n, warmup=2), n, width=40)
            print(f"(bprof D{D} {name}: {labtime.top_kernels(per)})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("modes", nargs="+", choices=["ratio", "gaps", "bwd", "bprof"])
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--edge", action="store_true", help="ratio: also the seed-1 pair, B4 S4K, B2 S4K, B8 S1K")
    a = ap.parse_args()
    jag = zipf_lengths(32, 4096)
    dense = [sum(jag) // 2] * 2
    jag1 = zipf_lengths(32, 4096, seed=1)
    edge = [("zipf s1", jag1), (f"dense B2 S{sum(jag1) // 2}", [sum(jag1) // 2] * 2), ("B4 S4K", [4096] * 4),
            ("B2 S4K", [4096] * 2), ("B8 S1K", [1024] * 8)] if a.edge else []
    print(f"## zipf37 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal ctx3, CUDA graphs of 10 calls, "
          f"median of {a.reps} interleaved rounds", flush=True)
    for mode in a.modes:
        if mode == "bprof":
            bprof(jag, dense, [64, 128, 256])
            continue
        if mode == "bwd":
            print("\n### backward ms (Zipf / dense TFLOP/s)")
            for D in a.dims:
                ms = timed({"zipf": bwd_call(jag, D), "dense": bwd_call(dense, D)}, a.reps, 10)
                r = 100 * flops(jag, D) / ms["zipf"] / (flops(dense, D) / ms["dense"])
                print(f"(bwd D{D}: Zipf {ms['zipf']:.4f} ms, dense {ms['dense']:.4f} ms, Zipf / dense TFLOP/s "
                      f"{r:.1f} %)", flush=True)
            continue
        for D in a.dims:
            rows = [(f"zipf s0 D{D}", jag, D, variants(jag, D)),
                    (f"dense B2 S{dense[0]} D{D}", dense, D, variants(dense, D))]
            if mode == "gaps":
                gaps(rows)
                continue
            rows += [(f"{n} D{D}", lens, D, variants(lens, D)) for n, lens in edge]
            res = table(a.label, f"forward ms D = {D}", rows, a.reps)
            (zn, zl, _, _), (dn, dl, _, _) = rows[:2]
            for c in res[zn]:
                r = 100 * flops(zl, D) / res[zn][c] / (flops(dl, D) / res[dn][c])
                print(f"(D{D}: Zipf / dense TFLOP/s, {c}: {r:.1f} %)")
            for name in res:
                for c in ("g2", "place"):
                    print(f"(D{D} {name}: {c} / main {res[name][c] / res[name]['main']:.3f})")
            print(flush=True)


if __name__ == "__main__":
    main()
