"""Where the Hopper FP8 forward's time goes (issue 36; lab script): the op (descale check, Vt pre-pass, kernel)
against its timing-only variants (kernel_options(fp8_fwd_diag=...), private, WRONG outputs; grid order; unmasked
tiles), each removing one cost of P, so that its time shows in the difference:
  diag 1: no MUFU.TANH in the SiLU (P = h + h h: the FMUL and FFMA stay)
  diag 2: no e4m3 conversion of P (two ALU XORs per 4 elements instead of two F2FP.SATFINITE.E4M3)
  diag 3: both
and the SiLU forms (kernel_options(fp8_silu=1 / 2), correct outputs: the tanh form, half of the unmasked tiles'
scores in half2 arithmetic without the MUFU (the default at D <= 128)), the
192-key tiles (kernel_options(fp8_bn192=True), D = 128; the default form), `--split` adding diag 2 / 3. Causal
H4 batches, per-tensor descale; the variants interleaved (CUDA events, L2 flushed, median). `--default-only`: the
default alone (for an older wheel without the switches). Prints a markdown table: ms, TFLOP/s (4 H D L^2 / 2 per
sequence), time over the default's, and for the correct variants max |out - default| / max |default| (the
difference of two P roundings). `--vars sched,bn192`: instead of the diag / silu variants, kernel_options(
fp8_sched=True) (persistent CTAs at D <= 128) and the 192-key tiles at any length at D = 128. After each case: the
clock a spinning thread sees before / after its timing and the wall time (to match an nvidia-smi log, e.g.
tools/hstu_dev/fp8f20_run/setup.sh's smi_log). `--sustain SECONDS`: then the default back to back for that long
(ms per call, TFLOP/s, the window's wall times: the clocks under a sustained load). `--trace` (D = 128 / 256
cases): after the timing, one call of fp8_fwd_var=15 (the default's kernel, D = 128 / 256: its 192- / 64-key
tiles, with clock stamps of CTA (0, 0, 0), the first sequence's last query tile, written over its output rows) and a table of its consumer loop's
phases in SM cycles per warpgroup (medians over the KV tiles past the first two, which are masked).
`--fwd-vars N,...` (or D:N, for the cases of head dim D only): instead of the diag / silu variants,
kernel_options(fp8_fwd_var=N) for each N (a build's
private FP8 forward variants; session 20's 1-6 are gone, docs/hstu_attn.md); with `--sustain`, every variant then
sustained in turn (default first and last: the drift), each window's TFLOP/s over its last two thirds (the clock
settled under the power cap for that load; tools/hstu_dev/fp8f21_run/smi_digest.py: energy and SM cycles per call);
`--sustain-rounds N` the variants in turn N times (A B A B ... A, each variant between two default windows: paired
ratios against the clock's drift), `--sustain-warm S` the default untimed for S seconds before the first window.
(Windows under ~1 s alias with the power cap's ~1 s averaging: a window's clock follows the window before it; use
windows of >= 2 s for differences of a few percent; docs/hstu_attn.md, session 22.)

The timing-only variants (fp8_fwd_diag, fp8_fwd_var=15) need a dev build of the wheel:
    ./bazelw build //:wheels --config=sm90 --define hstu_dev=1

Usage (GPU): python tools/hstu_dev/fp8_fwd_split.py [--reps 10] [--default-only] [--split] [--cases B16S16KD128,...]
    [--vars sched,bn192] [--sustain SECONDS] [--trace]
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch

import hstu_attn
from hstu_attn._fp8 import DESCALE_MODES, quantize_fp8

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")))
from bench_util import event_ms  # noqa: E402

CASES = {"B16S16KD128": (16, 16384, 128), "B16S16KD256": (16, 16384, 256), "B16S4KD128": (16, 4096, 128),
         "B16S4KD64": (16, 4096, 64), "B16S4KD256": (16, 4096, 256), "B16S8KD128": (16, 8192, 128),
         "B16S8KD256": (16, 8192, 256), "B16S2KD128": (16, 2048, 128)}


def now():
    """Wall time in nvidia-smi's timestamp format (to match a clock log taken beside the run)."""
    return datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def spin_mhz(cycles=20_000_000):
    """The SM clock seen by one spinning thread (torch.cuda._sleep: clock64 cycles) over CUDA-event time, in MHz."""
    torch.cuda._sleep(cycles // 10)
    ms = event_ms(lambda: torch.cuda._sleep(cycles))
    return cycles / ms / 1e3


def once_ms(fn, flush):
    flush.zero_()  # (L2 flushed)
    return event_ms(fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup-ms", type=float, default=60.0)
    ap.add_argument("--default-only", action="store_true")
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--cases", default="B16S16KD128,B16S16KD256,B16S4KD128")
    ap.add_argument("--vars", default="")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--sustain", type=float, default=0.0)
    ap.add_argument("--fwd-vars", default="")
    ap.add_argument("--sustain-rounds", type=int, default=1)
    ap.add_argument("--sustain-warm", type=float, default=0.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    print(f"- {torch.cuda.get_device_name(dev)}; hstu_attn {hstu_attn.__version__} at {hstu_attn.__file__}")
    print(f"(process start {now()})", flush=True)
    print("| case | variant | ms | TFLOP/s | time / default | max diff / max |\n|---|---|---:|---:|---:|---:|")
    for name in args.cases.split(","):
        B, S, D = CASES[name]
        cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
        q, k, v = (torch.randn(B * S, 4, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (quantize_fp8(x, cu, "tensor") for x in (q, k, v))
        del q, k, v
        lens = (cu, cu, S, S, None, None, 1, -1, 0, 1.0 / D**0.5)
        bits = hstu_attn._ops.OPTION_BITS
        variants = [("default", 0)]
        var_shift = hstu_attn._ops.FP8_FWD_VAR_SHIFT
        if args.fwd_vars:  # (N for every case, D:N for the cases of head dim D)
            for v in args.fwd_vars.split(","):
                if ":" not in v or int(v.split(":")[0]) == D:
                    n = int(v.split(":")[-1])
                    variants += [(f"var {n}", n << var_shift)]
        elif args.vars:
            for v in args.vars.split(","):
                if v == "sched" and D <= 128:
                    variants += [("fp8_sched (persistent)", bits["fp8_sched"])]
                elif v == "bn192" and D == 128:
                    variants += [("bn192", bits["fp8_bn192"])]
        elif not args.default_only:
            shift, silu = hstu_attn._ops.FP8_FWD_DIAG_SHIFT, hstu_attn._ops.FP8_SILU_SHIFT
            variants += [("silu 1 (tanh)", 1 << silu), ("silu 2 (half2 mix)", 2 << silu),
                         ("diag 1 (no MUFU)", 1 << shift)]
            if D == 128:
                variants += [("bn192 (default form)", bits["fp8_bn192"])]
            if args.split:
                variants += [("diag 2 (no e4m3 cvt)", 2 << shift), ("diag 3 (neither)", 3 << shift)]

        def call(o):
            return lambda: torch.ops.hstu_attn.fp8_fwd(q8, k8, v8, qs, ks, vs, DESCALE_MODES.index("tensor"), 0, *lens,
                                                       None, float(S), None, None, o)

        fns = [call(o) for _, o in variants]
        mhz_before = spin_mhz()
        for fn in fns:
            t0 = time.perf_counter()
            while (time.perf_counter() - t0) * 1e3 < args.warmup_ms:
                fn()
                torch.cuda.synchronize()
        times = [[] for _ in fns]
        for _ in range(args.reps):
            for fn, ts in zip(fns, times):
                ts.append(once_ms(fn, flush))
        med = [statistics.median(t) for t in times]
        flops = 4 * 4 * D * S * S * B / 2
        ref = fns[0]().float()
        for (vname, o), fn, ms in zip(variants, fns, med):
            diff = "-"
            if not o >> hstu_attn._ops.FP8_FWD_DIAG_SHIFT & 3 and (o >> var_shift & 15) != 15:
                # (the timing-only variants' outputs are wrong)
                diff = f"{(fn().float() - ref).abs().max().item() / ref.abs().max().item():.2e}"
            print(f"| B{B} S{S // 1024}K D{D} causal | {vname} | {ms:.3f} | {flops / ms / 1e9:.1f} | "
                  f"{ms / med[0]:.3f} | {diff} |", flush=True)
        print(f"(case B{B} S{S // 1024}K D{D} timed until {now()}; effective SM clock of a spin before: "
              f"{mhz_before:.0f} MHz, after: {spin_mhz():.0f} MHz)", flush=True)
        if args.sustain > 0 and len(fns) > 1 and args.fwd_vars:
            sustain_all(variants, fns, med, args.sustain, flops, f"B{B} S{S // 1024}K D{D}", args.sustain_rounds,
                        args.sustain_warm)
        elif args.sustain > 0:
            sustain(fns[0], args.sustain, flops, f"B{B} S{S // 1024}K D{D}")
        if args.trace and D >= 128:
            trace(call(15 << hstu_attn._ops.FP8_FWD_VAR_SHIFT), B, S, D, "the default's kernel")
        del q8, k8, v8, fns
        torch.cuda.empty_cache()


def sustain(fn, seconds, flops, name):
    """fn back to back for `seconds` (no flush): ms per call over the window, and the window's wall times."""
    torch.cuda.synchronize()
    t_from = now()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0, calls = time.perf_counter(), 0
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            fn()
        calls += 10
        if calls % 50 == 0:
            torch.cuda.synchronize()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / calls
    print(f"(sustain {name} from {t_from} until {now()}: {calls} calls, {ms:.3f} ms per call, "
          f"{flops / ms / 1e9:.1f} TFLOP/s)", flush=True)


def sustain_all(variants, fns, med, seconds, flops, name, rounds=1, warm=0.0):
    """Each variant back to back for `seconds` in turn (the default first and again last), TFLOP/s over each
    window's last two thirds, with the windows' wall times (for the nvidia-smi log). rounds > 1: the variants in
    turn that many times (A B A B ... A: each variant window between two default windows, against the drift of the
    clock as the GPU heats), then per variant the median TFLOP/s and the median over its windows of its ms over the
    mean of the default windows before and after it. warm: the default back to back for that long first, untimed
    (the GPU into the power-capped state before the first window)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm:
        fns[0]()
        torch.cuda.synchronize()
    order = list(range(len(fns))) * rounds + [0]
    rows = []
    for j in order:
        fn = fns[j]
        torch.cuda.synchronize()
        t_from = now()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds / 3:
            fn()
            torch.cuda.synchronize()
        t_meas = now()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t1, calls, per_sync = time.perf_counter(), 0, max(2, int(20 / med[j]) + 1)  # (~20 ms queued per sync)
        start.record()
        while time.perf_counter() - t1 < 2 * seconds / 3:
            for _ in range(per_sync):
                fn()
            calls += per_sync
            torch.cuda.synchronize()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / calls
        rows.append((variants[j][0], ms, t_from, t_meas, now(), calls))
    warmed = f", after {warm:.2f} s of the default untimed" if warm > 0 else ""
    print(f"\nsustained {name} ({seconds:.2f} s per window{warmed}, in this order; TFLOP/s over the last 2/3)")
    print("| variant | ms per call | TFLOP/s | / default (first) | window |\n|---|---:|---:|---:|---|")
    for vname, ms, a, m, b, calls in rows:  # (window: start / timed from - until)
        print(f"| {vname} | {ms:.3f} | {flops / ms / 1e9:.1f} | {ms / rows[0][1]:.3f} | {a[11:]} / {m[11:]} - "
              f"{b[11:]} ({calls} calls) |", flush=True)
    if rounds > 1:
        n = len(fns)
        print(f"\nsustained {name}, {rounds} rounds: median TFLOP/s; paired = median over its windows of ms / mean of "
              "the default windows before and after")
        print("| variant | windows | median TFLOP/s | paired ms / default |\n|---|---:|---:|---:|")
        for j, (vname, _) in enumerate(variants):
            ks = [k for k, jj in enumerate(order) if jj == j]
            tf = statistics.median(flops / rows[k][1] / 1e9 for k in ks)
            paired = "-" if j == 0 else \
                f"{statistics.median(rows[k][1] / ((rows[k - j][1] + rows[k - j + n][1]) / 2) for k in ks):.3f}"
            print(f"| {vname} | {len(ks)} | {tf:.1f} | {paired} |", flush=True)


PHASES = (("K / V wait", 0, 1), ("turn wait", 1, 2), ("issue", 2, 3), ("S wait", 3, 4), ("SiLU", 4, 5),
          ("P V wait", 5, 6), ("tail (copy P, loop top)", 6, 8), ("period (issue to issue)", 3, 11))


def trace(fn, B, S, D, what):
    """fp8_fwd_var=15's stamps (kFp8FwdDiagTrace): CTA (0, 0, 0) = sequence 0's last query tile, head 0 (64 words
    per output row)."""
    out = fn()
    torch.cuda.synchronize()
    m0 = (S + 127) // 128 * 128 - 128
    words = out[m0:m0 + 128, 0, :].contiguous().view(torch.int32)[:, :64].reshape(-1).cpu().tolist()
    rows = []
    for wg in range(2):
        w = [x & 0xFFFFFFFF for x in words[4096 * wg:4096 * wg + 4096]]
        n = w[4088]
        st = [[w[8 * i + j] for j in range(8)] for i in range(min(n + 1, 511))]

        def d(a, b):
            return (b - a) & 0xFFFFFFFF
        vals = {name: [] for name, _, _ in PHASES}
        for i in range(2, n - 1):
            for name, a, b in PHASES:
                if b == 8:
                    vals[name].append(d(st[i][6], st[i + 1][0]))
                elif b == 11:
                    vals[name].append(d(st[i][3], st[i + 1][3]))
                else:
                    vals[name].append(d(st[i][a], st[i][b]))
        total = d(st[0][0], st[n][6])
        rows.append((wg, n, total, {k: statistics.median(v) if v else 0 for k, v in vals.items()}))
    w0 = [x & 0xFFFFFFFF for x in words[:4096]]
    w1 = [x & 0xFFFFFFFF for x in words[4096:]]
    n = w0[4088]
    off = statistics.median([(w1[8 * i + 3] - w0[8 * i + 3]) & 0xFFFFFFFF for i in range(2, n - 1)]) if n > 3 else 0
    print(f"\ntrace B{B} S{S // 1024}K D{D} ({what} + stamps; CTA (0,0,0), {n} KV tiles; SM cycles, "
          f"median over tiles 2..{n - 2}; wg 1 issues {off:.0f} cycles after wg 0)")
    print("| wg | " + " | ".join(name for name, _, _ in PHASES) + " | loop total / tiles |")
    print("|---|" + "---:|" * (len(PHASES) + 1))
    for wg, n, total, med in rows:
        print(f"| {wg} | " + " | ".join(f"{med[name]:.0f}" for name, _, _ in PHASES) + f" | {total / max(n, 1):.0f} |")


if __name__ == "__main__":
    main()
