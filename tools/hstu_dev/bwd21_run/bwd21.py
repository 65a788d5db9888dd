"""The portable (sm80-class) HSTU backward beside FlashAttention-2 and NVIDIA's Ampere HSTU kernels (branch bwd21,
issue 39), bf16 causal H4, one process:
  time   CUDA events, median of --reps, the implementations of a shape interleaved (rounds of one call each): ours
         under each --cfgs value (kernel_options(sm90=False, bwd_sm80_cfg=n)), FA2 (torch SDPA flash), the peer
         (module hstu_attn_2_cuda, called as benchmarks/hstu_attention.py's NvidiaAmperePeer does); a markdown table.
  prof   torch.profiler: the kernels of one backward of each (after warm-up) with their device times.
  ncu    one backward of each, for `ncu -k regex:...` (prints the (64 x 128) tile pairs of the shape).
Shapes: "B128:S1024:D128" (--shapes). Implementations: --impls ours fa2 peer.
Run from the root of the repository (python3 -P), PYTHONPATH=<site with hstu_attn>:<folder of hstu_attn_2_cuda>."""
import argparse
import os
import sys
import types

import torch

import hstu_attn
from hstu_attn import _ops

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
# time80.py's interleaved CUDA-event rounds (beside this file in the carry folder, else in the tree)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bwd80_run"))
from time80 import time_rounds  # noqa: E402


def pairs_of(B, S, H=4, BM=64, BN=128):
    return B * H * sum(S // BM - (n * BN) // BM for n in range(S // BN))


def make(impl, B, S, D, cfg=0, H=4):
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(1)
    alpha = D ** -0.5
    if impl == "fa2":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=dt, generator=gen).requires_grad_() for _ in range(3))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        dout = torch.randn_like(out)
        return lambda: torch.autograd.grad(out, [q, k, v], dout, retain_graph=True)
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=dt, generator=gen) for _ in range(3))
    cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
    if impl == "peer":
        import hstu_attention as hb
        peer = hb.NvidiaAmperePeer(torch.device(dev))
        case = types.SimpleNamespace(group=1, window=(-1, 0))
        dout = torch.randn_like(q)
        _, bwd = peer.calls(q, k, v, dout, cu, S, None, None, case, alpha, S)
        return bwd
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S,
                                              max_seqlen_k=S, window_size=(-1, 0), alpha=alpha)
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, [q, k, v], dout, retain_graph=True)


def impl_list(a):
    out = []
    for i in a.impls:
        if i == "ours":
            out += [("ours", c) for c in a.cfgs]
        else:
            out.append((i, 0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["time", "prof", "ncu"])
    ap.add_argument("--label", default="bwd21")
    ap.add_argument("--shapes", nargs="+", default=["B128:S1024:D128"])
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0])
    ap.add_argument("--impls", nargs="+", default=["ours", "fa2", "peer"])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    imps = impl_list(a)
    cols = [f"cfg {c}" if i == "ours" else i for i, c in imps]
    if a.mode == "time":
        print(f"### {a.label}: backward ms, {torch.cuda.get_device_name()}, bf16 causal H4 (CUDA events, median of "
              f"{a.reps}, interleaved)\n| shape | " + " | ".join(cols) + " | " +
              " | ".join(f"{c} / {x}" for c in cols if c.startswith("cfg") for x in ("fa2", "peer") if x in cols) +
              " |", flush=True)
    for shape in a.shapes:
        B, S, D = (int(x[1:]) for x in shape.split(":"))
        fns = []
        for i, c in imps:
            try:
                fns.append(make(i, B, S, D, c))
            except Exception as e:  # (e.g. no peer module)
                print(f"{shape} {i} cfg {c}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                fns.append(None)
        if a.mode == "time":
            live = [f for f in fns if f is not None]
            ms = iter(time_rounds(live, a.reps))
            t = [next(ms) if f is not None else float("nan") for f in fns]
            by = dict(zip(cols, t))
            ratios = [f"{by[x] / by[c]:.3f}x" for c in cols if c.startswith("cfg") for x in ("fa2", "peer")
                      if x in cols]
            print(f"| {shape} | " + " | ".join(f"{x:.4f}" for x in t) + " | " + " | ".join(ratios) + " |",
                  flush=True)
        elif a.mode == "prof":
            from torch.profiler import ProfilerActivity, profile
            for (i, c), f in zip(imps, fns):
                if f is None:
                    continue
                for _ in range(3):
                    f()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as pr:
                    f()
                    torch.cuda.synchronize()
                evs = [e for e in pr.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                us = [e.time_range.elapsed_us() for e in evs]
                print(f"#### prof {shape} {i} cfg {c}: {len(evs)} kernels, {sum(us) / 1000:.4f} ms device time")
                for e, t in zip(evs, us):
                    print(f"  {t / 1000:8.4f} ms  {e.name[:110]}")
        else:
            for f in fns:
                if f is not None:
                    f()
            torch.cuda.synchronize()
            print(f"bwd21 ncu {shape} pairs {pairs_of(B, S)}", flush=True)
        del fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
