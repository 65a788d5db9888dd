"""Where the portable (sm80-class) forward's jagged Zipf batch loses against dense batches of the same tokens
(issue 39, branches fwd17, fwd18): bf16 H4 forward ms of kernel_options(sm90=False, fwd_sm80_cfg=c) for the listed cfgs on
benchmarks/hstu_attention.py's jagged row (Zipf(1.2) B32 max 4K, 3,640 tokens: lengths 2065, 794, 152, ... ; D = 256,
3 contexts, causal) and its parts (the longest sequence alone, the two longest, the batch sorted longest first, without
contexts), the dense same-token batches, D = 128's pair; B256 S256 D256 against FA2; contexts vs causal at S4K.
Each timing is N calls replayed as one CUDA graph between two CUDA events (no host time: a plain loop of calls took
~77 us per call on the host, more than the kernels of the small batches), the variants interleaved per round, median
of --reps rounds. Prints markdown tables and `fwd17 LABEL | case | variant |
ms` lines.

Usage: fwd17_jag.py LABEL [--cfgs 0 7 7:8] [--reps 7] [--fa2] [--parts] [--masks] [--short] [--no-d128] [--d64]
       [--long] [--edge | --only-edge]"""
import argparse

import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import _ops

H = 4


def zipf_lengths(batch, max_len, seed=0, exponent=1.2):
    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, max_len + 1, dtype=torch.float64).pow(-exponent)
    return (torch.multinomial(weights, batch, replacement=True, generator=gen) + 1).tolist()


def ours(lens, D, cfg, ctx=0, tgt=0, grp=1, seed=2):
    """cfg: "c" (kernel_options(fwd_sm80_cfg=c)) or "c:n" (and fwd_split_tiles=n)"""
    cfg, _, split = str(cfg).partition(":")
    opts = dict(sm90=False, fwd_sm80_cfg=int(cfg))
    if split:
        opts["fwd_split_tiles"] = int(split)
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(sum(lens), H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + lens, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    full = lambda x: torch.tensor([min(x, L) for L in lens], device="cuda", dtype=torch.int32) if x else None  # noqa
    nc, nt, S = full(ctx), full(tgt), max(lens)

    def call():
        with torch.no_grad(), _ops.kernel_options(**opts):
            return hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, S, S, window_size=(-1, 0), alpha=D ** -0.5,
                                                   num_contexts=nc, num_targets=nt, target_group_size=grp)
    return call


def fa2(B, S, D, seed=3):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))

    def call():
        with torch.no_grad(), torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return call


def graphed(fn, n):
    """a CUDA graph of n calls of fn (after two warm-up calls on a side stream), or None where capture fails"""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
        return g
    except RuntimeError as e:  # (then timed by loops of calls)
        print(f"(graph capture failed: {str(e)[:100]})")
        return None


