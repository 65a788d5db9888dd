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


def test_host_native_profile_summarizes_a_raw_file(load_script, tmp_path):
    # benchmarks/host_native_profile.py: samples go to their innermost Python frame and the library of their leaf
    # frame; the us per step follow the rate and the steps sampled; without a py-spy binary it skips (exit 0).
    mod = load_script("benchmarks/host_native_profile.py")
    raw = [
        "<module> (run.py:3);step (/x/dynamicemb/_batched_kernels.py:290);0x7f01 (/site/dynamicemb/_C.so);"
        "cuLaunchKernel (/usr/lib/libcuda.so.1) 30\n",
        "<module> (run.py:3);step (/x/dynamicemb/_batched_kernels.py:290);0x7f02 (/site/dynamicemb/_C.so) 10\n",
        "<module> (run.py:3);fwd (/x/dynamicemb/_batched.py:700) 5\n",
        "malloc (/lib/x86_64-linux-gnu/libc.so.6) 5\n",
        "garbage line\n",
    ]
    total, rows = mod.summarize(raw, top=10)
    assert total == 50
    by_site = {site: (n, libs) for site, n, libs in rows}
    assert by_site["step (_batched_kernels.py:290)"] == (40, {"libcuda.so": 30, "_C.so": 10})
    assert by_site["fwd (_batched.py:700)"] == (5, {"python": 5})
    assert by_site["(no Python frame)"] == (5, {"libc.so": 5})
    assert rows[0][0] == "step (_batched_kernels.py:290)"  # the most samples first
    md = mod.table(total, rows, us_per_sample_step=2.0)
    assert "| `step (_batched_kernels.py:290)` | 80.0 | 80.0 | libcuda.so 75, _C.so 25 |" in md
    f = tmp_path / "raw.txt"
    f.write_text("".join(raw))
    assert mod.main(["--summarize", str(f)]) == 0
    assert mod.main(["--quick", "--case", "cpu"]) == 0  # no --py-spy: skipped
    assert mod.main(["--case", "cpu", "--py-spy", str(tmp_path / "missing")]) == 2
