"""Paged KV attention: the keys and values of each sequence are its cached pages followed by its new tokens.

On a Hopper GPU (compute capability 9.0, fp16/bf16, head dim 64/128/256, no rab) the forward reads the pages
itself: `hstu_attn::paged_fwd_sm90`, whose producer warpgroup copies each K/V tile from the pages and the new tokens
through the page table (hstu/csrc/sm90/hstu_fwd_sm90_paged.h); nothing is gathered. Elsewhere (the sm80-class
kernels, rab, CPU, autograd): on the device and without a host synchronization, gather every sequence's pages plus
its new tokens into one contiguous jagged K/V buffer (computed ``cu_seqlens_k``), then run `hstu_attn_varlen_func`
with delta-q (the queries are the new tokens, the last Lq key positions). Every mask applies unchanged either way.
The gather is torch ops only (an index_select of whole rows and two index_copy_), so it is CUDA-graph capturable
and traceable by torch.export; both paths are measured in benchmarks/hstu_inference.py.

Device values that break the page-table contract (offsets, page ids, last-page lengths) are clamped into range,
so no access is ever out of bounds, and reported as bits in an optional error-flag tensor (`PAGED_ERROR_BITS`);
with ``check_values=True`` in eager mode they are checked on the host first (one synchronization) and raise.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import _ops
from ._checks import channel as _channel
from ._checks import check_values_host
from ._ops import _err, _shape, _skip_value_checks, hstu_attn_varlen_func
from ._reference import hstu_attn_reference

__all__ = [
    "PAGE_SIZES",
    "PAGED_ERROR_BITS",
    "PagedLayout",
    "paged_kv_layout",
    "gather_paged_kv",
    "hstu_attn_paged_func",
    "hstu_attn_paged_reference",
]

# Page sizes the paged API accepts (a kernel that reads pages directly may specialize on them).
PAGE_SIZES = (16, 32, 64, 128, 256)

# Bits OR-ed into an `error_flags` int32 tensor by the device-side checks (shared with KVCacheManager).
PAGED_ERROR_BITS = {
    "page_offsets": 1 << 0,     # not non-decreasing from >= 0, or past the end of page_ids
    "page_ids": 1 << 1,         # a referenced page id outside [0, num_pages)
    "last_page_lens": 1 << 2,   # outside [1, page_size] for a sequence with pages
    "max_seqlen_k": 1 << 3,     # cached + new tokens of a sequence longer than max_seqlen_k
}


@dataclass
class PagedLayout:
    """Where each row of the gathered K/V buffer comes from; depends on the page table only, so one layout serves
    every layer of a model step.

    Attributes:
        src_rows: (2 * (capacity + 1),) int64 rows of ``kv_cache.view(num_pages * 2 * page_size, H, D)``: K then V of
            each gathered row (rows that will hold new tokens or lie past the keys read a valid dummy row).
        dst_new: (total_q,) int64 row of each new token in the gathered buffer (``capacity`` = a dump row for
            tokens outside every sequence).
        cu_seqlens_k: (B + 1,) int32 offsets of the key sequences (cached + new tokens) in the buffer.
        cached_lens: (B,) int32 cached tokens per sequence.
        capacity: int, rows of the buffer before the dump row: ``len(page_ids) * page_size + total_q``.
        error_flags: () int32, the `PAGED_ERROR_BITS` this page table broke (0 if none).
        kernel_plans: the Hopper paged forward's plans made over this layout (`_kernel_plan`: the validation of the
            lengths and the work list, once per step for all layers with the same lengths and masks); filled by
            `hstu_attn_paged_func`, empty elsewhere.
        src_rows_fn: with ``src_rows=None``, makes src_rows on its first read (KVCacheManager on Hopper, where
            only calls the paged forward does not serve gather); None: src_rows is given.
        lengths_ready: cu_seqlens_k is the view of KVCacheManager's fused begin_step whose next int32 is its
            ready word (KVCacheManager._plan_ready).
    """

    src_rows: Optional[torch.Tensor]
    dst_new: torch.Tensor
    cu_seqlens_k: torch.Tensor
    cached_lens: torch.Tensor
    capacity: int
    error_flags: torch.Tensor
    kernel_plans: Dict[tuple, tuple] = field(default_factory=dict, repr=False, compare=False)
    src_rows_fn: Optional[Callable[[], torch.Tensor]] = field(default=None, repr=False, compare=False)
    lengths_ready: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        if self.src_rows is None and self.src_rows_fn is not None:
            del self.src_rows  # made on the first read (__getattr__)

    def __getattr__(self, name):  # only for attributes not set: src_rows before its first read
        fn = self.__dict__.get("src_rows_fn")
        if name != "src_rows" or fn is None:
            raise AttributeError(name)
        rows = fn()
        self.src_rows = rows
        return rows


def _check_int_vector(t, arg: str, ref: torch.Tensor, length: Optional[int]) -> None:
    if not isinstance(t, torch.Tensor):
        _err(arg, "a torch.Tensor", type(t).__name__, TypeError)
    if t.device != ref.device:
        _err(arg, f"a tensor on {ref.device} (the device of kv_cache)", t.device)
    if t.dtype != torch.int32:
        _err(arg, "dtype torch.int32", t.dtype, TypeError)
    if t.dim() != 1 or (length is not None and t.shape[0] != length):
        _err(arg, f"shape ({'n' if length is None else length},)", _shape(t))


def _validate_page_table(kv_cache, page_offsets, page_ids, last_page_lens, batch: int) -> None:
    """Host-side checks of the page table's shapes and dtypes and of the cache's layout (no synchronization)."""
    if not isinstance(kv_cache, torch.Tensor):
        _err("kv_cache", "a torch.Tensor", type(kv_cache).__name__, TypeError)
    if kv_cache.dim() != 5 or kv_cache.shape[1] != 2:
        _err("kv_cache", "shape (num_pages, 2, page_size, num_heads, head_dim)", _shape(kv_cache))
    if kv_cache.shape[2] not in PAGE_SIZES:
        _err("kv_cache", f"a page size (dim 2) in {PAGE_SIZES}", kv_cache.shape[2])
    if kv_cache.shape[0] < 1:
        _err("kv_cache", "at least one page", _shape(kv_cache))
    if not kv_cache.is_contiguous():
        _err("kv_cache", "a contiguous tensor", f"strides {tuple(kv_cache.stride())}")
    _check_int_vector(page_offsets, "page_offsets", kv_cache, batch + 1)
    _check_int_vector(page_ids, "page_ids", kv_cache, None)
    _check_int_vector(last_page_lens, "last_page_lens", kv_cache, batch)


def _check_page_table_values(page_offsets, page_ids, last_page_lens, cu_seqlens_q, num_pages: int, page_size: int,
                             max_seqlen_k: int) -> None:
    """Eager checks of the page table's device values (one synchronization); raise ValueError naming the arg."""
    po = page_offsets.to("cpu", torch.int64).tolist()
    lpl = last_page_lens.to("cpu", torch.int64).tolist()
    cq = cu_seqlens_q.to("cpu", torch.int64).tolist()
    n = page_ids.shape[0]
    if po[0] < 0:
        _err("page_offsets", "non-negative offsets", f"page_offsets[0] = {po[0]}")
    for b in range(len(po) - 1):
        if po[b + 1] < po[b]:
            _err("page_offsets", "non-decreasing offsets", f"page_offsets[{b}] = {po[b]} > "
                 f"page_offsets[{b + 1}] = {po[b + 1]}")
    if po[-1] > n:
        _err("page_offsets", f"offsets <= {n} (the length of page_ids)", f"page_offsets[{len(po) - 1}] = {po[-1]}")
    used = page_ids[po[0]: po[-1]]
    if used.numel():
        lo, hi = int(used.min()), int(used.max())
        if lo < 0 or hi >= num_pages:
            bad = lo if lo < 0 else hi
            _err("page_ids", f"page ids in [0, {num_pages}) (the pages of kv_cache)", bad)
    for b in range(len(po) - 1):
        pages = po[b + 1] - po[b]
        if pages > 0 and not 1 <= lpl[b] <= page_size:
            _err("last_page_lens", f"1 <= last_page_lens[{b}] <= {page_size} (the page size) for a sequence with "
                 "pages", lpl[b])
        cached = (pages - 1) * page_size + lpl[b] if pages > 0 else 0
        lk = cached + cq[b + 1] - cq[b]
        if lk > max_seqlen_k:
            _err("max_seqlen_k", f">= {lk} (cached {cached} + new {cq[b + 1] - cq[b]} tokens of sequence {b})",
                 max_seqlen_k)


