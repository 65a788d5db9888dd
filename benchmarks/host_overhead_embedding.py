"""Host overhead of the dynamicemb training step (forward + backward + fused update), in ms / us per step.

Workload: NVIDIA dynamicemb's published configuration (benchmarks/embedding.py --preset nvidia): 10 tables x
104,857 samples of one id (1,048,570 ids per step), D=128 fp32, power law alpha=1.05 over 1,677,721 ids per table,
1M slots per table, pooling none; SGD and Adam; the module called with its default arguments (validate=None:
device-side input checks, no host sync) and with validate="host" (the eager host checks, which synchronize).
Columns:
    eager      ms per step of eager steps (CUDA events over --reps steps after --warmup, 4 rotating batches)
    kernels    ms per step of the same step captured in one CUDA graph and replayed (kernel time only; the host
               checks of validate="host" do not run inside a capture)
    host       eager - kernels, in us: what the host adds to a step
    issue      us of CPU time per step to issue the eager steps (no synchronization inside the timed loop)

`embedding_cases()` returns the named case builders for benchmarks/host_overhead.py (the merged file): each builder
takes (device, quick) and returns a zero-argument step function.

Usage:
    python benchmarks/host_overhead_embedding.py [--quick] [--results benchmarks/RESULTS.md]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Dict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import add_device_arg, capture_graph, parser, provenance, publish  # noqa: E402
from embedding import power_law_ids  # noqa: E402  the same id distribution as benchmarks/embedding.py

from dynamicemb import SGD, Adam, BatchedDynamicEmbeddingTables, DynamicEmbTableOptions  # noqa: E402

NVIDIA = dict(tables=10, samples=104_857, dim=128, alpha=1.05, id_space=1_677_721, capacity=1 << 20)
QUICK = dict(tables=4, samples=2_000, dim=32, alpha=1.05, id_space=50_000, capacity=1 << 14)


def _embedding_case(opt_name: str, validate):
    def build(device: torch.device, quick: bool = False) -> Callable[[], None]:
        c = QUICK if quick else NVIDIA
        T, n = c["tables"], c["samples"]
        opt = SGD(lr=0.01) if opt_name == "sgd" else Adam(lr=1e-3)
        tables = [DynamicEmbTableOptions(dim=c["dim"], max_capacity=c["capacity"])] * T
        m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=device)
        gen = torch.Generator().manual_seed(0)
        offsets = torch.arange(T * n + 1, device=device)
        batches = [power_law_ids(T * n, c["id_space"], c["alpha"], gen).to(device) for _ in range(4)]
        grad = torch.ones(T * n, c["dim"], device=device)  # the upstream gradient, made once
        it = [0]

        def step():
            it[0] = (it[0] + 1) % len(batches)
            out = m(batches[it[0]], offsets) if validate is None else m(batches[it[0]], offsets, validate=validate)
            out.backward(grad)

        step.module = m
        return step

    return build


def embedding_cases() -> Dict[str, Callable]:
    """Named case builders: ``builder(device, quick=False) -> step()`` (one training step per call)."""
    return {
        "embedding train SGD (default args)": _embedding_case("sgd", None),
        "embedding train SGD (validate='host')": _embedding_case("sgd", "host"),
        "embedding train Adam (default args)": _embedding_case("adam", None),
        "embedding train Adam (validate='host')": _embedding_case("adam", "host"),
    }


def measure(step, device, warmup: int, reps: int) -> Dict[str, float]:
    """eager ms/step, CUDA-graph ms/step (kernels only), CPU us/step to issue eager steps."""
    for _ in range(warmup):
        step()
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        ms = (time.perf_counter() - t0) / reps * 1e3
        return {"eager": ms, "kernels": float("nan"), "issue": ms * 1e3}
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    c0 = time.process_time()
    for _ in range(reps):
        step()
    issue = (time.process_time() - c0) / reps * 1e6
    b.record()
    torch.cuda.synchronize()
    eager = a.elapsed_time(b) / reps
    # the same step in one CUDA graph (warmed up on a side stream, as torch.cuda.graphs requires)
    g = capture_graph(step, warmup=2)
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return {"eager": eager, "kernels": a.elapsed_time(b) / reps, "issue": issue}


def main(argv=None):
    p = parser(__doc__, quick="small sizes (smoke test; also runs on CPU)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--reps", type=int, default=50)
    add_device_arg(p)
    p.add_argument("--results", help="append the table (with git commit and command) to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.warmup, args.reps = 2, 5
    device = torch.device(args.device)
    rows = []
    for name, build in embedding_cases().items():
        step = build(device, args.quick)
        r = measure(step, device, args.warmup, args.reps)
        rows.append((name, r))
        print(f"{name}: " + " ".join(f"{k}={v:.3f}" for k, v in r.items()), flush=True)
        del step
        if device.type == "cuda":
            torch.cuda.empty_cache()
    hw = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    c = QUICK if args.quick else NVIDIA
    lines = [
        f"### dynamicemb training-step host overhead on {hw}",
        "",
        f"{c['tables']} tables x {c['samples']} samples of one id, D={c['dim']} fp32 rows and outputs, pooling none, "
        f"power law alpha={c['alpha']} over {c['id_space']} ids, {c['capacity']} slots/table. eager / kernels in "
        f"ms per step (CUDA events, mean of {args.reps}; kernels: the step replayed as one CUDA graph), host = eager "
        f"- kernels in us, issue = CPU us per step to issue eager steps. torch {torch.__version__}.",
        "",
        "| case | eager (ms) | kernels (ms) | host (us) | issue (us) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        lines.append(f"| {name} | {r['eager']:.3f} | {r['kernels']:.3f} | {(r['eager'] - r['kernels']) * 1e3:.0f} "
                     f"| {r['issue']:.0f} |")
    publish("\n".join(lines) + "\n", args.results, provenance(argv))

if __name__ == "__main__":
    main()
