"""Where the uva caching step's time goes (issue 32): NVIDIA's config as benchmarks/embedding_tiers.py (b) with the
uva store, per cache fraction: ms per step (synced, as embedding_tiers; and pipelined over 12 steps), then the torch
profiler's top host ops (self CPU) and CUDA kernels (device time) of 4 synced steps, with and without prefetch.

Usage: python benchmarks/uva_step_profile.py [--fracs 0.1,0.25] [--opt sgd] [--rows N] [--batch N] [--top 15]
Skips (exit 0) without a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding_tiers import make_module, step_batches  # noqa: E402

from dynamicemb._optimizers import SGD, Adam  # noqa: E402


def run(m, data, i, prefetch):
    ids, off = data[i % 4]
    out = m(ids, off)
    if prefetch:
        m.prefetch(*data[(i + 1) % 4])
    out.sum().backward()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fracs", default="0.1,0.25")
    ap.add_argument("--opt", default="sgd")
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--batch", type=int, default=104857)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return
    from torch.profiler import ProfilerActivity, profile

    T, dim = 10, 128
    data = step_batches(T, a.batch, a.rows)
    mk = (lambda: SGD(lr=0.01)) if a.opt == "sgd" else (lambda: Adam(lr=0.001))
    print(f"GPU: {torch.cuda.get_device_name()}, fp32 rows D={dim}, {T} tables x {a.batch} ids, {a.opt}; ms per step")
    for frac in [float(x) for x in a.fracs.split(",")]:
        for prefetch in (False, True):
            m = make_module(T, dim, a.rows, mk(), "caching", frac, "uva")
            for i in range(6):
                run(m, data, i, prefetch)
            torch.cuda.synchronize()
            synced = []
            for i in range(6, 16):
                t0 = time.perf_counter()
                run(m, data, i, prefetch)
                torch.cuda.synchronize()
                synced.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            for i in range(16, 28):
                run(m, data, i, prefetch)
            torch.cuda.synchronize()
            piped = (time.perf_counter() - t0) * 1e3 / 12
            synced.sort()
            print(f"| uva {frac:.0%}{' + prefetch' if prefetch else ''} | synced {synced[5]:.2f} | pipelined "
                  f"{piped:.2f} |")
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                for i in range(28, 32):
                    run(m, data, i, prefetch)
                    torch.cuda.synchronize()
            ka = p.key_averages()
            print(ka.table(sort_by="self_cpu_time_total", row_limit=a.top, max_name_column_width=48))
            print(ka.table(sort_by="self_cuda_time_total", row_limit=a.top, max_name_column_width=48))
            del m
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
