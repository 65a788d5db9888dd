"""Where the time of the storage tiers goes (issue 32): a per-phase breakdown of the caching train step and of the
hybrid table ops, to read next to benchmarks/embedding_tiers.py.

(1) caching step (NVIDIA's config as embedding_tiers (b): T tables x B ids, D=128 fp32, power law 1.05 over R ids
    per table, pooling none, SGD; the HBM cache holds --frac of the rows, host-memory store), 4 batches in turn:
    - "pipelined": ms per step as the benchmark measures it (no sync between steps);
    - per phase (a device sync around each phase, so the phases add up to more than the pipelined step): staging
      (``_stage_caches``), forward kernels, prefetch of the next batch, backward; for each the host syncs it makes
      (torch's sync-debug warnings: ``.item()``, ``.cpu()``, nonzero, boolean indexing, unique ...) and the keys
      it moved into the caches;
    - the torch profiler's top host ops of one step (self CPU time) and the CUDA kernels (device time).
(2) hybrid ops at HierarchicalKV's config scaled down (dim 64 fp32, --hkv-capacity slots, half the rows in host
    memory, load factor 0.5, 1M stored keys per op): ms per op for all-HBM and hybrid, the CUDA kernels each op
    runs (profiler, device time), and the fraction of the PCIe bound (the host half of the rows crosses the bus
    once: bw / (row bytes / 2) keys/s).

Usage: python benchmarks/tiers_profile.py [--skip step,hybrid] [--frac 0.25] [--step-rows N] [--step-batch N]
    [--hkv-capacity N] [--prefetch]
Skips (exit 0) without a GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding_tiers import HKV_QUOTE, make_module, pcie_gbps, step_batches, wall_ms  # noqa: E402

from dynamicemb._hybrid import HybridTable  # noqa: E402
from dynamicemb._optimizers import SGD  # noqa: E402
from dynamicemb._table import ScoredHashTable  # noqa: E402


class SyncCounter:
    """Counts the host syncs torch reports (sync debug mode 'warn') inside the block."""

    def __enter__(self):
        self.n = 0
        self._cm = warnings.catch_warnings(record=True)
        self._log = self._cm.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode(1)
        return self

    def __exit__(self, *a):
        torch.cuda.set_sync_debug_mode(0)
        self.n = sum("synchroniz" in str(w.message) for w in self._log)
        self._cm.__exit__(*a)
        return False


def timed(fn, stats, name):
    torch.cuda.synchronize()
    with SyncCounter() as sc:
        t0 = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) * 1e3
    stats.setdefault(name, []).append((dt, sc.n))
    return r


def moved_counter(m):
    """Wraps every caching table's store reads: counts the keys staging moved from the store into the cache."""
    n = [0]
    for t in m.tables:
        st = getattr(t, "store", None)
        if st is None:
            continue
        orig = st.find

        def find(keys, _orig=orig):
            n[0] += keys.numel()
            return _orig(keys)
        st.find = find
    return n


def profile_step(frac, rows, B, prefetch, steps=10):
    T, dim = 10, 128
    dev = step_batches(T, B, rows)
    grad = torch.ones(T * B, dim, device="cuda")
    uniq = statistics.mean(
        float(torch.unique(dev[0][0][t * B:(t + 1) * B]).numel()) for t in range(T))
    lines = [f"unique ids per table per step (batch 0): {uniq:.0f} of {B}"]
    for storage in ("hbm", "caching"):
        m = make_module(T, dim, rows, SGD(lr=0.01), storage, frac)
        moved = moved_counter(m)
        it = [0]

        def one():
            i = it[0] % 4
            it[0] += 1
            o = m(*dev[i], validate=False)
            if prefetch and storage == "caching":
                m.prefetch(*dev[it[0] % 4])
            o.backward(grad)

        pipelined = wall_ms(one, warmup=8, reps=10)
        # per phase
        stats = {}
        stage = getattr(m, "_stage_caches", None)
        fwd = m._forward_kernels
        if stage is not None:
            m._stage_caches = lambda *a, **k: timed(lambda: stage(*a, **k), stats, "stage")
        m._forward_kernels = lambda *a, **k: timed(lambda: fwd(*a, **k), stats, "forward kernels")
        moved[0] = 0
        for _ in range(steps):
            i = it[0] % 4
            it[0] += 1
            o = timed(lambda: m(*dev[i], validate=False), stats, "forward (all)")
            if prefetch and storage == "caching":
                timed(lambda: m.prefetch(*dev[it[0] % 4]), stats, "prefetch")
            timed(lambda: o.backward(grad), stats, "backward")
        lines.append(f"\n#### {storage}{f' {int(frac * 100)} %' if storage == 'caching' else ''}"
                     f"{' + prefetch' if prefetch and storage == 'caching' else ''}: pipelined step {pipelined:.2f} ms,"
                     f" store keys read per step {moved[0] / steps:.0f}\n")
        lines += ["| phase | ms (median, synced) | host syncs per call |", "|---|---:|---:|"]
        for name, v in stats.items():
            lines.append(f"| {name} | {statistics.median(x[0] for x in v):.3f} | {statistics.median(x[1] for x in v):.0f} |")
        m._forward_kernels = fwd
        if stage is not None:
            m._stage_caches = stage
        # torch profiler: one pipelined step
        from torch.profiler import ProfilerActivity, profile
        one()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            one()
            torch.cuda.synchronize()
        ka = prof.key_averages()
        host = sorted(ka, key=lambda e: -e.self_cpu_time_total)[:12]
        lines += ["", "top host ops (self CPU us, calls):", ""]
        lines += [f"    {e.key[:60]:60s} {e.self_cpu_time_total:9.0f} {e.count:6d}" for e in host]
        dev_t = sorted((e for e in ka if getattr(e, "self_device_time_total", 0) > 0),
                       key=lambda e: -e.self_device_time_total)[:10]
        lines += ["", "top device kernels (self device us, calls):", ""]
        lines += [f"    {e.key[:60]:60s} {e.self_device_time_total:9.0f} {e.count:6d}" for e in dev_t]
        del m
        torch.cuda.empty_cache()
    return lines


