"""Shared checks of the eviction order (test_evict_ties_cpu.py / _gpu.py): a full bucket evicts its slot of least
(score, digest, key) (digest: 8 bits of the key's hash; scores and keys in unsigned 64-bit order), whatever slots the
keys sit in, so an all-HBM table and a hybrid table (whose inserts claim each bucket's HBM slots first) evict the same
keys (issue 32; docs/dynamicemb_storage_notes.md "The eviction order")."""

import zlib

import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._hash import fmix64
from dynamicemb._hybrid import HybridTable
from dynamicemb._optimizers import SGD
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions
from dynamicemb._table import ScoredHashTable, TableInitializer
from storage_helpers import INSERT_OPS, _contents, assert_same, insert_op, step
from table_helpers import MASK64, bucket_of, key_tensor

INIT = TableInitializer("uniform", low=-1.0, high=1.0, seed=5)
BIG = 1 << 62  # customized scores from here on: above 2^56, where the CUDA scan's rank is not exact


def digest(key: int) -> int:
    """The table's digest of a key (bit pattern as a Python int): bits 32-39 of its hash."""
    return (fmix64(key & MASK64) >> 32) & 0xFF


def evict_order(key: int, score: int = 0):
    """The eviction order's sort key of a slot (smallest first)."""
    return (score & MASK64, digest(key), key & MASK64)


def capped_per_bucket(keys, nb, cap):
    """Keeps at most `cap` keys of each bucket, so that a GPU batch never asks a bucket for more slots than it can
    evict (which keys a full bucket then refuses would depend on thread order)."""
    count, out = {}, []
    for k in keys:
        b = bucket_of(k & MASK64, nb)
        if count.get(b, 0) < cap:
            count[b] = count.get(b, 0) + 1
            out.append(k)
    return out


