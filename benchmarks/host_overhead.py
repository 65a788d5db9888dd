"""Host overhead per call: eager back-to-back time minus CUDA-graph replay time of the same call.

For each case (a named builder returning a zero-argument step on the GPU) and each checking mode:
    eager     N calls back to back, wall-clock time / N (after warm-up; one synchronization at the end)
    graph     the same step captured once into a CUDA graph, N replays back to back / N (the device's time)
    overhead  eager - graph: what the host adds per call (Python, dispatch, allocation, launches, syncs)
For small shapes the eager loop is host-bound, so the difference is the host's time per call; for large ones the
device hides it and the difference shrinks toward 0.

Cases (bf16, H4 D128, causal, equal lengths): HSTU forward (B1 S256, B8 S512) and forward + backward (B1 S256,
B8 S512, B16 S1K; autograd.grad of q, k, v), each with the default arguments (device-side value checks) and with
check_values=True (the host reads the int32 vectors: one synchronization per call). Targets (issue 29, H200):
forward <= 20 us, forward + backward <= 50 us with the defaults.

Other packages add rows by appending `Case`s to CASES (see the marked place below); a builder gets the device and
returns the step, or None to skip.

Usage:
    python benchmarks/host_overhead.py [--quick] [--results benchmarks/RESULTS.md] [--iters N]
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import capture_graph, command, git_commit, parser, publish  # noqa: E402

# (us/call) targets by kind; None: no target
TARGETS_US = {"fwd": 20.0, "fwd+bwd": 50.0}


@dataclass
class Case:
    name: str                                  # the table's row label
    kind: str                                  # "fwd", "fwd+bwd", or a kind of another package
    checks: str                                # what the step checks ("default", "check_values=True", ...)
    build: Callable[[torch.device], Optional[Callable[[], object]]]  # returns the step, or None (skip)


# ------------------------------------------------------------------------------------------------ HSTU cases
def _hstu_inputs(device, batch: int, seqlen: int, heads: int = 4, dim: int = 128, grad: bool = False):
    gen = torch.Generator(device=device).manual_seed(0)
    total = batch * seqlen
    q, k, v = (torch.randn(total, heads, dim, generator=gen, device=device, dtype=torch.bfloat16) for _ in range(3))
    if grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    cu = torch.arange(0, total + 1, seqlen, dtype=torch.int32, device=device)
    return q, k, v, cu


def hstu_fwd(batch: int, seqlen: int, check_values: Optional[bool] = None):
    def build(device):
        import hstu_attn

        q, k, v, cu = _hstu_inputs(device, batch, seqlen)

        def step():
            with torch.no_grad():
                return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, seqlen, seqlen, window_size=(-1, 0),
                                                       check_values=check_values)
        return step
    return build


def hstu_fwd_bwd(batch: int, seqlen: int, check_values: Optional[bool] = None):
    def build(device):
        import hstu_attn

        q, k, v, cu = _hstu_inputs(device, batch, seqlen, grad=True)
        dout = torch.randn_like(q)

        def step():
            out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, seqlen, seqlen, window_size=(-1, 0),
                                                  check_values=check_values)
            return torch.autograd.grad(out, (q, k, v), dout)
        return step
    return build


def _hstu_cases() -> List[Case]:
    cases = []
    for checks, cv in (("default", None), ("check_values=True", True)):
        for b, s in ((1, 256), (8, 512)):
            cases.append(Case(f"hstu fwd B{b} S{s} H4 D128", "fwd", checks, hstu_fwd(b, s, cv)))
        for b, s in ((1, 256), (8, 512), (16, 1024)):
            name = f"hstu fwd+bwd B{b} S{s if s < 1024 else '1K'} H4 D128"
            cases.append(Case(name, "fwd+bwd", checks, hstu_fwd_bwd(b, s, cv)))
    return cases


CASES: List[Case] = _hstu_cases()

# ------------------------------------------------------------------------------------------------ dynamicemb cases
# dynamicemb: append the embedding train-step cases here, e.g.
#     CASES.append(Case("dynamicemb train step ...", "train step", "default", my_builder))
# (a builder takes the device and returns the step; import the package inside the builder).


# ------------------------------------------------------------------------------------------------ timing
def time_eager(step, iters: int, warmup: int) -> float:
    """us per call of `step` run back to back (one synchronization at the end)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def time_graph(step, iters: int, warmup: int) -> float:
    """us per replay of `step` captured into a CUDA graph (warmed up on a side stream first, as torch requires)."""
    graph = capture_graph(step, warmup=max(warmup, 3))
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        graph.replay()
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) / iters * 1e6
    del graph
    return us


def markdown_table(rows) -> str:
    lines = ["| case | checks | eager us/call | graph us/call | overhead us/call | target us/call |",
             "|---|---|---:|---:|---:|---:|"]
    for case, eager, graph in rows:
        target = TARGETS_US.get(case.kind) if case.checks == "default" else None
        over = eager - graph
        mark = "" if target is None else (" (met)" if over <= target else " (not met)")
        lines.append(f"| {case.name} | {case.checks} | {eager:.1f} | {graph:.1f} | {over:.1f}{mark} | "
                     f"{'-' if target is None else f'{target:g}'} |")
    return "\n".join(lines)


def header(device, iters: int) -> str:
    gpu = torch.cuda.get_device_name(device)
    return "\n".join([
        f"## host_overhead: {gpu}, bf16, {datetime.date.today().isoformat()}",
        "",
        f"- device: {gpu}; torch {torch.__version__}; commit {git_commit()}",
        "- dtypes: bf16 inputs (HSTU: H4 D128, causal, equal lengths; int32 offsets)",
        f"- units: us per call; eager = wall-clock of {iters} back-to-back calls / {iters}; graph = the same call "
        "captured once, replayed back to back; overhead = eager - graph",
        f"- command: `{command()}`",
    ])


def main(argv=None) -> int:
    p = parser(__doc__, quick="fewer iterations per measurement")
    p.add_argument("--iters", type=int, help="calls per measurement (default 2000, --quick 300)")
    p.add_argument("--case", action="append", help="only cases whose name contains this (repeatable)")
    p.add_argument("--results", help="append the markdown table to this file (e.g. benchmarks/RESULTS.md)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_overhead benchmark: no CUDA device; skipped")
        return 0
    iters = args.iters or (300 if args.quick else 2000)
    warmup = max(10, iters // 10)
    device = torch.device("cuda")
    rows = []
    for case in CASES:
        if args.case and not any(c in case.name for c in args.case):
            continue
        step = case.build(device)
        if step is None:
            print(f"{case.name} [{case.checks}]: skipped")
            continue
        eager = time_eager(step, iters, warmup)
        graph = time_graph(step, iters, warmup)
        rows.append((case, eager, graph))
        print(f"{case.name:36s} {case.checks:18s} eager {eager:8.1f}  graph {graph:8.1f}  overhead "
              f"{eager - graph:8.1f} us/call", flush=True)
        del step
        torch.cuda.empty_cache()
    text = header(device, iters) + "\n\n" + markdown_table(rows) + "\n"
    print()
    publish(text, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
