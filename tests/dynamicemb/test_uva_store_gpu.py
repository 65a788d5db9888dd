"""The device-indexed host store (``UvaStoreSpec``) on CUDA (skip without a GPU): its rows really are in pinned
host memory; training bit-identical to all-HBM at a 10 % cache that misses every step, with and without the
prefetch job; host syncs of a staging step (at most two more than all-HBM, none after a prefetch); capacity and
full-store errors change nothing; checkpoints (state_dict, dump/load across modes). Parity over the optimizers:
test_storage_gpu.py's MODES."""

import os
import sys

import pytest
import torch

from dynamicemb._caching import CacheCapacityError
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam
from dynamicemb._storage import StoreError
from dynamicemb._uva_store import UvaStore, UvaStoreSpec

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (BC, assert_same, batches, make, make_t, pending_reuse,  # noqa: E402
                             prefetch_pipeline_cuda, prefetch_under_eviction_pressure, rows, staging_matches_twin,
                             staging_syncs_cuda, step, t_batches, ten_percent)

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

UVA = UvaStoreSpec()  # the default: slot-major host rows (table_types.h host_row_of)
UVA_BM = UvaStoreSpec(_slot_major=False)  # private: bucket-major host rows (the layout before slot-major)
LAYOUTS = pytest.mark.parametrize("store", [UVA_BM, UVA], ids=["bucket_major", "slot_major"])


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_uva_store_rows_in_host_memory():
    m = make("caching", device="cuda", stores=(UVA, UVA))
    for t in m.tables:
        st = t.store
        assert isinstance(st, UvaStore) and t.device_store
        assert st.table.values.numel() == 0 and st.table.values_host.is_pinned()
        assert st.table.keys.is_cuda and st.table.values_host.numel() == st.table.capacity() * st.table.value_dim


