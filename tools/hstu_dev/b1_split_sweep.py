"""Issue 34: the NVIDIA batch-1 cached serving step under each of the paged forward's run-time split settings.

At batch 1 a layer's paged Hopper forward is a latency chain (384 queries x 4 heads over 4,352 keys: 12 query
tiles of 128 rows over ~33 KV tiles of 128 keys each, cut by the step's work list into chunks summed afterwards;
docs/hstu_inference.md, "How the paged forward splits a small batch"). What sets the split at run time:
`kernel_options(fwd_split_tiles=...)` (None the planner's rule, "wave", n tiles per chunk, 0 none),
`fwd_work_list=False` (grid order), the cache's page size (TMA boxes of min(page, 128) rows), and the serving
step's launch form (`KVCacheManager.pdl`, `.overlap_append`). The query tile (128 rows), the K/V pipeline depth
(3 stages at D <= 128) and the CTAs per SM (one: 384 threads x 168 registers fill the register file) are
compile-time and not swept here.

For each setting the script builds the benchmark's own cached step (`cached_setup` of
benchmarks/hstu_inference.py: bookkeeping + 8 layers' paged attention + appends) and prints:
    step us      the step as one CUDA graph (median of --reps replays, CUDA events; the cache restored before each)
    attn us      median duration of the step's attention kernels in one replay (torch.profiler; --no-kernels: off)
    layer us     one layer's `hstu_attn_paged_func` over the step's layout, --calls calls in one CUDA graph, per call
    list         the layer's work list read back: items, CTAs (items x heads), longest chunk in KV tiles, the sum
    phases       (a second table) the layer's work-list CTAs' phase stamps (kernel_options(fwd_trace=True)): item
                 read, Q / first K landed, first P, loop done, partial stored, the sum's mode known, sum done, end
    rel diff     max |out - first setting's out| / max |first out| of that layer (the split changes the fp32
                 summation order: a few bf16 ulps, <= ~1e-2, is rounding)

Usage (a Hopper GPU; otherwise it says so and exits 0):
    python tools/hstu_dev/b1_split_sweep.py [--quick] [--reps N] [--calls N] [--only LABEL,...] [--shape nvidia_b1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from typing import Dict, List, Optional

import torch

import hstu_attn
from hstu_attn import _ops

_BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(_BENCH))
from bench_util import capture_graph, once_ms  # noqa: E402
from hstu_inference import SHAPES, cached_setup  # noqa: E402  (the benchmark's step builder)
from hstu_paged_split import plan_list  # noqa: E402  (the work list's read-back)

# (label, kernel_options, cache attributes (one_append: cached_setup's), page size). The first row is the default.
SETTINGS = [
    ("default (rule)", {}, {}, 64),
    ("rule, plain launches", {}, dict(pdl=False), 64),
    ("rule, appends in order", {}, dict(overlap_append=False), 64),
    ("rule, one append after all layers", {}, dict(one_append=True), 64),
    ("wave", dict(fwd_split_tiles="wave"), {}, 64),
    ("wave, appends in order", dict(fwd_split_tiles="wave"), dict(overlap_append=False), 64),
    ("wave, one append after all layers", dict(fwd_split_tiles="wave"), dict(one_append=True), 64),
    ("cap 2", dict(fwd_split_tiles=2), {}, 64),
    ("cap 3", dict(fwd_split_tiles=3), {}, 64),
    ("cap 5", dict(fwd_split_tiles=5), {}, 64),
    ("cap 6", dict(fwd_split_tiles=6), {}, 64),
    ("cap 8", dict(fwd_split_tiles=8), {}, 64),
    ("cap 12", dict(fwd_split_tiles=12), {}, 64),
    ("no split", dict(fwd_split_tiles=0), {}, 64),
    ("grid order", dict(fwd_work_list=False), {}, 64),
    ("rule, page 128", {}, {}, 128),
    ("wave, page 128", dict(fwd_split_tiles="wave"), {}, 128),
    ("rule, page 256", {}, {}, 256),
    ("rule, page 32", {}, {}, 32),
    ("default again", {}, {}, 64),  # (the run's noise: against the first row)
]
QUICK = {"default (rule)", "rule, plain launches", "rule, appends in order", "wave", "wave, appends in order",
         "cap 2", "cap 3", "cap 6", "no split", "rule, page 128", "wave, page 128", "default again"}


def attn_kernel_us(graph: torch.cuda.CUDAGraph, restore) -> Optional[float]:
    """Median duration (us) of the attention kernels (hstu_fwd_sm90) in two replays of the step's graph (the kernel
    events of torch.profiler's trace, as the benchmark's --timeline reads them)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            graph.replay()
            torch.cuda.synchronize()
            restore()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as fh:
            events = json.load(fh).get("traceEvents", [])
    durs = [float(e["dur"]) for e in events if e.get("cat") == "kernel" and "fwd_sm90" in e.get("name", "")]
    return statistics.median(durs) if durs else None


