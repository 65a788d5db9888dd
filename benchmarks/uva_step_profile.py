"""Where the uva caching step's time goes (issue 32): NVIDIA's config as benchmarks/embedding_tiers.py (b) with the
uva store, per cache fraction (and all-HBM first): ms per step (synced, as embedding_tiers; and pipelined over 12
steps), then the torch profiler's top host ops (self CPU) and CUDA kernels (device time) of 4 synced steps, with and
without prefetch; ``--label``: also the host and CUDA time of each kind of table op (op, mode, cache or store).
The loss is ``out.sum()``, so its backward adds a full-size gradient fill to every step (all-HBM included).
Every window (synced, pipelined, profiled) also prints the rows staged in and written back per step: with
``--batches 64`` the 25 % cache fills during the first ~20 steps (no row written back before), and rows come back
from the store only for ids seen in an earlier batch, so the default warm-up (``--warmup``: one cycle of the
batches, at least 6 steps) puts every window in the same, steady phase (session 8 timed its synced steps before
the first write-back and its pipelined steps after: "pipelined > synced" was that, not a stall).

Usage: python benchmarks/uva_step_profile.py [--fracs 0.1,0.25] [--opt sgd] [--rows N] [--batch N] [--top 15]
    [--label] [--batches N] [--warmup N] [--prefetch both|off|on]
Skips (exit 0) without a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding_tiers import make_module, rows_moved, step_batches  # noqa: E402

from dynamicemb._optimizers import SGD, Adam  # noqa: E402


def label_table_ops():
    """Wraps the table ops in profiler ranges named by op, mode and table kind (cache or store), so the CUDA time
    of each kind of table op in the staging shows up as one row."""
    from dynamicemb._table import ScoredHashTable
    from dynamicemb._caching import CachedTable

    def kind(t):
        return "cache" if isinstance(t, CachedTable) else "store" if type(t).__name__ == "HybridTable" else "table"

    def wrap(name, fn, mode_arg):
        def w(self, *a, **k):
            mode = a[0] if mode_arg and a else ""
            with torch.profiler.record_function(f"## {kind(self)} {name} {mode}"):
                return fn(self, *a, **k)
        return w

    ScoredHashTable._upsert = wrap("upsert", ScoredHashTable._upsert, True)
    ScoredHashTable._lookup = wrap("lookup", ScoredHashTable._lookup, False)
    ScoredHashTable.erase = wrap("erase", ScoredHashTable.erase, False)


def run(m, data, i, prefetch):
    ids, off = data[i % len(data)]
    out = m(ids, off)
    if prefetch:
        m.prefetch(*data[(i + 1) % len(data)])
    out.sum().backward()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fracs", default="0.1,0.25")
    ap.add_argument("--opt", default="sgd")
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--batch", type=int, default=104857)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--label", action="store_true", help="name the table ops' profiler ranges (op, mode, kind)")
    ap.add_argument("--batches", type=int, default=4,
                    help="distinct batches cycled (4: a warm set at 25 %%; 64: every step misses)")
    ap.add_argument("--warmup", type=int, default=-1,
                    help="steps before the timed windows (default: max(6, --batches): a steady cold phase)")
    ap.add_argument("--prefetch", default="both", choices=("both", "off", "on"),
                    help="the caching cases without prefetch, with it, or both")
    a = ap.parse_args()
    if a.label:
        label_table_ops()
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return
    from torch.profiler import ProfilerActivity, profile

    T, dim = 10, 128
    data = step_batches(T, a.batch, a.rows, a.batches)
    mk = (lambda: SGD(lr=0.01)) if a.opt == "sgd" else (lambda: Adam(lr=0.001))
    print(f"GPU: {torch.cuda.get_device_name()}, fp32 rows D={dim}, {T} tables x {a.batch} ids, {a.opt}; ms per step")
    pre = {"both": (False, True), "off": (False,), "on": (True,)}[a.prefetch]
    cases = [(None, False)] + [(float(x), p) for x in a.fracs.split(",") for p in pre]
    for frac, prefetch in cases:
        m = (make_module(T, dim, a.rows, mk(), "hbm", 1.0) if frac is None
             else make_module(T, dim, a.rows, mk(), "caching", frac, "uva"))
        w = max(6, a.batches) if a.warmup < 0 else a.warmup
        for i in range(w):
            run(m, data, i, prefetch)
        torch.cuda.synchronize()
        mv = [rows_moved(m)]
        synced = []
        for i in range(w, w + 10):
            t0 = time.perf_counter()
            run(m, data, i, prefetch)
            torch.cuda.synchronize()
            synced.append((time.perf_counter() - t0) * 1e3)
        mv.append(rows_moved(m))
        t0 = time.perf_counter()
        for i in range(w + 10, w + 22):
            run(m, data, i, prefetch)
        torch.cuda.synchronize()
        piped = (time.perf_counter() - t0) * 1e3 / 12
        mv.append(rows_moved(m))
        synced.sort()
        name = "all-HBM" if frac is None else f"uva {frac:.0%}{' + prefetch' if prefetch else ''}"
        per = [f"{(b[0] - a0[0]) / k:,.0f} / {(b[1] - a0[1]) / k:,.0f}" for a0, b, k in
               ((mv[0], mv[1], 10), (mv[1], mv[2], 12))]
        print(f"| {name} | synced {synced[5]:.2f} | pipelined {piped:.2f} | rows in / out per step: synced "
              f"{per[0]}, pipelined {per[1]} | warm-up {w} |")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for i in range(w + 22, w + 26):
                run(m, data, i, prefetch)
                torch.cuda.synchronize()
        mv.append(rows_moved(m))
        print(f"profiled steps: rows in / out per step {(mv[3][0] - mv[2][0]) / 4:,.0f} / "
              f"{(mv[3][1] - mv[2][1]) / 4:,.0f}")
        ka = p.key_averages()
        kern = [(e.key, e.device_time_total / 4e3) for e in ka
                if any(x in e.key for x in ("stage_kernel", "move_", "probe_kernel")) and e.device_time_total > 0]
        print("staging kernels, ms per step: " + ", ".join(f"{k.split('(')[0][-40:]} {v:.3f}" for k, v in kern))
        print(ka.table(sort_by="self_cpu_time_total", row_limit=a.top, max_name_column_width=48))
        print(ka.table(sort_by="self_cuda_time_total", row_limit=a.top, max_name_column_width=48))
        rows = sorted((e for e in ka if e.key.startswith("## ")), key=lambda e: -e.device_time_total)
        print("table ops (4 steps): name | calls | CPU total ms | CUDA total ms")
        for e in rows:
            print(f"  {e.key[3:]:<32} | {e.count} | {e.cpu_time_total / 1e3:.2f} | {e.device_time_total / 1e3:.2f}")
        del m
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
