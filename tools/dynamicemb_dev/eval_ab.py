"""Issue 35's eval at NVIDIA's config (benchmarks/embedding.py --preset nvidia: 10 tables x 104,857 ids, D128 fp32,
pooling none) counted part by part, and the training step, in one process, under the values of a build's lab ops
(an op of namespace dynamicemb taking an int, returning the value before: --eval-lab, --train-lab; a variant "-" is
the build's default, e.g. main's wheel, which may have no such op).

Eval, per variant: the benchmark's figure (one call between two CUDA events, the host's issue inside, median),
steady (events around --reps calls queued behind 5), the call as a CUDA graph replay (events), the host's issue per
call (behind a GPU sleep), and from profiles: the device span / busy per call with the host ahead and every
kernel's time, for synchronized calls the time from the Python call to the device's first operation and to the
forward kernel's start, and the host's parts (our op, allocations, CUDA runtime calls). Train (--train sgd,adam):
per variant of --train-lab (--train-variants), steady, span / busy and the device ops, the largest idle gaps; with
--graph also the first variant's step as a replayed CUDA graph (a capture builds the CSR on the main stream).
Run (GPU; session 21's lab builds had _lookup_lab_eval and _lookup_lab_no_resolve, docs/dynamicemb.md):
    python3 -P tools/dynamicemb_dev/eval_ab.py --bench benchmarks --variants=-,0,1 --eval-lab _lookup_lab_eval \
        --train sgd,adam --train-variants=0,1 --train-lab _lookup_lab_no_resolve
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch


def profile_trace(fn, calls, cpu=False, sleep=True):
    """Chrome trace path of `calls` fn() calls (behind a GPU sleep: the host ahead; else each synchronized)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if cpu else [])
    torch.cuda.synchronize()
    with profile(activities=acts) as prof:
        if sleep:
            torch.cuda._sleep(100_000_000)
        for _ in range(calls):
            if not sleep:
                torch.cuda.synchronize()
            with record_function("CALL"):
                fn()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    return path


def call_breakdown(path):
    """Medians over synchronized calls (us): Python call -> first device op start, -> forward kernel start, the
    forward kernel, call -> last device op end."""
    import json

    with open(path) as f:
        tr = json.load(f)
    calls = sorted(float(e["ts"]) for e in tr["traceEvents"] if e.get("ph") == "X" and e.get("name") == "CALL"
                   and e.get("cat") in ("user_annotation", "cpu_op"))
    dev = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]) for e in tr["traceEvents"]
                 if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"))
    rows = []
    for i, c in enumerate(calls):
        nxt = calls[i + 1] if i + 1 < len(calls) else float("inf")
        ops = [o for o in dev if c <= o[0] < nxt]
        fw = [o for o in ops if "sequence_kernel" in o[2]]
        if not ops or not fw:
            continue
        rows.append((ops[0][0] - c, fw[0][0] - c, fw[0][1] - fw[0][0], max(o[1] for o in ops) - c))
    if not rows:
        return None
    return [statistics.median(r[k] for r in rows) for k in range(4)]


