"""HSTU ranking model benchmark: train-step time, tokens/s and peak memory of examples/hstu_ranking's model, ours vs
the same model with PyTorch attention (padded dense, `hstu_attn.dense_hstu_attention`) and/or torch.nn.Embedding
tables (sparse gradients + SparseAdam, ids hashed into the same number of rows).

One sweep (shared defaults: B=128, dim 256 = 4 heads x 64, 4 layers, 16 candidates, bf16 autocast of the dense
tower, fp32 tables): the history length (max_history in {128, 512, 1024}; --quick: {128, 512}); the lengths of a
batch are Zipf-distributed below it (synthetic users, as in the example). Four variants per row:
    ours        hstu_attn kernels + dynamicemb tables
    torch-attn  dense PyTorch attention + dynamicemb tables
    torch-emb   hstu_attn kernels + torch.nn.Embedding tables
    torch-both  dense PyTorch attention + torch.nn.Embedding tables
Step = forward + backward + optimizer steps (the dynamic tables update inside the backward); times are CUDA events
around whole steps after warm-up, median of --reps steps cycling through 8 pre-built batches on the device; tokens
= user + history + candidate tokens of the batch; peak = torch.cuda.max_memory_allocated over the timed steps.
Without a GPU the script prints a line and exits 0 (--smoke runs a tiny CPU case for the tests).

Usage:
    python benchmarks/hstu_model.py [--quick] [--results benchmarks/RESULTS.md] [--plot hstu_model.png]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "hstu_ranking"))

from data import Batcher, synthetic_sequences, to_device  # noqa: E402
from model import ModelConfig, RankingModel  # noqa: E402
from train import _losses, make_optimizer  # noqa: E402

VARIANTS = {  # name: (attention, embeddings)
    "ours": ("kernel", "dynamicemb"),
    "torch-attn": ("torch", "dynamicemb"),
    "torch-emb": ("kernel", "torch"),
    "torch-both": ("torch", "torch"),
}


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def measure(variant, max_history, args, device):
    """(ms per step, tokens per s, peak MiB) of one variant at one history length; None if it ran out of memory."""
    attn, emb = VARIANTS[variant]
    torch.manual_seed(0)
    cfg = ModelConfig(dim=args.heads * args.head_dim, heads=args.heads, head_dim=args.head_dim, layers=args.layers,
                      dropout=0.0, max_seqlen=1 + max_history + args.candidates, embedding=emb, attn_impl=attn,
                      user_capacity=1 << 16, item_capacity=1 << 18, max_distance=max_history + args.candidates + 2)
    seqs = synthetic_sequences(args.users, args.items, min_len=2 * args.candidates + 2,
                               max_len=max_history + 2 * args.candidates + 1, seed=1)
    batcher = Batcher(seqs, args.batch_size, max_history, args.candidates, seed=1)
    batches = [to_device(batcher.train_batch(s), device) for s in range(8)]
    model = RankingModel(cfg, device)
    opt = make_optimizer(model, 1e-3)
    amp = device.type == "cuda"

    def step(b):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            pred = model(b).float()
        loss, _, _ = _losses(pred, b, 0.5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    try:
        for i in range(args.warmup):
            step(batches[i % len(batches)])
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        times, tokens = [], []
        for i in range(args.reps):
            b = batches[i % len(batches)]
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step(b)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                step(b)
                times.append((time.perf_counter() - t0) * 1e3)
            tokens.append(b["user"].shape[0] + b["hist_items"].shape[0] + b["cand_items"].shape[0])
    except torch.OutOfMemoryError:
        return None
    finally:
        del model, opt, batches
        if device.type == "cuda":
            torch.cuda.empty_cache()
    ms = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    return ms, statistics.mean(tokens) / (ms * 1e-3), peak


def header(device, args) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    cmd = "python benchmarks/hstu_model.py " + " ".join(sys.argv[1:])
    return "\n".join([
        f"## hstu_model: {gpu}, dense tower {'bf16 autocast (fp32 weights)' if device.type == 'cuda' else 'fp32'}, "
        "tables fp32, "
        f"{datetime.date.today().isoformat()}",
        "",
        f"- model: B={args.batch_size}, {args.layers} layers, {args.heads} heads x {args.head_dim}, "
        f"{args.candidates} candidates; torch {torch.__version__}; commit {_git_commit()}",
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
        if res is None:
            lines.append(f"| {hist} | {variant} | {attn} | {emb} | OOM | | | |")
            continue
        ms, tps, peak = res
        sp = f"{ms / ours[0]:.2f}x" if ours is not None else ""
        lines.append(f"| {hist} | {variant} | {attn} | {emb} | {ms:.2f} | {tps:,.0f} | {peak:,.0f} | {sp} |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not importable: no plot written to {path}")
        return
    hists = sorted({r[0] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(VARIANTS)
    for k, variant in enumerate(VARIANTS):
        res = {h: r for h, v, r, _ in rows if v == variant}
        xs = [i + (k - (len(VARIANTS) - 1) / 2) * width for i in range(len(hists))]
        axes[0].bar(xs, [res[h][0] if res.get(h) else 0 for h in hists], width, label=variant)
        axes[1].bar(xs, [res[h][2] if res.get(h) else 0 for h in hists], width, label=variant)
    for ax, label in zip(axes, ("train step (ms)", "peak memory (MiB)")):
        ax.set_xticks(range(len(hists)))
        ax.set_xticklabels([f"history {h}" for h in hists])
        ax.set_ylabel(label)
    axes[0].legend()
    fig.suptitle("HSTU ranking model: hstu_attn + dynamicemb vs PyTorch attention / nn.Embedding")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="history lengths 128 and 512, fewer reps")
    p.add_argument("--smoke", action="store_true", help="a tiny case that also runs on CPU (tests)")
    p.add_argument("--histories", type=int, nargs="+", help="the history lengths of the sweep")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument("--users", type=int, default=4096)
    p.add_argument("--items", type=int, default=100_000)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--results", help="append the markdown table to this file (e.g. benchmarks/RESULTS.md)")
    p.add_argument("--plot", help="write a PNG plot here (needs matplotlib)")
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
    rows = []
    for hist in args.histories:
        ours = None
        for variant in args.variants:
            res = measure(variant, hist, args, device)
            if variant == "ours":
                ours = res
            rows.append((hist, variant, res, ours))
            print(f"history {hist} {variant}: {res}", file=sys.stderr, flush=True)
    text = header(device, args) + table(rows) + "\n"
    print(text)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + text)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
