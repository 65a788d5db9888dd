"""fp8b38 (issue 36; fp8b37's script): the FP8 backward paths of this wheel in one process at the benchmark's inputs
(fp8p32's path_gaps.py `inputs`: B16 causal H4 D128, block descale): "default" (kFp8BwdDqTma: dQ by bulk tensor
reduce-adds into dq's rows, no finishing pass over dq), "main_kernel" (option bit 59: main 6ca06103's kernel and
path) and the timing-only splits of the op's diag (wrong dq): "no_reduce" (kFp8BwdDiagNoReduce: the default's slots
stored, no bulk reduce-add) and "no_dq" (kFp8BwdDiagNoDq: no dQ adds at all); run 1's dq_tma_now and run 2's
heads_grouped / main_heads_grouped (the wheels of 6e040339 / e7e48eb7) are gone. Two measures, as benchmarks/hstu_fp8_bwd.py's: (1) the
paths in a fresh random order each rep, L2 flushed before each timed call (CUDA events), medians; (2) back to back:
--rounds rounds, the names in a fresh random order each, --short calls after 5 warm-up ones, mean ms (FA3's
method). Ratios against main_kernel. Usage (GPU, sm_90):
python lab_ab.py [--s 16384] [--reps 20] [--short 15] [--rounds 3] [--names default,main_kernel,no_reduce,no_dq]
"""

import argparse
import os
import random
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hstu_attn import _fp8_bwd, _ops  # noqa: E402
import path_gaps  # noqa: E402

DIAGS = {"no_reduce": 16, "no_dq": 1}  # (timing-only splits: the op's diag)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--s", type=int, default=16384)
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--short", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--names", default="default,main_kernel,no_reduce,no_dq")
    a = ap.parse_args()
    dev = torch.device("cuda")
    x = path_gaps.inputs(a.b, a.s, dev)
    opts = _ops.OPTION_BITS["fp8_bwd"]
    fns = {}
    for n in a.names.split(","):
        bits = _fp8_bwd.FP8_BWD_VARIANT_BITS.get(n, 0)
        d = DIAGS.get(n, 0)
        fns[n] = (lambda bits=bits, d=d: _fp8_bwd.fp8_bwd_cuda(x[0], x[1:], False, opts | bits, diag=d))
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    for f in fns.values():
        f()
        f()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    times = {n: [] for n in fns}
    rng = random.Random(38)
    names = list(fns)
    for _ in range(a.reps):
        for n in rng.sample(names, len(names)):
            flush.zero_()
            ev[0].record()
            fns[n]()
            ev[1].record()
            ev[1].synchronize()
            times[n].append(ev[0].elapsed_time(ev[1]))
    med = {n: statistics.median(t) for n, t in times.items()}
    flops = 2.5 * 4 * 4 * 128 * a.s * a.s / 2 * a.b
    ref = med.get("main_kernel", next(iter(med.values())))
    print(f"interleaved B{a.b} S{a.s // 1024}K (median of {a.reps}, ms): " + "; ".join(
        f"{n} {m:.3f} ({flops / m / 1e9:.1f} TFLOP/s, {m / ref:.4f})" for n, m in med.items()), flush=True)
    short = {n: [] for n in fns}
    for _ in range(a.rounds):  # (rounds in fresh random orders: the clock drifts within a process)
        for n in rng.sample(names, len(names)):
            for _ in range(5):
                fns[n]()
            ev[0].record()
            for _ in range(a.short):
                fns[n]()
            ev[1].record()
            ev[1].synchronize()
            short[n].append(ev[0].elapsed_time(ev[1]) / a.short)
    mean = {n: statistics.mean(t) for n, t in short.items()}
    ref = mean.get("main_kernel", next(iter(mean.values())))
    print(f"short B{a.b} S{a.s // 1024}K ({a.rounds} rounds of {a.short} back to back, mean ms; rounds): " + "; ".join(
        f"{n} {m:.3f} ({flops / m / 1e9:.1f}, {m / ref:.4f}; {' '.join(f'{t:.3f}' for t in short[n])})"
        for n, m in mean.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
