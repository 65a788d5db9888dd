"""Scored hash table at load factor 1.0 (every bucket full: each miss evicts or is refused).

- GPU: one key per bucket leaves the GPU no choice: slot for slot equal to the CPU twin loaded with the same full
  table (bucket capacities 16-256, score ties included).
- GPU and CPU twin: contended batches (many misses per bucket, duplicates, hits): every distinct key of the batch is afterwards
  stored with its row, or reported evicted with its row and score, or refused; evicted keys are reported once with
  the row and score they had; every bucket's evicted scores are at most its smallest remaining score; the table
  stays full with no key stored twice.
"""

import collections
import os
import sys
import zlib

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import bucket_of, stats_dict  # noqa: E402

from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._table import ScoredHashTable, TableInitializer  # noqa: E402

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")
GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]

SCORE_RANGE = 48  # customized scores in [1, 48]: many ties for a bucket's minimum


def key_score(keys):
    """A customized score that is a function of the key (duplicates agree), small range (ties)."""
    k = keys.view(torch.int64)
    return (k % SCORE_RANGE).abs() + 1


def full_table(nb, bc, dim, policy, seed, device="cuda"):
    """A table with every slot occupied (random keys inserted until full)."""
    t = ScoredHashTable(nb * bc, dim, bucket_capacity=bc, score_policy=policy, device=device, check_keys=False,
                        initializer=TableInitializer("uniform", seed=seed))
    g = torch.Generator(device=device).manual_seed(seed)
    for _ in range(64):
        if t.size() == t.capacity():
            break
        keys = torch.randint(1, 1 << 62, (nb * bc,), device=device, generator=g)
        rows = torch.rand(keys.numel(), dim, device=device, generator=g)
        sc = key_score(keys) if policy == "customized" else None
        t.insert_or_assign(keys, rows, sc)
    assert t.size() == t.capacity()
    return t


def cpu_twin(g):
    c = ScoredHashTable(g.capacity(), g.value_dim, bucket_capacity=g.bucket_capacity, score_policy=g.score_policy,
                        device="cpu", check_keys=False, initializer=g.initializer)
    c.load_state_dict({k: v.cpu() for k, v in g.state_dict().items()})
    c.epoch = g.epoch
    return c


def one_per_bucket_batch(g, gen, n_hit, n_miss):
    """Present and new keys, at most one per bucket (bucket of a present key: its slot // bucket capacity)."""
    bc, nb = g.bucket_capacity, g.capacity() // g.bucket_capacity
    keys = g.keys.view(torch.int64).cpu()
    buckets = torch.randperm(nb, generator=gen)
    hit_b = buckets[:n_hit]
    hits = keys[hit_b * bc + torch.randint(0, bc, (n_hit,), generator=gen)]
    taken = set(hit_b.tolist())
    misses = []
    while len(misses) < n_miss:
        k = int(torch.randint(1, 1 << 62, (1,), generator=gen))
        b = bucket_of(k, nb)
        if b not in taken:
            taken.add(b)
            misses.append(k)
    out = torch.cat([hits, torch.tensor(misses, dtype=torch.int64)])
    return out[torch.randperm(out.numel(), generator=gen)]


