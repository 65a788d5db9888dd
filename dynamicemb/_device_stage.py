"""Staging of a step's ids into the HBM caches of caching tables over the uva store with no host wait: op
``cache_stage`` (dynamicemb/csrc/lookup/stage_common.h; CUDA kernels, and a CPU twin running the same per-id code).

One op call per step for every such table: the miss check (one probe of the whole batch, which also stamps the
cache slots of the step's hits with the step's stamp), then, on the device, every missing id's store row moved
into its cache bucket (a free slot, else the unguarded row of lowest score, written back to its store first), new
ids given a free slot for the step's insert, and those slots stamped too. A slot stamped by a step whose backward
has not run (``StepPins.stamp`` >= the oldest live one) is never evicted: the guard that the Python staging gets
from looking up the pinned keys. A warm step costs five launches (the last four return at once) and no host wait.

Failure (a cache bucket full of guarded rows, a store bucket without room for an evicted row): the ids that fit are
staged (nothing lost), the rest are left, and the step is skipped on the device (``lookup_step``'s skip flag:
nothing inserted or updated, fallback rows read); the first failure is written into the device error record and
raised as ``DeviceInputError`` (arg ``hbm_budget_bytes`` or ``max_capacity``) at the start of the next call of a
dynamicemb module, or by ``dynamicemb.check_errors()`` (which synchronizes) at once. The CPU twin raises at once.
A prefetch of a device batch is this op queued on the prefetch side stream (``_prefetch.queue_device``) with
reporting off: its step takes its stamp and runs the op gated by its failed flag (``stage(gate=...)``: nothing to do
when the prefetch staged the whole batch), which stages what the prefetch left and reports like a step.

Host cost per step: ``serves`` and the op's records are kept per module (``_plan``, ``stage_meta``) while no table
tensor is replaced (``_table.state_epoch``); the guard's stamps are one pass over the live pins of the process
(``_caching.LIVE_PINS``); the op adds the rows moved into the module's totals itself.
"""

from __future__ import annotations

import itertools
import operator
from typing import List, NamedTuple, Optional, Sequence

import torch

from . import _batched_step, _caching
from ._staging import host_phase, to_device
from ._table import state_epoch

__all__ = ["serves", "stage", "stage_meta", "next_stamp"]

_STAMPS = itertools.count(1)  # step stamps, increasing across modules and threads (next() is atomic in CPython)
_RULE_CACHE_FULL, _RULE_STORE_FULL = 11, 12
_ARG_HBM_BUDGET, _ARG_MAX_CAPACITY = 6, 7


def next_stamp() -> int:
    return next(_STAMPS)


def _plan(module, tables: List[int], device):
    """What a step of ``tables`` needs besides its ids, made once per (tables, device) and kept while no table
    tensor was replaced (``_table.state_epoch``) and the module has the same table objects: None when op
    cache_stage cannot serve them (the op missing, a table not over a ``UvaStore``, mixed value dtypes); else
    (feature table, table mask, value bytes, the ids of the tables' objects, the tables)."""
    key = (tuple(tables), device, state_epoch())
    c = module.__dict__.get("_stage_plan")
    if c is not None and c[0] == key and all(map(operator.is_, c[1], module.tables)):
        return c[2]
    ts = [module.tables[t] for t in tables]
    plan = None
    if (hasattr(torch.ops.dynamicemb, "cache_stage") and all(getattr(t, "device_store", False) for t in ts)
            and len({t.value_dtype for t in ts}) == 1):  # (one value_bytes for the op: one dtype on the fused path)
        from ._prefetch import _table_mask

        plan = (_ftable(module, device), _table_mask(module, device, tables), ts[0].value_dtype.itemsize,
                frozenset(id(t) for t in ts), ts)
    module.__dict__["_stage_plan"] = (key, list(module.tables), plan)
    return plan


