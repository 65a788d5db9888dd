"""A KV cache for HSTU serving, kept entirely on the device: a page pool for all layers, a fixed-capacity user
table (user id -> slot, cached length, page list, last-used clock), a free-page stack and LRU eviction of whole
users. Every step is a fixed sequence of torch tensor ops on fixed shapes (batch B, pages per user P_max), with no
host synchronization, so a serving step can be captured in a CUDA graph.

Errors (pool full with eviction off, an unknown user in lookup-only mode, a user longer than its page budget,
duplicate ids in a batch, a page table out of range) never cause an out-of-bounds access: the offending work is
redirected to a sink slot / sink page and a bit is OR-ed into `error_flags`; `check()` synchronizes and raises
`KVCacheError` naming what happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from ._kv_offload import HostTier, free_slots, new_slot_table, reset_sink_slot
from ._ops import OPTION_BITS, _current_options, _err
from ._paged import PAGE_SIZES, PAGED_ERROR_BITS, PagedLayout, _paged_kernel_built, paged_kv_layout

__all__ = ["KVCacheManager", "CacheStep", "KVCacheError", "CACHE_ERROR_BITS"]

# The page-table bits of `PAGED_ERROR_BITS` plus the manager's own (one int32 flag word).
CACHE_ERROR_BITS = dict(PAGED_ERROR_BITS)
CACHE_ERROR_BITS.update({
    "pool_full": 1 << 8,        # not enough free pages (eviction off, or every other user is in the batch)
    "users_full": 1 << 9,       # no free user slot for a new user (eviction off)
    "unknown_user": 1 << 10,    # a user id not in the cache in lookup-only mode
    "user_too_long": 1 << 11,   # cached + appended tokens beyond max_pages_per_user * page_size
    "duplicate_user": 1 << 12,  # the same user id twice in one batch
    "offload_dropped": 1 << 13,  # an evicted user's cache did not fit the host tier or the step's copy budget
    "reload_dropped": 1 << 14,   # a returning user's host cache did not fit the step's copy budget
    "append_bound": 1 << 15,     # more appended tokens than begin_step's max_append
})
_MESSAGES = {
    "page_offsets": "page_offsets: expected non-decreasing offsets within page_ids, got a violation",
    "page_ids": "page_ids: expected page ids in [0, num_pages), got one out of range (clamped)",
    "last_page_lens": "last_page_lens: expected values in [1, page_size] for users with pages, got one outside",
    "max_seqlen_k": "max_seqlen_k: expected >= every cached + new length, got a longer sequence",
    "pool_full": "num_pages: expected enough free pages for the batch, got a full pool (eviction off or every "
                 "page held by users of the batch); the tokens that did not fit were dropped",
    "users_full": "max_users: expected a free user slot for every new user, got a full user table (eviction off); "
                  "those users were not cached",
    "unknown_user": "user_ids: expected ids present in the cache (lookup-only step), got an unknown id (served "
                    "with an empty history)",
    "user_too_long": "num_append: expected cached + appended tokens <= max_pages_per_user * page_size, got more "
                     "(the excess was dropped)",
    "duplicate_user": "user_ids: expected distinct ids in a batch, got a repeated id",
    "offload_dropped": "offload_pages / offload_pages_per_step: expected room for every evicted user's pages, got "
                       "too little (those users' caches were dropped)",
    "reload_dropped": "offload_pages_per_step: expected room for every returning user's pages, got too little "
                      "(those users were served with an empty history and their host copy dropped)",
    "append_bound": "max_append: expected >= the step's appended tokens (sum of num_append), got fewer (the "
                    "tokens past it were not appended)",
}
_INT64_MAX = torch.iinfo(torch.int64).max

# The fused bookkeeping op (hstu/csrc/ops/hstu_kv_cache_op.cc; CUDA only): state tensors updated in place, the step's
# tensors returned. Keep identical to the C++ definition; defined here when _C.so is absent (source checkout).
KV_CACHE_BEGIN_STEP_SCHEMA = (
    "kv_cache_begin_step(Tensor(a!) slot_user, Tensor(b!) slot_valid, Tensor(c!) slot_len, Tensor(d!) slot_pages, "
    "Tensor(e!) last_used, Tensor(f!) free_pages, Tensor(g!) free_count, Tensor(h!) clock, Tensor(i!) error_flags, "
    "Tensor user_ids, Tensor cu_seqlens_q, Tensor num_append, int total_q, int page_size, bool create, "
    "bool evict, int options=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
# kv_cache_begin_step's options (hstu_kv_cache_op.cc): no gather plan (src_rows returned empty); the ready word
# after cu_seqlens_k (KVCacheManager._plan_ready, on by default under pdl); with it, the word's early form
# (KVCacheManager._begin_early, on by default).
BEGIN_STEP_NO_GATHER_PLAN = 1
BEGIN_STEP_LENGTHS_READY = 4
BEGIN_STEP_EARLY = 16
KERNEL_MAX_BATCH, KERNEL_MAX_USERS = 511, 65536  # hstu/csrc/kv_cache/hstu_kv_cache.h kMaxBatch / kMaxUsers
_libs = []
if not hasattr(torch.ops.hstu_attn, "kv_cache_begin_step"):
    _lib = torch.library.Library("hstu_attn", "FRAGMENT")
    _lib.define(KV_CACHE_BEGIN_STEP_SCHEMA)
    _libs.append(_lib)


def _begin_step_fake(slot_user, slot_valid, slot_len, slot_pages, last_used, free_pages, free_count, clock,
                     error_flags, user_ids, cu_seqlens_q, num_append, total_q, page_size, create, evict, options=0):
    # shapes of the CacheStep / PagedLayout tensors (torch.compile, export)
    B, M = user_ids.shape[0], slot_pages.shape[1]
    cap = B * M * page_size + total_q
    rows = 0 if options & BEGIN_STEP_NO_GATHER_PLAN else 2 * (cap + 1)

    def e(n, dt):
        return user_ids.new_empty((n,), dtype=dt)

    i32, i64 = torch.int32, torch.int64
    return (e(B, i64), e(B, i32), e(B + 1, i32), e(B * M, i32), e(B, i32), e(B, i32), e(total_q, i64),
            e(rows, i64), e(total_q, i64), e(B + 1, i32), e(1, i32))


if not torch._C._dispatch_has_kernel_for_dispatch_key("hstu_attn::kv_cache_begin_step", "Meta"):
    torch.library.register_fake("hstu_attn::kv_cache_begin_step", _begin_step_fake)


def kernel_available() -> bool:
    """Whether the fused bookkeeping kernel is compiled in (a CUDA build of _C.so)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("hstu_attn::kv_cache_begin_step", "CUDA")


