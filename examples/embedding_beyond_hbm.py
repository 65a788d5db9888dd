"""Dynamic embedding tables larger than their HBM budget (CPU or GPU): a caching table over host memory (the uva
store), the same over a disk store (RocksDB, when `rocksdict` is installed), the prefetch pipeline, and a check
that both train exactly like an all-HBM table on the same ids.

    python examples/embedding_beyond_hbm.py [--steps 20] [--disk-dir /tmp/emb_store]

docs/dynamicemb_storage.md explains the modes, their contract and how to choose.
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from dynamicemb import (Adam, BatchedDynamicEmbeddingTables, DiskStoreSpec, DynamicEmbInitializer,
                        DynamicEmbTableOptions, UvaStoreSpec)

DIM, IDS, BATCH = 16, 4000, 256  # two features of BATCH bags, one id each, ids in [0, IDS)


def make(device, storage="hbm", store=None):
    """Two tables of DIM columns (Adam state inline: 3 x DIM floats per row); a caching table keeps 10 % of the
    ids' rows in HBM and every row in its backing store (``store(i)``: table i's store spec)."""
    opts = []
    for i, seed in enumerate((1, 2)):
        kw = dict(storage=storage)
        if storage == "caching":
            kw.update(hbm_budget_bytes=IDS // 10 * 3 * DIM * 4, backing_store=store(i))
        opts.append(DynamicEmbTableOptions(dim=DIM, max_capacity=1 << 13, score_policy="lru",
                                           initializer=DynamicEmbInitializer("uniform", seed=seed), **kw))
    return BatchedDynamicEmbeddingTables(opts, pooling="sum", optimizer=Adam(lr=0.01), device=device)


def batches(steps, device):
    """Power-law ids (a few hot, many cold: what a cache is for), already on the device (the prefetch's fast form)."""
    g = torch.Generator().manual_seed(0)
    weights = 1.0 / torch.arange(1, IDS + 1, dtype=torch.float64) ** 1.05
    for _ in range(steps):
        ids = torch.multinomial(weights, 2 * BATCH, replacement=True, generator=g)
        offsets = torch.arange(0, 2 * BATCH + 1, dtype=torch.int64)
        yield ids.to(device), offsets.to(device), torch.randn(BATCH, 2 * DIM, generator=g).to(device)


def train(m, data):
    """Forward i, prefetch i + 1 (TorchRec's pipeline order), backward i; returns every step's output."""
    outs = []
    for i, (ids, offsets, w) in enumerate(data):
        out = m(ids, offsets)
        if i + 1 < len(data):
            m.prefetch(data[i + 1][0], data[i + 1][1])  # stages the next batch's rows while this step runs
        (out * w).sum().backward()
        outs.append(out.detach())
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--disk-dir", default=None, help="the disk store's directory (default: a temporary one)")
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = list(batches(a.steps, device))
    ref = train(make(device), data)
    cases = [("uva store (host memory)", lambda d: lambda i: UvaStoreSpec())]
    try:
        import rocksdict  # noqa: F401  the disk store's engine (pip install rocksdict)

        cases.append(("disk store (RocksDB)", lambda d: lambda i: DiskStoreSpec(f"{d}/table{i}")))
    except ImportError:
        print("rocksdict is not installed: the disk store case is skipped")
    for name, spec in cases:
        with tempfile.TemporaryDirectory(dir=a.disk_dir) as d:
            m = make(device, "caching", spec(d))
            outs = train(m, data)
            same = all(torch.equal(x, y) for x, y in zip(outs, ref))
            moved = [t.rows_moved for t in m.tables]  # [rows into the cache, rows written back] per table
            print(f"{name} on {device}: {len(outs)} steps, outputs bit-identical to all-HBM: {same}; rows moved "
                  f"(in, out) per table: {moved}")
            if not same:
                raise SystemExit(f"{name}: the caching table's outputs differ from the all-HBM table's")
            del m


if __name__ == "__main__":
    main()
