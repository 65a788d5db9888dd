"""The caching tables' device ops on CUDA (skip without a GPU): the one-launch miss check (op ``cache_probe``,
``_prefetch.count_step``) gives the same found mask, per-table misses and feature bounds as one masked lookup per
table, and the Python staging's step and prefetch job take it; with op ``cache_stage`` (the default over the uva
store) no step makes a host synchronization, warm or missing, with or without prefetch (sync debug mode
"error")."""

import os
import sys

import pytest
import torch

from dynamicemb import _prefetch
from dynamicemb._load import load_library
from dynamicemb._uva_store import UvaStoreSpec

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import BC, assert_same, hot_stamps, make_t, probe_batches, sync_warnings, t_batches  # noqa: E402

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

UVA = UvaStoreSpec()


def _mixed():
    """Caching (uva store), all-HBM, caching (host store) tables; table 0 read by two features."""
    from dynamicemb._batched import BatchedDynamicEmbeddingTables
    from dynamicemb._options import DynamicEmbTableOptions

    opts = [DynamicEmbTableOptions(dim=4, max_capacity=2048, bucket_capacity=BC, storage=s,
                                   hbm_budget_bytes=128 * 12 * 4 if s == "caching" else None,
                                   backing_store=UVA if i == 0 else None)
            for i, s in enumerate(("caching", "hbm", "caching"))]
    return BatchedDynamicEmbeddingTables(opts, [0, 1, 2, 0], pooling="sum", device="cuda")


def test_cache_probe_equals_lookups_cuda():
    """Random batches (empty bags, reserved ids, ids of no table): the op's found mask, counts and bounds equal the
    masked lookups' (``_count_misses``) and the per-feature count (``_miss_counts``), for every subset of tables."""
    m = _mixed()
    assert m.use_kernels and _prefetch.probe_op_serves(m, torch.zeros(1, dtype=torch.int64, device="cuda"))
    for i, (ids, off) in enumerate(probe_batches(6, 900, seed=5, device="cuda")):
        for tables in ([0, 2], [0], [2]):
            found, counts, bounds = _prefetch.count_step(m, ids, off, tables)
            miss, jfound, ends = _prefetch._count_misses(m, ids, off, tables)
            assert counts == dict(zip(tables, miss.tolist())) and torch.equal(found, jfound), (i, tables)
            assert bounds == ends.tolist() == m._bounds(off)
            sfound, scounts = m._miss_counts(ids, bounds, tables)
            assert scounts == counts and torch.equal(sfound, found)
        out = m(ids.clamp(min=0), off)  # fills the caches for the next batch
        out.sum().backward()
    torch.cuda.synchronize()


