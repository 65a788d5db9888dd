"""Helpers shared by the scored hash table tests: the table's hash and bucket mapping in pure Python."""

import torch

from dynamicemb._hash import fmix64  # pure Python: an oracle independent of the C++/CUDA hash

MASK64 = (1 << 64) - 1
EMPTY_DIGEST = (fmix64(1 << 63) >> 32) & 0xFF  # the digest of free slots (table_types.h empty_digest)


def gpu_table_marks():
    """pytestmark of a GPU table test file: needs a CUDA device and the built dynamicemb/_C.so."""
    import pytest

    from dynamicemb._load import load_library
    return [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
            pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")]


def bucket_of(key: int, num_buckets: int) -> int:
    """Bucket of a key (bit pattern as a Python int) in a table of `num_buckets` buckets."""
    return (fmix64(key) * num_buckets) >> 64


def keys_in_bucket(bucket: int, num_buckets: int, count: int, start: int = 1):
    """The first `count` positive keys >= start that map to `bucket`."""
    out, k = [], start
    while len(out) < count:
        if bucket_of(k, num_buckets) == bucket:
            out.append(k)
        k += 1
    return out


def one_per_bucket(keys, num_buckets):
    """Keeps the first key of each bucket (so a batch has no contention for one bucket)."""
    seen, out = set(), []
    for k in keys:
        b = bucket_of(k & MASK64, num_buckets)
        if b not in seen:
            seen.add(b)
            out.append(k)
    return out


def full_buckets(num_buckets, bucket_capacity, gen):
    """Distinct random positive keys, exactly `bucket_capacity` per bucket, bucket by bucket (drawn from `gen`)."""
    per = {b: [] for b in range(num_buckets)}
    while min(len(v) for v in per.values()) < bucket_capacity:
        for k in torch.randint(1, 1 << 62, (4096,), generator=gen).tolist():
            b = bucket_of(k, num_buckets)
            if len(per[b]) < bucket_capacity and k not in per[b]:
                per[b].append(k)
    return torch.tensor([k for b in range(num_buckets) for k in per[b]], dtype=torch.int64)


def key_tensor(keys, dtype, device="cpu"):
    """Python ints (bit patterns for uint64) to a key tensor."""
    signed = [k - (1 << 64) if k >= 1 << 63 else k for k in (x & MASK64 for x in keys)]
    return torch.tensor(signed, dtype=torch.int64, device=device).view(dtype)


def table_items(table):
    """{key bits: (row, score)} of everything stored (host)."""
    k, v, s = table.items()
    kk = k.view(torch.int64).cpu().tolist()
    return {key & MASK64: (v[i].float().cpu(), s[i].item()) for i, key in enumerate(kk)}


def stats_dict(stats):
    from dynamicemb._table import STAT_NAMES

    return dict(zip(STAT_NAMES, stats.cpu().tolist()))
