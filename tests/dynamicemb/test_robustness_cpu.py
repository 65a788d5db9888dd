"""Robustness of dynamicemb on CPU (issue 29, item 3): argument and checkpoint validation, empty batches,
refused inserts, resuming from checkpoints under growth and eviction, atomic dumps and concurrent use."""

import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import keys_in_bucket  # noqa: E402

from dynamicemb._batched import BatchedDynamicEmbeddingTables, RefusedInsertError  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._optimizers import SGD, Adam  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


def make(cap=128, init_cap=None, policy="lru", opt=None, on_refused="warn", dim=4, grow=0.75, seed=0):
    opts = [DynamicEmbTableOptions(dim=dim, max_capacity=cap, init_capacity=init_cap, bucket_capacity=16,
                                   score_policy=policy, on_refused=on_refused, grow_load_factor=grow),
            DynamicEmbTableOptions(dim=2, max_capacity=64, bucket_capacity=16, on_refused=on_refused)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1], pooling="sum", optimizer=opt or Adam(lr=0.05),
                                         table_names=["user", "item"])


def batch(gen, hi, n=40, dims=(4, 2)):
    ids = torch.randint(0, hi, (n,), generator=gen)
    offsets = torch.tensor([0, n // 4, n // 2, 3 * n // 4, n])  # F=2, B=2
    return ids, offsets, torch.randn(2, sum(dims), generator=gen)


def step(m, b):
    ids, offsets, g = b
    (m(ids, offsets) * g).sum().backward()


def train(m, steps, seed, hi):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        step(m, batch(gen, hi, dims=(m.dims[0], m.dims[1])))


def contents(table):
    """Sorted (keys, rows, scores) of a table."""
    k, v, s = table.items()
    o = torch.argsort(k.view(torch.int64))
    return k[o], v[o], s[o]


def same(a, b, slots=False):
    for ta, tb in zip(a.tables, b.tables):
        if slots:
            if not (torch.equal(ta.keys, tb.keys) and torch.equal(ta.values, tb.values)
                    and torch.equal(ta.scores, tb.scores) and torch.equal(ta.counters, tb.counters)):
                return False
        elif not all(torch.equal(x, y) for x, y in zip(contents(ta), contents(tb))):
            return False
    return True


def state(m):
    return {k: v.clone() for k, v in m.state_dict().items() if isinstance(v, torch.Tensor)}


def unchanged(m, before):
    now = state(m)
    return now.keys() == before.keys() and all(torch.equal(now[k], v) for k, v in before.items())


# ---------------------------------------------------------------------- learning rate and buffers
@pytest.mark.parametrize("lr, exc", [(math.nan, ValueError), (math.inf, ValueError), (-0.5, ValueError),
                                     (True, TypeError), ("0.1", TypeError)])
def test_set_learning_rate_refuses_bad_values(lr, exc):
    m = make()
    train(m, 2, 0, 300)
    before = state(m)
    with pytest.raises(exc, match=r"lr: expected a finite number >= 0, got"):
        m.set_learning_rate(lr)
    assert unchanged(m, before) and m.optimizer.lr == 0.05
    train(m, 1, 1, 300)
    assert all(bool(torch.isfinite(t.values).all()) for t in m.tables)


@pytest.mark.parametrize("entry, value, match", [
    ("learning_rate", math.nan, r"learning_rate: expected a finite number >= 0, got nan"),
    ("learning_rate", -1e-3, r"learning_rate: expected a finite number >= 0, got -0.001"),
    ("step", -3.0, r"step: expected a finite number >= 0, got -3.0"),
    ("step", math.inf, r"step: expected a finite number >= 0, got inf"),
    ("refused_count", [-1, 0], r"refused_count: expected counts >= 0, got \[-1, 0\]"),
])
def test_load_state_dict_refuses_bad_buffers(entry, value, match):
    src, dst = make(), make()
    train(src, 2, 0, 300)
    train(dst, 1, 5, 300)
    sd = dict(src.state_dict())
    sd[entry] = torch.tensor(value, dtype=sd[entry].dtype)
    before = state(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(sd)
    assert unchanged(dst, before)


# ---------------------------------------------------------------------- arguments
def test_feature_table_map_must_be_ints():
    o = [DynamicEmbTableOptions(dim=2, max_capacity=64, bucket_capacity=16)] * 2
    for bad in ([0.9, 1], [True, 0], ["0", 1]):
        with pytest.raises(TypeError, match=r"feature_table_map: expected a sequence of ints, got"):
            BatchedDynamicEmbeddingTables(o, feature_table_map=bad)
    m = BatchedDynamicEmbeddingTables(o, feature_table_map=[torch.tensor(1), 0])
    assert m.feature_table_map == [1, 0]


def test_unknown_state_dict_key():
    src, dst = make(), make()
    train(src, 2, 0, 300)
    train(dst, 1, 5, 300)
    sd = dict(src.state_dict())
    sd["bogus"] = torch.randn(3)
    before = state(dst)
    with pytest.raises(RuntimeError, match=r"unexpected entry 'bogus'"):
        dst.load_state_dict(sd)
    assert unchanged(dst, before)
    r = dst.load_state_dict(sd, strict=False)
    assert r.unexpected_keys == ["bogus"] and same(dst, src)


@pytest.mark.parametrize("table, exc", [(-1, ValueError), (2, ValueError), (5, ValueError), (True, TypeError),
                                        (0.0, TypeError)])
def test_rows_table_index(table, exc):
    m = make()
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 1000, (5,), generator=gen)
    w = torch.randn(5, 2, generator=gen)
    before = state(m)
    with pytest.raises(exc, match=r"table: expected an int in \[0, 2\), got"):
        m.set_rows(table, ids, w)
    with pytest.raises(exc, match=r"table: expected an int in \[0, 2\), got"):
        m.get_rows(table, ids)
    assert unchanged(m, before)


# ---------------------------------------------------------------------- checkpoint integrity
def _corrupt_swap_buckets(sd, t):
    k = sd[f"{t}.keys"].clone()
    live = (k != -(2**63)).nonzero().squeeze(1)
    a = live[0]
    b = live[(live // 16 != a // 16).nonzero()[0, 0]]  # a live slot of another bucket
    k[a], k[b] = k[b].clone(), k[a].clone()
    sd[f"{t}.keys"] = k


def _corrupt_size(sd, t):
    c = sd[f"{t}.counters"].clone()
    c[1] = int(c[1]) // 3
    sd[f"{t}.counters"] = c


def _corrupt_digest(sd, t):
    d = sd[f"{t}.digests"].clone()
    live = (sd[f"{t}.keys"] != -(2**63)).nonzero().squeeze(1)
    d[live[:3]] ^= 0x5A
    sd[f"{t}.digests"] = d


def _corrupt_duplicate(sd, t):
    k = sd[f"{t}.keys"].clone()
    live = (k != -(2**63)).nonzero().squeeze(1)
    same_bucket = live[live // 16 == live[0] // 16]
    k[same_bucket[1]] = k[same_bucket[0]]
    sd[f"{t}.keys"] = k
    d = sd[f"{t}.digests"].clone()
    d[same_bucket[1]] = d[same_bucket[0]]
    sd[f"{t}.digests"] = d


@pytest.mark.parametrize("corrupt, match", [
    (_corrupt_swap_buckets, r"item: keys: expected every key in its home bucket, got 2 keys in another bucket"),
    (_corrupt_size, r"item: counters: expected a size \(entry 1\) equal to the \d+ stored keys, got \d+"),
    (_corrupt_digest, r"item: digests: expected the digest of each stored key's hash, got 3 mismatching slots"),
    (_corrupt_duplicate, r"item: keys: expected each key stored once, got 1 duplicates"),
], ids=["buckets", "size", "digests", "duplicate"])
def test_state_dict_integrity_checked(corrupt, match):
    src, dst = make(), make()
    train(src, 4, 0, 300)
    train(dst, 1, 5, 300)
    sd = dict(src.state_dict())
    corrupt(sd, "item")
    before = state(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(sd)
    assert unchanged(dst, before)
    # the table's own load_state_dict checks the same
    t = dst.tables[1]
    ts = {k[len("item."):]: v for k, v in sd.items() if k.startswith("item.")}
    with pytest.raises(ValueError, match=match[len("item: "):]):
        t.load_state_dict(ts)


# ---------------------------------------------------------------------- empty batches
def test_empty_batches_are_no_ops():
    m = make()
    train(m, 3, 0, 300)
    t = m.tables[0]
    before = state(m)
    k0 = torch.empty(0, dtype=torch.int64)
    v0 = torch.empty(0, t.value_dim)
    zeros = torch.zeros(5, dtype=torch.int64)
    assert torch.equal(t.insert_or_assign(k0, v0), zeros)
    r = t.insert_and_evict(k0, v0)
    assert r.evicted_keys.shape == (0,) and r.evicted_values.shape == (0, t.value_dim) and int(r.num_evicted) == 0
    assert torch.equal(r.stats, zeros)
    assert torch.equal(t.assign(k0, v0), zeros)
    assert torch.equal(t.accum_or_assign(k0, v0, torch.empty(0, dtype=torch.bool)), zeros)
    assert torch.equal(t.assign_scores(k0), zeros)
    fr = t.find_or_insert(k0)
    assert fr.values.shape == (0, t.value_dim) and fr.found.shape == (0,) and torch.equal(fr.stats, zeros)
    assert t.find(k0).values.shape == (0, t.value_dim) and int(t.erase(k0)) == 0
    m.set_rows(0, k0, torch.empty(0, 4))
    w, st, found = m.get_rows(0, k0)
    assert w.shape == (0, 4) and found.shape == (0,)
    now = state(m)
    # keys, digests, rows, scores and sizes unchanged (each op still counts on the op clock, entry 0)
    for key, v in before.items():
        if key.endswith(".counters"):
            assert torch.equal(now[key][1:], v[1:]), key
        else:
            assert torch.equal(now[key], v), key
    # and the table works on afterwards
    gen = torch.Generator().manual_seed(11)
    keys = torch.randint(10**6, 2 * 10**6, (7,), generator=gen)
    rows = torch.randn(7, t.value_dim, generator=gen)
    t.insert_or_assign(keys, rows)
    assert torch.equal(t.find(keys).values, rows)


# ---------------------------------------------------------------------- resuming from checkpoints
def _growing():
    return make(cap=512, init_cap=32, policy="lru", grow=0.5)


@pytest.mark.parametrize("how", ["state_dict", "dump"])
def test_resume_just_before_growth(tmp_path, how):
    """A checkpoint taken when the next step grows the table: the restored module grows at the same step and keeps
    the same ids and rows (the host size view is refreshed on load)."""
    src = _growing()
    gen = torch.Generator().manual_seed(21)
    step(src, batch(gen, 10**6, n=40))
    assert src.sizes()[0] > 16 and src.capacities()[0] == 32  # above 0.5 * 32: the next step grows
    dst = _growing()
    if how == "state_dict":
        dst.load_state_dict(src.state_dict())
    else:
        src.dump(str(tmp_path / "ck"))
        dst.load(str(tmp_path / "ck"))
    for _ in range(3):
        b = batch(gen, 10**6, n=40)
        step(src, b)
        step(dst, b)
        assert dst.capacities() == src.capacities() and dst.sizes() == src.sizes()
        assert same(src, dst)
    assert src.capacities()[0] > 32


def _pressured():
    return make(cap=64, policy="lru", opt=SGD(lr=0.1))  # 64 + 64 slots for ids drawn from 400: constant eviction


def train_both_alike(src, dst, seed, steps, check_every_step):
    """Trains src and dst on the same `steps` batches of ids from 400; they must be the same at the end, and with
    check_every_step after every step."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        b = batch(gen, 400)
        step(src, b)
        step(dst, b)
        assert not check_every_step or same(src, dst, slots=True)
    assert same(src, dst, slots=True)


def test_dump_load_under_lru_pressure_resumes_identically(tmp_path):
    src = _pressured()
    train(src, 6, 0, 400)
    assert src.sizes()[0] >= 60
    src.dump(str(tmp_path / "ck"))
    dst = _pressured()
    train(dst, 2, 9, 400)  # other content first: the load replaces it
    dst.load(str(tmp_path / "ck"))
    assert same(src, dst, slots=True)
    train_both_alike(src, dst, 4, 4, check_every_step=True)


def test_full_plus_incremental_equals_source_under_eviction(tmp_path):
    src = _pressured()
    train(src, 5, 0, 400)
    src.dump(str(tmp_path / "full"))
    base_clock = min(int(t.counters[0]) for t in src.tables)
    before = {int(k) for k in src.tables[0].items()[0]}
    train(src, 3, 1, 400)  # evicts part of the base
    after = {int(k) for k in src.tables[0].items()[0]}
    assert before - after, "the test needs keys evicted since the base"
    src.dump(str(tmp_path / "inc"), score_threshold=base_clock + 1)
    dst = _pressured()
    dst.load(str(tmp_path / "full"))
    dst.load(str(tmp_path / "inc"))
    assert same(src, dst, slots=True)
    assert {int(k) for k in dst.tables[0].items()[0]} == after
    train_both_alike(src, dst, 8, 3, check_every_step=False)
    # applied to another base, the live keys cannot all be found: refused, module unchanged
    other = _pressured()
    train(other, 2, 7, 400)
    snap = state(other)
    with pytest.raises(ValueError, match=r"expected every live key in the dump or in the table it is applied to"):
        other.load(str(tmp_path / "inc"))
    assert unchanged(other, snap)


def test_failed_redump_keeps_previous_dump(tmp_path, monkeypatch):
    from dynamicemb import _checkpoint

    path = str(tmp_path / "ck")
    src = _pressured()
    train(src, 3, 0, 400)
    src.dump(path)
    good = _pressured()
    good.load(path)
    train(src, 2, 1, 400)
    real, calls = _checkpoint._tensor_bytes, []

    def failing(t):
        calls.append(1)
        if len(calls) == 5:  # midway: after the first table's keys/values/scores/slots
            raise OSError("disk full (injected)")
        return real(t)

    monkeypatch.setattr(_checkpoint, "_tensor_bytes", failing)
    with pytest.raises(OSError, match="injected"):
        src.dump(path)
    monkeypatch.undo()
    dst = _pressured()
    dst.load(path)
    assert same(dst, good, slots=True)
    # the failed generation left no files; a successful re-dump replaces the old generation's files
    n_files = len(os.listdir(path))
    src.dump(path)
    assert len(os.listdir(path)) == n_files
    dst.load(path)
    assert same(dst, src, slots=True)


# ---------------------------------------------------------------------- refused inserts with on_refused="error"
def _hot_bucket_module():
    """One table of 2 buckets (LFU): bucket 0 full of ids seen 4 times; returns (module, hot ids, a new id of
    bucket 0 (refused), a new id of bucket 1 (fits))."""
    o = DynamicEmbTableOptions(dim=2, max_capacity=32, bucket_capacity=16, score_policy="lfu", on_refused="error")
    m = BatchedDynamicEmbeddingTables([o], pooling="sum", optimizer=SGD(lr=0.5))
    gen = torch.Generator().manual_seed(5)
    start = int(torch.randint(1, 10**6, (1,), generator=gen))
    hot = torch.tensor(keys_in_bucket(0, 2, 17, start=start))
    m(hot[:16].repeat(4), torch.tensor([0, 64])).sum().backward()
    return m, hot[:16], int(hot[16]), keys_in_bucket(1, 2, 1, start=start)[0]


def test_refused_set_rows_leaves_module_unchanged():
    m, hot, refused_id, fits_id = _hot_bucket_module()
    before = state(m)
    gen = torch.Generator().manual_seed(6)
    ids = torch.tensor([int(hot[3]), fits_id, refused_id])
    with pytest.raises(RefusedInsertError, match=r"1 of 3 ids refused by table 0 .* the table is unchanged"):
        m.set_rows(0, ids, torch.randn(3, 2, generator=gen))
    assert unchanged(m, before)


def test_refused_forward_contract():
    """The documented partial effect: the insert ran (other ids stored with their initial rows, size, scores, op
    clock and refused_count advanced), no row was updated and step is unchanged."""
    m, hot, refused_id, fits_id = _hot_bucket_module()
    t = m.tables[0]
    rows_hot = t.find(hot).values.clone()
    step_before, clock = float(m.step), int(t.counters[0])
    with pytest.raises(RefusedInsertError, match=r"table 't0': 1 inserts refused"):
        m(torch.tensor([int(hot[0]), fits_id, refused_id]), torch.tensor([0, 3])).sum().backward()
    assert m.sizes() == [17] and int(m.refused_count[0]) == 1
    assert int(t.counters[0]) == clock + 1 and float(m.step) == step_before
    assert bool(t.contains(torch.tensor([fits_id]))[0]) and not bool(t.contains(torch.tensor([refused_id]))[0])
    assert torch.equal(t.find(hot).values, rows_hot)  # no update (hot[0] only got its LFU count)
    from dynamicemb._batched import _init_rows

    w, _, _ = m.get_rows(0, torch.tensor([fits_id]))  # its initial row, not updated
    assert torch.allclose(w, _init_rows(m._train_init[0], torch.tensor([fits_id]), clock + 1, 2))


# ---------------------------------------------------------------------- threads
def run_in_threads(work, n=2):
    """Runs work(0) .. work(n - 1) on n threads at once; returns the exceptions they raised."""
    import threading

    errors = []

    def guarded(part):
        try:
            work(part)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    th = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    [x.start() for x in th]
    [x.join() for x in th]
    return errors


def test_threads_writing_one_table():
    from dynamicemb._table import ScoredHashTable

    t = ScoredHashTable(1 << 13, 8, max_capacity=1 << 15, device="cpu")
    gen = torch.Generator().manual_seed(12)
    keys = torch.randperm(10**7, generator=gen)[:8000] + 1
    rows = torch.randn(8000, 8, generator=gen)

    def work(part):
        for c in range(0, 4000, 400):
            k = keys[part * 4000 + c: part * 4000 + c + 400]
            t.insert_or_assign(k, rows[part * 4000 + c: part * 4000 + c + 400])
            t.find(k)
            if part == 1 and c in (400, 1200):
                t.grow()  # while the other thread inserts

    assert not run_in_threads(work)
    assert t.size() == 8000 and int(t.contains(keys).sum()) == 8000
    assert int((t.keys.view(torch.int64) != -(2**63)).sum()) == t.size()  # the size counter counts the keys
    assert torch.equal(t.find(keys).values, rows)


def test_threads_training_one_growing_module():
    # 128-slot buckets at load <= 0.5: no bucket overflows, so every id seen must be stored
    o = DynamicEmbTableOptions(dim=4, max_capacity=1 << 15, init_capacity=256, bucket_capacity=128,
                               grow_load_factor=0.5)
    m = BatchedDynamicEmbeddingTables([o], pooling="sum", optimizer=SGD(lr=0.1))
    seen = [set(), set()]

    def work(part):
        gen = torch.Generator().manual_seed(30 + part)
        for _ in range(40):
            ids = torch.randint(0, 10**6, (48,), generator=gen) * 2 + part  # disjoint id sets
            seen[part].update(ids.tolist())
            (m(ids, torch.tensor([0, 48])) * torch.randn(1, 4, generator=gen)).sum().backward()

    assert not run_in_threads(work)
    t = m.tables[0]
    ids = torch.tensor(sorted(seen[0] | seen[1]))
    assert m.capacities()[0] > 256 and int(m.refused_count[0]) == 0
    assert int(t.contains(ids).sum()) == ids.numel() == m.sizes()[0]
    assert int((t.keys.view(torch.int64) != -(2**63)).sum()) == t.size()  # the size counter counts the keys
