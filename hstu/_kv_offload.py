"""Offload of evicted users' KV caches to pinned host memory and their reload, for `KVCacheManager(offload_pages=)`.

A second tier of pages in pinned host memory, with its own user table (id, length, host pages, last-used clock)
and free-page stack, all device tensors; the page data lives in a pinned CPU tensor that the copy kernel reaches
through UVA. One serving step, in stream order and without a host synchronization:

1. reload plan: batch users missing on the device but present in the host table come back (whole users, in batch
   order, while their pages fit the step's budget ``offload_pages_per_step``);
2. a reload bookkeeping step: those users get device pages for their cached length, as an append without tokens
   (the device tier's usual lookup, LRU eviction and page allocation; a snapshot of the user table before it);
3. the step's own bookkeeping (`KVCacheManager.begin_step` without offload): reloaded users are cached users;
4. spill: every user either step evicted (valid in the snapshot, gone or replaced now) goes to the host tier (whole
   users in slot order within the budget; host users are evicted LRU-first for slots and pages);
5. copies: the spilled pages device -> host, then the reloaded pages host -> device (the pages an eviction freed may
   be reused by a reload, so the spill reads them first); then the host pages of the reloaded users are freed.

The copies are one fixed-size launch each (`hstu_attn::kv_cache_copy_pages`: entries past the live count return at
once), so the step keeps fixed shapes and stays CUDA-graph capturable. What does not fit (a step's budget, a host
pool smaller than one user) is dropped and flagged (`offload_dropped`, `reload_dropped`), never an out-of-bounds
access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # pragma: no cover
    from ._kv_cache import KVCacheManager

_INT64_MAX = torch.iinfo(torch.int64).max

# Keep identical to the C++ definition (hstu/csrc/ops/hstu_kv_cache_op.cc); defined here when _C.so is absent.
KV_CACHE_COPY_PAGES_SCHEMA = (
    "kv_cache_copy_pages(Tensor src, Tensor(a!) dst, Tensor src_pages, Tensor dst_pages, Tensor count) -> ()")
_libs = []
if not hasattr(torch.ops.hstu_attn, "kv_cache_copy_pages"):
    _lib = torch.library.Library("hstu_attn", "FRAGMENT")
    _lib.define(KV_CACHE_COPY_PAGES_SCHEMA)
    _libs.append(_lib)
if not torch._C._dispatch_has_kernel_for_dispatch_key("hstu_attn::kv_cache_copy_pages", "Meta"):
    torch.library.register_fake("hstu_attn::kv_cache_copy_pages", lambda src, dst, sp, dp, count: None)


def new_slot_table(users: int, num_pages: int, max_pages_per_user: int, device: torch.device) -> tuple:
    """An empty user-slot table on the device: (user ids, valid flags, lengths, page lists, last-used clocks, free-page
    stack, free count). Slot ``users`` is the sink (never valid, holds only the sink page ``num_pages``); the stack is
    free_pages[:free_count], its last entry a dump for pushes that do not happen."""
    i64 = dict(dtype=torch.int64, device=device)
    return (torch.full((users + 1,), -1, **i64), torch.zeros(users + 1, dtype=torch.bool, device=device),
            torch.zeros(users + 1, **i64), torch.full((users + 1, max_pages_per_user), num_pages, **i64),
            torch.zeros(users + 1, **i64),
            torch.cat((torch.arange(num_pages, **i64), torch.full((1,), num_pages, **i64))),
            torch.full((), num_pages, **i64))


def free_slots(pages, valid, lens, user, free_pages, free_count, mask, num_pages: int) -> None:
    """A slot table's eviction (KVCacheManager's users and the host tier's alike): pushes the pages (< num_pages)
    of the slots in mask onto the free stack (free_pages, with a sink entry at num_pages; free_count a 0-d tensor,
    updated in place) and clears those slots. Device ops only, CUDA-graph capturable."""
    P = num_pages
    m = (mask.unsqueeze(1) & (pages < P)).flatten()
    dst = torch.where(m, free_count + torch.cumsum(m.long(), 0) - 1, torch.full_like(pages, P).flatten())
    free_pages.index_copy_(0, dst.clamp(max=P), pages.flatten())
    free_pages.narrow(0, P, 1).fill_(P)  # (a fill: capturable)
    free_count += m.sum()
    pages.masked_fill_(mask.unsqueeze(1), P)
    valid.masked_fill_(mask, False)
    lens.masked_fill_(mask, 0)
    user.masked_fill_(mask, -1)


def reset_sink_slot(pages, valid, lens, user, sink: int, num_pages: int) -> None:
    """Clears a slot table's sink row `sink` (fills: capturable; an index assignment of a Python scalar copies from
    the host)."""
    valid.narrow(0, sink, 1).fill_(False)
    lens.narrow(0, sink, 1).fill_(0)
    pages.narrow(0, sink, 1).fill_(num_pages)
    user.narrow(0, sink, 1).fill_(-1)


def copy_kernel_available() -> bool:
    """Whether the page-copy kernel is compiled in (a CUDA build of _C.so)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("hstu_attn::kv_cache_copy_pages", "CUDA")


