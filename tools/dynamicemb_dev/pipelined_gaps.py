"""Where the device idles in pipelined training steps (issue 35: at NVIDIA's config the pipelined step is ~0.1 ms
above the busy time, the union of kernel intervals, of a synchronized step, with the host ahead): a profile of
steps issued behind a long GPU sleep (so the host is ahead of the device for all of them), read from the device
timeline of all streams: span and busy per step (kernels, memcpys, memsets), and the largest idle gaps by the pair
of device operations around them. Used by tools/dynamicemb_dev/csr_sort_ab.py --gaps (the bench folder, for
embedding_step_profile.short, is on sys.path there)."""

from __future__ import annotations

import json
import os
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
    from embedding_step_profile import short

    ops = [o for o in ops if "sleep" not in o[2].lower() and "spin" not in o[2].lower()]
    t0, t1 = ops[0][0], max(o[1] for o in ops)
    busy, end, prev = 0.0, t0, "<start>"
    gaps = defaultdict(float)
    for s, e, name, _ in ops:
        if s > end:
            gaps[(short(prev.split("(")[0], 44), short(name.split("(")[0], 44))] += (s - end) / 1e3 / nsteps
        if e > end:
            busy += e - max(s, end)
            end, prev = e, name
    return (t1 - t0) / 1e3 / nsteps, busy / 1e3 / nsteps, gaps


def timeline_of(ops, first="validate_kernel"):
    """The mean step's device timeline: [(start us, end us, name, stream)] per op of a step, relative to the start of
    the step's first op (`first`), averaged over the steps between the first and the last (whose neighbours are
    not in the profile); an op's k-th launch in a step is its own row. Streams as named in the trace."""
    ops = [o for o in ops if "sleep" not in o[2].lower() and "spin" not in o[2].lower()]
    starts = [s for s, _, name, _ in ops if first in name]
    if len(starts) < 3:
        return []
    rows = defaultdict(list)
    for k in range(1, len(starts) - 1):
        t0, t1 = starts[k], starts[k + 1]
        seen = defaultdict(int)
        for s, e, name, tid in ops:
            if t0 <= s < t1:
                key = (name, tid, seen[(name, tid)])
                seen[(name, tid)] += 1
                rows[key].append((s - t0, e - t0))
    steps = len(starts) - 2
    out = []
    for (name, tid, _), v in rows.items():
        if len(v) == steps:  # in every step (an op of some steps only is left out)
            out.append((sum(x[0] for x in v) / steps, sum(x[1] for x in v) / steps, name, tid))
    return sorted(out)


def print_timeline(title, tl, main_tid=None):
    """A markdown table of a timeline_of result (us from the step's first op); streams: "main" (the first op's) or
    "side"."""
    from embedding_step_profile import short

    if not tl:
        print(f"\n{title}: no timeline (too few steps)")
        return
    main_tid = tl[0][3] if main_tid is None else main_tid
    print(f"\n{title}")
    print("| op | stream | start us | end us | us |")
    print("|---|---|---:|---:|---:|")
    for s, e, name, tid in tl:
        print(f"| {short(name.split('(')[0], 60)} | {'main' if tid == main_tid else 'side'} | {s:.1f} | {e:.1f} | "
              f"{e - s:.1f} |")


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
