"""FP8 attention (issue 36): descale layouts, quantization round trips, the FP8-emulating CPU path against fp64, the
descale errors, the ops' fake registrations; GPU tests (skipped without a GPU) for the CUDA path.

The error-relative rule for FP8: "same-dtype PyTorch" is the same emulation computed in bf16 (dequantized inputs,
S, SiLU and P·V in bf16, P rounded to FP8): |path - gold| <= 2 * |bf16 emulation - gold| + atol forward, 5x backward.
"""

import json
import os
import random
import re
import sys

import pytest
import torch

import hstu_attn
from hstu_attn import DeviceInputError, hstu_attn_varlen_func
from hstu_attn import _fp8
from hstu_attn._fp8 import (BLOCK_ROWS, DESCALE_MODES, FP8_DTYPE, dequantize_fp8, descale_shape,
                            hstu_attn_fp8_reference, hstu_attn_fp8_reference_backward, quantize_fp8)
from hstu_attn._reference import hstu_attn_reference

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_checks import (MASKS, assert_rel, capture_and_replay, lengths_args, make_case, max_err,  # noqa: E402
                        poison_allocator, quantized)

def i32(*vals, device="cpu"):
    return torch.tensor(vals, dtype=torch.int32, device=device)


# ------------------------------------------------------------------------------------------------ layouts
def test_descale_shapes():
    assert descale_shape("tensor", 1000, 4, 3) == (1,)
    assert descale_shape("head", 1000, 4, 3) == (4,)
    assert descale_shape("batch_head", 1000, 4, 3) == (3, 4)
    assert descale_shape("block", 1000, 4, 3) == (4, 1000 // BLOCK_ROWS + 3)
    with pytest.raises(ValueError, match="descale_mode"):
        descale_shape("row", 10, 1, 1)


@pytest.mark.parametrize("seed", range(6))
def test_block_columns_are_disjoint_and_in_range(seed):
    rng = random.Random(seed)
    lens = [rng.choice([0, 1, 127, 128, 129, 255, 256, 300, rng.randint(0, 700)]) for _ in range(rng.randint(1, 7))]
    total = sum(lens) + rng.choice([0, 5, 200])  # rows past the last sequence too
    cu = torch.tensor([0] + lens).cumsum(0).to(torch.int32)
    n_cols = descale_shape("block", total, 1, len(lens))[1]
    slots = _fp8._row_slots("block", cu, total).tolist()
    owner = {}
    for b in range(len(lens)):
        for r in range(int(cu[b]), int(cu[b + 1])):
            col = slots[r]
            assert 0 <= col < n_cols
            assert col == int(cu[b]) // BLOCK_ROWS + b + (r - int(cu[b])) // BLOCK_ROWS
            assert owner.setdefault(col, b) == b, "a block column shared by two sequences"
    assert all(s == n_cols for s in slots[int(cu[-1]):])  # the extra slot, dropped


# ------------------------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_quantize_round_trip_bound(mode, dtype):
    c = make_case(3, [130, 0, 5, 260], 3, 64, "none", dtype=dtype)
    x, cu = c["k"], c["cu_seqlens_k"]
    x = torch.cat([x, torch.zeros(4, 3, 64, dtype=dtype)])  # rows of no sequence (zero): scale 1 where alone
    x[:10, 1] *= 1e-3  # a small group: its own scale where the mode allows
    x8, s = quantize_fp8(x, cu, mode)
    assert x8.dtype == FP8_DTYPE and s.dtype == torch.float32
    assert tuple(s.shape) == descale_shape(mode, x.shape[0], 3, 4)
    assert torch.isfinite(s).all() and (s > 0).all()
    rows = _fp8._row_descale(mode, s, cu, x.shape[0], 3).unsqueeze(-1)
    back = dequantize_fp8(x8, s, cu, mode)
    xf = x.float()
    # e4m3: 3 mantissa bits, so round to nearest is within 2^-4 of |x|, and within 2^-10 * descale in the
    # subnormal range; the factor is amax / 448, so every group's largest element maps to +-448.
    bound = 2.0 ** -4 * xf.abs() + 2.0 ** -10 * rows + 1e-30
    assert ((back - xf).abs() <= bound).all()
    assert (x8.float().abs() <= 448).all()
    if mode == "tensor":
        assert x8.float().abs().max().item() == 448
    # An all-zero group has factor 1.0.
    if mode == "block":
        used = set(_fp8._row_slots("block", cu, x.shape[0])[: int(cu[-1])].tolist())
        unused = [j for j in range(s.shape[1]) if j not in used]
        assert unused and (s[:, unused] == 1).all()
    if mode == "batch_head":
        assert (s[1] == 1).all()  # the empty sequence


def _check_rows_before_first_sequence(device):
    """Rows before cu_seqlens[0] belong to no sequence: they take the extra slot (factor 1.0, like rows past the
    last sequence), and every sequence's factors and codes are those of the same rows without the leading ones."""
    torch.manual_seed(11)
    c = make_case(5, [130, 0, 260, 7], 3, 64, "none", device=device)
    x, cu = c["k"], c["cu_seqlens_k"]
    for pad in (1, 77, 128, 300):
        lead = torch.randn(pad, 3, 64, device=device, dtype=x.dtype) * 1e3  # large: would dominate a shared factor
        xp, cup = torch.cat([lead, x]), cu + pad
        for mode in ("batch_head", "block"):
            x8, s = quantize_fp8(x, cu, mode)
            x8p, sp = quantize_fp8(xp, cup, mode)
            assert torch.isfinite(sp).all() and (sp > 0).all()
            rows = _fp8._row_descale(mode, s, cu, x.shape[0], 3)
            rowsp = _fp8._row_descale(mode, sp, cup, xp.shape[0], 3)
            n = int(cu[-1])
            assert torch.equal(rowsp[pad:pad + n], rows[:n]), (mode, pad)
            assert torch.equal(x8p[pad:pad + n].view(torch.uint8), x8[:n].view(torch.uint8)), (mode, pad)
            assert (rowsp[:pad] == 1).all(), (mode, pad)  # the extra slot
            if mode == "block":
                slots = _fp8._row_slots(mode, cup, xp.shape[0])
                assert (slots[:pad] == sp.shape[1]).all()


def test_quantize_rows_before_first_sequence():
    _check_rows_before_first_sequence("cpu")


@pytest.mark.gpu
def test_cuda_quantize_rows_before_first_sequence():
    _check_rows_before_first_sequence("cuda")


def test_quantize_on_meta_and_non_finite_input():
    x = torch.randn(20, 2, 32)
    x[3, 1, 4] = float("inf")
    _, s = quantize_fp8(x, i32(0, 20), "head")
    assert torch.isfinite(s[0]) and not torch.isfinite(s[1])  # rejected later by the attention call
    x8, s = quantize_fp8(torch.empty(300, 2, 32, device="meta"), torch.empty(4, dtype=torch.int32, device="meta"),
                         "block")
    assert x8.dtype == FP8_DTYPE and tuple(s.shape) == (2, 300 // 128 + 3)


# ------------------------------------------------------------------------------------------------ CPU path vs fp64
def run_path(c, q8s, scales, mode, alpha, out_dtype=torch.bfloat16):
    return hstu_attn_varlen_func(*q8s, alpha=alpha, q_descale=scales[0], k_descale=scales[1], v_descale=scales[2],
                                 descale_mode=mode, out_dtype=out_dtype, **lengths_args(c))


@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("D", [64, 128, 256])
def test_cpu_path_matches_fp64(mode, mask, D):
    seed = DESCALE_MODES.index(mode) * 100 + sorted(MASKS).index(mask) * 10 + D // 64
    c = make_case(seed, [40, 0, 150, 17], 2, D, mask)
    alpha = D ** -0.5
    q8s, scales = quantized(c, mode)
    ref_args = (*q8s, *scales, mode)
    out = run_path(c, q8s, scales, mode, alpha)
    assert out.dtype == torch.bfloat16 and out.shape == c["q"].shape and not torch.isnan(out).any()
    gold = hstu_attn_fp8_reference(*ref_args, alpha=alpha, out_dtype=torch.float64, compute_dtype=torch.float64,
                                   **lengths_args(c))
    low = hstu_attn_fp8_reference(*ref_args, alpha=alpha, out_dtype=torch.float64, compute_dtype=torch.bfloat16,
                                  **lengths_args(c))
    assert_rel("forward (FP8 P, fp64 gold)", out, gold, low, 2)
    # The same rounding points in fp32: only the bf16 output rounding (2^-9) and rare FP8 rounding flips remain.
    assert max_err(out, gold) <= 2.0 ** -7 * gold.abs().max().item() + 1e-6
    # Against the exact dequantized math (P not rounded): FP8's P costs a bounded error, like the bf16 emulation's.
    exact = hstu_attn_fp8_reference(*ref_args, alpha=alpha, out_dtype=torch.float64, compute_dtype=torch.float64,
                                    p_dtype=None, **lengths_args(c))
    assert_rel("forward (exact gold)", out, exact, low, 2)
    assert max_err(out, exact) <= 0.08 * exact.abs().max().item() + 1e-6

    # Backward: the gradients with respect to the dequantized inputs.
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    dq, dk, dv = torch.ops.hstu_attn.fp8_bwd(
        dout, *q8s, *scales, DESCALE_MODES.index(mode), 0, c["cu_seqlens_q"], c["cu_seqlens_k"], c["max_seqlen_q"],
        c["max_seqlen_k"], c["num_contexts"], c["num_targets"], c["target_group_size"], *c["window_size"], alpha,
        None, float(c["max_seqlen_q"]), None, None, False, 0)
    gold_g = hstu_attn_fp8_reference_backward(dout.double(), *ref_args, None, compute_dtype=torch.float64,
                                              alpha=alpha, **lengths_args(c))
    deq = [dequantize_fp8(x8, s, cu, mode, torch.bfloat16).requires_grad_() for x8, s, cu in
           zip(q8s, scales, (c["cu_seqlens_q"], c["cu_seqlens_k"], c["cu_seqlens_k"]))]
    low_out = hstu_attn_reference(*deq, alpha=alpha, upcast=False, **lengths_args(c))
    low_g = torch.autograd.grad(low_out, deq, dout)
    for name, g, gg, gl in zip(("dq", "dk", "dv"), (dq, dk, dv), gold_g, low_g):
        assert g.dtype == torch.bfloat16 and not torch.isnan(g).any()
        assert_rel(name, g, gg, gl, 5)


@pytest.mark.parametrize("mode", ["head", "block"])
def test_fp8_quant_mode_straight_through_gradients(mode):
    c = make_case(11, [33, 70], 2, 64, "causal", delta_q=False)
    leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    out = hstu_attn_varlen_func(*leaves, alpha=0.125, fp8_quant_mode=mode, **lengths_args(c))
    assert out.dtype == torch.bfloat16
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, leaves, dout)
    q8s, scales = quantized(c, mode)
    torch.testing.assert_close(out, run_path(c, q8s, scales, mode, 0.125), rtol=0, atol=0)
    want = hstu_attn_fp8_reference_backward(dout, *q8s, *scales, mode, None, alpha=0.125, **lengths_args(c))
    for g, w in zip(grads, want):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_cpu_path_with_rab_seqused_float16_out_and_gr_mask():
    c = make_case(5, [20, 9], 2, 64, "local_context_target")
    q8s, scales = quantized(c, "batch_head")
    rab = torch.randn(2, 1, 20, 20, dtype=torch.float16)
    su = i32(int(c["cu_seqlens_q"][1]) - 1, int(c["cu_seqlens_q"][2] - c["cu_seqlens_q"][1]))
    su_k = i32(19, 9)
    kw = dict(lengths_args(c), alpha=0.3, rab=rab, seqused_q=su, seqused_k=su_k)
    for conv in ("nvidia", "meta_gr"):
        out = hstu_attn_varlen_func(*q8s, q_descale=scales[0], k_descale=scales[1], v_descale=scales[2],
                                    descale_mode="batch_head", out_dtype=torch.float16, mask_convention=conv, **kw)
        gold = hstu_attn_fp8_reference(*q8s, *scales, "batch_head", out_dtype=torch.float64,
                                       compute_dtype=torch.float64, mask_convention=conv, **kw)
        assert out.dtype == torch.float16
        assert max_err(out, gold) <= 2e-3 * gold.abs().max().item() + 1e-6
        assert (out[su[0]:int(c["cu_seqlens_q"][1])] == 0).all()  # rows past seqused_q


# ------------------------------------------------------------------------------------------------ errors
@pytest.fixture
def small():
    c = make_case(2, [10, 6], 2, 32, "causal")
    q8s, scales = quantized(c, "head")
    return c, q8s, scales


def call(c, q8s, scales, **kw):
    args = dict(q_descale=scales[0], k_descale=scales[1], v_descale=scales[2], descale_mode="head")
    args.update(kw)
    return hstu_attn_varlen_func(*q8s, **lengths_args(c), **args)


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_scale_values(small, which, bad):
    c, q8s, scales = small
    scales = [s.clone() for s in scales]
    scales[which][1] = bad
    name = ("q_descale", "k_descale", "v_descale")[which]
    with pytest.raises(ValueError, match=rf"{name}: expected finite descale factors > 0, got {name}\[1\] = "):
        call(c, q8s, scales)


def test_bad_scale_shapes_dtypes_and_inputs(small):
    c, q8s, scales = small
    qs, ks, vs = scales
    with pytest.raises(ValueError, match=r"k_descale: expected shape \(2,\) for descale_mode='head'"):
        call(c, q8s, (qs, ks.view(1, 2), vs))
    with pytest.raises(ValueError, match=r"q_descale: expected shape \(1,\) for descale_mode='tensor'"):
        call(c, q8s, scales, descale_mode="tensor")
    with pytest.raises(TypeError, match="v_descale: expected dtype torch.float32"):
        call(c, q8s, (qs, ks, vs.double()))
    with pytest.raises(TypeError, match="k_descale: expected a float32 torch.Tensor"):
        call(c, q8s, (qs, None, vs))
    with pytest.raises(ValueError, match="descale_mode: expected one of"):
        call(c, q8s, scales, descale_mode="row")
    with pytest.raises(TypeError, match="out_dtype: expected torch.bfloat16 or torch.float16"):
        call(c, q8s, scales, out_dtype=torch.float32)
    with pytest.raises(TypeError, match="k: expected dtype torch.float8_e4m3fn"):
        call(c, (q8s[0], c["k"], q8s[2]), scales)
    with pytest.raises(TypeError, match="v: expected dtype torch.float8_e4m3fn"):
        call(c, (q8s[0], q8s[1], q8s[2].to(torch.float8_e5m2)), scales)
    with pytest.raises(ValueError, match="q: expected an FP8 tensor without requires_grad"):
        call(c, (q8s[0].clone().requires_grad_(), q8s[1], q8s[2]), scales)
    with pytest.raises(ValueError, match="has_drab: expected False with FP8"):
        rab = torch.randn(2, 2, 10, 10, dtype=torch.bfloat16)
        call(c, q8s, scales, rab=rab, has_drab=True)
    with pytest.raises(TypeError, match=r"rab: expected dtype torch.bfloat16 \(the dtype of out\)"):
        call(c, q8s, scales, rab=torch.randn(2, 2, 10, 10))
    with pytest.raises(ValueError, match="fp8_quant_mode: expected None when q_descale"):
        call(c, q8s, scales, fp8_quant_mode="head")
    with pytest.raises(TypeError, match="q: expected a float16/bfloat16 tensor with fp8_quant_mode"):
        hstu_attn_varlen_func(*q8s, fp8_quant_mode="head", **lengths_args(c))
    with pytest.raises(TypeError, match="q_descale: expected q_descale, k_descale and v_descale"):
        hstu_attn_varlen_func(*q8s, **lengths_args(c))
    # The common checks still apply (window, lengths), named as for bf16 inputs.
    with pytest.raises(ValueError, match="cu_seqlens_q: expected non-decreasing offsets"):
        call(dict(c, cu_seqlens_q=i32(0, 12, 11)), q8s, scales)


# ------------------------------------------------------------------------------------------------ ops
def test_fake_registrations_and_opcheck(small):
    c, q8s, scales = small
    args = (*q8s, *scales, 1, 0, c["cu_seqlens_q"], c["cu_seqlens_k"], c["max_seqlen_q"], c["max_seqlen_k"], None,
            None, 1, -1, 0, 0.5, None, 10.0, None, None)
    utils = ("test_faketensor",)  # (test_schema compares inputs with ops that float8 tensors lack on CPU)
    torch.library.opcheck(torch.ops.hstu_attn.fp8_fwd.default, args + (0,), test_utils=utils)
    dout = torch.randn(c["q"].shape, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.hstu_attn.fp8_bwd.default, (dout,) + args + (False, 0), test_utils=utils)
    torch.library.opcheck(torch.ops.hstu_attn.fp8_check_scales.default, tuple(scales),
                          test_utils=("test_schema", "test_faketensor"))
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in args]
    out = torch.ops.hstu_attn.fp8_fwd(*meta, 0)
    assert out.device.type == "meta" and out.dtype == torch.bfloat16 and out.shape == c["q"].shape