def assert_same_state(g, c):
    assert torch.equal(g.keys.cpu().view(torch.int64), c.keys.view(torch.int64))
    assert torch.equal(g.digests.cpu(), c.digests)
    assert torch.equal(g.scores.cpu(), c.scores)
    assert torch.equal(g.counters.cpu()[:2], c.counters[:2])
    torch.testing.assert_close(g.values.cpu(), c.values, atol=1e-6, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("bc,policy", [(16, "customized"), (128, "customized"), (256, "customized"), (128, "lru"),
                                       (128, "lfu"), (32, "epoch_lru")])
def test_full_table_one_key_per_bucket_matches_cpu_twin(bc, policy):
    nb, dim = 16, 8
    seed = zlib.crc32(f"{bc}{policy}".encode())
    g = full_table(nb, bc, dim, policy, seed)
    g.set_epoch(3)
    c = cpu_twin(g)
    gen = torch.Generator().manual_seed(seed + 1)  # (not the fill's stream: new keys must be new)
    for step in range(6):
        kc = one_per_bucket_batch(g, gen, n_hit=5, n_miss=nb - 5)
        kg = kc.cuda()
        n = kc.numel()
        sc = key_score(kc) + (SCORE_RANGE // 2 if step % 2 else 0) if policy in ("customized", "lfu") else None
        vals = torch.rand(n, dim, generator=gen)
        op = ["insert_and_evict", "find_or_insert", "insert_or_assign"][step % 3]
        if op == "insert_and_evict":
            rg = g.insert_and_evict(kg, vals.cuda(), None if sc is None else sc.cuda())
            rc = c.insert_and_evict(kc, vals, sc)
            m = int(rc.num_evicted)
            assert int(rg.num_evicted) == m and (m > 0 or policy == "customized")
            og = torch.argsort(rg.evicted_keys[:m].view(torch.int64).cpu())
            oc = torch.argsort(rc.evicted_keys[:m].view(torch.int64))
            assert torch.equal(rg.evicted_keys[:m].view(torch.int64).cpu()[og], rc.evicted_keys[:m].view(torch.int64)[oc])
            assert torch.equal(rg.evicted_scores[:m].cpu()[og], rc.evicted_scores[:m][oc])
            # rows a find_or_insert initialized differ from the twin's by float rounding (as in assert_same_state)
            torch.testing.assert_close(rg.evicted_values[:m].cpu()[og], rc.evicted_values[:m][oc], atol=1e-6, rtol=1e-6)
            assert torch.equal(rg.stats.cpu(), rc.stats)
        elif op == "find_or_insert":
            rg = g.find_or_insert(kg, None if sc is None else sc.cuda())
            rc = c.find_or_insert(kc, sc)
            torch.testing.assert_close(rg.values.cpu(), rc.values, atol=1e-6, rtol=1e-6)
            assert torch.equal(rg.found.cpu(), rc.found)
            assert torch.equal(rg.stats.cpu(), rc.stats)
        else:
            assert torch.equal(g.insert_or_assign(kg, vals.cuda(), None if sc is None else sc.cuda()).cpu(),
                               c.insert_or_assign(kc, vals, sc))
        assert_same_state(g, c)
        assert g.size() == g.capacity()


def state_of(t):
    """{key: (slot, row, score)} of a table (host copies)."""
    keys = t.keys.view(torch.int64).cpu()
    occ = (keys != torch.iinfo(torch.int64).min).nonzero().flatten()
    rows, scores = t.values.cpu().clone(), t.scores.cpu().clone()  # (on the CPU .cpu() is the table itself)
    return {int(keys[s]): (int(s), rows[s], int(scores[s])) for s in occ.tolist()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy", ["lru", "customized"])
def test_full_table_contended_insert_and_evict(policy, device):
    """Many misses per bucket with duplicates, plus hits: found with its row, or evicted, or refused."""
    nb, bc, dim = 48, 128, 16
    seed = zlib.crc32(policy.encode())
    t = full_table(nb, bc, dim, policy, seed, device)
    gen = torch.Generator().manual_seed(seed + 1)  # (not the fill's stream: new keys must be new)
    for step in range(3):
        before = state_of(t)
        present = torch.tensor(list(before.keys()), dtype=torch.int64)
        hits = present[torch.randperm(present.numel(), generator=gen)[:1500]]
        new = torch.randint(1, 1 << 62, (2500,), generator=gen)
        keys = torch.cat([hits, new, new[:700], hits[:300]])  # duplicates of new and present keys
        keys = keys[torch.randperm(keys.numel(), generator=gen)]
        n = keys.numel()
        rows = (keys % 100003).float().unsqueeze(1).expand(n, dim).contiguous() + step  # a function of the key
        sc = key_score(keys) + 4 * step if policy == "customized" else None
        r = t.insert_and_evict(keys.to(device), rows.to(device), None if sc is None else sc.to(device))
        s = stats_dict(r.stats)
        assert sum(s.values()) == n and s["illegal"] == 0, s
        after = state_of(t)
        assert len(after) == t.size() == t.capacity()
        m = int(r.num_evicted)
        ek = r.evicted_keys[:m].view(torch.int64).cpu().tolist()
        ev, es = r.evicted_values[:m].cpu(), r.evicted_scores[:m].cpu().tolist()
        clock = int(t.counters[0])
        batch_row = {int(k): rows[i] for i, k in enumerate(keys.tolist())}
        batch_score = ({int(k): int(sc[i]) for i, k in enumerate(keys.tolist())} if sc is not None else
                       {int(k): clock for k in keys.tolist()})
        evicted, times_evicted = set(ek), collections.Counter(ek)
        evicted_in_bucket = {}
        for j, k in enumerate(ek):
            assert k in before or k in batch_row, "an evicted key was never stored"
            # The row and score it had: from before the batch, or (stored or touched by a copy in the batch and
            # evicted by a later insert of it) the batch's. The CPU twin runs the batch in order, so a present
            # key can be evicted before its own copy comes (which stores it again); the GPU serves every hit
            # before any eviction, so under LRU it never evicts a key of the batch.
            was = [(before[k][1], before[k][2])] if k in before else []
            was += [(batch_row[k], batch_score[k])] if k in batch_row else []
            assert any(torch.equal(ev[j], r) and es[j] == sc_ for r, sc_ in was), f"evicted {k}: wrong row or score"
            if k not in batch_row:
                assert k not in after and times_evicted[k] == 1, "an evicted key is still stored or evicted twice"
            elif device == "cuda" and policy == "lru":
                raise AssertionError(f"LRU evicted {k}, a key of the batch")
            b = before[k][0] // bc if k in before else bucket_of(k, nb)
            evicted_in_bucket[b] = max(evicted_in_bucket.get(b, 0), es[j])
        if policy == "lru":
            assert len(evicted) == m, "a key reported evicted twice"  # (customized: stored again, evicted again)
        copies = {}
        for k in keys.tolist():
            copies[k] = copies.get(k, 0) + 1
        refused = 0  # copies of keys neither stored nor evicted (every copy of such a key was refused)
        for k in batch_row:
            if k in after:
                assert torch.equal(after[k][1], batch_row[k])
            elif k not in evicted:
                refused += copies[k]
                assert policy == "customized" and k not in before
        # (a key stored by one copy, evicted, then refused to a later copy counts as evicted here)
        assert refused <= s["refused"] if policy == "customized" else refused == s["refused"] == 0
        min_in_bucket = {}
        for k, (slot, _, score) in after.items():
            b = slot // bc
            min_in_bucket[b] = min(min_in_bucket.get(b, 1 << 64), score)
            if k in before and k not in batch_row:  # untouched keys keep row and score
                assert before[k][0] == slot and torch.equal(before[k][1], after[k][1]) and before[k][2] == score
        for b, hi in evicted_in_bucket.items():
            assert hi <= min_in_bucket[b], f"bucket {b}: evicted score {hi} above a kept score {min_in_bucket[b]}"
        if policy == "lru":
            assert all(after[k][2] == clock for k in batch_row)


@pytest.mark.parametrize("device", DEVICES)
def test_full_table_hot_missing_keys_find_or_insert(device):
    """A few new keys repeated thousands of times onto a full LRU table: one slot each, one row for all copies."""
    nb, bc, dim = 32, 128, 8
    t = full_table(nb, bc, dim, "lru", 7, device)
    gen = torch.Generator().manual_seed(8)  # (not the fill's stream)
    hot = torch.randint(1, 1 << 62, (6,), generator=gen)
    keys = torch.cat([hot.repeat(1500), torch.randint(1, 1 << 62, (3000,), generator=gen)])
    keys = keys[torch.randperm(keys.numel(), generator=gen)]
    res = t.find_or_insert(keys.to(device))
    s = stats_dict(res.stats)
    assert sum(s.values()) == keys.numel() and s["refused"] == 0
    assert t.size() == t.capacity()
    stored = t.keys.view(torch.int64).cpu()
    assert torch.unique(stored).numel() == stored.numel(), "a key is stored twice"
    v, f, _ = t.find(keys.to(device))
    assert bool(f.all())
    assert torch.equal(res.values, v)  # every copy read the row that stayed in the table
    for k in hot.tolist():
        assert int(((keys == k) & ~res.found.cpu()).sum()) == 1  # one copy inserted, the others found it


def first_occurrence(keys):
    """(n,) bool: the first occurrence of each key in batch order."""
    seen, out = set(), []
    for k in keys.tolist():
        out.append(k not in seen)
        seen.add(k)
    return torch.tensor(out)


@pytest.mark.parametrize("device", DEVICES)
def test_find_or_insert_found_of_duplicates(device):
    """find_or_insert's `found`: True for keys present before the op; a key absent before the op reports False on
    the one occurrence that inserted it and True on its other occurrences (the CPU twin: the
    first in batch order inserts; the two-pass CUDA upsert: whichever occurrence got there first); a refused key
    reports False on every occurrence. Part-full buckets (LRU) and full ones (customized scores, some refused)."""
    dev = device
    gen = torch.Generator().manual_seed(35)
    # Part-full LRU table: inserts claim free slots; several new keys per bucket.
    t = ScoredHashTable(16 * 128, 4, score_policy="lru", device=dev, check_keys=False)
    base = torch.randint(1, 1 << 62, (900,), generator=gen)
    t.insert_or_assign(base.to(dev), torch.rand(900, 4, generator=gen).to(dev))
    present = base[torch.randint(0, 900, (60,), generator=gen)]  # ~13 keys per bucket
    new = torch.randint(1 << 62, (1 << 63) - 1, (45,), generator=gen)
    picked = torch.cat([present, new])
    keys = picked.repeat_interleave(torch.randint(1, 4, (picked.numel(),), generator=gen))
    keys = keys[torch.randperm(keys.numel(), generator=gen)]
    pre = torch.isin(keys, base)
    res = t.find_or_insert(keys.to(dev))
    found = res.found.cpu()
    assert bool(found[pre].all())
    s = stats_dict(res.stats)
    assert s["inserted"] == new.unique().numel() and s["refused"] == 0
    for k in new.tolist():
        assert int(((keys == k) & ~found).sum()) == 1, k  # one occurrence inserted it
    if dev == "cpu":
        assert torch.equal(found, pre | ~first_occurrence(keys))
    # Full table, customized scores: keys scored above every stored score insert once; keys scored 0 are refused.
    nb, bc = 8, 128
    f = full_table(nb, bc, 4, "customized", 36, dev)
    stored = f.keys.view(torch.int64).cpu()
    win = torch.randint(1 << 62, (1 << 63) - 1, (12,), generator=gen)
    lose = torch.randint(1 << 62, (1 << 63) - 1, (5,), generator=gen)
    hit = stored[torch.randint(0, stored.numel(), (10,), generator=gen)]
    picked = torch.cat([win, lose, hit])
    score_of = {int(k): (1000 if i < 12 else 0 if i < 17 else 500) for i, k in enumerate(picked)}
    keys = picked.repeat_interleave(torch.randint(2, 4, (picked.numel(),), generator=gen))
    keys = keys[torch.randperm(keys.numel(), generator=gen)]
    sc = torch.tensor([score_of[int(k)] for k in keys])
    res = f.find_or_insert(keys.to(dev), sc.to(dev))
    found = res.found.cpu()
    s = stats_dict(res.stats)
    is_win, is_lose, is_hit = torch.isin(keys, win), torch.isin(keys, lose), torch.isin(keys, hit)
    assert s["refused"] == int(is_lose.sum()) and not bool(found[is_lose].any())
    assert bool(found[is_hit].all())
    for k in win.tolist():
        assert int(((keys == k) & ~found).sum()) == 1, k
    if dev == "cpu":
        assert torch.equal(found[is_win], ~first_occurrence(keys)[is_win])
