"""The portable forward at D = 256 with warp-group copies and barriers (issue 39, branch d256f37): d256_bench.py's
shapes and fwd30_bench.py's timing (carried beside this file with fwd17_jag.py and fwd30 / fwd31 / fwd32_bench.py:
CUDA graphs of n calls, variants interleaved per round, median of rounds; outputs against the default's, bitwise?)
with the variants "g1" = kernel_options(fwd_sm80_cfg=13) (FwdSm80PairsGrp<1>: each warp group copies the K / V halves
it reads and meets on 64-thread barriers of its own) and "g3" = fwd_sm80_cfg=14 (FwdSm80PairsGrp<3>: g1 with the
copies spread over the MMA steps), "m16" = 13 with fwd_sm80_interleave=False (FwdSm80PairsGrp<16>: the block's
copies in the default's mapping with two smem bases and immediates, in one run after each barrier), "m18" = 14 with
fwd_sm80_interleave=False (<18>: those copies spread over the MMA steps); "default" is main's kernel (runs 1-2's g2,
c4 and s8, <2>, <4> and <8>, are no longer built) (hstu_fwd_xpf_kernel). --peer: NVIDIA's Ampere HSTU
forward (the module in --peer-dir, default .carry/peer35/peer of the tree it runs from, called as
benchmarks/hstu_attention.py's NvidiaAmperePeer does) as one more column in the same rounds, beside --fa2's FA2.

Usage: d256_bench37.py LABEL [--reps 5] [--variants default g1 g3] [--cases s4k256 ...] [--fa2] [--peer] [--ncu]"""
import argparse
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402
import d256_bench  # noqa: E402, F401  (its shapes and switches)
from fwd17_jag import H, fa2, flops, print_row, timed  # noqa: E402

fwd30_bench.SWITCHES.update({"g1": {"fwd_sm80_cfg": 13}, "g3": {"fwd_sm80_cfg": 14},
                            "m16": {"fwd_sm80_cfg": 13, "fwd_sm80_interleave": False},
                            "m18": {"fwd_sm80_cfg": 14, "fwd_sm80_interleave": False}})


def peer(B, S, D, peer_dir, seed=4):
    """NVIDIA's Ampere HSTU forward, causal, alpha D^-1/2 (None where the module does not import)"""
    sys.path.insert(0, peer_dir)
    spec = importlib.util.spec_from_file_location("ha", os.path.join(os.getcwd(), "benchmarks", "hstu_attention.py"))
    ha = sys.modules.get("ha") or importlib.util.module_from_spec(spec)
    try:
        if "ha" not in sys.modules:
            sys.modules["ha"] = ha  # (its dataclasses look their module up there)
            spec.loader.exec_module(ha)
        pr = ha.NvidiaAmperePeer(torch.device("cuda"))
    except (Exception, SystemExit) as e:  # (the timing goes on without the peer)
        print(f"(peer: {e})")
        return None
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * S
    fa = ha.hstu_peer_args(pr.fwd_types, [q, k, v, cu, cu, S, S], (None, None, 1, -1, 0, D ** -0.5, None), S, S)

    def call():
        with torch.no_grad():
            return pr.module.varlen_fwd(*fa)[0]
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", nargs="*", default=["default", "g1", "g3"])
    ap.add_argument("--cases", nargs="*", default=["s4k256", "b256"])
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--peer-dir", default=os.path.join(".carry", "peer35", "peer"))
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    if a.ncu:
        return fwd30_bench.main()
    print(f"## {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal, forward ms (TFLOP/s, causal FLOPs), "
          f"CUDA graphs, median of {a.reps} interleaved rounds")
    cols = list(a.variants) + (["FA2"] if a.fa2 else []) + (["peer"] if a.peer else [])
    print("| case | tokens | " + " | ".join(cols) + " |\n|---|---:|" + "---:|" * len(cols))
    for key in a.cases:
        name, B, S, D = fwd30_bench.SHAPES[key]
        lens = [S] * B
        run = {v: fwd30_bench.ours(lens, D, v) for v in a.variants}
        if a.fa2:
            run["FA2"] = fa2(B, S, D)
        if a.peer:
            pc = peer(B, S, D, os.path.abspath(a.peer_dir))
            if pc is not None:
                run["peer"] = pc
        cols_here = [c for c in cols if c in run]
        o = run["default"]()
        for v in a.variants:
            if v == "default":
                continue
            g = run[v]()
            d = (g.float() - o.float()).abs().max().item() / o.float().abs().max().item()
            print(f"({v} vs default, {name}: bitwise {torch.equal(g, o)}, max |diff| / max |out| = {d:.2e})")
        ms = timed(run, a.reps, 3 if sum(lens) > 20000 else 10)
        print_row(f"fwd {a.label}", name, lens, flops(lens, D), ms, cols_here)
        base = ms["default"]
        print(f"| {name} x / default | | " + " | ".join(f"{ms[c] / base:.3f}x" for c in cols_here) + " |")
        if "FA2" in ms:
            print(f"| {name} FA2 / x | | " + " | ".join(f"{ms['FA2'] / ms[c]:.3f}x" for c in cols_here) + " |")
        if "peer" in ms:
            print(f"| {name} peer / x | | " + " | ".join(f"{ms['peer'] / ms[c]:.3f}x" for c in cols_here) + " |",
                  flush=True)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
