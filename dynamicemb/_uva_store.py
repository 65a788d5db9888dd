"""The device-indexed host store of the caching mode (``backing_store=UvaStoreSpec()``): every row of a caching
table that is not in its HBM cache lives in pinned host memory, indexed by a scored hash table in HBM (a
``HybridTable`` with ``hbm_rows=0``: keys, digests and scores in HBM, value rows in host memory that the table
kernels read and write through UVA). So a staging is device work: the missing ids are looked up, their rows read,
and the evicted rows written back by the table's CUDA kernels, queued on the staging's stream, with no copy of the
ids to the host and no CPU store thread. One host wait per staging remains (all tables together): the cache's
capacity check (and the store's: a full store bucket), before the staging is finished or undone.

Capacity: the store has the table's ``max_capacity`` slots (like ``HostStore``), in buckets of the table's
``bucket_capacity``. A write-back that finds its store bucket full is refused, never evicts: the staging is undone
(cache and store as before) and ``StoreError`` raised; nothing is lost. Raise ``max_capacity`` (the store fills at
a load factor below 1 when ids hash unevenly into its buckets).

On a CPU module the table is the CPU twin (one buffer) and the same code runs on CPU tensors (tests).
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import torch

from ._storage import BackingStore, StoreError, StoreRows

__all__ = ["UvaStore", "UvaStoreSpec", "missing_by_table", "stage_tables_device", "unique_padded"]

_EMPTY_KEY = -(2**63)  # the reserved empty key (int64 bits): every table op skips it (counted `illegal`)
_MAX_SCORE = -1  # uint64 max as int64 bits
_RESERVED_MAX = -(2**63) + 2  # the largest reserved key (int64 bits): table ops skip the three reserved keys


@dataclasses.dataclass(frozen=True)
class UvaStoreSpec:
    """Chooses the device-indexed host store for a caching table (``DynamicEmbTableOptions.backing_store``).

    The store holds ``max_capacity`` rows in pinned host memory (``max_capacity * row bytes``) and its index in HBM
    (17 bytes per slot: key, digest, score), so its staging needs no host round trip but the capacity check.

    Example:
        >>> DynamicEmbTableOptions(dim=128, max_capacity=1 << 22, storage="caching", hbm_budget_bytes=1 << 28,
        ...                        backing_store=UvaStoreSpec())
    """

    # Slot-major host rows (slot j of every bucket one contiguous run, slots claimed lowest first: a cold step's
    # moves touch fewer host regions; docs/dynamicemb_storage_notes.md, "Slot-major host rows"); private: False =
    # bucket-major, for comparisons.
    _slot_major: bool = dataclasses.field(default=True, repr=False)

    def open(self, key_dtype, value_dim, value_dtype, capacity, bucket_capacity=128, device=None) -> "UvaStore":
        return UvaStore(key_dtype, value_dim, value_dtype, capacity, bucket_capacity, device,
                        _slot_major=self._slot_major)


class UvaStore(BackingStore):
    """Rows in pinned host memory indexed in HBM: a ``HybridTable`` of ``capacity`` slots, ``hbm_rows=0``, caller
    scores (customized policy). Unlike the other stores its tensors live on the table's device (it takes tensors
    from any device); ``device_indexed`` tells the caching table to stage through ``stage_tables_device``.

    Args:
        key_dtype, value_dim, value_dtype: the table's.
        capacity: slots (a multiple of ``bucket_capacity``).
        bucket_capacity: slots per bucket.
        device: the module's device (CUDA: index in HBM, rows in pinned host memory; CPU: the CPU twin).

    Raises (``write``):
        StoreError: a row does not fit (its bucket is full); the store is left as it was.

    Example:
        >>> s = UvaStore(torch.int64, 8, torch.float32, 1024, device="cuda")
        >>> s.insert(torch.tensor([1, 2]), torch.ones(2, 8), torch.tensor([5, 6]))
        >>> s.find(torch.tensor([2, 3])).found
        tensor([ True, False], device='cuda:0')
    """

    device_indexed = True

    def __init__(self, key_dtype: torch.dtype, value_dim: int, value_dtype: torch.dtype, capacity: int,
                 bucket_capacity: int = 128, device=None, _slot_major: bool = True):
        from ._hybrid import HybridTable

        self.key_dtype, self.value_dim, self.value_dtype = key_dtype, value_dim, value_dtype
        self.table = HybridTable(capacity, value_dim, value_dtype, key_dtype, bucket_capacity, "customized",
                                 device=device, hbm_rows=0, _slot_major=_slot_major)
        self.device = self.table.device

    def _on(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device).contiguous()

    def find(self, keys):
        keys = self._on(keys)
        n = keys.numel()
        values = self.table._empty(n, self.value_dim, dtype=self.value_dtype)
        found = self.table._empty(n, dtype=torch.bool)
        scores = self.table._empty(n, dtype=torch.int64)
        if n:
            self.table._lookup(keys, values, found, scores)
        return StoreRows(values, scores, found)

    def put(self, keys: torch.Tensor, values: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Queues the insert (assign if present) of rows without evicting any: at score 0 (a full bucket refuses
        it: eviction needs a strictly higher score), then their own scores. Keys may hold the empty key (skipped).
        Returns the insert's stats (device; ``stats[3]``: rows refused by full buckets)."""
        stats = self.table._upsert("insert_or_assign", keys, values=values, scores=torch.zeros_like(scores))
        self.table._upsert("assign_scores", keys, scores=scores)
        return stats

    def write(self, put_keys, put_values, put_scores, erase_keys):
        pk, pv, ek = self._on(put_keys), self._on(put_values), self._on(erase_keys)
        ps = self._on(put_scores.view(torch.int64))
        erased = self.find(ek) if ek.numel() else None  # for the undo
        before = self.find(pk) if pk.numel() else None
        if ek.numel():
            self.table.erase(ek)
        if not pk.numel():
            return
        refused = int(self.put(pk, pv, ps)[3])
        if refused:  # put the store back as it was: the puts leave, overwritten and erased rows return
            self.table.erase(pk)
            for k, r in ((pk, before), (ek, erased)):
                if r is not None:
                    keep = torch.where(r.found, k.view(torch.int64), _EMPTY_KEY).view(self.key_dtype)
                    self.table._upsert("insert_or_assign", keep, values=r.values, scores=r.scores)
            raise StoreError(f"UvaStore: full: expected room for {pk.numel()} rows, got {refused} refused by full "
                             f"buckets of {self.table.capacity()} slots (nothing was written); raise max_capacity")

    def export_batches(self, batch_rows, threshold=None):
        yield from self.table.export_chunks(batch_rows, threshold)

    def size(self):
        return self.table.size()

    def size_tensor(self) -> torch.Tensor:
        """Stored rows as a 0-d int64 device tensor (no host wait)."""
        return self.table.size_tensor()

    def clear(self):
        self.table.clear()


