"""CPU calibration of test_adam_bf16_state_gpu.py's bound (session 33, step36): two CPU modules with bf16 moments, the
second seeing output gradients perturbed by 1e-6 relative noise (what summation order and FMA contraction change in
the kernels), and one with fp32 moments; prints, per pooling, dim and table, the ratio of the two bf16 modules'
RMS / max distances from the fp32 module for w, m and v (the test allows 3x RMS). Run from the repository root with a
built wheel on PYTHONPATH: python -P tools/dynamicemb_dev/step36_run/calib_bf16_test.py"""
import sys, torch
sys.path.insert(0, 'tests/dynamicemb')
import test_adam_bf16_state_gpu as T
# CPU stand-in for "kernel vs CPU": module B sees output gradients perturbed by 1e-6 relative noise (fp32 summation
# order / FMA differences are ~1e-7), module A the exact ones; ref: fp32 moments.
def run(mods, steps, seed, pooling, noise):
    gen = torch.Generator().manual_seed(seed)
    w0 = [torch.randn(T.V, mods[0].dims[t], generator=gen) * 0.1 for t in range(2)]
    for m in mods:
        for t in range(2):
            m.set_rows(t, torch.arange(T.V), w0[t])
    for _ in range(steps):
        lengths = torch.randint(0, 7, (3 * 48,), generator=gen)
        offsets = torch.zeros(3 * 48 + 1, dtype=torch.int64); offsets[1:] = torch.cumsum(lengths, 0)
        ids = torch.randint(0, 400, (int(offsets[-1]),), generator=gen)
        hot = torch.rand(ids.numel(), generator=gen) < 0.3
        ids[hot] = torch.randint(0, 3, (int(hot.sum()),), generator=gen)
        R = None
        for i, m in enumerate(mods):
            out = m(ids, offsets)
            R = torch.randn(out.shape, generator=gen) if R is None else R
            Ri = R * (1 + noise * torch.randn(R.shape, generator=torch.Generator().manual_seed(i))) if i == 1 else R
            (out * Ri).sum().backward()
for pooling in ("sum", "none"):
    for dim in (16, 6):
        a = T.make("cpu", torch.bfloat16, pooling, dim); b = T.make("cpu", torch.bfloat16, pooling, dim)
        r = T.make("cpu", torch.float32, pooling, dim)
        run([a, b, r], 5, 11, pooling, 1e-6)
        for t in range(2):
            A, B, Rr = T.rows(a, t), T.rows(b, t), T.rows(r, t)
            out = []
            for k in range(3):
                d_ab = (B[k] - Rr[k]); d_ar = (A[k] - Rr[k])
                rms = float(d_ab.pow(2).mean().sqrt() / d_ar.pow(2).mean().sqrt())
                mx = float(d_ab.abs().max() / d_ar.abs().max())
                out.append(f"{'wmv'[k]} rms {rms:.2f} max {mx:.2f}")
            print(pooling, dim, t, "; ".join(out))
