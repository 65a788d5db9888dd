"""Profile of one dynamicemb training step of the embedding benchmark's workload (issue 5): per-kernel device
time, GPU idle gaps inside the step, CUDA-event step time eager vs as a replayed CUDA graph.

Same workload and module as benchmarks/embedding.py (10 tables x D=128 fp32, 1,048,570 bags, power law 1.05,
1M slots per table, on_refused="zero"); the gradient of the output is a fixed tensor of ones made once, as in the
benchmark (a fresh ``torch.ones_like(out)`` per step, what the benchmark timed before 2026-11-21, is timed separately). Run (GPU):
    python3 -P benchmarks/embedding_step_profile.py [--pooling sum] [--opt sgd] [--steps 4] [--trace out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import capture_graph, median_ms  # noqa: E402
from embedding import gpu_warmup, make_batch  # noqa: E402

from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
from dynamicemb._optimizers import SGD, Adam  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402


def event_ms(fn, reps):
    """Median CUDA-event time of ``fn`` in ms (the benchmark's timer, no warm-up: callers warm up)."""
    return median_ms(fn, 0, reps)


def short(name, n=70):
    name = name.replace("void ", "")
    if name.startswith("dynamicemb::lookup::detail::"):
        name = name[len("dynamicemb::lookup::detail::"):]
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pooling", default="sum")
    p.add_argument("--opt", default="sgd")
    p.add_argument("--batch", type=int, default=1_048_570)
    p.add_argument("--tables", type=int, default=10)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--trace", help="also write the chrome trace here")
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--label", default="")
    p.add_argument("--chunks", default="", help="comma list: also time the step with these backward_chunk values")
    p.add_argument("--variants", default="", help="';'-separated variants to time in this process, each a ','-list "
                   "of side=0/1 (module.overlap_csr), chunk=C (module.backward_chunk)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds over --variants")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--preset", choices=["issue", "nvidia"], default="issue",
                   help="issue: 10 ids per bag over 100M ids (benchmarks/embedding.py's default workload); nvidia: "
                        "NVIDIA dynamicemb's published config (one id per sample over 1,677,721 ids, pooling none, "
                        "default arguments: device-side checks)")
    p.add_argument("--host-profile", action="store_true", help="cProfile of the host's issue of --reps steps")
    p.add_argument("--eval", action="store_true", help="also profile the eval (inference) step's kernels")
    p.add_argument("--copy-tbs", type=float, default=4.27,
                   help="DRAM rate (TB/s) the two big kernels' byte bound is taken at (pooling none): the H200's "
                        "measured copy rate; tools/dynamicemb_dev/step_bound_probe.cu measures it")
    args = p.parse_args()
    hotness, id_space, validate = 10, 100_000_000, False
    if args.preset == "nvidia":
        hotness, id_space, validate, args.pooling = 1, 1_677_721, None, "none"
    dev = torch.device("cuda")
    T, D = args.tables, args.dim
    B = args.batch // T
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, hotness, id_space, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev)  # clocks up before the first timing (an idle H200 sits at 345 MHz)
    from dynamicemb._optimizers import Adagrad, RowWiseAdagrad

    opt = {"sgd": lambda: SGD(lr=0.01), "adam": lambda: Adam(lr=1e-3), "adagrad": lambda: Adagrad(lr=0.01),
           "rowwise_adagrad": lambda: RowWiseAdagrad(lr=0.01)}[args.opt]()
    tables = [DynamicEmbTableOptions(dim=D, max_capacity=1 << 20, on_refused="zero")] * T
    m = BatchedDynamicEmbeddingTables(tables, pooling=args.pooling, optimizer=opt, device=dev)
    it = [0]
    grads = {}

    def nxt():
        it[0] = (it[0] + 1) % len(batches)
        return batches[it[0]]

    def gones(out):
        g = grads.get(out.shape)
        if g is None:
            g = grads[out.shape] = torch.ones_like(out)
        return g

    def train():
        ids, off = nxt()
        out = m(ids, off, validate=validate)
        out.backward(gones(out))

    def train_bench():  # a fresh ones_like each step (the benchmark's step before 2026-11-21)
        ids, off = nxt()
        out = m(ids, off, validate=validate)
        out.backward(torch.ones_like(out))

    for _ in range(6):
        train()
    torch.cuda.synchronize()
    tag = f"[{args.label}] " if args.label else ""
    t_fixed = event_ms(train, args.reps)
    t_bench = event_ms(train_bench, args.reps)
    print(f"{tag}{args.pooling}/{args.opt}: step (CUDA events, median of {args.reps}): fixed grad {t_fixed:.3f} ms, "
          f"benchmark-style ones_like {t_bench:.3f} ms")

    variants = [v for v in args.variants.split(";") if v]
    if variants:
        res = defaultdict(list)
        for _ in range(args.rounds):
            for v in variants:
                kv = dict(x.split("=") for x in v.split(","))
                m.overlap_csr = kv.get("side", "1") == "1"
                m.backward_chunk = int(kv.get("chunk", "128"))
                for _ in range(3):
                    train()
                res[v].append(event_ms(train, args.reps))
        for v in variants:
            print(f"{tag}variant {v:24s}: step {statistics.median(res[v]):.3f} ms (rounds: "
                  + ", ".join(f"{x:.3f}" for x in res[v]) + ")")
        m.overlap_csr = True
        m.backward_chunk = 128

    for c in [int(x) for x in args.chunks.split(",") if x]:
        old = m.backward_chunk
        m.backward_chunk = c
        train()
        print(f"{tag}backward_chunk={c}: step {event_ms(train, args.reps):.3f} ms")
        m.backward_chunk = old

    # ---- the step as a CUDA graph (batch 0's shape, ids copied into static buffers)
    if not args.no_graph:
        try:
            sids, soff = batches[0][0].clone(), batches[0][1].clone()

            def step0():  # a fresh ones_like each step (the benchmark's step before 2026-11-21)
                out = m(sids, soff, validate=validate)
                out.backward(torch.ones_like(out))

            graph = capture_graph(step0, warmup=3)
            torch.cuda.synchronize()
            t_graph = event_ms(graph.replay, args.reps)
            t_eager0 = event_ms(step0, args.reps)
            print(f"{tag}batch 0 repeated: eager {t_eager0:.3f} ms, CUDA graph replay {t_graph:.3f} ms "
                  f"(host/launch overhead in the eager step ~ {t_eager0 - t_graph:.3f} ms)")
        except Exception as ex:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            print(f"{tag}CUDA graph capture failed: {type(ex).__name__}: {ex}")

    # ---- pipelined steps (queue kept ahead) and the host's issue time per step
    import time

    def pipelined(fn, reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # keeps the GPU busy while the host issues (issue time alone)
        t0 = time.perf_counter()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(reps):
            fn()
        issue = (time.perf_counter() - t0) / reps * 1e6
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps, issue

    t_pipe, t_issue = pipelined(train, args.reps)
    print(f"{tag}train pipelined (no sync between steps): {t_pipe:.3f} ms/step; host issue {t_issue:.0f} us/step")
    if args.host_profile:  # the host's timeline of a step (GPU kept busy, so no call waits for it)
        host_timeline(train, m, args.reps, tag)
    if args.host_profile:  # where the host's issue time goes (Python functions, own time)
        import cProfile
        import pstats

        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.reps):
            train()
        pr.disable()
        torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)

    def evalstep():
        ids, off = nxt()
        with torch.no_grad():
            m(ids, off, validate=validate)

    if args.eval:
        m.eval()
        for _ in range(3):
            evalstep()
        t_eval = event_ms(evalstep, args.reps)
        e_pipe, e_issue = pipelined(evalstep, args.reps)
        print(f"{tag}eval: {t_eval:.3f} ms (sync per step), pipelined {e_pipe:.3f} ms/step, host issue "
              f"{e_issue:.0f} us/step")
        m.train()

    if not args.no_profile:
        per_kernel = profile_kernels(train, args.steps, args.trace, tag + "train ")
        if args.pooling == "none" and args.opt in STATE_ROWS:
            byte_bound(batches, T, B, D, args.opt, per_kernel, args.copy_tbs, tag)
        if args.eval:
            m.eval()
            profile_kernels(evalstep, args.steps, None, tag + "eval ")
            m.train()


