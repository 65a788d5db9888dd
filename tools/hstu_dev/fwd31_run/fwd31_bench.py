"""The portable (sm80-class) forward's interleaved groups at D = 128 (issue 39, branch fwd31): fwd30_bench.py (carried
beside this file) with D = 128's long-row shapes added (B16 S16K, B128 S1K); "noilv" (fwd_sm80_interleave=False) is
main's kernel at D = 64 and D = 128 (candidate 3) in the branch's process. Part 2 (D = 256's warp pairs with their
ldmatrix addresses as L::xadd): variants "c1" / "c3" / "c5" (fwd_sm80_cfg=1 / 3 / 5; at D = 256 1 is the xadd pairs,
5 the xadd pairs with Q's copy early, 3 main's pairs, and the default main's pairs, Q's copy early on short rows).

Usage: fwd31_bench.py LABEL [fwd30_bench.py's options]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fwd30_bench  # noqa: E402

fwd30_bench.SHAPES.update({"s16k128": ("B16 S16K D128", 16, 16384, 128),
                           "b128s1k128": ("B128 S1K D128", 128, 1024, 128)})
fwd30_bench.SWITCHES.update({f"c{n}": {"fwd_sm80_cfg": n} for n in (1, 3, 5)})

if __name__ == "__main__":
    fwd30_bench.main()
