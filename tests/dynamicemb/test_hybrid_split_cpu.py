"""The hybrid table's placement (split buckets, docs/dynamicemb_storage.md "hybrid"): every bucket's first hbm_slots
slots have their rows in HBM, the others in host memory; inserts take a bucket's free HBM slots before its host
slots, so host rows hold only the buckets' overflow. On the CPU the twin keeps one buffer and claims in the same
order as the CUDA kernels: these tests check the claim order, the row mapping and parity with all-HBM tables."""

import math
import os
import sys

import pytest
import torch

from dynamicemb._checkpoint import _blank_like
from dynamicemb._hybrid import HybridTable, split_rows
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam
from dynamicemb._table import ScoredHashTable, TableInitializer

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import _contents, assert_same, batches, check_split_placement, make, step  # noqa: E402
from table_helpers import bucket_of  # noqa: E402

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

INIT = TableInitializer("uniform", low=-1.0, high=1.0, seed=9)


@pytest.mark.parametrize("B,h", [(16, 0), (16, 6), (16, 16), (32, 31), (128, 64)])
def test_split_rows_mapping(B, h):
    """split_rows against the rule written out per slot: slot b * B + j is HBM row b * h + j (j < h), else host
    row b * (B - h) + j - h; each buffer's rows are used once and ascend with the slots."""
    nb = 5
    slots = torch.arange(nb * B)
    host, row = split_rows(slots, h, B)
    for s in range(nb * B):
        b, j = divmod(s, B)
        assert bool(host[s]) == (j >= h)
        assert int(row[s]) == (b * (B - h) + j - h if j >= h else b * h + j)
    assert row[~host].tolist() == list(range(nb * h))
    assert row[host].tolist() == list(range(nb * (B - h)))


class _SplitOnCpu(HybridTable):
    """A CPU HybridTable that keeps its rows in two buffers as a CUDA one does (split: True), for the host-side
    row access (all_values, _load_values, _read_rows, _write_rows); table ops are not run on it."""

    split = True


@pytest.mark.parametrize("B,h", [(16, 0), (16, 6), (32, 31), (128, 64)])
def test_split_rows_slot_major_mapping(B, h):
    """split_rows with host_run = nb (the private slot-major host rows, table_types.h host_row_of): slot b * B + j
    is host row (j - h) * nb + b (j >= h), HBM rows as bucket-major; host slot j of every bucket is one run of nb
    rows, and the host rows are used once each."""
    nb = 5
    slots = torch.arange(nb * B)
    host, row = split_rows(slots, h, B, host_run=nb)
    for s in range(nb * B):
        b, j = divmod(s, B)
        assert bool(host[s]) == (j >= h)
        assert int(row[s]) == ((j - h) * nb + b if j >= h else b * h + j)
    assert sorted(row[host].tolist()) == list(range(nb * (B - h)))
    assert torch.equal(row[~host], split_rows(slots, h, B)[1][~host])


@pytest.mark.parametrize("slot_major", [False, True], ids=["bucket_major", "slot_major"])
@pytest.mark.parametrize("h", [0, 5, 16])
def test_hybrid_host_side_rows_follow_the_split(h, slot_major):
    """state_dict values (all_values), loads (_load_values) and the snapshot / checkpoint row access (_read_rows /
    _write_rows) of a table whose rows are in two buffers put every slot's row where split_rows says (host rows
    bucket-major, or slot-major: a (B - h, nb, dim) host buffer)."""
    B, nb, dim = 16, 6, 3
    t = _SplitOnCpu(nb * B, dim, bucket_capacity=B, hbm_rows=h * nb)
    x = torch.randn(nb * B, dim)
    nan = float("nan")
    shape = (B - h, nb, dim) if slot_major else ((B - h) * nb, dim)
    s = {"values": torch.full((h * nb, dim), nan), "values_host": torch.full(shape, nan)}
    t._load_values(s, x)
    host, row = split_rows(torch.arange(nb * B), h, B, nb if slot_major else 0)
    flat = s["values_host"].view(-1, dim)
    assert torch.equal(s["values"][row[~host]], x[~host]) and torch.equal(flat[row[host]], x[host])
    t.values, t.values_host = s["values"], s["values_host"]
    assert t.host_run == (nb if slot_major else 0)
    assert torch.equal(t.all_values(), x)
    pick = torch.randperm(nb * B)[:40]
    assert torch.equal(t._read_rows(pick), x[pick])
    r = torch.randn(40, dim)
    t._write_rows(pick, r)
    x[pick] = r
    assert torch.equal(t.all_values(), x)