def unique_padded(keys: torch.Tensor) -> torch.Tensor:
    """``keys`` (n,) int64 bits sorted, each repeat replaced by the empty key: unique keys padded to n, with no host
    wait (torch.unique's size would need one)."""
    s = torch.sort(keys.view(torch.int64)).values
    if s.numel() > 1:
        s = torch.cat([s[:1], torch.where(s[1:] == s[:-1], _EMPTY_KEY, s[1:])])
    return s


def missing_by_table(ids: torch.Tensor, bounds: List[int], feature_table: List[int], tables: List[int],
                     found: torch.Tensor, sizes: List[int]) -> List[torch.Tensor]:
    """Per table of ``tables``, the step's ids its cache misses, with no host wait: ``found`` False at the positions
    of its features (``bounds``: the F + 1 feature bounds; ``feature_table``: each feature's table); ``sizes``: how
    many such positions each table has (its miss count, repeats and reserved ids included). One
    ``nonzero_static`` of exactly that many positions, a sort by (table, id), repeats and reserved ids masked to the
    empty key: table j's are the ``sizes[j]`` entries after the tables before it (slices of one buffer), unique
    but for the empty key."""
    from ._staging import to_device

    dev = ids.device
    j_of = {t: j for j, t in enumerate(tables)}
    F = len(feature_table)
    small = to_device(torch.tensor([[j_of.get(feature_table[f], len(tables)) for f in range(F)],
                                    [bounds[f + 1] - bounds[f] for f in range(F)]], dtype=torch.int64), dev)
    tpos = torch.repeat_interleave(small[0], small[1], output_size=ids.numel())  # each position's table index
    total = sum(sizes)
    need = torch.logical_not(found) & (tpos < len(tables))
    pos = torch.nonzero_static(need, size=total, fill_value=0).view(-1)
    k = ids.view(torch.int64)[pos]
    k = torch.where(k < _RESERVED_MAX + 1, _EMPTY_KEY, k)  # reserved ids are never stored
    sk, p1 = torch.sort(k, stable=True)
    st, p2 = torch.sort(tpos[pos][p1], stable=True)
    sk = sk[p2]
    if total > 1:
        rep = torch.zeros(total, dtype=torch.bool, device=dev)
        rep[1:] = (sk[1:] == sk[:-1]) & (st[1:] == st[:-1])
        sk = torch.where(rep, _EMPTY_KEY, sk)
    return [x.view(ids.dtype) for x in torch.split(sk, sizes)]


