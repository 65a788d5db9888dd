"""tools/ptxas_report parses a real build's nvcc --resource-usage logs (the probe fixture's)."""

import csv
import glob
import os
import re
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


# ptxas's wgmma performance diagnostics, as --resource-usage prints them (before the function's "Compiling entry").
_C7514 = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
          "wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage "
          "in the function '{}'\n")
_C7519 = ("ptxas info    : (C7519) warpgroup.arrive is injected in around line 11626 by compiler to allow use of "
          "registers in GMMA in function '{}'\n")


def _with_wgmma_diagnostics(text):
    """The real probe log with both diagnostics added where ptxas prints them: before the last compile of the first
    kernel (sm_90a when the build has it, else the one arch built). Returns (log, mangled name, that arch)."""
    entries = list(re.finditer(r"ptxas info    : Compiling entry function '([^']+)' for '(\w+)'", text))
    name = entries[0].group(1)
    last = [m for m in entries if m.group(1) == name][-1]
    diag = _C7514.format(name) + _C7519.format(name)
    return text[:last.start()] + diag + text[last.start():], name, last.group(2)


def test_wgmma_diagnostics_reported_and_gated(tmp_path):
    log = _one("**/probe_kernel.ptxas.txt")
    tool = _one("**/ptxas_report.py")
    text, mangled, arch = _with_wgmma_diagnostics(open(log).read())
    diag = tmp_path / "diag.ptxas.txt"
    diag.write_text(text)
    out_csv, out_md = tmp_path / "r.csv", tmp_path / "r.md"
    base = [sys.executable, tool, "--csv", str(out_csv), "--md", str(out_md)]

    # Reported (no gate): the kernel's row carries both, the other kernels none; the table lists them.
    ok = subprocess.run(base + [str(diag)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    rows = list(csv.DictReader(open(out_csv)))
    hit = [r for r in rows if r["wgmma"]]
    assert len(hit) == 1 and hit[0]["arch"] == arch, rows  # that compile only, not the kernel's other archs
    assert hit[0]["wgmma"].startswith("C7514 wgmma.mma_async instructions are serialized due to non wgmma")
    assert "; C7519 warpgroup.arrive is injected" in hit[0]["wgmma"]
    assert "Potential Performance Loss" not in hit[0]["wgmma"] and mangled not in hit[0]["wgmma"]
    assert all(r["wgmma"] == "" for r in rows if r is not hit[0])
    md = open(out_md).read()
    assert "| C7514 C7519 |" in md and "1 with wgmma diagnostics" in md and "wgmma diagnostics (ptxas):" in md

    # Gated: a matching glob fails the run and names the kernel and the codes; another glob, or the spill gate, not.
    bad = subprocess.run(base + ["--fail-on-wgmma", "*probe*", str(diag)], capture_output=True, text=True)
    assert bad.returncode == 1 and "wgmma: C7514" in bad.stderr and hit[0]["kernel"] in bad.stderr
    other = subprocess.run(base + ["--fail-on-wgmma", "nothing::*", "--fail-on-spill", "*probe*", str(diag)],
                           capture_output=True, text=True)
    assert other.returncode == 0, other.stderr
    # The real log (no diagnostics) passes the same gate.
    clean = subprocess.run(base + ["--fail-on-wgmma", "*probe*", log], capture_output=True, text=True)
    assert clean.returncode == 0 and "0 with wgmma diagnostics" in open(out_md).read()
