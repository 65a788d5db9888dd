"""bwd43's timer (issue 39): the portable backward's D = 64 loop (kPdsPipeS) against main's loop and FA2, one process.

  python3 -P t43.py time --bench R/benchmarks --variants main c6 --shapes B16:S8192:D64 B16:S4096:D64:C512 [--reps 7]
      the backward of each variant under kernel_options(sm90=False): main = the branch's default (D = 64: the
      128-query tiles with the second half's S MMAs in the first half's SiLU block), c6 = bwd_sm80_cfg=6 (main's loop
      before: the tiles without kPdsPipeS); then FA2 (torch SDPA flash), interleaved, L2 flushed, median of reps

Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (issue 39's table); a fourth field C<n> gives each
sequence n context rows (runlib/bwdtime.py's dense_case: the context kernel; FA2 the plain causal call).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib")]
import bwdtime  # noqa: E402

VARIANTS = {"main": {}, "c6": {"bwd_sm80_cfg": 6}}


if __name__ == "__main__":
    bwdtime.lab_main(VARIANTS, ["main", "c6"], ["B16:S8192:D64"])
