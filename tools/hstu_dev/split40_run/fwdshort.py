"""Issue 39's short-sequence forward shapes against FA2 (session 37, the lead): the portable forward's default
(cfg 0) and every comparison cfg (kernel_options(sm90=False, fwd_sm80_cfg=c): candidates 1-5, 6 the old default
tiles, 7 the split) beside torch's flash SDPA, bf16 H4 causal, CUDA graphs of 10 calls, interleaved rounds, median
(fwd17_jag.py's table). Usage: fwdshort.py LABEL [--reps 5] [--cfgs 0 1 2 ...]"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "fwd17_run")]
from fwd17_jag import table  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("label")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--cfgs", nargs="+", default=["0", "1", "2", "3", "4", "5", "6", "7"])
a = ap.parse_args()
cases = [("B128 S1K D128", [1024] * 128, 128, {}), ("B256 S256 D256", [256] * 256, 256, {}),
         ("B128 S1K D256", [1024] * 128, 256, {}), ("B16 S4K D128", [4096] * 16, 128, {})]
table(f"fwdshort {a.label}: issue 39's short shapes, ours by cfg and FA2", cases, a.cfgs, a.reps, a.label,
      fa2_for={c[0] for c in cases})
