"""Inference-mode HSTU attention through a KV cache: the hook a model layer calls in a serving step, and an
nn.Module around the paged attention for torch.export.

A serving step for a batch of returning users: each user brings new history items (since its last request) and
candidates to score. Queries are all new tokens; keys are the user's cached history, then the new tokens; the
candidates are targets (they see the history and their own group, never each other across groups). The new
history items' K/V are then appended to the cache, so history is computed once.
"""

from __future__ import annotations

import contextlib
from typing import Optional, Tuple

import torch

from . import _ops
from ._kv_cache import CacheStep, KVCacheManager
from ._paged import _pre_wait_on, _split_arrive_on, hstu_attn_paged_func, paged_kv_layout

__all__ = ["cached_hstu_attention", "PagedHSTUAttention", "CachedHSTUStack"]


def cached_hstu_attention(
    cache: KVCacheManager,
    step: CacheStep,
    layer_idx: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    max_seqlen_q: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, 0),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    scaling_seqlen: float = -1,
    *,
    append: bool = True,
) -> torch.Tensor:
    """One HSTU layer's attention in a serving step: the new tokens attend to the users' cached history plus
    themselves; then (``append=True``) the step's appended tokens' K/V are written to this layer's cache.

    Args:
        cache: the model's `KVCacheManager`.
        step: this step's `CacheStep` (``cache.begin_step(...)``, once for all layers).
        layer_idx: the layer, in [0, cache.num_layers).
        q, k, v: (total_q, H, D) of the step's new tokens in this layer (each user's new history, then its
            candidates, at ``step.cu_seqlens_q``); the cache's dtype and device.
        max_seqlen_q: int >= every user's new-token count (the value given to begin_step).
        num_contexts, num_targets, target_group_size, window_size, alpha, rab: as in `hstu_attn_paged_func`
            (num_targets: each user's candidates; window default causal).
        scaling_seqlen: divisor of P·V; -1 = max_seqlen_q. To reproduce an uncached model exactly, pass the
            uncached run's value (e.g. its max sequence length).
        append: write the appended tokens' K/V now (False: the caller appends later, e.g. every layer at once
            with `KVCacheManager.append(step, k_all, v_all)`). While a CUDA graph is captured the append runs on
            a side stream beside the attention (``cache.overlap_append``); either way both are ordered before
            whatever the caller runs next on the current stream.

    Returns:
        out: (total_q, H, D).

    Example:
        >>> step = cache.begin_step(user_ids, cu_q, num_history, total_q, max_q)     # doctest: +SKIP
        >>> for l, layer in enumerate(layers):                                     # doctest: +SKIP
        ...     q, k, v = layer.qkv(x)
        ...     attn = hstu_attn.cached_hstu_attention(cache, step, l, q, k, v, max_q, num_targets=num_cand)
    """
    # cache.pdl (the default on Hopper): the attention, its step plan's validation and the append as programmatic
    # dependent launches (each waits in-kernel for the kernels before it before its first global read).
    # (not while torch.compile traces: the op's options there come from the caller's kernel_options alone)
    pdl = getattr(cache, "pdl", False) and q.is_cuda and not torch.compiler.is_compiling()
    # cache._split_arrive (on by default): the paged forward's split sum with the quick arrival.
    arrive = _split_arrive_on() if getattr(cache, "_split_arrive", False) else contextlib.nullcontext()
    # cache._pre_wait (on by default): under pdl, a layer whose step plan an earlier layer's call made reads its
    # work item and lengths before waiting for the kernel before it.
    pre_wait = _pre_wait_on() if getattr(cache, "_pre_wait", False) else contextlib.nullcontext()
    with _ops._more_option_bits(_ops.OPTION_BITS["pdl"]) if pdl else contextlib.nullcontext(), arrive, pre_wait:
        side = _append_stream(cache, k) if append else None
        if side is not None:
            main = torch.cuda.current_stream(k.device)
            side.wait_stream(main)  # the fork, before the attention: the append needs k / v and begin_step's rows
        out = hstu_attn_paged_func(
            q, k, v, step.cu_seqlens_q, cache.layer_cache(layer_idx), step.page_offsets, step.page_ids,
            step.last_page_lens, max_seqlen_q, step.max_seqlen_k, num_contexts, num_targets, target_group_size,
            window_size, alpha, rab, scaling_seqlen, check_values=False, layout=step.layout,
        )  # (the page table's flags went into cache.error_flags once, in begin_step)
        if side is not None:
            with torch.cuda.stream(side):
                cache.append(step, k, v, layer=layer_idx)
            main.wait_stream(side)  # the join: whatever the caller runs next comes after both
        elif append:
            cache.append(step, k, v, layer=layer_idx)
    return out


