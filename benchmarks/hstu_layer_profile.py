"""Where the HSTU ranking model's train step spends its time, and one HSTULayer's forward + backward split into
its parts, fused vs unfused (issue 33).

1. Model step (benchmarks/hstu_model.py's step: examples/hstu_ranking, B=128, 4 layers, 4 heads x 64, 16
   candidates, bf16 autocast, dynamicemb tables) for the variants `ours` (HSTULayer's fused kernels) and
   `ours-unfused`: CUDA-event ms per step, host ms to issue a step, GPU busy ms per step (sum of kernel times
   under torch.profiler), the number of host synchronizations inside one step, the top CUDA kernels and the
   kernel time per category, and the top host ops.
2. One layer at the model's shapes (tokens and masks of a model batch: [user] + history + candidates), bf16
   autocast with fp32 parameters: forward + backward of each part, eager (CUDA events around back-to-back runs:
   host launch costs included) and replayed from a CUDA graph (GPU time only), unfused vs fused.

Usage (GPU; without one it prints a line and exits 0):
    python benchmarks/hstu_layer_profile.py [--histories 512] [--steps 10] [--no-model] [--no-layer] [--smoke]
    python benchmarks/hstu_layer_profile.py --ab-rounds 6 --histories 128 512 1024   (interleaved step times only)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
import warnings
from collections import defaultdict

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_model  # noqa: E402  (puts examples/hstu_ranking on sys.path)
from bench_util import capture_graph, event_ms, git_commit  # noqa: E402

import hstu_attn  # noqa: E402
from hstu_attn._fused import layer_norm_mul, silu_split  # noqa: E402

CATEGORIES = [  # (category, regex over the kernel name), first match wins
    ("fused layer kernels", r"layer_norm_mul|silu_split"),
    ("hstu attention", r"hstu"),
    ("dynamicemb", r"dynamicemb"),
    ("GEMM", r"gemm|nvjet|cutlass|xmma|cublas|sm90_|sm80_"),
    ("layer norm", r"layer_norm|LayerNorm"),
    ("optimizer", r"multi_tensor|foreach|adam|Adam"),
    ("copy / cat / fill", r"[Cc]opy|[Cc]at|Memcpy|Memset|fill|index"),
    ("reduce", r"reduce|Reduce"),
    ("elementwise", r"elementwise|vectorized|Elementwise"),
]


def model_args(histories, smoke=False):
    """hstu_model.py's default model (--smoke: a tiny batch for the CPU test)."""
    return argparse.Namespace(bias="none", heads=4, head_dim=64, layers=4, candidates=2 if smoke else 16,
                              users=16 if smoke else 4096, items=64 if smoke else 100_000,
                              batch_size=4 if smoke else 128, histories=histories)


def short(name, n=90):
    name = re.sub(r"^void ", "", name)
    return name if len(name) <= n else name[: n - 3] + "..."


def category(name):
    for cat, pat in CATEGORIES:
        if re.search(pat, name):
            return cat
    return "other"


