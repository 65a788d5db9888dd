"""Checks of the row ops (gather_rows, pool_rows, segment_sum_rows; dynamicemb/csrc/ops/rows_ops.cc) against fp64
torch references, shared by test_rows_ops_cpu.py (the CPU kernels) and test_rows_ops_gpu.py (the CUDA kernels).
Fresh random inputs with out-of-range indices; on CUDA the op's outputs land in memory poisoned with NaN first."""

import torch

OPS = torch.ops.dynamicemb
KIND = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}  # the ops' out_kind codes (ValueKind)
UNIT = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 0.0}  # unit roundoff of a store
# half the spacing of the subnormals: the absolute error of a store below the normal range (fp16: 6.1e-5)
TINY = {torch.float16: 2.0 ** -25, torch.bfloat16: 2.0 ** -134, torch.float32: 0.0}


def poison(dev):
    """Fills the caching allocator's free blocks with NaN (CUDA), so an unwritten output entry shows."""
    if torch.device(dev).type == "cuda":
        x = torch.full((1 << 24,), float("nan"), device=dev)
        del x


def rand_index(g, n, m, dtype, dev, bad=True):
    idx = torch.randint(0, max(m, 1), (n,), generator=g)
    if bad and n:
        k = torch.randint(0, n, (max(n // 17, 1),), generator=g)
        idx[k] = torch.tensor([-1, m, m + 5, -7])[torch.arange(k.numel()) % 4]
    return idx.to(dtype).to(dev)


def check_close(out, ref, absref, what):
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{what}: non-finite entries (unwritten output?)"
    err = (out.double() - ref).abs()
    tol = 1e-5 * absref + 1e-30
    assert bool((err <= tol).all()), f"{what}: max error {float(err.max())}, max allowed near it {float(tol.max())}"


def check_gather(dev, n, m, d, dtype, idx_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    src = (torch.randn(m, d, generator=g) * 3).to(dtype).to(dev)
    idx = rand_index(g, n, m, idx_dtype, dev)
    poison(dev)
    out = OPS.gather_rows(src, idx)
    il = idx.long()
    valid = (il >= 0) & (il < m)
    ref = torch.where(valid[:, None], src[il.clamp(0, max(m - 1, 0))] if m else src.new_zeros(n, d), 0)
    assert out.dtype == src.dtype and out.shape == (n, d)
    assert torch.equal(out, ref.to(out.dtype)), f"gather_rows {dev} n={n} m={m} d={d} {dtype}: rows differ"


def check_gather_convert(dev, n, m, d, src_dtype, out_dtype, idx_dtype, seed):
    """gather_rows with out_kind: every row converted (round to nearest: torch's conversion, bit for bit)."""
    g = torch.Generator().manual_seed(seed)
    src = (torch.randn(m, d, generator=g) * 3).to(src_dtype).to(dev)
    idx = rand_index(g, n, m, idx_dtype, dev)
    poison(dev)
    out = OPS.gather_rows(src, idx, KIND[out_dtype])
    il = idx.long()
    valid = (il >= 0) & (il < m)
    ref = torch.where(valid[:, None], src.float()[il.clamp(0, max(m - 1, 0))] if m else src.new_zeros(n, d).float(),
                      0).to(out_dtype)
    assert out.dtype == out_dtype and out.shape == (n, d)
    assert torch.equal(out, ref), f"gather_rows {dev} {src_dtype} -> {out_dtype} d={d}: rows differ"


#: the (src, out) dtype pairs of the converting gather's tests
CONVERSIONS = [(torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.bfloat16),
               (torch.bfloat16, torch.float16)]


def check_gather_converts(dev, n, m, d, seed):
    """check_gather_convert for every pair of CONVERSIONS, int64 and int32 indices, and an empty index."""
    for i, (src, out) in enumerate(CONVERSIONS):
        check_gather_convert(dev, n, m, d, src, out, (torch.int64, torch.int32)[i % 2], seed=seed + i)
        check_gather_convert(dev, 0, m, d, src, out, torch.int32, seed=1)


def pool_reference(src, idx, offsets, w, mean):
    n, m = idx.numel(), src.shape[0]
    nb = offsets.numel() - 1
    off = offsets.long().clamp(0, n)
    bag = torch.searchsorted(off[1:].cpu(), torch.arange(n), right=True).to(src.device)
    il = idx.long()
    ok = (il >= 0) & (il < m) & (bag < nb)
    rows = src.double()[il.clamp(0, m - 1)] * (1.0 if w is None else w.double()[:, None])
    rows = torch.where(ok[:, None], rows, 0)
    ref = torch.zeros(nb, src.shape[1], dtype=torch.float64, device=src.device).index_add_(0, bag[ok], rows[ok])
    absref = torch.zeros_like(ref).index_add_(0, bag[ok], rows[ok].abs())
    if mean:
        ln = (off[1:] - off[:-1]).clamp(min=1).double()[:, None]
        ref, absref = ref / ln, absref / ln
    return ref, absref


def check_pool(dev, nb, m, d, weighted, mean, seed, max_len=9, batch=0, src_dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_len, (nb,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dev)
    n = int(lengths.sum())
    src = torch.randn(m, d, generator=g).to(src_dtype).to(dev)
    idx = rand_index(g, n, m, torch.int64, dev)
    w = torch.rand(n, generator=g).add_(0.5).to(dev) if weighted else None
    poison(dev)
    out = OPS.pool_rows(src, idx, offsets, w, mean, batch)
    ref, absref = pool_reference(src, idx, offsets, w, mean)
    if batch:  # bag f * batch + j -> row j * (nb // batch) + f
        ref = ref.view(nb // batch, batch, d).transpose(0, 1).reshape(nb, d)
        absref = absref.view(nb // batch, batch, d).transpose(0, 1).reshape(nb, d)
    assert out.dtype == torch.float32
    check_close(out, ref, absref, f"pool_rows {dev} nb={nb} d={d} weighted={weighted} mean={mean} batch={batch} "
                                  f"{src_dtype}")
    return src, idx, offsets, w


def segment_reference(grad, inv, nu, row_of, w):
    n, rows = inv.numel(), grad.shape[0]
    il = inv.long()
    r = torch.arange(n, device=grad.device) if row_of is None else row_of.long()
    ok = (il >= 0) & (il < nu) & (r >= 0) & (r < rows)
    terms = grad.double()[r.clamp(0, max(rows - 1, 0))] * (1.0 if w is None else w.double()[:, None])
    ref = torch.zeros(nu, grad.shape[1], dtype=torch.float64, device=grad.device).index_add_(0, il[ok], terms[ok])
    absref = torch.zeros_like(ref).index_add_(0, il[ok], terms[ok].abs())
    return ref, absref


def segment_inputs(dev, n, nu, d, pooled, weighted, idx_dtype, seed, hot=0):
    """Random entries: inverse with a few out-of-range values, some uniques without entries, and with `hot`
    entries of unique 0 (a long segment); pooled: a row_of into (n // 3 + 1) bag rows."""
    g = torch.Generator().manual_seed(seed)
    inv = torch.randint(0, max(nu, 1), (n,), generator=g)
    if hot and n:
        inv[torch.randperm(n, generator=g)[:min(hot, n)]] = 0
    if n:
        k = torch.randint(0, n, (max(n // 23, 1),), generator=g)
        inv[k] = torch.tensor([-1, nu, nu + 3])[torch.arange(k.numel()) % 3]
    rows = n // 3 + 1 if pooled else n
    grad = torch.randn(max(rows, 0), d, generator=g).to(dev)
    row_of = rand_index(g, n, rows, idx_dtype, dev) if pooled else None
    w = torch.rand(n, generator=g).add_(0.5).to(dev) if weighted else None
    return grad, inv.to(idx_dtype).to(dev), row_of, w


def check_segment(dev, n, nu, d, pooled, weighted, idx_dtype, seed, hot=0, out_dtype=torch.float32):
    """out_dtype fp16 / bf16: the fp32 sums rounded once (within the store's unit roundoff of them)."""
    grad, inv, row_of, w = segment_inputs(dev, n, nu, d, pooled, weighted, idx_dtype, seed, hot)
    poison(dev)
    out = OPS.segment_sum_rows(grad, inv, nu, row_of, w, KIND[out_dtype])
    assert out.dtype == out_dtype
    ref, absref = segment_reference(grad, inv, nu, row_of, w)
    what = f"segment_sum_rows {dev} n={n} nu={nu} d={d} pooled={pooled} w={weighted} {out_dtype}"
    if out_dtype == torch.float32:
        check_close(out, ref, absref, what)
    else:  # |round(s) - ref| <= u |s| + tiny + |s - ref|, |s - ref| <= 1e-5 absref
        assert torch.isfinite(out).all(), f"{what}: non-finite entries (unwritten output?)"
        err = (out.double() - ref).abs()
        tol = UNIT[out_dtype] * (ref.abs() + 1e-5 * absref) + 1e-5 * absref + TINY[out_dtype] + 1e-30
        worst = int((err - tol).argmax()) if err.numel() else 0
        assert bool((err <= tol).all()), (f"{what}: error {float(err.flatten()[worst])} > allowed "
                                          f"{float(tol.flatten()[worst])} at ref {float(ref.flatten()[worst])}")
        assert n == 0 or not torch.equal(out.double(), ref), f"{what}: no rounding seen"
    return out
