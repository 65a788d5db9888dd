"""The Hopper FP8 forward's SiLU forms and tiles side by side (issue 36; lab script, not a product benchmark).

Times hstu_attn::fp8_fwd (descale check, Vt pre-pass, kernel) on causal H4 batches with per-tensor descale under
kernel_options(fp8_silu=0 / 1 / 3 / 2) (0: tanh.approx per element, the default; 1 / 3 / 2: half / three
quarters / all of an unmasked tile's elements by ex2 + a reciprocal on the FMA pipe), fp8_qreg=True (Q in
registers for QK^T, D >= 128), and fp8_bn192=True at D = 128 (not with fp8_qreg: 192-key tiles with Q in registers
spill), alone and combined; the variants interleaved (CUDA events, L2 flushed, median). `--default-only`: the
default alone (for an older wheel, without the fp8_silu switch). Prints a markdown table: ms, TFLOP/s (4 H D L^2 / 2
per sequence), gain over the default, and max |out - default| / max |default|.

Usage (GPU): python tools/hstu_dev/fp8_silu_bench.py [--reps 10] [--default-only] [--cases B16S16KD128,...]
"""
import argparse
import os
import statistics
import sys
import time

import torch

import hstu_attn
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")))
from bench_util import event_ms  # noqa: E402

CASES = {"B16S16KD128": (16, 16384, 128), "B16S16KD256": (16, 16384, 256), "B16S4KD128": (16, 4096, 128),
         "B16S4KD64": (16, 4096, 64), "B16S4KD256": (16, 4096, 256)}


def once_ms(fn, flush):
    flush.zero_()  # (L2 flushed)
    return event_ms(fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup-ms", type=float, default=60.0)
    ap.add_argument("--default-only", action="store_true")
    ap.add_argument("--cases", default="B16S16KD128,B16S16KD256,B16S4KD128")
    args = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    print(f"- {torch.cuda.get_device_name(dev)}; hstu_attn {hstu_attn.__version__} at {hstu_attn.__file__}")
    print("| case | variant | ms | TFLOP/s | gain vs default | diff vs default |\n|---|---|---:|---:|---:|---:|")
    for name in args.cases.split(","):
        B, S, D = CASES[name]
        cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
        q, k, v = (torch.randn(B * S, 4, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, "tensor") for x in (q, k, v))
        del q, k, v
        lens = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5)
        bits = hstu_attn._ops.OPTION_BITS
        variants = [("default", 0)]
        if not args.default_only:
            shift, qreg, wide = hstu_attn._ops.FP8_SILU_SHIFT, hstu_attn._ops.FP8_QREG_BIT, bits["fp8_bn192"]
            variants += [("silu1", 1 << shift), ("silu3", 3 << shift), ("silu2", 2 << shift)]
            if D >= 128:
                variants += [("qreg", qreg), ("qreg+silu1", qreg | 1 << shift), ("qreg+silu3", qreg | 3 << shift),
                             ("qreg+silu2", qreg | 2 << shift)]
            if D == 128:
                variants += [("bn192", wide), ("bn192+silu1", wide | 1 << shift), ("bn192+silu3", wide | 3 << shift),
                             ("bn192+silu2", wide | 2 << shift)]

        def call(o):
            return lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0, *lens,
                                                       None, float(S), None, None, o)

        fns = [call(o) for _, o in variants]
        for fn in fns:
            t0 = time.perf_counter()
            while (time.perf_counter() - t0) * 1e3 < args.warmup_ms:
                fn()
                torch.cuda.synchronize()
        times = [[] for _ in fns]
        for _ in range(args.reps):
            for fn, ts in zip(fns, times):
                ts.append(once_ms(fn, flush))
        med = [statistics.median(t) for t in times]
        ref = fns[0]().float()
        scale = max(ref.abs().max().item(), 1e-30)
        flops = 4 * 4 * D * S * S * B / 2
        for (vname, _), fn, ms in zip(variants, fns, med):
            diff = (fn().float() - ref).abs().max().item() / scale
            print(f"| B{B} S{S // 1024}K D{D} causal | {vname} | {ms:.3f} | {flops / ms / 1e9:.1f} | "
                  f"{med[0] / ms:.3f}x | {diff:.1e} |", flush=True)
        del q8, k8, v8, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
