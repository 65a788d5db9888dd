"""Helpers shared by the benchmark scripts: timing, CUDA-graph capture, provenance (commit, command), results files,
plots and the common arguments.

The scripts run as `python benchmarks/X.py` (this folder is then first on sys.path) and are loaded by path from the
tests; each puts its own folder on sys.path before importing this module, so both ways find it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

import torch

CUDA = torch.device("cuda")


# ------------------------------------------------------------------------------------------------ names
def shape_name(B: int, S: int, D: int) -> str:
    """A dense batch's case name: "B16 S4K D128" (S in K where it is at least 1024), "B256 S256 D256"."""
    return f"B{B} S{S // 1024}K D{D}" if S >= 1024 else f"B{B} S{S} D{D}"


# ------------------------------------------------------------------------------------------------ timing
def event_ms(fn: Callable[[], object]) -> float:
    """ms of one fn() between two CUDA events on the current stream (waits for the end event)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def once_ms(fn: Callable[[], object], device: torch.device) -> float:
    """ms of one fn(): CUDA events on a CUDA device, perf_counter on the CPU."""
    if device.type == "cuda":
        return event_ms(fn)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def median_ms(fn: Callable[[], object], warmup: int, reps: int, device: torch.device = CUDA) -> float:
    """Median of `reps` timed runs of fn (once_ms) after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(once_ms(fn, device) for _ in range(reps))


def steady_ms(fn: Callable[[], object], warmup: int, reps: int, device: torch.device = CUDA) -> float:
    """ms per fn() with the host ahead, as a training or serving loop runs: CUDA events around `reps` calls queued
    behind `warmup` more (the device's time per call when the host issues faster than it runs; median_ms's one
    call between events also holds the host's issue before the device starts). perf_counter on the CPU."""
    if device.type != "cuda":
        return median_ms(fn, warmup, reps, device)
    torch.cuda.synchronize(device)
    for _ in range(warmup):
        fn()
    return event_ms(lambda: [fn() for _ in range(reps)]) / reps


def kernel_breakdown(fn: Callable[[], object]) -> "dict[str, tuple[float, int]]":
    """Per CUDA kernel name (first-seen order): (device ms, calls) of one fn() under torch.profiler, after two warm
    calls."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    tot: "dict[str, tuple[float, int]]" = {}
    for e in prof.events():
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):
            continue
        dt = getattr(e, "device_time_total", None)
        dt = getattr(e, "cuda_time_total", 0.0) if dt is None else dt
        ms, calls = tot.get(e.name, (0.0, 0))
        tot[e.name] = (ms + dt / 1e3, calls + 1)
    return tot


def capture_graph(fn: Callable[[], object], warmup: int = 1) -> torch.cuda.CUDAGraph:
    """fn captured into a CUDA graph, after `warmup` runs on a side stream (as torch.cuda.graph requires)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


# ------------------------------------------------------------------------------------------------ provenance
def git_commit() -> str:
    """This checkout's commit (12 hex digits, '-dirty' with uncommitted changes), or 'unknown'."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def command(argv: Optional[Sequence[str]] = None) -> str:
    """The command line that ran the script, quoted for a shell (argv: what main() got; None: sys.argv[1:])."""
    args = sys.argv[1:] if argv is None else list(argv)
    return "python " + " ".join(shlex.quote(a) for a in [sys.argv[0]] + args)


def provenance(argv: Optional[Sequence[str]] = None) -> str:
    """One line: commit, date, torch version and command of this run."""
    return (f"commit {git_commit()}, {datetime.date.today().isoformat()}, torch {torch.__version__}, "
            f"command: `{command(argv)}`")


def publish(text: str, results: Optional[str] = None, footer: Optional[str] = None) -> None:
    """Prints text (the benchmark's markdown); with `results`, appends it to that file after a blank line, followed
    by the line `footer` where given (e.g. provenance())."""
    print(text)
    if results:
        with open(results, "a") as f:
            f.write("\n" + text + (f"\n{footer}\n" if footer else ""))
        print(f"appended to {results}")


# ------------------------------------------------------------------------------------------------ plots
def pyplot(path: str):
    """matplotlib.pyplot on the Agg backend, or None (and a line saying that no plot is written to path)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not importable: no plot written to {path}", file=sys.stderr)
        return None
    return plt


def save_figure(fig, path: str, dpi: int = 120) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    print(f"plot written to {path}")


# ------------------------------------------------------------------------------------------------ arguments
def parser(doc: str, quick: str) -> argparse.ArgumentParser:
    """The scripts' argument parser: the module docstring as description and --quick (help text `quick`)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=quick)
    return p


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