def _bucket_of(h: torch.Tensor, num_buckets: torch.Tensor) -> torch.Tensor:
    """The home bucket of hashes ``h`` (int64 bits of the uint64 hash): the high 64 bits of h * num_buckets (the
    kernels' ``bucket_of_hash``), in 32-bit halves so that int64 never overflows (num_buckets < 2**31)."""
    hi = (h >> 32) & 0xFFFFFFFF
    lo = h & 0xFFFFFFFF
    return (hi * num_buckets + ((lo * num_buckets) >> 32)) >> 32


def guard_slots(tables: list, present: List[torch.Tensor], pin: bool, pins: Sequence):
    """Per table, a (capacity,) bool mask of the cache slots a staging must not free: those of ``present`` (the
    step's ids of the table) and of the ids of live ``StepPins`` (``pin``) and of ``pins`` (one lookup per table,
    no host wait; they keep their scores); and the op clocks, restored when the staging ends."""
    from ._staging import keys_to_keep

    clocks = [t.counters[0].clone() for t in tables]
    masks = []
    for t, k in zip(tables, present):
        keys = keys_to_keep(t, k, pin, pins)
        cap = t.capacity()
        mask = torch.zeros(cap + 1, dtype=torch.bool, device=t.device)
        if keys.numel():
            slots = t._empty(keys.numel(), dtype=torch.int64)
            t._lookup(keys, slots_out=slots)
            mask.index_fill_(0, torch.where(slots >= 0, slots, cap), True)  # absent ones mark the spare entry
        masks.append(mask[:cap])
    return masks, clocks


