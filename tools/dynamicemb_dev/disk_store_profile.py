"""Where the disk store's time goes on a caching table's staging path (issue 32; docs/dynamicemb_storage.md).

Per store variant (``--variant NAME=MODULE_OR_FILE[@SWITCH=INT]``: the ``_storage`` module whose ``DiskStore`` is
measured, ``dynamicemb._storage`` or a path to a copy of it, with its private switches set), ``--tables`` stores
of ``--rows`` rows (D ``--dim`` fp32 plus an 8-byte score) are filled, closed, dropped from the page cache and reopened; then ``--rounds`` staging rounds as
``_staging.stage_tables`` issues them: per table ``find`` of ``--miss`` distinct stored keys (the rows moved into
the cache) then one ``write`` putting ``--miss`` new keys (the evicted rows) and erasing the found keys, the
tables' calls in a thread pool like the staging's (``--serial``: one after another). Prints per round ms of the
finds and writes (round 0: the cold set), rows/s, then a cProfile of ``--profile-rounds`` more rounds run serially
(the top functions by own time: what a fix can remove).

Usage:
    python tools/dynamicemb_dev/disk_store_profile.py [--variant main=dynamicemb._storage] [--rows 100000]
        [--tables 10] [--miss 1200] [--rounds 12] [--profile-rounds 6] [--dim 128]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import importlib.util
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "..", "benchmarks")]
from embedding_tiers import drop_file_cache  # noqa: E402  (c)'s page-cache drop: the cold set


def load(tag, spec):
    """The module of ``spec`` (a module name or a .py file, then ``@ATTR=INT`` settings of its private switches)."""
    spec, *sets = spec.split("@")
    if spec.endswith(".py"):
        name = f"_disk_variant_{tag}"
        s = importlib.util.spec_from_file_location(name, spec)
        m = importlib.util.module_from_spec(s)
        sys.modules[name] = m  # dataclasses look their module up
        s.loader.exec_module(m)
    else:
        m = importlib.import_module(spec)
    for kv in sets:
        k, v = kv.split("=")
        setattr(m, k, type(getattr(m, k))(int(v)))
    return m


def run_variant(name, mod, a, pool):
    d = tempfile.mkdtemp(prefix="disk_store_profile_")
    gen = torch.Generator().manual_seed(3)
    try:
        paths = [os.path.join(d, f"t{i}") for i in range(a.tables)]
        t0 = time.perf_counter()
        for p in paths:
            s = mod.DiskStore(p, torch.int64, a.dim, torch.float32)
            for off in range(0, a.rows, 50_000):
                k = torch.arange(off, min(off + 50_000, a.rows))
                s.insert(k, torch.randn(k.numel(), a.dim), k)
            s.close()
        ins = a.tables * a.rows / (time.perf_counter() - t0)
        dropped = sum(drop_file_cache(p) for p in paths)
        stores = [mod.DiskStore(p, torch.int64, a.dim, torch.float32, create=False) for p in paths]
        stored = [torch.arange(a.rows) for _ in paths]  # the keys each store holds (kept as a permutation)
        nxt = [a.rows] * a.tables

        def round_args():
            out = []
            for i in range(a.tables):
                perm = torch.randperm(stored[i].numel(), generator=gen)
                take, keep = perm[:a.miss], perm[a.miss:]
                keys = stored[i][take]
                new = torch.arange(nxt[i], nxt[i] + a.miss)
                nxt[i] += a.miss
                stored[i] = torch.cat([stored[i][keep], new])
                out.append((keys, new, torch.randn(a.miss, a.dim), new.clone()))
            return out

        def one_round(serial):
            args = round_args()
            fmap = (lambda f, xs: list(map(f, xs))) if serial else pool.map
            t0 = time.perf_counter()
            found = list(fmap(lambda i: stores[i].find(args[i][0]).found, range(a.tables)))
            t1 = time.perf_counter()
            list(fmap(lambda i: stores[i].write(args[i][1], args[i][2], args[i][3], args[i][0]), range(a.tables)))
            t2 = time.perf_counter()
            assert all(bool(f.all()) for f in found), "a stored key was not found"
            return (t1 - t0) * 1e3, (t2 - t1) * 1e3

        res = [one_round(a.serial) for _ in range(a.rounds)]
        prof = cProfile.Profile()
        prof.enable()
        ser = [one_round(True) for _ in range(a.profile_rounds)]
        prof.disable()
        for s in stores:
            assert s.size() == a.rows, (s.size(), a.rows)
            s.close()
        warm_f = statistics.median(r[0] for r in res[1:])
        warm_w = statistics.median(r[1] for r in res[1:])
        n = a.tables * a.miss
        print(f"| {name} | {ins:,.0f} | {res[0][0]:.1f} ({n / res[0][0] * 1e3:,.0f}) | "
              f"{warm_f:.2f} ({n / warm_f * 1e3:,.0f}) | {res[0][1]:.1f} | {warm_w:.2f} ({n / warm_w * 1e3:,.0f}) | "
              f"{statistics.median(r[0] for r in ser):.2f} / {statistics.median(r[1] for r in ser):.2f} | "
              f"{dropped / 1e6:.0f} |", flush=True)
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(a.top)
        lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
        prof_text = "\n".join([f"cProfile {name}: {a.profile_rounds} serial rounds ({lines[start - 1].strip()})"]
                              + lines[start:start + 1 + a.top])
        return prof_text
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", default=None, help="NAME=MODULE_OR_FILE[@SWITCH=INT...] (repeatable)")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--miss", type=int, default=1200, help="rows moved per table and round (each way)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--profile-rounds", type=int, default=6)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--serial", action="store_true", help="the tables' calls one after another (no thread pool)")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in (a.variant or ["main=dynamicemb._storage"])]
    pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
    print(f"disk store staging rounds: {a.tables} stores x {a.rows:,} rows of D{a.dim} fp32; per round and table "
          f"find {a.miss} stored keys, then one write of {a.miss} new rows + {a.miss} erasures; tables "
          f"{'serial' if a.serial else 'in a thread pool of ' + str(pool._max_workers)}; {os.cpu_count()} CPUs\n")
    print("| variant | insert rows/s | round 0 (cold) find ms (rows/s) | warm find ms (rows/s) | round 0 write ms | "
          "warm write ms (rows/s) | serial find / write ms (profiled rounds) | MB dropped |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    profs = [run_variant(n, load(i, m), a, pool) for i, (n, m) in enumerate(variants)]
    print()
    for p in profs:
        print(p)
        print()


if __name__ == "__main__":
    main()
