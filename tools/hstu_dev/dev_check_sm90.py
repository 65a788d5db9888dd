"""GPU check of the Hopper (sm90a) HSTU dev library (forward and backward): correctness against
hstu/_reference.py and timings.

    python3 tools/hstu_dev/dev_check_sm90.py --lib .carry_sm90/libhstu_sm90_dev.so [--bench] [--variants -1,4]
    python3 tools/hstu_dev/dev_check_sm90.py --lib .carry_sm90/libhstu_sm90_dev.so --bwd [--bench] [--quick]

Backward rule: max|kernel - gold| <= 5 * max|torch_same_dtype - gold| + 1e-5 for each of dq, dk, dv, gold = the
analytic fp32 backward (hstu_attn_reference_backward) on upcast inputs, torch_same_dtype = autograd of the
reference run in the input dtype (upcast=False).

Rule (FBGEMM HSTU style, forward): max|kernel - gold| <= 2 * max|torch_same_dtype - gold| + 1e-5, gold = the
reference in fp32 on upcast inputs. Before every call the caching allocator is handed NaN-filled blocks, so rows
the kernel forgets to write show up as NaN; rows past seqused in q/k/v are set to NaN (the kernel must not read
them into any used output).
"""

import argparse
import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_reference():
    spec = importlib.util.spec_from_file_location("hstu_reference", os.path.join(HERE, "..", "..", "hstu", "_reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def poison_allocator(nbytes):
    x = torch.full((nbytes // 4 + 1024,), float("nan"), dtype=torch.float32, device="cuda")
    del x


def make_inputs(B, H, D, dtype, lens_q, lens_k, ctx, tgt, seqused_q, seqused_k, nan_unused, seed, with_do,
                device="cuda"):
    """q, k, v (and dO when with_do) drawn on the CPU from `seed`, rows past seqused set to NaN when nan_unused,
    moved to `device` with the int32 offsets / lengths: (q, k, v, do or None, cu_q, cu_k, ctx, tgt, sq, sk)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    q = torch.randn(tq, H, D, generator=g).to(dtype)
    k = torch.randn(tk, H, D, generator=g).to(dtype)
    v = torch.randn(tk, H, D, generator=g).to(dtype)
    do = torch.randn(tq, H, D, generator=g).to(dtype) if with_do else None
    if nan_unused:
        for b in range(B):
            if seqused_q is not None:
                for x in (q, do) if with_do else (q,):
                    x[int(cu_q[b]) + seqused_q[b] : int(cu_q[b + 1])] = float("nan")
            if seqused_k is not None:
                k[int(cu_k[b]) + seqused_k[b] : int(cu_k[b + 1])] = float("nan")
                v[int(cu_k[b]) + seqused_k[b] : int(cu_k[b + 1])] = float("nan")
    t = lambda x: None if x is None else torch.tensor(x, dtype=torch.int32, device=device)
    q, k, v = (x.to(device) for x in (q, k, v))
    do = None if do is None else do.to(device)
    return q, k, v, do, cu_q.to(device), cu_k.to(device), t(ctx), t(tgt), t(seqused_q), t(seqused_k)


def median_ms(fn, reps, warmup, flush=None):
    """Median of `reps` CUDA-event timings of fn() after `warmup` calls; `flush` (a large tensor) is zeroed before
    each timed call so that L2 starts cold."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def run_case(ops, ref, name, variant, B, H, D, dtype, lens_q, lens_k, ctx=None, tgt=None, group=1,
             window=(-1, 0), alpha=1.0, seqused_q=None, seqused_k=None, nan_unused=False, seed=0):
    q, k, v, _, cu_q, cu_k, ctx_t, tgt_t, sq_t, sk_t = make_inputs(
        B, H, D, dtype, lens_q, lens_k, ctx, tgt, seqused_q, seqused_k, nan_unused, seed, with_do=False)
    mq, mk = max(lens_q), max(lens_k)
    poison_allocator(q.numel() * 2)
    out = ops.fwd(q, k, v, cu_q, cu_k, mq, mk, ctx_t, tgt_t, group, window[0], window[1], alpha, None, -1.0,
                  sq_t, sk_t, variant)
    torch.cuda.synchronize()

    def reference(dt, upcast):
        return ref.hstu_attn_reference(q.to(dt), k.to(dt), v.to(dt), cu_q, cu_k, mq, mk, ctx_t, tgt_t, group,
                                       window, alpha, None, -1, sq_t, sk_t, upcast=upcast)

    with torch.no_grad():
        gold = reference(torch.float32, True).float()
        low = reference(dtype, False).float()
    # Rows outside every used range are zeros in the reference; compare everything.
    err = (out.float() - gold).abs().nan_to_num(float("inf")).max().item() if out.numel() else 0.0
    base = (low - gold).abs().max().item() if out.numel() else 0.0
    finite = bool(torch.isfinite(out.float()).all())
    ok = finite and err <= 2.0 * base + 1e-5
    print(f"{'PASS' if ok else 'FAIL'} v{variant} {name}: out {err:.2e}/{base:.2e}{'' if finite else ' NONFINITE'}",
          flush=True)
    return ok


def cases():
    lens = [1, 27, 99, 256, 0, 200]
    B = len(lens)
    bf, fp = torch.bfloat16, torch.float16
    out = []
    for dtype in (bf, fp):
        for D in (64, 128, 256):
            out.append((f"causal {dtype} D{D}", dict(B=B, H=2, D=D, dtype=dtype, lens_q=lens, lens_k=lens)))
    base = dict(B=B, H=2, D=128, dtype=bf, lens_q=lens, lens_k=lens)
    out += [
        ("full window", dict(base, window=(-1, -1))),
        ("full window fp16 alpha 0.3", dict(base, dtype=fp, window=(-1, -1), alpha=0.3)),
        ("local (32,0)", dict(base, window=(32, 0))),
        ("local (17,9)", dict(base, window=(17, 9))),
        ("local (200,0) long", dict(B=2, H=2, D=128, dtype=bf, lens_q=[1000, 777], lens_k=[1000, 777],
                                    window=(200, 0))),
        ("ctx only", dict(base, ctx=[0, 3, 5, 10, 0, 130])),
        ("ctx+tgt g1", dict(base, ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21])),
        ("ctx+tgt g3", dict(base, ctx=[1, 3, 5, 10, 0, 7], tgt=[1, 4, 9, 30, 0, 21], group=3)),
        ("tgt g3 + local (20,0)", dict(base, tgt=[1, 4, 9, 30, 0, 21], group=3, window=(20, 0))),
        ("ctx + local (20,0)", dict(base, ctx=[1, 3, 5, 10, 0, 7], window=(20, 0))),
        ("delta-q", dict(base, lens_q=[1, 10, 99, 100, 0, 3], lens_k=lens)),
        ("delta-q long", dict(B=2, H=2, D=128, dtype=bf, lens_q=[300, 1], lens_k=[1000, 700])),
        ("delta-q tgt ctx D256", dict(base, D=256, lens_q=[1, 10, 99, 100, 0, 33], lens_k=lens,
                                      ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21], group=2)),
        ("seqused", dict(base, seqused_q=[1, 20, 99, 200, 0, 150], seqused_k=[1, 20, 99, 200, 0, 150])),
        ("seqused NaN-poisoned unused rows", dict(base, seqused_q=[1, 20, 99, 200, 0, 150],
                                                  seqused_k=[1, 20, 99, 200, 0, 150], nan_unused=True)),
        ("seqused NaN full window", dict(base, window=(-1, -1), seqused_q=[1, 20, 99, 131, 0, 150],
                                         seqused_k=[1, 20, 99, 131, 0, 150], nan_unused=True)),
        ("jagged tile edges", dict(B=7, H=3, D=128, dtype=bf, lens_q=[128, 129, 255, 256, 257, 383, 1],
                                   lens_k=[128, 129, 255, 256, 257, 383, 1])),
        ("long 2000/1500 H8", dict(B=2, H=8, D=128, dtype=bf, lens_q=[2000, 1500], lens_k=[2000, 1500])),
        ("long fp16 D64 1111/2000", dict(B=2, H=4, D=64, dtype=fp, lens_q=[1111, 2000], lens_k=[1111, 2000])),
        ("long bf16 D256 1111/900", dict(B=2, H=2, D=256, dtype=bf, lens_q=[1111, 900], lens_k=[1111, 900])),
    ]
    return out


QUICK = ("jagged tile edges", "ctx+tgt g3", "seqused NaN-poisoned unused rows", "causal torch.bfloat16 D256")


def correctness(ops, ref, variants, dims, quick=False):
    n_ok = n = 0
    for variant in variants:
        for i, (name, kw) in enumerate(cases()):
            if kw["D"] not in dims or (quick and name not in QUICK):
                continue
            n += 1
            try:
                n_ok += run_case(ops, ref, name, variant, seed=i, **kw)
            except Exception as e:  # report and continue
                print(f"ERROR v{variant} {name}: {type(e).__name__}: {e}", flush=True)
    print(f"correctness: {n_ok}/{n} passed", flush=True)
    return n_ok == n


def bench(ops, B, S, H, D, variant, causal=True, reps=20, dtype=torch.bfloat16):
    dev = "cuda"
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
    q, k, v = (torch.randn(B * S, H, D, dtype=dtype, device=dev) for _ in range(3))
    win = (-1, 0) if causal else (-1, -1)
    fn = lambda: ops.fwd(q, k, v, cu, cu, S, S, None, None, 1, win[0], win[1], 1.0, None, -1.0, None, None, variant)
    t = median_ms(fn, reps, warmup=3)
    fa = 4 * B * H * D * S * S * (0.5 if causal else 1.0)
    print(f"| {B} | {S} | {H} | {D} | {str(dtype)[6:]} {'causal' if causal else 'full'} | v{variant} | {t:.3f} | {fa / t / 1e9:.1f} |",
          flush=True)


def bench_jagged(ops, variants, reps=30, D=256, H=4, B=32, max_len=4096, ctx=3, seed=0):
    """The benchmark's jagged case (benchmarks/hstu_attention.py: Zipf lengths, seed 0, 3 contexts), forward only,
    L2 flushed before each timed call; the max difference of each variant's output from the first one's."""
    dev = "cuda"
    gen = torch.Generator().manual_seed(seed)
    w = torch.arange(1, max_len + 1, dtype=torch.float64).reciprocal()
    lens = (torch.multinomial(w, B, replacement=True, generator=gen) + 1).tolist()
    cu = torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32)
    tot, mx = sum(lens), max(lens)
    q, k, v = (torch.randn(tot, H, D, dtype=torch.bfloat16, device=dev) for _ in range(3))
    nc = torch.tensor([min(ctx, L) for L in lens], dtype=torch.int32, device=dev)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    fa = sum(4 * H * D * L * L for L in lens) / 2
    first = None
    for variant in variants:
        fn = lambda: ops.fwd(q, k, v, cu, cu, mx, mx, nc, None, 1, -1, 0, D ** -0.5, None, float(mx), None, None,
                             variant)
        out = fn()
        diff = "-"
        if variant // 100 != 3:
            if first is None:
                first = out.float()
            else:
                diff = f"{(out.float() - first).abs().max().item():.2e}"
        t = median_ms(fn, reps, warmup=3, flush=flush)
        print(f"| jagged zipf B{B} max{max_len} ({tot} tokens, max {mx}) D{D} ctx{ctx} | v{variant} | {t:.4f} | "
              f"{fa / t / 1e9:.1f} | {diff} |", flush=True)


