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


def test_host_python_script_prefetch_modes(load_script):
    # --storage uva --prefetch: the device prefetch's Python with its CUDA calls stubbed; the bound and adaptive
    # modes go through the module's bound job (the adaptive one queues 1 job in 16 on the stub's warm set); the
    # stubs are given back afterwards
    mod = load_script("benchmarks/host_python_embedding.py")
    from dynamicemb import _prefetch

    real_stage, real_event, real_get = torch.ops.dynamicemb.cache_stage, torch.cuda.Event, _prefetch._GET_STREAM
    for mode in ("full", "bound", "adaptive"):
        us, rows = mod.main(["--quick", "--storage", "uva", "--prefetch", mode, "--samples", "50", "--dim", "8",
                             "--profile"])
        assert us > 0
        names = " ".join(r[3] for r in rows)
        assert ("queue_device" in names) == (mode == "full"), (mode, names)
        assert ("(queue)" in names) == (mode != "full"), (mode, names)
    assert torch.ops.dynamicemb.cache_stage is real_stage and torch.cuda.Event is real_event
    assert _prefetch._GET_STREAM is real_get


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
