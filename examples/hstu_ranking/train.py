"""Generative ranking with HSTU (hstu_attn) over dynamic embedding tables (dynamicemb): train, evaluate,
checkpoint / resume, and score new candidates against cached histories.

Each sample is one user's history (items + actions, Zipf-popular, unbounded int64 ids in dynamic tables that evict
by LRU when full) followed by candidate items; one HSTU forward over the jagged batch scores all candidates
(the candidates are the mask's targets), and two heads predict click (rating >= 4; BCE) and rating (MSE).

Run (CPU, tiny, about a minute):
    python examples/hstu_ranking/train.py --device cpu --steps 200
GPU (bf16 attention kernels; add --compile to compile the dense tower):
    python examples/hstu_ranking/train.py --device cuda --steps 2000 --batch-size 256 --dim 128 --heads 4 \\
        --head-dim 64 --layers 4 --max-history 200
FP8 (e4m3) attention, per-block descale factors (no relative bias: FP8 attention computes no bias gradient;
benchmarks/hstu_fp8_training.py compares the loss curve with bf16's):
    python examples/hstu_ranking/train.py --device cuda --amp --attention-fp8 block --max-distance 0 --head-dim 64
MovieLens (no download here: point to a ratings.dat / ratings.csv you have):
    python examples/hstu_ranking/train.py --data ml-1m/ratings.dat --steps 2000
Checkpoints: --ckpt-dir DIR writes DIR/step_N/ (dynamic tables as a dynamicemb dump + dense.pt with the dense
weights, optimizer and RNG state) every --ckpt-every steps and at the end; --resume DIR continues from the latest
one (the same batches, the same losses). --infer-demo checks that scoring candidates against cached histories
(delta-q attention: queries = candidates, keys = history + candidates) matches the full forward.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run from anywhere: sibling modules

from data import Batcher, load_movielens, synthetic_sequences, to_device  # noqa: E402
from metrics import auc, normalized_entropy  # noqa: E402
from model import ModelConfig, RankingModel  # noqa: E402


def _progress(total, initial, disable):
    """tqdm when installed (tools/python/requirements.txt pins it), else a plain line every 10%."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, disable=disable, dynamic_ncols=True)
    except ImportError:
        class Plain:
            def __init__(self):
                self.n, self.post = initial, ""

            def update(self, k):
                self.n += k
                if not disable and (self.n % max(total // 10, 1) == 0 or self.n == total):
                    print(f"step {self.n}/{total} {self.post}", flush=True)

            def set_postfix_str(self, s):
                self.post = s

            def close(self):
                pass

        return Plain()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--data", default="synthetic",
                   help="'synthetic' (Zipf sequences with a planted signal) or a MovieLens ratings.dat / ratings.csv "
                        "(or a directory holding one)")
    g.add_argument("--users", type=int, default=512, help="synthetic: number of users")
    g.add_argument("--items", type=int, default=2048, help="synthetic: number of items")
    g.add_argument("--max-history", type=int, default=32, help="history interactions kept per sample (latest)")
    g.add_argument("--candidates", type=int, default=4, help="candidates ranked per sample")
    g = p.add_argument_group("model")
    for f in dataclasses.fields(ModelConfig):
        g.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                       help=f"(default {f.default})")
    g = p.add_argument_group("training")
    g.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    g.add_argument("--steps", type=int, default=200, help="total training steps")
    g.add_argument("--batch-size", type=int, default=32)
    g.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate of the dense weights")
    g.add_argument("--rating-weight", type=float, default=0.5, help="weight of the rating (MSE) loss")
    g.add_argument("--seed", type=int, default=0, help="seed of the dense weights' init, dropout and (by default) data")
    g.add_argument("--data-seed", type=int, default=-1,
                   help="seed of the synthetic data and the batch sampling (-1: --seed); fixed data with another "
                        "--seed measures the seed-to-seed noise of a run")
    g.add_argument("--eval-every", type=int, default=100, help="evaluate every N steps (0: only at the end)")
    g.add_argument("--eval-batches", type=int, default=8, help="batches per evaluation")
    g.add_argument("--amp", action="store_true", help="bfloat16 autocast of the dense tower (GPU)")
    g.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    g.add_argument("--compile", action="store_true", help="torch.compile the dense tower (pays on GPU)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("checkpoints and inference")
    g.add_argument("--ckpt-dir", help="write checkpoints DIR/step_N/ here")
    g.add_argument("--ckpt-every", type=int, default=0, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--resume", help="resume from the latest checkpoint in this directory")
    g.add_argument("--infer-demo", action="store_true",
                   help="after training, score eval candidates against cached histories and compare")
    g.add_argument("--json", help="write a JSON summary (losses, evals) here")
    return p


def _device(name):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class _Optimizers:
    """Dense Adam, plus SparseAdam for torch.nn.Embedding baseline tables (the dynamic tables update themselves in
    the backward); one state_dict for both."""

    def __init__(self, opts):
        self.opts = opts

    def zero_grad(self, set_to_none=True):
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)

    def step(self):
        for o in self.opts:
            o.step()

    def state_dict(self):
        return [o.state_dict() for o in self.opts]

    def load_state_dict(self, states):
        for o, st in zip(self.opts, states):
            o.load_state_dict(st)


def make_optimizer(model, lr):
    opts = [torch.optim.Adam(model.dense.parameters(), lr=lr)]
    if model.cfg.embedding == "torch":
        opts.append(torch.optim.SparseAdam(list(model.emb.parameters()), lr=model.cfg.emb_lr))
    return _Optimizers(opts)


def _losses(pred, b, rating_weight):
    click = torch.nn.functional.binary_cross_entropy_with_logits(pred[:, 0], b["click"])
    rating = torch.nn.functional.mse_loss(pred[:, 1], b["rating"])
    return click + rating_weight * rating, click, rating


def evaluate(model, batcher, device, max_batches):
    model.eval()
    logits, labels, sq = [], [], []
    with torch.no_grad():
        for b in batcher.eval_batches(max_batches):
            b = to_device(b, device)
            pred = model(b).float()
            logits.append(pred[:, 0])
            labels.append(b["click"])
            sq.append((pred[:, 1] - b["rating"]).square())
    model.train()
    x, y = torch.cat(logits), torch.cat(labels)
    return {"auc": auc(x, y), "ne": normalized_entropy(x, y), "rating_rmse": float(torch.cat(sq).mean().sqrt())}


def save_checkpoint(ckpt_dir, step, model, opt):
    path = os.path.join(ckpt_dir, f"step_{step}")
    os.makedirs(path, exist_ok=True)
    if hasattr(model.emb, "dump"):
        model.emb.dump(os.path.join(path, "embeddings"))  # keys, rows + Adam state, scores, op clock, step
        emb_state = None
    else:
        emb_state = model.emb.state_dict()
    state = {"step": step, "dense": model.dense.state_dict(), "opt": opt.state_dict(), "emb": emb_state,
             "rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
    torch.save(state, os.path.join(path, "dense.pt.tmp"))
    os.replace(os.path.join(path, "dense.pt.tmp"), os.path.join(path, "dense.pt"))  # complete checkpoints only
    return path


def load_checkpoint(ckpt_dir, model, opt):
    done = [d for d in glob.glob(os.path.join(ckpt_dir, "step_*")) if os.path.exists(os.path.join(d, "dense.pt"))]
    if not done:
        raise FileNotFoundError(f"--resume: expected a directory with step_N/dense.pt checkpoints, got {ckpt_dir}")
    path = max(done, key=lambda d: int(d.rsplit("_", 1)[1]))
    state = torch.load(os.path.join(path, "dense.pt"), weights_only=False)
    model.dense.load_state_dict(state["dense"])
    opt.load_state_dict(state["opt"])
    if state["emb"] is None:
        model.emb.load(os.path.join(path, "embeddings"))
    else:
        model.emb.load_state_dict(state["emb"])
    torch.set_rng_state(state["rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return state["step"], path


def infer_demo(model, batcher, device):
    """Scores eval candidates twice: full forward vs cached history + delta-q; returns the max difference."""
    model.eval()
    b = to_device(next(batcher.eval_batches(1)), device)
    with torch.no_grad():
        full = model(b).float()
        cache = model.encode_history(b)
        cached = model.score_cached(cache, b).float()
    model.train()
    return float((full - cached).abs().max())


def main(argv=None):
    args = build_parser().parse_args(argv)
    device = _device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = ModelConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ModelConfig)})
    cfg.max_seqlen = max(cfg.max_seqlen, 1 + args.max_history + args.candidates)
    data_seed = args.seed if args.data_seed < 0 else args.data_seed
    if args.data == "synthetic":
        seqs = synthetic_sequences(args.users, args.items, seed=data_seed,
                                   max_len=max(64, args.max_history + 2 * args.candidates + 1))
    else:
        seqs = load_movielens(args.data)
    batcher = Batcher(seqs, args.batch_size, args.max_history, args.candidates, seed=data_seed)
    model = RankingModel(cfg, device)
    opt = make_optimizer(model, args.lr)
    forward = model
    if args.compile:
        dense = torch.compile(model.dense, dynamic=True)  # the tables stay eager (their ops are not traced)
        forward = lambda b: model(b, dense=dense)  # noqa: E731
    start = 0
    if args.resume:
        start, path = load_checkpoint(args.resume, model, opt)
        print(f"resumed from {path} (step {start})")
    summary = {"device": str(device), "losses": [], "step_s": [], "evals": [], "start_step": start}
    bar = _progress(args.steps, start, args.no_progress)
    t0, tokens = time.perf_counter(), 0
    model.train()
    for step in range(start, args.steps):
        t_step = time.perf_counter()
        b = to_device(batcher.train_batch(step), device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
            pred = forward(b).float()
        loss, click, rating = _losses(pred, b, args.rating_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # also applies the dynamic tables' fused Adam to the rows of this batch
        opt.step()
        tokens += int(b["user"].shape[0] + b["hist_items"].shape[0] + b["cand_items"].shape[0])
        summary["losses"].append(loss.item())  # (reads the loss: the step has finished on the device)
        summary["step_s"].append(time.perf_counter() - t_step)  # batch building + step, host wall time
        bar.update(1)
        bar.set_postfix_str(f"loss {loss.item():.4f} click {click.item():.4f} rating {rating.item():.4f}")
        done = step + 1
        if args.eval_every and done % args.eval_every == 0 and done < args.steps:
            ev = evaluate(model, batcher, device, args.eval_batches)
            summary["evals"].append({"step": done, **ev})
            bar.set_postfix_str(f"loss {loss.item():.4f} eval auc {ev['auc']:.3f} ne {ev['ne']:.3f}")
        if args.ckpt_dir and args.ckpt_every and done % args.ckpt_every == 0 and done < args.steps:
            save_checkpoint(args.ckpt_dir, done, model, opt)
    bar.close()
    elapsed = time.perf_counter() - t0
    if args.ckpt_dir:  # before the eval: a resumed run then continues from exactly where this one trained to
        summary["checkpoint"] = save_checkpoint(args.ckpt_dir, args.steps, model, opt)
    ev = evaluate(model, batcher, device, args.eval_batches)
    summary["evals"].append({"step": args.steps, **ev})
    summary["final"] = ev
    summary["tokens_per_s"] = tokens / max(elapsed, 1e-9)
    if hasattr(model.emb, "sizes"):
        summary["table_sizes"] = dict(zip(model.emb.table_names, model.emb.sizes()))
    if args.infer_demo:
        summary["infer_max_diff"] = infer_demo(model, batcher, device)
    print(f"final eval: auc {ev['auc']:.4f}  ne {ev['ne']:.4f}  rating rmse {ev['rating_rmse']:.4f}  "
          f"({args.steps - start} steps in {elapsed:.1f} s, {summary['tokens_per_s']:.0f} tokens/s on {device})")
    if "table_sizes" in summary:
        print(f"dynamic table sizes: {summary['table_sizes']}")
    if args.infer_demo:
        print(f"cached-history scoring (delta-q) vs full forward: max |diff| = {summary['infer_max_diff']:.3e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()
