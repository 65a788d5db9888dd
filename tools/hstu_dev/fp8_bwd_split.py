"""Where the Hopper FP8 backward kernel's time goes (issue 36): times `hstu_attn::fp8_bwd_sm90` (the whole path:
pre-pass, kernel, dq's rounding; the variants differ in the kernel only) and its variants (the op's private `diag`:
the variant bits of hstu_bwd_fp8_sm90.h toggled from kFp8BwdDefault; never on the product path). Timing-only ones
(wrong gradients) drop one phase from the default, so that the phase's cost is the difference:
  diag 1: no dQ adds (the default's register reds; the staged kernel's staging and bulk reduce-adds; the dQ GEMM
          still runs)
  diag 2: no tanh (P = S / 2, SiLU' = 1; the selects, packs and GEMMs stay)
  diag 4: each warp's own amax for the dS factor (no exchange of the 8 words; the named barriers stay: they bound
          the warpgroups' drift)
  diag 7: all three
  diag 8: no pointwise math at all (P8 = e4m3(S^T), dS' = dP^T: no scale, tanh or select)
  diag 15: 7 and 8 (what is left: the GEMMs, TMA loads, dS8 stores, the dS8 barrier)
  diag 16: dQ staged in shared memory but no bulk reduce-adds (16 - 1: the staging; 0 - 16: the global reduce traffic;
           the staged kernels only: with 131072, the default without its register reds)
  diag 128: no fence.proxy.async (its SASS: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S) after the dS8 stores and the dQ
            staging (racy); 144: 128 and 16
  diag 256: no Q / dO / dO^T / Q^T loads past the first stages (the tile traffic's time and energy)
Correct ones: 1024 / 2048 / 4096 / 8192 the default without one feature (stmatrix dS8, spec-q, the factor prefetch,
the mask compares), 16384 with the (head, batch, key block) grid, 65536 / 131072 / 262144 without the 16-byte dK /
dV stores / the dQ register reds / the grouped grid (458752: without all three); 474112 session 13's kernel (none),
474112 + 1 / + 32 (no dS' parking, timing-only) / + 64 (its late fence) / + 96.
Same inputs as benchmarks/hstu_fp8_bwd.py (randn q / k / v quantized per block, dout randn * 1e-2, causal, H 4).

Usage (GPU, sm_90, a dev build: `bazel build //:wheels --config=sm90 --define hstu_dev=1`, which builds the diag
variants; the product wheel refuses them): python tools/hstu_dev/fp8_bwd_split.py [--reps N] [--quick]
"""

import argparse
import os
import statistics
import sys

import torch

import hstu_attn
from hstu_attn import _fp8, _fp8_bwd

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")))
from bench_util import event_ms  # noqa: E402

DIAGS = [(0, "kernel"), (1, "no dQ add"), (2, "no tanh"), (4, "no amax barrier"), (7, "none of the three"),
         (8, "no pointwise math"), (15, "none of the four"), (128, "no proxy fences"), (256, "no tile reloads"),
         (1024, "(without stmatrix dS8)"), (2048, "(without spec-q: fp32 parking)"),
         (4096, "(without the factor prefetch)"), (8192, "(without the mask compares)"),
         (16384, "(with the (head, batch, key block) grid)"), (65536, "(without dK / dV by 16-byte stores)"),
         (131072, "(without the dQ register reds: staged)"), (131072 + 16, "staged, no reduce-adds"),
         (131072 + 144, "staged, no proxy fences, no reduce-adds"), (262144, "(without the grouped grid)"),
         (458752, "(without the three: the staged kernel)"), (474112, "(session 13's kernel)"),
         (474113, "session 13's, no dQ add"), (474144, "session 13's, no dS' parking"),
         (474176, "(session 13's late fence)"), (474208, "session 13's late fence, no dS' parking")]


def run_case(B, S, D, reps, diags):
    dev = torch.device("cuda")
    H = 4
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    m = _fp8.DESCALE_MODES.index("block")
    flops = 2.5 * 4 * H * D * S * S / 2 * B
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]

    def call(diag):
        return lambda: torch.ops.hstu_attn.fp8_bwd_sm90(
            dout, q8, k8, v8, qs, ks, vs, m, 0, cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5, None, float(S), None,
            None, opts, diag)

    fns = [call(d) for d, _ in diags]
    for f in fns:
        f()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(reps):
        for i, f in enumerate(fns):
            times[i].append(event_ms(f))
    ms = [statistics.median(t) for t in times]
    name = f"B{B} S{S // 1024}K D{D}"
    for (d, what), t in zip(diags, ms):
        print(f"| {name} causal | {d} | {what} | {t:.3f} | {flops / t / 1e9:.1f} | {t - ms[0]:+.3f} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="the S4K case only")
    ap.add_argument("--s16k", action="store_true", help="the S16K case only")
    ap.add_argument("--diags", help="comma-separated diag values (the first is the baseline); default: all")
    args = ap.parse_args(argv)
    names = dict(DIAGS)
    diags = DIAGS if not args.diags else [(int(d), names.get(int(d), "?")) for d in args.diags.split(",")]
    if not torch.cuda.is_available() or not _fp8_bwd.fp8_bwd_kernel_built(128):
        print("fp8_bwd_split: needs a GPU and a build with the Hopper FP8 backward")
        return 0
    print(f"## fp8_bwd_sm90 phase split: {torch.cuda.get_device_name()} (the op: pre-pass, kernel and dq rounding; "
          "allocations included; ms median, FA TFLOP/s)\n")
    print("| case | diag | without | ms | TFLOP/s | vs kernel ms |\n|---|---:|---|---:|---:|---:|")
    cases = ([(16, 4096, 128)] if args.quick else [(16, 16384, 128)] if args.s16k
             else [(16, 16384, 128), (16, 4096, 128)])
    for B, S, D in cases:
        run_case(B, S, D, args.reps, diags)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
