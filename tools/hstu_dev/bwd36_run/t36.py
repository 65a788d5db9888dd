"""bwd36's timer (issue 39): the portable backward under bwd_sm80_cfg values against FA2, in one process.

  python3 -P t36.py time --bench R/benchmarks --cfgs 0 14 --shapes B128:S1024:D128 ... [--reps 7] [--rounds 2]
  python3 -P t36.py prof --bench R/benchmarks --cfgs 0 14 --shapes B128:S1024:D128

time: per shape (dense, causal, H = 4, bf16) the backward op of every cfg (kernel_options(sm90=False, bwd_sm80_cfg=c):
the private op the product benchmark times) and FA2's backward as benchmarks/hstu_attention.py calls it (aten's flash
backward on (B, S, H, D) views), interleaved by the benchmark's Timer (L2 flushed, median of reps; `rounds` times,
the smallest median kept), with the ratios cfg / cfg 0 and cfg / FA2. prof: one backward per cfg under
torch.profiler, each kernel's device time (the loop alone, the fill and the convert).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]  # labtime.py: carried beside this file, or in the tree
import labtime  # noqa: E402


def shape(s):
    b, sl, d = s.split(":")
    return int(b[1:]), int(sl[1:]), int(d[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["time", "prof"])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0, 14])
    ap.add_argument("--alt", default="", help="D:cfg[/cfg...],...: at head dim D the cfgs are 0 and those instead of "
                    "--cfgs")
    ap.add_argument("--shapes", nargs="+", default=["B128:S1024:D128"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-fa2", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, a.bench)
    import hstu_attention as ha  # the product benchmark (its Case, Timer, timed_calls, Fa2Peer)
    from hstu_attn._ops import kernel_options

    dev = torch.device("cuda")
    print(f"#### {a.mode} ({torch.cuda.get_device_name(0)}, torch {torch.__version__}; bf16 causal H4; ms)")
    timer = ha.Timer(dev, warmup=3, reps=a.reps, warmup_ms=100.0)
    fa2 = None if a.no_fa2 else ha.Fa2Peer(dev)
    alt = {int(x.split(":")[0]): [int(c) for c in x.split(":")[1].split("/")] for x in a.alt.split(",") if x}
    for s in a.shapes:
        B, S, D = shape(s)
        cfgs = [0] + alt[D] if D in alt else a.cfgs
        case = ha.Case("portable", s, [S] * B, 4, D)
        total, H = B * S, 4
        cu = torch.tensor([0] + case.lengths, device=dev).cumsum(0).to(torch.int32)
        q, k, v, dout = (torch.randn(total, H, D, device=dev, dtype=torch.bfloat16) for _ in range(4))
        args = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5, None, float(S), None, None)
        fns, labels = [], []
        for c in cfgs:
            with kernel_options(sm90=False, bwd_sm80_cfg=c):
                fns.append(ha.timed_calls(q, k, v, dout, args)[1])
            labels.append(f"cfg{c}")
        if fa2 is not None:
            fns.append(fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)[1])
            labels.append("fa2")
        if a.mode == "time":
            best = None
            for _ in range(a.rounds):
                t = timer.interleaved(*fns)
                best = t if best is None else [min(x, y) for x, y in zip(best, t)]
            line = f"{s:18s} " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, best))
            base = best[0]
            line += " | " + " ".join(f"{lab}/cfg{cfgs[0]} {t / base - 1:+.2%}" for lab, t in
                                     zip(labels[1:len(cfgs)], best[1:len(cfgs)]))
            if fa2 is not None:
                line += " | " + " ".join(f"fa2/{lab} {best[-1] / t:.3f}x" for lab, t in
                                         zip(labels[:len(cfgs)], best[:len(cfgs)]))
            print(line, flush=True)
        else:
            for lab, fn in zip(labels, fns):
                ks = labtime.kernel_times(fn, n=3, warmup=3)
                print(f"#### prof {s} {lab}")
                for n, ts in sorted(ks.items(), key=lambda x: -sum(x[1])):
                    print(f"  {sum(ts) / len(ts):9.1f} us x{len(ts)}  {n[:150]}")
        del q, k, v, dout, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
