"""What begin_step leaves behind for the first attention layer of the NVIDIA batch-1 cached step (issue 34): the
phase stamps of one layer (kernel_options(fwd_trace=True), as b1_layer_trace.py: the traced call follows a memset
of the trace buffer, times from its first item read) in graphs that change one thing before the layers:

  graph            the step as hstu_inference.py captures it (begin_step, 8 layers)
  eager            begin_step once before the capture; the graph holds the layers alone
  eager+spin       eager, and a one-CTA spin (torch.cuda._sleep, ~10 us) before the layers: idle SMs alone
  graph+spin       begin_step, then the spin (a plain launch: begin_step has completed before the plan block
                   launches), then the layers; graph+spin0: the same with a spin of ~0 cycles (the full dependency)
  eager+dbegin     eager, and a second cache's begin_step (same shape, its own tables) before the layers: begin_step's
                   code, traffic, trigger and tail without the data the layers read
  eager+dbegin+spin  the same, then the spin: begin_step's code and writes ~10 us before the layers
  eager+dtorch / +dnopdl / +dnoready  the second cache's begin_step as torch ops (use_kernel = False), as a plain
                   launch without the ready word (pdl = False), without the ready word (_plan_ready = False)
  eager+drestore   the second cache's table copies (its restore) before the layers: small copies, no begin_step
  eager+touch      one int32 in each of 128 distinct 2 MB pages of a 256 MB buffer (TLB entries, ~no L2 bytes)
  eager+read8m     8 MB read through the L2 (4 pages)
  graph+dattn      a second cache's layer-0 attention (its step begun before the capture) before begin_step: the
                   attention's code and tables warm right before the head
  graph+noapp0     layer 0 without its append (the pool's rows of layer 0 not written: a probe only)
  graph+plainapp0  layer 0's append a plain launch on the side stream (its blocks start at begin_step's completion,
                   not at its early trigger: they do not hold SMs while begin_step runs)
  graph+plainapp   every layer's append a plain launch
  VARIANT/MODE     the manager with b1_step_bench.py's VARIANT attributes (off: the plan block waits for begin_step's
                   grid; plain: pdl=False)

Columns: us from the first item read (medians over the working CTAs), the layer's span, and the CTAs' SM clock
(clock64 over %globaltimer from the CTA's start to its loop's end, GHz).

    python tools/hstu_dev/b1_head_probe.py --rows graph:0,graph:1,eager:0,eager+spin:0
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

PHASES = [(0, "start"), (3, "Q issued"), (7, "Q landed"), (4, "K0 issued"), (8, "K0 landed"), (10, "loop done"),
          (12, "mode known"), (13, "sum done")]
DEFAULT_ROWS = ("graph:0,graph+noapp0:0,graph+plainapp0:0,graph:1,eager:0,eager+spin:0,graph+spin:0,graph+spin0:0,"
                "eager+dbegin:0,off/graph:0,plain/graph:0,plain/graph:1,graph+dattn:0,eager+dbegin+spin:0")


def time_modes(args, hi, sh, dev, dt, layers, variant_setup, capture_graph) -> None:
    """Median / min us of one replay of the plain step (no trace) per mode, the modes' rounds interleaved; each
    round also with the launch hidden (torch.cuda._sleep(200000) before the replay, as b1_step_bench.py's
    --hide-launch 200000)."""
    import statistics
    B = sh.batch
    runs = []
    for entry in args.time_modes.split(","):
        var, mode = entry.split("/", 1) if "/" in entry else ("default", entry)
        made = variant_setup(hi, sh, var, dev, dt)
        if made is None:
            continue
        cache, _, restore, (users, cu_q, app, q, k, v) = made
        extras = mode.split("+")[1:]

        def step(cache=cache, extras=extras, users=users, cu_q=cu_q, app=app, q=q, k=k, v=v):
            s = cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
            layers(cache, s, q, k, v, extras)

        restore()
        g = capture_graph(step)
        for _ in range(3):
            restore()
            g.replay()
        torch.cuda.synchronize()
        runs.append((entry, g, restore, {False: [], True: []}, (cache, step)))
    for _ in range(args.rounds):
        for entry, g, restore, ts, _ in runs:
            for hide in (False, True):
                for _ in range(args.reps):
                    restore()
                    if hide:
                        torch.cuda._sleep(200000)
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    g.replay()
                    b.record()
                    b.synchronize()
                    ts[hide].append(a.elapsed_time(b) * 1e3)
    print(f"| {args.label} | mode | step us (median) | min | launch hidden: median | min |")
    print("|---|---|---|---|---|---|")
    for entry, _, _, ts, _ in runs:
        print(f"| {args.label} | {entry} | {statistics.median(ts[False]):.1f} | {min(ts[False]):.1f} | "
              f"{statistics.median(ts[True]):.1f} | {min(ts[True]):.1f} |")
    print()
    del runs
    torch.cuda.synchronize()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="?")
    ap.add_argument("--rows", default=DEFAULT_ROWS)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--spin", type=int, default=20000)  # clock cycles of the one-CTA spin (~10 us at 1.98 GHz)
    # the step's time (no trace) under these modes (graph[+noapp0|+plainapp0], VARIANT/...), rounds interleaved,
    # each also with the launch hidden (a GPU spin before the replay); then the rows (none: --rows "")
    ap.add_argument("--time-modes", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("b1_head_probe: no CUDA GPU, skipped")
        return 0
    import hstu_inference as hi
    from b1_layer_trace import replayed_trace, share_step_plan
    from b1_step_bench import variant_setup
    from bench_util import capture_graph

    import hstu_attn
    from hstu_attn import _ops

    trace_bit = share_step_plan()  # (the traced call takes the step's plan: no plan of its own in the chain)
    dev, dt = torch.device("cuda"), torch.bfloat16
    sh = hi.SHAPES["nvidia_b1"]
    B = sh.batch
    tgt = torch.full((B,), sh.candidates, dtype=torch.int32, device=dev)
    scaling = float(sh.history + sh.candidates)

    def layers(cache, s, q, k, v, extras, traced=-1):
        """The step's layers; the appends as the row says (noapp0: none in layer 0; plainapp0 / plainapp: layer 0's /
        every layer's on the side stream as a plain launch: its blocks start once the kernels before it completed,
        not at their early trigger)."""
        for l in range(sh.layers):
            special = (l == 0 and ("noapp0" in extras or "plainapp0" in extras)) or "plainapp" in extras
            with _ops._more_option_bits(trace_bit if l == traced else 0):
                plain = special and "noapp0" not in extras
                if plain and cache.overlap_append:
                    main, side = torch.cuda.current_stream(), cache._append_stream
                    side.wait_stream(main)
                hstu_attn.cached_hstu_attention(cache, s, l, q[l], k[l], v[l], sh.new, num_targets=tgt,
                                                scaling_seqlen=scaling, append=not special)
                if plain:
                    if cache.overlap_append:
                        with torch.cuda.stream(side):
                            cache.append(s, k[l], v[l], layer=l)  # (no pdl bit here: a plain launch)
                        main.wait_stream(side)
                    else:
                        cache.append(s, k[l], v[l], layer=l)

    if args.time_modes:
        time_modes(args, hi, sh, dev, dt, layers, variant_setup, capture_graph)
    cols = " | ".join(n for _, n in PHASES)
    print(f"| wheel | row: traced layer | {cols} | span | SM GHz | working CTAs | split CTAs: done / alone / "
          f"together |")
    print("|---|---|" + "---|" * (len(PHASES) + 4))
    for entry in filter(None, args.rows.split(",")):
        row, traced = entry.rsplit(":", 1)
        traced = int(traced)
        var, mode = row.split("/", 1) if "/" in row else ("default", row)
        made = variant_setup(hi, sh, var, dev, dt)
        if made is None:
            print(f"| {args.label} | {entry} | (variant not in this wheel) |")
            continue
        cache, _, restore, (users, cu_q, app, q, k, v) = made
        dummy = variant_setup(hi, sh, "default", dev, dt) if "+d" in mode else None
        if dummy is not None:  # (the second cache's begin_step in another form)
            if "dtorch" in mode:
                dummy[0].use_kernel = False
            if "dnopdl" in mode:
                dummy[0].pdl = False
            if "dnoready" in mode:
                dummy[0]._plan_ready = False
        big = torch.zeros(64 << 20, dtype=torch.int32, device=dev) if "+touch" in mode else None
        mid = torch.zeros(2 << 20, dtype=torch.int32, device=dev) if "+read8m" in mode else None
        restores = [restore] + ([dummy[2]] if dummy else [])
        eager = mode.startswith("eager")
        s0 = cache.begin_step(users, cu_q, app, B * sh.new, sh.new) if eager else None
        ds = None
        if "dattn" in mode:
            du, dcq, dapp = dummy[3][:3]
            ds = dummy[0].begin_step(du, dcq, dapp, B * sh.new, sh.new)

        extras = mode.split("+")[1:]

        def step(s0=s0, ds=ds, extras=extras, cache=cache, dummy=dummy, big=big, mid=mid):
            if "dattn" in extras:
                dq, dk, dv = dummy[3][3:]
                hstu_attn.cached_hstu_attention(dummy[0], ds, 0, dq[0], dk[0], dv[0], sh.new, num_targets=tgt,
                                                scaling_seqlen=scaling)
            s = s0 if s0 is not None else cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
            for x in extras:  # (in the row's order, between the head and the layers)
                if x == "spin":
                    torch.cuda._sleep(args.spin)
                elif x == "spin0":
                    torch.cuda._sleep(1)
                elif x in ("dbegin", "dtorch", "dnopdl", "dnoready"):
                    du, dcq, dapp = dummy[3][:3]
                    dummy[0].begin_step(du, dcq, dapp, B * sh.new, sh.new)
                elif x == "drestore":
                    dummy[2]()
                elif x == "touch":  # one int32 in each of 128 distinct 2 MB pages (the TLB, ~no L2 bytes)
                    big.view(128, -1)[:, :1].sum()
                elif x == "read8m":  # 8 MB of 4 pages through the L2
                    mid.sum()
            layers(cache, s, q, k, v, extras, traced)

        for r in restores:
            r()
        try:
            g = capture_graph(step)
        except Exception as e:  # noqa: BLE001 (a row this wheel or machine cannot capture: reported, skipped)
            print(f"| {args.label} | {entry} | (capture failed: {type(e).__name__}: {str(e)[:120]}) |")
            torch.cuda.synchronize()
            continue
        row = replayed_trace(g, restores, args.replays, q[traced], PHASES)
        del g
        if row is None:
            print(f"| {args.label} | {entry} | (no stamps) |")
            continue
        cells, span, n_work, (n_done, n_alone, n_together), ghz = row
        print(f"| {args.label} | {entry} | " + " | ".join(cells) + f" | {span:.2f} | {ghz:.3f} | {n_work} | "
              f"{n_done} / {n_alone} / {n_together} |")
        del cache, dummy
        torch.cuda.synchronize()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
