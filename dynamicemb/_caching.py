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

Prefetch (``prefetch(keys)``): looks up, on a side stream, which keys are missing from the cache, reads those the
store holds and copies them into HBM; the next ``stage`` commits them without reading the store. A prefetch never
changes the cache, so it cannot evict rows of a step in flight; the staged rows stay valid because the store only
changes inside ``stage`` and the logical writes, and those drop what they make stale.

What a step can skip (``PrefetchedHits``, ``generation``): staging a batch whose ids are all in the cache changes
nothing, so the module skips it; a prefetch of a batch on the device counts its misses per table on the side stream,
and the batch's step trusts a zero count while the cache's generation (bumped by every op that can remove keys) is
the one the prefetch saw.
"""

from __future__ import annotations

import weakref
from typing import Dict, List, Optional

import torch

from ._storage import BackingStore, StoreError, _unsigned_ge
from ._table import ExportResult, FindResult, ScoredHashTable, TableInitializer

__all__ = ["CachedTable", "CacheCapacityError", "PrefetchedHits", "StepPins"]

_MAX_SCORE = -1  # uint64 max as int64 bits
_EMPTY_KEY = -(2**63)  # the reserved empty key (int64 bits): no table op finds or stores it
_CUSTOMIZED = 2


class CacheCapacityError(RuntimeError):
    """The HBM cache of a caching table cannot hold one step's keys at once (more keys of the step hash to a
    bucket than it has slots); nothing was changed. Raise the table's ``hbm_budget_bytes``."""


class StepPins:
    """Keys of one training step per caching table, pinned (never evicted by staging) while this object lives: the
    module keeps it with the step's saved tensors, which are released when its backward ran or its graph died.

    Args:
        keys: {table index: keys} or a callable returning it, called the first time a staging asks (so a step whose
            staging found every id in the cache keeps only a reference to its ids, and computes nothing).
        tables: the module's tables (the caching ones among ``table_ids`` register this object).
        table_ids: the table indices ``keys`` covers (default: ``keys``' own, when it is a dict).
    """

    def __init__(self, keys, tables: List["CachedTable"], table_ids: Optional[List[int]] = None):
        self._keys = keys if isinstance(keys, dict) else None
        self._fn = None if isinstance(keys, dict) else keys
        ids = list(keys) if table_ids is None else list(table_ids)
        for t in ids:
            tables[t]._pins.add(self)
        self._idx = {id(tables[t]): t for t in ids}

    @property
    def keys(self) -> Dict[int, torch.Tensor]:
        if self._keys is None:
            self._keys, self._fn = self._fn(), None
        return self._keys

    def keys_for(self, table: "CachedTable") -> Optional[torch.Tensor]:
        t = self._idx.get(id(table))
        return None if t is None else self.keys.get(t)


