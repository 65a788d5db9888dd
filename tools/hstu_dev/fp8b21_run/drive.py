"""fp8b21's device driver (issue 36): one Python process (torch, hstu_attn and the CUDA context loaded once) for
the benchmark (benchmarks/hstu_fp8_bwd.py), a per-kernel breakdown of one FP8 backward path call per S (torch.profiler,
after two warm calls; option bits per --bd-bits), then the GPU tests.
Usage: python3 -P tools/drive.py BENCH_ARGS... [--bd S,S] [--bd-bits NAME,NAME] [--tests-first] -- PYTEST_ARGS...
(--tests-first: the GPU tests before the benchmark)"""
import os
import sys
import time

t0 = time.perf_counter()
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the carry's tree
argv = sys.argv[1:]
cut = argv.index("--")
bench_args, test_args = argv[:cut], argv[cut + 1:]


def pop(args, name, default):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return v
    return default


bd_seqs = [int(s) for s in pop(bench_args, "--bd", "").split(",") if s]
bd_bits = [s for s in pop(bench_args, "--bd-bits", "default").split(",") if s]
tests_first = "--tests-first" in bench_args
if tests_first:
    bench_args.remove("--tests-first")


def stamp(what):
    print(f"[drive {time.perf_counter() - t0:.1f} s] {what}", file=sys.stderr, flush=True)


import torch  # noqa: E402
stamp("torch imported")
import hstu_attn  # noqa: E402,F401
from hstu_attn import _fp8, _fp8_bwd  # noqa: E402
stamp("hstu_attn imported")
torch.zeros(1, device="cuda")
stamp("CUDA context")
sys.path.insert(0, os.path.join(here, "benchmarks"))
import hstu_fp8_bwd  # noqa: E402
from bench_util import kernel_breakdown  # noqa: E402
import pytest  # noqa: E402


def tests():
    cwd = os.getcwd()
    os.chdir(here)
    r = pytest.main(test_args)
    os.chdir(cwd)
    stamp(f"tests done (rc {r})")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return int(r)


rc = tests() if tests_first else 0
if bench_args != ["none"]:
    hstu_fp8_bwd.main(bench_args)
    stamp("benchmark done")


def breakdown(S, names):
    dev = torch.device("cuda")
    B, H, D = 16, 4, 128
    cu = torch.arange(B + 1, device=dev, dtype=torch.int32) * S
    q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    dout = (torch.randn(B * S, H, D, device=dev) * 1e-2).to(torch.bfloat16)
    (q8, qs), (k8, ks), (v8, vs) = (_fp8.quantize_fp8(x, cu, "block") for x in (q, k, v))
    del q, k, v
    m = _fp8.DESCALE_MODES.index("block")
    lens = (cu, cu, S, S, None, None, 1, -1, 0, D ** -0.5)
    bits = {"default": 0, **getattr(_fp8_bwd, "FP8_BWD_VARIANT_BITS", {})}
    for name in names:
        opts = hstu_attn._ops.OPTION_BITS["fp8_bwd"] | bits[name]
        fn = lambda: torch.ops.hstu_attn.fp8_bwd(dout, q8, k8, v8, qs, ks, vs, m, 0, *lens, None, float(S),  # noqa
                                                 None, None, False, opts)
        s = 0.0
        for kname, (ms, c) in kernel_breakdown(fn).items():
            s += ms
            print(f"| B{B} S{S // 1024}K | {name} | {kname[:80]} | {c} | {ms:.3f} |")
        print(f"| B{B} S{S // 1024}K | {name} | (sum of kernels) | | {s:.3f} |", flush=True)


if bd_seqs:
    print("\n## per-kernel breakdown (torch.profiler, one FP8 path call after two warm calls; ms)\n")
    print("| case | variant | kernel | calls | ms |\n|---|---|---|---:|---:|")
    for S in bd_seqs:
        breakdown(S, bd_bits)
        torch.cuda.empty_cache()
    stamp("breakdown done")
torch.cuda.synchronize()
torch.cuda.empty_cache()
if not tests_first:
    rc = tests()
sys.exit(rc)