def host_parts(path):
    """{name: median us per synchronized call} of the host's parts inside each CALL: the call, our op
    (dynamicemb::lookup_step), the CUDA runtime calls and allocations (aten::empty) by name."""
    import json
    from collections import defaultdict

    with open(path) as f:
        tr = json.load(f)
    ev = [e for e in tr["traceEvents"] if e.get("ph") == "X"]
    calls = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in ev
                   if e.get("name") == "CALL" and e.get("cat") in ("user_annotation", "cpu_op"))
    per = defaultdict(list)
    for c0, c1 in calls:
        acc = defaultdict(float)
        acc["call"] = c1 - c0
        for e in ev:
            t = float(e["ts"])
            if not c0 <= t < c1 or e.get("cat") not in ("cuda_runtime", "cpu_op"):
                continue
            n = e["name"]
            if e["cat"] == "cuda_runtime" or n in ("dynamicemb::lookup_step", "aten::empty", "aten::new_empty"):
                acc[n] += float(e["dur"])
        for k, x in acc.items():
            per[k].append(x)
    return {k: statistics.median(v + [0.0] * (len(calls) - len(v))) for k, v in per.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--variants", default="-")
    p.add_argument("--train", default="", help="optimizers whose training step is measured")
    p.add_argument("--eval-lab", default="_lookup_lab_eval", help="the lab op the eval variants set")
    p.add_argument("--train-lab", default="_lookup_lab_no_resolve", help="the lab op the train variants set")
    p.add_argument("--train-variants", default="-", help="values of --train-lab ('-': the build's default)")
    p.add_argument("--graph", action="store_true", help="also the first train variant as a CUDA graph replay")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--label", default="")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_util import capture_graph, event_ms  # noqa: E402
    from embedding import gpu_warmup, make_batch  # noqa: E402
    from lab_variants import preset_step  # noqa: E402
    from pipelined_gaps import device_ops, gaps_of  # noqa: E402
    from steady_ab import kernel_times, print_kernel_table  # noqa: E402

    lab = getattr(torch.ops.dynamicemb, a.eval_lab, None)
    v0 = lab(-1) if lab is not None else None
    tag = f"{a.label} " if a.label else ""
    dev = torch.device("cuda")
    T, B = 10, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev, 0.3)

    def steady_of(fn, n):
        torch.cuda.synchronize()
        for _ in range(5):
            fn()
        return event_ms(lambda: [fn() for _ in range(n)]) / n

    def spans(fn):
        path = profile_trace(fn, a.steps)
        span, busy, gaps = gaps_of(device_ops(path), a.steps)
        return span, busy, gaps, kernel_times(path, a.steps)

    variants = [v for v in a.variants.split(",") if v]
    if variants:
        m, train = preset_step("sgd", batches, dev)
        for _ in range(8):
            train()  # every batch's ids stored (the benchmark evaluates after its training reps)
        m.eval()
        torch.set_grad_enabled(False)  # as the benchmark's eval (one no_grad around all its calls)
        it = [0]

        def fwd():
            it[0] = (it[0] + 1) % len(batches)
            return m(*batches[it[0]])

        res = {}
        for v in variants:
            if v != "-":
                if lab is None:
                    raise SystemExit(f"variant {v}: this build has no op {a.eval_lab}")
                lab(int(v))
            elif lab is not None:
                lab(v0)
            for _ in range(5):
                fwd()
            r = {}
            r["bench"] = statistics.median(event_ms(fwd) for _ in range(a.reps))
            r["steady"] = steady_of(fwd, a.reps)
            hs = []
            for _ in range(a.reps):  # host issue per call, the device busy behind a sleep
                torch.cuda.synchronize()
                torch.cuda._sleep(2_000_000)
                t0 = time.perf_counter()
                fwd()
                hs.append((time.perf_counter() - t0) * 1e6)
            r["host_us"] = statistics.median(hs)
            torch.cuda.synchronize()
            g = capture_graph(lambda: m(*batches[0]))
            r["graph"] = statistics.median(event_ms(g.replay) for _ in range(a.reps))
            r["graph_steady"] = steady_of(g.replay, a.reps)
            del g
            r["span"], r["busy"], _, r["kernels"] = spans(fwd)
            path = profile_trace(fwd, 8, cpu=True, sleep=False)
            r["parts"], r["host"] = call_breakdown(path), host_parts(path)
            res[v] = r
        if lab is not None:
            lab(v0)
        print(f"\n### {tag}eval, pooling none (ms per call; benchmark = one call between CUDA events, the host's "
              f"issue inside, median of {a.reps})")
        print("| variant | benchmark | steady | graph replay | graph steady | span / busy (host ahead) | host issue us "
              "| call -> first op / -> forward start / forward / call -> end (us, synchronized) |")
        print("|---|---:|---:|---:|---:|---|---:|---|")
        for v in variants:
            r = res[v]
            pt = " / ".join(f"{x:.1f}" for x in r["parts"]) if r["parts"] else "-"
            print(f"| {v} | {r['bench']:.4f} | {r['steady']:.4f} | {r['graph']:.4f} | {r['graph_steady']:.4f} | "
                  f"{r['span']:.4f} / {r['busy']:.4f} | {r['host_us']:.1f} | {pt} |")
        print(f"\n{tag}eval: the host's parts of a synchronized call (us, median; profiled)")
        for v in variants:
            h = res[v]["host"]
            top = sorted(((x, k) for k, x in h.items() if k != "call"), reverse=True)[:7]
            print(f"  {v}: call {h.get('call', 0):.1f}: " + ", ".join(f"{k} {x:.1f}" for x, k in top))
        print_kernel_table(f"{tag}eval: device ops with the host ahead (ms per call)", variants,
                           {v: res[v]["kernels"] for v in variants}, label="op")
        sys.stdout.flush()
        torch.set_grad_enabled(True)
        del m
        torch.cuda.empty_cache()

    nr = getattr(torch.ops.dynamicemb, a.train_lab, None)
    nr0 = nr(-1) if nr is not None else None
    tvars = [v for v in a.train_variants.split(",") if v]

    def use(v):
        if v != "-" and nr is None:
            raise SystemExit(f"train variant {v}: this build has no op {a.train_lab}")
        if nr is not None:
            nr(nr0 if v == "-" else int(v))

    for opt_name in [o for o in a.train.split(",") if o]:
        m, train = preset_step(opt_name, batches, dev)
        for _ in range(6):
            train()
        r = {}
        for v in tvars:
            use(v)
            for _ in range(3):
                train()
            r[v] = {"steady": []}
            r[v]["span"], r[v]["busy"], r[v]["gaps"], r[v]["k"] = spans(train)
        for _ in range(a.rounds):
            for v in tvars:
                use(v)
                for _ in range(3):
                    train()
                r[v]["steady"].append(steady_of(train, a.reps))
        use(tvars[0])
        g = None
        if a.graph:  # the first variant's step as one CUDA graph (its CSR on the main stream: a capture does not fork)
            torch.cuda.synchronize()
            try:
                g = capture_graph(train)
                x = {"steady": [steady_of(g.replay, a.reps)]}
                x["span"], x["busy"], x["gaps"], x["k"] = spans(g.replay)
                r["graph"] = x
            except Exception as e:  # noqa: BLE001 (the eager rows still print)
                print(f"{opt_name}: CUDA graph capture failed: {e}")
        use("-")
        rows = list(r)
        print(f"\n### {tag}{opt_name} step: variants of op {a.train_lab} ('-' the build's default)"
              f"{' and the first as a CUDA graph replay' if a.graph else ''} (ms per step; steady: median of "
              f"{a.rounds} interleaved rounds of {a.reps} steps queued behind 5; span / busy of {a.steps} steps "
              f"behind a GPU sleep)")
        print("| variant | steady | rounds | span | busy | idle in span |")
        print("|---|---:|---|---:|---:|---:|")
        for k in rows:
            x = r[k]
            print(f"| {k} | {statistics.median(x['steady']):.4f} | {' '.join(f'{y:.4f}' for y in x['steady'])} | "
                  f"{x['span']:.4f} | {x['busy']:.4f} | {x['span'] - x['busy']:.4f} |")
        for k in rows:
            print(f"\n{tag}{opt_name} {k}: largest idle gaps (ms per step; device op before -> after)")
            for (x, y), ms in sorted(r[k]["gaps"].items(), key=lambda kv: -kv[1])[:6]:
                print(f"  {ms:.4f}  {x} -> {y}")
        print_kernel_table(f"{tag}{opt_name}: device ops (ms per step)", rows, {k: r[k]["k"] for k in rows}, 22,
                           label="op")
        sys.stdout.flush()
        del m, g
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
