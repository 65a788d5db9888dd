"""Prefetch of a device batch (dynamicemb/_prefetch.py) on CPU modules: the job stages the batch ahead of its step
(inline, counted op by op, or in the job thread while a step is in flight); the step then stages nothing and waits
for nothing; training stays bit-identical to all-HBM under eviction pressure; failed jobs leave the step to raise."""

import os
import sys
import threading

import pytest
import torch

from dynamicemb import _prefetch
from dynamicemb._caching import CacheCapacityError
from dynamicemb._load import load_library
from dynamicemb._storage import StoreError

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (BC, SyncCounter, assert_same, make_t, prefetch_adaptive_counts, probe_batches,  # noqa: E402
                             step, t_batches)

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


def _in_cache(m, ids, off):
    """Per caching table: whether every id of the batch that the table holds (cache or store) is in its cache."""
    out = {}
    for t, k in m._table_keys(ids, off, m._cached).items():
        held, cached = m.tables[t].contains(k), m.tables[t]._cache_find(k)[0]
        out[t] = bool((cached | ~held).all())
    return out


@pytest.mark.parametrize("early", [False, True], ids=["count", "early_count"])
@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "thread"])
def test_prefetched_steps_equal_hbm_under_pressure(threaded, early):
    """The pipeline shape (forward i, prefetch i + 1, backward i) with every step missing in every cache: the job
    stages batch i + 1 while step i is in flight, step i's rows stay (pins), step i + 1 finds all its ids cached and
    stages nothing; the training is bit-identical to all-HBM. Also: two batches ahead (the second job's staging
    voids the first's), a logical write between a job and its step, a batch changed in place after its prefetch."""
    T = 3
    ref, m = make_t("hbm", T), make_t("caching", T, slots=16 * BC)  # two batches fit, not many more
    m.prefetch_early_count = early
    data = list(t_batches(T, 12, seed=13, hi=2000))  # 12 steps: the all-HBM tables never fill a bucket
    staged_ahead = skipped = 0
    orig = m._stage_missing
    calls = []
    m._stage_missing = lambda *a, **k: (calls.append(1), orig(*a, **k))[1]
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids, off, w)
        n0 = len(calls)
        out = m(ids, off)
        if i > 0 and data[i - 1][3] == "plain":
            skipped += len(calls) == n0  # the step after its own job staged nothing
        kind = "plain"
        if i + 1 < len(data):
            if i == 5:  # two batches ahead: the job of batch 7 changes the caches after batch 6's job
                m._prefetch_stage(*data[i + 1][:2], threaded=threaded)
                m._prefetch_stage(*data[i + 2][:2], threaded=threaded)
                kind = "voided"
            elif i == 9:  # changed in place after its prefetch: the step does not trust the job
                m._prefetch_stage(*data[i + 1][:2], threaded=threaded)
                data[i + 1][0][:3] += 1
                kind = "modified"
            else:
                job = _prefetch.submit(m, data[i + 1][0], data[i + 1][1], None, threaded)
                _prefetch.settle(m)
                assert job.error is None, job.error
                staged_ahead += job.missed > 0
                assert all(_in_cache(m, ids, off).values()), f"step {i}: a row of the step in flight was evicted"
                assert all(_in_cache(m, *data[i + 1][:2]).values()), f"step {i}: the job did not stage its batch"
        data[i] = data[i][:3] + (kind,)
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), f"step {i}"
        if i == 3:  # a logical write between the job of batch 4 and its step: the step checks again
            k, v = torch.arange(0, 40), torch.randn(40, 4)
            ref.set_rows(0, k, v), m.set_rows(0, k, v)
    assert staged_ahead >= 6 and skipped >= 6, (staged_ahead, skipped)
    assert_same(ref, m)
    assert all(len(t._pins) == 0 for t in m.tables)  # the job released what it pinned


