"""Prefetch of a coming batch's staging (caching tables): ``BatchedDynamicEmbeddingTables.prefetch`` with the batch
already on the device queues a job that stages the batch's ids into the caches ahead of its step, so that the step
itself stages nothing and waits for nothing, as an all-HBM step (docs/dynamicemb_storage.md, "Prefetch").

Over caching tables that stage on the device (op cache_stage, ``_device_stage``) the job is that op queued on the
prefetch side stream with an end event (``queue_device``): no thread, no host wait; the step waits for the event on
the device, takes the op's stamp, and runs its own op gated by the job's failed flag (a no-op when the job staged
the whole batch). The rest of this docstring is the general job.

A job runs on the prefetch side stream, in a background host thread (one per process; jobs run one at a time, in
order): behind a device wait for the work queued before the prefetch call (the current step's forward and its
insert), it counts the batch's misses per table (reading the feature bounds and the counts back), and, when some
cache misses ids of the batch, stages them (``_staging.stage_tables``: store reads, insert and evict,
write-back of evicted rows). The host waits of all that are the job thread's; the step's thread only queues the
job. What keeps it safe:

  - rows of steps in flight: the job pins the ``StepPins`` alive when ``prefetch`` was called (it holds them until
    it ran, so a step whose backward is queued meanwhile keeps its rows: its update may not have run on the device),
    and the batch's own ids; staging evicts only unpinned rows, which no queued kernel reads or writes;
  - one table user at a time: every call that touches a caching table (the step, the module's row, checkpoint and
    storage calls, a caching table's logical ops) first waits for the jobs queued for it (``settle``); the job
    synchronizes its stream before it counts as done, so the step needs no device wait and the memory of every
    tensor the job used is free to reuse;
  - the step trusts a job only for its batch (the same ids and offsets tensors, not modified in place since) and
    for the tables whose cache did not change since the job (``CachedTable.generation``): between the job and the
    step there is only the backward of the steps in flight (no key moves). Anything else (a failed job, a cache
    changed by another call or by a later prefetch's staging) and the step checks and stages itself, as without a
    prefetch (and raises what staging raises: ``CacheCapacityError``, ``StoreError``).

A CPU module runs the job inline (in order; the tests count its ops) unless ``threaded=True``.

Over a warm working set (``prefetch_adaptive``: the last job a step took read no miss) the module's next
SAMPLE_EVERY - 1 prefetches of device batches queue nothing (``idle``: their steps count themselves, as without a
prefetch) and the one after is a count only (``queue_count``: op cache_probe on the side stream, no thread, no
staging), which its step reads after a host wait for that count alone; a miss (a count's, or a step's own:
``cooled``) makes the next job a staging job again.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import threading
import time
from typing import List, Optional

import torch

_WORKER: list = []  # [pid, executor] of the job thread, made on first use in a process (a fork has none)
_LOCAL = threading.local()
_TABLE_LAST = "_prefetch_last"  # a module's or caching table's attribute: its latest PrefetchJob (settle waits for
# it; an attribute set per prefetch is cheaper than a weak-key entry, which makes a weak reference each time)
_MODULE_JOBS = "_prefetch_jobs"  # a module's attribute: [PrefetchJob] not taken by a step yet (the last 4)
_KEEP = 4


class _AttrMap:
    """Read-only view obj -> its attribute ``name`` (``_LAST[m]``, ``_JOBS[m]``: what tests and tools read)."""

    def __init__(self, name: str):
        self.name = name

    def get(self, obj, default=None):
        return getattr(obj, "__dict__", {}).get(self.name, default)

    def __getitem__(self, obj):
        v = self.get(obj)
        if v is None:
            raise KeyError(obj)
        return v

    def __contains__(self, obj) -> bool:
        return self.get(obj) is not None


_LAST = _AttrMap(_TABLE_LAST)  # module or table -> its latest PrefetchJob
_JOBS = _AttrMap(_MODULE_JOBS)  # module -> its jobs not taken yet


def in_worker() -> bool:
    """True inside a job (its own table calls must not wait for it)."""
    return getattr(_LOCAL, "worker", False)


def _executor():
    if not _WORKER or _WORKER[0] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        _WORKER[:] = [os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="dynamicemb-prefetch")]
    return _WORKER[1]


def signature(ids: torch.Tensor, offsets: torch.Tensor) -> tuple:
    """Identity of a batch: the same tensors (storage, size, dtype) not modified in place since (version)."""
    return tuple((t.data_ptr(), t.numel(), t.dtype, t._version) for t in (ids, offsets))


class PrefetchJob:
    """One prefetch of a device batch: its tensors, what it pins, and (once run) what its step may skip.

    Attributes set by the run: ``bounds`` (the batch's F + 1 feature bounds, host ints), ``gens`` ({caching table:
    its generation after the job}, every id of the batch then in that cache; None when the job failed),
    ``error`` (the exception that stopped it), ``missed`` (ids of the batch its caches missed, duplicates counted),
    ``seconds`` (host time of the run)."""

    def __init__(self, ids, offsets, tables: List[int], pins: list, ready):
        self.ids, self.offsets, self.tables, self.pins, self.ready = ids, offsets, tables, pins, ready
        self.sig = signature(ids, offsets)
        self.future = None
        self.bounds = self.gens = self.error = self.stamp = None
        self.skip = self.done = None  # a queued device job's (queue_device): the step's skip flag, its end event
        self.flag = None  # and the slot of the flag's pinned host copy (_flag_slot)
        self._info = None  # and its op's info (misses per table first), read back only if ``missed`` is asked
        self._missed = 0
        self.seconds = 0.0
        self.count_only = False  # a count job (queue_count); its result until read: (pinned slice, tables)
        self.count = None

    @property
    def missed(self) -> int:
        """Ids of the batch its caches missed (duplicates counted); a queued device job reads them back from the
        device when asked (a host wait: diagnostics and tests only)."""
        if self.count is not None:
            _read_count(self)
        if self._info is not None:
            self.wait()
            h = self._info.tolist()
            self._info, self._missed = None, sum(h[t] for t in self.tables)
        return self._missed

    @missed.setter
    def missed(self, v: int) -> None:
        self._missed = v

    def wait(self) -> None:
        """Waits until the job ran (a no-op inside a job or when it ran inline); a queued device job: the current
        stream waits for its end event on the device (no host wait)."""
        if self.done is not None:
            self.done.wait(current_stream(self.ids.get_device()))
        elif self.future is not None and not in_worker():
            self.future.result()


_GET_STREAM = getattr(torch._C, "_cuda_getCurrentStream", None)  # (CUDA builds) -> (stream id, device, type)
_STREAMS: dict = {}  # that triple -> its torch.cuda.Stream


def current_stream(index: int):
    """``torch.cuda.current_stream(index)`` for a CUDA device index, one Stream object per stream kept (the
    torch call makes a new object and looks the device up each time: per-step host time of a prefetch)."""
    return _stream_of(_GET_STREAM(index))


def submit(module, ids: torch.Tensor, offsets: torch.Tensor, stream=None, threaded: Optional[bool] = None):
    """Queues the staging of batch (``ids``, ``offsets``: the module's layout, int64 offsets) for its caching
    tables. ``stream``: the CUDA side stream the job runs on (None: the current one, CPU modules). ``threaded``:
    run in the job thread (default: on CUDA, unless op cache_stage serves the tables: then the op is queued on
    ``stream``, ``queue_device``) or inline. Returns the job."""
    cached = module._cached
    tables = module.tables
    if not threaded and (served := _device_served(module, ids, cached)):  # op cache_stage queued (queue_device)
        return _register(module, queue_device(module, ids, offsets, cached, stream, served), cached)
    if threaded is None:
        threaded = stream is not None
    if threaded and _count_will_do(module, ids):  # a warm working set: the count alone (queue_count)
        return _register(module, queue_count(module, ids, offsets, cached, stream), cached)
    pins, seen = [], set()
    for t in cached:  # steps in flight now: the job keeps them pinned until it ran
        for p in list(tables[t]._pins):
            if id(p) not in seen:
                seen.add(id(p))
                pins.append(p)
    ready = None
    if stream is not None:
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(ids.device))
    job = _register(module, PrefetchJob(ids, offsets, cached, pins, ready), cached)
    if threaded:
        job.future = _executor().submit(_run_in_worker, module, job, stream)
    else:
        _run(module, job, stream)
    return job


def _register(module, job: PrefetchJob, cached: List[int]) -> PrefetchJob:
    d = module.__dict__
    recs = d.get(_MODULE_JOBS)
    if recs is None:
        recs = d[_MODULE_JOBS] = []
    recs.append(job)
    if len(recs) > _KEEP:
        del recs[:-_KEEP]  # a batch prefetched but never run is forgotten after _KEEP more
    d[_TABLE_LAST] = job
    tables = module.tables
    for t in cached:
        tables[t].__dict__[_TABLE_LAST] = job
    return job


_DS = []  # [the _device_stage module], imported on first use (it imports this module)


def _device_served(module, ids, cached: List[int]):
    return _device_stage().serves(module, ids, cached)


def queue_device(module, ids, offsets, tables: List[int], stream, served=None) -> PrefetchJob:
    """The prefetch of a batch over device-staged tables (op cache_stage serves them): the op queued on ``stream``
    behind the work queued so far on the current stream, with a fresh stamp (which the batch's step inherits) and
    the guard of every live step's stamp; an event marks its end, which the step (and every call that touches the
    tables: ``settle``) waits for on the device. No thread, no host wait, no readback: a failure is written into
    the device error record: a prefetch that cannot stage every id (its caches full of the rows of steps in flight)
    leaves the rest, losslessly, and the step's own op, gated by the job's failed flag, stages them once those steps
    ended (nothing when the flag is 0: the op's launches return at once) and reports its own failure. ``stream`` None (CPU twin): run at
    once; a failure then is the job's ``error`` (the step stages and raises itself). On CUDA ``missed`` reads the
    op's counts back when asked (a host wait; nothing on the step's path asks). ``served``: ``serves``' result
    for these tables (reused by ``_device_stage.stage``)."""
    from ._staging import host_phase

    ds = _device_stage()
    job = PrefetchJob(ids, offsets, tables, [], None)
    stamp = ds.next_stamp()
    if stream is None:
        try:
            failed, info = ds.stage(module, ids, offsets, tables, True, stamp, report=False, served=served)
            T, F = len(module.tables), module.num_features
            with host_phase():
                if int(failed[0]):
                    raise ds.failure(module, info)
                v = info.tolist()
            job.bounds, job.missed = v[T:T + F + 1], sum(v[t] for t in tables)
        except Exception as e:  # noqa: BLE001  kept for the step, which stages itself and raises its own
            job.error = _detached(e)
            return job
    else:
        cur = torch.cuda.current_stream(ids.device)
        ready, done = _events(module, stream)
        ready.record(cur)
        stream.wait_event(ready)
        # on the side stream: set and restored directly when it is the current device's (torch.cuda.stream's
        # context looks the device up again, through torch.cuda.is_available's environment checks)
        same = torch.cuda.current_device() == stream.device_index
        job.flag, flag_addr = _flag_slot(module)
        with contextlib.nullcontext() if same else torch.cuda.stream(stream):
            if same:
                torch.cuda.set_stream(stream)
            try:
                # reporting off: a prefetch that cannot stage every id (its caches full of the rows of steps in
                # flight) is no error; its failed flag gates the step's own staging, which stages the rest, reports
                failed, job._info = ds.stage(module, ids, offsets, tables, True, stamp, report=False,
                                             served=served, failed_host=flag_addr)
            finally:
                if same:
                    torch.cuda.set_stream(cur)
        done.record(stream)
        job.done = done
        ids.record_stream(stream)  # (the batch's memory is not reused before the job ran, whatever its owner does)
        offsets.record_stream(stream)
        if same and served and offsets.dtype == torch.int64:  # the next prefetches take the bound path
            module.__dict__[_BIND] = _DeviceBinding(module, ids, tables, stream, served[0])
    job.skip, job.stamp = failed, stamp
    job.gens = {t: module.tables[t].generation for t in tables}
    return job


_BIND = "_prefetch_bind"  # a module's attribute: its _DeviceBinding
_SET_STREAM = getattr(torch._C, "_cuda_setStream", None)  # (CUDA builds)
_GET_DEVICE = getattr(torch._C, "_cuda_getDevice", None)
_CAPTURING = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)


def queue_bound(module, ids: torch.Tensor, offsets: torch.Tensor) -> Optional[PrefetchJob]:
    """``prefetch`` of a device batch through the module's bound job (``_DeviceBinding``), or None when it has none
    or it does not hold for this call (the full path then runs)."""
    b = module.__dict__.get(_BIND)
    return b.queue(module, ids, offsets) if b is not None else None


class _DeviceBinding:
    """A module's device prefetch over tables that op cache_stage serves with everything but the batch bound
    (made by the first such ``queue_device`` on CUDA): ``queue`` checks in O(1) that the binding still holds (no
    table tensor replaced: ``_table.state_epoch``; the same table objects, device staging and kernel path; the
    batch a contiguous key_dtype / int64 pair on the bound device, its current device; no graph capture or
    compile; every live step stamped) and queues the op on the side stream exactly as ``queue_device`` does (the
    same op, arguments, events and flag slot), with no per-call plan lookup, Stream objects or weak references.
    The host cost of a warm prefetch is then the op call and its CUDA calls."""

    __slots__ = ("epoch", "tables", "cached", "ftable", "mask", "vb", "tids", "ts", "index", "kdt", "F",
                 "stream", "side", "ready", "done", "sample", "sample_host", "sample_armed", "idle")

    def __init__(self, module, ids, cached: List[int], stream, plan):
        from ._table import state_epoch

        self.epoch = state_epoch()
        self.tables, self.cached = list(module.tables), list(cached)
        self.ftable, self.mask, self.vb, self.tids, self.ts = plan
        self.index, self.kdt, self.F = ids.get_device(), ids.dtype, module.num_features
        self.stream, self.side = stream, (stream.stream_id, stream.device_index, stream.device_type)
        self.ready, self.done = _events(module, stream)
        # the miss-count sample (``prefetch_adaptive``): a pinned (T,) int64 that a job's per-table misses are
        # copied into, armed to -1 (landed once every entry is >= 0); prefetches left to skip
        self.sample, self.sample_host, self.sample_armed = None, None, False
        self.idle = 0

    def _warm(self, module) -> bool:
        """``prefetch_adaptive``: True when this prefetch may queue nothing (the last landed sample read no miss,
        and fewer than SAMPLE_EVERY prefetches since)."""
        if not getattr(module, "prefetch_adaptive", False):
            return False
        if self.sample_armed and min(self.sample_host) >= 0:  # the sample landed
            self.sample_armed = False
            self.idle = SAMPLE_EVERY - 1 if sum(self.sample_host) == 0 else 0
        if self.idle > 0:
            self.idle -= 1
            return True
        return False

    def queue(self, module, ids: torch.Tensor, offsets: torch.Tensor):
        """Queues the job (returns it), or returns ``SKIPPED`` (``_warm``: the step stages itself), or None when
        the binding does not hold (the caller takes the full path)."""
        idx = self.index
        nb = offsets.numel() - 1
        if (ids.dtype is not self.kdt or offsets.dtype is not torch.int64 or ids.get_device() != idx
                or offsets.get_device() != idx or ids.dim() != 1 or nb % self.F
                or not ids.is_contiguous() or not offsets.is_contiguous()
                or not getattr(module, "device_staging", False) or not module.use_kernels
                or torch.compiler.is_compiling() or _CAPTURING()):
            return None
        if self._warm(module):  # (before the binding's other checks: a step staging itself is always correct)
            return SKIPPED
        ds = _device_stage()
        if (ds.state_epoch() != self.epoch or not all(map(operator.is_, self.tables, module.tables))
                or _GET_DEVICE() != idx):
            return None
        live = ds.live_stamps(self.tids)
        if None in live:
            return None
        stamp = ds.next_stamp()
        min_live = min(live) if live else stamp
        # the records first, on the current stream (a rebuild copies them there; the job waits for it)
        meta, stage, totals = module._kernel_meta(), ds.stage_meta(module), ds._totals(module)
        slot, flag_addr = _flag_slot(module)
        cur_k = _GET_STREAM(idx)
        stream, ready, done = self.stream, self.ready, self.done
        ready.record(_stream_of(cur_k))
        stream.wait_event(ready)
        _SET_STREAM(*self.side)
        try:  # as queue_device: reporting off, the failed flag's copy into the slot
            failed, info = torch.ops.dynamicemb.cache_stage(
                meta, stage, totals, ids, offsets, self.ftable, nb // self.F, self.mask, stamp, min(min_live, stamp),
                True, self.vb, False, None, flag_addr)
            # every queued job's misses, copied after its op (unless the last copy has not landed yet): a working
            # set that turned warm skips from the next landed sample on, not 16 jobs later
            if not self.sample_armed and getattr(module, "prefetch_adaptive", False):
                self._arm_sample(len(module.tables))
                self.sample.copy_(info[:len(module.tables)], non_blocking=True)
        finally:
            _SET_STREAM(*cur_k)
        job = PrefetchJob(ids, offsets, self.cached, [], None)
        gens = job.gens = {}
        for t, tb in zip(self.cached, self.ts):
            tb.mutated()  # keys may have moved: a prefetch job's proof for this cache is void
            gens[t] = tb.generation
        done.record(stream)
        ids.record_stream(stream)  # (the batch's memory is not reused before the job ran, whatever its owner does)
        offsets.record_stream(stream)
        job.done, job.flag, job._info, job.skip, job.stamp = done, slot, info, failed, stamp
        return _register(module, job, self.cached)

    def _arm_sample(self, T: int) -> None:
        if self.sample is None:
            import ctypes

            from ._batched_step import _pinned_slice

            self.sample = _pinned_slice(T)  # (process-lifetime pinned memory: a late copy lands in no reused block)
            self.sample_host = (ctypes.c_int64 * T).from_address(self.sample.data_ptr())
        for i in range(T):
            self.sample_host[i] = -1
        self.sample_armed = True


SAMPLE_EVERY = 16  # after a sample with no miss, one prefetch in this many queues its job (``prefetch_adaptive``)
SKIPPED = object()  # _DeviceBinding.queue: this prefetch queued nothing (a warm working set)


def _stream_of(k):
    s = _STREAMS.get(k)
    if s is None:
        if len(_STREAMS) > 64:  # (streams made and dropped by the caller: forget old ones)
            _STREAMS.clear()
        s = _STREAMS[k] = torch.cuda.Stream(stream_id=k[0], device_index=k[1], device_type=k[2])
    return s


def _device_stage():
    if not _DS:
        from . import _device_stage as ds

        _DS.append(ds)
    return _DS[0]


_FLAG_SLOTS = 64


def _flag_slot(module):
    """(slot, address) of a pinned int32 of the module, armed to -1, into which a device job's op copies its failed
    flag after its kernels; (None, 0) when every slot is armed. A slot is re-armed only after the host saw its copy
    land (value >= 0), so a late copy can never overwrite a newer job's flag."""
    c = module.__dict__.get("_prefetch_flags")
    if c is None:
        import ctypes

        from ._batched_step import _pinned_slice

        buf = _pinned_slice(_FLAG_SLOTS // 2)  # (kept alive here; int64 slices: 2 int32 slots each)
        view = (ctypes.c_int32 * _FLAG_SLOTS).from_address(buf.data_ptr())
        c = module.__dict__["_prefetch_flags"] = [buf, view, list(range(_FLAG_SLOTS)), set()]
    buf, view, free, armed = c
    if not free:
        landed = [i for i in armed if view[i] >= 0]
        armed.difference_update(landed)
        free.extend(landed)
        if not free:
            return None, 0
    i = free.pop()
    view[i] = -1
    armed.add(i)
    return i, buf.data_ptr() + 4 * i


def _flag_seen(module, slot) -> Optional[int]:
    """The failed flag a device job copied into ``slot`` (0: it staged its whole batch), or None while the copy has
    not landed; a landed slot is free again."""
    c = module.__dict__.get("_prefetch_flags")
    if slot is None or c is None or slot not in c[3]:
        return None
    v = c[1][slot]
    if v < 0:
        return None
    c[3].discard(slot)
    c[2].append(slot)
    return v


def _events(module, stream):
    """The module's two events of device prefetch jobs on ``stream`` (made once, re-recorded by every job): ready
    (the work queued before the prefetch call, which the job waits for) and done (the job's end). A wait takes
    the event's latest record when it is queued: a step waits for its job, or for a later job of the same stream,
    which runs after it (never for work queued after the wait)."""
    c = module.__dict__.get("_prefetch_events")
    if c is None or c[0] is not stream:
        c = module.__dict__["_prefetch_events"] = (stream, torch.cuda.Event(), torch.cuda.Event())
    return c[1], c[2]


def _run_in_worker(module, job, stream):
    _LOCAL.worker = True
    try:
        _run(module, job, stream)
    finally:
        _LOCAL.worker = False


def _run(module, job: PrefetchJob, stream) -> None:
    t0 = time.perf_counter()
    ctx = contextlib.ExitStack()
    if stream is not None:
        ctx.enter_context(torch.cuda.device(stream.device))
        ctx.enter_context(torch.cuda.stream(stream))
    try:
        with ctx:
            try:
                if job.ready is not None:
                    stream.wait_event(job.ready)
                job.bounds, job.gens, job.missed = stage_batch(module, job.ids, job.offsets, job.tables, job.pins,
                                                               job)
            except Exception as e:  # noqa: BLE001  kept for the step, which stages itself and raises its own
                job.error = _detached(e)
            finally:
                if stream is not None:
                    stream.synchronize()  # done on the device: no tensor of the job is in use after this
    except Exception as e:  # noqa: BLE001  (the synchronize itself failed: a device error)
        job.error = job.error or _detached(e)
    finally:
        job.pins = job.ready = None
        job.seconds = time.perf_counter() - t0


def _detached(e: BaseException) -> BaseException:
    """``e`` without its tracebacks (and those of its causes): a traceback keeps the frames of the failed staging
    alive, and with them the ``StepPins`` it was given, which would then pin their steps' ids in every later
    staging until the garbage collector breaks the cycle (job -> error -> traceback -> frame -> job)."""
    seen = set()
    x = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        x.__traceback__ = None
        x = x.__cause__ or x.__context__
    return e


def stage_batch(module, ids, offsets, tables: List[int], pins: list, job=None):
    """The job's work: per table the batch's ids its cache misses and the batch's feature bounds, then, if some
    cache misses ids, the staging of those tables with ``pins`` (``StepPins`` of steps in flight) pinned as well.
    The count: the feature bounds read back (a wait for the step's forward on the device), one lookup per feature,
    the counts read back (the step's own ``_miss_counts``); or, with ``module.prefetch_early_count``, everything
    queued before one host wait (``_count_misses``). Tables over a ``UvaStore`` stage on the device
    (``_stage_missing`` routes them); with op cache_stage (``_device_stage.serves``) every table in one op and one
    wait (its result; ``job.stamp`` gets the stamp the batch's step inherits). Returns (bounds, {table: generation
    after}, missed ids)."""
    from . import _device_stage, _staging

    if _device_stage.serves(module, ids, tables, pins):  # op cache_stage; the job's one wait is its result
        stamp = _device_stage.next_stamp()
        failed, info = _device_stage.stage(module, ids, offsets, tables, True, stamp, pins, report=False)
        hf, hi = _staging.to_host(failed, info)
        T, F = len(module.tables), module.num_features
        if int(hf[0]):
            raise _device_stage.failure(module, hi)
        with _staging.host_phase():
            v = hi.tolist()
        if job is not None:
            job.stamp = stamp
        return v[T:T + F + 1], {t: module.tables[t].generation for t in tables}, sum(v[t] for t in tables)
    if getattr(module, "prefetch_early_count", False):
        found, counts, bounds = count_step(module, ids, offsets, tables)
    else:
        bounds = module._bounds(offsets)
        found, counts = module._miss_counts(ids, bounds, tables)
    todo = [t for t in tables if counts[t]]
    missed = sum(counts[t] for t in todo)
    if todo:
        module._stage_missing(ids, bounds, todo, missed, found, set(tables), True, pins, counts)
    return bounds, {t: module.tables[t].generation for t in tables}, missed


_EMPTY_KEY = -(2**63)  # the reserved empty key (int64 bits): every table op skips it


def probe_op_serves(module, ids) -> bool:
    """The multi-table miss check (op ``cache_probe``, one launch for every caching table) serves this module's
    step: the fused kernel path on CUDA (its table metadata), outside a graph capture."""
    from ._batched_step import _capturing

    return (module.use_kernels and ids.is_cuda and module.device.type == "cuda"
            and hasattr(torch.ops.dynamicemb, "cache_probe") and not _capturing())


def count_step(module, ids, offsets, tables: List[int]):
    """(found mask over the batch, {table: ids of the batch its cache misses, duplicates counted}, the F + 1
    feature bounds) for the caching tables ``tables``, with one host wait and no host bounds needed. On the kernel
    path one launch of op ``cache_probe`` (every table probed by one kernel; counts and bounds in one int64 tensor,
    one readback); else ``_count_misses`` (one masked lookup of the whole batch per table)."""
    from ._staging import host_phase, to_device, to_host

    if probe_op_serves(module, ids):
        F = module.num_features
        B = (offsets.numel() - 1) // F
        dev = ids.device
        off = offsets if offsets.device == dev else to_device(offsets.long().contiguous(), dev)
        found, info = torch.ops.dynamicemb.cache_probe(module._kernel_meta(), ids.contiguous(), off.contiguous(),
                                                       module._ftable_i32, B, _table_mask(module, dev, tables))
        h = to_host(info)[0]
        with host_phase():
            v = h.tolist()
        T = len(module.tables)
        return found, {t: v[t] for t in tables}, v[T:]
    miss, found, ends = _count_misses(module, ids, offsets, tables)
    hmiss, hends = to_host(miss, ends)
    with host_phase():
        return found, dict(zip(tables, hmiss.tolist())), hends.tolist()


def _table_mask(module, device, tables: List[int]) -> torch.Tensor:
    """(T,) int32 on ``device``: 1 for the tables of ``tables`` (op cache_probe probes those); made once per
    module and tables."""
    key = (str(device), tuple(tables))
    c = module.__dict__.get("_probe_table_mask")
    if c is None or c[0] != key:
        from ._staging import to_device

        m = torch.tensor([int(t in tables) for t in range(len(module.tables))], dtype=torch.int32)
        c = module.__dict__["_probe_table_mask"] = (key, to_device(m, device))  # no blocking copy
    return c[1]


def _count_misses(module, ids, offsets, tables: List[int]):
    """Queued with no host wait (no host bounds needed): (per table of ``tables``, the batch's ids its cache misses,
    duplicates counted; the found mask over the batch's positions, True where the id is in its table's cache or
    its feature reads no table of ``tables``; the F + 1 feature bounds), all on the device. Each id's feature is a
    search among the feature ends; each table looks the whole batch up, the other tables' ids masked to the empty
    key (which lookups skip): len(tables) lookups of N keys and a (len(tables), N) mask."""
    F = module.num_features
    B = (offsets.numel() - 1) // F
    n, dev = ids.numel(), ids.device
    ends = offsets[::B].contiguous() if B else torch.zeros(F + 1, dtype=torch.int64, device=dev)
    if not n or not B:
        return torch.zeros(len(tables), dtype=torch.int64, device=dev), torch.ones(n, dtype=torch.bool, device=dev), ends
    pos = torch.arange(n, dtype=torch.int64, device=dev)
    feat = torch.searchsorted(ends[1:], pos, right=True).clamp_(max=F - 1)
    mine = _feature_mask(module, dev, tables)[:, feat]  # (T', n): id i belongs to tables[j]
    keys = torch.where(mine, ids.view(torch.int64)[None, :], _EMPTY_KEY).view(ids.dtype)
    found = torch.empty_like(mine)
    for j, t in enumerate(tables):
        module.tables[t]._lookup(keys[j], found_out=found[j])
    miss = (mine & torch.logical_not(found)).sum(1)
    return miss, (found | torch.logical_not(mine)).all(0), ends


def _feature_mask(module, device, tables: List[int]) -> torch.Tensor:
    """(len(tables), F) bool on ``device``: feature f reads table ``tables[j]``; made once per module and tables."""
    key = (str(device), tuple(tables))
    c = module.__dict__.get("_prefetch_feature_mask")
    if c is None or c[0] != key:
        fmap = module.feature_table_map
        m = torch.tensor([[fmap[f] == t for f in range(len(fmap))] for t in tables], dtype=torch.bool)
        from ._staging import to_device

        c = module.__dict__["_prefetch_feature_mask"] = (key, to_device(m, device))  # no blocking copy
    return c[1]


def pending(obj) -> Optional["PrefetchJob"]:
    """The latest prefetch job queued for ``obj`` (a module or a caching table) that nothing settled yet, or None."""
    d = getattr(obj, "__dict__", None)
    return d.get(_TABLE_LAST) if d is not None else None


def settle(obj) -> None:
    """Waits for the prefetch jobs queued for ``obj`` (a module or a caching table); cheap when there are none."""
    d = getattr(obj, "__dict__", None)
    job = d.get(_TABLE_LAST) if d is not None else None
    if job is not None:
        job.wait()
        if d.get(_TABLE_LAST) is job:
            del d[_TABLE_LAST]


def settled(fn):
    """Method decorator: ``settle(self)`` first (module and caching-table calls that touch the tables)."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if _TABLE_LAST in self.__dict__:
            settle(self)
        return fn(self, *args, **kwargs)
    return wrapper


def take(module, ids: torch.Tensor, offsets: torch.Tensor, cached: List[int]):
    """For the step of batch (``ids``, ``offsets``): waits for the module's jobs, takes the latest job of this batch
    and returns ({table: 0 where the job left every id of the batch in the cache and the cache did not change
    since, else None}, the batch's feature bounds from the job, or None; the job's stamp in the caches (a device
    staging's, ``_device_stage``), or None; a queued device job's skip flag (``queue_device``) when the job
    covers every table of the step, else None)."""
    none = dict.fromkeys(cached)
    settle(module)
    recs = module.__dict__.get(_MODULE_JOBS)
    if not recs:
        return none, None, None, None
    sig = signature(ids, offsets)
    mine = [j for j in recs if j.sig == sig]
    if not mine:
        return none, None, None, None
    recs[:] = [j for j in recs if j.sig != sig]
    job = mine[-1]
    if job.count is not None:
        _read_count(job)
    if job.count_only or job.done is None:  # a count job's or a staging job's sample (``prefetch_adaptive``)
        warm = job.gens is not None and job._missed == 0
        d = module.__dict__
        d[_WARM], d[_IDLE] = warm, (SAMPLE_EVERY - 1 if warm else 0)
    if job.gens is not None:
        none.update({t: 0 for t, g in job.gens.items() if t in none and module.tables[t].generation == g})
    if _flag_seen(module, job.flag) == 0 and None not in none.values():
        # the job staged its whole batch and the host already sees it: the step stages nothing (no gated launches)
        return none, job.bounds, job.stamp, None
    skip = job.skip
    if skip is not None and job.done is not None:
        skip.record_stream(current_stream(ids.get_device()))  # made on the job's stream, read on this one
    return none, job.bounds, job.stamp, (skip if None not in none.values() else None)


_WARM = "_prefetch_warm"  # a module's attribute: the last job its step took read no miss (``prefetch_adaptive``)
_IDLE = "_prefetch_idle"  # and the prefetches left to skip after that sample (``idle``)


def idle(module) -> bool:
    """``prefetch_adaptive`` over host-staged tables (the module's prefetch of a device batch, before ``submit``):
    True when this prefetch queues nothing: the last job a step took read no miss, fewer than SAMPLE_EVERY
    prefetches ago, and no step counted a miss since (``cooled``). Its step then counts itself, as without a
    prefetch (a warm step: one count, no staging); the next sample is a count job (``queue_count``)."""
    d = module.__dict__
    n = d.get(_IDLE)
    if not n or not getattr(module, "prefetch_adaptive", False):
        return False
    d[_IDLE] = n - 1
    return True


def cooled(module) -> None:
    """A step's own count saw a miss: the next prefetch stages ahead again (``prefetch_adaptive``)."""
    d = module.__dict__
    if d.get(_WARM):
        d[_WARM], d[_IDLE] = False, 0
_COUNT_SLOTS = _KEEP + 1  # pinned count slices per module: one is reused only after _KEEP newer jobs (forgotten)


def _count_will_do(module, ids) -> bool:
    """``prefetch_adaptive`` over host-staged tables: the batch's job may be a count only (``queue_count``): the
    last job that a step of the module took read no miss, no thread job is still running (its staging may move
    keys under the count), and the count has its op path (CUDA: op cache_probe) or runs at once (CPU twin)."""
    d = module.__dict__
    if not (d.get(_WARM) and getattr(module, "prefetch_adaptive", False)):
        return False
    last = d.get(_TABLE_LAST)
    if last is not None and last.future is not None and not last.future.done():
        return False
    return not ids.is_cuda or probe_op_serves(module, ids)


def queue_count(module, ids, offsets, tables: List[int], stream) -> PrefetchJob:
    """A warm prefetch over host-staged tables (``prefetch_adaptive``; the last taken job read no miss): the job
    only counts the batch's misses per table and reads its feature bounds, queued on ``stream`` behind the work
    queued so far (op cache_probe, one launch), the result copied into a pinned slice of the module and an event
    recorded: no thread, no host wait, no staging (nothing evicted: no pins needed). The step (``take``) waits
    for that event on the host, i.e. for the count only, not for the backward queued meanwhile on its own stream
    (the wait a step's own count makes), and skips its own count for every table the count found whole and whose
    cache did not change since (``generation``); a table with a miss the step counts and stages itself (and the
    next prefetch queues a staging job again). ``stream`` None (CPU twin): counted at once (``count_step``)."""
    job = PrefetchJob(ids, offsets, tables, [], None)
    job.count_only = True
    job.gens = {t: module.tables[t].generation for t in tables}  # (before the count: a later change voids it)
    T = len(module.tables)
    if stream is None:
        try:
            _, counts, bounds = count_step(module, ids, offsets, tables)
        except Exception as e:  # noqa: BLE001  the step counts itself and raises its own
            job.error, job.gens = _detached(e), None
            return job
        job.bounds, job._missed = list(bounds), sum(counts[t] for t in tables)
        job.gens = {t: g for t, g in job.gens.items() if counts[t] == 0}
        return job
    slots = module.__dict__.get("_prefetch_counts")
    n = T + module.num_features + 1
    if slots is None or slots[0].numel() != _COUNT_SLOTS * n:
        from ._batched_step import _pinned_slice

        slots = module.__dict__["_prefetch_counts"] = [_pinned_slice(_COUNT_SLOTS * n), 0]
    i = slots[1]
    slots[1] = (i + 1) % _COUNT_SLOTS
    host = slots[0][i * n:(i + 1) * n]
    # the op's records first, on the current stream (a rebuild copies them there; the count waits for it)
    meta, mask = module._kernel_meta(), _table_mask(module, ids.device, tables)
    ids, offsets = ids.contiguous(), offsets.contiguous()
    cur = current_stream(ids.get_device())
    ready, done = _events(module, stream)
    ready.record(cur)
    stream.wait_event(ready)
    B = (offsets.numel() - 1) // module.num_features
    with torch.cuda.stream(stream):
        _, info = torch.ops.dynamicemb.cache_probe(meta, ids, offsets, module._ftable_i32, B, mask)
        host.copy_(info[:n], non_blocking=True)
    done.record(stream)
    ids.record_stream(stream)  # (the batch's memory is not reused before the count ran, whatever its owner does)
    offsets.record_stream(stream)
    job.done, job.count = done, (host, T)
    return job


def _read_count(job: PrefetchJob) -> None:
    """A count job's result (``queue_count``), read once (by the batch's step): waits on the host for the job's
    end event (the count only: it was queued right after the forward before it), then keeps in ``gens`` only the
    tables whose count is 0."""
    (host, T), job.count = job.count, None
    job.done.synchronize()
    from ._staging import host_phase

    with host_phase():
        v = host.tolist()
    job.bounds, job._missed = v[T:], sum(v[t] for t in job.tables)
    job.gens = {t: g for t, g in job.gens.items() if v[t] == 0}
