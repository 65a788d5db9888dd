"""Storage tiers on CPU: hbm, hybrid and caching (host store, disk store) give bit-identical training; prefetch
under eviction pressure; pins of steps in flight; checkpoints in every mode; disk store errors lose nothing."""

import os
import sys
import shutil
import stat

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._caching import CacheCapacityError, CachedTable
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbTableOptions
from dynamicemb._storage import DiskStore, DiskStoreSpec, HostStore, StoreError
from dynamicemb._uva_store import UvaStoreSpec

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (BC, CACHE_SLOTS, DIM, HAVE_ROCKS, SyncCounter, admission_epochs_parity,  # noqa: E402
                             assert_same, batches, checkpoint_round_trips, disk, disk_restart, make, make_t,
                             POOLED, pooled_parity, prefetch_under_eviction_pressure, rows, step, t_batches,
                             two_steps_in_flight)

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

needs_rocks = pytest.mark.skipif(not HAVE_ROCKS, reason="rocksdict not installed")

MODES = ["hybrid", "caching-host", "caching-uva", "caching-uva-op"] + (["caching-disk"] if HAVE_ROCKS else [])
UVA = (UvaStoreSpec(), UvaStoreSpec())


def build(mode, tmp_path, opt=None, **kw):
    if mode == "hbm" or mode == "hybrid":
        return make(mode, opt, **kw)
    stores = disk(tmp_path) if mode == "caching-disk" else UVA if mode.startswith("caching-uva") else (None, None)
    m = make("caching", opt, stores=stores, **kw)
    m.device_staging = mode == "caching-uva-op"  # op cache_stage's CPU twin (the CUDA default over the uva store)
    return m


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01), Adagrad(lr=0.05), RowWiseAdagrad(lr=0.05)],
                         ids=["sgd", "adam", "ada", "rwada"])
def test_mode_parity(mode, opt, tmp_path):
    ref, m = make("hbm", opt), build(mode, tmp_path, opt)
    for ids, off, w in batches(12):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    if mode != "hybrid":
        assert m.tables[0].counters[1] == CACHE_SLOTS or m.tables[1].counters[1] == CACHE_SLOTS  # evicted to store
    assert_same(ref, m)
    # eval: stored, evicted-to-store and unknown ids read the same
    ref.eval(), m.eval()
    ids = torch.arange(0, 400, 3)
    off = torch.tensor([0, 40, 90, ids.numel()])
    assert torch.equal(ref(ids, off), m(ids, off))
    for t in range(2):
        for x, y in zip(ref.get_rows(t, ids), m.get_rows(t, ids)):
            assert torch.equal(x, y)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pooling,dtype", POOLED, ids=["mean-fp16", "none-bf16", "sum-psw-bf16"])
def test_mode_parity_poolings_and_dtypes(mode, pooling, dtype, tmp_path):
    """Every mode against all-HBM with mean / sequence pooling, per-sample weights and 16-bit rows (the stores
    hold fp16 / bf16 rows): bit-identical (storage_helpers.pooled_parity)."""
    ref = make("hbm", dtype=dtype, pooling=pooling)
    pooled_parity(ref, build(mode, tmp_path, dtype=dtype, pooling=pooling), pooling)