def paged_kv_layout(
    page_offsets: torch.Tensor,
    page_ids: torch.Tensor,
    last_page_lens: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    total_q: int,
    num_pages: int,
    page_size: int,
    max_seqlen_k: Optional[int] = None,
) -> PagedLayout:
    """The gather's index plan for a page table (device tensor ops, no host synchronization).

    Sequence b's keys are its ``page_offsets[b+1] - page_offsets[b]`` pages ``page_ids[page_offsets[b]:...]``
    (all full but the last, which holds ``last_page_lens[b]`` tokens) followed by its new tokens, rows
    ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` of the ``total_q`` rows of q. Out-of-range values are clamped and
    flagged in ``error_flags``. Shapes and dtypes are the caller's to check (`hstu_attn_paged_func` does).
    """
    dev = page_offsets.device
    batch = page_offsets.shape[0] - 1
    n_entries = page_ids.shape[0]
    capacity = n_entries * page_size + total_q
    po = page_offsets.long()
    po_c = torch.cummax(po.clamp(0, n_entries), 0).values  # non-decreasing and within page_ids
    npages = po_c[1:] - po_c[:-1]
    lpl = last_page_lens.long()
    cached = torch.where(npages > 0, (npages - 1) * page_size + lpl.clamp(1, page_size), torch.zeros_like(npages))
    cq = torch.cummax(cu_seqlens_q.long().clamp(0, total_q), 0).values
    lk_full = cached + (cq[1:] - cq[:-1])
    if max_seqlen_k is not None:  # a history longer than max_seqlen_k allows: keep what fits (the call is flagged)
        cached = torch.minimum(cached, (max_seqlen_k - (cq[1:] - cq[:-1])).clamp(min=0))
    lk = cached + (cq[1:] - cq[:-1])
    cu_k = torch.nn.functional.pad(lk.cumsum(0), (1, 0))  # cu_k[-1] <= capacity by construction

    pid = page_ids.long()
    entry = torch.arange(n_entries, device=dev)
    referenced = (entry >= po_c[0]) & (entry < po_c[-1])
    zero = torch.zeros((), dtype=torch.int32, device=dev)

    def bit(cond, name):
        return torch.where(cond.any(), PAGED_ERROR_BITS[name], zero)

    flags = bit(po != po_c, "page_offsets") | bit(referenced & ((pid < 0) | (pid >= num_pages)), "page_ids")
    flags = flags | bit((npages > 0) & ((lpl < 1) | (lpl > page_size)), "last_page_lens")
    if max_seqlen_k is not None:
        flags = flags | bit(lk_full > max_seqlen_k, "max_seqlen_k")

    # Row p of the buffer belongs to sequence b = #{ends <= p}; its key position is j = p - cu_k[b]. Rows j <
    # cached read slot j % page_size of page page_ids[po[b] + j // page_size]; the others read page 0's row 0
    # (overwritten by a new token, or past the keys).
    p = torch.arange(capacity + 1, device=dev)  # + the dump row
    b = torch.searchsorted(cu_k[1:].contiguous(), p, right=True).clamp_(max=max(batch - 1, 0))
    j = p - cu_k[b]
    is_cached = j < cached[b]
    if n_entries > 0:
        e = (po_c[b] + torch.div(j, page_size, rounding_mode="floor")).clamp_(0, n_entries - 1)
        page = pid.clamp(0, num_pages - 1)[e]
    else:
        page = torch.zeros_like(p)
    k_row = torch.where(is_cached, page * (2 * page_size) + j.remainder(page_size), torch.zeros_like(p))
    src_rows = torch.stack((k_row, k_row + page_size), 1).flatten()

    # New token t of sequence bt goes right after that sequence's cached keys; tokens outside every sequence go
    # to the dump row `capacity`.
    t = torch.arange(total_q, device=dev)
    bt = torch.searchsorted(cq[1:].contiguous(), t, right=True).clamp_(max=max(batch - 1, 0))
    inside = (t >= cq[0]) & (t < cq[-1])
    dst_new = torch.where(inside, cu_k[bt] + cached[bt] + (t - cq[bt]), torch.full_like(t, capacity))
    return PagedLayout(src_rows=src_rows, dst_new=dst_new, cu_seqlens_k=cu_k.to(torch.int32),
                       cached_lens=cached.to(torch.int32), capacity=capacity, error_flags=flags)


