"""The training step at NVIDIA's config (benchmarks/embedding.py --preset nvidia) under lab variants, in one process,
measured the way a training loop runs it: the host ahead of the device. Per optimizer (one module) and variant
"D[/A][@S+S...]" (D: the dedup's flags, op _lookup_lab_dedup; A: the segmented update's kernel, op _lookup_lab_seg_apply
of builds before session 17; "-" the build's defaults, e.g. main's wheel; S: module settings of the variant, "c<N>"
backward_chunk = N (0: the atomic scatter), "nf<policy>" the optimizer's nonfinite policy, "L<N>" op _lookup_lab_step
of builds that have it, "s<N>" the CSR sort, op _lookup_lab_csr_sort, "F<N>" where the step finds its uniques, op
_lookup_lab_find_later, "Q<N>" the bf16-moment Adam update's form, op _lookup_lab_seg_bf16, "S" the CSR built on the
step's own stream after the dedup instead of beside it, "b0" / "b1"
the step counter (plain SGD, Adam) by a tensor add / by the update kernel, module._step_in_update of builds that have it):
steady ms per step (CUDA events around
--reps steps queued behind 5 more, in --rounds interleaved rounds, median), synchronized ms (the host waits for each), and from one profile of --steps steps
issued behind a GPU sleep the device span and busy per step and every kernel's device time per step (so the
kernels' times are those of overlapped, pipelined steps); --timeline: from the same profile, the mean step's
device timeline (each op's start and end from the step's checks, per stream). Run (GPU):
    python3 -P tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam --variants=-,1,17,49 [--label x]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import torch


def kernel_times(path, steps):
    """{kernel name: device ms per step} of a chrome trace (kernels, memsets, memcpys after the GPU sleep)."""
    with open(path) as f:
        tr = json.load(f)
    per = defaultdict(float)
    for e in tr["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
            n = e["name"]
            if "sleep" in n.lower() or "spin" in n.lower():
                continue
            per[n] += float(e["dur"]) / 1e3 / steps
    return per


def print_kernel_table(title, cols, times, limit=None, label="kernel"):
    """A markdown table of device ms per op (rows: the ops of every column, each column's largest first; at most
    `limit`) for `cols` with `times` {col: {op name: ms}}."""
    from embedding_step_profile import short

    names = []
    for c in cols:
        for k in sorted(times[c], key=lambda k: -times[c][k]):
            if k not in names:
                names.append(k)
    print(f"\n{title}")
    print(f"| {label} | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for k in names[:limit]:
        print(f"| {short(k.split('(')[0], 60)} | " + " | ".join(f"{times[c].get(k, 0.0):.4f}" for c in cols) + " |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--opt", default="sgd,adam", help="optimizers (lab_variants.preset_step), each optionally "
                   "with its own variants: adam,sgd=-:-@L3")
    p.add_argument("--variants", default="-")
    p.add_argument("--later-variants", default="", help="variants of the optimizers after the first")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--label", default="")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--timeline", action="store_true", help="print each variant's mean step timeline")
    p.add_argument("--timeline-first", default="validate_kernel", help="the op whose start begins a step in the "
                   "timeline (dedup_clear_kernel where a variant moves the checks)")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_util import event_ms  # noqa: E402
    from embedding import gpu_warmup, make_batch  # noqa: E402
    from pipelined_gaps import device_ops, gaps_of, print_timeline, timeline_of  # noqa: E402
    import dynamicemb._batched_kernels as bk  # noqa: E402
    from lab_variants import preset_step  # noqa: E402
    from torch.profiler import ProfilerActivity, profile  # noqa: E402

    ops = torch.ops.dynamicemb
    dedup = getattr(ops, "_lookup_lab_dedup", None)
    seg = getattr(ops, "_lookup_lab_seg_apply", None)
    d0 = dedup(-1) if dedup is not None else None
    a0 = seg(-1) if seg is not None else None

    step_lab = getattr(ops, "_lookup_lab_step", None)
    s0 = step_lab(-1) if step_lab is not None else None
    sort_lab = getattr(ops, "_lookup_lab_csr_sort", None)
    sort0 = sort_lab(-1) if sort_lab is not None else None
    find_lab = getattr(ops, "_lookup_lab_find_later", None)
    find0 = find_lab(-1) if find_lab is not None else None
    bf16_lab = getattr(ops, "_lookup_lab_seg_bf16", None)
    bf160 = bf16_lab(-1) if bf16_lab is not None else None
    mod = [None]  # the module of the optimizer being measured, with its settings before any variant
    settings0 = {}
    overlap0 = bk._OVERLAP_MIN_IDS

    def use(v):
        if dedup is not None:
            dedup(d0)
        if seg is not None:
            seg(a0)
        if step_lab is not None:
            step_lab(s0)
        if sort_lab is not None:
            sort_lab(sort0)
        if find_lab is not None:
            find_lab(find0)
        if bf16_lab is not None:
            bf16_lab(bf160)
        m = mod[0]
        m.backward_chunk = settings0["chunk"]
        m.optimizer.nonfinite = settings0["nonfinite"]
        if "bump" in settings0:
            m._step_in_update = settings0["bump"]
        bk._OVERLAP_MIN_IDS = overlap0
        v, _, sets = v.partition("@")
        for t in [t for t in sets.split("+") if t]:
            if t[0] == "c":
                m.backward_chunk = int(t[1:])
            elif t.startswith("nf"):
                m.optimizer.nonfinite = t[2:]
            elif t[0] == "s":
                sort_lab(int(t[1:]))
            elif t[0] == "F":
                if find_lab is None or (find_lab(int(t[1:])), find_lab(-1))[1] != int(t[1:]):
                    raise SystemExit(f"setting {t}: this build has no such _lookup_lab_find_later variant")
            elif t[0] == "b":
                if "bump" not in settings0:
                    raise SystemExit(f"setting {t}: this build's module has no _step_in_update")
                m._step_in_update = t[1:] == "1"
            elif t[0] == "Q":
                if bf16_lab is None:
                    raise SystemExit(f"setting {t}: this build has no op _lookup_lab_seg_bf16")
                bf16_lab(int(t[1:]))
            elif t == "S":
                bk._OVERLAP_MIN_IDS = 1 << 62  # no step forks its CSR
            elif t[0] == "L":
                if step_lab is None:
                    raise SystemExit(f"setting {t}: this build has no op _lookup_lab_step")
                step_lab(int(t[1:]))
            else:
                raise SystemExit(f"unknown setting {t!r}")
        if v == "-":
            return
        parts = [int(x) for x in v.split("/")]
        if dedup is None or (len(parts) > 1 and seg is None):
            raise SystemExit(f"variant {v}: this build has no lab op for it")
        dedup(parts[0])
        if len(parts) > 1:
            seg(parts[1])

    dev = torch.device("cuda")
    T, B = 10, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev, 0.5)
    out_json = {}
    for oi, opt_entry in enumerate(a.opt.split(",")):
        opt_name, _, own = opt_entry.partition("=")  # "name=v1:v2": this optimizer's own variants
        vs = own.replace(":", ",") if own else (a.later_variants if oi > 0 and a.later_variants else a.variants)
        variants = [v for v in vs.split(",") if v]
        m, train = preset_step(opt_name, batches, dev)
        mod[0] = m
        settings0.update(chunk=m.backward_chunk, nonfinite=m.optimizer.nonfinite)
        if hasattr(m, "_step_in_update"):
            settings0["bump"] = m._step_in_update

        def steady(n):
            torch.cuda.synchronize()
            for _ in range(5):
                train()
            return event_ms(lambda: [train() for _ in range(n)]) / n

        def synced(n):  # wall ms per step with the host waiting for each (median)
            ts = []
            for _ in range(n):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                train()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts)

        res = {v: {"steady": [], "sync": []} for v in variants}
        for v in variants:  # one host-ahead profile per variant: span, busy, kernels
            use(v)
            for _ in range(4):
                train()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.cuda._sleep(100_000_000)
                for _ in range(a.steps):
                    train()
                torch.cuda.synchronize()
            path = os.path.join(tempfile.mkdtemp(), "trace.json")
            prof.export_chrome_trace(path)
            ops_v = device_ops(path)
            span, busy, _ = gaps_of(ops_v, a.steps)
            res[v].update(span=span, busy=busy, kernels=kernel_times(path, a.steps))
            if a.timeline:
                res[v]["timeline"] = timeline_of(ops_v, a.timeline_first)
        for _ in range(a.rounds):
            for v in variants:
                use(v)
                for _ in range(3):
                    train()
                res[v]["steady"].append(steady(a.reps))
                res[v]["sync"].append(synced(a.reps))
        use("-")
        tag = f"{a.label} " if a.label else ""
        print(f"\n### {tag}{opt_name}: steady step (ms; median of {a.rounds} interleaved rounds of {a.reps} steps "
              f"queued behind 5), device span / busy per step with the host ahead ({a.steps} steps behind a sleep)")
        print("| variant | steady | rounds | span | busy | sync (median step, host waits) |")
        print("|---|---:|---|---:|---:|---:|")
        for v in variants:
            r = res[v]
            print(f"| {v} | {statistics.median(r['steady']):.4f} | {' '.join(f'{x:.4f}' for x in r['steady'])} | "
                  f"{r['span']:.4f} | {r['busy']:.4f} | {statistics.median(r['sync']):.4f} |")
        print_kernel_table(f"{tag}{opt_name}: kernels with the host ahead (ms per step)", variants,
                           {v: res[v]["kernels"] for v in variants})
        for v in variants if a.timeline else []:
            print_timeline(f"{tag}{opt_name}, {v}: the mean step's timeline (us from the start of its "
                           f"{a.timeline_first}; steps between "
                           f"the first and the last of {a.steps})", res[v]["timeline"])
        sys.stdout.flush()
        out_json[opt_name] = {v: {k: x for k, x in r.items()} for v, r in res.items()}
        mod[0] = None
        del m
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out_json, f, indent=1)


if __name__ == "__main__":
    main()
