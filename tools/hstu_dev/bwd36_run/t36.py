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
# labtime.py, bwdtime.py (the shapes, inputs and FA2, shared with t38.py / t39.py): carried beside this file, or in the
# tree's runlib/
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402
import labtime  # noqa: E402


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
    bt = bwdtime.Lab(a)
    timer, fa2 = bt.timer, bt.fa2
    alt = {int(x.split(":")[0]): [int(c) for c in x.split(":")[1].split("/")] for x in a.alt.split(",") if x}
    for s in a.shapes:
        D = bwdtime.shape(s)[2]
        cfgs = [0] + alt[D] if D in alt else a.cfgs
        pairs, labels = bt.calls(s, [f"cfg{c}" for c in cfgs], {f"cfg{c}": {"bwd_sm80_cfg": c} for c in cfgs},
                                 check_peer=False)
        fns = [p[1] for p in pairs]
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
        del fns, pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
