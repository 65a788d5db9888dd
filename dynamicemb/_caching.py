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
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import weakref
from typing import Dict, List, Optional

import torch

from ._storage import BackingStore, HostStore, StoreError, _unsigned_ge
from ._hash import fmix64_tensor
from ._table import ExportResult, FindResult, ScoredHashTable, TableInitializer, _bucket_of_hash

__all__ = ["CachedTable", "CacheCapacityError", "StagingStats", "StepPins"]

_MAX_SCORE = -1  # uint64 max as int64 bits
_CUSTOMIZED = 2


class CacheCapacityError(RuntimeError):
    """The HBM cache of a caching table cannot hold one step's keys at once (more keys of the step hash to a
    bucket than it has slots); nothing was changed. Raise the table's ``hbm_budget_bytes``."""


class StepPins:
    """Keys of one training step per caching table, pinned (never evicted by staging) while this object lives: the
    module keeps it with the step's saved tensors, which are released when its backward ran or its graph died."""

    def __init__(self, keys: Dict[int, torch.Tensor], tables: List["CachedTable"]):
        self.keys = keys
        for t, k in keys.items():
            tables[t]._pins.add(self)
        self._idx = {id(tables[t]): t for t in keys}

    def keys_for(self, table: "CachedTable") -> Optional[torch.Tensor]:
        t = self._idx.get(id(table))
        return None if t is None else self.keys[t]


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
        self._pending: List["PrefetchedRows"] = []  # prefetched batches' store rows, not consumed yet
        self.async_writeback = device_async(self.device) and type(store) is HostStore
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

    # ------------------------------------------------------------------ staging (the step's contract)
    def stage(self, keys: torch.Tensor, insert_new: bool = True, pin: bool = True) -> None:
        """Brings every key of ``keys`` that the table holds into the cache and (``insert_new``) reserves a free
        slot in its bucket for every key it does not hold; scores and op clock end as they were. Host-synchronizing
        (one readback, see ``stage_tables``).

        Args:
            keys: (n,) key dtype on the table's device (duplicates allowed).
            insert_new: reserve slots for new keys (a training step inserts them next).
            pin: protect the keys of live ``StepPins`` (steps whose backward has not run) from eviction.

        Raises:
            CacheCapacityError: the keys do not fit into the cache (nothing changed).
            StoreError: the store cannot be read or written (nothing changed).
        """
        stage_tables([(self, padded_unique(keys.contiguous().view(torch.int64)), None)], insert_new, pin)

    def _drop_pending(self):
        """Forgets every prefetched batch (a logical write may have made their rows stale)."""
        store_worker(self.device).drain()
        for r in self._pending:
            r.dead = True
        self._pending = []

    def _invalidate_pending(self, inserted: torch.Tensor):
        """Keys that entered the cache leave every prefetched batch (their store rows become stale there)."""
        for r in self._pending:
            r.invalidate(inserted)
        self._pending = [r for r in self._pending if not r.dead]

    # ------------------------------------------------------------------ logical ops (cache + store)
    def size(self) -> int:
        store_worker(self.device).drain()
        return int(self.counters[1]) + self.store.size()

    def size_tensor(self) -> torch.Tensor:
        store_worker(self.device).drain()
        return self.counters[1] + self.store.size()

    def find(self, keys: torch.Tensor, *, return_scores: bool = False, default: float = 0.0) -> FindResult:
        store_worker(self.device).drain()
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
        store_worker(self.device).drain()
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


# ---------------------------------------------------------------------- the step's staging, all tables at once
_EMPTY = -(2**63)  # the reserved empty key (int64 bits): every table op skips it
_LAST_RESERVED = -(2**63) + 2


def device_async(device: torch.device) -> bool:
    """Whether store work of tables on ``device`` runs on the store worker thread (CUDA; CPU tests may force it)."""
    return device.type == "cuda" or _FORCE_ASYNC[0]


_FORCE_ASYNC = [False]


def padded_unique(k64: torch.Tensor) -> torch.Tensor:
    """(n,) int64 -> (n,) the keys sorted, each repeat replaced by the empty key (every table op skips it):
    the unique keys at a size the host knows without a sync."""
    s = torch.sort(k64).values
    if s.numel() > 1:
        dup = torch.zeros(s.numel(), dtype=torch.bool, device=s.device)
        dup[1:] = s[1:] == s[:-1]
        s = s.masked_fill(dup, _EMPTY)
    return s


def _valid(k64: torch.Tensor) -> torch.Tensor:
    return k64 > _LAST_RESERVED  # the reserved keys are the three smallest int64 patterns


