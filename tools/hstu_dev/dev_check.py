"""Standalone GPU check of the hstu_attn CUDA ops (no wheel needed): correctness against hstu/_reference.py and
timings. Used on the lent GPU machine with a library built by hand:

    python tools/hstu_dev/dev_check.py --lib .carry/_C.so [--bench] [--deterministic]

Correctness rule (FBGEMM HSTU style): max|kernel - gold| <= k * max|torch_same_dtype - gold| (+ a tiny floor),
k = 2 forward, 5 backward; gold is the reference in fp32 on upcast inputs. Outputs are poisoned by the op itself
(torch.empty); unwritten rows would show up as garbage.
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


def make_case(B, H, D, dtype, lens_q, lens_k, rab_heads, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0).tolist()), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0).tolist()), dtype=torch.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    q = torch.randn(tq, H, D, generator=g).to(dtype)
    k = torch.randn(tk, H, D, generator=g).to(dtype)
    v = torch.randn(tk, H, D, generator=g).to(dtype)
    do = torch.randn(tq, H, D, generator=g).to(dtype)
    mk = max(lens_k) if lens_k else 0
    rab = None
    if rab_heads:
        rab = torch.randn(B, rab_heads, mk, mk, generator=g).to(dtype)
    return q, k, v, do, cu_q, cu_k, max(lens_q), mk, rab


def run_case(ops, ref, name, B, H, D, dtype, lens_q, lens_k, ctx=None, tgt=None, group=1, window=(-1, 0),
             alpha=1.0, rab_heads=0, seqused_q=None, seqused_k=None, seed=0, deterministic=False):
    dev = "cuda"
    q, k, v, do, cu_q, cu_k, mq, mk, rab = make_case(B, H, D, dtype, lens_q, lens_k, rab_heads, seed)
    t = lambda x: None if x is None else torch.tensor(x, dtype=torch.int32, device=dev)
    ctx_t, tgt_t, sq_t, sk_t = t(ctx), t(tgt), t(seqused_q), t(seqused_k)
    q, k, v, do = (x.to(dev) for x in (q, k, v, do))
    rab = None if rab is None else rab.to(dev)
    cu_q, cu_k = cu_q.to(dev), cu_k.to(dev)
    has_drab = rab is not None
    args = (cu_q, cu_k, mq, mk, ctx_t, tgt_t, group, window[0], window[1], alpha)
    out = ops.fwd(q, k, v, *args, rab, -1.0, sq_t, sk_t)
    dq, dk, dv, drab = ops.bwd(do, q, k, v, *args, rab, -1.0, sq_t, sk_t, has_drab, deterministic)
    torch.cuda.synchronize()
    repeat_ok = True
    if deterministic:  # a second run must be bit-identical
        again = ops.bwd(do, q, k, v, *args, rab, -1.0, sq_t, sk_t, has_drab, deterministic)
        repeat_ok = all(torch.equal(a, b) for a, b in zip((dq, dk, dv, drab), again))

    def reference(dt, upcast):
        leaves = [x.detach().to(dt).requires_grad_(True) for x in (q, k, v)]
        r = None if rab is None else rab.detach().to(dt).requires_grad_(True)
        o = ref.hstu_attn_reference(*leaves, cu_q, cu_k, mq, mk, ctx_t, tgt_t, group, window, alpha, r, -1,
                                    sq_t, sk_t, upcast=upcast)
        o.backward(do.to(dt))
        grads = [x.grad for x in leaves] + ([r.grad] if r is not None else [])
        return [o] + grads

    gold = reference(torch.float32, True)
    low = reference(dtype, False)
    got = [out, dq, dk, dv] + ([drab] if has_drab else [])
    names = ["out", "dq", "dk", "dv", "drab"]
    ok = True
    msgs = []
    for i, (a, gref, l) in enumerate(zip(got, gold, low)):
        kmul = 2.0 if i == 0 else 5.0
        err = (a.float() - gref.float()).abs().max().item() if a.numel() else 0.0
        base = (l.float() - gref.float()).abs().max().item() if a.numel() else 0.0
        finite = bool(torch.isfinite(a.float()).all())
        passed = finite and err <= kmul * base + 1e-5
        ok &= passed
        msgs.append(f"{names[i]} {err:.2e}/{base:.2e}{'' if passed else ' FAIL'}")
    if not repeat_ok:
        ok = False
        msgs.append("deterministic rerun differs FAIL")
    print(f"{'PASS' if ok else 'FAIL'} {name}: " + ", ".join(msgs), flush=True)
    return ok


def correctness(ops, ref, deterministic=False):
    cases = []
    lens = [1, 27, 99, 256, 0, 200]
    B = len(lens)
    for dtype in (torch.bfloat16, torch.float16):
        for D in (32, 64, 128, 256):
            cases.append((f"causal {dtype} D{D}", dict(B=B, H=2, D=D, dtype=dtype, lens_q=lens, lens_k=lens)))
    bf = torch.bfloat16
    base = dict(B=B, H=2, D=128, dtype=bf, lens_q=lens, lens_k=lens)
    cases += [
        ("full window", dict(base, window=(-1, -1))),
        ("local (32,0)", dict(base, window=(32, 0))),
        ("local (17,9)", dict(base, window=(17, 9))),
        ("alpha 0.1 rab shared", dict(base, alpha=0.1, rab_heads=1)),
        ("rab per-head", dict(base, rab_heads=2)),
        ("ctx+tgt g1", dict(base, ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21])),
        ("ctx+tgt g3", dict(base, ctx=[1, 3, 5, 10, 0, 7], tgt=[1, 4, 9, 30, 0, 21], group=3)),
        ("tgt g3 + local (20,0)", dict(base, tgt=[1, 4, 9, 30, 0, 21], group=3, window=(20, 0))),
        ("ctx + local (20,0) + rab", dict(base, ctx=[1, 3, 5, 10, 0, 7], window=(20, 0), rab_heads=2)),
        ("delta-q", dict(base, lens_q=[1, 10, 99, 100, 0, 3], lens_k=lens)),
        ("delta-q tgt ctx D256", dict(base, D=256, lens_q=[1, 10, 99, 100, 0, 33], lens_k=lens,
                                      ctx=[0, 3, 5, 10, 0, 7], tgt=[0, 4, 9, 30, 0, 21], group=2)),
        ("seqused", dict(base, seqused_q=[1, 20, 99, 200, 0, 150], seqused_k=[1, 20, 99, 200, 0, 150])),
        ("long 1111/2000 fp16 D64", dict(B=2, H=4, D=64, dtype=torch.float16, lens_q=[1111, 2000],
                                         lens_k=[1111, 2000])),
        ("long 2000 causal D128 H8", dict(B=2, H=8, D=128, dtype=bf, lens_q=[2000, 1500], lens_k=[2000, 1500])),
    ]
    n_ok = 0
    for i, (name, kw) in enumerate(cases):
        try:
            n_ok += run_case(ops, ref, name, seed=i, deterministic=deterministic, **kw)
        except Exception as e:  # report and continue
            print(f"ERROR {name}: {type(e).__name__}: {e}", flush=True)
    print(f"correctness{' (deterministic bwd)' if deterministic else ''}: {n_ok}/{len(cases)} passed", flush=True)


def bench(ops, B, S, H, D, causal=True, reps=10, deterministic=False):
    dev = "cuda"
    dt = torch.bfloat16
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
    q, k, v, do = (torch.randn(B * S, H, D, dtype=dt, device=dev) for _ in range(4))
    win = (-1, 0) if causal else (-1, -1)
    args = (cu, cu, S, S, None, None, 1, win[0], win[1], 1.0, None, -1.0, None, None)

    def timeit(fn):
        for _ in range(3):
            fn()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        ts.sort()
        return ts[len(ts) // 2]

    tf = timeit(lambda: ops.fwd(q, k, v, *args))
    tb = timeit(lambda: ops.bwd(do, q, k, v, *args, False, deterministic))
    # Issue-3 convention: fwd = sum 2*H*D*L^2 (halved for causal), bwd = 2.5x fwd. FA convention (4*H*D*L^2) is 2x.
    f = B * 2 * H * D * S * S * (0.5 if causal else 1.0)
    print(f"bench B={B} S={S} H={H} D={D} causal={causal}{' deterministic' if deterministic else ''}: fwd {tf:.3f} ms {f / tf / 1e9:.1f} TFLOP/s "
          f"(FA-conv {2 * f / tf / 1e9:.1f}); bwd {tb:.3f} ms {2.5 * f / tb / 1e9:.1f} TFLOP/s "
          f"(FA-conv {5 * f / tb / 1e9:.1f})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--deterministic", action="store_true", help="also check (and bench) deterministic=True")
    a = ap.parse_args()
    torch.ops.load_library(a.lib)
    ops = torch.ops.hstu_attn
    print(ops.compiled_kernels(), flush=True)
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    if not a.no_check:
        correctness(ops, load_reference())
        if a.deterministic:
            correctness(ops, load_reference(), deterministic=True)
    if a.bench:
        bench(ops, 16, 16384, 4, 128)
        bench(ops, 16, 16384, 4, 256)
        bench(ops, 128, 1024, 4, 128)
        if a.deterministic:
            bench(ops, 16, 16384, 4, 128, deterministic=True)
            bench(ops, 128, 1024, 4, 128, deterministic=True)


if __name__ == "__main__":
    sys.exit(main())