def host_timeline(fn, module, reps, tag):
    """Median host time (us) from a step's start to the entry and return of its two ops, of the module's Python
    stages around them, and to its end, with the GPU kept busy by a spin kernel (the host never waits for it)."""
    import time

    ns = torch.ops.dynamicemb
    ops = {k: getattr(ns, k) for k in ("lookup_step", "lookup_backward")}
    methods = [k for k in ("forward", "_forward_kernels", "_after_insert", "_backward_impl", "_backward_kernels")
               if hasattr(module, k)]
    marks = {}

    def spy(name, real):
        def f(*a, **kw):
            marks.setdefault(name + " entry", time.perf_counter())
            r = real(*a, **kw)
            marks[name + " return"] = time.perf_counter()
            return r
        return f

    rows = defaultdict(list)
    try:
        for k, real in ops.items():
            setattr(ns, k, spy(k, real))
        for k in methods:  # instance attributes shadow the class's methods
            setattr(module, k, spy(k, getattr(module, k)))
        torch.cuda.synchronize()
        torch.cuda._sleep(100_000_000)
        for _ in range(reps):
            marks.clear()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            for k, v in marks.items():
                rows[k].append((v - t0) * 1e6)
            rows["step end"].append((t1 - t0) * 1e6)
        torch.cuda.synchronize()
    finally:
        for k, real in ops.items():
            setattr(ns, k, real)
        for k in methods:
            delattr(module, k)
    print(f"{tag}host timeline of a step (us after its start, median of {reps}; GPU kept busy):")
    for k, v in sorted(rows.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"{tag}  {k:32s} {statistics.median(v):8.1f}")