def test_step_and_job_count_with_one_launch_cuda(monkeypatch):
    """The step's and the prefetch job's miss checks take the op (the per-table lookups are not called), and the
    training stays bit-identical to all-HBM with misses in every step."""
    def no_lookups(*a, **k):
        raise AssertionError("_count_misses called: the op cache_probe should serve the count")

    monkeypatch.setattr(_prefetch, "_count_misses", no_lookups)
    T = 3
    # 16 buckets: the next batch is prefetched while this step's rows are pinned (8 did not hold both)
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    m.device_staging = False  # the Python staging counts first (op cache_stage probes inside its own op)
    data = list(t_batches(T, 6, seed=9, hi=2000, device="cuda"))
    for i, (ids, off, w) in enumerate(data):
        o_ref = ref(ids, off)
        out = m(ids, off)
        if i + 1 < len(data):
            m.prefetch(*data[i + 1][:2])
            job = _prefetch._LAST[m]
        (o_ref * w).sum().backward()
        (out * w).sum().backward()
        if i + 1 < len(data):
            job.wait()
            assert job.error is None, job.error
            assert job.missed > 0, f"step {i}: the prefetch found every id cached (no miss to count)"
        assert torch.equal(o_ref, out), f"step {i}"
    torch.cuda.synchronize()
    assert_same(ref, m)


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
def test_no_host_sync_cuda(prefetch):
    """Op cache_stage (the default over the uva store): a warm step (every id in the caches) and a step that misses
    in every cache make no host synchronization at all, forward and backward under sync debug mode "error" (any
    synchronization raises), with and without a prefetch of the batch (the job's own wait is in its thread, settled
    first); bit-identical to all-HBM. With the Python staging a warm step syncs once more than all-HBM (its
    counts: op cache_probe, one readback for every table)."""
    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    data = list(t_batches(T, 6, seed=13, hi=3000, device="cuda"))
    m.prefetch_adaptive = False  # (a job per prefetch: this test reads each one)
    warm = data[0]
    for mod in (ref, m):
        for _ in range(2):
            (mod(warm[0], warm[1]) * warm[2]).sum().backward()
    torch.cuda.synchronize()
    for i, (ids, off, w) in enumerate([warm] + data[1:] + [warm]):
        if prefetch:
            m.prefetch(ids, off)
            _prefetch.settle(m)
            job = _prefetch._JOBS[m][-1]
            assert job.error is None, job.error
        o_ref = ref(ids, off, validate=False)
        (o_ref * w).sum().backward()
        torch.cuda.synchronize()
        prev = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")  # as test_embedding_gpu.py::test_training_step_has_no_host_sync
        try:
            out = m(ids, off, validate=False)
            (out * w).sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode(prev)
        assert torch.equal(o_ref, out), f"step {i}"
    torch.cuda.synchronize()
    assert_same(ref, m)
    assert sum(t.rows_moved[1] for t in m.tables) > 0  # steps missed and evicted
    m.device_staging = False
    outs = []
    n_ref = sync_warnings(lambda: outs.append(ref(warm[0], warm[1], validate=False)))
    n = sync_warnings(lambda: outs.append(m(warm[0], warm[1], validate=False)))
    assert len(n) - len(n_ref) == 1, (n_ref, n)
    for o in outs:
        (o * warm[2]).sum().backward()
    torch.cuda.synchronize()
    assert_same(ref, m)


def test_probe_stamps_hot_slots_cuda():
    """The probe kernel's stamps with hot slots hit by thousands of threads of one launch (read before write):
    every hit slot carries max(its old stamp, the step's), the rest keep theirs, none decreases (as the CPU twin:
    test_device_stage_cpu.py)."""
    assert hot_stamps("cuda") > 0


