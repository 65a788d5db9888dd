"""assign on the GPU: duplicates keep one whole row, missing keys and the rest of the table are untouched, scores as
the policy documents; the LRU assign's own kernel (the default) and the row copiers' two passes (private option
``ScoredHashTable._upsert_lab`` bits 4-7 = 1) held to the same contract."""

import os
import sys
import zlib

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import EMPTY_DIGEST, MASK64, gpu_table_marks, stats_dict, table_items  # noqa: E402

from dynamicemb._hash import fmix64  # noqa: E402
from dynamicemb._table import ScoredHashTable  # noqa: E402

pytestmark = gpu_table_marks()
PATHS = {"default": None, "copiers": 1 | (1 << 4)}  # _upsert_lab: the class's; pdl + bits 4-7 = 1: the copiers' passes


def empty_digest_keys(count, gen):
    """Random keys whose digest is the free slots' (they match every free slot of their bucket)."""
    out = []
    while len(out) < count:
        for k in torch.randint(1, 1 << 62, (1 << 14,), generator=gen).tolist():
            if (fmix64(k) >> 32) & 0xFF == EMPTY_DIGEST:
                out.append(k)
    return out[:count]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("policy", ["lru", "epoch_lru", "lfu", "customized"])
@pytest.mark.parametrize("bucket,value_dtype,dim", [(128, torch.float32, 32), (256, torch.float16, 8),
                                                    (16, torch.bfloat16, 7), (32, torch.float32, 5)])
