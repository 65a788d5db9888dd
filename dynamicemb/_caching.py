"""The caching storage mode: a scored hash table in HBM (the cache) in front of a backing store holding every
other row (``_storage.py``), built from the table's existing ops; no kernel knows about it.

Contract (what makes a caching table behave like an all-HBM table on the same ids):
  - exclusive: a key lives in the cache or in the store, never both; an evicted row is written back with its
    score, a missing row is moved into the cache, so no row is lost while the store has room.
  - ``stage(keys)`` runs before a step touches the cache: it moves every key of the step that the store holds into
    the cache and reserves a free slot in its bucket for every new key, so the step's own find_or_insert only
    hits or fills free slots (it never evicts). Staging inserts with the customized policy at the maximum score
    while the step's keys (and the keys of training steps whose backward has not run: ``pins``) hold the maximum
    score too, so staging evicts neither; afterwards every key gets back its true score and the cache's op clock
    is restored. The step then sees the same rows, scores and op clock (which seeds new rows) as an all-HBM table.
  - eviction from the cache is by score (the table's policy), among keys not pinned.
  - a step whose keys do not fit into the cache (a bucket would need more slots than it has) raises
    ``CacheCapacityError`` before anything changes; raise ``hbm_budget_bytes``.
  - the logical op clock and epoch live in the cache table; ``size()``/``find()``/``contains()``/``erase()``/
    ``insert_or_assign()``/``items()`` are logical (cache + store); the slot ops (``find_or_insert_slots``,
    ``find_slots``, ...) and ``keys``/``values`` are the cache's, valid for keys staged first.

Staging of a module's step (``_staging.stage_tables``) stages every caching table that misses ids of the step
together, with a fixed number of host waits whatever the number of tables (docs/dynamicemb_storage.md).

Prefetch of a module's coming batch on the device (``_prefetch.py``): a job stages the batch on a side stream and
a background host thread, with the rows of steps in flight pinned, so that the batch's step finds every id in the
cache and skips staging (``generation``: the step trusts the job only while the cache did not change since).
Every logical op below first waits for such jobs (``_prefetch.settled``).

Prefetch of keys into host memory (``prefetch(keys)``, the CPU-ids form): looks up which keys are missing from the
cache and reads those the store holds into host memory; the next staging moves them without reading the store.
It never changes the cache; the prefetched rows stay valid because the store only changes inside staging (which
takes a key's prefetched row when it moves the key) and the logical writes (which drop every prefetched row).
"""

from __future__ import annotations

import weakref
from typing import Dict, List, Optional

import torch

from ._prefetch import settled
from ._staging import host_phase, stage_tables, to_host
from ._storage import BackingStore
from ._table import ExportResult, FindResult, ScoredHashTable, TableInitializer

__all__ = ["CachedTable", "CacheCapacityError", "StepPins"]

_EMPTY_KEY = -(2**63)  # the reserved empty key (int64 bits): no table op finds or stores it
_CUSTOMIZED = 2
LIVE_PINS = weakref.WeakSet()  # every live StepPins of the process (a few: the steps in flight of every module)


class CacheCapacityError(RuntimeError):
    """The HBM cache of a caching table cannot hold one step's keys at once (more keys of the step hash to a
    bucket than it has slots); nothing was changed. Raise the table's ``hbm_budget_bytes``."""


