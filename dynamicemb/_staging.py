"""Staging of one step's ids into the caches of several caching tables at once (``_caching.py`` has the contract).

Host synchronizations per step do not depend on the number of tables: the missing ids of every table come to the
host in one readback, the rows read from the backing stores go to the device in one copy per row layout, and the
insert results (eviction counts, refusals, evicted rows) of every table come back in one readback. Per table there
remain the table ops themselves (a lookup and two score assignments for the pins, the erase of the rows that make
room (``_uva_store.make_room``, one hash for all tables), one insert, one score assignment and one erase to
finish), all queued without waiting, and the store calls on the host
(the tables' stores in parallel threads: each has its own store and lock, and the store calls release the GIL).

``host_phase()`` marks work on host tensors only (store reads and writes, splitting by table): it changes nothing
at run time; the sync-counting test harness skips it (on a CPU module every tensor is a host tensor).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Dict, List, Sequence

import torch


_MAX_SCORE = -1  # uint64 max as int64 bits
_EMPTY_KEY = -(2**63)  # the reserved empty key (int64 bits): table ops skip it
_STATE = threading.local()


@contextlib.contextmanager
def host_phase():
    """Marks a block of host-only work (see the module docstring); no effect on what runs."""
    prev = getattr(_STATE, "host", False)
    _STATE.host = True
    try:
        yield
    finally:
        _STATE.host = prev


def in_host_phase() -> bool:
    return getattr(_STATE, "host", False)


def to_host(*tensors: torch.Tensor) -> List[torch.Tensor]:
    """CPU copies of ``tensors`` with one wait for all: non-blocking copies into pinned memory, then one
    synchronize of the current stream (CPU tensors pass through)."""
    cuda = [t for t in tensors if t.is_cuda]
    if not cuda:
        return list(tensors)
    out = []
    for t in tensors:
        if t.is_cuda:
            h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            h.copy_(t, non_blocking=True)
            t = h
        out.append(t)
    torch.cuda.current_stream(cuda[0].device).synchronize()
    return out


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device`` without a host wait (through pinned memory on CUDA)."""
    if device.type != "cuda":
        return t
    return t.pin_memory().to(device, non_blocking=True)


_POOL = []  # [pid, thread pool] for the store calls of several tables, made on first use in a process


def _each(fn, items) -> list:
    """``[(fn(x), None) or (None, exception)]`` for every item: in threads when there are several (each table has
    its own store and lock, and the store calls release the GIL), else inline. Marked host-only work."""
    def one(x):
        with host_phase():
            try:
                return fn(x), None
            except Exception as e:  # returned: the caller decides per table
                return None, e
    if len(items) < 2:
        return [one(x) for x in items]
    if not _POOL or _POOL[0] != os.getpid():  # made here (a forked child has none of its parent's threads)
        from concurrent.futures import ThreadPoolExecutor

        _POOL[:] = [os.getpid(), ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                                    thread_name_prefix="dynamicemb-store")]
    return list(_POOL[1].map(one, items))


def _groups(rows: List[torch.Tensor]) -> List[List[int]]:
    """Indices of ``rows`` (row blocks) by (width, dtype): one transfer per group."""
    g: Dict[tuple, List[int]] = {}
    for i, r in enumerate(rows):
        g.setdefault((r.shape[1], r.dtype), []).append(i)
    return list(g.values())


def _cat(parts: List[torch.Tensor], dim: int = 0) -> torch.Tensor:
    return torch.cat(parts, dim) if len(parts) > 1 else parts[0]


def _ungroup(groups, blocks, rows, dim=0) -> List[torch.Tensor]:
    """The per-row-block pieces of the transferred group tensors ``blocks`` (sizes from ``rows``)."""
    out: List[torch.Tensor] = [None] * len(rows)
    for idx, b in zip(groups, blocks):
        for i, piece in zip(idx, torch.split(b, [rows[i].shape[dim] for i in idx], dim)):
            out[i] = piece
    return out


