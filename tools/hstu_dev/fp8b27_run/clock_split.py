"""fp8b27 (issue 36): the FP8 backward's op per kernel, from a cool GPU to the sustained state (the power cap).

For each case (B16 S4K, then B16 S16K; causal, H 4, D 128, inputs as benchmarks/hstu_fp8_bwd.py): the GPU idle for
--idle seconds, then the op (`hstu_attn::fp8_bwd`, the default routing = the Hopper FP8 backward with the option bit
the benchmark sets) called back to back the benchmark's way (L2 flushed, CUDA events, a sync per call) for --sustain
seconds, the whole window under torch.profiler (CUDA activity only): per call the event time, each kernel's device
time (grouped per call between the flush kernels) and the wall time of the call's end. Writes $OUT/calls_<case>.csv
(one row per call) and prints per case: the burst (the window's first 3 calls, from a cool GPU) and the sustained
(the calls of its last 0.5 s) medians per kernel; smi_join.py puts the nvidia-smi log's SM clock / power / throttle
reasons beside them (and the SM cycles per call: ms x MHz).
Usage (GPU, sm_90): python clock_split.py OUT_DIR [--idle S] [--sustain4k S] [--sustain16k S] [--deadline EPOCH_S] [--bf16 S]
"""

import argparse
import csv
import datetime
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import hstu_attn
from hstu_attn import _fp8

T0 = time.perf_counter()


def now():
    return datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def kind(name):
    n = name.lower()
    if "hstu_bwd_fp8_sm90_kernel" in n:
        return "main"
    if "prepass" in n or "quant" in n or "transpose" in n:
        return "pre"
    if "finish" in n:
        return "finish"
    if "fill" in n or "zero" in n:
        return "flush"
    return "other"


ACTS = [ProfilerActivity.CUDA]  # (CPU too after a window whose CUDA-only trace gave no kernels)


DEV = torch.autograd.DeviceType.CUDA
GAPS = []  # per profiled call: the idle us before each of its kernels (the first: after the flush kernel's end)


