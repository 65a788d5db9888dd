"""The NVIDIA cached serving step (benchmarks/hstu_inference.py's cached_setup) as a CUDA graph, for comparisons of
two wheels in one device call (issue 34): per shape and KVCacheManager variant, the median / min time of one
replay (the cache state restored before each, as the benchmark does), the variants' rounds interleaved so that a
drift of the GPU's clock hits every variant alike; then (--timeline) the kernels of one replay of the default
step (start, duration, gap, stream). --hide-launch N: each variant also timed behind a GPU spin of N cycles, so
that the host's launch of the graph overlaps it (rows "..., launch hidden": the step's GPU time without the launch
latency that a replay on an idle GPU pays). --bench-step: the graph of hstu_inference.py's own step (no copies of the
layers' outputs between them, as the benchmark's "cached step, CUDA graph" row) instead of the kept-output one.

Variants (private attributes of KVCacheManager; a variant the installed wheel lacks is skipped):
  default       the manager as constructed
  off           _plan_ready = False, _split_arrive = False (main16's step)
  eager_gather  _lazy_gather_plan = False: begin_step writes the gather plan (src_rows) itself
  plain         pdl = False (plain launches)
  plan_ready    _plan_ready = True alone (begin_step's ready word; the step plan's block spins on it and exits once
                begin_step's step tensors are written); split_arrive: _split_arrive = True alone (the quick arrival)
  no_early      _begin_early = False: begin_step's ready word in its first form (reset by thread 0 before the
                first barrier, the 2 after the append rows, the lookup's loads after the sort)
  main17        _begin_early = False (main d901835's step; its warm plan CTA, measured no gain, was removed)
  one_append    cached_setup(one_append=True): every layer's K / V appended by one launch after the last layer
                (CachedHSTUStack's form; --bench-step only)
  same1 .. same5  the default under other names: compare wheels in processes with the same number of variants
                (a process's later variants measured up to ~1 us slower than its first: docs/hstu_inference.md,
                "The first layer's address translations")
  pre0          _pre_wait = False: the later layers' work items and lengths read after their wait (the default
                reads them before it)
  vmm2m, vmm    the default with the cache's pool in memory mapped by cuMemCreate / cuMemMap (b1_pool_vmm.py: one
                physical allocation per 2 MB granule, or one for the whole pool) instead of the caching allocator's
  NAME+l2s      variant NAME with every kernel node of its graph given an L2 access policy window over the cache's
                pool (hit and miss property "streaming": the K / V lines evicted first, so that the step's small
                tables, inputs and code may stay in the L2 across replays); a diagnostic, set through the CUDA runtime

    python tools/hstu_dev/b1_step_bench.py --label main --shapes nvidia_b1,nvidia_b8 --variants default,eager_gather
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (the branch's benchmarks, or those of the tree the script runs from: a copy of it may run outside the branch)
for _d in (os.path.join(os.getcwd(), "benchmarks"), os.path.join(ROOT, "benchmarks"),
           os.path.dirname(os.path.abspath(__file__))):
    if os.path.isdir(_d):
        sys.path.insert(0, _d)

VARIANTS = {"default": {}, "off": {"_plan_ready": False, "_split_arrive": False},
            "eager_gather": {"_lazy_gather_plan": False}, "plain": {"pdl": False},
            "plan_ready": {"_plan_ready": True, "_split_arrive": False, "_begin_early": False},
            "split_arrive": {"_plan_ready": False, "_split_arrive": True},
            "no_early": {"_begin_early": False}, "main17": {"_begin_early": False},
            "one_append": {},
            # the default again, under another name (a process's variant count matched with another's)
            **{f"same{n}": {"_split_arrive": True} for n in range(1, 6)},
            # the default, the pool moved into driver-mapped memory (b1_pool_vmm.swap_pool)
            "vmm2m": {}, "vmm": {},
            # the later layers' work items read after their wait (main20's form)
            "pre0": {"_pre_wait": False}}
POOL_MODES = ("vmm2m", "vmm")


def variant_setup(hi, sh, var: str, dev, dt):
    """hstu_inference.py's cached_setup of shape `sh` on inputs drawn from seed 0, the manager given variant `var`'s
    attributes (NAME+l2s: NAME's; one_append: cached_setup's form), or None where the installed wheel lacks one."""
    gen = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=gen)  # noqa: E731
    made = hi.cached_setup(sh, dev, dt, 64, rnd, one_append=var == "one_append")
    attrs = VARIANTS[var[:-4] if var.endswith("+l2s") else var]
    if any(not hasattr(made[0], a) for a in attrs):
        return None
    for a, val in attrs.items():
        setattr(made[0], a, val)
    base = var[:-4] if var.endswith("+l2s") else var
    if base in POOL_MODES:
        from b1_pool_vmm import swap_pool
        try:
            print(f"<!-- {var}: {swap_pool(made[0], base)} -->")
        except Exception as e:  # noqa: BLE001 (a driver that refuses the mapping: reported, the variant skipped)
            print(f"<!-- {var}: the pool's mapping failed: {type(e).__name__}: {str(e)[:200]} -->")
            return None
    return made


def _l2_streaming_graph(fn, pool: torch.Tensor):
    """fn captured as capture_graph does, every kernel node given an access policy window over `pool` (hit and
    miss property streaming) before the graph is instantiated."""
    import ctypes

    rt = ctypes.CDLL("libcudart.so.13")

    class Window(ctypes.Structure):  # cudaAccessPolicyWindow inside the 64-byte cudaLaunchAttributeValue
        _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                    ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int), ("pad", ctypes.c_char * 36)]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        fn()
    graph = ctypes.c_void_p(g.raw_cuda_graph())
    n = ctypes.c_size_t(0)
    assert rt.cudaGraphGetNodes(graph, None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * n.value)()
    assert rt.cudaGraphGetNodes(graph, nodes, ctypes.byref(n)) == 0
    limit = torch.cuda.get_device_properties(0).L2_cache_size if hasattr(torch.cuda.get_device_properties(0),
                                                                         "L2_cache_size") else 0
    w = Window(pool.data_ptr(), min(pool.numel() * pool.element_size(), 1 << 27), 1.0, 1, 1)
    set_n = 0
    for node in nodes:
        t = ctypes.c_int(-1)
        rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t))
        if t.value == 0:  # a kernel node
            if rt.cudaGraphKernelNodeSetAttribute(ctypes.c_void_p(node), 1, ctypes.byref(w)) == 0:
                set_n += 1
    g.instantiate()
    print(f"<!-- l2s: window {w.num_bytes >> 20} MiB over the pool on {set_n} of {n.value} nodes (L2 {limit >> 20} "
          f"MiB) -->")
    return g


def b1_variant(hi, var: str, dev, dt):
    """variant_setup of the NVIDIA batch-1 shape plus the step's num_targets, or None (variant not in the wheel):
    (shape, cache, restore, (users, cu_q, app, q, k, v), num_targets)."""
    sh = hi.SHAPES["nvidia_b1"]
    made = variant_setup(hi, sh, var, dev, dt)
    if made is None:
        return None
    cache, _, restore, inputs = made
    return sh, cache, restore, inputs, torch.full((sh.batch,), sh.candidates, dtype=torch.int32, device=dev)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="?")
    ap.add_argument("--shapes", default="nvidia_b1")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--timeline", action="store_true")
    # the timeline's manager with this variant's attributes (default: as constructed; a comma list: one each)
    ap.add_argument("--timeline-variant", default="default")
    # > 0: also each variant with a GPU spin of this many clock cycles before each timed replay (torch.cuda._sleep),
    # so that the host's graph launch overlaps it: the rows "..., launch hidden" are the step's GPU time alone
    ap.add_argument("--hide-launch", type=int, default=0)
    # time cached_setup's own step (hstu_inference.py's "cached step, CUDA graph" row) instead of the one that copies
    # each layer's output into a kept tensor (those copies are plain kernels between the layers' attentions)
    ap.add_argument("--bench-step", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("b1_step_bench: no CUDA GPU, skipped")
        return 0
    import hstu_inference as hi
    from bench_util import capture_graph

    import hstu_attn

    dev, dt = torch.device("cuda"), torch.bfloat16
    print(f"| wheel | shape | variant | step us (median) | min | rounds' medians |")
    print("|---|---|---|---|---|---|")
    from hstu_attn._checks import channel

    def pending_error() -> str:
        torch.cuda.synchronize()
        try:
            channel.raise_pending()
        except Exception as e:  # noqa: BLE001 (a device-side check's report, cleared by the raise)
            return type(e).__name__ + ": " + str(e)[:140]
        return ""

    for name in args.shapes.split(","):
        sh = hi.SHAPES[name]
        runs = []
        ref = None
        for var in args.variants.split(","):
            made = variant_setup(hi, sh, var, dev, dt)
            if made is None:
                continue
            cache, bench_step, restore, (users, cu_q, app, q, k, v) = made
            l2s = var.endswith("+l2s")
            B = sh.batch
            tgt = torch.full((B,), sh.candidates, dtype=torch.int32, device=dev)
            res = torch.empty(sh.layers, B * sh.new, sh.heads, sh.dim, device=dev, dtype=dt)

            def step(cache=cache, users=users, cu_q=cu_q, app=app, q=q, k=k, v=v, tgt=tgt, res=res):
                # (cached_setup's step, each layer's output kept)
                st = cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
                for layer in range(sh.layers):
                    res[layer].copy_(hstu_attn.cached_hstu_attention(
                        cache, st, layer, q[layer], k[layer], v[layer], sh.new, num_targets=tgt,
                        scaling_seqlen=float(sh.history + sh.candidates)))

            restore()
            err0 = pending_error()
            fn = bench_step if args.bench_step else step
            try:
                g = _l2_streaming_graph(fn, cache.pool) if l2s else capture_graph(fn)
            except Exception as e:  # noqa: BLE001 (a variant this machine or wheel cannot capture: reported, skipped)
                print(f"<!-- {args.label} {name} {var}: capture failed: {type(e).__name__}: {str(e)[:200]} -->")
                torch.cuda.synchronize()
                continue
            restore()
            res.fill_(float("nan"))
            for _ in range(3):
                g.replay()
                restore()
            err = pending_error()
            finite = bool(torch.isfinite(res).all()) or args.bench_step  # (the benchmark's step keeps no outputs)
            if ref is None and finite and not args.bench_step:
                ref = res.clone()
            same = "" if ref is None else ("bitwise" if torch.equal(res, ref) else
                                           f"max diff {(res.float() - ref.float()).abs().max().item():.2e}")
            print(f"<!-- {args.label} {name} {var}: outputs finite {finite}, vs first finite variant: {same}; "
                  f"device error before capture: {err0 or 'none'}; after replays: {err or 'none'} -->")
            # (the step and its input tensors stay referenced as long as the graph: freed, their memory would be
            # reused by the next variant's tensors while the graph still reads it)
            runs.append((var, g, restore, [], (res, step, bench_step)))
        hidden = {var: [] for var, *_ in runs}
        for _ in range(args.rounds):
            for var, g, restore, meds, _ in runs:
                for hide in (False, True) if args.hide_launch else (False,):
                    ts = []
                    for _ in range(args.reps):
                        restore()
                        if hide:  # the GPU busy while the host launches the graph: the step's GPU time alone
                            torch.cuda._sleep(args.hide_launch)
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        g.replay()
                        e.record()
                        e.synchronize()
                        ts.append(s.elapsed_time(e) * 1e3)
                    (hidden[var] if hide else meds).append(ts)
        for var, _, _, meds, (res, *_) in runs:
            ok = bool(torch.isfinite(res).all()) and ref is not None and torch.equal(res, ref)
            note = "the benchmark's step (outputs not kept)" if args.bench_step else \
                "outputs bitwise the first" if ok else "OUTPUTS DIFFER"
            for label, rounds in ((var, meds), (f"{var}, launch hidden", hidden[var])):
                allt = [t for ts in rounds for t in ts]
                if not allt:
                    continue
                rm = " / ".join(f"{statistics.median(ts):.1f}" for ts in rounds)
                print(f"| {args.label} | {name} | {label} | {statistics.median(allt):.1f} | {min(allt):.1f} | {rm} | "
                      f"{note} |")
        print(f"<!-- {args.label} {name}: device error after the timing: {pending_error() or 'none'} -->")
        del runs
        torch.cuda.synchronize()
    if args.timeline:
        init = hstu_attn.KVCacheManager.__init__
        for tv in args.timeline_variant.split(","):
            attrs = VARIANTS[tv]

            def init_variant(self, *a, tv=tv, attrs=attrs, **kw):  # (timeline_step makes its own manager)
                init(self, *a, **kw)
                for k, val in attrs.items():
                    setattr(self, k, val)
                if tv in POOL_MODES:
                    from b1_pool_vmm import swap_pool
                    swap_pool(self, tv)

            hstu_attn.KVCacheManager.__init__ = init_variant
            for name in args.shapes.split(","):
                print()
                print(f"{args.label} ({tv}): " + hi.timeline_step(hi.SHAPES[name], dev, dt, 64))
            hstu_attn.KVCacheManager.__init__ = init
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
