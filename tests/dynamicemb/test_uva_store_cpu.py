"""The device-indexed host store (``UvaStoreSpec``, dynamicemb/_uva_store.py) on CPU modules (its table is the
CPU twin; the staging code is the one that runs on CUDA): bit-identical training to all-HBM under eviction pressure
with steps in flight and prefetch jobs; one host wait per staging step (none after a prefetch); capacity errors and
a full store change nothing; the store's own interface. Checkpoints: test_storage_cpu.py's MODES."""

import os
import sys

import pytest
import torch

from dynamicemb import _prefetch
from dynamicemb._caching import CacheCapacityError, CachedTable
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam
from dynamicemb._storage import StoreError
from dynamicemb._uva_store import UvaStore, UvaStoreSpec, unique_padded

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (BC, CACHE_SLOTS, SyncCounter, assert_same, logical_rows, make_t,  # noqa: E402
                             pending_reuse, rows, same_logical, step, t_batches, ten_percent, two_steps_in_flight)

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

UVA = UvaStoreSpec()
EMPTY = -(2**63)


def t_rows(m):
    return [rows(t) for t in m.tables]


def _flat(tables):
    return [x for t in tables for x in rows(t)]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


I64, F32 = torch.int64, torch.float32


@pytest.mark.parametrize("args, exc, msg", [
    ((I64, 2, F32, 100, 16), ValueError, "capacity: expected a positive multiple of bucket_capacity=16, got 100"),
    ((I64, 0, F32, 64, 16), ValueError, "value_dim: expected a positive int, got 0"),
    ((torch.int32, 2, F32, 64, 16), TypeError, "key_dtype: expected torch.int64 or torch.uint64, got torch.int32"),
    ((I64, 2, F32, 64, 0), ValueError, r"bucket_capacity: expected a power of two in \[16, 256\], got 0"),
])
def test_uva_store_bad_arguments(args, exc, msg):
    with pytest.raises(exc, match=msg):
        UvaStore(*args)


@pytest.mark.parametrize("variant", [-2, 13, 1 << 40])
def test_lab_stage_range(variant):
    """The staging's lab selector (private op _lookup_lab_stage) refuses a variant outside -1 (read) .. 12 with an
    error naming the argument, the range and the value, and changes nothing."""
    op = torch.ops.dynamicemb._lookup_lab_stage
    before = op(-1)
    with pytest.raises(RuntimeError, match=rf"variant: expected -1 \(read\) or 0\.\.12 \(a staging variant\), got "
                       rf"{variant}"):
        op(variant)
    assert op(-1) == before
    assert op(before) == before  # (a valid value sets and returns the one before)


def test_uva_store_interface():
    s = UvaStore(torch.int64, 2, torch.float32, 64, 16)
    assert s.device_indexed and s.table.hbm_rows == 0
    g = torch.Generator().manual_seed(1)
    v = torch.randn(3, 2, generator=g)
    s.insert(torch.tensor([1, 2, 3]), v, torch.tensor([5, 6, 7]))
    s.erase(torch.tensor([2]))
    r = s.find(torch.tensor([1, 2, 3, EMPTY]))
    assert r.found.tolist() == [True, False, True, False] and r.scores[[0, 2]].tolist() == [5, 7]
    assert torch.equal(r.values[[0, 2]], v[[0, 2]])
    assert s.size() == 2 and sum(k.numel() for k, _, _ in s.export_batches(16)) == 2
    assert sum(k.numel() for k, _, _ in s.export_batches(16, threshold=6)) == 1
    # full: a write whose rows do not fit raises and leaves the store as it was (erasures and overwrites undone)
    s.insert(torch.arange(100, 130), torch.randn(30, 2, generator=g), torch.arange(30))
    keys_before = rows(s.table)
    with pytest.raises(StoreError, match=r"UvaStore: full: .*\(nothing was written\)"):
        s.write(torch.cat([torch.tensor([1]), torch.arange(300, 340)]), torch.randn(41, 2, generator=g),
                torch.arange(41), torch.tensor([3, 100]))
    assert _same(keys_before, rows(s.table)) and s.size() == 32
    s.clear()
    assert s.size() == 0


def test_unique_padded():
    k = torch.tensor([5, EMPTY, 3, 5, 9, 3, 3])
    u = unique_padded(k)
    assert u.numel() == k.numel() and sorted(u[u != EMPTY].tolist()) == [3, 5, 9]


