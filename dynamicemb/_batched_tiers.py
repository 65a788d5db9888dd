"""The storage tiers' side of BatchedDynamicEmbeddingTables (``_TierStaging``, a mixin of the module class in
_batched.py): the caching tables' staging of a step's ids before its insert (the miss count, then the staging of
every table that misses, on the host or on the device), and the private halves of ``prefetch`` (the CPU-ids read
of stored rows, the device-batch job, the side stream). Design: docs/dynamicemb_storage.md."""

from __future__ import annotations

import contextlib
import functools
import operator
from typing import List

import torch

from . import _device_stage, _prefetch
from ._batched_step import _compiling
from ._batched_torch import _EMPTY_KEY
from ._caching import CachedTable, StepPins
from ._staging import host_phase, stage_tables, to_device, to_host
from ._table import RESERVED_KEYS

_PREFETCH_STREAMS = {}  # device index -> side stream of prefetch (see BatchedDynamicEmbeddingTables.prefetch)


class _TierStaging:
    """BatchedDynamicEmbeddingTables' staging of the caching tables (the step's and prefetch's)."""

    @property
    def _cached(self) -> List[int]:
        """Indices of the caching tables that some feature reads (kept while the module holds the same table
        objects: asked several times per step)."""
        c = self.__dict__.get("_cached_idx")
        if c is not None and len(c[0]) == len(self.tables) and all(map(operator.is_, c[0], self.tables)):
            return c[1]
        idx = [t for t in sorted(set(self.feature_table_map)) if isinstance(self.tables[t], CachedTable)]
        self.__dict__["_cached_idx"] = (list(self.tables), idx)
        return idx

    def _bounds(self, offsets) -> List[int]:
        """The F + 1 feature bounds of ``offsets`` on the host (a host sync when ``offsets`` is on the device)."""
        F = self.num_features
        B = (offsets.numel() - 1) // F
        return offsets[::B].tolist() if B else [0] * (F + 1)

    def _table_keys(self, ids, offsets, tables, unique: bool = True, bounds=None) -> dict:
        """Ids of each table in ``tables`` (unique, or as they come: views when a table reads one feature); a host
        sync on the F + 1 feature bounds of ``offsets`` when they are on the device and ``bounds`` is not given."""
        F = self.num_features
        bounds = self._bounds(offsets) if bounds is None else bounds
        out = {}
        for t in tables:
            parts = [ids[bounds[f]:bounds[f + 1]] for f in range(F) if self.feature_table_map[f] == t]
            k = (torch.cat(parts) if len(parts) > 1 else parts[0]) if parts else ids.new_empty(0)
            out[t] = torch.unique(k.view(torch.int64)).view(self.key_dtype) if unique else k
        return out

    def _stage_caches(self, ids, offsets, train: bool, backward: bool):
        """Stages the step's ids into the caching tables that miss some of them (see _caching.py); returns the
        step's pins when a backward follows (the rows it will update stay in the cache until it ran).

        Host syncs (docs/dynamicemb_storage.md): none after a prefetch of this very batch (``prefetch`` with the
        step's device ids: its job staged the batch) for every cache that did not change since; else one for the
        feature bounds (none with CPU offsets or after such a prefetch) and one for the miss counts of the other
        tables; then, if some table misses, two for all the tables together (``_stage_missing``). Caching tables
        over the uva store stage on the device instead (``_device_stage``: none). Returns (pins, the device
        staging's skip flag for lookup_step, or its deferred arguments (``_device_stage.Deferred``) on the fused
        kernel path, or None)."""
        cached = self._cached
        counts, bounds, stamp, skip = _prefetch.take(self, ids, offsets, cached)  # waits for queued prefetch jobs
        unknown = [t for t in cached if counts[t] is None]
        found = None
        # the fused kernel path stages inside the step's lookup_step (one op call per step): ``skip`` is then the
        # op's staging arguments (_device_stage.Deferred), else the staging op's failed flag
        defer = self.use_kernels and not _compiling()
        if skip is not None:  # a device prefetch of this batch: the op stages what it left (gated on the device)
            skip = _device_stage.stage(self, ids, offsets, cached, train, stamp, gate=skip, defer=defer)[0]
        elif unknown and (served := _device_stage.serves(self, ids, cached)):  # on the device, no host wait
            stamp = _device_stage.next_stamp()
            skip = _device_stage.stage(self, ids, offsets, cached, train, stamp, defer=defer, served=served)[0]
            unknown = []
        elif unknown:
            stamp = None
            if (bounds is None and offsets.is_cuda) or _prefetch.probe_op_serves(self, ids):
                # device offsets: the count and the feature bounds come back together (one host wait)
                found, counts_b, bounds = self._count_with_bounds(ids, offsets, unknown)
                counts.update(counts_b)
            else:
                bounds = self._bounds(offsets) if bounds is None else bounds
                found, measured = self._miss_counts(ids, bounds, unknown)
                counts.update(measured)
            if any(counts[t] for t in unknown):
                _prefetch.cooled(self)  # (``prefetch_adaptive``: the next prefetch stages ahead again)
        todo = [t for t in cached if counts[t]]
        if todo:
            bounds = self._bounds(offsets) if bounds is None else bounds
            self._stage_missing(ids, bounds, todo, sum(counts[t] for t in todo), found, set(unknown), train,
                                counts=counts)
        if not backward:
            return None, skip
        pins = StepPins(functools.partial(self._table_keys, ids, offsets, cached, False, bounds), self.tables, cached)
        pins.stamp = stamp
        return pins, skip

    def _count_with_bounds(self, ids, offsets, tables):
        """(found mask, {table: misses}, the F + 1 feature bounds) with one host wait: on the kernel path one
        launch of op ``cache_probe`` for every table of ``tables``, else the lookups of every table queued over the
        whole batch (``_prefetch._count_misses``: no bounds needed); then the miss counts and the bounds are read
        back together (``_prefetch.count_step``)."""
        return _prefetch.count_step(self, ids, offsets, tables)

    def _stage_device(self, ids, bounds, tables, found, train: bool, pins=(), counts=None) -> None:
        """Stages the step's ids into the caches of ``tables`` (caching tables over a ``UvaStore``) on the device,
        then ``_uva_store.stage_tables_device`` (one host wait, the capacity checks). The missing ids of every
        table come out of the found mask (``found``) together: with ``counts`` (per table the step's misses,
        duplicates included) one ``nonzero_static`` of exactly their number, a sort by (table, id) and the repeats
        masked to the empty key, so that table t's missing ids are the ``counts[t]`` entries after the other
        tables' (no wait; buffers sized by the misses, not by the batch); without counts, per table a sort of its
        slice of the batch."""
        from ._uva_store import missing_by_table, stage_tables_device, unique_padded

        present = self._table_keys(ids, None, tables, False, bounds)
        if counts is not None and all(counts.get(t) is not None for t in tables):
            missing = missing_by_table(ids, bounds, self.feature_table_map, tables, found,
                                       [int(counts[t]) for t in tables])
        else:
            hits = self._table_keys(found, None, tables, False, bounds)
            missing = []
            for t in tables:
                k = present[t].view(torch.int64)
                miss = hits[t] | (k < RESERVED_KEYS[-1] + 1)  # reserved ids (never stored) are skipped
                missing.append(unique_padded(torch.where(miss, _EMPTY_KEY, k)).view(self.key_dtype))
        stage_tables_device([self.tables[t] for t in tables], [present[t] for t in tables], missing,
                            insert_new=train, pins=pins)

    def _lookup_features(self, ids, bounds, tables, found) -> None:
        """``found[i]`` = id i is in its table's cache, for the ids of the features of ``tables`` (one lookup per
        feature, no host sync)."""
        for f in range(self.num_features):
            t, a, b = self.feature_table_map[f], bounds[f], bounds[f + 1]
            if t in tables and b > a:
                self.tables[t]._lookup(ids[a:b], found_out=found[a:b])

    def _miss_counts(self, ids, bounds, tables):
        """(found mask over the step's ids, {table: how many of the step's ids its cache misses}) for the caching
        tables ``tables``: one lookup per feature into one found mask, the per-feature sums at the feature bounds,
        one readback. Duplicates count once each; reserved ids always miss."""
        n = ids.numel()
        found = torch.ones(n, dtype=torch.bool, device=ids.device)
        out = {t: 0 for t in tables}
        if not n or bounds[-1] == bounds[0]:
            return found, out
        self._lookup_features(ids, bounds, tables, found)
        c = torch.zeros(n + 1, dtype=torch.int64, device=ids.device)
        torch.cumsum(torch.logical_not(found), 0, out=c[1:])
        ends = to_device(torch.tensor(bounds, dtype=torch.int64), ids.device).clamp(0, n)
        per_feature = to_host(c[ends].diff())[0].tolist()
        for f, m in enumerate(per_feature):
            if self.feature_table_map[f] in out:
                out[self.feature_table_map[f]] += m
        return found, out

    def _stage_missing(self, ids, bounds, todo, total, found, covered, train, pins=(), counts=None) -> None:
        """Stages the step's ids into the caches of ``todo`` (tables that miss ``total`` ids or fewer, counting
        duplicates) together: one readback of every missing id (``nonzero_static``: no wait for the count), the
        staging of all tables (``_staging.stage_tables``: one more). ``found``: the found mask of the tables in
        ``covered`` (None: none); the other tables of ``todo`` are looked up here. ``pins``: more ``StepPins``
        to pin (a prefetch job's). ``counts``: {table: its misses, duplicates counted} where known (bounds the
        device staging's buffers). Tables over a ``UvaStore`` stage on the device first (``_stage_device``).
        Raises what the stagings raise (a ``CacheCapacityError`` of the device staging before the others run)."""
        n = ids.numel()
        if found is None:
            found = torch.ones(n, dtype=torch.bool, device=ids.device)
        self._lookup_features(ids, bounds, [t for t in todo if t not in covered], found)
        dev = [t for t in todo if self.tables[t].device_store]
        if dev:  # over a UvaStore: staged on the device (no readback of the missing ids, no store threads)
            self._stage_device(ids, bounds, dev, found, train, pins, counts)
            todo = [t for t in todo if t not in dev]
            if not todo:
                return
            found = found.clone()  # the other tables' misses only (``total`` still bounds them)
            for f in range(self.num_features):
                if self.feature_table_map[f] in dev:
                    found[bounds[f]:bounds[f + 1]] = True
        pos = torch.nonzero_static(torch.logical_not(found), size=total, fill_value=-1).view(-1)
        hpos, hkeys = to_host(pos, ids.view(torch.int64)[pos.clamp(min=0)])
        with host_phase():
            ok = (hpos >= 0) & (hkeys > RESERVED_KEYS[-1])  # padding; reserved ids (never stored) always miss
            hpos, hkeys = hpos[ok], hkeys[ok]
            feat = torch.searchsorted(torch.tensor(bounds[1:], dtype=torch.int64), hpos, right=True)
            table = torch.tensor(self.feature_table_map, dtype=torch.int64)[feat]
            missing = [torch.unique(hkeys[table == t]).view(self.key_dtype) for t in todo]
        present = self._table_keys(ids, None, todo, False, bounds)
        stage_tables([self.tables[t] for t in todo], [present[t] for t in todo], missing, insert_new=train, pins=pins)

    def _prefetch_rows(self, ids, offsets, stream=None) -> None:
        """The CPU-ids form of ``prefetch``: per caching table one lookup of the batch's ids (on ``stream``), one
        host wait for every table's found mask, then per table one batched read of its store into host memory."""
        _prefetch.settle(self)
        cached = self._cached
        bounds = self._bounds(offsets.cpu())
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            dids = ids if ids.device == self.device else ids.pin_memory().to(self.device, non_blocking=True)
            keys = self._table_keys(dids, None, cached, False, bounds)
            founds = [self.tables[t]._cache_find(keys[t].contiguous())[0] for t in cached]
            if ids.device.type == "cpu":
                hkeys = self._table_keys(ids, None, cached, False, bounds)
                fetched = to_host(*founds)
            else:
                fetched = to_host(*founds, *[keys[t] for t in cached])
                hkeys = dict(zip(cached, fetched[len(cached):]))
        with host_phase():
            for j, t in enumerate(cached):
                miss = hkeys[t][torch.logical_not(fetched[j])]
                self.tables[t]._prefetch_missing(torch.unique(miss.view(torch.int64)).view(self.key_dtype))

    def _prefetch_stage(self, ids, offsets, stream=None, threaded=None) -> None:
        """The device-batch form of ``prefetch``: queues the job that stages the batch into the caches
        (``_prefetch.submit``): on ``stream`` in the job thread on CUDA, inline on a CPU module (tests). A CUDA
        module on the torch path stages inline on the current stream: its backward may write back a row it did
        not resolve (a group without a valid row rewrites row 0 with the bytes it read), so staging must be
        ordered with it on one stream."""
        if stream is not None and not self.use_kernels:
            stream, threaded = None, False
        if (stream is not None or threaded) and _prefetch.idle(self):
            return  # a warm working set (``prefetch_adaptive``): the step counts itself, as without a prefetch
        _prefetch.submit(self, ids, offsets, stream, threaded)

    def _prefetch_stream(self):
        s = _PREFETCH_STREAMS.get(self.device.index)
        if s is None:
            # high priority: a prefetch job's kernels run as soon as the forward before them is done, between the
            # kernels of the backward queued meanwhile (the next step waits for the job)
            s = _PREFETCH_STREAMS[self.device.index] = torch.cuda.Stream(self.device, priority=-1)
        return s
