"""Storage tiers benchmark (docs/dynamicemb_storage.md): hybrid table ops over PCIe, the embedding train step with
an HBM cache of 10/25/50 % of the rows (with and without prefetch) against all-HBM, and the disk store's rows/s.

(a) hybrid: ScoredHashTable ops (find, find_or_insert, insert_or_assign) with every row in pinned host memory
    (hbm_rows=0) against all-HBM; "PCIe MB" is what must cross the bus (rows read + rows written, row bytes =
    dim x 4), "GB/s" that over the op time and "% bw" its fraction of the pinned host<->device bandwidth measured
    here (a pinned 256 MB copy each way, averaged).
(a2) the same ops at HierarchicalKV's hybrid benchmark config (dim 64 fp32, capacity 128M, half the rows (16 GB)
    in HBM and half in host memory, load factor 0.5, 1M keys per op): a HybridTable of --hkv-capacity slots with
    hbm_rows = capacity / 2, filled to load factor 0.5 with uniform random keys, then each op on two key sets:
    1M distinct stored keys (all hits), and HKV's shape (hit rate 0.6: 40 % of the keys absent). Billion KV/s in
    1e9 and in HKV's units (2^30), beside HKV's own benchmark measured on this H200 (HKV ae24eec, hit rate 0.6,
    load factor 0.5, 2^30 units: find 0.193, find_or_insert 0.153, insert_or_assign 0.154, assign 0.189). The
    PCIe bound: the host rows an op touches cross the bus once (read for find/find_or_insert hits, written for
    inserts and insert_or_assign/assign), so at most bw / (row bytes x host rows per key) keys/s.
(b) train step (NVIDIA's published config): 10 tables, 104,857 ids per table per step, D=128 fp32, power law
    alpha=1.05 over --rows ids per table, pooling none, SGD and Adam; caching tables with 10/25/50 % of --rows in the
    HBM cache (host store; and the uva store: rows in pinned host memory indexed in HBM, staged by the table
    kernels on the device; and with --stores disk a DiskStore per table), with and without ``prefetch`` of the
    next batch (its ids already on the device, as in TorchRec's prefetch pipeline: issued after the step's forward,
    before its backward); ms per step, wall clock:
    synchronized (a device sync after each step, the median of 20) and pipelined (20 steps, one sync), after
    --warmup steps that fill the tables; one module per case and optimizer, timed without prefetch, with it and
    (--job-rows) with a job every step, then freed (its pinned store rows are reused by the next). The 4
    batches run in turn (--batches, default 4): at 25 % and 50 % the cache holds the ids of 4 batches and a warm step
    misses nothing; with --batches 64 the working set outgrows a 25 % cache and every step misses (the case a
    prefetch is for: the rows moved per step say which case a row is). With --hybrid-fracs also hybrid tables
    with that share of the rows in HBM and the rest in pinned host memory, which the step reads and writes
    through UVA (no rows moved; the forward's host rows go through HBM scratch rows in host-address order).
(b2) with --rounds N: (b)'s cases for one optimizer built at once and timed in N interleaved rounds (pipelined ms
    per step and synchronized median; the ratio to all-HBM paired per round): a lent machine's host time drifts by
    tens of percent between processes and minutes, and these steps are host-bound. One module per storage, its
    prefetch modes (none, adaptive, with --job-rows a job every step) timed on it as cases of their own.
(c) disk store: ``DiskStore.find`` rows/s of --disk-rows stored rows, for a cold working set (first read after the
    store's files were dropped from the page cache and the store reopened) and a warm one (the same keys again).

Usage:
    python benchmarks/embedding_tiers.py [--quick] [--results benchmarks/RESULTS.md] [--plot tiers.png]
        [--skip hybrid,hkv,step,disk] [--hkv-capacity N] [--hkv-tables all-HBM,hybrid,hybrid-sm] [--hkv-reps N]
        [--hkv-load 0.5,1.0] [--hkv-keysets hits,hkv]
        [--step-rows N] [--step-batch N] [--disk-rows N]
        [--fracs 0.1,0.25,0.5] [--opts sgd,adam] [--stores host,uva] [--rounds N [--round-reps N]] [--batches N]
        [--hybrid-fracs 0.25,0.5 [--hybrid-orders forward,step,off]]
Skips (exit 0) without a GPU.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import functools
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
import weakref

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import command, median_ms, publish, pyplot, save_figure  # noqa: E402
from embedding import power_law_ids  # noqa: E402  the same id distribution as benchmarks/embedding.py

from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
from dynamicemb._hybrid import HybridTable  # noqa: E402
from dynamicemb._optimizers import SGD, Adam  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402
from dynamicemb._table import ScoredHashTable  # noqa: E402
from dynamicemb._storage import DiskStoreSpec  # noqa: E402
from dynamicemb._uva_store import UvaStoreSpec  # noqa: E402


def cuda_ms(fn, warmup=3, reps=10):
    return median_ms(fn, warmup, reps)


def wall_ms(fn, warmup=3, reps=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def pcie_gbps():
    """Pinned host<->device copy bandwidth (GB/s), the mean of both directions over a 256 MB buffer."""
    n = 256 << 20
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(n, dtype=torch.uint8, device="cuda")
    h2d = cuda_ms(lambda: d.copy_(h, non_blocking=True))
    d2h = cuda_ms(lambda: h.copy_(d, non_blocking=True))
    return (n / h2d / 1e6 + n / d2h / 1e6) / 2


def bench_hybrid(quick, bw):
    cap, dim, n = (1 << 20, 128, 1 << 18) if quick else (1 << 24, 128, 1 << 20)
    rows = []
    gen = torch.Generator().manual_seed(0)
    keys = power_law_ids(n, cap // 2, 1.05, gen).cuda()
    vals = torch.randn(n, dim, device="cuda")
    for name, mk in (("all-HBM", lambda: ScoredHashTable(cap, dim, device="cuda")),
                     ("hybrid (all rows in host)", lambda: HybridTable(cap, dim, device="cuda", hbm_rows=0))):
        t = mk()
        t.insert_or_assign(keys, vals)
        uniq = int(torch.unique(keys).numel())
        rb = dim * 4
        for op, fn, nbytes in (("find", lambda: t.find(keys), n * rb),
                               ("find_or_insert", lambda: t.find_or_insert(keys), n * rb),
                               ("insert_or_assign", lambda: t.insert_or_assign(keys, vals), uniq * rb)):
            ms = cuda_ms(fn)
            host = name != "all-HBM"
            gbps = nbytes / ms / 1e6 if host else float("nan")
            rows.append((name, op, n, ms, nbytes / 1e6 if host else 0.0, gbps, 100 * gbps / bw if host else float("nan")))
        del t
        torch.cuda.empty_cache()
    return rows


# HKV's own benchmark (HierarchicalKV ae24eec, hybrid part), measured on the H200 of this project's runs, the
# same host: billion KV/s in HKV's units (2^30 KV/s), its keys at hit rate 0.6 (40 % absent), load factor 0.5.
HKV_MEASURED = {"find": 0.193, "find_or_insert": 0.153, "insert_or_assign": 0.154, "assign": 0.189}
HIT_RATE = 0.6


def host_slot_mask(t, sl):
    """Which slots (-1: none) of table t have their rows in host memory: split buckets (hbm_slots, since branch
    hsplit) or, for older wheels, slots >= hbm_rows; none for all-HBM tables."""
    hs = getattr(t, "hbm_slots", None)
    if hs is None:
        return (sl >= getattr(t, "hbm_rows", t.capacity())) & (sl >= 0)
    return (sl % t.bucket_capacity >= hs) & (sl >= 0) & (t.hbm_rows < t.capacity())


def host_share(m):
    """Share of a module's stored rows that are in host slots (its hybrid tables; host_slot_mask)."""
    host = stored = 0
    for t in m.tables:
        slots = torch.arange(t.capacity(), device=t.keys.device)
        live = t.keys.view(torch.int64) != -(1 << 63)
        stored += int(live.sum())
        host += int((host_slot_mask(t, slots) & live).sum())
    return host / max(stored, 1)