# The paged forward's phase stamps (kernel_options(fwd_trace=True); hstu_fwd_sm90_kernel.cuh fwd_trace_put): slot
# -> name, for the working CTAs of the work-list kernel.
PHASES = [(1, "item"), (7, "Q landed"), (8, "K0 landed"), (9, "P0 ready"), (10, "loop done"), (11, "part stored"),
          (12, "mode known"), (13, "sum done"), (14, "end")]


def layer_phases(layer, q, calls: int) -> Dict:
    """Median and max (us) of each phase over the working CTAs of the last of `calls` traced layer calls replayed as
    one CUDA graph (warm), from the first CTA's item read (right after its griddepcontrol.wait); "span" to the last
    end. Each traced call zeroes the trace buffer first (a memset node), so the calls do not overlap as the step's
    programmatic launches do: the phases are the kernel's own chain."""
    with _ops._more_option_bits(_ops.OPTION_BITS["fwd_trace"]):
        layer()  # (the traced options make their own plan over the layout)

        def traced():
            for _ in range(calls):
                layer()

        g = capture_graph(traced)
        g.replay()
        tr = torch.ops.hstu_attn.paged_fwd_trace(q).cpu()
        del g
    tr[:, 12] &= (1 << 62) - 1  # (the sum's mode in the top bits)
    work = tr[:, 10] > 0
    if not bool(work.any()):
        return {}
    t0 = int(tr[work, 1].min())
    out = {}
    for slot, name in PHASES:
        v = (tr[work, slot][tr[work, slot] > 0].double() - t0) / 1e3
        if len(v):
            out[name] = (float(v.median()), float(v.max()))
    ran = tr[:, 0] > 0
    out["span"] = float((torch.maximum(tr[ran, 13], tr[ran, 14]).max() - t0).double()) / 1e3
    out["start->item"] = float((tr[work, 1] - tr[work, 0]).double().median()) / 1e3
    return out


def run_setting(sh, label: str, opts: Dict, attrs: Dict, ps: int, args) -> Dict:
    device, dtype = torch.device("cuda"), torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)  # the same inputs for every setting
    rnd = lambda *s: torch.randn(*s, device=device, dtype=dtype, generator=gen)  # noqa: E731
    row: Dict = dict(setting=label, page=ps)
    with _ops.kernel_options(**opts):
        one_append = attrs.get("one_append", False)  # (cached_setup's form of a CachedHSTUStack caller)
        cache, step, restore, (users, cu_q, app, q, k, v) = cached_setup(sh, device, dtype, ps, rnd,
                                                                         one_append=one_append)
        for name, val in attrs.items():
            if name != "one_append":
                setattr(cache, name, val)
        graph = capture_graph(step)
        restore()
        for _ in range(3):
            graph.replay()
            restore()
        times = []
        for _ in range(args.reps):
            restore()
            times.append(once_ms(graph.replay, device) * 1e3)
        row["step"] = statistics.median(times)
        restore()
        row["attn"] = attn_kernel_us(graph, restore) if args.kernels else None
        del graph
        # One layer over the step's layout, under the options the step's attention runs with.
        B = sh.batch
        tgt = torch.full((B,), sh.candidates, dtype=torch.int32, device=device)
        s = cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
        restore()
        kv0 = cache.layer_cache(0)
        pdl = getattr(cache, "pdl", False)

        def layer():
            return hstu_attn.hstu_attn_paged_func(
                q[0], k[0], v[0], cu_q, kv0, s.page_offsets, s.page_ids, s.last_page_lens, sh.new, s.max_seqlen_k,
                None, tgt, 1, (-1, 0), scaling_seqlen=float(sh.history + sh.candidates), check_values=False,
                layout=s.layout)

        with _ops._more_option_bits(_ops.OPTION_BITS["pdl"]) if pdl else contextlib.nullcontext():
            out = layer().float()
            torch.cuda.synchronize()
            row.update(plan_list(s.layout))

            def calls():
                for _ in range(args.calls):
                    layer()

            lg = capture_graph(calls)
            lg.replay()
            lt = [once_ms(lg.replay, device) * 1e3 / args.calls for _ in range(args.reps)]
            row["layer"] = statistics.median(lt)
            del lg
            if args.trace and "items" in row:
                row["phases"] = layer_phases(layer, q[0], args.calls)
        row["out"] = out
    return row


