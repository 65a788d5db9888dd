"""bwd38's timer (issue 39): the portable backward with main's dQ workspace (the op's fill) against
kernel_options(fwd_sm80_cfg=13) (claim: the workspace unzeroed, dQ blocks claimed; late: + bwd_sm80_cfg=14, the claims
published at the next block barrier), FA2 and NVIDIA's Ampere HSTU, one process.

  python3 -P t38.py time --bench R/benchmarks --variants main claim --shapes B128:S1024:D128 ... [--reps 7]
      [--rounds 2] [--peer]      (the peer: hstu_attn_2_cuda on PYTHONPATH)
  python3 -P t38.py prof --bench R/benchmarks --variants main claim --shapes B128:S1024:D128
      (or time ... --prof-shapes S...: the profile in the timing process, after the shape's times)
  python3 -P t38.py ncu --bench R/benchmarks --variants main fa2 --shapes B128:S1024:D128   (one backward each)

time: per shape (dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len) the backward op of every variant
(kernel_options(sm90=False, ...): the private op the product benchmark times), FA2 as benchmarks/hstu_attention.py
calls it and the peer, interleaved by the benchmark's Timer (L2 flushed, median of reps; `rounds` times, the smallest
median kept); ratios variant / main and peer or FA2 / variant. prof: one backward per variant under torch.profiler,
each kernel's device time (fill, loop, convert).
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]  # labtime.py: carried beside this file, or in the tree
import labtime  # noqa: E402

# (late: runs 1-3's late publication at D = 128, removed after run 3; with the final code it runs the fill path)
VARIANTS = {"main": {}, "claim": {"fwd_sm80_cfg": 13}, "late": {"fwd_sm80_cfg": 13, "bwd_sm80_cfg": 14}}


def shape(s):
    b, sl, d = s.split(":")
    return int(b[1:]), int(sl[1:]), int(d[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["time", "prof", "ncu"])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--variants", nargs="+", default=["main", "claim"])
    ap.add_argument("--shapes", nargs="+", default=["B128:S1024:D128"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-fa2", action="store_true")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--prof-shapes", nargs="*", default=[], help="time: these shapes profiled too (one process)")
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
    for s in a.shapes:
        B, S, D = shape(s)
        case = ha.Case("portable", s, [S] * B, 4, D)
        total, H = B * S, 4
        cu = torch.tensor([0] + case.lengths, device=dev).cumsum(0).to(torch.int32)
        q, k, v, dout = (torch.randn(total, H, D, device=dev, dtype=torch.bfloat16) for _ in range(4))
        args = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5, None, float(S), None, None)
        fns, labels = [], []
        for x in ours:
            with kernel_options(sm90=False, **VARIANTS[x]):
                fns.append(ha.timed_calls(q, k, v, dout, args)[1])
            labels.append(x)
        if fa2 is not None:
            fns.append(fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)[1])
            labels.append("fa2")
        if peer is not None:
            try:
                fns.append(peer.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)[1])
                labels.append("peer")
            except Exception as e:  # (a shape the peer's build does not cover)
                print(f"(peer n/a at {s}: {e})")
        if a.mode == "time":
            best = None  # (the prof block below runs too for --prof-shapes)
            for _ in range(a.rounds):
                t = timer.interleaved(*fns)
                best = t if best is None else [min(x, y) for x, y in zip(best, t)]
            n = len(ours)
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
        if a.mode == "prof" or (a.mode == "time" and s in a.prof_shapes):
            for lab, fn in zip(labels, fns):
                ks = labtime.kernel_times(fn, n=3, warmup=3)
                tot = sum(sum(ts) for ts in ks.values()) / 3
                print(f"#### prof {s} {lab} (sum of kernels {tot:.1f} us)")
                for n_, ts in sorted(ks.items(), key=lambda x: -sum(x[1])):
                    print(f"  {sum(ts) / 3:9.1f} us x{len(ts) // 3}  {n_[:140]}")
        del q, k, v, dout, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
