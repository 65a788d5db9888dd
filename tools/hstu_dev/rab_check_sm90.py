"""rab / drab through the Hopper kernels (run with the wheel on sys.path, on an sm90 GPU, from the repo root).

Correctness: the error-relative rule of tests/hstu/test_kernels_gpu.py (check_case: 2x fwd, 5x grads incl. drab)
on cases chosen to reach both rab load paths (interior tiles of long sequences; even and odd max_seqlen_k, i.e.
aligned and unaligned rab rows), shared and per-head rab, has_drab True / False. Timings: CUDA-event median of
the public op (hstu_attn::fwd / bwd) with and without rab, sm90 vs the sm80-class kernels
(HSTU_ATTN_DISABLE_SM90=1, read by the op on every call).

    PYTHONPATH=/tmp/site python3 -P tools/hstu_dev/rab_check_sm90.py [--no-check] [--no-bench] [--bench-d256]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/hstu"))
import test_kernels_gpu as T  # noqa: E402  (make_case, check_case)

torch.backends.cuda.matmul.allow_tf32 = False


def correctness():
    cases = [  # (lens, H, D, dtype, mask, rab_heads, delta_q, has_drab)
        ([1000, 300, 257], 2, 128, torch.bfloat16, "causal", 1, False, True),
        ([1000, 300, 257], 2, 128, torch.float16, "none", 2, False, True),
        ([1111, 513, 1], 2, 128, torch.bfloat16, "causal", 2, True, True),
        ([1111, 513, 1], 4, 64, torch.bfloat16, "context_target_group", 1, False, True),
        ([640, 0, 129], 4, 64, torch.float16, "local", 1, True, True),
        ([900, 383], 1, 128, torch.bfloat16, "local_context_target", 1, False, True),
        ([1000, 300, 257], 2, 256, torch.bfloat16, "causal", 1, False, True),
        ([1111, 77], 2, 256, torch.float16, "context", 2, True, True),
        ([1000, 300], 4, 128, torch.bfloat16, "causal", 1, False, False),
        ([999, 64], 2, 64, torch.float16, "target", 2, False, False),
        # D = 256 backward (split-D kernel with rab): shared rab with H > 1 (drab through fp32 atomics), per-head,
        # H = 1 (direct stores), has_drab False; odd max_seqlen_k; zero-length and length-1 sequences; every mask.
        ([1111, 0, 1, 300], 2, 256, torch.bfloat16, "causal", 1, False, True),
        ([999, 64, 1], 2, 256, torch.float16, "none", 2, False, True),
        ([700, 129, 0], 4, 256, torch.bfloat16, "local", 1, True, True),
        ([900, 383], 1, 256, torch.float16, "local_context_target", 1, False, True),
        ([1001, 257, 1], 2, 256, torch.bfloat16, "context_target_group", 2, True, True),
        ([640, 65], 2, 256, torch.bfloat16, "target_group", 1, False, False),
        ([513, 1, 0], 4, 256, torch.float16, "context", 4, False, False),
        ([777, 0, 130], 2, 256, torch.bfloat16, "local_causal", 2, True, True),
        ([1025, 63], 1, 256, torch.bfloat16, "none", 1, True, True),
        ([600, 333, 1], 2, 256, torch.bfloat16, "context_target", 1, False, True, True),  # seqused
    ]
    ok = 0
    for i, (lens, H, D, dt, mask, rh, dq, drab, *su) in enumerate(cases):
        case = T.make_case(1000 + i, lens, H, D, dt, mask, rh, delta_q=dq, seqused=bool(su and su[0]))
        name = f"L{lens} H{H} D{D} {str(dt)[6:]} {mask} rab{rh} dq{int(dq)} drab{int(drab)} su{int(bool(su))}"
        try:
            T.check_case(case, 0.5 if i % 2 else 1.0, has_drab=drab)
            ok += 1
            print("PASS", name, flush=True)
        except AssertionError as e:
            print("FAIL", name, e, flush=True)
    print(f"rab correctness: {ok}/{len(cases)}", flush=True)
    return ok == len(cases)


def dispatch():
    """The D = 256 backward with rab runs the Hopper kernel (kRab instantiation), not the sm80-class fallback."""
    import re

    ok = True
    for rh in (1, 2):
        case = T.make_case(7 + rh, [300, 65], 2, 256, torch.bfloat16, "causal", rh)
        op = torch.ops.hstu_attn
        do = torch.randn_like(case["q"])
        args = (do, case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"],
                case["max_seqlen_k"], None, None, 1, -1, 0, 1.0, case["rab"], -1.0, None, None, True, False)
        op.bwd(*args)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            op.bwd(*args)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if "hstu" in e.name]
        # demangled: hstu_bwd_sm90_kernel<__nv_bfloat16, 256, 2, 2, false, true, ...>; mangled: ...Li256E...Lb0ELb1E
        hit = [n for n in names if re.search(r"hstu_bwd_sm90_kernel<[^,]+, 256, \d+, \d+, false, true", n) or
               re.search(r"hstu_bwd_sm90_kernel.*Li256ELi2ELi2ELb0ELb1E", n)]
        print(f"dispatch rab{rh} D256 bwd: {'sm90 kRab kernel' if hit else 'NOT sm90'}; kernels: "
              f"{sorted(set(n[:80] for n in names))}", flush=True)
        ok = ok and bool(hit)
    return ok


def timed(fn, reps):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def bench(B, S, D, rab_heads, sm80=False, H=4, reps=10):
    if sm80:
        os.environ["HSTU_ATTN_DISABLE_SM90"] = "1"
    else:
        os.environ.pop("HSTU_ATTN_DISABLE_SM90", None)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B * S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    cu = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * S
    rab = None
    if rab_heads:
        rab = torch.randn(B, rab_heads, S, S, device="cuda", dtype=torch.bfloat16, generator=g)
    op = torch.ops.hstu_attn
    fwd = lambda: op.fwd(q, k, v, cu, cu, S, S, None, None, 1, -1, 0, 1.0, rab, -1.0, None, None)
    bwd = lambda: op.bwd(do, q, k, v, cu, cu, S, S, None, None, 1, -1, 0, 1.0, rab, -1.0, None, None,
                         rab is not None, False)
    tf, tb = timed(fwd, reps), timed(bwd, reps)
    fl = 4 * B * H * D * S * S / 2
    print(f"| {B} | {S} | {D} | {'none' if not rab_heads else 'shared' if rab_heads == 1 else 'per-head'}"
          f" | {'sm80' if sm80 else 'sm90'} | {tf:.3f} | {fl / tf / 1e9:.0f} | {tb:.3f} | {2.5 * fl / tb / 1e9:.0f} |",
          flush=True)
    os.environ.pop("HSTU_ATTN_DISABLE_SM90", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--bench-d256", action="store_true", help="only the D = 256 rows (rab backward on sm90)")
    a = ap.parse_args()
    ok = True
    if not a.no_check:
        ok = correctness()
        ok = dispatch() and ok
    if not a.no_bench and a.bench_d256:
        print(f"GPU: {torch.cuda.get_device_name()}, bf16, causal, H = 4 (TFLOP/s: FA convention, bwd 2.5x fwd)")
        print("| B | S | D | rab | kernels | fwd ms | fwd TFLOP/s | bwd ms (incl. drab) | bwd TFLOP/s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for _ in range(2):  # alternated twice
            bench(16, 4096, 256, 0)
            bench(16, 4096, 256, 1)
            bench(16, 4096, 256, 4)
            bench(16, 4096, 256, 1, sm80=True)
            bench(16, 4096, 256, 4, sm80=True)
    elif not a.no_bench:
        print(f"GPU: {torch.cuda.get_device_name()}, bf16, causal, H = 4 (TFLOP/s: FA convention, bwd 2.5x fwd)")
        print("| B | S | D | rab | kernels | fwd ms | fwd TFLOP/s | bwd ms (incl. drab) | bwd TFLOP/s |")
        print("|---|---|---|---|---|---|---|---|---|")
        bench(16, 16384, 128, 0)
        bench(16, 16384, 128, 0)
        for D in (128, 64):
            bench(16, 4096, D, 0)
            bench(16, 4096, D, 1)
            bench(16, 4096, D, 4)
            bench(16, 4096, D, 1, sm80=True)
        bench(16, 4096, 256, 0)
        bench(16, 4096, 256, 1)
        bench(16, 4096, 256, 4)
        bench(16, 4096, 256, 1, sm80=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
