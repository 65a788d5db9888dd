"""The FP8 attention backward on Hopper (issue 36): the bf16 backward, the dequantized path
(`kernel_options(fp8_bwd=False)`: dequantize + the bf16 backward; the default only where the FP8 kernel does not
apply), the FP8 backward's device pre-pass alone, and the Hopper FP8 backward (`kernel_options(fp8_bwd=True)`, the
default of FP8 calls at D = 64 / 128 / 256 without rab), with their TFLOP/s (FA convention) and the FP8 paths'
distance to the bf16 backward.

Usage: python benchmarks/hstu_fp8_bwd.py [--quick] [--smoke] [--reps N] [--mode block] [--variants default,NAME]
       [--no-dequant] [--short N] [--fa3 ROUNDS] [--hdim 64,128] [--results FILE]
--hdim: the head dims of the cases, comma-separated (default 128; the kernel is built at 64, 128 and 256), each case of
every head dim in turn (B16 S16K, S4K).
--fa3 ROUNDS: also the FP8 paths by FlashAttention-3's FP8 benchmark method, as the forward's headline
(benchmarks/hstu_attention.py --fp8 --method fa3: sleep 1 s, 2 warm-up calls, 30 calls back to back in one timed
block, no L2 flush, the mean), ROUNDS rounds of the paths in a fresh random order, the mean of the rounds.
Inputs: randn bf16 q / k / v (std 1) quantized by `quantize_fp8` (the --mode descale), dout randn * 1e-2, causal,
H 4, alpha 1/sqrt(D), dense batches. Goal (issue 36): FP8 backward >= 700 TFLOP/s at D128 B16 S16K.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from typing import List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _fp8, _fp8_bwd  # noqa: E402

CASES = [(16, 16384, 128), (16, 4096, 128)]  # (B, S, D); D from --hdim


def bwd_flops(B: int, S: int, D: int, H: int = 4) -> float:
    """FA convention: the backward is 2.5x the forward's 4 * H * D * S^2 / 2 per sequence (causal)."""
    return 2.5 * 4 * H * D * S * S / 2 * B


def interleaved_ms(fns, reps: int, warmup: int, device: torch.device, flush: Optional[torch.Tensor]) -> List[float]:
    """Median ms of each fn (None: skipped), the fns in a fresh random order each rep (seeded), L2 flushed before each
    timed call. Random, not rotated: a rotation keeps every fn behind the same one, and at S16K the calls after the
    bf16 backward ran up to 4 % slower than those further from it (docs/hstu_kernel_notes.md)."""
    for f in fns:
        for _ in range(warmup if f is not None else 0):
            f()
    times = [[] for _ in fns]
    rng = random.Random(36)
    for r in range(reps):
        for i in rng.sample(range(len(fns)), len(fns)):
            f = fns[i]
            if f is None:
                continue
            if flush is not None:
                flush.zero_()
            times[i].append(bench_util.once_ms(f, device))
    return [statistics.median(t) if t else float("nan") for t in times]


def host_ms(fn, reps: int) -> float:
    """Median host time of one fn() call (ms; the GPU idle before each call, nothing synchronized inside it)."""
    times = []
    for _ in range(max(reps, 3)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def make_inputs(B: int, S: int, D: int, mode: str, device: torch.device, H: int = 4):
    """This benchmark's inputs (the module docstring's): cu, (q, k, v), dout, the FP8 copies (q8, k8, v8), their
    descales (qs, ks, vs), the ops' length / mask arguments (lens: causal, alpha D^-1/2) and the descale mode's index"""
    cu = torch.arange(B + 1, device=device, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=device, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=device) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, mode) for x in (q, k, v))
    lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
    return cu, (q, k, v), dout, (q8, k8, v8), (qs, ks, vs), lens, _fp8.DESCALE_MODES.index(mode)


