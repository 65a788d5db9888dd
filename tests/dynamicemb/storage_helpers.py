"""Shared helpers of the storage-tier tests (test_storage_cpu.py, test_storage_gpu.py)."""

import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._optimizers import Adam
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions

try:
    import rocksdict  # noqa: F401

    HAVE_ROCKS = True
except ImportError:
    HAVE_ROCKS = False

DIM, CAP, BC = 4, 1024, 16
CACHE_SLOTS = 128


def make(storage="hbm", opt=None, stores=(None, None), device="cpu", budget_rows=CACHE_SLOTS, total=None,
         admission=0, policies=("lru", "lfu")):
    row = (opt or Adam(lr=0.01)).row_width(DIM) * 4
    kw = dict(storage=storage)
    if storage != "hbm" and total is None:
        kw["hbm_budget_bytes"] = budget_rows * row
    opts = [DynamicEmbTableOptions(dim=DIM, max_capacity=CAP, bucket_capacity=BC, score_policy=p,
                                   initializer=DynamicEmbInitializer("uniform", seed=3 + i),
                                   backing_store=stores[i] if storage == "caching" else None,
                                   admission_threshold=admission, **kw)
            for i, p in enumerate(policies)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1, 1], pooling="sum", optimizer=opt or Adam(lr=0.01),
                                         device=device, hbm_budget_bytes=total)


def batches(n, seed=0, hi=300, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        ids = torch.randint(0, hi, (90,), generator=g)
        yield ids.to(device), torch.arange(0, 91, 6).to(device), torch.randn(5, 3 * DIM, generator=g).to(device)


def step(m, ids, off, w):
    out = m(ids, off)
    (out * w).sum().backward()
    return out


def rows(table):
    k, v, s = table.items()
    o = torch.argsort(k.view(torch.int64))
    return k[o].cpu(), v[o].cpu(), s[o].cpu()


def assert_same(a, b):
    assert a.sizes() == b.sizes()
    for ta, tb in zip(a.tables, b.tables):
        for x, y in zip(rows(ta), rows(tb)):
            assert torch.equal(x.view(torch.uint8) if x.is_floating_point() else x,
                               y.view(torch.uint8) if y.is_floating_point() else y)
    assert torch.equal(a.step, b.step)


def disk(tmp_path, tag=""):
    return (str(tmp_path / f"s0{tag}"), str(tmp_path / f"s1{tag}"))