def profile_hybrid(cap, bw, n=1 << 20):
    from torch.profiler import ProfilerActivity, profile

    dim, rb = 64, 256
    gen = torch.Generator(device="cuda").manual_seed(3)
    stored = torch.unique(torch.randint(0, 1 << 62, (cap // 2,), device="cuda", generator=gen))
    bound = bw * 1e9 / (rb / 2) / 1e9
    lines = [f"PCIe bound (bw {bw:.1f} GB/s, half of each 256-byte row in host): {bound:.3f} billion KV/s", "",
             "| table | op | ms | billion KV/s | HKV quoted | % of PCIe bound |", "|---|---|---:|---:|---:|---:|"]
    kern = []
    for name, mk in (("all-HBM", lambda: ScoredHashTable(cap, dim, device="cuda")),
                     ("hybrid", lambda: HybridTable(cap, dim, device="cuda", hbm_rows=cap // 2))):
        t = mk()
        for off in range(0, stored.numel(), 1 << 22):
            t.find_or_insert(stored[off:off + (1 << 22)])
        keys = torch.unique(stored[torch.randint(0, stored.numel(), (n,), device="cuda", generator=gen)])
        keys = keys[torch.randperm(keys.numel(), device="cuda", generator=gen)]
        vals = torch.randn(keys.numel(), dim, device="cuda")
        for op, fn in (("find", lambda: t.find(keys)), ("find_or_insert", lambda: t.find_or_insert(keys)),
                       ("insert_or_assign", lambda: t.insert_or_assign(keys, vals)),
                       ("assign", lambda: t.assign(keys, vals))):
            from bench_util import median_ms
            ms = median_ms(fn, 3, 10)
            bkv = keys.numel() / ms / 1e6
            pct = f"{100 * bkv / bound:.0f}" if name == "hybrid" else ""
            lines.append(f"| {name} | {op} | {ms:.3f} | {bkv:.3f} | {HKV_QUOTE[op]} | {pct} |")
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            for e in prof.key_averages():
                if getattr(e, "self_device_time_total", 0) > 0:
                    kern.append(f"    {name:8s} {op:17s} {e.key[:70]:70s} {e.self_device_time_total:8.0f} us x{e.count}")
        del t
        torch.cuda.empty_cache()
    return lines + ["", "kernels per op (device time):", ""] + kern


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip", default="")
    ap.add_argument("--frac", type=float, default=0.25)
    ap.add_argument("--prefetch", action="store_true", help="also profile the caching step with prefetch")
    ap.add_argument("--step-rows", type=int, default=1 << 20)
    ap.add_argument("--step-batch", type=int, default=104857)
    ap.add_argument("--hkv-capacity", type=int, default=1 << 25)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("tiers_profile: no GPU, skipped")
        return 0
    skip = set(filter(None, a.skip.split(",")))
    print(f"## tiers profile ({torch.cuda.get_device_name()}, fp32)\n")
    if "step" not in skip:
        for pre in ((False, True) if a.prefetch else (False,)):
            print(f"### caching step, {'with' if pre else 'without'} prefetch\n")
            print("\n".join(profile_step(a.frac, a.step_rows, a.step_batch, pre)), "\n", flush=True)
    if "hybrid" not in skip:
        bw = pcie_gbps()
        print(f"### hybrid ops, dim 64, capacity {a.hkv_capacity}, half the rows in host memory\n")
        print("\n".join(profile_hybrid(a.hkv_capacity, bw)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