def make_room(tables: list, part: List[slice], ikeys: torch.Tensor, outs: list, guards: Optional[list]) -> None:
    """Frees, in each bucket of each cache, as many slots as the keys about to be inserted there (``ikeys``: the
    tables' new-to-the-cache keys side by side, table j's at ``part[j]``; the empty key elsewhere) need beyond the
    bucket's free slots: the bucket's rows of lowest score (ties: lowest slot) that ``guards[j]`` does not protect
    (``guard_slots``; None: no guards, the host path pins by score), the ones an insert's eviction would take with
    those rows pinned, for every bucket at once (one sort of every bucket's scores). A guarded row, a row of the maximum score and a reserved slot are never taken.
    The rows are copied into ``outs[j]`` = (keys int64, rows, scores), each of ``part[j]``'s length, the empty key
    after the last, then erased from the cache. No host wait."""
    from ._hash import hash_keys
    from ._staging import to_device
    from ._table import ScoredHashTable

    dev = ikeys.device
    groups: dict = {}
    for j, t in enumerate(tables):
        if part[j].stop > part[j].start:
            groups.setdefault(t.bucket_capacity, []).append(j)
    for cap, js in groups.items():
        nbs = [tables[j].capacity() // cap for j in js]
        boff = [0]
        for nb in nbs:
            boff.append(boff[-1] + nb)
        sizes = [part[j].stop - part[j].start for j in js]
        keys = torch.cat([ikeys[part[j]] for j in js]) if len(js) > 1 else ikeys[part[js[0]]]
        small = to_device(torch.tensor([nbs, boff[:-1]], dtype=torch.int64), dev)
        seg = torch.repeat_interleave(torch.arange(len(js), device=dev), to_device(
            torch.tensor(sizes, dtype=torch.int64), dev), output_size=sum(sizes))
        bucket = _bucket_of(hash_keys(keys.contiguous()), small[0][seg]) + small[1][seg]
        incoming = torch.zeros(boff[-1], dtype=torch.int64, device=dev).index_add_(0, bucket,
                                                                                  (keys != _EMPTY_KEY).long())
        k = torch.cat([tables[j].keys.view(torch.int64) for j in js]).view(-1, cap)
        sc = torch.cat([tables[j].scores for j in js]).view(-1, cap)
        guard = None if guards is None else (
            torch.cat([guards[j] for j in js]) if len(js) > 1 else guards[js[0]]).view(-1, cap)
        need = (incoming - (k == _EMPTY_KEY).sum(1)).clamp_(min=0)
        # unsigned score order as int64 order (flip the sign bit); guarded, max-score and reserved slots last
        free_ok = (k > _RESERVED_MAX) & (sc != _MAX_SCORE)
        if guard is not None:
            free_ok &= torch.logical_not(guard)
        order_key = torch.where(free_ok, sc ^ _EMPTY_KEY, 2**63 - 1)
        sv, order = torch.sort(order_key, dim=1, stable=True)
        take = (torch.arange(cap, device=dev)[None, :] < need[:, None]) & (sv != 2**63 - 1)
        for i, j in enumerate(js):
            t, (ok_, ov, os_) = tables[j], outs[j]
            rows = slice(boff[i], boff[i + 1])
            pos = torch.nonzero_static(take[rows].reshape(-1), size=sizes[i], fill_value=-1).view(-1)
            got = pos >= 0
            p0 = pos.clamp(min=0)
            slot = torch.div(p0, cap, rounding_mode="floor") * cap + order[rows].reshape(-1)[p0]
            ok_.copy_(torch.where(got, t.keys.view(torch.int64)[slot], _EMPTY_KEY))
            torch.index_select(t.scores, 0, slot, out=os_)
            torch.index_select(t.values, 0, slot, out=ov)
            ScoredHashTable.erase(t, ok_.view(t.key_dtype))


def stage_tables_device(tables: list, present: List[torch.Tensor], missing: List[torch.Tensor], insert_new: bool,
                        pin: bool = True, pins: Sequence = ()) -> int:
    """``_staging.stage_tables`` for caching tables over ``UvaStore``s: the same contract (see _caching.py), all
    on the device. Guard masks of the slots of the step's ids and of steps in flight (``guard_slots``); per table
    the store's lookup of the missing ids; room for them in every cache at once (``make_room``: per bucket the
    lowest-score unguarded rows its new keys need); per table the cache's insert at score 0 into the freed slots
    (it never evicts: a bucket without room refuses, counted in its stats); then, only if no table's cache refused
    (a device flag, no wait), per table the store's erase of the moved rows and the write-back of the freed ones
    (never evicting in the store); one host wait for every table's counts; then the moved rows' true scores and
    the new ids' placeholders erased. The element-wise work runs once for all tables (their missing ids side by
    side in one buffer, each table op on its slice): per table only its 9 table ops are launched.

    Args:
        tables, present, insert_new, pin, pins: as for ``stage_tables``.
        missing: per table, ids its cache misses on the device: unique but for the empty key (padding), no
            reserved key.

    Returns:
        the number of ids staged (missing ids, padding excluded), all tables together.

    Raises:
        CacheCapacityError: some cache cannot hold the step's ids; nothing changed (store writes were masked off).
        StoreError: some store bucket is full; those tables are undone (cache and store as before), the others
            staged.
    """
    from ._caching import CacheCapacityError
    from ._staging import host_phase, to_device, to_host, undo_insert
    from ._table import ScoredHashTable

    if not tables:
        return 0
    dev = tables[0].device
    sizes = [m.numel() for m in missing]
    cuts = [0]
    for n in sizes:
        cuts.append(cuts[-1] + n)
    total = cuts[-1]
    part = [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:])]
    guards, clocks = guard_slots(tables, present, pin, pins)
    try:
        m = (torch.cat([x.view(torch.int64) for x in missing]) if len(missing) > 1
             else missing[0].view(torch.int64)).contiguous()
        # 1. per table: the store's rows of the missing ids (found flags and scores side by side for all tables)
        found = torch.zeros(total, dtype=torch.bool, device=dev)
        sscores = torch.zeros(total, dtype=torch.int64, device=dev)
        svalues = []
        for t, p in zip(tables, part):
            v = t.store.table._empty(p.stop - p.start, t.value_dim, dtype=t.value_dtype)
            if p.stop > p.start:
                t.store.table._lookup(m[p].view(t.key_dtype), v, found[p], sscores[p])
            svalues.append(v)
        real = m != _EMPTY_KEY
        ins = (real & found) if not insert_new else real
        ikeys = torch.where(ins, m, _EMPTY_KEY)
        zero = torch.zeros(total, dtype=torch.int64, device=dev)
        # 2. room for the inserts: per bucket the lowest-score unguarded rows the bucket's new keys need leave the
        # cache, for all buckets at once (an insert's own eviction path would take them one key after the other
        # under the bucket lock, ~20 us each on the H200, and a step's misses crowd into the buckets that overflow)
        ek = torch.full((total,), _EMPTY_KEY, dtype=torch.int64, device=dev)
        es = torch.zeros(total, dtype=torch.int64, device=dev)
        evs = [t._empty(p.stop - p.start, t.value_dim, dtype=t.value_dtype) for t, p in zip(tables, part)]
        make_room(tables, part, ikeys, [(ek[p], ev, es[p]) for p, ev in zip(part, evs)], guards)
        # 3. per table: the insert at score 0 into the freed slots: it never evicts (eviction needs a strictly
        # higher score), so a bucket without room refuses (the capacity check); the true scores come in step 6
        stats = []
        for t, p, v in zip(tables, part, svalues):
            if p.stop > p.start:
                stats.append(t._custom("insert_or_assign", ikeys[p].view(t.key_dtype), values=v, scores=zero[p]))
            else:
                stats.append(torch.zeros(5, dtype=torch.int64, device=dev))
        st = torch.stack(stats)  # (tables, 5): refused at 3 (keys unique: a refused key is one left out)
        ok = st[:, 3].sum() == 0
        # 4. only if no cache refused: the moved rows leave the stores, the evicted rows go in (never evicting)
        moved = torch.where(found & ins & ok, m, _EMPTY_KEY)
        small = to_device(torch.tensor(sizes, dtype=torch.int64), dev)
        seg = torch.repeat_interleave(torch.arange(len(tables), device=dev), small, output_size=total)
        valid = ek != _EMPTY_KEY
        out = torch.where(valid & ok, ek, _EMPTY_KEY)
        evicted = torch.zeros(len(tables), dtype=torch.int64, device=dev).index_add_(0, seg, valid.long())
        store_refused = []
        for t, p, ev in zip(tables, part, evs):
            if p.stop == p.start:
                store_refused.append(torch.zeros((), dtype=torch.int64, device=dev))
                continue
            t.store.table.erase(moved[p].view(t.key_dtype))
            k = out[p].view(t.key_dtype)
            stats_put = t.store.table._upsert("insert_or_assign", k, values=ev, scores=zero[p])
            t.store.table._upsert("assign_scores", k, scores=es[p])
            store_refused.append(stats_put[3])
        staged = torch.zeros(len(tables), dtype=torch.int64, device=dev).index_add_(0, seg, real.long())
        read = torch.zeros(len(tables), dtype=torch.int64, device=dev).index_add_(0, seg, (found & ins).long())
        info = torch.stack([st[:, 3], torch.stack(store_refused), evicted, staged, read], 1)
        hinfo = to_host(info)[0]  # the one wait: capacity checks of every cache and store
        with host_phase():
            info = hinfo.tolist()
        if any(row[0] for row in info):  # every cache goes back: the inserted keys leave, the freed rows return
            for t, p, ev in zip(tables, part, evs):
                undo_insert(t, ikeys[p].view(t.key_dtype), ek[p].view(t.key_dtype), ev, es[p])
            i = next(i for i, row in enumerate(info) if row[0])
            raise CacheCapacityError(
                f"caching table: expected the HBM cache of {tables[i].capacity()} slots to hold this step's keys, got"
                f" {info[i][0]} new-to-the-cache keys refused (their buckets are full of keys of this step or of steps"
                f" in flight); raise hbm_budget_bytes (nothing was changed)")
        full = []
        for t, p, v, ev, (_, sref, ne, _, nread) in zip(tables, part, svalues, evs, info):
            if p.stop == p.start:
                continue
            if sref:  # this store could not take its write-back: store and cache go back as they were
                t.store.table.erase(out[p].view(t.key_dtype))
                t.store.table._upsert("insert_or_assign", moved[p].view(t.key_dtype), values=v, scores=sscores[p])
                undo_insert(t, ikeys[p].view(t.key_dtype), ek[p].view(t.key_dtype), ev, es[p])
                full.append((t, sref))
                continue
            t._count_moved(nread, ne)
        # true scores for the moved rows; the new ids' placeholders go (their slots stay free for the step)
        new = torch.where(ins & torch.logical_not(found), m, _EMPTY_KEY)
        for t, p in zip(tables, part):
            if p.stop > p.start and not any(t is f for f, _ in full):
                t._set_scores(moved[p].view(t.key_dtype), sscores[p])
                ScoredHashTable.erase(t, new[p].view(t.key_dtype))
        if full:
            t, sref = full[0]
            raise StoreError(f"UvaStore: full: expected room for the rows evicted from the cache, got {sref} refused "
                             f"by full buckets of the store's {t.store.table.capacity()} slots (this table's staging "
                             f"was undone, nothing lost); raise max_capacity")
        return sum(row[3] for row in info)
    finally:
        for t, c in zip(tables, clocks):  # the step sees the op clock it had before the staging
            t.counters[0].copy_(c)
