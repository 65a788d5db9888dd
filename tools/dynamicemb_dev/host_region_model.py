"""Counts the host rows and the distinct 64 KB host regions that each hybrid-table op touches at HierarchicalKV's
hybrid config (dim 64 fp32: 256-byte rows, 128M slots in 2^20 buckets of 128, the first 64 slots of every bucket in
HBM, 1M keys per op at hit rate 0.6 or all hits), for three placements of the host rows (issue 32,
docs/dynamicemb_storage_notes.md "The inserting ops of the hybrid table: host regions"):

- ``bucket-major``: host row ``b * 64 + j - 64`` (the default): a bucket's 64 host rows are 16 KB, so every host row
  of bucket b is in region b // 4 whatever its slot;
- ``slot-major`` (``HybridTable(_slot_major=True)``: host row ``(j - 64) * num_buckets + b``, host slots claimed
  lowest first): a bucket's k-th host row is in run k (256 MB), so a batch's rows fall in the first runs;
- ``slot-major, probe order`` (the same layout with the claims of bucket-major tables: a host slot from the
  key's random start): about half of the host rows at a uniform slot of 64..127 (start >= 64), half low
  (approximated: first fit);
- ``pool`` (not built: a slot -> row index in HBM, rows from a dense pool, new rows bump-allocated in claim order):
  the stored host rows are the pool's first rows, a batch's new rows one contiguous range after them.

The table is filled with uniform keys to the load factor (HBM slots first, in fill order), a batch's hits are
stored keys drawn uniformly, its new keys land in a uniform bucket: in host memory when the bucket's HBM slots are
full (at load 1.0 they evict: a random slot of the bucket, the same under every placement but the pool's bump).
The cost model (sessions 10-14, uva_probe sparse and the cold move pass): ~25 ns per distinct 64 KB region over
the 16 GB, the bytes (~52 GB/s) a floor; ``t0`` of each op is fitted to the measured bucket-major time.

Usage: python tools/dynamicemb_dev/host_region_model.py [--buckets 1048576] [--load 0.5] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

B, H, ROW, REGION = 128, 64, 256, 1 << 16
PER_REGION = REGION // ROW  # 256 rows of 256 bytes
# measured (H200, session 10 call 11, load 0.5, hit rate 0.6, ms): bucket-major hybrid table
LAYOUTS = ("bucket-major", "slot-major, probe order", "slot-major", "pool")
MEASURED = {"find": 1.32, "find_or_insert": 5.32, "insert_or_assign": 5.53, "assign": 1.55}
HKV = {"find": 0.193, "find_or_insert": 0.153, "insert_or_assign": 0.154, "assign": 0.189}  # 2^30 KV/s


def regions(rows: np.ndarray) -> int:
    return int(np.unique(rows // PER_REGION).size) if rows.size else 0


def model(nb: int, load: float, n: int, hit_rate: float, rng) -> dict:
    counts = rng.poisson(load * B, nb).clip(max=B)  # keys per bucket after the fill (HBM slots first)
    host_n = np.maximum(counts - H, 0)
    host_start = np.concatenate([[0], np.cumsum(host_n)[:-1]])  # pool: the stored host rows packed, bucket order
    stored = int(counts.sum())
    total_host = int(host_n.sum())
    out = {"stored": stored, "host share": total_host / stored}
    nh = int(n * hit_rate)
    # hits: stored keys drawn uniformly: a bucket by its count, a rank (fill order) uniform in it
    p = counts / counts.sum()
    hb = rng.choice(nb, size=nh, p=p)
    rank = (rng.random(nh) * counts[hb]).astype(np.int64)
    hit_host = rank >= H
    hb, rank = hb[hit_host], rank[hit_host]
    hj = np.where(rng.random(hb.size) < 0.5, rng.integers(H, B, hb.size), rank)  # probe order: start >= 64
    hit_rows = {"bucket-major": hb * (B - H) + rank - H, "slot-major": (rank - H) * nb + hb,
                "slot-major, probe order": (hj - H) * nb + hb, "pool": host_start[hb] + rank - H}
    # new keys: a uniform bucket each, in host memory when its HBM part is full; slot = its count (first fit)
    nm = n - nh
    mb = rng.integers(0, nb, nm)
    order = np.argsort(mb, kind="stable")
    mbs = mb[order]
    first = np.searchsorted(mbs, mbs, side="left")
    k = np.arange(nm) - first  # the key's rank among this batch's new keys of its bucket
    c = counts[mbs] + k
    if load >= 1.0:  # full buckets evict a random slot: the host part when the victim's slot is a host slot
        j = rng.integers(0, B, nm)
        host = j >= H
        jb, bb = j[host], mbs[host]
        new_rows = {"bucket-major": bb * (B - H) + jb - H, "slot-major": (jb - H) * nb + bb,
                    "slot-major, probe order": (jb - H) * nb + bb,
                    "pool": rng.integers(0, total_host, host.sum())}  # the victim's row reused (no free bump)
    else:
        host = (c >= H) & (c < B)
        cb, bb = c[host], mbs[host]
        pj = np.where(rng.random(cb.size) < 0.5, rng.integers(H, B, cb.size), cb)
        new_rows = {"bucket-major": bb * (B - H) + cb - H, "slot-major": (cb - H) * nb + bb,
                    "slot-major, probe order": (pj - H) * nb + bb, "pool": total_host + np.arange(int(host.sum()))}
    out["host rows per key"] = {"hits": hit_host.sum() / n, "new": host.sum() / n}
    for lay in LAYOUTS:
        hr, nr = hit_rows[lay], new_rows[lay]
        out[lay] = {"find": regions(hr), "assign": regions(hr),
                    "find_or_insert": regions(np.concatenate([hr, nr])),
                    "insert_or_assign": regions(np.concatenate([hr, nr])),
                    "new rows only": regions(nr)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--buckets", type=int, default=1 << 20)
    ap.add_argument("--load", default="0.5,1.0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ns-per-region", type=float, default=25.0)
    a = ap.parse_args()
    n = 1 << 20
    for load in [float(x) for x in a.load.split(",")]:
        rng = np.random.default_rng(a.seed)
        r = model(a.buckets, load, n, 0.6, rng)
        hr = r["host rows per key"]
        print(f"\n### load {load}: {r['stored']} stored keys, {100 * r['host share']:.1f} % in host slots; host rows "
              f"per key (hit rate 0.6): hits {hr['hits']:.3f}, new {hr['new']:.3f}\n")
        print("| op | host rows per key | MB crossing | " + " | ".join(f"regions {x}" for x in LAYOUTS) + " | "
              "model ms (" + " / ".join(LAYOUTS) + ") | x HKV (2^30) |")
        print("|---|---:|---:|" + "---:|" * len(LAYOUTS) + "---|---|")
        for op in ("find", "find_or_insert", "insert_or_assign", "assign"):
            per_key = hr["hits"] + (hr["new"] if op in ("find_or_insert", "insert_or_assign") else 0)
            mb = per_key * n * ROW / 1e6
            reg = [r[lay][op] for lay in LAYOUTS]
            ms, xs = "", ""
            if load == 0.5:  # t0: the measured bucket-major time less its regions' share
                t0 = MEASURED[op] - a.ns_per_region * reg[0] * 1e-6
                t = [max(t0 + a.ns_per_region * x * 1e-6, t0 + mb / 52e3) for x in reg]
                ms = " / ".join(f"{m:.2f}" for m in t)
                xs = " / ".join(f"{n * 1e3 / m / (1 << 30) / HKV[op]:.2f}" for m in t)
            print(f"| {op} | {per_key:.3f} | {mb:.1f} | " + " | ".join(str(x) for x in reg) + f" | {ms} | {xs} |")
        print("\nnew rows alone (find_or_insert): " + ", ".join(f"{x} {r[x]['new rows only']}" for x in LAYOUTS)
              + " regions")

if __name__ == "__main__":
    main()
