"""Phase stamps of one layer inside the NVIDIA batch-1 cached step (issue 34): hstu_inference.py's own step
(begin_step, 8 layers, appends beside them) captured as a CUDA graph, with the traced layer's call under
kernel_options(fwd_trace=True) (its CTAs stamp %globaltimer at their phases; hstu_fwd_sm90_kernel.cuh). The traced
call zeroes the trace buffer first (a memset node before it; the call shares the step's plan), so that layer follows
a memset instead of the kernel before it: its phases after the item read are the kernel's own chain; its start is
not comparable with the plain step's. Per KVCacheManager variant (b1_step_bench.py's names) and traced layer: the
median / max over the working CTAs of each phase from the first item read (us), the layer's span, and the split
CTAs' sum modes (done: another chunk sums alone; alone: this one sums its unit; together: each sums a slice).

--layers L,L:F,...: trace layer L; L:F: the step runs layers F.. only (layer F is the first after the head).
--eager-begin: begin_step runs once before the capture; the graph holds the layers alone.
--touch KB[,KB]: a probe, one row per value: right before the traced layer (after the layers before it), a torch
reduction reads one bf16 element per KB KiB of the traced layer's pool (its pages' translations at that stride
asked for by the SMs' loads; 64: every 64 KB page, 2048: one per 2 MB; 0: none). Its kernel is a plain launch.

    python tools/hstu_dev/b1_layer_trace.py --variants default --layers 0,1,7,1:1
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _d in (os.path.join(os.getcwd(), "benchmarks"), os.path.join(ROOT, "benchmarks"),
           os.path.join(os.getcwd(), "tools", "hstu_dev"), os.path.dirname(os.path.abspath(__file__))):
    if os.path.isdir(_d):
        sys.path.insert(0, _d)

PHASES = [(3, "Q issued"), (4, "K0 issued"), (7, "Q landed"), (8, "K0 landed"), (9, "P0 ready"), (10, "loop done"), (11, "part stored"),
          (12, "mode known"), (13, "sum done"), (14, "end")]


def share_step_plan() -> int:
    """Makes a call under kernel_options(fwd_trace=True) take the step's plan (the plan's key without the trace
    bit), so that the traced layer has no plan of its own in the chain; returns the trace bit."""
    from hstu_attn import _ops, _paged

    plan_of = _paged._kernel_plan
    trace_bit = _ops.OPTION_BITS["fwd_trace"]

    def shared_plan(*a, **kw):
        old = _ops._current_options()
        _ops._options_state.bits = old & ~trace_bit
        try:
            return plan_of(*a, **kw)
        finally:
            _ops._options_state.bits = old

    _paged._kernel_plan = shared_plan
    return trace_bit


def replayed_trace(g, restores, replays: int, q: torch.Tensor, phases):
    """`replays` replays of graph g (each after the `restores`), then trace_cells of the traced call's stamps (the
    last traced launch on q's device)."""
    for _ in range(replays):
        for r in restores:
            r()
        g.replay()
    torch.cuda.synchronize()
    return trace_cells(torch.ops.hstu_attn.paged_fwd_trace(q).cpu(), phases)


def trace_cells(tr: torch.Tensor, phases):
    """paged_fwd_trace's (CTAs, slots) stamps of one launch: per phase (slot, name) "median / max" us from the
    first item read over the working CTAs, the span to the last CTA's end (us), the working CTAs, the split CTAs'
    sum modes (done, alone, together) and the CTAs' median SM clock (clock64 over %globaltimer from the start to
    the loop's end, GHz); None without stamps."""
    tr = tr.clone()
    modes = (tr[:, 12] >> 62) & 3  # (the split sum's mode: 1 alone, 2 together)
    split = tr[:, 11] > 0  # (the CTAs of split units: they stored a partial)
    counts = tuple(int(((modes == m) & split).sum()) for m in (0, 1, 2))
    tr[:, 12] &= (1 << 62) - 1
    work = tr[:, 10] > 0
    if not bool(work.any()):
        return None
    t0 = int(tr[work, 1].min())
    cells = []
    for slot, _ in phases:
        x = tr[work, slot]
        x = (x[x > 0].double() - t0) / 1e3
        cells.append(f"{x.median():.2f} / {x.max():.2f}" if len(x) else "-")
    ran = tr[:, 0] > 0
    span = float((torch.maximum(tr[ran, 13], tr[ran, 14]).max() - t0).double()) / 1e3
    ghz = float(((tr[work, 18] - tr[work, 16]).double() / (tr[work, 10] - tr[work, 0]).double()).median())
    return cells, span, int(work.sum()), counts, ghz