def run_bwd_case(ops, ref, name, variant, B, H, D, dtype, lens_q, lens_k, ctx=None, tgt=None, group=1,
                 window=(-1, 0), alpha=1.0, seqused_q=None, seqused_k=None, nan_unused=False, seed=0):
    q, k, v, do, cu_q, cu_k, ctx_t, tgt_t, sq_t, sk_t = make_inputs(
        B, H, D, dtype, lens_q, lens_k, ctx, tgt, seqused_q, seqused_k, nan_unused, seed, with_do=True)
    mq, mk = max(lens_q), max(lens_k)
    poison_allocator(q.numel() * 16)
    dq, dk, dv = ops.bwd(do, q, k, v, cu_q, cu_k, mq, mk, ctx_t, tgt_t, group, window[0], window[1], alpha, None,
                         -1.0, sq_t, sk_t, variant)
    torch.cuda.synchronize()
    gold = ref.hstu_attn_reference_backward(do.float(), q.float(), k.float(), v.float(), None, False, cu_q, cu_k, mq,
                                            mk, ctx_t, tgt_t, group, window, alpha, -1, sq_t, sk_t)[:3]
    ql, kl, vl = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    with torch.enable_grad():
        o = ref.hstu_attn_reference(ql, kl, vl, cu_q, cu_k, mq, mk, ctx_t, tgt_t, group, window, alpha, None, -1,
                                    sq_t, sk_t, upcast=False)
        low = torch.autograd.grad(o, (ql, kl, vl), do.nan_to_num(0.0), allow_unused=True)
    ok = True
    msg = []
    for nm, x, gd, lw in zip(("dq", "dk", "dv"), (dq, dk, dv), gold, low):
        lw = torch.zeros_like(gd) if lw is None else lw.float().nan_to_num(0.0)
        gd = gd.float()
        err = (x.float() - gd).abs().nan_to_num(float("inf")).max().item() if x.numel() else 0.0
        base = (lw - gd).abs().max().item() if x.numel() else 0.0
        good = err <= 5.0 * base + 1e-5
        ok = ok and good
        msg.append(f"{nm} {err:.2e}/{base:.2e}{'' if good else ' <-'}")
    print(f"{'PASS' if ok else 'FAIL'} bwd v{variant} {name}: {'  '.join(msg)}", flush=True)
    return ok