def count_syncs(step, b):
    """Host synchronizations torch reports (sync debug mode) inside one step, and the first one's message."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(b)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    msgs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
    return len(msgs), (msgs[0].splitlines()[0][:120] if msgs else "")


def profile_model(variant, hist, steps, top):
    from torch.profiler import ProfilerActivity, profile

    args = model_args([hist])
    dev = torch.device("cuda")
    step, batches, model = hstu_model.make_step(variant, hist, args, dev)
    for i in range(8):
        step(batches[i % 8])
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for i in range(steps):
        step(batches[i % 8])
    t1 = time.perf_counter()
    end.record()
    end.synchronize()
    wall = start.elapsed_time(end) / steps
    issue = (t1 - t0) * 1e3 / steps
    syncs, first = count_syncs(step, batches[0])
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            step(batches[i % 8])
        torch.cuda.synchronize()
    kern, host = [], []
    for e in prof.key_averages():
        if getattr(e, "is_user_annotation", False) or "#" in e.key:  # ranges such as Optimizer.step#Adam.step
            continue
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kern.append((e.self_device_time_total / steps / 1e3, e.count / steps, e.key))
        elif e.self_cpu_time_total > 0:
            host.append((e.self_cpu_time_total / steps / 1e3, e.count / steps, e.key))
    kern.sort(reverse=True)
    host.sort(reverse=True)
    busy = sum(k[0] for k in kern)
    launches = sum(k[1] for k in kern)
    tokens = statistics.mean(b["user"].shape[0] + b["hist_items"].shape[0] + b["cand_items"].shape[0]
                             for b in batches)
    print(f"\n### model step, variant {variant}, max history {hist} ({tokens:,.0f} tokens per step)\n")
    print(f"- step (CUDA events, {steps} back-to-back steps): {wall:.2f} ms; host issue time: {issue:.2f} ms per step; "
          f"GPU busy (sum of kernel times): {busy:.2f} ms per step = {100 * busy / wall:.0f}% of the step; "
          f"{launches:.0f} kernels per step; host synchronizations in one step: {syncs}"
          + (f" (first: {first})" if first else ""))
    cats = defaultdict(lambda: [0.0, 0.0])
    for ms, n, name in kern:
        c = cats[category(name)]
        c[0] += ms
        c[1] += n
    print("\n| kernel category | ms per step | kernels per step | % of GPU busy |\n|---|---:|---:|---:|")
    for cat, (ms, n) in sorted(cats.items(), key=lambda kv: -kv[1][0]):
        print(f"| {cat} | {ms:.3f} | {n:.0f} | {100 * ms / busy:.1f} |")
    print(f"\n| top CUDA kernel | ms per step | calls per step |\n|---|---:|---:|")
    for ms, n, name in kern[:top]:
        print(f"| `{short(name)}` | {ms:.3f} | {n:.0f} |")
    print(f"\n| top host op (self CPU) | ms per step | calls per step |\n|---|---:|---:|")
    for ms, n, name in host[:15]:
        print(f"| `{short(name, 60)}` | {ms:.3f} | {n:.0f} |")
    del step, batches, model
    torch.cuda.empty_cache()
    return wall, issue, busy


def ab_steps(hist, variants, steps, rounds):
    """Step ms of each variant, interleaved: every variant's model is built, then each round times `steps`
    back-to-back steps of every variant in turn (the order reversed every other round); median and min over
    rounds. The step is host-bound, so variants timed one after the other drift with the host; this does not."""
    args = model_args([hist])
    dev = torch.device("cuda")
    built = {v: hstu_model.make_step(v, hist, args, dev) for v in variants}
    for step, batches, _ in built.values():
        for i in range(5):
            step(batches[i % 8])
    times = {v: [] for v in variants}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            step, batches, _ = built[v]
            torch.cuda.synchronize()
            times[v].append(event_ms(lambda: [step(batches[i % 8]) for i in range(steps)]) / steps)
    base = statistics.median(times[variants[0]])
    for v in variants:
        med = statistics.median(times[v])
        print(f"| {hist} | {v} | {med:.2f} | {min(times[v]):.2f} | {med / base:.3f} |")
    del built
    torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------ one layer
def timed(fn, inner, reps):
    """(eager ms, graph ms) of one fn(): events around `inner` back-to-back runs (median of reps), and the same
    with fn captured once into a CUDA graph (None where capture fails)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()

    def events(run):
        return statistics.median(event_ms(lambda: [run() for _ in range(inner)]) / inner for _ in range(reps))

    eager = events(fn)
    try:
        graph = capture_graph(fn, warmup=2)
        g = events(graph.replay)
    except Exception as e:  # a part that cannot be captured: its row says so
        print(f"(graph capture failed: {type(e).__name__}: {e})", file=sys.stderr)
        g = None
    return eager, g


