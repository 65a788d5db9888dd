"""Staging of a step's ids into the HBM caches of caching tables over the uva store with no host wait: op
``cache_stage`` (dynamicemb/csrc/lookup/stage_common.h; CUDA kernels, and a CPU twin running the same per-id code).

One op call per step for every such table: the miss check (one probe of the whole batch, which also stamps the
cache slots of the step's hits with the step's stamp), then, on the device, every missing id's store row moved
into its cache bucket (a free slot, else the unguarded row of lowest score, written back to its store first), new
ids given a free slot for the step's insert, and those slots stamped too. A slot stamped by a step whose backward
has not run (``StepPins.stamp`` >= the oldest live one) is never evicted: the guard that the Python staging gets
from looking up the pinned keys. A warm step costs four launches (the last three return at once) and no host wait.

Failure (a cache bucket full of guarded rows, a store bucket without room for an evicted row): the ids that fit are
staged (nothing lost), the rest are left, and the step is skipped on the device (``lookup_step``'s skip flag:
nothing inserted or updated, fallback rows read); the first failure is written into the device error record and
raised as ``DeviceInputError`` (arg ``hbm_budget_bytes`` or ``max_capacity``) at the start of the next call of a
dynamicemb module, or by ``dynamicemb.check_errors()`` (which synchronizes) at once. The CPU twin raises at once.
A prefetch job stages with reporting off and reads the result back in its thread: a failed job changes the
step's nothing but what it staged (losslessly), and the step stages and reports itself.
"""

from __future__ import annotations

import itertools
from typing import List, Optional, Sequence

import torch

__all__ = ["serves", "stage", "stage_meta", "next_stamp"]

_STAMPS = itertools.count(1)  # step stamps, increasing across modules and threads (next() is atomic in CPython)
_RULE_CACHE_FULL, _RULE_STORE_FULL = 11, 12
_ARG_HBM_BUDGET, _ARG_MAX_CAPACITY = 6, 7


def next_stamp() -> int:
    return next(_STAMPS)


def serves(module, ids: torch.Tensor, tables: List[int], pins: Sequence = ()) -> bool:
    """Whether op cache_stage stages the caching tables ``tables`` of this step: ``module.device_staging`` (on by
    default on CUDA), every table over a ``UvaStore`` and of one dtype, the fused kernel path on CUDA (outside a
    graph capture), and every live step's pins (and ``pins``) stamped (a step staged by the Python path has no
    stamps in the caches)."""
    if not tables or not getattr(module, "device_staging", False) or not hasattr(torch.ops.dynamicemb, "cache_stage"):
        return False
    if module.device.type == "cuda":
        from ._batched_step import _capturing

        if not (module.use_kernels and ids.is_cuda) or _capturing():
            return False
    ts = [module.tables[t] for t in tables]
    if not all(getattr(t, "device_store", False) for t in ts) or len({t.value_dtype for t in ts}) != 1:
        return False  # (one value_bytes for the op: the fused kernel path has one dtype anyway)
    return all(getattr(p, "stamp", None) is not None for p in list(pins) + [p for t in ts for p in list(t._pins)])


