"""The portable (sm80-class) forward's time against FlashAttention-2 (issue 39, branch fwd16): bf16 causal H4 shapes
under kernel_options(sm90=False, fwd_sm80_cfg=n) for the listed cfgs (where the head dim has the candidate; D = 256:
1 / 3 / 5 the warp-pair tiles, D = 64: 5 three blocks per SM) beside FA2 (torch's flash SDPA backend), variants
interleaved per round (CUDA events, median of --reps rounds); then contexts / targets against plain causal. Prints
markdown tables (ms and TFLOP/s in the FA convention, 4 H D L^2 B / 2) and `fwd16 LABEL | case | variant | ms` lines.

Usage: fwd16_time.py LABEL [--reps 10] [--cfgs 0 1 3 5] [--mask-cfgs 0 1] [--no-fa2] [--shapes ...]"""
import argparse
import os
import sys

import torch

# inputs(), ours(), fa2(), timed() of session 12's script (next to this folder in the tree; the run scripts run from
# the tree's root, where this file may be a copy)
for _d in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fwd80s_run"),
           os.path.join(os.getcwd(), "tools", "hstu_dev", "fwd80s_run")):
    if os.path.exists(os.path.join(_d, "fwd80s_time.py")):
        sys.path.insert(0, _d)
        break
from fwd80s_time import fa2, inputs, ours, timed  # noqa: E402

SHAPES = {"B16 S4K D256": (16, 4096, 256), "B64 S1K D256": (64, 1024, 256), "B16 S8K D64": (16, 8192, 64),
          "B64 S2K D64": (64, 2048, 64), "B16 S4K D128": (16, 4096, 128), "B128 S1K D128": (128, 1024, 128),
          "B16 S16K D128": (16, 16384, 128), "B4 S16K D256": (4, 16384, 256),
          "B256 S256 D256": (256, 256, 256)}
# name: (D, contexts, targets, group)
MASKS = {"D256 causal": (256, 0, 0, 1), "D256 ctx64": (256, 64, 0, 1), "D256 tgt256 g16": (256, 0, 256, 16),
         "D64 causal": (64, 0, 0, 1), "D64 ctx64": (64, 64, 0, 1), "D128 causal": (128, 0, 0, 1),
         "D128 ctx64": (128, 64, 0, 1)}
EXISTS = {1: (64, 128, 256), 2: (64, 128, 256), 3: (64, 128, 256), 4: (64, 128, 256), 5: (64, 256)}


# benchmarks/hstu_attention.py's jagged row (issue 6 / 39): Zipf(1.2) lengths B32 max 4K, D = 256, 3 contexts, against
# dense batches of the same tokens (32 equal lengths; the stricter: few sequences of about the jagged max length)
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
    print(f"\n### jagged (Zipf(1.2) B32 max 4K, {tok} tokens) vs dense same tokens, D{D} ctx{ctx} causal H4, ms "
          "(TFLOP/s)")
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


def shape_times(name, cfgs, reps, with_fa2):
    """{variant: ms} of one dense causal shape (the cfgs that exist at its head dim, FA2), its FA-convention flops"""
    B, S, D = SHAPES[name]
    q, k, v, cu = inputs(B, S, D)
    run = {f"cfg{c}": ours(q, k, v, cu, S, c) for c in cfgs if c in (0, 6) or D in EXISTS.get(c, ())}
    run.update({"FA2": fa2(q, k, v, B, S)} if with_fa2 else {})
    ms = timed(run, reps)
    del q, k, v, run
    torch.cuda.empty_cache()
    return ms, 4.0 * 4 * D * S * S * B / 2


def masks(names, cfgs, reps, label):
    """contexts / targets against plain causal (B16 S4K H4), per head dim one set of inputs"""
    print("\n### masks, B16 S4K H4 (contexts per sequence, targets, group), ms; vs causal of the same cfg and D")
    print("| mask | " + " | ".join(f"cfg {c}" for c in cfgs) + " |")
    print("|---|" + "---:|" * len(cfgs))
    for D in dict.fromkeys(MASKS[n][0] for n in names):
        q, k, v, cu = inputs(16, 4096, D, seed=1)
        causal = None
        for name in [n for n in names if MASKS[n][0] == D]:
            ctx, tgt, grp = MASKS[name][1:]
            full = lambda x: torch.full((16,), x, device="cuda", dtype=torch.int32) if x else None  # noqa: E731
            run = {f"cfg{c}": ours(q, k, v, cu, 4096, c, num_contexts=full(ctx), num_targets=full(tgt),
                                   target_group_size=grp) for c in cfgs if c in (0, 6) or D in EXISTS.get(c, ())}
            ms = timed(run, reps)
            causal = ms if ctx == tgt == 0 else causal
            print(f"| {name} | " + " | ".join(
                f"{ms[n]:.4f} ({ms[n] / causal[n]:.3f}x)" if n in ms and causal else "="
                for n in (f"cfg{c}" for c in cfgs)) + " |")
            for n, t in ms.items():
                print(f"fwd16 {label} | mask {name} | {n} | {t:.4f}", flush=True)
        del q, k, v


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
        ms, fl = shape_times(name, a.cfgs, a.reps, not a.no_fa2)
        ours_ms = {n: t for n, t in ms.items() if n != "FA2"}
        best = min(ours_ms, key=ours_ms.get)
        vs = [f"{ms['FA2'] / ms[n]:.3f}x" + tag if "FA2" in ms and n in ms else ""
              for n, tag in (("cfg0", ""), (best, f" ({best})"))]
        cells = [f"{ms[n]:.3f} ({fl / ms[n] / 1e9:.0f})" if n in ms else "=" for n in
                 [f"cfg{c}" for c in a.cfgs] + ["FA2"]]
        print(f"| {name} | " + " | ".join(cells + vs) + " |", flush=True)
        for n, t in ms.items():
            print(f"fwd16 {a.label} | {name} | {n} | {t:.4f}", flush=True)
    if a.jagged_cfgs:
        jagged(a.jagged_cfgs, a.reps)
    if a.masks:
        masks(a.masks, a.mask_cfgs, a.reps, a.label)


if __name__ == "__main__":
    main()