# The Hopper paged forward (hstu/csrc/ops/hstu_ops.cc paged_fwd_sm90); its fake for torch.compile / torch.export.
_PAGED_OP = "paged_fwd_sm90"
if hasattr(torch.ops.hstu_attn, _PAGED_OP) and not torch._C._dispatch_has_kernel_for_dispatch_key(
        f"hstu_attn::{_PAGED_OP}", "Meta"):
    @torch.library.register_fake(f"hstu_attn::{_PAGED_OP}")
    def _paged_fwd_fake(q, k_new, v_new, cu_seqlens_q, cu_seqlens_k, kv_cache, page_offsets, page_ids, cached_lens,
                        total_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size,
                        window_left, window_right, alpha, scaling_seqlen, options, plan=None):
        return q.new_empty(q.shape)

_paged_available = {}  # (device index, half, head dim) -> whether this build's Hopper paged forward runs there

# hstu/csrc/ops/hstu_plan.h kOptPagedSplitArrive: set on the paged op's options by _paged_kernel only
# (KVCacheManager._split_arrive: the serving step's default).
_PAGED_SPLIT_ARRIVE = 1 << 42
_call_state = threading.local()  # this thread's private settings of the paged calls (the two managers below)
# hstu/csrc/paged/hstu_paged_step_plan.h kOptPlanReadyWord: the plan op's, for a layout whose cu_seqlens_k carries
# begin_step's ready word (PagedLayout.lengths_ready; KVCacheManager._plan_ready, on by default under pdl).
_PLAN_READY_WORD = 1 << 43
# hstu/csrc/ops/hstu_ops.cc kOptPagedPreWait: set on the paged op's options by _paged_kernel only, under pdl, for a
# call whose plan an earlier call over the layout made (a step's later layers; that call's attention waited for the
# plan before it let the kernels after it launch): the CTAs read their work item and lengths before waiting for the
# kernel before them (KVCacheManager._pre_wait, the serving step's default).
_PAGED_PRE_WAIT = 1 << 44