def test_torch_compile_fullgraph_fp8_call(small):
    c, q8s, scales = small
    cu_q, cu_k = c["cu_seqlens_q"], c["cu_seqlens_k"]

    def f(q8, k8, v8, qs, ks, vs):
        out = hstu_attn_varlen_func(q8, k8, v8, cu_q, cu_k, c["max_seqlen_q"], c["max_seqlen_k"],
                                    window_size=(-1, 0), alpha=0.5, q_descale=qs, k_descale=ks, v_descale=vs,
                                    descale_mode="head")
        return out.float() * 2.0

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(*q8s, *scales), f(*q8s, *scales), rtol=0, atol=0)


def test_fp8_quant_mode_one_tensor_in_several_slots():
    """Self-attention passes the same cu_seqlens for q and k (and may pass q = k = v): the straight-through
    Function takes each tensor once (torch.compile refuses a duplicate input) and sums the gradients of a tensor
    used as q, k and v; compiled and eager agree."""
    c = make_case(12, [70, 40], 2, 64, "causal", delta_q=False)
    cu, L = c["cu_seqlens_q"], c["max_seqlen_q"]

    def f(x):
        return hstu_attn_varlen_func(x, x, x, cu, cu, L, L, window_size=(-1, 0), alpha=0.2,
                                     fp8_quant_mode="block").float()

    x = c["q"].clone().requires_grad_()
    out = f(x)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(12))
    (dx,) = torch.autograd.grad(out, [x], dout)
    leaves = [c["q"].clone().requires_grad_() for _ in range(3)]
    parts = torch.autograd.grad(hstu_attn_varlen_func(*leaves, cu, cu, L, L, window_size=(-1, 0), alpha=0.2,
                                                      fp8_quant_mode="block").float(), leaves, dout)
    torch.testing.assert_close(dx, parts[0] + parts[1] + parts[2], rtol=0, atol=0)
    xc = c["q"].clone().requires_grad_()
    outc = torch.compile(f, fullgraph=True, backend="aot_eager")(xc)
    torch.testing.assert_close(outc, out, rtol=0, atol=0)
    torch.testing.assert_close(torch.autograd.grad(outc, [xc], dout)[0], dx, rtol=0, atol=0)