class PrefetchedHits:
    """A prefetch of a batch already on the device: for each caching table, how many of the batch's ids its cache
    misses, counted on the prefetch side stream and copied to pinned host memory (no host sync). The batch's step
    skips staging for a table with no miss whose cache did not change since (``CachedTable.generation``): between
    two stagings the step's own inserts only add keys, so a hit counted after the last staging stays a hit.

    Holds the batch's ids and offsets (so their memory cannot be reused by another batch while this lives) and
    matches a step by those tensors (same storage, size and version counter: not modified in place since)."""

    def __init__(self, ids, offsets, tables, gens, counts, event):
        self.ids, self.offsets, self.tables, self.gens, self.counts, self.event = (ids, offsets, tables, gens,
                                                                                   counts, event)
        self._sig = self._signature(ids, offsets)

    @staticmethod
    def _signature(ids, offsets):
        return tuple((t.data_ptr(), t.numel(), t.dtype, t._version) for t in (ids, offsets))

    @classmethod
    def launch(cls, module, ids, offsets, tables: List[int], stream) -> "PrefetchedHits":
        """Queues the hit counts of ``ids`` / ``offsets`` (the module's layout: F features of B bags) on ``stream``
        after the work queued so far on the current stream (the last staging included)."""
        gens = [module.tables[t].generation for t in tables]
        stream.wait_stream(torch.cuda.current_stream(ids.device))
        with torch.cuda.stream(stream):
            n, F = ids.numel(), module.num_features
            B = max((offsets.numel() - 1) // F, 1)
            if n:
                pos = torch.arange(n, dtype=torch.int64, device=ids.device)
                feat = (torch.searchsorted(offsets[1:], pos, right=True) // B).clamp_(max=F - 1)
                mine = module._feature_mask(ids.device, tables)[:, feat]  # (T', n): id i belongs to tables[j]
                k = torch.where(mine, ids.view(torch.int64)[None, :], _EMPTY_KEY).view(ids.dtype)  # empty never hits
                found = torch.empty_like(mine)
                for j, t in enumerate(tables):
                    module.tables[t]._lookup(k[j], found_out=found[j])
                miss = (mine & torch.logical_not(found)).sum(1)
            else:
                miss = torch.zeros(len(tables), dtype=torch.int64, device=ids.device)
            counts = torch.empty(len(tables), dtype=torch.int64, pin_memory=True)
            counts.copy_(miss, non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
        ids.record_stream(stream)
        offsets.record_stream(stream)
        return cls(ids, offsets, list(tables), gens, counts, event)

    def matches(self, ids, offsets) -> bool:
        return self._signature(ids, offsets) == self._sig

    def complete_tables(self, all_tables) -> set:
        """Indices of the tables whose cache holds every id of the batch (waits for the counts' copy)."""
        self.event.synchronize()
        return {t for t, g, c in zip(self.tables, self.gens, self.counts.tolist())
                if c == 0 and all_tables[t].generation == g}


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
        self._pending: List[tuple] = []  # prefetched (keys, values, scores, event) not committed yet
        meta = store.get_meta()  # a persistent store carries the op clock and epoch of its last flush
        if meta:
            self.counters[0] = int(meta.get("clock", 0))
            self.epoch = int(meta.get("epoch", 0))

    # ------------------------------------------------------------------ helpers
    def _host(self, t: torch.Tensor) -> torch.Tensor:
        return t.cpu() if t.device.type != "cpu" else t

    def _dev(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=False)

    def _pinned_keys(self, extra: Optional[torch.Tensor]) -> torch.Tensor:
        parts = [p.keys_for(self) for p in list(self._pins)]
        parts = [k for k in parts if k is not None]
        if extra is not None:
            parts.append(extra)
        if not parts:
            return torch.empty(0, dtype=self.key_dtype, device=self.device)
        return torch.unique(torch.cat([p.view(torch.int64) for p in parts])).view(self.key_dtype)

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

    def _drop_pending(self):
        self._pending = []
        self.mutated()

    # ------------------------------------------------------------------ what a step can skip
    def mutated(self) -> None:
        """Counts a change of the cache that may remove keys (every op but the step's own find_or_insert, which
        only fills free slots after staging): a prefetch's hit count taken before is no longer proof that a batch's
        ids are all in the cache (``generation``)."""
        self._gen = getattr(self, "_gen", 0) + 1

    @property
    def generation(self) -> int:
        return getattr(self, "_gen", 0)

    def _upsert(self, *args, **kwargs):
        self.mutated()
        return ScoredHashTable._upsert(self, *args, **kwargs)

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
    def stage(self, keys: torch.Tensor, insert_new: bool = True, pin: bool = True) -> None:
        """Brings every key of ``keys`` that the table holds into the cache and (``insert_new``) reserves a free
        slot in its bucket for every key it does not hold; scores and op clock end as they were. Host-synchronizing.

        Args:
            keys: (n,) key dtype on the table's device, unique.
            insert_new: reserve slots for new keys (a training step inserts them next).
            pin: protect the keys of live ``StepPins`` (steps whose backward has not run) from eviction.

        Raises:
            CacheCapacityError: the keys do not fit into the cache (nothing changed).
            StoreError: the store cannot be read or written (nothing changed).
        """
        keys = keys.contiguous()
        clock = self.counters[0].clone()
        found, old_scores = self._cache_find(keys)
        # 1. pin: the step's present keys and the in-flight steps' keys get the maximum score
        pinned = self._pinned_keys(keys[found]) if pin else keys[found]
        p_found, p_scores = self._cache_find(pinned)
        pinned, p_scores = pinned[p_found], p_scores[p_found]
        self._set_scores(pinned, torch.full_like(p_scores, _MAX_SCORE))
        try:
            self._stage_missing(keys[~found], insert_new)
        finally:
            # 3. every pinned key gets its true score back, and the op clock is the step's
            self._set_scores(pinned, p_scores)
            self.counters[0].copy_(clock)

    def _stage_missing(self, missing: torch.Tensor, insert_new: bool):
        if missing.numel() == 0:
            return
        hmiss = self._host(missing)
        # 2a. rows of the missing keys: prefetched ones from HBM, the rest from the store
        values = torch.zeros(missing.numel(), self.value_dim, dtype=self.value_dtype, device=self.device)
        scores = torch.zeros(missing.numel(), dtype=torch.int64, device=self.device)
        have = torch.zeros(missing.numel(), dtype=torch.bool, device=self.device)
        self._take_pending(missing, values, scores, have)
        need = ~have
        hneed = self._host(need)
        if bool(hneed.any()):
            r = self.store.find(hmiss[hneed])
            idx = need.nonzero().squeeze(1)
            values[idx] = self._dev(r.values)
            scores[idx] = self._dev(r.scores)
            have[idx] = self._dev(r.found)
        stored = have
        ins = stored if not insert_new else torch.ones_like(have)
        ikeys = missing[ins].contiguous()
        if ikeys.numel() == 0:
            return
        ivals = values[ins].contiguous()
        # 2b. insert at the maximum score: evicts only unpinned keys (strictly lower scores); reports them
        ek = self._empty(ikeys.numel(), dtype=self.key_dtype)
        ev = self._empty(ikeys.numel(), self.value_dim, dtype=self.value_dtype)
        es = self._empty(ikeys.numel(), dtype=torch.int64)
        stats = self._custom("insert_and_evict", ikeys, values=ivals,
                             scores=torch.full((ikeys.numel(),), _MAX_SCORE, dtype=torch.int64, device=self.device),
                             evicted=(ek, ev, es))
        ne = int(stats[2])
        now_in, _ = self._cache_find(ikeys)
        ek, ev, es = ek[:ne], ev[:ne], es[:ne]
        if not bool(now_in.all()):
            self._undo(ikeys, now_in, ek, ev, es)
            raise CacheCapacityError(
                f"caching table: expected the HBM cache of {self.capacity()} slots to hold this step's keys, got "
                f"{int((~now_in).sum())} of {ikeys.numel()} new-to-the-cache keys refused (their buckets are full of "
                f"keys of this step or of steps in flight); raise hbm_budget_bytes (nothing was changed)")
        # 2c. one atomic store write: evicted rows in, the moved rows out
        istored = stored[ins]
        try:
            self.store.write(self._host(ek), self._host(ev), self._host(es), self._host(ikeys[istored]))
        except StoreError:
            self._undo(ikeys, now_in, ek, ev, es)
            raise
        # 2d. true scores for the moved rows; new keys' placeholders go (their slots stay free for the step)
        self._set_scores(ikeys[istored], scores[ins][istored])
        newk = ikeys[~istored]
        if newk.numel():
            ScoredHashTable.erase(self, newk)

    def _undo(self, ikeys, now_in, ek, ev, es):
        """Puts the cache back as before a failed staging insert: the inserted keys leave, the evicted rows return
        (into the slots the inserted keys free in their own buckets) with their scores."""
        if bool(now_in.any()):
            ScoredHashTable.erase(self, ikeys[now_in].contiguous())
        if ek.numel():
            self._custom("insert_or_assign", ek.contiguous(), values=ev.contiguous(), scores=es.contiguous())

    # ------------------------------------------------------------------ prefetch
    def prefetch(self, keys: torch.Tensor, stream: Optional[torch.cuda.Stream] = None) -> None:
        """Reads the rows of ``keys`` missing from the cache that the store holds, into HBM (on ``stream`` when
        given), for the next ``stage`` to commit. Changes neither the cache nor the store.

        Args:
            keys: (n,) key dtype on the table's device.
            stream: CUDA side stream for the lookups and the host-to-device copy.
        """
        ctx = torch.cuda.stream(stream) if stream is not None else _nullctx()
        with ctx:
            k = torch.unique(keys.view(torch.int64)).view(self.key_dtype).contiguous()
            found, _ = self._cache_find(k)
            miss = self._host(k[~found])
            if miss.numel() == 0:
                return
            r = self.store.find(miss)
            if not bool(r.found.any()):
                return
            hk, hv, hs = miss[r.found], r.values[r.found], r.scores[r.found]
            if self.device.type == "cuda":
                hk, hv, hs = hk.pin_memory(), hv.pin_memory(), hs.pin_memory()
            dk = hk.to(self.device, non_blocking=True)
            dv = hv.to(self.device, non_blocking=True)
            ds = hs.to(self.device, non_blocking=True)
            ev = None
            if stream is not None:
                ev = torch.cuda.Event()
                ev.record(stream)
            self._pending.append((dk, dv, ds, ev, (hk, hv, hs)))
        if len(self._pending) > 4:  # bound the HBM held by unused prefetches
            self._pending.pop(0)

    def _take_pending(self, missing, values, scores, have):
        """Fills rows of ``missing`` from the prefetched buffers (and removes them there)."""
        if not self._pending:
            return
        keep = []
        for dk, dv, ds, ev, host in self._pending:
            if ev is not None:  # made on the prefetch stream: wait for it, and keep its memory until used here
                main = torch.cuda.current_stream(self.device)
                main.wait_event(ev)
                for x in (dk, dv, ds):
                    x.record_stream(main)
            pos = torch.searchsorted(dk.view(torch.int64), missing.view(torch.int64)).clamp(max=dk.numel() - 1)
            hit = (dk.view(torch.int64)[pos] == missing.view(torch.int64)) & ~have
            values[hit] = dv[pos[hit]]
            scores[hit] = ds[pos[hit]]
            have |= hit
            used = torch.isin(dk.view(torch.int64), missing.view(torch.int64))
            # rows of keys outside this step stay pending: not in the cache, so no write-back changes their store rows
            if not bool(used.all()):
                keep.append((dk[~used], dv[~used], ds[~used], None, host))
        self._pending = keep

    # ------------------------------------------------------------------ logical ops (cache + store)
    def size(self) -> int:
        return int(self.counters[1]) + self.store.size()

    def size_tensor(self) -> torch.Tensor:
        return self.counters[1] + self.store.size()

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

    def insert_or_assign(self, keys, values, scores=None):
        """Logical insert_or_assign (the keys are staged into the cache, then written there). Returns stats."""
        self._check_keys(keys)
        self._check_values(values, keys.numel())
        self._drop_pending()
        self.stage(torch.unique(keys.view(torch.int64)).view(self.key_dtype), insert_new=True)
        return ScoredHashTable.insert_or_assign(self, keys, values, scores)

    def assign_scores(self, keys, scores=None):
        self._check_keys(keys)
        self._drop_pending()
        self.stage(torch.unique(keys.view(torch.int64)).view(self.key_dtype), insert_new=False)
        return ScoredHashTable.assign_scores(self, keys, scores)

    def erase(self, keys: torch.Tensor) -> torch.Tensor:
        self._drop_pending()
        n0 = self.store.size()
        self.store.erase(self._host(keys))
        count = ScoredHashTable.erase(self, keys)
        return count + (n0 - self.store.size())

    def clear(self):
        self._drop_pending()
        self.store.clear()
        ScoredHashTable.clear(self)

    def reserve(self, capacity: int) -> torch.Tensor:
        """The cache keeps its size (its HBM budget); returns zero stats."""
        return torch.zeros(5, dtype=torch.int64, device=self.device)

    def export_chunks(self, chunk_rows: int, threshold: Optional[int] = None):
        """Yields (keys, values, scores) of every row: the cache's, then the store's, in chunks of at most
        ``chunk_rows`` rows (host-synchronizing; the store's chunks are CPU tensors)."""
        yield from ScoredHashTable.export_chunks(self, chunk_rows, threshold)
        yield from self.store.export_batches(chunk_rows, threshold)

    def items(self):
        parts = [(self._host(k), self._host(v), self._host(s)) for k, v, s in self.export_chunks(1 << 20)]
        if not parts:
            return (torch.empty(0, dtype=self.key_dtype), torch.empty(0, self.value_dim, dtype=self.value_dtype),
                    torch.empty(0, dtype=torch.int64))
        return tuple(torch.cat(x) for x in zip(*parts))

    def flush(self) -> None:
        """Moves every cached row to the store (the cache is empty afterwards and refills on use) and makes the
        store durable together with the op clock and epoch (a reopened ``DiskStore`` continues from them)."""
        self._drop_pending()
        for k, v, s in list(ScoredHashTable.export_chunks(self, 1 << 20)):
            self.store.write(self._host(k), self._host(v), self._host(s), self._host(k)[:0])
            ScoredHashTable.erase(self, k.contiguous())
        self.store.set_meta({"clock": int(self.counters[0]), "epoch": int(self.epoch)})
        self.store.flush()

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