def _append_stream(cache: KVCacheManager, k: torch.Tensor) -> Optional[torch.Stream]:
    """The side stream on which a layer's append runs beside its attention, or None (in order, after it).

    Side by side while a CUDA graph is captured on CUDA (the serving step's form; eager steps are bound by the
    host, where the fork and join would cost more than they hide), unless ``cache.overlap_append`` is off. Under
    ``kernel_options(pdl=True)`` both launches are programmatic: the captured edges from the kernels before them
    (the previous layer's attention and append) are programmatic edges, and each kernel waits for all of them
    (griddepcontrol.wait) before its first read.

    Safe because the attention reads a page's rows of cached tokens only (whole page segments of fully cached key
    tiles; the tile holding the last cached and the first new keys row by row), while the append writes the rows
    after them, and neither writes k / v."""
    if not (cache.overlap_append and k.is_cuda) or torch.compiler.is_compiling():
        return None
    if k.device.index != torch.cuda.current_device():
        return None
    if not torch.cuda.is_current_stream_capturing():
        return None
    return cache._append_stream


class PagedHSTUAttention(torch.nn.Module):
    """`hstu_attn_paged_func` as a module with its mask configuration fixed (torch.export, torch.compile).

    Args (constructor): max_seqlen_q, max_seqlen_k, target_group_size, window_size, alpha, scaling_seqlen: as in
        `hstu_attn_paged_func`.

    forward(q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, last_page_lens, num_targets=None)
        -> (total_q, H, D). No host synchronization (value checks off), so it traces and exports.

    Example:
        >>> m = hstu_attn.PagedHSTUAttention(max_seqlen_q=64, max_seqlen_k=1088)               # doctest: +SKIP
        >>> ep = torch.export.export(m, (q, k, v, cu_q, cache, po, ids, last, num_targets))   # doctest: +SKIP
    """

    def __init__(self, max_seqlen_q: int, max_seqlen_k: int, target_group_size: int = 1,
                 window_size: Tuple[int, int] = (-1, 0), alpha: float = 1.0, scaling_seqlen: float = -1):
        super().__init__()
        self.max_seqlen_q, self.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        self.target_group_size, self.window_size = int(target_group_size), tuple(window_size)
        self.alpha, self.scaling_seqlen = float(alpha), float(scaling_seqlen)

    def forward(self, q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, last_page_lens,
                num_targets: Optional[torch.Tensor] = None):
        return hstu_attn_paged_func(
            q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, last_page_lens, self.max_seqlen_q,
            self.max_seqlen_k, None, num_targets, self.target_group_size, self.window_size, self.alpha, None,
            self.scaling_seqlen, check_values=False,
        )


