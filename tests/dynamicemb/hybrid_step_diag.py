"""Device diagnostic (not a test) of the session-9 mismatches between hybrid and all-HBM training steps (calls 7
and 10: `sum-adam-16-psw` and two steps in flight, failing at random iterations, in "step" and "forward" order,
Adam and SGD). Hypothesis: the all-HBM reference is itself not bitwise reproducible when an id occurs 3+ times in
a table's step: the dedup numbers uniques by which occurrence of a repeated id wins its set slot (an atomicCAS
race), the segmented backward's CSR is in unique order, so where a warp boundary cuts a hot id's segment moves
between runs, and its pieces ((a + b) + c against a + (b + c)) round differently. Prints, for 20 rounds of
test_hybrid_step_gpu.one_round each (fresh ids, backward_chunk 32), how many rounds differ from all-HBM tables:
  uncapped (hot ids any number of times): expected > 0 for the all-HBM control too (then the test was wrong);
  capped (each id at most twice per table and step, the tests' inputs): expected 0 everywhere.
Usage: python3 hybrid_step_diag.py [rounds]; ~10 s on an H200."""

import sys

from test_hybrid_step_gpu import one_round

if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for repeat, label in ((None, "uncapped"), (2, "capped")):
        for order, opt in (("hbm", "adam"), ("forward", "adam"), ("step", "adam"), ("hbm", "sgd")):
            bad = [(r, why) for r in range(rounds) if (why := one_round(order, opt, r, repeat=repeat)) is not None]
            vs = "all-HBM vs all-HBM (control)" if order == "hbm" else f"hybrid '{order}' vs all-HBM"
            print(f"{label} {opt} {vs}: {len(bad)}/{rounds} rounds differ {bad[:3]}", flush=True)