def cpu_once(fn, inner, reps):
    """(ms of one fn(), None): the --smoke timer (perf_counter, no graph)."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3, None


def layer_parts(hist, inner, reps, dev=torch.device("cuda"), timer=timed, smoke=False):
    args = model_args([hist], smoke)
    seqs = hstu_model._sequences(args.users, args.items, 2 * args.candidates + 2, hist + 2 * args.candidates + 1)
    b = hstu_model.Batcher(seqs, args.batch_size, hist, args.candidates, seed=1).train_batch(0)
    lens = 1 + b["hist_lengths"].long() + b["cand_lengths"].long()
    cu = hstu_attn.lengths_to_offsets(lens).to(dev)
    L = 1 + int(b["max_hist"]) + int(b["max_cand"])
    nc = torch.ones(lens.shape[0], dtype=torch.int32, device=dev)
    nt = b["cand_lengths"].to(dev, torch.int32)
    T, E, H, D = int(lens.sum()), args.heads * args.head_dim, args.heads, args.head_dim
    hd = H * D
    torch.manual_seed(0)
    layer = hstu_attn.HSTULayer(E, H, D, scaling_seqlen=L).to(dev)
    gen = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, device=dev).to(dtype)

    bf = torch.bfloat16
    act = bf if dev.type == "cuda" else torch.float32  # activations after the autocast projection (CPU: a smoke run)
    x = rnd(T, E).requires_grad_()
    n = rnd(T, E).requires_grad_()
    proj = rnd(T, 4 * hd, dtype=act).requires_grad_()
    q, k, v = (rnd(T, H, D, dtype=act).requires_grad_() for _ in range(3))
    a, u = rnd(T, hd, dtype=act).requires_grad_(), rnd(T, hd, dtype=act).requires_grad_()
    gated = rnd(T, hd, dtype=act).requires_grad_()
    w, bias = layer.attn_norm.weight, layer.attn_norm.bias

    def unfused_split(p):
        uu, vv, qq, kk = F.silu(p).split(hd, dim=-1)
        return uu, vv.contiguous(), qq.contiguous(), kk.contiguous()  # the attention takes contiguous q, k, v

    def whole(fused):
        def f():
            layer.fused = fused
            return layer(x, cu, L, nc, nt)
        return f

    parts = [
        ("input LayerNorm", lambda: layer.input_norm(x), None),
        ("uvqk projection", lambda: layer.uvqk(n), None),
        ("SiLU + split (+ contiguous q, k, v)", lambda: unfused_split(proj), lambda: silu_split(proj)),
        ("attention", lambda: layer._attention(q, k, v, cu, cu, L, L, nc, nt, None), None),
        ("LayerNorm(a) * u", lambda: layer.attn_norm(a) * u, lambda: layer_norm_mul(a, u, w, bias)),
        ("output projection + dropout + residual", lambda: x + layer.dropout(layer.output(gated)), None),
        ("whole layer", whole(False), whole(True)),
    ]
    gpu = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    print(f"\n### one HSTULayer, forward + backward: {gpu}, E={E}, {H} heads x {D}, "
          f"{T:,} tokens (B={lens.shape[0]}, max history {hist}), bf16 autocast, fp32 parameters; ms\n")
    print("| part | unfused eager | unfused graph | fused eager | fused graph | eager gain | graph gain |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    grads = {}
    for name, plain, fused in parts:
        row = []
        for fn in (plain, fused):
            if fn is None:
                row.append((None, None))
                continue

            def fwd_bwd(fn=fn, name=name):
                with torch.autocast("cuda", dtype=bf, cache_enabled=False, enabled=dev.type == "cuda"):
                    out = fn()
                outs = out if isinstance(out, tuple) else (out,)
                if name not in grads:
                    grads[name] = [torch.randn_like(o) for o in outs]
                torch.autograd.backward(outs, grads[name])

            row.append(timer(fwd_bwd, inner, reps))

        def f(v):
            return "" if v is None else f"{v:.4f}"

        def gain(i):
            p, q_ = row[0][i], row[1][i]
            return "" if p is None or q_ is None else f"{p - q_:+.4f}"

        print(f"| {name} | {f(row[0][0])} | {f(row[0][1])} | {f(row[1][0])} | {f(row[1][1])} | {gain(0)} | "
              f"{gain(1)} |")
    layer.fused = True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--histories", type=int, nargs="+", default=[512])
    p.add_argument("--steps", type=int, default=10, help="model steps per measurement")
    p.add_argument("--top", type=int, default=25, help="rows of the kernel table")
    p.add_argument("--inner", type=int, default=20, help="back-to-back runs per layer timing")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--variants", nargs="+", default=["ours", "ours-unfused"])
    p.add_argument("--no-model", action="store_true")
    p.add_argument("--no-layer", action="store_true")
    p.add_argument("--ab-rounds", type=int, default=0,
                   help="> 0: only the interleaved step timing of --variants (that many rounds of --steps steps)")
    p.add_argument("--smoke", action="store_true", help="the layer table for a tiny batch on CPU (tests)")
    args = p.parse_args(argv)
    if args.smoke:
        layer_parts(8, 1, 1, torch.device("cpu"), cpu_once, smoke=True)
        return 0
    if not torch.cuda.is_available():
        print("hstu_layer_profile: no CUDA device, skipping")
        return 0
    print(f"## hstu_layer_profile: {torch.cuda.get_device_name()}, torch {torch.__version__}, commit {git_commit()}")
    if args.ab_rounds > 0:
        print(f"\n### model train step, interleaved: ms per step (median and min of {args.ab_rounds} rounds x "
              f"{args.steps} back-to-back steps; bf16 autocast, B=128, 4 layers, 4 heads x 64)\n")
        print("| max history | variant | step ms | min ms | / first variant |\n|---:|---|---:|---:|---:|")
        for hist in args.histories:
            ab_steps(hist, args.variants, args.steps, args.ab_rounds)
        return 0
    for hist in args.histories:
        if not args.no_model:
            summary = {v: profile_model(v, hist, args.steps, args.top) for v in args.variants}
            print("\n| variant | step ms | host issue ms | GPU busy ms |\n|---|---:|---:|---:|")
            for v, (wall, issue, busy) in summary.items():
                print(f"| {v} | {wall:.2f} | {issue:.2f} | {busy:.2f} |")
        if not args.no_layer:
            layer_parts(hist, args.inner, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
