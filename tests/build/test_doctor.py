"""The environment doctor: its arch-coverage rule, and a full run from the installed wheels."""

import os
import subprocess
import sys

import pytest
import torch

from hstu_attn.doctor import covers


@pytest.mark.parametrize(
    "archs, cap, want",
    [
        (["sm_90a"], (9, 0), True),
        (["sm_90a"], (8, 0), False),
        (["sm_80"], (8, 6), True),     # SASS runs on a higher minor of its major
        (["sm_80"], (9, 0), True),     # compute_80 PTX, JIT-compiled
        (["sm_86"], (8, 0), False),
        (["sm_90a"], (10, 0), False),  # 'a' SASS runs on exactly its arch
        (["sm_80", "sm_90a"], (9, 0), True),
        ([], (9, 0), False),
    ],
)
def test_covers(archs, cap, want):
    assert covers(archs, cap) is want


def test_doctor_runs_and_passes():
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-P", "-m", "hstu_attn.doctor"], capture_output=True, text=True, env=env,
                         cwd=os.environ.get("TEST_TMPDIR", "/tmp"))
    assert out.returncode == 0, out.stdout + out.stderr
    table = out.stdout
    for check in ("| torch", "| import hstu_attn", "| import dynamicemb", "| dynamicemb tiny op",
                  "| hstu_attn compiled kernels"):
        assert check in table, (check, table)
    assert "FAIL" not in table
    if not torch.cuda.is_available():
        assert "| CUDA available" in table and "SKIP" in table
