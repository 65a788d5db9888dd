"""The portable (sm80-class) backward's split of long key-block walks (issue 39, branch zipfb38): the backward's ms
through the raw op (hstu_attn::bwd_with_options, bf16 H4 causal, 3 contexts, alpha D^-1/2) of `main` (the default:
main's path) and `split` (kernel_options(fwd_sm80_cfg=14)), `splitN` (and fwd_split_tiles=N: chunks of N query
tiles), on benchmarks/hstu_attention.py's jagged row (Zipf(1.2) B32 max 4K, seed 0, 3,640 tokens) and its dense twin
B2 S1820, per head dim, one process: CUDA graphs of 10 calls, variants interleaved per round, median of --reps
rounds (fwd17_jag.py's timer). Prints each variant / main and Zipf / dense TFLOP/s per variant.
--edge: also the seed-1 Zipf batch, B16 S4K causal (no contexts), B8 S1K.
--check: dK / dV of split vs main (max error relative to max |main|) first.
--prof: then each kernel's time per call (torch.profiler, us, mean of 5 eager calls) of main / split on the pair.

--cfg13: at D = 256 also main13 / split13 (bwd_sm80_cfg=13: the loop without the split S / dP).

Usage: zipfb38_bench.py LABEL [--dims 64 128 256] [--reps 5] [--chunks 6 10] [--edge] [--check] [--prof] [--cfg13]"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (carried beside fwd17_jag.py and labtime.py)
sys.path.insert(0, os.path.join(HERE, "..", "fwd17_run"))
sys.path.insert(0, os.path.join(HERE, "..", "runlib"))
from fwd17_jag import H, flops, timed, zipf_lengths  # noqa: E402
import labtime  # noqa: E402


def bwd_call(lens, D, cfg=0, chunk=None, ctx=3, seed=5, bcfg=0):
    """one backward of the batch through the raw op under kernel_options(sm90=False, fwd_sm80_cfg=cfg,
    bwd_sm80_cfg=bcfg[, fwd_split_tiles=chunk])"""
    from hstu_attn import _ops
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    nc = torch.tensor([min(ctx, L) for L in lens], device="cuda", dtype=torch.int32) if ctx else None
    S = max(lens)
    kw = dict(sm90=False, fwd_sm80_cfg=cfg, bwd_sm80_cfg=bcfg)
    if chunk:
        kw["fwd_split_tiles"] = chunk
    with _ops.kernel_options(**kw):
        opts = _ops._current_options()
    bwd = torch.ops.hstu_attn.bwd_with_options
    return lambda: bwd(do, q, k, v, cu, cu, S, S, nc, None, 1, -1, 0, D ** -0.5, None, float(S), None, None, False,
                       False, opts)


def variants(lens, D, chunks, ctx=3, cfg13=False):
    v = {"main": bwd_call(lens, D, 0, ctx=ctx), "split": bwd_call(lens, D, 14, ctx=ctx)}
    for n in chunks:
        v[f"split{n}"] = bwd_call(lens, D, 14, n, ctx=ctx)
    if cfg13 and D == 256:  # (bwd_sm80_cfg=13: the loop without the split S / dP, main's and the split's)
        v["main13"] = bwd_call(lens, D, 0, ctx=ctx, bcfg=13)
        v["split13"] = bwd_call(lens, D, 14, ctx=ctx, bcfg=13)
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunks", nargs="*", type=int, default=[])
    ap.add_argument("--edge", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--prof", action="store_true")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--cfg13", action="store_true", help="D = 256: also main13 / split13 (bwd_sm80_cfg=13)")
    a = ap.parse_args()
    jag = zipf_lengths(32, 4096)
    dense = [sum(jag) // 2] * 2
    print(f"## zipfb38 {a.label}: {torch.cuda.get_device_name()}, bf16 H{H} backward, CUDA graphs of 10 calls, "
          f"median of {a.reps} interleaved rounds; Zipf B32 max 4K ({sum(jag)} tokens, max {max(jag)}) / "
          f"dense B2 S{dense[0]}, causal ctx3", flush=True)
    if a.check:
        for D in a.dims:
            for name, lens in (("zipf", jag), ("dense", dense)):
                m = bwd_call(lens, D, 0)()
                s = bwd_call(lens, D, 14)()
                s2 = bwd_call(lens, D, 14, 2)()
                errs = []
                for i, n in enumerate(("dq", "dk", "dv")):
                    den = m[i].float().abs().max().item() + 1e-6
                    errs.append(f"{n} {(s[i].float() - m[i].float()).abs().max().item() / den:.2e}/"
                                f"{(s2[i].float() - m[i].float()).abs().max().item() / den:.2e}")
                print(f"(check D{D} {name}: split/split2 vs main, max err / max |main|: {', '.join(errs)})",
                      flush=True)
    for D in a.dims if not a.no_time else []:
        cases = [("zipf", jag, 3), ("dense", dense, 3)]
        if a.edge:
            jag1 = zipf_lengths(32, 4096, seed=1)
            cases += [("zipf s1", jag1, 3), ("B16 S4K nctx", [4096] * 16, 0), ("B8 S1K", [1024] * 8, 3)]
        res = {}
        for name, lens, ctx in cases:
            res[name] = timed(variants(lens, D, a.chunks, ctx, a.cfg13), a.reps, 3 if sum(lens) > 20000 else 10)
            fl = 2.5 * flops(lens, D)
            print(f"| D{D} {name} | " + " | ".join(f"{c} {ms:.4f} ({fl / ms / 1e9:.0f})" for c, ms in res[name].items())
                  + " |", flush=True)
        for name in res:
            print(f"(D{D} {name}: " + ", ".join(f"{c} / main {ms / res[name]['main']:.3f}"
                                                for c, ms in res[name].items() if c != "main") + ")")
        for c in res["zipf"]:
            r = 100 * flops(jag, D) / res["zipf"][c] / (flops(dense, D) / res["dense"][c])
            r_main = 100 * flops(jag, D) / res["zipf"][c] / (flops(dense, D) / res["dense"]["main"])
            print(f"(D{D} Zipf / dense TFLOP/s, {c}: {r:.1f} % (vs main's dense: {r_main:.1f} %))", flush=True)
    if a.prof:
        prof(jag, dense, a.dims)


def prof(jag, dense, dims, n=5):
    """each kernel's time per call (us) of main and split on the Zipf pair"""
    for D in dims:
        for name, lens in (("zipf", jag), ("dense", dense)):
            for var, cfg in (("main", 0), ("split", 14)):
                per = labtime.per_call(labtime.kernel_times(bwd_call(lens, D, cfg), n=n, warmup=2), n, width=34)
                print(f"(prof D{D} {name} {var}: {labtime.top_kernels(per)})", flush=True)


if __name__ == "__main__":
    main()