@contextlib.contextmanager
def _call_setting(name: str, value):
    """Sets `_call_state.<name>` for the calls made inside (in this thread); restores the previous value after."""
    old = getattr(_call_state, name, None)
    setattr(_call_state, name, value)
    try:
        yield
    finally:
        setattr(_call_state, name, old)


def _split_arrive_on():
    """Calls made inside (in this thread) that run the Hopper paged forward sum its split tiles with the quick
    arrival (cached_hstu_attention with KVCacheManager._split_arrive, on by default)."""
    return _call_setting("split_arrive", True)


def _pre_wait_on():
    """Calls made inside (in this thread) under pdl whose plan an earlier call made read their work item and
    lengths before their wait (cached_hstu_attention with KVCacheManager._pre_wait, on by default)."""
    return _call_setting("pre_wait", True)


def _ready_word_follows(layout: PagedLayout, cu_k: torch.Tensor) -> bool:
    """Whether cu_k is the layout's cu_seqlens_k with begin_step's lengths' ready word in the int32 after it."""
    if not layout.lengths_ready or cu_k.data_ptr() != layout.cu_seqlens_k.data_ptr():
        return False
    return cu_k.untyped_storage().nbytes() >= (cu_k.storage_offset() + cu_k.numel() + 1) * 4


def _paged_kernel_built(device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """The static part of `_paged_kernel_applies`: fp16/bf16 on a CUDA device of compute capability 9.0, head dim
    64/128/256, with this build's Hopper paged unit (looked up once per device, dtype and head dim; eager mode only:
    False while torch.compile traces a first lookup)."""
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16) or head_dim not in (64, 128, 256):
        return False
    if not hasattr(torch.ops.hstu_attn, _PAGED_OP):
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, dtype == torch.float16, head_dim)
    ok = _paged_available.get(key)
    if ok is None:
        if torch.compiler.is_compiling():
            return False  # (looked up in eager mode only)
        ok = _paged_available[key] = bool(torch.ops.hstu_attn.paged_fwd_sm90_available(*key))
    return ok


