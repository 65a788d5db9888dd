"""The scored hash table's inserting ops under private options, side by side in one process (issue 35).

For each key stream and load factor one table is filled as `benchmarks/hash_table.py --fill hkv` does (dim 32, fp32,
uint64 keys, LRU); then per op and repetition every variant runs on the same batch from the same snapshot of the
table (restored before each run), variants interleaved, CUDA events around the op behind a queued sleep (device
time, as hash_table.py). Prints billion KV/s (median) per variant and its ratio to the first.

    python tools/dynamicemb_dev/table_ab.py --variants main set --lambdas 0.5 1.0 --dists uniform zipf

Variants: `default` (the class's own options: the product's path), `main` (the options off), `set` (ScoredHashTable._upsert_dedup: the first-writer set, chosen per batch
on the device), and any name in LAB (bits of ScoredHashTable._upsert_lab, when the build has it), joined by `+`.
`--ops` picks the ops (find: the lookup, beside them for reference); `--bound` adds each cell's fraction of the byte
bound (hash_table.py's op_bytes at its measured copy bandwidth).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from hash_table import Timer, copy_bandwidth, fill_table, op_bytes, rate  # noqa: E402

from dynamicemb._table import ScoredHashTable  # noqa: E402

OPS = ["find_or_insert", "insert_or_assign", "insert_and_evict", "assign"]
# dynamic / static / wide: the insert pass's variant forced for every op (dynamic: the plain eviction scan; wide:
# dynamic with the wide scan, the default since session 33); copiers: the LRU assign by the row copiers' two passes
# (bits 4-7 = 1) instead of its own kernel (the default since session 34)
LAB = {"pdl": 1, "dynamic": 2, "static": 4, "wide": 6, "copiers": 16}


_CLASS_LAB = getattr(ScoredHashTable, "_upsert_lab", None)  # the build's default path


def set_variant(name):
    if name == "default":  # the class's own options (the product's default path)
        ScoredHashTable._upsert_dedup = False
        if _CLASS_LAB is not None:
            ScoredHashTable._upsert_lab = _CLASS_LAB
        return
    parts = set(name.split("+")) - {"main"}
    ScoredHashTable._upsert_dedup = "set" in parts
    lab = 0
    for p in parts - {"set"}:
        lab |= LAB[p]
    if lab or hasattr(ScoredHashTable, "_upsert_lab"):
        ScoredHashTable._upsert_lab = lab


def run(capacity, lam, zipf, variants, reps, batch=1 << 20, dim=32, fill="hkv", ops=OPS):
    dev = "cuda"
    set_variant(variants[0])
    t = ScoredHashTable(capacity, dim, value_dtype=torch.float32, key_dtype=torch.uint64, device=dev,
                        check_keys=False, max_capacity=capacity)
    g = torch.Generator(device=dev).manual_seed(0)
    pool = fill_table(t, capacity, lam, batch, fill, g)
    vals = torch.randn(batch, dim, device=dev)
    real = t.load_factor()

    def make_batch(i):
        nh = int(batch * 0.6)
        if zipf:
            import numpy as np

            ranks = torch.from_numpy((np.random.default_rng(i).zipf(1.05, size=nh) - 1) % pool.numel()).to(dev)
            hits = pool[ranks]
        else:
            hits = pool[torch.randperm(pool.numel(), device=dev, generator=g)[:nh]]
        miss = torch.randint(1 << 62, (1 << 63) - 1, (batch - nh,), device=dev, generator=g)
        k = torch.cat([hits, miss])
        return k[torch.randperm(batch, device=dev, generator=g)].view(torch.uint64).contiguous()

    batches = [make_batch(i) for i in range(reps + 1)]
    snap = {n: x.clone() for n, x in t.state_dict().items() if isinstance(x, torch.Tensor) and x.dim()}
    out = torch.empty(batch, dim, device=dev)
    found = torch.empty(batch, dtype=torch.bool, device=dev)
    ek = torch.empty(batch, dtype=torch.uint64, device=dev)
    ev = torch.empty(batch, dim, device=dev)
    es = torch.empty(batch, dtype=torch.int64, device=dev)
    times = {(op, v): [] for op in ops for v in variants}
    for op in ops:
        for i, k in enumerate(batches):
            for v in variants:
                for n, x in snap.items():
                    getattr(t, n).copy_(x)
                set_variant(v)
                tm = Timer()
                with tm:
                    if op == "find":
                        t._lookup(k, out, found)
                    elif op == "find_or_insert":
                        t._upsert(op, k, values_out=out, found_out=found)
                    elif op == "insert_and_evict":
                        t._upsert(op, k, values=vals, evicted=(ek, ev, es))
                    else:
                        t._upsert(op, k, values=vals)
                ms = tm.ms()
                if i > 0:
                    times[(op, v)].append(ms)
    del t, snap
    torch.cuda.empty_cache()
    return real, {key: rate(batch, ts) for key, ts in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["main", "set"])
    ap.add_argument("--lambdas", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--dists", nargs="+", default=["uniform", "zipf"], choices=["uniform", "zipf"])
    ap.add_argument("--capacity", type=int, default=1 << 26)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dims", type=int, nargs="+", default=[32], help="value dims (fp32), a table each")
    ap.add_argument("--fill", default="hkv", choices=["hkv", "once"],
                    help="hash_table.py's fill: hkv (topped up to the load, hits from the last 1M keys) or once")
    ap.add_argument("--ops", nargs="+", default=OPS, choices=OPS + ["find"])
    ap.add_argument("--bound", action="store_true", help="each cell's fraction of the byte bound")
    a = ap.parse_args(argv)
    bw = copy_bandwidth("cuda") if a.bound else None
    print(f"{torch.cuda.get_device_name()}; capacity {a.capacity}, dims {a.dims}, 1M keys/op, {a.reps} reps, "
          f"billion KV/s (ratio to {a.variants[0]})" + (f"; [fraction of the byte bound at {bw / 1e12:.2f} TB/s]"
                                                          if bw else ""))
    print("| keys, load | variant | " + " | ".join(a.ops) + " |")
    print("|---|---|" + "---|" * len(a.ops))
    for dim in a.dims:
        for d in a.dists:
            for lam in a.lambdas:
                real, r = run(a.capacity, lam, d == "zipf", a.variants, a.reps, dim=dim, fill=a.fill, ops=a.ops)
                for v in a.variants:
                    cells = []
                    for op in a.ops:
                        x, b = r[(op, v)], r[(op, a.variants[0])]
                        cells.append(f"{x:.3f}" + ("" if v == a.variants[0] else f" ({x / b:.3f})")
                                     + (f" [{x * 1e9 * op_bytes(op, dim, 0.6, lam) / bw:.0%}]" if bw else ""))
                    print(f"| {d} {lam} ({real:.3f}) dim {dim} | {v} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