def test_check_codes_and_float_records():
    from hstu_attn import _checks
    assert _checks.ARGS[_checks.ARG_K_DESCALE] == "k_descale" and _checks.ARG_K_DESCALE in _checks.FLOAT_ARGS
    assert "inf" in _checks.RULES[_checks.RULE_SCALE]("v_descale", 3, float("inf"), 0)


# ------------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("mask", ["causal", "context_target_group", "local"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_cuda_dequant_path_matches_its_emulating_reference(mode, mask, D):
    torch.backends.cuda.matmul.allow_tf32 = False
    c = make_case(D + len(mask), [300, 0, 1000, 77], 2, D, mask, device="cuda")
    alpha = D ** -0.5
    q8s, scales = quantized(c, mode)
    cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in c.items()}
    q8c, sc = [t.cpu() for t in q8s], [s.cpu() for s in scales]
    # The device quantization is the host's, bit for bit.
    cpu_q8s, cpu_scales = quantized(cpu, mode)
    for a, b in zip(q8s + scales, cpu_q8s + cpu_scales):
        assert torch.equal(a.cpu().view(torch.uint8) if a.dtype == FP8_DTYPE else a.cpu(),
                           b.view(torch.uint8) if b.dtype == FP8_DTYPE else b)
    poison_allocator(8 * c["q"].numel() * 2)
    with hstu_attn._ops.kernel_options(fp8_kernel=False):  # (the FP8 kernel's tests are below)
        out = run_path(c, q8s, scales, mode, alpha)
    assert not torch.isnan(out).any()
    # The dequantize path: inputs dequantized to bf16, P rounded to bf16 (the bf16 kernels); gold in fp64 with those
    # roundings.
    today = dict(dequant_dtype=torch.bfloat16, p_dtype=torch.bfloat16, out_dtype=torch.float64)
    gold = hstu_attn_fp8_reference(*q8c, *sc, mode, alpha=alpha, compute_dtype=torch.float64, **today,
                                   **lengths_args(cpu))
    low = hstu_attn_fp8_reference(*q8c, *sc, mode, alpha=alpha, compute_dtype=torch.bfloat16, **today,
                                  **lengths_args(cpu))
    assert_rel("forward (dequantize path's rounding)", out.cpu(), gold, low, 2)
    # And the FP8 kernel's emulation (the CPU path) is close to the dequantize path.
    emul = run_path(cpu, q8c, sc, mode, alpha)
    assert max_err(out.cpu(), emul) <= 0.08 * gold.abs().max().item() + 1e-6
    # Backward through fp8_quant_mode: dq/dk/dv with respect to the dequantized inputs.
    # (fp8_bwd=False: the dequantized backward, which the default replaces at D = 128 by the Hopper FP8 backward,
    # tested in test_fp8_bwd.py)
    leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    with hstu_attn._ops.kernel_options(fp8_bwd=False):
        out2 = hstu_attn_varlen_func(*leaves, alpha=alpha, fp8_quant_mode=mode, **lengths_args(c))
    dout = torch.randn_like(out2)
    poison_allocator(8 * c["q"].numel() * 2)
    grads = torch.autograd.grad(out2, leaves, dout)
    gold_g = hstu_attn_fp8_reference_backward(dout.cpu().double(), *q8c, *sc, mode, None,
                                              compute_dtype=torch.float64, alpha=alpha, **lengths_args(cpu))
    deq = [dequantize_fp8(x8, s, cu, mode, torch.bfloat16).requires_grad_() for x8, s, cu in
           zip(q8c, sc, (cpu["cu_seqlens_q"], cpu["cu_seqlens_k"], cpu["cu_seqlens_k"]))]
    low_g = torch.autograd.grad(hstu_attn_reference(*deq, alpha=alpha, upcast=False, **lengths_args(cpu)), deq,
                                dout.cpu())
    for name, g, gg, gl in zip(("dq", "dk", "dv"), grads, gold_g, low_g):
        assert not torch.isnan(g).any(), name
        assert_rel(name, g.cpu(), gg, gl, 5)


