"""examples/distributed_embedding.py runs under torchrun with 2 CPU ranks (gloo) for a few steps, and
benchmarks/embedding_distributed.py --quick at world 1 and 2, against the built wheel (so neither can rot)."""

import os
import subprocess
import sys

import pytest

import dynamicemb


def _find(rel):
    # Bazel runs tests from the runfiles root (the scripts are data there); a source checkout has them two levels up
    return next((p for p in (rel, os.path.join(os.path.dirname(__file__), "..", "..", rel)) if os.path.exists(p)),
                rel)


EXAMPLE = _find("examples/distributed_embedding.py")
BENCH = _find("benchmarks/embedding_distributed.py")


def _run(args, tmp_path):
    site = os.path.dirname(os.path.dirname(os.path.abspath(dynamicemb.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, os.environ.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable] + args, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(not os.path.exists(EXAMPLE), reason=f"{EXAMPLE} not in the runfiles")
def test_example_two_ranks(tmp_path):
    r = _run(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", os.path.abspath(EXAMPLE),
              "--steps", "4", "--batch-size", "32", "--ids", "5000", "--print-every", "2"], tmp_path)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "step    0  loss" in r.stdout and "step time:" in r.stdout and "world 2, gloo" in r.stdout, r.stdout


@pytest.mark.skipif(not os.path.exists(BENCH), reason=f"{BENCH} not in the runfiles")
def test_benchmark_quick_two_worlds(tmp_path):
    res = tmp_path / "results.md"
    r = _run([os.path.abspath(BENCH), "--quick", "--worlds", "1,2", "--cases", "sum/adam,none/sgd/caching", "--qcomms",
              "fp32,bf16", "--warmup", "1", "--reps", "2", "--results", str(res), "--device", "cpu"], tmp_path)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    table = res.read_text()
    assert "weak scaling" in table and "| world | pooling | optimizer | storage | wire | train (ms) | a2a (ms) |" in table
    assert "| 1 | sum | adam | hbm | fp32 |" in table and "| 2 | sum | adam | hbm | bf16 |" in table, table
    assert "| 2 | none | sgd | caching | fp32 |" in table, table


@pytest.mark.skipif(not os.path.exists(EXAMPLE), reason=f"{EXAMPLE} not in the runfiles")
def test_example_help(tmp_path):
    r = _run([os.path.abspath(EXAMPLE), "--help"], tmp_path)
    assert r.returncode == 0 and "torchrun --nproc_per_node 2" in r.stdout and "--routing" in r.stdout, r.stdout
