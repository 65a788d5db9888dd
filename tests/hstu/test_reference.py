"""The PyTorch reference (also the CPU implementation) against an independent naive loop, on CPU.

The naive implementation below spells the rules of `hstu_attn.hstu_mask`'s docstring with scalar
Python arithmetic, one (query, key) pair at a time; a few masks are also pinned as literal matrices
(cross-checked against NVIDIA recsys-examples' causal context/target mask).
"""

import math

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_reference, hstu_attn_varlen_func, hstu_mask

# ------------------------------------------------------------------------------------------------
# Independent naive implementation
# ------------------------------------------------------------------------------------------------


def naive_allowed(i, j, lk, c, t, g, wl, wr):
    """Whether key-position row i may attend key j (scalar transcription of the documented rules)."""
    h = lk - t
    if j >= h:  # a target key: only target rows of the same group
        if i < h:
            same_group = False
        else:
            same_group = (i - h) // g == (j - h) // g
    else:
        same_group = True
    ti = i if i < h else h + (i - h) % g
    tj = j if j < h else h + (j - h) % g
    in_window = True
    if wl != -1 and tj < ti - wl:
        in_window = False
    if wr != -1 and tj > ti + wr:
        in_window = False
    if i < c and j < h:
        return True
    return in_window and same_group


def naive_hstu(q, k, v, lens_q, lens_k, starts_q, starts_k, nc, nt, g, window, alpha, rab, scaling):
    """Scalar loops in float64 over (sequence, head, row, key, dim)."""
    total_q, H, D = q.shape
    out = [[[0.0] * D for _ in range(H)] for _ in range(total_q)]
    ql, kl, vl = q.double().tolist(), k.double().tolist(), v.double().tolist()
    rl = None if rab is None else rab.double().tolist()
    wl, wr = window
    for b in range(len(lens_q)):
        lq, lk = lens_q[b], lens_k[b]
        for hh in range(H):
            for r in range(lq):
                i = r + lk - lq
                acc = [0.0] * D
                for j in range(lk):
                    if not naive_allowed(i, j, lk, nc[b], nt[b], g, wl, wr):
                        continue
                    qr, kj = ql[starts_q[b] + r][hh], kl[starts_k[b] + j][hh]
                    s = sum(a * bb for a, bb in zip(qr, kj))
                    if rl is not None:
                        s += rl[b][hh if len(rl[b]) > 1 else 0][i][j]
                    s *= alpha
                    p = s / (1.0 + math.exp(-s))
                    vj = vl[starts_k[b] + j][hh]
                    for d in range(D):
                        acc[d] += p * vj[d]
                out[starts_q[b] + r][hh] = [a / scaling for a in acc]
    return torch.tensor(out, dtype=torch.float64)


# ------------------------------------------------------------------------------------------------
# Pinned masks
# ------------------------------------------------------------------------------------------------


def _m(rows):
    return torch.tensor([[ch == "1" for ch in row] for row in rows])


def test_mask_causal_context_targets_groups_pinned():
    # L=8, 2 contexts, 3 targets (h=5), groups of 2: targets {5,6} and {7}.
    expected = _m(["11111000", "11111000", "11100000", "11110000", "11111000", "11111100", "11111110",
                   "11111001"])
    assert torch.equal(hstu_mask(8, 8, 2, 3, 2, (-1, 0)), expected)


def test_mask_local_targets_pinned():
    # L=8, 3 targets (g=1, h=5), causal local window 2: each target sees the last 2 history keys + itself.
    expected = _m(["10000000", "11000000", "11100000", "01110000", "00111000", "00011100", "00011010",
                   "00011001"])
    assert torch.equal(hstu_mask(8, 8, 0, 3, 1, (2, 0)), expected)


def test_mask_delta_q_causal_pinned():
    # 3 queries aligned to the last 3 of 5 keys.
    expected = _m(["11100", "11110", "11111"])
    assert torch.equal(hstu_mask(3, 5, window_size=(-1, 0)), expected)


def test_mask_local_two_sided_pinned():
    expected = _m(["1100", "1110", "0111", "0011"])
    assert torch.equal(hstu_mask(4, 4, window_size=(1, 1)), expected)


def test_mask_exhaustive_vs_naive():
    for lk in range(0, 8):
        for lq in range(0, lk + 1):
            for t in range(0, lk + 1):
                for c in range(0, lk - t + 1):
                    for g in (1, 2, 3):
                        for window in ((-1, -1), (-1, 0), (1, 0), (2, 1), (0, 2)):
                            got = hstu_mask(lq, lk, c, t, g, window)
                            exp = torch.tensor(
                                [[naive_allowed(r + lk - lq, j, lk, c, t, g, *window) for j in range(lk)]
                                 for r in range(lq)], dtype=torch.bool).view(lq, lk)
                            assert torch.equal(got, exp), (lq, lk, c, t, g, window)