@pytest.mark.parametrize("dstage", [True, False], ids=["op", "python"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetch"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_ten_percent_cache_parity_cuda(opt, prefetch, dstage):
    """NVIDIA's config scaled down (storage_helpers.ten_percent): a 10 % cache that misses every step over the uva
    store, bit-identical to all-HBM, with and without the prefetch job on the side stream; staged by op
    cache_stage (the default) or the Python staging."""
    m = ten_percent("cuda", opt, prefetch, UVA, device_staging=dstage)
    assert all(t.store.size() > 0 for t in m.tables)
    assert (getattr(m, "_stage_totals", None) is not None) == dstage


@LAYOUTS
@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetch"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_cold_cache_parity_cuda(opt, prefetch, store):
    """A cold working set at a larger scale: 2 tables of 64K ids, D128 (512- and 1,536-byte rows), a 25 % cache,
    8 batches of 4K distinct power-law ids per table in turn (~18K ids: they outgrow the cache): thousands of victims
    written back and of stored rows brought in per step, over many blocks of the move kernels; bit-identical to
    all-HBM, with the stores' host rows bucket-major (the private layout) or slot-major (the default)."""
    m = ten_percent("cuda", opt, prefetch, store, T=2, R=1 << 16, n=4096, rounds=2, dim=128, frac=0.25, bucket=128,
                    cycle=8)
    assert all((t.store.table.host_run != 0) == store._slot_major for t in m.tables)
    moved = [sum(t.rows_moved[j] for t in m.tables) for j in (0, 1)]
    assert moved[0] > 2000 and moved[1] > 2000, moved


@LAYOUTS
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_cold_cache_beyond_stash_cuda(opt, store):
    """Most ids of a step miss (2,048 uniform distinct ids per table of 16K, a 25 % cache): ~3K records a step
    against the move passes' HBM stash of 256 bytes per id (2 MB: 4,096 rows of SGD's 512 bytes, 1,365 of Adam's
    1,536), so SGD moves every row in the one mixed pass and Adam's records beyond the stash take the two-pass
    path (victim from the cache slot, stored row after the pass); bit-identical to all-HBM either way, with the
    stores' host rows in either layout."""
    m = ten_percent("cuda", opt, False, store, T=2, R=1 << 14, n=2048, rounds=2, dim=128, frac=0.25, bucket=128,
                    cycle=4, uniform=True)
    moved_in = sum(t.rows_moved[0] for t in m.tables)
    assert moved_in > 8000, moved_in  # (the CPU twin of this run: 12,583 stored rows in over the 8 steps)


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetch"])
@pytest.mark.parametrize("dstage", [True, False], ids=["op", "python"])
def test_ten_percent_cache_parity_bucket_major_cuda(dstage, prefetch):
    """The 10 % cache over bucket-major stores (the private layout), staged by op cache_stage or by the Python
    staging (the table ops on the (n, dim) host rows): bit-identical to all-HBM."""
    m = ten_percent("cuda", SGD(lr=0.1), prefetch, UVA_BM, device_staging=dstage)
    assert all(t.store.size() > 0 and t.store.table.values_host.dim() == 2 for t in m.tables)


def test_uva_store_slot_major_rows_cuda():
    """The default slot-major layout (UvaStore(_slot_major=True)): host rows (B, num_buckets, dim); the table
    kernels write each key's row at host row j * num_buckets + b of its slot b * B + j (table_types.h host_row_of,
    _hybrid.split_rows) and read it back; state_dict / load_state_dict move rows between the two layouts, and
    _set_host_slot_major relays a store in place."""
    from dynamicemb._hybrid import split_rows

    g = torch.Generator().manual_seed(3)
    B, nb, dim, n = 128, 128, 8, 3000
    keys = torch.randperm(1 << 20, generator=g)[:n].to(torch.int64)
    vals = torch.randn(n, dim, generator=g)
    scores = torch.arange(1, n + 1)
    bm = UvaStore(torch.int64, dim, torch.float32, nb * B, device="cuda", _slot_major=False)
    sm = UvaStore(torch.int64, dim, torch.float32, nb * B, device="cuda", _slot_major=True)
    assert sm.table.values_host.shape == (B, nb, dim) and sm.table.host_run == nb and bm.table.host_run == 0
    for s in (bm, sm):
        assert int(s.put(keys.cuda(), vals.cuda(), scores.cuda())[3]) == 0  # (put takes the table's device)
        r = s.find(keys)
        assert bool(r.found.all()) and torch.equal(r.values.cpu(), vals)
    sk = sm.table.keys.view(torch.int64).cpu()
    where = {k: i for i, k in enumerate(sk.tolist())}
    slots = torch.tensor([where[k] for k in keys.tolist()])
    host, row = split_rows(slots, 0, B, nb)
    assert bool(host.all()) and torch.equal(row, (slots % B) * nb + slots // B)
    assert torch.equal(sm.table.values_host.view(-1, dim)[row], vals)
    for a, b in ((sm, bm), (bm, sm)):  # checkpoints across the layouts
        c = UvaStore(torch.int64, dim, torch.float32, nb * B, device="cuda", _slot_major=b is sm)
        c.table.load_state_dict(a.table.state_dict())
        assert torch.equal(c.find(keys).values.cpu(), vals) and c.table.host_run == b.table.host_run
    bm.table._set_host_slot_major(True)
    assert bm.table.host_run == nb and torch.equal(bm.find(keys).values.cpu(), vals)
    bm.table._set_host_slot_major(False)
    assert bm.table.host_run == 0 and torch.equal(bm.find(keys).values.cpu(), vals)


def lab_stage(variant, fn, *args, **kwargs):
    """fn(*args, **kwargs) with the staging's lab variant `variant`, the one before restored after."""
    op = getattr(torch.ops.dynamicemb, "_lookup_lab_stage", None)
    if op is None:
        pytest.skip("no op _lookup_lab_stage in this build")
    old = op(variant)
    try:
        return fn(*args, **kwargs)
    finally:
        op(old)


def lab_stage_run(variant, *args, **kwargs):
    """ten_percent(*args, **kwargs) with the staging's lab variant `variant` (lab_stage)."""
    return lab_stage(variant, ten_percent, *args, **kwargs)


@pytest.mark.parametrize("variant", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
def test_cold_cache_parity_stage_variants_cuda(variant):
    """The staging's lab variants (private op _lookup_lab_stage, csrc/lookup/stage_kernels.cu; each stages with the
    locked pass alone, no bucket owners: 1 sequentially consistent fences, 2 the stored row's store slot turned
    pending after the cache lock, 3 / 4 that with 16 / 32 lanes per id, 5 polling locks with backoff, 6 = 2 + 5; the
    mixed move pass with 7 its loads hinted L2::256B, 8 by bulk copies; 9 the misses taken in an order spread over
    every table; 10 the cache's and the store's first scans in the same rounds; 11 the locked pass as it is; 12 its
    finds stopped at the first matching round): the cold parity run (SGD) bit-identical to all-HBM, as the default
    is."""
    m = lab_stage_run(variant, "cuda", SGD(lr=0.1), False, UVA, T=2, R=1 << 16, n=4096, rounds=2, dim=128,
                      frac=0.25, bucket=128, cycle=8)
    moved = [sum(t.rows_moved[j] for t in m.tables) for j in (0, 1)]
    assert moved[0] > 2000 and moved[1] > 2000, moved


@pytest.mark.parametrize("variant", [7, 8])
def test_cold_cache_beyond_stash_move_variants_cuda(variant):
    """The move pass's lab variants (7, 8) with Adam's records beyond the stash (the two-pass path beside the mixed
    pass): bit-identical to all-HBM."""
    m = lab_stage_run(variant, "cuda", Adam(lr=0.01), False, UVA, T=2, R=1 << 14, n=2048, rounds=2, dim=128,
                      frac=0.25, bucket=128, cycle=4, uniform=True)
    assert sum(t.rows_moved[0] for t in m.tables) > 8000


def test_prefetch_under_eviction_pressure_cuda():
    """Two batches prefetched ahead over the uva store (device staging, a cache of CACHE_SLOTS rows): the second
    job may evict rows the first staged before the first batch's step uses them (that step stages them again, its
    gated staging), and every step finds its ids in the cache; bit-identical to all-HBM (the CPU test's sequence)."""
    prefetch_under_eviction_pressure(make("hbm", device="cuda"), make("caching", stores=(UVA, UVA), device="cuda"),
                                     device="cuda")


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
def test_uva_staging_syncs_cuda(prefetch):
    """Every step misses in every cache: at most two host syncs more than the all-HBM step (the miss counts read
    back with the feature bounds of the device offsets, the capacity check), the same for 2 and 5 tables, none
    after a prefetch of the batch; training bit-identical to all-HBM. (The process's first caching step also runs
    one-time setup, so the comparison starts at the second step.)"""
    extra, where = {}, {}
    for T in (2, 5):
        ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=8 * BC, device="cuda", store=UVA)
        extra[T], where[T] = staging_syncs_cuda(ref, m, t_batches(T, 6, seed=3, device="cuda"), prefetch,
                                                clean_jobs=True)
        assert_same(ref, m)
        assert sum(t.rows_moved[1] for t in m.tables) > 0  # rows were written back to the stores
    assert extra[2][1:] == extra[5][1:], (extra, where)
    assert max(extra[5]) <= (0 if prefetch else 2), (extra, where)


def test_uva_prefetch_pipeline_cuda():
    """Forward i, prefetch i + 1, backward i with every step missing: step i + 1 stages nothing and does not wait
    for the device (a sleep queued ahead of it still runs when its forward returns); bit-identical to all-HBM."""
    T = 3
    ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=16 * BC, device="cuda", store=UVA)
    staged = prefetch_pipeline_cuda(ref, m, list(t_batches(T, 10, seed=17, hi=2000, device="cuda")))
    assert staged >= 6, staged
    assert_same(ref, m)


def test_uva_errors_change_nothing_cuda():
    """A step too large for a cache (CacheCapacityError) and a store too small for the write-backs (StoreError):
    caches and stores as before the step."""
    T = 3
    m = make_t("caching", T, slots=8 * BC, device="cuda", store=UVA)
    m.device_staging = False  # the Python staging (op cache_stage: test_device_staging_errors_cuda)
    data = list(t_batches(T, 3, seed=8, hi=2000, device="cuda"))
    for ids, off, w in data[:2]:
        step(m, ids, off, w)
    before = [rows(t) for t in m.tables] + [rows(t.store.table) for t in m.tables]
    sizes = m.sizes()
    ids, off = data[2][:2]
    big = torch.arange(5000, 5000 + 40 * BC, device="cuda")
    ids = torch.cat([ids[:off[1]], big, ids[off[1]:]])
    off = off.clone()
    off[1:] += 40 * BC  # feature 0 (table 0) gets far too many ids
    with pytest.raises(CacheCapacityError, match="raise hbm_budget_bytes"):
        m(ids, off)
    assert m.sizes() == sizes
    assert all(_same(b, a) for b, a in zip(before, [rows(t) for t in m.tables] + [rows(t.store.table)
                                                                                  for t in m.tables]))
    small = make_t("caching", 2, slots=8 * BC, device="cuda",
                   store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, 8 * BC, BC, device="cuda"))
    small.device_staging = False
    raised = False
    for ids, off, w in t_batches(2, 30, seed=2, hi=3000, device="cuda"):
        snap, sizes = [rows(t) for t in small.tables], small.sizes()
        try:
            step(small, ids, off, w)
        except StoreError as e:
            assert "full" in str(e)
            assert small.sizes() == sizes and all(_same(b, rows(t)) for b, t in zip(snap, small.tables))
            raised = True
            break
    assert raised


def test_uva_checkpoints_cuda(tmp_path):
    """state_dict into a fresh uva module, dump -> load into all-HBM and back: the same rows as all-HBM."""
    ref, m = make("hbm", device="cuda"), make("caching", device="cuda", stores=(UVA, UVA))
    data = list(batches(8, seed=4, device="cuda"))
    for ids, off, w in data[:5]:
        step(ref, ids, off, w), step(m, ids, off, w)
    m2 = make("caching", device="cuda", stores=(UVA, UVA))
    m2.load_state_dict(m.state_dict())
    assert_same(ref, m2)
    m.dump(str(tmp_path / "full"))
    h = make("hbm", device="cuda")
    h.load(str(tmp_path / "full"))
    assert_same(ref, h)
    ref.dump(str(tmp_path / "ref"))
    m3 = make("caching", device="cuda", stores=(UVA, UVA))
    m3.load(str(tmp_path / "ref"))
    assert_same(ref, m3)
    for ids, off, w in data[5:]:
        assert torch.equal(step(ref, ids, off, w), step(m3, ids, off, w))
    assert_same(ref, m3)


@pytest.mark.parametrize("kind", ["cache", "store", "prefetch"])
def test_device_staging_errors_cuda(kind):
    """Op cache_stage cannot stage every id (a cache bucket full of this step's rows; a store bucket without room
    for an evicted row): the step is skipped on the device (nothing inserted or updated), no host wait, and
    DeviceInputError (hbm_budget_bytes / max_capacity) raised by check_errors(); every row and score is still
    held (cache + store), sizes unchanged; the module trains on afterwards. ``prefetch``: the failing batch was
    prefetched (op cache_stage queued on the side stream): the job reports nothing (what it staged stays, lossless),
    its step's op, gated by the job's failed flag, stages the rest, fails and reports as without a prefetch."""
    import dynamicemb
    from storage_helpers import logical_rows, same_logical

    if kind in ("cache", "prefetch"):
        T = 3
        m = make_t("caching", T, slots=8 * BC, device="cuda", store=UVA)
        data = list(t_batches(T, 3, seed=8, hi=2000, device="cuda"))
        for ids, off, w in data[:2]:
            step(m, ids, off, w)
        before, sizes = logical_rows(m), m.sizes()
        ids, off = data[2][:2]
        big = torch.arange(5000, 5000 + 40 * BC, device="cuda")
        ids = torch.cat([ids[:off[1]], big, ids[off[1]:]])
        off = off.clone()
        off[1:] += 40 * BC
        if kind == "prefetch":
            m.prefetch(ids, off)
            dynamicemb.check_errors()  # a prefetch reports nothing: its step stages the rest and reports
            assert m.sizes() == sizes and same_logical(before, logical_rows(m))
        out = m(ids, off)
        out.sum().backward()
        with pytest.raises(dynamicemb.DeviceInputError, match="raise hbm_budget_bytes") as e:
            dynamicemb.check_errors()
        assert e.value.arg == "hbm_budget_bytes" and e.value.index == 0
        assert m.sizes() == sizes and same_logical(before, logical_rows(m))
        for ids, off, w in data[:2]:
            step(m, ids, off, w)
        return
    small = make_t("caching", 2, slots=8 * BC, device="cuda",
                   store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, 8 * BC, BC, device="cuda"))
    raised = False
    for ids, off, w in t_batches(2, 30, seed=2, hi=3000, device="cuda"):
        before, sizes = logical_rows(small), small.sizes()
        step(small, ids, off, w)
        try:
            dynamicemb.check_errors()
        except dynamicemb.DeviceInputError as e:
            assert e.arg == "max_capacity" and "raise max_capacity" in str(e)
            assert small.sizes() == sizes and same_logical(before, logical_rows(small))
            raised = True
            break
    assert raised


