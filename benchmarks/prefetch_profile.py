"""Where the caching train step's time goes, with and without prefetch (issue 32): NVIDIA's config as
benchmarks/embedding_tiers.py (b) (10 tables x 104,857 ids, D=128 fp32, power law 1.05 over --rows ids per table,
pooling none, 4 batches in turn), per cache fraction and optimizer:

  - "synced": ms per step with a device sync after each step (embedding_tiers' number);
  - "pipelined": ms per step over --steps steps in a row, one sync at the end (the host runs ahead);
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
    functions; ``reset()`` between measurements."""

    def __init__(self, m):
        self.acc = {}
        self.m = m
        self._wrap(_st, "to_host", "to_host")
        self._wrap(_b, "to_host", "to_host")
        self._wrap(_b, "stage_tables", "stage_tables")
        for t in m.tables:
            st = getattr(t, "store", None)
            if st is not None:
                self._wrap_store(st)

    @staticmethod
    def kind():
        return "job" if threading.current_thread().name.startswith("dynamicemb-prefetch") else "step"

    def add(self, key, v):
        k = (self.kind(), key)
        self.acc[k] = self.acc.get(k, 0.0) + v

    def _wrap(self, mod, name, key):
        orig = getattr(mod, name)
        probe = self

        def w(*a, **k):
            t0 = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                probe.add(key, time.perf_counter() - t0)
        setattr(mod, name, w)

    def _wrap_store(self, st):
        find, write, probe = st.find, st.write, self

        def f(keys):
            t0 = time.perf_counter()
            r = find(keys)
            probe.add("store find", time.perf_counter() - t0)
            probe.add("rows in", float(r.found.sum()))
            probe.add("missed", float(keys.numel()))
            return r

        def wr(pk, pv, ps, ek):
            t0 = time.perf_counter()
            write(pk, pv, ps, ek)
            probe.add("store write", time.perf_counter() - t0)
            probe.add("rows out", float(pk.numel()))
        st.find, st.write = f, wr

    def reset(self):
        self.acc = {}

    def get(self, kind, key, steps):
        return self.acc.get((kind, key), 0.0) / steps


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


def profile(frac, opt_name, rows, B, steps, bw, prefetch, device):
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
    row_bytes = opt.row_width(dim) * 4
    probe = Probe(m)
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
    rin, rout = probe.get("job", "rows in", steps) + probe.get("step", "rows in", steps), \
        probe.get("job", "rows out", steps) + probe.get("step", "rows out", steps)
    missed = probe.get("job", "missed", steps) + probe.get("step", "missed", steps)
    mb = (rin + rout) * row_bytes / 1e6
    row = dict(
        case=f"{opt_name.upper()} caching {int(frac * 100)} %{' + prefetch' if prefetch else ''}",
        synced=synced, pipelined=pipelined,
        stage_step=times["stage (step thread)"] * 1e3 / steps, call=times["prefetch call"] * 1e3 / steps,
        job=job_ms, job_wait=probe.get("job", "to_host", steps) * 1e3,
        store=(probe.get("job", "store find", steps) + probe.get("job", "store write", steps)
               + probe.get("step", "store find", steps) + probe.get("step", "store write", steps)) * 1e3,
        step_wait=probe.get("step", "to_host", steps) * 1e3,
        missed=missed, rin=rin, rout=rout, mb=mb, bound=mb / 1e3 / bw * 1e3)
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
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("prefetch_profile: no GPU, skipped")
        return 0
    bw = pcie_gbps() if device.type == "cuda" else float("nan")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU smoke run"
    print(f"## caching step profile ({name}, fp32 D128, 10 tables x {a.batch} ids, "
          f"{'prefetch job' if _prefetch is not None else 'no prefetch job (before)'}; pinned copy bw {bw:.1f} GB/s)\n")
    print("| case | synced ms | pipelined ms | step-thread staging ms | prefetch call ms | job ms (its thread) |"
          " host waits in staging ms (step / job) | store calls ms | ids missed | rows in / out | PCIe MB |"
          " PCIe bound ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for opt in a.opts.split(","):
        for frac in (float(x) for x in a.fracs.split(",")):
            for pre in (False, True):
                r = profile(frac, opt, a.rows, a.batch, a.steps, bw, pre, device)
                print(f"| {r['case']} | {r['synced']:.2f} | {r['pipelined']:.2f} | {r['stage_step']:.2f} | "
                      f"{r['call']:.3f} | {r['job']:.2f} | {r['step_wait']:.2f} / {r['job_wait']:.2f} | "
                      f"{r['store']:.2f} | {r['missed']:.0f} | {r['rin']:.0f} / {r['rout']:.0f} | {r['mb']:.1f} | "
                      f"{r['bound']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