def bwd_cases():
    lens = [1, 27, 99, 256, 0, 200]
    B = len(lens)
    bf, fp = torch.bfloat16, torch.float16
    out = []
    for dtype in (bf, fp):
        for D in (64, 128, 256):
            out.append((f"causal {dtype} D{D}", dict(B=B, H=2, D=D, dtype=dtype, lens_q=lens, lens_k=lens)))
    base = dict(B=B, H=2, D=128, dtype=bf, lens_q=lens, lens_k=lens)
    b256 = dict(base, D=256)
    out += [  # D = 256: the split-D kernel (64 keys per CTA, the warpgroups split dK / dV / dQ columns)
        ("D256 full window fp16", dict(b256, dtype=fp, window=(-1, -1), alpha=0.3)),
        ("D256 local (17,9)", dict(b256, window=(17, 9))),
        ("D256 ctx+tgt g3", dict(b256, ctx=[1, 3, 5, 10, 0, 7], tgt=[1, 4, 9, 30, 0, 21], group=3)),
        ("D256 delta-q tgt ctx", dict(b256, lens_q=[1, 10, 99, 100, 0, 33], ctx=[0, 3, 5, 10, 0, 7],
                                      tgt=[0, 4, 9, 30, 0, 21], group=2)),
        ("D256 seqused NaN", dict(b256, seqused_q=[1, 20, 99, 200, 0, 150], seqused_k=[1, 20, 99, 200, 0, 150],
                                  nan_unused=True)),
        ("D256 jagged tile edges", dict(B=7, H=3, D=256, dtype=bf, lens_q=[64, 65, 127, 128, 129, 191, 1],
                                        lens_k=[64, 65, 127, 128, 129, 191, 1])),
        ("D256 long 1111/900 H4", dict(B=2, H=4, D=256, dtype=bf, lens_q=[1111, 900], lens_k=[1111, 900])),
    ]
    out += [
        ("full window", dict(base, window=(-1, -1))),
        ("full window fp16 alpha 0.3", dict(base, dtype=fp, window=(-1, -1), alpha=0.3)),
        ("local (32,0)", dict(base, window=(32, 0))),
        ("local (17,9)", dict(base, window=(17, 9))),
        ("local (200,0) long", dict(B=2, H=2, D=128, dtype=bf, lens_q=[1000, 777], lens_k=[1000, 777],
                                    window=(200, 0))),
        ("ctx only", dict(base, ctx=[0, 3, 5, 10, 0, 130])),
        ("ctx+tgt g1", dict(base, ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21])),
        ("ctx+tgt g3", dict(base, ctx=[1, 3, 5, 10, 0, 7], tgt=[1, 4, 9, 30, 0, 21], group=3)),
        ("tgt g3 + local (20,0)", dict(base, tgt=[1, 4, 9, 30, 0, 21], group=3, window=(20, 0))),
        ("ctx + local (20,0)", dict(base, ctx=[1, 3, 5, 10, 0, 7], window=(20, 0))),
        ("delta-q", dict(base, lens_q=[1, 10, 99, 100, 0, 3], lens_k=lens)),
        ("delta-q long", dict(B=2, H=2, D=128, dtype=bf, lens_q=[300, 1], lens_k=[1000, 700])),
        ("delta-q tgt ctx D64", dict(base, D=64, lens_q=[1, 10, 99, 100, 0, 33], lens_k=lens,
                                     ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21], group=2)),
        ("seqused NaN-poisoned unused rows", dict(base, seqused_q=[1, 20, 99, 200, 0, 150],
                                                  seqused_k=[1, 20, 99, 200, 0, 150], nan_unused=True)),
        ("seqused NaN full window", dict(base, window=(-1, -1), seqused_q=[1, 20, 99, 131, 0, 150],
                                         seqused_k=[1, 20, 99, 131, 0, 150], nan_unused=True)),
        ("jagged tile edges", dict(B=7, H=3, D=128, dtype=bf, lens_q=[128, 129, 255, 256, 257, 383, 1],
                                   lens_k=[128, 129, 255, 256, 257, 383, 1])),
        ("long 2000/1500 H8", dict(B=2, H=8, D=128, dtype=bf, lens_q=[2000, 1500], lens_k=[2000, 1500])),
        ("long fp16 D64 1111/2000", dict(B=2, H=4, D=64, dtype=fp, lens_q=[1111, 2000], lens_k=[1111, 2000])),
    ]
    return out


