"""The probe's digest matches on the GPU (match16, a zero-byte test over the bucket's digest words): buckets filled
with keys whose digests are one bit, one carry or one borrow away from a target digest (0x00, 0x01, 0x7f, 0x80, 0x81,
0xfe, 0xff and the free slots' digest), so that a mask that misses a byte (a present key reported missing and stored
twice) or matches a wrong one shows in the stats, the size, the found flags or the rows; and the new rows of
find_or_insert's constant initializer at several dims and dtypes."""

import os
import sys
import zlib

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import EMPTY_DIGEST, bucket_of, gpu_table_marks, stats_dict  # noqa: E402

from dynamicemb._hash import fmix64  # noqa: E402
from dynamicemb._table import ScoredHashTable, TableInitializer  # noqa: E402

pytestmark = gpu_table_marks()
TARGETS = sorted({0x00, 0x01, 0x7F, 0x80, 0x81, 0xFE, 0xFF, EMPTY_DIGEST})
NEAR = sorted({(d ^ x) & 0xFF for d in TARGETS for x in (0x00, 0x01, 0x80, 0x7F, 0xFF, 0x40)}
              | {(d + x) & 0xFF for d in TARGETS for x in (1, 255)})


def digest(k):
    return (fmix64(k) >> 32) & 0xFF


def draw(gen, nb, quota, digests, taken):
    """Distinct random positive keys not in `taken`, `quota` per bucket, each with a digest in `digests`."""
    per = {b: [] for b in range(nb)}
    while min(len(v) for v in per.values()) < quota:
        for k in torch.randint(1, 1 << 62, (1 << 13,), generator=gen).tolist():
            if k in taken or digest(k) not in digests:
                continue
            b = bucket_of(k, nb)
            if len(per[b]) < quota:
                per[b].append(k)
                taken.add(k)
    return [k for b in range(nb) for k in per[b]]


# Buckets of <= 128 slots run the first pass compiled for them (kQPlain: 2 digest rounds per lane; 16 and 64 slots
# leave lanes or rounds without a chunk), 256 the general instance.
@pytest.mark.parametrize("bucket,value_dtype,dim", [(128, torch.float32, 32), (256, torch.float16, 8),
                                                    (16, torch.bfloat16, 7), (128, torch.float32, 5),
                                                    (64, torch.float32, 32)])
def test_gpu_digest_neighbours(bucket, value_dtype, dim):
    """Each bucket ~80 % full of keys with digests at or next to the targets; then: find_or_insert of them (new:
    found False, the constant row, one insert each), insert_or_assign of random rows (all assigned), find (all
    found, their rows exactly), find_or_insert of them again shuffled with new keys of target digests (the present
    found with their rows, the new inserted once with the constant row), find of other keys of target digests (none
    found); the size after each step."""
    nb = 4
    cap = nb * bucket
    gen = torch.Generator().manual_seed(zlib.crc32(f"digest{bucket}{dim}".encode()))
    init = float(torch.rand(1, generator=gen).item()) * 4 - 2
    t = ScoredHashTable(cap, dim, value_dtype=value_dtype, bucket_capacity=bucket, device="cuda",
                        initializer=TableInitializer("constant", value=init))
    taken = set()
    quota = max(1, int(0.8 * bucket))
    present = draw(gen, nb, quota, set(NEAR), taken)
    perm = torch.randperm(len(present), generator=gen).tolist()
    present = [present[j] for j in perm]
    new = draw(gen, nb, max(1, (bucket - quota) // 2), set(TARGETS), taken)
    absent = draw(gen, nb, 3, set(TARGETS), taken)
    const = torch.tensor(init).to(value_dtype).float()

    keys = torch.tensor(present, dtype=torch.int64, device="cuda")
    values, found, stats = t.find_or_insert(keys)
    s = stats_dict(stats)
    assert s["inserted"] == len(present) and s["assigned"] == 0 and s["evicted"] == 0
    assert not found.any().item()
    assert torch.equal(values.float().cpu(), const.expand(len(present), dim))
    assert t.size() == len(present)

    rows = (torch.rand(len(present), dim, generator=gen) * 8 - 4).to(value_dtype)
    s = stats_dict(t.insert_or_assign(keys, rows.cuda()))
    assert s["assigned"] == len(present) and s["inserted"] == 0 and s["evicted"] == 0
    assert t.size() == len(present)
    got, found, _ = t.find(keys)
    assert found.all().item()
    assert torch.equal(got.cpu(), rows)

    mixed = present + new
    order = torch.randperm(len(mixed), generator=gen).tolist()
    mixed = [mixed[j] for j in order]
    values, found, stats = t.find_or_insert(torch.tensor(mixed, dtype=torch.int64, device="cuda"))
    s = stats_dict(stats)
    assert s["inserted"] == len(new) and s["assigned"] == len(present) and s["evicted"] == 0
    assert t.size() == len(present) + len(new)
    row_of = dict(zip(present, rows))
    new_set = set(new)
    found, values = found.cpu().tolist(), values.cpu()
    for j, k in enumerate(mixed):
        if k in new_set:
            assert not found[j], k
            assert torch.equal(values[j].float(), const.expand(dim)), k
        else:
            assert found[j], k
            assert torch.equal(values[j], row_of[k]), k
    got, found, _ = t.find(torch.tensor(new, dtype=torch.int64, device="cuda"))
    assert found.all().item() and torch.equal(got.float().cpu(), const.expand(len(new), dim))

    _, found, _ = t.find(torch.tensor(absent, dtype=torch.int64, device="cuda"))
    assert not found.any().item()