@pytest.mark.parametrize("policies", [("epoch_lru", "epoch_lfu")])
@pytest.mark.parametrize("store", ["host", "uva", "disk", "hybrid"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
def test_caching_admission_and_epochs(policies, store, prefetch, tmp_path):
    """Admission (threshold 2) and the epoch score policies in caching mode over each store, and in hybrid mode
    (whose CPU module keeps one buffer: the torch path serves it; on CUDA a hybrid table needs the fused kernels,
    which have no admission): outputs, rows, scores and admission counts bit-identical to all-HBM."""
    if store == "disk" and not HAVE_ROCKS:
        pytest.skip("rocksdict not installed")
    ref = make("hbm", admission=2, policies=policies)
    if store == "hybrid":
        m = make("hybrid", admission=2, policies=policies)
    else:
        stores = {"host": (None, None), "uva": UVA, "disk": disk(tmp_path)}[store]
        m = make("caching", admission=2, policies=policies, stores=stores)
    admission_epochs_parity(ref, m, list(batches(8, seed=7)), prefetch)


@pytest.mark.parametrize("budget_rows", [0, 64], ids=["host", "split"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_hybrid_two_buffers_torch_path(opt, budget_rows):
    """The torch path (what the fused CUDA kernels do not serve: admission, mixed dtypes, wide rows) over hybrid
    tables whose rows are in two buffers as on CUDA (here the CPU twin of the CUDA layout: slot-major host rows,
    ``_set_host_slot_major``), with admission and epoch scores: outputs, rows, scores and admission counts
    bit-identical to all-HBM (test_storage_gpu.py's test_hybrid_torch_path_cuda on the device)."""
    pol = ("epoch_lru", "epoch_lfu")
    ref = make("hbm", opt, admission=2, policies=pol)
    m = make("hybrid", opt, admission=2, policies=pol, budget_rows=budget_rows)
    for t in m.tables:
        t._set_host_slot_major(True)
    assert all(t.values_host is not None and t.hbm_rows == budget_rows for t in m.tables)
    admission_epochs_parity(ref, m, list(batches(8, seed=7)), False)
    t = m.tables[1]
    assert int(t.host_slots(t.find_slots(rows(t)[0]).slots).sum()) > 0  # rows in host slots were trained


def test_module_budget_and_errors():
    m = make("caching", total=2 * CACHE_SLOTS * Adam(lr=0.01).row_width(DIM) * 4)
    assert [t.capacity() for t in m.tables] == [CACHE_SLOTS, CACHE_SLOTS]
    with pytest.raises(ValueError, match="hbm_budget_bytes: expected a budget for storage='caching'"):
        BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=16,
                                                              storage="caching")])
    with pytest.raises(ValueError, match="expected >= the table's"):
        BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=16,
                                                              hbm_budget_bytes=10)])
    with pytest.raises(ValueError, match="DynamicEmbTableOptions.storage: expected one of"):
        DynamicEmbTableOptions(dim=4, max_capacity=128, storage="ssd")
    # a step whose ids do not fit in the cache: clear error, nothing changed
    m = make("caching", budget_rows=BC)
    ids, off, w = next(batches(1))
    with pytest.raises(CacheCapacityError, match="raise hbm_budget_bytes"):
        step(m, ids, off, w)
    assert m.sizes() == [0, 0]


def test_prefetch_under_eviction_pressure(tmp_path):
    stores = disk(tmp_path) if HAVE_ROCKS else (None, None)
    prefetch_under_eviction_pressure(make("hbm"), make("caching", stores=stores))


def test_pins_keep_rows_of_steps_in_flight():
    ref, m = make("hbm"), make("caching", budget_rows=2 * CACHE_SLOTS)
    (a, oa, wa), (b, ob, wb) = list(batches(2, seed=2, hi=1000))
    outs = []
    for mod in (ref, m):
        o1 = mod(a, oa)
        if mod is m:
            pinned = m._table_keys(a, oa, [0, 1])
        o2 = mod(b, ob)  # staged while step 1's backward has not run: step 1's rows must stay
        if mod is m:
            for t, k in pinned.items():
                assert bool(m.tables[t]._cache_find(k)[0].all())
        ((o1 * wa).sum() + (o2 * wb).sum()).backward()
        outs.append((o1, o2))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert_same(ref, m)
    assert len(m.tables[0]._pins) == 0  # released with the graph


def test_backward_releases_pins_while_the_step_is_referenced():
    """The backward unpins its step's keys even while something keeps the step's saved tensors alive (a traceback,
    a debugger, compute-sanitizer kept the frames): a later staging may then evict them."""
    from dynamicemb import _caching

    m = make("caching", budget_rows=2 * CACHE_SLOTS)
    (a, oa, wa), = list(batches(1, seed=3, hi=1000))
    o = m(a, oa)
    held = [p for p in _caching.LIVE_PINS if m.tables[0] in [m.tables[t] for t in p._idx.values()]]
    assert len(held) == 1 and len(m.tables[0]._pins) == 1  # pinned between forward and backward
    (o * wa).sum().backward()  # `held` keeps the pins object alive past it
    assert len(m.tables[0]._pins) == 0 and held[0] not in _caching.LIVE_PINS


