"""Dynamic embedding tables larger than their HBM budget (CPU or GPU): a hybrid table (the rows beyond its budget in
pinned host memory), a caching table over host memory (the uva store), the same over a disk store (RocksDB, when
`rocksdict` is installed) that is flushed, closed and reopened half-way (a process restart), the prefetch pipeline,
and a check that every one trains exactly like an all-HBM table on the same ids.

    python examples/embedding_beyond_hbm.py [--steps 20] [--disk-dir /tmp/emb_store]

docs/dynamicemb_storage.md explains the modes, their contract and how to choose.
"""

from __future__ import annotations

import argparse
import gc
import tempfile

import torch

from dynamicemb import (Adam, BatchedDynamicEmbeddingTables, DiskStoreSpec, DynamicEmbInitializer,
                        DynamicEmbTableOptions, UvaStoreSpec)

DIM, IDS, BATCH = 16, 4000, 256  # two features of BATCH bags, one id each, ids in [0, IDS)


def make(device, storage="hbm", store=None):
    """Two tables of DIM columns (Adam state inline: 3 x DIM floats per row); a hybrid or caching table keeps 10 %
    of the ids' rows in HBM: hybrid the rest in pinned host memory, caching every other row in its backing store
    (``store(i)``: table i's store spec)."""
    opts = []
    for i, seed in enumerate((1, 2)):
        kw = dict(storage=storage)
        if storage != "hbm":
            kw.update(hbm_budget_bytes=IDS // 10 * 3 * DIM * 4)
        if storage == "caching":
            kw.update(backing_store=store(i))
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


def restarted(device, data, d):
    """Trains a caching table over disk stores in directory ``d`` for half of ``data``, flushes it (every cached row
    into its store, with the op clock) and drops it, as a process that exits; then builds it again over the same
    directories (``create=False``: the stores must be there) and trains on. The optimizer's step count is module
    state: a real restart takes it from a checkpoint (``state_dict`` / ``dump``); here it is carried over by hand."""
    half = len(data) // 2
    m = make(device, "caching", lambda i: DiskStoreSpec(f"{d}/table{i}"))
    outs = train(m, data[:half])
    m.flush_storage()
    step = m.step.clone()
    del m
    gc.collect()  # the module's stores close (RocksDB lets one store at a time open a directory)
    m = make(device, "caching", lambda i: DiskStoreSpec(f"{d}/table{i}", create=False))
    m.step.copy_(step)
    return outs + train(m, data[half:]), m


def trained(m, data):
    return train(m, data), m


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--disk-dir", default=None, help="the disk store's directory (default: a temporary one)")
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = list(batches(a.steps, device))
    ref = train(make(device), data)
    cases = [("hybrid (rows beyond the budget in host memory)", lambda d: trained(make(device, "hybrid"), data)),
             ("uva store (host memory)", lambda d: trained(make(device, "caching", lambda i: UvaStoreSpec()), data))]
    try:
        import rocksdict  # noqa: F401  the disk store's engine (pip install rocksdict)

        cases.append(("disk store (RocksDB)", lambda d: trained(
            make(device, "caching", lambda i: DiskStoreSpec(f"{d}/table{i}")), data)))
        cases.append(("disk store, closed and reopened half-way", lambda d: restarted(device, data, d)))
    except ImportError:
        print("rocksdict is not installed: the disk store cases are skipped")
    for name, run in cases:
        with tempfile.TemporaryDirectory(dir=a.disk_dir) as d:
            outs, m = run(d)
            same = len(outs) == len(ref) and all(torch.equal(x, y) for x, y in zip(outs, ref))
            # caching: [rows into the cache, rows written back] per table (since the module was built)
            moved = f"; rows moved (in, out) per table: {[t.rows_moved for t in m.tables]}" if hasattr(
                m.tables[0], "rows_moved") else ""
            print(f"{name} on {device}: {len(outs)} steps, outputs bit-identical to all-HBM: {same}{moved}")
            if not same:
                raise SystemExit(f"{name}: the outputs differ from the all-HBM table's")
            del m


if __name__ == "__main__":
    main()
