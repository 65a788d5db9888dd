"""The training step at NVIDIA's config (benchmarks/embedding_step_profile.py --preset nvidia) under each lab
variant, in one process: S/F = the CSR sort S (op _lookup_lab_csr_sort; lookup_types.h CsrSort: 0 cub's SortPairs,
1 hand-dispatched onesweep 8-bit (default), 2 10-bit 4K tiles, 3 10-bit 6K tiles, 4 8-bit with the
warp-aggregated histogram) and where the step finds its uniques F (op
_lookup_lab_find_later: 0 the dedup's number pass, 1 its own kernel after the CSR fork, 2 the dedup's insert), and
optionally /D, the dedup's flags (op _lookup_lab_dedup, lookup_types.h DedupFlags: 1 the insert's probe starts
with the CAS (default), 16 the passes as programmatic dependent launches, 32 also the checks / clear / the insert
pass's resolve / the forward; bits 2, 4, 8, 64 of older builds: removed variants, docs/dynamicemb.md) and /A the
segmented update's kernel (op _lookup_lab_seg_apply of builds before session 17); per-kernel profile (torch.profiler:
kernel times, busy = union of kernel intervals, so overlapping streams count once) and step times in interleaved
rounds (synchronized per step with a fixed gradient of ones; pipelined: the queue kept ahead). A build without the
op runs as "main". Run (GPU):
    python3 -P tools/dynamicemb_dev/csr_sort_ab.py --bench benchmarks [--variants 0/0,2/0,2/1] [--opt sgd]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--variants", default="0/0,1/0,2/0,3/0,2/1")
    p.add_argument("--opt", default="sgd", help="comma list of optimizers (sgd, adam), one module each")
    p.add_argument("--later-variants", default="", help="variants of the optimizers after the first (default: same)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="")
    p.add_argument("--print-kernels", action="store_true", help="print each variant's full kernel table")
    p.add_argument("--gaps", action="store_true",
                   help="at the end, the device idle gaps of 8 pipelined steps of the last optimizer's first variant "
                   "(pipelined_gaps.py)")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    from bench_util import median_ms  # noqa: E402
    from embedding import gpu_warmup, make_batch  # noqa: E402
    from embedding_step_profile import profile_kernels  # noqa: E402

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lab_variants import lab_ops, preset_step, use_variant  # noqa: E402

    lab, lab_dedup = lab_ops()
    variants = [v for v in a.variants.split(",") if v] if lab is not None else [None]
    dev = torch.device("cuda")
    T, B = 10, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev)
    first = variants
    for oi, opt_name in enumerate(a.opt.split(",")):
        if oi > 0 and a.later_variants and lab is not None:
            variants = [v for v in a.later_variants.split(",") if v]
        else:
            variants = first
        m, train = preset_step(opt_name, batches, dev)
        it = [0]

        def evalstep():
            it[0] = (it[0] + 1) % len(batches)
            ids, off = batches[it[0]]
            with torch.no_grad():
                m(ids, off, validate=None)

        def pipelined(fn, reps):
            torch.cuda.synchronize()
            torch.cuda._sleep(50_000_000)
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            issue = (time.perf_counter() - t0) / reps * 1e6
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(reps):
                fn()
            e.record()
            e.synchronize()
            return s.elapsed_time(e) / reps, issue

        def use(v):
            use_variant(lab, lab_dedup, v)

        for _ in range(6):
            train()
        sorts = {0: "cub sort", 1: "hand 8-bit", 2: "hand 10-bit 4K", 3: "hand 10-bit 6K", 4: "hand 8-bit, match hist"}
        finds = {0: "", 1: ", find after fork", 2: ", find in insert"}

        def inserts(d):
            out = ", CAS first" if d & 1 else ", load + CAS"
            if d & 2:
                out += ", prefetch keys" + (" + scores" if d & 4 else "")
            if d & 8:
                out += ", number 3/SM"
            if d & 64:
                out += ", number 512 thr"
            if d & 16:
                out += ", PDL"
            return out

        def vname(v):
            if v is None:
                return "main"
            parts = [int(x) for x in v.split("/")]
            return (sorts[parts[0]] + finds[parts[1]] + (inserts(parts[2]) if len(parts) > 2 else "")
                    + (f", apply {parts[3]}" if len(parts) > 3 else ""))

        name = {v: vname(v) for v in variants}
        prof = {}
        for v in variants:
            use(v)
            for _ in range(3):
                train()
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                per = profile_kernels(train, a.steps, None, "")
            text = buf.getvalue()
            busy = float(text.split("busy ")[1].split(" ms")[0])
            ksum = float(text.split("kernel sum ")[1].split(" ms")[0])
            prof[v] = (per, busy, ksum)
            if a.print_kernels:
                print(f"### {a.label}{name[v]}: train kernels\n```\n{text}```")
        # step times in interleaved rounds
        times = {v: [] for v in variants}
        for _ in range(a.rounds):
            for v in variants:
                use(v)
                for _ in range(3):
                    train()
                sync = median_ms(train, 0, a.reps)
                pipe, issue = pipelined(train, a.reps)
                times[v].append((sync, pipe, issue))
        # eval busy (the CSR is a training-only path: one eval profile, with the first optimizer's module)
        ebusy = None
        if oi == 0:
            use(variants[-1])
            m.eval()
            for _ in range(3):
                evalstep()
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                profile_kernels(evalstep, a.steps, None, "")
            ebusy = float(buf.getvalue().split("busy ")[1].split(" ms")[0])
            m.train()

        print(f"\n### {a.label}train step, NVIDIA preset, {opt_name} (ms; busy / kernel sum from torch.profiler, "
              f"{a.steps} steps; times: median over {a.rounds} interleaved rounds of {a.reps})")
        print("| variant | busy | kernel sum | sync step | pipelined | host issue us |")
        print("|---|---:|---:|---:|---:|---:|")
        for v in variants:
            per, busy, ksum = prof[v]
            med = [statistics.median(x[k] for x in times[v]) for k in range(3)]
            print(f"| {name[v]} | {busy:.3f} | {ksum:.3f} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.0f} |")
        if ebusy is not None:
            print(f"\neval busy ({name[variants[-1]]}): {ebusy:.3f} ms")
        # the kernels per variant, side by side
        keys = []
        for v in variants:
            for k in prof[v][0]:
                if k not in keys:
                    keys.append(k)
        print(f"\n### {a.label}{opt_name}: kernels (ms per step)")
        print("| kernel | " + " | ".join(name[v] for v in variants) + " |")
        print("|---|" + "---:|" * len(variants))
        for k in keys:
            print(f"| {k[:90]} | " + " | ".join(f"{prof[v][0].get(k, 0.0):.4f}" for v in variants) + " |")
        sys.stdout.flush()
        if a.gaps and oi == len(a.opt.split(",")) - 1:  # last: the device's idle time of pipelined steps
            from pipelined_gaps import print_gaps, profile_pipelined  # noqa: E402

            use(variants[0])
            for _ in range(3):
                train()
            span, busy, gaps = profile_pipelined(train, 8)
            print(f"\n{name[variants[0]]}, 8 pipelined steps behind a GPU sleep: span {span:.3f} ms per step, "
                  f"busy {busy:.3f}, idle {span - busy:.3f}")
            print_gaps(f"{a.label}{name[variants[0]]}", gaps, 10)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