@pytest.mark.parametrize("early", [False, True], ids=["count", "early_count"])
def test_prefetched_step_waits_for_nothing(early):
    """Counted op by op (SyncCounter): a step whose job staged its batch waits for nothing and runs no table op;
    the job itself waits a fixed number of times whatever the number of tables: 4 (feature bounds, miss counts,
    missing ids, insert results), 3 with the early count (counts and bounds in one readback), and runs the
    staging's table ops (7 per table and one hash of the missing ids) plus one lookup per feature (per table with
    the early count) for its count."""
    for T in (1, 2, 5):
        m = make_t("caching", T, slots=8 * BC)
        m.prefetch_early_count = early
        for ids, off, w in t_batches(T, 6, seed=3, hi=2000):
            with SyncCounter(m, "_prefetch_stage") as job:
                m._prefetch_stage(ids, off)
            with SyncCounter(m) as c:
                out = m(ids, off)
            (out * w).sum().backward()
            assert (c.waits, c.table_ops) == (0, 0), (T, c.waits, c.table_ops)
            assert job.waits == (3 if early else 4), (T, job.waits)
            assert job.table_ops == 7 * T + 1 + (T if early else T + 1), (T, job.table_ops)


def test_prefetch_job_thread_and_table_calls():
    """A job runs in the job thread; a caching table's logical ops and the module's calls wait for it (never see a
    table mid-staging), and a job's own table calls do not wait for themselves."""
    T = 2
    m = make_t("caching", T, slots=8 * BC)
    data = list(t_batches(T, 4, seed=4, hi=2000))
    step(m, *data[0])
    where = []
    orig = m._stage_missing

    def slow(*a, **k):
        where.append(threading.current_thread().name)
        threading.Event().wait(0.2)  # a long staging: the calls below must wait for it
        return orig(*a, **k)

    m._stage_missing = slow
    job = _prefetch.submit(m, data[1][0], data[1][1], None, threaded=True)
    sizes = m.sizes()  # waits for the job
    assert job.future.done() and job.error is None and job.missed > 0
    assert where and where[0].startswith("dynamicemb-prefetch")
    assert sizes == m.sizes()
    _prefetch.submit(m, data[2][0], data[2][1], None, threaded=True)
    n = m.tables[1].size()  # a table call waits too
    assert _prefetch.pending(m.tables[1]) is None and n == m.tables[1].size()


@pytest.mark.parametrize("fault", ["capacity", "store"])
@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "thread"])
def test_failed_job_leaves_the_step_to_raise(fault, threaded):
    """A job that cannot stage (a cache too small for the batch, a store that fails) changes nothing; the batch's
    step stages itself and raises the error; once the cause is gone, training goes on as all-HBM."""
    T = 3
    ref, m = make_t("hbm", T), make_t("caching", T, slots=8 * BC, flaky=True)
    data = list(t_batches(T, 6, seed=6, hi=2000))
    for ids, off, w in data[:2]:
        step(ref, ids, off, w), step(m, ids, off, w)
    step(ref, *data[1])  # a step in flight (data[1] once more) while the job runs: the job pins its ids
    inflight = m(*data[1][:2])
    sizes = m.sizes()
    if fault == "capacity":
        ids = torch.cat([data[2][0], torch.arange(5000, 5000 + 40 * BC)])  # table 0's feature 0: far too many
        off = data[2][1].clone()
        off[1:] += 40 * BC
        ids = torch.cat([ids[off[0]:off[1] - 40 * BC], ids[-40 * BC:], ids[off[1] - 40 * BC:-40 * BC]])
        err = CacheCapacityError
    else:
        ids, off = data[2][:2]
        m.tables[1].store.fail_find = True
        err = StoreError
    job = _prefetch.submit(m, ids, off, None, threaded)
    _prefetch.settle(m)
    assert isinstance(job.error, err) and job.gens is None
    (inflight * data[1][2]).sum().backward()
    # the failed job keeps nothing of the step alive (its error holds no traceback, hence no frames, no pins)
    assert all(len(t._pins) == 0 for t in m.tables) and job.error.__traceback__ is None
    assert m.sizes() == sizes
    with pytest.raises(err):
        step(m, ids, off, torch.randn(4, 4 + sum(4 if i % 2 == 0 else 8 for i in range(T))))
    assert m.sizes() == sizes
    m.tables[1].store.fail_find = False
    for ids, off, w in data[2:]:
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)


