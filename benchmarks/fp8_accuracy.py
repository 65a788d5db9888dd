"""Accuracy of HSTU attention on FP8 inputs as the sequence grows: the Hopper FP8 kernel, today's default CUDA path
(dequantize to bf16, bf16 kernels) and the fp32 emulation, each against an fp64 reference.

Why: the FP8 kernel (`kernel_options(fp8_kernel=True)`) accumulates P.V with FP8 wgmma, whose fp32 accumulation is
not exact on Hopper; over 16K keys its error may grow faster than the bf16 kernels'. This table is what decides
whether the kernel becomes the default for FP8 calls.

Two errors per path, relative to max |reference|, and the RMS error relative to the reference's RMS:
- "arith": against the fp64 emulation of that path's own rounding points (the FP8 plan: P rounded to e4m3; the
  dequantize path: inputs and P rounded to bf16): the error of the arithmetic alone;
- "total": against fp64 attention of the original (unquantized) inputs: what a user sees.

Usage: python benchmarks/fp8_accuracy.py [--quick] [--smoke] [--results FILE]
Inputs: randn bf16 q / k / v (std 1), per-tensor descale, causal, H 4, alpha 1/sqrt(D), one sequence per case plus
a short one (jagged). On the CPU (--smoke) only the emulation rows run (the CUDA paths need a GPU).
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _fp8  # noqa: E402
from hstu_attn._reference import hstu_attn_reference  # noqa: E402


def make_inputs(L: int, D: int, H: int, seed: int, device: torch.device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    lens = [L, max(1, L // 7)]
    cu = torch.tensor([0, lens[0], lens[0] + lens[1]], dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, H, D, generator=g).to(torch.bfloat16).to(device) for _ in range(3))
    return q, k, v, cu.to(device), max(lens)


def errors(got: torch.Tensor, ref: torch.Tensor) -> tuple:
    """(max |got - ref| / max |ref|, rms(got - ref) / rms(ref)) in fp64."""
    d = got.double() - ref.double()
    ref = ref.double()
    return ((d.abs().max() / ref.abs().max().clamp_min(1e-300)).item(),
            (d.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-300)).item())


def run_case(L: int, D: int, H: int, device: torch.device, seed: int = 0) -> Dict[str, Optional[tuple]]:
    q, k, v, cu, max_len = make_inputs(L, D, H, seed, device)
    alpha = D ** -0.5
    lengths = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len, max_seqlen_k=max_len,
                   window_size=(-1, 0))
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "tensor") for x in (q, k, v))
    fp8_args = (q8, k8, v8, qs, ks, vs, "tensor")

    def emulate(compute_dtype, **rounding):
        return _fp8.hstu_attn_fp8_reference(*fp8_args, alpha=alpha, compute_dtype=compute_dtype,
                                            out_dtype=torch.float64, **rounding, **lengths)

    exact = hstu_attn_reference(q.double(), k.double(), v.double(), alpha=alpha, **lengths).double()
    plan_gold = emulate(torch.float64)  # the FP8 kernel's rounding points
    out: Dict[str, Optional[tuple]] = {}
    plan32 = emulate(torch.float32)
    out["fp32 emulation"] = errors(plan32, plan_gold) + errors(plan32, exact)
    out["FP8 kernel"] = out["dequantize + bf16 kernels"] = None
    if device.type == "cuda":
        def call():
            return hstu_attn.hstu_attn_varlen_func(q8, k8, v8, alpha=alpha, q_descale=qs, k_descale=ks,
                                                   v_descale=vs, descale_mode="tensor", **lengths)

        with hstu_attn._ops.kernel_options(fp8_kernel=False):
            d = call()
        deq_gold = emulate(torch.float64, dequant_dtype=torch.bfloat16, p_dtype=torch.bfloat16)
        out["dequantize + bf16 kernels"] = errors(d, deq_gold) + errors(d, exact)
        if _fp8._fp8_kernel_applies(q8, None, hstu_attn._ops.OPTION_BITS["fp8_kernel"]):
            with hstu_attn._ops.kernel_options(fp8_kernel=True):
                f = call()
            out["FP8 kernel"] = errors(f, plan_gold) + errors(f, exact)
    return out


def fmt(e: Optional[tuple]) -> List[str]:
    return ["n/a"] * 4 if e is None else [f"{x:.2e}" for x in e]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = bench_util.parser(__doc__, "D 128, L 1K and 4K")
    p.add_argument("--smoke", action="store_true", help="tiny shapes (runs on the CPU)")
    p.add_argument("--results", default=None, help="append the table to this markdown file")
    bench_util.add_device_arg(p)
    a = p.parse_args(argv)
    device = torch.device(a.device)
    if a.smoke:
        shapes = [(96, 32)]
    elif a.quick:
        shapes = [(1024, 128), (4096, 128)]
    else:
        shapes = [(L, D) for D in (128, 256) for L in (1024, 4096, 16384)]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"### FP8 attention accuracy vs sequence length ({gpu}; bf16 randn inputs, per-tensor FP8, causal, H 4)",
             "", "Relative errors: max |err| / max |ref| and rms(err) / rms(ref); arith = against the fp64 emulation "
             "of the path's own rounding points, total = against fp64 attention of the unquantized inputs.", "",
             "| L | D | path | arith max | arith rms | total max | total rms |", "|---:|---:|---|---:|---:|---:|---:|"]
    for L, D in shapes:
        res = run_case(L, D, 4, device)
        for name, e in res.items():
            lines.append(f"| {L} | {D} | {name} | " + " | ".join(fmt(e)) + " |")
        print(lines[-1], flush=True)
    bench_util.publish("\n".join(lines), a.results, bench_util.provenance(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
