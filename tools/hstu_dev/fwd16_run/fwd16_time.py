"""The portable (sm80-class) forward's time against FlashAttention-2 (issue 39, branch fwd16): bf16 causal H4 shapes
under kernel_options(sm90=False, fwd_sm80_cfg=n) for the listed cfgs (where the head dim has the candidate; D = 256:
1 / 3 / 5 the warp-pair tiles, D = 64: 5 three blocks per SM) beside FA2 (torch's flash SDPA backend), variants
interleaved per round (CUDA events, median of --reps rounds); then contexts / targets against plain causal. Prints
markdown tables (ms and TFLOP/s in the FA convention, 4 H D L^2 B / 2) and `fwd16 LABEL | case | variant | ms` lines.

Usage: fwd16_time.py LABEL [--reps 10] [--cfgs 0 1 3 5] [--mask-cfgs 0 1] [--no-fa2] [--shapes ...]"""
import argparse

import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import _ops

SHAPES = {"B16 S4K D256": (16, 4096, 256), "B64 S1K D256": (64, 1024, 256), "B16 S8K D64": (16, 8192, 64),
          "B64 S2K D64": (64, 2048, 64), "B16 S4K D128": (16, 4096, 128), "B128 S1K D128": (128, 1024, 128),
          "B16 S16K D128": (16, 16384, 128), "B4 S16K D256": (4, 16384, 256),
          "B256 S256 D256": (256, 256, 256)}
# name: (D, contexts, targets, group)
MASKS = {"D256 causal": (256, 0, 0, 1), "D256 ctx64": (256, 64, 0, 1), "D256 tgt256 g16": (256, 0, 256, 16),
         "D64 causal": (64, 0, 0, 1), "D64 ctx64": (64, 64, 0, 1), "D128 causal": (128, 0, 0, 1),
         "D128 ctx64": (128, 64, 0, 1)}
# benchmarks/hstu_attention.py's jagged row (issue 6 / 39): Zipf(1.2) lengths B32 max 4K, D = 256, 3 contexts, against
# dense batches of the same tokens (32 equal lengths; the stricter: few sequences of about the jagged max length)
EXISTS = {1: (64, 128, 256), 2: (64, 128, 256), 3: (64, 128, 256), 4: (64, 128, 256), 5: (64, 256)}


def zipf_lengths(batch, max_len, seed=0, exponent=1.2):
    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, max_len + 1, dtype=torch.float64).pow(-exponent)
    return (torch.multinomial(weights, batch, replacement=True, generator=gen) + 1).tolist()


