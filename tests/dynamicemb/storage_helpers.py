"""Shared helpers of the storage-tier tests (test_storage_*.py, test_uva_store_*.py)."""

import contextlib

import torch

from dynamicemb import _prefetch
from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._optimizers import Adam
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions
from dynamicemb._storage import HostStore, StoreError

try:
    import rocksdict  # noqa: F401

    HAVE_ROCKS = True
except ImportError:
    HAVE_ROCKS = False

DIM, CAP, BC = 4, 1024, 16
CACHE_SLOTS = 128


def make(storage="hbm", opt=None, stores=(None, None), device="cpu", budget_rows=CACHE_SLOTS, total=None,
         admission=0, policies=("lru", "lfu"), dtype=torch.float32, pooling="sum"):
    row = (opt or Adam(lr=0.01)).row_width(DIM) * torch.empty((), dtype=dtype).element_size()
    kw = dict(storage=storage)
    if storage != "hbm" and total is None:
        kw["hbm_budget_bytes"] = budget_rows * row
    opts = [DynamicEmbTableOptions(dim=DIM, dtype=dtype, max_capacity=CAP, bucket_capacity=BC, score_policy=p,
                                   initializer=DynamicEmbInitializer("uniform", seed=3 + i),
                                   backing_store=stores[i] if storage == "caching" else None,
                                   admission_threshold=admission, **kw)
            for i, p in enumerate(policies)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1, 1], pooling=pooling, optimizer=opt or Adam(lr=0.01),
                                         device=device, hbm_budget_bytes=total)


def batches(n, seed=0, hi=300, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        ids = torch.randint(0, hi, (90,), generator=g)
        yield ids.to(device), torch.arange(0, 91, 6).to(device), torch.randn(5, 3 * DIM, generator=g).to(device)


def step(m, ids, off, w):
    out = m(ids, off)
    (out * w).sum().backward()
    return out


def rows(table):
    k, v, s = table.items()
    o = torch.argsort(k.view(torch.int64))
    return k[o].cpu(), v[o].cpu(), s[o].cpu()


def assert_same(a, b):
    assert a.sizes() == b.sizes()
    for ta, tb in zip(a.tables, b.tables):
        for x, y in zip(rows(ta), rows(tb)):
            assert torch.equal(x.view(torch.uint8) if x.is_floating_point() else x,
                               y.view(torch.uint8) if y.is_floating_point() else y)
    assert torch.equal(a.step, b.step)


def disk(tmp_path, tag=""):
    return (str(tmp_path / f"s0{tag}"), str(tmp_path / f"s1{tag}"))


@contextlib.contextmanager
def deterministic():
    """torch.use_deterministic_algorithms for a block (warn_only: an op without a deterministic kernel warns)."""
    prev, prev_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev, warn_only=prev_warn)


def _slots(t):
    """Every slot of a table (keys, digests, scores, size counter, rows): a hybrid table's rows from both buffers."""
    v = t.all_values() if hasattr(t, "all_values") else t.values
    return (t.keys.view(torch.int64).cpu(), t.digests.cpu(), t.scores.cpu(), t.counters[:2].cpu(), v.cpu())


def _contents(t):
    """What a table holds, whatever slots its keys took: its live keys in key order with their scores and rows,
    and its clock and size counters. (A hybrid table claims a bucket's HBM slots first, so the same ids sit in
    other slots than in an all-HBM table.)"""
    keys, _, scores, counters, values = _slots(t)
    live = keys != -(1 << 63)
    o = torch.argsort(keys[live])
    return keys[live][o], scores[live][o], values[live][o], counters


def check_split_placement(t):
    """A hybrid table's split (hbm_slots of every bucket in HBM): a bucket has keys in host slots only while
    every one of its HBM slots holds a key, as long as no key left the bucket (no erase or eviction since the
    inserts). Returns the number of keys in host slots."""
    B, h = t.bucket_capacity, t.hbm_slots
    used = (t.keys.view(torch.int64).cpu() != -(1 << 63)).view(-1, B)
    hbm_used, host_used = used[:, :h].sum(1), used[:, h:].sum(1)
    assert bool(((host_used == 0) | (hbm_used == h)).all()), "a host slot taken while the bucket's HBM slots were free"
    return int(host_used.sum())


INSERT_OPS = ("find_or_insert", "insert_or_assign", "insert_and_evict")


def insert_op(t, op, keys, vals, sc):
    """One of INSERT_OPS on table t; returns what two tables given the same keys must agree on (insert_and_evict:
    the evicted keys, rows and scores sorted by key, then the stats)."""
    if op == "find_or_insert":
        r = t.find_or_insert(keys, sc)
        return (r.values, r.found, r.stats)
    if op == "insert_or_assign":
        return (t.insert_or_assign(keys, vals, sc),)
    r = t.insert_and_evict(keys, vals, sc)
    m = int(r.num_evicted)
    o = torch.argsort(r.evicted_keys[:m].view(torch.int64))
    return (r.evicted_keys[:m][o], r.evicted_values[:m][o], r.evicted_scores[:m][o], r.stats)


def admission_epochs_parity(ref, m, bs, prefetch):
    """Trains all-HBM ``ref`` and ``m`` (both with admission tables and epoch score policies) on batches ``bs``, the
    epoch changed every 3 steps, ``m`` prefetching the next batch between forward and backward when ``prefetch``:
    outputs every step, then rows, scores and the admission tables' counts bit-identical."""
    for e, (ids, off, w) in enumerate(bs):
        ref.set_epoch(e // 3), m.set_epoch(e // 3)
        o_ref = step(ref, ids, off, w)
        out = m(ids, off)
        if prefetch and e + 1 < len(bs):
            m.prefetch(*bs[e + 1][:2])
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), e
    assert_same(ref, m)
    for a, b in zip(ref.admission_tables, m.admission_tables):
        assert all(torch.equal(x, y) for x, y in zip(rows(a), rows(b)))