def _ptr(t: Optional[torch.Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _identity(t, st):
    """The tensors a StageTable record points into (None: not a uva caching table)."""
    if st is None:
        return None
    return (t.keys, t.__dict__.get("_stamps"), st.keys, st.digests, st.scores, st.values,
            getattr(st, "values_host", None), st.locks, st.counters)


def stage_meta(module) -> torch.Tensor:
    """(T * 11,) int64 on the module's device: per caching table over a ``UvaStore`` its store's table and the
    stamps of its cache slots (lookup_types.h ``StageTable``), zeros for the other tables; rebuilt when a table's
    tensors changed (checked by identity: no data pointer is read on the hot path)."""
    from ._staging import to_device

    tabs = [(t, t.store.table) if getattr(t, "device_store", False) else (t, None) for t in module.tables]
    key = [_identity(t, st) for t, st in tabs]
    c = module.__dict__.get("_stage_meta")
    if c is not None and len(c[0]) == len(key) and all(
            (a is None) == (b is None) and (a is None or all(x is y for x, y in zip(a, b))) for a, b in zip(c[0], key)):
        return c[1]
    rows = []
    for t, st in tabs:
        if st is None:
            rows.append([0] * 11)
            continue
        stamps = t.__dict__.get("_stamps")
        if stamps is None or stamps.numel() != t.capacity():
            stamps = t.__dict__["_stamps"] = torch.zeros(t.capacity(), dtype=torch.int64, device=t.device)
        vh = getattr(st, "values_host", None)
        rows.append([_ptr(st.keys), _ptr(st.digests), _ptr(st.scores), _ptr(st.values), _ptr(vh),
                     int(getattr(st, "hbm_rows", 0)) if vh is not None else 0, _ptr(st.locks), _ptr(st.counters),
                     st.capacity() // st.bucket_capacity, st.bucket_capacity, _ptr(stamps)])
    key = [_identity(t, st) for t, st in tabs]
    host = torch.tensor(rows, dtype=torch.int64).view(-1)
    module.__dict__["_stage_meta"] = (key, to_device(host, module.device), host)  # the host copy stays alive
    return module.__dict__["_stage_meta"][1]


def _ftable(module, device) -> torch.Tensor:
    ft = module.__dict__.get("_ftable_i32")
    if ft is None or ft.device != device:
        ft = module.__dict__["_ftable_i32"] = torch.tensor(module.feature_table_map, dtype=torch.int32, device=device)
    return ft


def _totals(module) -> torch.Tensor:
    """(T, 3) int64 device counts of the device stagings per table: rows moved in, rows written back, ids left
    unstaged (``CachedTable.rows_moved`` adds the first two)."""
    tot = module.__dict__.get("_stage_totals")
    if tot is None:
        tot = module.__dict__["_stage_totals"] = torch.zeros(len(module.tables), 3, dtype=torch.int64,
                                                             device=module.device)
        for i, t in enumerate(module.tables):
            if getattr(t, "device_store", False):
                t._moved_dev = tot[i]
    return tot


def stage(module, ids: torch.Tensor, offsets: torch.Tensor, tables: List[int], insert_new: bool, stamp: int,
          pins: Sequence = (), report: bool = True):
    """Queues op cache_stage for the caching tables ``tables`` (``serves`` holds) with this step's ``stamp``; the
    guard covers the stamps of the live ``StepPins`` of those tables and of ``pins``. No host wait on CUDA.

    Returns:
        (failed (1,) int32: the step's skip flag for lookup_step; info int64: per table misses, the F + 1 feature
        bounds, per table [moved in, written back, left unstaged], the first failure [rule, table, id, slots]).

    Raises (CPU twin only, at once; CUDA reports through the device error record when ``report``):
        DeviceInputError: some id could not be staged (see the module docstring).
    """
    from ._prefetch import _table_mask
    from ._staging import host_phase, to_device

    dev = ids.device
    F = module.num_features
    B = (offsets.numel() - 1) // F
    off = offsets if offsets.device == dev else to_device(offsets.long().contiguous(), dev)
    live = [p.stamp for t in tables for p in list(module.tables[t]._pins)] + [p.stamp for p in pins]
    min_live = min([s for s in live if s is not None] + [stamp])
    vb = torch.empty((), dtype=module.tables[tables[0]].value_dtype).element_size()
    failed, info = torch.ops.dynamicemb.cache_stage(
        module._kernel_meta(), stage_meta(module), ids.contiguous(), off.long().contiguous(), _ftable(module, dev),
        B, _table_mask(module, dev, tables), stamp, min_live, insert_new, vb, report and dev.type == "cuda")
    T = len(module.tables)
    for t in tables:
        module.tables[t].mutated()  # keys may have moved: a prefetch job's proof for this cache is void
    _totals(module).add_(info[T + F + 1:T + F + 1 + 3 * T].view(T, 3))
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
        rule, table, key, slots = [int(x) for x in info[T + F + 1 + 3 * T:].tolist()]
    arg = _ARG_MAX_CAPACITY if rule == _RULE_STORE_FULL else _ARG_HBM_BUDGET
    return host_error(arg, rule, table, key, slots)
