"""bwdfa39's timer (issue 39): the portable kernels against FA2 and NVIDIA's Ampere HSTU (the peer), one process.

  python3 -P t39.py table --bench R/benchmarks --shapes B16:S4096:D128 ... [--reps 10] [--peer]
      forward and backward of ours (kernel_options(sm90=False): what `benchmarks/hstu_attention.py --kernels
      portable` times), FA2 and the peer, interleaved per direction (L2 flushed, median of reps)
  python3 -P t39.py time --bench R/benchmarks --variants main v2 --shapes B16:S16384:D128 [--prof-shapes ...]
      the backward of each variant (main = main's path, v2* = kernel_options(bwd_sm80_cfg=2[, bwd_grid=g])), FA2 (and
      the peer)
  python3 -P t39.py ncu --bench R/benchmarks --variants main fa2 --shapes B4:S16384:D128   (one backward each)

Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (issue 39's table).
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]  # labtime.py: carried beside this file, or in the tree
import labtime  # noqa: E402

# v2: kernel_options(bwd_sm80_cfg=2) on branch bwdfa39's wheel (kPdsDqMid: dQ between dV and dK; on main's wheel cfg 2
# is another comparison), its lab forms by bwd_grid (1: with D = 64's dQ-first warps 4-7 (at D = 128 too); 2 (D =
# 128): the dQ-first warps 4-7 alone)
# fill / claim (bwd40): kernel_options(fwd_sm80_cfg=15) the dQ workspace zeroed by the op (main's path before bwd40),
# 13 the dQ claims wherever they apply
VARIANTS = {"main": {}, "v2": {"bwd_sm80_cfg": 2}, "v2g1": {"bwd_sm80_cfg": 2, "bwd_grid": 1},
            "v2g2": {"bwd_sm80_cfg": 2, "bwd_grid": 2}, "fill": {"fwd_sm80_cfg": 15}, "claim": {"fwd_sm80_cfg": 13}}


def shape(s):
    b, sl, d = s.split(":")
    return int(b[1:]), int(sl[1:]), int(d[1:])


def prof_kernels(label, s, fn):
    ks = labtime.kernel_times(fn, n=3, warmup=3)
    tot = sum(sum(ts) for ts in ks.values()) / 3
    print(f"#### prof {s} {label} (sum of kernels {tot:.1f} us)")
    for n_, ts in sorted(ks.items(), key=lambda x: -sum(x[1])):
        print(f"  {sum(ts) / 3:9.1f} us x{len(ts) // 3}  {n_[:140]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["table", "time", "ncu"])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--variants", nargs="+", default=["main"])
    ap.add_argument("--shapes", nargs="+", default=["B16:S16384:D128"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-fa2", action="store_true")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--prof-shapes", nargs="*", default=[])
    a = ap.parse_args()
    sys.path.insert(0, a.bench)
    import hstu_attention as ha  # the product benchmark (its Case, Timer, timed_calls, Fa2Peer, NvidiaAmperePeer)
    from hstu_attn._ops import kernel_options

    t0 = time.time()
    dev = torch.device("cuda")
    print(f"#### {a.mode} ({torch.cuda.get_device_name(0)}, torch {torch.__version__}; bf16 causal H4; ms)", flush=True)
    timer = ha.Timer(dev, warmup=3, reps=a.reps, warmup_ms=100.0)
    fa2 = None if a.no_fa2 or (a.mode == "ncu" and "fa2" not in a.variants) else ha.Fa2Peer(dev)
    peer = None
    if a.peer:
        try:
            peer = ha.NvidiaAmperePeer(dev)
        except SystemExit as e:
            print(f"(no peer: {e})")
    ours = [x for x in a.variants if x in VARIANTS]
    if a.mode == "table":
        ours = ours[:1]
    for s in a.shapes:
        B, S, D = shape(s)
        case = ha.Case("portable", s, [S] * B, 4, D)
        total, H = B * S, 4
        cu = torch.tensor([0] + case.lengths, device=dev).cumsum(0).to(torch.int32)
        q, k, v, dout = (torch.randn(total, H, D, device=dev, dtype=torch.bfloat16) for _ in range(4))
        args = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5, None, float(S), None, None)
        pairs, labels = [], []
        for x in ours:
            with kernel_options(sm90=False, **VARIANTS[x]):
                pairs.append(ha.timed_calls(q, k, v, dout, args))
            labels.append(x)
        if fa2 is not None:
            pairs.append(fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S))
            labels.append("fa2")
        if peer is not None:
            try:
                pp = peer.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)
                pp[1]()
                torch.cuda.synchronize()
                pairs.append(pp)
                labels.append("peer")
            except Exception as e:  # (a shape the peer's build does not cover)
                print(f"(peer n/a at {s}: {str(e)[:100]})")
        n = len(ours)
        if a.mode == "table":
            fw = timer.interleaved(*[p[0] for p in pairs])
            bw = timer.interleaved(*[p[1] for p in pairs])
            line = f"TABLE {s:16s} fwd " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, fw))
            line += " | bwd " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, bw))
            line += " | " + " ".join(f"{labels[j]}/ours fwd {fw[j] / fw[0]:.3f}x bwd {bw[j] / bw[0]:.3f}x"
                                     for j in range(1, len(labels)))
            print(line + f" | at {time.time() - t0:.1f} s", flush=True)
        fns = [p[1] for p in pairs]
        if a.mode == "time":
            best = None
            for _ in range(a.rounds):
                t = timer.interleaved(*fns)
                best = t if best is None else [min(x, y) for x, y in zip(best, t)]
            line = f"{s:18s} " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, best))
            line += " | " + " ".join(f"{lab}/main {t / best[0] - 1:+.2%}" for lab, t in zip(labels[1:n], best[1:n]))
            for j in range(n, len(labels)):
                line += " | " + " ".join(f"{labels[j]}/{lab} {best[j] / t:.3f}x"
                                         for lab, t in zip(labels[:n], best[:n]))
            print(line + f" | at {time.time() - t0:.1f} s", flush=True)
        if a.mode == "ncu":
            for fn in fns:
                fn()
            torch.cuda.synchronize()
        if a.mode != "ncu" and s in a.prof_shapes:
            for lab, fn in zip(labels, fns):
                prof_kernels(lab, s, fn)
        del q, k, v, dout, fns, pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
