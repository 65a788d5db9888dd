"""The hybrid table's split buckets on CUDA (skip without a GPU): the table kernels (next_free_candidate) and the
step's insert kernel claim a bucket's HBM slots first, as the CPU twin does; the rows sit where table_row says
(HBM row b * hbm_slots + j, host row b * (B - hbm_slots) + j - hbm_slots, or (j - hbm_slots) * num_buckets + b in
the private slot-major layout); results equal all-HBM tables'."""

import os
import sys

import pytest
import torch

from dynamicemb._hybrid import HybridTable, split_rows
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam
from dynamicemb._table import ScoredHashTable, TableInitializer

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import (_contents, _slots, assert_same, batches, check_split_placement, make,  # noqa: E402
                             step)
from table_helpers import key_tensor, one_per_bucket  # noqa: E402

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

INIT = TableInitializer("uniform", low=-1.0, high=1.0, seed=9)


@pytest.mark.parametrize("slot_major", [False, True], ids=["bucket_major", "slot_major"])
@pytest.mark.parametrize("hs", [0, 5, 64, 127])
def test_hybrid_split_matches_cpu_twin(hs, slot_major):
    """Batches of at most one key per bucket (no contention: the CUDA table has no choice that thread order could
    decide): the CUDA hybrid table and its CPU twin agree slot for slot (the claim order; slot-major host slots
    lowest first) after every op, its two buffers hold each slot's row where table_row puts it (host rows
    bucket-major, or slot-major: the private layout, host row (j - hs) * nb + b; the twin's buffers bit-identical),
    and _read_rows / _write_rows go through the same map."""
    B, nb, dim = 128, 16, 8
    kw = dict(bucket_capacity=B, initializer=INIT, hbm_rows=hs * nb)
    c = HybridTable(nb * B, dim, device="cpu", _slot_major=slot_major, **kw)  # slot-major: two buffers, first fit
    g = HybridTable(nb * B, dim, device="cuda", _slot_major=slot_major, **kw)
    assert (g.values_host is not None) and g.values.shape[0] == hs * nb
    assert g.host_run == (nb if slot_major else 0)
    gen = torch.Generator().manual_seed(hs)
    pool = torch.randint(1, 1 << 62, (4000,), generator=gen).tolist()
    for i in range(200):
        idx = torch.randint(0, len(pool), (4 * nb,), generator=gen).tolist()
        keys = key_tensor(one_per_bucket([pool[j] for j in idx], nb), torch.int64)
        v = torch.randn(keys.numel(), dim, generator=gen)
        op = ("find_or_insert", "insert_or_assign", "assign", "erase")[i % 4] if i >= 120 else "find_or_insert"
        for t, d in ((c, "cpu"), (g, "cuda")):
            if op == "erase":
                t.erase(keys[:2].to(d))
            elif op == "find_or_insert":
                t.find_or_insert(keys.to(d))
            else:
                getattr(t, op)(keys.to(d), v.to(d))
        if i % 20 == 19 or i == 119:
            for x, y in zip(_slots(c), _slots(g)):
                assert torch.equal(x, y), (i, op)
    # the buffers: slot s of bucket b at HBM row b * hs + j or host row b * (B - hs) + j - hs (slot-major:
    # (j - hs) * nb + b)
    slots = torch.arange(nb * B)
    host, row = split_rows(slots, hs, B, g.host_run)
    b, j = slots // B, slots % B
    assert torch.equal(row[host], ((j - hs) * nb + b if slot_major else b * (B - hs) + j - hs)[host])
    every = c.all_values()  # the CPU twin's rows, in slot order
    if slot_major:  # the twin's two buffers hold the same bits as the CUDA table's
        assert torch.equal(g.values.cpu(), c.values) and torch.equal(g.values_host, c.values_host)
    assert torch.equal(g.values.cpu(), every[slots[~host]][torch.argsort(row[~host])])
    assert torch.equal(g.values_host.view(-1, dim), every[slots[host]][torch.argsort(row[host])])
    pick = torch.randperm(nb * B, generator=gen)[:300].cuda()
    assert torch.equal(g._read_rows(pick).cpu(), every[pick.cpu()])
    new = torch.randn(300, dim, generator=gen)
    g._write_rows(pick, new.cuda())
    assert torch.equal(g.all_values()[pick.cpu()], new)


def test_hybrid_split_fills_hbm_first_cuda():
    """Large batches (contention inside buckets) onto a table with 32 of 128 slots per bucket in HBM: every bucket
    has host rows only once its HBM slots are full; the stored rows equal an all-HBM table's."""
    B, nb, dim = 128, 64, 16
    kw = dict(bucket_capacity=B, initializer=INIT, device="cuda")
    a, b = ScoredHashTable(nb * B, dim, **kw), HybridTable(nb * B, dim, hbm_rows=32 * nb, **kw)
    gen = torch.Generator().manual_seed(8)
    keys = torch.unique(torch.randint(-(1 << 62), 1 << 62, (nb * B // 2,), generator=gen))
    keys = keys[torch.randperm(keys.numel(), generator=gen)].cuda()
    for off in range(0, keys.numel(), 1024):
        k = keys[off:off + 1024]
        v = torch.randn(k.numel(), dim, generator=gen).cuda()
        if off % 2048:
            a.insert_or_assign(k, v), b.insert_or_assign(k, v)
        else:
            ra, rb = a.find_or_insert(k), b.find_or_insert(k)
            assert torch.equal(ra.values, rb.values)
        check_split_placement(b)
    assert check_split_placement(b) > 0
    for x, y in zip(_contents(a), _contents(b)):
        assert torch.equal(x, y)


@pytest.mark.parametrize("slot_major", [False, True], ids=["bucket_major", "slot_major"])
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01)], ids=["sgd", "adam"])
def test_hybrid_step_fills_hbm_first(opt, slot_major):
    """The fused step's insert kernel claims a bucket's HBM slots first (4 of 16 per bucket here); training equals
    all-HBM tables', with the host rows bucket-major or slot-major (the private layout)."""
    ref, m = make("hbm", opt, device="cuda"), make("hybrid", opt, device="cuda", budget_rows=256)
    assert m.use_kernels and all(t.hbm_slots == 4 for t in m.tables)
    for t in m.tables:
        t._set_host_slot_major(slot_major)
        assert t.host_run == (t.capacity() // t.bucket_capacity if slot_major else 0)
    for ids, off, w in batches(8, device="cuda"):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)
    for t in m.tables:
        assert check_split_placement(t) > 0
