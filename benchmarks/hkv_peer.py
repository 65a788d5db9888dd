"""HierarchicalKV's own benchmark as a side-by-side peer of benchmarks/hash_table.py (`--peer-hkv BINARY`).

The binary is HKV's benchmark/merlin_hashtable_benchmark.cc.cu built by tools/peer/build_hkv_benchmark.sh. HKV's
main takes no arguments and always runs its fixed grid: pure-HBM tables of dim 8 (128M slots), 32 (128M) and 64
(64M), load factors 0.50 / 0.75 / 1.00, 1M keys per op, hit rate 0.6, LRU, ten ops, then hybrid (HBM + host memory)
tables. Only the pure-HBM part matches hash_table.py's grid, so the run is stopped at the hybrid section's heading.
The build script's default binary (tools/peer/hkv_benchmark_grid.cu around HKV's unchanged file) also takes
`--dims / --lambdas / --apis` and runs only that slice of the pure-HBM grid (grid_args() builds them; HKV's plain
binary ignores arguments and runs everything).

Its output (markdown, written by the binary; see parse()): a "* GPU: 1 x NAME: MAJOR.MINOR" line, per mode a
"### On pure HBM mode:" / "### On HBM+HMEM hybrid mode:" heading, per table a "* dim = D, capacity = C Million-KV,
HBM = H GB, HMEM = M GB" line, then tables whose first column is the load factor (header cell "λ") and whose other
columns are ops (insert_or_assign, find, find_or_insert, assign, find*, find_or_insert*, insert_and_evict; then a
second table with export_batch, export_batch_if, contains).

Units and timing of HKV's figures: each is keys / seconds / 2**30 (its "Billion-KV/second" is a binary billion)
for ONE call timed by a host clock (std::chrono::steady_clock) around the call and a cudaStreamSynchronize, the
best of two such runs (each on a freshly filled table). HKV_UNIT converts them to 1e9 KV/s, hash_table.py's unit.
Its keys: consecutive integers (hashed by the table), the hits are the keys of the last insert (first 60% of the
batch) and the misses never-seen keys (last 40%), not shuffled.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

HKV_UNIT = 2**30 / 1e9  # HKV's "billion" KV/s -> 1e9 KV/s
HKV_OPS = ("find", "find_or_insert", "insert_or_assign", "insert_and_evict", "assign")  # compared with ours
PURE_HBM = "pure_hbm"
HYBRID = "hybrid"
_MODE_RE = re.compile(r"^###\s+On\s+(.*?)\s+mode", re.IGNORECASE)
_CONF_RE = re.compile(r"^\*\s*dim\s*=\s*(\d+)\s*,\s*capacity\s*=\s*(\d+)\s*Million-KV\s*,\s*HBM\s*=\s*(\d+)\s*GB\s*,"
                      r"\s*HMEM\s*=\s*(\d+)\s*GB", re.IGNORECASE)
_GPU_RE = re.compile(r"^\*\s*GPU:\s*(?:\d+\s*x\s*)?(.*?)\s*:\s*(\d+\.\d+)\s*$")


@dataclass
class HkvRun:
    """One parsed run of HKV's benchmark. tables[(mode, dim, capacity_slots, load_factor)] = {op: HKV's figure}
    (HKV's unit: 2**30 KV/s; to_1e9() converts)."""

    gpu: str = ""
    compute_capability: str = ""
    tables: Dict[Tuple[str, int, int, float], Dict[str, float]] = field(default_factory=dict)
    skipped: List[str] = field(default_factory=list)  # lines the binary printed instead of a table (e.g. no HBM)

    def get(self, dim: int, capacity: int, lam: float, op: str, mode: str = PURE_HBM) -> Optional[float]:
        """HKV's figure in 1e9 KV/s for one cell, or None where the run has none."""
        row = self.tables.get((mode, dim, capacity, round(lam, 2)))
        if row is None or op not in row:
            return None
        return row[op] * HKV_UNIT


def _cells(line: str) -> List[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse(text: str) -> HkvRun:
    """Parses HKV's benchmark output (complete or cut short: a partial last row is dropped)."""
    run = HkvRun()
    mode: Optional[str] = None
    dim = cap = None
    header: Optional[List[str]] = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _GPU_RE.match(line)
        if m:
            run.gpu, run.compute_capability = m.group(1), m.group(2)
            continue
        m = _MODE_RE.match(line)
        if m:
            mode = HYBRID if "hybrid" in m.group(1).lower() else PURE_HBM
            header = None
            continue
        m = _CONF_RE.match(line)
        if m:
            dim, cap = int(m.group(1)), int(m.group(2)) << 20
            header = None
            continue
        if not line.startswith("|"):
            if "ignore current benchmark" in line or "not enough" in line:
                run.skipped.append(line)
            continue
        cells = _cells(line)
        if cells and cells[0] in ("λ", "lambda", "load_factor"):
            header = cells
            continue
        if header is None or mode is None or dim is None or set(cells[0]) <= set("-:"):
            continue
        # A row: the load factor, then one figure per op; a row cut short (killed mid-line) has fewer cells or
        # lacks the closing bar.
        if not line.endswith("|") or len(cells) != len(header):
            continue
        try:
            lam = round(float(cells[0]), 2)
            vals = [float(c) for c in cells[1:]]
        except ValueError:
            continue
        run.tables.setdefault((mode, dim, cap, lam), {}).update(zip(header[1:], vals))
    return run


@dataclass
class HkvOutput:
    text: str
    seconds: float
    stopped_at_hybrid: bool  # the pure-HBM part finished (the normal end of a --peer-hkv run)
    timed_out: bool
    returncode: Optional[int]


def grid_args(dims: Sequence[int], lambdas: Sequence[float], ops: Sequence[str] = HKV_OPS) -> List[str]:
    """The grid driver's arguments for a slice of HKV's pure-HBM grid (ops in HKV's names)."""
    return ["--dims", ",".join(str(d) for d in dims), "--lambdas", ",".join(f"{x:g}" for x in lambdas),
            "--apis", ",".join(ops)]


def run(binary: str, timeout_s: float, log=None, stop_at_hybrid: bool = True, echo=None,
        args: Sequence[str] = ()) -> HkvOutput:
    """Runs HKV's benchmark (with `args`, see grid_args), stopping it at the hybrid section (or at timeout_s). Its
    output lines are written to `log` (a file object) and passed to `echo` (e.g. print) as they arrive."""
    t0 = time.time()
    # Line-buffered through stdbuf where there is one (the binary flushes only at std::endl otherwise).
    cmd = (["stdbuf", "-oL"] if shutil.which("stdbuf") else []) + [binary] + list(args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            errors="replace", start_new_session=True)
    timed_out = threading.Event()

    def on_timeout():
        timed_out.set()
        _stop(proc)

    watchdog = threading.Timer(timeout_s, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    lines: List[str] = []
    stopped = False
    try:
        for line in proc.stdout:
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()
            if echo is not None:
                echo(line.rstrip("\n"))
            if stop_at_hybrid and _MODE_RE.match(line.strip()) and "hybrid" in line.lower():
                stopped = True
                _stop(proc)
                break
        if not stopped:  # the output ended: let the process exit by itself
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    finally:
        watchdog.cancel()
        _stop(proc)
        proc.stdout.close()
    return HkvOutput("".join(lines), time.time() - t0, stopped, timed_out.is_set() and not stopped,
                     proc.returncode)


def _stop(proc: subprocess.Popen) -> None:
    """Ends the benchmark (the process group this module started for it: stdbuf's child, a wrapper's) if it runs."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def check_binary(path: str) -> Optional[str]:
    """None if `path` is an executable file, else the argument error's text."""
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return (f"--peer-hkv: expected an executable file (HKV's merlin_hashtable_benchmark, built by "
                f"tools/peer/build_hkv_benchmark.sh), got {path!r}")
    return None


def _cell(v: Optional[float], frac: Optional[float]) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" + (f" ({frac:.0%})" if frac is not None else "")


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "–"


def side_by_side(rows: Sequence[tuple], hkv: HkvRun, gpu: str, bw: float, batch: int, reps: int,
                 op_bytes, commit: str = "unknown", hkv_commit: str = "unknown", dist: str = "uniform",
                 fill: str = "hkv") -> str:
    """The markdown table of ours against HKV's.

    rows: (dim, capacity, lambda, dist, device_rates, host_rates) with rates {op: 1e9 KV/s} (host_rates may be
    None); rows of other key streams than `dist` are left out (HKV has uniform keys only). op_bytes(op, dim, hit,
    lam) -> bytes per key; the percentages are those bytes at the rate over `bw` (bytes/s)."""
    lines = [
        f"### Scored hash table vs HierarchicalKV ({hkv_commit}), {gpu}: keys uint64, values fp32, {batch:,} keys/op, "
        f"hit rate 0.6, {dist} keys, LRU; billion (1e9) KV/s (fraction of the measured copy bandwidth "
        f"{bw / 1e12:.2f} TB/s implied by the bytes each op must move)",
        "",
        f"- ours, device: CUDA events with the queue kept ahead (device time, no host overhead), median of {reps}",
        f"- ours, host: host clock around the call + a stream synchronize (HKV's method), median of {reps}",
        "- HKV: its own benchmark's host clock + stream synchronize, one call, best of 2 runs; converted from its "
        f"2^30 KV/s unit (x {HKV_UNIT:.4f})",
        f"- commit {commit}; HKV's grid: dim 8 and 32 at 128M slots, dim 64 at 64M",
        "- HKV's fill: its table topped up to within 0.001 of λ, hits = keys of its last insert (all present); ours: "
        + ("the same (--fill hkv)" if fill == "hkv" else "capacity x λ keys inserted once, hits drawn from all of "
           "them (--fill once: at λ 1.0 some of them were evicted by the fill and miss)"),
        "",
        "| dim | capacity | λ | op | ours device | ours host | HKV | device / HKV | host / HKV |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for dim, cap, lam, d, dev, host in rows:
        if d != dist:
            continue
        for op in HKV_OPS:
            if op not in dev:
                continue
            nbytes = op_bytes(op, dim, 0.6, lam)
            ours = dev[op]
            ours_h = host.get(op) if host else None
            theirs = hkv.get(dim, cap, lam, op)

            def frac(v):
                return v * 1e9 * nbytes / bw if v is not None else None

            lines.append(
                f"| {dim} | {cap >> 20}M | {lam:.2f} | {op} | {_cell(ours, frac(ours))} "
                f"| {_cell(ours_h, frac(ours_h))} | {_cell(theirs, frac(theirs))} | {_ratio(ours, theirs)} "
                f"| {_ratio(ours_h, theirs)} |")
    return "\n".join(lines)
