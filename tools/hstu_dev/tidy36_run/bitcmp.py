"""tidy36's bit-for-bit check: the kernels whose source the branch reorganized (no behaviour change intended) run on
the same seeded inputs under main's wheel and the branch's, each in its own process (PYTHONPATH); each output's
sha256 is printed, the output itself (for the difference) goes to DIR/LABEL.pt. `compare DIR A B` prints per case equal /
the largest difference, and whether each wheel reproduced itself (two calls per case; a backward with atomics may
not).

Cases: the sm80-class forward with rab (kernel_options(sm90=False), bf16, long rows: FwdSm80QregRab at D = 64 / 128,
FwdSm80PairsPfRab at D = 256; unpack_lo / unpack_hi now from hstu_common.cuh) by default and by main's rab path
(main: fp8_fwd_var=10, the branch: fwd_sm80_cfg=8); the Hopper forward / backward with rab (bf16 / fp16; the moved
unpack_lo / unpack_hi); the Hopper FP8 forward at D = 64 / 128 / 256 with its Vt pre-pass (default) and main's
(fp8_fwd_var=4), both now through hstu_fp8_vt_store.

Usage: bitcmp.py run DIR LABEL | bitcmp.py compare DIR A B"""
import hashlib
import os
import sys

import torch


def case_inputs(seed, lens, H, D, dtype, rab=True):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
    q, k, v, do = (torch.randn(sum(lens), H, D, generator=gen, device="cuda", dtype=dtype) for _ in range(4))
    r = torch.randn(len(lens), H, max(lens), max(lens), generator=gen, device="cuda", dtype=dtype) if rab else None
    return dict(q=q, k=k, v=v, do=do, cu=cu, m=max(lens), rab=r)


def run_cases():
    import hstu_attn
    from hstu_attn import _ops
    from hstu_attn._fp8 import quantize_fp8
    f = hstu_attn.hstu_attn_varlen_func
    rab_main = (dict(fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_MAIN) if hasattr(_ops, "FWD_SM80_CFG_RAB_MAIN")
                else dict(fp8_fwd_var=10))
    out = {}

    def fwd(c, alpha, **kw):
        return f(c["q"], c["k"], c["v"], c["cu"], c["cu"], c["m"], c["m"], window_size=(-1, 0), alpha=alpha,
                 rab=c["rab"], **kw)

    lens = [1400, 700, 1290, 833, 1024]
    for D in (64, 128, 256):  # the sm80-class forward with rab (bf16, long rows)
        c = case_inputs(100 + D, lens, 2, D, torch.bfloat16)
        for name, opts in (("default", {}), ("rab_main", rab_main)):
            with _ops.kernel_options(sm90=False, fwd_split_tiles=0, **opts):
                out[f"sm80_fwd_rab_D{D}_{name}"] = [fwd(c, 0.125) for _ in range(2)]
    for dtype in (torch.bfloat16, torch.float16):  # Hopper forward / backward with rab
        for D in (64, 128, 256):
            c = case_inputs(200 + D, [300, 77, 513, 129], 2, D, dtype)
            runs = []
            for _ in range(2):  # (the Hopper backward: not deterministic=True, which runs the sm80-class one)
                q, k, v = (c[n].detach().clone().requires_grad_(True) for n in "qkv")
                o = f(q, k, v, c["cu"], c["cu"], c["m"], c["m"], window_size=(-1, 0), alpha=D ** -0.5,
                      rab=c["rab"])
                runs.append([o] + list(torch.autograd.grad(o, (q, k, v), c["do"])))
            for i, n in enumerate(("o", "dq", "dk", "dv")):
                out[f"sm90_rab_{str(dtype)[6:]}_D{D}_{n}"] = [r[i] for r in runs]
    for D in (64, 128, 256):  # the Hopper FP8 forward (Vt pre-pass: the default's and main's)
        for lens_k in ([300, 0, 900, 77, 129, 450, 193], [4096, 4200]):
            c = case_inputs(300 + D + len(lens_k), lens_k, 2, D, torch.bfloat16, rab=False)
            q8, qs = quantize_fp8(c["q"], c["cu"], "tensor")
            k8, ks = quantize_fp8(c["k"], c["cu"], "tensor")
            v8, vs = quantize_fp8(c["v"], c["cu"], "tensor")
            for var in (0, 4):
                with _ops.kernel_options(fp8_fwd_var=var):
                    out[f"fp8_fwd_D{D}_S{max(lens_k)}_var{var}"] = [
                        f(q8, k8, v8, c["cu"], c["cu"], c["m"], c["m"], window_size=(-1, 0), alpha=D ** -0.5,
                          q_descale=qs, k_descale=ks, v_descale=vs, descale_mode="tensor", out_dtype=torch.bfloat16)
                        for _ in range(2)]
    torch.cuda.synchronize()
    return out


def sha(t):
    return hashlib.sha256(t.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]


def main():
    if sys.argv[1] == "run":
        d, label = sys.argv[2], sys.argv[3]
        os.makedirs(d, exist_ok=True)
        outs = run_cases()
        torch.save({k: (v[0].cpu(), torch.equal(v[0], v[1])) for k, v in outs.items()}, os.path.join(d, label + ".pt"))
        print(label, len(outs), "cases", " ".join(f"{k}={sha(v[0])}" for k, v in list(outs.items())[:2]))
        return
    d, a, b = sys.argv[2:5]
    A, B = (torch.load(os.path.join(d, x + ".pt")) for x in (a, b))
    same = 0
    for k in A:
        if k not in B:
            print(f"{k}: only in {a}")
            continue
        (x, rep_a), (y, rep_b) = A[k], B[k]
        eq = torch.equal(x, y)
        same += eq
        rep = (rep_a, rep_b)
        diff = 0.0 if eq else (x.double() - y.double()).abs().max().item()
        if not eq or not all(rep):
            print(f"{k}: {'EQUAL' if eq else 'DIFFER max %.3e' % diff} (self-repro {a} {rep[0]}, {b} {rep[1]})")
    print(f"bitcmp {a} vs {b}: {same}/{len(A)} cases bit-equal")


if __name__ == "__main__":
    main()