class StepPins:
    """Keys of one training step per caching table, pinned (never evicted by staging) until its backward ran
    (``release``) or this object died with the step's graph: the module keeps it with the step's saved tensors.

    Args:
        keys: {table index: keys} or a callable returning it, called the first time a staging asks (so a step whose
            staging found every id in the cache keeps only a reference to its ids, and computes nothing).
        tables: the module's tables (the caching ones among ``table_ids`` register this object).
        table_ids: the table indices ``keys`` covers (default: ``keys``' own, when it is a dict).
    """

    #: the step's stamp in the caches (op cache_stage, _device_stage.py): its slots stay guarded while it lives;
    #: None for a step staged by the Python path (its keys are looked up instead)
    stamp: Optional[int] = None

    def __init__(self, keys, tables: List["CachedTable"], table_ids: Optional[List[int]] = None):
        self._keys = keys if isinstance(keys, dict) else None
        self._fn = None if isinstance(keys, dict) else keys
        ids = list(keys) if table_ids is None else list(table_ids)
        for t in ids:
            tables[t]._pins.add(self)
        self._idx = {id(tables[t]): t for t in ids}
        self._sets = [tables[t]._pins for t in ids]
        LIVE_PINS.add(self)  # (op cache_stage's guard reads the stamps of these: _device_stage.live_stamps)

    def release(self) -> None:
        """Unpins the step's keys now (its backward ran), whatever still references this object: a traceback, a
        debugger or a sanitizer can keep the step's frames, and so its saved tensors, alive past the backward."""
        LIVE_PINS.discard(self)
        for s in self._sets:
            s.discard(self)

    @property
    def keys(self) -> Dict[int, torch.Tensor]:
        if self._keys is None:
            self._keys, self._fn = self._fn(), None
        return self._keys

    def keys_for(self, table: "CachedTable", cache: bool = True) -> Optional[torch.Tensor]:
        """This step's keys of ``table`` (None if it has none); ``cache=False`` (a prefetch job, on its own stream)
        computes them without keeping them, so no tensor of the job's stream outlives the job."""
        t = self._idx.get(id(table))
        if t is None:
            return None
        keys = self.keys if (self._keys is not None or cache) else self._fn()
        return keys.get(t)


