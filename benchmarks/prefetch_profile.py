"""Where the caching train step's time goes, with and without prefetch (issue 32): NVIDIA's config as
benchmarks/embedding_tiers.py (b) (10 tables x 104,857 ids, D=128 fp32, power law 1.05 over --rows ids per table,
pooling none, 4 batches in turn), per cache fraction and optimizer:

  - "synced": ms per step with a device sync after each step (embedding_tiers' number);
  - "pipelined": ms per step over --steps steps in a row, one sync at the end (the host runs ahead);
  - prefetch: the job counting after reading the bounds back (default), and with ``prefetch_early_count`` (its
    count queued before its first host wait);
  - per step, the host milliseconds of: the step's own staging in the step's thread (``_stage_caches``: the miss
    check, the staging, and after a prefetch the wait for its job), the prefetch call itself, and the prefetch job
    (its thread): all of it, its host waits for the device (``to_host``) and its store reads and writes;
  - per step, the ids the caches missed (moved from the store or new) and the rows moved each way across PCIe
    (rows read from the store into the cache + evicted rows written back), their bytes and the time they take at
    the measured pinned copy bandwidth (the PCIe bound of the staging).

Usage: python benchmarks/prefetch_profile.py [--fracs 0.1,0.25] [--opts sgd,adam] [--rows N] [--batch N]
    [--device cpu] (a smoke run of the script on the CPU twin: small sizes, no meaning as a measurement)
Skips (exit 0) without a GPU unless --device cpu.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding import power_law_ids  # noqa: E402
from embedding_tiers import pcie_gbps  # noqa: E402

try:  # the callers of to_host / stage_tables (in _batched.py before the storage-tier split)
    import dynamicemb._batched_tiers as _b  # noqa: E402
except ImportError:
    import dynamicemb._batched as _b  # noqa: E402
import dynamicemb._staging as _st  # noqa: E402
from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
from dynamicemb._optimizers import SGD, Adam  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

try:
    from dynamicemb import _prefetch  # noqa: E402  (absent before the prefetch job)
except ImportError:
    _prefetch = None


class Probe:
    """Host time and counts, per thread kind ("step" / "job"), accumulated by wrappers around the staging's
    functions (installed once) and each caching table's store; ``reset()`` between measurements."""

    def __init__(self):
        self.acc = {}
        from dynamicemb._table import ScoredHashTable

        self._wrap(_st, "to_host", "to_host")
        self._wrap(_b, "to_host", "to_host")
        self._wrap(_st, "to_device", "to_device")
        self._wrap(_b, "stage_tables", "stage_tables")
        for name in ("_lookup", "_upsert", "erase"):  # the table ops' launches (host time, count)
            self._wrap(ScoredHashTable, name, "table ops", count=True)

    @staticmethod
    def kind():
        return "job" if threading.current_thread().name.startswith("dynamicemb-prefetch") else "step"

    def add(self, key, v):
        k = (self.kind(), key)
        self.acc[k] = self.acc.get(k, 0.0) + v

    def _wrap(self, owner, name, key, count=False):
        orig = getattr(owner, name)
        probe = self

        def w(*a, **k):
            t0 = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                probe.add(key, time.perf_counter() - t0)
                if count:
                    probe.add(key + " n", 1.0)
        setattr(owner, name, w)

    def wrap_stores(self, m):
        for t in m.tables:
            st = getattr(t, "store", None)
            if st is None:
                continue
            find, write, probe = st.find, st.write, self

            def f(keys, find=find):
                t0 = time.perf_counter()
                r = find(keys)
                probe.add("store find", time.perf_counter() - t0)
                probe.add("rows in", float(r.found.sum()))
                probe.add("missed", float(keys.numel()))
                return r

            def wr(pk, pv, ps, ek, write=write):
                t0 = time.perf_counter()
                write(pk, pv, ps, ek)
                probe.add("store write", time.perf_counter() - t0)
                probe.add("rows out", float(pk.numel()))
            st.find, st.write = f, wr

    def reset(self):
        self.acc = {}

    def get(self, kind, key, steps):
        return self.acc.get((kind, key), 0.0) / steps

    def both(self, key, steps):
        return self.get("step", key, steps) + self.get("job", key, steps)


PROBE = None


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def wall_ms(fn, device, warmup, reps):
    for _ in range(warmup):
        fn()
    sync(device)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def trace(one, device, label):
    """torch.profiler over two pipelined steps (every thread): top host ops by self CPU time, top kernels."""
    from torch.profiler import ProfilerActivity, profile as tprofile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    one()
    sync(device)
    with tprofile(activities=acts) as prof:
        one()
        one()
        sync(device)
    ka = prof.key_averages()
    lines = [f"\n#### {label}: torch.profiler, 2 pipelined steps\n", "top host ops (self CPU us, calls):", ""]
    lines += [f"    {e.key[:60]:60s} {e.self_cpu_time_total:9.0f} {e.count:6d}"
              for e in sorted(ka, key=lambda e: -e.self_cpu_time_total)[:14]]
    dev_t = sorted((e for e in ka if getattr(e, "self_device_time_total", 0) > 0),
                   key=lambda e: -e.self_device_time_total)[:12]
    lines += ["", "top device kernels (self device us, calls):", ""]
    lines += [f"    {e.key[:60]:60s} {e.self_device_time_total:9.0f} {e.count:6d}" for e in dev_t]
    return lines