def tied_ops_agree(device, hbm_rows, policy, steps=15, seed=0):
    """All-HBM table vs HybridTable(hbm_rows) (16 buckets of 16 slots) under eviction pressure with tied scores:
    each op's batch holds up to 8 keys per bucket (fresh keys of both signs and ~1/4 repeats), so from the third op
    on the full buckets evict among keys of equal minimum score (LRU: every key of an op has its clock; LFU: caller
    increments from {1, 2, 3}; "big": customized scores from {2^62 + 1, 2^62 + 2, 2^62 + 3}, which the CUDA scan
    cannot rank and decides by keys). Asserts equal results (rows, found, stats, evicted keys / rows / scores) and
    equal contents (keys, scores, rows, counters) after every op. Returns the number of evictions."""
    nb, bc, dim = 16, 16, 8
    pol = "customized" if policy == "big" else policy
    kw = dict(bucket_capacity=bc, score_policy=pol, initializer=INIT, device=device)
    a = ScoredHashTable(nb * bc, dim, **kw)
    b = HybridTable(nb * bc, dim, hbm_rows=hbm_rows, **kw)
    g = torch.Generator().manual_seed(zlib.crc32(f"ties{hbm_rows}{policy}{seed}".encode()))
    seen, evicted = [], 0
    for i in range(steps):
        fresh = torch.randint(-(1 << 62), 1 << 62, (160,), generator=g).mul_(2).add_(1).tolist()  # both signs
        old = [seen[j] for j in torch.randint(0, len(seen), (40,), generator=g).tolist()] if seen else []
        ks = capped_per_bucket(list(dict.fromkeys(old + fresh)), nb, bc // 2)
        seen += ks
        keys = key_tensor(ks, torch.int64, device)
        n = keys.numel()
        vals = torch.randn(n, dim, generator=g).to(device)
        sc = None
        if policy == "lfu":
            sc = torch.randint(1, 4, (n,), generator=g).to(device)
        elif policy == "big":  # later ops score higher, so that new keys can evict
            sc = (torch.randint(1, 4, (n,), generator=g) + BIG + 4 * i).to(device)
        op = INSERT_OPS[i % 3]
        res = []
        for t in (a, b):
            res.append(insert_op(t, op, keys, vals, sc))
            if op == "insert_and_evict":
                evicted += res[-1][0].numel()
        for x, y in zip(*res):
            assert torch.equal(x.cpu(), y.cpu()), f"op {i}: {op}"
        for x, y in zip(_contents(a), _contents(b)):
            assert torch.equal(x.cpu(), y.cpu()), f"op {i}: {op} (contents: keys, scores, rows, counters)"
    assert int(a.size()) > nb * bc * 3 // 4  # the buckets filled up
    return evicted


def keys_sharing_digests(n, gen, shared=3):
    """n distinct keys of both signs whose smallest digest is carried by `shared` of them (so that the first
    evictions among equal scores are decided by the key words), in random order."""
    low, rest = [], []
    while len(low) < shared or len(rest) < n - shared:
        for k in torch.randint(-(1 << 62), 1 << 62, (4096,), generator=gen).mul_(2).add_(1).tolist():
            (low if digest(k) == 0 else rest).append(k)
    out = list(dict.fromkeys(low[:shared] + rest[: n - shared]))
    assert len(out) == n
    return [out[i] for i in torch.randperm(n, generator=gen).tolist()]


def victims_in_order(device, hbm_rows, bc=16):
    """One bucket of `bc` slots filled by one find_or_insert (LRU: bc equal scores; three keys share the smallest
    digest), then insert_and_evict of one new key per op: each evicts the old key of least (digest, key) (the first
    three by key). Then a lone minimum: every old key but one (not the next in order) is found again (a newer
    clock), so the next new key evicts that one; the one after evicts the least of the refreshed keys. bc 128 / 256:
    on CUDA the tied slots spread over every lane of the eviction tile and over several 16-slot chunks per lane."""
    t = HybridTable(bc, 4, bucket_capacity=bc, hbm_rows=hbm_rows, initializer=INIT, device=device) \
        if hbm_rows is not None else ScoredHashTable(bc, 4, bucket_capacity=bc, initializer=INIT, device=device)
    g = torch.Generator().manual_seed(11 + (hbm_rows or 0) + bc)
    old = keys_sharing_digests(bc, g)
    t.find_or_insert(key_tensor(old, torch.int64, device))
    assert int(t.size()) == bc
    order = sorted(old, key=evict_order)
    assert digest(order[0]) == digest(order[2]) == 0 < digest(order[3])
    new = [2 * j + 2 for j in range(8)]  # even: never an old key

    def insert_one(k):
        r = t.insert_and_evict(key_tensor([k], torch.int64, device), torch.randn(1, 4, generator=g).to(device))
        assert int(r.num_evicted) == 1
        return int(r.evicted_keys[0].view(torch.int64))

    for j in range(5):
        assert insert_one(new[j]) == order[j], j
    lone = order[-1]
    refreshed = order[5:-1] + new[:5]
    t.find_or_insert(key_tensor(refreshed, torch.int64, device))
    assert insert_one(new[5]) == lone
    assert insert_one(new[6]) == min(refreshed, key=evict_order)


def small_module(storage, device, policies, cap=256, budget_rows=64):
    """A module of 2 tables (3 features) of `cap` rows in 16-slot buckets: small enough that the batches of
    tied_steps_agree keep its buckets full and evicting."""
    opt = SGD(lr=0.1)
    row = opt.row_width(4) * 4
    kw = dict(storage=storage) if storage == "hbm" else dict(storage=storage, hbm_budget_bytes=budget_rows * row)
    opts = [DynamicEmbTableOptions(dim=4, max_capacity=cap, bucket_capacity=16, score_policy=p,
                                   initializer=DynamicEmbInitializer("uniform", seed=3 + i), **kw)
            for i, p in enumerate(policies)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1, 1], pooling="sum", optimizer=opt, device=device)


def tied_steps_agree(device, policies=("lru", "lfu"), steps=16):
    """Training steps of an all-HBM module and a hybrid one (4 of 16 slots per bucket in HBM) with ids from a range
    20x the tables' capacity: after the first steps every step evicts among keys of equal score (LRU: one step's
    clock; LFU: counts of 1). Outputs and contents (keys, rows with their optimizer state, scores) stay equal."""
    ref, m = small_module("hbm", device, policies), small_module("hybrid", device, policies)
    assert all(t.hbm_slots == 4 for t in m.tables)
    g = torch.Generator().manual_seed(21)
    for _ in range(steps):
        # 40 ids of table 0 and 80 of table 1 per step over 16 buckets: well under 16 of a bucket (no refusal race)
        ids = torch.randint(0, 5000, (120,), generator=g)
        off = torch.arange(0, 121, 8)
        w = torch.randn(5, 3 * 4, generator=g)
        assert torch.equal(step(ref, ids.to(device), off.to(device), w.to(device)),
                           step(m, ids.to(device), off.to(device), w.to(device)))
    assert_same(ref, m)
    assert all(int(t.size()) > 200 for t in ref.tables)  # full buckets: the steps evicted