def _paged_kernel_applies(q, k_new, v_new, kv_cache, page_ids, rab) -> bool:
    """Whether `hstu_attn_paged_func` reads the pages in the Hopper kernel (else it gathers): `_paged_kernel_built`
    for q, no rab, no autograd, the Hopper kernels not switched off (`kernel_options(sm90=False)`)."""
    if rab is not None or q.shape[0] == 0 or page_ids.shape[0] == 0:
        return False
    if _ops._current_options() & _ops.OPTION_BITS["sm90"]:
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k_new, v_new, kv_cache)):
        return False
    return _paged_kernel_built(q.device, q.dtype, q.shape[2])


def _make_plan(q, cu_q, cu_k, total_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size,
               window, options) -> torch.Tensor:
    """hstu_attn::paged_fwd_sm90_plan (a module function: the CPU tests stand in for it)."""
    return torch.ops.hstu_attn.paged_fwd_sm90_plan(q, cu_q, cu_k, total_k, max_seqlen_q, max_seqlen_k, num_contexts,
                                                   num_targets, target_group_size, window[0], window[1], options)


def _kernel_plan(layout: PagedLayout, make: Callable[[], torch.Tensor], q, args: Sequence[torch.Tensor],
                 key: tuple) -> Optional[torch.Tensor]:
    """The plan (`_make_plan`) of a paged forward over a layout shared by several calls (the layers of a step), made
    by the first call with these arguments and reused by the others: one validation and one work list per step
    instead of one per layer. `args`: the caller's device tensors the plan reads (cu_seqlens_q, num_contexts,
    num_targets), matched by identity, so a call with other tensors (or other masks, `key`) makes its own plan;
    the contract is that a tensor is not modified between the calls sharing a layout (as for the layout itself).
    One entry per key (masks, options, q's shape): a plan over other tensors replaces the key's entry, so calls
    with fresh tensors each time plan each time without the layout's plans growing.
    None (the op validates and plans itself) while torch.compile / torch.export trace and for fake or meta tensors:
    the plan's size is known to the op only."""
    if torch.compiler.is_compiling() or q.is_meta or _ops._is_fake(q):
        return None
    key = (q.device, q.dtype, tuple(q.shape), _ops._current_options()) + key
    hit = layout.kernel_plans.get(key)
    if hit is not None and len(hit[0]) == len(args) and all(a is b for a, b in zip(hit[0], args)):
        return hit[1]
    plan = make()
    layout.kernel_plans[key] = (tuple(args), plan)
    return plan


