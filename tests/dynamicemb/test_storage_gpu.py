"""Storage tiers on CUDA (skip without a GPU): hbm, hybrid (rows in pinned host memory through UVA) and caching
(host and disk stores) give bit-identical training on the fused kernels; prefetch on the side stream; the table
ops of a hybrid table equal an all-HBM table's."""

import os
import sys

import pytest
import torch

from dynamicemb import _prefetch
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._uva_store import UvaStoreSpec

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (BC, DIM, HAVE_ROCKS, admission_epochs_parity, assert_same, batches,  # noqa: E402
                             checkpoint_round_trips, deterministic, disk, disk_restart, make, make_t,
                             POOLED, pooled_parity, prefetch_adaptive_counts, prefetch_pipeline_cuda, rows, staging_syncs_cuda, step, t_batches,
                             table_ops_agree)

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

# DYNAMICEMB_TEST_SMALL=1 shrinks the large test (for runs under compute-sanitizer, which is ~100x slower).
SMALL = os.environ.get("DYNAMICEMB_TEST_SMALL") == "1"
MODES = ["hybrid-0", "hybrid-half", "caching-host", "caching-uva"] + (["caching-disk"] if HAVE_ROCKS else [])


def build(mode, tmp_path, opt, **kw):
    if mode == "hybrid-0":
        return make("hybrid", opt, device="cuda", budget_rows=0, **kw)
    if mode == "hybrid-half":
        return make("hybrid", opt, device="cuda", budget_rows=512, **kw)
    if mode == "caching-uva":
        return make("caching", opt, device="cuda", stores=(UvaStoreSpec(), UvaStoreSpec()), **kw)
    return make("caching", opt, device="cuda", stores=disk(tmp_path) if mode == "caching-disk" else (None, None),
                **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01), Adagrad(lr=0.05), RowWiseAdagrad(lr=0.05)],
                         ids=["sgd", "adam", "ada", "rwada"])
def test_mode_parity_cuda(mode, opt, tmp_path):
    ref, m = make("hbm", opt, device="cuda"), build(mode, tmp_path, opt)
    assert ref.use_kernels and m.use_kernels
    if mode.startswith("hybrid"):
        assert (m.tables[0].values_host is not None) == (mode == "hybrid-0" or mode == "hybrid-half")
    for ids, off, w in batches(10, device="cuda"):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)
    ref.eval(), m.eval()
    ids = torch.arange(0, 400, 3, device="cuda")
    off = torch.tensor([0, 40, 90, ids.numel()], device="cuda")
    assert torch.equal(ref(ids, off), m(ids, off))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pooling,dtype", POOLED, ids=["mean-fp16", "none-bf16", "sum-psw-bf16"])
def test_mode_parity_poolings_and_dtypes_cuda(mode, pooling, dtype, tmp_path):
    """Every mode on the fused kernels against all-HBM with mean / sequence pooling, per-sample weights and 16-bit
    rows: bit-identical (a step's ~90 entries fit one backward chunk: no cut segments)."""
    ref, m = make("hbm", device="cuda", dtype=dtype, pooling=pooling), build(mode, tmp_path, None, dtype=dtype,
                                                                            pooling=pooling)
    assert ref.use_kernels and m.use_kernels
    pooled_parity(ref, m, pooling, device="cuda")


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_round_trips_every_mode_cuda(mode, tmp_path):
    """On CUDA, every mode: a state_dict into a fresh module, full dumps mode -> all-HBM and all-HBM -> mode,
    incremental dumps over them both ways; every loaded module holds all-HBM's rows, scores and step count and
    trains on bit-identically (storage_helpers.checkpoint_round_trips; LRU tables; test_storage_cpu.py's twin)."""
    for tag in "abcd":
        (tmp_path / tag).mkdir()
    checkpoint_round_trips(lambda tag: build(mode, tmp_path / tag, None, policies=("lru", "lru")), tmp_path,
                           device="cuda")