# ------------------------------------------------------------------------------------------------
# Reference vs naive
# ------------------------------------------------------------------------------------------------

# name -> (window, use_contexts, use_targets, target_group_size)
MASKS = {
    "none": ((-1, -1), False, False, 1),
    "causal": ((-1, 0), False, False, 1),
    "local": ((2, 1), False, False, 1),
    "local_causal": ((3, 0), False, False, 1),
    "right_only": ((-1, 2), False, False, 1),
    "context": ((-1, 0), True, False, 1),
    "target": ((-1, 0), False, True, 1),
    "target_group": ((-1, 0), False, True, 2),
    "context_target": ((-1, 0), True, True, 2),
    "local_context_target": ((2, 0), True, True, 1),
    "local_target_group": ((3, 0), False, True, 3),
}


def make_case(seed, lens_k, delta_q, H, D, rab_heads, dtype=torch.float64, seqused=False, ctx=False, tgt=False):
    gen = torch.Generator().manual_seed(seed)
    lens_k = list(lens_k)
    lens_q = [max(lk - (lk // 3 + 1), 0) if delta_q else lk for lk in lens_k]
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k, dtype=torch.int32).cumsum(0).to(torch.int32)
    q = torch.randn(int(cu_q[-1]), H, D, generator=gen, dtype=dtype)
    k = torch.randn(int(cu_k[-1]), H, D, generator=gen, dtype=dtype)
    v = torch.randn(int(cu_k[-1]), H, D, generator=gen, dtype=dtype)
    max_q, max_k = max(lens_q + [0]), max(lens_k + [0])
    used_q, used_k = lens_q, lens_k
    seqused_q = seqused_k = None
    if seqused:
        used_k = [lk - (1 if lk > 2 else 0) for lk in lens_k]
        used_q = [min(lq, uk) - (1 if min(lq, uk) > 1 else 0) for lq, uk in zip(lens_q, used_k)]
        seqused_q = torch.tensor(used_q, dtype=torch.int32)
        seqused_k = torch.tensor(used_k, dtype=torch.int32)
    nt = [min(uk, 1 + b % 3) if tgt else 0 for b, uk in enumerate(used_k)]
    nc = [min(uk - t, 2) if ctx else 0 for uk, t in zip(used_k, nt)]
    rab = None
    if rab_heads:
        rab = torch.randn(len(lens_k), rab_heads, max_k, max_k, generator=gen, dtype=dtype)
    return dict(
        q=q, k=k, v=v, cu_q=cu_q, cu_k=cu_k, max_q=max_q, max_k=max_k, lens_q=used_q, lens_k=used_k,
        seqused_q=seqused_q, seqused_k=seqused_k, rab=rab, nc=nc, nt=nt,
        num_contexts=torch.tensor(nc, dtype=torch.int32) if ctx else None,
        num_targets=torch.tensor(nt, dtype=torch.int32) if tgt else None,
    )


def run_naive(cs, g, window, alpha, scaling):
    return naive_hstu(cs["q"], cs["k"], cs["v"], cs["lens_q"], cs["lens_k"], cs["cu_q"].tolist(),
                      cs["cu_k"].tolist(), cs["nc"], cs["nt"], g, window, alpha, cs["rab"], scaling)


def run_reference(cs, g, window, alpha, scaling=-1, **kw):
    return hstu_attn_reference(cs["q"], cs["k"], cs["v"], cs["cu_q"], cs["cu_k"], cs["max_q"], cs["max_k"],
                               cs["num_contexts"], cs["num_targets"], g, window, alpha, cs["rab"], scaling,
                               cs["seqused_q"], cs["seqused_k"], **kw)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("rab_heads", [0, 1, 2])
@pytest.mark.parametrize("delta_q", [False, True])
def test_reference_matches_naive(mask, rab_heads, delta_q):
    window, ctx, tgt, g = MASKS[mask]
    alpha = 1.0 if rab_heads != 1 else 0.37
    cs = make_case(sorted(MASKS).index(mask) * 10 + rab_heads * 2 + delta_q, [5, 0, 9, 1], delta_q, 2, 4, rab_heads, ctx=ctx,
                   tgt=tgt)
    ref = run_reference(cs, g, window, alpha)
    exp = run_naive(cs, g, window, alpha, max(cs["max_q"], 1))
    torch.testing.assert_close(ref, exp, rtol=1e-10, atol=1e-12)
    # The public API on CPU gives the same result.
    api = hstu_attn_varlen_func(cs["q"], cs["k"], cs["v"], cs["cu_q"], cs["cu_k"], cs["max_q"], cs["max_k"],
                                cs["num_contexts"], cs["num_targets"], g, window, alpha, cs["rab"])
    torch.testing.assert_close(api, exp, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mask", ["none", "causal", "context_target", "local_context_target"])
def test_reference_seqused_and_scaling(mask):
    window, ctx, tgt, g = MASKS[mask]
    cs = make_case(7, [6, 3, 0, 8], True, 3, 5, 3, seqused=True, ctx=ctx, tgt=tgt)
    ref = run_reference(cs, g, window, 0.5, scaling=13.0)
    exp = run_naive(cs, g, window, 0.5, 13.0)
    torch.testing.assert_close(ref, exp, rtol=1e-10, atol=1e-12)
    # Rows past seqused_q are zero.
    for b in range(4):
        start, used, end = int(cs["cu_q"][b]), cs["lens_q"][b], int(cs["cu_q"][b + 1])
        assert torch.all(ref[start + used : end] == 0)


def test_reference_all_empty():
    cs = make_case(0, [0, 0], False, 2, 4, 0)
    out = run_reference(cs, 1, (-1, 0), 1.0)
    assert out.shape == (0, 2, 4)


@pytest.mark.parametrize("used", [(0, 0), (0, 1)])
def test_reference_no_used_rows_still_differentiable(used):
    # seqused_q = 0 for every sequence: the output is all zeros, and its gradients are zeros, not an error.
    q, k, v = (torch.randn(1, 1, 32, dtype=torch.float64, requires_grad=True) for _ in range(3))
    cu = torch.tensor([0, 1], dtype=torch.int32)
    sq, sk = (torch.tensor([u], dtype=torch.int32) for u in used)
    out = hstu_attn_reference(q, k, v, cu, cu, 1, 1, window_size=(-1, 0), seqused_q=sq, seqused_k=sk)
    assert torch.all(out == 0) and out.requires_grad
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    for g in grads:
        assert g is not None and torch.all(g == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_reference_low_precision_close_to_fp64(dtype):
    cs = make_case(3, [17, 4, 30], False, 2, 16, 2)
    gold = run_reference(cs, 1, (-1, 0), 0.5)
    lo = {key: (val.to(dtype) if isinstance(val, torch.Tensor) and val.is_floating_point() else val)
          for key, val in cs.items()}
    for upcast in (True, False):
        out = run_reference(lo, 1, (-1, 0), 0.5, upcast=upcast)
        assert out.dtype == dtype
        tol = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 5e-3}[dtype]
        torch.testing.assert_close(out.double(), gold, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------------
# Gradients of the CPU op
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", ["none", "causal", "local", "context_target", "local_target_group"])
@pytest.mark.parametrize("rab_heads", [0, 1, 2])
def test_cpu_op_gradcheck(mask, rab_heads):
    window, ctx, tgt, g = MASKS[mask]
    cs = make_case(11, [4, 0, 5], mask == "causal", 2, 3, rab_heads, ctx=ctx, tgt=tgt)
    has_drab = rab_heads > 0
    inputs = [cs["q"].requires_grad_(), cs["k"].requires_grad_(), cs["v"].requires_grad_()]
    if has_drab:
        inputs.append(cs["rab"].requires_grad_())

    def fn(q, k, v, rab=None):
        return hstu_attn_varlen_func(q, k, v, cs["cu_q"], cs["cu_k"], cs["max_q"], cs["max_k"],
                                     cs["num_contexts"], cs["num_targets"], g, window, 0.7, rab, has_drab)

    assert torch.autograd.gradcheck(fn, tuple(inputs), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_cpu_op_gradient_matches_reference_autograd_fp32():
    cs = make_case(5, [9, 3, 12], True, 2, 8, 2, dtype=torch.float32, ctx=True, tgt=True)
    args = (cs["cu_q"], cs["cu_k"], cs["max_q"], cs["max_k"], cs["num_contexts"], cs["num_targets"], 2, (-1, 0),
            0.5)
    leaves = [t.clone().requires_grad_() for t in (cs["q"], cs["k"], cs["v"], cs["rab"])]
    hstu_attn_varlen_func(*leaves[:3], *args, leaves[3], True).square().sum().backward()
    leaves2 = [t.clone().requires_grad_() for t in (cs["q"], cs["k"], cs["v"], cs["rab"])]
    hstu_attn_reference(*leaves2[:3], *args, leaves2[3]).square().sum().backward()
    for a, b in zip(leaves, leaves2):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


def test_version():
    assert hstu_attn.__version__ == "0.1.0"
