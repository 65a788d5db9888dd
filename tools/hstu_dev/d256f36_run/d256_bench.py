"""The portable forward at D = 256 in 128-row tiles (issue 39, branch d256f36): fwd32_bench.py's shapes and timing
(carried beside this file with fwd30 / fwd31_bench.py) with B16 S8K and B128 S1K D256 added, and the variant "wide" =
kernel_options(fwd_sm80_bm64=1) at D = 256 (FwdSm80PairsWide: the default's warp pairs in 128 x 64 tiles of 8 warps,
K / V double-buffered, one block per SM), "shift" = fwd_sm80_bm64=2 (FwdSm80PairsWideShift: wide with the second
half of the warps' P V one step late); "default" is main's kernel (hstu_fwd_xpf_kernel, 64 x 64, 2 blocks per SM).

Usage: d256_bench.py LABEL [fwd30_bench.py's options]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402
import fwd32_bench  # noqa: E402, F401  (its shapes and switches)

fwd30_bench.SHAPES.update({"s8k256": ("B16 S8K D256", 16, 8192, 256),
                           "b128s1k256": ("B128 S1K D256", 128, 1024, 256)})
fwd30_bench.SWITCHES.update({"wide": {"fwd_sm80_bm64": 1}, "shift": {"fwd_sm80_bm64": 2}})

if __name__ == "__main__":
    fwd30_bench.main()