def fp8_kernel_runs(D):
    """The Hopper FP8 forward takes calls of head dim D here by default (sm_90 device, unit in this build)."""
    return torch.cuda.is_available() and _fp8._fp8_kernel_applies(
        torch.empty(1, 1, D, dtype=FP8_DTYPE, device="cuda"), None, 0)


def dev_build():
    """This build holds the FP8 kernels' timing-only variants (`--define hstu_dev=1`)."""
    return json.loads(torch.ops.hstu_attn.compiled_kernels())["dev"] is True


def fp8_path(kernel, **switches):
    """kernel_options selecting the FP8 kernel (True, the default; skips where it cannot run) or the dequantize
    path (and any other kernel_options switches)."""
    if kernel and not fp8_kernel_runs(128):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    return hstu_attn._ops.kernel_options(fp8_kernel=kernel, **switches)


def check_fp8_kernel(c, mode, alpha, out_dtype=torch.bfloat16, switches=None, **kw):
    """The FP8 kernel's output (poisoned allocations first) against its fp64 emulation: 2x the error of the same
    emulation computed in bf16, and within 5 % of the output's scale. (Not the CPU path's 2^-7: the kernel's SiLU is
    tanh.approx-based, so about 1 % of the P elements round to the neighbouring e4m3 value (1/16 to 1/8 of P away);
    the device diagnosis measured 0.4-1.8 % of max |out| against the fp64 emulation; at D <= 128 half of the
    unmasked tiles' scores take a half2 polynomial SiLU of about the bf16 SiLU's error instead.)"""
    q8s, scales = quantized(c, mode)
    cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in c.items()}
    q8c, sc = [t.cpu() for t in q8s], [s.cpu() for s in scales]
    kw_cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    poison_allocator(16 * c["q"].numel() * 2)
    with fp8_path(True, **(switches or {})):
        out = hstu_attn_varlen_func(*q8s, alpha=alpha, q_descale=scales[0], k_descale=scales[1],
                                    v_descale=scales[2], descale_mode=mode, out_dtype=out_dtype, **lengths_args(c),
                                    **kw)
    assert out.dtype == out_dtype and not torch.isnan(out).any()
    gold = hstu_attn_fp8_reference(*q8c, *sc, mode, alpha=alpha, out_dtype=torch.float64,
                                   compute_dtype=torch.float64, **lengths_args(cpu), **kw_cpu)
    low = hstu_attn_fp8_reference(*q8c, *sc, mode, alpha=alpha, out_dtype=torch.float64,
                                  compute_dtype=torch.bfloat16, **lengths_args(cpu), **kw_cpu)
    assert_rel(f"FP8 kernel ({mode})", out.cpu(), gold, low, 2)
    # A local window leaves few keys per query (window 7 here, plus contexts / targets): one P element one e4m3 step
    # (1/8) away on a dominant term moves the output by up to 1/8 of that term; measured 5.4 % of max |out| on the
    # H200 (session 7, the 128- and the 192-key kernels alike), within 2x the bf16 emulation's error above.
    cap = 0.05 if c["window_size"][0] < 0 else 0.08
    assert max_err(out.cpu(), gold) <= cap * gold.abs().max().item() + 1e-6
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("D", [64, 128, 256])
def test_cuda_fp8_kernel_matches_emulating_reference(mode, mask, D):
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 1000 + DESCALE_MODES.index(mode) * 100 + sorted(MASKS).index(mask) * 10 + D // 64
    # Jagged, delta-q, an empty sequence, lengths across 128-row blocks and KV tiles (block factors change), key
    # offsets that are not multiples of 16 (Vt's sequence starts are aligned for TMA: unaligned ones crashed).
    c = make_case(seed, [300, 0, 700, 77, 129], 2, D, mask, device="cuda")
    check_fp8_kernel(c, mode, D ** -0.5)


@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 128, 256])
def test_cuda_fp8_kernel_seqused_float16_out_and_gr_mask(D):
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    c = make_case(70 + D, [260, 140, 33], 3, D, "local_context_target", device="cuda")
    cu_q, cu_k = c["cu_seqlens_q"].tolist(), c["cu_seqlens_k"].tolist()
    su_q = i32(*[max(0, cu_q[b + 1] - cu_q[b] - 5) for b in range(3)], device="cuda")
    su_k = i32(*[cu_k[b + 1] - cu_k[b] - 2 for b in range(3)], device="cuda")
    for conv in ("nvidia", "meta_gr"):
        out = check_fp8_kernel(c, "block", 0.2, torch.float16, seqused_q=su_q, seqused_k=su_k, mask_convention=conv)
        assert (out[cu_q[1] - 5:cu_q[1]] == 0).all()  # rows past seqused_q


