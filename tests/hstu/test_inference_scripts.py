"""examples/hstu_serving.py runs to the end and its cached scores equal the uncached model's; the inference
benchmark's table code runs (tiny shapes on the CPU; the GPU run is the benchmark itself)."""

import os
import re
import subprocess
import sys

import pytest
import torch

import hstu_attn

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "hstu_serving.py")


def test_serving_example_matches_uncached(tmp_path, load_script):
    # The wheel under test first on the path; run from a temp dir so no source checkout shadows it.
    site = os.path.dirname(os.path.dirname(os.path.abspath(hstu_attn.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, EXAMPLE, "--steps", "3", "--check-steps", "2", "--layers", "1", "--batch", "3"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    m = re.search(r"max \|cached - uncached\| over the first \d+ steps: (\S+)", r.stdout)
    assert m, r.stdout
    # float64 on the CPU: the same sums; bf16 on a GPU: rounding of the layers' activations.
    assert float(m.group(1)) <= (1e-9 if "on cpu" in r.stdout else 0.1), r.stdout
    with pytest.raises(SystemExit) as info:
        load_script("examples/hstu_serving.py").main(["--help"])
    assert info.value.code == 0


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("benchmarks/hstu_inference.py")


def test_benchmark_smoke_prints_the_table(bench, capsys, tmp_path):
    results = tmp_path / "results.md"
    assert bench.main(["--smoke", "--reps", "1", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "| case | row | ms | M tokens/s | goal ms | note |" in out
    for row in ("uncached stack", "cached step, eager", "gather, one layer", "bookkeeping, torch ops, eager"):
        assert f"| {row}" in out, out
    assert "| case | row |" in results.read_text()


def test_benchmark_shapes_and_pdl_flags(bench, capsys):
    # --shapes runs only the named shapes; --pdl runs them under kernel_options(pdl=True) and says so; a wrong name
    # is an argument error naming the choices.
    assert bench.main(["--smoke", "--reps", "1", "--shapes", "nvidia_b8", "--pdl"]) == 0
    out = capsys.readouterr().out
    assert "kernel_options(pdl=True)" in out and "| nvidia_b8 | cached step, eager" in out, out
    assert "| dlrmv3 |" not in out, out
    with pytest.raises(SystemExit) as info:
        bench.main(["--smoke", "--shapes", "nvidia_b3"])
    assert info.value.code == 2
    assert "--shapes: expected names among" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU path")
def test_benchmark_skips_without_gpu(bench, capsys):
    assert bench.main(["--quick"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_split_sweep_script_skips_and_reads_a_list(load_script, capsys):
    # benchmarks/hstu_paged_split.py: without a Hopper GPU it says so and exits 0; its step builder gives what the
    # reference computes, and it reads a work list's header and items back from a plan tensor.
    m = load_script("benchmarks/hstu_paged_split.py")
    if not torch.cuda.is_available():
        assert m.main(["--quick"]) == 0
        assert "skipped" in capsys.readouterr().out
    step, common, qkv = m.make_step(torch.device("cpu"), torch.float64, 2, 150, 24, 10, 2, 32, 64, seed=3)
    layout = hstu_attn.paged_kv_layout(step["page_offsets"], step["page_ids"], step["last_page_lens"],
                                       step["cu_seqlens_q"], 48, step["kv_cache"].shape[0], 64, common["max_seqlen_k"])
    got = hstu_attn.hstu_attn_paged_func(**qkv, **step, **common, check_values=False, layout=layout)
    want = hstu_attn.hstu_attn_paged_reference(**qkv, **step, **common)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    assert m.plan_list(layout) == {}  # (the CPU path keeps no plan)
    # A list of 3 items: a unit of 9 tiles split into chunks of 5 and 4, and an unsplit one of 2 tiles.
    words = [3, 0, 1, 0] + [0, 0, 0, 5, 0, 0, 2, 0] + [0, 0, 5, 9, 0, 1, 2, 0] + [1, 0, 0, 2, -1, 0, 1, 0]
    layout.kernel_plans[("key",)] = ((), torch.tensor(words + [7] * 8, dtype=torch.int32).view(torch.uint8))
    assert m.plan_list(layout) == dict(items=3, kind=0, together=1, max_tiles=5, min_tiles=2, split_items=2)


def test_b1_kernels_script_skips_without_a_gpu(load_script, capsys):
    # benchmarks/hstu_b1_kernels.py (the batch-1 step's small kernels, in the step's graph vs warm): it imports
    # the inference benchmark's step builder; without a GPU it says so and exits 0 (the GPU run is the script).
    if torch.cuda.is_available():
        pytest.skip("with a GPU the script itself is the run")
    m = load_script("benchmarks/hstu_b1_kernels.py")
    assert m.main() == 0
    assert "skipped" in capsys.readouterr().out
    assert [k for k, _ in m.KERNELS] == ["begin_step", "validation", "planner", "step plan (validation + planner)",
                                         "attention", "append"]
