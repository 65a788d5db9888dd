"""fwd40's timer (issue 39, session 37): the portable forward at short sequences against FA2, one process.

  python3 -P t40.py table --bench R/benchmarks --shapes B128:S1024:D128 ... [--variants main c2 c6] [--reps 10]
      per shape: ours (kernel_options(sm90=False), main = the default, cN = fwd_sm80_cfg=N, skip / qearly / sq =
      fwd_sm80_skip=True / fwd_sm80_qearly=True / both (branch fwd40's wheel)) and FA2 (torch SDPA flash),
      timed three ways in the same process:
        ev    the product benchmark's Timer (L2 flushed before each call, CUDA events around one call, median of reps;
              what benchmarks/RESULTS.md's issue-39 table and t39.py report), two rounds (ev1, ev2)
        graph n calls back to back in one CUDA graph (no host time between calls, L2 not flushed), median of reps
        kern  torch.profiler: the device kernels' durations summed per call (no launch gaps), the largest kernels
  python3 -P t40.py ncu --bench R/benchmarks --variants main fa2 --shapes B128:S1024:D128   (one forward each)

Shapes: dense, causal, H = 4, bf16, alpha D^-1/2, scaling max_len (issue 39's table).
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "runlib"), os.path.join(HERE, "..", "fwd17_run")]  # labtime.py,
# fwd17_jag.py: carried beside this file, or in the tree
import labtime  # noqa: E402
from fwd17_jag import graphed  # noqa: E402
import bwdtime  # noqa: E402  (dense_case, shape)


def graph_ms(fns, reps, n):
    """{name: ms per call}: n calls of each fn in one CUDA graph, the graphs interleaved per round, median"""
    graphs = {}
    for k, fn in fns.items():
        g = graphed(fn, n)
        if g is None:
            print(f"(no graph for {k})")
        else:
            graphs[k] = g
    for g in graphs.values():  # (warm)
        g.replay()
    ev = {k: [] for k in graphs}
    for _ in range(reps):
        for k, g in graphs.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            ev[k].append((a, b))
    torch.cuda.synchronize()
    return {k: statistics.median(a.elapsed_time(b) / n for a, b in v) for k, v in ev.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["table", "ncu"])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--variants", nargs="+", default=["main"])
    ap.add_argument("--shapes", nargs="+", default=["B128:S1024:D128"])
    ap.add_argument("--var-shapes", nargs="*", default=None,
                    help="shapes that time every variant and profile them (default all); the others the first "
                         "--sweep-variants, unprofiled")
    ap.add_argument("--sweep-variants", type=int, default=1)
    ap.add_argument("--warm-ms", type=float, default=100.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--graph-n", type=int, default=10)
    ap.add_argument("--no-prof", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, a.bench)
    import hstu_attention as ha  # the product benchmark (its Case, Timer, timed_calls, Fa2Peer)
    from hstu_attn._ops import kernel_options

    t0 = time.time()
    dev = torch.device("cuda")
    print(f"#### {a.mode} ({torch.cuda.get_device_name(0)}, torch {torch.__version__}; bf16 causal H4; fwd ms)",
          flush=True)
    timer = ha.Timer(dev, warmup=3, reps=a.reps, warmup_ms=a.warm_ms)
    fa2 = ha.Fa2Peer(dev)
    for s in a.shapes:
        (B, S, D), case, cu, (q, k, v, dout), args = bwdtime.dense_case(ha, s, dev)
        H = 4
        variants = [x for x in a.variants if x != "fa2"]
        swept = a.var_shapes is not None and s not in a.var_shapes  # (the sweep: the first --sweep-variants, no prof)
        if swept:
            variants = variants[:a.sweep_variants]
        fns = {}
        # main: the default; cN: fwd_sm80_cfg=N; skip / qearly / sq: fwd_sm80_skip / fwd_sm80_qearly / both (fwd40)
        for x in variants:
            named = {"skip": dict(fwd_sm80_skip=True), "qearly": dict(fwd_sm80_qearly=True),
                     "sq": dict(fwd_sm80_skip=True, fwd_sm80_qearly=True), "main": {}}
            opts = named[x] if x in named else dict(fwd_sm80_cfg=int(x[1:]))
            with kernel_options(sm90=False, **opts):
                fns[x] = ha.timed_calls(q, k, v, dout, args)[0]
        if a.mode == "table" or "fa2" in a.variants:
            fns["fa2"] = fa2.calls(q, k, v, dout, cu, S, None, None, case, 1.0 / D**0.5, S)[0]
        names = list(fns)
        if a.mode == "ncu":
            for fn in fns.values():
                fn()
            torch.cuda.synchronize()
            continue
        ref = fns[names[0]]().float()  # (the variants' outputs against main's: same function, other tiles)
        diffs = {x: (fns[x]().float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                 for x in names[1:] if x != "fa2"}
        ev1 = dict(zip(names, timer.interleaved(*fns.values())))
        gr = graph_ms(fns, a.reps, a.graph_n)
        ev2 = dict(zip(names, timer.interleaved(*fns.values())))
        fl = 4.0 * H * D * S * S / 2 * B
        for x in names:  # (printed before the profiler's part: a run that times out keeps them)
            line = f"ROW {s:16s} {x:5s} ev1 {ev1[x]:.4f} ev2 {ev2[x]:.4f} graph {gr.get(x, float('nan')):.4f}"
            line += f" ({fl / min(ev1[x], ev2[x]) / 1e9:.0f} TF/s by ev)"
            if x != "fa2":
                line += (f" | fa2/x ev {min(ev1['fa2'], ev2['fa2']) / min(ev1[x], ev2[x]):.3f}"
                         f" graph {gr.get('fa2', float('nan')) / gr.get(x, float('nan')):.3f}")
                if x in diffs:
                    line += f" | diff {diffs[x]:.1e}"
            print(line, flush=True)
        if not a.no_prof and not swept:  # the device kernels' durations per call (no launch gaps, no flush)
            kern, top = {}, {}
            for x, fn in fns.items():
                per = labtime.per_call(labtime.kernel_times(fn, n=3, warmup=2), 3, width=40)
                kern[x] = sum(per.values()) / 1e3
                top[x] = labtime.top_kernels(per, 3)
            for x in names:
                r = f" fa2/x {kern['fa2'] / kern[x]:.3f}" if x != "fa2" else ""
                print(f"KERN {s:16s} {x:5s} {kern[x]:.4f}{r} | {top[x]}", flush=True)
        print(f"   (at {time.time() - t0:.1f} s)", flush=True)
        del q, k, v, dout, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
