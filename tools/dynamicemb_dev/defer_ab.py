"""The training step at NVIDIA's config (benchmarks/embedding.py --preset nvidia) with the lab's deferred row update
in one process, variants (values of _KernelStep._lab_defer: 1 the update on a stream of its own, the next step's dedup
under it; 0 the build's step) in interleaved rounds. Per variant:
  span   device ms per step of --steps steps queued behind a GPU sleep (the host ahead of all of them), from an
         event before the first to an event after the last step's update;
  steady ms per step of --reps steps queued behind 5 (CUDA events, the last update joined);
  sync   ms of one step between events, the host waiting for the step's update before the next (median).
A build without the lab op runs variant 0 only (main's wheel).
Run (GPU):
    python3 -P tools/dynamicemb_dev/defer_ab.py --bench benchmarks --opt adam,sgd --variants 0,1
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
    p.add_argument("--variants", default="0,1")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.bench))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from embedding import gpu_warmup  # noqa: E402
    from lab_variants import preset_batches, preset_step  # noqa: E402
    import dynamicemb._batched_kernels as bk  # noqa: E402

    ops = torch.ops.dynamicemb
    lab = hasattr(ops, "_lookup_lab_defer")
    dev = torch.device("cuda", torch.cuda.current_device())
    batches = preset_batches(dev)
    gpu_warmup(dev, 0.3)
    variants = [v for v in a.variants.split(",") if v]
    if not lab and variants != ["0"]:
        raise SystemExit("this build has no lab op _lookup_lab_defer: --variants 0")
    tag = f"{a.label} " if a.label else ""
    print(f"\n### {tag}step with the deferred update; ms per step")
    print("| optimizer | variant | span (host ahead) | steady | sync | rounds (span) |")
    print("|---|---|---:|---:|---:|---|")
    for opt_name in a.opt.split(","):
        m, train = preset_step(opt_name, batches, dev)

        def use(v):
            if lab:
                torch.cuda.synchronize()
                ops._lookup_lab_defer(0)
            m._lab_defer = int(v)

        def timed(steps, lead):
            """ms per step of `steps` steps between two events on the current stream, the last update joined;
            lead: "sleep" (a GPU sleep first: the host issues every step before the device starts them), "queued"
            (behind 5 steps), "sync" (nothing: the device idle)."""
            cur = torch.cuda.current_stream()
            torch.cuda.synchronize()
            if lead == "sleep":
                torch.cuda._sleep(80_000_000)  # ~40 ms
            elif lead == "queued":
                for _ in range(5):
                    train()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(cur)
            for _ in range(steps):
                train()
            if lab:
                cur.wait_stream(bk._lab_update_stream(dev))
            e.record(cur)
            e.synchronize()
            return s.elapsed_time(e) / steps

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
                res[v]["span"].append(timed(a.steps, "sleep"))
                res[v]["steady"].append(timed(a.reps, "queued"))
                res[v]["sync"].append(statistics.median(timed(1, "sync") for _ in range(5)))
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