def profile(frac, opt_name, rows, B, steps, bw, prefetch, device, traced=False, early=False):
    T, dim = 10, 128
    opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
    gen = torch.Generator().manual_seed(1)  # the batches of embedding_tiers.step_batches
    dev = [(torch.cat([power_law_ids(B, rows, 1.05, gen) for _ in range(T)]).to(device),
            torch.arange(0, T * B + 1, dtype=torch.int64, device=device)) for _ in range(4)]
    grad = torch.ones(T * B, dim, device=device)
    budget = int(rows * frac) * opt.row_width(dim) * 4
    m = BatchedDynamicEmbeddingTables(
        [DynamicEmbTableOptions(dim=dim, max_capacity=rows, storage="caching", hbm_budget_bytes=budget)] * T,
        pooling="none", optimizer=opt, device=device)
    m.prefetch_early_count = early
    row_bytes = opt.row_width(dim) * 4
    probe = PROBE
    probe.wrap_stores(m)
    it = [0]
    times = {"stage (step thread)": 0.0, "prefetch call": 0.0}
    stage = m._stage_caches

    def timed_stage(*a, **k):
        t0 = time.perf_counter()
        try:
            return stage(*a, **k)
        finally:
            times["stage (step thread)"] += time.perf_counter() - t0
    m._stage_caches = timed_stage
    jobs = []

    def one():
        i = it[0] % len(dev)
        it[0] += 1
        o = m(*dev[i], validate=False)
        if prefetch:
            t0 = time.perf_counter()
            m.prefetch(*dev[it[0] % len(dev)])
            times["prefetch call"] += time.perf_counter() - t0
            if _prefetch is not None and _prefetch._LAST.get(m) is not None:
                jobs.append(_prefetch._LAST.get(m))
        o.backward(grad)

    synced = wall_ms(one, device, warmup=8, reps=steps)
    for _ in range(4):
        one()
    sync(device)
    if _prefetch is not None:
        _prefetch.settle(m)
    probe.reset()
    jobs.clear()
    for k in times:
        times[k] = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        one()
    sync(device)
    if _prefetch is not None:
        _prefetch.settle(m)
    pipelined = (time.perf_counter() - t0) * 1e3 / steps
    job_ms = sum(j.seconds for j in jobs) * 1e3 / steps
    label = f"{opt_name.upper()} caching {int(frac * 100)} % + prefetch{' (early count)' if early else ''}"
    lines = trace(one, device, label) if traced else []
    rin, rout, missed = probe.both("rows in", steps), probe.both("rows out", steps), probe.both("missed", steps)
    mb = (rin + rout) * row_bytes / 1e6
    row = dict(
        case=f"{opt_name.upper()} caching {int(frac * 100)} %{' + prefetch' if prefetch else ''}"
             f"{' (early count)' if early else ''}",
        synced=synced, pipelined=pipelined,
        stage_step=times["stage (step thread)"] * 1e3 / steps, call=times["prefetch call"] * 1e3 / steps,
        job=job_ms, job_wait=probe.get("job", "to_host", steps) * 1e3,
        store=(probe.both("store find", steps) + probe.both("store write", steps)) * 1e3,
        ops=probe.both("table ops n", steps), ops_ms=probe.both("table ops", steps) * 1e3,
        staging=probe.both("stage_tables", steps) * 1e3, up=probe.both("to_device", steps) * 1e3,
        step_wait=probe.get("step", "to_host", steps) * 1e3,
        missed=missed, rin=rin, rout=rout, mb=mb, bound=mb / 1e3 / bw * 1e3, trace=lines)
    del m
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fracs", default="0.1,0.25")
    ap.add_argument("--opts", default="sgd,adam")
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--batch", type=int, default=104857)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--trace", default="", help="torch.profiler of the prefetched step at these fractions")
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("prefetch_profile: no GPU, skipped")
        return 0
    bw = pcie_gbps() if device.type == "cuda" else float("nan")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU smoke run"
    print(f"## caching step profile ({name}, fp32 D128, 10 tables x {a.batch} ids, "
          f"{'prefetch job' if _prefetch is not None else 'no prefetch job (before)'}; pinned copy bw {bw:.1f} GB/s)\n")
    global PROBE
    PROBE = Probe()
    print("Per step: host ms of the step thread's `_stage_caches` (miss check + staging, or the wait for the prefetch"
          " job), of the `prefetch` call, of the job (its thread); inside them, in either thread: `stage_tables`, the"
          " host waits (`to_host`: step thread / job thread), the uploads (`to_device`), the table ops' launches (count"
          " and host ms), the store calls; ids the caches missed, rows moved in / out, their PCIe MB and the time they"
          " take at the measured bandwidth.\n")
    print("| case | synced ms | pipelined ms | step-thread staging | prefetch call | job | stage_tables | waits"
          " (step / job) | uploads | table ops (n, ms) | store calls | ids missed | rows in / out | PCIe MB |"
          " PCIe bound ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    traces = []
    traced = [float(x) for x in a.trace.split(",") if x]
    for opt in a.opts.split(","):
        for frac in (float(x) for x in a.fracs.split(",")):
            modes = [(False, False), (True, False)] + ([(True, True)] if _prefetch is not None else [])
            for pre, early in modes:
                r = profile(frac, opt, a.rows, a.batch, a.steps, bw, pre, device, pre and frac in traced, early)
                traces += r["trace"]
                print(f"| {r['case']} | {r['synced']:.2f} | {r['pipelined']:.2f} | {r['stage_step']:.2f} | "
                      f"{r['call']:.3f} | {r['job']:.2f} | {r['staging']:.2f} | {r['step_wait']:.2f} / "
                      f"{r['job_wait']:.2f} | {r['up']:.2f} | {r['ops']:.0f}, {r['ops_ms']:.2f} | {r['store']:.2f} | "
                      f"{r['missed']:.0f} | {r['rin']:.0f} / {r['rout']:.0f} | {r['mb']:.1f} | {r['bound']:.2f} |",
                      flush=True)
    print("\n".join(traces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