def live_stamps(table_ids) -> List[Optional[int]]:
    """Stamps of the live ``StepPins`` (steps whose backward has not run) of the tables whose ``id()`` is in
    ``table_ids`` (None for a step staged by the Python path): one pass over the few live pins of the process."""
    return [p.stamp for p in list(_caching.LIVE_PINS) if not table_ids.isdisjoint(p._idx)]


def serves(module, ids: torch.Tensor, tables: List[int], pins: Sequence = ()):
    """Whether op cache_stage stages the caching tables ``tables`` of this step: ``module.device_staging`` (on by
    default on CUDA), every table over a ``UvaStore`` and of one dtype, the fused kernel path on CUDA (outside a
    graph capture), and every live step's pins (and ``pins``) stamped (a step staged by the Python path has no
    stamps in the caches). O(1) per step: the table checks are kept (``_plan``). Returns a false value, or (the
    plan, the live stamps) for ``stage(served=...)``, which then need not look them up again."""
    if not tables or not getattr(module, "device_staging", False):
        return False
    if module.device.type == "cuda":
        if not (module.use_kernels and ids.is_cuda) or _batched_step._capturing():
            return False
    plan = _plan(module, tables, ids.device)
    if plan is None:
        return False
    live = live_stamps(plan[3])
    if None in live or not all(getattr(p, "stamp", None) is not None for p in pins):
        return False
    return plan, live