def prefetch_under_eviction_pressure(ref, m, device="cpu"):
    """ref (all-HBM) and m (caching) after 4 common steps; then two batches prefetched ahead at a time: the second
    job may evict rows the first staged before the first batch's step uses them (that step stages them again), and
    every step finds its ids in the cache; outputs and final state bit-identical to ref."""
    data = list(batches(10, seed=1, device=device))
    for ids, off, w in data[:4]:
        step(ref, ids, off, w), step(m, ids, off, w)
    for i in range(4, 10, 2):
        m.prefetch(data[i][0], data[i][1])
        m.prefetch(data[i + 1][0], data[i + 1][1])
        for ids, off, w in data[i:i + 2]:
            assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
            for t, k in m._table_keys(ids, off, [0, 1]).items():  # the step's ids are all in the cache
                assert bool(m.tables[t]._cache_find(k)[0].all())
    assert_same(ref, m)


def table_ops_agree(device, hbm_rows, policy, steps=48, seed=0):
    """Runs one sequence of every table op on an all-HBM table and a HybridTable of ``hbm_rows`` HBM rows (16
    buckets of 16 slots, keys from a pool of 600, so buckets fill and evict) and asserts equal results and equal
    contents (keys, scores, rows; _contents) after each op, and equal slots where the split leaves the claim order
    as it is (hbm_rows 0: every slot a host slot; 256: every slot in HBM). Each op's batch holds at most one key per
    bucket (a GPU table then has no choice that thread order could decide) and the scores of a bucket's keys differ
    (LRU: one op clock per key; LFU: caller scores in [1, 2^40)), so the two tables must agree bit for bit. (Tied
    scores: tie_helpers.tied_ops_agree; the victim is the least (score, digest, key), whatever the layout.)"""
    import zlib

    from dynamicemb._hybrid import HybridTable
    from dynamicemb._table import ScoredHashTable, TableInitializer
    from table_helpers import key_tensor, one_per_bucket

    nb, bc, dim = 16, 16, 8
    init = TableInitializer("uniform", low=-1.0, high=1.0, seed=5)
    kw = dict(bucket_capacity=bc, score_policy=policy, initializer=init, device=device)
    a = ScoredHashTable(nb * bc, dim, **kw)
    b = HybridTable(nb * bc, dim, hbm_rows=hbm_rows, **kw)
    same_slots = b.hbm_slots in (0, bc)
    if device != "cpu":
        assert (b.values_host is not None) == (hbm_rows < nb * bc)
    g = torch.Generator().manual_seed(zlib.crc32(f"{hbm_rows}{policy}{seed}".encode()))
    pool = torch.randint(1, 1 << 62, (600,), generator=g).tolist()
    ops = ["find_or_insert", "insert_or_assign", "insert_and_evict", "find_or_insert_slots", "assign",
           "accum_or_assign", "assign_scores", "erase"]
    host_seen = 0
    for i in range(steps):
        idx = torch.randint(0, len(pool), (4 * nb,), generator=g).tolist()
        keys = key_tensor(one_per_bucket([pool[j] for j in idx], nb), torch.int64, device)
        n = keys.numel()
        vals = torch.randn(n, dim, generator=g).to(device)
        sc = torch.randint(1, 1 << 40, (n,), generator=g).to(device) if policy == "lfu" else None
        flags = (torch.rand(n, generator=g) < 0.5).to(device)
        op = ops[i % len(ops)] if i >= 16 else ops[i % 3]  # fill the table first
        res = []
        for t in (a, b):
            if op in INSERT_OPS:
                res.append(insert_op(t, op, keys, vals, sc))
            elif op == "find_or_insert_slots":
                r = t.find_or_insert_slots(keys, sc)
                got = r.slots >= 0  # the slot holds the key (the slot itself depends on the layout)
                held = t.keys.view(torch.int64)[r.slots.clamp(min=0)] == keys.view(torch.int64)
                assert bool((held | ~got).all()), f"step {i}"
                res.append((got, r.found, r.stats) + ((r.slots,) if same_slots else ()))
            elif op == "assign":
                res.append((t.assign(keys, vals),))
            elif op == "accum_or_assign":
                res.append((t.accum_or_assign(keys, vals, flags, sc),))
            elif op == "assign_scores":
                res.append((t.assign_scores(keys, sc),))
            else:
                res.append((t.erase(keys[: n // 4]),))
            f = t.find(key_tensor(pool, torch.int64, device), return_scores=True, default=-3.0)
            res[-1] += (f.values, f.found, torch.where(f.found, f.scores, 0))
        for x, y in zip(*res):
            assert torch.equal(x.cpu(), y.cpu()), f"step {i}: {op}"
        for x, y in zip(_contents(a), _contents(b)):
            assert torch.equal(x, y), f"step {i}: {op} (contents)"
        if same_slots:
            for x, y in zip(_slots(a), _slots(b)):
                assert torch.equal(x, y), f"step {i}: {op} (slots)"
        if i < 16 and 0 < b.hbm_slots < bc:  # inserts only so far: the HBM slots fill first
            host_seen = check_split_placement(b)
    assert a.size() > nb * bc // 2  # the table filled up (evictions ran)
    if 0 < b.hbm_slots < bc:
        assert host_seen > 0  # buckets overflowed into their host slots
    sd = b.state_dict()
    c = HybridTable(nb * bc, dim, hbm_rows=hbm_rows, **kw)
    c.load_state_dict(sd)
    for x, y in zip(_slots(b), _slots(c)):
        assert torch.equal(x, y)
    for x, y in zip(_contents(a), _contents(c)):
        assert torch.equal(x, y)


class FlakyStore(HostStore):
    """A HostStore whose reads or writes raise StoreError on demand (a store failing mid-step)."""

    fail_find = fail_write = False

    def find(self, keys):
        if self.fail_find:
            raise StoreError("flaky store: read failed (test)")
        return super().find(keys)

    def write(self, *a):
        if self.fail_write:
            raise StoreError("flaky store: write failed (test)")
        return super().write(*a)


def make_t(storage, T, slots=2 * CACHE_SLOTS, flaky=False, opt=None, device="cpu", store=None):
    """T tables (dims 4 and 8 alternating: two row layouts), T + 1 features (table 0 read by two). ``store``: the
    caching tables' ``backing_store`` (default: host memory)."""
    opt = opt or Adam(lr=0.01)
    opts = []
    for i in range(T):
        dim = 4 if i % 2 == 0 else 8
        kw = dict(storage=storage)
        if storage == "caching":
            kw["hbm_budget_bytes"] = slots * opt.row_width(dim) * 4
            if flaky:
                kw["backing_store"] = lambda kd, w, dt, cap: FlakyStore(kd, w, dt, cap, BC)
            elif store is not None:
                kw["backing_store"] = store
        opts.append(DynamicEmbTableOptions(dim=dim, max_capacity=CAP, bucket_capacity=BC,
                                           score_policy=("lru", "lfu")[i % 2],
                                           initializer=DynamicEmbInitializer("uniform", seed=11 + i), **kw))
    return BatchedDynamicEmbeddingTables(opts, [0] + list(range(T)), pooling="sum", optimizer=opt, device=device)


def probe_batches(n, hi, seed, device="cpu"):
    """n random (ids, offsets) of 4 features x 5 bags (0-8 ids per bag: empty bags too), ids in [0, hi); batch 3
    starts with two reserved empty keys (-2**63: always a miss). For the miss-count tests (a table read by two
    features, ids of no table)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(n):
        lengths = torch.randint(0, 9, (4 * 5,), generator=g)
        off = torch.zeros(21, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=off[1:])
        ids = torch.randint(0, hi, (int(off[-1]),), generator=g)
        if i == 3:
            ids[:2] = -(2**63)
        yield ids.to(device), off.to(device)


def t_batches(T, n, seed=0, hi=400, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    F, B = T + 1, 4
    width = 4 + sum(4 if i % 2 == 0 else 8 for i in range(T))
    for _ in range(n):
        lengths = torch.randint(1, 12, (F * B,), generator=g)
        off = torch.zeros(F * B + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=off[1:])
        ids = torch.randint(0, hi, (int(off[-1]),), generator=g)
        yield ids.to(device), off.to(device), torch.randn(B, width, generator=g).to(device)


class SyncCounter:
    """Counts, on a CPU module, what the same code does on CUDA inside the caching tables' staging
    (``BatchedDynamicEmbeddingTables._stage_caches``, the part of a step that storage="caching" adds):

      - ``waits``: the points where the host waits for device values: each ``_staging.to_host`` call (one wait for
        all its copies) and, outside ``_staging.host_phase()`` blocks (work on host tensors only), every op that
        reads device values on the host (``item``/``bool``/``int``/``tolist`` of a tensor, ``nonzero``, ``unique``,
        ``masked_select``, boolean-mask indexing);
      - ``ops``: every op that is a kernel launch on CUDA (views excluded), ``table_ops``: the table ops among them.

    Usage: ``with SyncCounter(module) as c: step(...)``; then ``c.waits``, ``c.ops``, ``c.table_ops``
    (``SyncCounter(module, "_prefetch_counts")`` counts inside another method of the module)."""

    _SYNC_OPS = {"_local_scalar_dense", "nonzero", "_unique", "_unique2", "unique_dim", "unique_consecutive",
                 "unique_dim_consecutive", "masked_select"}  # nonzero_static is not one: its size is given
    _VIEWS = ("view", "_unsafe_view", "slice", "select", "split", "split_with_sizes", "alias", "detach",
              "as_strided", "expand", "t", "squeeze", "unsqueeze", "unbind", "_reshape_alias", "reshape",
              "view_as", "lift_fresh", "empty", "empty_like")

    def __init__(self, module, method="_stage_caches"):
        self.module, self.method = module, method
        self.waits = self.ops = self.table_ops = 0
        self.active = False

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        from dynamicemb import _staging

        counter = self
        self._staging = _staging

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if counter.active and not _staging.in_host_phase():
                    name = func.__name__.split(".")[0]
                    if func.namespace == "dynamicemb":
                        counter.table_ops += 1
                    if name not in SyncCounter._VIEWS:
                        counter.ops += 1
                    bool_index = name in ("index", "index_put", "index_put_") and any(
                        isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()) if i is not None)
                    if name in SyncCounter._SYNC_OPS or bool_index:
                        counter.waits += 1
                return func(*args, **(kwargs or {}))

        self._mode = Mode()
        self._mode.__enter__()
        to_host, tolist, stage = _staging.to_host, torch.Tensor.tolist, getattr(self.module, self.method)

        fetched = {}  # results of to_host (kept alive here): host tensors, reading them waits for nothing

        def counted_to_host(*ts):
            if counter.active:
                counter.waits += 1
            prev, counter.active = counter.active, False  # the copies themselves are one wait, counted here
            try:
                out = to_host(*ts)
            finally:
                counter.active = prev
            fetched.update((id(t), t) for t in out)
            return out

        def counted_tolist(t):
            if counter.active and not _staging.in_host_phase() and id(t) not in fetched:
                counter.waits += 1
            return tolist(t)

        def counted_stage(*a, **k):
            counter.active = True
            try:
                return stage(*a, **k)
            finally:
                counter.active = False

        self._restore = [(_staging, "to_host", to_host), (torch.Tensor, "tolist", tolist)]
        _staging.to_host = counted_to_host
        torch.Tensor.tolist = counted_tolist
        setattr(self.module, self.method, counted_stage)
        # modules that imported to_host by name
        import dynamicemb._batched_tiers as b
        import dynamicemb._caching as c

        for mod in (b, c):
            self._restore.append((mod, "to_host", mod.to_host))
            mod.to_host = counted_to_host
        return self

    def __exit__(self, *exc):
        for obj, name, val in self._restore:
            setattr(obj, name, val)
        delattr(self.module, self.method)
        self._mode.__exit__(*exc)
        return False


def sync_warnings(fn) -> list:
    """Where torch reports a host synchronization (sync debug mode "warn") while ``fn`` runs: file:line each."""
    import warnings

    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.cuda.set_sync_debug_mode(prev)
    return [f"{w.filename.rsplit('/', 1)[-1]}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]


def logical_rows(m):
    """Per table of ``m`` its rows (cache and store) as {key: (row on the CPU, score)}."""
    out = []
    for t in m.tables:
        k, v, sc = t.items()
        out.append({int(a): (b.cpu(), int(c)) for a, b, c in zip(k.tolist(), v, sc.tolist())})
    return out


def same_logical(a, b) -> bool:
    """``logical_rows`` of two modules (or two moments) hold the same keys, rows and scores."""
    return all(x.keys() == y.keys() and all(torch.equal(x[k][0], y[k][0]) and x[k][1] == y[k][1] for k in x)
               for x, y in zip(a, b))


def power_law(n, R, gen, alpha=1.05):
    """n ids in [1, R] drawn with P(k) ~ k^-alpha (inverse CDF), scattered over the id space by a fixed odd
    multiplier (so hot ids do not share buckets by construction)."""
    a = 1.0 - alpha
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    k = ((R ** a - 1.0) * u + 1.0) ** (1.0 / a)
    return (k.floor().clamp_(1, R).to(torch.int64) * 0x9E3779B97F4A7C15) & ((1 << 62) - 1)


def power_law_unique(n, R, gen, alpha=1.05):
    """n distinct ids of ``power_law``: the first n distinct ones of a longer draw (hot ids stay likely)."""
    draw = power_law(8 * n, R, gen, alpha)
    first = torch.ones(draw.numel(), dtype=torch.bool)
    s, order = torch.sort(draw, stable=True)
    first[order[1:]] = s[1:] != s[:-1]
    out = draw[first][:n]
    assert out.numel() == n, "power_law_unique: too few distinct ids"
    return out


def ten_percent(device, opt, prefetch, store=None, T=3, R=8192, n=400, rounds=3, unique=None, device_staging=None,
                dim=16, frac=0.1, bucket=64, cycle=4, uniform=False):
    """NVIDIA's caching config scaled down: T tables of R ids, an HBM cache of ~10 % of R (768 slots in buckets of
    64), n power-law ids per table per step (pooling sum, one id per bag), 4 batches in turn: the 4 batches' ids
    (~700 per table) overflow the cache's buckets, so every step misses and evicts. Runs ``rounds`` rounds against
    all-HBM (``prefetch``: forward i, prefetch i + 1, backward i) and asserts bit-identical outputs, rows, scores
    and optimizer state. Returns the caching module.

    ``unique`` (default on CUDA): each table's ids of a step are distinct. CUDA's fused backward sums a hot id's
    gradients in pieces when its segment crosses warp boundaries and adds the pieces in arrival order
    (csrc/lookup/segment_kernels.cu), so two modules (or two runs) agree bit for bit only on such rows when every
    id occurs once per step; with repeats the all-HBM reference itself differs run to run by rounding.
    ``device_staging``: the caching module's ``device_staging`` (default: the module's own). ``dim``, ``frac``
    (the cache's share of R), ``bucket`` (bucket capacity) and ``cycle`` (distinct batches in turn) scale it: a
    cycle whose ids outgrow the cache makes every step write victims back and bring stored rows in. ``uniform``:
    n distinct ids per table drawn uniformly from R instead (no hot ids: most of a step's ids miss)."""
    unique = device != "cpu" if unique is None else unique
    draw = power_law_unique if unique else power_law
    if uniform:
        def draw(k, r, g):
            return torch.randperm(r, generator=g)[:k]
    def mk(storage):
        kw = dict(storage=storage)
        if storage == "caching":
            kw.update(hbm_budget_bytes=int(frac * R) * opt.row_width(dim) * 4, backing_store=store)
        return BatchedDynamicEmbeddingTables(
            [DynamicEmbTableOptions(dim=dim, max_capacity=R, bucket_capacity=bucket,
                                    initializer=DynamicEmbInitializer("uniform", seed=21 + i), **kw)
             for i in range(T)], pooling="sum", optimizer=opt, device=device)

    ref, m = mk("hbm"), mk("caching")
    if device_staging is not None:
        m.device_staging = device_staging
    assert (R, frac, bucket) != (8192, 0.1, 64) or all(t.capacity() == 768 for t in m.tables)
    g = torch.Generator().manual_seed(5)
    data = []
    for _ in range(cycle):
        ids = torch.cat([draw(n, R, g) for _ in range(T)])
        data.append((ids.to(device), torch.arange(T * n + 1).to(device),
                     torch.randn(n, T * dim, generator=g).to(device)))
    seq = [data[i % cycle] for i in range(cycle * rounds)]
    moved = []
    for i, (ids, off, w) in enumerate(seq):
        o_ref = step(ref, ids, off, w)
        out = m(ids, off)
        if prefetch and i + 1 < len(seq):
            m.prefetch(*seq[i + 1][:2]) if device != "cpu" else m._prefetch_stage(*seq[i + 1][:2])
        (out * w).sum().backward()
        assert torch.equal(o_ref, out), f"step {i}"
        moved.append(sum(t.rows_moved[0] for t in m.tables))
    if device != "cpu":
        torch.cuda.synchronize()
    assert_same(ref, m)
    assert all(b > a for a, b in zip(moved[cycle:-2], moved[cycle + 1:-1])), moved  # later steps bring rows in
    return m



def two_steps_in_flight(ref, m, data, i):
    """Steps i and i + 1 of data forward before either backward (the first's rows stay while the second stages):
    the same outputs from ref and m."""
    outs = []
    for x in (ref, m):
        o1 = x(data[i][0], data[i][1])
        o2 = x(data[i + 1][0], data[i + 1][1])
        ((o1 * data[i][2]).sum() + (o2 * data[i + 1][2]).sum()).backward()
        outs.append((o1, o2))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def prefetch_pipeline_cuda(ref, m, data):
    """The pipeline shape on CUDA (forward i, prefetch i + 1, backward i): step i + 1 does not wait for the device
    (a sleep queued ahead of it still runs when its forward returns), every job succeeds, and each step equals
    ref's. Returns how many jobs staged rows."""
    staged = 0
    m.prefetch_adaptive = False  # (a job per prefetch: this reads each one)
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids, off, w)
        if i:
            _prefetch.settle(m)
            torch.cuda._sleep(1 << 24)
        out = m(ids, off)
        if i:
            assert not torch.cuda.current_stream().query(), f"step {i} waited for the device"
        if i + 1 < len(data):
            m.prefetch(*data[i + 1][:2])
            job = _prefetch._LAST[m]
        (out * w).sum().backward()
        if i + 1 < len(data):
            job.wait()
            assert job.error is None, job.error
            staged += job.missed > 0
        assert torch.equal(o_ref, out), f"step {i}"
    torch.cuda.synchronize()
    return staged


def staging_syncs_cuda(ref, m, data, prefetch, clean_jobs=False):
    """Per step of data on CUDA: the host syncs of m's forward less ref's (each step's batch prefetched and its job
    settled first with prefetch: the job must have staged rows, and with clean_jobs succeeded); outputs equal.
    Returns the per-step counts and the last step's sync sites."""
    per_step, n = [], []
    m.prefetch_adaptive = False  # (a job per prefetch: this reads each one)
    for ids, off, w in data:
        if prefetch:
            m.prefetch(ids, off)
            _prefetch.settle(m)
            job = _prefetch._JOBS[m][-1]
            assert job.missed > 0 and (not clean_jobs or job.error is None), job.error
        torch.cuda.synchronize()
        outs = []
        n_ref = sync_warnings(lambda: outs.append(ref(ids, off)))
        n = sync_warnings(lambda: outs.append(m(ids, off)))
        for o in outs:
            (o * w).sum().backward()
        assert torch.equal(outs[0], outs[1])
        per_step.append(len(n) - len(n_ref))
    torch.cuda.synchronize()
    return per_step, n


def prefetch_adaptive_counts(ref, m, T, device="cpu"):
    """``prefetch_adaptive`` over host-staged tables (the job thread's path; m: make_t's caching module of T tables
    with a 256-slot cache, ref its all-HBM twin), the pipeline shape (forward i, prefetch i + 1, backward i): once
    a step took a job that read no miss, the next SAMPLE_EVERY - 1 prefetches queue nothing (their steps count
    themselves, as without a prefetch) and the one after queues a count only (``_prefetch.queue_count``: no
    thread, no staging, no pins; on CUDA op cache_probe on the side stream, on the CPU twin counted at once), whose
    step counts nothing itself (on CUDA: waits for nothing, a sleep queued ahead of it still runs when its forward
    returns); when a step's own count sees misses (cold ids) the next prefetches stage ahead again; once the
    batches are warm again the skipping resumes; with ``prefetch_adaptive`` off every prefetch stages ahead.
    Bit-identical to all-HBM throughout."""
    assert m.prefetch_adaptive
    cuda = device != "cpu"
    warm = list(t_batches(T, 3, seed=31, hi=60, device=device))  # (<= 60 ids per table: 256 slots)
    cold = list(t_batches(T, 8, seed=37, hi=2000, device=device))  # over the cache: they keep missing
    own = []  # the steps' own miss counts
    for name in ("_miss_counts", "_count_with_bounds"):
        orig = getattr(m, name)
        setattr(m, name, lambda *a, _f=orig, **k: (own.append(1), _f(*a, **k))[1])

    def run(seq, steps):  # (runs of whole cycles: each run's first step had its batch prefetched)
        kinds, counted, waited = [], [], 0
        for i in range(steps):
            ids, off, w = seq[i % len(seq)]
            o_ref = step(ref, ids, off, w)
            if cuda:
                _prefetch.settle(m)  # (a staging job's own waits are its thread's, done before the sleep)
                torch.cuda.synchronize()
                torch.cuda._sleep(1 << 24)
            n1 = len(own)
            out = m(ids, off)
            counted.append(len(own) > n1)
            if cuda and not counted[-1] and kinds and kinds[-1] == "count":  # after a count that found it whole
                waited += bool(torch.cuda.current_stream().query())  # its step did not wait for the sleep
            nxt = seq[(i + 1) % len(seq)]
            sizes = m.sizes()  # (settles: the step's job is no longer the latest)
            if cuda:
                m.prefetch(*nxt[:2])
            else:
                m._prefetch_stage(*nxt[:2], threaded=True)
            job = _prefetch._LAST.get(m)
            (out * w).sum().backward()
            if job is not None and job.count_only:  # a count changes no table and pins nothing
                assert m.sizes() == sizes and not job.pins and job.future is None
            assert torch.equal(o_ref, out), i
            kinds.append("skip" if job is None else "count" if job.count_only else "stage")
        assert waited == 0, waited
        # a step counts itself exactly after a prefetch that queued nothing (or staged what it then missed)
        for k, c in zip(kinds, counted[1:]):
            assert c == (k == "skip") or k == "stage", (kinds, counted)
        return kinds

    every = _prefetch.SAMPLE_EVERY
    kinds = run(warm, 3)  # the first jobs stage the warm batches
    assert kinds[0] == "stage", kinds
    kinds = run(warm, 3 * every)
    assert "stage" not in kinds and 2 <= kinds.count("count") <= 4, kinds  # a count in SAMPLE_EVERY prefetches
    assert kinds.count("skip") >= 3 * every - 4, kinds
    kinds = run(cold, 8)
    # the first cold step counted itself and missed: every later prefetch stages ahead
    assert kinds == ["stage"] * 8, kinds
    run(warm, 6)  # the warm batches staged again (a job that staged is no warm sample)
    kinds = run(warm, 3 * every)
    assert "stage" not in kinds and 2 <= kinds.count("count") <= 4, kinds
    m.prefetch_adaptive = False  # off: every prefetch stages ahead (a job in the thread)
    kinds = run(warm, 3)
    assert kinds == ["stage"] * 3, kinds
    if cuda:
        torch.cuda.synchronize()
    assert_same(ref, m)
    assert all(len(t._pins) == 0 for t in m.tables)

def hot_stamps(device):
    """Op cache_stage's probe stamps on a warm step whose ids are a few hot ids repeated thousands of times (the
    kernel's read-before-write: most threads of a hot slot only read): afterwards every slot that an id of the
    step hits carries max(its stamp before, the step's stamp), every other slot keeps its own; slots stamped above
    the step's keep theirs (stamps never decrease). Returns the number of hit slots checked."""
    from dynamicemb import _device_stage
    from dynamicemb._uva_store import UvaStoreSpec

    T = 2
    m = make_t("caching", T, slots=16 * BC, device=device, store=UvaStoreSpec())
    m.device_staging = True
    g = torch.Generator().manual_seed(21)
    F, B = T + 1, 4
    bags = []
    for _ in range(F * B):  # per bag: 1500 copies of a hot id, a few copies of others, 40 of a cold range
        bags.append(torch.cat([torch.full((1500,), 7), torch.full((300,), int(torch.randint(0, 5, (1,), generator=g))),
                               torch.randint(0, 90, (40,), generator=g)]))
    off = torch.zeros(F * B + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor([b.numel() for b in bags]), 0, out=off[1:])
    ids, off = torch.cat(bags)[torch.randperm(int(off[-1]), generator=g)].to(device), off.to(device)
    w = torch.randn(B, 4 + 4 + 8, generator=g).to(device)
    for _ in range(2):  # stages every id, then a warm step
        (m(ids, off) * w).sum().backward()
    cached = m._cached
    assert _device_stage.serves(m, ids, cached)
    stamps = [m.tables[t]._stamps for t in cached]
    high = 1 << 40
    for s in stamps:  # random old stamps, some above the coming step's
        s.copy_(torch.where(torch.rand(s.numel(), generator=g) < 0.2, high, torch.randint(0, 5, (s.numel(),),
                                                                                          generator=g)).to(device))
    before = [s.clone() for s in stamps]
    keys = m._table_keys(ids, off, cached)
    stamp = _device_stage.next_stamp()
    failed, _ = _device_stage.stage(m, ids, off, cached, True, stamp)
    assert int(failed[0]) == 0
    checked = 0
    for t, s, b in zip(cached, stamps, before):
        slots, found, _ = m.tables[t].find_slots(keys[t])
        assert bool(found.all()), "the warm step's ids are all cached"
        want = b.clone()
        want[slots] = torch.clamp(b[slots], min=stamp)
        assert torch.equal(s, want), t
        checked += slots.numel()
    return checked


def pending_reuse(device, steps=8, seed=0, order=None):
    """Store slots reused within one staging (op cache_stage, stage_common.h's pending slots): one table whose 31
    ids all live in cache bucket 0 (16 slots, full) and a UvaStore of one bucket of 16 slots (15 rows: one slot
    short of full). Every staged id evicts a victim; the first victim of a staging takes the store's one free slot,
    every later one the slot that an earlier id's row left in the same staging (before that row was copied: the
    staging settles the earlier id's copies first). Trains it (device staging) and an all-HBM module on the same
    batches (repeats, hits and misses in one step) and asserts bit-identical rows, scores and optimizer state after
    every step, the store one slot short of full with no pending key left, and that the first reuse step moved
    3 rows each way. ``order`` (a seed): every step's ids in a random order (both modules), so the CPU twin, which
    stages in batch order, runs other serial orders of the same ids (the CUDA warps take one of them).
    Returns the caching module."""
    from dynamicemb._uva_store import UvaStore
    from table_helpers import keys_in_bucket

    def store(kd, w, dt, cap):
        return UvaStore(kd, w, dt, BC, BC, device=device)

    m = make_t("caching", 1, slots=2 * BC, device=device, store=store)
    m.device_staging = True
    ref = make_t("hbm", 1, device=device)
    t = m.tables[0]
    keys = keys_in_bucket(0, t.capacity() // BC, 2 * BC - 1)
    g = torch.Generator().manual_seed(seed)
    go = None if order is None else torch.Generator().manual_seed(order)

    def stored():
        k = t.store.table.keys.view(torch.int64).cpu()
        assert not bool((k == -(2**63) + 1).any()), "a pending key outlived its staging"
        return [x for x in k.tolist() if x != -(2**63)]

    def both(ids, split, held=BC - 1):
        if go is not None:
            ids = [ids[i] for i in torch.randperm(len(ids), generator=go).tolist()]
        ids_t = torch.tensor(ids, dtype=torch.int64, device=device)
        off = torch.tensor([0, split, len(ids)], dtype=torch.int64, device=device)
        w = torch.randn(1, 8, generator=g).to(device)
        for mod in (m, ref):
            step(mod, ids_t, off, w)
        assert_same(ref, m)
        assert len(stored()) == held

    both(keys[:BC], 5, held=0)  # the cache bucket full of new ids
    both(keys[BC:], 7)  # 15 new ids: 15 victims written back, the store one slot short of full
    s, cached = stored(), [k for k in keys if k not in set(stored())]
    before = m._stage_totals.clone()
    both([s[0], s[1], cached[0], s[0], s[2], s[1]], 3)  # three misses (two repeated) and a hit
    assert (m._stage_totals - before)[0, :2].tolist() == [3, 3]
    for _ in range(steps):  # random repeats over the 31 ids (at most 12 distinct: the bucket holds them)
        idx = torch.randint(0, len(keys), (12,), generator=g).tolist()
        both([keys[i] for i in idx], 6)
    return m


def raw_state(t):
    """A caching table over a UvaStore slot by slot: its cache's keys, digests, scores, rows, counters and stamps,
    its store's keys, digests, scores, rows (host or HBM) and counters."""
    st = t.store.table
    vh = getattr(st, "values_host", None)
    srows = vh if vh is not None and vh.numel() else st.values
    return [t.keys, t.digests, t.scores, t.values, t.counters, t.__dict__["_stamps"], st.keys, st.digests, st.scores,
            srows, st.counters]


def _one_miss_per_bucket(m, g, base=10**6):
    """A batch (B = 1) for make_t(T) whose missing ids are at most one distinct id per cache bucket and table
    (stored or new, repeated 1-3 times), with up to 3 cached ids (hits) per bucket: the staging's outcome does not
    depend on the order of the ids (a store bucket's keys lie in one cache bucket), so its slots are the CPU
    twin's. Ids shuffled over the table's features."""
    from table_helpers import bucket_of

    per_feature = [[] for _ in m.feature_table_map]
    for ti, t in enumerate(m.tables):
        nb = t.capacity() // t.bucket_capacity
        st = t.store.table
        assert (st.capacity() // st.bucket_capacity) % nb == 0  # (a store bucket maps into one cache bucket)
        ck = t.keys.view(torch.int64).cpu().tolist()
        sk = [k for k in st.keys.view(torch.int64).cpu().tolist() if k >= 0]
        stored = [[] for _ in range(nb)]
        for k in sk:
            stored[bucket_of(k, nb)].append(k)
        new = [[] for _ in range(nb)]
        while min(len(x) for x in new) < 2:
            k = base + int(torch.randint(0, 10**6, (1,), generator=g))
            if k not in new[bucket_of(k, nb)]:
                new[bucket_of(k, nb)].append(k)
        ids = []
        for b in range(nb):
            cached = [k for k in ck[b * t.bucket_capacity:(b + 1) * t.bucket_capacity] if k >= 0]
            u = float(torch.rand((), generator=g))
            pool = stored[b] if u < 0.6 and stored[b] else (new[b] if u < 0.85 else [])
            if pool:
                miss = pool[int(torch.randint(0, len(pool), (1,), generator=g))]
                ids += [miss] * int(torch.randint(1, 4, (1,), generator=g))
            for _ in range(int(torch.randint(0, 4, (1,), generator=g))):
                if cached:
                    ids.append(cached[int(torch.randint(0, len(cached), (1,), generator=g))])
        feats = [f for f, tt in enumerate(m.feature_table_map) if tt == ti]
        for k in ids:
            per_feature[feats[int(torch.randint(0, len(feats), (1,), generator=g))]].append(k)
    for f in per_feature:
        perm = torch.randperm(len(f), generator=g).tolist()
        f[:] = [f[i] for i in perm]
    off = torch.tensor([0] + [len(f) for f in per_feature]).cumsum(0)
    return torch.tensor([k for f in per_feature for k in f], dtype=torch.int64), off


def staging_matches_twin(device, rounds=6, seed=0, slot_major=True):
    """Op cache_stage on `device` (CUDA: a warp per missing id) against the CPU twin, slot by slot: a module over
    UvaStores trains a few steps on `device` (full caches, rows in the stores, scores of several steps: ties),
    a CPU module gets its raw state, then both stage the same batches with at most one missing id per cache
    bucket (_one_miss_per_bucket: an outcome independent of the ids' order). After every staging every array of
    every cache and store (keys, digests, scores, rows, counters, stamps) and the rows-moved totals are
    bit-identical: the same slots, victims, store slots and rows (the stores' host rows slot-major, the default, or
    bucket-major: the twin's rows in the same layout)."""
    import dynamicemb
    from dynamicemb import _device_stage
    from dynamicemb._uva_store import UvaStore

    def make(dev):
        m = make_t("caching", 2, slots=8 * BC, device=dev,
                   store=lambda kd, w, dt, cap: UvaStore(kd, w, dt, 64 * BC, BC, device=dev,
                                                         _slot_major=slot_major))
        m.device_staging = True
        return m

    m, twin = make(device), make("cpu")
    for ids, off, w in t_batches(2, 6, seed=seed, hi=400, device=device):
        step(m, ids, off, w)
    dynamicemb.check_errors()
    _device_stage.stage_meta(m)
    _device_stage.stage_meta(twin)  # (the stamps)
    for tm, tt in zip(m.tables, twin.tables):
        for a, b in zip(raw_state(tt), raw_state(tm)):
            a.copy_(b.cpu())
    g = torch.Generator().manual_seed(seed + 1)
    moved = 0
    for r in range(rounds):
        ids, off = _one_miss_per_bucket(m, g)
        stamp = _device_stage.next_stamp()
        totals = [x._stage_totals.cpu().clone() if "_stage_totals" in x.__dict__ else 0 for x in (m, twin)]
        for x in (m, twin):
            _device_stage.stage(x, ids.to(x.device), off.to(x.device), list(x._cached), True, stamp)
        dynamicemb.check_errors()
        for i, (tm, tt) in enumerate(zip(m.tables, twin.tables)):
            for j, (a, b) in enumerate(zip(raw_state(tm), raw_state(tt))):
                assert torch.equal(a.cpu(), b), f"round {r} table {i} array {j}"
        d = [x._stage_totals.cpu() - t0 for x, t0 in zip((m, twin), totals)]
        assert torch.equal(d[0], d[1]), (r, d)
        moved += int(d[0][:, :2].sum())
    assert moved > 0
    return moved


def checkpoint_round_trips(build, tmp, device="cpu"):
    """Every checkpoint form of a module of one storage mode against all-HBM, LRU tables (an incremental dump then
    holds exactly the rows touched since its threshold). ``build(tag)``: a fresh module of the mode, LRU tables,
    ``tag`` naming its store directories. After 5 steps: a state_dict into a fresh module of the mode, the mode's
    full dump into all-HBM and all-HBM's full dump into a fresh module of the mode; after 3 more steps of every
    module: incremental dumps (rows scored >= the op clock at the full dumps) loaded over the full dumps, both ways.
    Every loaded module holds all-HBM's rows, scores and step count, and trains on with bit-identical outputs."""
    pol = ("lru", "lru")
    ref, m = make("hbm", device=device, policies=pol), build("a")
    data = list(batches(10, seed=4, device=device))
    for ids, off, w in data[:5]:
        step(ref, ids, off, w), step(m, ids, off, w)
    assert_same(ref, m)
    sd = build("b")
    sd.load_state_dict(m.state_dict())
    m.dump(str(tmp / "full"))
    ref.dump(str(tmp / "full_ref"))
    clock = min(min(int(t.counters[0]) for t in x.tables) for x in (ref, m))
    from_mode = make("hbm", device=device, policies=pol)
    from_mode.load(str(tmp / "full"))
    to_mode = build("c")
    to_mode.load(str(tmp / "full_ref"))
    live = [m, sd, from_mode, to_mode]
    for x in live[1:]:
        assert_same(ref, x)
    for i, (ids, off, w) in enumerate(data[5:8]):
        o = step(ref, ids, off, w)
        for j, x in enumerate(live):
            assert torch.equal(o, step(x, ids, off, w)), ("after load", i, j)
    m.dump(str(tmp / "inc"), score_threshold=clock)
    ref.dump(str(tmp / "inc_ref"), score_threshold=clock)
    inc_hbm = make("hbm", device=device, policies=pol)
    inc_mode = build("d")
    for x, base, inc in ((inc_hbm, "full", "inc"), (inc_mode, "full_ref", "inc_ref")):
        x.load(str(tmp / base))
        x.load(str(tmp / inc))
        assert_same(ref, x)
    live += [inc_hbm, inc_mode]
    for i, (ids, off, w) in enumerate(data[8:]):
        o = step(ref, ids, off, w)
        for j, x in enumerate(live):
            assert torch.equal(o, step(x, ids, off, w)), ("after incremental load", i, j)
    for x in live:
        assert_same(ref, x)


def disk_restart(tmp, device="cpu"):
    """A caching module over disk stores flushes (``flush_storage``), is dropped, and a module built later over the
    same directories (``DiskStoreSpec(create=False)``) continues bit-identically to an all-HBM module that never
    stopped (rows, scores, op clock from the store; the step count, module state, from a state_dict entry)."""
    import gc

    from dynamicemb._storage import DiskStoreSpec

    ref, m = make("hbm", device=device), make("caching", device=device, stores=disk(tmp))
    data = list(batches(8, seed=5, device=device))
    for ids, off, w in data[:4]:
        step(ref, ids, off, w), step(m, ids, off, w)
    m.flush_storage()
    steps = m.state_dict()["step"].clone()
    del m
    gc.collect()
    m = make("caching", device=device, stores=tuple(DiskStoreSpec(p, create=False) for p in disk(tmp)))
    m.step.copy_(steps)
    assert m.sizes() == ref.sizes()
    for ids, off, w in data[4:]:
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)


# (pooling, row dtype) of pooled_parity: mean and sequence pooling, sum with per-sample weights, 16-bit rows
POOLED = [("mean", torch.float16), ("none", torch.bfloat16), ("sum", torch.bfloat16)]


def pooled_parity(ref, m, pooling, device="cpu", steps=8):
    """Trains all-HBM ``ref`` and ``m`` (another storage mode, the same pooling and row dtype) on the same batches,
    sum pooling with per-sample weights: outputs every step, then rows (16-bit rows: their bytes), scores and the
    step count bit-identical."""
    gen = torch.Generator().manual_seed(21)
    for i, (ids, off, _) in enumerate(batches(steps, seed=11, device=device)):
        psw = torch.rand(ids.numel(), generator=gen).to(device) if pooling == "sum" else None
        outs = [x(ids, off, per_sample_weights=psw) for x in (ref, m)]
        w = torch.randn(outs[0].shape, generator=gen).to(device)
        for o in outs:
            (o.float() * w).sum().backward()
        assert torch.equal(outs[0], outs[1]), i
    assert_same(ref, m)
