"""examples/distributed_embedding.py runs under torchrun with 2 CPU ranks (gloo) for a few steps, against the
built wheel (so the example cannot rot)."""

import os
import subprocess
import sys

import pytest

import dynamicemb

# Bazel runs tests from the runfiles root (the example is data there); a source checkout has it two levels up
EXAMPLE = next((p for p in ("examples/distributed_embedding.py",
                            os.path.join(os.path.dirname(__file__), "..", "..", "examples", "distributed_embedding.py"))
                if os.path.exists(p)), "examples/distributed_embedding.py")


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


@pytest.mark.skipif(not os.path.exists(EXAMPLE), reason=f"{EXAMPLE} not in the runfiles")
def test_example_help(tmp_path):
    r = _run([os.path.abspath(EXAMPLE), "--help"], tmp_path)
    assert r.returncode == 0 and "torchrun --nproc_per_node 2" in r.stdout and "--routing" in r.stdout, r.stdout
