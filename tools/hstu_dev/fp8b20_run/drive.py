"""fp8b20's device driver: one Python process for the benchmark and the GPU tests (the interpreter, torch and
hstu_attn loaded once). Usage: python3 -P tools/drive.py BENCH_ARGS... -- PYTEST_ARGS..."""
import os
import sys
import time

t0 = time.perf_counter()
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the carry's tree
argv = sys.argv[1:]
cut = argv.index("--")
bench_args, test_args = argv[:cut], argv[cut + 1:]


def stamp(what):
    print(f"[drive {time.perf_counter() - t0:.1f} s] {what}", file=sys.stderr, flush=True)


import torch  # noqa: E402
stamp("torch imported")
import hstu_attn  # noqa: E402,F401
stamp("hstu_attn imported")
torch.zeros(1, device="cuda")
stamp("CUDA context")
sys.path.insert(0, os.path.join(here, "benchmarks"))
import hstu_fp8_bwd  # noqa: E402
hstu_fp8_bwd.main(bench_args)
stamp("benchmark done")
torch.cuda.synchronize()
torch.cuda.empty_cache()
import pytest  # noqa: E402
os.chdir(here)
rc = pytest.main(test_args)
stamp(f"tests done (rc {rc})")
sys.exit(int(rc))
