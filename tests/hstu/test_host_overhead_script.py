"""benchmarks/host_overhead.py on CPU: it skips cleanly without a GPU, its case list and its table."""

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("benchmarks/host_overhead.py")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_skips_without_gpu(bench, capsys):
    assert bench.main(["--quick"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_cases_cover_the_issue_rows(bench):
    names = {(c.name, c.checks) for c in bench.CASES}
    for checks in ("default", "check_values=True"):
        for name in ("hstu fwd B1 S256 H4 D128", "hstu fwd B8 S512 H4 D128", "hstu fwd+bwd B1 S256 H4 D128",
                     "hstu fwd+bwd B8 S512 H4 D128", "hstu fwd+bwd B16 S1K H4 D128"):
            assert (name, checks) in names
    assert all(callable(c.build) for c in bench.CASES)


def test_table_marks_targets(bench):
    fwd = bench.Case("hstu fwd B1 S256 H4 D128", "fwd", "default", lambda d: None)
    both = bench.Case("hstu fwd+bwd B1 S256 H4 D128", "fwd+bwd", "check_values=True", lambda d: None)
    table = bench.markdown_table([(fwd, 25.0, 8.0), (both, 300.0, 40.0)])
    assert "| case | checks | eager us/call | graph us/call | overhead us/call | target us/call |" in table
    assert "| hstu fwd B1 S256 H4 D128 | default | 25.0 | 8.0 | 17.0 (met) | 20 |" in table
    assert "| hstu fwd+bwd B1 S256 H4 D128 | check_values=True | 300.0 | 40.0 | 260.0 | - |" in table


def test_cpu_step_builders_run(bench):
    # The HSTU builders on CPU tensors (the CPU reference): the steps run and return what they should.
    for case in bench.CASES:
        if case.checks == "default" and "B1 S256" in case.name:
            step = case.build(torch.device("cpu"))
            res = step()
            assert (res.shape if case.kind == "fwd" else res[0].shape) == (256, 4, 128)