@pytest.mark.parametrize("mode", MODES)
def test_checkpoints_every_mode(mode, tmp_path):
    ref, m = make("hbm"), build(mode, tmp_path)
    data = list(batches(8, seed=4))
    for ids, off, w in data[:5]:
        step(ref, ids, off, w), step(m, ids, off, w)
    # state_dict round trip into a fresh module of the same mode
    m2 = make("caching", stores=disk(tmp_path, "b")) if mode == "caching-disk" else build(mode, tmp_path)
    m2.load_state_dict(m.state_dict())
    assert_same(ref, m2)
    # full dump -> load across modes (hbm <-> this mode), incremental dump on top
    m.dump(str(tmp_path / "full"))
    clock = int(m.tables[0].counters[0])
    h = make("hbm")
    h.load(str(tmp_path / "full"))
    assert_same(ref, h)
    ref.dump(str(tmp_path / "full_ref"))
    m3 = make("caching", stores=disk(tmp_path, "c") if mode == "caching-disk" else (None, None)) if mode != \
        "hybrid" else make("hybrid")
    m3.load(str(tmp_path / "full_ref"))
    assert_same(ref, m3)
    if mode == "hybrid":  # a load keeps the storage mode (it built all-HBM tables before)
        from dynamicemb._hybrid import HybridTable

        assert all(isinstance(t, HybridTable) for t in m2.tables + m3.tables)
        # the CPU module keeps one buffer (the torch path reads one): slot-major host rows are the CUDA default
        assert all(t.values_host is None and not t._slot_major for t in m.tables + m2.tables + m3.tables)
    for ids, off, w in data[5:]:
        step(ref, ids, off, w), step(m, ids, off, w)
    m.dump(str(tmp_path / "inc"), score_threshold=clock)
    # Table t1 is LFU: a threshold on its scores (frequencies, not op clocks) cannot say which rows changed, so its
    # live index names keys that are neither in the dump nor in the base. A slot table refuses the dump whole and
    # stays as it was; a caching table applies the dumped rows in place (it keeps no live-index check).
    loaded = []
    for x in (m3, h):
        if isinstance(x.tables[1], CachedTable):
            x.load(str(tmp_path / "inc"))
            loaded.append(x)
        else:
            before = rows(x.tables[1])
            with pytest.raises(ValueError, match="live keys in neither"):
                x.load(str(tmp_path / "inc"))
            assert all(torch.equal(p, q) for p, q in zip(before, rows(x.tables[1])))
    for x in loaded:
        for t in range(1):  # LRU table: the incremental dump holds every row touched since
            assert all(torch.equal(p, q) for p, q in zip(rows(ref.tables[t]), rows(x.tables[t])))
    for ids, off, w in batches(2, seed=9):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))


