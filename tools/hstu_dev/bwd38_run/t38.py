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

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# labtime.py, bwdtime.py (the shapes, inputs, FA2, the peer and the time line, shared with t39.py): carried beside this
# file, or in the tree's runlib/
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

# (late: runs 1-3's late publication at D = 128, removed after run 3; with the final code it runs the fill path)
VARIANTS = {"main": {}, "claim": {"fwd_sm80_cfg": 13}, "late": {"fwd_sm80_cfg": 13, "bwd_sm80_cfg": 14}}


def main():
    ap = argparse.ArgumentParser()
    bwdtime.add_args(ap, ["time", "prof", "ncu"], ["main", "claim"], ["B128:S1024:D128"],
                     prof_help="time: these shapes profiled too (one process)")
    a = ap.parse_args()
    bt = bwdtime.Lab(a)
    ours = [x for x in a.variants if x in VARIANTS]
    for s in a.shapes:
        pairs, labels = bt.calls(s, ours, VARIANTS, check_peer=False)
        fns = [p[1] for p in pairs]
        if a.mode == "time":  # (the prof block below runs too for --prof-shapes)
            bt.time_line(s, labels, fns, len(ours))
        if a.mode == "ncu":
            bwdtime.run_once(fns)
        if a.mode == "prof" or (a.mode == "time" and s in a.prof_shapes):
            for label, fn in zip(labels, fns):
                bwdtime.prof_kernels(label, s, fn)
        del fns, pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
