"""tab44's profile of the table's weakest cells (issue 39, session 41): forward and backward of ours (main's path,
and variants through kernel_options), FA2 and the peer at a few shapes, timed interleaved in one process, then each
call's kernels under torch.profiler (the forward's too, which t39.py does not profile).

  python3 -P t44.py prof --bench R/benchmarks --variants main claim --shapes B256:S256:D256 [--reps 10] [--peer]
      per shape: one `FWD` line (ours' variants, FA2, the peer), one `BWD` line, then `#### prof` blocks (us per
      kernel, one call) for every label and direction

Variants: main = kernel_options(sm90=False), what `benchmarks/hstu_attention.py --kernels portable` times; claim =
+ fwd_sm80_cfg=13 (the backward's dQ workspace by claims, no fill: bwd38 / bwd40; the default at bf16 D = 128 / 256
heads first since sessions 41-42); fill = + fwd_sm80_cfg=15 (the default with the fill).
Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (runlib/bwdtime.py).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

VARIANTS = {"main": {}, "claim": {"fwd_sm80_cfg": 13}, "fill": {"fwd_sm80_cfg": 15}}


def line(tag, s, labels, times, n):
    out = f"{tag} {s:16s} " + " ".join(f"{lab} {t:.4f}" for lab, t in zip(labels, times))
    out += " | " + " ".join(f"{lab}/main {t / times[0] - 1:+.2%}" for lab, t in zip(labels[1:n], times[1:n]))
    out += " | " + " ".join(f"{labels[j]}/main {times[j] / times[0]:.3f}x" for j in range(n, len(labels)))
    return out


def main():
    ap = argparse.ArgumentParser()
    bwdtime.add_args(ap, ["prof"], ["main"], ["B256:S256:D256"])
    a = ap.parse_args()
    bt = bwdtime.Lab(a)
    ours = [x for x in a.variants if x in VARIANTS]
    for s in a.shapes:
        pairs, labels = bt.calls(s, ours, VARIANTS, check_peer=True)
        n = len(ours)
        # the forward: one of ours (the variants differ in the backward only)
        fw = bt.timer.interleaved(*[p[0] for j, p in enumerate(pairs) if j == 0 or j >= n])
        flabels = [lab for j, lab in enumerate(labels) if j == 0 or j >= n]
        print(line("FWD", s, flabels, fw, 1) + f" | at {bt.elapsed():.1f} s", flush=True)
        bw = bt.timer.interleaved(*[p[1] for p in pairs])
        print(line("BWD", s, labels, bw, n) + f" | at {bt.elapsed():.1f} s", flush=True)
        for j, (label, (f, b)) in enumerate(zip(labels, pairs)):
            if j == 0 or j >= n:
                bwdtime.prof_kernels(label + " fwd", s, f)
            bwdtime.prof_kernels(label + " bwd", s, b)
        del pairs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
