"""The FP8 backward's path kernel by kernel (issue 36): one call of `hstu_attn::fp8_bwd` (the default routing: the
Hopper FP8 backward at D = 128) and one bf16 backward under torch.profiler, each kernel's device time, their sum, the
CUDA-event time of the call (the sum plus the host's gaps) and the host time of the call (no sync inside); then the
largest host entries of each call under the profiler (self time, calls).

Inputs as benchmarks/hstu_fp8_bwd.py (randn q / k / v quantized per block, dout randn * 1e-2, causal, H 4, D 128).
Usage (GPU, sm_90): python tools/hstu_dev/fp8_bwd_path.py [--s16k]
"""

import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import hstu_fp8_bwd as hb  # noqa: E402  (make_inputs: the benchmark's inputs)


def kernels(fn):
    """([(kernel name, device ms)] of one fn() call in launch order, [(host op, self us, calls)] its largest host
    entries)."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    evs.sort(key=lambda e: e.time_range.start)
    host = sorted(((a.key, a.self_cpu_time_total, a.count) for a in prof.key_averages()
                   if a.self_cpu_time_total > 0 and "Synchronize" not in a.key), key=lambda t: -t[1])
    return [(e.name, e.device_time / 1e3) for e in evs], host[:8]


def timed(fn, reps=5):
    """(median event ms, median host ms of the call itself)."""
    ev, host = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e3)
        b.record()
        b.synchronize()
        ev.append(a.elapsed_time(b))
    return sorted(ev)[reps // 2], sorted(host)[reps // 2]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--s16k", action="store_true", help="B16 S16K too")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("fp8_bwd_path: needs a GPU")
        return 0
    dev = torch.device("cuda")
    print("| case | path | kernels (ms each, launch order) | sum ms | events ms | host ms |\n"
          "|---|---|---|---:|---:|---:|")
    for B, S in [(16, 4096)] + ([(16, 16384)] if args.s16k else []):
        H, D = 4, 128
        cu, (q, k, v), dout, (q8, k8, v8), (qs, ks, vs), lens, m = hb.make_inputs(B, S, D, "block", dev, H)
        paths = {
            "fp8": lambda: torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S),
                                                       None, None, False, 0),
            "bf16": lambda: torch.ops.hstu_attn.bwd(dout, q, k, v, *lens, None, float(S), None, None, False, False),
        }
        hosts = []
        for name, fn in paths.items():
            ks_, top = kernels(fn)
            ev, host = timed(fn)
            cells = ", ".join(f"{n[:40]} {t:.3f}" for n, t in ks_)
            print(f"| B{B} S{S // 1024}K | {name} | {cells} | {sum(t for _, t in ks_):.3f} | {ev:.3f} | {host:.3f} |",
                  flush=True)
            hosts.append((name, top))
        for name, top in hosts:  # (profiled host times: inflated by the profiler, their ranking is what counts)
            print(f"host, B{B} S{S // 1024}K {name}: " + "; ".join(f"{k[:48]} {t:.0f} us x{n}" for k, t, n in top))
        del q, k, v, dout, q8, k8, v8
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
