"""The portable (sm80-class) backward's split of long key-block walks as the default by a rule on shapes (issue 39,
branch split39): the backward's ms through the raw op (hstu_attn::bwd_with_options, bf16 H4 causal, alpha D^-1/2)
per variant NAME=CFG (kernel_options(sm90=False, fwd_sm80_cfg=CFG); on split39's wheel 0 the default's rule, 8 the
split always, 14 never (main's path); on main's wheel 0 main's path, 14 the split), one process, CUDA graphs of 10
calls (3 over 20K tokens), variants interleaved per round, median of --reps rounds (fwd17_jag.py's timer). Cases:
the Zipf pair of benchmarks/hstu_attention.py (Zipf(1.2) B32 max 4K, seed 0, 3 contexts / its dense twin B2 S1820)
and, with --edge, shapes around the rule's bound (B8 S1K, B1 S8K, B4 S2K, B16 S4K without contexts). Prints each
variant / the first one and the Zipf / dense TFLOP/s ratio per variant.
--prof: then each kernel's time per call (torch.profiler, us, mean of 5 eager calls) of every variant on the pair.
Session 37 (main's rule, kernel_options(bwd_sm80_split=False) to turn it off): CFG `never` is that option.
Usage: split39_bench.py LABEL --var main=14 default=0 [split=8] [--dims 64 128 256] [--reps 3] [--edge] [--prof]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (carried beside fwd17_jag.py)
sys.path.insert(0, os.path.join(HERE, "..", "fwd17_run"))
from fwd17_jag import H, flops, timed, zipf_lengths  # noqa: E402


def bwd_call(lens, D, cfg=0, ctx=3, seed=5):
    """one backward of the batch through the raw op under kernel_options(sm90=False, fwd_sm80_cfg=cfg)"""
    from hstu_attn import _ops
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    nc = torch.tensor([min(ctx, L) for L in lens], device="cuda", dtype=torch.int32) if ctx else None
    S = max(lens)
    opts = dict(fwd_sm80_cfg=cfg) if isinstance(cfg, int) else {"bwd_sm80_split": False}  # ("never", session 37)
    with _ops.kernel_options(sm90=False, **opts):
        opts = _ops._current_options()
    bwd = torch.ops.hstu_attn.bwd_with_options
    return lambda: bwd(do, q, k, v, cu, cu, S, S, nc, None, 1, -1, 0, D ** -0.5, None, float(S), None, None, False,
                       False, opts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--var", nargs="+", required=True, help="NAME=CFG")
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--edge", action="store_true")
    ap.add_argument("--prof", action="store_true")
    ap.add_argument("--no-time", action="store_true")
    a = ap.parse_args()
    var = dict(v.split("=") for v in a.var)
    var = {k: c if c == "never" else int(c) for k, c in var.items()}
    base = next(iter(var))
    jag = zipf_lengths(32, 4096)
    dense = [sum(jag) // 2] * 2
    print(f"## split39 {a.label}: {torch.cuda.get_device_name()}, bf16 H{H} backward, CUDA graphs, median of "
          f"{a.reps} interleaved rounds; variants {var}; Zipf B32 max 4K ({sum(jag)} tokens, max {max(jag)}) / "
          f"dense B2 S{dense[0]}, causal ctx3", flush=True)
    for D in a.dims if not a.no_time else []:
        cases = [("zipf", jag, 3), ("dense", dense, 3)]
        if a.edge:
            cases += [("B8 S1K", [1024] * 8, 3), ("B1 S8K", [8192], 0), ("B4 S2K", [2048] * 4, 0),
                      ("B16 S4K nctx", [4096] * 16, 0)]
        res = {}
        for name, lens, ctx in cases:
            res[name] = timed({k: bwd_call(lens, D, c, ctx) for k, c in var.items()}, a.reps,
                              3 if sum(lens) > 20000 else 10)
            fl = 2.5 * flops(lens, D)
            print(f"| D{D} {name} | " + " | ".join(f"{c} {ms:.4f} ({fl / ms / 1e9:.0f})" for c, ms in res[name].items())
                  + " | " + ", ".join(f"{c}/{base} {ms / res[name][base]:.3f}" for c, ms in res[name].items()
                                      if c != base) + " |", flush=True)
        for c in res["zipf"]:
            r = 100 * flops(jag, D) / res["zipf"][c] / (flops(dense, D) / res["dense"][c])
            print(f"(D{D} Zipf / dense TFLOP/s, {c}: {r:.1f} %)", flush=True)
    if a.prof:
        for D in a.dims:
            for name, lens in (("zipf", jag), ("dense", dense)):
                for vn, cfg in var.items():
                    fn = bwd_call(lens, D, cfg)
                    for _ in range(2):
                        fn()
                    torch.cuda.synchronize()
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                        for _ in range(5):
                            fn()
                        torch.cuda.synchronize()
                    per = {}
                    for e in p.events():
                        if e.device_type == torch.autograd.DeviceType.CUDA:
                            k = e.name.split("<")[0].split("(")[0].split(" ")[-1][:34]
                            per[k] = per.get(k, 0.0) + (e.time_range.end - e.time_range.start) / 5
                    txt = ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:5])
                    print(f"(prof D{D} {name} {vn}: {txt})", flush=True)


if __name__ == "__main__":
    main()