def test_gpu_assign_duplicates_missing_and_scores(path, policy, bucket, value_dtype, dim):
    """Present keys repeated 1-4 times (and 4 hot keys 60-240 times), each occurrence with its own row; missing keys
    repeated too; keys whose digest is the free slots' among both. After assign: each present key's row is exactly one
    of its occurrences' rows (whole: no mix of two), its score the policy's (LRU: one value for the op above every
    earlier score, epoch LRU with the epoch above bit 32; LFU: + 1 per occurrence; customized: the caller's), every
    other stored key's row and score unchanged, no missing key stored; stats count every occurrence (assigned:
    those of present keys, yields of duplicates included; refused: the missing)."""
    if path != "default" and "lru" not in policy:
        pytest.skip("one path below LRU")
    nb = 48
    cap = nb * bucket
    gen = torch.Generator().manual_seed(zlib.crc32(f"assign{path}{policy}{bucket}{dim}".encode()))
    t = ScoredHashTable(cap, dim, value_dtype=value_dtype, bucket_capacity=bucket, score_policy=policy, device="cuda")
    if PATHS[path] is not None:
        t._upsert_lab = PATHS[path]
    t.set_epoch(5)
    pool = torch.randint(1, 1 << 62, (cap,), generator=gen).tolist() + empty_digest_keys(24, gen)
    pool = list(dict.fromkeys(pool))
    perm = torch.randperm(len(pool), generator=gen).tolist()
    pool = [pool[j] for j in perm]
    fill = torch.tensor(pool[: int(0.85 * cap)] + empty_digest_keys(12, gen), dtype=torch.int64)
    sc0 = torch.randint(1, 1 << 40, (fill.numel(),), generator=gen) if policy == "customized" else None
    t.insert_or_assign(fill.cuda(), torch.rand(fill.numel(), dim, generator=gen).to(value_dtype).cuda(),
                       None if sc0 is None else sc0.cuda())
    before = table_items(t)  # (at load 0.85 some buckets overflowed: the stored keys are the present ones)
    present = [k for k in before]
    stored = set(present)
    missing = [k for k in pool[int(0.85 * cap):] if k not in stored]
    hits = [present[j] for j in torch.randperm(len(present), generator=gen)[: len(present) // 2].tolist()]
    hits += [k for k in present if (fmix64(k) >> 32) & 0xFF == EMPTY_DIGEST][:6]
    hits = list(dict.fromkeys(hits))
    miss = missing[:200]
    picked = hits + miss
    reps = torch.randint(1, 5, (len(picked),), generator=gen)
    reps[:4] = torch.randint(60, 241, (4,), generator=gen)  # hot present keys
    keys = torch.tensor(picked, dtype=torch.int64).repeat_interleave(reps)
    order = torch.randperm(keys.numel(), generator=gen)
    keys = keys[order]
    n = keys.numel()
    # occurrence rank within its key (0, 1, ...) -> a code 1..250, exact in every value dtype; row = code per column
    occ = torch.cat([torch.arange(r) for r in reps.tolist()])[order]
    code = (occ % 250 + 1).float()
    rows = code.unsqueeze(1).expand(n, dim).contiguous()
    rows[:, 0] = -rows[:, 0]
    kinds = {k: set() for k in picked}
    for k, c in zip(keys.tolist(), code.tolist()):
        kinds[k & MASK64].add(c)
    sc = None
    if policy == "customized":
        sc = (keys % 999983) + 11  # one score per key: any winner stores the same
    elif policy == "lfu":
        sc = None  # + 1 per occurrence
    stats = t.assign(keys.view(torch.int64).cuda(), rows.to(value_dtype).cuda(), None if sc is None else sc.cuda())
    s = stats_dict(stats)
    n_hit_occ = sum(r for k, r in zip(picked, reps.tolist()) if k in stored)
    assert s["assigned"] == n_hit_occ and s["refused"] == n - n_hit_occ and s["inserted"] == 0
    assert s["evicted"] == 0 and s["illegal"] == 0
    after = table_items(t)
    assert after.keys() == before.keys()  # missing keys not stored, nothing evicted
    hit_set = set(hits)
    assigned_scores = set()
    old_max = max(v[1] for v in before.values())
    cnt = {k: r for k, r in zip(picked, reps.tolist())}
    for k, (row, score) in after.items():
        row0, score0 = before[k]
        if k not in hit_set:
            torch.testing.assert_close(row, row0, atol=0, rtol=0)
            assert score == score0, (k, score, score0)
            continue
        c = -row[0].item()
        assert c in kinds[k], (k, c, kinds[k])
        want = torch.full((dim,), c)
        want[0] = -c
        torch.testing.assert_close(row, want, atol=0, rtol=0)  # one occurrence's row, whole
        if "lru" in policy:
            assigned_scores.add(score)
        elif policy == "lfu":
            assert score == score0 + cnt[k], (k, score, score0, cnt[k])
        else:
            assert score == (k % 999983) + 11
    if "lru" in policy:
        assert len(assigned_scores) == 1
        s1 = assigned_scores.pop()
        assert s1 > old_max
        if policy == "epoch_lru":
            assert s1 >> 32 == 5


@pytest.mark.parametrize("policy", ["lru", "epoch_lru"])
def test_gpu_assign_kernel_matches_copiers(policy):
    """The LRU assign's kernel and the copiers' passes leave the same table (rows a function of the key, so the
    duplicates' order does not matter), the same stats, at a full table (every slot taken) and at a table half full;
    batches of 40K keys with duplicates."""
    dim, bucket, nb = 16, 128, 64
    gen = torch.Generator().manual_seed(zlib.crc32(f"match{policy}".encode()))
    for load in (0.5, 1.0):
        ts = {}
        pool = torch.randint(1, 1 << 62, (int(2 * nb * bucket),), generator=gen).unique()
        pool = pool[torch.randperm(pool.numel(), generator=gen)]
        fill = pool[: int(load * nb * bucket * 1.3)]
        vals = torch.rand(fill.numel(), dim, generator=gen)
        batch = torch.cat([fill[torch.randint(0, fill.numel(), (30000,), generator=gen)],
                           pool[-4000:].repeat(2 + int(load))])
        batch = batch[torch.randperm(batch.numel(), generator=gen)]
        rows = (batch % 65521).float().unsqueeze(1).expand(-1, dim).contiguous() + torch.arange(dim)
        t = ScoredHashTable(nb * bucket, dim, bucket_capacity=bucket, score_policy=policy, device="cuda")
        t.set_epoch(2)
        t.insert_or_assign(fill.cuda(), vals.cuda())
        # one fill for both paths (an overflowing fill's survivors depend on arrival order): restored before each
        snap = {k: x.clone() for k, x in t.state_dict().items() if isinstance(x, torch.Tensor) and x.dim()}
        for path, lab in PATHS.items():
            for k, x in snap.items():
                getattr(t, k).copy_(x)
            t._upsert_lab = ScoredHashTable._upsert_lab if lab is None else lab
            st = t.assign(batch.cuda(), rows.cuda())
            ts[path] = (stats_dict(st), table_items(t), t.keys.cpu(), t.scores.cpu())
        a, b = ts["default"], ts["copiers"]
        assert a[0] == b[0]
        assert torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])  # same slots, same scores
        assert a[1].keys() == b[1].keys()
        for k, (row, score) in a[1].items():
            torch.testing.assert_close(row, b[1][k][0], atol=0, rtol=0)
