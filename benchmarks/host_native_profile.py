"""Where the host time of the embedding train step goes, down to the native libraries (issues 32 and 35).

The step at NVIDIA's config is host-bound on the lent H200 (pipelined ms = host issue ms) and the ops' own C++
takes ~100-150 us per call (cProfile shows the op as one opaque call; the device has no nsys). This script samples
a loop of pipelined steps with py-spy's native unwinder and attributes every sample to the innermost Python frame
(the call site: `lookup_step (_batched_kernels.py:290)`) and to the shared object of its leaf frame (libcuda: the
driver, launches and event calls; dynamicemb's _C.so: our op's host code; libtorch*: dispatch and the caching
allocator; libc / libpthread: malloc, memcpy, futex; python: the interpreter). Our .so is stripped, so native
frames are counted by library, not by function.

py-spy is not a dependency: pass the path of its binary (`pip download py-spy` where PyPI is reachable, carry
the wheel, install it with --target). Keep the rate low (100-250 Hz): native unwinding of a CUDA process is slow
and py-spy falls behind at 1 kHz.

Usage:
    python benchmarks/host_native_profile.py --py-spy /tmp/pyspy/bin/py-spy [--case step|uva|uva-prefetch]
        [--opt sgd|adam] [--rate 150] [--seconds 8] [--top 25] [--raw out.txt] [--results RESULTS.md]
    python benchmarks/host_native_profile.py --summarize out.txt    (a raw file of an earlier run)
Skips (exit 0) without a GPU unless --summarize or --case cpu (a small CPU module, for tests).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import parser, provenance, publish  # noqa: E402

_FRAME = re.compile(r"^(?P<name>.*?) \((?P<where>[^()]*)\)$")
_PY_FILE = re.compile(r"\.py:\d+$")


def _lib_of(where: str) -> str:
    """The shared object of a native frame's location ("libcuda.so.1", "_C.so", ...), or "python" for a frame of
    the interpreter itself."""
    base = where.rsplit("/", 1)[-1]
    if base.startswith("python") or base.startswith("libpython"):
        return "python"
    m = re.match(r"([A-Za-z0-9_+.-]+?\.so)", base)
    return m.group(1) if m else base


def summarize(raw_lines: List[str], top: int = 25) -> Tuple[int, List[Tuple[str, int, Dict[str, int]]]]:
    """Samples of a py-spy raw file (`frame;frame;... count`, outermost first) per innermost Python frame, split by
    the library of the leaf frame (a sample whose leaf is a Python frame counts as "python"). Returns (total
    samples, [(call site, samples, {library: samples})] for the `top` call sites with the most samples)."""
    total = 0
    sites: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in raw_lines:
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f for f in stack.split(";") if f]
        site, lib = "(no Python frame)", "python"
        for f in frames:
            m = _FRAME.match(f)
            if m and _PY_FILE.search(m.group("where")):
                site = f"{m.group('name')} ({m.group('where').rsplit('/', 1)[-1]})"
        if frames:
            m = _FRAME.match(frames[-1])
            where = m.group("where") if m else frames[-1]
            lib = "python" if _PY_FILE.search(where) else _lib_of(where)
        sites[site][lib] += n
    rows = sorted(((s, sum(c.values()), dict(c)) for s, c in sites.items()), key=lambda r: -r[1])
    return total, rows[:top]


def table(total: int, rows, us_per_sample_step: float = 0.0) -> str:
    """Markdown: per call site its share of the samples, its us per step (a sample stands for 1 / rate seconds of
    its thread: ``us_per_sample_step`` = 1e6 / (rate x steps sampled), when known) and its split by leaf library
    (the four largest)."""
    lines = ["| call site (innermost Python frame) | % of samples | us per step | leaf libraries (% of the site) |",
             "|---|---:|---:|---|"]
    for site, n, libs in rows:
        us = f"{n * us_per_sample_step:.1f}" if us_per_sample_step > 0 else ""
        split = ", ".join(f"{k} {100 * v / n:.0f}" for k, v in sorted(libs.items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"| `{site}` | {100 * n / max(total, 1):.1f} | {us} | {split} |")
    return "\n".join(lines) + "\n"


def _worker(case: str, opt_name: str, seconds: float) -> None:
    """The profiled process: builds the case, warms it, then runs pipelined steps for `seconds` and prints the
    step rate (steps/s) on its last line."""
    import torch

    import embedding_tiers as et
    from dynamicemb._optimizers import SGD, Adam

    opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
    if case == "cpu":
        T, dim, R, B, dev = 2, 8, 4096, 64, "cpu"
        gen = torch.Generator().manual_seed(1)
        batches = [(torch.cat([et.power_law_ids(B, R, 1.05, gen) for _ in range(T)]),
                    torch.arange(0, T * B + 1, dtype=torch.int64)) for _ in range(4)]
        from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions

        m = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=dim, max_capacity=R)] * T, pooling="none",
                                          optimizer=opt, device=dev)
        sync = lambda: None  # noqa: E731
    else:
        T, dim, R, B = 10, 128, 1 << 20, 104857
        batches = et.step_batches(T, B, R)
        storage, store = ("hbm", None) if case == "step" else ("caching", "uva")
        m = et.make_module(T, dim, R, opt, storage, 0.25, store)
        dev = "cuda"
        sync = torch.cuda.synchronize
    grad = torch.ones(T * B, dim, device=dev)
    pre = case == "uva-prefetch"
    it = 0

    def one():
        nonlocal it
        i = it % len(batches)
        it += 1
        o = m(*batches[i], validate=False) if dev == "cuda" else m(*batches[i])
        if pre:
            m.prefetch(*batches[it % len(batches)])
        o.backward(grad)

    for _ in range(10):
        one()
    sync()
    print("ready", flush=True)  # the parent attaches py-spy now: setup and warm-up stay out of the samples
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        one()
        steps += 1
    sync()
    print(f"steps/s {steps / (time.perf_counter() - t0):.3f}", flush=True)


def main(argv=None) -> int:
    ap = parser(__doc__, quick="3 seconds of steps")
    ap.add_argument("--py-spy", default=None, help="path of the py-spy binary")
    ap.add_argument("--case", default="step", choices=("step", "uva", "uva-prefetch", "cpu"))
    ap.add_argument("--opt", default="sgd", choices=("sgd", "adam"))
    ap.add_argument("--rate", type=int, default=150, help="samples per second (keep it low: native unwinding)")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--raw", default=None, help="keep py-spy's raw output here")
    ap.add_argument("--summarize", default=None, help="summarize this raw file instead of profiling")
    ap.add_argument("--results", default=None, help="append the markdown to this file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        _worker(a.case, a.opt, a.seconds)
        return 0
    if a.summarize:
        with open(a.summarize) as f:
            total, rows = summarize(f.readlines(), a.top)
        publish(f"## Native host profile of {a.summarize}: {total} samples\n\n" + table(total, rows), a.results)
        return 0
    if a.case != "cpu":
        import torch

        if not torch.cuda.is_available():
            print("host_native_profile: no GPU, skipped")
            return 0
    if a.py_spy is None:  # (tools/gpu_check.sh runs every benchmark: without py-spy there is nothing to do)
        print("host_native_profile: no --py-spy binary given, skipped")
        return 0
    if not os.path.exists(a.py_spy):
        print(f"host_native_profile: --py-spy: expected the path of a py-spy binary, got {a.py_spy!r}")
        return 2
    if a.quick:
        a.seconds = min(a.seconds, 3.0)
    raw = a.raw or tempfile.mkstemp(suffix=".txt")[1]
    # The worker runs a little longer than the sampling (py-spy's attach and start take a moment).
    worker = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__), "--worker", "--case", a.case,
                               "--opt", a.opt, "--seconds", str(a.seconds + 3)], stdout=subprocess.PIPE, text=True)
    for line in worker.stdout:
        if line.startswith("ready"):
            break
    spy = subprocess.run([a.py_spy, "record", "--native", "--pid", str(worker.pid), "-r", str(a.rate), "-d",
                          str(int(a.seconds)), "--format", "raw", "-o", raw], capture_output=True, text=True)
    rest = worker.stdout.read()
    worker.wait()
    rate = [float(x) for x in re.findall(r"steps/s ([0-9.]+)", rest)]
    if spy.returncode != 0 or not os.path.exists(raw) or not rate:
        print(spy.stdout[-2000:], spy.stderr[-2000:], rest[-1000:])
        return spy.returncode or 1
    with open(raw) as f:
        total, rows = summarize(f.readlines(), a.top)
    steps = rate[-1] * int(a.seconds)
    head = (f"## Native host profile: case {a.case}, {a.opt}, {a.rate} Hz for {int(a.seconds)} s of pipelined steps "
            f"({rate[-1]:.0f} steps/s; {total} samples over all threads; us per step = samples / rate / steps)\n\n")
    publish(head + table(total, rows, 1e6 / (a.rate * steps)), a.results, footer=provenance(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