def test_hybrid_rows_rounded_per_bucket():
    t = HybridTable(32 * 16, 4, bucket_capacity=16, hbm_rows=5 * 32 + 7)
    assert (t.hbm_slots, t.hbm_rows) == (5, 160)
    assert HybridTable(32 * 16, 4, bucket_capacity=16, hbm_rows=31).hbm_slots == 0
    with pytest.raises(ValueError, match=r"hbm_rows: expected an int in \[0, 512\], got 513"):
        HybridTable(32 * 16, 4, bucket_capacity=16, hbm_rows=513)


def _bucket_counts(t, keys):
    nb = t.capacity() // t.bucket_capacity
    c = torch.zeros(nb, dtype=torch.int64)
    for k in keys.tolist():
        c[bucket_of(k & ((1 << 64) - 1), nb)] += 1
    return c


def test_hybrid_split_fills_hbm_first_cpu():
    """Inserts (find_or_insert, insert_or_assign) fill each bucket's HBM slots first: a bucket has host rows only
    when its HBM slots are full, and as many as its overflow; the contents equal an all-HBM table's after every
    batch; keys erased from HBM slots leave slots that later inserts of the bucket take before any host slot."""
    B, nb, h, dim = 16, 32, 5, 4
    kw = dict(bucket_capacity=B, initializer=INIT)
    a, b = ScoredHashTable(nb * B, dim, **kw), HybridTable(nb * B, dim, hbm_rows=h * nb, **kw)
    g = torch.Generator().manual_seed(4)
    keys = torch.unique(torch.randint(-(1 << 62), 1 << 62, (8 * nb,), generator=g))
    keys = keys[torch.randperm(keys.numel(), generator=g)]
    for i, off in enumerate(range(0, keys.numel(), 24)):
        k = keys[off:off + 24]
        if i % 2:
            v = torch.randn(k.numel(), dim, generator=g)
            assert torch.equal(a.insert_or_assign(k, v), b.insert_or_assign(k, v))
        else:
            ra, rb = a.find_or_insert(k), b.find_or_insert(k)
            assert torch.equal(ra.values, rb.values) and torch.equal(ra.stats, rb.stats)
        check_split_placement(b)
        for x, y in zip(_contents(a), _contents(b)):
            assert torch.equal(x, y), i
    n = _bucket_counts(b, keys)
    assert int(n.max()) <= B  # no bucket overflowed the table
    host = check_split_placement(b)
    assert host == int((n - h).clamp(min=0).sum()) > 0
    # every key in its home bucket, as in the all-HBM table
    sa, sb = a.find_slots(keys).slots, b.find_slots(keys).slots
    assert torch.equal(sa // B, sb // B)
    # erase the keys of some HBM slots; new keys of a bucket take its free HBM slots before any host slot
    in_hbm = keys[(sb % B < h) & (torch.arange(keys.numel()) % 3 == 0)]
    assert int(b.erase(in_hbm)) == in_hbm.numel() > 0
    used = b.keys.view(torch.int64).view(nb, B) != -(1 << 63)
    free_hbm, free_all = h - used[:, :h].sum(1), B - used.sum(1)
    new = torch.randint(1 << 62, (1 << 62) + (1 << 40), (nb,), generator=g)
    c = _bucket_counts(b, new)
    assert bool((c <= free_all).all())  # no eviction: every new key gets a free slot
    b.find_or_insert(new)
    s = b.find_slots(new).slots
    assert bool((s >= 0).all())
    assert int((s % B < h).sum()) == int(torch.minimum(c, free_hbm).sum()) > 0


def _host_share_model(n_keys, nb, B, h):
    """E[max(0, min(N, B) - h)] / E[min(N, B)] for a bucket load N ~ Binomial(n_keys, 1 / nb): the share of stored
    rows in host slots under the split (docs/dynamicemb_storage.md; a bucket stores at most B keys)."""
    p = 1.0 / nb
    host = stored = 0.0
    for k in range(0, min(n_keys, 4 * B) + 1):
        lp = (math.lgamma(n_keys + 1) - math.lgamma(k + 1) - math.lgamma(n_keys - k + 1) + k * math.log(p)
              + (n_keys - k) * math.log1p(-p))
        pk = math.exp(lp)
        stored += pk * min(k, B)
        host += pk * max(0, min(k, B) - h)
    return host / stored


@pytest.mark.parametrize("load,expect", [(0.5, 0.049), (0.75, 0.33)])
def test_hybrid_host_share_matches_model(load, expect):
    """At HKV's shape (128-slot buckets, half of each in HBM) the share of stored rows in host slots is the
    buckets' overflow: ~5 % at load factor 0.5 and ~33 % at 0.75 (the model; before split buckets: 50 %; at 1.0
    the model gives 48 %)."""
    B, nb = 128, 256
    assert abs(_host_share_model(B * nb, nb, B, B // 2) - 0.48) < 0.01
    t = HybridTable(B * nb, 1, bucket_capacity=B, hbm_rows=B * nb // 2)
    g = torch.Generator().manual_seed(2)
    keys = torch.unique(torch.randint(-(1 << 62), 1 << 62, (int(load * B * nb),), generator=g))
    t.find_or_insert(keys)
    assert int(t.size()) == keys.numel()  # no bucket overflowed at these loads
    share = check_split_placement(t) / keys.numel()
    model = _host_share_model(keys.numel(), nb, B, B // 2)
    assert abs(model - expect) < 0.01
    assert abs(share - model) < 0.02, (share, model)


@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_hybrid_module_split_cpu(opt):
    """A module's hybrid tables (2 of 16 slots per bucket in HBM) train as all-HBM tables, with host rows."""
    ref, m = make("hbm", opt), make("hybrid", opt, budget_rows=128)
    assert all(t.hbm_slots == 2 for t in m.tables)
    for ids, off, w in batches(8):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)
    for t in m.tables:
        assert check_split_placement(t) > 0


@pytest.mark.parametrize("h", [0, 5])
def test_slot_major_cpu_twin_follows_host_run(h):
    """The CPU twin of a slot-major table keeps its rows in two buffers as the CUDA table does: ``values`` (h * nb,
    dim) and host rows (B - h, nb, dim), each slot's row at table_types.h host_row_of (split_rows with host_run =
    nb), so that raw states compare bit for bit across devices; it claims a bucket's host slots lowest first
    (claim_position), so with no erase a bucket's host keys fill its first host slots. Its ops (find_or_insert,
    insert_or_assign, evictions by score, find, erase, export, state_dict) hold what a one-buffer twin holds;
    _set_host_slot_major relays it to one buffer and back."""
    B, nb, dim = 16, 8, 3
    kw = dict(bucket_capacity=B, initializer=INIT, hbm_rows=h * nb)
    one, sm = HybridTable(nb * B, dim, **kw), HybridTable(nb * B, dim, _slot_major=True, **kw)
    assert one.values_host is None and one.values.shape == (nb * B, dim)
    assert sm.values.shape == (h * nb, dim) and sm.values_host.shape == (B - h, nb, dim) and sm.host_run == nb
    g = torch.Generator().manual_seed(7 + h)
    for i in range(6):  # past the capacity: full buckets evict (the least score: no slot position)
        k = torch.unique(torch.randint(-(1 << 62), 1 << 62, (40,), generator=g))
        if i % 2:
            v = torch.randn(k.numel(), dim, generator=g)
            assert torch.equal(one.insert_or_assign(k, v), sm.insert_or_assign(k, v))
            slots = sm.find_slots(k).slots
            host, row = split_rows(slots.clamp(min=0), h, B, nb)
            ok = (slots >= 0) & host
            assert torch.equal(sm.values_host.view(-1, dim)[row[ok]], v[ok])  # written at host_row_of
            assert torch.equal(sm.values[row[(slots >= 0) & ~host]], v[(slots >= 0) & ~host])
        else:
            ra, rb = one.find_or_insert(k), sm.find_or_insert(k)
            assert torch.equal(ra.values, rb.values) and torch.equal(ra.stats, rb.stats)
        if i < 2:  # no eviction yet: a bucket's host keys are its first host slots
            used = (sm.keys.view(torch.int64) != -(1 << 63)).view(nb, B)[:, h:]
            assert torch.equal(used, torch.arange(B - h) < used.sum(1, keepdim=True))
        for x, y in zip(_contents(one), _contents(sm)):
            assert torch.equal(x, y), i
    live = one.keys.view(torch.int64)[one.keys.view(torch.int64) != -(1 << 63)]
    assert torch.equal(one.find(live).values, sm.find(live).values)
    e = live[::3].contiguous()
    assert int(one.erase(e)) == int(sm.erase(e)) == e.numel()
    x, y = one.export_batch(0, nb * B), sm.export_batch(0, nb * B)
    o1, o2 = torch.argsort(x.keys[: int(x.count)]), torch.argsort(y.keys[: int(y.count)])
    assert torch.equal(x.values[o1], y.values[o2]) and torch.equal(x.scores[o1], y.scores[o2])
    ref = sm.all_values().clone()
    c = HybridTable(nb * B, dim, _slot_major=True, **kw)
    c.load_state_dict(sm.state_dict())
    assert c.host_run == nb and torch.equal(c.all_values(), ref) and torch.equal(c.values_host, sm.values_host)
    assert _blank_like(sm, sm.capacity()).host_run == nb  # a checkpoint load's new table keeps the layout
    sm._set_host_slot_major(False)
    assert sm.values_host is None and torch.equal(sm.values, ref)
    sm._set_host_slot_major(True)
    assert sm.host_run == nb and torch.equal(sm.all_values(), ref)
