"""The small kernels of the NVIDIA batch-1 cached step: in one replay of the step's CUDA graph vs warm (issue 34).

In one replay of the batch-1 step's graph (hstu_inference.py --timeline, H200) begin_step took ~14 us, the step
plan's validation ~2.6 us and its planner ~9.7 us (under pdl now one block that does both, if the wheel has it:
hstu_paged_step_plan_kernel): far more than their work (one block each, a few hundred dependent instructions and a
few global round trips). Here each one also runs 20 times in eager mode with the GPU idle in between (nothing else
evicts its code or data), and torch.profiler's median durations are printed beside those of the same kernels in one
replay of the step's graph. A large ratio: the step pays cold instruction / data fetches (then fewer distinct
kernels or less code on their path is what helps); near 1: their own work is.

    python benchmarks/hstu_b1_kernels.py            # skips without a CUDA GPU
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KERNELS = (("begin_step", "begin_step_kernel"), ("validation", "hstu_validate_kernel"),
           ("planner", "hstu_sm90_plan_kernel"), ("step plan (validation + planner)", "hstu_paged_step_plan_kernel"),
           ("attention", "hstu_fwd_sm90_kernel"), ("append", "append_kernel"))


def _durations(prof) -> dict:
    """kernel kind -> its durations (us) in the profile."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name)).get("traceEvents", [])
    out = {k: [] for k, _ in KERNELS}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        for kind, sub in KERNELS:
            if sub in e.get("name", ""):
                out[kind].append(float(e["dur"]))
    return out


def main() -> int:
    if not torch.cuda.is_available():
        print("hstu_b1_kernels: no CUDA GPU, skipped")
        return 0
    from torch.profiler import ProfilerActivity, profile

    import hstu_inference as hi  # the benchmark's step (same directory)
    from hstu_attn._ops import OPTION_BITS

    dev, dt = torch.device("cuda"), torch.bfloat16
    sh = hi.SHAPES["nvidia_b1"]
    gen = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=gen)  # noqa: E731
    cache, step, restore, (users, cu_q, app, q, k, v) = hi.cached_setup(sh, dev, dt, 64, rnd)
    B, total_q = sh.batch, sh.batch * sh.new
    tgt = torch.full((B,), sh.candidates, dtype=torch.int32, device=dev)
    s = cache.begin_step(users, cu_q, app, total_q, sh.new)
    restore()
    zero = torch.zeros_like(app)

    def plan():  # the step plan as the first layer makes it: plain (validation, planner), then under the pdl bit
        # (where the wheel has it: one block that validates and plans)
        for options in (0, OPTION_BITS["pdl"]):
            torch.ops.hstu_attn.paged_fwd_sm90_plan(q[0], cu_q, s.layout.cu_seqlens_k, s.layout.capacity + 1,
                                                    sh.new, s.max_seqlen_k, None, tgt, 1, -1, 0, options)

    # In the step: one replay of its graph (after warm-up replays), as --timeline does.
    g = hi.graphed(step, dev)
    for _ in range(3):
        restore()
        g()
    torch.cuda.synchronize()
    restore()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g()
        torch.cuda.synchronize()
    in_step = _durations(prof)
    restore()
    # Warm: each alone, 20 times, the GPU idle in between (a lookup-only begin_step: no appends, no state growth
    # but the clock; the plan over the same vectors).
    for _ in range(3):
        cache.begin_step(users, cu_q, zero, total_q, sh.new)
        plan()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            cache.begin_step(users, cu_q, zero, total_q, sh.new)
            torch.cuda.synchronize()
            plan()
            torch.cuda.synchronize()
    warm = _durations(prof)
    restore()
    cache.check()
    name = torch.cuda.get_device_name()
    print(f"## nvidia_b1 step's small kernels: {name}, bf16, H{sh.heads} D{sh.dim}, torch.profiler kernel "
          f"durations (us)\n")
    print("| kernel | in one replay of the step's graph (median of n) | alone, warm, 20 runs (median) | ratio |")
    print("|---|---|---|---|")
    for kind, _ in KERNELS:
        a, w = in_step[kind], warm[kind]
        ma = f"{statistics.median(a):.1f} (n {len(a)})" if a else "-"
        mw = f"{statistics.median(w):.1f}" if w else "-"
        ratio = f"{statistics.median(a) / statistics.median(w):.2f}" if a and w else ""
        print(f"| {kind} | {ma} | {mw} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
