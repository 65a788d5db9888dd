"""The portable (sm80-class) forward's interleaved groups (issue 39, branch fwd30): bf16 H4 causal forward ms (alpha
D^-1/2) of kernel_options(sm90=False) and the variants given: "noilv" (fwd_sm80_interleave=False: the D = 64 default
without its 16-key groups interleaved), "noqs" (fwd_sm80_qscale=False), "+rab" (a (B, H, S, S) rab), on B16 S8K /
S4K D64, B16 S4K D128 / D256, B256 S256 D256, with FA2 (torch's flash SDPA) in the same rounds. Timing and tables:
fwd17_jag.py's (CUDA graphs of n calls, variants interleaved per round, median of --reps rounds); the variants'
outputs against the default's (bitwise?) first. Main's wheel: --variants default.

--ncu: each variant once, no timing (for ncu -k regex:hstu_fwd).

Usage: fwd30_bench.py LABEL [--reps 5] [--variants default noilv] [--cases s8k64 s4k64 s4k128 s4k256 b256] [--fa2]
       [--ncu]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd17_run"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fwd17_jag import H, fa2, flops, print_row, timed  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _ops  # noqa: E402

SHAPES = {"s8k64": ("B16 S8K D64", 16, 8192, 64), "s4k64": ("B16 S4K D64", 16, 4096, 64),
          "b128s1k64": ("B128 S1K D64", 128, 1024, 64), "s4k128": ("B16 S4K D128", 16, 4096, 128),
          "s4k256": ("B16 S4K D256", 16, 4096, 256), "b256": ("B256 S256 D256", 256, 256, 256)}
SWITCHES = {"default": {}, "noilv": {"fwd_sm80_interleave": False}, "noqs": {"fwd_sm80_qscale": False}}


def ours(lens, D, variant, seed=2):
    """the forward (sm90=False) with the variant's switches"""
    variant, _, rab_tag = variant.partition("+")
    opts = dict(sm90=False, **SWITCHES[variant])
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    S = max(lens)
    rab = (torch.randn(len(lens), H, S, S, device="cuda", dtype=torch.bfloat16, generator=g)
           if rab_tag == "rab" else None)

    def call():
        with torch.no_grad(), _ops.kernel_options(**opts):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5,
                                                   rab=rab)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", nargs="*", default=["default", "noilv"])
    ap.add_argument("--cases", nargs="*", default=["s8k64", "s4k64", "s4k128", "s4k256", "b256"])
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    if a.ncu:
        for key in a.cases:
            name, B, S, D = SHAPES[key]
            for v in a.variants:
                ours([S] * B, D, v)()
                torch.cuda.synchronize()
                print(f"ncu: {name} {v}", flush=True)
        return
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal, forward ms (TFLOP/s, causal FLOPs), "
          f"CUDA graphs, median of {a.reps} interleaved rounds")
    cols = list(a.variants) + (["FA2"] if a.fa2 else [])
    print("| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    for key in a.cases:
        name, B, S, D = SHAPES[key]
        lens = [S] * B
        run = {v: ours(lens, D, v) for v in a.variants}
        if a.fa2:
            run["FA2"] = fa2(B, S, D)
        if "default" in run:  # the variants' outputs against the default's
            o = run["default"]()
            for v in a.variants[1:]:
                if "+" not in v:
                    g = run[v]()
                    d = (g.float() - o.float()).abs().max().item() / o.float().abs().max().item()
                    print(f"({v} vs default, {name}: bitwise {torch.equal(g, o)}, max |diff| / max |out| = {d:.2e})")
        ms = timed(run, a.reps, 3 if sum(lens) > 20000 else 10)
        print_row(f"fwd {a.label}", name, lens, flops(lens, D), ms, cols)
        base = ms.get("default")
        if base:
            print(f"| {name} x / default | | " + " | ".join(f"{ms[c] / base:.3f}x" for c in cols) + " |", flush=True)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
