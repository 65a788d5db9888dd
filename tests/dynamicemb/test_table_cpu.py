"""Scored hash table semantics on the CPU twin (runs in CI; the CPU twin is also the GPU tests' oracle)."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import bucket_of, key_tensor, keys_in_bucket, stats_dict, table_items  # noqa: E402

from dynamicemb._hash import fmix64  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._table import RESERVED_KEYS, ScoredHashTable, TableInitializer  # noqa: E402

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")

KEY_DTYPES = [torch.int64, torch.uint64]
VALUE_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def make(cap=4096, dim=8, **kw):
    kw.setdefault("device", "cpu")
    return ScoredHashTable(cap, dim, **kw)


def rand_keys(n, dtype, gen, lo=1, hi=1 << 62):
    k = torch.randint(lo, hi, (n,), generator=gen, dtype=torch.int64)
    if dtype == torch.uint64:
        k = k * 2 + 1  # spans into the upper half of the uint64 range via the sign bit below
        k[::3] = -k[::3]  # negative int64 bits == uint64 >= 2**63 (never the reserved ones: odd, large)
    return k.view(dtype)


def check_identity(stats, n):
    s = stats_dict(stats)
    assert sum(s.values()) == n, s


@pytest.mark.parametrize("key_dtype", KEY_DTYPES)
@pytest.mark.parametrize("value_dtype", VALUE_DTYPES)
def test_nothing_lost_below_capacity(key_dtype, value_dtype):
    gen = torch.Generator().manual_seed(1)
    t = make(cap=8192, dim=5, key_dtype=key_dtype, value_dtype=value_dtype)
    keys = torch.unique(rand_keys(2000, key_dtype, gen).view(torch.int64)).view(key_dtype)
    keys = keys[torch.randperm(keys.numel(), generator=gen)]
    vals = torch.randn(keys.numel(), 5, generator=gen).to(value_dtype)
    stats = t.insert_or_assign(keys, vals)
    assert stats_dict(stats) == dict(inserted=keys.numel(), assigned=0, evicted=0, refused=0, illegal=0)
    vals2 = torch.randn(keys.numel(), 5, generator=gen).to(value_dtype)
    half = keys.numel() // 2
    stats = t.insert_or_assign(keys[:half], vals2[:half])
    assert stats_dict(stats)["assigned"] == half
    expect = torch.cat([vals2[:half], vals[half:]])
    got, found, _ = t.find(keys)
    assert found.all()
    assert torch.equal(got, expect)
    assert t.size() == keys.numel()
    assert t.contains(keys).all()
    missing = (keys.view(torch.int64) ^ 0x5A5A).view(key_dtype)
    assert not t.contains(missing[~torch.isin(missing.view(torch.int64), keys.view(torch.int64))]).any()


@pytest.mark.parametrize("mode", ["find_or_insert", "insert_or_assign", "insert_and_evict"])
@pytest.mark.parametrize("policy", ["lru", "lfu", "customized", "epoch_lru", "epoch_lfu"])
def test_accounting_identity_under_pressure(mode, policy):
    gen = torch.Generator().manual_seed(2)
    t = make(cap=256, dim=4, bucket_capacity=16, score_policy=policy)
    t.set_epoch(3)
    for _ in range(6):
        keys = torch.randint(1, 2000, (300,), generator=gen)
        keys[:3] = RESERVED_KEYS[0]  # illegal keys are counted, not stored
        scores = torch.randint(0, 100, (300,), generator=gen)
        if mode == "find_or_insert":
            stats = t._upsert("find_or_insert", keys, scores=scores, values_out=torch.empty(300, 4),
                              found_out=torch.empty(300, dtype=torch.bool))
        elif mode == "insert_or_assign":
            stats = t._upsert("insert_or_assign", keys, values=torch.randn(300, 4, generator=gen), scores=scores)
        else:
            ek, ev, es = torch.empty(300, dtype=torch.int64), torch.empty(300, 4), torch.empty(300, dtype=torch.int64)
            stats = t._upsert("insert_and_evict", keys, values=torch.randn(300, 4, generator=gen), scores=scores,
                              evicted=(ek, ev, es))
        s = stats_dict(stats)
        assert s["illegal"] == 3
        check_identity(stats, 300)
        assert t.size() == len(table_items(t)) <= 256


def test_duplicates_share_one_slot():
    t = make(cap=1024, dim=3)
    keys = torch.tensor([5, 7, 5, 5, 9, 7])
    vals = torch.arange(18, dtype=torch.float32).view(6, 3)
    stats = t.insert_or_assign(keys, vals)
    assert stats_dict(stats) == dict(inserted=3, assigned=3, evicted=0, refused=0, illegal=0)
    assert t.size() == 3
    got, found, _ = t.find(torch.tensor([5, 7, 9]))
    assert found.all()
    assert torch.equal(got[0], vals[3]) and torch.equal(got[1], vals[5])  # CPU: the last duplicate wins
    v, f, stats = t.find_or_insert(torch.tensor([11, 11, 5]))
    assert f.tolist() == [False, True, True]
    assert torch.equal(v[0], v[1])
    slots, _, _ = t.find_slots(torch.tensor([11, 5]))
    assert (slots >= 0).all() and slots[0] != slots[1]


def full_bucket_table(policy, n_extra=4, bc=16):
    """A table of 4 buckets with bucket 0 filled by bc keys (returns table, keys of bucket 0, spare keys)."""
    t = make(cap=4 * bc, dim=2, bucket_capacity=bc, score_policy=policy)
    ks = keys_in_bucket(0, 4, bc + n_extra)
    return t, ks[:bc], ks[bc:]


def test_eviction_choice_customized():
    t, ks, spare = full_bucket_table("customized")
    scores = torch.tensor([100 + i for i in range(16)])
    scores[7] = 50  # the minimum
    t.insert_or_assign(torch.tensor(ks), torch.ones(16, 2), scores)
    # A lower score than the bucket minimum is refused.
    stats = t.insert_or_assign(torch.tensor([spare[0]]), torch.ones(1, 2), torch.tensor([49]))
    assert stats_dict(stats)["refused"] == 1 and not t.contains(torch.tensor([spare[0]])).any()
    # An equal score is refused too (strictly higher wins).
    stats = t.insert_or_assign(torch.tensor([spare[0]]), torch.ones(1, 2), torch.tensor([50]))
    assert stats_dict(stats)["refused"] == 1
    r = t.insert_and_evict(torch.tensor([spare[0]]), torch.full((1, 2), 3.0), torch.tensor([51]))
    assert int(r.num_evicted) == 1 and r.evicted_keys[0].item() == ks[7] and r.evicted_scores[0].item() == 50
    assert t.contains(torch.tensor([spare[0]])).all() and not t.contains(torch.tensor([ks[7]])).any()
    # Ties at the minimum: the least digest, then the least key (never a slot position: docs/dynamicemb.md).
    t2, ks2, spare2 = full_bucket_table("customized")
    t2.insert_or_assign(torch.tensor(ks2), torch.ones(16, 2), torch.full((16,), 5))
    r = t2.insert_and_evict(torch.tensor([spare2[0]]), torch.ones(1, 2), torch.tensor([6]))
    assert r.evicted_keys[0].item() == min(ks2, key=lambda k: ((fmix64(k) >> 32) & 0xFF, k))  # keys are positive


def test_lru_order():
    t, ks, spare = full_bucket_table("lru")
    for k in ks:  # one op per key: increasing clock
        t.insert_or_assign(torch.tensor([k]), torch.ones(1, 2))
    t.find_or_insert(torch.tensor([ks[0]]))  # touch the oldest
    r = t.insert_and_evict(torch.tensor([spare[0]]), torch.ones(1, 2))
    assert r.evicted_keys[0].item() == ks[1]
    r = t.insert_and_evict(torch.tensor([spare[1]]), torch.ones(1, 2))
    assert r.evicted_keys[0].item() == ks[2]
    _, _, sc = t.find(torch.tensor([spare[1], ks[0]]), return_scores=True)
    assert sc[0] > sc[1]


def test_present_keys_served_before_evictions():
    """The CPU twin serves every key present at the op's start before any insert of the batch evicts (as the CUDA
    upsert does): a new key early in the batch does not evict the oldest key when the batch also hits that key."""
    t, ks, spare = full_bucket_table("lru")
    for k in ks:  # one op per key: increasing clock, ks[0] the oldest
        t.insert_or_assign(torch.tensor([k]), torch.ones(1, 2))
    r = t.insert_and_evict(torch.tensor([spare[0], ks[0]]), torch.full((2, 2), 2.0))
    assert int(r.num_evicted) == 1 and r.evicted_keys[0].item() == ks[1]  # ks[0] was touched first
    assert stats_dict(r.stats) == dict(inserted=0, assigned=1, evicted=1, refused=0, illegal=0)
    v, found, _ = t.find(torch.tensor([ks[0], spare[0]]))
    assert found.all() and bool((v == 2.0).all())


def test_lfu_order_and_saturation():
    t, ks, spare = full_bucket_table("lfu")
    t.insert_or_assign(torch.tensor(ks), torch.ones(16, 2))
    others = torch.tensor([k for k in ks if k != ks[5]])
    for _ in range(3):
        t.find_or_insert(others)
    _, _, sc = t.find(torch.tensor(ks), return_scores=True)
    assert sc[5] == 1 and (sc[torch.arange(16) != 5] == 4).all()
    # A new key with count 1 cannot beat the minimum count 1; with increment 2 it can.
    assert stats_dict(t.insert_or_assign(torch.tensor([spare[0]]), torch.ones(1, 2)))["refused"] == 1
    r = t.insert_and_evict(torch.tensor([spare[0]]), torch.ones(1, 2), torch.tensor([2]))
    assert r.evicted_keys[0].item() == ks[5]
    # Saturation: uint64 max stays.
    t.assign_scores(torch.tensor([ks[0]]), torch.tensor([-1]))  # all bits set
    t.find_or_insert(torch.tensor([ks[0]]))
    _, _, sc = t.find(torch.tensor([ks[0]]), return_scores=True)
    assert sc[0].item() == -1


def test_epoch_policies():
    t = make(cap=1024, dim=2, score_policy="epoch_lru")
    t.set_epoch(7)
    t.insert_or_assign(torch.tensor([1, 2]), torch.ones(2, 2))
    _, _, sc = t.find(torch.tensor([1]), return_scores=True)
    assert sc[0].item() >> 32 == 7
    t.set_epoch(8)
    t.find_or_insert(torch.tensor([2]))
    _, _, sc = t.find(torch.tensor([1, 2]), return_scores=True)
    assert sc[0].item() >> 32 == 7 and sc[1].item() >> 32 == 8
    t = make(cap=1024, dim=2, score_policy="epoch_lfu")
    t.set_epoch(2)
    t.find_or_insert(torch.tensor([1, 1, 1]))
    _, _, sc = t.find(torch.tensor([1]), return_scores=True)
    assert sc[0].item() == (2 << 32) | 3


@pytest.mark.parametrize("key_dtype", KEY_DTYPES)
def test_grow_preserves_everything(key_dtype):
    gen = torch.Generator().manual_seed(3)
    t = make(cap=1024, dim=6, key_dtype=key_dtype, bucket_capacity=32, score_policy="customized", max_capacity=8192)
    keys = rand_keys(3000, key_dtype, gen)
    t.insert_or_assign(keys, torch.randn(3000, 6, generator=gen), torch.randint(0, 1 << 40, (3000,), generator=gen))
    before = table_items(t)
    assert len(before) == t.size() > 900
    stats = t.grow()
    assert t.capacity() == 2048 and stats_dict(stats)["inserted"] == len(before)
    stats = t.reserve(5000)
    assert t.capacity() == 8192 and stats_dict(stats)["refused"] == 0
    after = table_items(t)
    assert before.keys() == after.keys()
    for k, (row, score) in before.items():
        assert torch.equal(after[k][0], row) and after[k][1] == score
    assert t.size() == len(before)
    with pytest.raises(ValueError, match="max_capacity"):
        t.reserve(16384)


def test_erase_export_clear():
    t = make(cap=2048, dim=2, score_policy="customized")
    keys = torch.arange(1, 501)
    t.insert_or_assign(keys, torch.randn(500, 2), scores=keys * 10)
    assert int(t.erase(torch.tensor([1, 2, 3, 3, 9999]))) == 3
    assert t.size() == 497 and not t.contains(torch.tensor([1, 2, 3])).any()
    assert int(t.erase_if(1000)) == 96  # keys 4..99 have scores < 1000
    assert t.size() == 401
    r = t.export_batch_if(3000, 0, t.capacity())
    c = int(r.count)
    assert sorted(r.keys[:c].tolist()) == list(range(300, 501))
    assert (r.scores[:c] >= 3000).all()
    got, _, _ = t.find(r.keys[:c])
    assert torch.equal(got, r.values[:c]) and torch.equal(t.values[r.slots[:c]], r.values[:c])
    total = 0
    for off in range(0, 2048, 512):
        total += int(t.export_batch(off, 512).count)
    assert total == 401
    t.clear()
    assert t.size() == 0 and not t.contains(keys).any()
    t.insert_or_assign(keys[:5], torch.ones(5, 2), scores=keys[:5])
    assert t.size() == 5


def test_assign_and_accum():
    t = make(cap=1024, dim=2)
    t.insert_or_assign(torch.tensor([1, 2]), torch.ones(2, 2))
    stats = t.assign(torch.tensor([2, 3]), torch.full((2, 2), 5.0))
    assert stats_dict(stats) == dict(inserted=0, assigned=1, evicted=0, refused=1, illegal=0)
    assert not t.contains(torch.tensor([3])).any()
    stats = t.accum_or_assign(torch.tensor([1, 4, 2, 5]), torch.full((4, 2), 2.0),
                              torch.tensor([True, True, False, False]))
    s = stats_dict(stats)
    assert s["assigned"] == 1 and s["inserted"] == 1 and sum(s.values()) == 4
    v, f, _ = t.find(torch.tensor([1, 2, 4, 5]))
    assert f.tolist() == [True, True, False, True]
    assert v[0].tolist() == [3.0, 3.0] and v[1].tolist() == [5.0, 5.0] and v[3].tolist() == [2.0, 2.0]


def test_initializers():
    t = make(cap=8192, dim=16)
    keys = torch.arange(1, 2001)
    v, f, stats = t.find_or_insert(keys, initializer=TableInitializer("uniform", low=-0.5, high=0.25, seed=3))
    assert not f.any() and stats_dict(stats)["inserted"] == 2000
    assert v.min() >= -0.5 and v.max() < 0.25 and abs(v.mean().item() + 0.125) < 0.01
    got, _, _ = t.find(keys)
    assert torch.equal(got, v)
    v2, f2, _ = t.find_or_insert(keys)  # present: same rows
    assert f2.all() and torch.equal(v2, v)
    t2 = make(cap=8192, dim=16)
    v, _, _ = t2.find_or_insert(keys, initializer=TableInitializer("normal", mean=1.0, std=2.0, seed=4))
    assert abs(v.mean().item() - 1.0) < 0.05 and abs(v.std().item() - 2.0) < 0.05
    t3 = make(cap=8192, dim=16)
    init = TableInitializer("truncated_normal", mean=0.0, std=1.0, low=-0.5, high=1.0, seed=5, init_cols=10, fill=7.0)
    v, _, _ = t3.find_or_insert(keys, initializer=init)
    assert v[:, :10].min() >= -0.5 and v[:, :10].max() <= 1.0 and (v[:, 10:] == 7.0).all()
    t4 = make(cap=8192, dim=16, initializer=TableInitializer("constant", value=0.5))
    v, _, _ = t4.find_or_insert(keys)
    assert (v == 0.5).all()
    # Different seeds differ; same seed and same op clock agree.
    a, _, _ = make(cap=1024, dim=4).find_or_insert(keys[:10], initializer=TableInitializer("normal", seed=1))
    b, _, _ = make(cap=1024, dim=4).find_or_insert(keys[:10], initializer=TableInitializer("normal", seed=1))
    c, _, _ = make(cap=1024, dim=4).find_or_insert(keys[:10], initializer=TableInitializer("normal", seed=2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_slots_api():
    t = make(cap=1024, dim=4)
    keys = torch.tensor([10, 20, 30])
    slots, found, stats = t.find_or_insert_slots(keys)
    assert (slots >= 0).all() and not found.any() and stats_dict(stats)["inserted"] == 3
    t.values[slots] = torch.arange(12, dtype=torch.float32).view(3, 4)
    v, f, _ = t.find(keys)
    assert torch.equal(v, torch.arange(12, dtype=torch.float32).view(3, 4))
    s2, f2, _ = t.find_slots(torch.tensor([30, 40]))
    assert s2.tolist() == [slots[2].item(), -1] and f2.tolist() == [True, False]


def test_uint64_full_range():
    t = make(cap=1024, dim=1, key_dtype=torch.uint64)
    keys = [0, 1, (1 << 64) - 1, (1 << 63) - 1, (1 << 63) + 3, 12345678901234567890]
    kt = key_tensor(keys, torch.uint64)
    t.insert_or_assign(kt, torch.arange(6, dtype=torch.float32).view(6, 1))
    v, f, _ = t.find(kt)
    assert f.all() and v.view(-1).tolist() == list(range(6))
    assert set(table_items(t)) == set(keys)


def test_state_dict_round_trip():
    t = make(cap=1024, dim=3, value_dtype=torch.bfloat16, score_policy="lfu")
    t.find_or_insert(torch.arange(1, 300), initializer=TableInitializer("normal", seed=9))
    sd = {k: v.clone() for k, v in t.state_dict().items()}
    t2 = make(cap=512, dim=3, value_dtype=torch.bfloat16, score_policy="lfu")
    t2.load_state_dict(sd)
    for name in ("keys", "digests", "scores", "values"):
        assert torch.equal(getattr(t2, name).view(torch.uint8), getattr(t, name).view(torch.uint8))
    assert t2.size() == t.size() == 299
    with pytest.raises(ValueError, match="values"):
        make(cap=1024, dim=4, value_dtype=torch.bfloat16).load_state_dict(sd)


def test_bad_inputs():
    t = make(cap=1024, dim=4)
    with pytest.raises(TypeError, match="keys: expected dtype torch.int64"):
        t.find(torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match="reserved key"):
        t.insert_or_assign(torch.tensor([1, RESERVED_KEYS[1]]), torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"values: expected shape \(2, 4\), got \(2, 3\)"):
        t.insert_or_assign(torch.tensor([1, 2]), torch.ones(2, 3))
    with pytest.raises(TypeError, match="values: expected dtype torch.float32"):
        t.insert_or_assign(torch.tensor([1, 2]), torch.ones(2, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match="keys: expected a contiguous tensor"):
        t.find(torch.arange(10)[::2])
    with pytest.raises(ValueError, match="values: expected a contiguous tensor"):
        t.insert_or_assign(torch.tensor([1, 2]), torch.ones(4, 2).t())
    with pytest.raises(ValueError, match="keys: expected a 1-d tensor"):
        t.find(torch.ones(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="capacity: expected a positive multiple of bucket_capacity=128"):
        ScoredHashTable(1000, 4)
    with pytest.raises(ValueError, match="bucket_capacity"):
        ScoredHashTable(1024, 4, bucket_capacity=24)
    with pytest.raises(ValueError, match="score_policy"):
        ScoredHashTable(1024, 4, score_policy="fifo")
    with pytest.raises(ValueError, match="scores: the 'customized' policy needs caller scores"):
        make(score_policy="customized").insert_or_assign(torch.tensor([1]), torch.ones(1, 8))
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="values: expected a tensor on cpu"):
            t.insert_or_assign(torch.tensor([1]), torch.ones(1, 4, device="cuda"))
    # The kernels themselves count reserved keys as illegal (fast path without the host check).
    t.check_keys = False
    stats = t.insert_or_assign(torch.tensor([1, RESERVED_KEYS[0]]), torch.ones(2, 4))
    assert stats_dict(stats)["illegal"] == 1 and stats_dict(stats)["inserted"] == 1


def test_bucket_mapping_matches_helper():
    t = make(cap=64 * 16, dim=1, bucket_capacity=16)
    keys = list(range(1, 200))
    slots, _, _ = t.find_or_insert_slots(torch.tensor(keys))
    for k, s in zip(keys, slots.tolist()):
        assert s // 16 == bucket_of(k, 64)
