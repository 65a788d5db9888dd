"""Scored hash table throughput (HierarchicalKV-style grid).

Keys uint64, values fp32 of dim {8, 32, 64}, 1M keys per op, load factor lambda in {0.5, 0.75, 1.0}, hit rate
0.6, uniform and Zipf(1.05) key streams; capacity 128M slots for dim 8 and 32, 64M for dim 64 (HKV's grid; the
quick run and --capacity use one capacity). Reports billion key-values per second and the fraction of the
measured device-to-device copy bandwidth implied by the bytes each op must move.

Timing: CUDA events around one op, median over the repetitions. Before the start event the stream is kept busy
for ~0.2 ms (torch.cuda._sleep) so that the op's kernels are already queued when the start event fires: the
numbers are device time of the op, without the Python call's host overhead (which overlaps device work in a
training step, where ops are queued ahead).

    python benchmarks/hash_table.py --quick
    python benchmarks/hash_table.py --results benchmarks/RESULTS.md                 # the full grid
    python benchmarks/hash_table.py --dims 8 32 --dists uniform --results ...      # a slice of it
    python benchmarks/hash_table.py --dists uniform --peer-hkv BINARY               # beside HierarchicalKV

--peer-hkv BINARY runs HierarchicalKV's own benchmark (built by tools/peer/build_hkv_benchmark.sh: the slice of its
pure-HBM grid given by --dims / --lambdas and the five compared ops; HKV's plain binary runs its whole grid, see
benchmarks/hkv_peer.py) before ours, times each of our ops both ways (device time as above, and HKV's way: a host
clock around the call and a stream synchronize) and prints one table of ours, HKV's and the ratios.
"""

import argparse
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hkv_peer  # noqa: E402

# An installed wheel (PYTHONPATH) wins; the source tree is the fallback (it has no _C.so unless built in place).
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dynamicemb._table import ScoredHashTable, TableInitializer  # noqa: E402

OPS = ["find", "find_or_insert", "insert_or_assign", "insert_and_evict", "assign", "export_batch"]