@pytest.mark.gpu
def test_cuda_fp8_kernel_vs_dequantize_path_and_rab_fallback():
    if not fp8_kernel_runs(128):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    c = make_case(77, [513, 64], 2, 128, "causal", device="cuda")
    q8s, scales = quantized(c, "batch_head")
    kernel = run_path(c, q8s, scales, "batch_head", 0.1)  # (the default: causal, no rab)
    with hstu_attn._ops.kernel_options(fp8_kernel=False):
        deq = run_path(c, q8s, scales, "batch_head", 0.1)
    # Different P roundings (e4m3 vs bf16): close, not equal.
    assert 0 < max_err(kernel, deq) <= 0.08 * deq.float().abs().max().item()
    # rab: the dequantize path (the FP8 kernel has no rab), equal to it under fp8_kernel=False.
    rab = torch.randn(2, 1, 513, 513, dtype=torch.bfloat16, device="cuda")
    args = dict(q_descale=scales[0], k_descale=scales[1], v_descale=scales[2], descale_mode="batch_head", rab=rab,
                alpha=0.1, **lengths_args(c))
    with_rab = hstu_attn_varlen_func(*q8s, **args)
    with hstu_attn._ops.kernel_options(fp8_kernel=False):
        torch.testing.assert_close(with_rab, hstu_attn_varlen_func(*q8s, **args), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_cuda_fp8_kernel_bn192(mode, mask):
    """kernel_options(fp8_bn192=True): the D = 128 kernel with 192-key tiles (Vt in two panels, m64n192k32 for S)
    meets the error rule against the fp64 emulation for every mask and the descale modes of one factor per CTA, on
    lengths ending inside both Vt panels of a tile (first / last 64 keys) and on several tiles; its late P
    conversion (with the tanh SiLU) differs only by P roundings; block mode (factors per 128 keys) and the opt-in
    schedules keep the 128-key kernel, bitwise the default's output."""
    if not fp8_kernel_runs(128):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 3000 + DESCALE_MODES.index(mode) * 10 + sorted(MASKS).index(mask)
    c = make_case(seed, [300, 0, 700, 77, 129, 450, 193], 2, 128, mask, device="cuda")
    q8s, scales = quantized(c, mode)
    wide = check_fp8_kernel(c, mode, 128 ** -0.5, switches=dict(fp8_bn192=True))

    def run(**switches):
        poison_allocator(16 * c["q"].numel() * 2)
        with hstu_attn._ops.kernel_options(**switches):
            return fp8_kernel_names(lambda: run_path(c, q8s, scales, mode, 128 ** -0.5))

    _, names = run(fp8_bn192=True)
    bn, form = (128, 1) if mode == "block" else (192, 2)  # (Fp8Silu: the 192-key tiles' mix has 3 / 8 half2 words)
    assert any(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*128\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*0\s*,\s*{form}\s*>",
                         n) for n in names), names
    late, _ = run(fp8_bn192=True, fp8_early_pack=False)  # (the late order runs the tanh SiLU: other P roundings)
    assert max_err(late, wide) <= 0.05 * wide.abs().max().item(), "fp8_bn192 with fp8_early_pack=False differs"
    default, _ = run()
    sched, _ = run(fp8_bn192=True, fp8_sched=True)
    assert torch.equal(sched, default), "fp8_bn192 under fp8_sched=True: expected the 128-key kernel"
    if mode == "block":
        assert torch.equal(wide, default), "fp8_bn192 in block mode: expected the 128-key kernel"
    if mode == "head" and mask == "local_context_target":  # seqused, fp16 out, GR mask
        cu_q, cu_k = c["cu_seqlens_q"].tolist(), c["cu_seqlens_k"].tolist()
        su_q = i32(*[max(0, cu_q[b + 1] - cu_q[b] - 5) for b in range(7)], device="cuda")
        su_k = i32(*[max(0, cu_k[b + 1] - cu_k[b] - 2) for b in range(7)], device="cuda")
        for conv in ("nvidia", "meta_gr"):
            check_fp8_kernel(c, mode, 0.2, torch.float16, switches=dict(fp8_bn192=True), seqused_q=su_q,
                             seqused_k=su_k, mask_convention=conv)


@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 128, 256])
def test_cuda_fp8_fwd_diag_variants_run_their_kernels(D):
    """kernel_options(fp8_fwd_diag=1 / 2 / 3) (private, timing-only, wrong outputs by design) launch their own grid
    kernel (also under fp8_sched=True and fp8_bn192=True; 1: no NaN, every row written over the poison) and leave
    the default kernel's output as it was."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    if not dev_build():
        pytest.skip("the timing-only variants are built in dev builds only (--define hstu_dev=1)")
    c = make_case(4000 + D, [700, 0, 450, 77, 1030], 2, D, "causal", device="cuda")
    q8s, scales = quantized(c, "tensor")

    def run(**switches):
        poison_allocator(16 * c["q"].numel() * 2)
        with hstu_attn._ops.kernel_options(**switches):
            return fp8_kernel_names(lambda: run_path(c, q8s, scales, "tensor", D ** -0.5))

    before, _ = run()
    bn = 64 if D == 256 else 128
    for diag in (1, 2, 3):
        out, names = run(fp8_fwd_diag=diag, fp8_sched=True, fp8_bn192=True)
        pattern = rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*{diag}\s*,\s*0\s*[,>]"
        assert any(re.search(pattern, n) for n in names), names
        if diag == 1:  # (P = h + h h, rounded to e4m3: finite for these inputs; every row written)
            assert not torch.isnan(out).any()
    after, _ = run()
    assert torch.equal(after, before)


# (fp8_silu, descale mode, mask, D): each form at every head dim on causal tiles; in the other modes and masks the
# form that is not the head dim's default (the default's run in test_cuda_fp8_kernel_matches_emulating_reference).
SILU_CASES = [(silu, "tensor", "causal", D) for silu in (1, 2) for D in (64, 128, 256)]
SILU_CASES += [(2 if D == 256 else 1, mode, mask, D) for mode, mask in (("block", "causal"), ("head", "none"),
                                                                          ("batch_head", "context_target_group"))
               for D in (64, 128, 256)]


def fp8_silu_default(D):
    """The SiLU form (Fp8Silu in hstu_fwd_fp8_sm90_kernel.cuh) of the FP8 forward's default: 1 the half2 mix at
    D <= 128, 0 the tanh form at D = 256; kernel_options(fp8_silu=form + 1) selects a form."""
    return 1 if D <= 128 else 0


@pytest.mark.gpu
@pytest.mark.parametrize("silu,mode,mask,D", SILU_CASES)
def test_cuda_fp8_silu_forms_match_emulating_reference(silu, mode, mask, D):
    """kernel_options(fp8_silu=1 / 2 / 3): the FP8 forward with the SiLU of unmasked tiles in the tanh form, half of
    each thread's scores in half2 arithmetic (no MUFU; the default at D <= 128) meets the error rule
    against the fp64 emulation; the head dim's default form gives bitwise the default's output (its kernel named
    so), another form launches its own grid kernel (also under fp8_sched / fp8_bn192) and differs from the default
    only by P roundings."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 5000 + 100 * silu + DESCALE_MODES.index(mode) * 10 + sorted(MASKS).index(mask) + D
    c = make_case(seed, [700, 0, 450, 77, 1030], 2, D, mask, device="cuda")
    out = check_fp8_kernel(c, mode, D ** -0.5, switches=dict(fp8_silu=silu))
    q8s, scales = quantized(c, mode)

    def run(**switches):
        poison_allocator(16 * c["q"].numel() * 2)
        with hstu_attn._ops.kernel_options(**switches):
            return fp8_kernel_names(lambda: run_path(c, q8s, scales, mode, D ** -0.5))

    def named(names, form):
        bn = 64 if D == 256 else 128
        return any(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*0\s*,\s*"
                             rf"{form}\s*>", n) for n in names)

    default, names = run()
    assert named(names, fp8_silu_default(D)), names
    if silu - 1 == fp8_silu_default(D):
        assert torch.equal(out, default)
        return
    again, names = run(fp8_silu=silu, fp8_sched=True, fp8_bn192=True)
    assert named(names, silu - 1), names
    assert torch.equal(again, out)
    assert not torch.equal(default, out), "the same output as the default form (no unmasked tile?)"
    assert max_err(out, default) <= 0.05 * default.abs().max().item()


