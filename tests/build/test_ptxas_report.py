"""tools/ptxas_report parses a real build's nvcc --resource-usage logs (the probe fixture's)."""

import csv
import glob
import os
import subprocess
import sys

import pytest


def _one(pattern):
    hits = glob.glob(pattern, recursive=True)
    assert hits, pattern
    return hits[0]


def test_report_rule_output():
    rows = list(csv.DictReader(open(_one("**/probe_ptxas.csv"))))
    kernels = {r["kernel"]: r for r in rows}
    scale = [r for k, r in kernels.items() if "probe_scale_kernel" in k]
    stack = [r for k, r in kernels.items() if "probe_stack_kernel" in k]
    assert scale and stack, sorted(kernels)
    assert all(r["arch"].startswith("sm_") for r in rows)
    assert all(int(r["registers"]) > 0 for r in rows)
    assert int(stack[0]["stack_bytes"]) >= 64 * 4, stack[0]  # the 64-float local array lives on the stack
    assert int(scale[0]["stack_bytes"]) == 0
    assert "probe::detail::probe_scale_kernel" in scale[0]["kernel"], "names are demangled"
    md = open(_one("**/probe_ptxas.md")).read()
    assert "| unit | kernel | arch | regs |" in md and "kernels," in md


def test_fail_on_spill(tmp_path):
    log = _one("**/probe_kernel.ptxas.txt")
    tool = _one("**/ptxas_report.py")
    text = open(log).read()
    # Turn the real log into one that reports a spill for the stack kernel, then ask the tool to refuse it.
    spilled = tmp_path / "spilled.ptxas.txt"
    spilled.write_text(text.replace("0 bytes spill stores", "16 bytes spill stores", 1))
    base = [sys.executable, tool, "--csv", str(tmp_path / "r.csv"), "--md", str(tmp_path / "r.md")]
    ok = subprocess.run(base + [log], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(base + ["--fail-on-spill", "probe::*", str(spilled)], capture_output=True, text=True)
    assert bad.returncode == 1 and "spills 16/" in bad.stderr
    other = subprocess.run(base + ["--fail-on-spill", "nothing::*", str(spilled)], capture_output=True, text=True)
    assert other.returncode == 0
