"""What a prefetch costs over a warm working set (issue 32): NVIDIA's config as benchmarks/embedding_tiers.py (b)
(10 tables x 104,857 ids, D=128 fp32, power law 1.05 over 1M ids per table, pooling none, 4 batches cycled, a
caching module over the uva store holding --frac of the rows), one module per optimizer, timed in interleaved
rounds per mode:

  - none: no prefetch;
  - adaptive: prefetch of the next batch after the forward (the default, ``prefetch_adaptive``);
  - job: the same with a job every step (``prefetch_adaptive`` off: the job's cost when nothing moves).

Per mode: synchronized ms per step (median), pipelined ms per step (one sync at the end), the host microseconds
of the forward call, the prefetch call and the backward call (synchronized steps, median), the ops cache_stage
queued per prefetch; then one synchronized step per mode under torch.profiler: every kernel with its stream, start
(us after the step's first kernel) and duration, and the step's device span.

With --single N first embedding_tiers (b)'s earlier protocol N times (a fresh module per case, 8 warm-up steps,
10 synchronized steps, median), without and with prefetch, and the jobs queued during the timed steps.

Usage: python tools/dynamicemb_dev/prefetch_warm.py [--opts sgd,adam] [--frac 0.25] [--rounds 3] [--reps 20]
    [--out DIR] (writes timeline_<opt>_<mode>.txt there) [--single N] [--no-timeline]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (a copy beside benchmarks' files: those first)
from embedding_tiers import make_module, step_batches  # noqa: E402

from dynamicemb._optimizers import SGD, Adam  # noqa: E402

MODES = ("none", "adaptive", "job")


def stepper(m, batches, grad, host):
    it = [0]

    def one(mode):
        i = it[0] % len(batches)
        it[0] += 1
        t0 = time.perf_counter()
        o = m(*batches[i], validate=False)
        t1 = time.perf_counter()
        if mode != "none":
            m.prefetch_adaptive = mode == "adaptive"
            m.prefetch(*batches[(i + 1) % len(batches)])
        t2 = time.perf_counter()
        o.backward(grad)
        t3 = time.perf_counter()
        if host is not None:
            host.append((t1 - t0, t2 - t1, t3 - t2))
    return one


def timeline(one, mode, path):
    from torch.profiler import ProfilerActivity, profile

    one(mode)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        one(mode)
        torch.cuda.synchronize()
    ks = []
    for e in prof.events():
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):
            continue
        tr = e.time_range
        ks.append((tr.start, tr.end - tr.start, getattr(e, "device_resource_id", -1), e.name))
    if not ks:
        return "no kernels", 0.0, 0.0
    ks.sort()
    t0 = ks[0][0]
    span = max(s + d for s, d, _, _ in ks) - t0
    busy = sum(d for _, d, _, _ in ks)
    lines = [f"{mode}: span {span:.0f} us, kernel sum {busy:.0f} us, {len(ks)} device ops", ""]
    lines += [f"  {s - t0:8.1f} {d:8.1f} s{st:<4} {n[:90]}" for s, d, st, n in ks]
    if path:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
    return "\n".join(lines), span, busy


def single(opt_name, frac, batches, grad, n, warmup=8, reps=10):
    """embedding_tiers (b)'s protocol before session 22, ``n`` times: a fresh module per case, ``warmup`` steps,
    then ``reps`` synchronized steps (median), without and with prefetch (adaptive). Returns {case: ([ms], [jobs
    queued during the timed steps])}."""
    import gc

    ns = torch.ops.dynamicemb
    real = ns.cache_stage
    cnt = []
    got = {"none": ([], []), "adaptive": ([], [])}
    T, R, dim = 10, 1 << 20, 128
    ns.cache_stage = lambda *x, **k: (cnt.append(1), real(*x, **k))[1]
    try:
        for _ in range(n):
            for mode in ("none", "adaptive"):
                opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
                m = make_module(T, dim, R, opt, "caching", frac, "uva")
                one = stepper(m, batches, grad, None)
                for _ in range(warmup):
                    one(mode)
                torch.cuda.synchronize()
                n0, ts = len(cnt), []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    one(mode)
                    torch.cuda.synchronize()
                    ts.append((time.perf_counter() - t0) * 1e3)
                got[mode][0].append(statistics.median(ts))
                got[mode][1].append(len(cnt) - n0)
                del m, one
                gc.collect()
    finally:
        ns.cache_stage = real
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opts", default="sgd", help="optimizers, comma list (sgd, adam)")
    ap.add_argument("--frac", type=float, default=0.25, help="share of the rows in the HBM cache")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the modes (0: none)")
    ap.add_argument("--reps", type=int, default=20, help="steps per mode and round, pipelined and synchronized")
    ap.add_argument("--warmup", type=int, default=12, help="steps before the rounds (adaptive prefetch)")
    ap.add_argument("--out", default="", help="folder for the timelines (default: printed)")
    ap.add_argument("--label", default="", help="the heading's label (the wheel)")
    ap.add_argument("--single", type=int, default=0, help="also embedding_tiers (b)'s earlier protocol this many "
                    "times (a fresh module per case, 8 warm-up steps, 10 synchronized) without and with prefetch")
    ap.add_argument("--no-timeline", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("prefetch_warm: no GPU, skipped")
        return 0
    T, B, R, dim = 10, 104857, 1 << 20, 128
    batches = step_batches(T, B, R, 4)
    grad = torch.ones(T * B, dim, device="cuda")
    ns = torch.ops.dynamicemb
    real = ns.cache_stage
    print(f"### prefetch over a warm set {a.label} ({torch.cuda.get_device_name()}, caching {int(a.frac * 100)} % "
          f"over the uva store, 4 batches)\n")
    print("| optimizer | mode | synchronized ms | pipelined ms | host us: forward / prefetch / backward | "
          "cache_stage per prefetch |")
    print("|---|---|---:|---:|---:|---:|")
    for opt_name in a.opts.split(","):
        if a.single:
            got = single(opt_name, a.frac, batches, grad, a.single)
            for mode, (ms, jobs) in got.items():
                print(f"- {opt_name} single-shot protocol, {mode}: synchronized ms per fresh module "
                      f"{' / '.join(f'{x:.3f}' for x in ms)} (median {statistics.median(ms):.3f}); jobs queued in "
                      f"the 10 timed steps {jobs}", flush=True)
            print()
        if a.rounds <= 0:
            continue
        opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
        m = make_module(T, dim, R, opt, "caching", a.frac, "uva")
        host = []
        one = stepper(m, batches, grad, host)
        for _ in range(a.warmup):
            one("adaptive")
        torch.cuda.synchronize()
        syn = {k: [] for k in MODES}
        pipe = {k: [] for k in MODES}
        hst = {k: [] for k in MODES}
        calls = {k: 0 for k in MODES}
        cnt = []
        ns.cache_stage = lambda *x, **k: (cnt.append(1), real(*x, **k))[1]
        try:
            for r in range(a.rounds):
                for mode in MODES[r % 3:] + MODES[:r % 3]:
                    for _ in range(4):
                        one(mode)
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(a.reps):
                        one(mode)
                    torch.cuda.synchronize()
                    pipe[mode].append((time.perf_counter() - t0) * 1e3 / a.reps)
                    host.clear()
                    n0 = len(cnt)
                    for _ in range(a.reps):
                        t0 = time.perf_counter()
                        one(mode)
                        torch.cuda.synchronize()
                        syn[mode].append((time.perf_counter() - t0) * 1e3)
                    calls[mode] += len(cnt) - n0
                    hst[mode] += host
        finally:
            ns.cache_stage = real
        for mode in MODES:
            h = [statistics.median(x[j] for x in hst[mode]) * 1e6 for j in range(3)]
            per = calls[mode] / (a.rounds * a.reps)
            print(f"| {opt_name} | {mode} | {statistics.median(syn[mode]):.3f} | {statistics.median(pipe[mode]):.3f} | "
                  f"{h[0]:.0f} / {h[1]:.0f} / {h[2]:.0f} | {per:.2f} |", flush=True)
        print()
        for mode in MODES if not a.no_timeline else ():
            path = os.path.join(a.out, f"timeline_{opt_name}_{mode}.txt") if a.out else ""
            text, span, busy = timeline(one, mode, path)
            print(f"- {opt_name} {mode}: one synchronized step's device span {span:.0f} us, kernel sum {busy:.0f} us")
            if not a.out:
                print(text)
        print(flush=True)
        del m, one
    return 0


if __name__ == "__main__":
    sys.exit(main())
