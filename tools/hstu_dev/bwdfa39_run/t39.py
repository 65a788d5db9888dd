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

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# labtime.py, bwdtime.py (the shapes, inputs, FA2, the peer and the time line, shared with t38.py): carried beside this
# file, or in the tree's runlib/
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

# v2: kernel_options(bwd_sm80_cfg=2) on branch bwdfa39's wheel (kPdsDqMid: dQ between dV and dK; on main's wheel cfg 2
# is another comparison), its lab forms by bwd_grid (1: with D = 64's dQ-first warps 4-7 (at D = 128 too); 2 (D =
# 128): the dQ-first warps 4-7 alone)
# fill / claim (bwd40): kernel_options(fwd_sm80_cfg=15) the dQ workspace zeroed by the op (main's path before bwd40),
# 13 the dQ claims wherever they apply
VARIANTS = {"main": {}, "v2": {"bwd_sm80_cfg": 2}, "v2g1": {"bwd_sm80_cfg": 2, "bwd_grid": 1},
            "v2g2": {"bwd_sm80_cfg": 2, "bwd_grid": 2}, "fill": {"fwd_sm80_cfg": 15}, "claim": {"fwd_sm80_cfg": 13}}


def main():
    ap = argparse.ArgumentParser()
    bwdtime.add_args(ap, ["table", "time", "ncu"], ["main"], ["B16:S16384:D128"])
    a = ap.parse_args()
    bt = bwdtime.Lab(a)
    ours = [x for x in a.variants if x in VARIANTS]
    if a.mode == "table":
        ours = ours[:1]
    for s in a.shapes:
        pairs, labels = bt.calls(s, ours, VARIANTS, check_peer=True)
        n = len(ours)
        if a.mode == "table":
            fw = bt.timer.interleaved(*[p[0] for p in pairs])
            bw = bt.timer.interleaved(*[p[1] for p in pairs])
            line = f"TABLE {s:16s} fwd " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, fw))
            line += " | bwd " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, bw))
            line += " | " + " ".join(f"{labels[j]}/ours fwd {fw[j] / fw[0]:.3f}x bwd {bw[j] / bw[0]:.3f}x"
                                     for j in range(1, len(labels)))
            print(line + f" | at {bt.elapsed():.1f} s", flush=True)
        fns = [p[1] for p in pairs]
        if a.mode == "time":
            bt.time_line(s, labels, fns, n)
        if a.mode == "ncu":
            bwdtime.run_once(fns)
        if a.mode != "ncu" and s in a.prof_shapes:
            for label, fn in zip(labels, fns):
                bwdtime.prof_kernels(label, s, fn)
        del fns, pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
