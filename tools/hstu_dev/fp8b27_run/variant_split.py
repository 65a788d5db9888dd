"""fp8b27 (issue 36): the FP8 backward's energy split, burst against sustained, by timing-only kernel variants.

The Hopper FP8 backward op (`hstu_attn::fp8_bwd_sm90`, the benchmark's inputs: B16 causal H4 D128, block descale)
with the private `diag` argument (hstu_bwd_fp8_sm90.h; dev builds have them, `--define hstu_dev=1`; run 2's lab wheel
of a161d826 had them in its product configuration):
0 the default, 1 no dQ reduce-adds (the dQ GEMM still runs), 2 no tanh (P = S / 2, SiLU' = 1), 256 no Q / dO / dO^T
/ Q^T loads past the first stages; the timing-only ones give wrong gradients. Each variant in turn (the default
first and last: the drift): the GPU idle for --idle s, then the op back to back the benchmark's way (L2 flushed,
CUDA events, a sync per call) for --window s; per call the event time into $OUT/calls_<case>_<variant>.csv (for
smi_join.py: the nvidia-smi log's SM clock / power per window, and the SM cycles per call = ms x MHz, which separate
a variant's cycles from its clock). Prints per variant the burst (calls 0-2, from a cool GPU) and sustained (the
window's last --tail s) medians and their ratios to the first default window.
Usage (GPU, sm_90): python variant_split.py OUT_DIR [--s 16384] [--diags 0,1,2,256,0] [--idle S] [--window S]
"""

import argparse
import csv
import os
import statistics
import sys
import time

import torch

