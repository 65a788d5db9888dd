"""The FP8 backward against the bf16 one, kernel by kernel (issue 36, branch fp8b17): causal H4 D128, block descale,
benchmarks/hstu_fp8_bwd.py's inputs. Modes:
  breakdown S...: torch.profiler (CUPTI) of one FP8 backward (kernel_options(fp8_bwd=True): pre-pass + kernel + dQ
                  conversion) and one bf16 backward per S (B16), after two warm calls: a row per kernel (ms)
  ncu S...:       one FP8 backward then one bf16 backward per S (for ncu -k ...; no timing)
Options: --diag N runs the FP8 kernel's private variant N (fp8_bwd_cuda's diag) instead of the default."""
import argparse
import os
import sys

import torch

import hstu_attn
from hstu_attn import _fp8, _fp8_bwd

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["breakdown", "ncu"])
ap.add_argument("seqs", type=int, nargs="+")
ap.add_argument("--diag", type=int, default=0)
ap.add_argument("--no-bf16", action="store_true")
a = ap.parse_args()
dev = torch.device("cuda")
B, H, D = 16, 4, 128
opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]


def case(S):
    g = torch.Generator(device=dev).manual_seed(S)
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev, generator=g) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
    m = _fp8.DESCALE_MODES.index("block")
    pargs = (q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S), None, None)
    if a.diag:
        fp8 = lambda: _fp8_bwd.fp8_bwd_cuda(dout, pargs, False, opts, diag=a.diag)  # noqa: E731
    else:
        fp8 = lambda: torch.ops.hstu_attn.fp8_bwd(dout, *pargs, False, opts)  # noqa: E731
    bf16 = lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *lens, None, float(S), None, None, False, False)  # noqa
    return fp8, bf16


if a.mode == "ncu":
    for S in a.seqs:
        fp8, bf16 = case(S)
        fp8()
        if not a.no_bf16:
            bf16()
        torch.cuda.synchronize()
        del fp8, bf16
        torch.cuda.empty_cache()
    print("prof17 ncu done", torch.cuda.get_device_name())
else:
    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))  # (run from the root of the tree)
    from bench_util import kernel_breakdown
    print(f"## per-kernel breakdown ({torch.cuda.get_device_name()}; B{B} H{H} D{D} causal, block descale; "
          f"diag {a.diag}; one call each under torch.profiler after 2 warm calls; ms)\n")
    print("| case | path | kernel | calls | ms |\n|---|---|---|---:|---:|")
    for S in a.seqs:
        fp8, bf16 = case(S)
        for name, fn in (("fp8", fp8), ("bf16", bf16)):
            if name == "bf16" and a.no_bf16:
                continue
            s = 0.0
            for kname, (ms, c) in kernel_breakdown(fn).items():
                s += ms
                print(f"| B{B} S{S // 1024}K | {name} | {kname[:90]} | {c} | {ms:.3f} |")
            print(f"| B{B} S{S // 1024}K | {name} | **sum of kernels** | | **{s:.3f}** |", flush=True)
            ev = []
            for _ in range(3):
                t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0.record()
                fn()
                t1.record()
                t1.synchronize()
                ev.append(t0.elapsed_time(t1))
            print(f"| B{B} S{S // 1024}K | {name} | **CUDA events around the call (median of 3)** | | "
                  f"**{sorted(ev)[1]:.3f}** |", flush=True)
        del fp8, bf16
        torch.cuda.empty_cache()
