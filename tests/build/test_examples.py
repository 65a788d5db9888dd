"""The runnable examples run to the end against the built wheels (so they cannot rot): CPU here, GPU where one is."""

import os
import subprocess
import sys

import pytest

import dynamicemb
import hstu_attn

EXAMPLES = ["examples/simple_usage.py", "examples/embedding_beyond_hbm.py"]


@pytest.mark.parametrize("path", EXAMPLES)
def test_example_runs(path, tmp_path):
    # The wheels under test first on the path; run from a temp dir so no source checkout shadows them.
    site = {os.path.dirname(os.path.dirname(os.path.abspath(m.__file__))) for m in (dynamicemb, hstu_attn)}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sorted(site) + [os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, os.path.abspath(path)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"{path} failed:\n{r.stdout}\n{r.stderr}"
    out = r.stdout
    if path.endswith("embedding_beyond_hbm.py"):  # caching tables train exactly as all-HBM ones
        assert "uva store (host memory) on" in out and "bit-identical to all-HBM: True" in out, out
        assert "hybrid (rows beyond the budget in host memory) on" in out, out
        if "rocksdict is not installed" not in out:  # the disk store, and the same reopened half-way
            assert "disk store (RocksDB) on" in out and "closed and reopened half-way on" in out, out
        assert "bit-identical to all-HBM: False" not in out, out
        return
    assert "max |kernel - reference|" in out and "dynamicemb on" in out
    # The TorchRec part runs where torchrec is installed (the project venv pins it) and must agree with itself.
    if "skipping the TorchRec-shaped example" not in out:
        assert "dump/load round trips give the same outputs: True" in out, out
