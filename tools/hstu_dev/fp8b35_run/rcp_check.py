# Exhaustive check: e4m3(RN32(x / d)) == e4m3(q1), q1 = RN32(q0 + RN32(x - q0 d) * y), q0 = RN32(x * y), y = RN32(1 / d)
# x: every finite bf16 with |x| <= amax; d = max(RN32(amax / 448), FLT_MIN) for every finite bf16 amax > 0 (the
# quantization's factors), the reciprocal form where d >= 2^-90 (below it the residual x - q0 d can underflow: the
# kernel divides), x's sign copied (x = -0). Prints the e4m3 mismatches (expected 0). Usage: python rcp_check.py
import numpy as np
import torch
bits = np.arange(65536, dtype=np.uint32) << 16
allx = bits.view(np.float32)
allx = allx[np.isfinite(allx)]
amax = allx[allx > 0]
d = np.maximum((amax / np.float32(448.0)).astype(np.float32), np.float32(np.finfo(np.float32).tiny)).astype(np.float32)
print("amax", d.size, "x", allx.size, flush=True)
def e4m3(v):
    t = torch.from_numpy(np.clip(v, -448, 448).astype(np.float32))
    return t.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
bad = 0; worst = []
x = allx.astype(np.float32)
x64 = x.astype(np.float64)
xs = np.sort(np.abs(x)); order = np.argsort(np.abs(x)); xsorted = x[order]
for i, di in enumerate(d):
    m = np.searchsorted(xs, amax[i], side="right")   # |x| <= amax: the block's values
    x = xsorted[:m]; x64 = x.astype(np.float64)
    ref = (x / di).astype(np.float32)                       # IEEE RN division (numpy float32)
    y = np.float32(np.float32(1.0) / di)
    q0 = (x * y).astype(np.float32)
    r = (x64 - q0.astype(np.float64) * np.float64(di)).astype(np.float32)  # fma(-q0, d, x): one rounding
    q1 = (q0.astype(np.float64) + r.astype(np.float64) * np.float64(y)).astype(np.float32)  # fma(r, y, q0)
    q1 = np.copysign(q1, x)                                  # the kernel copies x's sign (x = -0)
    if not (di >= np.float32(2.0 ** -90) and di != 1 and np.isfinite(di)):
        q1 = ref                                             # the kernel divides there
    a, b = e4m3(ref), e4m3(q1)
    nf = np.count_nonzero(q1 != ref)
    n = np.count_nonzero(a != b)
    if n or nf:
        bad += n
        if len(worst) < 5: worst.append((float(di), int(nf), int(n)))
    if i % 2000 == 0: print(i, bad, worst[:3], flush=True)
print("done: e4m3 mismatches", bad, "examples (d, float mismatches, e4m3 mismatches)", worst)
