"""Scored hash table on the GPU against the CPU twin, and GPU-only concurrency checks.

Batches that put at most one key into each bucket leave the GPU no choice that the CPU could make differently,
so there the two tables must agree slot for slot (keys, digests, scores; values to init rounding).
"""

import os
import sys
import zlib

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import (  # noqa: E402
    MASK64, full_buckets, key_tensor, one_per_bucket, stats_dict, table_items)

from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._table import RESERVED_KEYS, ScoredHashTable, TableInitializer  # noqa: E402

pytestmark = [
    pytest.mark.gpu,  # tests/conftest.py turns it into a skip; the skipif below also covers runs outside the rootdir
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
]

POLICIES = ["lru", "lfu", "customized", "epoch_lru", "epoch_lfu"]
# DYNAMICEMB_TEST_SMALL=1 shrinks the large tests (for runs under compute-sanitizer, which is ~100x slower).
SMALL = os.environ.get("DYNAMICEMB_TEST_SMALL") == "1"


def cu(x):
    return None if x is None else x.cuda()


def pair(**kw):
    g = ScoredHashTable(device="cuda", **kw)
    c = ScoredHashTable(device="cpu", **kw)
    return g, c


def assert_same_tables(g, c, vtol):
    assert torch.equal(g.keys.cpu().view(torch.int64), c.keys.view(torch.int64))
    assert torch.equal(g.digests.cpu(), c.digests)
    assert torch.equal(g.scores.cpu(), c.scores)
    assert torch.equal(g.counters.cpu()[:2], c.counters[:2])
    torch.testing.assert_close(g.values.cpu().float(), c.values.float(), atol=vtol, rtol=vtol)


def assert_same(a, b, vtol=0.0):
    if a is None:
        return
    if a.dtype in (torch.float16, torch.bfloat16, torch.float32):
        torch.testing.assert_close(a.cpu().float(), b.float(), atol=vtol, rtol=vtol)
    else:
        assert torch.equal(a.cpu().view(torch.uint8), b.view(torch.uint8))


def assert_same_items(g, c, stats_g, stats_c, n):
    """Same stats (accounting for all n keys) and the same stored keys with the same rows and scores (placement
    inside a bucket may differ)."""
    assert stats_dict(stats_g) == stats_dict(stats_c)
    assert sum(stats_dict(stats_g).values()) == n
    ig, ic = table_items(g), table_items(c)
    assert ig.keys() == ic.keys()
    for k, (row, score) in ic.items():
        assert ig[k][1] == score, (k, ig[k][1], score)
        torch.testing.assert_close(ig[k][0], row, atol=0, rtol=0)


