"""Host issue time of the embedding step at NVIDIA's config, by part, beside its device time (issue 35).

For each case (eval: the lookup-only forward of a trained module; sgd / adam: the train step) in one process:
  - sync: CUDA-event ms of one call, synchronized (median of --reps);
  - pipe: ms per call of --pipe-reps calls issued back to back (events around all of them; the queue fills once,
    from a synchronize: the first call's host time is in the figure); pipe10: the same over 10 calls (the figure of
    embedding_step_profile.py); steady: the first event queued behind 5 calls (no fill: max(host issue, device));
  - issue: host us per call with the device kept busy by a sleep kernel (the host never waits for it);
  - span / busy: device ms per call with the host ahead (a profile of --steps calls behind a sleep: first device
    op start to last end, and the union of kernel / memset / memcpy intervals), the largest idle gaps;
  - host parts, from the same profile's CPU events (us per call, profiled: the profiler adds its own cost):
    CUDA runtime calls by name, the ops' own time (dispatcher event minus the runtime calls inside), other torch
    ops at top level, and the rest (Python, autograd, argument parsing before the dispatcher).
Run (GPU): python3 -P tools/dynamicemb_dev/host_issue.py --bench benchmarks [--cases eval,sgd,sgd:1/0,adam] [--label main]
(a case "sgd:S/F" runs lab variant S/F of tools/dynamicemb_dev/lab_variants.py, "sgd:mirror1" the refusals' host
mirror by a copy (op _lookup_lab_mirror); each restores the build's default after).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict

import torch


def build(opt_name, bench):
    sys.path.insert(0, bench)
    from embedding import gpu_warmup, make_batch

    from dynamicemb._batched import BatchedDynamicEmbeddingTables
    from dynamicemb._optimizers import SGD, Adam
    from dynamicemb._options import DynamicEmbTableOptions

    dev = torch.device("cuda")
    T, B = 10, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    opt = SGD(lr=0.01) if opt_name != "adam" else Adam(lr=1e-3)
    tables = [DynamicEmbTableOptions(dim=128, max_capacity=1 << 20, on_refused="zero")] * T
    m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
    gpu_warmup(dev, 0.3)  # clocks up
    return m, batches


def host_parts(path, steps):
    """us per call of the host's parts (see the module docstring) from a chrome trace with "step" annotations: the
    self time of every CPU op by name (its time minus its child ops and the CUDA runtime calls directly inside;
    autograd's records of our Function, "_LookupFunction" / "..._LookupFunctionBackward", hold its Python), the
    runtime calls by name, the span of the other threads (the backward on autograd's device thread, while the main
    thread waits) and the rest of the main thread (Python outside any op)."""
    with open(path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    marks = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "step"),
                   key=lambda e: e["ts"])
    if not marks:
        return {}
    lo, hi = marks[0]["ts"], marks[-1]["ts"] + marks[-1]["dur"]
    cpu = [e for e in ev if lo <= e["ts"] <= hi and e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")]
    parts = defaultdict(float)
    wall = sum(m["dur"] for m in marks)
    parts["wall (step annotation)"] = wall
    main_tid = marks[0]["tid"]
    main_top = 0.0  # main thread: time inside top-level ops and runtime calls
    by_tid = defaultdict(list)
    for e in cpu:
        by_tid[e["tid"]].append(e)
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # open cpu ops: [event, time of direct children]
        selfs = []

        def close_until(t):
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= t:
                e, child = stack.pop()
                selfs.append((e["name"], e["dur"] - child))

        for e in evs:
            close_until(e["ts"])
            if stack:
                stack[-1][1] += e["dur"]
            elif tid == main_tid:
                main_top += e["dur"]
            if e.get("cat") == "cpu_op":
                stack.append([e, 0.0])
            else:
                parts["runtime " + e["name"]] += e["dur"]
                parts["runtime calls (count, not us)"] += 1
        close_until(float("inf"))
        for name, t in selfs:
            parts["op self: " + name] += t
    other = 0.0
    for mk in marks:
        evs = [e for e in cpu if e["tid"] != main_tid and mk["ts"] <= e["ts"] <= mk["ts"] + mk["dur"]]
        if evs:
            other += max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs)
    parts["span of other threads (the backward on autograd's thread)"] = other
    parts["rest of the main thread (Python outside ops)"] = wall - main_top - other
    return {k: v / steps for k, v in parts.items()}


def measure(case, m, batches, reps, pipe_reps, steps):
    it = [0]
    grads = {}

    def nxt():
        it[0] = (it[0] + 1) % len(batches)
        return batches[it[0]]

    def train():
        ids, off = nxt()
        out = m(ids, off)
        g = grads.get(out.shape)
        if g is None:
            g = grads[out.shape] = torch.ones_like(out)
        out.backward(g)

    def evalstep():
        ids, off = nxt()
        with torch.no_grad():
            m(ids, off)

    for _ in range(8):
        train()
    fn = train
    if case == "eval":
        m.eval()
        fn = evalstep
        for _ in range(3):
            fn()
    from bench_util import event_ms, median_ms

    def per_call_ms(n, queued=0):
        """ms per call of n calls between two events, the first queued behind `queued` calls."""
        torch.cuda.synchronize()
        for _ in range(queued):
            fn()
        return event_ms(lambda: [fn() for _ in range(n)]) / n

    torch.cuda.synchronize()
    r = {"sync ms": median_ms(fn, 0, reps)}
    r["pipe ms"] = per_call_ms(pipe_reps)
    r["steady ms"] = per_call_ms(pipe_reps, queued=5)  # the queue's fill is not timed
    r["pipe10 ms"] = per_call_ms(10)  # as embedding_step_profile.py's figure: 10 calls after a synchronize
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # ~0.1 s: the host never catches up with the device
    t0 = time.perf_counter()
    for _ in range(pipe_reps):
        fn()
    r["issue us"] = (time.perf_counter() - t0) / pipe_reps * 1e6
    torch.cuda.synchronize()
    from pipelined_gaps import device_ops, gaps_of
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(200_000_000)
        for _ in range(steps):
            with record_function("step"):
                fn()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    span, busy, gaps = gaps_of(device_ops(path), steps)
    r["span ms"], r["busy ms"] = span, busy
    r["gaps"] = sorted(gaps.items(), key=lambda kv: -kv[1])[:5]
    r["host"] = host_parts(path, steps)
    if case == "eval":  # the floor of a synchronized call: the same call replayed as a CUDA graph
        try:
            from bench_util import capture_graph

            sids, soff = batches[0][0].clone(), batches[0][1].clone()

            def ev0():
                with torch.no_grad():
                    m(sids, soff)

            g = capture_graph(ev0, warmup=2)
            r["graph sync ms"] = median_ms(g.replay, 0, reps)
            del g
        except Exception as ex:  # noqa: BLE001
            print(f"graph capture failed: {type(ex).__name__}: {ex}")
    if case == "eval":
        m.train()
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks", help="folder of embedding.py")
    p.add_argument("--tools", default="tools/dynamicemb_dev", help="folder of pipelined_gaps.py")
    p.add_argument("--cases", default="eval,sgd")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--pipe-reps", type=int, default=40)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--label", default="")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--ncu-steps", type=int, default=0,
                   help="only run this many SGD train steps between cudaProfilerStart / Stop (after 6 untimed ones), "
                        "for ncu --profile-from-start off")
    args = p.parse_args()
    sys.path.insert(0, args.tools)
    sys.path.insert(0, args.bench)
    if args.ncu_steps:
        m, batches = build("sgd", args.bench)
        g = None
        for s in range(6 + args.ncu_steps):
            if s == 6:
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
            ids, off = batches[s % len(batches)]
            out = m(ids, off)
            g = torch.ones_like(out) if g is None else g
            out.backward(g)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return
    res = {}
    mods = {}
    for case in args.cases.split(","):
        base, _, variant = case.partition(":")  # "sgd:0/0": the lab variant S/F (tools/dynamicemb_dev/lab_variants)
        opt = "adam" if base in ("adam", "eval_adam") else "sgd"
        if opt not in mods:
            mods.clear()
            torch.cuda.empty_cache()
            mods[opt] = build(opt, args.bench)
        m, batches = mods[opt]
        lab = None
        if variant.startswith("mirror"):  # "sgd:mirror1": the refusals' mirror by a copy (op _lookup_lab_mirror)
            op = getattr(torch.ops.dynamicemb, "_lookup_lab_mirror", None)
            if op is None:
                print(f"{case}: this build has no op _lookup_lab_mirror")
                continue
            lab = [op]
            before = (op(-1),)
            op(int(variant[len("mirror"):]))
        elif variant:
            from lab_variants import lab_ops, use_variant

            lab, dedup = lab_ops()
            if lab is None:
                print(f"{case}: this build has no lab ops")
                continue
            before = (lab[0](-1), lab[1](-1))  # (-1 reads) the build's defaults, restored after the case
            use_variant(lab, dedup, variant)
        r = res[case] = measure(base.split("_")[0], m, batches, args.reps, args.pipe_reps, args.steps)
        if lab is not None:
            for op, v in zip(lab, before):
                op(v)
        tag = f"[{args.label}] " if args.label else ""
        gs = f", CUDA graph replay sync {r['graph sync ms']:.3f} ms" if "graph sync ms" in r else ""
        print(f"\n{tag}{case}: sync {r['sync ms']:.3f} ms{gs}, pipelined {r['pipe ms']:.3f} ms (10 calls after a sync "
              f"{r['pipe10 ms']:.3f}; steady, queued behind 5 calls {r['steady ms']:.3f}), host issue {r['issue us']:.0f} us, device with the host ahead: span "
              f"{r['span ms']:.3f} busy {r['busy ms']:.3f}")
        for (x, y), ms in r["gaps"]:
            print(f"{tag}  gap {ms:.4f} ms  {x} -> {y}")
        print(f"{tag}  host parts (us per call, profiled):")
        for k, v in sorted(r["host"].items(), key=lambda kv: -kv[1]):
            print(f"{tag}    {v:8.1f}  {k}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({c: {k: v for k, v in r.items() if k != "gaps"} for c, r in res.items()}, f, indent=1)


if __name__ == "__main__":
    main()