def hybrid_host_rows(m, batches, T, B):
    """Per step (mean over the cycled batches): the distinct ids of the batch whose rows sit in host slots of a
    module's hybrid tables (table i's ids: positions [i B, (i + 1) B), one id per bag). A hybrid step reads each such
    row over PCIe twice and writes it once by code reading: the forward's gather (the embedding, dim x 4 bytes), the
    fused update's read and write of the row (row width x 4 bytes: embedding and optimizer state)."""
    n = 0
    for ids, _ in batches:
        for i, t in enumerate(m.tables):
            u = torch.unique(ids[i * B:(i + 1) * B])
            n += int(host_slot_mask(t, t.find_slots(u).slots).sum())
    return n / max(len(batches), 1)


def bench_hkv(cap, bw, n=1 << 20, reps=10, warmup=3, tables=("all-HBM", "hybrid"), load=0.5,
              keysets=("all hits", f"hit rate {HIT_RATE}")):
    """HKV's hybrid config: dim 64 fp32, hbm_rows = cap / 2, load factor ``load`` (0.5: HKV's; at 1.0 the fill
    evicts, and the stored keys are those still found), n keys per op; two key sets:
    n distinct stored keys (all hits), and HKV's shape: hit rate 0.6 (60 % stored keys, then 40 % absent ones;
    fresh ones for every call, erased again after the op's timing, which keeps the load factor).
    Per row: billion KV/s in 1e9 and in HKV's 2^30 units, and the PCIe bound: the host rows the op touches per key
    (``host``: keys whose slot (find_slots; inserting ops: find_or_insert_slots) is a host slot) cross the bus once,
    so at most bw / (row bytes x host) keys/s."""
    dim = 64
    rb = dim * 4
    gen = torch.Generator(device="cuda").manual_seed(3)
    stored_all = torch.unique(torch.randint(0, 1 << 62, (int(cap * load),), device="cuda", generator=gen))
    rows, shares = [], []
    for name, mk in (("all-HBM", lambda: ScoredHashTable(cap, dim, device="cuda")),
                     ("hybrid (half the slots in host)", lambda: HybridTable(cap, dim, device="cuda",
                                                                              hbm_rows=cap // 2)),
                     # private layout: slot-major host rows (claimed lowest slot first where the wheel does)
                     ("hybrid-sm (slot-major host rows)", lambda: HybridTable(cap, dim, device="cuda",
                                                                               hbm_rows=cap // 2, _slot_major=True))):
        if name.split(" ")[0] not in tables:
            continue
        t = mk()
        for off in range(0, stored_all.numel(), 1 << 22):
            t.find_or_insert(stored_all[off:off + (1 << 22)])
        lf = t.load_factor()
        found, nhost = [], 0
        for off in range(0, stored_all.numel(), 1 << 22):
            sl = t.find_slots(stored_all[off:off + (1 << 22)]).slots
            found.append(sl >= 0)
            nhost += int(host_slot_mask(t, sl).sum())
        stored = stored_all[torch.cat(found)]
        shares.append((name, lf, stored.numel(), nhost / max(stored.numel(), 1)))
        hits = torch.unique(stored[torch.randint(0, stored.numel(), (n,), device="cuda", generator=gen)])
        hits = hits[torch.randperm(hits.numel(), device="cuda", generator=gen)]
        vals = torch.randn(n, dim, device="cuda")
        for keyset in keysets:
            sets, misses = [hits], None
            if keyset != "all hits":  # as HKV's create_keys_for_hitrate: stored keys first, then absent ones
                nh = int(n * HIT_RATE)
                sets, ms_ = [], []
                for _ in range(reps + warmup):
                    m = torch.randint(0, 1 << 62, (n - nh,), device="cuda", generator=gen)
                    m = m[~torch.isin(m, stored_all)]
                    h = stored[torch.randint(0, stored.numel(), (n - m.numel(),), device="cuda", generator=gen)]
                    sets.append(torch.cat([h, m]))
                    ms_.append(m)
                misses = torch.cat(ms_)
            for op in ("find", "find_or_insert", "insert_or_assign", "assign"):
                calls = iter(range(1 << 30))

                def fn(op=op, calls=calls):
                    k = sets[next(calls) % len(sets)]
                    v = vals[: k.numel()]
                    return (t.find(k) if op == "find" else t.find_or_insert(k) if op == "find_or_insert"
                            else t.insert_or_assign(k, v) if op == "insert_or_assign" else t.assign(k, v))
                ms = cuda_ms(fn, warmup, reps)
                k = sets[0]
                inserting = op in ("find_or_insert", "insert_or_assign")
                if misses is not None:
                    t.erase(misses)
                sl = t.find_or_insert_slots(k).slots if inserting else t.find_slots(k).slots
                if misses is not None and inserting:
                    t.erase(misses)
                host = int(host_slot_mask(t, sl).sum()) / k.numel()
                bound = bw / (rb * host) if host > 0 else float("nan")  # billion (1e9) KV/s
                rows.append((name, keyset, op, k.numel(), lf, ms, k.numel() / ms / 1e6,
                             k.numel() * 1e3 / ms / (1 << 30), HKV_MEASURED[op] if misses is not None else None,
                             bound, host))
        del t
        torch.cuda.empty_cache()
    return rows, shares


def make_module(T, dim, rows_per_table, opt, storage, frac, store=None):
    kw = {}
    if storage in ("caching", "hybrid"):
        kw = dict(storage=storage, hbm_budget_bytes=int(rows_per_table * frac) * opt.row_width(dim) * 4)
        if store in ("uva", "uva-py"):
            kw["backing_store"] = UvaStoreSpec()
    paths = [None] * T
    if store == "disk":  # a DiskStore per table in a fresh directory (removed at exit)
        d = tempfile.mkdtemp(prefix="dynamicemb_tiers_disk_")
        atexit.register(shutil.rmtree, d, True)
        paths = [DiskStoreSpec(os.path.join(d, f"t{i}")) for i in range(T)]
    opts = [DynamicEmbTableOptions(dim=dim, max_capacity=rows_per_table, **kw, **(
        {"backing_store": p} if p is not None else {})) for p in paths]
    m = BatchedDynamicEmbeddingTables(opts, pooling="none", optimizer=opt, device="cuda")
    if store == "uva-py":  # the Python staging over the uva store (op cache_stage off)
        m.device_staging = False
    if storage == "hybrid" and store:  # how the step reaches the host rows (an older module ignores it)
        m.host_rows_order = store.removesuffix("-sm").removesuffix("-bm")
        if store.endswith(("-sm", "-bm")):  # host-row layout: slot-major (the CUDA default) or private bucket-major
            for t in m.tables:
                t._set_host_slot_major(store.endswith("-sm"))
    return m


def step_batches(T, B, rows_per_table, count=4):
    """`count` CUDA batches of T tables x B ids (power law 1.05 over rows_per_table ids, one id per bag), seeded."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(count):
        ids = torch.cat([power_law_ids(B, rows_per_table, 1.05, gen) for _ in range(T)])
        out.append((ids.cuda(), torch.arange(0, T * B + 1, dtype=torch.int64, device="cuda")))
    return out


def train_step_fn(m, batches, grad, prefetch=False, ahead=1):
    """A training step of module m per call over the cycled batches, backward with grad; `prefetch` (a default the
    call may override) prefetches the rows of the batch `ahead` steps later (``one.ahead``, settable) after the
    forward (TorchRec's prefetch pipeline: 1, the next batch)."""
    it = [0]

    def one(prefetch=prefetch):
        i = it[0] % len(batches)
        it[0] += 1
        o = m(*batches[i], validate=False)
        if prefetch:
            m.prefetch(*batches[(i + one.ahead) % len(batches)])
        o.backward(grad)

    one.ahead = ahead
    return one


_STORE_LABEL = {"uva": " (uva store)", "uva-py": " (uva store, Python staging)", "disk": " (disk store)"}


def host_rss_gb():
    """(resident, peak resident) host memory of this process in GB (/proc/self/status VmRSS / VmHWM; pinned host
    rows count: they are resident), or (nan, nan) where /proc is missing."""
    got = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    got[line.split(":")[0]] = int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return got.get("VmRSS", float("nan")), got.get("VmHWM", float("nan"))


def free_module(m_ref):
    """Collects a dropped module (its tables hold reference cycles: only the cycle collector frees them, and a
    generation-2 collection may come many cases later) and returns its HBM to the device. ``m_ref``: a weak
    reference to it; returns whether it is gone. Its pinned host rows go back to torch's pinned-memory cache,
    where the next module of the same row bytes takes them again (no new pinning)."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return m_ref() is None


def bench_step(quick, warmup, rows_per_table=None, B=None, fracs=(0.1, 0.25, 0.5), opts=("sgd", "adam"),
               stores=("host", "uva"), bw=None, batches=4, hybrid_fracs=(), hybrid_orders=("forward",),
               job_rows=False):
    """Rows (optimizer, storage, ms synchronized (a device sync after each step, median), ms pipelined (one sync
    after ``reps`` steps), rows in + out per step, PCIe MB per step, its time at ``bw`` GB/s in ms, note). Rows in/out: what the caching tables' stagings moved from the store into the caches and wrote back
    (``CachedTable.rows_moved``) over the timed steps, per step; each crosses PCIe once (row bytes = row width x 4:
    embedding and optimizer state). One module per (optimizer, storage, fraction, store): its steps without
    prefetch are timed first, then with prefetch (after --warmup more), then with ``job_rows`` a job every step
    (``prefetch_adaptive`` off: what a prefetch costs when its job runs); the module is freed before the next one
    is built (``free_module``; the note gives the process's host memory then). ``hybrid_fracs``: also hybrid
    tables with that share of the rows in HBM (the rest in pinned host memory, touched by the step through UVA; no
    rows moved), one row per ``hybrid_orders`` (the module's ``host_rows_order``: forward, step, off); their PCIe
    columns count the step's own host rows (``hybrid_host_rows``: the distinct ids of a batch in host slots, each
    read twice and written once)."""
    T, dim = 10, 128
    rows_per_table = rows_per_table or ((1 << 17) if quick else (1 << 20))
    B = B or (16384 if quick else 104857)
    dev = step_batches(T, B, rows_per_table, batches)
    out = []
    grad = None
    reps = 5 if quick else 20
    nan = float("nan")
    for opt_name, opt in (("SGD", SGD(lr=0.01)), ("Adam", Adam(lr=1e-3))):
        if opt_name.lower() not in opts:
            continue
        # (name, storage, fraction, store, [(row suffix, prefetch, adaptive)]): the timings of one module, in order
        modes = [("", False, True), (" + prefetch", True, True)] + (
            [(" + prefetch (a job every step)", True, False)] if job_rows else [])
        cases = [("all-HBM", "hbm", 1.0, None, [("", False, True)])] + [
            (f"caching {int(f * 100)}%{_STORE_LABEL.get(st, '')}", "caching", f, st, modes)
            for st in stores for f in fracs] + [
            (f"hybrid {int(f * 100)}%{'' if o == 'forward' else f' (order {o})'}", "hybrid", f, o,
             [("", False, True)]) for f in hybrid_fracs for o in hybrid_orders]
        row_bytes = opt.row_width(dim) * 4
        for name, storage, frac, store, timings in cases:
            try:
                t0 = time.perf_counter()
                m = make_module(T, dim, rows_per_table, opt, storage, frac, store)
                built = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001  a configuration that does not fit is reported, not fatal
                out.extend((opt_name, name + sfx, nan, nan, nan, nan, nan, str(e)[:60]) for sfx, _, _ in timings)
                continue
            if grad is None:
                grad = torch.ones(T * B, dim, device="cuda")
            one, step = train_step_fn(m, dev, grad), None
            for sfx, pre, adaptive in timings:
                try:
                    m.prefetch_adaptive = adaptive
                    step = functools.partial(one, prefetch=pre)
                    for _ in range(warmup):
                        step()
                    m0 = rows_moved(m)
                    ms = wall_ms(step, warmup=0, reps=reps)
                    t1 = time.perf_counter()
                    for _ in range(reps):
                        step()
                    torch.cuda.synchronize()
                    pms = (time.perf_counter() - t1) * 1e3 / reps
                    m1 = rows_moved(m)
                    rin, rout = ((m1[0] - m0[0]) / (2 * reps), (m1[1] - m0[1]) / (2 * reps))
                    mb = (rin + rout) * row_bytes / 1e6
                    rio = f"{rin:,.0f} / {rout:,.0f}"
                    rss, peak = host_rss_gb()
                    note = f"built in {built:.1f} s; host RSS {rss:.1f} GB (peak {peak:.1f})"
                    if storage == "hybrid":  # no rows move: the step itself reads and writes its host rows
                        h = hybrid_host_rows(m, dev, T, B)
                        mb = h * (dim * 4 + 2 * row_bytes) / 1e6
                        rio = f"{h:,.0f} host rows read / written"
                        note += (f", {100 * host_share(m):.1f} % of the stored rows in host slots; PCIe MB counted: "
                                 f"per host row the gather's embedding and the update's read and write of the row")
                    if bw and mb == mb:
                        note += f"; PCIe bound {100 * (mb / bw) / ms:.0f} % of the step"
                    out.append((opt_name, name + sfx, ms, pms, rio, mb, mb / bw if bw else nan, note))
                except Exception as e:  # noqa: BLE001
                    out.append((opt_name, name + sfx, nan, nan, nan, nan, nan, f"{type(e).__name__}: {str(e)[:60]}"))
                print(f"step: {out[-1]}", flush=True)  # progress (a run cut short keeps its finished rows)
            m_ref = weakref.ref(m)
            del m, one, step
            if not free_module(m_ref):
                print(f"step: {opt_name} {name}: the module is still referenced after its case", flush=True)
    return out, (T, B, dim, rows_per_table)


def rows_moved(m):
    """[rows staged into the caches, rows written back] so far, over the module's caching tables."""
    return [sum(t.rows_moved[j] for t in m.tables if hasattr(t, "rows_moved")) for j in (0, 1)]


def bench_step_rounds(warmup, rounds, rows_per_table=None, B=None, fracs=(0.25,), opts=("sgd", "adam"),
                      stores=("uva",), reps=20, batches=4, job_rows=False):
    """(b2) the train step of (b), every case of an optimizer built at once and timed in ``rounds`` interleaved
    rounds (the case order rotated each round), so that a slow spell of the host shows in every case of that round
    instead of in one: per round and case ``reps`` pipelined steps (one sync at the end: ms per step) and ``reps``
    synchronized steps (median). Rows: (optimizer, storage, pipelined median / min / max, synchronized median,
    pipelined and synchronized ratio to all-HBM: the median over the rounds of the same-round ratio, rows staged
    into the caches per timed step). ``job_rows``: also each caching case with a prefetch job every step
    (``prefetch_adaptive`` off)."""
    T, dim = 10, 128
    rows_per_table = rows_per_table or (1 << 20)
    B = B or 104857
    dev = step_batches(T, B, rows_per_table, batches)
    grad = torch.ones(T * B, dim, device="cuda")
    out = []
    for opt_name, opt in (("SGD", SGD(lr=0.01)), ("Adam", Adam(lr=1e-3))):
        if opt_name.lower() not in opts:
            continue
        sfx = {0: "", 1: " + prefetch", 2: " + prefetch (a job every step)"}
        cases = [("all-HBM", "hbm", 1.0, 0, None)] + [
            (f"caching {int(f * 100)}%{_STORE_LABEL.get(st, '')}{sfx[p]}", "caching", f, p, st)
            for st in stores for f in fracs for p in ((0, 1, 2) if job_rows else (0, 1))]
        built, mods = [], {}
        for name, storage, frac, pre, store in cases:
            # one module per storage (its prefetch modes' cases share it: the same warm caches)
            m = mods.get((storage, frac, store))
            if m is None:
                m = mods[(storage, frac, store)] = make_module(T, dim, rows_per_table, opt, storage, frac, store)
            step = train_step_fn(m, dev, grad, pre > 0)

            def one(step=step, m=m, adaptive=pre != 2):
                m.prefetch_adaptive = adaptive
                step()

            for _ in range(warmup):
                one()
            built.append((name, one, m))
        torch.cuda.synchronize()
        moved0 = {n: rows_moved(m)[0] for n, _, m in built}
        pipe = {n: [] for n, _, _ in built}
        sync = {n: [] for n, _, _ in built}
        for r in range(rounds):
            k = r % len(built)
            for name, one, _ in built[k:] + built[:k]:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(reps):
                    one()
                torch.cuda.synchronize()
                pipe[name].append((time.perf_counter() - t0) * 1e3 / reps)
                sync[name].append(wall_ms(one, warmup=0, reps=reps))
        base = built[0][0]
        for name, _, m in built:
            rp = statistics.median(a / b for a, b in zip(pipe[name], pipe[base]))
            rs = statistics.median(a / b for a, b in zip(sync[name], sync[base]))
            # (pipelined + synchronized steps of every case of the module)
            rin = (rows_moved(m)[0] - moved0[name]) / (2 * rounds * reps * sum(x is m for _, _, x in built))
            out.append((opt_name, name, statistics.median(pipe[name]), min(pipe[name]), max(pipe[name]),
                        statistics.median(sync[name]), rp, rs, rin))
            print(f"step rounds: {out[-1]}", flush=True)
        del built, mods, m
        gc.collect()  # (the modules' reference cycles: see free_module)
        torch.cuda.empty_cache()
    return out, (T, B, dim, rows_per_table)


def drop_file_cache(path):
    """Drops the files under ``path`` from the OS page cache (posix_fadvise DONTNEED after an fsync), so that the
    next reads come from the device: a cold working set. Returns the bytes dropped (0 where fadvise is missing)."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    n = 0
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return n


def bench_disk(quick, n_rows=None):
    from dynamicemb._storage import DiskStore

    n_rows = n_rows or (200_000 if quick else 4_000_000)
    dim, n_find = 128, min(n_rows, 50_000 if quick else 500_000)
    d = tempfile.mkdtemp(prefix="dynamicemb_disk_bench_")
    try:
        s = DiskStore(os.path.join(d, "s"), torch.int64, dim, torch.float32)
        chunk = 100_000
        t0 = time.perf_counter()
        for off in range(0, n_rows, chunk):
            k = torch.arange(off, min(off + chunk, n_rows))
            s.insert(k, torch.randn(k.numel(), dim), k)
        ins = n_rows / (time.perf_counter() - t0)
        s.close()
        evicted = drop_file_cache(os.path.join(d, "s"))
        s = DiskStore(os.path.join(d, "s"), torch.int64, dim, torch.float32, create=False)
        keys = torch.randint(0, n_rows, (n_find,), generator=torch.Generator().manual_seed(2))
        t0 = time.perf_counter()
        s.find(keys)
        cold = n_find / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        s.find(keys)
        warm = n_find / (time.perf_counter() - t0)
        s.close()
        how = f"{evicted / 1e6:.0f} MB of store files dropped from the page cache" if evicted else "page cache kept"
        return [("insert (write batch)", n_rows, ins), (f"find cold (store reopened, {how})", n_find, cold),
                ("find warm (the same keys again)", n_find, warm)], dim
    finally:
        shutil.rmtree(d, ignore_errors=True)


def plot_step(plt, step_rows, gpu, T, B, R):
    """(b)'s rows as grouped bars, one panel per optimizer: per storage case (all-HBM, each cache fraction) a bar
    per timing (without prefetch, with prefetch, ...; pipelined ms, the synchronized median as a tick), all-HBM
    and issue 32's goal (1.3x all-HBM) as lines."""
    opts = list(dict.fromkeys(r[0] for r in step_rows))
    fig, axes = plt.subplots(1, len(opts), figsize=(6 * len(opts), 4), squeeze=False)
    sfxs = (" + prefetch (a job every step)", " + prefetch")
    for ax, o in zip(axes[0], opts):
        rows = [r for r in step_rows if r[0] == o]
        split = [(next((r[1][:-len(x)] for x in sfxs if r[1].endswith(x)), r[1]),
                  next((x.lstrip(" +") for x in sfxs if r[1].endswith(x)), "no prefetch"), r[3], r[2]) for r in rows]
        cases = list(dict.fromkeys(c for c, _, _, _ in split))
        series = list(dict.fromkeys(sr for _, sr, _, _ in split))
        w = 0.8 / len(series)
        for j, sr in enumerate(series):
            xs = [cases.index(c) + (j - (len(series) - 1) / 2) * w for c, s2, _, _ in split if s2 == sr]
            ax.bar(xs, [ms for _, s2, ms, _ in split if s2 == sr], w, label=f"{sr} (pipelined)")
            ax.plot(xs, [ms for _, s2, _, ms in split if s2 == sr], "k_", ms=10,
                    label="synchronized (median)" if j == 0 else None)
        hbm = next((ms for c, _, ms, _ in split if c == "all-HBM"), None)
        if hbm:
            ax.axhline(hbm, color="gray", lw=0.8, ls=":", label="all-HBM (pipelined)")
            ax.axhline(1.3 * hbm, color="red", lw=0.8, ls="--", label="1.3x all-HBM (goal at 25 %)")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([c.replace(" (uva store)", "\n(uva store)") for c in cases], fontsize=8)
        ax.set_ylabel("ms per train step")
        ax.set_title(f"{o}: {T} tables x {B} ids, D128 fp32, {R} ids per table", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"dynamicemb storage tiers: train step with an HBM cache, {gpu}", fontsize=10)
    fig.tight_layout()
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a minute)")
    ap.add_argument("--results", help="append the markdown to this file")
    ap.add_argument("--plot", default=None, help="PNG of the train-step times")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--skip", default="", help="comma list of parts to skip: hybrid,hkv,step,disk")
    ap.add_argument("--hkv-capacity", type=int, default=None, help="slots of (a2) (default 128M; --quick 16M)")
    ap.add_argument("--hkv-tables", default="all-HBM,hybrid", help="tables of (a2): all-HBM, hybrid, hybrid-sm "
                    "(the private slot-major host rows) (comma list)")
    ap.add_argument("--hkv-keysets", default="hits,hkv", help="key sets of (a2): hits (all hits), hkv (HKV's hit "
                    "rate 0.6) (comma list)")
    ap.add_argument("--hkv-reps", type=int, default=10, help="timed calls per op of (a2) (median; 3 warm-up calls)")
    ap.add_argument("--hkv-load", default="0.5", help="load factors (a2) fills to, comma list (default 0.5, HKV's)")
    ap.add_argument("--step-rows", type=int, default=None, help="rows per table of (b) (default 1M; --quick 128K)")
    ap.add_argument("--step-batch", type=int, default=None, help="ids per table per step of (b) (default 104857)")
    ap.add_argument("--disk-rows", type=int, default=None, help="stored rows of (c) (default 4M; --quick 200K)")
    ap.add_argument("--fracs", default="0.1,0.25,0.5", help="cache fractions of (b) (empty: no caching rows)")
    ap.add_argument("--hybrid-fracs", default="", help="HBM fractions of (b)'s hybrid rows (default none; e.g. "
                    "0.25,0.5: hybrid tables with that share of the rows in HBM, the rest in pinned host memory)")
    ap.add_argument("--hybrid-orders", default="forward", help="host_rows_order of (b)'s hybrid rows: forward (the "
                    "default: the forward reads host rows through HBM scratch in address order), step (forward and "
                    "backward), off; a -bm / -sm suffix (e.g. forward-bm): the tables' host rows bucket-major "
                    "(private) / slot-major (the default)")
    ap.add_argument("--opts", default="sgd,adam", help="optimizers of (b)")
    ap.add_argument("--job-rows", action="store_true", help="(b), (b2): also each caching row with a prefetch job every "
                    "step (prefetch_adaptive off: the cost of a job, also over a warm set)")
    ap.add_argument("--rounds", type=int, default=0, help="also (b2): (b)'s cases built at once and timed in this "
                    "many interleaved rounds (pipelined and synchronized, ratios paired per round)")
    ap.add_argument("--round-reps", type=int, default=20, help="steps per case and round of (b2)")
    ap.add_argument("--batches", type=int, default=4, help="distinct batches (b) and (b2) cycle through (default 4: "
                    "a warm set at 25 %%; 64: a working set larger than a 25 %% cache, misses every step)")
    ap.add_argument("--stores", default="host,uva", help="backing stores of (b)'s caching rows: host (HostStore), "
                    "uva (UvaStoreSpec: rows in pinned host memory indexed in HBM, staged on the device by op cache_stage), "
                    "uva-py (the same store staged by the Python staging), disk (a DiskStore per table in a fresh "
                    "directory)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("embedding_tiers: no GPU, skipped")
        return 0
    skip = set(filter(None, a.skip.split(",")))
    warmup = a.warmup if a.warmup is not None else (3 if a.quick else 8)
    gpu = torch.cuda.get_device_name()
    md = [f"## Storage tiers ({gpu}, {datetime.date.today()}, {'quick' if a.quick else 'full'})", "",
          f"Command: `{command()}`", ""]
    bw = pcie_gbps()
    md += [f"Pinned host<->device copy bandwidth measured: {bw:.1f} GB/s.", ""]
    if "hybrid" not in skip:
        md += ["### (a) hash-table ops, rows in pinned host memory (hybrid, hbm_rows=0) vs all-HBM, fp32 D=128", "",
               "| table | op | keys | ms | PCIe MB | GB/s | % of measured bw |", "|---|---|---:|---:|---:|---:|---:|"]
        for r in bench_hybrid(a.quick, bw):
            md.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.0f} |")
        md.append("")
    if "hkv" not in skip:
        cap = a.hkv_capacity or ((1 << 24) if a.quick else (1 << 27))
        for load in [float(x) for x in str(a.hkv_load).split(",")]:
            md += [f"### (a2) HierarchicalKV's hybrid config: dim 64 fp32, capacity {cap}, hbm_rows = capacity / 2, "
                   f"filled to load factor {load}, "
                   f"1M-key batches: distinct stored keys (all hits) and HKV's hit rate {HIT_RATE}", "",
                   "billion KV/s in 1e9 and in HKV's units (2^30); HKV: its own benchmark measured on this H200 "
                   "today, HKV ae24eec, hit rate 0.6, load factor 0.5 (2^30 units); host: host rows touched per key; "
                   "PCIe bound: the measured copy bandwidth over those rows (1e9 KV/s).", "",
                   "| table | keys | op | n | load factor | ms | G KV/s (1e9) | G KV/s (2^30) | HKV (2^30) | x HKV | "
                   "host | PCIe bound (1e9) | % of bound |",
                   "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            ks = {"hits": "all hits", "hkv": f"hit rate {HIT_RATE}"}
            rows, shares = bench_hkv(cap, bw, reps=a.hkv_reps, tables=a.hkv_tables.split(","), load=load,
                                     keysets=[ks[k] for k in a.hkv_keysets.split(",")])
            for r in rows:
                name, keyset, op, nk, lf, ms, g9, g30, hkv, bound, host = r
                ok = bound == bound
                md.append(f"| {name} | {keyset} | {op} | {nk} | {lf:.2f} | {ms:.3f} | {g9:.3f} | {g30:.3f} | "
                          f"{hkv if hkv is not None else ''} | {f'{g30 / hkv:.2f}' if hkv else ''} | {host:.2f} | "
                          f"{f'{bound:.3f}' if ok else ''} | {f'{100 * g9 / bound:.0f}' if ok else ''} |")
                print(f"a2: load {load}: {md[-1]}", flush=True)  # progress (a run cut short keeps these)
            md.append("")
            for name, lf, ns, sh in shares:
                md.append(f"- {name}: load factor {lf:.3f}, {ns} stored keys, {100 * sh:.1f} % of them in host "
                          "slots")
                print(f"a2: load {load}: {md[-1]}", flush=True)
            md.append("")
    step_rows = None
    if "step" not in skip:
        t0 = time.perf_counter()
        step_rows, (T, B, dim, R) = bench_step(a.quick, warmup, a.step_rows, a.step_batch,
                                               [float(x) for x in a.fracs.split(",") if x],
                                               a.opts.lower().split(","), [s for s in a.stores.split(",") if s], bw,
                                               a.batches, [float(x) for x in a.hybrid_fracs.split(",") if x],
                                               [o for o in a.hybrid_orders.split(",") if o], a.job_rows)
        step_s, (_, peak) = time.perf_counter() - t0, host_rss_gb()
        md += [f"### (b) train step: {T} tables x {B} ids, D={dim} fp32, power law 1.05 over {R} ids per table, "
               f"pooling none (ms per step, wall clock: synchronized = a device sync after each step, the median of "
               f"{5 if a.quick else 20}; pipelined = {5 if a.quick else 20} steps in a row, one sync; rows moved per step between "
               f"store and caches (hybrid: the step's distinct rows in host slots, read and written by the step "
               f"itself), the MB they put on PCIe and that at the measured {bw:.1f} GB/s)", "",
               "| optimizer | storage | ms synchronized | ms pipelined | rows in / out per step | PCIe MB per step | "
               "PCIe bound ms | note |", "|---|---|---:|---:|---:|---:|---:|---|"]
        for o, n, ms, pms, rio, mb, bound, note in step_rows:
            md.append(f"| {o} | {n} | {ms:.3f} | {pms:.3f} | {rio} | {mb:.1f} | {bound:.2f} | {note} |")
        md += ["", f"(b) took {step_s:.1f} s; the process's peak host RSS {peak:.1f} GB.", ""]
    if a.rounds > 0:
        rr, (T, B, dim, R) = bench_step_rounds(warmup, a.rounds, a.step_rows, a.step_batch,
                                               [float(x) for x in a.fracs.split(",")], a.opts.lower().split(","),
                                               a.stores.split(","), a.round_reps, a.batches, a.job_rows)
        md += [f"### (b2) train step, {a.rounds} interleaved rounds of {a.round_reps} steps per case: {T} tables x {B} "
               f"ids, D={dim} fp32, power law 1.05 over {R} ids per table, pooling none (ms per step; pipelined: no "
               f"sync between steps; synchronized: a device sync after each step, median; ratios to all-HBM paired "
               f"per round, their median; {a.batches} batches cycled; rows staged: into the caches per timed step)", "",
               "| optimizer | storage | pipelined ms (median, min-max) | synchronized ms | pipelined / all-HBM | "
               "synchronized / all-HBM | rows staged per step |", "|---|---|---:|---:|---:|---:|---:|"]
        for o, n, pm, plo, phi, sm, rp, rs, rin in rr:
            md.append(f"| {o} | {n} | {pm:.3f} ({plo:.3f}-{phi:.3f}) | {sm:.3f} | {rp:.2f}x | {rs:.2f}x | "
                      f"{rin:,.0f} |")
        md.append("")
    if "disk" not in skip:
        rows, dim = bench_disk(a.quick, a.disk_rows)
        md += [f"### (c) disk store (RocksDB via rocksdict), rows of D={dim} fp32", "", "| op | rows | rows/s |",
               "|---|---:|---:|"]
        md += [f"| {n} | {k} | {r:,.0f} |" for n, k, r in rows]
        md.append("")
    text = "\n".join(md)
    publish(text, a.results)
    if a.plot and step_rows:
        plt = pyplot(a.plot)
        if plt is None:
            return 0
        save_figure(plot_step(plt, step_rows, gpu, T, B, R), a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
