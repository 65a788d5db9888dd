"""The portable forward at D = 256 as a persistent grid (issue 39, branch fwd33): fwd32_bench.py's shapes and
timing (carried beside this file with fwd30 / fwd31_bench.py; variants c1 / c3 / c5 = fwd_sm80_cfg=1 / 3 / 5) and the
variant "pers" (kernel_options(fwd_sm80_bm64=1) at D = 256: hstu_fwd_persist_kernel, the default's warp pairs with a
block per resident slot taking the query tiles from a counter, the next tile's Q / K copied during the epilogue; run
2's "p1"; its other variants, the copies before the last step's P V and O stored from the registers, were removed).

Usage: fwd33_bench.py LABEL [fwd30_bench.py's options]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402
import fwd32_bench  # noqa: E402, F401  (its shapes and switches)

fwd30_bench.SWITCHES.update({"pers": {"fwd_sm80_bm64": 1}})

if __name__ == "__main__":
    fwd30_bench.main()
