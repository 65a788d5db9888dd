"""The portable forward at D = 256 (issue 39, branch fwd32): fwd31_bench.py (carried beside this file: fwd30_bench.py's
timing, variants "c1" / "c3" / "c5" = fwd_sm80_cfg=1 / 3 / 5) with more D = 256 shapes: B64 S1K and B128 S512 (the
rows between B16 S4K and B256 S256, where main's default switched from Q early to Q late at 4 query tiles).

Usage: fwd32_bench.py LABEL [fwd30_bench.py's options]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402
import fwd31_bench  # noqa: E402, F401  (its shapes and switches)

fwd30_bench.SHAPES.update({"b64s1k256": ("B64 S1K D256", 64, 1024, 256),
                           "b128s512d256": ("B128 S512 D256", 128, 512, 256)})

if __name__ == "__main__":
    fwd30_bench.main()