def profile_kernels(fn, nsteps, trace, tag):
    """torch.profiler over nsteps calls of fn (a GPU spin between them): kernels per step with their device time,
    the idle gaps inside a step, the host time of the step's autograd function."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(nsteps):
            fn()
            torch.cuda.synchronize()
            torch.cuda._sleep(2_000_000)  # ~1 ms of GPU spin between steps: steps separate in the trace
            torch.cuda.synchronize()
    path = trace or os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        tr = json.load(f)
    evs = [e for e in tr["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset",
                                                                                      "gpu_memcpy")]
    evs.sort(key=lambda e: e["ts"])
    steps, cur = [], []  # a step: the kernels between two spin kernels
    for e in evs:
        if "spin" in e["name"].lower() or "sleep" in e["name"].lower():
            if cur:
                steps.append(cur)
            cur = []
            continue
        cur.append(e)
    if cur:
        steps.append(cur)
    per = defaultdict(list)
    order = {}
    spans, busys = [], []
    gap_hist = defaultdict(float)
    for st in steps:
        t0 = st[0]["ts"]
        t1 = max(e["ts"] + e["dur"] for e in st)
        spans.append((t1 - t0) / 1e3)
        # union of busy intervals (kernels of several streams may overlap)
        busy, end = 0.0, t0
        prev_name = "<start>"
        for e in st:
            s, d = e["ts"], e["dur"]
            if s > end:
                gap_hist[f"{short(prev_name, 40)} -> {short(e['name'], 40)}"] += (s - end) / 1e3 / len(steps)
            busy += max(0.0, s + d - max(s, end))
            if s + d > end:
                end = s + d
                prev_name = e["name"]
            per[short(e["name"])].append(d / 1e3)
            order.setdefault(short(e["name"]), (s - t0) / 1e3)
        busys.append(busy / 1e3)
    ns = len(steps)
    print(f"{tag}profiled {ns} steps: GPU span first kernel start -> last kernel end {statistics.mean(spans):.3f} ms, "
          f"busy {statistics.mean(busys):.3f} ms, idle inside {statistics.mean(spans) - statistics.mean(busys):.3f} ms")
    tot = 0.0
    print(f"{tag}{'kernel (in order of first start)':72s} {'start ms':>8s} {'calls/step':>10s} {'ms/step':>8s}")
    for name, ds in sorted(per.items(), key=lambda kv: order[kv[0]]):
        tot += sum(ds) / ns
        print(f"{tag}{name:72s} {order[name]:8.3f} {len(ds) / ns:10.1f} {sum(ds) / ns:8.3f}")
    print(f"{tag}kernel sum {tot:.3f} ms/step")
    per_step = {name: sum(ds) / ns for name, ds in per.items()}
    print(f"{tag}largest idle gaps inside a step (ms/step):")
    for k, v in sorted(gap_hist.items(), key=lambda kv: -kv[1])[:10]:
        print(f"{tag}  {v:.4f}  {k}")
    # host side: CPU time of the step's Python (forward, backward) per step
    ka = prof.key_averages()
    for k in ka:
        if k.key in ("autograd::engine::evaluate_function: _LookupFunctionBackward", "_LookupFunction",
                     "dynamicemb::lookup_step", "dynamicemb::lookup_backward"):
            print(f"{tag}host {k.key}: cpu total {k.cpu_time_total / 1e3 / ns:.3f} ms/step")
    return per_step


STATE_ROWS = {"sgd": 1, "adam": 3}  # row width in units of dim: [embedding | optimizer state]


def step_bytes(ids, offsets, tables, batch, dim, opt):
    """Ideal DRAM bytes (forward gather, segmented backward) of a pooling-none training step over fp32 rows, and the
    number of uniques (docs/dynamicemb.md, "Byte bound of the step's two big kernels"): the forward reads the
    inverse (4 B per id), urow + utables (12 B per unique), each unique's embedding once (a repeat comes from L2)
    and writes the output; the backward reads the CSR entries (8 B per id), urow + utables, every gradient row,
    and reads and writes each unique's [embedding | state] once."""
    n = ids.numel()
    pos = torch.arange(n, device=ids.device)
    bag = torch.searchsorted(offsets, pos, right=True) - 1
    feature = torch.div(bag, batch, rounding_mode="floor").clamp_(0, tables - 1)
    u = torch.unique(torch.stack([feature, ids], 1), dim=0).shape[0]
    row = dim * 4
    fwd = n * 4 + u * 12 + u * row + n * row
    bwd = n * 8 + u * 12 + n * row + 2 * u * row * STATE_ROWS[opt]
    return fwd, bwd, u


def byte_bound(batches, tables, batch, dim, opt, per_kernel, tbs, tag):
    """Prints each big kernel's ideal bytes, its bound at `tbs` TB/s and the profiled time's fraction of it."""
    res = [step_bytes(i, o, tables, batch, dim, opt) for i, o in batches]
    fwd, bwd, u = (statistics.mean(r[k] for r in res) for k in range(3))
    print(f"{tag}byte bound at {tbs:.2f} TB/s (ideal DRAM bytes, {u:,.0f} uniques per step, "
          f"docs/dynamicemb.md):")
    for what, b in (("sequence_kernel", fwd), ("seg_apply_kernel", bwd)):
        ms = sum(v for k, v in per_kernel.items() if what in k)
        bound = b / (tbs * 1e12) * 1e3
        frac = f"{bound / ms * 100:.0f} % of the bound" if ms > 0 else "not profiled"
        print(f"{tag}  {what:18s} {b / 1e6:8.1f} MB  bound {bound:.3f} ms  measured {ms:.3f} ms  {frac}")


if __name__ == "__main__":
    main()