def run_case(B: int, S: int, D: int, mode: str, reps: int, warmup: int, device: torch.device,
             variants: List[str], dequant: bool = True, short: int = 0, fa3: int = 0) -> str:
    H = 4
    cu, (q, k, v), dout, (q8, k8, v8), (qs, ks, vs), lens, m = make_inputs(B, S, D, mode, device, H)

    def fp8(opts):
        return lambda: torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S), None,
                                                   None, False, opts)

    bf16 = lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *lens, None, float(S), None, None, False, False)  # noqa
    pre = lambda: _fp8_bwd.fp8_bwd_prepass(dout, q8, k8, cu, cu)  # noqa: E731
    kernel_opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    DEQ = hstu_attn._ops.FP8_BWD_DEQUANT_BIT  # kernel_options(fp8_bwd=False): the dequantized path
    kernel = None
    why = "not built"
    if device.type == "cuda" and _fp8_bwd.fp8_bwd_kernel_built(D):
        why = _fp8_bwd.fp8_bwd_refusal(q8, None, kernel_opts)
        kernel = fp8(kernel_opts) if why is None else None
    # the path's private variants (option bits, hstu_bwd_fp8_sm90.h kOptFp8Bwd*), where this build has them
    # ("default" again: the same path in another place of the random order, a check of the order's bias)
    bits = {"default": 0, **getattr(_fp8_bwd, "FP8_BWD_VARIANT_BITS", {})}
    var_fns = [fp8(kernel_opts | bits[name]) if kernel is not None and name in bits else None for name in variants]
    flush = torch.empty(64 << 20, dtype=torch.int32, device=device) if device.type == "cuda" else None
    times = interleaved_ms([bf16, fp8(DEQ) if dequant else None, pre, kernel] + var_fns, reps, warmup, device, flush)
    b_ms, d_ms, p_ms, k_ms = times[:4]
    host = [host_ms(f, reps) if f is not None and device.type == "cuda" else float("nan") for f in (bf16, kernel)]
    ref = bf16()[:3]
    scale = [max(r.float().abs().max().item(), 1e-30) for r in ref]

    def diff(gs) -> str:
        return "/".join(f"{(g.float() - r.float()).abs().max().item() / s:.1e}" for g, r, s in zip(gs, ref, scale))

    flops = bwd_flops(B, S, D, H)
    tf = lambda ms: f"{flops / ms / 1e9:.1f}" if ms == ms else "n/a"  # noqa: E731
    name = bench_util.shape_name(B, S, D)
    k_cells = (f"{k_ms:.3f} | {tf(k_ms)} | {b_ms / k_ms:.2f}x | {diff(kernel())}" if kernel is not None
               else f"n/a ({why}) | n/a | n/a | n/a")
    d_cells = f"{d_ms:.3f} | {tf(d_ms)} | {diff(fp8(DEQ)())}" if dequant else "n/a | n/a | n/a"
    v_cells = "".join(f" {ms:.3f} | {ms / k_ms:.3f} | {diff(fn())} |" if fn is not None else " n/a | n/a | n/a |"
                      for fn, ms in zip(var_fns, times[4:]))
    row = (f"| {name} causal | {mode} | {b_ms:.3f} | {tf(b_ms)} | {d_cells} | {p_ms:.3f} | {k_cells} | "
           f"{host[0]:.3f} / {host[1]:.3f} |{v_cells}")
    if short and kernel is not None and device.type == "cuda":
        # the same process, right after the table's timings: each path its own block of back-to-back calls
        named = [("kernel", kernel)] + [(v, fn) for v, fn in zip(variants, var_fns) if fn is not None]
        cells = []
        for label, fn in named:
            ms = bench_util.steady_ms(fn, 5, short, device)
            cells.append(f"{label} {ms:.3f} ms ({tf(ms)} TFLOP/s)")
        row += f"\n\nshort method ({name}, {short} back-to-back calls after 5 warm-up ones, mean): " + "; ".join(cells)
    if fa3 and kernel is not None and device.type == "cuda":
        from hstu_attention import fa3_timeit_ms  # (the forward's headline method, one definition)
        named = [("kernel", kernel)] + [(v, fn) for v, fn in zip(variants, var_fns) if fn is not None]
        got = {label: [] for label, _ in named}
        rng = random.Random(37)
        for _ in range(fa3):
            for i in rng.sample(range(len(named)), len(named)):
                got[named[i][0]].append(fa3_timeit_ms(named[i][1])[0])
        ref = statistics.mean(got["kernel"])
        cells = [f"{label} {statistics.mean(t):.3f} ms ({tf(statistics.mean(t))} TFLOP/s, {statistics.mean(t) / ref:.4f}; "
                 f"rounds {' '.join(f'{x:.3f}' for x in t)})" for label, t in got.items()]
        row += (f"\n\nFA3 method ({name}: sleep 1 s, 2 warm-up calls, 30 calls in one timed block, mean; {fa3} rounds "
                "in random orders, their mean): " + "; ".join(cells))
    return row


