"""One layer's paged attention at a cached serving step of few users, for several work-list split settings.

The Hopper paged forward (hstu_attn::paged_fwd_sm90) plans one work list per step: each query tile of 128 rows is a
unit over its KV tiles of 128 keys, and a unit longer than the planner's cap is split into chunks whose fp32
partials are summed afterwards (hstu/csrc/sm90/hstu_sm90_work_list.cuh, hstu_fwd_sm90_split.cuh). This script
times that layer at NVIDIA's batch-1 shape (H4, D128, 3968 cached tokens + 384 new of which 256 candidates as
targets, page size 64; docs/hstu_inference.md) under `kernel_options(fwd_split_tiles=...)`: the planner's rule,
no split, the one-wave rule (the smallest cap whose chunks all fit on the SMs at once), chunks of at most n KV
tiles, and the grid order without a work list. Every row reads its plan's work
list back from the device: items (chunks), CTAs with work (items x heads), the largest chunk in KV tiles, and
whether the chunks sum their partials together (all CTAs on the SMs at once) or the last one alone.

Times: the layer's call over the step's shared layout (its plan made once, outside the timing), as one CUDA graph
of --graph-calls calls replayed (us per call: the GPU's time, launch gaps included), and eagerly (us per call over
--graph-calls queued calls: bounded below by the host's time per call); median of --reps runs, CUDA events. One
more row: the call without a shared layout (it validates and plans itself, as a lone call does).

Usage:
    python benchmarks/hstu_paged_split.py [--quick] [--reps N] [--batch B] [--results FILE]
Without a Hopper GPU (and the Hopper paged kernel) the script says so and exits 0.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
from typing import Dict, List, Optional

import torch

import hstu_attn
from hstu_attn import _ops, _paged

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import capture_graph, parser, provenance, publish  # noqa: E402

# (label, kernel_options); fwd_split_tiles: None the planner's rule, 0 no split, n chunks of at most n KV tiles.
SETTINGS = [("auto (planner's rule)", dict()), ("no split", dict(fwd_split_tiles=0)),
            ("one wave (smallest cap fitting the SMs)", dict(fwd_split_tiles="wave"))] + [
    (f"cap {n} tiles", dict(fwd_split_tiles=n)) for n in (1, 2, 3, 4, 6, 8, 12, 16)] + [
    ("grid order (no work list)", dict(fwd_work_list=False))]
QUICK = {"auto (planner's rule)", "no split", "one wave (smallest cap fitting the SMs)", "cap 2 tiles", "cap 3 tiles",
         "cap 8 tiles", "grid order (no work list)"}


def make_step(device, dtype, batch: int, cached: int, new: int, cand: int, heads: int, dim: int, page_size: int,
              seed: int = 0):
    """A page table over a shuffled pool (`cached` tokens per user), one layer's q / k_new / v_new, the masks."""
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    per_user = (cached + page_size - 1) // page_size
    num_pages = batch * per_user + 2
    perm = list(range(num_pages))
    rng.shuffle(perm)
    i32 = dict(dtype=torch.int32, device=device)
    step = dict(
        cu_seqlens_q=torch.arange(batch + 1, **i32) * new,
        kv_cache=torch.randn(num_pages, 2, page_size, heads, dim, device=device, dtype=dtype, generator=gen),
        page_offsets=torch.arange(batch + 1, **i32) * per_user,
        page_ids=torch.tensor(perm[: batch * per_user] or [0], **i32),
        last_page_lens=torch.full((batch,), cached - (per_user - 1) * page_size if per_user else 0, **i32))
    common = dict(max_seqlen_q=new, max_seqlen_k=cached + new, num_targets=torch.full((batch,), cand, **i32),
                  window_size=(-1, 0), alpha=1.0 / dim ** 0.5, scaling_seqlen=float(cached + new))
    qkv = {n: torch.randn(batch * new, heads, dim, device=device, dtype=dtype, generator=gen)
           for n in ("q", "k_new", "v_new")}
    return step, common, qkv


def plan_list(layout) -> Dict:
    """The work list of the layout's one plan (hstu_sm90_work_list.cuh: a 16-byte header {items, kind, together},
    then two int4 per item: {b, u, lo, hi}, {split id, chunk, chunks, first part}); {} without a list."""
    if len(layout.kernel_plans) != 1:
        return {}
    (_, plan), = layout.kernel_plans.values()
    words = plan[:16].view(torch.int32).tolist()
    items, kind, together = words[0], words[1], words[2]
    if items <= 0 or items > 1 << 20 or kind not in (0, 1):
        return {}
    it = plan[16: 16 + 32 * items].view(torch.int32).view(items, 8).cpu()
    tiles = (it[:, 3] - it[:, 2]).tolist()
    split = int((it[:, 4] >= 0).sum())
    return dict(items=items, kind=kind, together=together, max_tiles=max(tiles), min_tiles=min(tiles),
                split_items=split)