class CachedHSTUStack(torch.nn.Module):
    """The serving step of an `HSTUStack` over a paged cache as a function of tensors only (torch.export).

    Every layer: projections, `hstu_attn_paged_func` over the layer's pages + the new tokens, output projection;
    then the final norm. The cache is read, not written: the new tokens' K/V of every layer are returned, and the
    caller appends them (``cache.append(step, k_all, v_all)``, one launch on CUDA). With the same
    ``max_seqlen_k`` (``step.max_seqlen_k``) it computes exactly what ``stack(x, ..., kv_manager=cache,
    cache_step=step)`` does (tests/hstu/test_inference_export.py).

    Args (constructor):
        stack: an `HSTUStack` (its layers' window, target groups, alpha, scaling_seqlen are used; no relative
            bias: its time buckets need timestamps the cache does not keep).
        max_seqlen_q: host int >= every user's new-token count.
        max_seqlen_k: host int >= every cached + new count (``step.max_seqlen_k``); the layers' default divisor
            of P·V when their scaling_seqlen is -1, as in the eager serving path.

    forward(x, kv_pool, cu_seqlens_q, page_offsets, page_ids, last_page_lens, num_targets=None,
    num_contexts=None) -> (y, k_new, v_new)
        x: (total_q, E) the step's new tokens; kv_pool: the cache's ``pool`` (num_layers, pages, 2, page_size,
        H, D); the page table as `CacheStep` holds it. y: (total_q, E); k_new, v_new: (num_layers, total_q, H, D)
        in the pool's dtype. No host synchronization (value checks off), so it traces and exports.

    Example:
        >>> step = cache.begin_step(users, cu_q, num_history, total_q, max_q)                  # doctest: +SKIP
        >>> m = hstu_attn.CachedHSTUStack(stack, max_q, step.max_seqlen_k)                      # doctest: +SKIP
        >>> args = (x, cache.pool, step.cu_seqlens_q, step.page_offsets, step.page_ids,       # doctest: +SKIP
        ...         step.last_page_lens)
        >>> ep = torch.export.export(m, args, {"num_targets": num_cand})                      # doctest: +SKIP
        >>> y, k_new, v_new = ep.module()(*args, num_targets=num_cand)                         # doctest: +SKIP
        >>> cache.append(step, k_new, v_new)                                                   # doctest: +SKIP
    """

    def __init__(self, stack: torch.nn.Module, max_seqlen_q: int, max_seqlen_k: int):
        super().__init__()
        if getattr(stack, "relative_bias", None) is not None:
            raise NotImplementedError("hstu_attn: stack: expected an HSTUStack without relative_bias (the cache "
                                      "keeps no timestamps), got one with a bias")
        fp8 = [getattr(layer, "attention_fp8", None) for layer in stack.layers]
        if any(m is not None for m in fp8):
            raise NotImplementedError("hstu_attn: stack: expected layers without attention_fp8 (the paged attention "
                                      f"has no FP8 path), got attention_fp8={next(m for m in fp8 if m)!r}")
        self.stack = stack
        self.max_seqlen_q, self.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)

    def forward(self, x, kv_pool, cu_seqlens_q, page_offsets, page_ids, last_page_lens,
                num_targets: Optional[torch.Tensor] = None, num_contexts: Optional[torch.Tensor] = None):
        num_pages, page_size = kv_pool.shape[1], kv_pool.shape[3]
        # one gather plan for every layer (it depends on the page table only)
        layout = paged_kv_layout(page_offsets, page_ids, last_page_lens, cu_seqlens_q, x.shape[0], num_pages,
                                 page_size, self.max_seqlen_k)
        ks, vs = [], []
        for l, layer in enumerate(self.stack.layers):
            u, q, k, v, _ = layer._project(x)
            q, k, v = (t.to(kv_pool.dtype).contiguous() for t in (q, k, v))
            scaling = layer.scaling_seqlen if layer.scaling_seqlen > 0 else float(self.max_seqlen_k)
            a = hstu_attn_paged_func(
                q, k, v, cu_seqlens_q, kv_pool[l], page_offsets, page_ids, last_page_lens, self.max_seqlen_q,
                self.max_seqlen_k, num_contexts, num_targets, layer.target_group_size, layer.window_size,
                layer.alpha, None, scaling, check_values=False, layout=layout)
            x = layer._finish(x, a, u)
            ks.append(k)
            vs.append(v)
        return self.stack.final_norm(x), torch.stack(ks), torch.stack(vs)