@pytest.mark.skipif(not HAVE_ROCKS, reason="rocksdict not installed")
def test_disk_store_survives_restart_cuda(tmp_path):
    """A CUDA caching module over disk stores, flushed, dropped and rebuilt over the same directories
    (create=False), trains on bit-identically to an all-HBM module that never stopped."""
    disk_restart(tmp_path, device="cuda")


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
@pytest.mark.parametrize("mode", ["caching-host", "caching-uva"])
def test_caching_admission_and_epochs_cuda(mode, prefetch, tmp_path):
    """Admission (threshold 2: an id is stored from its second sighting on; counted in the admission tables) and
    epoch scores (epoch_lru / epoch_lfu, the epoch changed every 3 steps) in caching mode on CUDA (a module with
    admission runs the torch path), with and without a prefetch of the next batch: outputs every step, rows, scores
    and the admission tables' counts bit-identical to all-HBM."""
    pol = ("epoch_lru", "epoch_lfu")
    ref = make("hbm", device="cuda", admission=2, policies=pol)
    m = make("caching", device="cuda", admission=2, policies=pol,
             stores=(UvaStoreSpec(), UvaStoreSpec()) if mode == "caching-uva" else (None, None))
    assert not ref.use_kernels and not m.use_kernels  # (admission tables: the torch path on CUDA, both modules)
    with deterministic():  # (the torch path's index_add_ adds with atomics on CUDA: test_caching_torch_path_cuda)
        admission_epochs_parity(ref, m, list(batches(9, seed=7, device="cuda")), prefetch)


# 64 HBM rows: one of each bucket's 16 slots (with more, these ~300 ids per table would never reach a host slot)
@pytest.mark.parametrize("budget_rows", [0, 64], ids=["host", "split"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_hybrid_torch_path_cuda(opt, budget_rows):
    """Hybrid tables on the torch path (admission: the fused kernels do not serve it; the host rows read and written
    by slot through host copies), with admission and epoch scores: outputs, rows, scores and admission counts
    bit-identical to all-HBM under deterministic algorithms (the torch path's index_add_ adds with atomics)."""
    pol = ("epoch_lru", "epoch_lfu")
    ref = make("hbm", opt, device="cuda", admission=2, policies=pol)
    m = make("hybrid", opt, device="cuda", admission=2, policies=pol, budget_rows=budget_rows)
    assert not m.use_kernels and all(t.values_host is not None and t.hbm_rows == budget_rows for t in m.tables)
    with deterministic():
        admission_epochs_parity(ref, m, list(batches(8, seed=7, device="cuda")), False)
    t = m.tables[1]
    assert int(t.host_slots(t.find_slots(rows(t)[0].cuda()).slots).sum()) > 0  # rows in host slots were trained


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
def test_caching_torch_path_cuda(prefetch):
    # The torch path pools and sums gradients with index_add_, whose CUDA kernel adds with atomics in no fixed
    # order, so two runs of it differ in the last bits whatever the storage; deterministic algorithms make the
    # comparison of the storage modes exact (on CPU the torch path is deterministic: test_mode_parity). A prefetch
    # of the next batch between forward and backward stages inline on the current stream on this path.
    ref, m = make("hbm", device="cuda"), make("caching", device="cuda")
    ref.use_kernels = m.use_kernels = False
    data = list(batches(6, device="cuda"))
    with deterministic():
        for i, (ids, off, w) in enumerate(data):
            o_ref = step(ref, ids, off, w)
            out = m(ids, off)
            if prefetch and i + 1 < len(data):
                m.prefetch(*data[i + 1][:2])
                assert _prefetch._LAST[m].future is None  # inline
            (out * w).sum().backward()
            assert torch.equal(o_ref, out)
    assert_same(ref, m)


def test_prefetch_cuda_side_stream(tmp_path):
    ref = make("hbm", device="cuda")
    m = make("caching", device="cuda", stores=disk(tmp_path) if HAVE_ROCKS else (None, None))
    data = list(batches(12, seed=3))
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids.cuda(), off.cuda(), w.cuda())
        out = m(ids.cuda(), off.cuda())
        if i + 1 < len(data):
            m.prefetch(data[i + 1][0], data[i + 1][1])  # CPU ids: no wait on this step
        (out * w.cuda()).sum().backward()
        assert torch.equal(o_ref, out)
    torch.cuda.synchronize()
    assert_same(ref, m)


@pytest.mark.parametrize("store", ["host", "disk"])
def test_prefetch_device_batches(store, tmp_path):
    """Prefetch of the batch already on the device (TorchRec's pipeline): the same training as all-HBM under
    eviction pressure (two batches prefetched ahead; a cache change between prefetch and step; a batch modified in
    place after its prefetch; one prefetched but never run), and a warm step after its prefetch syncs no more
    than an all-HBM step."""
    if store == "disk" and not HAVE_ROCKS:
        pytest.skip("rocksdict not installed")
    ref = make("hbm", device="cuda")
    m = make("caching", device="cuda", stores=disk(tmp_path) if store == "disk" else (None, None))
    data = [(i.cuda(), o.cuda(), w.cuda()) for i, o, w in batches(14, seed=5)]
    for i, (ids, off, w) in enumerate(data):
        if i % 4 == 0 and i + 1 < len(data):
            m.prefetch(*data[i + 1][:2])  # ahead of this step: this step's staging may evict the batch's rows
        if i == 6:
            m.prefetch(*data[9][:2])  # never run before its ids change in place
            data[9][0][:5] = data[9][0][:5] + 1
        o_ref = step(ref, ids, off, w)
        out = m(ids, off)
        if i + 1 < len(data):
            m.prefetch(*data[i + 1][:2])
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), f"step {i}"
        if i == 3:  # a logical write between a prefetch and its step moves rows: the prefetch no longer counts
            k = torch.arange(200, 240, device="cuda")
            v = torch.randn(40, DIM, device="cuda")
            ref.set_rows(1, k, v), m.set_rows(1, k, v)
    torch.cuda.synchronize()
    assert_same(ref, m)
    # warm: the same batch again, prefetched: its step stages nothing and never waits for the device (a sleep
    # queued ahead of it is still running when its forward returns), as an all-HBM step (a job's property:
    # ``prefetch_adaptive`` would queue none for most prefetches of a warm set, test_prefetch_adaptive_counts_cuda)
    m.prefetch_adaptive = False
    ids, off, w = data[-1]
    step(ref, ids, off, w)
    step(m, ids, off, w)
    m.prefetch(ids, off)
    outs = []
    for x in (ref, m):
        torch.cuda.synchronize()
        torch.cuda._sleep(1 << 28)
        outs.append(x(ids, off))
        assert not torch.cuda.current_stream().query(), "the step waited for the device"
        (outs[-1] * w).sum().backward()
    assert torch.equal(outs[0], outs[1])
    assert_same(ref, m)



