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
