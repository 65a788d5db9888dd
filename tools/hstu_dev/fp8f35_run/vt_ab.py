"""fp8f35's A / B of the FP8 forward's Vt pre-pass (issue 36; lab script): the default op (hstu_fp8_vt_kernel, 128
threads per 64 columns, all V loads first) against kernel_options(fp8_fwd_var=4) (main's hstu_fp8_vt_main_kernel),
B16 S16K causal H4, per-tensor descale, D 128 / 256, one process. Per round and variant: one call under
torch.profiler (each kernel's device ms: the pre-pass, the checks, the FP8 kernel), then the op's ms by CUDA events
over 5 calls; the variants alternate (A B A B ...). Then FA3's FP8 benchmark method per variant (sleep 1 s, 2 warm-up
calls, 30 calls in one block, the mean). Prints a markdown table per case: medians, and var 4 / default.

Usage (GPU): python tools/hstu_dev/fp8f35_run/vt_ab.py [--rounds 5] [--dims 128,256] [--no-fa3]
"""
import argparse
import os
import statistics
import sys
import time

import torch

import hstu_attn
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

HERE = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(HERE, "..", "..", "..", "benchmarks"), os.path.join(HERE, "tree", "benchmarks")):
    sys.path.insert(0, _d)  # (the branch's benchmarks: in the carry folder under tree/, else the repository's)
from bench_util import event_ms, kernel_breakdown  # noqa: E402
from hstu_attention import fa3_timeit_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dims", default="128,256")
    ap.add_argument("--no-fa3", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    shift = hstu_attn._ops.FP8_FWD_VAR_SHIFT
    print(f"- {torch.cuda.get_device_name(dev)}; hstu_attn at {hstu_attn.__file__}", flush=True)
    for D in (int(d) for d in args.dims.split(",")):
        B, S = 16, 16384
        cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
        (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(torch.randn(B * S, 4, D, device=dev, dtype=torch.bfloat16), cu,
                                                     "tensor") for _ in range(3))
        lens = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5)
        flops = 4 * 4 * D * S * S * B / 2

        def call(var):
            return lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0, *lens,
                                                       None, float(S), None, None, var << shift)

        fns = {0: call(0), 4: call(4)}
        same = torch.equal(fns[0](), fns[4]())
        got = {v: {"pre": [], "kern": [], "op": []} for v in fns}
        for _ in range(args.rounds):
            for v, fn in fns.items():
                parts = kernel_breakdown(fn)
                got[v]["pre"].append(sum(ms for n, (ms, _) in parts.items() if "vt_" in n))
                got[v]["kern"].append(sum(ms for n, (ms, _) in parts.items() if "hstu_fwd_fp8_sm90_kernel" in n))
                got[v]["op"].append(event_ms(lambda: [fn() for _ in range(5)]) / 5)
        fa3 = {v: (fa3_timeit_ms(fn)[0] if not args.no_fa3 else None) for v, fn in fns.items()}
        med = {v: {k: statistics.median(x) for k, x in d.items()} for v, d in got.items()}
        print(f"\nB{B} S{S // 1024}K D{D} causal H4, tensor descale; {args.rounds} rounds; var 4 output bitwise the "
              f"default's: {same}")
        print("| variant | pre-pass ms | FP8 kernel ms | op ms (5 back to back) | op TFLOP/s | fa3 method ms "
              "(TFLOP/s) |")
        print("|---|---:|---:|---:|---:|---:|")
        for v, name in ((0, "default (128 threads)"), (4, "var 4 (main's pre-pass)")):
            m = med[v]
            f3 = f"{fa3[v]:.3f} ({flops / fa3[v] / 1e9:.1f})" if fa3[v] else "-"
            print(f"| {name} | {m['pre']:.4f} | {m['kern']:.4f} | {m['op']:.4f} | {flops / m['op'] / 1e9:.1f} | "
                  f"{f3} |")
        r = {k: med[4][k] / med[0][k] for k in ("pre", "kern", "op")}
        f3r = f"{fa3[4] / fa3[0]:.3f}" if fa3[0] else "-"
        print(f"| var 4 / default | {r['pre']:.3f} | {r['kern']:.3f} | {r['op']:.3f} | | {f3r} |", flush=True)
        print("pre-pass ms per round, default: " + " ".join(f"{x:.4f}" for x in got[0]["pre"]) + "; var 4: "
              + " ".join(f"{x:.4f}" for x in got[4]["pre"]), flush=True)
        del q8, k8, v8, fns
        torch.cuda.empty_cache()
        time.sleep(0.5)


if __name__ == "__main__":
    main()