@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_prefetch_adaptive_counts_cuda(opt):
    """``prefetch_adaptive`` over the host store (the job thread's path): over a warm set 15 prefetches in 16 queue
    nothing and the 16th only op cache_probe on the side stream (its step counts nothing and waits for nothing), a
    miss turns staging ahead back on; bit-identical to all-HBM (storage_helpers.prefetch_adaptive_counts)."""
    T = 3
    ref, m = make_t("hbm", T, opt=opt, device="cuda"), make_t("caching", T, slots=16 * BC, opt=opt, device="cuda")
    prefetch_adaptive_counts(ref, m, T, device="cuda")

@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_prefetch_job_stages_while_step_in_flight_cuda(opt):
    """The pipeline shape (forward i, prefetch i + 1, backward i) with every step missing in every cache: the job
    stages batch i + 1 on the side stream while step i's backward is queued (its rows pinned), step i + 1 stages
    nothing and does not wait for the device (a sleep queued ahead of it still runs when its forward returns), and
    the training is bit-identical to all-HBM."""
    T = 3
    ref, m = make_t("hbm", T, opt=opt, device="cuda"), make_t("caching", T, slots=16 * BC, opt=opt, device="cuda")
    staged = prefetch_pipeline_cuda(ref, m, list(t_batches(T, 12, seed=17, hi=2000, device="cuda")))
    assert staged >= 8, staged
    assert_same(ref, m)