def run_kernel(c, q8s, scales, mode, alpha, **switches):
    """The FP8 call's output (poisoned allocations first) under kernel_options(**switches), and its kernels' names."""
    poison_allocator(16 * c["q"].numel() * 2)
    with hstu_attn._ops.kernel_options(**switches):
        return fp8_kernel_names(lambda: run_path(c, q8s, scales, mode, alpha))


@pytest.mark.gpu
@pytest.mark.parametrize("switches", [dict(fp8_fwd_diag=1), dict(fp8_fwd_diag=3), dict(fp8_fwd_var=15)])
def test_cuda_fp8_fwd_product_build_refuses_timing_variants(switches):
    """A product build (no --define hstu_dev=1) holds no timing-only FP8 forward kernel: the op refuses their
    switches on the host, naming the dev build, and the default still runs after the refusal."""
    if not fp8_kernel_runs(128):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    if dev_build():
        pytest.skip("a dev build holds the timing-only variants")
    c = make_case(77, [300, 129], 2, 128, "causal", device="cuda")
    q8s, scales = quantized(c, "tensor")
    with pytest.raises(RuntimeError, match=r"expected a dev build \(--define hstu_dev=1\)"):
        run_kernel(c, q8s, scales, "tensor", 128 ** -0.5, **switches)
    out, _ = run_kernel(c, q8s, scales, "tensor", 128 ** -0.5)
    assert torch.isfinite(out).all()


@pytest.mark.gpu
@pytest.mark.parametrize("D", [128, 256])
def test_cuda_fp8_fwd_trace_variant(D):
    """kernel_options(fp8_fwd_var=15) (timing-only): the default's kernel with clock stamps (D = 128: the 192-key
    tiles; D = 256: the 64-key grid kernel); every output
    row but CTA (0, 0, 0)'s (sequence 0's last query tile, head 0) bitwise the default's, and those rows hold the
    stamps: each warpgroup's KV tile count at word 4088 and a non-decreasing loop (stamps 0-6 of each tile)."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    if not dev_build():
        pytest.skip("the timing-only variants are built in dev builds only (--define hstu_dev=1)")
    c = make_case(151, [4096, 4096], 2, D, "causal", device="cuda", delta_q=False)
    q8s, scales = quantized(c, "tensor")
    default, _ = run_kernel(c, q8s, scales, "tensor", D ** -0.5)
    out, names = run_kernel(c, q8s, scales, "tensor", D ** -0.5, fp8_fwd_var=15)
    bn, form = (192, 2) if D == 128 else (64, 0)
    assert any(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*4\s*,\s*{form}\s*>",
                         n) for n in names), names
    m0 = 4096 - 128
    rows = torch.zeros(out.shape[0], dtype=torch.bool, device=out.device)
    rows[m0:m0 + 128] = True
    assert torch.equal(out[~rows], default[~rows]) and torch.equal(out[:, 1], default[:, 1])
    words = out[m0:m0 + 128, 0].contiguous().view(torch.int32)[:, :64].reshape(-1).cpu().tolist()
    for wg in range(2):
        w = [x & 0xFFFFFFFF for x in words[4096 * wg:4096 * (wg + 1)]]
        n = w[4088]
        assert n == -(-4096 // bn), n  # (the last query tile's KV tiles)
        seq = [w[8 * i + j] for i in range(1, n) for j in range(7)]
        assert all(0 <= (b - a) & 0xFFFFFFFF < 1 << 24 for a, b in zip(seq, seq[1:])), seq


@pytest.mark.gpu
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("D,mode", [(64, "tensor"), (128, "tensor"), (128, "block"), (256, "tensor"), (256, "block")])
def test_cuda_fp8_fwd_bounds_and_main_loop(D, mode, mask):
    """The default grid kernels' KV loop (D = 128: the 192-key tiles under fp8_bn192=True, the 128-key ones in block
    mode; D = 64: 128-key; D = 256: 64-key, per-tile factors in block mode; kBounds: the unmasked-tile test by two
    bounds per warpgroup, the pipeline stages by increments) meets the fp64 emulation rule and gives bitwise the
    output of kernel_options(fp8_fwd_var=1) (kFp8VarMainLoop: the loop as it was, its own kernel), on jagged lengths
    with several unmasked tiles per query tile beside the masked ones (diagonal, window, contexts, target groups)."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 4000 + sorted(MASKS).index(mask) * 10 + D // 64 + (5 if mode == "block" else 0)
    c = make_case(seed, [300, 0, 900, 77, 129, 450, 193], 2, D, mask, device="cuda")
    q8s, scales = quantized(c, mode)
    switches = dict(fp8_bn192=True) if D == 128 and mode != "block" else {}
    out = check_fp8_kernel(c, mode, D ** -0.5, switches=switches)
    again, default_names = run_kernel(c, q8s, scales, mode, D ** -0.5, **switches)
    main_loop, names = run_kernel(c, q8s, scales, mode, D ** -0.5, fp8_fwd_var=1, **switches)
    bn, form = (64, 0) if D == 256 else (192, 2) if switches else (128, 1)

    def launched(names, diag):
        pattern = rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*{diag}\s*,\s*{form}\s*>"
        return any(re.search(pattern, n) for n in names)

    assert launched(names, 8) and not launched(names, 0), names
    assert launched(default_names, 0) and not launched(default_names, 8), default_names
    assert torch.equal(again, out) and torch.equal(out, main_loop)


@pytest.mark.gpu
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("D,mode,bn", [(128, "tensor", 192), (128, "head", 192), (128, "block", 128), (64, "tensor", 128),
                                       (256, "block", 64)])
