"""One forward of the Zipf batch and of its dense twin (benchmarks/hstu_attention.py's jagged row: Zipf(1.2) B32 max 4K,
seed 0; B2 S1820; bf16 H4 causal ctx3, kernel_options(sm90=False)) at D = 64, each with the branch's list kernel (the
default) and main's (kernel_options(fwd_sm80_split_plain=True)), for Nsight Compute (run under `ncu --kernel-name
regex:hstu_sm80_fwd_list_kernel --launch-skip 4`): the lean list kernel against main's (issue 39, branch zipf34).
Two calls per (batch, variant), after one warm-up round of all four: the profiled launches are the second round's.

Usage: ncu ... python3 zipf34_ncu.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside fwd17_jag.py, zipf32_bench.py)
for sub in ("fwd17_run", "zipf32_run"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))
from fwd17_jag import ours, zipf_lengths  # noqa: E402
from zipf32_bench import with_options  # noqa: E402


def main():
    jag = zipf_lengths(32, 4096)
    fns = []
    for lens in (jag, [sum(jag) // 2] * 2):
        fns += [ours(lens, 64, "0", 3), with_options(ours(lens, 64, "0", 3), fwd_sm80_split_plain=True)]
    for _ in range(2):  # (round 2: the profiled launches, in the order Zipf lean, Zipf main, dense lean, dense main)
        for fn in fns:
            fn()
        torch.cuda.synchronize()
    print("done", flush=True)


if __name__ == "__main__":
    main()