def timed(calls, reps, n):
    """{name: ms per call}: each variant's n calls replayed as one CUDA graph (no host time between the kernels;
    loops of calls where capture fails), variants interleaved per round, median of reps rounds"""
    graphs = {k: graphed(fn, n) for k, fn in calls.items()}
    ev = {k: [] for k in calls}
    for _ in range(reps):
        for name, fn in calls.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            if graphs[name] is not None:
                graphs[name].replay()
            else:
                for _ in range(n):
                    fn()
            b.record()
            ev[name].append((a, b))
    torch.cuda.synchronize()
    return {k: sorted(a.elapsed_time(b) / n for a, b in v)[len(v) // 2] for k, v in ev.items()}


def flops(lens, D):
    return sum(4.0 * H * D * L * L / 2 for L in lens)


def print_row(tag, name, lens, fl, ms, cols):
    """a markdown row of ms (TFLOP/s) per column, then one `TAG | name | column | ms` line per timing"""
    print(f"| {name} | {sum(lens)} | " + " | ".join(
        f"{ms[c]:.4f} ({fl / ms[c] / 1e9:.0f})" if c in ms else "" for c in cols) + " |", flush=True)
    for c, t in ms.items():
        print(f"{tag} | {name} | {c} | {t:.5f}", flush=True)


def time_row(tag, name, lens, D, run, reps, cols):
    """timed(run) with 3 calls per graph on batches over 20K tokens (10 below), printed as print_row; (FLOPs, ms)"""
    ms = timed(run, reps, 3 if sum(lens) > 20000 else 10)
    fl = flops(lens, D)
    print_row(tag, name, lens, fl, ms, cols)
    return fl, ms


def table(title, cases, cfgs, reps, label, n=10, fa2_for=None):
    print(f"\n### {title}")
    cols = [f"cfg {c}" for c in cfgs] + (["FA2"] if fa2_for else [])
    print("| case | tokens | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    res = {}
    for name, lens, D, kw in cases:
        # (forced chunks only on the small batches: on B16 S4K chunks of 4 would hold GBs of partials per call)
        run = {f"cfg {c}": ours(lens, D, c, **kw) for c in cfgs
               if sum(lens) <= 20000 or str(c).partition(":")[2] in ("", "0")}
        if fa2_for and name in fa2_for:
            run["FA2"] = fa2(len(lens), lens[0], D)
        ms = timed(run, reps, n)
        res[name] = ms
        print_row(f"fwd17 {label}", name, lens, flops(lens, D), ms, cols)
        del run
        torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--cfgs", nargs="+", default=["0"], help='"c" or "c:n" (fwd_split_tiles=n)')
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--parts", action="store_true", help="the Zipf batch's parts (longest sequence alone, ...)")
    ap.add_argument("--masks", action="store_true", help="contexts / targets vs causal, B16 S4K")
    ap.add_argument("--short", action="store_true", help="B256 S256 D256 (and B64 S1K) against FA2")
    ap.add_argument("--fa2", action="store_true")
    ap.add_argument("--no-d128", action="store_true")
    ap.add_argument("--d64", action="store_true", help="the Zipf batch and B2 S1820 at D = 64")
    ap.add_argument("--long", action="store_true", help="B16 S4K, B4 S4K ctx3, B1 S8K at D = 256")
    ap.add_argument("--edge", action="store_true", help="dense batches near two waves, which fwd18's rule newly "
                    "splits (B4 S4K D64, B2 S4K D256) or splits finer (B1 S8K D64 / D256); B16 S4K D256 (no split)")
    ap.add_argument("--only-edge", action="store_true", help="--edge's cases alone")
    a = ap.parse_args()
    print(f"## fwd17 {a.label}: {torch.cuda.get_device_name()}, bf16 H4 causal, forward ms (TFLOP/s, FA convention "
          f"per sequence), CUDA graphs of 10 calls, median of {a.reps} interleaved rounds")
    jag = zipf_lengths(32, 4096)
    tok = sum(jag)
    srt = sorted(jag, reverse=True)
    c3 = {"ctx": 3}
    cases = [("zipf D256 ctx3", jag, 256, c3), ("dense B2 S1820 D256 ctx3", [tok // 2] * 2, 256, c3),
             ("dense B32 S114 D256 ctx3", [round(tok / 32)] * 32, 256, c3),
             ("zipf D128 ctx3", jag, 128, c3), ("dense B2 S1820 D128 ctx3", [tok // 2] * 2, 128, c3)]
    if a.no_d128:
        cases = cases[:3]
    if a.d64:
        cases += [("zipf D64 ctx3", jag, 64, c3), ("dense B2 S1820 D64 ctx3", [tok // 2] * 2, 64, c3)]
    if a.long:
        cases += [("B16 S4K D256", [4096] * 16, 256, {}), ("B4 S4K D256 ctx3", [4096] * 4, 256, c3),
                  ("B1 S8K D256", [8192], 256, {})]
    if a.edge or a.only_edge:
        edge = [("B4 S4K D64", [4096] * 4, 64, {}), ("B1 S8K D64", [8192], 64, {}), ("B2 S4K D256", [4096] * 2, 256, {}),
                ("B1 S8K D256", [8192], 256, {}), ("B16 S4K D256", [4096] * 16, 256, {})]
        cases = edge if a.only_edge else cases + edge
    if a.parts:
        cases += [("zipf D256", jag, 256, {}), ("dense B2 S1820 D256", [tok // 2] * 2, 256, {}),
                  ("zipf longest first D256 ctx3", srt, 256, c3), ("L2065 D256 ctx3", srt[:1], 256, c3),
                  ("L2065+794 D256 ctx3", srt[:2], 256, c3), ("zipf less 2 longest D256 ctx3", srt[2:], 256, c3),
                  ("dense B1 S1820 D256 ctx3", [tok // 2], 256, c3), ("B1 S64 D256 (floor)", [64], 256, {})]
    res = table(f"jagged Zipf(1.2) B32 max 4K ({tok} tokens) and parts", cases, a.cfgs, a.reps, a.label)
    print("\n| jagged TFLOP/s over dense same tokens | " + " | ".join(f"cfg {c}" for c in a.cfgs) + " |")
    print("|---|" + "---:|" * len(a.cfgs))
    for j, d in (("zipf D256 ctx3", "dense B2 S1820 D256 ctx3"), ("zipf D256 ctx3", "dense B32 S114 D256 ctx3"),
                 ("zipf D128 ctx3", "dense B2 S1820 D128 ctx3"), ("zipf D64 ctx3", "dense B2 S1820 D64 ctx3")):
        if j not in res or d not in res:
            continue
        fj, fd = flops(jag, 256), flops([tok // 2] * 2 if "B2" in d else [round(tok / 32)] * 32, 256)
        print(f"| {j} / {d} | " + " | ".join(
            f"{100 * (fj / res[j][f'cfg {c}']) / (fd / res[d][f'cfg {c}']):.0f} %" for c in a.cfgs) + " |")
    if a.short:
        table("short rows D256 against FA2", [("B256 S256 D256", [256] * 256, 256, {}),
                                              ("B64 S1K D256", [1024] * 64, 256, {})],
              a.cfgs, a.reps, a.label, n=5, fa2_for=("B256 S256 D256", "B64 S1K D256") if a.fa2 else None)
    if a.masks:
        ms = table("contexts / targets vs causal, B16 S4K", [
            ("D256 causal", [4096] * 16, 256, {}), ("D256 ctx64", [4096] * 16, 256, {"ctx": 64}),
            ("D128 causal", [4096] * 16, 128, {}), ("D128 ctx64", [4096] * 16, 128, {"ctx": 64})],
            a.cfgs, a.reps, a.label, n=3)
        for D in (256, 128):
            print(f"| ctx64 / causal D{D} | | " + " | ".join(
                f"{ms[f'D{D} ctx64'][f'cfg {c}'] / ms[f'D{D} causal'][f'cfg {c}']:.3f}x" for c in a.cfgs) + " |")


if __name__ == "__main__":
    main()