class CachedTable(ScoredHashTable):
    """A caching table: an HBM ``ScoredHashTable`` of ``cache_capacity`` slots over a ``BackingStore``.

    Args:
        cache_capacity: slots of the HBM cache (a multiple of ``bucket_capacity``).
        value_dim, value_dtype, key_dtype, bucket_capacity, score_policy, initializer, device: as for
            ``ScoredHashTable``.
        store: the backing store (its rows are part of the table; the cache starts empty).

    Example:
        >>> t = CachedTable(1024, 8, store=HostStore(torch.int64, 8, torch.float32, 1 << 16), device="cuda")
        >>> t.stage(keys, insert_new=True); slots = t.find_or_insert_slots(keys).slots
    """

    def __init__(self, cache_capacity: int, value_dim: int, value_dtype=torch.float32, key_dtype=torch.int64,
                 bucket_capacity: int = 128, score_policy: str = "lru",
                 initializer: Optional[TableInitializer] = None, device=None, store: BackingStore = None):
        if not isinstance(store, BackingStore):
            raise TypeError(f"store: expected a BackingStore, got {type(store).__name__}")
        super().__init__(cache_capacity, value_dim, value_dtype, key_dtype, bucket_capacity, score_policy,
                         max_capacity=cache_capacity, initializer=initializer, device=device, check_keys=False)
        self.store = store
        self._pins = weakref.WeakSet()
        self._gen = getattr(self, "_gen", 0)  # see mutated()
        self._pending: List[tuple] = []  # prefetched host (sorted keys, rows, scores) not staged yet
        self._rows_moved = [0, 0]  # rows staged from the store into the cache, rows written back (host counts)
        self._moved_dev = None  # (3,) device counts of the device stagings (_device_stage._totals)
        meta = store.get_meta()  # a persistent store carries the op clock and epoch of its last flush
        if meta:
            self.counters[0] = int(meta.get("clock", 0))
            self.epoch = int(meta.get("epoch", 0))

    @property
    @settled
    def rows_moved(self) -> List[int]:
        """[rows staged from the store into the cache, rows written back to the store] so far; reading the device
        stagings' counts (op cache_stage) waits for the device (and for a prefetch queued on its side stream)."""
        out = list(self.__dict__.get("_rows_moved") or self.__dict__.get("rows_moved") or [0, 0])
        if getattr(self, "_moved_dev", None) is not None:
            d = self._moved_dev.tolist()
            out = [out[0] + d[0], out[1] + d[1]]
        return out

    def _count_moved(self, moved_in: int, written_back: int) -> None:
        if "_rows_moved" not in self.__dict__:
            self._rows_moved = list(self.__dict__.get("rows_moved") or [0, 0])
        self._rows_moved[0] += moved_in
        self._rows_moved[1] += written_back

    # ------------------------------------------------------------------ helpers
    def _host(self, t: torch.Tensor) -> torch.Tensor:
        return t.cpu() if t.device.type != "cpu" else t

    def _dev(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=False)

    def _cache_find(self, keys: torch.Tensor):
        n = keys.numel()
        found = self._empty(n, dtype=torch.bool)
        scores = self._empty(n, dtype=torch.int64)
        if n:
            self._lookup(keys, found_out=found, scores_out=scores)
        return found, scores

    def _custom(self, mode: str, keys, values=None, scores=None, evicted=(None, None, None)):
        """An upsert with caller scores (customized policy), whatever the table's own policy."""
        own = self._policy
        self._policy = _CUSTOMIZED
        try:
            return self._upsert(mode, keys, values=values, scores=scores, evicted=evicted)
        finally:
            self._policy = own

    def _set_scores(self, keys, scores):
        if keys.numel():
            self._custom("assign_scores", keys.contiguous(), scores=scores.contiguous())

    @property
    def device_store(self) -> bool:
        """The store is indexed on the device (``UvaStore``): staging runs there (``stage_tables_device``)."""
        return getattr(self.store, "device_indexed", False)

    def _drop_pending(self):
        self._pending = []
        self.mutated()

    # ------------------------------------------------------------------ what a step can skip
    def mutated(self) -> None:
        """Counts a change of the cache that may remove keys (every op but the step's own find_or_insert, which
        only fills free slots after staging): a prefetch's hit count taken before is no longer proof that a batch's
        ids are all in the cache (``generation``)."""
        d = self.__dict__
        d["_gen"] = d.get("_gen", 0) + 1

    @property
    def generation(self) -> int:
        return getattr(self, "_gen", 0)

    def _upsert(self, *args, **kwargs):
        self.mutated()
        return ScoredHashTable._upsert(self, *args, **kwargs)

    @settled
    def erase_if(self, threshold: int) -> torch.Tensor:
        self.mutated()
        return ScoredHashTable.erase_if(self, threshold)

    def _set_state(self, s):
        self.mutated()
        ScoredHashTable._set_state(self, s)

    def _restore_buckets(self, snap):
        self.mutated()
        return ScoredHashTable._restore_buckets(self, snap)

    # ------------------------------------------------------------------ staging (the step's contract)
    @settled
    def stage(self, keys: torch.Tensor, insert_new: bool = True, pin: bool = True) -> None:
        """Brings every key of ``keys`` that the table holds into the cache and (``insert_new``) reserves a free
        slot in its bucket for every key it does not hold; scores and op clock end as they were. Host-synchronizing
        (two waits: the missing keys, the insert's results; ``_staging.stage_tables`` stages several tables with
        the same two; over a ``UvaStore`` one: the insert's results, ``_uva_store.stage_tables_device``).

        Args:
            keys: (n,) key dtype on the table's device, unique.
            insert_new: reserve slots for new keys (a training step inserts them next).
            pin: protect the keys of live ``StepPins`` (steps whose backward has not run) from eviction.

        Raises:
            CacheCapacityError: the keys do not fit into the cache (nothing changed).
            StoreError: the store cannot be read or written (nothing changed).
        """
        keys = keys.contiguous()
        found, _ = self._cache_find(keys)
        if self.device_store:  # staged on the device: one host wait (the capacity check)
            from ._uva_store import stage_tables_device, unique_padded

            miss = torch.where(found, _EMPTY_KEY, keys.view(torch.int64))
            stage_tables_device([self], [keys], [unique_padded(miss).view(self.key_dtype)], insert_new, pin)
            return
        hk, hf = to_host(keys, found)
        with host_phase():
            missing = hk[torch.logical_not(hf)]
        stage_tables([self], [keys], [missing], insert_new, pin)

    def _plan_staging(self, missing: torch.Tensor, insert_new: bool):
        """Host part of staging ``missing`` (CPU keys, unique, not in the cache): their rows from the prefetched
        rows, else from the store. Returns (keys to insert, their rows, scores, stored flags: host tensors; the
        prefetched rows left once these are taken). Reads the store only; changes nothing."""
        n = missing.numel()
        values = torch.zeros(n, self.value_dim, dtype=self.value_dtype)
        scores = torch.zeros(n, dtype=torch.int64)
        have = torch.zeros(n, dtype=torch.bool)
        keep = []
        m64 = missing.view(torch.int64)
        for hk, hv, hs in self._pending:  # prefetched (sorted keys, rows, scores), host
            k64 = hk.view(torch.int64)
            if n and hk.numel():
                pos = torch.searchsorted(k64, m64).clamp(max=hk.numel() - 1)
                hit = (k64[pos] == m64) & ~have
                values[hit], scores[hit] = hv[pos[hit]], hs[pos[hit]]
                have |= hit
                used = torch.isin(k64, m64)
                if not bool(used.all()):  # rows of keys outside this step stay prefetched
                    keep.append((hk[~used], hv[~used], hs[~used]))
            else:
                keep.append((hk, hv, hs))
        need = torch.logical_not(have)
        if bool(need.any()):
            r = self.store.find(missing[need])
            idx = need.nonzero().squeeze(1)
            values[idx], scores[idx], have[idx] = r.values, r.scores, r.found
        ins = torch.ones_like(have) if insert_new else have
        return missing[ins], values[ins], scores[ins], have[ins], keep

    # ------------------------------------------------------------------ prefetch
    @settled
    def prefetch(self, keys: torch.Tensor, stream: Optional[torch.cuda.Stream] = None) -> None:
        """Reads the rows of ``keys`` missing from the cache that the store holds, into host memory (looking the
        keys up on ``stream`` when given), for the next staging to move without reading the store (worth it for a
        slow store). Changes neither the cache nor the store.

        Args:
            keys: (n,) key dtype on the table's device.
            stream: CUDA side stream for the lookups.
        """
        ctx = torch.cuda.stream(stream) if stream is not None else _nullctx()
        with ctx:
            k = torch.unique(keys.view(torch.int64)).view(self.key_dtype).contiguous()
            found, _ = self._cache_find(k)
            hk, hf = to_host(k, found)
        self._prefetch_missing(hk[torch.logical_not(hf)])

    def _prefetch_missing(self, miss: torch.Tensor) -> None:
        """Reads the rows of ``miss`` (CPU keys, unique, sorted as int64, missing from the cache) that the store
        holds into the prefetched rows."""
        if miss.numel() == 0 or self.device_store:  # a device store's staging reads its rows on the device
            return
        r = self.store.find(miss)
        if bool(r.found.any()):
            self._pending.append((miss[r.found], r.values[r.found], r.scores[r.found]))
        if len(self._pending) > 4:  # bound the memory held by unused prefetches
            self._pending.pop(0)

    # ------------------------------------------------------------------ logical ops (cache + store)
    @settled
    def size(self) -> int:
        return int(self.counters[1]) + self.store.size()

    @settled
    def size_tensor(self) -> torch.Tensor:
        st = getattr(self.store, "size_tensor", None)  # a device-indexed store counts on the device (no wait)
        return self.counters[1] + (st() if st is not None else self.store.size())

    @settled
    def find(self, keys: torch.Tensor, *, return_scores: bool = False, default: float = 0.0) -> FindResult:
        r = ScoredHashTable.find(self, keys, return_scores=True, default=default)
        miss = ~r.found
        if bool(miss.any()):
            s = self.store.find(self._host(keys[miss]))
            idx = miss.nonzero().squeeze(1)
            f = self._dev(s.found)
            sel = idx[f]
            r.values[sel] = self._dev(s.values)[f]
            r.scores[sel] = self._dev(s.scores)[f]
            r.found[sel] = True
        return FindResult(r.values, r.found, r.scores if return_scores else None)

    def contains(self, keys: torch.Tensor) -> torch.Tensor:
        return self.find(keys).found

    @settled
    def insert_or_assign(self, keys, values, scores=None):
        """Logical insert_or_assign (the keys are staged into the cache, then written there). Returns stats."""
        self._check_keys(keys)
        self._check_values(values, keys.numel())
        self._drop_pending()
        self.stage(torch.unique(keys.view(torch.int64)).view(self.key_dtype), insert_new=True)
        return ScoredHashTable.insert_or_assign(self, keys, values, scores)

    @settled
    def assign_scores(self, keys, scores=None):
        self._check_keys(keys)
        self._drop_pending()
        self.stage(torch.unique(keys.view(torch.int64)).view(self.key_dtype), insert_new=False)
        return ScoredHashTable.assign_scores(self, keys, scores)

    @settled
    def erase(self, keys: torch.Tensor) -> torch.Tensor:
        self._drop_pending()
        n0 = self.store.size()
        self.store.erase(self._host(keys))
        count = ScoredHashTable.erase(self, keys)
        return count + (n0 - self.store.size())

    @settled
    def clear(self):
        self._drop_pending()
        self.store.clear()
        ScoredHashTable.clear(self)

    def reserve(self, capacity: int) -> torch.Tensor:
        """The cache keeps its size (its HBM budget); returns zero stats."""
        return torch.zeros(5, dtype=torch.int64, device=self.device)

    @settled
    def export_chunks(self, chunk_rows: int, threshold: Optional[int] = None):
        """Yields (keys, values, scores) of every row: the cache's, then the store's, in chunks of at most
        ``chunk_rows`` rows (host-synchronizing; the store's chunks are CPU tensors)."""
        yield from ScoredHashTable.export_chunks(self, chunk_rows, threshold)
        yield from self.store.export_batches(chunk_rows, threshold)

    @settled
    def items(self):
        parts = [(self._host(k), self._host(v), self._host(s)) for k, v, s in self.export_chunks(1 << 20)]
        if not parts:
            return (torch.empty(0, dtype=self.key_dtype), torch.empty(0, self.value_dim, dtype=self.value_dtype),
                    torch.empty(0, dtype=torch.int64))
        return tuple(torch.cat(x) for x in zip(*parts))

    @settled
    def flush(self) -> None:
        """Moves every cached row to the store (the cache is empty afterwards and refills on use; a full store
        raises StoreError with the rest of the cache kept) and makes the store durable together with the op clock and epoch (a reopened ``DiskStore`` continues from them)."""
        self._drop_pending()
        for k, v, s in list(ScoredHashTable.export_chunks(self, 1 << 20)):
            self.store.write(self._host(k), self._host(v), self._host(s), self._host(k)[:0])
            ScoredHashTable.erase(self, k.contiguous())
        self.store.set_meta({"clock": int(self.counters[0]), "epoch": int(self.epoch)})
        self.store.flush()

    @settled
    def load_rows(self, keys, values, scores, replace: bool):
        """Checkpoint load: (replace: empties the table first) rows go to the store (the cache refills on use)."""
        self._drop_pending()
        if replace:
            ScoredHashTable.clear(self)
            self.store.clear()
        elif keys.numel():
            ScoredHashTable.erase(self, keys.to(self.device).contiguous())
        if keys.numel():
            self.store.insert(self._host(keys), self._host(values), self._host(scores).view(torch.int64))

    @settled
    def state_dict(self):
        keys, values, scores = self.items()
        return {"rows.keys": keys, "rows.values": values, "rows.scores": scores, "counters": self.counters.cpu(),
                "epoch": torch.tensor(self.epoch)}

    def export_batch(self, offset: int, n: int, *, threshold: Optional[int] = None) -> ExportResult:
        """The cache's slots [offset, offset + n) (use ``export_chunks`` or ``items`` for every row)."""
        return ScoredHashTable.export_batch(self, offset, n, threshold=threshold)

    def __repr__(self):
        return (f"CachedTable(cache_capacity={self.capacity()}, value_dim={self.value_dim}, store="
                f"{type(self.store).__name__}, score_policy={self.score_policy!r}, device={self.device})")


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
