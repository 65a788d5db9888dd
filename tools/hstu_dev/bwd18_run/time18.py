"""Portable (sm80-class) backward time under kernel variants (branch bwd18, issue 39): time80.py's causal shapes
(tools/hstu_dev/bwd80_run, imported from the tree this runs in), each variant a kernel_options(sm90=False, ...) set:
"0" the default, "cN" bwd_sm80_cfg=N, "fN" bwd_sm80_dq_frag=N (run 1's wheel 3624eed only: the fragment-ordered
dQ workspace, 1 red.v4, 2 scalar reds), any of them with "@SUBSTR": only in the cases whose name has SUBSTR; --fa2
adds FlashAttention-2 (torch SDPA flash). CUDA events, median of --reps, the variants of a case interleaved. Prints
a markdown table (ms (TFLOP/s, FA convention)).
Usage: time18.py LABEL --vars 0 c5 [--reps N] [--fa2] [--only SUBSTR ...] (the cases in the order of --only)"""
import argparse
import os
import sys

import torch

import hstu_attn
from hstu_attn import _ops

sys.path.insert(0, os.path.join(os.getcwd(), "tools", "hstu_dev", "bwd80_run"))
import time80  # noqa: E402


def options(var):
    var = var.split("@")[0]
    if var == "0":
        return {}
    return {"bwd_sm80_cfg" if var[0] == "c" else "bwd_sm80_dq_frag": int(var[1:])}


def setup(name, var):
    lens, H, D = time80.CASES[name][:3]
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(1)
    T = sum(lens)
    q, k, v = (torch.randn(T, H, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
    cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
    with _ops.kernel_options(sm90=False, **options(var)):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                                              max_seqlen_k=max(lens), window_size=(-1, 0), alpha=D ** -0.5)
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, [q, k, v], dout, retain_graph=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--vars", nargs="+", default=["0"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--only", nargs="*", default=[])
    a = ap.parse_args()
    cols = list(a.vars) + (["FA2"] if a.fa2 else [])
    print(f"### sm80-class backward, {a.label}: {torch.cuda.get_device_name()}, bf16 causal, ms (median of {a.reps}; "
          "TFLOP/s FA convention)")
    print("| case | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    names = [n for o in a.only for n in time80.CASES if o in n] if a.only else list(time80.CASES)
    for name in dict.fromkeys(names):  # (in the order of --only)
        if not name.startswith("causal"):
            continue
        try:
            here = [v for v in a.vars if "@" not in v or v.split("@")[1] in name]
            fns = [setup(name, v) for v in here] + ([time80.setup_fa2(name)] if a.fa2 else [])
            got = dict(zip(here + (["FA2"] if a.fa2 else []), time80.time_rounds(fns, a.reps)))
            ms = [got.get(c) for c in cols]
        except Exception as e:
            print(f"| {name} | {type(e).__name__}: {str(e)[:100]} |", flush=True)
            continue
        lens, H, D = time80.CASES[name][:3]
        fl = 2.5 * 4 * H * D * sum(L * L for L in lens) / 2
        print(f"| {name} | " + " | ".join(f"{m:.4f} ({fl / m / 1e9:.0f})" if m else "-" for m in ms) + " |",
              flush=True)
        for c, m in zip(cols, ms):
            if m:
                print(f"time18 {a.label} | {name} | {c} | {m:.4f}", flush=True)
        del fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
