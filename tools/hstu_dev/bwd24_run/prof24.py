"""Per-kernel device time of one backward (branch bwd24, issue 39): ours (kernel_options(sm90=False,
bwd_sm80_cfg=n)), FA2 and NVIDIA's Ampere HSTU (the peer), bf16 causal H4, from torch.profiler over --iters
backwards after warm-up: each kernel's mean time a backward, the sum, and the main kernel's share. Uses bwd21.py's
inputs (make). Run from the root of the repository (python3 -P), PYTHONPATH=<site>:<folder of hstu_attn_2_cuda>.
  python3 -P prof24.py --shapes B128:S1024:D128 B16:S4096:D256 --impls ours fa2 peer --cfgs 0"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.getcwd(), "tools", "hstu_dev", "bwd21_run"))
from bwd21 import impl_list, make  # noqa: E402


def short(name):
    for k, v in (("hstu_bwd_pds", "main (ours)"), ("hstu_dq_tile_convert", "dQ convert (ours)"),
                 ("flash_bwd_dq_dk_dv", "main (FA2)"), ("convert_dq", "dQ convert"), ("dot_do_o", "dot(dO, O)"),
                 ("hstu_bwd_compute_dq_dk_dv", "main (peer)"), ("FillFunctor", "fill (zeros)"),
                 ("Memset", "memset")):
        if k in name:
            return v
    return name[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["B128:S1024:D128"])
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
    ap.add_argument("--impls", nargs="+", default=["ours", "fa2", "peer"])
    ap.add_argument("--iters", type=int, default=3)
    a = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile
    print(f"### prof24: kernels of one backward (mean of {a.iters}), {torch.cuda.get_device_name()}, bf16 causal H4")
    print("| shape | impl | kernel | us | share |\n|---|---|---|---:|---:|")
    for shape in a.shapes:
        B, S, D = (int(x[1:]) for x in shape.split(":"))
        for i, c in impl_list(a):
            try:
                f = make(i, B, S, D, c)
            except Exception as e:  # (e.g. no peer module)
                print(f"{shape} {i}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as pr:
                for _ in range(a.iters):
                    f()
                torch.cuda.synchronize()
            tot = collections.OrderedDict()
            for e in pr.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    k = short(e.name)
                    tot[k] = tot.get(k, 0.0) + e.time_range.elapsed_us() / a.iters
            s = sum(tot.values())
            lab = i if i != "ours" else f"ours cfg {c}"
            for k, us in tot.items():
                print(f"| {shape} | {lab} | {k} | {us:.1f} | {100 * us / s:.1f} % |")
            print(f"| {shape} | {lab} | **sum** | **{s:.1f}** | |", flush=True)
            del f
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