def test_device_staging_reuses_store_slots_cuda():
    """The CUDA kernels with a store one slot short of full under a full cache bucket: within one staging each
    victim after the first takes the store slot an earlier id's row left (claimed by a compare-and-swap, its record
    settled before the move pass); bit-identical to all-HBM after every step (storage_helpers.pending_reuse)."""
    pending_reuse("cuda")


@pytest.mark.parametrize("slot_major", [True, False], ids=["slot_major", "bucket_major"])
@pytest.mark.parametrize("seed", [0, 1])
def test_device_staging_matches_twin_cuda(seed, slot_major):
    """The CUDA staging (the bucket owners: a warp per cache bucket, no cache lock) against the CPU twin,
    slot by slot, from the same raw state over the same batches (at most one missing id per cache bucket: an
    order-free outcome): the same cache slots, victims, store slots, rows (in the stores' host-row layout: the
    twin's host rows follow it), scores, digests, stamps, counters and rows-moved totals after every staging
    (storage_helpers.staging_matches_twin)."""
    assert staging_matches_twin("cuda", seed=seed, slot_major=slot_major) > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_locked_staging_matches_twin_cuda(seed):
    """Lab variant 11 (the locked pass alone: a group of lanes per missing id under the bucket locks, the staging
    before the bucket owners) against the CPU twin slot by slot, as the default is."""
    assert lab_stage(11, staging_matches_twin, "cuda", seed=seed) > 0


def test_locked_staging_reuses_store_slots_cuda():
    """Lab variant 11 (the locked pass alone) with a store one slot short of full: as the default
    (test_device_staging_reuses_store_slots_cuda), bit-identical to all-HBM."""
    lab_stage(11, pending_reuse, "cuda")


def test_owner_staging_beyond_list_cuda():
    """The bucket owners where bins overflow their 32-entry lists (2048 uniform ids a table and step over 32 cache
    buckets of 128 slots: ~64 misses a bucket), so the locked pass stages the rest after them: bit-identical to
    all-HBM (Adam, records beyond the stash)."""
    m = ten_percent("cuda", Adam(lr=0.01), False, UVA, T=2, R=1 << 14, n=2048, rounds=2, dim=64, frac=0.25,
                    bucket=128, cycle=4, uniform=True)
    assert sum(t.rows_moved[0] for t in m.tables) > 1000


@pytest.mark.parametrize("kind", ["cache", "store", "prefetch"])
def test_locked_staging_errors_cuda(kind):
    """Lab variant 11 (the locked pass alone) where ids cannot be staged: as the default
    (test_device_staging_errors_cuda)."""
    lab_stage(11, test_device_staging_errors_cuda, kind)