def test_cuda_fp8_fwd_copy_and_tile_cuts(D, mode, bn, mask):
    """The default grid kernels copy P into the P V's A registers right after the next turn's S issue (D = 128's
    192-key tiles: their unmasked-tile test by the loop index); against kernel_options(fp8_fwd_var=2) (the copy
    where it was, between the P V wait and the next turn: kDiag bit 16, its own kernel) and, on the 192-key tiles,
    fp8_fwd_var=3 (the test from each tile's bounds, main 0bb35f74's kernel there: bit 32): the default meets the
    fp64 emulation rule and both variants give bitwise its output, on jagged lengths with masked and unmasked
    tiles."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 4200 + sorted(MASKS).index(mask) * 10 + D // 64 + ("tensor", "head", "block").index(mode) * 4
    c = make_case(seed, [300, 0, 900, 77, 129, 450, 193], 2, D, mask, device="cuda")
    q8s, scales = quantized(c, mode)
    switches = dict(fp8_bn192=True) if bn == 192 else {}
    out = check_fp8_kernel(c, mode, D ** -0.5, switches=switches)
    form = fp8_form(D, bn)
    for var, diag in ((0, 0), (2, 16)) + (((3, 32),) if bn == 192 else ()):
        again, names = run_kernel(c, q8s, scales, mode, D ** -0.5, fp8_fwd_var=var, **switches)
        pattern = rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\s*,\s*{bn}\s*,\s*{diag}\s*,\s*{form}\s*>"
        assert any(re.search(pattern, n) for n in names), (var, names)
        assert torch.equal(again, out), var


@pytest.mark.gpu
@pytest.mark.parametrize("D,mode,mask", [(64, "tensor", "causal"), (128, "tensor", "context_target_group"),
                                         (128, "block", "causal"), (256, "tensor", "local"), (256, "head", "none")])
def test_cuda_fp8_fwd_vt_prepass(D, mode, mask):
    """The Vt pre-pass (hstu_fp8_vt_kernel: 128 threads per 64 columns, every V load issued before the shared
    stores) writes what main's wrote (kernel_options(fp8_fwd_var=4): hstu_fp8_vt_main_kernel, 256 threads): the
    default meets the fp64 emulation rule and var 4 gives bitwise its output, each call launching its own pre-pass
    (by kernel name), on jagged lengths whose Vt starts and 32-key padding fall off the 64-column blocks (an empty
    sequence, lengths 77, 129, 193, ...)."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    seed = 4600 + D // 64 + 10 * sorted(MASKS).index(mask) + ("tensor", "head", "block").index(mode) * 4
    c = make_case(seed, [300, 0, 900, 77, 129, 450, 193], 2, D, mask, device="cuda")
    q8s, scales = quantized(c, mode)
    out = check_fp8_kernel(c, mode, D ** -0.5)
    for var, prepass in ((0, "hstu_fp8_vt_kernel"), (4, "hstu_fp8_vt_main_kernel")):
        again, names = run_kernel(c, q8s, scales, mode, D ** -0.5, fp8_fwd_var=var)
        assert any(re.search(rf"{prepass}<\s*{D}\s*>", n) for n in names), (var, names)
        assert any("hstu_fwd_fp8_sm90_kernel" in n for n in names), (var, names)
        assert torch.equal(again, out), var


def fp8_form(D, bn):
    """The default SiLU form of the grid kernel of head dim D and bn-key tiles (fp8_silu_default)."""
    return 0 if D == 256 else 2 if bn == 192 else 1


@pytest.mark.gpu
def test_cuda_fp8_kernel_wide_tiles_for_long_sequences():
    """The D = 128 forward takes the 192-key tiles of fp8_bn192=True (bitwise their output; SiLU form 2, 3 / 8 of
    the P words in half2) for batches of at least 4,096 keys per sequence on average, else 128-key tiles (form 1,
    half the words in half2); block mode keeps 128-key tiles; the two tile widths differ only by P roundings."""
    if not fp8_kernel_runs(128):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")

    def run(c, q8s, scales, mode, **switches):
        return run_kernel(c, q8s, scales, mode, 128 ** -0.5, **switches)

    def width(names, form=None):
        pattern = r"hstu_fwd_fp8_sm90_kernel<\s*128\s*,\s*0\s*,\s*true\s*,\s*(\d+)\s*,\s*0\s*,\s*(\d)\s*>"
        found = [re.search(pattern, n) for n in names]
        return sorted({int(m.group(1)) for m in found if m and (form is None or int(m.group(2)) == form)})

    for lens, mode, wide in (([300, 8000, 700], "tensor", False), ([4000, 4100], "tensor", False),
                             ([4096, 4500], "tensor", True), ([4096, 4500], "head", True),
                             ([4096, 4500], "block", False)):
        c = make_case(len(lens) + sum(lens), lens, 1, 128, "causal", device="cuda")
        q8s, scales = quantized(c, mode)
        out, names = run(c, q8s, scales, mode)
        assert width(names) == width(names, 2 if wide else 1) == [192 if wide else 128], (lens, mode, names)
        wide192, names = run(c, q8s, scales, mode, fp8_bn192=True)
        assert width(names) == [128 if mode == "block" else 192], (lens, mode, names)
        if wide or mode == "block":
            assert torch.equal(out, wide192), (lens, mode)
        else:
            assert not torch.equal(out, wide192) and max_err(out, wide192) <= 0.05 * wide192.abs().max().item()


def zipf_lengths(rng, n, top):
    """n jagged lengths, Zipf-like (rank r gets about top / r^1.2, shuffled), one of them `top`, one empty."""
    lens = [max(1, int(top / (r + 1) ** 1.2 * rng.uniform(0.7, 1.3))) for r in range(n - 1)]
    lens = [min(top, x) for x in lens] + [0]
    lens[0] = top
    rng.shuffle(lens)
    return lens


