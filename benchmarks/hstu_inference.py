"""HSTU inference benchmark: the attention stack of a serving step without and with the paged KV cache.

Cases (attention alone: the model layers' projections are not timed; bf16, causal, candidates as targets):
    dlrmv3   Meta GR's DLRMv3 shape as they profiled it (H100, Triton kernels): 5 layers, H4, D128, batch 32,
             1024 history + 2048 candidates per user; their figure: 9.30 ms per iteration, 10.63 M tokens/s.
             Cached: the 1024 history tokens come from the cache, the 2048 candidates are the queries.
    nvidia   NVIDIA's published HSTU inference block: 8 layers, D128 (H4 assumed), batch 8, 4096-token history +
             256 candidates; B200: ~4.0 ms uncached, ~0.5 ms with 3968 tokens cached (128 new history + 256
             candidates as queries), batch 1 ~0.18 ms. Goals here (H200): cached batch 8 <= 0.8 ms, batch 1 <= 0.15.
Rows: the uncached stack (varlen attention over whole sequences, every layer); the cached step eager and as one
CUDA graph (the graph runs each layer's append on a side stream beside its attention; "appends in order": after it;
"one append after all layers": every layer's K/V by one launch at the end, as a caller of CachedHSTUStack does;
bookkeeping `begin_step`, the fused kernel on CUDA, + per layer: paged attention (on Hopper the kernel
reads the pages; elsewhere page gather + attention) + append of the new history); the gather alone and the
attention over the gathered K/V of one layer (bytes moved by the gather, GB/s), and `hstu_attn_paged_func` of one
layer (what the step runs); the bookkeeping alone
(the fused kernel and the torch-ops path, each eager and as a CUDA graph; with --compile the torch ops fused by
torch.compile); a page-size sweep of the cached step. The cache state is restored before every timed run, so
each run appends the same tokens to the same cached lengths.

Times: CUDA events after warm-up, median of --reps runs. Without a GPU the script says so and exits 0 (``--smoke``
runs tiny shapes on the CPU to exercise the code).

Usage:
    python benchmarks/hstu_inference.py [--quick] [--results FILE] [--plot FILE.png] [--smoke] [--shapes A,B]
        [--pdl] [--portable] [--profile] [--timeline] [--fwd-split rule|wave]
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

import hstu_attn
from hstu_attn import _ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import capture_graph, once_ms, parser, publish, pyplot, save_figure  # noqa: E402


@dataclass
class Shape:
    name: str
    layers: int
    heads: int
    dim: int
    batch: int
    history: int     # tokens of history per user (whole history, uncached)
    cached: int      # of which cached before the step
    candidates: int  # per user

    @property
    def new(self) -> int:  # queries per user in the cached step
        return self.history - self.cached + self.candidates

    @property
    def tokens(self) -> int:  # tokens per iteration (Meta's tokens/s convention: history + candidates)
        return self.batch * (self.history + self.candidates)


SHAPES = {
    "dlrmv3": Shape("dlrmv3", 5, 4, 128, 32, 1024, 1024, 2048),
    "nvidia_b8": Shape("nvidia_b8", 8, 4, 128, 8, 4096, 3968, 256),
    "nvidia_b1": Shape("nvidia_b1", 8, 4, 128, 1, 4096, 3968, 256),
}
SMOKE = {
    "dlrmv3": Shape("dlrmv3", 1, 2, 32, 2, 20, 20, 12),
    "nvidia_b8": Shape("nvidia_b8", 2, 2, 32, 2, 40, 33, 8),
}
GOALS_MS = {("nvidia_b8", "cached step, CUDA graph"): 0.8, ("nvidia_b1", "cached step, CUDA graph"): 0.15,
            ("nvidia_b8", "bookkeeping, fused kernel, eager"): 0.05,
            ("nvidia_b8", "bookkeeping, fused kernel, CUDA graph"): 0.05,
            ("nvidia_b8", "bookkeeping, torch ops, CUDA graph"): 0.05,
            ("nvidia_b8", "bookkeeping, torch.compile + CUDA graph"): 0.05}


class Timer:
    def __init__(self, device: torch.device, warmup: int, reps: int):
        self.device, self.warmup, self.reps = device, warmup, reps

    def __call__(self, fn: Callable[[], object], before: Optional[Callable[[], object]] = None) -> float:
        """Median ms of fn (``before`` runs untimed ahead of every run)."""
        for _ in range(self.warmup):
            if before:
                before()
            fn()
        times = []
        for _ in range(self.reps):
            if before:
                before()
            times.append(once_ms(fn, self.device))
        return statistics.median(times)


def graphed(fn: Callable[[], object], device: torch.device) -> Optional[Callable[[], None]]:
    """fn captured in a CUDA graph (after one warm-up run on a side stream), or None on the CPU."""
    if device.type != "cuda":
        return None
    return capture_graph(fn).replay


STATE = ("slot_user", "slot_valid", "slot_len", "slot_pages", "last_used", "free_pages", "free_count", "clock",
         "error_flags")


def snapshot(cache):
    saved = {n: getattr(cache, n).clone() for n in STATE}

    def restore():
        for n, t in saved.items():
            getattr(cache, n).copy_(t)

    return restore


def cached_setup(sh: Shape, device, dtype, ps: int, rnd, max_append: bool = False, one_append: bool = False):
    """A cache holding every user's cached history, the cached serving step of the shape (bookkeeping + every
    layer's paged attention + append), and a function restoring the cache state before the step. max_append:
    begin_step gets the step's appended-token count, so the appends move only the new history rows. one_append:
    every layer's K/V appended by one launch after the last layer (as a caller of CachedHSTUStack does)."""
    H, D, L, B = sh.heads, sh.dim, sh.layers, sh.batch
    i32 = dict(dtype=torch.int32, device=device)
    tgt = torch.full((B,), sh.candidates, **i32)
    scaling = float(sh.history + sh.candidates)
    per_user = (sh.history + ps - 1) // ps
    cache = hstu_attn.KVCacheManager(L, H, D, num_pages=B * per_user + 2, page_size=ps, max_users=2 * B,
                                     max_pages_per_user=per_user, dtype=dtype, device=device)
    users = torch.arange(B, device=device) * 7 + 1
    # Fill the cache with each user's cached history (one setup step, all layers).
    cu_c = torch.arange(B + 1, **i32) * sh.cached
    if sh.cached:
        st = cache.begin_step(users, cu_c, torch.full((B,), sh.cached, **i32), B * sh.cached, sh.cached)
        cache.append(st, rnd(L, B * sh.cached, H, D), rnd(L, B * sh.cached, H, D))
    cache.check()
    restore = snapshot(cache)
    cu_q = torch.arange(B + 1, **i32) * sh.new
    app = torch.full((B,), sh.history - sh.cached, **i32)
    q, k, v = rnd(L, B * sh.new, H, D), rnd(L, B * sh.new, H, D), rnd(L, B * sh.new, H, D)

    def step():
        s = cache.begin_step(users, cu_q, app, B * sh.new, sh.new,
                             max_append=B * (sh.history - sh.cached) if max_append else None)
        for l in range(L):
            hstu_attn.cached_hstu_attention(cache, s, l, q[l], k[l], v[l], sh.new, num_targets=tgt,
                                            scaling_seqlen=scaling, append=not one_append)
        if one_append:
            cache.append(s, k, v)

    return cache, step, restore, (users, cu_q, app, q, k, v)


