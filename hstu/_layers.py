"""HSTU model layers on jagged batches: `HSTULayer`, `HSTUStack` and the relative attention bias.

One layer (Zhai et al. 2024, "Actions Speak Louder than Words", as in Meta generative-recommenders and NVIDIA
recsys-examples)::

    n = LayerNorm(x)
    u, v, q, k = split(SiLU(n @ W_uvqk + b_uvqk))                      one projection, SiLU on all four
    a = hstu_attn_varlen_func(q, k, v, ...)                          jagged SiLU attention with the masks
    y = x + Dropout((LayerNorm(a) * u) @ W_o + b_o)

The layers are a plain composition of torch ops and the attention op: no host synchronization (every size comes
from tensor shapes or from max lengths the caller passes), so a forward / train step traces with torch.compile and
captures in a CUDA graph. On CUDA two steps run as fused kernels by default (`_fused.py`; ``fused=False`` keeps
the plain composition): the SiLU of the projection with its split into contiguous u, v, q, k, and LayerNorm(a) * u
(forward and backward each). Not fused: the input LayerNorm, the projections (cuBLAS), dropout + residual.

``attention_fp8="tensor" | "head" | "batch_head" | "block"`` runs the attention in FP8 (e4m3, issue 36): q, k, v are
quantized on the device in that descale mode inside the attention call (`hstu_attn_varlen_func(...,
fp8_quant_mode=)`), gradients go straight through to the bf16/fp16 q, k, v. See `HSTULayer` and docs/hstu_attn.md.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._fp8 import DESCALE_MODES as FP8_MODES
from ._fused import KERNEL_DTYPES, LayerNormMulFunction, SiluSplitFunction, fused_kernels_available
from ._jagged import jagged_concat, jagged_to_padded, lengths_to_offsets, padded_to_jagged
from ._ops import hstu_attn_varlen_func
from ._reference import MASK_CONVENTIONS

__all__ = ["HSTULayer", "HSTUStack", "HSTUKVCache", "RelativeBucketedBias", "dense_hstu_attention"]

_ATTN_IMPLS = ("kernel", "torch")


def _err(arg: str, expected: str, got, exc=ValueError):
    raise exc(f"hstu_attn: {arg}: expected {expected}, got {got}")


class HSTUKVCache(NamedTuple):
    """Keys and values one `HSTULayer` computed for a jagged batch (e.g. users' histories), to be attended by
    new tokens later (delta-q: the new tokens are the queries, the keys are the cached ones + the new ones).

    Fields:
        k, v: (total, H, D) keys and values (the attention's dtype).
        cu_seqlens: (B + 1,) int32 offsets of the cached sequences.
        max_seqlen: host int >= every cached length.
    """

    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int


def _dense_mask(lq, lk, max_q, max_k, num_contexts, num_targets, group, window, convention):
    """(B, max_q, max_k) bool: `hstu_mask` of every sequence at once, on the device (no host sync); padded rows
    and columns are False. lq, lk: (B,) int64 lengths."""
    dev = lk.device
    r = torch.arange(max_q, device=dev).view(1, -1, 1)
    j = torch.arange(max_k, device=dev).view(1, 1, -1)
    lq3, lk3 = lq.view(-1, 1, 1), lk.view(-1, 1, 1)
    i = r + lk3 - lq3  # key position of query row r
    t = num_targets.long().view(-1, 1, 1) if num_targets is not None else torch.zeros_like(lk3)
    c = num_contexts.long().view(-1, 1, 1) if num_contexts is not None else torch.zeros_like(lk3)
    h = lk3 - t

    def tpos(x):
        return torch.where(x < h, x, h + torch.remainder(x - h, group))

    ti, tj = tpos(i), tpos(j)
    if convention == "meta_gr":
        ti = torch.where(c > 0, (ti - c + 1).clamp(min=0), ti)
        tj = torch.where(c > 0, (tj - c + 1).clamp(min=0), tj)
    wl, wr = window
    base = (r < lq3) & (j < lk3)
    if wl >= 0:
        base = base & (tj >= ti - wl)
    if wr >= 0:
        base = base & (tj <= ti + wr)
    same_group = (i >= h) & (torch.div(i - h, group, rounding_mode="floor")
                             == torch.div(j - h, group, rounding_mode="floor"))
    mask = base & ((j < h) | same_group)
    return mask | ((r < lq3) & (i < c) & (j < h))


def dense_hstu_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    scaling_seqlen: float = -1,
    mask_convention: str = "nvidia",
) -> torch.Tensor:
    """HSTU attention as padded dense PyTorch ops (the "PyTorch attention" baseline; any dtype and device).

    Same arguments and semantics as `hstu_attn_varlen_func` (without seqused), computed in q's dtype on
    (B, H, max_seqlen_q, max_seqlen_k) score tensors; no host synchronization, differentiable by autograd.
    Memory grows with B * H * max_seqlen_q * max_seqlen_k.

    Args:
        q: (total_q, H, D); k, v: (total_k, H, D).
        cu_seqlens_q, cu_seqlens_k: (B + 1,) int32/int64 offsets.
        max_seqlen_q, max_seqlen_k: host ints >= every length.
        num_contexts, num_targets, target_group_size, window_size, alpha, rab, scaling_seqlen: as in
            `hstu_attn_varlen_func`.
        mask_convention: "nvidia" or "meta_gr" (see `hstu_mask`).

    Returns:
        (total_q, H, D) in q's dtype.

    Example:
        >>> cu = torch.tensor([0, 3, 8], dtype=torch.int32)
        >>> q = k = v = torch.randn(8, 2, 16)
        >>> dense_hstu_attention(q, k, v, cu, cu, 5, 5, window_size=(-1, 0)).shape
        torch.Size([8, 2, 16])
    """
    B = cu_seqlens_q.shape[0] - 1
    lq = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).long()
    lk = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).long()
    qp = jagged_to_padded(q, cu_seqlens_q, max_seqlen_q)  # (B, Lq, H, D), row r = key position r + Lk - Lq
    kp = jagged_to_padded(k, cu_seqlens_k, max_seqlen_k)
    vp = jagged_to_padded(v, cu_seqlens_k, max_seqlen_k)
    s = torch.einsum("bqhd,bkhd->bhqk", qp, kp)
    if rab is not None:
        rows = (torch.arange(max_seqlen_q, device=q.device).view(1, -1) + (lk - lq).view(-1, 1))
        rows = rows.clamp(0, max(max_seqlen_k - 1, 0))  # padded rows read any valid row; they are masked
        r = rab[:, :, :, :max_seqlen_k]
        s = s + torch.take_along_dim(r, rows.view(B, 1, max_seqlen_q, 1), dim=2).to(s.dtype)
    s = s * alpha
    mask = _dense_mask(lq, lk, max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size,
                       window_size, mask_convention)
    scaling = float(max(max_seqlen_q, 1)) if scaling_seqlen is None or scaling_seqlen <= 0 else float(scaling_seqlen)
    p = torch.where(mask.unsqueeze(1), F.silu(s), torch.zeros((), dtype=s.dtype, device=s.device)) / scaling
    o = torch.einsum("bhqk,bkhd->bqhd", p, vp)
    return padded_to_jagged(o, cu_seqlens_q, q.shape[0])


class RelativeBucketedBias(nn.Module):
    """Learned relative attention bias (rab) from positions and, optionally, timestamps (Meta GR's
    ``RelativeBucketedTimeAndPositionBasedBias``).

    ``rab[b, h, i, j] = w_pos[h, clamp(j - i, -(P - 1), P - 1) + P - 1] + w_time[h, bucket(ts[b, i] - ts[b, j])]``
    with i, j key positions, P = ``max_distance`` and ``bucket(d) = min(floor(log1p(|d|) / log(base)),
    num_time_buckets - 1)`` (log-spaced buckets of the time gap).

    Args:
        num_heads: heads of the bias: 1 (shared by all heads, as in GR) or the attention's num_heads.
        max_distance: P; position offsets beyond ±(P - 1) share the outermost bucket.
        num_time_buckets: 0 for a position bias only, else the number of time buckets.
        time_bucket_base: the log base of the time buckets (> 1).

    Forward: ``bias(cu_seqlens, max_seqlen, timestamps=None)`` with cu_seqlens (B + 1,) offsets, max_seqlen a
    host int and timestamps (total,) of the tokens (needed when num_time_buckets > 0). Returns a float32
    (B, num_heads, max_seqlen, max_seqlen) tensor (the `rab` argument of the attention).

    Example:
        >>> bias = RelativeBucketedBias(num_heads=1, max_distance=64, num_time_buckets=32)
        >>> rab = bias(torch.tensor([0, 3, 8], dtype=torch.int32), 5, timestamps=torch.arange(8.))
        >>> rab.shape
        torch.Size([2, 1, 5, 5])
    """

    def __init__(self, num_heads: int = 1, max_distance: int = 256, num_time_buckets: int = 0,
                 time_bucket_base: float = 2.0):
        super().__init__()
        for name, val, lo in (("num_heads", num_heads, 1), ("max_distance", max_distance, 1),
                              ("num_time_buckets", num_time_buckets, 0)):
            if not isinstance(val, int) or isinstance(val, bool) or val < lo:
                _err(name, f"an int >= {lo}", val)
        if not time_bucket_base > 1:
            _err("time_bucket_base", "a number > 1", time_bucket_base)
        self.num_heads, self.max_distance = num_heads, max_distance
        self.num_time_buckets, self.time_bucket_base = num_time_buckets, float(time_bucket_base)
        self.pos_weight = nn.Parameter(torch.empty(num_heads, 2 * max_distance - 1).normal_(0, 0.02))
        self.time_weight = (nn.Parameter(torch.empty(num_heads, num_time_buckets).normal_(0, 0.02))
                            if num_time_buckets > 0 else None)

    def forward(self, cu_seqlens: torch.Tensor, max_seqlen: int, timestamps: Optional[torch.Tensor] = None):
        B, P = cu_seqlens.shape[0] - 1, self.max_distance
        pos = torch.arange(max_seqlen, device=cu_seqlens.device)
        rel = (pos.view(1, -1) - pos.view(-1, 1)).clamp(-(P - 1), P - 1) + (P - 1)  # (L, L): j - i
        rab = self.pos_weight[:, rel].unsqueeze(0).expand(B, -1, -1, -1)
        if self.time_weight is not None:
            if timestamps is None:
                _err("timestamps", "a (total,) tensor (the bias has num_time_buckets > 0)", None)
            ts = jagged_to_padded(timestamps, cu_seqlens, max_seqlen)  # (B, L)
            # relative to each sequence's first token before float32 (epoch seconds do not fit float32 exactly)
            ts = (ts - ts[:, :1]).to(torch.float32)
            gap = (ts.unsqueeze(2) - ts.unsqueeze(1)).abs()
            bucket = (torch.log1p(gap) / math.log(self.time_bucket_base)).floor().clamp(0, self.num_time_buckets - 1)
            # an embedding lookup, not time_weight[:, bucket]: the indexing's backward accumulates the B * L * L
            # gradients of each of the few buckets serially (seconds at B 128, L 512); embedding's backward is a
            # segmented reduction over the sorted indices
            rab = rab + F.embedding(bucket.long(), self.time_weight.t()).permute(0, 3, 1, 2)
        return rab

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, max_distance={self.max_distance}, "
                f"num_time_buckets={self.num_time_buckets}, time_bucket_base={self.time_bucket_base}")


class HSTULayer(nn.Module):
    """One HSTU layer over a jagged batch (see the module docstring for the math).

    Args:
        embedding_dim: E, the width of the tokens.
        num_heads: H.
        head_dim: D, per head, of u, v, q and k (on CUDA one of 32, 64, 128, 256).
        dropout: dropout probability on the output projection (training only).
        window_size: (left, right) of the attention mask; (-1, 0) causal (default), (l, 0) causal local.
        target_group_size: target group size of the mask (see `hstu_mask`).
        alpha: scale of q·k (+ rab); default 1 / sqrt(D).
        scaling_seqlen: divisor of the attention output; -1 means the batch's longest key sequence (max_seqlen,
            or kv_cache.max_seqlen + max_seqlen with a cache). A model that scores against cached histories sets a
            fixed value (e.g. its longest sequence): then the cache, and the new tokens' outputs, are exactly those
            of one pass over history + new tokens, and a sequence's outputs do not depend on the rest of the batch.
        mask_convention: "nvidia" or "meta_gr" (Meta generative-recommenders: local-window distances measured
            with the contexts collapsed into one position; see `hstu_mask`), passed to `hstu_attn_varlen_func`
            (both kernel families and the CPU path implement both). The two agree unless a local window
            (window_size[0] >= 0) meets num_contexts.
        attn_impl: "kernel" (`hstu_attn_varlen_func`) or "torch" (`dense_hstu_attention`, padded PyTorch ops:
            the baseline of benchmarks/hstu_model.py).
        attn_dtype: dtype of the attention on CUDA when the activations are float32 (the kernels take
            float16/bfloat16); the output is cast back.
        eps: LayerNorm epsilon.
        fused: on CUDA (when `_C.so` has the kernels), run the SiLU + split of the projection and LayerNorm(a) * u
            as fused kernels (default); False: the plain torch composition (for comparisons). CPU tensors always
            take the composition.
        attention_fp8: None (default): the attention in the activations' float16/bfloat16. "tensor", "head",
            "batch_head" or "block": the attention in FP8 (e4m3): q, k, v (float32 activations first cast to
            attn_dtype) are quantized on the device with descale factors of that granularity (one per tensor, head,
            sequence x head, 128-row block x head; `hstu_attn.fp8_descale_shape`), no host sync, and
            ``hstu_attn_varlen_func(..., fp8_quant_mode=attention_fp8)`` runs: on Hopper the FP8 forward kernel
            (head_dim 64 / 128 / 256, no rab), elsewhere on CUDA (rab, other head dims, the sm80 class) the same
            quantized values through the bf16/fp16 kernels (correct, not faster), on CPU the fp32 emulation of the
            FP8 kernel's rounding. The output comes back in attn_dtype; the backward is the bf16/fp16 backward of
            the dequantized inputs, its gradients passed straight through to q, k, v. Needs attn_impl="kernel"; a
            rab that requires grad (a learned relative bias in training) and the paged serving path (kv_manager,
            CachedHSTUStack) are refused (FP8 attention has no rab gradient and no paged kernel yet).

    Forward: ``layer(x, cu_seqlens, max_seqlen, num_contexts=None, num_targets=None, rab=None, kv_cache=None,
    return_kv=False)``
        x: (total, E) tokens of a jagged batch with int32 offsets cu_seqlens (B + 1,) and host int max_seqlen.
        num_contexts / num_targets: optional (B,) int32 (see `hstu_attn_varlen_func`).
        rab: optional (B, 1 or H, max_seqlen_k, max_seqlen_k) bias; max_seqlen_k is max_seqlen, or
            kv_cache.max_seqlen + max_seqlen with a cache.
        kv_cache: an `HSTUKVCache` of earlier tokens of the same sequences: x are then new tokens appended to
            them (queries = x, keys = cache + x per sequence; num_contexts/num_targets count key positions).
        return_kv: also return the `HSTUKVCache` of x's own keys and values.
        kv_manager, cache_step, layer_idx: a serving step through a `KVCacheManager` instead: x are the step's new
            tokens (cu_seqlens = cache_step.cu_seqlens_q), keys are the user's paged history + x, and the step's
            new history is appended to cache layer layer_idx (`cached_hstu_attention`).
        Returns (total, E) in x's dtype, or (out, HSTUKVCache) with return_kv.

    Example:
        >>> layer = HSTULayer(embedding_dim=64, num_heads=2, head_dim=32)
        >>> cu = torch.tensor([0, 3, 8], dtype=torch.int32)
        >>> y = layer(torch.randn(8, 64), cu, max_seqlen=5, num_targets=torch.tensor([1, 2], dtype=torch.int32))
        >>> y.shape
        torch.Size([8, 64])
        >>> fp8 = HSTULayer(embedding_dim=64, num_heads=2, head_dim=32, attention_fp8="block")
        >>> fp8(torch.randn(8, 64), cu, max_seqlen=5).shape
        torch.Size([8, 64])
    """

    def __init__(
        self,
        embedding_dim: int,
        num_heads: int,
        head_dim: int,
        dropout: float = 0.0,
        window_size: Tuple[int, int] = (-1, 0),
        target_group_size: int = 1,
        alpha: Optional[float] = None,
        scaling_seqlen: float = -1,
        mask_convention: str = "nvidia",
        attn_impl: str = "kernel",
        attn_dtype: torch.dtype = torch.bfloat16,
        eps: float = 1e-5,
        fused: bool = True,
        attention_fp8: Optional[str] = None,
    ):
        super().__init__()
        for name, val in (("embedding_dim", embedding_dim), ("num_heads", num_heads), ("head_dim", head_dim)):
            if not isinstance(val, int) or isinstance(val, bool) or val < 1:
                _err(name, "a positive int", val)
        if not 0.0 <= dropout < 1.0:
            _err("dropout", "a probability in [0, 1)", dropout)
        if mask_convention not in MASK_CONVENTIONS:
            _err("mask_convention", f"one of {list(MASK_CONVENTIONS)}", repr(mask_convention))
        if attn_impl not in _ATTN_IMPLS:
            _err("attn_impl", f"one of {list(_ATTN_IMPLS)}", repr(attn_impl))
        if attn_dtype not in (torch.float16, torch.bfloat16):
            _err("attn_dtype", "torch.float16 or torch.bfloat16", attn_dtype, TypeError)
        if not (isinstance(window_size, (tuple, list)) and len(window_size) == 2):
            _err("window_size", "a (left, right) pair of ints", window_size, TypeError)
        if attention_fp8 is not None and attention_fp8 not in FP8_MODES:
            _err("attention_fp8", f"None or one of {list(FP8_MODES)}", repr(attention_fp8))
        if attention_fp8 is not None and attn_impl != "kernel":
            _err("attn_impl", "'kernel' with attention_fp8 (the dense PyTorch attention has no FP8 path)",
                 repr(attn_impl))
        self.attention_fp8 = attention_fp8
        self.embedding_dim, self.num_heads, self.head_dim = embedding_dim, num_heads, head_dim
        self.window_size = (int(window_size[0]), int(window_size[1]))
        self.target_group_size = int(target_group_size)
        self.alpha = 1.0 / math.sqrt(head_dim) if alpha is None else float(alpha)
        self.scaling_seqlen = scaling_seqlen
        self.mask_convention = mask_convention
        self.attn_impl = attn_impl
        self.attn_dtype = attn_dtype
        self.fused = bool(fused)
        hd = num_heads * head_dim
        self.input_norm = nn.LayerNorm(embedding_dim, eps=eps)
        self.uvqk = nn.Linear(embedding_dim, 4 * hd)
        self.attn_norm = nn.LayerNorm(hd, eps=eps)
        self.output = nn.Linear(hd, embedding_dim)
        self.dropout = nn.Dropout(dropout)
        # GR's init: xavier-normal projections, zero biases
        nn.init.xavier_normal_(self.uvqk.weight)
        nn.init.zeros_(self.uvqk.bias)
        nn.init.xavier_uniform_(self.output.weight)
        nn.init.zeros_(self.output.bias)

    def _attention(self, q, k, v, cu_q, cu_k, max_q, max_k, num_contexts, num_targets, rab):
        # default divisor: the longest key sequence, so that a delta-q call (cached keys) computes exactly what the
        # full sequence computes (the op's own default, max_seqlen_q, would differ there)
        scaling = self.scaling_seqlen if self.scaling_seqlen > 0 else float(max(max_k, 1))
        kw = dict(num_contexts=num_contexts, num_targets=num_targets, target_group_size=self.target_group_size,
                  window_size=self.window_size, alpha=self.alpha, rab=rab, scaling_seqlen=scaling)
        if self.attn_impl == "torch":
            return dense_hstu_attention(q, k, v, cu_q, cu_k, max_q, max_k, mask_convention=self.mask_convention, **kw)
        if self.attention_fp8 is not None:
            if rab is not None and rab.requires_grad:
                _err("rab", "a bias without requires_grad with attention_fp8 (FP8 attention computes no rab "
                     "gradient yet: detach it, or train without a learned relative bias)", "requires_grad=True")
            return hstu_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, check_values=False,
                                         mask_convention=self.mask_convention, fp8_quant_mode=self.attention_fp8, **kw)
        return hstu_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, has_drab=rab is not None and
                                     rab.requires_grad, check_values=False, mask_convention=self.mask_convention,
                                     **kw)

    def forward(
        self,
        x: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
        num_contexts: Optional[torch.Tensor] = None,
        num_targets: Optional[torch.Tensor] = None,
        rab: Optional[torch.Tensor] = None,
        kv_cache: Optional[HSTUKVCache] = None,
        return_kv: bool = False,
        kv_manager=None,
        cache_step=None,
        layer_idx: int = 0,
    ):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.embedding_dim:
            _err("x", f"a (total, {self.embedding_dim}) tensor", getattr(x, "shape", type(x).__name__))
        u, q, k, v, attn_dtype = self._project(x)
        if rab is not None:
            rab = rab.to(attn_dtype)
        if kv_manager is not None:  # serving step: paged history of a KVCacheManager (see HSTUStack)
            if self.attention_fp8 is not None:
                _err("kv_manager", "None with attention_fp8 (the paged serving path has no FP8 attention)",
                     type(kv_manager).__name__, NotImplementedError)
            a = self._paged_attention(kv_manager, cache_step, layer_idx, q, k, v, max_seqlen, num_contexts,
                                      num_targets, rab)
            return self._finish(x, a, u)
        new_kv = HSTUKVCache(k, v, cu_seqlens, max_seqlen) if return_kv else None
        cu_k, max_k = cu_seqlens, max_seqlen
        if kv_cache is not None:  # delta-q: keys = cached keys + the new ones, per sequence
            kv, cu_k = jagged_concat([torch.stack([kv_cache.k.to(attn_dtype), kv_cache.v.to(attn_dtype)], 1),
                                      torch.stack([k, v], 1)], [kv_cache.cu_seqlens, cu_seqlens])
            k, v = kv[:, 0], kv[:, 1]
            max_k = kv_cache.max_seqlen + max_seqlen
        a = self._attention(q.contiguous(), k.contiguous(), v.contiguous(), cu_seqlens, cu_k, max_seqlen, max_k,
                            num_contexts, num_targets, rab)
        y = self._finish(x, a, u)
        return (y, new_kv) if return_kv else y

    def _fused_on(self, x) -> bool:
        return self.fused and x.is_cuda and fused_kernels_available()

    def _project(self, x):
        # u, q, k, v of the tokens x (q, k, v as (total, H, D) in the attention dtype) and that dtype
        H, D = self.num_heads, self.head_dim
        hd = H * D
        proj = self.uvqk(self.input_norm(x))
        if self._fused_on(x) and proj.dtype in KERNEL_DTYPES:  # the autograd.Function: shapes right by construction
            u, v, q, k = SiluSplitFunction.apply(proj)
        else:
            u, v, q, k = F.silu(proj).split([hd, hd, hd, hd], dim=-1)
        q, k, v = q.reshape(-1, H, D), k.reshape(-1, H, D), v.reshape(-1, H, D)
        attn_dtype = q.dtype
        # the kernels (and FP8 quantization from them, on any device) take float16/bfloat16 q, k, v
        if ((x.is_cuda or self.attention_fp8 is not None) and q.dtype not in (torch.float16, torch.bfloat16)
                and self.attn_impl == "kernel"):
            attn_dtype = self.attn_dtype
            q, k, v = q.to(attn_dtype), k.to(attn_dtype), v.to(attn_dtype)
        return u, q, k, v, attn_dtype

    def _finish(self, x, a, u):
        # residual + output projection of the normalized attention gated by u
        a = a.reshape(-1, self.num_heads * self.head_dim).to(u.dtype)
        return x + self.dropout(self.output(self._gate(a, u, self._fused_on(x))))

    def _gate(self, a, u, fused):
        # LayerNorm(a) * u; the fused kernel returns a's dtype (the composition under autocast float32: the output
        # projection casts both to the same autocast dtype)
        w, b = self.attn_norm.weight, self.attn_norm.bias
        if fused and a.dtype in KERNEL_DTYPES and w.dtype in KERNEL_DTYPES:
            return LayerNormMulFunction.apply(a.contiguous(), u.contiguous(), w, b, self.attn_norm.eps)
        return self.attn_norm(a) * u

    def _paged_attention(self, cache, step, layer_idx, q, k, v, max_seqlen, num_contexts, num_targets, rab):
        # The new tokens attend to the user's cached history + themselves; the step's new history is appended
        # to layer `layer_idx` of the cache. Default divisor: the step's key bound (set scaling_seqlen to match an
        # uncached model exactly).
        from ._inference import cached_hstu_attention  # late: _inference imports the cache, not the layers

        if step is None:
            _err("cache_step", "the CacheStep of kv_manager.begin_step(...) for this batch", None)
        scaling = self.scaling_seqlen if self.scaling_seqlen > 0 else float(step.max_seqlen_k)
        dt = cache.dtype
        return cached_hstu_attention(
            cache, step, layer_idx, q.to(dt).contiguous(), k.to(dt).contiguous(), v.to(dt).contiguous(), max_seqlen,
            num_contexts, num_targets, self.target_group_size, self.window_size, self.alpha,
            None if rab is None else rab.to(dt), scaling)

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, window_size={self.window_size}, "
                f"target_group_size={self.target_group_size}, alpha={self.alpha:.4g}, "
                f"mask_convention={self.mask_convention!r}, attn_impl={self.attn_impl!r}, fused={self.fused}"
                + (f", attention_fp8={self.attention_fp8!r}" if self.attention_fp8 is not None else ""))


class HSTUStack(nn.Module):
    """N `HSTULayer`s sharing one optional relative attention bias, plus a final LayerNorm.

    Args:
        num_layers: N >= 1.
        embedding_dim, num_heads, head_dim, dropout, window_size, target_group_size, alpha, scaling_seqlen,
        mask_convention, attn_impl, attn_dtype, fused, attention_fp8: passed to every `HSTULayer` (attention_fp8:
            FP8 attention in that descale mode; a relative_bias is then refused in training, see `HSTULayer`).
        relative_bias: None, or a module called as ``relative_bias(cu_seqlens_k, max_seqlen_k, timestamps)``
            returning rab (B, 1 or H, max_seqlen_k, max_seqlen_k), e.g. `RelativeBucketedBias`; computed once per
            forward and shared by the layers (its gradient flows through every layer's attention).
        final_norm: apply a LayerNorm to the output.

    Forward: ``stack(x, cu_seqlens, max_seqlen, num_contexts=None, num_targets=None, timestamps=None,
    kv_cache=None, return_kv=False)``
        x (total, E) jagged tokens; timestamps (total,) of x's tokens (for a time bias). With ``kv_cache`` (the
        list of per-layer `HSTUKVCache` a ``return_kv=True`` call gave for the same sequences' earlier tokens,
        plus their timestamps: ``(caches, timestamps)``) x are new tokens appended to the cached ones.
        Returns (total, E), or (out, (caches, timestamps)) with return_kv. With ``kv_manager`` (a
        `KVCacheManager` of num_layers layers) and ``cache_step`` (its ``begin_step`` for this batch) x are the
        step's new tokens: history is read from and appended to the paged cache (position bias only).

    Example:
        >>> stack = HSTUStack(2, embedding_dim=64, num_heads=2, head_dim=32,
        ...                   relative_bias=RelativeBucketedBias(1, max_distance=16))
        >>> cu = torch.tensor([0, 3, 8], dtype=torch.int32)
        >>> stack(torch.randn(8, 64), cu, 5).shape
        torch.Size([8, 64])
    """

    def __init__(self, num_layers: int, embedding_dim: int, num_heads: int, head_dim: int, dropout: float = 0.0,
                 window_size: Tuple[int, int] = (-1, 0), target_group_size: int = 1, alpha: Optional[float] = None,
                 scaling_seqlen: float = -1, mask_convention: str = "nvidia", attn_impl: str = "kernel",
                 attn_dtype: torch.dtype = torch.bfloat16, relative_bias: Optional[nn.Module] = None,
                 final_norm: bool = True, fused: bool = True, attention_fp8: Optional[str] = None):
        super().__init__()
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
            _err("num_layers", "an int >= 1", num_layers)
        self.layers = nn.ModuleList(
            HSTULayer(embedding_dim, num_heads, head_dim, dropout, window_size, target_group_size, alpha,
                      scaling_seqlen, mask_convention, attn_impl, attn_dtype, fused=fused, attention_fp8=attention_fp8)
            for _ in range(num_layers))
        self.relative_bias = relative_bias
        self.final_norm = nn.LayerNorm(embedding_dim) if final_norm else nn.Identity()

    def forward(self, x, cu_seqlens, max_seqlen: int, num_contexts=None, num_targets=None, timestamps=None,
                kv_cache=None, return_kv: bool = False, kv_manager=None, cache_step=None):
        if kv_manager is not None:
            return self._serve(x, max_seqlen, num_contexts, num_targets, timestamps, kv_manager, cache_step)
        caches: List[Optional[HSTUKVCache]] = [None] * len(self.layers)
        cu_k, max_k, ts_k = cu_seqlens, max_seqlen, timestamps
        if kv_cache is not None:
            caches, cached_ts = kv_cache
            if len(caches) != len(self.layers):
                _err("kv_cache", f"{len(self.layers)} per-layer caches", len(caches))
            c0 = caches[0]
            cu_k = lengths_to_offsets((c0.cu_seqlens[1:] - c0.cu_seqlens[:-1]) + (cu_seqlens[1:] - cu_seqlens[:-1]))
            max_k = c0.max_seqlen + max_seqlen
            if timestamps is not None:
                ts_k, _ = jagged_concat([cached_ts, timestamps], [c0.cu_seqlens, cu_seqlens])
        rab = None
        if self.relative_bias is not None:
            rab = self.relative_bias(cu_k, max_k, ts_k)
        new = []
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cu_seqlens, max_seqlen, num_contexts, num_targets, rab, kv_cache=cache, return_kv=return_kv)
            if return_kv:
                x, kv = x
                new.append(kv)
        x = self.final_norm(x)
        return (x, (new, timestamps)) if return_kv else x

    def _serve(self, x, max_seqlen, num_contexts, num_targets, timestamps, cache, step):
        # Serving step through a KVCacheManager (one cache layer per model layer): x are the step's new tokens at
        # step.cu_seqlens_q; layer l reads and extends cache layer l. A bias sees key positions of the paged keys.
        if cache.num_layers != len(self.layers):
            _err("kv_manager", f"a cache of {len(self.layers)} layers", cache.num_layers)
        rab = None
        if self.relative_bias is not None:
            if timestamps is not None:
                _err("timestamps", "None with kv_manager (the cache keeps no timestamps of cached tokens)",
                     "a tensor", NotImplementedError)
            rab = self.relative_bias(step.layout.cu_seqlens_k, step.max_seqlen_k, None)
        for l, layer in enumerate(self.layers):
            x = layer(x, step.cu_seqlens_q, max_seqlen, num_contexts, num_targets, rab, kv_manager=cache,
                      cache_step=step, layer_idx=l)
        return self.final_norm(x)