@pytest.mark.parametrize("key_dtype", [torch.int64, torch.uint64])
@pytest.mark.parametrize("value_dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("policy", POLICIES)
def test_gpu_matches_cpu_twin(key_dtype, value_dtype, policy):
    nb, bc, dim = 32, 16, 7 if value_dtype == torch.float32 else 8
    g, c = pair(capacity=nb * bc, value_dim=dim, value_dtype=value_dtype, key_dtype=key_dtype, bucket_capacity=bc,
                score_policy=policy, initializer=TableInitializer("normal", seed=11, init_cols=dim - 2, fill=0.5))
    g.set_epoch(5)
    c.set_epoch(5)
    vtol = 1e-5 if value_dtype == torch.float32 else 1e-2
    gen = torch.Generator().manual_seed(zlib.crc32(f"{key_dtype}{value_dtype}{policy}".encode()))
    pool = torch.randint(1, 1 << 62, (1500,), generator=gen).tolist()
    if key_dtype == torch.uint64:
        pool = [(k * 3) & MASK64 | (1 << 63) if i % 2 else k for i, k in enumerate(pool)]
        pool = [k for k in pool if k - (1 << 63) > 2]

    def batch(n):
        idx = torch.randint(0, len(pool), (4 * n,), generator=gen).tolist()
        keys = one_per_bucket([pool[i] for i in idx], nb)[:n]
        return keys

    for step in range(16):
        keys = batch(nb)
        n = len(keys)
        kc = key_tensor(keys, key_dtype)
        kg = kc.cuda()
        sc = torch.randint(0, 1000, (n,), generator=gen)
        sc_arg = sc if policy in ("customized", "lfu", "epoch_lfu") else None
        vals = torch.randn(n, dim, generator=gen).to(value_dtype)
        rg = rc = None
        op = ["find_or_insert", "insert_or_assign", "insert_and_evict", "find_or_insert_slots", "assign",
              "accum_or_assign", "assign_scores", "erase"][step % 8]
        if op == "find_or_insert":
            rg, rc = g.find_or_insert(kg, cu(sc_arg)), c.find_or_insert(kc, sc_arg)
            assert_same(rg.values, rc.values, vtol)
        elif op == "insert_or_assign":
            rg = g.insert_or_assign(kg, vals.cuda(), cu(sc_arg))
            rc = c.insert_or_assign(kc, vals, sc_arg)
            assert_same(rg, rc)
        elif op == "insert_and_evict":
            rg = g.insert_and_evict(kg, vals.cuda(), cu(sc_arg))
            rc = c.insert_and_evict(kc, vals, sc_arg)
            m = int(rc.num_evicted)
            assert int(rg.num_evicted) == m
            og = torch.argsort(rg.evicted_keys[:m].view(torch.int64).cpu())
            oc = torch.argsort(rc.evicted_keys[:m].view(torch.int64))
            assert_same(rg.evicted_keys[:m].cpu()[og], rc.evicted_keys[:m][oc])
            assert_same(rg.evicted_scores[:m].cpu()[og], rc.evicted_scores[:m][oc])
            assert_same(rg.evicted_values[:m].cpu()[og], rc.evicted_values[:m][oc], vtol)
        elif op == "find_or_insert_slots":
            rg, rc = g.find_or_insert_slots(kg, cu(sc_arg)), c.find_or_insert_slots(kc, sc_arg)
            assert_same(rg.slots, rc.slots)
        elif op == "assign":
            assert_same(g.assign(kg, vals.cuda()), c.assign(kc, vals))
        elif op == "accum_or_assign":
            flags = torch.rand(n, generator=gen) < 0.5
            assert_same(g.accum_or_assign(kg, vals.cuda(), flags.cuda(), cu(sc_arg)),
                        c.accum_or_assign(kc, vals, flags, sc_arg))
        elif op == "assign_scores":
            assert_same(g.assign_scores(kg, sc.cuda()), c.assign_scores(kc, sc))
        else:
            assert_same(g.erase(kg[: n // 4]), c.erase(kc[: n // 4]))
        if op != "erase":
            assert_same(rg.found if hasattr(rg, "found") else None, getattr(rc, "found", None))
        assert_same_tables(g, c, vtol)
        fg, fc = g.find(kg, return_scores=True), c.find(kc, return_scores=True)
        assert_same(fg.found, fc.found)
        assert_same(fg.values, fc.values, vtol)
        assert_same(fg.scores[fc.found.cuda()], fc.scores[fc.found])
    # export and erase_if agree too
    eg, ec = g.export_batch_if(100, 0, g.capacity()), c.export_batch_if(100, 0, c.capacity())
    assert int(eg.count) == int(ec.count)
    assert int(g.erase_if(300)) == int(c.erase_if(300))
    assert_same_tables(g, c, vtol)
    # grow: both rehash the same way
    g.max_capacity = c.max_capacity = 4 * g.capacity()
    assert_same(g.grow(), c.grow())
    assert_same_tables(g, c, vtol)


@pytest.mark.parametrize("policy", ["lru", "lfu", "customized"])
def test_gpu_contention_invariants(policy):
    """Large batches with duplicates onto full buckets: accounting, no duplicate keys, rows never torn."""
    torch.manual_seed(0)
    cap, dim = 128 * 64, 16
    t = ScoredHashTable(cap, dim, device="cuda", score_policy=policy)
    for step in range(4 if SMALL else 8):
        n = 20000
        keys = torch.randint(1, 12000, (n,), device="cuda")
        keys[:5] = RESERVED_KEYS[2]
        sc = torch.randint(0, 1 << 20, (n,), device="cuda")
        # Rows are constant per key so that any winner is checkable: row = key (as float) in every column.
        rows = keys.float().unsqueeze(1).expand(n, dim).contiguous()
        t.check_keys = False
        if step % 2 == 0:
            stats = t.insert_or_assign(keys, rows, sc)
        else:
            r = t.insert_and_evict(keys, rows, sc)
            stats = r.stats
            m = int(r.num_evicted)
            assert whole_rows(r.evicted_values[:m], r.evicted_keys[:m])
        s = stats_dict(stats)
        assert sum(s.values()) == n and s["illegal"] == 5, s
        k, v, _ = t.items()
        assert k.numel() == t.size() <= cap
        assert torch.unique(k).numel() == k.numel(), "a key is stored twice"
        # Rows were written as (key, ..., key) or initialized to 0 by find_or_insert: anything else is torn.
        assert whole_rows(v, k), "a row is torn or mismatched"
        res = t.find_or_insert(keys[5:], sc[5:])
        s = stats_dict(res.stats)
        assert sum(s.values()) == n - 5
        # A key found and then evicted (and even re-inserted by a later duplicate) inside the same batch is legal,
        # so returned rows are checked for wholeness, not against the table after the batch.
        assert whole_rows(res.values[res.found], keys[5:][res.found])


def whole_rows(v, k):
    kf = k.float().unsqueeze(1)
    return bool(((v == kf).all(1) | (v == 0).all(1)).all())


def test_gpu_below_capacity_nothing_lost_large():
    torch.manual_seed(1)
    cap, n = (1 << 14, 6000) if SMALL else (1 << 20, 400000)
    t = ScoredHashTable(cap, 32, device="cuda", key_dtype=torch.uint64)
    keys = torch.unique(torch.randint(0, 1 << 62, (n,), device="cuda")).view(torch.uint64)
    vals = torch.randn(keys.numel(), 32, device="cuda")
    stats = t.insert_or_assign(keys, vals)
    assert stats_dict(stats)["inserted"] == keys.numel()
    v, f, _ = t.find(keys)
    assert f.all() and torch.equal(v, vals)
    st = t.grow() if t.max_capacity > t.capacity() else None
    assert st is None


def test_gpu_cuda_graph_capture():
    t = ScoredHashTable(1 << 14, 8, device="cuda", initializer=TableInitializer("uniform", seed=3), check_keys=False)
    ids = torch.randint(1, 1 << 40, (1000,), device="cuda")
    out = {}
    t.find_or_insert_slots(ids)  # warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out["r"] = t.find_or_insert(ids)
    for _ in range(3):
        ids.copy_(torch.randint(1, 1 << 40, (1000,), device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        v, f, _ = t.find(ids)
        assert f.all() and torch.equal(v, out["r"].values)
    assert t.size() >= 3000


@pytest.mark.parametrize("policy", ["lru", "lfu", "epoch_lru", "epoch_lfu", "lru+dedup", "epoch_lru+dedup"])
@pytest.mark.parametrize("op", ["find_or_insert", "insert_or_assign", "assign_scores"])
def test_gpu_duplicates_across_passes_match_cpu_twin(policy, op):
    """Batches of present and missing keys, each repeated 1-4 times and shuffled (one key per bucket).

    The CUDA upsert serves hits in a first pass and inserts in a second, with duplicates of one key spread over
    tiles of both passes. Under these policies the result does not depend on which duplicate goes first (LRU:
    one clock per op; LFU: increments add up; rows are a function of the key), so the tables, the stats and
    the number of `found` flags must equal the CPU twin's exactly. "+dedup": the row copiers' first-writer set
    (private option `_upsert_dedup`) on the same batches.
    """
    policy, dedup = policy.removesuffix("+dedup"), policy.endswith("+dedup")
    nb, bc, dim = 64, 16, 8
    kw = dict(capacity=nb * bc, value_dim=dim, bucket_capacity=bc, score_policy=policy,
              initializer=TableInitializer("uniform", seed=5))
    g, c = pair(**kw)
    g._upsert_dedup = dedup
    g.set_epoch(9)
    c.set_epoch(9)
    gen = torch.Generator().manual_seed(zlib.crc32(f"{policy}{op}".encode()))
    pool = one_per_bucket(torch.randint(1, 1 << 62, (4000,), generator=gen).tolist(), nb)
    assert len(pool) >= 48
    present = pool[:24]
    kc = key_tensor(present, torch.int64)
    c.insert_or_assign(kc, kc.float().unsqueeze(1).expand(-1, dim).contiguous())
    g.insert_or_assign(kc.cuda(), kc.float().unsqueeze(1).expand(-1, dim).contiguous().cuda())
    for step in range(4):
        picked = present[step * 4: step * 4 + 8] + pool[24 + step * 6: 24 + step * 6 + 6]  # hits and misses
        reps = torch.randint(1, 5, (len(picked),), generator=gen).tolist()
        keys = [k for k, r in zip(picked, reps) for _ in range(r)]
        keys = [keys[i] for i in torch.randperm(len(keys), generator=gen).tolist()]
        kc = key_tensor(keys, torch.int64)
        kg = kc.cuda()
        n = len(keys)
        # LFU increments add up in any order; assign_scores with caller scores would set them (last one wins).
        inc = torch.randint(1, 7, (n,), generator=gen) if "lfu" in policy and op != "assign_scores" else None
        if op == "find_or_insert":
            rg, rc = g.find_or_insert(kg, cu(inc)), c.find_or_insert(kc, inc)
            assert_same(rg.values, rc.values, 1e-6)
            stats_g, stats_c = rg.stats, rc.stats
            assert int(rg.found.sum()) == int(rc.found.sum())
        elif op == "insert_or_assign":
            rows = kc.float().unsqueeze(1).expand(n, dim).contiguous() * (step + 2)
            stats_g, stats_c = g.insert_or_assign(kg, rows.cuda(), cu(inc)), c.insert_or_assign(kc, rows, inc)
        else:
            stats_g, stats_c = g.assign_scores(kg, cu(inc)), c.assign_scores(kc, inc)
        assert_same(stats_g, stats_c)
        assert sum(stats_dict(stats_g).values()) == n
        assert_same_tables(g, c, 1e-6)


@pytest.mark.parametrize("dups", ["few", "hot", "rare"])
@pytest.mark.parametrize("policy", ["lru", "lfu", "epoch_lru", "customized", "lru+dedup", "epoch_lru+dedup"])
@pytest.mark.parametrize("op", ["assign", "insert_or_assign"])
def test_gpu_row_writer_duplicates_on_shared_buckets_match_cpu_twin(policy, op, dups):
    """Row writers with many duplicates of present and missing keys in a few 128-slot buckets.

    Many tiles of one batch meet the same slots locked (a duplicate's row write or insert) and the same buckets'
    free slots (the first pass's lock taken inside the probe, and the eviction path's L2 prefetches, are on this
    path). dups "few": 1-4 copies of each key; "hot": also Zipf-like hot keys, 16 keys with 40-400 copies each (many
    tiles on one lock word at once, some reading it LOCKED, some losing the CAS to a duplicate); "rare": 1 % of the
    keys twice, the rest once (too few repeats for the device's sample to choose the first-writer set, so "+dedup"
    takes the slot-lock path with duplicates in the batch). No bucket overflows, so the stored set is the CPU
    twin's; placement inside a bucket may differ (claim order), so the tables are compared key by key: row, score,
    stats. Rows and scores are functions of the key (customized: the caller's score), so the outcome does not
    depend on which duplicate goes first. "+dedup": the row copiers' first-writer set (private option
    `_upsert_dedup`, on by default; the device uses it when its sample finds repeats): one lock-free writer per key,
    the other occurrences yield.
    """
    policy, dedup = policy.removesuffix("+dedup"), policy.endswith("+dedup")
    nb, bc, dim = 32, 128, 8
    kw = dict(capacity=nb * bc, value_dim=dim, bucket_capacity=bc, score_policy=policy)
    g, c = pair(**kw)
    g._upsert_dedup = dedup
    g.set_epoch(4)
    c.set_epoch(4)
    gen = torch.Generator().manual_seed(zlib.crc32(f"rw{policy}{op}".encode()))
    pool = torch.randint(1, 1 << 62, (2600,), generator=gen).unique()
    pool = pool[torch.randperm(pool.numel(), generator=gen)]
    present, missing = pool[:1900], pool[1900:2400]
    rows0 = torch.rand(present.numel(), dim, generator=gen) + 1
    sc0 = torch.randint(1, 1 << 30, (present.numel(),), generator=gen)
    cs = sc0 if policy == "customized" else None
    c.insert_or_assign(present, rows0, cs)
    g.insert_or_assign(present.cuda(), rows0.cuda(), cu(cs))
    for step in range(3):
        hits = present[torch.randperm(present.numel(), generator=gen)[:1200]]
        picked = torch.cat([hits, missing[step * 150:(step + 1) * 150]])
        reps = torch.randint(1, 5, (picked.numel(),), generator=gen)
        if dups == "rare":
            reps = 1 + (torch.rand(picked.numel(), generator=gen) < 0.01).long()
        if dups == "hot":  # 8 present and 8 missing keys get 40-400 copies
            hot = torch.cat([torch.arange(8), hits.numel() + torch.arange(8)])
            reps[hot] = torch.randint(40, 401, (16,), generator=gen)
        keys = picked.repeat_interleave(reps)
        keys = keys[torch.randperm(keys.numel(), generator=gen)]
        n = keys.numel()
        rows = (keys.float() % 1000003).unsqueeze(1).expand(n, dim).contiguous() * (step + 2)
        rows[:, 0] += torch.rand(1, generator=gen)  # fresh values each run, still one row per key
        if policy == "customized":
            sc = (keys % 999983) + 7 * step  # one score per key: any winner stores the same
        elif "lfu" in policy:
            sc = torch.randint(1, 7, (n,), generator=gen)  # increments add up in any order
        else:
            sc = None
        if op == "assign":
            stats_g, stats_c = g.assign(keys.cuda(), rows.cuda(), cu(sc)), c.assign(keys, rows, sc)
        else:
            stats_g = g.insert_or_assign(keys.cuda(), rows.cuda(), cu(sc))
            stats_c = c.insert_or_assign(keys, rows, sc)
        assert_same_items(g, c, stats_g, stats_c, n)


@pytest.mark.parametrize("op", ["find_or_insert", "assign", "assign_scores", "accum_or_assign", "insert_or_assign",
                                "assign+dedup", "insert_or_assign+dedup"])
def test_gpu_full_table_first_pass_families_match_cpu_twin(op):
    """A full table (every bucket's 128 slots taken), batches of hits and misses with duplicates, sizes that are
    no multiple of a first-pass block's keys (32): one op per family of the first pass.

    find_or_insert runs in 128-thread blocks whose warps meet after the probe; assign and assign_scores (never
    inserting) skip the probe's candidate free-slot read, accum_or_assign skips it for flagged keys. Both the CUDA
    upsert and the CPU twin serve every key present at the op's start before any insert of the batch evicts. Every
    key's duplicates share its row, flag and score, so the outcome does not depend on which duplicate goes first:
    the stored set, rows, scores, stats and per-key outputs must equal the twin's (placement inside a bucket may
    differ; which occurrence of a new key reports the insert is CUDA's choice). "+dedup": the row copiers'
    first-writer set (private option `_upsert_dedup`); insert_or_assign's misses evict (its own set of victims,
    the same on both: LRU, every new key scored by the op's clock).
    """
    op, dedup = op.removesuffix("+dedup"), op.endswith("+dedup")
    nb, bc, dim = 16, 128, 8
    kw = dict(capacity=nb * bc, value_dim=dim, bucket_capacity=bc, score_policy="lru",
              initializer=TableInitializer("constant", value=0.25))
    g, c = pair(**kw)
    g._upsert_dedup = dedup
    gen = torch.Generator().manual_seed(zlib.crc32(f"full{op}".encode()))
    # Fill: exactly bc keys per bucket, in one op (no eviction, so both tables hold the same set).
    present = full_buckets(nb, bc, gen)
    rows0 = (present % 997).float().unsqueeze(1).expand(-1, dim).contiguous()
    c.insert_or_assign(present, rows0)
    g.insert_or_assign(present.cuda(), rows0.cuda())
    assert g.size() == c.size() == nb * bc
    for step, n_hit in enumerate([900, 1023, 1537]):
        hits = present[torch.randperm(present.numel(), generator=gen)[:n_hit]]
        missing = torch.randint(1 << 62, (1 << 63) - 1, (40,), generator=gen)
        picked = torch.cat([hits, missing])
        reps = torch.randint(1, 4, (picked.numel(),), generator=gen)
        keys = picked.repeat_interleave(reps)
        keys = keys[torch.randperm(keys.numel(), generator=gen)]
        n = keys.numel()
        if n % 32 == 0:
            keys, n = keys[:-1], n - 1
        rows = ((keys % 1009).float() + step).unsqueeze(1).expand(n, dim).contiguous()
        flags = (keys % 3) != 0  # one flag per key (its duplicates agree)
        kg = keys.cuda()
        pre = c.contains(keys)  # present before the op
        kc, rc_rows, fc = keys, rows, flags
        if op == "find_or_insert":
            rg, rc = g.find_or_insert(kg), c.find_or_insert(kc)
            torch.testing.assert_close(rg.values.cpu(), rc.values, atol=0, rtol=0)
            fg, fcpu = rg.found.cpu(), rc.found
            assert bool(fg[pre].all()) and bool(fcpu[pre].all())
            # A new key reports the insert (found=False) on exactly one of its occurrences (the twin: the first; CUDA:
            # the one that got there first); its stored row is checked below.
            # (A refused key reports found=False on every occurrence.)
            for f, tab in ((fg, g), (fcpu, c)):
                kept = tab.contains(keys.to(tab.device)).cpu()
                for k in set(keys[~pre & kept].tolist()):
                    assert int(((keys == k) & ~f).sum()) == 1, k
                assert not bool(f[~pre & ~kept].any())
            stats_g, stats_c = rg.stats, rc.stats
        elif op == "assign":
            stats_g, stats_c = g.assign(kg, rows.cuda()), c.assign(kc, rc_rows)
        elif op == "insert_or_assign":
            stats_g, stats_c = g.insert_or_assign(kg, rows.cuda()), c.insert_or_assign(kc, rc_rows)
        elif op == "assign_scores":
            stats_g, stats_c = g.assign_scores(kg), c.assign_scores(kc)
        else:
            stats_g = g.accum_or_assign(kg, rows.cuda(), flags.cuda())
            stats_c = c.accum_or_assign(kc, rc_rows, fc)
        assert_same_items(g, c, stats_g, stats_c, n)
        assert g.size() == nb * bc




@pytest.mark.parametrize("keys", ["uniform", "zipf"])
@pytest.mark.parametrize("policy", ["lru", "epoch_lru"])
@pytest.mark.parametrize("op", ["find_or_insert", "insert_or_assign", "insert_and_evict"])
def test_gpu_full_table_evictions_match_cpu_twin(op, policy, keys, device="cuda"):
    """The insert pass's eviction path at a full table, many evictions per bucket.

    Every 128-slot bucket full (filled by eight ops: score groups of ~16 slots per bucket); batches of present hits
    and fresh random new keys (~15 per bucket: every new key evicts, the bucket's evictions compete for its lock and
    its least slots) with duplicates, "zipf": hits and new keys drawn by Zipf ranks (hot keys repeated dozens of times
    in one batch: duplicates of a new key meet in the eviction path). Under LRU every new key is scored by the op's
    clock, so each bucket's new keys replace its least (score, digest, key) slots whatever the order: the stored set,
    rows, scores, stats, per-key outputs and the evicted multiset must equal the CPU twin's.
    """
    nb, bc, dim = 16, 128, 8
    kw = dict(capacity=nb * bc, value_dim=dim, bucket_capacity=bc, score_policy=policy,
              initializer=TableInitializer("constant", value=0.5))
    g = ScoredHashTable(device=device, **kw)
    c = ScoredHashTable(device="cpu", **kw)
    g.set_epoch(3)
    c.set_epoch(3)
    gen = torch.Generator().manual_seed(zlib.crc32(f"evictions{op}{policy}{keys}".encode()))
    present = full_buckets(nb, bc, gen)
    present = present[torch.randperm(present.numel(), generator=gen)]
    for part in present.chunk(8):  # eight clocks: score groups of ~16 slots per bucket (few (score, digest) ties)
        rows0 = (part % 997).float().unsqueeze(1).expand(-1, dim).contiguous()
        c.insert_or_assign(part, rows0)
        g.insert_or_assign(part.to(device), rows0.to(device))
    assert g.size() == c.size() == nb * bc

    def zipf_pick(pool, n):  # pool[rank], P(rank r) ~ r^(-1.3): the first keys of a shuffled pool repeat most
        u = torch.rand(n, generator=gen, dtype=torch.float64)
        ranks = ((1.0 - u) ** (-1.0 / 0.3)).clamp(max=1e12).long() - 1
        return pool[torch.randperm(pool.numel(), generator=gen)][ranks % pool.numel()]

    for step in range(3):
        present = torch.tensor(sorted(table_items(c).keys()), dtype=torch.int64)
        new = torch.randint(1 << 62, (1 << 63) - 1, (240,), generator=gen)
        if keys == "zipf":
            picked = torch.cat([zipf_pick(present, 700), zipf_pick(new, 600)])
        else:
            picked = torch.cat([present[torch.randperm(present.numel(), generator=gen)[:700]], new])
            picked = picked.repeat_interleave(torch.randint(1, 4, (picked.numel(),), generator=gen))
        keys_b = picked[torch.randperm(picked.numel(), generator=gen)]
        n = keys_b.numel()
        rows = ((keys_b % 1009).float() + step).unsqueeze(1).expand(n, dim).contiguous()
        kg = keys_b.to(device)
        if op == "find_or_insert":
            rg, rc = g.find_or_insert(kg), c.find_or_insert(keys_b)
            torch.testing.assert_close(rg.values.cpu(), rc.values, atol=0, rtol=0)
            assert int(rg.found.sum()) == int(rc.found.sum())
            stats_g, stats_c = rg.stats, rc.stats
        elif op == "insert_or_assign":
            stats_g, stats_c = g.insert_or_assign(kg, rows.to(device)), c.insert_or_assign(keys_b, rows)
        else:
            rg, rc = g.insert_and_evict(kg, rows.to(device)), c.insert_and_evict(keys_b, rows)
            ng, nc = int(rg.num_evicted), int(rc.num_evicted)
            assert ng == nc > 0

            def evicted(r, m):
                ks = r.evicted_keys[:m].cpu().view(torch.int64).tolist()
                return sorted(zip(ks, r.evicted_scores[:m].cpu().tolist(), r.evicted_values[:m].cpu()[:, 0].tolist()))

            assert evicted(rg, ng) == evicted(rc, nc)
            stats_g, stats_c = rg.stats, rc.stats
        assert stats_dict(stats_g) == stats_dict(stats_c)
        assert sum(stats_dict(stats_g).values()) == n
        ig, ic = table_items(g), table_items(c)  # (assert_same_items, one comparison per table)
        assert sorted(ig) == sorted(ic)
        ks = sorted(ic)
        assert [ig[k][1] for k in ks] == [ic[k][1] for k in ks]
        assert torch.equal(torch.stack([ig[k][0] for k in ks]), torch.stack([ic[k][0] for k in ks]))
        assert stats_dict(stats_c)["evicted"] > 0
        assert g.size() == nb * bc


@pytest.mark.parametrize("bucket", [128, 256, 32])
@pytest.mark.parametrize("policy", ["lru", "epoch_lru"])
@pytest.mark.parametrize("op", ["find_or_insert", "insert_or_assign", "insert_and_evict"])
def test_gpu_full_table_insert_schedules_agree(op, policy, bucket):
    """The insert pass's variants (table_kernels.cuh insert_schedule; forced by the private ScoredHashTable._upsert_lab
    bits 2-3: 1 the dynamic group schedule with the plain eviction scan, 2 the static one, 3 dynamic with the wide scan,
    probe.cuh scan_bucket_wide, the default) at the scale where they differ: a full table of 2^20 slots and a batch of
    ~180K keys, ~50K of them new (each 1-3 times): the insert pass's grid is capped at 2 blocks per SM, so each warp
    serves several groups, most of them handed out statically by the static schedule. Under LRU each bucket's new keys
    replace its least (score, digest, key) slots whatever the order and whichever scan finds them, so every variant (and
    the op's default) must leave the same stored (key, row, score) set and return the same stats, found count, rows and
    evicted multiset (the default is the one the small CPU-twin tests check). Epoch LRU's scores (epoch in the
    high word) take the scans' 64-bit ranks, LRU's their 32-bit ones; buckets of 32 slots take scan_bucket under the
    wide variant too (its groups are 64 slots).
    """
    cap, dim = 1 << 20, 8
    t = ScoredHashTable(cap, dim, score_policy=policy, device="cuda", bucket_capacity=bucket,
                        initializer=TableInitializer("constant", value=0.25))
    t.set_epoch(2)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"schedules{op}{policy}".encode()))
    for _ in range(8 if bucket >= 128 else 12):  # 2x (3x) the capacity in random keys: every bucket full
        k = torch.randint(1, 1 << 62, (1 << 18,), device="cuda", generator=gen)
        t.insert_or_assign(k, (k % 991).float().unsqueeze(1).expand(-1, dim).contiguous())
    assert t.size() == cap
    present = t.items()[0]
    hits = present[torch.randperm(present.numel(), device="cuda", generator=gen)[:80000]]
    new = torch.randint(1 << 62, (1 << 63) - 1, (50000,), device="cuda", generator=gen)
    new = new.repeat_interleave(torch.randint(1, 4, (new.numel(),), device="cuda", generator=gen))
    keys = torch.cat([hits, new])
    keys = keys[torch.randperm(keys.numel(), device="cuda", generator=gen)]
    rows = ((keys % 1009).float() + 0.5).unsqueeze(1).expand(-1, dim).contiguous()  # a row per key: duplicates agree
    snap = {n: x.clone() for n, x in t.state_dict().items() if n in ("keys", "digests", "scores", "values", "counters")}

    def run(lab):
        for n, x in snap.items():
            getattr(t, n).copy_(x)
        t._upsert_lab = lab
        out = {}
        if op == "find_or_insert":
            r = t.find_or_insert(keys)
            out["values"], out["found"], out["stats"] = r.values.clone(), int(r.found.sum()), r.stats.tolist()
        elif op == "insert_or_assign":
            out["stats"] = t.insert_or_assign(keys, rows).tolist()
        else:
            r = t.insert_and_evict(keys, rows)
            m = int(r.num_evicted)
            ek = r.evicted_keys[:m].view(torch.int64)
            o = torch.argsort(ek)
            out["evicted"] = (ek[o], r.evicted_scores[:m][o], r.evicted_values[:m][o])
            out["stats"] = r.stats.tolist()
        k, v, s = t.items()
        k = k.view(torch.int64)
        o = torch.argsort(k)
        out["table"] = (k[o], v[o], s[o])
        out["size"] = t.size()
        return out

    base = run(1 | 2)  # dynamic, the plain scan
    assert base["size"] == cap
    # the op's default (the wide scan); static (with and without programmatic launches); the wide scan forced
    for lab in (1, 1 | 4, 4, 1 | 6, 6):
        got = run(lab)
        assert got["size"] == base["size"]
        assert got["stats"] == base["stats"]
        for a, b in zip(got["table"], base["table"]):
            assert torch.equal(a, b), lab
        if op == "find_or_insert":
            assert got["found"] == base["found"]
            assert torch.equal(got["values"], base["values"])
        if op == "insert_and_evict":
            assert got["evicted"][0].numel() > 40000
            for a, b in zip(got["evicted"], base["evicted"]):
                assert torch.equal(a, b), lab