def _append_kernel(pool: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether `KVCacheManager.append` runs as the op `hstu_attn::kv_cache_append` (CUDA, rows of contiguous H x D
    at 16-byte aligned addresses and strides; else two index_copy_, which also write the tokens that are not
    appended to the sink page)."""
    if not pool.is_cuda or not hasattr(torch.ops.hstu_attn, "kv_cache_append") or torch.compiler.is_compiling():
        return False
    step = 16 // pool.element_size()
    for t in (k, v):
        if t.stride(-1) != 1 or t.stride(-2) != t.shape[-1] or t.data_ptr() % 16 or any(
                st % step for st in t.stride()[:-2]):
            return False
    return (pool.shape[-1] * pool.shape[-2]) % step == 0


if hasattr(torch.ops.hstu_attn, "kv_cache_append") and not torch._C._dispatch_has_kernel_for_dispatch_key(
        "hstu_attn::kv_cache_append", "Meta"):
    @torch.library.register_fake("hstu_attn::kv_cache_append")
    def _append_fake(pool, k, v, dst, src, page_size, num_pages, options=0):
        return None


def _spread_sink(append_rows: torch.Tensor, num_pages: int, page_size: int) -> torch.Tensor:
    """Tokens that are not appended write to the sink page: token t to its row t % page_size, so that thousands of
    candidates' K/V rows do not all land on one row (same-address stores serialize)."""
    sink = num_pages * 2 * page_size
    t = torch.arange(append_rows.shape[0], device=append_rows.device)
    return torch.where(append_rows >= sink, sink + t % page_size, append_rows)


class KVCacheError(RuntimeError):
    """Raised by `KVCacheManager.check()`; ``flags`` holds the `CACHE_ERROR_BITS` names that were set."""

    def __init__(self, flags):
        self.flags = tuple(flags)
        super().__init__("hstu_attn KVCacheManager: " + "; ".join(_MESSAGES[f] for f in self.flags))


@dataclass
class CacheStep:
    """The device state of one serving step (from `KVCacheManager.begin_step`), shared by every layer.

    Attributes:
        slots: (B,) int64 user-table slot of each user (the sink slot for a user that could not be cached).
        cu_seqlens_q: (B + 1,) int32 offsets of the users' new tokens.
        num_append: (B,) int32 leading new tokens of each user that are appended to its cache.
        page_offsets, page_ids, last_page_lens: the page table of the users' cached tokens before this step
            ((B + 1,), (B * max_pages_per_user,), (B,) int32), as `hstu_attn_paged_func` takes it.
        cached_lens: (B,) int32 cached tokens before this step.
        append_rows: (total_q,) int64 destination of each new token's K row in a layer's cache viewed as
            (pages * 2 * page_size, H, D) (its V row is page_size further); the sink page for tokens not appended.
        layout: the gather plan of the page table (`paged_kv_layout`), computed once for all layers.
        max_seqlen_k: host int bound on cached + new tokens (max_pages_per_user * page_size + max_seqlen_q).
        append_src, append_dst: with begin_step's ``max_append``: (max_append,) int64 rows of the step's tokens
            that are appended and their destinations (as append_rows; padding entries write the sink page), so
            that `append` moves only those rows; None: `append` writes every token (the others to the sink page).
    """

    slots: torch.Tensor
    cu_seqlens_q: torch.Tensor
    num_append: torch.Tensor
    page_offsets: torch.Tensor
    page_ids: torch.Tensor
    last_page_lens: torch.Tensor
    cached_lens: torch.Tensor
    append_rows: torch.Tensor
    layout: PagedLayout
    max_seqlen_k: int
    append_src: Optional[torch.Tensor] = None
    append_dst: Optional[torch.Tensor] = None


class KVCacheManager:
    """Paged K/V caches of users for every layer of an HSTU model, managed on the device.

    Storage: ``pool`` (num_layers, num_pages + 1, 2, page_size, H, D); page ``num_pages`` is a sink page that
    absorbs writes that have nowhere to go. Users live in a table of ``max_users`` slots (+ one sink slot) with
    their id, cached length, up to ``max_pages_per_user`` page numbers and a last-used clock.

    A serving step: ``step = begin_step(user_ids, cu_seqlens_q, num_append)`` looks users up (inserting new ones),
    evicts least-recently-used users not in the batch when slots or pages run short, allocates the pages that the
    appended tokens need and returns the page table of the users' cached tokens; then each layer runs
    `hstu_attn_paged_func` on ``layer_cache(l)`` with it (`cached_hstu_attention` does both) and `append` writes
    the new tokens' K/V (one layer, or all layers in one launch). No host synchronization anywhere; fixed shapes
    for a fixed batch size, so the step is CUDA-graph capturable.

    Args:
        num_layers, num_heads, head_dim: the model's shape.
        num_pages: pages in the pool (per layer; a user holds the same page numbers in every layer).
        page_size: tokens per page, one of `PAGE_SIZES`.
        max_users: user-table capacity (>= the batch size).
        max_pages_per_user: page budget of one user (fixes the step's shapes).
        dtype, device: of the pool.
        evict: evict LRU users when the pool or the table is full; False flags `pool_full` / `users_full`.
        use_kernel: `begin_step` as one fused CUDA kernel (`hstu_attn::kv_cache_begin_step`, 1-2 launches) instead
            of ~250 torch-op launches; None = on CUDA whenever it is compiled in and the batch fits (<= 511 users,
            max_users <= 65536). Both give the same state, tensor for tensor (the torch ops are the reference).
        offload_pages: > 0 keeps evicted users' caches in a host tier of that many pages of pinned host memory
            (all layers) and reloads them when they return (hstu/_kv_offload.py; device bookkeeping, copies on
            the step's stream, no host synchronization); 0 (default): evicted caches are dropped.
        offload_users: user capacity of the host tier (default offload_pages).
        offload_pages_per_step: pages copied per step and direction at most (default min(offload_pages,
            4 * max_pages_per_user)); users beyond it are dropped and flagged (`offload_dropped`,
            `reload_dropped`).
        overlap_append: in a CUDA-graph capture, `cached_hstu_attention` runs a layer's append on a side stream
            beside the layer's attention (forked before it, joined after it: the same order guarantees for the
            caller, the append's launch off the step's critical path); False: in order, after the attention.
        pdl: `cached_hstu_attention` launches its paged Hopper forward (with the step plan's validation) and its
            append as programmatic dependent launches on compute capability 9.0 devices, as under
            ``kernel_options(pdl=True)``: each kernel's CTAs start while the kernel before it runs and wait for it
            in-kernel before their first global read (same results bit for bit; docs/hstu_inference.md). False:
            plain launches (unless the caller's ``kernel_options(pdl=True)`` asks for them).

    Raises:
        ValueError / TypeError naming the argument for bad host arguments; `KVCacheError` from `check()`.

    Example:
        >>> import torch, hstu_attn
        >>> cache = hstu_attn.KVCacheManager(2, 2, 32, num_pages=64, page_size=16, max_users=8,
        ...                                  max_pages_per_user=8, dtype=torch.float32, device="cpu")
        >>> users = torch.tensor([7, 42])
        >>> cu_q = torch.tensor([0, 20, 25], dtype=torch.int32)       # 20 and 5 new tokens
        >>> step = cache.begin_step(users, cu_q, torch.tensor([20, 5], dtype=torch.int32), 25, 20)
        >>> k = v = torch.randn(2, 25, 2, 32)                         # (layers, tokens, H, D)
        >>> cache.append(step, k, v)                                  # all layers in one launch
        >>> cache.check(); cache.cached_lengths(users).tolist()
        [20, 5]
    """

    def __init__(self, num_layers: int, num_heads: int, head_dim: int, *, num_pages: int, page_size: int = 64,
                 max_users: int, max_pages_per_user: int, dtype: torch.dtype = torch.bfloat16,
                 device="cuda", evict: bool = True, use_kernel: Optional[bool] = None, offload_pages: int = 0,
                 offload_users: Optional[int] = None, offload_pages_per_step: Optional[int] = None,
                 overlap_append: bool = True, pdl: bool = True):
        for name, val in (("num_layers", num_layers), ("num_heads", num_heads), ("head_dim", head_dim),
                          ("num_pages", num_pages), ("max_users", max_users),
                          ("max_pages_per_user", max_pages_per_user)):
            if not isinstance(val, int) or isinstance(val, bool) or val < 1:
                _err(name, "an int >= 1", val)
        if page_size not in PAGE_SIZES:
            _err("page_size", f"one of {PAGE_SIZES}", page_size)
        if not isinstance(overlap_append, bool):
            _err("overlap_append", "a bool", repr(overlap_append), TypeError)
        if not isinstance(pdl, bool):
            _err("pdl", "a bool", repr(pdl), TypeError)
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:  # "cuda" means the current device: compare with its index
            dev = torch.device("cuda", torch.cuda.current_device())
        self.num_layers, self.num_heads, self.head_dim = num_layers, num_heads, head_dim
        self.num_pages, self.page_size, self.max_users = num_pages, page_size, max_users
        self.max_pages_per_user, self.evict = max_pages_per_user, bool(evict)
        self.device, self.dtype = dev, dtype
        if use_kernel and (dev.type != "cuda" or not kernel_available() or max_users > KERNEL_MAX_USERS):
            _err("use_kernel", f"a CUDA cache with the kernel compiled in and max_users <= {KERNEL_MAX_USERS}",
                 f"device {dev}, kernel {'present' if kernel_available() else 'absent'}, max_users {max_users}")
        self.use_kernel = (dev.type == "cuda" and kernel_available() and max_users <= KERNEL_MAX_USERS
                           if use_kernel is None else bool(use_kernel))
        self.pool = torch.zeros(num_layers, num_pages + 1, 2, page_size, num_heads, head_dim, dtype=dtype, device=dev)
        i64 = dict(dtype=torch.int64, device=dev)
        # The user table (slot max_users is the sink) and the free-page stack
        (self.slot_user, self.slot_valid, self.slot_len, self.slot_pages, self.last_used, self.free_pages,
         self.free_count) = new_slot_table(max_users, num_pages, max_pages_per_user, dev)
        self.clock = torch.zeros((), **i64)
        self.error_flags = torch.zeros(1, dtype=torch.int32, device=dev)
        self.overlap_append = overlap_append
        # The serving step's launches as programmatic dependent launches (Hopper only: the bits select nothing
        # elsewhere, and the gathered path's varlen call keeps the plain op).
        self.pdl = bool(pdl) and dev.type == "cuda" and torch.cuda.get_device_capability(dev) == (9, 0)
        # The step's gather plan (PagedLayout.src_rows) made on demand, by the torch ops of paged_kv_layout, where
        # the Hopper paged forward reads the pages itself (_paged_kernel_built: compute capability 9.0, fp16 / bf16,
        # head dim 64 / 128 / 256, this build's unit): only a call it does not serve (rab) gathers, so begin_step
        # does not write it (at batch 1 a few thousand rows, on the serving step's critical path). Elsewhere the
        # fused kernel writes it. (Private: the benchmarks compare both.)
        # The serving step (private switches, the defaults measured faster; docs/hstu_inference.md): _plan_ready,
        # under pdl begin_step publishes the key offsets as soon as they are known and the step plan's block spins
        # on that word instead of waiting for begin_step's end, and exits once begin_step's step tensors are written,
        # before its table updates (True, the default; False: the plain wait); _split_arrive, the paged forward's
        # split sum with the quick arrival (True, the default; False: the plain arrival); with _plan_ready,
        # _begin_early (begin_step's lookup loads with the batch's, the ready word's reset beside them and its 2
        # before the append rows), True by default.
        self._plan_ready = True
        self._split_arrive = True
        self._begin_early = True
        # _pre_wait: under pdl, the paged forward of a layer after the step's first reads its work item and lengths
        # before its wait for the kernel before it (True, the default; False: after the wait)
        self._pre_wait = True
        self._lazy_gather_plan = _paged_kernel_built(dev, dtype, head_dim)
        # (taken now: a stream taken during a graph capture could be the pool's first, created then)
        self._append_stream = torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
        self.offload = None
        if offload_pages:
            per_step = min(offload_pages, 4 * max_pages_per_user) if offload_pages_per_step is None else \
                offload_pages_per_step
            for name, val in (("offload_pages", offload_pages), ("offload_users", offload_users or offload_pages),
                              ("offload_pages_per_step", per_step)):
                if not isinstance(val, int) or isinstance(val, bool) or val < 1:
                    _err(name, "an int >= 1", val)
            self.offload = HostTier(self, offload_pages, offload_users or offload_pages, per_step)

    # ------------------------------------------------------------------------------------------ public API
    def layer_cache(self, layer: int) -> torch.Tensor:
        """(num_pages + 1, 2, page_size, H, D) view of one layer's pages (the layout `hstu_attn_paged_func`
        takes)."""
        if not isinstance(layer, int) or not 0 <= layer < self.num_layers:
            _err("layer", f"an int in [0, {self.num_layers})", layer)
        return self.pool[layer]

    def begin_step(self, user_ids: torch.Tensor, cu_seqlens_q: torch.Tensor, num_append: torch.Tensor,
                   total_q: int, max_seqlen_q: int, *, create: bool = True,
                   max_append: Optional[int] = None) -> CacheStep:
        """Looks up the batch's users, makes room for their appended tokens, returns the step's page tables.

        Args:
            user_ids: (B,) int64 distinct user ids, on the cache's device.
            cu_seqlens_q: (B + 1,) int32 offsets of each user's new tokens (new history, then candidates).
            num_append: (B,) int32 leading new tokens of each user to append to its cache (its new history);
                counted against the user's page budget here, written by `append`.
            total_q: int, rows of the step's q / k / v (>= cu_seqlens_q[B]; host value, fixes shapes).
            max_seqlen_q: int >= every user's new-token count (host value).
            create: insert users that are not cached (evicting LRU users if needed); False = lookup only, an
                unknown user sets `unknown_user` and is served with an empty history and nothing appended.
            max_append: optional host int >= sum(num_append) (e.g. the batch's new history items, which the
                serving loop knows): `append` then moves only that many rows instead of every token (the
                candidates are never appended). Tokens past it are not appended (`append_bound`). None: no bound.

        Returns:
            a `CacheStep` (device tensors; nothing synchronizes).
        """
        B = self._check_batch(user_ids, cu_seqlens_q, num_append)
        for name, val in (("total_q", total_q), ("max_seqlen_q", max_seqlen_q)):
            if not isinstance(val, int) or isinstance(val, bool) or val < 0:
                _err(name, "an int >= 0", val)
        if max_append is not None:
            if not isinstance(max_append, int) or isinstance(max_append, bool) or max_append < 0:
                _err("max_append", "an int >= 0 or None", max_append)
            # each user keeps its appends while the running total stays within the bound
            app = num_append.long().clamp(min=0)
            before = torch.cumsum(app, 0) - app
            capped = torch.minimum(app, (max_append - before).clamp(min=0))
            self._flag(capped != app, "append_bound")
            num_append = capped.to(torch.int32)
        if self.offload is not None:
            step = self.offload.step(self, user_ids, cu_seqlens_q, num_append, total_q, max_seqlen_q, create,
                                     self._flag)
        else:
            step = self._begin_step_impl(user_ids, cu_seqlens_q, num_append, total_q, max_seqlen_q, create)
        if max_append is not None:
            step.append_src, step.append_dst = self._compact_appends(step, max_append)
        return step

    def _compact_appends(self, step: CacheStep, n: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """(n,) rows of the appended tokens (each user's leading step.num_append) and their destinations; padding
        entries read row 0 and write the sink page (row j % page_size)."""
        a = step.num_append.long()
        end = torch.cumsum(a, 0)
        j = torch.arange(n, device=self.device)
        b = torch.searchsorted(end, j, right=True).clamp_(max=a.shape[0] - 1)
        live = j < end[-1]
        src = torch.where(live, step.cu_seqlens_q.long()[b] + j - (end[b] - a[b]), torch.zeros_like(j))
        src = src.clamp_(0, max(step.append_rows.shape[0] - 1, 0))
        sink = self.num_pages * 2 * self.page_size + j % self.page_size
        dst = torch.where(live, step.append_rows[src] if step.append_rows.numel() else sink, sink)
        return src, dst

    def _flag(self, cond: torch.Tensor, name: str) -> None:
        """OR-s the bit `name` into error_flags where cond has a True (on the device)."""
        zero = torch.zeros((), dtype=torch.int32, device=self.device)
        self.error_flags.bitwise_or_(torch.where(cond.any(), CACHE_ERROR_BITS[name], zero))

    def _begin_step_impl(self, user_ids, cu_seqlens_q, num_append, total_q, max_seqlen_q, create) -> CacheStep:
        """begin_step on the device tier (arguments checked): the fused kernel, or the torch ops (the reference)."""
        B = user_ids.shape[0]
        if self.use_kernel and B <= KERNEL_MAX_BATCH:
            return self._begin_step_kernel(user_ids, cu_seqlens_q, num_append, total_q, max_seqlen_q, create)
        dev, U, P, ps, M = self.device, self.max_users, self.num_pages, self.page_size, self.max_pages_per_user
        uid = user_ids
        flag = self._flag

        # A later copy of an id in the batch is a duplicate: flagged, served with an empty history, nothing
        # appended (so the state stays defined and identical on both paths).
        srt, order = torch.sort(uid, stable=True)
        dup = torch.zeros(B, dtype=torch.bool, device=dev).index_put_((order[1:],), srt[1:] == srt[:-1])
        flag(dup, "duplicate_user")

        # Lookup: compare against the whole table (B x U; fixed shape, no sort to keep up to date).
        hit = (self.slot_user[:U].unsqueeze(0) == uid.unsqueeze(1)) & self.slot_valid[:U].unsqueeze(0)
        found = hit.any(1) & ~dup
        found_slot = hit.to(torch.int32).argmax(1)
        sink = torch.full_like(found_slot, U)
        if create:
            # New users take the B least-recently-used slots not held by this batch's known users (free ones
            # first; ties by slot index: a stable sort); the r-th new user takes the r-th of them.
            held = torch.zeros(U + 1, dtype=torch.bool, device=dev).index_fill_(0, torch.where(found, found_slot, sink), True)
            score = torch.where(self.slot_valid[:U], self.last_used[:U], torch.full_like(self.last_used[:U], -1))
            score = torch.where(held[:U], torch.full_like(score, _INT64_MAX), score)
            cand_score, cand = torch.sort(score, stable=True)
            cand_score, cand = cand_score[:B], cand[:B]
            missing = ~found & ~dup
            rank = (torch.cumsum(missing.long(), 0) - 1).clamp_(min=0)
            new_slot, new_score = cand[rank], cand_score[rank]
            usable = new_score < _INT64_MAX  # always true when max_users >= B (checked)
            if not self.evict:
                victim_ok = new_score < 0  # only free slots
                flag(missing & ~victim_ok, "users_full")
                usable = usable & victim_ok
            slot = torch.where(found, found_slot, torch.where(missing & usable, new_slot, sink))
            victim = missing & usable & (new_score >= 0)  # a valid slot taken over: evict its user
            evict_mask = torch.zeros(U + 1, dtype=torch.bool, device=dev).index_fill_(
                0, torch.where(victim, new_slot, sink), True)
        else:
            flag(~found & ~dup, "unknown_user")
            slot = torch.where(found, found_slot, sink)
            evict_mask = torch.zeros(U + 1, dtype=torch.bool, device=dev)
        evict_mask.narrow(0, U, 1).fill_(False)  # (a fill: capturable, no host copy)

        # Pages the appended tokens need. A user not found starts empty (its slot's pages are freed below).
        old_len = torch.where(found, self.slot_len[slot], torch.zeros_like(self.slot_len[slot]))
        app = num_append.long().clamp(min=0)
        app = torch.where(slot == U, torch.zeros_like(app), app)
        new_len = old_len + app
        flag(new_len > M * ps, "user_too_long")
        new_len = new_len.clamp(max=M * ps)
        have = (old_len + ps - 1) // ps
        need = (new_len + ps - 1) // ps
        n_alloc = need - have
        total = n_alloc.sum()

        in_batch = torch.zeros(U + 1, dtype=torch.bool, device=dev).index_fill_(0, slot, True)
        pages_held = (self.slot_pages[:U] < P).sum(1)  # (U,)
        avail = self.free_count + (pages_held * evict_mask[:U]).sum()
        if self.evict:
            # Evict the least-recently-used users outside the batch until the free pages cover the need.
            cand = self.slot_valid[:U] & ~in_batch[:U] & ~evict_mask[:U]
            order = torch.argsort(torch.where(cand, self.last_used[:U], torch.full_like(self.last_used[:U], _INT64_MAX)),
                                  stable=True)
            held_sorted = (pages_held * cand)[order]
            before = torch.cumsum(held_sorted, 0) - held_sorted
            take = cand[order] & (avail + before < total)
            evict_mask[:U] |= torch.zeros(U, dtype=torch.bool, device=dev).scatter_(0, order, take)
            avail = self.free_count + (pages_held * evict_mask[:U]).sum()
        flag(total > avail, "pool_full")
        self._free_users(evict_mask)

        # Pop pages: user b takes stack entries free_count-1-(start[b]+i), i < n_alloc[b]; entries past the
        # bottom of the stack give the sink page (flagged pool_full above).
        start = torch.cumsum(n_alloc, 0) - n_alloc
        i = torch.arange(M, device=dev).unsqueeze(0)
        want = i < n_alloc.unsqueeze(1)  # (B, M)
        pos = self.free_count - 1 - (start.unsqueeze(1) + i)
        page = torch.where(want & (pos >= 0), self.free_pages[pos.clamp(0, P)], torch.full_like(pos, P))
        col = (have.unsqueeze(1) + i).clamp(max=M - 1)
        row = torch.where(want, slot.unsqueeze(1), torch.full_like(pos, U))
        self.slot_pages.index_put_((row.flatten(), col.flatten()), page.flatten())
        self.free_count -= torch.minimum(total, self.free_count)
        # A user that got fewer pages than it needed (pool_full) keeps only the tokens that fit.
        got = (want & (pos >= 0)).sum(1)
        new_len = torch.minimum(new_len, (have + got) * ps)

        # Page table of the cached tokens (before this step), compacted: user b's `have[b]` pages at
        # page_offsets[b]; padding entries hold the sink page.
        page_offsets = torch.nn.functional.pad(torch.cumsum(have, 0), (1, 0))
        dst = torch.where(i < have.unsqueeze(1), page_offsets[:-1].unsqueeze(1) + i, torch.full_like(pos, B * M))
        page_ids = torch.full((B * M + 1,), P, dtype=torch.int64, device=dev)
        page_ids.index_copy_(0, dst.flatten(), self.slot_pages[slot].flatten())
        page_ids = page_ids[: B * M].to(torch.int32)
        last_page_lens = torch.where(have > 0, old_len - (have - 1) * ps, torch.zeros_like(old_len)).to(torch.int32)

        # Where each appended token goes: position old_len + r of its user (r < appended count).
        cq = cu_seqlens_q.long()
        t = torch.arange(total_q, device=dev)
        bt = torch.searchsorted(cq[1:].contiguous(), t, right=True).clamp_(max=B - 1)
        r = t - cq[bt]
        pos_t = old_len[bt] + r
        ok = (t >= cq[0]) & (r < (new_len - old_len)[bt])
        pg = self.slot_pages[slot[bt], (pos_t // ps).clamp(max=M - 1)]
        pg = torch.where(ok, pg, torch.full_like(pg, P))
        append_rows = _spread_sink(pg * (2 * ps) + pos_t % ps, P, ps)

        # Table updates: ids, lengths (after the append), clock.
        self.slot_user.index_copy_(0, slot, uid)
        self.slot_valid.index_fill_(0, slot, True)
        self.slot_len.index_copy_(0, slot, new_len)
        self.last_used.index_copy_(0, slot, (self.clock + 1).expand(B))
        self.clock += 1
        self._reset_sink()

        max_seqlen_k = M * ps + max_seqlen_q
        layout = paged_kv_layout(page_offsets.to(torch.int32), page_ids, last_page_lens, cu_seqlens_q, total_q,
                                 P + 1, ps)
        self.error_flags.bitwise_or_(layout.error_flags)  # once per step (the layers pass no error_flags)
        return CacheStep(slots=slot, cu_seqlens_q=cu_seqlens_q, num_append=(new_len - old_len).to(torch.int32),
                         page_offsets=page_offsets.to(torch.int32), page_ids=page_ids,
                         last_page_lens=last_page_lens, cached_lens=old_len.to(torch.int32),
                         append_rows=append_rows, layout=layout, max_seqlen_k=max_seqlen_k)

    def _begin_step_kernel(self, user_ids, cu_seqlens_q, num_append, total_q, max_seqlen_q, create) -> CacheStep:
        """begin_step as the fused op: the same state updates and step tensors as the torch path below."""
        lazy = self._lazy_gather_plan and not torch.compiler.is_compiling()  # (traced: the plan, as before)
        ready = bool(self._plan_ready) and self.pdl and not torch.compiler.is_compiling()
        (slots, n_app, page_offsets, page_ids, last_page_lens, cached_lens, append_rows, src_rows, dst_new, cu_k,
         lflags) = torch.ops.hstu_attn.kv_cache_begin_step(
            self.slot_user, self.slot_valid, self.slot_len, self.slot_pages, self.last_used, self.free_pages,
            self.free_count, self.clock, self.error_flags, user_ids.contiguous(), cu_seqlens_q.contiguous(),
            num_append.contiguous(), total_q, self.page_size, bool(create), self.evict,
            (BEGIN_STEP_NO_GATHER_PLAN if lazy else 0) | (BEGIN_STEP_LENGTHS_READY if ready else 0) |
            (BEGIN_STEP_EARLY if ready and self._begin_early else 0))
        # (append_rows: the kernel spreads the tokens that are not appended over the sink page, as _spread_sink)
        capacity = user_ids.shape[0] * self.max_pages_per_user * self.page_size + total_q
        P, ps = self.num_pages, self.page_size

        def gather_rows():  # the torch path's plan (the same rows as the kernel's)
            return paged_kv_layout(page_offsets, page_ids, last_page_lens, cu_seqlens_q, total_q, P + 1, ps).src_rows

        layout = PagedLayout(src_rows=None if lazy else src_rows, dst_new=dst_new, cu_seqlens_k=cu_k,
                             cached_lens=cached_lens, capacity=capacity, error_flags=lflags[0],
                             src_rows_fn=gather_rows if lazy else None, lengths_ready=ready)
        return CacheStep(slots=slots, cu_seqlens_q=cu_seqlens_q, num_append=n_app, page_offsets=page_offsets,
                         page_ids=page_ids, last_page_lens=last_page_lens, cached_lens=cached_lens,
                         append_rows=append_rows, layout=layout,
                         max_seqlen_k=self.max_pages_per_user * self.page_size + max_seqlen_q)

    def append(self, step: CacheStep, k: torch.Tensor, v: torch.Tensor, layer: Optional[int] = None) -> None:
        """Writes the step's appended tokens' K/V into the pages `begin_step` gave them.

        Args:
            step: this step's `CacheStep`.
            k, v: (total_q, H, D) of one layer (``layer`` given), or (num_layers, total_q, H, D) for every layer
                at once. On CUDA one launch (`hstu_attn::kv_cache_append`) moves the appended tokens' K and V and
                skips the others; elsewhere two index_copy_ write the others to the sink page.
            layer: the layer of a 3-d k/v; None for 4-d.
        """
        want = (step.append_rows.shape[0], self.num_heads, self.head_dim)
        if layer is None:
            want = (self.num_layers,) + want
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
                _err(name, f"shape {want}" + ("" if layer is not None else " (all layers; or pass layer=)"),
                     tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__)
            if t.dtype != self.dtype or t.device != self.device:
                _err(name, f"{self.dtype} on {self.device} (the cache's)", f"{t.dtype} on {t.device}", TypeError)
        ps = self.page_size
        rows = step.append_rows
        if _append_kernel(self.pool, k, v):
            # One launch for K and V (and every layer); the tokens that are not appended move no bytes.
            src = step.append_src
            dst = rows if src is None else step.append_dst
            pool = self.pool if layer is None else self.pool.narrow(0, layer, 1)
            k4, v4 = (k, v) if layer is None else (k.unsqueeze(0), v.unsqueeze(0))
            # (kernel_options(pdl=True): a programmatic dependent launch, like the paged forward's)
            torch.ops.hstu_attn.kv_cache_append(pool, k4, v4, dst, src, ps, self.num_pages,
                                                _current_options() & OPTION_BITS["pdl"])
            return
        if step.append_src is not None:  # only the appended tokens (begin_step's max_append)
            dim = 1 if layer is None else 0
            k, v, rows = k.index_select(dim, step.append_src), v.index_select(dim, step.append_src), step.append_dst
        if layer is None:
            flat = self.pool.view(self.num_layers, -1, self.num_heads, self.head_dim)
            flat.index_copy_(1, rows, k)
            flat.index_copy_(1, rows + ps, v)
        else:
            flat = self.layer_cache(layer).view(-1, self.num_heads, self.head_dim)
            flat.index_copy_(0, rows, k)
            flat.index_copy_(0, rows + ps, v)

    def check(self) -> None:
        """Synchronizes and raises `KVCacheError` if any step since the last check set an error flag (then
        clears the flags)."""
        bits = int(self.error_flags.item())
        if bits:
            self.error_flags.zero_()
            raise KVCacheError([n for n, b in CACHE_ERROR_BITS.items() if bits & b])

    def cached_lengths(self, user_ids: torch.Tensor) -> torch.Tensor:
        """(B,) int64 cached tokens of each user (0 if unknown); no bookkeeping change."""
        hit = (self.slot_user[: self.max_users].unsqueeze(0) == user_ids.unsqueeze(1)) & self.slot_valid[
            : self.max_users].unsqueeze(0)
        return torch.where(hit.any(1), self.slot_len[hit.to(torch.int32).argmax(1)], 0)

    def read_user(self, user_id: int, layer: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """The cached (len, H, D) keys and values of one user in one layer (host loop; for tests and debugging)."""
        ids = self.slot_user[: self.max_users].tolist()
        valid = self.slot_valid[: self.max_users].tolist()
        if not any(u == user_id and ok for u, ok in zip(ids, valid)):
            _err("user_id", "a cached user", user_id, KeyError)
        s = next(n for n, (u, ok) in enumerate(zip(ids, valid)) if u == user_id and ok)
        n = int(self.slot_len[s])
        pages = self.slot_pages[s, : (n + self.page_size - 1) // self.page_size]
        kv = self.pool[layer, pages]  # (pages, 2, ps, H, D)
        return (kv[:, 0].reshape(-1, self.num_heads, self.head_dim)[:n],
                kv[:, 1].reshape(-1, self.num_heads, self.head_dim)[:n])

    def num_free_pages(self) -> int:
        """Free pages in the pool (synchronizes)."""
        return int(self.free_count)

    # ------------------------------------------------------------------------------------------ internals
    def _check_batch(self, user_ids, cu_seqlens_q, num_append) -> int:
        if not isinstance(user_ids, torch.Tensor) or user_ids.dim() != 1 or user_ids.dtype != torch.int64:
            _err("user_ids", "a 1-d int64 tensor", f"{getattr(user_ids, 'dtype', type(user_ids).__name__)} "
                 f"{tuple(getattr(user_ids, 'shape', ()))}", TypeError)
        B = user_ids.shape[0]
        if B < 1 or B > self.max_users:
            _err("user_ids", f"1 to max_users ({self.max_users}) users", B)
        for name, t, n in (("user_ids", user_ids, B), ("cu_seqlens_q", cu_seqlens_q, B + 1),
                           ("num_append", num_append, B)):
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != (n,):
                _err(name, f"shape ({n},)", tuple(getattr(t, "shape", ())))
            if t.device != self.device:
                _err(name, f"a tensor on {self.device} (the cache's device)", t.device)
            if name != "user_ids" and t.dtype != torch.int32:
                _err(name, "dtype torch.int32", t.dtype, TypeError)
        return B

    def _free_users(self, evict_mask: torch.Tensor) -> None:
        """Pushes the pages of the users in evict_mask (U + 1,) onto the free stack and clears their slots."""
        free_slots(self.slot_pages, self.slot_valid, self.slot_len, self.slot_user, self.free_pages, self.free_count,
                   evict_mask, self.num_pages)

    def _reset_sink(self) -> None:
        reset_sink_slot(self.slot_pages, self.slot_valid, self.slot_len, self.slot_user, self.max_users,
                        self.num_pages)
