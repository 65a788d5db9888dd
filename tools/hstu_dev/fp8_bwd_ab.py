"""The FP8 backward's named paths of one wheel in one process (issue 36; fp8b37_run's and fp8b38_run's lab_ab.py and
path_ab.py are entry points with their lab names), at the benchmark's inputs (fp8p32's path_gaps.py `inputs`: B16
causal H4 D128, block descale). A name: "default" / "op" (the default path), a key of
_fp8_bwd.FP8_BWD_VARIANT_BITS (option bits, e.g. main_kernel), or a key of the entry's `diags` (the op's private
diag word: lab kernels and timing-only splits).

lab_ab: two measures, as benchmarks/hstu_fp8_bwd.py's: (1) the paths in a fresh random order each rep, L2 flushed
before each timed call (CUDA events), medians; (2) back to back: --rounds rounds, the names in a fresh random order
each, --short calls after 5 warm-up ones, mean ms (FA3's method). Ratios against main_kernel.
path_ab: one profiled call of each named path (path_gaps.timeline): each kernel's start after the L2 flush's end and
its length (us), the idle before the first kernel, the gaps, the span.

path_gaps.py and labtime.py are carried beside this file (runlib/pack.sh) or found in the tree.
"""
import argparse
import os
import random
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "fp8p32_run"), os.path.join(HERE, "runlib")]
from hstu_attn import _fp8_bwd, _ops  # noqa: E402
import labtime  # noqa: E402
import path_gaps  # noqa: E402


def path_call(x, name, diags):
    """the FP8 backward of inputs x on the named path"""
    opts = _ops.OPTION_BITS["fp8_bwd"] | _fp8_bwd.FP8_BWD_VARIANT_BITS.get(name, 0)
    d = diags.get(name, 0)
    return lambda: _fp8_bwd.fp8_bwd_cuda(x[0], x[1:], False, opts, diag=d)


def lab_ab(diags, default_names, seed, argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--s", type=int, default=16384)
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--short", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--names", default=default_names)
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    x = path_gaps.inputs(a.b, a.s, dev)
    fns = {n: path_call(x, n, diags) for n in a.names.split(",")}
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    for f in fns.values():
        f()
        f()
    torch.cuda.synchronize()
    rng = random.Random(seed)
    times = labtime.interleaved_flushed(fns, a.reps, rng, flush)
    med = {n: statistics.median(t) for n, t in times.items()}
    flops = 2.5 * 4 * 4 * 128 * a.s * a.s / 2 * a.b
    ref = med.get("main_kernel", next(iter(med.values())))
    print(f"interleaved B{a.b} S{a.s // 1024}K (median of {a.reps}, ms): " + "; ".join(
        f"{n} {m:.3f} ({flops / m / 1e9:.1f} TFLOP/s, {m / ref:.4f})" for n, m in med.items()), flush=True)
    short = labtime.back_to_back(fns, a.rounds, a.short, rng)
    mean = {n: statistics.mean(t) for n, t in short.items()}
    ref = mean.get("main_kernel", next(iter(mean.values())))
    print(f"short B{a.b} S{a.s // 1024}K ({a.rounds} rounds of {a.short} back to back, mean ms; rounds): " + "; ".join(
        f"{n} {m:.3f} ({flops / m / 1e9:.1f}, {m / ref:.4f}; {' '.join(f'{t:.3f}' for t in short[n])})"
        for n, m in mean.items()), flush=True)
    return 0


def path_ab(diags, names):
    if not torch.cuda.is_available():
        print("path_ab: needs a GPU")
        return 0
    names = names or ["op", "main_path"]
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    B, S = 16, 16384
    x = path_gaps.inputs(B, S, dev)
    for name in names:
        if name != "op" and name not in _fp8_bwd.FP8_BWD_VARIANT_BITS and name not in diags:
            print(f"{name}: not in this wheel")
            continue
        ks, _, _ = path_gaps.timeline(path_call(x, name, diags), flush)
        print(labtime.timeline_line(f"{name} B{B} S{S // 1024}K", ks), flush=True)
    return 0