def _ptr(t: Optional[torch.Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def stage_meta(module) -> torch.Tensor:
    """(T * 12,) int64 on the module's device: per caching table over a ``UvaStore`` its store's table and the
    stamps of its cache slots (lookup_types.h ``StageTable``), zeros for the other tables; rebuilt when a table
    tensor was replaced (``_table.state_epoch``) or the module holds other table objects: no data pointer and no
    tensor identity is read on the hot path."""
    c = module.__dict__.get("_stage_meta")
    if c is not None and c[0] == state_epoch() and all(map(operator.is_, c[1], module.tables)):
        return c[2]
    rows = []
    for t in module.tables:
        if not getattr(t, "device_store", False):
            rows.append([0] * 12)
            continue
        st = t.store.table
        stamps = t.__dict__.get("_stamps")
        if stamps is None or stamps.numel() != t.capacity():
            stamps = t.__dict__["_stamps"] = torch.zeros(t.capacity(), dtype=torch.int64, device=t.device)
        vh = getattr(st, "values_host", None)
        rows.append([_ptr(st.keys), _ptr(st.digests), _ptr(st.scores), _ptr(st.values), _ptr(vh),
                     int(getattr(st, "hbm_slots", 0)) if vh is not None else 0, _ptr(st.locks), _ptr(st.counters),
                     st.capacity() // st.bucket_capacity, st.bucket_capacity, _ptr(stamps),
                     int(getattr(st, "host_run", 0)) if vh is not None else 0])
    host = torch.tensor(rows, dtype=torch.int64).view(-1)
    # the tensors the records point into are kept alive with it (so an address cannot be reused unnoticed)
    keep = [(t.keys, t.__dict__.get("_stamps"), t.store.table) for t in module.tables
            if getattr(t, "device_store", False)]
    module.__dict__["_stage_meta"] = (state_epoch(), list(module.tables), to_device(host, module.device), host, keep)
    return module.__dict__["_stage_meta"][2]


def _ftable(module, device) -> torch.Tensor:
    ft = module.__dict__.get("_ftable_i32")
    if ft is None or ft.device != device:
        ft = module.__dict__["_ftable_i32"] = torch.tensor(module.feature_table_map, dtype=torch.int32, device=device)
    return ft


def _totals(module) -> torch.Tensor:
    """(T, 3) int64 device counts of the device stagings per table: rows moved in, rows written back, ids left
    unstaged (``CachedTable.rows_moved`` adds the first two); op cache_stage adds to it on the device."""
    tot = module.__dict__.get("_stage_totals")
    if tot is None:
        tot = module.__dict__["_stage_totals"] = torch.zeros(len(module.tables), 3, dtype=torch.int64,
                                                             device=module.device)
        for i, t in enumerate(module.tables):
            if getattr(t, "device_store", False):
                t._moved_dev = tot[i]
    return tot


class Deferred(NamedTuple):
    """A step's staging left to its lookup_step op (``stage(defer=True)``): op cache_stage's arguments that the
    step's op takes after its own (insert_new is the step's training flag; the op always reports)."""

    stage: torch.Tensor
    totals: torch.Tensor
    mask: torch.Tensor
    cur: int
    min_live: int
    gate: Optional[torch.Tensor]


def stage(module, ids: torch.Tensor, offsets: torch.Tensor, tables: List[int], insert_new: bool, stamp: int,
          pins: Sequence = (), report: bool = True, gate: Optional[torch.Tensor] = None, defer: bool = False,
          served=None, failed_host: int = 0):
    """Queues op cache_stage for the caching tables ``tables`` (``serves`` holds) with this step's ``stamp``; the
    guard covers the stamps of the live ``StepPins`` of those tables and of ``pins``. No host wait on CUDA; the
    per-step host work is the op call, a pass over the live pins and one generation bump per table. ``gate``:
    a prefetch's failed flag ((1,) int32 on the device): the op does nothing where it reads 0 (the prefetch staged
    the whole batch) and stages what the prefetch left otherwise (on the device: no host wait either way).

    ``defer`` (a step on the fused kernel path, CUDA): the op is not called; its arguments go into the step's
    lookup_step, which stages first (the same kernels, on the same stream, reporting): one op call per step.
    ``served``: what ``serves`` returned for these tables just before (the plan and live stamps are reused).
    ``failed_host`` (CUDA): the address of a pinned int32 that gets a copy of the failed flag after the op's kernels
    (a prefetch's: ``_prefetch.take`` reads it).

    Returns:
        (failed (1,) int32: the step's skip flag for lookup_step; info int64: per table misses, the F + 1 feature
        bounds, the first failure [rule, table, id, slots]); with ``defer``: (``Deferred``, None). The rows moved
        per table go into ``_totals``.

    Raises (CPU twin only, at once; CUDA reports through the device error record when ``report``):
        DeviceInputError: some id could not be staged (see the module docstring).
    """
    dev = ids.device
    plan, live = served if served else (_plan(module, tables, dev), None)
    ftable, mask, vb, tids, ts = plan
    live = [s for s in (live_stamps(tids) if live is None else live) if s is not None] + [
        p.stamp for p in pins if p.stamp is not None]
    min_live = min(live + [stamp])
    if defer:
        for t in ts:
            t.mutated()  # keys may move (in the step's op)
        return Deferred(stage_meta(module), _totals(module), mask, stamp, min_live, gate), None
    B = (offsets.numel() - 1) // module.num_features
    off = offsets if offsets.device == dev else to_device(offsets.long().contiguous(), dev)
    if off.dtype != torch.int64:
        off = off.long()
    failed, info = torch.ops.dynamicemb.cache_stage(
        module._kernel_meta(), stage_meta(module), _totals(module), ids if ids.is_contiguous() else ids.contiguous(),
        off if off.is_contiguous() else off.contiguous(), ftable, B, mask, stamp, min_live, insert_new, vb,
        report and dev.type == "cuda", gate, failed_host)
    for t in ts:
        t.mutated()  # keys may have moved: a prefetch job's proof for this cache is void
    if dev.type != "cuda" and report:  # the CPU twin raises at once (host tensors: no wait)
        with host_phase():
            if int(failed[0]):
                raise failure(module, info)
    return failed, info


def failure(module, info: torch.Tensor):
    """The error of a failed staging from its info (host tensor): DeviceInputError as the device would report."""
    from ._checks import host_error

    from ._staging import host_phase

    T, F = len(module.tables), module.num_features
    with host_phase():
        rule, table, key, slots = [int(x) for x in info[T + F + 1:T + F + 5].tolist()]
    arg = _ARG_MAX_CAPACITY if rule == _RULE_STORE_FULL else _ARG_HBM_BUDGET
    return host_error(arg, rule, table, key, slots)
