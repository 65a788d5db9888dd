"""Where the device idles in the pipelined training step at NVIDIA's config (issue 35): the pipelined step time is
~0.12 ms above the busy time (union of kernel intervals) of a synchronized step, with the host ahead. This profiles
--steps steps issued behind a long GPU sleep (so the host is ahead of the device for all of them) and reports,
from the device timeline of all streams: span per step, busy per step (union of kernels, memcpys, memsets), and
the largest idle gaps by the pair of device operations around them (ms per step). Variants as in
tools/dynamicemb_dev/csr_sort_ab.py (S/F[/D]). Run (GPU):
    python3 -P tools/dynamicemb_dev/pipelined_gaps.py --bench benchmarks [--opt sgd] [--variants 0/0/0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict

import torch


def device_ops(path):
    """Device operations of a chrome trace (kernels, memcpys, memsets) as (start us, end us, name, stream)."""
    with open(path) as f:
        tr = json.load(f)
    ops = []
    for e in tr["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
            ops.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"], e.get("tid")))
    ops.sort()
    return ops


def gaps_of(ops, nsteps):
    """(span, busy, {(before, after): idle}) per step over the ops after the GPU sleep."""
    ops = [o for o in ops if "sleep" not in o[2].lower() and "spin" not in o[2].lower()]
    t0, t1 = ops[0][0], max(o[1] for o in ops)
    busy, end, prev = 0.0, t0, "<start>"
    gaps = defaultdict(float)
    for s, e, name, _ in ops:
        if s > end:
            gaps[(short(prev), short(name))] += (s - end) / 1e3 / nsteps
        if e > end:
            busy += e - max(s, end)
            end, prev = e, name
    return (t1 - t0) / 1e3 / nsteps, busy / 1e3 / nsteps, gaps


def profile_pipelined(train, steps):
    """(span, busy, gaps) per step of `steps` calls of train issued behind a ~50 ms GPU sleep."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(100_000_000)  # the host issues every step before the device starts them
        for _ in range(steps):
            train()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    return gaps_of(device_ops(path), steps)


def print_gaps(title, gaps, top):
    print(f"\n{title}: largest idle gaps (ms per step; device op before -> after)")
    for (x, y), ms in sorted(gaps.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {ms:.4f}  {x} -> {y}")


def short(name, n=44):
    name = name.replace("void ", "").replace("dynamicemb::lookup::detail::", "")
    name = name.split("(")[0]
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--opt", default="sgd")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--variants", default="")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--label", default="")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    from embedding import gpu_warmup, make_batch  # noqa: E402

    from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
    from dynamicemb._optimizers import SGD, Adam  # noqa: E402
    from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

    labs = []
    for op in ("_lookup_lab_csr_sort", "_lookup_lab_find_later", "_lookup_lab_dedup"):
        try:
            labs.append(getattr(torch.ops.dynamicemb, op))
        except (AttributeError, RuntimeError):
            labs.append(None)
    dev = torch.device("cuda")
    T, D, B = 10, 128, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev)
    opt = SGD(lr=0.01) if a.opt == "sgd" else Adam(lr=1e-3)
    tables = [DynamicEmbTableOptions(dim=D, max_capacity=1 << 20, on_refused="zero")] * T
    m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
    it = [0]
    grads = {}

    def train():
        it[0] = (it[0] + 1) % len(batches)
        ids, off = batches[it[0]]
        out = m(ids, off, validate=None)
        g = grads.get(out.shape)
        if g is None:
            g = grads[out.shape] = torch.ones_like(out)
        out.backward(g)

    print(f"\n### {a.label}pipelined {a.opt} steps: device idle gaps ({a.steps} steps issued behind a GPU sleep)")
    print("| variant | span per step | busy per step | idle per step |")
    print("|---|---:|---:|---:|")
    tops = {}
    for v in [x for x in a.variants.split(",") if x] or [None]:
        if v is not None:
            for lab, x in zip(labs, v.split("/")):
                if lab is not None:
                    lab(int(x))
        for _ in range(6):
            train()
        span, busy, gaps = profile_pipelined(train, a.steps)
        print(f"| {v or 'default'} | {span:.3f} | {busy:.3f} | {span - busy:.3f} |")
        tops[v] = gaps
    for v, gaps in tops.items():
        print_gaps(f"{a.label}{v or 'default'}", gaps, a.top)


if __name__ == "__main__":
    main()
