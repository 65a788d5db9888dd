"""One forward of the Zipf batch and of its dense twin (benchmarks/hstu_attention.py's jagged row: Zipf(1.2) B32 max 4K,
seed 0; B2 S1820; bf16 H4 causal ctx3, kernel_options(sm90=False)) at each head dim given, for Nsight Compute (run
under `ncu --kernel-name regex:...`): where the split's list kernel and split kernel spend their time (issue 39,
branch zipf33). Two calls per batch (the second is the one to profile: --launch-skip).

Usage: ncu ... python3 zipf33_ncu.py [D ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (carried beside fwd17_jag.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd17_run"))
from fwd17_jag import ours, zipf_lengths  # noqa: E402


def main():
    jag = zipf_lengths(32, 4096)
    for D in [int(x) for x in sys.argv[1:]] or [64]:
        for lens in (jag, [sum(jag) // 2] * 2):
            fn = ours(lens, D, "0", 3)
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
    print("done", flush=True)


if __name__ == "__main__":
    main()