import hstu_attn
from hstu_attn import _fp8

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (python -P: the script's folder is not on the path)
import clock_split  # noqa: E402  (same folder: window(), now())

# (1073741824: fp8b28's "pair dq", then fp8b29's lab "bf16 held0"; 134217728: fp8b29's dq_bf16 in its runs 1-2, its
# main_kernel after the flip; 8388608: fp8b30's lean in its runs 1-3, its main_kernel after the flip; fp8b32's run 1:
# 2097152 "dq early" (the late part's dQ issue ahead), 2097664 "ds8 early" (with the dS8 stores), after the flip
# 2097152 toggles them both: its main_kernel)
NAMES = {0: "default", 1: "no dQ adds", 2: "no tanh", 256: "no tile reloads", 134217728: "dq dtype toggled",
         402653184: "dq bf16 held3", 268435456: "bf16 held1", 1073741824: "bf16 held0", 8388608: "lean toggled",
         32768: "amax tree toggled", 2097152: "ds8 early toggled"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--s", type=int, default=16384)
    ap.add_argument("--diags", default="0,1,2,256,0")
    ap.add_argument("--idle", type=float, default=1.5)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--tail", type=float, default=1.0)
    ap.add_argument("--profile-first", action="store_true", help="the first window under torch.profiler: each "
                    "kernel's time and the idle before it, per call, into kernels_<window>.csv")
    ap.add_argument("--deadline", type=float, default=0.0, help="epoch seconds to end by (0: 40 s from now)")
    args = ap.parse_args(argv)
    deadline = args.deadline or time.time() + 40
    if not torch.cuda.is_available():
        print("variant_split: needs a GPU")
        return 0
    dev = torch.device("cuda")
    print(f"(process start {clock_split.now()}) {torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)
    B, S, H, D = 16, args.s, 4, 128
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    m = _fp8.DESCALE_MODES.index("block")
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    fl = 2.5 * 4 * H * D * S * S / 2 * B
    diags = [int(d) for d in args.diags.split(",")]
    opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"]  # (the benchmark's kernel_options(fp8_bwd=True))

    def call(diag):
        return lambda: torch.ops.hstu_attn.fp8_bwd_sm90(dout, q8, k8, v8, qs, ks, vs, m, 0, cu, cu, S, S, None, None,
                                                        1, -1, 0, D ** -0.5, None, float(S), None, None, opts, diag)

    for d in sorted(set(diags)):  # (each variant once, untimed: module load, a hang shows here first)
        t0 = time.perf_counter()
        call(d)()
        torch.cuda.synchronize()
        print(f"(diag {d} first call {time.perf_counter() - t0:.2f} s)", flush=True)
    case = f"B{B}_S{S // 1024}K"
    res = []
    for j, d in enumerate(diags):
        left = deadline - time.time()
        if left < args.idle + 1.5:
            print(f"skipped diag {d} (window {j}): {left:.1f} s left")
            continue
        secs = min(args.window, left - args.idle - 0.5)
        t_from = clock_split.now()
        prof = j == 0 and args.profile_first  # (the first window's kernels and the idle between them)
        rows, per_call = clock_split.window(call(d), flush, secs, args.idle, prof_on=prof)
        tag = f"{case}_{j}{NAMES.get(d, str(d)).replace(' ', '_').replace('-', '')}"
        print(f"(window {tag} diag {d} from {t_from} until {clock_split.now()}: {len(rows)} calls)", flush=True)
        with open(os.path.join(args.out, f"calls_{tag}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["i", "t_end", "event_ms"])
            for i, r in enumerate(rows):
                w.writerow([i, r[0], f"{r[1]:.4f}"])
        if per_call:
            per_call = per_call[:len(rows)]
            gaps = clock_split.GAPS[:len(per_call)]
            names = [nm[:40] for nm, _, _ in per_call[0]]
            with open(os.path.join(args.out, f"kernels_{tag}.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["i", "event_ms"] + [f"{n} ms" for n in names] + [f"idle before {n} us" for n in names])
                for i, (ks_, g) in enumerate(zip(per_call, gaps)):
                    w.writerow([i, f"{rows[i][1]:.4f}"] + [f"{us / 1e3:.4f}" for _, us, _ in ks_] +
                               [f"{x:.1f}" for x in g])
            print(f"\n{tag}: per kernel, median over {len(per_call)} calls: ms, then the idle us before it (the first: "
                  "after the flush kernel's end)")
            for c, n in enumerate(names):
                ms = [ks_[c][1] / 1e3 for ks_ in per_call if len(ks_) == len(names)]
                gp = [g[c] for g in gaps if len(g) == len(names)]
                if len(gp) < 2 or not ms:
                    continue
                print(f"| {n} | {statistics.median(ms):.4f} ms | idle before {statistics.median(gp):.1f} us "
                      f"(p10 {statistics.quantiles(gp, n=10)[0]:.1f}, p90 {statistics.quantiles(gp, n=10)[-1]:.1f}) |")
        ev = [r[1] for r in rows]
        burst = statistics.median(ev[:3])
        acc, tail = 0.0, []  # the calls of the window's last --tail seconds
        for x in reversed(ev):
            acc += x / 1e3
            if acc > args.tail and tail:
                break
            tail.append(x)
        res.append((d, burst, statistics.median(tail), len(tail), len(ev)))
    if not res:
        return 0
    b0, s0 = res[0][1], res[0][2]
    print(f"\n#### {case}: burst = median of calls 0-2 after {args.idle} s idle; sustained = median of the calls in the "
          f"window's last {args.tail} s; ratios to the first window (diag {res[0][0]})")
    print("| window | diag | variant | burst ms | burst TFLOP/s | / first | sustained ms | sustained TFLOP/s | / first | "
          "sustained / burst | calls (tail / all) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for j, (d, b, s, nt, n) in enumerate(res):
        print(f"| {j} | {d} | {NAMES.get(d, '?')} | {b:.3f} | {fl / b / 1e9:.1f} | {b / b0:.3f} | {s:.3f} | "
              f"{fl / s / 1e9:.1f} | {s / s0:.3f} | {s / b:.3f} | {nt} / {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
