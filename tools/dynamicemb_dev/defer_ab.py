"""The training step at NVIDIA's config (benchmarks/embedding.py --preset nvidia) with the lab's deferred row update
(_KernelStep._lab_defer: 1 the update on a stream of its own, the next step's dedup under it; 2 that dedup also on a
highest-priority stream; 0 the build's step; "D/B" also caps the update's grid at B blocks per SM, op
_lookup_lab_seg_resident) in one process, variants in interleaved rounds. Per variant:
  span   device ms per step of --steps steps queued behind a GPU sleep (the host ahead of all of them), from an
         event before the first to an event after the last step's update;
  steady ms per step of --reps steps queued behind 5 (CUDA events, the last update joined);
  sync   ms of one step between events, the host waiting for the step's update before the next (median).
A build without the lab attribute runs every variant as its own step (main's wheel: run it with --variants 0).
Run (GPU):
    python3 -P tools/dynamicemb_dev/defer_ab.py --bench benchmarks --opt adam,sgd --variants 0,1,2,1/3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--opt", default="adam,sgd")
    p.add_argument("--variants", default="0,1,2")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from embedding import gpu_warmup, make_batch  # noqa: E402
    from lab_variants import preset_step  # noqa: E402
    import dynamicemb._batched_kernels as bk  # noqa: E402

    lab = hasattr(torch.ops.dynamicemb, "_lookup_lab_defer") and hasattr(bk, "_lab_update_stream")
    dev = torch.device("cuda")
    T, B = 10, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(4)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    gpu_warmup(dev, 0.3)
    variants = [v for v in a.variants.split(",") if v]
    resident = getattr(torch.ops.dynamicemb, "_lookup_lab_seg_resident", None) if lab else None
    tag = f"{a.label} " if a.label else ""
    print(f"\n### {tag}step with the deferred update (lab op: {lab}); ms per step")
    print("| optimizer | variant | span (host ahead) | steady | sync | rounds (span) |")
    print("|---|---|---:|---:|---:|---|")
    for opt_name in a.opt.split(","):
        m, train = preset_step(opt_name, batches, dev)

        def use(v):
            parts = [int(x) for x in v.split("/")]
            if lab:
                torch.cuda.synchronize()
                torch.ops.dynamicemb._lookup_lab_defer(0, 0)
            if resident is not None:
                resident(parts[1] if len(parts) > 1 else 0)
            elif len(parts) > 1:
                raise SystemExit(f"variant {v}: this build has no op _lookup_lab_seg_resident")
            m._lab_defer = parts[0]

        def join(cur):
            if lab:
                cur.wait_stream(bk._lab_update_stream(dev))

        def span():
            cur = torch.cuda.current_stream()
            torch.cuda.synchronize()
            torch.cuda._sleep(80_000_000)  # ~40 ms: the host issues every step first
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(cur)
            for _ in range(a.steps):
                train()
            join(cur)
            e.record(cur)
            e.synchronize()
            return s.elapsed_time(e) / a.steps

        def steady():
            cur = torch.cuda.current_stream()
            torch.cuda.synchronize()
            for _ in range(5):
                train()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(cur)
            for _ in range(a.reps):
                train()
            join(cur)
            e.record(cur)
            e.synchronize()
            return s.elapsed_time(e) / a.reps

        def sync():
            cur = torch.cuda.current_stream()
            xs = []
            for _ in range(6):
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(cur)
                train()
                join(cur)
                e.record(cur)
                e.synchronize()
                xs.append(s.elapsed_time(e))
            return statistics.median(xs[1:])

        res = {v: {"span": [], "steady": [], "sync": []} for v in variants}
        for v in variants:
            use(v)
            for _ in range(3):
                train()
        for _ in range(a.rounds):
            for v in variants:
                use(v)
                for _ in range(2):
                    train()
                res[v]["span"].append(span())
                res[v]["steady"].append(steady())
                res[v]["sync"].append(sync())
        use("0")
        for v in variants:
            r = res[v]
            med = {k: statistics.median(x) for k, x in r.items()}
            print(f"| {opt_name} | {v} | {med['span']:.4f} | {med['steady']:.4f} | {med['sync']:.4f} | "
                  f"{' '.join(f'{x:.4f}' for x in r['span'])} |")
        sys.stdout.flush()
        torch.cuda.synchronize()
        del m, train
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