def fp8_kernel_names(fn):
    """fn()'s result and the names of the CUDA kernels it launched."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, [e.name for e in prof.events()]


# (lengths, D, mask, schedule kernel_options(fp8_sched=True) takes on an sm_90 GPU; the default is the grid):
# "list" the jagged work list (a planner kernel, then hstu_fwd_fp8_sm90_kernel<D, 1, ...>), "persist" persistent CTAs
# (<D, 2, ...>: D <= 128, grids of more than one wave with most CTAs busy), "grid" the grid (<D, 0, ...>).
SCHEDULE_CASES = [(lengths, D, mask, expect) for lengths, D, expect in
                  [("zipf", 64, "list"), ("zipf", 128, "list"), ("zipf", 256, "list")]
                  for mask in ("context_target_group", "causal")]
SCHEDULE_CASES += [("busy", D, "context_target_group", expect) for D, expect in
                   [(64, "persist"), (128, "persist"), (256, "grid")]]


@pytest.mark.gpu
@pytest.mark.parametrize("lengths,D,mask,expect", SCHEDULE_CASES)
def test_cuda_fp8_kernel_schedules_match(lengths, D, mask, expect):
    """The Hopper FP8 forward runs in grid order by default; kernel_options(fp8_sched=True) gives it the bf16
    forward's schedules: the work list (longest-first query tiles, no splits) for jagged Zipf lengths, persistent
    CTAs for busy grids of more than one wave at D <= 128, switched off by kernel_options(fwd_work_list=False /
    fwd_persist=False). Jagged, delta-q, contexts and long target groups (the gap skip), an empty sequence, block
    descale factors. The grid order meets the error rule against the fp64 FP8 emulation; every schedule gives
    bitwise the default's output (the same arithmetic per tile), the late P conversion (fp8_early_pack=False: the
    tanh SiLU, in every schedule) bitwise the tanh form's (fp8_silu=1)."""
    if not fp8_kernel_runs(D):
        pytest.skip("no Hopper FP8 forward here (needs an sm_90 GPU and a build with its units)")
    rng = random.Random(f"{lengths}-{D}-{mask}")
    if lengths == "zipf":  # B40 H2: up to 8 x 40 x 2 grid CTAs, most of them empty
        lens, H = zipf_lengths(rng, 40, 1000), 2
    else:  # 24 sequences x 4 heads x 3 query tiles (288 CTAs, more than the SMs), most with work (no list)
        lens, H = [rng.randint(200, 384) for _ in range(19)] + [0, 1, 129, 256, 383], 4
    c = make_case(rng.randrange(1 << 30), lens, H, D, mask, device="cuda", targets_max=600, contexts_max=40)
    q8s, scales = quantized(c, "block")

    def run(**switches):
        poison_allocator(16 * c["q"].numel() * 2)
        with hstu_attn._ops.kernel_options(**switches):
            return fp8_kernel_names(lambda: run_path(c, q8s, scales, "block", 0.2))

    grid, names = run()  # (the default: grid order)
    assert not torch.isnan(grid).any()
    assert any(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*true\b", n) for n in names), names
    assert not any("hstu_sm90_plan_kernel" in n for n in names)
    tanh, _ = run(fp8_silu=1)
    late, names = run(fp8_early_pack=False)
    assert any(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*0\s*,\s*false\b", n) for n in names), names
    assert torch.equal(late, tanh), "fp8_early_pack=False differs from the tanh form"
    cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in c.items()}
    q8c, sc = [t.cpu() for t in q8s], [s.cpu() for s in scales]
    gold = hstu_attn_fp8_reference(*q8c, *sc, "block", alpha=0.2, out_dtype=torch.float64,
                                   compute_dtype=torch.float64, **lengths_args(cpu))
    low = hstu_attn_fp8_reference(*q8c, *sc, "block", alpha=0.2, out_dtype=torch.float64,
                                  compute_dtype=torch.bfloat16, **lengths_args(cpu))
    assert_rel("FP8 kernel, grid order", grid.cpu(), gold, low, 2)
    for wl in (False, True):
        for ps in (False, True):
            out, names = run(fp8_sched=True, fwd_work_list=wl, fwd_persist=ps)
            kernels = [n for n in names if "hstu_fwd_fp8_sm90_kernel" in n]
            mode = {"list": 1 if wl else 2 if ps else 0, "persist": 2 if ps else 0, "grid": 0}[expect]
            if expect == "list" and not wl and D == 256:
                mode = 0  # (no persistent CTAs at D = 256)
            assert kernels and all(re.search(rf"hstu_fwd_fp8_sm90_kernel<\s*{D}\s*,\s*{mode}\s*,\s*true\b", n)
                                   for n in kernels), (wl, ps, sorted(set(kernels)))
            assert any("hstu_sm90_plan_kernel" in n for n in names) == (mode == 1), (wl, ps)
            assert torch.equal(out, grid), f"work list {wl}, persistent {ps}: differs from the grid order"
    late, names = run(fp8_sched=True, fp8_early_pack=False)  # (the late conversion in the list / persistent kernels)
    assert any(re.search(r"hstu_fwd_fp8_sm90_kernel<[^>]*false\b", n) for n in names), names
    assert torch.equal(late, tanh), "fp8_sched=True, fp8_early_pack=False differs from the tanh form in grid order"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [False, True])
@pytest.mark.parametrize("bad", [0.0, float("inf"), float("nan")])
def test_cuda_bad_scale_recorded_without_sync(bad, kernel):
    c = make_case(4, [100, 50], 2, 64, "causal", device="cuda")
    q8s, scales = quantized(c, "block")
    scales = [s.clone() for s in scales]
    scales[2][1, 2] = bad
    with fp8_path(kernel):
        out = run_path(c, q8s, scales, "block", 0.125)  # no error yet: recorded on the device
    with pytest.raises(DeviceInputError, match=r"v_descale: expected finite descale factors > 0, got v_descale\[") \
            as info:
        hstu_attn.check_errors()
    assert info.value.index == scales[2].shape[1] + 2  # the flat index of [1, 2]
    assert torch.isnan(out).all()
    hstu_attn.check_errors()  # cleared by raising
    # check_values=True raises at once (one synchronization).
    with pytest.raises(ValueError, match="v_descale: expected finite descale factors"):
        hstu_attn_varlen_func(*q8s, q_descale=scales[0], k_descale=scales[1], v_descale=scales[2],
                              descale_mode="block", check_values=True, **lengths_args(c))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [False, True])
def test_cuda_graph_capture_of_fp8_call(kernel):
    with fp8_path(kernel):  # (skips where the kernel cannot run)
        pass
    c = make_case(6, [200, 90], 2, 128, "causal", device="cuda")
    q8s, scales = quantized(c, "block")

    def run():
        with fp8_path(kernel):
            return run_path(c, q8s, scales, "block", 0.1)

    eager, captured = capture_and_replay(run)  # (the eager call outside the capture allocates the error block)
    torch.testing.assert_close(captured, eager, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [False, True])
@pytest.mark.parametrize("mode", DESCALE_MODES)
def test_cuda_fp8_call_never_synchronizes(mode, kernel):
    c = make_case(8, [150, 0, 40], 2, 64, "context_target_group", device="cuda")
    leaves = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    with fp8_path(kernel):
        hstu_attn_varlen_func(*leaves, fp8_quant_mode=mode, **lengths_args(c))  # warm-up (error block, first calls)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")  # a synchronizing CUDA call raises
        try:
            q8s, scales = quantized(c, mode)
            run_path(c, q8s, scales, mode, 0.2)
            out = hstu_attn_varlen_func(*leaves, fp8_quant_mode=mode, **lengths_args(c))
            torch.autograd.grad(out, leaves, torch.ones_like(out))
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
def test_cuda_torch_compile_fullgraph_fp8_quant_mode():
    c = make_case(9, [120, 64], 2, 128, "causal", device="cuda")

    def f(q, k, v):
        return hstu_attn_varlen_func(q, k, v, alpha=0.1, fp8_quant_mode="block", **lengths_args(c)).float() * 2.0

    eager_in = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    comp_in = [c[n].clone().requires_grad_() for n in ("q", "k", "v")]
    ref = f(*eager_in)
    ref.sum().backward()
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(*comp_in)
    out.sum().backward()
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    for a, b in zip(comp_in, eager_in):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