@needs_rocks
def test_disk_store_write_counts_and_rows_like_a_dict(tmp_path):
    """DiskStore.write's exact row count and rows against a dict over random rounds: puts that overwrite, erasures
    of missing keys, keys both put and erased (the put wins), duplicates in either list, and staging-sized
    writes (1,200 puts + 1,200 erasures: the count must not cost puts x erasures)."""
    gen = torch.Generator().manual_seed(11)
    s = DiskStore(str(tmp_path / "s"), torch.int64, 4, torch.float32)
    ref = {}
    for n in (5, 40, 1200, 1200, 300):
        pk = torch.randint(0, 3 * n, (n,), generator=gen)
        ek = torch.cat([torch.randint(0, 3 * n, (n,), generator=gen), pk[: n // 4]])  # some keys put and erased
        pv = torch.randn(n, 4, generator=gen)
        ps = torch.randint(0, 1 << 40, (n,), generator=gen)
        s.write(pk, pv, ps, ek)
        for k in ek.tolist():
            ref.pop(k, None)
        for k, v, sc in zip(pk.tolist(), pv, ps.tolist()):  # the last duplicate's row wins, as in a write batch
            ref[k] = (v, sc)
        assert s.size() == len(ref)
    keys = torch.tensor(sorted(ref) + [-5, 10**9])
    r = s.find(keys)
    assert r.found.tolist() == [True] * len(ref) + [False, False]
    assert torch.equal(r.values[: len(ref)], torch.stack([ref[k][0] for k in sorted(ref)]))
    assert r.scores[: len(ref)].tolist() == [ref[k][1] for k in sorted(ref)]
    s.close()


@needs_rocks
def test_disk_store_survives_restart(tmp_path):
    disk_restart(tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_round_trips_every_mode(mode, tmp_path):
    """Incremental dumps over full ones in both directions (mode <-> all-HBM), and every loaded module trains on
    bit-identically (storage_helpers.checkpoint_round_trips; LRU tables)."""
    def fresh(tag):
        m = build(mode, tmp_path / tag, policies=("lru", "lru"))
        return m

    for tag in "abcd":
        (tmp_path / tag).mkdir()
    checkpoint_round_trips(fresh, tmp_path)


@needs_rocks
def test_disk_store_errors_lose_nothing(tmp_path):
    key, dim, dt = torch.int64, 3, torch.float32
    # missing
    with pytest.raises(StoreError, match="expected an existing store directory"):
        DiskStore(str(tmp_path / "nope"), key, dim, dt, create=False)
    with pytest.raises(StoreError, match="parent"):
        DiskStore(str(tmp_path / "a" / "b"), key, dim, dt)
    s = DiskStore(str(tmp_path / "s"), key, dim, dt)
    k = torch.arange(10)
    v = torch.randn(10, dim)
    s.insert(k, v, torch.arange(10))
    s.close()
    # layout mismatch
    with pytest.raises(StoreError, match="expected a store of layout"):
        DiskStore(str(tmp_path / "s"), key, dim + 1, dt)
    # read-only: lookups work, writes refused, nothing changes
    r = DiskStore(str(tmp_path / "s"), key, dim, dt, read_only=True)
    assert torch.equal(r.find(k).values, v)
    with pytest.raises(StoreError, match="read_only=True"):
        r.insert(torch.tensor([99]), torch.zeros(1, dim), torch.zeros(1, dtype=torch.int64))
    r.close()
    # a read-only directory (root ignores permission bits: only checked when they bite)
    ro = tmp_path / "ro"
    shutil.copytree(tmp_path / "s", ro)
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    try:
        if not os.access(ro, os.W_OK):
            with pytest.raises(StoreError, match="read-only"):
                DiskStore(str(ro), key, dim, dt)
    finally:
        os.chmod(ro, stat.S_IRWXU)
    # full (a quota): the write is refused whole
    f = DiskStore(str(tmp_path / "s"), key, dim, dt, max_bytes=1)
    with pytest.raises(StoreError, match="full"):
        f.write(torch.tensor([50]), torch.zeros(1, dim), torch.zeros(1, dtype=torch.int64), k[:3])
    assert f.size() == 10 and torch.equal(f.find(k).values, v)
    f.close()
    # corrupt: garbage where RocksDB keeps its manifest pointer -> clear error, files untouched
    c = tmp_path / "c"
    shutil.copytree(tmp_path / "s", c)
    with open(c / "CURRENT", "w") as fh:
        fh.write("MANIFEST-999999\n")
    def data_files():  # RocksDB's data (not its info LOG / rocksdict's options file)
        return {n: (c / n).read_bytes() for n in os.listdir(c) if not n.startswith("LOG") and n.endswith(
            (".sst", ".log")) or n.startswith(("MANIFEST", "CURRENT"))}

    before = data_files()
    with pytest.raises(StoreError, match="corrupt"):
        DiskStore(str(c), key, dim, dt)
    assert data_files() == before
    # a directory of other files is never taken over
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("mine")
    with pytest.raises(StoreError, match="holding other files"):
        DiskStore(str(tmp_path / "other"), key, dim, dt)


@needs_rocks
def test_disk_store_damage_and_io_errors_lose_nothing(tmp_path, monkeypatch):
    """The failure cases test_disk_store_errors_lose_nothing cannot reach: a read-only directory when the tests run
    as root (root ignores permission bits: the check is simulated), a store held open by another DiskStore (RocksDB's
    lock), a corrupt meta record, a corrupt row, and RocksDB refusing a write (a full disk): each a StoreError naming
    the store and what was expected, with the stored rows and the row count unchanged."""
    import rocksdict

    from dynamicemb._storage import _META_KEY

    key, dim, dt = torch.int64, 3, torch.float32
    path = str(tmp_path / "s")
    s = DiskStore(path, key, dim, dt)
    k, v, sc = torch.arange(10), torch.randn(10, dim), torch.arange(100, 110)
    s.insert(k, v, sc)

    def intact(store):
        r = store.find(k)
        return store.size() == 10 and bool(r.found.all()) and torch.equal(r.values, v) and torch.equal(r.scores, sc)

    # held open: a second store on the directory is refused, the first keeps working
    with pytest.raises(StoreError, match="in use by another process"):
        DiskStore(path, key, dim, dt)
    assert intact(s)
    # RocksDB refuses the write batch (a full disk): nothing written, the count unchanged
    class Full:
        def __init__(self, db):
            self.db = db

        def write(self, wb):
            raise Exception("IO error: No space left on device")

        def __getattr__(self, name):
            return getattr(self.db, name)

    db = s._db
    s._db = Full(db)
    with pytest.raises(StoreError, match="write failed .*No space left"):
        s.write(torch.tensor([50, 51]), torch.zeros(2, dim), torch.zeros(2, dtype=torch.int64), k[:4])
    s._db = db
    assert intact(s)
    s.close()
    # a read-only directory, as root too (os.access is what the store asks)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.path.abspath(p) == os.path.abspath(path)
                        and mode == os.W_OK else real_access(p, mode, **kw))
    with pytest.raises(StoreError, match="expected a writable directory, got read-only"):
        DiskStore(path, key, dim, dt)
    monkeypatch.undo()
    r = DiskStore(path, key, dim, dt, read_only=True)
    assert intact(r)
    r.close()
    # a corrupt row (another writer's bytes under a row key): its read is refused, the other rows still read
    raw = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    raw[int(3).to_bytes(8, "little", signed=True)] = b"short"
    raw.close()
    s = DiskStore(path, key, dim, dt)
    with pytest.raises(StoreError, match=r"expected rows of 20 bytes, got 5 \(corrupt store\)"):
        s.find(k)
    keep = k[k != 3]
    r = s.find(keep)
    assert bool(r.found.all()) and torch.equal(r.values, v[keep]) and s.size() == 10
    s.close()
    # a corrupt meta record: the store is not opened, the record is left as it was
    raw = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    raw[_META_KEY] = b"{not json"
    raw.close()
    with pytest.raises(StoreError, match="expected a valid meta record"):
        DiskStore(path, key, dim, dt)
    raw = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    assert bytes(raw[_META_KEY]) == b"{not json"
    raw.close()


@needs_rocks
def test_disk_store_checkpoint_and_export(tmp_path):
    """DiskStore.checkpoint (a RocksDB checkpoint: hard links) is a store of its own: reopened with create=False it
    holds the rows and count of the moment it was taken, whatever the source wrote after; export_batches yields
    every row once, in batches of at most batch_rows, and with a threshold the rows scored >= it as unsigned (scores
    with the top bit set are the largest)."""
    key, dim, dt = torch.int64, 2, torch.bfloat16
    s = DiskStore(str(tmp_path / "s"), key, dim, dt)
    k = torch.arange(100) * 7
    v = torch.randn(100, dim).to(dt)
    sc = torch.arange(100) - 50  # int64 bits: the negative ones are uint64 scores >= 2**63
    s.insert(k, v, sc)
    s.checkpoint(str(tmp_path / "ck"))
    s.write(torch.tensor([1, 2]), torch.zeros(2, dim, dtype=dt), torch.zeros(2, dtype=torch.int64), k[:10])
    assert s.size() == 92
    c = DiskStore(str(tmp_path / "ck"), key, dim, dt, create=False)
    r = c.find(k)
    assert c.size() == 100 and bool(r.found.all()) and torch.equal(r.values, v) and torch.equal(r.scores, sc)
    assert not bool(c.find(torch.tensor([1, 2])).found.any())
    batches_ = list(c.export_batches(16))
    assert all(b[0].numel() <= 16 for b in batches_)
    got = torch.cat([b[0] for b in batches_])
    assert sorted(got.tolist()) == sorted(k.tolist())
    hi = torch.cat([b[0] for b in c.export_batches(16, threshold=40)])
    assert sorted(hi.tolist()) == sorted(k[(sc >= 40) | (sc < 0)].tolist())
    c.close()
    s.close()


@needs_rocks
def test_full_store_during_training_loses_nothing(tmp_path):
    m = make("caching", stores=tuple(DiskStoreSpec(p, max_bytes=1 << 30) for p in disk(tmp_path)))
    data = list(batches(6, seed=6))
    for ids, off, w in data[:3]:
        step(m, ids, off, w)
    known = torch.arange(0, 300)
    before = [m.get_rows(t, known) for t in range(2)]
    sizes = m.sizes()
    for t in m.tables:
        t.store.max_bytes = 1  # the disk fills up
    raised = False
    for ids, off, w in data[3:]:
        try:
            step(m, ids, off, w)
        except StoreError as e:
            assert "full" in str(e)
            raised = True
            break
    assert raised
    after = [m.get_rows(t, known) for t in range(2)]
    assert m.sizes() >= sizes
    for (w0, s0, f0), (w1, s1, f1) in zip(before, after):
        assert bool((f1 | ~f0).all())  # every row stored before is still there


def test_host_store_interface():
    s = HostStore(torch.int64, 2, torch.float32, 64, 16)
    s.insert(torch.tensor([1, 2, 3]), torch.ones(3, 2), torch.tensor([5, 6, 7]))
    s.erase(torch.tensor([2]))
    r = s.find(torch.tensor([1, 2, 3]))
    assert r.found.tolist() == [True, False, True] and r.scores[[0, 2]].tolist() == [5, 7]
    assert s.size() == 2 and sum(k.numel() for k, _, _ in s.export_batches(16)) == 2
    assert sum(k.numel() for k, _, _ in s.export_batches(16, threshold=6)) == 1


@pytest.mark.parametrize("policy", ["lru", "lfu"])
@pytest.mark.parametrize("hbm_rows", [0, 96, 256])
def test_hybrid_table_ops_equal_hbm_cpu(hbm_rows, policy):
    # The CPU twin of test_storage_gpu.py's test (the CPU hybrid table keeps one buffer): checks the op sequence
    # itself, so a change that breaks the comparison shows in CI before it reaches the GPU run.
    from storage_helpers import table_ops_agree

    table_ops_agree("cpu", hbm_rows, policy)


# ---------------------------------------------------------------------------------------------- batched staging
def t_rows(m):
    return [rows(t) for t in m.tables]


@pytest.mark.parametrize("T", [1, 3, 6])
def test_batched_staging_parity_many_tables(T):
    """All caching tables with misses stage together: bit-identical to all-HBM with T tables of two row layouts,
    under eviction pressure (every step misses), with a step in flight (pins) and prefetched rows."""
    ref, m = make_t("hbm", T), make_t("caching", T, slots=CACHE_SLOTS + 4 * BC)
    data = list(t_batches(T, 14, seed=T))
    prefetched = 0
    for i, (ids, off, w) in enumerate(data):
        if i == 4:  # two steps in flight: the first's rows stay while the second stages
            two_steps_in_flight(ref, m, data, i)
            continue
        if i == 5:
            continue
        if i % 3 == 0:
            m.prefetch(ids, off)  # CPU module: reads the rows its caches miss from the stores ahead
            prefetched += sum(k.numel() for t in m.tables for k, _, _ in t._pending)
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w)), f"step {i}"
        assert not any(t._pending for t in m.tables)  # the step took every prefetched row of its ids
    assert prefetched and all(int(t.store.size()) for t in m.tables)  # rows went to the stores and came back
    assert_same(ref, m)


def _staging_counts(T):
    m = make_t("caching", T, slots=8 * BC)
    waits = set()
    table_ops = []
    for ids, off, w in t_batches(T, 6, seed=3, hi=2000):
        with SyncCounter(m) as c:
            out = m(ids, off)
        (out * w).sum().backward()
        waits.add(c.waits)
        table_ops.append(c.table_ops)
    return waits, table_ops


def test_staging_host_waits_do_not_grow_with_tables():
    """A step whose ids miss in every cache waits for the device a fixed number of times whatever the number of
    tables (the feature bounds, the miss counts, the missing ids, the insert results), and runs a fixed number of
    table ops per table (no per-key or per-table syncs). After a prefetch of the batch: test_prefetch_cpu.py."""
    for T in (1, 2, 5, 8):
        waits, table_ops = _staging_counts(T)
        assert waits == {4}, (T, waits)
        # per table: pin lookup + two score writes, make_room's erase, the insert, the moved rows' scores and the
        # placeholders' erase; one hash of every table's missing ids (make_room); one lookup per feature (T + 1)
        # for the found mask
        assert all(x == 7 * T + 1 + T + 1 for x in table_ops), (T, table_ops)


@pytest.mark.parametrize("fail", ["find", "write"])
def test_batched_staging_store_error_loses_nothing(fail):
    """A store failing in the middle of a batched staging (table 1 of 3): StoreError with its message; every row
    is still stored, with its score; retrying the step once the store works again gives the all-HBM result."""
    T = 3
    ref, m = make_t("hbm", T), make_t("caching", T, flaky=True)
    data = list(t_batches(T, 8, seed=5))
    for ids, off, w in data[:4]:
        step(ref, ids, off, w), step(m, ids, off, w)
    before, sizes = t_rows(m), m.sizes()
    setattr(m.tables[1].store, f"fail_{fail}", True)
    ids, off, w = data[4]
    with pytest.raises(StoreError, match=f"flaky store: {'read' if fail == 'find' else 'write'} failed"):
        step(m, ids, off, w)
    assert m.sizes() == sizes
    for b, a in zip(before, t_rows(m)):  # the same rows and scores (table 0 moved some into its cache)
        assert all(torch.equal(x, y) for x, y in zip(b, a))
    setattr(m.tables[1].store, f"fail_{fail}", False)
    for ids, off, w in data[4:]:
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)


