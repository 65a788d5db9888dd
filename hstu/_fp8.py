"""FP8 (e4m3) HSTU attention: descale modes, quantization helpers, the FP8-emulating reference and the ops (issue 36).

A call with FP8 inputs reaches this module through `hstu_attn_varlen_func(..., q_descale=, k_descale=, v_descale=)`
(FlashAttention-3's shape) or, for training from float16/bfloat16 tensors, `fp8_quant_mode=`. Values:
``q = q8 * q_descale`` (float32 descale factors broadcast by `descale_mode`, below), the same for k and v.

What runs:
- CUDA: the descale factors are checked on the device first (`hstu_attn::fp8_check_scales`: no host sync, a
  violation recorded like the int32 vectors' and every output NaN).
  Forward on Hopper (sm_90, D 64 / 128 / 256, every mask, no rab; `kernel_options(fp8_kernel=False)` opts out): the
  FP8 kernel (`hstu_attn::fp8_fwd_sm90`, private), Q·Kᵀ and P·V in e4m3 wgmma, P rounded to e4m3 as
  `hstu_attn_fp8_reference` does by default. Its error against the unquantized inputs equals the fp32 emulation's
  at L 1K-16K (benchmarks/fp8_accuracy.py, RESULTS.md).
  Otherwise (rab, the sm80 class, the backward): q/k/v dequantized on the device into out_dtype and the
  bf16/fp16 kernels run. Correct, not faster.
- CPU: `hstu_attn_fp8_reference`, which emulates the FP8 kernel's rounding points.
Both run behind two ops, ``hstu_attn::fp8_fwd`` / ``hstu_attn::fp8_bwd`` (fake registrations for torch.compile and
CUDA graphs).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from . import _ops
from ._checks import channel as _channel
from ._checks import RULE_SCALE, RULES, check_values_host
from ._reference import _attend, hstu_attn_reference_backward

__all__ = ["FP8_DTYPE", "FP8_MAX", "BLOCK_ROWS", "DESCALE_MODES", "descale_shape", "quantize_fp8",
           "dequantize_fp8", "hstu_attn_fp8_reference", "hstu_attn_fp8_reference_backward", "fp8_attention"]

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite e4m3fn value; conversions saturate to it (cvt.rn.satfinite in the kernels)
#: rows of one "block" descale factor, counted from the start of each sequence (see `descale_shape`)
BLOCK_ROWS = 128
#: descale modes, coded 0..3 in the ops' `descale_mode` argument
DESCALE_MODES = ("tensor", "head", "batch_head", "block")
OUT_DTYPES = (torch.bfloat16, torch.float16)  # coded 0, 1 in the ops' `out_dtype` argument


def descale_shape(mode: str, total: int, heads: int, batch: int) -> Tuple[int, ...]:
    """The shape of a descale tensor for a (total, heads, D) FP8 tensor of `batch` sequences.

    - "tensor": (1,), one factor for the whole tensor.
    - "head": (heads,), one per head.
    - "batch_head": (batch, heads), one per sequence and head (FlashAttention-3's descale shape).
    - "block": (heads, total // 128 + batch), one per head and block of BLOCK_ROWS = 128 rows of a sequence:
      rows cu[b] + 128 m ... cu[b] + 128 m + 127 (clipped to the sequence) use column ``cu[b] // 128 + b + m``.
      The columns of consecutive sequences never overlap and the count needs only host shapes (no host sync);
      columns no row uses hold 1.0 after `quantize_fp8`. A kernel tile of 64 or 128 rows lies inside one block.

    Example:
        >>> descale_shape("block", 1000, 4, 3)
        (4, 10)
    """
    if mode == "tensor":
        return (1,)
    if mode == "head":
        return (heads,)
    if mode == "batch_head":
        return (batch, heads)
    if mode == "block":
        return (heads, total // BLOCK_ROWS + batch)
    raise ValueError(f"hstu_attn: descale_mode: expected one of {list(DESCALE_MODES)}, got {mode!r}")


def _row_slots(mode: str, cu_seqlens: torch.Tensor, total: int) -> Optional[torch.Tensor]:
    """(total,) int64 on the device: the sequence ("batch_head") or block column ("block") of each row; rows used by
    no sequence (before cu_seqlens[0] or from cu_seqlens[-1] on) get one extra slot past the end. None for "tensor" /
    "head"."""
    if mode in ("tensor", "head"):
        return None
    batch = cu_seqlens.shape[0] - 1
    rows = torch.arange(total, device=cu_seqlens.device, dtype=torch.int64)
    cu = cu_seqlens.to(torch.int64)
    seq = torch.searchsorted(cu[1:].contiguous(), rows, right=True)  # b with cu[b] <= row < cu[b + 1]; B past the end
    seq = torch.where(rows < cu[0], batch, seq)  # rows before the first sequence: the extra slot too
    if mode == "batch_head":
        return seq
    start = cu[seq]  # seq <= B: cu has B + 1 entries
    col = start // BLOCK_ROWS + seq + (rows - start) // BLOCK_ROWS
    return torch.where(seq < batch, col, total // BLOCK_ROWS + batch)


def _row_descale(mode: str, descale: torch.Tensor, cu_seqlens: torch.Tensor, total: int, heads: int) -> torch.Tensor:
    """(total, heads) float32: the descale factor of each row and head (rows of no sequence: 1.0)."""
    if mode == "tensor":
        return descale.float().reshape(1, 1).expand(total, heads)
    if mode == "head":
        return descale.float().reshape(1, heads).expand(total, heads)
    slots = _row_slots(mode, cu_seqlens, total)
    table = descale.float() if mode == "batch_head" else descale.float().t()
    table = torch.cat([table, table.new_ones(1, heads)])  # the slot of rows past the last sequence
    return table[slots]


def quantize_fp8(x: torch.Tensor, cu_seqlens: torch.Tensor, mode: str = "tensor"
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Quantizes a packed (total, H, D) tensor to float8_e4m3fn with descale factors, on x's device, no host sync.

    Each factor is amax / 448 over its group (`descale_shape` says the groups; amax of |x| in float32), 1.0 for an
    all-zero or empty group; values are x / descale rounded to nearest and saturated to +-448. Non-finite inputs give
    non-finite factors, which the attention call rejects.

    Args:
        x: (total, H, D) float16/bfloat16/float32 (no gradient is recorded).
        cu_seqlens: (B + 1,) int32 offsets of the sequences in x (used by "batch_head" and "block").
        mode: "tensor", "head", "batch_head" or "block".

    Returns:
        (x8, descale): x8 (total, H, D) float8_e4m3fn, descale float32 of `descale_shape(mode, ...)`.

    Example:
        >>> x = torch.randn(300, 2, 64, dtype=torch.bfloat16)
        >>> cu = torch.tensor([0, 100, 300], dtype=torch.int32)
        >>> x8, s = quantize_fp8(x, cu, "block")
        >>> x8.dtype, tuple(s.shape)
        (torch.float8_e4m3fn, (2, 4))
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"hstu_attn: x: expected a (total, H, D) tensor, got {getattr(x, 'shape', type(x))}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"hstu_attn: x: expected dtype float16, bfloat16 or float32, got {x.dtype}")
    total, heads, _ = x.shape
    batch = cu_seqlens.shape[0] - 1
    descale_shape(mode, total, heads, batch)  # checks the mode
    with torch.no_grad():
        xf = x.detach().float()
        amax_rows = xf.abs().amax(dim=2)  # (total, H)
        if mode == "tensor":
            amax = amax_rows.amax().reshape(1)
        elif mode == "head":
            amax = amax_rows.amax(dim=0) if total > 0 else amax_rows.new_zeros(heads)
        else:
            slots = _row_slots(mode, cu_seqlens, total)
            n = batch if mode == "batch_head" else total // BLOCK_ROWS + batch
            amax = amax_rows.new_zeros(n + 1, heads).scatter_reduce(
                0, slots.view(-1, 1).expand(total, heads), amax_rows, reduce="amax", include_self=True)[:n]
        tiny = torch.finfo(torch.float32).tiny
        # amax / 448 as a tensor division: a Python-scalar divisor becomes a reciprocal multiply on CUDA only, and
        # the factors (then the codes) would differ from the host's in the last bit
        descale = torch.where(amax > 0, (amax / amax.new_full((), FP8_MAX)).clamp_min(tiny), torch.ones_like(amax))
        if mode == "block":
            descale = descale.t().contiguous()
        rows = _row_descale(mode, descale, cu_seqlens, total, heads)
        x8 = (xf / rows.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return x8, descale.contiguous()


def dequantize_fp8(x8: torch.Tensor, descale: torch.Tensor, cu_seqlens: torch.Tensor, mode: str = "tensor",
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x8 * descale (broadcast by `mode`), computed in float32 and returned in `dtype`, on x8's device, no host sync.

    Example:
        >>> x = torch.randn(10, 2, 32)
        >>> cu = torch.tensor([0, 10], dtype=torch.int32)
        >>> x8, s = quantize_fp8(x, cu, "head")
        >>> bool((dequantize_fp8(x8, s, cu, "head") - x).abs().max() < 0.07 * x.abs().max())
        True
    """
    total, heads, _ = x8.shape
    rows = _row_descale(mode, descale, cu_seqlens, total, heads)
    return (x8.float() * rows.unsqueeze(-1)).to(dtype)


# ------------------------------------------------------------------------------------------------ reference
def _round_p(p: torch.Tensor, p_dtype, p_scale: float, scaling: float) -> torch.Tensor:
    """P as the P·V GEMM sees it, times 1 / scaling_seqlen (see `hstu_attn_fp8_reference`)."""
    if p_dtype == FP8_DTYPE:
        return (p * p_scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).to(p.dtype) / (p_scale * scaling)
    if p_dtype is None:
        return p / scaling
    return (p / scaling).to(p_dtype).to(p.dtype)


def hstu_attn_fp8_reference(
    q8: torch.Tensor, k8: torch.Tensor, v8: torch.Tensor,
    q_descale: torch.Tensor, k_descale: torch.Tensor, v_descale: torch.Tensor, descale_mode: str,
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None, num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1, window_size: Sequence[int] = (-1, -1), alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None, scaling_seqlen: float = -1, seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None, mask_convention: str = "nvidia",
    out_dtype: torch.dtype = torch.bfloat16, p_dtype: Optional[torch.dtype] = FP8_DTYPE, p_scale: float = 1.0,
    dequant_dtype: Optional[torch.dtype] = None, compute_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """HSTU attention of FP8 inputs, rounding where the FP8 kernels round (the CPU implementation of FP8 calls).

    Rounding points (defaults = the Hopper FP8 kernel plan, issue 36):
    1. q, k, v are ``x8 * descale``: exact in compute_dtype float64; in float32 the one rounding of the product,
       which the kernels also have (they apply the factors to S = q8·k8 and O = P8·v8 in fp32).
       ``dequant_dtype=torch.bfloat16`` instead rounds the dequantized inputs to bf16 (today's CUDA path).
    2. S = alpha * (q·k + rab) and P = SiLU(S) (masked) in compute_dtype, like the kernels' fp32 accumulators.
    3. P is rounded before P·V: ``p_dtype=float8_e4m3fn``: P8 = e4m3(P * p_scale) saturated at +-448 (FA3 quantizes P
       to FP8 in registers for the FP8 P·V wgmma; HSTU's P is SiLU(S), not in [0, 1], so P is quantized before the
       division by scaling_seqlen, which would push it under e4m3's range, and p_scale, a power of two, is the
       kernel's exact shift of the range); ``p_dtype=torch.bfloat16/float16``: (P / scaling_seqlen) rounded to it
       (the bf16 kernels'); None: not rounded.
    4. O = (P8 · V) / (p_scale * scaling_seqlen) in compute_dtype, rounded once to out_dtype.

    Args:
        q8, k8, v8: (total, H, D) float8_e4m3fn. q_descale, k_descale, v_descale: float32 of
            `descale_shape(descale_mode, ...)` (q's with cu_seqlens_q, k's and v's with cu_seqlens_k).
        descale_mode: "tensor", "head", "batch_head" or "block".
        cu_seqlens_q ... mask_convention: as in `hstu_attn_varlen_func` (rab in out_dtype or float32/64).
        out_dtype: the output dtype. p_dtype, p_scale, dequant_dtype: see the rounding points.
        compute_dtype: torch.float32 (the kernels') or torch.float64 (a gold reference).

    Returns:
        out: (total_q, H, D) in out_dtype; rows of no used query range are 0.

    Example:
        >>> cu = torch.tensor([0, 5], dtype=torch.int32)
        >>> q8, qs = quantize_fp8(torch.randn(5, 2, 16), cu)
        >>> hstu_attn_fp8_reference(q8, q8, q8, qs, qs, qs, "tensor", cu, cu, 5, 5).dtype
        torch.bfloat16
    """
    cdt = compute_dtype
    qd, kd, vd = (dequantize_fp8(x8, s, cu, descale_mode, cdt) for x8, s, cu in (
        (q8, q_descale, cu_seqlens_q), (k8, k_descale, cu_seqlens_k), (v8, v_descale, cu_seqlens_k)))
    if dequant_dtype is not None:
        qd, kd, vd = (t.to(dequant_dtype).to(cdt) for t in (qd, kd, vd))
    if scaling_seqlen is None or scaling_seqlen <= 0:
        scaling_seqlen = max(int(max_seqlen_q), 1)
    out = _attend(qd, kd, vd, rab, alpha, cdt, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, num_contexts,
                  num_targets, target_group_size, window_size, mask_convention,
                  lambda p: _round_p(p, p_dtype, p_scale, scaling_seqlen))
    return out.to(out_dtype)


def hstu_attn_fp8_reference_backward(
    dout: torch.Tensor, q8, k8, v8, q_descale, k_descale, v_descale, descale_mode: str, rab, cu_seqlens_q,
    cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts=None, num_targets=None, target_group_size=1,
    window_size=(-1, -1), alpha=1.0, scaling_seqlen=-1, seqused_q=None, seqused_k=None, mask_convention="nvidia",
    compute_dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) in dout's dtype: the gradients of the HSTU attention with respect to the DEQUANTIZED inputs
    ``q8 * q_descale`` etc., computed exactly in compute_dtype from them (`hstu_attn_reference_backward`'s formulas).

    Rounding points: only the inputs' (FP8 values, descale products). P, dS and dO stay unrounded: the FP8 backward's
    own rounding points (which of dO, P, dS become FP8, with which scales) are fixed by its kernel, and this function
    gains them then; until then the error-relative rule (5x the same-dtype error) judges against exact gradients.
    """
    cdt = compute_dtype
    qd, kd, vd = (dequantize_fp8(x8, s, cu, descale_mode, cdt) for x8, s, cu in (
        (q8, q_descale, cu_seqlens_q), (k8, k_descale, cu_seqlens_k), (v8, v_descale, cu_seqlens_k)))
    dq, dk, dv, _ = hstu_attn_reference_backward(
        dout.to(cdt), qd, kd, vd, None if rab is None else rab.to(cdt), False, cu_seqlens_q, cu_seqlens_k,
        max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size, window_size, alpha, scaling_seqlen,
        seqused_q, seqused_k, mask_convention)
    return dq.to(dout.dtype), dk.to(dout.dtype), dv.to(dout.dtype)


# ------------------------------------------------------------------------------------------------ ops
# Python-defined until the Hopper FP8 kernels bring them into hstu_ops.cc (then keep these strings identical).
_COMMON = ("Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale, int descale_mode, "
           "int out_dtype, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, "
           "Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, int window_right, "
           "float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k")
FP8_FWD_SCHEMA = f"fp8_fwd({_COMMON}, int options) -> Tensor"
FP8_BWD_SCHEMA = f"fp8_bwd(Tensor dout, {_COMMON}, bool deterministic, int options) -> (Tensor, Tensor, Tensor)"
FP8_CHECK_SCHEMA = "fp8_check_scales(Tensor q_descale, Tensor k_descale, Tensor v_descale) -> (Tensor, Tensor, Tensor)"

_SCALE_NAMES = ("q_descale", "k_descale", "v_descale")


def check_scales_host(q_descale, k_descale, v_descale) -> None:
    """Raises ValueError for the first descale factor that is 0, negative, inf or NaN (q, k, v; lowest flat index
    first: the device check's order and words). Reads the values (on CUDA a synchronization)."""
    for name, s in zip(_SCALE_NAMES, (q_descale, k_descale, v_descale)):
        flat = s.detach().reshape(-1)
        bad = ~(torch.isfinite(flat) & (flat > 0))
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(f"hstu_attn: {name}: {RULES[RULE_SCALE](name, i, float(flat[i]), 0)}")


def _check_scales_cpu(q_descale, k_descale, v_descale):
    check_scales_host(q_descale, k_descale, v_descale)
    return q_descale.clone(), k_descale.clone(), v_descale.clone()


def _check_scales_fake(q_descale, k_descale, v_descale):
    return torch.empty_like(q_descale), torch.empty_like(k_descale), torch.empty_like(v_descale)


def _unpack(args):
    (q, k, v, qs, ks, vs, mode, out_dt, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q,
     su_k) = args
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k, num_contexts=nc,
              num_targets=nt, target_group_size=group, window_size=(wl, wr), alpha=alpha, scaling_seqlen=scaling,
              seqused_q=su_q, seqused_k=su_k)
    return (q, k, v, qs, ks, vs), DESCALE_MODES[mode], OUT_DTYPES[out_dt], rab, kw


def _mask_convention(options: int) -> str:
    return "meta_gr" if options & _ops.FLAG_BITS["mask_gr"] else "nvidia"


def _fp8_fwd_cpu(*args):
    (q, k, v, qs, ks, vs), mode, out_dt, rab, kw = _unpack(args[:-1])
    check_scales_host(qs, ks, vs)
    return hstu_attn_fp8_reference(q, k, v, qs, ks, vs, mode, rab=rab, out_dtype=out_dt,
                                   mask_convention=_mask_convention(args[-1]), **kw).contiguous()


def _fp8_bwd_cpu(dout, *args):
    (q, k, v, qs, ks, vs), mode, _, rab, kw = _unpack(args[:-2])
    check_scales_host(qs, ks, vs)
    return hstu_attn_fp8_reference_backward(dout, q, k, v, qs, ks, vs, mode, rab,
                                            mask_convention=_mask_convention(args[-1]), **kw)


def _dequantized_args(args):
    """CUDA, until the FP8 kernels: scales checked on the device, q/k/v dequantized into out_dtype, the args of
    hstu_attn::fwd / bwd (without options)."""
    (q, k, v, qs, ks, vs, mode, out_dt, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q,
     su_k) = args
    qs, ks, vs = torch.ops.hstu_attn.fp8_check_scales(qs, ks, vs)
    m, dt = DESCALE_MODES[mode], OUT_DTYPES[out_dt]
    qd = dequantize_fp8(q, qs, cu_q, m, dt)
    kd = dequantize_fp8(k, ks, cu_k, m, dt)
    vd = dequantize_fp8(v, vs, cu_k, m, dt)
    return (qd, kd, vd, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha, rab, scaling, su_q, su_k)


_CAPABILITY = {}  # CUDA device index -> its compute capability
_UNITS = {}  # unit name -> this build holds it (compiled for the device's arch)


def device_capability(device: torch.device) -> Tuple[int, int]:
    """A CUDA device's compute capability, looked up once per device (the routing runs on every call)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    cap = _CAPABILITY.get(index)
    if cap is None:
        cap = _CAPABILITY[index] = torch.cuda.get_device_capability(index)
    return cap


def unit_built(name: str, op: str) -> bool:
    """This build registers op `op` and holds the kernel unit `name` (torch.ops.hstu_attn.compiled_kernels();
    looked up once per unit). The one cache of the FP8 forward's and backward's routing."""
    ok = _UNITS.get(name)
    if ok is None:
        ok = _UNITS[name] = _ops._has_op(op) and f"\"{name}\"" in torch.ops.hstu_attn.compiled_kernels()
    return ok


def _fp8_kernel_applies(q: torch.Tensor, rab, options: int) -> bool:
    """The Hopper FP8 forward runs: not `kernel_options(fp8_kernel=False)` nor `sm90=False`, an sm_90 device whose
    build holds the unit of q's head dim, no rab. Host facts only (no synchronization)."""
    if rab is not None or options & (_ops.OPTION_BITS["fp8_kernel"] | _ops.OPTION_BITS["sm90"]):
        return False
    return device_capability(q.device) == (9, 0) and unit_built(f"hstu_fwd_sm90_fp8_hdim{q.shape[2]}", "fp8_fwd_sm90")


def _fp8_fwd_cuda(*args):
    options = args[-1]
    if _fp8_kernel_applies(args[0], args[18], options):
        # Hopper: the FP8 forward (e4m3 wgmma for both GEMMs, P rounded to e4m3: `hstu_attn_fp8_reference`'s
        # default rounding points), on the checked descale factors.
        scales = torch.ops.hstu_attn.fp8_check_scales(*args[3:6])
        q, k, v = (t.contiguous() for t in args[:3])
        return torch.ops.hstu_attn.fp8_fwd_sm90(q, k, v, *scales, *args[6:])
    fwd_args = _dequantized_args(args[:-1])
    return _ops._FWD_OPTIONS(*fwd_args, options) if options else _ops._FWD(*fwd_args)


def _fp8_bwd_cuda(dout, *args):
    from ._fp8_bwd import fp8_bwd_cuda
    deterministic, options = args[-2], args[-1]
    # The Hopper FP8 backward where it applies (kernel_options(fp8_bwd=True): there or an error), else dequantize
    if not options & _ops.FP8_BWD_DEQUANT_BIT:
        grads = fp8_bwd_cuda(dout, args[:-2], deterministic, options,
                             forced=bool(options & _ops.OPTION_BITS["fp8_bwd"]))
        if grads is not None:
            return grads
    fwd_args, options = _dequantized_args(args[:-2]), options & ~_ops.FP8_BWD_DEQUANT_BIT
    bwd_args = (dout,) + fwd_args + (False, deterministic)
    dq, dk, dv, _ = _ops._BWD_OPTIONS(*bwd_args, options) if options else _ops._BWD(*bwd_args)
    return dq, dk, dv


def _fp8_fwd_fake(*args):
    q, out_dt = args[0], OUT_DTYPES[args[7]]
    return q.new_empty(q.shape, dtype=out_dt)  # out: (total_q, H, D), contiguous, out_dtype


def _fp8_bwd_fake(dout, *args):
    q, k, v = args[:3]
    return (dout.new_empty(q.shape), dout.new_empty(k.shape), dout.new_empty(v.shape))  # dout's dtype


_lib = None
if not all(_ops._has_op(n) for n in ("fp8_fwd", "fp8_bwd", "fp8_check_scales")):
    _lib = torch.library.Library("hstu_attn", "FRAGMENT")
    for _n, _schema in (("fp8_fwd", FP8_FWD_SCHEMA), ("fp8_bwd", FP8_BWD_SCHEMA),
                        ("fp8_check_scales", FP8_CHECK_SCHEMA)):
        if not _ops._has_op(_n):
            _lib.define(_schema)
for _name, _cpu, _cuda, _fake in (("fp8_fwd", _fp8_fwd_cpu, _fp8_fwd_cuda, _fp8_fwd_fake),
                                  ("fp8_bwd", _fp8_bwd_cpu, _fp8_bwd_cuda, _fp8_bwd_fake),
                                  ("fp8_check_scales", _check_scales_cpu, None, _check_scales_fake)):
    if not _ops._has_kernel(_name, "CPU"):
        torch.library.register_kernel(f"hstu_attn::{_name}", "cpu", _cpu)
    if _cuda is not None and not _ops._has_kernel(_name, "CUDA"):
        torch.library.register_kernel(f"hstu_attn::{_name}", "cuda", _cuda)
    if not _ops._has_kernel(_name, "Meta"):
        torch.library.register_fake(f"hstu_attn::{_name}", _fake)

_FP8_FWD = torch.ops.hstu_attn.fp8_fwd.default
_FP8_BWD = torch.ops.hstu_attn.fp8_bwd.default


class Fp8AttnFunction(torch.autograd.Function):
    """autograd.Function over ``hstu_attn::fp8_fwd`` / ``fp8_bwd`` for `fp8_quant_mode` (straight-through).

    ``apply(slots, params, *tensors)``: ``tensors`` are the distinct tensors among (q, k, v, q8, k8, v8, q_descale,
    k_descale, v_descale, cu_q, cu_k, nc, nt, rab, su_q, su_k) and ``slots`` maps each of those 16 to its index in
    ``tensors`` (-1 for None; `_ops.distinct_tensors`: torch.compile traces no tensor passed twice, and
    self-attention passes cu_q = cu_k). q, k, v are the float16/bfloat16 tensors that were quantized into q8, k8,
    v8; the gradients with respect to the dequantized inputs go to them unchanged (the quantization's rounding is
    not differentiated), summed where one tensor fills several of the three slots.
    ``params`` = (descale_mode code, out_dtype code, max_q, max_k, group, wl, wr, alpha, scaling, deterministic,
    options).
    """

    @staticmethod
    def forward(ctx, slots, params, *tensors):
        args = [None if i < 0 else tensors[i] for i in slots[3:]]
        ctx.save_for_backward(*args)
        ctx.slots, ctx.params, ctx.count = slots, params, len(tensors)
        return _fp8_op_fwd(params, *args)

    @staticmethod
    def backward(ctx, dout):
        if not torch.compiler.is_compiling():
            _channel.raise_pending()
        q8, k8, v8, qs, ks, vs, cu_q, cu_k, nc, nt, rab, su_q, su_k = ctx.saved_tensors
        mode, out_dt, max_q, max_k, group, wl, wr, alpha, scaling, deterministic, options = ctx.params
        dq, dk, dv = _FP8_BWD(dout.contiguous(), q8, k8, v8, qs, ks, vs, mode, out_dt, cu_q, cu_k, max_q, max_k, nc,
                              nt, group, wl, wr, alpha, rab, scaling, su_q, su_k, deterministic, options)
        grads = [None] * ctx.count
        for slot, g in zip(ctx.slots[:3], (dq, dk, dv)):
            grads[slot] = g if grads[slot] is None else grads[slot] + g
        return (None, None) + tuple(grads)


def _fp8_op_fwd(params, q8, k8, v8, qs, ks, vs, cu_q, cu_k, nc, nt, rab, su_q, su_k):
    mode, out_dt, max_q, max_k, group, wl, wr, alpha, scaling, _, options = params
    return _FP8_FWD(q8, k8, v8, qs, ks, vs, mode, out_dt, cu_q, cu_k, max_q, max_k, nc, nt, group, wl, wr, alpha,
                    rab, scaling, su_q, su_k, options)


# ------------------------------------------------------------------------------------------------ public path
def _check_fp8_args(q, k, v, q_descale, k_descale, v_descale, descale_mode, cu_q, cu_k):
    """Host checks of the FP8 inputs and descale factors: dtypes, devices, shapes (values: on the device)."""
    err = _ops._err
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            err(name, "a torch.Tensor", type(t).__name__, TypeError)
        if t.dtype != FP8_DTYPE:
            err(name, f"dtype {FP8_DTYPE} with q_descale/k_descale/v_descale (the same for q, k and v)", t.dtype,
                TypeError)
        if t.requires_grad:
            err(name, "an FP8 tensor without requires_grad (its gradient would be rounded to FP8; pass the "
                "float16/bfloat16 tensor with fp8_quant_mode=... for straight-through gradients)", "requires_grad=True")
    if descale_mode not in DESCALE_MODES:
        err("descale_mode", f"one of {list(DESCALE_MODES)}", repr(descale_mode))
    for name, s, x, cu in (("q_descale", q_descale, q, cu_q), ("k_descale", k_descale, k, cu_k),
                           ("v_descale", v_descale, v, cu_k)):
        if not isinstance(s, torch.Tensor):
            err(name, "a float32 torch.Tensor (all three descale factors are needed)", type(s).__name__, TypeError)
        if s.dtype != torch.float32:
            err(name, "dtype torch.float32", s.dtype, TypeError)
        if s.device != q.device:
            err(name, f"a tensor on {q.device} (the device of q)", s.device)
        if x.dim() == 3 and isinstance(cu, torch.Tensor) and cu.dim() == 1:
            want = descale_shape(descale_mode, x.shape[0], x.shape[1], cu.shape[0] - 1)
            if tuple(s.shape) != want:
                err(name, f"shape {want} for descale_mode={descale_mode!r} (`hstu_attn._fp8.descale_shape`)",
                    tuple(s.shape))


def fp8_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts=None,
                  num_targets=None, target_group_size=1, window_size=(-1, -1), alpha=1.0, rab=None, has_drab=False,
                  scaling_seqlen=-1, seqused_q=None, seqused_k=None, *, deterministic=False, check_values=None,
                  mask_convention="nvidia", q_descale=None, k_descale=None, v_descale=None, descale_mode="tensor",
                  out_dtype=None, fp8_quant_mode=None) -> torch.Tensor:
    """`hstu_attn_varlen_func` with FP8 inputs (q_descale, ...) or `fp8_quant_mode` (its docstring; docs: the FP8
    section of docs/hstu_attn.md). Returns out (total_q, H, D) in out_dtype."""
    err = _ops._err
    if has_drab:
        err("has_drab", "False with FP8 attention (drab of FP8 calls: issue 36)", has_drab)
    high = None  # the float16/bfloat16 q, k, v of fp8_quant_mode (straight-through gradients)
    if fp8_quant_mode is not None:
        if q_descale is not None or k_descale is not None or v_descale is not None:
            err("fp8_quant_mode", "None when q_descale/k_descale/v_descale are given (inputs already FP8)",
                repr(fp8_quant_mode))
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or t.dtype not in OUT_DTYPES:
                err(name, "a float16/bfloat16 tensor with fp8_quant_mode", getattr(t, "dtype", type(t).__name__),
                    TypeError)
        if fp8_quant_mode not in DESCALE_MODES:
            err("fp8_quant_mode", f"one of {list(DESCALE_MODES)}", repr(fp8_quant_mode))
        if not (isinstance(cu_seqlens_q, torch.Tensor) and isinstance(cu_seqlens_k, torch.Tensor)):
            err("cu_seqlens_q", "int32 tensors cu_seqlens_q and cu_seqlens_k", type(cu_seqlens_q).__name__, TypeError)
        out_dtype = q.dtype if out_dtype is None else out_dtype
        high = (q, k, v)
        descale_mode = fp8_quant_mode
        (q, q_descale), (k, k_descale), (v, v_descale) = (
            quantize_fp8(x, cu, fp8_quant_mode) for x, cu in ((q, cu_seqlens_q), (k, cu_seqlens_k), (v, cu_seqlens_k)))
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if out_dtype not in OUT_DTYPES:
        err("out_dtype", "torch.bfloat16 or torch.float16", out_dtype, TypeError)
    _check_fp8_args(q, k, v, q_descale, k_descale, v_descale, descale_mode, cu_seqlens_q, cu_seqlens_k)
    window, cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, rab, seqused_q, seqused_k = _ops._validate(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
        target_group_size, window_size, alpha, rab, False, scaling_seqlen, seqused_q, seqused_k,
        fp8_out_dtype=out_dtype)
    if mask_convention not in _ops.MASK_CONVENTIONS:
        err("mask_convention", f"one of {list(_ops.MASK_CONVENTIONS)}", repr(mask_convention))
    on_cuda, compiling = q.is_cuda, torch.compiler.is_compiling()
    if (check_values or not on_cuda) and not _ops._skip_value_checks(q, cu_seqlens_q):
        check_values_host(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                          seqused_q, seqused_k)
        if on_cuda:
            check_scales_host(q_descale, k_descale, v_descale)
    if on_cuda and not compiling:
        _channel.ensure_block()
    q_descale, k_descale, v_descale = (s.contiguous() for s in (q_descale, k_descale, v_descale))
    scaling = float(max(max_seqlen_q, 1)) if scaling_seqlen == -1 else float(scaling_seqlen)
    options = _ops._current_options() | (_ops.FLAG_BITS["mask_gr"] if mask_convention == "meta_gr" else 0)
    params = (DESCALE_MODES.index(descale_mode), OUT_DTYPES.index(out_dtype), max_seqlen_q, max_seqlen_k,
              target_group_size, window[0], window[1], float(alpha), scaling, bool(deterministic), options)
    tensors = (q, k, v, q_descale, k_descale, v_descale, cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, rab,
               seqused_q, seqused_k)
    if high is not None and torch.is_grad_enabled() and any(t.requires_grad for t in high):
        slots, uniq = _ops.distinct_tensors(high + tensors)
        out = Fp8AttnFunction.apply(slots, params, *uniq)
    else:
        out = _fp8_op_fwd(params, *tensors)
    if not compiling and on_cuda and _channel.strict:
        _channel.after_call(q.device)
    return out