def keys_to_keep(t, present: torch.Tensor, pin: bool, pins: Sequence) -> torch.Tensor:
    """The keys a staging of table ``t`` must not evict: ``present`` (the step's ids of the table), the ids of its
    live ``StepPins`` (``pin``) and those of ``pins``, in one tensor (repeats allowed)."""
    from ._prefetch import in_worker

    keep = not in_worker()  # a job's stream computes pin keys it does not keep (see StepPins.keys_for)
    live = list(t._pins) if pin else []
    live += [p for p in pins if not any(p is q for q in live)]
    parts = [x.view(torch.int64) for x in [present] + [p.keys_for(t, keep) for p in live] if x is not None]
    return (torch.cat(parts) if len(parts) > 1 else parts[0].contiguous()).view(t.key_dtype)


def pin_keys(tables: list, present: List[torch.Tensor], pin: bool, pins: Sequence):
    """Step 1 of a staging: the ids of ``present`` in each cache and the ids of live ``StepPins`` (``pin``) and of
    ``pins`` get the maximum score, so the staging's insert evicts none of them (no host wait). Returns (per table
    the pinned keys, absent ones masked to the empty key, and their true scores; the caches' op clocks)."""
    dev = tables[0].device
    empty = torch.full((), _EMPTY_KEY, dtype=torch.int64, device=dev)  # a fill: torch.tensor(.., device) is a blocking copy
    clocks = [t.counters[0].clone() for t in tables]
    held = []
    for t, k in zip(tables, present):
        keys = keys_to_keep(t, k, pin, pins)
        found, scores = t._cache_find(keys)
        keys = torch.where(found, keys.view(torch.int64), empty).view(t.key_dtype)  # absent ones: skipped
        t._set_scores(keys, torch.full_like(scores, _MAX_SCORE))
        held.append((keys, scores))
    return held, clocks


def unpin_keys(tables: list, held: list, clocks: list) -> None:
    """The last step of a staging: every pinned key gets its true score back, and the op clock is the step's."""
    for t, (keys, scores), c in zip(tables, held, clocks):
        t._set_scores(keys, scores)
        t.counters[0].copy_(c)


