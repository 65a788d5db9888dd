"""benchmarks/host_python_embedding.py on the CPU: the kernel path's Python runs with both ops stubbed, times a
positive figure, profiles, and gives the real ops back afterwards."""

import torch


def test_host_python_script_runs_and_restores_the_ops(load_script):
    mod = load_script("benchmarks/host_python_embedding.py")
    real = torch.ops.dynamicemb.lookup_step
    for opt in ("sgd", "adam"):
        us, rows = mod.main(["--quick", "--opt", opt, "--samples", "50", "--dim", "8", "--profile"])
        assert us > 0
        names = " ".join(r[3] for r in rows)
        assert "_forward_kernels" in names and "_backward_kernels" in names  # the kernel path ran
    assert torch.ops.dynamicemb.lookup_step is real
