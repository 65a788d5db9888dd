"""The portable forward's fixed part at D = 256 (issue 39, branch fwd34): fwd32_bench.py's shapes and timing
(carried beside this file with fwd30 / fwd31_bench.py) and the variants of kernel_options(fwd_sm80_bm64=n) at
D = 256 (hstu_fwd_xpfx_kernel, FwdSm80PairsPfX: the default's warp pairs with): "vepw" (n = 1) the first V copy in
the prologue and the epilogue staged per warp without the block's barriers, "l2n" (2) the next block's Q and first
K / V tiles prefetched into L2, "all" (3) the three; with fwd_sm80_interleave=False (D = 64's switch): "ve" (1)
the first V copy alone, "l2far" (2) the prefetch two SM counts ahead, "l2walk" (3) the prefetch of the next block's
last 4 K / V tiles.

Usage: fwd34_bench.py LABEL [fwd30_bench.py's options]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402
import fwd32_bench  # noqa: E402, F401  (its shapes and switches)

fwd30_bench.SWITCHES.update({"vepw": {"fwd_sm80_bm64": 1}, "l2n": {"fwd_sm80_bm64": 2}, "all": {"fwd_sm80_bm64": 3},
                             "ve": {"fwd_sm80_bm64": 1, "fwd_sm80_interleave": False},
                             "l2far": {"fwd_sm80_bm64": 2, "fwd_sm80_interleave": False},
                             "l2walk": {"fwd_sm80_bm64": 3, "fwd_sm80_interleave": False}})

if __name__ == "__main__":
    fwd30_bench.main()
