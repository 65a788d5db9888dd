"""benchmarks/fp8_accuracy.py on the CPU: the table, and the emulation's errors where they must be (the GPU rows are
the benchmark's own run)."""

import pytest
import torch


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/fp8_accuracy.py")


def test_smoke_run_prints_every_path(script, capsys):
    assert script.main(["--smoke", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "| L | D | path |" in out
    for name in ("fp32 emulation", "FP8 kernel", "dequantize + bf16 kernels"):
        assert f"| {name} |" in out


def test_errors_of_the_emulation(script):
    res = script.run_case(80, 32, 2, torch.device("cpu"), seed=3)
    arith_max, arith_rms, total_max, total_rms = res["fp32 emulation"]
    # fp32 arithmetic against fp64 on the same rounding points: float32 rounding only
    assert 0 < arith_max < 1e-5 and 0 < arith_rms < 1e-5
    # against the unquantized inputs: e4m3 inputs and P (3 mantissa bits) cost a few percent, not more
    assert 5e-3 < total_rms < 0.15 and 5e-3 < total_max < 0.15
    assert res["FP8 kernel"] is None and res["dequantize + bf16 kernels"] is None  # CUDA paths only


def test_errors_are_relative(script):
    ref = torch.randn(50, 2, 8, dtype=torch.float64)
    e_max, e_rms = script.errors(ref * (1 + 1e-3), ref)
    assert e_max == pytest.approx(1e-3, rel=1e-6) and e_rms == pytest.approx(1e-3, rel=1e-6)