@pytest.mark.parametrize("dstage", [False, True], ids=["python", "op"])
@pytest.mark.parametrize("T", [1, 3, 6])
def test_uva_staging_parity_many_tables(T, dstage):
    """Tables over UvaStores stage on the device (no host store, no readback of ids): bit-identical to all-HBM with
    T tables of two row layouts under eviction pressure, with two steps in flight (pins: their keys, or with op
    cache_stage (``dstage``, its CPU twin) their stamps); CPU-ids prefetch reads nothing ahead (the staging reads
    the store on the device)."""
    ref, m = make_t("hbm", T), make_t("caching", T, slots=CACHE_SLOTS + 4 * BC, store=UVA)
    m.device_staging = dstage
    assert all(t.device_store for t in m.tables)
    data = list(t_batches(T, 14, seed=T))
    for i, (ids, off, w) in enumerate(data):
        if i == 4:  # two steps in flight: the first's rows stay while the second stages
            two_steps_in_flight(ref, m, data, i)
            continue
        if i == 5:
            continue
        if i % 3 == 0:
            m.prefetch(ids, off)
            assert not any(t._pending for t in m.tables)
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w)), f"step {i}"
    assert all(int(t.store.size()) for t in m.tables)  # rows went to the stores and came back
    assert_same(ref, m)
    assert all(len(t._pins) == 0 for t in m.tables)


def test_uva_staging_host_waits():
    """A step whose ids miss in every cache waits three times whatever the number of tables: the feature bounds (no
    device wait with host offsets, as here), the miss counts, and the capacity check of every cache and store
    together (the host store: 4); it runs 9 table ops per table, one lookup per feature and one hash of the
    missing ids (make_room); after a prefetch of its batch it waits for nothing and runs nothing (its job waits
    twice: its miss counts with the feature bounds, the capacity check; it looks each table up once over the whole
    batch instead of once per feature)."""
    for T in (1, 2, 5, 8):
        m = make_t("caching", T, slots=8 * BC, store=UVA)
        ops = 9 * T + T + 1 + 1
        for ids, off, w in t_batches(T, 5, seed=3, hi=2000):
            with SyncCounter(m) as c:
                out = m(ids, off)
            (out * w).sum().backward()
            assert (c.waits, c.table_ops) == (3, ops), (T, c.waits, c.table_ops)
        for ids, off, w in t_batches(T, 3, seed=4, hi=2000):
            with SyncCounter(m, "_prefetch_stage") as job:
                m._prefetch_stage(ids, off)
            with SyncCounter(m) as c:
                out = m(ids, off)
            (out * w).sum().backward()
            assert (c.waits, c.table_ops, job.waits, job.table_ops) == (0, 0, 2, ops - 1), (T, c.waits, job.waits,
                                                                                    job.table_ops)


@pytest.mark.parametrize("dstage", [False, True], ids=["python", "op"])
@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "thread"])
def test_uva_prefetched_steps_equal_hbm(threaded, dstage, monkeypatch):
    """Forward i, prefetch i + 1 (the job stages it on the device path), backward i: step i's rows stay, step i + 1
    stages nothing, training bit-identical to all-HBM; a logical write between a job and its step voids the job.
    ``dstage``: op cache_stage (its CPU twin) stages the steps and the jobs."""
    from dynamicemb import _device_stage

    T = 3
    ref, m = make_t("hbm", T), make_t("caching", T, slots=16 * BC, store=UVA)
    m.device_staging = dstage
    data = list(t_batches(T, 10, seed=13, hi=2000))
    calls = []
    orig = m._stage_device
    m._stage_device = lambda *a, **k: (calls.append(1), orig(*a, **k))[1]
    dorig = _device_stage.stage
    # (a step after its device prefetch runs the op gated by the job's flag: not a staging of its own)
    monkeypatch.setattr(_device_stage, "stage",
                        lambda *a, **k: (k.get("gate") is None and calls.append(1), dorig(*a, **k))[1])
    skipped = 0
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids, off, w)
        n0 = len(calls)
        out = m(ids, off)
        if i > 0 and i != 5:
            skipped += len(calls) == n0
        if i + 1 < len(data):
            job = _prefetch.submit(m, data[i + 1][0], data[i + 1][1], None, threaded)
            _prefetch.settle(m)
            assert job.error is None and job.missed > 0, job.error
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), f"step {i}"
        if i == 4:  # a logical write between the job of batch 5 and its step: the step stages again
            k, v = torch.arange(0, 40), torch.randn(40, 4)
            ref.set_rows(0, k, v), m.set_rows(0, k, v)
    assert skipped >= 7, skipped
    assert_same(ref, m)
    assert all(len(t._pins) == 0 for t in m.tables)
    assert (getattr(m, "_stage_totals", None) is not None) == dstage