def name_of(var: str, touch: int) -> str:
    return f"{var}+touch{touch}k" if touch else var


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="?")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--layers", default="0,1,7")
    ap.add_argument("--replays", type=int, default=3)
    # begin_step run once before the capture, outside the graph: the graph holds the layers alone (layer F's call
    # makes the step's plan), so the traced layer runs with no begin_step in the replay before it
    ap.add_argument("--eager-begin", action="store_true")
    ap.add_argument("--touch", default="0")
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("b1_layer_trace: no CUDA GPU, skipped")
        return 0
    import hstu_inference as hi
    from b1_step_bench import b1_variant
    from bench_util import capture_graph

    import hstu_attn
    from hstu_attn import _ops

    trace_bit = share_step_plan()
    dev, dt = torch.device("cuda"), torch.bfloat16
    sh = hi.SHAPES["nvidia_b1"]
    cols = " | ".join(n for _, n in PHASES)
    head = " (begin_step before the graph)" if args.eager_begin else ""
    print(f"| wheel | variant | layer (: the first run){head} | {cols} | span | working CTAs | "
          f"split CTAs: done / alone / together |")
    print("|---|---|---|" + "---|" * (len(PHASES) + 3))
    if args.rows:
        rows = []
        for r in args.rows.split(","):
            vt, entry = r.split(":", 1)
            v, _, t = vt.partition("+t")
            rows.append((v, int(t or 0), entry))
    else:
        rows = [(v, int(t), e) for v in args.variants.split(",") for t in args.touch.split(",")
                for e in args.layers.split(",")]
    for var, touch, entry in rows:
        traced, first = (int(x) for x in (entry.split(":") + [0])[:2])
        case = b1_variant(hi, var, dev, dt)
        if case is None:
            continue
        sh, cache, restore, (users, cu_q, app, q, k, v), tgt = case
        B = sh.batch
        scaling = float(sh.history + sh.candidates)

        s0 = cache.begin_step(users, cu_q, app, B * sh.new, sh.new) if args.eager_begin else None

        sink = torch.zeros((), dtype=torch.float32, device=dev)

        def step(cache=cache, traced=traced, first=first, s0=s0, touch=touch, sink=sink):
            s = s0 if s0 is not None else cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
            for l in range(first, sh.layers):
                bits = trace_bit if l == traced else 0
                if touch and l == traced:  # one element per `touch` KiB of the layer's pool
                    sink.copy_(cache.pool[l].view(-1)[:: touch * 512].float().sum())
                with _ops._more_option_bits(bits):
                    hstu_attn.cached_hstu_attention(cache, s, l, q[l], k[l], v[l], sh.new, num_targets=tgt,
                                                    scaling_seqlen=scaling)

        restore()
        g = capture_graph(step)
        row = replayed_trace(g, [restore], args.replays, q[traced], PHASES)
        del g
        if row is None:
            print(f"| {args.label} | {name_of(var, touch)} | {entry} | (no stamps) |")
            continue
        cells, span, n_work, (n_done, n_alone, n_together), _ = row
        print(f"| {args.label} | {name_of(var, touch)} | {entry} | " + " | ".join(cells) +
              f" | {span:.2f} | {n_work} | {n_done} / {n_alone} / {n_together} |")
        del cache
        torch.cuda.synchronize()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
