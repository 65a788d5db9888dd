"""FP8 attention in training (issue 36): the example ranking model's loss curve with bf16 attention and with FP8
(e4m3) attention, against the seed-to-seed noise of bf16.

Three runs of examples/hstu_ranking/train.py on the same generated data (nothing downloaded; --data-seed fixes the
data and the batch order): bf16 attention at seed A, FP8 attention (`HSTULayer(attention_fp8=MODE)`) at seed A (the
same initial weights and dropout masks: the runs differ only by the attention's arithmetic), bf16 attention at seed B
(other initial weights and dropout masks: the noise of a run). "Within noise" is measured, not assumed:
|loss_fp8 - loss_bf16,A| against |loss_bf16,B - loss_bf16,A| on the smoothed curves (mean of the last --window steps
at each point), and the final eval AUC / NE likewise.

Dense tower in bf16 autocast (fp32 weights) on CUDA, fp32 on CPU; no relative attention bias in any run (FP8
attention computes no bias gradient; the example refuses the pair). Step time = host wall time of batch building +
forward + backward + optimizer (the loss is read every step), median after 10 steps.

Usage:
    python benchmarks/hstu_fp8_training.py [--steps 300] [--mode block] [--plot fp8_training.png]
        [--json runs.json] [--results benchmarks/RESULTS.md] [--smoke]
--smoke: a tiny CPU run (the tests; the CPU FP8 path is the fp32 emulation of the FP8 kernel).
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
from typing import Dict, List, Sequence

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "hstu_ranking"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_util import command, git_commit, parser, publish, pyplot, save_figure  # noqa: E402

import train  # noqa: E402  (examples/hstu_ranking/train.py)


def build_parser():
    p = parser(__doc__, "150 steps instead of --steps")
    p.add_argument("--smoke", action="store_true", help="tiny CPU run (tests)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--mode", default="block", help="FP8 descale mode: tensor, head, batch_head or block")
    p.add_argument("--seeds", type=int, nargs=2, default=[0, 1], metavar=("A", "B"),
                   help="model seeds: bf16 and FP8 at A, bf16 at B (the noise)")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--max-history", type=int, default=256)
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--users", type=int, default=4096)
    p.add_argument("--items", type=int, default=20000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--window", type=int, default=25, help="steps averaged for a smoothed loss point")
    p.add_argument("--plot", help="write the loss curves here (PNG)")
    p.add_argument("--json", help="write the runs (losses, step times, evals) here")
    p.add_argument("--results", help="append the table to this markdown file")
    return p


def run_args(args, seed: int, fp8: bool) -> List[str]:
    """train.py's command line of one run."""
    a = ["--device", args.device, "--steps", str(args.steps), "--seed", str(seed), "--data-seed", str(args.data_seed),
         "--batch-size", str(args.batch_size), "--max-history", str(args.max_history), "--candidates",
         str(args.candidates), "--dim", str(args.heads * args.head_dim), "--heads", str(args.heads), "--head-dim",
         str(args.head_dim), "--layers", str(args.layers), "--users", str(args.users), "--items", str(args.items),
         "--lr", str(args.lr), "--max-distance", "0", "--eval-every", "0", "--eval-batches", str(args.eval_batches),
         "--no-progress", "--item-capacity", str(1 << 16), "--user-capacity", str(1 << 13)]
    if torch.device(args.device).type == "cuda":
        a.append("--amp")
    else:
        a += ["--threads", "1"]
    if fp8:
        a += ["--attention-fp8", args.mode]
    return a


def smooth(losses: Sequence[float], window: int) -> List[float]:
    """Point i: the mean of losses[max(0, i - window + 1) .. i] (trailing window)."""
    out, acc = [], 0.0
    for i, x in enumerate(losses):
        acc += x
        if i >= window:
            acc -= losses[i - window]
        out.append(acc / min(i + 1, window))
    return out


def checkpoints(steps: int) -> List[int]:
    return sorted({max(1, round(steps * f)) for f in (0.1, 0.25, 0.5, 0.75, 1.0)})


def gaps(a: Sequence[float], b: Sequence[float], start: int) -> Dict[str, float]:
    """max and mean |a - b| over the points from `start` on."""
    d = [abs(x - y) for x, y in zip(a[start:], b[start:])]
    return {"max": max(d), "mean": sum(d) / len(d)}


