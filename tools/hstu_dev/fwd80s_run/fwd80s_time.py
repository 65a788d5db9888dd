"""The portable (sm80-class) forward's time, variants interleaved (issue 39): the issue's five shapes (bf16, causal,
H4) under each kernel_options(sm90=False, fwd_sm80_cfg=n) beside FlashAttention-2 (torch's flash SDPA backend, the
same instruction family), then masks with contexts / targets against plain causal (B16 S4K D128, D64, D256).
Per case every variant runs once per round (CUDA events), --reps rounds after warm-up; medians. Prints markdown
tables (GPU, bf16, ms, TFLOP/s in the FA convention: 4 H D L^2 B / 2) and `fwd80s LABEL | case | variant | ms` lines.

Usage: fwd80s_time.py LABEL [--reps 10] [--cfgs 0 1 2 3 4 5 6] [--mask-cfgs 0 4]"""
import argparse

import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import _ops

SHAPES = [("B16 S4K D128", 16, 4096, 128), ("B16 S16K D128", 16, 16384, 128), ("B128 S1K D128", 128, 1024, 128),
          ("B16 S4K D256", 16, 4096, 256), ("B16 S8K D64", 16, 8192, 64),
          # (not the issue's: the short-row threshold and D = 64's candidate 1 at mid rows)
          ("B256 S512 D128", 256, 512, 128), ("B64 S2K D64", 64, 2048, 64), ("B64 S1K D256", 64, 1024, 256)]
# name: (D, contexts, targets, group)
MASKS = [("causal", 128, 0, 0, 1), ("ctx64", 128, 64, 0, 1), ("tgt256", 128, 0, 256, 1), ("tgt256 g16", 128, 0, 256, 16),
         ("ctx64 tgt256 g16", 128, 64, 256, 16), ("D64 causal", 64, 0, 0, 1), ("D64 ctx64", 64, 64, 0, 1),
         ("D256 causal", 256, 0, 0, 1), ("D256 ctx64", 256, 64, 0, 1)]
EXISTS = {1: (64, 128), 2: (64, 128, 256), 3: (64, 128), 4: (64, 128, 256), 5: (256,)}


def inputs(B, S, D, H=4, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.arange(0, (B + 1) * S, S, device="cuda", dtype=torch.int32)
    return q, k, v, cu


def ours(q, k, v, cu, S, cfg, **kw):
    def call():
        with torch.no_grad(), _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0),
                                                   alpha=q.shape[-1] ** -0.5, **kw)
    return call


def fa2(q, k, v, B, S):
    H, D = q.shape[1], q.shape[2]
    q4, k4, v4 = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v))

    def call():
        with torch.no_grad(), torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)
    return call


def timed(calls, reps, warm=3):
    for fn in calls.values():
        for _ in range(warm):
            fn()
    ev = {n: [] for n in calls}
    for _ in range(reps):
        for n, fn in calls.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            ev[n].append((a, b))
    torch.cuda.synchronize()
    out = {}
    for n, lst in ev.items():
        ms = sorted(a.elapsed_time(b) for a, b in lst)
        out[n] = ms[len(ms) // 2]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5, 6])
    ap.add_argument("--mask-cfgs", type=int, nargs="+", default=[0, 4])
    ap.add_argument("--no-fa2", action="store_true")
    a = ap.parse_args()
    print(f"### portable forward, {a.label}: {torch.cuda.get_device_name()}, bf16 causal H4, ms (TFLOP/s), median "
          f"of {a.reps} interleaved rounds")
    print("| shape | " + " | ".join(f"cfg {c}" for c in a.cfgs) + " | FA2 | default vs FA2 |")
    print("|---|" + "---:|" * (len(a.cfgs) + 2))
    for name, B, S, D in SHAPES:
        q, k, v, cu = inputs(B, S, D)
        calls = {f"cfg{c}": ours(q, k, v, cu, S, c) for c in a.cfgs if c in (0, 6) or D in EXISTS.get(c, ())}
        if not a.no_fa2:
            calls["FA2"] = fa2(q, k, v, B, S)
        ms = timed(calls, a.reps)
        fl = 4.0 * 4 * D * S * S * B / 2
        cell = lambda n: f"{ms[n]:.3f} ({fl / ms[n] / 1e9:.0f})" if n in ms else "="  # noqa: E731
        ratio = f"{ms['FA2'] / ms['cfg0']:.3f}x" if "FA2" in ms and "cfg0" in ms else ""
        print(f"| {name} | " + " | ".join(cell(f"cfg{c}") for c in a.cfgs) + f" | {cell('FA2')} | {ratio} |",
              flush=True)
        for n, t in ms.items():
            print(f"fwd80s {a.label} | {name} | {n} | {t:.4f}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    print(f"\n### masks, B16 S4K H4 (contexts per sequence, targets, group), ms; vs causal of the same cfg and D")
    print("| mask | " + " | ".join(f"cfg {c}" for c in a.mask_cfgs) + " |")
    print("|---|" + "---:|" * len(a.mask_cfgs))
    base = {}
    cache = {}
    for name, D, ctx, tgt, grp in MASKS:
        if D not in cache:
            cache.clear()
            cache[D] = inputs(16, 4096, D, seed=1)
        q, k, v, cu = cache[D]
        i32 = dict(device="cuda", dtype=torch.int32)
        kw = dict(num_contexts=torch.full((16,), ctx, **i32) if ctx else None,
                  num_targets=torch.full((16,), tgt, **i32) if tgt else None, target_group_size=grp)
        ms = timed({f"cfg{c}": ours(q, k, v, cu, 4096, c, **kw) for c in a.mask_cfgs
                    if c in (0, 6) or D in EXISTS.get(c, ())}, a.reps)
        if ctx == 0 and tgt == 0:
            base[D] = ms
        cells = [f"{ms[f'cfg{c}']:.4f} ({ms[f'cfg{c}'] / base[D][f'cfg{c}']:.3f}x)" if f"cfg{c}" in ms else "="
                 for c in a.mask_cfgs]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        for n, t in ms.items():
            print(f"fwd80s {a.label} | mask {name} | {n} | {t:.4f}", flush=True)


if __name__ == "__main__":
    main()