def _paged_kernel(q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, layout: PagedLayout,
                  max_seqlen_q, max_seqlen_k, num_contexts, num_targets, target_group_size, window_size, alpha,
                  scaling_seqlen, check_values, shared_layout: bool = False) -> torch.Tensor:
    """The Hopper paged forward: the arguments checked as `hstu_attn_varlen_func` checks them against the keys'
    (virtual) buffer of the layout, the values on the device (and on the host with check_values). With a layout
    shared by the caller (the layers of a step), the device validation and the work list come from the layout's
    plan (`_kernel_plan`), made once."""
    user_vectors = (cu_seqlens_q, num_contexts, num_targets)
    k_new, v_new = k_new.contiguous(), v_new.contiguous()
    # Stands for the gathered keys in the checks (shape, dtype, device; no memory).
    k_virt = k_new[:1].expand(layout.capacity + 1, *k_new.shape[1:])
    window = tuple(window_size) if isinstance(window_size, list) else window_size
    args = (q, k_virt, k_virt, cu_seqlens_q, layout.cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
            num_targets, target_group_size, window, alpha, None, False, scaling_seqlen, None, None)
    norm = _ops._validate_fast(*args)
    if norm is None:
        norm = _ops._validate(*args)
    window, cu_q, cu_k, num_contexts, num_targets, _, _, _ = norm
    if check_values and not _skip_value_checks(q, cu_q):
        check_values_host(q, k_virt, cu_q, cu_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets, None, None)
    compiling = torch.compiler.is_compiling()
    if not compiling:
        _channel.raise_pending()
        _channel.ensure_block()
    scaling = float(max(max_seqlen_q, 1)) if scaling_seqlen == -1 else float(scaling_seqlen)
    options = _ops._current_options()
    plan = None
    op_options = options
    made = []  # (make's call: the plan made by this call, not an earlier one)
    if shared_layout:
        def make():
            made.append(True)
            bits = 0
            if options & _ops.OPTION_BITS["pdl"] and _ready_word_follows(layout, cu_k):
                bits = _PLAN_READY_WORD
            return _make_plan(q, cu_q, cu_k, layout.capacity + 1, max_seqlen_q, max_seqlen_k, num_contexts,
                              num_targets, target_group_size, window, options | bits)

        plan = _kernel_plan(layout, make, q, user_vectors, (max_seqlen_q, max_seqlen_k, target_group_size, window,
                                                             num_contexts is None, num_targets is None))
    if getattr(_call_state, "split_arrive", None):
        op_options = options | _PAGED_SPLIT_ARRIVE
    if getattr(_call_state, "pre_wait", None) and plan is not None and not made and options & _ops.OPTION_BITS["pdl"]:
        op_options |= _PAGED_PRE_WAIT
    out = torch.ops.hstu_attn.paged_fwd_sm90(
        q, k_new, v_new, cu_q, cu_k, kv_cache, page_offsets.contiguous(), page_ids.contiguous(),
        layout.cached_lens.contiguous(), layout.capacity + 1, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
        target_group_size, window[0], window[1], float(alpha), scaling, op_options, plan)
    if not compiling and _channel.strict:
        _channel.after_call(q.device)
    return out


def gather_paged_kv(kv_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
                    layout: PagedLayout) -> torch.Tensor:
    """Builds the contiguous jagged K/V of a page table: kv (capacity + 1, 2, H, D), kv[:, 0] the keys and
    kv[:, 1] the values of the sequences at ``layout.cu_seqlens_k``; the last row is a dump row.

    Bytes moved: 2 * capacity rows of H * D elements read from the pages and written, plus 2 * total_q rows of
    new tokens; one index_select and two index_copy_ launches.
    """
    num_pages, _, page_size, heads, dim = kv_cache.shape
    flat = kv_cache.view(num_pages * 2 * page_size, heads, dim)
    kv = flat.index_select(0, layout.src_rows).view(layout.capacity + 1, 2, heads, dim)
    kv[:, 0].index_copy_(0, layout.dst_new, k_new)
    kv[:, 1].index_copy_(0, layout.dst_new, v_new)
    return kv