def jagged(cfgs, reps, D=256, ctx=3):
    """TFLOP/s (FA convention per sequence) of the Zipf batch and of its dense same-token batches, per cfg"""
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    b_long = max(1, round(tok / max(jag)))
    cases = [("zipf1.2 B32", jag), (f"dense B32 S{round(tok / 32)}", [round(tok / 32)] * 32),
             (f"dense B{b_long} S{round(tok / b_long)}", [round(tok / b_long)] * b_long)]
    print(f"\n### jagged (Zipf(1.2) B32 max 4K, {tok} tokens) vs dense same tokens, D{D} ctx{ctx} causal H4, ms (TFLOP/s)")
    print("| case | " + " | ".join(f"cfg {c}" for c in cfgs) + " |")
    print("|---|" + "---:|" * len(cfgs))
    tf = {}
    for name, lens in cases:
        g = torch.Generator(device="cuda").manual_seed(2)
        q, k, v = (torch.randn(sum(lens), 4, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
        nc = torch.tensor([min(ctx, L) for L in lens], device="cuda", dtype=torch.int32)
        ms = timed({f"cfg{c}": ours(q, k, v, cu, max(lens), c, num_contexts=nc) for c in cfgs}, reps)
        fl = sum(4.0 * 4 * D * L * L / 2 for L in lens)
        tf[name] = {n: fl / t / 1e9 for n, t in ms.items()}
        print(f"| {name} | " + " | ".join(f"{ms[f'cfg{c}']:.3f} ({tf[name][f'cfg{c}']:.0f})" for c in cfgs) + " |")
        for n, t in ms.items():
            print(f"fwd16 jagged | {name} | {n} | {t:.4f}", flush=True)
    for name, _ in cases[1:]:
        print(f"| zipf / {name} | " + " | ".join(
            f"{100 * tf[cases[0][0]][f'cfg{c}'] / tf[name][f'cfg{c}']:.0f} %" for c in cfgs) + " |")


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


def timed(calls, reps, warm=2):
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
    return {n: sorted(a.elapsed_time(b) for a, b in lst)[len(lst) // 2] for n, lst in ev.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--cfgs", type=int, nargs="+", default=[0, 1, 3, 5])
    ap.add_argument("--mask-cfgs", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--no-fa2", action="store_true")
    ap.add_argument("--shapes", nargs="+", default=["B16 S4K D256", "B64 S1K D256", "B256 S256 D256", "B16 S8K D64",
                                                  "B64 S2K D64"])
    ap.add_argument("--masks", nargs="*", default=["D256 causal", "D256 ctx64", "D64 causal", "D64 ctx64"])
    ap.add_argument("--jagged-cfgs", type=int, nargs="*", default=[])
    a = ap.parse_args()
    print(f"### portable forward, {a.label}: {torch.cuda.get_device_name()}, bf16 causal H4, ms (TFLOP/s), median "
          f"of {a.reps} interleaved rounds")
    print("| shape | " + " | ".join(f"cfg {c}" for c in a.cfgs) + " | FA2 | cfg 0 vs FA2 | best vs FA2 |")
    print("|---|" + "---:|" * (len(a.cfgs) + 3))
    for name in a.shapes:
        B, S, D = SHAPES[name]
        q, k, v, cu = inputs(B, S, D)
        calls = {f"cfg{c}": ours(q, k, v, cu, S, c) for c in a.cfgs if c in (0, 6) or D in EXISTS.get(c, ())}
        if not a.no_fa2:
            calls["FA2"] = fa2(q, k, v, B, S)
        ms = timed(calls, a.reps)
        fl = 4.0 * 4 * D * S * S * B / 2
        cell = lambda n: f"{ms[n]:.3f} ({fl / ms[n] / 1e9:.0f})" if n in ms else "="  # noqa: E731
        ours_ms = {n: t for n, t in ms.items() if n != "FA2"}
        best = min(ours_ms, key=ours_ms.get)
        r0 = f"{ms['FA2'] / ms['cfg0']:.3f}x" if "FA2" in ms and "cfg0" in ms else ""
        rb = f"{ms['FA2'] / ms[best]:.3f}x ({best})" if "FA2" in ms else best
        print(f"| {name} | " + " | ".join(cell(f"cfg{c}") for c in a.cfgs) + f" | {cell('FA2')} | {r0} | {rb} |",
              flush=True)
        for n, t in ms.items():
            print(f"fwd16 {a.label} | {name} | {n} | {t:.4f}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    if a.jagged_cfgs:
        jagged(a.jagged_cfgs, a.reps)
    if not a.masks:
        return
    print("\n### masks, B16 S4K H4 (contexts per sequence, targets, group), ms; vs causal of the same cfg and D")
    print("| mask | " + " | ".join(f"cfg {c}" for c in a.mask_cfgs) + " |")
    print("|---|" + "---:|" * len(a.mask_cfgs))
    base, cache = {}, {}
    for name in a.masks:
        D, ctx, tgt, grp = MASKS[name]
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
        cells = [f"{ms[f'cfg{c}']:.4f} ({ms[f'cfg{c}'] / base[D][f'cfg{c}']:.3f}x)" if f"cfg{c}" in ms and D in base
                 else "=" for c in a.mask_cfgs]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        for n, t in ms.items():
            print(f"fwd16 {a.label} | mask {name} | {n} | {t:.4f}", flush=True)


if __name__ == "__main__":
    main()