def copy_pages(src: torch.Tensor, dst: torch.Tensor, src_pages: torch.Tensor, dst_pages: torch.Tensor,
               count: torch.Tensor) -> None:
    """dst[:, dst_pages[e]] = src[:, src_pages[e]] for e < count (pools (layers, pages, ...)). CUDA: the kernel
    (one of the pools may be pinned host memory); CPU: torch ops (reads the count: no device there)."""
    if src_pages.is_cuda:
        torch.ops.hstu_attn.kv_cache_copy_pages(src, dst, src_pages, dst_pages, count)
        return
    n = int(count.reshape(()))
    if n > 0:
        dst.index_copy_(1, dst_pages[:n], src.index_select(1, src_pages[:n]))


class HostTier:
    """The host tier of a `KVCacheManager` (constructed by it; see the module docstring)."""

    def __init__(self, cache: "KVCacheManager", num_pages: int, max_users: int, pages_per_step: int):
        dev, M = cache.device, cache.max_pages_per_user
        if dev.type == "cuda" and not copy_kernel_available():
            raise NotImplementedError("hstu_attn: offload_pages: expected a build with the page-copy kernel "
                                      "(hstu_attn::kv_cache_copy_pages) for a CUDA cache, got a build without it")
        self.num_pages, self.max_users, self.pages_per_step = num_pages, max_users, pages_per_step
        shape = (cache.num_layers, num_pages + 1, 2, cache.page_size, cache.num_heads, cache.head_dim)
        # page num_pages is a sink; pinned so that the copy kernel reaches it through UVA
        self.pool = torch.zeros(shape, dtype=cache.dtype, pin_memory=dev.type == "cuda")
        i64 = dict(dtype=torch.int64, device=dev)
        Ph, E = num_pages, pages_per_step
        (self.user, self.valid, self.len, self.pages, self.last_used, self.free_pages,
         self.free_count) = new_slot_table(max_users, num_pages, M, dev)
        # the last step's copy lists (fixed size E; entries past the count are not copied)
        self.spill_src, self.spill_dst = torch.full((E,), 0, **i64), torch.full((E,), Ph, **i64)
        self.reload_src, self.reload_dst = torch.full((E,), Ph, **i64), torch.full((E,), 0, **i64)
        self.spill_count, self.reload_count = torch.zeros(1, **i64), torch.zeros(1, **i64)

    STATE = ("user", "valid", "len", "pages", "last_used", "free_pages", "free_count")

    def step(self, cache: "KVCacheManager", uid, cu_seqlens_q, num_append, total_q, max_seqlen_q, create, flag):
        dev, U, P, ps, M = cache.device, cache.max_users, cache.num_pages, cache.page_size, cache.max_pages_per_user
        Uh, Ph, E = self.max_users, self.num_pages, self.pages_per_step
        B = uid.shape[0]
        ar_b = torch.arange(B, device=dev)

        # 1. Returning users: not on the device, in the host table (first copy of a repeated id only).
        on_dev = ((cache.slot_user[:U].unsqueeze(0) == uid.unsqueeze(1)) & cache.slot_valid[:U].unsqueeze(0)).any(1)
        first = ~((uid.unsqueeze(0) == uid.unsqueeze(1)) & (ar_b.unsqueeze(0) < ar_b.unsqueeze(1))).any(1)
        hhit = (self.user[:Uh].unsqueeze(0) == uid.unsqueeze(1)) & self.valid[:Uh].unsqueeze(0)
        back = hhit.any(1) & ~on_dev & first & create
        hslot = torch.where(back, hhit.to(torch.int32).argmax(1).long(), torch.full_like(ar_b, Uh))
        rpages = (self.len[hslot] + ps - 1) // ps * back
        admitted = back & (torch.cumsum(rpages, 0) <= E)
        flag(back & ~admitted, "reload_dropped")
        rlen = torch.where(admitted, self.len[hslot], torch.zeros_like(rpages))

        # 2. Snapshot, then the reload bookkeeping: the returning users get pages for their cached length.
        prev_user, prev_valid = cache.slot_user[:U].clone(), cache.slot_valid[:U].clone()
        prev_len, prev_pages = cache.slot_len[:U].clone(), cache.slot_pages[:U].clone()
        if create:
            cu_r = torch.nn.functional.pad(torch.cumsum(rlen, 0), (1, 0)).to(torch.int32)
            r_step = cache._begin_step_impl(uid, cu_r, rlen.to(torch.int32), E * ps, M * ps, True)
            r_slot, r_len = r_step.slots, r_step.num_append.long()  # tokens that got pages (pool_full: fewer)
        else:
            r_slot, r_len = torch.full_like(ar_b, U), torch.zeros_like(ar_b)

        # 3. The step itself (reloaded users are cached users now).
        step = cache._begin_step_impl(uid, cu_seqlens_q, num_append, total_q, max_seqlen_q, create)

        # 4. Spill whom steps 2-3 evicted: whole users in slot order within the step's page budget.
        gone = prev_valid & (~cache.slot_valid[:U] | (cache.slot_user[:U] != prev_user))
        npg = (prev_pages < P).sum(1) * gone
        cum = torch.cumsum(npg, 0)
        spill = gone & (npg > 0) & (cum <= E)
        # host room: evict host users (least recently used first, not those coming back now) while short of
        # slots or pages
        n_users, n_pages = spill.sum(), (npg * spill).sum()
        held = torch.zeros(Uh + 1, dtype=torch.bool, device=dev).index_fill_(0, hslot, True)
        cand = self.valid[:Uh] & ~held[:Uh]
        order = torch.argsort(torch.where(cand, self.last_used[:Uh], torch.full_like(self.last_used[:Uh],
                                                                                     _INT64_MAX)), stable=True)
        hp = (self.pages[:Uh] < Ph).sum(1)
        c_sorted, p_sorted = cand[order].long(), (hp * cand)[order]
        slots_before = (~self.valid[:Uh]).sum() + torch.cumsum(c_sorted, 0) - c_sorted
        pages_before = self.free_count + torch.cumsum(p_sorted, 0) - p_sorted
        take = cand[order] & ((slots_before < n_users) | (pages_before < n_pages))
        h_evict = torch.zeros(Uh + 1, dtype=torch.bool, device=dev)
        h_evict[:Uh] = torch.zeros(Uh, dtype=torch.bool, device=dev).scatter_(0, order, take)
        self._free(h_evict)
        # what fits now: the r-th spilled user takes the r-th free host slot, pages while the stack lasts
        free_slot = ~self.valid[:Uh]
        fs_order = torch.argsort((~free_slot).to(torch.int8), stable=True)  # free slots first, by index
        rank = torch.cumsum(spill.long(), 0) - 1
        spill = spill & (rank < free_slot.sum()) & (torch.cumsum(npg * spill, 0) <= self.free_count)
        flag(gone & (npg > 0) & ~spill, "offload_dropped")
        rank = torch.cumsum(spill.long(), 0) - 1
        hs = torch.where(spill, fs_order[rank.clamp(0, Uh - 1)], torch.full_like(rank, Uh))  # (U,) host slot
        npg = npg * spill
        end = torch.cumsum(npg, 0)
        total_sp = end[-1] if U > 0 else torch.zeros((), dtype=torch.int64, device=dev)
        e = torch.arange(E, device=dev)
        live = e < total_sp
        s_e = torch.searchsorted(end, e, right=True).clamp_(max=U - 1)
        i_e = (e - (end[s_e] - npg[s_e])).clamp(0, M - 1)
        h_page = self.free_pages[(self.free_count - 1 - e).clamp(0, Ph)]
        self.spill_src.copy_(torch.where(live, prev_pages[s_e, i_e], torch.full_like(e, P)))
        self.spill_dst.copy_(torch.where(live, h_page, torch.full_like(e, Ph)))
        self.spill_count.copy_(total_sp.reshape(1))
        row = torch.where(live, hs[s_e], torch.full_like(e, Uh))
        self.pages.index_put_((row, i_e), self.spill_dst)
        self.free_count -= total_sp
        self.user.index_copy_(0, hs, prev_user)
        self.valid.index_fill_(0, hs, True)
        self.len.index_copy_(0, hs, prev_len)
        self.last_used.index_copy_(0, hs, cache.clock.expand(U))

        # 5. Reload lists: returning user b's first ceil(r_len / ps) pages, host -> its new device pages.
        rp = (r_len + ps - 1) // ps
        r_end = torch.cumsum(rp, 0)
        b_e = torch.searchsorted(r_end, e, right=True).clamp_(max=B - 1)
        j_e = (e - (r_end[b_e] - rp[b_e])).clamp(0, M - 1)
        r_live = e < r_end[-1]
        self.reload_src.copy_(torch.where(r_live, self.pages[hslot[b_e], j_e], torch.full_like(e, Ph)))
        self.reload_dst.copy_(torch.where(r_live, cache.slot_pages[r_slot[b_e].clamp(max=U), j_e],
                                          torch.full_like(e, P)))
        self.reload_count.copy_(r_end[-1].reshape(1))
        self._reset_sinks()
        # the copies, in this order (see the module docstring)
        copy_pages(cache.pool, self.pool, self.spill_src, self.spill_dst, self.spill_count)
        copy_pages(self.pool, cache.pool, self.reload_src, self.reload_dst, self.reload_count)
        # returning users (reloaded or dropped) leave the host tier
        gone_h = torch.zeros(Uh + 1, dtype=torch.bool, device=dev).index_fill_(0, hslot, True)
        gone_h.narrow(0, Uh, 1).fill_(False)
        self._free(gone_h)
        return step

    def _free(self, mask: torch.Tensor) -> None:
        """Pushes the host pages of the users in mask (Uh + 1,) onto the host free stack and clears their slots."""
        free_slots(self.pages, self.valid, self.len, self.user, self.free_pages, self.free_count, mask, self.num_pages)

    def _reset_sinks(self) -> None:
        reset_sink_slot(self.pages, self.valid, self.len, self.user, self.max_users, self.num_pages)
