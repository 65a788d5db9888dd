"""Device diagnostic (not a test) of the session-9 mismatches between hybrid and all-HBM training steps (calls 7,
10, 12). Finding: the all-HBM step is not bitwise repeatable when the segmented backward cuts a segment of a
repeated id at a warp boundary and the pieces are not exact to combine (3+ entries, or per-sample weights / mean
pooling: the uncut sum is one FMA per entry); the cuts move between runs because the CSR is in unique order and
the dedup's atomicCAS race picks the unique numbering (test_hybrid_step_gpu.py, comment above NOCUT). Prints, for
each setting of test_hybrid_step_gpu.SETTINGS and `rounds` rounds of one_round, how many rounds differ:
  cut   (chunk 32, hot ids uncapped, weights): > 0 expected, the all-HBM control included (call 12: 8/12);
  cut2  (chunk 32, ids at most twice, no weights) and nocut (chunk 2^20, uncapped, weights): 0 expected.
Usage: python3 tools/dynamicemb_dev/hybrid_step_diag.py [rounds] (from the repository root, the wheels on
PYTHONPATH); ~15 s on an H200. Since session 10 the dedup numbers uniques by first occurrence, so the race named
above is gone (tests/dynamicemb/test_repeatable_step_gpu.py); not re-run since."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "dynamicemb"))
from test_hybrid_step_gpu import one_round  # noqa: E402

if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for setting in ("cut", "cut2", "nocut"):
        for order, opt in (("hbm", "adam"), ("forward", "adam"), ("step", "adam"), ("hbm", "sgd")):
            bad = [(r, why) for r in range(rounds) if (why := one_round(order, opt, r, setting)) is not None]
            vs = "all-HBM vs all-HBM (control)" if order == "hbm" else f"hybrid '{order}' vs all-HBM"
            print(f"{setting} {opt} {vs}: {len(bad)}/{rounds} rounds differ {bad[:3]}", flush=True)