def seeded_step(sh: Shape, device, dtype, ps: int):
    """(step, restore) of cached_setup on inputs drawn from seed 0 (the profile and the timeline)."""
    gen = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, dtype=dtype, generator=gen)  # noqa: E731
    _, step, restore, _ = cached_setup(sh, device, dtype, ps, rnd)
    return step, restore


def profile_step(sh: Shape, device, dtype, ps: int) -> str:
    """torch.profiler's kernel table of 3 cached steps of the shape (where the step's time goes)."""
    from torch.profiler import ProfilerActivity, profile

    step, restore = seeded_step(sh, device, dtype, ps)
    step()
    restore()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
            restore()
        torch.cuda.synchronize()
    avg = prof.key_averages()
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            return f"### {sh.name}: 3 cached steps\n" + avg.table(sort_by=key, row_limit=16, max_name_column_width=70)
        except (AttributeError, KeyError, ValueError):
            continue
    return str(avg)


def timeline_step(sh: Shape, device, dtype, ps: int) -> str:
    """The kernels of one replay of the cached step's CUDA graph, in start order (torch.profiler's trace): each
    one's start from the first, duration, the gap since the previous kernel ended (negative: overlapping), stream;
    then the totals by kind. Where the graph's time goes between the kernels, which the eager profile cannot show."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    step, restore = seeded_step(sh, device, dtype, ps)
    g = graphed(step, device)
    restore()
    for _ in range(3):
        g()
        restore()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            g()
            torch.cuda.synchronize()
            restore()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name)).get("traceEvents", [])
    ks = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
    groups, cur = [], []
    for e in ks:  # replays are separated by the synchronizations and the restore's copies
        if cur and float(e["ts"]) - max(float(c["ts"]) + float(c["dur"]) for c in cur) > 50:
            groups.append(cur)
            cur = []
        cur.append(e)
    if cur:
        groups.append(cur)
    if not groups:
        return f"### {sh.name}: no kernel events in the trace of the graph's replays"
    last = groups[-1]
    t0 = float(last[0]["ts"])
    end = max(float(e["ts"]) + float(e["dur"]) for e in last)
    lines = [f"### {sh.name}: one CUDA-graph replay of the cached step, {len(last)} kernels, span {end - t0:.1f} us "
             f"(replays seen: {len(groups)})", "| start us | dur us | end us | gap us | stream | kernel |",
             "|---|---|---|---|---|---|"]
    prev_end, kinds, ends = None, {}, {}
    for e in last:
        ts, du = float(e["ts"]), float(e["dur"])
        gap = "" if prev_end is None else f"{ts - prev_end:.1f}"
        name = e.get("name", "?")
        short = name.split("(")[0].replace("void ", "")[:70]
        stream = e.get("args", {}).get("stream", "")
        lines.append(f"| {ts - t0:.1f} | {du:.1f} | {ts + du - t0:.1f} | {gap} | {stream} | {short} |")
        prev_end = ts + du if prev_end is None else max(prev_end, ts + du)
        kind = next((k for k in ("fwd_sm90", "append", "begin_step", "layout", "plan", "validate") if k in name),
                    "other")
        ends.setdefault(kind, []).append(ts + du - t0)
        n, t = kinds.get(kind, (0, 0.0))
        kinds[kind] = (n + 1, t + du)
    busy = sum(t for _, t in kinds.values())
    lines.append("")
    lines.append("totals: " + ", ".join(f"{k} {n} x = {t:.1f} us" for k, (n, t) in sorted(kinds.items())) +
                 f"; kernel time {busy:.1f} us of the {end - t0:.1f} us span")
    # (under programmatic launches a kernel's start is its CTAs' residency, not its work: the ends tell each
    # layer's time, end to end)
    fe = ends.get("fwd_sm90", [])
    if fe:
        lines.append("attention ends (us): " + ", ".join(f"{x:.1f}" for x in fe) + "; end to end: " +
                     ", ".join(f"{b - a:.1f}" for a, b in zip(fe, fe[1:])) + f"; the span after the last: "
                     f"{end - t0 - fe[-1]:.1f}")
    return "\n".join(lines)


def run_shape(sh: Shape, device, dtype, timer: Timer, page_size: int, sweep: bool,
              compile_book: bool = False) -> List[Dict]:
    rows = []
    H, D, L, B = sh.heads, sh.dim, sh.layers, sh.batch
    gen = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, dtype=dtype, generator=gen)  # noqa: E731
    i32 = dict(dtype=torch.int32, device=device)
    tgt = torch.full((B,), sh.candidates, **i32)
    scaling = float(sh.history + sh.candidates)

    # Uncached: every layer over whole sequences.
    Lfull = sh.history + sh.candidates
    cu_full = torch.arange(B + 1, **i32) * Lfull
    qf, kf, vf = rnd(B * Lfull, H, D), rnd(B * Lfull, H, D), rnd(B * Lfull, H, D)

    def uncached():
        for _ in range(L):
            hstu_attn.hstu_attn_varlen_func(qf, kf, vf, cu_full, cu_full, Lfull, Lfull, None, tgt, 1, (-1, 0),
                                            scaling_seqlen=scaling, check_values=False)

    ms = timer(uncached)
    rows.append(dict(case=sh.name, row="uncached stack", ms=ms, tokens=sh.tokens))

    for ps in ([16, 32, 64, 128, 256] if sweep else [page_size]):
        cache, step, restore, (users, cu_q, app, q, k, v) = cached_setup(sh, device, dtype, ps, rnd)

        label = f" ps{ps}" if sweep and ps != page_size else ""
        if not sweep or ps == page_size:
            rows.append(dict(case=sh.name, row=f"cached step, eager{label}", ms=timer(step, restore), tokens=sh.tokens))
        restore()
        g = graphed(step, device)
        if g is not None:
            rows.append(dict(case=sh.name, row=f"cached step, CUDA graph{label}", ms=timer(g, restore),
                             tokens=sh.tokens))
        restore()
        # The same step with one of the cache's defaults turned off (where it is on): overlap_append (each layer's
        # append on a side stream beside its attention; off: after it on one stream) and pdl (on Hopper the serving
        # step's attention, its plan's validation and the appends as programmatic dependent launches).
        for attr, variant in (("overlap_append", "appends in order"), ("pdl", "plain launches")):
            if g is None or label or not getattr(cache, attr, False):
                continue
            setattr(cache, attr, False)
            g_off = graphed(step, device)
            restore()
            rows.append(dict(case=sh.name, row=f"cached step, CUDA graph, {variant}", ms=timer(g_off, restore),
                             tokens=sh.tokens))
            restore()
            setattr(cache, attr, True)
            del g_off
        cache.check()
        if sweep and ps != page_size:
            continue
        if g is not None:  # the same step with begin_step(max_append=...): only the new history is appended
            c2, step2, restore2, _ = cached_setup(sh, device, dtype, ps, rnd, max_append=True)
            g2 = graphed(step2, device)
            restore2()
            rows.append(dict(case=sh.name, row="cached step, CUDA graph, max_append", ms=timer(g2, restore2),
                             tokens=sh.tokens))
            restore2()
            c2.check()
            del c2, g2
            c3, step3, restore3, _ = cached_setup(sh, device, dtype, ps, rnd, one_append=True)
            g3 = graphed(step3, device)
            restore3()
            rows.append(dict(case=sh.name, row="cached step, CUDA graph, one append after all layers",
                             ms=timer(g3, restore3), tokens=sh.tokens))
            restore3()
            c3.check()
            del c3, g3
        # One layer's gather and attention apart, and the bookkeeping alone.
        s = cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
        restore()
        kv_layer = cache.layer_cache(0)
        kv = hstu_attn.gather_paged_kv(kv_layer, k[0], v[0], s.layout)
        rows_moved = s.layout.capacity + 1
        gbytes = 2 * (2 * rows_moved * H * D * kv.element_size()) / 1e9  # read + write, K and V
        ms_g = timer(lambda: hstu_attn.gather_paged_kv(kv_layer, k[0], v[0], s.layout))
        rows.append(dict(case=sh.name, row="gather, one layer", ms=ms_g, extra=f"{gbytes * 1e3:.1f} MB, "
                         f"{gbytes / (ms_g / 1e3):.0f} GB/s"))
        ms_a = timer(lambda: hstu_attn.hstu_attn_varlen_func(
            q[0], kv[:, 0], kv[:, 1], cu_q, s.layout.cu_seqlens_k, sh.new, s.max_seqlen_k, None, tgt, 1, (-1, 0),
            scaling_seqlen=scaling, check_values=False))
        rows.append(dict(case=sh.name, row="attention, one layer", ms=ms_a))
        # What a cached layer runs: hstu_attn_paged_func (on Hopper the kernel reads the pages; else gather + kernel).
        kv0 = cache.layer_cache(0)
        ms_p = timer(lambda: hstu_attn.hstu_attn_paged_func(
            q[0], k[0], v[0], cu_q, kv0, s.page_offsets, s.page_ids, s.last_page_lens, sh.new, s.max_seqlen_k,
            None, tgt, 1, (-1, 0), scaling_seqlen=scaling, check_values=False, layout=s.layout))
        rows.append(dict(case=sh.name, row="paged attention, one layer", ms=ms_p))
        # Bookkeeping alone: the fused kernel (hstu_attn::kv_cache_begin_step, the default on CUDA) beside the
        # torch-ops path (the reference; ~250 launches), each eager and as a CUDA graph.
        book = lambda: cache.begin_step(users, cu_q, app, B * sh.new, sh.new)  # noqa: E731
        default_kernel = cache.use_kernel
        for impl, use in (("fused kernel", True), ("torch ops", False)):
            if use and not default_kernel:
                continue  # CPU, or a build without the kernel
            cache.use_kernel = use
            rows.append(dict(case=sh.name, row=f"bookkeeping, {impl}, eager", ms=timer(book, restore)))
            gb = graphed(book, device)
            restore()
            if gb is not None:
                rows.append(dict(case=sh.name, row=f"bookkeeping, {impl}, CUDA graph", ms=timer(gb, restore)))
            restore()
        cache.use_kernel = False  # torch.compile below fuses the torch ops
        if compile_book and device.type == "cuda":
            # The same ops fused by inductor (Triton) into fewer kernels, then one CUDA graph.
            try:
                cb = torch.compile(cache.begin_step, dynamic=False)
                for _ in range(2):
                    cb(users, cu_q, app, B * sh.new, sh.new)
                    restore()
                gc = graphed(lambda: cb(users, cu_q, app, B * sh.new, sh.new), device)
                restore()
                rows.append(dict(case=sh.name, row="bookkeeping, torch.compile + CUDA graph", ms=timer(gc, restore)))
            except Exception as e:  # report, do not lose the rest of the run
                rows.append(dict(case=sh.name, row="bookkeeping, torch.compile + CUDA graph", ms=float("nan"),
                                 extra=f"failed: {type(e).__name__}: {str(e)[:80]}"))
            restore()
        cache.use_kernel = default_kernel
        del kv
    return rows


def table(rows: List[Dict], device: torch.device, dtype: torch.dtype, page_size: int) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (smoke)"
    head = (f"HSTU inference, attention alone (no projections); {name}, {str(dtype).replace('torch.', '')}, "
            f"page size {page_size} unless given, times in ms (median, CUDA events), tokens/s = batch x (history + "
            f"candidates) / time; {datetime.date.today()}\n\n")
    lines = ["| case | row | ms | M tokens/s | goal ms | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        tps = f"{r['tokens'] / (r['ms'] / 1e3) / 1e6:.2f}" if r.get("tokens") else ""
        goal = GOALS_MS.get((r["case"], r["row"]))
        goal_s = "" if goal is None else (f"{goal} ({'met' if r['ms'] <= goal else 'missed'})")
        lines.append(f"| {r['case']} | {r['row']} | {r['ms']:.3f} | {tps} | {goal_s} | {r.get('extra', '')} |")
    return head + "\n".join(lines) + "\n"


def plot(rows: List[Dict], path: str) -> None:
    plt = pyplot(path)
    if plt is None:
        return
    sel = [r for r in rows if "step" in r["row"] or "stack" in r["row"]]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(sel) + 1.5))
    ax.barh([f"{r['case']}: {r['row']}" for r in sel], [r["ms"] for r in sel])
    ax.set_xscale("log")
    ax.set_xlabel("ms per iteration (log)")
    ax.invert_yaxis()
    save_figure(fig, path, dpi=110)


def main(argv=None) -> int:
    ap = parser(__doc__, quick="fewer repetitions, no page-size sweep")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (exercises the script)")
    ap.add_argument("--results", help="append the markdown table to this file")
    ap.add_argument("--plot", help="write a PNG bar chart here")
    ap.add_argument("--page-size", type=int, default=64, choices=hstu_attn.PAGE_SIZES)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--compile", action="store_true", help="also time the bookkeeping fused by torch.compile")
    ap.add_argument("--shapes", help="comma-separated shape names to run (default: all), e.g. nvidia_b1,nvidia_b8")
    ap.add_argument("--portable", action="store_true", help="the portable (sm80-class) kernels on a Hopper GPU "
                    "(kernel_options(sm90=False)), to compare the two families on one device")
    ap.add_argument("--pdl", action="store_true", help="the paged forward as a programmatic dependent launch "
                    "(kernel_options(pdl=True); docs/hstu_inference.md)")
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's kernel table of each shape's "
                    "cached step instead of the timings")
    ap.add_argument("--timeline", action="store_true", help="print the kernels of one CUDA-graph replay of each "
                    "shape's cached step (start, duration, gap, stream) instead of the timings")
    ap.add_argument("--fwd-split", choices=("rule", "wave"), default="rule", help="the Hopper forward's split of "
                    "few-query tiles: the planner's rule (default) or the smallest cap whose list fits the SMs at "
                    "once (kernel_options(fwd_split_tiles='wave'))")
    args = ap.parse_args(argv)
    if args.smoke:
        device, dtype, shapes = torch.device("cpu"), torch.float32, SMOKE
        args.page_size = 16
    else:
        if not (torch.cuda.is_available() and hstu_attn.library_loaded()):
            print("hstu_inference: no CUDA device (or no op library): skipped")
            return 0
        device, dtype, shapes = torch.device("cuda"), torch.bfloat16, SHAPES
    if args.shapes:
        unknown = sorted(set(args.shapes.split(",")) - set(shapes))
        if unknown:
            ap.error(f"--shapes: expected names among {sorted(shapes)}, got {unknown}")
        shapes = {n: sh for n, sh in shapes.items() if n in args.shapes.split(",")}
    reps = args.reps or (2 if args.smoke else 10 if args.quick else 30)
    timer = Timer(device, warmup=1 if args.smoke else 3, reps=reps)
    if args.profile:
        if device.type == "cuda":
            with _ops.kernel_options(pdl=args.pdl, sm90=not args.portable):
                for sh in shapes.values():
                    print(profile_step(sh, device, dtype, args.page_size))
        return 0
    split = {} if args.fwd_split == "rule" else dict(fwd_split_tiles="wave")
    if args.timeline:
        if device.type == "cuda":
            with _ops.kernel_options(pdl=args.pdl, sm90=not args.portable, **split):
                for sh in shapes.values():
                    print(timeline_step(sh, device, dtype, args.page_size))
        return 0
    rows = []
    with _ops.kernel_options(pdl=args.pdl, sm90=not args.portable, **split):
        for name, sh in shapes.items():
            sweep = name == "nvidia_b8" and not args.quick
            rows += run_shape(sh, device, dtype, timer, args.page_size, sweep, args.compile and name == "nvidia_b8")
    text = table(rows, device, dtype, args.page_size)
    if split:
        text = "kernel_options(fwd_split_tiles='wave'): the one-wave split of few-query tiles\n\n" + text
    if args.pdl:
        text = "kernel_options(pdl=True): the paged forward launched as a programmatic dependent launch\n\n" + text
    if args.portable:
        text = "kernel_options(sm90=False): the portable (sm80-class) kernels\n\n" + text
    publish(text, args.results)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