def window(fn, flush, seconds, idle, prof_on=True):
    """The GPU idle for `idle` s, then fn back to back the benchmark's way for `seconds`: [(t_end_wall, event_ms)], [[(name, us, start_us)] per
    call] (kernels between the flush kernels; empty lists if the profiler failed)."""
    rows = []
    prof = profile(activities=list(ACTS)) if prof_on else None
    if prof is not None:
        prof.__enter__()
    time.sleep(idle)  # (after the profiler's start: the GPU idle for `idle` s before the first call)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        rows.append((now(), a.elapsed_time(b)))
    per_call = []
    GAPS.clear()
    if prof is not None:
        t1 = time.perf_counter()
        prof.__exit__(None, None, None)
        try:
            evs = [e for e in prof.events() if e.device_type == DEV]
            evs.sort(key=lambda e: e.time_range.start)
            cur, prev_end = None, None
            for e in evs:
                k = kind(e.name)
                if k == "flush":
                    cur = []
                    per_call.append(cur)
                    GAPS.append([])
                elif cur is not None:
                    cur.append((e.name, e.device_time, e.time_range.start))
                    GAPS[-1].append(e.time_range.start - prev_end)  # (idle us before it: after the flush or the last)
                prev_end = e.time_range.end
        except Exception as ex:  # (the event timing stays)
            print(f"profiler events failed: {ex!r}")
            per_call = []
        print(f"(profiler: {len(per_call)} calls parsed in {time.perf_counter() - t1:.1f} s)", flush=True)
        if not per_call and ProfilerActivity.CPU not in ACTS:
            ACTS.append(ProfilerActivity.CPU)
    return rows, per_call


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--sustain4k", type=float, default=3.0)
    ap.add_argument("--sustain16k", type=float, default=6.0)
    ap.add_argument("--bf16", type=float, default=0.0, help="the bf16 backward at S16K sustained too (seconds)")
    ap.add_argument("--deadline", type=float, default=0.0, help="epoch seconds to end by (0: 40 s from now)")
    args = ap.parse_args(argv)
    deadline = args.deadline or time.time() + 40
    if not torch.cuda.is_available():
        print("clock_split: needs a GPU")
        return 0
    dev = torch.device("cuda")
    print(f"(process start {now()}) {torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    H, D = 4, 128
    summary = []
    for B, S, secs in [(16, 4096, args.sustain4k), (16, 16384, args.sustain16k)]:
        left = deadline - time.time()
        if left < args.idle + 2:
            print(f"skipped B{B} S{S}: {left:.1f} s left")
            continue
        secs = min(secs, left - args.idle - 3)
        cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
        q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
        (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
        m = _fp8.DESCALE_MODES.index("block")
        lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
        fn = lambda: torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S),  # noqa
                                                 None, None, False, opts)
        fn()
        torch.cuda.synchronize()
        name = f"B{B}_S{S // 1024}K"
        t_from = now()
        rows, per_call = window(fn, flush, secs, args.idle)
        print(f"(window {name} from {t_from} until {now()}: {len(rows)} calls, {len(per_call)} profiled)", flush=True)
        n = min(len(rows), len(per_call)) if per_call else len(rows)
        kinds = ["main", "pre", "finish", "other"]
        with open(os.path.join(args.out, f"calls_{name}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["i", "t_end", "event_ms"] + [f"{x}_ms" for x in kinds] + ["sum_ms", "kernels"])
            for i in range(len(rows)):
                ks_ = per_call[i] if i < len(per_call) else []
                by = {x: sum(us for nm, us, _ in ks_ if kind(nm) == x) / 1e3 for x in kinds}
                w.writerow([i, rows[i][0], f"{rows[i][1]:.4f}"] + [f"{by[x]:.4f}" for x in kinds] +
                           [f"{sum(by.values()):.4f}", ";".join(f"{nm[:48]}={us / 1e3:.4f}" for nm, us, _ in ks_)])
        if per_call:  # the call's kernels in launch order (first call)
            print(f"{name} kernels of call 0: " + "; ".join(f"{nm[:60]} {us / 1e3:.4f} ms" for nm, us, _ in
                                                          per_call[0]))
        # burst: calls 0-2; sustained: the calls ending in the window's last 0.5 s
        t_end = [datetime.datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f") for r in rows]
        last = [i for i in range(len(rows)) if (t_end[-1] - t_end[i]).total_seconds() <= 0.5]
        for label, idx in (("burst (calls 0-2)", [0, 1, 2]), (f"sustained (last 0.5 s, {len(last)} calls)", last)):
            idx = [i for i in idx if i < len(rows)]
            ev = statistics.median(rows[i][1] for i in idx)
            cells = []
            for x in kinds + ["sum"]:
                vals = []
                for i in idx:
                    if i < len(per_call):
                        ks_ = per_call[i]
                        vals.append(sum(us for nm, us, _ in ks_ if x == "sum" or kind(nm) == x) / 1e3)
                cells.append(f"{statistics.median(vals):.3f}" if vals else "-")
            fl = 2.5 * 4 * H * D * S * S / 2 * B
            summary.append(f"| {name} | {label} | {ev:.3f} | {fl / ev / 1e9:.1f} | " + " | ".join(cells) +
                           f" | {ev - float(cells[-1]) if cells[-1] != '-' else float('nan'):.3f} | "
                           f"{rows[idx[0]][0][11:]} - {rows[idx[-1]][0][11:]} |")
        del q, k, v, dout, q8, k8, v8, fn
        torch.cuda.empty_cache()
    if args.bf16 > 0 and deadline - time.time() > args.bf16 + args.idle + 3:
        B, S = 16, 16384
        cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
        q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
        lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
        fn = lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *lens, None, float(S), None, None, False, False)  # noqa
        fn()
        torch.cuda.synchronize()
        t_from = now()
        rows, _ = window(fn, flush, args.bf16, args.idle, prof_on=False)
        print(f"(window bf16_B16_S16K from {t_from} until {now()}: {len(rows)} calls, 0 profiled)", flush=True)
        with open(os.path.join(args.out, "calls_bf16_B16_S16K.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["i", "t_end", "event_ms"])
            for i, r in enumerate(rows):
                w.writerow([i, r[0], f"{r[1]:.4f}"])
        t_end = [datetime.datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f") for r in rows]
        last = [i for i in range(len(rows)) if (t_end[-1] - t_end[i]).total_seconds() <= 0.5]
        fl = 2.5 * 4 * H * D * S * S / 2 * B
        for label, idx in (("burst (calls 0-2)", [0, 1, 2]), (f"sustained (last 0.5 s, {len(last)} calls)", last)):
            ev = statistics.median(rows[i][1] for i in idx)
            summary.append(f"| bf16_B16_S16K | {label} | {ev:.3f} | {fl / ev / 1e9:.1f} | - | - | - | - | - | - | "
                           f"{rows[idx[0]][0][11:]} - {rows[idx[-1]][0][11:]} |")
    print("\n| case | calls | event ms (median) | TFLOP/s | main kernel ms | pre-pass ms | finish ms | other ms | "
          "kernels' sum ms | event - sum ms | wall (first - last call) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in summary:
        print(s)
    print(f"(clock_split done at {time.perf_counter() - T0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