def stage_tables(tables: list, present: List[torch.Tensor], missing: List[torch.Tensor], insert_new: bool,
                 pin: bool = True, pins: Sequence = ()) -> None:
    """Stages the ids of one step into several caching tables (``CachedTable``s, one device).

    Args:
        tables: the caching tables that miss some of the step's ids.
        present: per table, the step's ids on the device (duplicates and the reserved empty key allowed): those in
            the cache are pinned (with the ids of live ``StepPins``) while staging runs.
        missing: per table, the step's ids its cache misses: unique, CPU.
        insert_new: reserve a free slot for every missing id the store does not hold either.
        pin: also pin the ids of live ``StepPins`` (steps whose backward has not run).
        pins: more ``StepPins`` to pin (a prefetch job's: the steps in flight when it was queued, whose backward may
            have released them since while its update is still queued on the device).

    Raises:
        CacheCapacityError: some table cannot hold the step's ids; no table changed.
        StoreError: a store cannot be read (no table changed) or written (the tables whose stores took the write
            are staged: rows moved, the same logical rows and scores, nothing lost; the others are unchanged).
    """
    from ._caching import CacheCapacityError
    from ._table import ScoredHashTable

    if not tables:
        return
    dev = tables[0].device
    empty = torch.full((), _EMPTY_KEY, dtype=torch.int64, device=dev)  # a fill: torch.tensor(.., device) is a blocking copy
    held, clocks = pin_keys(tables, present, pin, pins)
    try:
        # 2. rows of the missing ids: prefetched ones, the rest from each store (host); one copy to the device for
        # the keys, scores and stored flags of every table, one per row layout for the rows
        plans = _each(lambda tm: tm[0]._plan_staging(tm[1], insert_new), list(zip(tables, missing)))
        for _, e in plans:
            if e is not None:
                raise e
        plans = [p for p, _ in plans]
        with host_phase():
            metas = [torch.stack([p[0].view(torch.int64), p[2], p[3].to(torch.int64)]) for p in plans]
            vgroups = _groups([p[1] for p in plans])
            up = [_cat(metas, 1)] + [_cat([plans[i][1] for i in g]) for g in vgroups]
        up = [to_device(x, dev) for x in up]
        dmeta = _ungroup([list(range(len(plans)))], up[:1], metas, 1)
        dvals = _ungroup(vgroups, up[1:], [p[1] for p in plans])
        # 3. room for the inserts in every cache at once (``_uva_store.make_room``: per bucket the lowest-score
        # unpinned rows its new keys need), then per table the insert at score 0 into the freed slots: it never
        # evicts (a bucket without room refuses: the capacity check); make_room's rows are the evicted rows
        from ._uva_store import make_room

        sizes = [m.shape[1] for m in dmeta]
        part, c = [], 0
        for n in sizes:
            part.append(slice(c, c + n))
            c += n
        outs = [(torch.full((n,), _EMPTY_KEY, dtype=torch.int64, device=dev), t._empty(n, t.value_dim,
                 dtype=t.value_dtype), torch.zeros(n, dtype=torch.int64, device=dev)) for t, n in zip(tables, sizes)]
        make_room(tables, part, up[0][0], outs, None)
        res = []
        for t, m, vals, (ek, ev, es) in zip(tables, dmeta, dvals, outs):
            n = m.shape[1]
            ikeys = m[0].contiguous().view(t.key_dtype)
            if n:
                stats = t._custom("insert_or_assign", ikeys, values=vals.contiguous(),
                                  scores=torch.zeros(n, dtype=torch.int64, device=dev))
                info = torch.stack([(ek != _EMPTY_KEY).sum(), stats[3]])  # rows freed, keys refused
            else:
                info = torch.zeros(2, dtype=torch.int64, device=dev)
            res.append((ikeys, m[1].contiguous(), m[2].bool(), ek.view(t.key_dtype), ev, es, info))
        # one readback for every table: the counts and the evicted rows (whole buffers: once the cache is full,
        # nearly every inserted row evicts one)
        ints = [torch.stack([r[6] for r in res]).view(-1)] + [torch.cat([r[3].view(torch.int64), r[5]]) for r in res]
        egroups = _groups([r[4] for r in res])
        down = to_host(_cat(ints), *[_cat([res[i][4] for i in g]) for g in egroups])
        with host_phase():
            hints = torch.split(down[0], [2 * len(res)] + [x.numel() for x in ints[1:]])
            info = hints[0].view(len(res), 2).tolist()
            hev = _ungroup(egroups, down[1:], [r[4] for r in res])
        if any(refused for _, refused in info):
            for t, r, (ne, _) in zip(tables, res, info):
                undo_insert(t, r[0], r[3][:ne], r[4][:ne], r[5][:ne])
            i = next(i for i, (_, refused) in enumerate(info) if refused)
            raise CacheCapacityError(
                f"caching table: expected the HBM cache of {tables[i].capacity()} slots to hold this step's keys, got"
                f" {info[i][1]} of {res[i][0].numel()} new-to-the-cache keys refused (their buckets are full of keys"
                f" of this step or of steps in flight); raise hbm_budget_bytes (nothing was changed)")
        # 4. per table one atomic store write (the evicted rows in, the moved rows out), the tables' stores at once
        def write(i):
            t, n, ne, hk = tables[i], res[i][0].numel(), info[i][0], hints[1 + i]
            t.store.write(hk[:ne].view(t.key_dtype), hev[i][:ne], hk[n:n + ne], plans[i][0][plans[i][3]])

        errors = [e for _, e in _each(write, list(range(len(tables))))]
        for t, r, p, (ne, _), e in zip(tables, res, plans, info, errors):
            if e is not None:  # this store took nothing: the cache goes back as it was
                undo_insert(t, r[0], r[3][:ne], r[4][:ne], r[5][:ne])
                continue
            # 5. true scores for the moved rows; the new ids' placeholders go (their slots stay free for the step)
            with host_phase():
                t._count_moved(int(p[3].sum()), ne)
            if r[0].numel():
                t._set_scores(torch.where(r[2], r[0].view(torch.int64), empty).view(t.key_dtype), r[1])
                ScoredHashTable.erase(t, torch.where(r[2], empty, r[0].view(torch.int64)).view(t.key_dtype))
            t._pending = p[4]
        for e in errors:
            if e is not None:
                raise e
    finally:
        unpin_keys(tables, held, clocks)  # 6.


def undo_insert(t, ikeys, ek, ev, es):
    """Puts a cache back as before a staging insert: the inserted keys leave, the evicted rows return (into the
    slots the inserted keys free in their own buckets) with their scores."""
    from ._table import ScoredHashTable

    if ikeys.numel():
        ScoredHashTable.erase(t, ikeys)
    if ek.numel():
        t._custom("insert_or_assign", ek.contiguous(), values=ev.contiguous(), scores=es.contiguous())