def hstu_attn_paged_func(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_offsets: torch.Tensor,
    page_ids: torch.Tensor,
    last_page_lens: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    scaling_seqlen: float = -1,
    *,
    check_values: bool = True,
    error_flags: Optional[torch.Tensor] = None,
    layout: Optional[PagedLayout] = None,
) -> torch.Tensor:
    """HSTU attention of new tokens over a paged KV cache followed by the new tokens themselves (inference).

    For sequence b the keys and values are its cached tokens, read from the pages
    ``page_ids[page_offsets[b]:page_offsets[b+1]]`` of ``kv_cache`` (every page full except the last, which holds
    ``last_page_lens[b]`` tokens), followed by its new tokens ``k_new/v_new[cu_seqlens_q[b]:cu_seqlens_q[b+1]]``.
    The queries are the new tokens: with Lc cached tokens and Lq new ones, Lk = Lc + Lq and query row r sits at
    key position Lc + r (the delta-q convention of `hstu_attn_varlen_func`). Every mask applies as there, in key
    positions: targets are the last ``num_targets[b]`` keys (the candidates among the new tokens), contexts the
    first ``num_contexts[b]`` keys, the local window counts key positions, rab is indexed by key positions.
    The result equals `hstu_attn_varlen_func` on the concatenated sequences with cu_seqlens_k their offsets.

    Note: scaling_seqlen defaults to max_seqlen_q, i.e. the new tokens; to reproduce a model run over whole
    sequences pass that run's scaling explicitly.

    Args:
        q: (total_q, H, D) queries of the new tokens, float16/bfloat16 on CUDA (float32/float64 too on CPU).
        k_new, v_new: (total_q, H, D) keys and values of the new tokens, q's dtype and device.
        cu_seqlens_q: (B + 1,) int32 offsets of the new tokens of each sequence.
        kv_cache: (num_pages, 2, page_size, H, D) contiguous, q's dtype: kv_cache[p, 0] keys, kv_cache[p, 1]
            values of page p. page_size is one of `PAGE_SIZES` (16, 32, 64, 128, 256).
        page_offsets: (B + 1,) int32 non-decreasing offsets into page_ids.
        page_ids: (n,) int32 page numbers in [0, num_pages) (entries past page_offsets[B] are ignored).
        last_page_lens: (B,) int32, tokens in each sequence's last page, in [1, page_size] (any value for a
            sequence without pages).
        max_seqlen_q: int >= every new-token count.
        max_seqlen_k: int >= every cached + new count; the last two dims of rab.
        num_contexts, num_targets, target_group_size, window_size, alpha, rab, scaling_seqlen: as in
            `hstu_attn_varlen_func` (positions are key positions).
        check_values: in eager mode, check the page table's and the lengths' device values on the host first (a
            synchronization) and raise. Skipped while torch.compile / torch.export trace, during CUDA-graph
            capture and for fake tensors. Either way out-of-range values are clamped, never read out of bounds.
        error_flags: optional int32 tensor (1,) on q's device; the `PAGED_ERROR_BITS` of broken device values
            are OR-ed into it without a synchronization (`KVCacheManager` passes its own).
        layout: optional `paged_kv_layout` of this page table, to share its index computation across layers. On
            the Hopper paged forward the layout also carries the plan of the calls over it (the device validation
            of the lengths and the kernel's work list): the first call with given cu_seqlens_q / num_targets /
            num_contexts tensors and masks makes it, later calls with the same tensors (unchanged) reuse it.

    Returns:
        out: (total_q, H, D) in q's dtype.

    Raises:
        TypeError / ValueError naming the argument, the expected and the actual value.

    Example:
        >>> import torch, hstu_attn
        >>> H, D, ps = 2, 32, 16
        >>> cache = torch.randn(4, 2, ps, H, D)
        >>> # user 0: 20 cached tokens in pages 3, 1 (4 in the last); user 1: nothing cached. 5 + 3 new tokens.
        >>> po, ids, last = (torch.tensor(x, dtype=torch.int32) for x in ([0, 2, 2], [3, 1], [4, 0]))
        >>> cu_q = torch.tensor([0, 5, 8], dtype=torch.int32)
        >>> q, k, v = (torch.randn(8, H, D) for _ in range(3))
        >>> out = hstu_attn.hstu_attn_paged_func(q, k, v, cu_q, cache, po, ids, last, 5, 25, window_size=(-1, 0))
        >>> out.shape
        torch.Size([8, 2, 32])
    """
    if not isinstance(cu_seqlens_q, torch.Tensor) or cu_seqlens_q.dim() != 1 or cu_seqlens_q.shape[0] < 1:
        _err("cu_seqlens_q", "a 1-d tensor of length batch_size + 1",
             _shape(cu_seqlens_q) if isinstance(cu_seqlens_q, torch.Tensor) else type(cu_seqlens_q).__name__)
    batch = cu_seqlens_q.shape[0] - 1
    _validate_page_table(kv_cache, page_offsets, page_ids, last_page_lens, batch)
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        _err("q", "a 3-d tensor (total_q, num_heads, head_dim)", _shape(q) if isinstance(q, torch.Tensor) else q)
    for name, t in (("k_new", k_new), ("v_new", v_new)):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(q.shape):
            _err(name, f"shape {_shape(q)} (that of q)", _shape(t) if isinstance(t, torch.Tensor) else t)
        if t.dtype != q.dtype:
            _err(name, f"dtype {q.dtype} (the dtype of q)", t.dtype, TypeError)
    if kv_cache.device != q.device:
        _err("kv_cache", f"a tensor on {q.device} (the device of q)", kv_cache.device)
    if kv_cache.dtype != q.dtype:
        _err("kv_cache", f"dtype {q.dtype} (the dtype of q)", kv_cache.dtype, TypeError)
    if tuple(kv_cache.shape[3:]) != tuple(q.shape[1:]):
        _err("kv_cache", f"(num_heads, head_dim) = {tuple(q.shape[1:])} (those of q) in dims 3-4", _shape(kv_cache))
    if error_flags is not None and (error_flags.dtype != torch.int32 or error_flags.device != q.device
                                    or error_flags.numel() != 1):
        _err("error_flags", f"an int32 tensor of one element on {q.device}",
             f"{error_flags.dtype} {_shape(error_flags)} on {error_flags.device}")
    num_pages, page_size = kv_cache.shape[0], kv_cache.shape[2]
    if check_values and not _skip_value_checks(q, cu_seqlens_q, kv_cache, page_ids):
        _check_page_table_values(page_offsets, page_ids, last_page_lens, cu_seqlens_q, num_pages, page_size,
                                 max_seqlen_k)
    if batch == 0:
        return q.new_zeros(q.shape)
    shared_layout = layout is not None
    if layout is None:
        layout = paged_kv_layout(page_offsets, page_ids, last_page_lens, cu_seqlens_q, q.shape[0], num_pages,
                                 page_size, max_seqlen_k)
    elif layout.capacity != page_ids.shape[0] * page_size + q.shape[0]:
        _err("layout", f"a layout of this page table (capacity {page_ids.shape[0] * page_size + q.shape[0]})",
             f"capacity {layout.capacity}")
    if error_flags is not None:
        error_flags.bitwise_or_(layout.error_flags)
    if _paged_kernel_applies(q, k_new, v_new, kv_cache, page_ids, rab):
        return _paged_kernel(q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, layout, max_seqlen_q,
                             max_seqlen_k, num_contexts, num_targets, target_group_size, window_size, alpha,
                             scaling_seqlen, check_values, shared_layout)
    kv = gather_paged_kv(kv_cache, k_new.contiguous(), v_new.contiguous(), layout)
    # (Few queries over long keys: the Hopper forward's planner splits their key ranges itself,
    # hstu_fwd_sm90_sched_layout.)
    return hstu_attn_varlen_func(
        q, kv[:, 0], kv[:, 1], cu_seqlens_q, layout.cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
        num_targets, target_group_size, window_size, alpha, rab, False, scaling_seqlen, check_values=check_values,
    )


