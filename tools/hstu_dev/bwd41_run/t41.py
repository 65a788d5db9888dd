"""bwd41's timer (issue 39): the portable backward's D = 128 loop variants against FA2, one process.

  python3 -P t41.py time --bench R/benchmarks --variants main c14 c13 --shapes B16:S16384:D128 [--reps 5]
      the backward of each variant under kernel_options(sm90=False): main = the branch's default (D = 128: the
      dQ-first body with the lane offsets once), c14 = bwd_sm80_cfg=14 (main's loop before: the fixed-order body,
      SASS-identical to main d7a8eec6's kernels), c13 = bwd_sm80_cfg=13 (main's loop with the lane offsets once);
      then FA2 (torch SDPA flash), interleaved, L2 flushed, median of reps
  python3 -P t41.py ncu --bench R/benchmarks --variants main c14 fa2 --shapes B4:S16384:D128   (one backward each)

Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (issue 39's table).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

VARIANTS = {"main": {}, "c14": {"bwd_sm80_cfg": 14}, "c13": {"bwd_sm80_cfg": 13}}


if __name__ == "__main__":
    bwdtime.lab_main(VARIANTS, ["main", "c14"], ["B16:S16384:D128"])