def table(rows: List[Dict], sh, args) -> str:
    name = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    head = (f"{sh.name} cached step ({sh.layers} layers, H{sh.heads}, D{sh.dim}, batch {sh.batch}, {sh.cached} cached "
            f"+ {sh.new} new tokens, {sh.candidates} candidates as targets) per split setting; {name} ({sms} SMs), "
            f"bfloat16; times in us: step = the benchmark's step as one CUDA graph (median of {args.reps}), attn = "
            f"median attention kernel in the step (profiler), layer = one layer's paged attention per call "
            f"({args.calls} calls in one CUDA graph); CTAs = items x {sh.heads} heads; rel diff: max abs difference "
            f"of the layer's output from the first row's over the first row's max abs\n\n")
    lines = ["| setting | page | step us | attn us | layer us | items | CTAs | longest chunk | sum | rel diff |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        attn = f"{r['attn']:.1f}" if r.get("attn") is not None else ""
        if "items" in r:
            lst = (f"{r['items']} | {r['items'] * sh.heads} | {r['max_tiles']} | "
                   f"{'none' if not r['split_items'] else 'together' if r['together'] else 'alone'}")
        else:
            lst = "grid | | |"
        lines.append(f"| {r['setting']} | {r['page']} | {r['step']:.1f} | {attn} | {r['layer']:.1f} | {lst} | "
                     f"{r['diff']:.2e} |")
    ph = [r for r in rows if r.get("phases")]
    if ph:
        lines += ["", f"Phases of one layer's working CTAs (the last of {args.calls} traced calls in one CUDA graph; "
                  "us from the first CTA's item read, right after its griddepcontrol.wait; median / max; "
                  "start->item: median; each traced call behind the trace buffer's memset, so no programmatic "
                  "overlap)", "",
                  "| setting | start->item | " + " | ".join(n for _, n in PHASES) + " | span |",
                  "|---|---|" + "---|" * len(PHASES) + "---|"]
        for r in ph:
            p = r["phases"]
            cells = [f"{p[n][0]:.1f} / {p[n][1]:.1f}" if n in p else "" for _, n in PHASES]
            lines.append(f"| {r['setting']} | {p['start->item']:.1f} | " + " | ".join(cells) + f" | {p['span']:.1f} |")
    return head + "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer settings")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--calls", type=int, default=20, help="layer calls per CUDA graph")
    ap.add_argument("--only", help="comma-separated setting labels to run (default: all, or --quick's)")
    ap.add_argument("--shape", default="nvidia_b1", choices=sorted(SHAPES))
    ap.add_argument("--no-kernels", dest="kernels", action="store_false", help="skip the profiler's kernel times")
    ap.add_argument("--no-trace", dest="trace", action="store_false", help="skip the layer's phase stamps")
    args = ap.parse_args(argv)
    if not (torch.cuda.is_available() and hstu_attn.library_loaded()
            and torch.cuda.get_device_capability() == (9, 0)
            and torch.ops.hstu_attn.paged_fwd_sm90_available(torch.cuda.current_device(), False, 128)):
        print("b1_split_sweep: no Hopper GPU with the paged kernel (bf16, D 128): skipped")
        return 0
    labels = {s[0] for s in SETTINGS}
    chosen = set(args.only.split(",")) if args.only else QUICK if args.quick else labels
    if chosen - labels:
        ap.error(f"--only: expected labels among {sorted(labels)}, got {sorted(chosen - labels)}")
    sh = SHAPES[args.shape]
    rows, ref = [], None
    for label, opts, attrs, ps in SETTINGS:
        if label not in chosen:
            continue
        try:
            r = run_setting(sh, label, opts, attrs, ps, args)
        except Exception as e:  # report it and go on with the other settings
            print(f"  {label}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        out = r.pop("out")
        ref = out if ref is None else ref
        r["diff"] = ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        rows.append(r)
        attn = f"{r['attn']:.1f}" if r.get("attn") is not None else "-"
        print(f"  {label} (page {ps}): step {r['step']:.1f} us, attn {attn} us, layer {r['layer']:.1f} us, items "
              f"{r.get('items', 'grid')}, longest {r.get('max_tiles', '-')}, rel diff {r['diff']:.1e}", flush=True)
    print(table(rows, sh, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