def test_prefetch_queued_on_device_cuda(monkeypatch):
    """Forward i, prefetch i + 1, backward i over device-staged tables that miss and evict every step: the prefetch
    is op cache_stage queued on the side stream (no job thread, an end event; the call and the step make no host
    synchronization: sync debug mode "error"), each prefetched step runs its staging gated by the job's failed flag
    (the first step's, then per batch the job's and the gated step's), the previous step's rows survive the job,
    bit-identical to all-HBM. The steps stage inside their lookup_step (one op call per step): op cache_stage is
    called by the jobs only; a step whose job's flag copy already reads 0 on the host stages nothing at all."""
    from dynamicemb import _device_stage

    calls, ops = [], []
    real = _device_stage.stage
    monkeypatch.setattr(_device_stage, "stage", lambda *a, **k: (calls.append(k.get("gate")), real(*a, **k))[1])
    ns = torch.ops.dynamicemb
    for name in ("cache_stage", "lookup_step"):
        op = getattr(ns, name)
        monkeypatch.setattr(ns, name, lambda *a, _op=op, _n=name, **k: (ops.append(_n), _op(*a, **k))[1])
    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    data = list(t_batches(T, 8, seed=17, hi=3000, device="cuda"))
    m.prefetch_adaptive = False  # (a job per prefetch: this test reads each one)
    ref_outs, outs = [], []
    for ids, off, w in data:
        o = ref(ids, off, validate=False)
        (o * w).sum().backward()
        ref_outs.append(o.detach())
    torch.cuda.synchronize()
    ops.clear()  # the all-HBM reference's steps called lookup_step too
    prev = torch.cuda.get_sync_debug_mode()
    try:
        for i, (ids, off, w) in enumerate(data):
            out = m(ids, off, validate=False)
            if i == 0:  # after the first step's one-time setup (error block, records): no synchronization at all
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode("error")
            if i + 1 < len(data):
                m.prefetch(data[i + 1][0], data[i + 1][1])
                job = _prefetch._LAST[m]
                assert job.future is None and job.done is not None and job.skip is not None
            (out * w).sum().backward()
            outs.append(out.detach())
    finally:
        torch.cuda.set_sync_debug_mode(prev)
    torch.cuda.synchronize()
    # step 0, then per later batch its job (no gate: the first through _device_stage.stage, the later ones through
    # the module's bound job, which calls the op itself) and, unless the host saw the job's flag land as 0, its
    # step's staging gated by the job's failed flag
    jobs = [g for g in calls[1:] if g is None]
    gated = [g for g in calls[1:] if g is not None]
    assert calls[0] is None and len(jobs) == 1 and len(gated) <= len(data) - 1, calls
    assert "_prefetch_bind" in m.__dict__
    assert ops.count("lookup_step") == len(data) and ops.count("cache_stage") == len(data) - 1, ops
    for i, (a, b) in enumerate(zip(ref_outs, outs)):
        assert torch.equal(a, b), f"step {i}"
    assert_same(ref, m)
    assert sum(t.rows_moved[1] for t in m.tables) > 0  # the jobs evicted


def test_prefetch_seen_staged_step_stages_nothing_cuda(monkeypatch):
    """Forward i, prefetch i + 1, backward i, then a device synchronize: the job's failed flag has landed in its
    pinned host slot, so a step whose job staged its whole batch (0 there) runs no staging at all (no call of
    ``_device_stage.stage``, no gated launches), a step whose job failed (its caches full of the steps in flight)
    stages the rest gated; every slot is reused once seen; training bit-identical to all-HBM."""
    from dynamicemb import _device_stage

    calls = []
    real = _device_stage.stage
    monkeypatch.setattr(_device_stage, "stage", lambda *a, **k: (calls.append(k.get("gate")), real(*a, **k))[1])
    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    data = list(t_batches(T, 12, seed=23, hi=3000, device="cuda"))
    m.prefetch_adaptive = False  # (a job per prefetch: this test reads each one)
    skipped = 0
    for i, (ids, off, w) in enumerate(data):
        (ref(ids, off, validate=False) * w).sum().backward()
        n0 = len(calls)
        out = m(ids, off, validate=False)
        if i > 0:
            gated = calls[n0:]
            assert gated in ([], [calls[-1]]) and all(g is not None for g in gated), (i, gated)
            skipped += not gated
        if i + 1 < len(data):
            m.prefetch(data[i + 1][0], data[i + 1][1])
        (out * w).sum().backward()
        torch.cuda.synchronize()  # the job's flag copy lands before the next step looks
    assert skipped >= 1, skipped  # (most jobs stage their whole batch: the fast path ran)
    flags = m.__dict__["_prefetch_flags"]
    assert len(flags[3]) <= 1 and len(flags[2]) >= 63  # seen slots are free again (the last job's: never taken)
    assert_same(ref, m)
    assert sum(t.rows_moved[0] for t in m.tables) > 0  # the jobs moved rows in