def hstu_attn_paged_reference(
    q, k_new, v_new, cu_seqlens_q, kv_cache, page_offsets, page_ids, last_page_lens, max_seqlen_q, max_seqlen_k,
    num_contexts=None, num_targets=None, target_group_size=1, window_size=(-1, -1), alpha=1.0, rab=None,
    scaling_seqlen=-1, upcast=True,
) -> torch.Tensor:
    """`hstu_attn_paged_func` straight from its definition, on the host, sequence by sequence: concatenate each
    sequence's pages (the last one cut to last_page_lens[b]) and its new tokens, then `hstu_attn_reference`
    with delta-q. For tests; synchronizes."""
    ps = kv_cache.shape[2]
    po = [int(x) for x in page_offsets.tolist()]
    lpl = [int(x) for x in last_page_lens.tolist()]
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ids = [int(x) for x in page_ids.tolist()]
    ks: List[torch.Tensor] = []
    vs: List[torch.Tensor] = []
    lens_k = []
    for b in range(len(cq) - 1):
        pages = ids[po[b]: po[b + 1]]
        parts_k, parts_v = [], []
        for n, p in enumerate(pages):
            used = lpl[b] if n == len(pages) - 1 else ps
            parts_k.append(kv_cache[p, 0, :used])
            parts_v.append(kv_cache[p, 1, :used])
        parts_k.append(k_new[cq[b]: cq[b + 1]])
        parts_v.append(v_new[cq[b]: cq[b + 1]])
        ks.append(torch.cat(parts_k))
        vs.append(torch.cat(parts_v))
        lens_k.append(ks[-1].shape[0])
    cu_k = torch.tensor([0] + lens_k, device=q.device).cumsum(0).to(torch.int32)
    k = torch.cat(ks) if ks else k_new[:0]
    v = torch.cat(vs) if vs else v_new[:0]
    return hstu_attn_reference(q, k, v, cu_seqlens_q, cu_k, max_seqlen_q, max_seqlen_k, num_contexts, num_targets,
                               target_group_size, window_size, alpha, rab, scaling_seqlen, upcast=upcast)