def test_job_pins_the_steps_in_flight_when_queued(monkeypatch):
    """A job keeps pinned the steps in flight when it was queued, even when their backward runs (and releases
    them) before the job stages: on CUDA that backward's update may still be queued on the device."""
    import dynamicemb._batched_tiers as b  # the module whose staging calls stage_tables

    T = 2
    m = make_t("caching", T, slots=16 * BC)
    data = list(t_batches(T, 3, seed=9, hi=2000))
    step(m, *data[0])
    out = m(*data[1][:2])
    in_flight = list(m.tables[0]._pins)
    assert len(in_flight) == 1
    gate, seen, orig = threading.Event(), [], b.stage_tables

    def spy(*a, **k):
        gate.wait(10)
        seen.append(list(k.get("pins", ())))
        return orig(*a, **k)

    monkeypatch.setattr(b, "stage_tables", spy)
    job = _prefetch.submit(m, data[2][0], data[2][1], None, threaded=True)
    (out * data[1][2]).sum().backward()  # step 1's backward before the job stages
    gate.set()
    _prefetch.settle(m)
    assert job.error is None and seen and any(p is in_flight[0] for p in seen[0])
    del in_flight, seen[:]
    assert all(len(t._pins) == 0 for t in m.tables)  # released once the job ran


def test_job_count_equals_the_step_count():
    """The job's miss count (every table looks the whole batch up, other tables' ids masked; no host bounds) gives
    the step's per-feature count and found mask: a module with an all-HBM table among caching ones, a table read by
    two features, empty bags and reserved ids."""
    from dynamicemb._batched import BatchedDynamicEmbeddingTables
    from dynamicemb._options import DynamicEmbTableOptions

    opts = [DynamicEmbTableOptions(dim=4, max_capacity=1024, bucket_capacity=BC, storage=s,
                                   hbm_budget_bytes=128 * 12 * 4 if s == "caching" else None)
            for s in ("caching", "hbm", "caching")]
    m = BatchedDynamicEmbeddingTables(opts, [0, 1, 2, 0], pooling="sum", device="cpu")
    for i, (ids, off) in enumerate(probe_batches(6, 700, seed=2)):  # batch 3: reserved keys, always a miss
        cached = m._cached
        assert cached == [0, 2]
        found, want = m._miss_counts(ids, m._bounds(off), cached)
        miss, jfound, ends = _prefetch._count_misses(m, ids, off, cached)
        assert dict(zip(cached, miss.tolist())) == want and torch.equal(jfound, found), i
        assert ends.tolist() == m._bounds(off)
        out = m(ids.clamp(min=0), off)  # fills the caches for the next batch
        out.sum().backward()


def test_count_step_one_wait_and_warm_step_stages_nothing():
    """``_prefetch.count_step`` (the step's and the job's miss check; on CUDA the one-launch op ``cache_probe``,
    here its CPU form): the step's per-feature counts, found mask and the feature bounds with exactly one host wait;
    a warm step (every id cached, no prefetch) runs no staging table op but its count's lookups (one per feature)
    and waits twice on a CPU module (its offsets are host tensors: the bounds, then the counts; on CUDA the op
    reads both back at once, test_cache_probe_gpu.py)."""
    T = 3
    m = make_t("caching", T, slots=16 * BC)
    ids, off, w = next(t_batches(T, 1, seed=21, hi=300))
    cached = m._cached
    for _ in range(2):  # the second step finds every id in the caches
        out = m(ids, off)
        (out * w).sum().backward()
    bad = ids.clone()
    bad[:3] = -(2**63)  # reserved ids always miss
    bad[3:9] += 5000  # ids no table holds
    with SyncCounter(m, "_count_with_bounds") as c:
        found, counts, bounds = m._count_with_bounds(bad, off, cached)
    assert c.waits == 1, c.waits
    want_found, want = m._miss_counts(bad, m._bounds(off), cached)
    assert counts == want and torch.equal(found, want_found) and bounds == m._bounds(off)
    assert sum(counts.values()) >= 9
    with SyncCounter(m) as c:
        out = m(ids, off)
    (out * w).sum().backward()
    assert c.waits == 2 and c.table_ops == T + 1, (c.waits, c.table_ops)


def test_adaptive_warm_jobs_only_count():
    """``prefetch_adaptive`` over host-staged tables: after a warm job, 15 prefetches in 16 queue nothing and the
    16th a count only; a miss turns staging ahead back on (storage_helpers.prefetch_adaptive_counts)."""
    T = 3
    prefetch_adaptive_counts(make_t("hbm", T), make_t("caching", T, slots=16 * BC), T)