def test_prefetch_bound_path_cuda():
    """The module's bound prefetch job (``_prefetch._DeviceBinding``, made by the first device prefetch over
    device-staged tables): later prefetches of a device batch go through it (one op call, no ``serves`` /
    ``_device_stage.stage``), and it steps aside (the full path runs) for int32 offsets, CPU ids, device staging
    off and a replaced table tensor (``_table.state_epoch``); training is bit-identical to all-HBM."""
    from dynamicemb import _device_stage, _table

    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    data = list(t_batches(T, 8, seed=29, hi=3000, device="cuda"))
    m.prefetch_adaptive = False  # (a job per prefetch: this test reads each one)
    served = []
    real = _device_stage.serves
    _device_stage.serves = lambda *a, **k: (served.append(1), real(*a, **k))[1]
    try:
        for i, (ids, off, w) in enumerate(data):
            o_ref = ref(ids, off, validate=False)
            (o_ref * w).sum().backward()
            out = m(ids, off, validate=False)
            if i + 1 < len(data):
                n0 = len(served)
                m.prefetch(data[i + 1][0], data[i + 1][1])
                bound = len(served) == n0
                assert bound == (i > 0), (i, bound)  # the first prefetch binds, the later ones use the binding
                assert _prefetch._LAST[m].done is not None
            (out * w).sum().backward()
            assert torch.equal(o_ref, out), f"step {i}"
    finally:
        _device_stage.serves = real
    torch.cuda.synchronize()
    assert_same(ref, m)
    ids, off = data[0][0], data[0][1]
    assert _prefetch.queue_bound(m, ids, off) is not None
    assert _prefetch.queue_bound(m, ids, off.int()) is None
    assert _prefetch.queue_bound(m, ids.cpu(), off.cpu()) is None
    m.device_staging = False
    assert _prefetch.queue_bound(m, ids, off) is None
    m.device_staging = True
    _table._STATE_EPOCH[0] += 1  # as a replaced table tensor
    assert _prefetch.queue_bound(m, ids, off) is None
    m.prefetch(ids, off)  # the full path binds again
    assert _prefetch.queue_bound(m, ids, off) is not None
    _prefetch.settle(m)


def test_prefetch_adaptive_warm_set_cuda():
    """``prefetch_adaptive`` (the default): over a warm working set (every id of the batches cached) the sampled
    jobs read no miss and most prefetches queue nothing (their steps stage themselves inside lookup_step); once
    the batches miss again (cold ids), a sample sees it and every prefetch queues its job again; once they are warm
    again, the next job's sample turns the skipping back on. Training is bit-identical to all-HBM throughout."""
    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    assert m.prefetch_adaptive
    warm = list(t_batches(T, 4, seed=31, hi=60, device="cuda"))  # (<= 60 ids per table: 256 slots)
    # cold: 16 batches over ids < 700 (~540 distinct per table: over the 256-slot cache, so they keep missing, and
    # within max_capacity 1024 of both modules, so neither evicts what the other keeps)
    cold = list(t_batches(T, 16, seed=37, hi=700, device="cuda"))
    calls = []
    ns = torch.ops.dynamicemb
    real = ns.cache_stage
    ns.cache_stage = lambda *a, **k: (calls.append(1), real(*a, **k))[1]

    def run(seq, steps):
        n0 = len(calls)
        for i in range(steps):
            ids, off, w = seq[i % len(seq)]
            o_ref = ref(ids, off, validate=False)
            (o_ref * w).sum().backward()
            out = m(ids, off, validate=False)
            m.prefetch(*seq[(i + 1) % len(seq)][:2])
            (out * w).sum().backward()
            assert torch.equal(o_ref, out), i
            torch.cuda.synchronize()  # (a sample's copy lands before the next prefetch looks)
        return len(calls) - n0

    try:
        run(warm, 32)  # every id of the warm batches cached, a sample read 0
        queued = run(warm, 48)
        assert 2 <= queued <= 5, queued  # a sampled job in 16 prefetches (SAMPLE_EVERY)
        queued = run(cold, 40)
        assert queued >= 24, queued  # the first sample of the cold batches sees misses: every prefetch queues
        run(warm, 8)  # the warm batches cached again (the cold ones took their slots)
        queued = run(warm, 16)
        assert queued <= 2, queued  # every queued job is sampled: skipping resumes at the first warm sample
    finally:
        ns.cache_stage = real
    torch.cuda.synchronize()
    assert_same(ref, m)