def _overfull(data, off_src):
    ids = torch.cat([data[0], torch.arange(5000, 5000 + 40 * BC)])  # table 0's feature 0 gets far too many
    off = off_src.clone()
    off[1:] += 40 * BC
    return torch.cat([ids[off[0]:off[1] - 40 * BC], ids[-40 * BC:], ids[off[1] - 40 * BC:-40 * BC]]), off


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "job"])
def test_uva_capacity_error_changes_nothing(prefetch):
    """One cache cannot hold the step's ids: CacheCapacityError, and no cache and no store changed (the stores'
    writes were masked off on the device before the check). A failed job leaves the step to raise it."""
    T = 3
    m = make_t("caching", T, slots=8 * BC, store=UVA)
    data = list(t_batches(T, 3, seed=8, hi=2000))
    for ids, off, w in data[:2]:
        step(m, ids, off, w)
    before, sizes = t_rows(m), m.sizes()
    stores = [rows(t.store.table) for t in m.tables]
    clocks = [t.counters[:2].clone() for t in m.tables]
    ids, off = _overfull(data[2], data[2][1])
    if prefetch:
        job = _prefetch.submit(m, ids, off, None, False)
        assert isinstance(job.error, CacheCapacityError) and job.gens is None
    with pytest.raises(CacheCapacityError, match="raise hbm_budget_bytes"):
        m(ids, off)
    assert m.sizes() == sizes
    for b, a in zip(before, t_rows(m)):
        assert _same(b, a)
    for t, s, c in zip(m.tables, stores, clocks):
        assert _same(s, rows(t.store.table)) and torch.equal(t.counters[:2], c)


def test_uva_full_store_loses_nothing():
    """A store too small for the table's rows: the step whose write-back does not fit raises StoreError ("full"),
    its staging is undone (the same rows, scores and sizes as before the step), nothing is lost."""
    T = 2
    m = make_t("caching", T, slots=8 * BC,
               store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, 8 * BC, BC))  # logical room: 16 buckets
    raised = False
    for i, (ids, off, w) in enumerate(t_batches(T, 30, seed=2, hi=3000)):
        before, sizes = t_rows(m), m.sizes()
        try:
            step(m, ids, off, w)
        except StoreError as e:
            assert "full" in str(e) and "nothing lost" in str(e)
            raised = True
            assert m.sizes() == sizes
            for b, a in zip(before, t_rows(m)):
                assert _same(b, a)
            break
    assert raised


def test_uva_logical_ops_and_flush():
    """A CachedTable over a UvaStore: logical writes stage through the device path (one table), find/erase/size
    see cache + store, flush moves the cache into the store."""
    init_store = UvaStore(torch.int64, 4, torch.float32, 256, 16)
    t = CachedTable(32, 4, bucket_capacity=16, store=init_store, device="cpu")
    g = torch.Generator().manual_seed(3)
    keys = torch.randperm(1000, generator=g)[:120]
    vals = torch.randn(120, 4, generator=g)
    for a in range(0, 120, 20):
        t.insert_or_assign(keys[a:a + 20], vals[a:a + 20], torch.arange(a, a + 20))
    assert t.size() == 120 and init_store.size() > 0
    r = t.find(keys)
    assert bool(r.found.all()) and torch.equal(r.values, vals)
    assert int(t.erase(keys[:10]).sum()) == 10 and t.size() == 110
    t.flush()
    assert int(t.counters[1]) == 0 and init_store.size() == 110
    r = t.find(keys[10:])
    assert torch.equal(r.values, vals[10:])


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetch"])
@pytest.mark.parametrize("store", ["host", "uva"])
def test_ten_percent_cache_parity(store, prefetch):
    """NVIDIA's config scaled down (storage_helpers.ten_percent): a 10 % cache missing every step, bit-identical
    to all-HBM over both stores, with and without the prefetch job."""
    from dynamicemb._optimizers import Adam

    ten_percent("cpu", Adam(lr=0.01), prefetch, UVA if store == "uva" else None)


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "job"])
def test_mixed_stores_in_one_module(prefetch):
    """One module with a table over a UvaStore and tables over host stores: the uva table stages on the device,
    the others on the host path (their misses only), in one step or one job; bit-identical to all-HBM."""
    T = 3
    ref = make_t("hbm", T)
    m = make_t("caching", T, slots=16 * BC, store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, cap, BC))
    m.tables[1].store = __import__("dynamicemb._storage", fromlist=["HostStore"]).HostStore(
        m.key_dtype, m.tables[1].value_dim, m.tables[1].value_dtype, 1024, BC)  # table 1: host store (empty yet)
    assert [t.device_store for t in m.tables] == [True, False, True]
    data = list(t_batches(T, 10, seed=21, hi=2000))
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids, off, w)
        out = m(ids, off)
        if prefetch and i + 1 < len(data):
            job = _prefetch.submit(m, data[i + 1][0], data[i + 1][1], None, False)
            assert job.error is None, job.error
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), f"step {i}"
    assert all(t.rows_moved[1] > 0 for t in m.tables)  # every table evicted into its store
    assert_same(ref, m)


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetch"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_device_staging_twin_parity(opt, prefetch):
    """Op cache_stage's CPU twin (the per-id staging of stage_common.h that the CUDA kernels run): NVIDIA's config
    scaled down with a 10 % cache that misses and evicts every step, bit-identical to all-HBM, with and without
    the prefetch job; every staging went through the op (its counts), none through the Python staging."""
    from dynamicemb import _uva_store

    calls = []
    real = _uva_store.stage_tables_device
    _uva_store.stage_tables_device = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        m = ten_percent("cpu", opt, prefetch, UVA, device_staging=True)
    finally:
        _uva_store.stage_tables_device = real
    assert not calls
    tot = m._stage_totals
    assert int(tot[:, 0].sum()) > 0 and int(tot[:, 1].sum()) > 0 and int(tot[:, 2].sum()) == 0
    assert all(t.rows_moved[1] >= int(tot[i, 1]) > 0 for i, t in enumerate(m.tables))


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "job"])
def test_device_staging_capacity_error_loses_nothing(prefetch):
    """Op cache_stage (CPU twin) with one cache unable to hold the step's ids: DeviceInputError on
    hbm_budget_bytes (at once on the CPU; on CUDA at the next call or check_errors), the ids that fit were staged
    and nothing else changed: every table holds the same rows and scores (cache + store) and sizes. A failed job
    leaves the step to stage and raise."""
    from dynamicemb import DeviceInputError

    T = 3
    m = make_t("caching", T, slots=8 * BC, store=UVA)
    m.device_staging = True
    data = list(t_batches(T, 3, seed=8, hi=2000))
    for ids, off, w in data[:2]:
        step(m, ids, off, w)
    before, sizes = logical_rows(m), m.sizes()
    ids, off = _overfull(data[2], data[2][1])
    if prefetch:
        job = _prefetch.submit(m, ids, off, None, False)
        assert isinstance(job.error, DeviceInputError) and job.gens is None
    with pytest.raises(DeviceInputError, match="hbm_budget_bytes.*table 0.*raise hbm_budget_bytes") as e:
        m(ids, off)
    assert e.value.arg == "hbm_budget_bytes" and e.value.index == 0
    assert m.sizes() == sizes and same_logical(before, logical_rows(m))
    for ids, off, w in data[:2]:  # the module trains on
        step(m, ids, off, w)