@pytest.mark.parametrize("prefetch", [False, True], ids=["step", "prefetched"])
def test_batched_staging_syncs_cuda(prefetch):
    """Every step misses in every cache (128 of 400 ids per table cached): the same training as all-HBM with T
    tables of two row layouts, and the host syncs of a caching step do not grow with T: at most 3 more than the
    all-HBM step (miss counts read back with the feature bounds, missing ids, insert results), none after a
    prefetch of the batch
    (its job, in the job thread, staged it; the job is waited for before counting: its syncs are its thread's)."""
    extra, where = {}, {}
    for T in (2, 5):
        ref, m = make_t("hbm", T, device="cuda"), make_t("caching", T, slots=8 * BC, device="cuda")
        assert m.use_kernels
        extra[T], where[T] = staging_syncs_cuda(ref, m, t_batches(T, 6, seed=3, device="cuda"), prefetch)
        assert_same(ref, m)
    assert extra[2] == extra[5], (extra, where)
    assert max(extra[5]) <= (0 if prefetch else 3), (extra, where)


def test_hybrid_module_rows_and_checkpoints_cuda(tmp_path):
    """set_rows / get_rows, dump / load, state_dict and erase of a module whose tables keep half of each bucket's
    slots in host memory: the same as all-HBM, and a loaded table stays hybrid (it came back all-HBM before)."""
    from dynamicemb._hybrid import HybridTable

    ref, m = make("hbm", device="cuda"), make("hybrid", device="cuda", budget_rows=512)
    data = list(batches(8, seed=4, device="cuda"))
    for ids, off, w in data[:4]:
        step(ref, ids, off, w), step(m, ids, off, w)
    ids = torch.arange(1000, 1300, device="cuda")  # new ids: the fuller buckets put them in host slots
    wts = torch.randn(300, DIM, device="cuda")
    for x in (ref, m):
        x.set_rows(1, ids, wts)
    for a, b in zip(ref.get_rows(1, ids), m.get_rows(1, ids)):
        assert torch.equal(a, b)
    assert_same(ref, m)
    m.dump(str(tmp_path / "d"))
    m2 = make("hybrid", device="cuda", budget_rows=512)
    m2.load(str(tmp_path / "d"))
    m3 = make("hybrid", device="cuda", budget_rows=512)
    m3.load_state_dict(m.state_dict())
    for x in (m2, m3):  # a loaded table stays hybrid, with the default slot-major host rows
        assert all(isinstance(t, HybridTable) and t.values_host is not None for t in x.tables)
        assert all(t.host_run == t.capacity() // t.bucket_capacity for t in x.tables)
        assert_same(ref, x)
    for ids, off, w in data[4:]:
        o = step(ref, ids, off, w)
        assert torch.equal(o, step(m2, ids, off, w)) and torch.equal(o, step(m3, ids, off, w))
    k = torch.arange(0, 300, device="cuda")
    assert int(ref.tables[0].erase(k)) == int(m2.tables[0].erase(k)) > 0
    assert int(ref.tables[1].erase_if(1 << 40)) == int(m2.tables[1].erase_if(1 << 40))
    assert_same(ref, m2)


@pytest.mark.parametrize("policy", ["lru", "lfu"])
@pytest.mark.parametrize("hbm_rows", [0, 96, 256])
def test_hybrid_table_ops_equal_hbm(hbm_rows, policy):
    # One key per bucket per op (table_ops_agree): with two keys racing for a full bucket, which one the GPU table
    # evicts or refuses depends on thread order, so two all-HBM tables would differ as well.
    table_ops_agree("cuda", hbm_rows, policy)


def test_hybrid_contention_invariants():
    """Large batches with duplicates onto full buckets, rows split between HBM and host memory: no key stored
    twice, the accounting adds up, every row read is one some op wrote whole (for memcheck too)."""
    from dynamicemb._hybrid import HybridTable

    cap, dim = (1 << 12, 16) if SMALL else (1 << 16, 32)
    t = HybridTable(cap, dim, device="cuda", bucket_capacity=128, score_policy="lru", hbm_rows=cap // 4)

    def whole(keys, values):  # each key's row: the key in every column (writers) or zeros (the initializer)
        kv = keys.to(torch.float32)[:, None]
        return bool(((values == kv) | (values == 0)).all(1).all()) and bool((values == values[:, :1]).all())

    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        k = torch.randint(0, 3 * cap, (2 * cap,), generator=g).cuda()
        v = k.to(torch.float32)[:, None].expand(-1, dim).contiguous()  # a key's duplicates write the same row
        assert int(t.insert_or_assign(k, v).sum()) == k.numel()
        f = t.find_or_insert(torch.randint(0, 3 * cap, (cap,), generator=g).cuda())
        assert int(f.stats.sum()) == cap
        r = t.find(k)
        assert whole(k[r.found], r.values[r.found])
        ev = t.insert_and_evict(k[: cap // 2], v[: cap // 2])
        n = int(ev.num_evicted)
        assert whole(ev.evicted_keys[:n], ev.evicted_values[:n])
    keys, values, _ = t.items()
    assert torch.unique(keys).numel() == keys.numel() == t.size()
    assert whole(keys, values)


@pytest.mark.parametrize("dtype,dim", [(torch.float32, 64), (torch.float16, 6), (torch.float16, 7)],
                         ids=["fp32x64", "fp16x6", "fp16x7"])
def test_hybrid_sorted_rows_duplicates(dtype, dim):
    """The host rows of a hybrid table are copied after the probe, sorted by host slot (16-, 4- and 2-byte
    words): batches with many duplicates give every duplicate of a new key the same initial row as an all-HBM
    table; a written row is one duplicate's row, whole; without duplicates both tables agree bit for bit."""
    from dynamicemb._hybrid import HybridTable
    from dynamicemb._table import ScoredHashTable, TableInitializer

    cap = 1 << 12
    kw = dict(value_dtype=dtype, bucket_capacity=128, initializer=TableInitializer("uniform", low=-1.0, high=1.0,
                                                                                   seed=7), device="cuda")
    a, b = ScoredHashTable(cap, dim, **kw), HybridTable(cap, dim, hbm_rows=cap // 8, **kw)  # 16 HBM slots a bucket
    g = torch.Generator().manual_seed(11)
    pool = torch.randint(-(1 << 62), 1 << 62, (1500,), generator=g)
    for step in range(6):
        k = pool[torch.randint(0, pool.numel(), (800,), generator=g)].cuda()  # ~ 1/3 of the keys repeat
        ra, rb = a.find_or_insert(k), b.find_or_insert(k)
        assert torch.equal(ra.values, rb.values), step  # stored rows or the key's initial row, per duplicate
        v = torch.randn(k.numel(), dim, generator=g).to("cuda", dtype)
        op = "insert_or_assign" if step % 2 == 0 else "assign"
        for t in (a, b):
            getattr(t, op)(k, v)
            got = t.find(k).values
            same_key = k[:, None] == k[None, :]
            match = (got[:, None, :] == v[None, :, :]).all(-1) & same_key  # got[i] is some duplicate's row
            assert bool(match.any(1).all()), (step, op)
        u = torch.unique(k)
        vu = torch.randn(u.numel(), dim, generator=g).to("cuda", dtype)
        for t in (a, b):
            t.insert_or_assign(u, vu)  # no duplicates: one result
        fa, fb = a.find(pool.cuda(), default=-2.0), b.find(pool.cuda(), default=-2.0)
        assert torch.equal(fa.values, fb.values) and torch.equal(fa.found, fb.found), step
    assert int(b.host_slots(b.find_slots(pool.cuda()).slots).sum()) > 500  # most rows are host rows


@pytest.mark.parametrize("dtype,dim", [(torch.float32, 64), (torch.float16, 7)], ids=["fp32x64", "fp16x7"])
def test_hybrid_one_pass_long_duplicate_runs(dtype, dim):
    """The hybrid host rows are written and read in one pass (hybrid_rows.cu): a read of a slot the same op writes
    (a duplicate of a new find_or_insert key) takes the writer's row. Long runs of one new key and of one stored
    key, mixed with distinct new and stored keys, in random order: every output row equals an all-HBM table's,
    every duplicate of a new key got the same initial row, and the rows stored afterwards agree."""
    from dynamicemb._hybrid import HybridTable
    from dynamicemb._table import ScoredHashTable, TableInitializer

    cap = 1 << 12
    kw = dict(value_dtype=dtype, bucket_capacity=128, initializer=TableInitializer("uniform", low=-1.0, high=1.0,
                                                                                   seed=5), device="cuda")
    a, b = ScoredHashTable(cap, dim, **kw), HybridTable(cap, dim, hbm_rows=0, **kw)
    g = torch.Generator().manual_seed(23)
    pool = torch.unique(torch.randint(-(1 << 62), 1 << 62, (1200,), generator=g))
    stored, fresh = pool[:600], pool[600:]
    v = torch.randn(stored.numel(), dim, generator=g).to("cuda", dtype)
    for t in (a, b):
        t.insert_or_assign(stored.cuda(), v)
    for step in range(3):
        new_run = fresh[step].repeat(300)  # one new key, 300 times
        hit_run = stored[step].repeat(200)  # one stored key, 200 times
        new_few = fresh[10 + 60 * step: 70 + 60 * step].repeat(3)  # new keys, 3 times each
        k = torch.cat([new_run, hit_run, new_few, stored[100 + step * 100: 200 + step * 100]])
        k = k[torch.randperm(k.numel(), generator=g)].cuda()
        ra, rb = a.find_or_insert(k), b.find_or_insert(k)
        assert torch.equal(ra.values, rb.values), step
        same = rb.values[k == int(fresh[step])]
        assert same.shape[0] == 300 and bool((same == same[:1]).all()), step
        assert bool((rb.values[k == int(stored[step])] == v[step]).all()), step
        fa, fb = a.find(pool.cuda(), default=-2.0), b.find(pool.cuda(), default=-2.0)
        assert torch.equal(fa.values, fb.values) and torch.equal(fa.found, fb.found), step


def test_hybrid_module_layouts_cuda():
    """A storage="hybrid" module's CUDA tables are slot-major (host slots claimed lowest first) by default; the
    private bucket-major layout (_set_host_slot_major(False)) and all-HBM train to the same bits; state_dict moves
    rows between the layouts (each table keeps its own); the CPU module (one buffer) gives every key the same row
    (to float tolerance: the torch path) and the same stored keys."""
    opt = Adam(lr=0.01)
    # 2 HBM slots a bucket: most buckets put rows in host slots
    ref, sm, bm = (make(s, opt, device="cuda", budget_rows=128) for s in ("hbm", "hybrid", "hybrid"))
    cpu = make("hybrid", opt, device="cpu", budget_rows=128)
    assert all(t.host_run == t.capacity() // t.bucket_capacity for t in sm.tables)
    assert all(t.values_host is None for t in cpu.tables)  # the torch path reads one buffer
    for t in bm.tables:
        t._set_host_slot_major(False)
        assert t.host_run == 0 and t.values_host.dim() == 2
    for ids, off, w in batches(6, seed=9, device="cuda"):
        o = step(ref, ids, off, w)
        assert torch.equal(o, step(sm, ids, off, w)) and torch.equal(o, step(bm, ids, off, w))
        torch.testing.assert_close(step(cpu, ids.cpu(), off.cpu(), w.cpu()), o.cpu(), atol=1e-5, rtol=1e-5)
    assert_same(ref, sm), assert_same(ref, bm)
    assert all(int(t.host_slots(t.find_slots(t.items()[0]).slots).sum()) > 20 for t in sm.tables)
    for a, c in zip(sm.tables, cpu.tables):
        ka, va, _ = a.items()
        kc, vc, _ = c.items()
        oa, oc = torch.argsort(ka.view(torch.int64)), torch.argsort(kc.view(torch.int64))
        assert torch.equal(ka[oa].cpu(), kc[oc])
        torch.testing.assert_close(va[oa].cpu(), vc[oc], atol=1e-5, rtol=1e-5)
    sd_sm, sd_bm = sm.state_dict(), bm.state_dict()
    sm.load_state_dict(sd_bm)
    bm.load_state_dict(sd_sm)
    assert all(t.host_run != 0 for t in sm.tables) and all(t.host_run == 0 for t in bm.tables)
    assert_same(ref, sm), assert_same(ref, bm)
