"""fp8p32 (issue 36): where the FP8 backward path's time goes outside its kernel, at the benchmark's inputs
(benchmarks/hstu_fp8_bwd.py: randn q / k / v quantized per block, dout randn * 1e-2, causal, H 4, D 128).

Per case: (1) CUDA-event ms of the benchmark's measure (L2 flush, start event, the call, end event) for the public op
`hstu_attn::fp8_bwd` ("op") and for its CUDA op `fp8_bwd_sm90` called directly ("direct": no Python routing), each
also "hidden" (a 1 ms device sleep queued before the start event: the host's prelude off the clock, the device's
time alone); random order, medians. (2) host ms of each call on an idle GPU. (3) one profiled call in the benchmark's
sequence: each kernel's start (us after the flush's end), its length, and the host's launch times (us after the op's
entry). Usage (GPU, sm_90): python path_gaps.py [--reps N] [--s4k]
"""

import argparse
import random
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from hstu_attn import _fp8, _fp8_bwd, _ops


def inputs(B, S, dev):
    H, D = 4, 128
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    m = _fp8.DESCALE_MODES.index("block")
    return (dout, q8, k8, v8, qs, ks, vs, m, 0, cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5, None, float(S), None,
            None)


def event_ms(fn, flush, hidden):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    if hidden:
        torch.cuda._sleep(2_000_000)  # ~1 ms at 1.98 GHz: the host queues the whole call before the start event
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def host_ms(fn, reps):
    t = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(t)


def timeline(fn, flush):
    """(kernels [(name, start us after the flush's end, length us)], launches [(name, us after the call's entry)])"""
    for _ in range(2):
        event_ms(fn, flush, False)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        flush.zero_()
        torch.cuda.synchronize()
        flush.zero_()
        with torch.profiler.record_function("fp8p32_call"):
            fn()
        torch.cuda.synchronize()
    evs = list(prof.events())
    gpu = sorted((e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA), key=lambda e: e.time_range.start)
    cpu = [e for e in evs if e.device_type != torch.autograd.DeviceType.CUDA]
    if not gpu:
        return [("(no device events)", 0.0, 0.0)], [], float("nan")
    call = [e for e in cpu if e.name == "fp8p32_call"]
    t0 = call[0].time_range.start if call else 0
    launches = sorted(((e.name, e.time_range.start - t0) for e in cpu
                       if e.name.startswith("cu") and "Launch" in e.name and e.time_range.start >= t0),
                      key=lambda t: t[1])
    # the flush's kernel: the last GPU event that starts before the call's first kernel (its second zero_)
    ends = [e for e in gpu if "fill" in e.name.lower() and e.time_range.end - e.time_range.start > 20]
    f_end = ends[-1].time_range.end if ends else gpu[0].time_range.start
    ks = [(e.name, e.time_range.start - f_end, e.time_range.end - e.time_range.start) for e in gpu
          if e.time_range.start >= f_end]
    return ks, launches, (call[0].time_range.end - t0) if call else float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--s4k", action="store_true")
    p.add_argument("--prepass-only", action="store_true", help="the pre-pass op alone (its kernels' device times)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("path_gaps: needs a GPU")
        return 0
    dev = torch.device("cuda")
    opts = _ops.OPTION_BITS["fp8_bwd"]
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    print(f"GPU {torch.cuda.get_device_name(dev)}; torch {torch.__version__}")
    for B, S in [(16, 16384)] + ([(16, 4096)] if a.s4k else []):
        x = inputs(B, S, dev)
        pre = lambda: torch.ops.hstu_attn.fp8_bwd_prepass(x[0], x[1], x[2], x[9], x[10], None, None)  # noqa
        # the pre-pass op alone: its kernels' device time (this wheel's pre-pass kernels; no dq workspace)
        ks, _, _ = timeline(pre, flush)
        ms = statistics.median(event_ms(pre, flush, True) for _ in range(a.reps))
        print(f"prepass only B{B} S{S // 1024}K: hidden {ms:.3f} ms; kernels " +
              "; ".join(f"{k[:40]} {d:.1f} us" for k, _, d in ks), flush=True)
        if a.prepass_only:
            continue
        fns = {"op": lambda: torch.ops.hstu_attn.fp8_bwd(*x, False, opts),
               "direct": lambda: torch.ops.hstu_attn.fp8_bwd_sm90.default(*x, opts, 0)}
        late = getattr(_fp8_bwd, "FP8_BWD_VARIANT_BITS", {}).get("prepass_late")
        if late is not None:
            fns["op prepass_late"] = lambda: torch.ops.hstu_attn.fp8_bwd(*x, False, opts | late)
        ref = fns["op"]()
        got = fns["direct"]()
        same = all(torch.equal(r.view(torch.int16), g.view(torch.int16)) for r, g in zip(ref[1:], got[1:]))
        if late is not None:
            got = fns["op prepass_late"]()
            same = same and all(torch.equal(r.view(torch.int16), g.view(torch.int16)) for r, g in zip(ref[1:], got[1:]))
        keys = [(n, h) for n in fns for h in (False, True)]
        t = {k: [] for k in keys}
        rng = random.Random(32)
        for k in keys:
            event_ms(fns[k[0]], flush, k[1])
        for _ in range(a.reps):
            for i in rng.sample(range(len(keys)), len(keys)):
                t[keys[i]].append(event_ms(fns[keys[i][0]], flush, keys[i][1]))
        med = {k: statistics.median(v) for k, v in t.items()}
        hs = {n: host_ms(f, 15) for n, f in fns.items()}
        hs["prepass op"] = host_ms(pre, 15)
        flops = 2.5 * 4 * 4 * 128 * S * S / 2 * B
        print(f"\n### B{B} S{S // 1024}K (dk / dv of direct, prepass_late bit-equal to op: {same}; reps {a.reps})\n")
        print("| path | benchmark measure ms (TFLOP/s) | hidden prelude ms (TFLOP/s) | difference ms | host ms |")
        print("|---|---:|---:|---:|---:|")
        for n in fns:
            f, h = med[(n, False)], med[(n, True)]
            print(f"| {n} | {f:.3f} ({flops / f / 1e9:.1f}) | {h:.3f} ({flops / h / 1e9:.1f}) | {f - h:.3f} | "
                  f"{hs[n]:.3f} |")
        print(f"| prepass op alone | | | | {hs['prepass op']:.3f} |")
        for n, f in fns.items():
            if n == "direct":
                continue
            ks, launches, call_us = timeline(f, flush)
            print(f"\ntimeline {n} B{B} S{S // 1024}K (profiled: host times inflated; us): call host {call_us:.0f}")
            print("kernels (start after the flush's end / length): " + "; ".join(
                f"{k[:38]} @{s:.0f} +{d:.0f}" for k, s, d in ks))
            gaps, end = [], None
            for _, s, d in ks:
                if end is not None:
                    gaps.append(s - end)
                end = s + d
            print(f"idle before the first kernel {ks[0][1]:.0f} us; gaps between kernels {[round(g) for g in gaps]}; "
                  f"kernel sum {sum(d for _, _, d in ks):.0f} us; span {end:.0f} us")
            print("launches (after the call's entry): " + "; ".join(f"{k} {s:.0f}" for k, s in launches))
        del x
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
