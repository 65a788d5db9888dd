"""The portable (sm80-class) forward at D = 256 (issue 39, branch fwd28): bf16 H4 causal forward ms (alpha D^-1/2) of
kernel_options(sm90=False) and of the variants given: "noqs" (fwd_sm80_qscale=False), "cfg<n>" (fwd_sm80_cfg=n),
a "+rab" suffix (a (B, H, S, S) rab) on B16 S4K / B64 S1K / B256 S256 / B128 S512 D256 (and B16 S8K D64: s8k64),
with FA2 (torch's flash SDPA) in the same rounds. Timing as fwd17_jag.py (tools/hstu_dev/fwd17_run): CUDA graphs of
n calls, variants interleaved per round, median of --reps rounds. Prints markdown tables and `fwd LABEL | case |
variant | ms` lines. Main's wheel: --variants default.

Usage: fwd28_bench.py LABEL [--reps 5] [--variants default noqs] [--cases s4k s1k b256] [--fa2]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fwd17_run"))
from fwd17_jag import H, fa2, flops, print_row, timed  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn import _ops  # noqa: E402


def ours(lens, D, variant, seed=2):
    """the forward (sm90=False) with the variant's switches ("default": none; "+rab": with a rab)"""
    variant, _, rab_tag = variant.partition("+")
    opts = dict(sm90=False)
    if variant == "noqs":
        opts["fwd_sm80_qscale"] = False
    elif variant.startswith("cfg"):
        opts["fwd_sm80_cfg"] = int(variant[3:])
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
    ap.add_argument("--variants", nargs="*", default=["default", "noqs"])
    ap.add_argument("--cases", nargs="*", default=["s4k", "s1k", "b256"])
    ap.add_argument("--fa2", action="store_true")
    a = ap.parse_args()
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal, forward ms (TFLOP/s, causal FLOPs), "
          f"CUDA graphs, median of {a.reps} interleaved rounds")
    shapes = {"s4k": ("B16 S4K D256", 16, 4096, 256), "s1k": ("B64 S1K D256", 64, 1024, 256),
              "b256": ("B256 S256 D256", 256, 256, 256), "s512": ("B128 S512 D256", 128, 512, 256),
              "s8k64": ("B16 S8K D64", 16, 8192, 64)}
    cols = list(a.variants) + (["FA2"] if a.fa2 else [])
    print("| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    for key in a.cases:
        name, B, S, D = shapes[key]
        lens = [S] * B
        run = {v: ours(lens, D, v) for v in a.variants}
        if a.fa2:
            run["FA2"] = fa2(B, S, D)
        if "default" in run:  # the variants' outputs against the default's: bitwise? (max |diff| / max |out|)
            o = run["default"]()
            for v in a.variants[1:]:
                if "+" in v:  # (another input)
                    continue
                g = run[v]()
                d = (g.float() - o.float()).abs().max().item() / o.float().abs().max().item()
                print(f"({v} vs default, {name}: bitwise {torch.equal(g, o)}, max |diff| / max |out| = {d:.2e})")
        ms = timed(run, a.reps, 3 if sum(lens) > 20000 else 10)
        print_row(f"fwd {a.label}", name, lens, flops(lens, D), ms, cols)
        base = ms.get("default")
        if base:
            print(f"| {name} x / default | | " + " | ".join(f"{ms[c] / base:.3f}x" for c in cols) + " |",
                  flush=True)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
