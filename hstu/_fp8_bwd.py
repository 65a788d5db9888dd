"""The FP8 (e4m3) HSTU backward on Hopper (issue 36): its device pre-pass, the reference that emulates its rounding
points, and the private routing behind ``kernel_options(fp8_bwd=True)``.

Design (docs/hstu_attn.md, "The Hopper FP8 backward"): the bf16 Hopper backward's structure (one CTA per 128-key
block, two consumer warpgroups of 64 keys, 64-row query tiles) with e4m3 operands. FP8 wgmma reads shared-memory
operands K-major only, so the GEMMs that reduce over rows (dV = Pᵀ·dO, dK = dSᵀ·Q, dQ = dS·K) need copies with the
rows contiguous: `fp8_bwd_prepass` writes them once per call on the device (no host sync), with dO quantized to
e4m3 per (head, 128-row block). Rounding points (`hstu_attn_fp8_backward_reference`):
1. dO8 = e4m3(dO / do_descale), one factor per head and 128-row block of a sequence ("block" mode of
   `quantize_fp8`; rows past seqused_q count as 0).
2. S, P = SiLU(S) in fp32 as the forward; P8 = e4m3(P) (the forward's rounding) for dV = P8ᵀ·dO8 · do_descale / N.
3. dP = dO8·V8ᵀ · do_descale · v_descale / N and dS = dP · SiLU'(S) · alpha in fp32.
4. dS' = dS · q_descale (the query row's factor, constant over a 64-row query tile), quantized per (head, 128-key
   block (D = 256: 64-key block), 64-row query tile) with a power-of-two factor u: u of a tile = the running maximum, over the block's query
   tiles in ascending order, of pow2ceil(amax|dS'| / 448) (0 while every dS' so far is 0); dS8 = e4m3(dS' / u). One
   factor per CTA tile (both warpgroups exchange their maxima) lets dQ sum over all 128 keys of the block; the running
   maximum only grows, so the dK accumulator (in units of u) is rescaled exactly (a power of two) and rarely.
5. dK = Σ (dS8 · u)ᵀ · Q8 (q's factor is inside dS'), dQ = Σ (dS8 · u / q_descale) · K8 · k_descale, dV as in 2;
   fp32 accumulation, rounded once to dout's dtype.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _ops
from ._fp8 import (BLOCK_ROWS, FP8_DTYPE, FP8_MAX, _row_descale, dequantize_fp8, device_capability, quantize_fp8,
                   unit_built)
from ._reference import _host_list, _sequence_scores, resolve_lengths

__all__ = ["fp8_vt_start", "fp8_vt_cols", "fp8_key_perm", "fp8_pair_perm", "fp8_bwd_prepass",
           "fp8_bwd_prepass_reference", "hstu_attn_fp8_backward_reference"]

#: keys per CTA (key block) and query rows per tile of the Hopper FP8 backward: the groups of dS's factors
DS_KEYS, DS_ROWS = 128, 64
#: keys per CTA at D = 256 (its kernel splits the D columns between the warpgroups, 64 keys a block)
DS_KEYS_D256 = 64


def ds_keys(head_dim: int) -> int:
    """Keys per dS factor group (the kernel's key block) at head_dim."""
    return DS_KEYS_D256 if head_dim == 256 else DS_KEYS


def fp8_vt_start(start: int, b: int) -> int:
    """First column of sequence b (rows from `start`) in a transposed copy (hstu_fp8_sm90.h hstu_fp8_vt_start)."""
    return (start + 15) // 16 * 16 + 48 * b


def fp8_vt_cols(total: int, batch: int) -> int:
    """Columns of a transposed copy of `total` rows of `batch` sequences (a multiple of 16)."""
    return fp8_vt_start(total, batch)


def fp8_key_perm(s: int) -> int:
    """Row (within its group of 32) at column s of the group in Vt / Qᵀ / dOᵀ (hstu_fp8_key_perm)."""
    hi, t, i = s & 16, (s & 15) >> 2, s & 3
    return hi + 2 * t + (i & 1) + 8 * (i >> 1)


def fp8_pair_perm(s: int) -> int:
    """Row (within its group of 16) at column s of the group in Kᵀ (hstu_fp8_pair_perm): 2 i + h holds i + 8 h."""
    return ((s & 15) >> 1) + 8 * (s & 1) + (s & ~15)


def _used_rows_mask(total: int, cu: torch.Tensor, seqused: Optional[torch.Tensor]) -> torch.Tensor:
    """(total,) bool on cu's device: the row belongs to a sequence and lies before its seqused (no host sync)."""
    rows = torch.arange(total, device=cu.device, dtype=torch.int64)
    cu64 = cu.to(torch.int64)
    b = torch.searchsorted(cu64[1:].contiguous(), rows, right=True)
    inside = b < cu.shape[0] - 1
    bc = b.clamp(max=cu.shape[0] - 2)
    pos = rows - cu64[bc]
    if seqused is not None:
        inside = inside & (pos < seqused.to(torch.int64)[bc])
    return inside


def _transposed(x8: torch.Tensor, cu: torch.Tensor, seqused: Optional[torch.Tensor], group: int) -> torch.Tensor:
    """(H, D, fp8_vt_cols) uint8: the rows of x8 (total, H, D) as columns, per-sequence starts, permuted in groups
    (32: fp8_key_perm, 16: fp8_pair_perm), 0 where no used row lands. Host loop over sequences (a reference)."""
    total, heads, d = x8.shape
    batch = cu.shape[0] - 1
    out = torch.zeros(heads, d, fp8_vt_cols(total, batch), dtype=torch.uint8, device=x8.device)
    perm = fp8_key_perm if group == 32 else fp8_pair_perm
    slot_of = [0] * group
    for s in range(group):
        slot_of[perm(s)] = s  # the inverse: row r of a group sits at column slot_of[r]
    raw = x8.view(torch.uint8)
    cu_l = _host_list(cu)
    used = _host_list(seqused)
    for b in range(batch):
        start, n = cu_l[b], cu_l[b + 1] - cu_l[b]
        if used is not None:
            n = max(0, min(n, used[b]))
        if n <= 0:
            continue
        pos = torch.arange(n, device=x8.device)
        cols = fp8_vt_start(start, b) + (pos // group) * group + torch.tensor(slot_of, device=x8.device)[pos % group]
        out[:, :, cols] = raw[start:start + n].permute(1, 2, 0)
    return out


def fp8_bwd_prepass_reference(dout, q8, k8, cu_seqlens_q, cu_seqlens_k, seqused_q=None, seqused_k=None):
    """The pre-pass's definition on any device (host loops; the CUDA op `hstu_attn::fp8_bwd_prepass` is bit-equal).

    Returns (do8 float8_e4m3fn (total_q, H, D), do_descale float32 (H, total_q // 128 + B), qt, dot, kt uint8):
    do8 / do_descale are `quantize_fp8(dout', cu_seqlens_q, "block")` of dout with rows past seqused_q and rows of
    no sequence set to 0; qt / dot (H, D, fp8_vt_cols(total_q, B)) hold q8 / do8 transposed, sequence b from column
    fp8_vt_start(cu_q[b], b), permuted per 32 rows by fp8_key_perm; kt (H, D, fp8_vt_cols(total_k, B)) k8 likewise
    per 16 rows by fp8_pair_perm; columns of no used row 0.
    """
    used = _used_rows_mask(dout.shape[0], cu_seqlens_q, seqused_q)
    d = torch.where(used.view(-1, 1, 1), dout.float(), torch.zeros((), device=dout.device))
    do8, do_descale = quantize_fp8(d, cu_seqlens_q, "block")
    return (do8, do_descale, _transposed(q8, cu_seqlens_q, seqused_q, 32),
            _transposed(do8, cu_seqlens_q, seqused_q, 32), _transposed(k8, cu_seqlens_k, seqused_k, 16))


FP8_BWD_PREPASS_SCHEMA = ("fp8_bwd_prepass(Tensor dout, Tensor q, Tensor k, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
                          "Tensor? seqused_q, Tensor? seqused_k) -> (Tensor, Tensor, Tensor, Tensor, Tensor)")


def _prepass_fake(dout, q8, k8, cu_q, cu_k, su_q, su_k):
    total, heads, d = dout.shape
    batch = cu_q.shape[0] - 1
    cq, ck = fp8_vt_cols(total, batch), fp8_vt_cols(k8.shape[0], batch)
    u8 = torch.uint8
    return (dout.new_empty((total, heads, d), dtype=u8), dout.new_empty((heads, total // BLOCK_ROWS + batch),
            dtype=torch.float32), dout.new_empty((heads, d, cq), dtype=u8), dout.new_empty((heads, d, cq), dtype=u8),
            dout.new_empty((heads, d, ck), dtype=u8))


def _prepass_cpu(dout, q8, k8, cu_q, cu_k, su_q, su_k):
    do8, ds, qt, dot, kt = fp8_bwd_prepass_reference(dout, q8, k8, cu_q, cu_k, su_q, su_k)
    return do8.view(torch.uint8), ds, qt, dot, kt


_lib = None
if not _ops._has_op("fp8_bwd_prepass"):  # a build without the CUDA op: the CPU definition only
    _lib = torch.library.Library("hstu_attn", "FRAGMENT")
    _lib.define(FP8_BWD_PREPASS_SCHEMA)
if not _ops._has_kernel("fp8_bwd_prepass", "CPU"):
    torch.library.register_kernel("hstu_attn::fp8_bwd_prepass", "cpu", _prepass_cpu)
if not _ops._has_kernel("fp8_bwd_prepass", "Meta"):
    torch.library.register_fake("hstu_attn::fp8_bwd_prepass", _prepass_fake)


def fp8_bwd_prepass(dout, q8, k8, cu_seqlens_q, cu_seqlens_k, seqused_q=None, seqused_k=None):
    """`fp8_bwd_prepass_reference`'s outputs from the op (CUDA: two kernels on the current stream, no host sync;
    CPU: the reference). dout, q8, k8 contiguous; the int32 vectors valid (the forward validated them)."""
    do8, ds, qt, dot, kt = torch.ops.hstu_attn.fp8_bwd_prepass(
        dout.contiguous(), q8.contiguous(), k8.contiguous(), cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)
    return do8.view(FP8_DTYPE), ds, qt, dot, kt


# ------------------------------------------------------------------------------------------------ reference
def _e4m3(x: torch.Tensor) -> torch.Tensor:
    """x rounded to e4m3 (nearest even, saturated at +-448), back in x's dtype."""
    return x.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).to(x.dtype)


def _pow2_ceil(x: torch.Tensor) -> torch.Tensor:
    """The smallest power of two >= x for x > 0 (float32 bit arithmetic, as the kernel); 0 for x == 0."""
    bits = x.float().view(torch.int32)
    up = torch.where((bits & 0x7FFFFF) != 0, (bits & 0x7F800000) + 0x800000, bits & 0x7F800000)
    return torch.where(x > 0, up.view(torch.float32), torch.zeros_like(x, dtype=torch.float32))


def ds_group_factors(ds_q: torch.Tensor, keys: int = DS_KEYS) -> torch.Tensor:
    """(H, lq, lk) dS' of one sequence -> the factor u of each element (rounding point 4): per head, `keys`-key
    block (ds_keys(D)) and DS_ROWS-row query tile, the running maximum over the query tiles of pow2ceil(amax / 448)."""
    heads, lq, lk = ds_q.shape
    nt, ng = -(-lq // DS_ROWS), -(-lk // keys)
    pad = torch.zeros(heads, nt * DS_ROWS, ng * keys, dtype=torch.float32, device=ds_q.device)
    pad[:, :lq, :lk] = ds_q.abs().float()
    amax = pad.view(heads, nt, DS_ROWS, ng, keys).amax(dim=(2, 4))  # (H, nt, ng)
    s = _pow2_ceil(amax / torch.tensor(FP8_MAX, device=amax.device))
    u = torch.cummax(s, dim=1).values
    full = u.repeat_interleave(DS_ROWS, dim=1).repeat_interleave(keys, dim=2)
    return full[:, :lq, :lk]


def hstu_attn_fp8_backward_reference(
    dout: torch.Tensor, q8, k8, v8, q_descale, k_descale, v_descale, descale_mode: str, cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k, num_contexts=None, num_targets=None, target_group_size=1, window_size=(-1, -1),
    alpha=1.0, scaling_seqlen=-1, seqused_q=None, seqused_k=None, mask_convention="nvidia",
    compute_dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) in dout's dtype of the FP8 attention, rounding where the Hopper FP8 backward rounds (the module
    docstring's points 1-5), in compute_dtype (float64: the gold emulation; bfloat16: the "same-dtype" error the
    5x rule compares with). No rab (the FP8 backward refuses it). Host loops over sequences (a test oracle).

    Example:
        >>> cu = torch.tensor([0, 70], dtype=torch.int32)
        >>> (q8, s), do = quantize_fp8(torch.randn(70, 2, 32), cu), torch.randn(70, 2, 32, dtype=torch.bfloat16)
        >>> [t.shape for t in hstu_attn_fp8_backward_reference(do, q8, q8, q8, s, s, s, "tensor", cu, cu, 70, 70)]
        [torch.Size([70, 2, 32]), torch.Size([70, 2, 32]), torch.Size([70, 2, 32])]
    """
    cdt = compute_dtype
    gold = torch.float64 if cdt == torch.float64 else torch.float32
    if scaling_seqlen is None or scaling_seqlen <= 0:
        scaling_seqlen = max(int(max_seqlen_q), 1)
    do8, do_s, _, _, _ = fp8_bwd_prepass_reference(dout, q8, k8, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)
    dod = dequantize_fp8(do8, do_s, cu_seqlens_q, "block", gold).to(cdt)
    qd, kd, vd = (dequantize_fp8(x8, s, cu, descale_mode, gold).to(cdt) for x8, s, cu in (
        (q8, q_descale, cu_seqlens_q), (k8, k_descale, cu_seqlens_k), (v8, v_descale, cu_seqlens_k)))
    q_rows = _row_descale(descale_mode, q_descale, cu_seqlens_q, q8.shape[0], q8.shape[1])  # (total, H) float32
    k_rows = _row_descale(descale_mode, k_descale, cu_seqlens_k, k8.shape[0], k8.shape[1])
    q8f, k8f = q8.to(cdt), k8.to(cdt)
    ctx_list, tgt_list = _host_list(num_contexts), _host_list(num_targets)
    dq = torch.zeros(q8.shape, dtype=cdt, device=q8.device)
    dk = torch.zeros(k8.shape, dtype=cdt, device=q8.device)
    dv = torch.zeros(v8.shape, dtype=cdt, device=q8.device)
    zero = torch.zeros((), dtype=cdt, device=q8.device)
    for b, (sq, lq, sk, lk) in enumerate(resolve_lengths(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)):
        if lq <= 0 or lk <= 0:
            continue
        _, kb, vb, s, mask = _sequence_scores(qd, kd, vd, None, alpha, cdt, b, sq, lq, sk, lk, ctx_list, tgt_list,
                                              target_group_size, window_size, mask_convention)
        dob = dod[sq:sq + lq].transpose(0, 1)  # (H, lq, D)
        sig = torch.sigmoid(s)
        p8 = _e4m3(torch.where(mask, s * sig, zero))  # rounding point 2
        dv[sk:sk + lk] = (torch.matmul(p8.transpose(1, 2), dob) / scaling_seqlen).transpose(0, 1)
        dp = torch.matmul(dob, vb.transpose(1, 2)) / scaling_seqlen  # 3
        ds = torch.where(mask, dp * sig * (1 + s * (1 - sig)), zero) * alpha
        qs = q_rows[sq:sq + lq].t().unsqueeze(-1).to(cdt)  # (H, lq, 1)
        ds_q = ds * qs  # 4
        u = ds_group_factors(ds_q, ds_keys(q8.shape[2])).to(cdt)
        ds8 = torch.where(u > 0, _e4m3(ds_q / torch.where(u > 0, u, torch.ones_like(u))), zero) * u
        dk[sk:sk + lk] = torch.matmul(ds8.transpose(1, 2), q8f[sq:sq + lq].transpose(0, 1)).transpose(0, 1)  # 5
        ks = k_rows[sk:sk + lk].t().unsqueeze(-1).to(cdt)  # (H, lk, 1)
        dq[sq:sq + lq] = torch.matmul(ds8 / qs, k8f[sk:sk + lk].transpose(0, 1) * ks).transpose(0, 1)
    return dq.to(dout.dtype), dk.to(dout.dtype), dv.to(dout.dtype)


# ------------------------------------------------------------------------------------------------ routing
#: the Hopper FP8 backward's private A/B, option bits of `options` by name (the benchmark's --variants, the tests):
#: bit 59 main_kernel (hstu_bwd_fp8_sm90.h kOptFp8BwdMainKernel: the kernel without kFp8BwdDs8Early, the late part's
#: dS8 stores and dQ issue after its amax barrier instead of before it; bit-equal gradients); bit 60 main_path
#: (hstu_ops.cc kOptFp8BwdMainPath: the former path outside the kernel: the descale factors' check as a launch of its
#: own, the finishing pass's owner search per pair; the same kernel and bytes). Their history: docs/hstu_kernel_notes.md
FP8_BWD_VARIANT_BITS = {"main_kernel": 1 << 59, "main_path": 1 << 60}
FP8_BWD_HEAD_DIMS = (64, 128, 256)  # head dims the Hopper FP8 backward is built for (kernel_matrix.bzl)
# head dims whose FP8 calls take it by default (kernel_options(fp8_bwd=None)): every head dim it is built for (D = 256's
# split-D kernel 1.23x faster than the dequantized path at B16 S16K, within the 5x rule at a 16K sequence)
FP8_BWD_DEFAULT_HEAD_DIMS = (64, 128, 256)


def fp8_bwd_refusal(q8: torch.Tensor, rab, options: int, deterministic: bool = False) -> Optional[str]:
    """Why ``kernel_options(fp8_bwd=True)`` cannot run the FP8 backward for this call (None: it can). Host facts
    (the unit lookup is cached by torch's op registry; no synchronization)."""
    if rab is not None:
        return "rab: expected None with kernel_options(fp8_bwd=True) (the FP8 backward computes no rab term)"
    if deterministic:
        return "deterministic: expected False with kernel_options(fp8_bwd=True) (dQ is added with atomics)"
    if q8.shape[2] not in FP8_BWD_HEAD_DIMS:
        return (f"q: expected head dim in {list(FP8_BWD_HEAD_DIMS)} with kernel_options(fp8_bwd=True), got "
                f"{q8.shape[2]}")
    if not q8.is_cuda or device_capability(q8.device) != (9, 0):
        return "q: expected a compute capability 9.0 (Hopper) device with kernel_options(fp8_bwd=True)"
    if options & _ops.OPTION_BITS["sm90"]:
        return "kernel_options: expected sm90=True with fp8_bwd=True (the FP8 backward is a Hopper kernel)"
    return None


def fp8_bwd_kernel_built(head_dim: int = 128) -> bool:
    """This build holds the Hopper FP8 backward's unit of head_dim (compiled for sm_90a; `_fp8.unit_built`'s cache)."""
    return unit_built(f"hstu_bwd_sm90_fp8_hdim{head_dim}", "fp8_bwd_sm90")


def fp8_bwd_cuda(dout, args, deterministic, options, diag: int = 0, forced: bool = True):
    """hstu_attn::fp8_bwd's Hopper FP8 backward: `hstu_attn::fp8_bwd_sm90`, the whole path in one op (pre-pass, the
    descale factors' check, the kernel, dq's rounding). The one place that decides whether it runs (host facts
    only): where `fp8_bwd_refusal` refuses the call or the build lacks the unit it returns None when not ``forced``
    (the default routing then takes the dequantized backward) and raises NotImplementedError when ``forced``
    (``kernel_options(fp8_bwd=True)``). ``diag`` (private; the op passes 0): a timing-only kernel variant, built in
    dev builds only (hstu_bwd_fp8_sm90.h); the product's private variants are the option bits FP8_BWD_VARIANT_BITS."""
    q8, k8, rab = args[0], args[1], args[18]
    if not forced and q8.shape[2] not in FP8_BWD_DEFAULT_HEAD_DIMS:
        return None
    why = fp8_bwd_refusal(q8, rab, options, deterministic)
    if why is None and not fp8_bwd_kernel_built(q8.shape[2]):
        why = ("kernel_options(fp8_bwd=True): expected the Hopper FP8 backward kernel (hstu_attn::fp8_bwd_sm90, unit "
               f"hstu_bwd_sm90_fp8_hdim{q8.shape[2]}), got a build without it (issue 36; docs/hstu_attn.md 'The "
               "Hopper FP8 backward'); run without fp8_bwd=True for the dequantized bf16/fp16 backward")
    if why is not None:
        if forced:
            raise NotImplementedError(f"hstu_attn: {why}")
        return None
    out_code = 1 if dout.dtype == torch.float16 else 0
    q, k, v = (t.contiguous() for t in args[:3])
    return torch.ops.hstu_attn.fp8_bwd_sm90.default(dout.contiguous(), q, k, v, *args[3:7], out_code, *args[8:22],
                                                    options, diag)
