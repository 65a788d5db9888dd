"""tidy36's sanity check of main's sm80 rab path as a comparison value: the portable forward (kernel_options(sm90=False),
bf16 B16 S4K H4 causal) with rab (B, H, S, S) by default and by main's rab path (the branch: fwd_sm80_cfg=8; main's
wheel: fp8_fwd_var=10), and causal without rab, in one process: CUDA events around N calls, the variants interleaved
per round, the median of the rounds; prints ms and the ratios. Run under each wheel (PYTHONPATH): the same ratios say
the value selects the same kernels as before.

Usage: ratio.py LABEL [--dims 128 64 256] [--rounds 5] [--n 10]"""
import argparse
import statistics

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--dims", type=int, nargs="+", default=[128, 64, 256])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=10)
    a = ap.parse_args()
    import hstu_attn
    from hstu_attn import _ops
    main_opt = (dict(fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_MAIN) if hasattr(_ops, "FWD_SM80_CFG_RAB_MAIN")
                else dict(fp8_fwd_var=10))
    B, S, H = 16, 4096, 4
    cu = torch.arange(0, B * S + 1, S, device="cuda", dtype=torch.int32)
    for D in a.dims:
        g = torch.Generator(device="cuda").manual_seed(D)
        q, k, v = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        rab = torch.randn(B, H, S, S, device="cuda", dtype=torch.bfloat16, generator=g)
        variants = {"causal": (None, {}), "rab": (rab, {}), "rab_main": (rab, main_opt)}
        times = {name: [] for name in variants}

        def call(r):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5,
                                                   rab=r)
        for rnd in range(a.rounds + 1):
            for name, (r, opts) in variants.items():
                with _ops.kernel_options(sm90=False, **opts):
                    call(r)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(a.n):
                        call(r)
                    end.record()
                    end.synchronize()
                if rnd > 0:  # (round 0: warm-up)
                    times[name].append(start.elapsed_time(end) / a.n)
        ms = {name: statistics.median(t) for name, t in times.items()}
        print(f"{a.label} D{D}: causal {ms['causal']:.3f} ms, rab {ms['rab']:.3f} ({ms['rab'] / ms['causal']:.3f}x "
              f"causal), rab main's path {ms['rab_main']:.3f} ({ms['rab_main'] / ms['causal']:.3f}x causal; "
              f"{ms['rab_main'] / ms['rab']:.3f}x rab)", flush=True)
        del rab
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