def main(argv=None) -> int:
    p = bench_util.parser(__doc__, "the S16K case only")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mode", default="block", choices=_fp8.DESCALE_MODES)
    p.add_argument("--smoke", action="store_true", help="one tiny case (any device)")
    p.add_argument("--variants", default="",
                   help="the path's private variants of the last columns, comma-separated names of "
                        "_fp8_bwd.FP8_BWD_VARIANT_BITS (values of one option field: one at a time) or 'default' "
                        "(the kernel column's path again); '' for none")
    p.add_argument("--no-dequant", action="store_true", help="skip the dequantized path's columns")
    p.add_argument("--short", type=int, default=0,
                   help="also time the FP8 paths by the common short method (N back-to-back calls after 5 warm-up "
                        "ones, their mean; FlashAttention-3's benchmark) after the table's timings; 0: not")
    p.add_argument("--fa3", type=int, default=0,
                   help="also time the FP8 paths by FlashAttention-3's FP8 benchmark method (benchmarks/"
                        "hstu_attention.py --fp8 --method fa3), this many rounds; 0: not")
    p.add_argument("--hdim", default="128", help="head dims of the cases, comma-separated (e.g. 64,128)")
    p.add_argument("--results", help="append the table to this markdown file")
    bench_util.add_device_arg(p)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    variants = [v for v in args.variants.split(",") if v]
    hdims = [int(d) for d in args.hdim.split(",") if d]
    base = [(2, 256, 128)] if args.smoke else CASES[:1] if args.quick else CASES
    cases = [(B, S, d) for B, S, _ in base for d in hdims]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"## hstu_fp8_bwd: {gpu}", "",
             f"- device: {gpu}; torch {torch.__version__}; commit {bench_util.git_commit()}; "
             f"command: `{bench_util.command(argv)}`",
             "- dtypes: bf16 = the bf16 backward on bf16 q/k/v; FP8 = float8_e4m3fn q/k/v + float32 descale factors "
             "(quantize_fp8), bf16 dout and gradients; dequant = kernel_options(fp8_bwd=False) "
             "(dequantize, bf16 backward; the default where the kernel does not apply); "
             "pre-pass = fp8_bwd_prepass alone (dO per-block e4m3 + Q^T / dO^T / K^T); kernel = "
             "kernel_options(fp8_bwd=True) (the whole FP8 path: pre-pass, kernel, dq's rounding); variants = the "
             "same with the kernel's private option bits (hstu_bwd_fp8_sm90.h kOptFp8Bwd*): " + (", ".join(variants)
                                                                                              or "none"),
             f"- units: ms (median of {args.reps}, the paths in a random order each rep, L2 flushed, CUDA events; host ms: the "
             "call's own host time on an idle GPU, median); TFLOP/s = 2.5 * "
             "4 * H * D * S^2 / 2 * B / time (FA convention, causal, H = 4); diff = max |g - g_bf16| / max "
             "|g_bf16| for dq/dk/dv", "",
             "| case | descale | bf16 bwd ms | bf16 TFLOP/s | dequant ms | dequant TFLOP/s | dequant diff "
             "| pre-pass ms | kernel ms | kernel TFLOP/s | kernel vs bf16 | kernel diff | host ms bf16 / kernel |"
             + "".join(f" {v} ms | {v} / kernel | {v} diff |" for v in variants),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|---:|" * len(variants)]
    print("\n".join(lines), flush=True)
    rows = []
    for B, S, D in cases:
        rows.append(run_case(B, S, D, args.mode, args.reps if not args.smoke else 2, args.warmup, device,
                             variants, not args.no_dequant, args.short, args.fa3))
        print(rows[-1], flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + "\n".join(lines + rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