def time_us(fn, calls: int, reps: int) -> float:
    """Median over reps of (ms between two CUDA events around fn()) / calls, in us."""
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def run(args) -> List[Dict]:
    device, dtype = torch.device("cuda"), torch.bfloat16
    H, D = 4, 128
    step, common, qkv = make_step(device, dtype, args.batch, args.cached, args.new, args.candidates, H, D,
                                  args.page_size)
    total_q = qkv["q"].shape[0]
    ref = None
    rows = []
    # --pdl both: each setting plain, then as a programmatic dependent launch (kernel_options(pdl=True)).
    pdls = {"off": (False,), "on": (True,), "both": (False, True)}[args.pdl]
    for (label, opts), pdl in [(s, p) for s in SETTINGS for p in pdls]:
        if args.quick and label not in QUICK:
            continue
        label = label + (", pdl" if pdl else "")
        with _ops.kernel_options(**opts, pdl=pdl):
            layout = hstu_attn.paged_kv_layout(step["page_offsets"], step["page_ids"], step["last_page_lens"],
                                               step["cu_seqlens_q"], total_q, step["kv_cache"].shape[0],
                                               args.page_size, common["max_seqlen_k"])

            def layer():
                return hstu_attn.hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)

            out = layer()  # (makes the plan)
            torch.cuda.synchronize()
            lst = plan_list(layout)
            if ref is None:
                ref = out.float()
            diff = (out.float() - ref).abs().max().item()

            def calls():
                for _ in range(args.graph_calls):
                    layer()

            for _ in range(3):
                calls()
            eager = time_us(calls, args.graph_calls, args.reps)
            graph = capture_graph(calls)
            graph.replay()
            graphed = time_us(graph.replay, args.graph_calls, args.reps)
            del graph
        rows.append(dict(setting=label, graph=graphed, eager=eager, diff=diff, **lst))
    # A lone call: no shared plan, so every call validates and plans itself (planner + kernel behind it).
    layout0 = hstu_attn.paged_kv_layout(step["page_offsets"], step["page_ids"], step["last_page_lens"],
                                        step["cu_seqlens_q"], total_q, step["kv_cache"].shape[0], args.page_size,
                                        common["max_seqlen_k"])

    def lone_call():
        return _paged._paged_kernel(qkv["q"], qkv["k_new"], qkv["v_new"], step["cu_seqlens_q"], step["kv_cache"],
                                    step["page_offsets"], step["page_ids"], layout0, common["max_seqlen_q"],
                                    common["max_seqlen_k"], None, common["num_targets"], 1, common["window_size"],
                                    common["alpha"], common["scaling_seqlen"], False, shared_layout=False)

    def lone():
        for _ in range(args.graph_calls):
            lone_call()

    for pdl in pdls:
        with _ops.kernel_options(pdl=pdl):
            diff = (lone_call().float() - ref).abs().max().item()
            for _ in range(3):
                lone()
            graph = capture_graph(lone)
            rows.append(dict(setting="auto, lone call (validates + plans itself)" + (", pdl" if pdl else ""),
                             graph=time_us(graph.replay, args.graph_calls, args.reps),
                             eager=time_us(lone, args.graph_calls, args.reps), diff=diff))
            del graph
    return rows


def table(rows: List[Dict], args) -> str:
    name = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    head = (f"One layer's paged attention (hstu_attn_paged_func over a shared layout), batch {args.batch}, H4, D128, "
            f"{args.cached} cached + {args.new} new tokens ({args.candidates} candidates as targets), page size "
            f"{args.page_size}; {name} ({sms} SMs), bfloat16; times in us per call (median of {args.reps} runs of "
            f"{args.graph_calls} calls, CUDA events); CTAs = items x 4 heads; max diff: vs the first row's output\n\n")
    lines = ["| setting | items | CTAs | KV tiles per chunk (max / min) | split items | sum | CUDA graph us | "
             "eager us | max diff |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "items" in r:
            lst = (f"{r['items']} | {r['items'] * 4} | {r['max_tiles']} / {r['min_tiles']} | {r['split_items']} | "
                   f"{'together' if r['together'] else 'alone'}")
        else:
            lst = "grid | | | | "
        lines.append(f"| {r['setting']} | {lst} | {r['graph']:.1f} | {r['eager']:.1f} | {r['diff']:.2e} |")
    return head + "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = parser(__doc__, quick="fewer settings and repetitions")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--graph-calls", type=int, default=20, help="calls per timed run (and per CUDA graph)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--cached", type=int, default=3968)
    ap.add_argument("--new", type=int, default=384)
    ap.add_argument("--candidates", type=int, default=256)
    ap.add_argument("--page-size", type=int, default=64, choices=hstu_attn.PAGE_SIZES)
    ap.add_argument("--pdl", choices=("off", "on", "both"), default="off",
                    help="the kernel as a programmatic dependent launch (kernel_options(pdl=True)): off, on, or "
                    "each setting both ways (rows marked ', pdl')")
    ap.add_argument("--results", help="append the markdown table to this file")
    args = ap.parse_args(argv)
    if not (torch.cuda.is_available() and hstu_attn.library_loaded()
            and torch.cuda.get_device_capability() == (9, 0)
            and torch.ops.hstu_attn.paged_fwd_sm90_available(torch.cuda.current_device(), False, 128)):
        print("hstu_paged_split: no Hopper GPU with the paged kernel (bf16, D 128): skipped")
        return 0
    args.reps = args.reps or (5 if args.quick else 20)
    publish(table(run(args), args), args.results, footer=provenance(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