class StagingStats:
    """Host-side counters of the caching tables' staging (``BatchedDynamicEmbeddingTables.storage_stats``):
    ``syncs`` host synchronizations, ``host_s`` seconds the calling thread spent staging, ``steps`` stagings,
    ``misses`` keys moved into a cache, ``store_reads`` keys the step itself read from a store (not prefetched),
    ``prefetched`` stagings that used a prefetch."""

    __slots__ = ("syncs", "host_s", "steps", "misses", "store_reads", "prefetched")

    def __init__(self):
        self.reset()

    def reset(self):
        self.syncs = self.steps = self.misses = self.store_reads = self.prefetched = 0
        self.host_s = 0.0

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


_DEFAULT_STATS = StagingStats()


def _readback(t: torch.Tensor, stats: StagingStats) -> torch.Tensor:
    """The one kind of host sync of staging: copies ``t`` to the host (pinned, then one event wait) and counts it."""
    stats.syncs += 1
    if t.device.type != "cuda":
        return t.clone()
    h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    h.copy_(t, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    ev.synchronize()
    return h


class StoreWorker:
    """One thread per device that runs store work in order (write-backs of evicted rows, prefetch reads), so a
    read queued after a write-back sees it. ``drain()`` waits for everything queued; the host path of staging and
    every logical op drain first. An error of a job is raised by the next ``drain()``."""

    def __init__(self):
        self._q: "queue.Queue" = queue.Queue()
        self._pending = 0
        self._cv = threading.Condition()
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def submit(self, fn) -> None:
        with self._cv:
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dynamicemb-store", daemon=True)
                self._thread.start()
        self._q.put(fn)

    def _run(self):
        while True:
            fn = self._q.get()
            try:
                fn()
            except BaseException as e:  # noqa: BLE001  raised by the next drain()
                with self._cv:
                    if self._error is None:
                        self._error = e
            finally:
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()

    def drain(self) -> None:
        with self._cv:
            if threading.current_thread() is self._thread:
                return
            self._cv.wait_for(lambda: self._pending == 0)
            e, self._error = self._error, None
        if e is not None:
            raise e


_WORKERS: Dict[str, StoreWorker] = {}


def store_worker(device: torch.device) -> StoreWorker:
    key = str(device)
    w = _WORKERS.get(key)
    if w is None:
        w = _WORKERS[key] = StoreWorker()
    return w


class PrefetchedRows:
    """The rows of one prefetched batch for one caching table: the batch's keys that missed the cache when the
    prefetch looked (sorted int64), their store rows and scores, whether the store held them, and ``valid``
    (cleared for keys that entered the cache since: their store rows are stale)."""

    def __init__(self, keys, values, scores, stored):
        self.keys, self.values, self.scores, self.stored = keys, values, scores, stored
        self.valid = torch.ones(keys.numel(), dtype=torch.bool, device=keys.device)
        self.dead = False

    def locate(self, k64):
        """(pos, hit) of each key of ``k64`` among the valid prefetched keys."""
        r = self.keys.numel()
        if r == 0:
            return torch.zeros_like(k64), torch.zeros(k64.numel(), dtype=torch.bool, device=k64.device)
        pos = torch.searchsorted(self.keys, k64).clamp_(max=r - 1)
        return pos, (self.keys[pos] == k64) & self.valid[pos]

    def invalidate(self, k64):
        r = self.keys.numel()
        if r == 0 or k64.numel() == 0:
            return
        pos, hit = self.locate(k64)
        mark = torch.zeros(r + 1, dtype=torch.bool, device=k64.device)
        mark.index_fill_(0, torch.where(hit, pos, r), True)
        self.valid &= ~mark[:r]

    def record_stream(self, stream):
        for x in (self.keys, self.values, self.scores, self.stored, self.valid):
            x.record_stream(stream)


def _bucket_counts(table: "CachedTable", k64: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    nb = table.capacity() // table.bucket_capacity
    b = _bucket_of_hash(fmix64_tensor(k64), nb)
    return torch.zeros(nb, dtype=torch.int64, device=k64.device).scatter_add_(0, b, count.to(torch.int64))


def stage_tables(items, insert_new: bool, pin: bool = True, stats: Optional[StagingStats] = None,
                 mismatch: Optional[torch.Tensor] = None, prefix: Optional[Dict] = None) -> bool:
    """Stages one step into caching tables in one pass (the contract of ``CachedTable.stage``).

    Args:
        items: [(table, keys, rows)]: ``keys`` (u,) int64 from ``padded_unique`` (the step's keys of that table),
            ``rows`` the table's ``PrefetchedRows`` of this batch or None.
        insert_new: reserve slots for new keys (training); else only stored rows move into the cache.
        pin: protect the keys of live ``StepPins``.
        stats: counters to add to.
        mismatch: 0-d device bool: the batch is not the prefetched one (read back with everything else).
        prefix: table -> keys of the step's store reads copied back with the one readback (adapts to the misses).

    Returns:
        False (nothing changed) when ``mismatch`` read true, else True.

    Device work, then ONE readback of a few counters per table (and the keys the step must read from the store),
    then host work only for tables with misses: no host work at all when every key hits. Tables of a
    ``HostStore`` on CUDA write evicted rows back on the store worker (no second sync); other stores write in the
    step so that a failed write undoes it (a second sync when rows moved).
    """
    stats = stats if stats is not None else _DEFAULT_STATS
    t0 = time.perf_counter()
    prefix = prefix if prefix is not None else {}
    plans, parts = [], []
    for table, k, rows in items:
        kk = k.view(table.key_dtype)
        found, _ = table._cache_find(kk)
        valid = _valid(k)
        miss = valid & ~found
        if rows is not None:
            rpos, inr = rows.locate(k)
            unres = miss & ~inr
        else:
            rpos, inr, unres = None, None, miss
        # misses the store must give first, then the prefetched ones, then the rest
        rank = torch.where(unres, 0, torch.where(miss, 1, 2)).to(torch.int8)
        order = torch.sort(rank, stable=True).indices
        sk = k[order]
        # capacity: the step's keys and the present keys of steps in flight must fit their buckets
        live = [p.keys_for(table) for p in list(table._pins)] if pin else []
        live = [x.view(torch.int64) for x in live if x is not None]
        cnt = _bucket_counts(table, k, valid) if insert_new else None
        if live and insert_new:
            pk = torch.cat(live)
            pf, _ = table._cache_find(pk.view(table.key_dtype))
            other = pf & ~torch.isin(pk, k)
            cnt += _bucket_counts(table, pk, other)
        over = (cnt > table.bucket_capacity).any() if cnt is not None else torch.zeros((), dtype=torch.bool,
                                                                                        device=k.device)
        P = min(prefix.get(id(table), 1024), k.numel())
        parts.append(torch.stack([miss.sum(), unres.sum(), over.to(torch.int64)]))
        plans.append((table, k, found, sk, rows, rpos, inr, live, P))
    head = torch.cat(parts + [(mismatch if mismatch is not None else torch.zeros((), dtype=torch.bool,
                                                                                 device=items[0][1].device)
                               ).to(torch.int64).reshape(1)])
    tails = [p[3][:p[8]] for p in plans]
    host = _readback(torch.cat([head] + tails), stats)
    nh = head.numel()
    if host[nh - 1]:
        stats.host_s += time.perf_counter() - t0
        return False
    stats.steps += 1
    stats.prefetched += int(any(p[4] is not None for p in plans))
    over = [plans[i][0] for i in range(len(plans)) if host[3 * i + 2]]
    if over:
        stats.host_s += time.perf_counter() - t0
        raise CacheCapacityError(
            f"caching table: expected the HBM cache of {over[0].capacity()} slots to hold this step's keys, got a "
            f"bucket that needs more than its {over[0].bucket_capacity} slots for the keys of this step and of steps "
            f"in flight; raise hbm_budget_bytes (nothing was changed)")
    off = nh
    for i, (table, k, found, sk, rows, rpos, inr, live, P) in enumerate(plans):
        m, x = int(host[3 * i]), int(host[3 * i + 1])
        tail = host[off:off + P]
        off += P
        prefix[id(table)] = max(1024, 1 << max(0, 2 * x - 1).bit_length())
        if m == 0:
            continue
        stats.misses += m
        stats.store_reads += x
        if x > P:
            tail = _readback(sk[:x], stats)
        table._stats = stats
        table._stage_rows(k, found, sk[:m], x, tail[:x], rows, insert_new, live)
    stats.host_s += time.perf_counter() - t0
    return True


def _stage_rows(self: "CachedTable", k, found, mk, x, hx, rows, insert_new, live):
    """Moves the misses ``mk`` (m,) (the first ``x`` read from the store, keys ``hx`` on the host; the rest from
    ``rows``) into the cache at the maximum score, evicting only unpinned keys, and writes evicted rows back."""
    dev = self.device
    m = mk.numel()
    W = self.value_dim
    clock = self.counters[0].clone()
    values = torch.empty(m, W, dtype=self.value_dtype, device=dev)
    scores = torch.zeros(m, dtype=torch.int64, device=dev)
    stored = torch.zeros(m, dtype=torch.bool, device=dev)
    if x:
        store_worker(dev).drain()  # write-backs queued before are in the store
        r = self.store.find(hx.view(self.key_dtype))
        to = (lambda t: t.pin_memory().to(dev, non_blocking=True)) if dev.type == "cuda" else (lambda t: t)
        values[:x], scores[:x], stored[:x] = to(r.values), to(r.scores), to(r.found)
    if m > x:
        pos, _ = rows.locate(mk[x:])
        values[x:] = rows.values[pos]
        scores[x:] = rows.scores[pos]
        stored[x:] = rows.stored[pos]
    ins = stored if not insert_new else torch.ones_like(stored)
    ikeys = torch.where(ins, mk, _EMPTY)
    # 1. pin: the step's keys and the in-flight steps' keys get the maximum score (missing ones are skipped)
    pinned = torch.cat([k] + live) if live else k
    pkk = pinned.view(self.key_dtype)
    p_found, p_scores = self._cache_find(pkk)
    self._set_scores(pkk, torch.full_like(p_scores, _MAX_SCORE))
    try:
        # 2. insert at the maximum score: evicts only unpinned keys (strictly lower scores)
        ek = self._empty(m, dtype=self.key_dtype)
        ev = self._empty(m, W, dtype=self.value_dtype)
        es = self._empty(m, dtype=torch.int64)
        st = self._custom("insert_and_evict", ikeys.view(self.key_dtype), values=values,
                          scores=torch.full((m,), _MAX_SCORE, dtype=torch.int64, device=dev), evicted=(ek, ev, es))
        # 3. the store: evicted rows in, moved rows out
        # only rows the cache took leave the store (eval has no capacity pre-check: a refused row stays stored)
        now_in, _ = self._cache_find(ikeys.view(self.key_dtype))
        moved = torch.where(stored & ins & now_in, mk, _EMPTY)
        self._write_back(ek, ev, es, st, moved, ikeys)
        # 4. true scores for the moved rows; new keys' placeholders go (their slots stay free for the step)
        self._set_scores(moved.view(self.key_dtype), scores)
        newk = torch.where(ins & ~stored, mk, _EMPTY)
        ScoredHashTable.erase(self, newk.view(self.key_dtype))
    finally:
        # 5. every pinned key gets its true score back, and the op clock is the step's
        self._set_scores(torch.where(p_found, pinned, _EMPTY).view(self.key_dtype), p_scores)
        self.counters[0].copy_(clock)
    self._invalidate_pending(ikeys)


def _write_back(self: "CachedTable", ek, ev, es, st, moved, ikeys):
    if self.async_writeback:
        # rows copied to pinned memory on the stream; the worker writes them once the copy is done
        host = [torch.empty(x.shape, dtype=x.dtype, pin_memory=self.device.type == "cuda")
                for x in (ek, ev, es, st, moved)]
        for h, x in zip(host, (ek, ev, es, st, moved)):
            h.copy_(x, non_blocking=True)
        ev_done = None
        if self.device.type == "cuda":
            ev_done = torch.cuda.Event()
            ev_done.record()
        store = self.store

        def job():
            if ev_done is not None:
                ev_done.synchronize()
            hk, hv, hs, hst, hm = host
            c = int(hst[2])
            store.write(hk[:c], hv[:c], hs[:c], hm[hm.view(torch.int64) > _LAST_RESERVED])

        store_worker(self.device).submit(job)
        return
    c = int(_readback(st[2:3], getattr(self, "_stats", _DEFAULT_STATS))[0]) if self.device.type == "cuda" else int(st[2])
    hm = moved.cpu()
    try:
        self.store.write(ek[:c].cpu(), ev[:c].cpu(), es[:c].cpu(), hm[hm.view(torch.int64) > _LAST_RESERVED])
    except StoreError:
        # undo: the inserted keys leave, the evicted rows return (into the slots the inserted keys free)
        ScoredHashTable.erase(self, ikeys.view(self.key_dtype))
        if c:
            self._custom("insert_or_assign", ek[:c].contiguous(), values=ev[:c].contiguous(),
                         scores=es[:c].contiguous())
        raise


CachedTable._stage_rows = _stage_rows
CachedTable._write_back = _write_back


def prefetch_rows(table: "CachedTable", k: torch.Tensor, found: torch.Tensor) -> PrefetchedRows:
    """Store rows of the keys ``k`` (padded unique, int64) that missed the cache (``found``): host work, run on
    the store worker (after the write-backs queued before it). Returns the rows on the table's device."""
    dev = table.device
    if dev.type == "cuda":
        hk = torch.empty(k.shape, dtype=k.dtype, pin_memory=True)
        hf = torch.empty(found.shape, dtype=torch.bool, pin_memory=True)
        hk.copy_(k, non_blocking=True)
        hf.copy_(found, non_blocking=True)
        e = torch.cuda.Event()
        e.record()
        e.synchronize()  # the worker's own stream: the step's thread does not wait
    else:
        hk, hf = k, found
    miss = hk[_valid(hk) & ~hf]
    r = table.store.find(miss.view(table.key_dtype))
    pin = dev.type == "cuda"
    to = (lambda t: t.pin_memory().to(dev, non_blocking=True)) if pin else (lambda t: t)
    return PrefetchedRows(to(miss.contiguous()), to(r.values), to(r.scores), to(r.found))


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