BWD_QUICK = ("jagged tile edges", "ctx+tgt g3", "seqused NaN-poisoned unused rows", "causal torch.float16 D64",
             "D256 jagged tile edges", "D256 seqused NaN")


def correctness_bwd(ops, ref, variants, dims, quick=False):
    n_ok = n = 0
    for variant in variants:
        for i, (name, kw) in enumerate(bwd_cases()):
            if kw["D"] not in dims or (quick and name not in BWD_QUICK):
                continue
            n += 1
            try:
                n_ok += run_bwd_case(ops, ref, name, variant, seed=100 + i, **kw)
            except Exception as e:  # report and continue
                print(f"ERROR bwd v{variant} {name}: {type(e).__name__}: {e}", flush=True)
    print(f"bwd correctness: {n_ok}/{n} passed", flush=True)
    return n_ok == n


def bench_bwd(ops, B, S, H, D, variant, causal=True, reps=10, dtype=torch.bfloat16):
    dev = "cuda"
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
    q, k, v, do = (torch.randn(B * S, H, D, dtype=dtype, device=dev) for _ in range(4))
    win = (-1, 0) if causal else (-1, -1)
    fn = lambda: ops.bwd(do, q, k, v, cu, cu, S, S, None, None, 1, win[0], win[1], 1.0, None, -1.0, None, None,
                         variant)
    t = median_ms(fn, reps, warmup=2)
    fa = 2.5 * 4 * B * H * D * S * S * (0.5 if causal else 1.0)
    print(f"| {B} | {S} | {H} | {D} | {str(dtype)[6:]} {'causal' if causal else 'full'} | v{variant} | {t:.3f} | "
          f"{fa / t / 1e9:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--quick", action="store_true", help="4 small cases only (for compute-sanitizer)")
    ap.add_argument("--repeat", type=int, default=1, help="bench passes (run-to-run spread)")
    ap.add_argument("--variants", default="-1,4,13,11,1,0")
    ap.add_argument("--bench-variants", default="0,1,2,3,4,10,11,12,13,14")
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--bwd", action="store_true", help="check / time the backward instead of the forward")
    ap.add_argument("--jagged", default="", help="time the benchmark's jagged forward with these variants "
                    "(e.g. 14,114,214,314: grid order, work list, work list without splits, planner alone)")
    a = ap.parse_args()
    torch.ops.load_library(a.lib)
    ops = torch.ops.hstu_attn_sm90_dev
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    variants = [int(x) for x in a.variants.split(",")]
    dims = [int(x) for x in a.dims.split(",")]
    if a.bwd:
        ok = True
        if not a.no_check:
            ok = correctness_bwd(ops, load_reference(), variants, dims, a.quick)
        if a.bench:
            print("| B | S | H | D | mask | variant | bwd ms | TFLOP/s (FA convention 2.5 x 4BHDS^2, /2 causal) |")
            print("|---|---|---|---|---|---|---|---|")
            for _ in range(a.repeat):
                for variant in [int(x) for x in a.bench_variants.split(",")]:
                    for D in [d for d in (128, 256) if d in dims]:
                        bench_bwd(ops, 16, 16384, 4, D, variant, reps=10 if D == 128 else 5)
            for variant in variants[:1]:
                bench_bwd(ops, 16, 16384, 4, 128, variant, dtype=torch.float16, reps=5)
                if 64 in dims:
                    bench_bwd(ops, 16, 16384, 4, 64, variant, reps=5)
                if 256 in dims:
                    bench_bwd(ops, 16, 4096, 4, 256, variant, reps=10)
                    bench_bwd(ops, 16, 16384, 4, 256, variant, dtype=torch.float16, reps=5)
                bench_bwd(ops, 128, 1024, 4, 128, variant, reps=20)
                bench_bwd(ops, 16, 16384, 4, 128, variant, causal=False, reps=3)
        return 0 if ok else 1
    if not a.no_check:
        correctness(ops, load_reference(), variants, dims, a.quick)
    if a.jagged:
        print("| case | variant | fwd ms | TFLOP/s | max diff vs first |")
        print("|---|---|---|---|---|")
        for _ in range(a.repeat):
            bench_jagged(ops, [int(x) for x in a.jagged.split(",")])
    if a.bench:
        print("| B | S | H | D | mask | variant | fwd ms | TFLOP/s (FA convention 4BHDS^2, /2 causal) |")
        print("|---|---|---|---|---|---|---|---|")
        for _ in range(a.repeat):
            for variant in [int(x) for x in a.bench_variants.split(",")]:
                bench(ops, 16, 16384, 4, 128, variant)
        for variant in variants[:2]:
            bench(ops, 16, 16384, 4, 128, variant, causal=False, reps=5)
            bench(ops, 16, 16384, 4, 128, variant, dtype=torch.float16, reps=10)
            if 256 in dims:
                bench(ops, 16, 16384, 4, 256, variant, reps=10)
            if 64 in dims:
                bench(ops, 16, 16384, 4, 64, variant, reps=10)
            bench(ops, 128, 1024, 4, 128, variant)

if __name__ == "__main__":
    sys.exit(main())
