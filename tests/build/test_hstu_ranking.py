"""examples/hstu_ranking: the generative ranking example (dynamicemb tables + HSTU stack) against the built wheels.

CPU: it learns the planted signal of the synthetic data (AUC >= 0.70 within 200 steps), a resumed run repeats the
uninterrupted run's losses exactly, scoring against cached histories (delta-q) equals the full forward, the
MovieLens loader reads both file formats, and --help documents the command. GPU (skipped without one): a few steps,
and the dense train step (forward, backward, Adam) captured in one CUDA graph equals the eager step.
"""

import copy
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import dynamicemb
import hstu_attn

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "hstu_ranking")
TRAIN = os.path.join(EXAMPLE, "train.py")
pytestmark = pytest.mark.skipif(not os.path.exists(TRAIN), reason="examples/hstu_ranking is not in this tree")


@pytest.fixture(scope="module")
def train():
    sys.path.insert(0, EXAMPLE)
    import train as mod  # noqa: E402

    yield mod
    sys.path.remove(EXAMPLE)


def run(train, *args, device="cpu"):
    # one CPU thread: the tiny model is latency-bound, and other builds share the cores
    return train.main(list(args) + ["--device", device, "--no-progress", "--threads", "1"])


def test_help_documents_the_command(tmp_path):
    site = {os.path.dirname(os.path.dirname(os.path.abspath(m.__file__))) for m in (dynamicemb, hstu_attn)}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sorted(site) + [os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, TRAIN, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    for flag in ("--data", "--device", "--steps", "--ckpt-dir", "--resume", "--infer-demo", "--compile",
                 "--mask-convention", "--max-attn-len", "--embedding"):
        assert flag in r.stdout, flag
    assert "python examples/hstu_ranking/train.py --device cpu" in r.stdout


def test_learns_the_planted_signal_and_cached_scoring_matches(train):
    s = run(train, "--steps", "150", "--batch-size", "32", "--eval-every", "0", "--eval-batches", "8",
            "--infer-demo")
    assert all(math.isfinite(x) for x in s["losses"])
    assert s["final"]["auc"] >= 0.70, s["final"]
    assert s["final"]["ne"] < 1.0, s["final"]
    assert s["infer_max_diff"] < 1e-4, s["infer_max_diff"]
    assert s["table_sizes"]["user"] > 0 and s["table_sizes"]["item"] > 0


def test_resume_repeats_the_losses(train, tmp_path):
    common = ["--batch-size", "8", "--eval-every", "0", "--eval-batches", "1", "--dropout", "0.2"]
    whole = run(train, "--steps", "16", *common)
    first = run(train, "--steps", "8", "--ckpt-dir", str(tmp_path / "ckpt"), *common)
    assert os.path.exists(tmp_path / "ckpt" / "step_8" / "embeddings" / "meta.json")
    rest = run(train, "--steps", "16", "--resume", str(tmp_path / "ckpt"), *common)
    assert first["losses"] == whole["losses"][:8]
    assert rest["start_step"] == 8 and rest["losses"] == whole["losses"][8:]


def write_movielens(tmp_path, gen):
    rows = []
    for u in range(1, 31):
        for n in range(int(gen.integers(12, 25))):
            rows.append((u, int(gen.integers(1, 200)), float(gen.choice([1, 2, 2.5, 3, 3.5, 4, 4.5, 5])),
                         int(gen.integers(10**9, 10**9 + 10**7))))
    order = gen.permutation(len(rows))  # the loader sorts by user and time
    rows = [rows[i] for i in order]
    dat = tmp_path / "ratings.dat"
    dat.write_text("".join(f"{u}::{i}::{int(r) if r.is_integer() else r}::{t}\n" for u, i, r, t in rows))
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    (csv_dir / "ratings.csv").write_text("userId,movieId,rating,timestamp\n"
                                         + "".join(f"{u},{i},{r},{t}\n" for u, i, r, t in rows))
    return rows, dat, csv_dir


def test_movielens_loader_reads_both_formats_and_trains(train, tmp_path):
    import data

    rows, dat, csv_dir = write_movielens(tmp_path, np.random.default_rng(7))
    a, b = data.load_movielens(str(dat)), data.load_movielens(str(csv_dir))
    assert [s.user for s in a] == list(range(1, 31)) and len(a) == len(b)
    for sa, sb in zip(a, b):
        for f in ("items", "ratings", "timestamps"):
            assert np.array_equal(getattr(sa, f), getattr(sb, f))
        want = sorted((t, i, r) for u, i, r, t in rows if u == sa.user)
        assert np.array_equal(sa.timestamps, [t for t, _, _ in want])
        assert sorted(zip(sa.items.tolist(), sa.ratings.tolist())) == sorted(
            (i, int(math.ceil(r))) for _, i, r in want)
    with pytest.raises(ValueError, match="expected user::item::rating::timestamp"):
        bad = tmp_path / "bad.dat"
        bad.write_text("1::2::3\n")
        data.load_movielens(str(bad))
    s = run(train, "--data", str(dat), "--steps", "6", "--batch-size", "8", "--max-history", "16",
            "--eval-every", "3", "--eval-batches", "2")
    assert len(s["losses"]) == 6 and all(math.isfinite(x) for x in s["losses"])
    assert len(s["evals"]) == 2


@pytest.mark.gpu
def test_gpu_run_a_few_steps(train, tmp_path):
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    s = run(train, "--steps", "20", "--batch-size", "64", "--head-dim", "32", "--eval-every", "10",
            "--infer-demo", "--ckpt-dir", str(tmp_path / "ckpt"), device="cuda")
    assert all(math.isfinite(x) for x in s["losses"])
    assert s["infer_max_diff"] < 5e-2, s["infer_max_diff"]
    rest = run(train, "--steps", "24", "--batch-size", "64", "--head-dim", "32", "--eval-every", "0",
               "--resume", str(tmp_path / "ckpt"), device="cuda")
    assert rest["start_step"] == 20 and len(rest["losses"]) == 4


def test_fp8_attention_trains_and_refuses_a_relative_bias(train):
    """--attention-fp8 (HSTULayer(attention_fp8=); on CPU the FP8 kernel's fp32 emulation) trains; cached scoring
    matches the full forward up to FP8's rounding (the quantization groups of the two passes differ); a relative
    bias (whose gradient FP8 attention does not compute) is refused before training."""
    s = run(train, "--steps", "40", "--batch-size", "16", "--eval-every", "0", "--eval-batches", "2",
            "--max-distance", "0", "--attention-fp8", "head", "--infer-demo")
    assert len(s["losses"]) == 40 and all(math.isfinite(x) for x in s["losses"])
    assert s["losses"][-1] < s["losses"][0]
    assert s["infer_max_diff"] < 0.1, s["infer_max_diff"]
    with pytest.raises(ValueError, match="max_distance: expected 0 with attention_fp8='block'"):
        run(train, "--steps", "1", "--attention-fp8", "block")


def test_fp8_training_benchmark_smoke(capsys, load_script):
    bench = load_script("benchmarks/hstu_fp8_training.py")
    torch.set_num_threads(1)
    assert bench.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "## hstu_fp8_training: CPU" in out and "| run | attention | seed | loss @1 |" in out
    for row in ("| bf16 seed 0 | fp32 (dense torch) | 0 |", "| fp8 seed 0 | FP8 e4m3 (block) | 0 |",
                "| bf16 seed 1 | fp32 (dense torch) | 1 |"):
        assert row in out
    assert "- noise: smoothed loss |fp8 seed 0 - bf16 seed 0| max" in out and "- verdict: FP8 " in out


@pytest.mark.gpu
def test_gpu_fp8_attention_a_few_steps(train):
    """FP8 attention on CUDA (the Hopper FP8 forward at head dim 64 where it runs): finite losses, and the first
    step's loss (same seed, same weights: only the attention's arithmetic differs) within 2 % of bf16's."""
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    common = ("--steps", "12", "--batch-size", "64", "--head-dim", "64", "--max-distance", "0", "--amp",
              "--eval-every", "0", "--eval-batches", "2")
    fp8 = run(train, *common, "--attention-fp8", "block", device="cuda")
    bf16 = run(train, *common, device="cuda")
    assert all(math.isfinite(x) for x in fp8["losses"])
    assert abs(fp8["losses"][0] - bf16["losses"][0]) <= 0.02 * bf16["losses"][0], (fp8["losses"][0],
                                                                                  bf16["losses"][0])


@pytest.mark.gpu
def test_gpu_dense_train_step_in_a_cuda_graph(train):
    """The model's dense train step (HSTU stack, heads, loss, backward incl. the embedding rows' gradients, Adam) in
    one CUDA graph: three replays give the losses and weights of three eager steps from the same state. The table
    lookups (dynamicemb inserts new ids: a host-visible count) stay eager, outside the graph."""
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    from data import Batcher, synthetic_sequences, to_device
    from model import ModelConfig, RankingModel

    dev = torch.device("cuda")
    torch.manual_seed(0)
    cfg = ModelConfig(dim=64, heads=2, head_dim=32, layers=2, dropout=0.0, max_seqlen=1 + 32 + 4)
    seqs = synthetic_sequences(64, 512, min_len=10, max_len=40, seed=1)
    b = to_device(Batcher(seqs, 16, 32, 4, seed=1).train_batch(0), dev)
    model = RankingModel(cfg, dev)
    rows = [r.detach().clone() for r in model._lookup(b)]
    off = [hstu_attn.lengths_to_offsets(b["hist_lengths"]), hstu_attn.lengths_to_offsets(b["cand_lengths"])]
    rest = (*off, b["max_hist"], b["max_cand"], model._user_ts(b), b["hist_ts"], b["cand_ts"])

    def step(dense, opt, leaves):
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            pred = dense(leaves[0], leaves[1] + leaves[2], leaves[3], *rest).float()
        loss = train._losses(pred, b, 0.5)[0]
        loss.backward()
        opt.step()
        return loss

    dense = model.dense
    opt = torch.optim.Adam(dense.parameters(), lr=1e-3, capturable=True)
    leaves = [r.clone().requires_grad_() for r in rows]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up outside the graph (allocations, lazy init, the ops' error block)
            opt.zero_grad(set_to_none=True)
            step(dense, opt, leaves)
    torch.cuda.current_stream().wait_stream(s)
    ref = copy.deepcopy(dense)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-3, capturable=True)
    ref_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # load_state_dict keeps same-device tensors shared
    start = [p.detach().clone() for p in dense.parameters()]

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    for leaf in leaves:
        leaf.grad = None
    with torch.cuda.graph(graph):
        static_loss = step(dense, opt, leaves)
    replayed = []
    for _ in range(3):
        graph.replay()
        replayed.append(static_loss.item())
    ref_leaves = [r.clone().requires_grad_() for r in rows]
    eager = []
    for _ in range(3):
        ref_opt.zero_grad(set_to_none=True)
        for leaf in ref_leaves:  # each replay writes the leaves' gradients of its own step (no accumulation)
            leaf.grad = None
        eager.append(step(ref, ref_opt, ref_leaves).item())
    torch.testing.assert_close(torch.tensor(replayed), torch.tensor(eager), rtol=2e-2, atol=1e-3)
    assert any(not torch.equal(p, p0) for p, p0 in zip(dense.parameters(), start)), "the replays changed no weight"
    for p, q in zip(dense.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-2)  # Adam moves each weight by <= ~lr per step
    for leaf, r in zip(leaves, ref_leaves):
        torch.testing.assert_close(leaf.grad, r.grad, rtol=5e-2, atol=1e-3)


def test_benchmark_smoke_prints_the_table(capsys, load_script):
    bench = load_script("benchmarks/hstu_model.py")
    torch.set_num_threads(1)
    assert bench.main(["--smoke", "--variants", "ours", "torch-both"]) == 0
    out = capsys.readouterr().out
    assert "## hstu_model: CPU" in out and "| max history | variant |" in out
    assert "| 8 | ours | kernel | dynamicemb |" in out and "| 8 | torch-both | torch | torch |" in out
    if not torch.cuda.is_available():
        assert bench.main([]) == 0
        assert "no CUDA device, skipping" in capsys.readouterr().out


def test_layer_profile_smoke_prints_the_parts_table(capsys, load_script):
    prof = load_script("benchmarks/hstu_layer_profile.py")
    torch.set_num_threads(1)
    assert prof.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| part | unfused eager | unfused graph | fused eager |" in out
    for part in ("| SiLU + split", "| LayerNorm(a) * u |", "| whole layer |"):
        assert part in out
    if not torch.cuda.is_available():
        assert prof.main([]) == 0
        assert "no CUDA device, skipping" in capsys.readouterr().out