def copy_bandwidth(dev):
    """Measured device-to-device copy bandwidth in bytes/s (read + write)."""
    n = 1 << 28
    a = torch.empty(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        b.copy_(a)
    e.record()
    torch.cuda.synchronize()
    return 2 * 4 * n * 10 / (s.elapsed_time(e) / 1e3)


def op_bytes(op, dim, hit, lam=0.5):
    """Fewest bytes an op moves per key: key in, 128 digests, one key sector, score, row traffic; new keys write
    key and digest; assign touches present keys only; insert_and_evict writes evicted key, score and row only
    when the table is full (lam >= 1: every miss evicts)."""
    row = 4 * dim
    base = 8 + 128 + 32
    if op == "find":
        return base + hit * 2 * row + 1
    if op == "find_or_insert":
        return base + 8 + 2 * row + 1 + (1 - hit) * (8 + 1)  # read or init row + write out; score; new key
    if op == "insert_or_assign":
        return base + 8 + 2 * row + (1 - hit) * (8 + 1)
    if op == "assign":
        return base + hit * (8 + 2 * row)
    if op == "insert_and_evict":
        evicted = (1 - hit) * (row + 16) if lam >= 1.0 else 0.0
        return base + 8 + 2 * row + (1 - hit) * (8 + 1) + evicted
    if op == "export_batch":
        return 8 + 8 + (row + 16)  # per slot scanned at lambda; approximate
    return base


class Timer:
    """Events around a region; the stream sleeps first so the region's launches queue up behind the start event."""

    SLEEP_CYCLES = 400_000  # ~0.2 ms at the H100/H200 boost clock, longer than one op's host overhead
    queue_ahead = True  # False (--no-queue-ahead): start from an idle stream, host overhead included

    def __init__(self):
        self.s, self.e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def __enter__(self):
        if self.queue_ahead:
            torch.cuda._sleep(self.SLEEP_CYCLES)
        self.s.record()

    def __exit__(self, *a):
        self.e.record()

    def ms(self):
        torch.cuda.synchronize()
        return self.s.elapsed_time(self.e)


class HostTimer:
    """HierarchicalKV's method: a host clock around the call and a stream synchronize, from an idle stream."""

    def __enter__(self):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def __exit__(self, *a):
        torch.cuda.synchronize()
        self.t1 = time.perf_counter()

    def ms(self):
        return (self.t1 - self.t0) * 1e3


def rate(batch, times_ms):
    """billion KV/s of the median time."""
    times = sorted(times_ms)
    return batch / (times[len(times) // 2] / 1e3) / 1e9


def fill_table(t, capacity, lam, batch, fill, g):
    """Inserts capacity * lam random keys into table t (batches of `batch`; fill "hkv" then tops it up with new
    keys until its load factor is within 0.001 of lam, see bench_config). Returns the pool the hits are drawn from:
    every key inserted ("once") or the last `batch` keys inserted ("hkv")."""
    dev = t.device
    n_fill = int(capacity * lam)
    stored = torch.randint(1, 1 << 62, (n_fill,), device=dev, generator=g)  # distinct w.h.p.; below 2**63
    vals = torch.randn(batch, t.value_dim, device=dev)
    for off in range(0, n_fill, batch):
        k = stored[off : off + batch].view(torch.uint64)
        t._upsert("insert_or_assign", k, values=vals[: k.numel()])
    if fill != "hkv":
        return stored
    extra = []
    for _ in range(1000):
        deficit = int((lam - t.load_factor()) * capacity)
        if deficit <= 0.001 * capacity:
            break
        k = torch.randint(1, 1 << 62, (min(batch, deficit),), device=dev, generator=g)
        t._upsert("insert_or_assign", k.view(torch.uint64), values=vals[: k.numel()])
        extra.append(k)
    return torch.cat([stored] + extra)[-batch:]


def bench_config(capacity, dim, lam, batch, reps, zipf=False, dev="cuda", initializer="constant", host=False,
                 fill="once", info=None):
    """{op: billion KV/s} by device time; with host=True also {op: billion KV/s} by HostTimer (each batch's op is
    then run twice, the table restored after each), as (device, host).

    fill: "once" inserts capacity * lam keys once (at lam 1.0 buckets that overflow evict, so the table ends below
    full and part of the hits miss) and draws the hits from all of them; "hkv" then tops the table up with new keys
    until its load factor is within 0.001 of lam, as HierarchicalKV's benchmark does, and draws distinct hits from
    the last `batch` keys inserted (all present under LRU). info (a dict): gets the real load factor after the fill
    and the fraction of the first batch's keys found."""
    t = ScoredHashTable(capacity, dim, value_dtype=torch.float32, key_dtype=torch.uint64, device=dev,
                        check_keys=False, max_capacity=capacity, initializer=TableInitializer(initializer))
    g = torch.Generator(device=dev).manual_seed(0)
    pool = fill_table(t, capacity, lam, batch, fill, g)
    torch.cuda.synchronize()
    results, host_results = {}, {}

    def make_batch(i):
        nh = int(batch * 0.6)
        if zipf:
            import numpy as np

            rng = np.random.default_rng(i)
            ranks = torch.from_numpy((rng.zipf(1.05, size=nh) - 1) % pool.numel()).to(dev)
            hits = pool[ranks]
        elif fill == "hkv" and pool.numel() >= nh:
            hits = pool[torch.randperm(pool.numel(), device=dev, generator=g)[:nh]]
        else:
            hits = pool[torch.randint(0, pool.numel(), (nh,), device=dev, generator=g)]
        miss = torch.randint(1 << 62, (1 << 63) - 1, (batch - nh,), device=dev, generator=g)
        k = torch.cat([hits, miss])
        return k[torch.randperm(batch, device=dev, generator=g)].view(torch.uint64).contiguous(), miss

    batches = [make_batch(i) for i in range(reps + 1)]
    values_out = torch.empty(batch, dim, device=dev)
    found = torch.empty(batch, dtype=torch.bool, device=dev)
    ek = torch.empty(batch, dtype=torch.uint64, device=dev)
    ev = torch.empty(batch, dim, device=dev)
    es = torch.empty(batch, dtype=torch.int64, device=dev)
    in_vals = torch.randn(batch, dim, device=dev)
    if info is not None:
        info["real_lambda"] = t.load_factor()
        t._lookup(batches[0][0], values_out, found)
        info["hits"] = found.float().mean().item()

    def call(op, i, k):
        if op == "find":
            t._lookup(k, values_out, found)
        elif op == "find_or_insert":
            t._upsert("find_or_insert", k, values_out=values_out, found_out=found)
        elif op == "insert_or_assign":
            t._upsert("insert_or_assign", k, values=in_vals)
        elif op == "insert_and_evict":
            t._upsert("insert_and_evict", k, values=in_vals, evicted=(ek, ev, es))
        elif op == "assign":
            t._upsert("assign", k, values=in_vals)
        elif op == "export_batch":
            off = (i * batch) % (capacity - batch)
            t.export_batch(off, batch)

    timers = [Timer, HostTimer] if host else [Timer]
    for op in OPS:
        times = {tc: [] for tc in timers}
        # Ops that evict (or may, at lam 1.0) restore the table after every call from one snapshot taken before the
        # op's first call (each call then starts from the same state, as before, without allocating and copying a
        # whole-table clone ahead of every call, which the host clock would also see).
        restores = op == "insert_and_evict" or (lam >= 1.0 and op in ("find_or_insert", "insert_or_assign"))
        snap = None
        for i, (k, miss) in enumerate(batches):
            for tc in timers:
                if restores and snap is None:
                    snap = {n: x.clone() for n, x in t.state_dict().items() if isinstance(x, torch.Tensor) and x.dim()}
                tm = tc()
                with tm:
                    call(op, i, k)
                ms = tm.ms()
                if i > 0:
                    times[tc].append(ms)
                # restore the load factor (untimed)
                if restores:
                    for n, x in snap.items():
                        getattr(t, n).copy_(x)
                elif op in ("find_or_insert", "insert_or_assign"):
                    t.erase(miss.view(torch.uint64))
        results[op] = rate(batch, times[Timer])
        if host:
            host_results[op] = rate(batch, times[HostTimer])
    del t
    torch.cuda.empty_cache()
    return (results, host_results) if host else results


def git_commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], stderr=subprocess.DEVNULL,
                                       cwd=os.path.dirname(os.path.abspath(__file__))).decode().strip()
    except Exception:
        try:  # a machine without the checkout's .git: the commit the wheel was built from
            from dynamicemb import _build_info

            return getattr(_build_info, "GIT_COMMIT", getattr(_build_info, "COMMIT", "unknown"))
        except Exception:
            return "unknown"


GRID_DIMS = (8, 32, 64)
GRID_LAMBDAS = (0.5, 0.75, 1.0)
GRID_DISTS = ("uniform", "zipf1.05")
GRID_CAPACITY = {8: 128 << 20, 32: 128 << 20, 64: 64 << 20}  # slots per dim (HKV's benchmark grid)


# The order HKV's grid driver measures the compared ops in (each figure is printed when measured; a run cut short by
# --peer-timeout keeps the first): the inserting ops first, the furthest from 2x HKV.
PEER_OP_ORDER = ("find_or_insert", "insert_or_assign", "insert_and_evict", "assign", "find")


def run_peer(a, dims, lams):
    """Runs HKV's benchmark (a.peer_hkv) on dims x lams and parses it; returns (HkvRun, HKV commit)."""
    commit = a.hkv_commit
    if commit is None:
        path = os.path.join(os.path.dirname(os.path.abspath(a.peer_hkv)), "hkv_commit.txt")
        commit = open(path).read().strip() if os.path.exists(path) else "unknown"
    args = hkv_peer.grid_args(dims, lams, PEER_OP_ORDER)
    print(f"HierarchicalKV {commit}: running {a.peer_hkv} {' '.join(args)} (pure-HBM grid; stopped at its hybrid "
          f"section or after {a.peer_timeout:.0f} s)", flush=True)
    log = open(a.hkv_log, "w") if a.hkv_log else None
    try:
        out = hkv_peer.run(a.peer_hkv, a.peer_timeout, log=log, echo=lambda s: print("hkv| " + s, flush=True),
                           args=args)
    finally:
        if log:
            log.close()
    run = hkv_peer.parse(out.text)
    state = ("complete" if out.stopped_at_hybrid or out.returncode == 0 else
             f"TIMED OUT after {out.seconds:.0f} s" if out.timed_out else f"ended with code {out.returncode}")
    print(f"HierarchicalKV: {state} in {out.seconds:.0f} s, {len(run.tables)} (dim, capacity, lambda) rows parsed",
          flush=True)
    return run, commit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="dim 32, lambda 0.5, uniform + Zipf, capacity 64M, 5 reps")
    ap.add_argument("--dims", type=int, nargs="+", default=None, help=f"value dims (grid: {GRID_DIMS})")
    ap.add_argument("--lambdas", type=float, nargs="+", default=None, help=f"load factors (grid: {GRID_LAMBDAS})")
    ap.add_argument("--dists", nargs="+", default=None, choices=GRID_DISTS, help="key streams (grid: both)")
    ap.add_argument("--capacity", type=int, default=None,
                    help="slots for every dim (default: 64M with --quick, else 128M for dim 8/32 and 64M for dim 64)")
    ap.add_argument("--batch", type=int, default=1 << 20, help="keys per op (default 1M)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per op (default 5 quick, 10 grid)")
    ap.add_argument("--results", default=None, help="append the table to this markdown file")
    ap.add_argument("--plot", default=None, help="PNG path (default next to --results, if matplotlib imports)")
    ap.add_argument("--no-plot", action="store_true", help="write no PNG (saves matplotlib's import in short runs)")
    ap.add_argument("--commit", default=None, help="commit to name in the results (default: git, or the wheel's)")
    ap.add_argument("--initializer", default="constant", choices=["constant", "uniform", "normal", "truncated_normal"],
                    help="how find_or_insert fills new rows (default: constant, the table's default; the random kinds "
                         "draw per element)")
    ap.add_argument("--no-queue-ahead", action="store_true",
                    help="time each op from an idle stream (adds the Python call's host overhead; the method of the "
                         "first RESULTS.md entries)")
    ap.add_argument("--peer-hkv", default=None, metavar="BINARY",
                    help="HierarchicalKV's merlin_hashtable_benchmark (tools/peer/build_hkv_benchmark.sh): run it "
                         "first and print ours, HKV's and the ratios in one table (HKV's grid: its dims' capacities)")
    ap.add_argument("--peer-timeout", type=float, default=480.0,
                    help="seconds HKV's benchmark may run before it is stopped (default 480; its pure-HBM grid)")
    ap.add_argument("--fill", default=None, choices=["once", "hkv"],
                    help="once: capacity * lambda keys inserted once, hits drawn from all of them (default without "
                         "--peer-hkv); hkv: then topped up to within 0.001 of lambda and hits drawn from the last "
                         "1M keys inserted, as HKV's benchmark (default with --peer-hkv)")
    ap.add_argument("--hkv-log", default=None, help="write HKV's raw output here (default: none)")
    ap.add_argument("--hkv-commit", default=None,
                    help="HKV commit to name (default: hkv_commit.txt next to the binary, written by the build script)")
    a = ap.parse_args(argv)
    if a.peer_hkv is not None:
        err = hkv_peer.check_binary(a.peer_hkv)
        if err:
            ap.error(err)
        if a.peer_timeout <= 0:
            ap.error(f"--peer-timeout: expected a positive number of seconds, got {a.peer_timeout}")
        if a.quick or a.capacity is not None:
            ap.error("--peer-hkv: HKV's benchmark runs its own grid's capacities (128M slots for dim 8/32, 64M for "
                     "dim 64); expected neither --quick nor --capacity with it")
        if a.batch != 1 << 20:
            ap.error(f"--batch: HKV's benchmark runs 1048576 keys per op; expected that with --peer-hkv, got {a.batch}")
    Timer.queue_ahead = not a.no_queue_ahead
    if not torch.cuda.is_available():
        print("hash_table benchmark: needs a CUDA device")
        return 0
    dims = a.dims or ([32] if a.quick else list(GRID_DIMS))
    lams = a.lambdas or ([0.5] if a.quick else list(GRID_LAMBDAS))
    dists = a.dists or list(GRID_DISTS)
    reps = a.reps or (5 if a.quick else 10)
    fill = a.fill or ("hkv" if a.peer_hkv else "once")
    hkv = None
    if a.peer_hkv:
        # First, while this process holds no table (HKV's fills its own 16 GB tables).
        hkv, hkv_commit = run_peer(a, dims, lams)
    bw = copy_bandwidth("cuda")
    gpu = torch.cuda.get_device_name()
    rows, fills = [], {}
    for dim in dims:
        cap = a.capacity or (64 << 20 if a.quick else GRID_CAPACITY.get(dim, 64 << 20))
        for lam in lams:
            for dist in dists:
                t0 = time.time()
                info = {}
                r = bench_config(cap, dim, lam, a.batch, reps, zipf=dist != "uniform", initializer=a.initializer,
                                 host=hkv is not None, fill=fill, info=info)
                r, rh = r if hkv is not None else (r, None)
                rows.append((dim, cap, lam, dist, r, rh))
                fills[(dim, lam, dist)] = info
                print(f"dim {dim} capacity {cap} lambda {lam} {dist} ({time.time() - t0:.0f} s; real load factor "
                      f"{info['real_lambda']:.4f}, found {info['hits']:.3f} of a batch): "
                      + ", ".join(f"{k} {v:.3f}" for k, v in r.items())
                      + ("; host clock + sync: " + ", ".join(f"{k} {v:.3f}" for k, v in rh.items()) if rh else ""),
                      flush=True)
    lines = [
        f"### Scored hash table, {gpu}: keys uint64, values fp32, {a.batch:,} keys/op, hit rate 0.6; billion KV/s "
        f"(fraction of the measured copy bandwidth {bw / 1e12:.2f} TB/s implied by the bytes each op must move)"
        + f"; new rows of find_or_insert: {a.initializer} initializer; fill: {fill}"
        + ("; timed from an idle stream (host overhead included)" if a.no_queue_ahead else ""),
        "",
        "| dim | capacity | lambda | keys | " + " | ".join(OPS) + " |",
        "|---|---|---|---|" + "---|" * len(OPS),
    ]
    for dim, cap, lam, dist, r, _ in rows:
        cells = [f"{r[op]:.3f} ({r[op] * 1e9 * op_bytes(op, dim, 0.6, lam) / bw:.0%})" for op in OPS]
        lines.append(f"| {dim} | {cap >> 20}M | {lam} | {dist} | " + " | ".join(cells) + " |")
    lines += ["", "Real load factor after the fill / fraction of a batch found: " + "; ".join(
        f"dim {d} λ {lam} {dist}: {i['real_lambda']:.4f} / {i['hits']:.3f}" for (d, lam, dist), i in fills.items())]
    if hkv is not None:
        for dist in sorted({r[3] for r in rows}):
            if dist != "uniform":
                lines += ["", f"({dist} keys: no HKV figures, its benchmark has uniform keys only)"]
        lines += ["", hkv_peer.side_by_side(rows, hkv, gpu, bw, a.batch, reps, op_bytes,
                                            commit=a.commit or git_commit(), hkv_commit=hkv_commit, fill=fill)]
    text = "\n".join(lines)
    print(text)
    if a.results:
        with open(a.results, "a") as f:
            f.write(f"\n{text}\n\ncommit {a.commit or git_commit()}, {time.strftime('%Y-%m-%d')}, torch "
                    f"{torch.__version__}, command: `python {' '.join(sys.argv)}`\n")
    if a.no_plot:
        return 0
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        png = a.plot or (os.path.splitext(a.results)[0] + "_hash_table.png" if a.results else "hash_table.png")
        fig, ax = plt.subplots(figsize=(12, 5))
        width = 0.8 / max(1, len(rows))
        for j, (d, c, l, dist, r, _) in enumerate(rows):
            ax.bar([i + j * width for i in range(len(OPS))], [r[o] for o in OPS], width,
                   label=f"dim {d}, λ={l}, {dist}")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(OPS))], OPS, rotation=20)
        ax.set_ylabel("billion KV/s")
        ax.set_title(f"Scored hash table on {gpu}")
        ax.legend(fontsize=6, ncol=3)
        fig.tight_layout()
        fig.savefig(png, dpi=120)
        print(f"plot: {png}")
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
