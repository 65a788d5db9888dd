"""A key block's fixed cost under each --cfgs value (branch bwd28, issue 39): the kernels of one backward
(torch.profiler, mean of --iters after warm-up) of ours (kernel_options(sm90=False, bwd_sm80_cfg=n)), bf16 H4 D128,
without a mask at three lengths of 4,224 key blocks each (B264 S512, B132 S1K, B66 S2K: 8 / 16 / 32 full 64 x 128
tile pairs a block), and under the causal mask at B128 S1K. Per cfg, a line through the three no-mask main kernels,
main = 4,224 (a + n p) / SMS, gives a, the SM time a key block costs besides its tile pairs (prologue, epilogue,
launch), and p, a full pair's. Run from the root of the repository (python3 -P), PYTHONPATH=<site with hstu_attn>.
  python3 -P count28.py --cfgs 0 9 [--causal 0]"""
import argparse
import collections
import os
import sys

import torch

# The profiler helpers are count27's (bwd27_run/, or beside this file in a carry folder; -P adds no script dir).
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, "..", "bwd27_run")]
from count27 import kernels  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--causal", type=int, nargs="*", default=None, help="cfgs with the causal case (default: all)")
    a = ap.parse_args()
    D, sms = 128, torch.cuda.get_device_properties(0).multi_processor_count
    print(f"### count28: kernels of one backward (us, mean of {a.iters}), {torch.cuda.get_device_name()}, bf16 H4 "
          f"D{D}, {sms} SMs")
    print("| case | cfg | kernels (us) | sum |\n|---|---|---|---:|", flush=True)
    fit = collections.defaultdict(dict)
    res = {}
    for c in a.cfgs:
        causal = a.causal is None or c in a.causal
        for mask, B, S, w in [("none", B, S, (-1, -1)) for B, S in ((264, 512), (132, 1024), (66, 2048))] + \
                             [("causal", 128, 1024, (-1, 0))] * causal:
            t = kernels(B, S, D, w, c, a.iters)
            res[(mask, c)] = t
            print(f"| B{B} S{S} {mask} | {c} | " + ", ".join(f"{n} {us:.1f}" for n, us in t.items()) +
                  f" | {sum(t.values()):.1f} |", flush=True)
            if mask == "none":
                fit[c][S // 64] = t.get("main", float("nan"))
            del t
            torch.cuda.empty_cache()
    print()
    for c in a.cfgs:
        xs, ys = list(fit[c]), [fit[c][n] * sms / 4224 for n in fit[c]]  # SM time a key block
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        p = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a0 = my - p * mx
        resid = [y - (a0 + p * x) for x, y in zip(xs, ys)]
        m = res.get(("causal", c), {}).get("main", float("nan"))
        print(f"cfg {c}: a = {a0:.2f} us of SM time a key block, p = {p:.3f} us a full pair; residuals "
              f"{', '.join(f'{r:+.2f}' for r in resid)} us; causal B128 S1K main {m:.1f} us, its 4,096 blocks' fixed "
              f"part {4096 * a0 / sms:.1f} us")


if __name__ == "__main__":
    main()
