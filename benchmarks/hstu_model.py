"""HSTU ranking model benchmark: train-step time, tokens/s and peak memory of examples/hstu_ranking's model, ours vs
the same model with PyTorch attention (padded dense, `hstu_attn.dense_hstu_attention`), with Meta
generative-recommenders' Triton attention (where importable) and/or torch.nn.Embedding tables (sparse gradients +
SparseAdam, ids hashed into the same number of rows).

One sweep (shared defaults: B=128, dim 256 = 4 heads x 64, 4 layers, 16 candidates, bf16 autocast of the dense
tower, fp32 tables, no relative attention bias): the history length (max_history in {128, 512, 1024}; --quick:
{128, 512}); the lengths of a batch are Zipf-distributed below it (synthetic users, as in the example). Variants:
    ours        hstu_attn kernels + dynamicemb tables (HSTULayer's fused kernels: SiLU + split, LayerNorm * u)
    ours-unfused  the same with HSTULayer(fused=False): those two steps as plain torch ops
    torch-attn  dense PyTorch attention + dynamicemb tables
    gr-triton   Meta GR's Triton attention (`triton_hstu_mha`) + dynamicemb tables (only where importable)
    torch-emb   hstu_attn kernels + torch.nn.Embedding tables
    torch-both  dense PyTorch attention + torch.nn.Embedding tables
The model has one context (the user token) and the candidates as targets; GR's attention gets the same mask
(contextual_seq_len=1, num_targets, N = the model's max_seqlen, which is also the attention divisor). GR's Triton
attention takes no attention bias, so the default is --bias none for every variant (--bias position / time adds the
example's relative bias to the variants that take one). GR's kernels autotune on first use; --gr-configs subset
(default) autotunes over 6 of its forward and 6 of its backward configs to keep the run short, all = GR's full lists.
GR's Triton kernel from its TMA code on (commit 2313f40, 2025-04-24, through HEAD 2e81fab) does not compile with
triton 3.6 (`tl._experimental_descriptor_store` is gone); 9cf78cc is the last commit before it.
Step = forward + backward + optimizer steps (the dynamic tables update inside the backward); times are CUDA events
around whole steps after warm-up (GR's autotuning happens there), median of --reps steps cycling through 8
pre-built batches on the device; tokens = user + history + candidate tokens of the batch; peak =
torch.cuda.max_memory_allocated over the timed steps. --time-budget S skips the rows left once S seconds have
passed (they print as "skipped"). Without a GPU the script prints a line and exits 0 (--smoke runs a tiny CPU case
for the tests).

Usage:
    python benchmarks/hstu_model.py [--quick] [--gr-path DIR] [--results benchmarks/RESULTS.md]
        [--plot hstu_model.png] [--json rows.json] [--time-budget 150]
    DIR holds generative_recommenders/ (a generative-recommenders checkout); without it the package must be
    importable for the gr-triton rows.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import json
import os
import statistics
import sys
import time
import traceback

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "hstu_ranking"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_util import command, git_commit, once_ms, parser, publish, pyplot, save_figure  # noqa: E402

from data import Batcher, synthetic_sequences, to_device  # noqa: E402
from model import ModelConfig, RankingModel  # noqa: E402
from train import _losses, make_optimizer  # noqa: E402

VARIANTS = {  # name: (attention, embeddings)
    "ours": ("kernel", "dynamicemb"),
    "ours-unfused": ("kernel", "dynamicemb"),
    "torch-attn": ("torch", "dynamicemb"),
    "gr-triton": ("gr-triton", "dynamicemb"),
    "torch-emb": ("kernel", "torch"),
    "torch-both": ("torch", "torch"),
}
UNFUSED = {"ours-unfused"}  # variants whose layers run HSTULayer(fused=False)
BIASES = {"none": (0, 0), "position": (None, 0), "time": (None, 16)}  # --bias: (max_distance, time_buckets)

# --gr-configs subset: (BLOCK_M, BLOCK_N, num_stages, num_warps) of GR's forward / backward (SEQUENCE_PARALLEL off)
GR_FWD_SUBSET = {(64, 64, 2, 4), (64, 64, 4, 4), (128, 64, 2, 4), (128, 64, 2, 8), (64, 32, 4, 4), (128, 128, 2, 8)}
GR_BWD_SUBSET = {(32, 64, 2, 4), (64, 64, 1, 4), (64, 64, 2, 4), (64, 64, 2, 8), (32, 128, 2, 8), (32, 32, 2, 4)}


def load_gr_triton(path, configs):
    """(GR's triton_hstu_attention module, None) or (None, why)."""
    if path:
        sys.path.insert(0, os.path.abspath(path))
    try:
        mod = importlib.import_module("generative_recommenders.ops.triton.triton_hstu_attention")
    except Exception as e:  # ImportError, or triton failing to import on this machine
        return None, f"{type(e).__name__}: {e}"
    if configs == "subset":
        for kernel, keep in ((mod._hstu_attn_fwd, GR_FWD_SUBSET), (mod._hstu_attn_bwd, GR_BWD_SUBSET)):
            sel = [c for c in kernel.configs if not c.kwargs.get("SEQUENCE_PARALLEL", False)
                   and (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages, c.num_warps) in keep]
            if sel:  # GR changed its lists: keep them all
                kernel.configs = sel
    return mod, None


def _gr_attention(gr, layer, q, k, v, cu_q, cu_k, max_q, max_k, num_contexts, num_targets, rab):
    """HSTULayer._attention through GR's triton_hstu_mha (same mask: the model's contexts are one user token)."""
    if rab is not None or cu_q is not cu_k:
        raise ValueError("gr-triton: GR's attention takes no rab and no cached keys here")
    n = int(layer.scaling_seqlen) if layer.scaling_seqlen > 0 else int(max_k)  # GR divides by its N
    return gr.triton_hstu_mha(N=n, alpha=layer.alpha, q=q, k=k, v=v, seq_offsets=cu_k.long(), num_targets=num_targets,
                              max_attn_len=max(layer.window_size[0], 0),
                              contextual_seq_len=1 if num_contexts is not None else 0)


@functools.lru_cache(maxsize=1)
def _sequences(users, items, min_len, max_len):
    return synthetic_sequences(users, items, min_len=min_len, max_len=max_len, seed=1)


def make_step(variant, max_history, args, device, gr=None):
    """(step(batch), the 8 device batches, model) of one variant at one history length: the benchmark's train step
    (also used by benchmarks/hstu_layer_profile.py)."""
    attn, emb = VARIANTS[variant]
    torch.manual_seed(0)
    max_distance, time_buckets = BIASES[args.bias]
    cfg = ModelConfig(dim=args.heads * args.head_dim, heads=args.heads, head_dim=args.head_dim, layers=args.layers,
                      dropout=0.0, max_seqlen=1 + max_history + args.candidates, embedding=emb,
                      attn_impl="kernel" if attn == "gr-triton" else attn, fused=variant not in UNFUSED,
                      user_capacity=1 << 16,
                      item_capacity=1 << 18, time_buckets=time_buckets,
                      max_distance=max_history + args.candidates + 2 if max_distance is None else max_distance)
    seqs = _sequences(args.users, args.items, 2 * args.candidates + 2, max_history + 2 * args.candidates + 1)
    batcher = Batcher(seqs, args.batch_size, max_history, args.candidates, seed=1)
    batches = [to_device(batcher.train_batch(s), device) for s in range(8)]
    model = RankingModel(cfg, device)
    if attn == "gr-triton":
        for layer in model.dense.stack.layers:
            layer._attention = functools.partial(_gr_attention, gr, layer)
    opt = make_optimizer(model, 1e-3)
    amp = device.type == "cuda"

    def step(b):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            pred = model(b).float()
        loss, _, _ = _losses(pred, b, 0.5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, batches, model


def measure(variant, max_history, args, device, gr=None):
    """(ms per step, tokens per s, peak MiB) of one variant at one history length; None if it ran out of memory."""
    step, batches, model = make_step(variant, max_history, args, device, gr)
    try:
        for i in range(args.warmup):
            step(batches[i % len(batches)])
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        times, tokens = [], []
        for i in range(args.reps):
            b = batches[i % len(batches)]
            times.append(once_ms(lambda: step(b), device))
            tokens.append(b["user"].shape[0] + b["hist_items"].shape[0] + b["cand_items"].shape[0])
    except torch.OutOfMemoryError:
        return None
    except Exception as e:  # e.g. a peer's kernel failing to compile here: the row says so, the sweep goes on
        traceback.print_exc()
        return f"error ({type(e).__name__})"
    finally:
        del model, step, batches
        if device.type == "cuda":
            torch.cuda.empty_cache()
    ms = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    return ms, statistics.mean(tokens) / (ms * 1e-3), peak


def header(device, args) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    cmd = command()
    return "\n".join([
        f"## hstu_model: {gpu}, dense tower {'bf16 autocast (fp32 weights)' if device.type == 'cuda' else 'fp32'}, "
        "tables fp32, "
        f"{datetime.date.today().isoformat()}",
        "",
        f"- model: B={args.batch_size}, {args.layers} layers, {args.heads} heads x {args.head_dim}, "
        f"{args.candidates} candidates, relative bias {args.bias}; torch {torch.__version__}; commit {git_commit()}",
        f"- gr-triton: {args.gr_note}",
        "- units: step = ms per train step (median of "
        f"{args.reps} after {args.warmup} warm-up), tokens/s = tokens per step / step time, peak = MiB allocated",
        f"- command: `{cmd}`",
        "",
    ])


def table(rows) -> str:
    lines = ["| max history | variant | attention | embeddings | step ms | tokens/s | peak MiB | ms / ours ms |",
             "|---:|---|---|---|---:|---:|---:|---:|"]
    for hist, variant, res, ours in rows:
        attn, emb = VARIANTS[variant]
        if not isinstance(res, tuple):  # None: out of memory; else "skipped" / "error (...)"
            lines.append(f"| {hist} | {variant} | {attn} | {emb} | {'OOM' if res is None else res} | | | |")
            continue
        ms, tps, peak = res
        sp = f"{ms / ours[0]:.2f}x" if isinstance(ours, tuple) else ""
        lines.append(f"| {hist} | {variant} | {attn} | {emb} | {ms:.2f} | {tps:,.0f} | {peak:,.0f} | {sp} |")
    return "\n".join(lines)


def plot(rows, path, title="HSTU ranking model: hstu_attn + dynamicemb vs PyTorch attention, GR Triton attention, nn.Embedding"):
    plt = pyplot(path)
    if plt is None:
        return
    hists = sorted({r[0] for r in rows})
    variants = [v for v in VARIANTS if any(r[1] == v and isinstance(r[2], tuple) for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(len(variants), 1)
    for k, variant in enumerate(variants):
        res = {h: r for h, v, r, _ in rows if v == variant and isinstance(r, tuple)}
        xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(hists))]
        axes[0].bar(xs, [res[h][0] if h in res else 0 for h in hists], width, label=variant)
        axes[1].bar(xs, [res[h][2] if h in res else 0 for h in hists], width, label=variant)
    for ax, label in zip(axes, ("train step (ms)", "peak memory (MiB)")):
        ax.set_xticks(range(len(hists)))
        ax.set_xticklabels([f"history {h}" for h in hists])
        ax.set_ylabel(label)
    axes[0].legend()
    fig.suptitle(title)
    save_figure(fig, path)


def main(argv=None) -> int:
    p = parser(__doc__, quick="history lengths 128 and 512, fewer reps")
    p.add_argument("--smoke", action="store_true", help="a tiny case that also runs on CPU (tests)")
    p.add_argument("--histories", type=int, nargs="+", help="the history lengths of the sweep")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                   help="gr-triton is left out (with a note) where GR's Triton attention is not importable")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument("--bias", choices=list(BIASES), default="none",
                   help="relative attention bias of the model: none (default; GR's Triton attention takes none), "
                        "position, or position + time buckets (gr-triton rows are then left out)")
    p.add_argument("--users", type=int, default=4096)
    p.add_argument("--items", type=int, default=100_000)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--gr-path", help="directory holding generative_recommenders/ (Meta GR checkout) for gr-triton")
    p.add_argument("--gr-configs", choices=["subset", "all"], default="subset",
                   help="GR's autotuning configs: 6 forward + 6 backward (default) or its full lists")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds; rows not started by then are skipped (0: no limit)")
    p.add_argument("--results", help="append the markdown table to this file (e.g. benchmarks/RESULTS.md)")
    p.add_argument("--plot", help="write a PNG plot here (needs matplotlib)")
    p.add_argument("--json", help="write the rows as JSON here (to plot elsewhere)")
    args = p.parse_args(argv)
    if args.smoke:
        device = torch.device("cpu")
        args.histories = args.histories or [8]
        args.batch_size, args.heads, args.head_dim, args.layers, args.candidates = 4, 2, 8, 1, 2
        args.users, args.items, args.warmup, args.reps = 16, 64, 1, 2
    elif not torch.cuda.is_available():
        print("hstu_model benchmark: no CUDA device, skipping (use --smoke for a CPU smoke run)")
        return 0
    else:
        device = torch.device("cuda")
        if args.quick:
            args.reps = min(args.reps, 10)
        args.histories = args.histories or ([128, 512] if args.quick else [128, 512, 1024])
    gr = None
    args.gr_note = "not requested"
    if "gr-triton" in args.variants:
        if device.type != "cuda":
            args.gr_note = "left out (needs CUDA)"
        elif args.bias != "none":
            args.gr_note = "left out (GR's Triton attention takes no attention bias)"
        else:
            gr, why = load_gr_triton(args.gr_path, args.gr_configs)
            args.gr_note = (f"generative_recommenders triton_hstu_mha, {args.gr_configs} autotuning configs"
                            if gr is not None else f"left out (not importable: {why})")
        if gr is None:
            args.variants = [v for v in args.variants if v != "gr-triton"]
    start = time.perf_counter()
    rows = []
    for hist in args.histories:
        ours = None
        for variant in args.variants:
            if args.time_budget > 0 and time.perf_counter() - start > args.time_budget:
                res = "skipped"
            else:
                res = measure(variant, hist, args, device, gr)
            if variant == "ours":
                ours = res
            rows.append((hist, variant, res, ours))
            print(f"history {hist} {variant}: {res} ({time.perf_counter() - start:.0f} s)", file=sys.stderr,
                  flush=True)
    text = header(device, args) + table(rows) + "\n"
    publish(text, args.results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header(device, args), "rows": [
                {"history": h, "variant": v, "attention": VARIANTS[v][0], "embeddings": VARIANTS[v][1],
                 **({"ms": r[0], "tokens_per_s": r[1], "peak_mib": r[2]} if isinstance(r, tuple)
                    else {"status": "OOM" if r is None else r})} for h, v, r, _ in rows]}, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