def test_device_staging_full_store_loses_nothing():
    """Op cache_stage (CPU twin) with a store too small for the rows its cache evicts: DeviceInputError on
    max_capacity; every row and score still held, sizes unchanged."""
    from dynamicemb import DeviceInputError

    T = 2
    m = make_t("caching", T, slots=8 * BC, store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, 8 * BC, BC))
    m.device_staging = True
    raised = False
    for ids, off, w in t_batches(T, 30, seed=2, hi=3000):
        before, sizes = logical_rows(m), m.sizes()
        try:
            step(m, ids, off, w)
        except DeviceInputError as e:
            assert e.arg == "max_capacity" and "raise max_capacity" in str(e)
            assert m.sizes() == sizes and same_logical(before, logical_rows(m))
            raised = True
            break
    assert raised


def test_device_staging_reuses_store_slots():
    """Op cache_stage (CPU twin) with a store one slot short of full under a full cache bucket: within one staging
    each victim after the first takes the store slot an earlier id's row left (its copies settled first); rows,
    scores and optimizer state bit-identical to all-HBM after every step (storage_helpers.pending_reuse)."""
    pending_reuse("cpu")


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_device_staging_reuses_store_slots_any_order(order):
    """The same with every step's ids in a random order (the CPU twin stages in batch order: other serial orders
    of the same ids, as the CUDA warps may take): every order succeeds and stays bit-identical to all-HBM (a
    staging refuses an id only when its bucket has no free and no unguarded slot, which no order of this test's
    at most 12 distinct ids per step over a 16-slot bucket gives)."""
    pending_reuse("cpu", order=order)


def test_device_staging_step_ops():
    """A step over op cache_stage (CPU twin) runs one table op (the op itself) and waits for nothing, whatever the
    number of tables and whether it misses (the CPU harness SyncCounter: host waits, table ops)."""
    for T in (1, 5):
        m = make_t("caching", T, slots=8 * BC, store=UVA)
        m.device_staging = True
        for i, (ids, off, w) in enumerate(t_batches(T, 4, seed=3, hi=2000)):
            for _ in range(2):  # the second step of a batch misses nothing
                with SyncCounter(m) as c:
                    out = m(ids, off)
                (out * w).sum().backward()
                assert (c.waits, c.table_ops) == (0, 1), (T, i, c.waits, c.table_ops)