def report(args, runs: Dict[str, dict]) -> str:
    names = list(runs)
    cks = checkpoints(args.steps)
    sm = {n: smooth(r["losses"], args.window) for n, r in runs.items()}
    dev = torch.device(args.device)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    dense = "bf16 autocast (fp32 weights)" if dev.type == "cuda" else "fp32"
    lines = [
        f"## hstu_fp8_training: {gpu}, dense tower {dense}, attention bf16 vs FP8 e4m3 ({args.mode} descale), "
        f"{datetime.date.today().isoformat()}",
        "",
        f"- model: examples/hstu_ranking, B={args.batch_size}, {args.layers} layers, {args.heads} heads x "
        f"{args.head_dim}, max history {args.max_history}, {args.candidates} candidates, no relative bias, "
        f"dynamicemb tables fp32; {args.steps} steps, Adam lr {args.lr}, generated data (seed {args.data_seed}, "
        f"{args.users} users, {args.items} items); torch {torch.__version__}; commit {git_commit()}",
        f"- units: loss = train loss (BCE click + 0.5 MSE rating), mean of the {args.window} steps ending at the "
        "step; AUC / NE on the eval candidates after the last step; step = ms of host wall time per step (median "
        "after 10)",
        f"- command: `{command()}`",
        "",
        "| run | attention | seed | " + " | ".join(f"loss @{c}" for c in cks) + " | eval AUC | eval NE | step ms |",
        "|---|---|---:|" + "---:|" * len(cks) + "---:|---:|---:|",
    ]
    for n in names:
        r = runs[n]
        ms = 1e3 * statistics.median(r["step_s"][10:] or r["step_s"])
        lines.append(f"| {n} | {r['attention']} | {r['seed']} | "
                     + " | ".join(f"{sm[n][c - 1]:.4f}" for c in cks)
                     + f" | {r['final']['auc']:.4f} | {r['final']['ne']:.4f} | {ms:.2f} |")
    a, f8, b = names
    start = min(args.window, args.steps) - 1  # the curves from the first full window on
    g_fp8, g_seed = gaps(sm[f8], sm[a], start), gaps(sm[b], sm[a], start)
    auc_fp8, auc_seed = (abs(runs[x]["final"]["auc"] - runs[a]["final"]["auc"]) for x in (f8, b))
    ne_fp8, ne_seed = (abs(runs[x]["final"]["ne"] - runs[a]["final"]["ne"]) for x in (f8, b))
    within = g_fp8["mean"] <= g_seed["mean"] and auc_fp8 <= max(auc_seed, 1e-3)
    lines += [
        "",
        f"- noise: smoothed loss |{f8} - {a}| max {g_fp8['max']:.4f} / mean {g_fp8['mean']:.4f} against the seeds' "
        f"|{b} - {a}| max {g_seed['max']:.4f} / mean {g_seed['mean']:.4f} (ratio of means "
        f"{g_fp8['mean'] / max(g_seed['mean'], 1e-12):.2f}); eval AUC |diff| {auc_fp8:.4f} vs {auc_seed:.4f}, NE "
        f"{ne_fp8:.4f} vs {ne_seed:.4f}",
        f"- verdict: FP8 {'within' if within else 'NOT within'} the seed-to-seed noise of bf16 (mean smoothed-loss "
        "gap and final AUC gap at most the seeds')",
    ]
    return "\n".join(lines)


def plot(args, runs: Dict[str, dict], path: str) -> None:
    plt = pyplot(path)
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (n, r), color in zip(runs.items(), ("tab:blue", "tab:red", "tab:gray")):
        steps = range(1, len(r["losses"]) + 1)
        ax.plot(steps, r["losses"], color=color, alpha=0.15, linewidth=0.8)
        ax.plot(steps, smooth(r["losses"], args.window), color=color, label=f"{n} (mean of {args.window})")
    dev = torch.device(args.device)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    ax.set_title(f"HSTU ranking example, train loss: bf16 vs FP8 ({args.mode}) attention, {gpu}")
    ax.set_xlabel("step")
    ax.set_ylabel("train loss")
    ax.legend()
    save_figure(fig, path)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args.device = "cpu"
        args.steps, args.batch_size, args.max_history, args.candidates = 12, 8, 20, 4
        args.heads, args.head_dim, args.layers, args.users, args.items = 2, 16, 1, 64, 256
        args.eval_batches, args.window = 2, 4
    elif args.quick:
        args.steps = 150
    a, b = args.seeds
    plan = [(f"bf16 seed {a}", a, False), (f"fp8 seed {a}", a, True), (f"bf16 seed {b}", b, False)]
    runs = {}
    for name, seed, fp8 in plan:
        print(f"== {name}", flush=True)
        s = train.main(run_args(args, seed, fp8))
        # the example's attention without FP8: bf16 kernels on CUDA, fp32 dense torch attention on CPU
        plain = "bf16" if torch.device(args.device).type == "cuda" else "fp32 (dense torch)"
        runs[name] = {"attention": f"FP8 e4m3 ({args.mode})" if fp8 else plain, "seed": seed,
                      "losses": s["losses"], "step_s": s["step_s"], "final": s["final"]}
    text = report(args, runs)
    publish(text, args.results)
    if args.plot:
        plot(args, runs, args.plot)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