def test_batched_staging_capacity_error_changes_nothing():
    """One table's cache cannot hold the step's ids: CacheCapacityError, and no table changed (the others were
    inserted in the same pass and are undone)."""
    T = 3
    m = make_t("caching", T, slots=8 * BC)
    data = list(t_batches(T, 3, seed=8, hi=2000))
    for ids, off, w in data[:2]:
        step(m, ids, off, w)
    before, sizes = t_rows(m), m.sizes()
    cache = [(None, None, t.counters.clone()) for t in m.tables]
    ids = torch.cat([data[2][0], torch.arange(5000, 5000 + 40 * BC)])  # table 0's feature 0 gets far too many
    off = data[2][1].clone()
    off[1:] += 40 * BC
    with pytest.raises(CacheCapacityError, match="raise hbm_budget_bytes"):
        m(torch.cat([ids[off[0]:off[1] - 40 * BC], ids[-40 * BC:], ids[off[1] - 40 * BC:-40 * BC]]), off)
    assert m.sizes() == sizes
    for b, a in zip(before, t_rows(m)):
        assert all(torch.equal(x, y) for x, y in zip(b, a))
    for t, c in zip(m.tables, cache):  # the same op clock and cache size (slots may differ: the undo re-inserts)
        assert torch.equal(t.counters[:2], c[2][:2])
