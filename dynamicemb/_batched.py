"""Several dynamic embedding tables fused into one module: lookup + pooling forward, fused optimizer backward.

Inputs follow TorchRec/FBGEMM: flat ``ids`` (N,) and ``offsets`` (F * B + 1,) of bags ordered feature-major
(bag ``f * B + b`` = feature f, sample b); feature f reads table ``feature_table_map[f]``.

One training step, with fixed shapes and no host synchronization (so it can be captured in a CUDA graph):
  1. per-table dedup: ids are sorted by (table, id) (two stable sorts), equal neighbours share a unique index;
     the unique buffer has N entries (padding holds a reserved key), plus the inverse map id -> unique;
  2. per table, the uniques of other tables are masked to a reserved key (the table's kernels skip them as
     `illegal`), then ``find_or_insert_slots`` (train) / ``find_slots`` (eval) gives each unique its slot;
  3. rows are gathered from the table's ``values`` (row = [embedding | optimizer state]) into one (N, max dim)
     buffer, expanded to ids, weighted, and pooled by segment sums (``index_add_``);
  4. backward (``_LookupFunction.backward``): the output gradient is scattered back to ids, summed per unique,
     clipped, and the optimizer updates the rows in place; no gradient is returned for the tables.
On CUDA the step runs on the fused kernels of dynamicemb/csrc/lookup (``torch.ops.dynamicemb.lookup_*``): one
exact (table, id) dedup (a per-step hash set that hands out unique indices; no sort), ONE find_or_insert launch
for all tables (which also resolves every id's row address), a gather/pool forward that streams the ids of 32
bags per warp, and a segmented backward: the CSR unique -> occurrences (a radix sort of the inverse map, built by
the training forward on a side stream while the insert runs; joined before the forward returns) lets one warp
sum a run of occurrences' bag gradients in registers and apply the optimizer once per row (lookup_types.h). Global-
norm clipping and wide rows take an atomic scatter instead: it streams the same ids, reads each bag's gradient once
and scatter-adds it with vector atomics: into the rows themselves for plain fp32 SGD, else into per-unique sums
that a warp-per-unique pass clips and applies with the optimizer in the row (summation order not deterministic); a
row without a slot reads zeros / its table's initializer value (counter-based: a function of the seed, the
table's op clock of the step, the key and the column, the value a new row of that key gets in that step) in
training, and the eval initializer (clock 0) in eval; the torch path gives the same values (``_init_rows``).
The torch code (_batched_torch.py) is the CPU path and the reference, and also serves CUDA modules the kernels do
not cover (admission counting, tables of mixed dtypes, rows wider than 512 columns, or 128 when a dim is not a
multiple of 4). The fused-kernel calls are in _batched_kernels.py, the autograd function in _batched_step.py,
the caching tables' staging and prefetch's private halves in _batched_tiers.py.
Rows that are not stored (not admitted yet, refused, or missing in eval) use fallback values and get no update.
A key inserted and then evicted by another key of the same batch (full bucket) counts as refused: only a slot's
final owner is updated, so no two ids ever share a row.

Storage modes (``DynamicEmbTableOptions.storage``, docs/dynamicemb_storage.md): "hbm" (above), "hybrid" (rows past
the HBM budget in pinned host memory, reached by the same kernels through UVA) and "caching" (an HBM cache over a
backing store, ``_caching.py``): before the step's insert, each caching table that misses some of the step's ids
stages them (moves the rows its store holds into the cache, reserves slots for new ids, pins the ids of steps
whose backward has not run), so the step itself runs unchanged; staging synchronizes with the host, a fixed
number of times for all tables together (``_staging.py``). Whether a table misses anything is one readback for all
tables. A ``prefetch`` of the batch on the device stages it ahead, on a side stream and a background host thread
(``_prefetch.py``), so that its step stages nothing and waits for nothing; a ``prefetch`` of CPU ids reads the
batch's stored rows into host memory ahead of the staging.

Tables of equal row width and dtype keep their rows in one buffer (each table's ``values`` is a view of it), so
the gather and the update run once per group of tables, not once per table; a table that reallocates (grow, load)
is re-linked at the next eager forward. Under CUDA graphs: no growth (use init_capacity == max_capacity), and
the capture must not span a grow/load; on_refused="error"/"warn" are checked only in eager steps (the device
counter ``refused_count`` keeps counting inside graphs).

Input checks (``forward(..., validate=...)``): host values (types, dtypes, shapes, devices) are always checked
eagerly. Device values (ids >= 0 or not a reserved uint64 pattern; offsets[0] == 0, non-decreasing, offsets[-1] ==
ids.numel(); lengths >= 0 summing to ids.numel() (and equal to the offsets' differences when both are given);
finite per-sample weights):
  - ``validate=None`` (default): on CUDA one kernel checks them on the stream, with no host synchronization. A
    violation makes that step treat its batch as empty (no insert, no update; the outputs hold fallback rows) and
    is raised as ``dynamicemb.DeviceInputError`` (a ValueError) at the start of the next dynamicemb call, or at
    ``dynamicemb.check_errors()``; inside ``dynamicemb.strict_checks()`` each call synchronizes and raises its own
    errors. Non-finite per-sample weights are reported the same way but do not empty the batch (the optimizer's
    ``nonfinite`` policy keeps them out of the rows). On CPU the checks run eagerly and raise at once.
  - ``validate="host"`` (or ``True``, the former default): the eager host checks, raising at once; on CUDA they
    synchronize several times per step.
  - ``validate="off"`` (or ``False``): no value checks. The kernels stay in bounds whatever the values, but invalid
    ids may be inserted.
The one default-path option that reads device values on the host is ``on_refused="error"`` (one sync per training
step of a module with such a table, to raise ``RefusedInsertError`` from the step that refused); "warn" and "zero"
never block. The check and the error record work inside CUDA graphs; under ``torch.compile`` CPU modules skip the
host value checks (CUDA modules keep the device checks).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import threading
import warnings
from typing import List, Optional, Sequence

import torch
from torch import nn

from ._checks import CHANNEL, ERR_ARG_CODES, host_error
from ._optimizers import SGD, EmbOptimizer
from ._options import DynamicEmbTableOptions
from ._table import RESERVED_KEYS, ScoredHashTable, TableInitializer, _check_key_tensor
from . import _prefetch
from ._caching import CachedTable
from ._prefetch import settled
from ._storage import make_store
from ._batched_kernels import _KernelStep, _VALUE_KIND, _kernels_available
from ._batched_step import _HostMirror, _LookupFunction, _PinnedMirror, _capturing, _compiling
from ._batched_tiers import _TierStaging
from ._batched_torch import _EMPTY_KEY, _TorchStep
# re-exported: tests, benchmarks and _sharded.py import these from here
from ._batched_kernels import _STEP_CSR, _STEP_PSW_GRAD, _step_ws_entries  # noqa: F401,E402
from ._batched_torch import _id_gradients, _init_rows, _pool_rows  # noqa: F401,E402

__all__ = ["BatchedDynamicEmbeddingTables", "RefusedInsertError"]

_POOLINGS = ("sum", "mean", "none")
_STAT_REFUSED = 3


class RefusedInsertError(RuntimeError):
    """An insert was refused (full bucket of higher scores) by a table whose ``on_refused`` is "error".

    A training forward that raises it has run its insert (undoing it would cost a copy of every touched bucket
    per step): the batch's other ids are stored (new ones with their initial rows, evicting as usual), scores and
    the op clock advanced, ``refused_count`` counts the refusals; no row is updated, ``step`` is unchanged and the
    refused ids are not stored. Retrying the batch (e.g. after growing) inserts only what is missing.
    ``set_rows`` raising it leaves the table unchanged."""


def _int_list(xs, arg: str) -> List[int]:
    """Integers of ``xs`` (anything with ``__index__`` but bool); a float or bool is a TypeError, never truncated."""
    try:
        items = list(xs)
    except TypeError:
        raise TypeError(f"{arg}: expected a sequence of ints, got {type(xs).__name__}") from None
    out = []
    for x in items:
        if isinstance(x, bool) or isinstance(x, float) or (isinstance(x, torch.Tensor) and x.is_floating_point()):
            raise TypeError(f"{arg}: expected a sequence of ints, got {items!r}")
        try:
            out.append(operator.index(x))
        except TypeError:
            raise TypeError(f"{arg}: expected a sequence of ints, got {items!r}") from None
    return out


# validate= of forward -> what runs: "device" (default: device checks on CUDA, eager host checks on CPU), "host"
# (eager host checks that synchronize on CUDA; True is the same, as before), "off" (no value checks)
_VALIDATE = {None: "device", "device": "device", True: "host", "host": "host", False: "off", "off": "off"}


def _resolve_budgets(options, row_widths, total) -> List[int]:
    """Rows in HBM per table: its capacity for "hbm"; budget // row bytes for "hybrid" (at most the capacity);
    cache slots for "caching" (rounded down to a bucket multiple, at least one bucket, at most the capacity).
    A module ``total`` goes first to the "hbm" tables and the explicit budgets; the other tables share the rest in
    proportion to their full size."""
    if total is not None and (not isinstance(total, int) or isinstance(total, bool) or total < 0):
        raise ValueError(f"hbm_budget_bytes: expected None or an int >= 0, got {total!r}")
    row_bytes = [w * torch.empty((), dtype=o.dtype).element_size() for o, w in zip(options, row_widths)]
    full = [o.max_capacity * rb for o, rb in zip(options, row_bytes)]
    budgets = [o.hbm_budget_bytes for o in options]
    for i, o in enumerate(options):
        if o.storage == "hbm" and budgets[i] is not None and budgets[i] < full[i]:
            raise ValueError(f"tables[{i}].hbm_budget_bytes: expected >= the table's {full[i]} bytes of rows for "
                             f"storage='hbm' (or storage='hybrid' / 'caching'), got {budgets[i]}")
    if total is not None:
        fixed = sum(full[i] if o.storage == "hbm" else (budgets[i] or 0) for i, o in enumerate(options))
        if fixed > total:
            raise ValueError(f"hbm_budget_bytes: expected >= {fixed} (all-HBM tables plus explicit table budgets), "
                             f"got {total}")
        flex = [i for i, o in enumerate(options) if o.storage != "hbm" and budgets[i] is None]
        want = sum(full[i] for i in flex)
        for i in flex:
            budgets[i] = (total - fixed) * full[i] // max(want, 1)
    rows = []
    for i, o in enumerate(options):
        if o.storage == "hbm":
            rows.append(o.max_capacity)
        elif o.storage == "hybrid":
            rows.append(o.max_capacity if budgets[i] is None else min(o.max_capacity, budgets[i] // row_bytes[i]))
        else:
            if budgets[i] is None:
                raise ValueError(f"tables[{i}].hbm_budget_bytes: expected a budget for storage='caching' (or the "
                                 f"module's hbm_budget_bytes), got None")
            bc = o.bucket_capacity
            rows.append(min(o.max_capacity, max(bc, budgets[i] // row_bytes[i] // bc * bc)))
    return rows


class BatchedDynamicEmbeddingTables(_KernelStep, _TorchStep, _TierStaging, nn.Module):
    """Dynamic embedding tables (unbounded ids, scored hash tables) with a fused optimizer, TBE-style.

    Args:
        tables: one ``DynamicEmbTableOptions`` per table (``dim`` and ``max_capacity`` set).
        feature_table_map: table index of each feature (default: feature i reads table i).
        pooling: "sum", "mean" or "none" (sequence: one row per id; all tables must share one dim).
        optimizer: an ``EmbOptimizer`` (SGD, Adam, Adagrad, RowWiseAdagrad); default ``SGD(lr=0.01)``.
        table_names: names used in state_dict keys and dumps (default "t0", "t1", ...).
        key_dtype: dtype of ids: torch.int64 (ids must be >= 0) or torch.uint64 (full range but the three
            reserved patterns 2**63 + {0, 1, 2}).
        output_dtype: dtype of the outputs (pooling always accumulates in fp32).
        device: "cpu" or a CUDA device.
        hbm_budget_bytes: HBM bytes for the value rows of all tables together: "hbm" tables take their full size,
            hybrid/caching tables without their own ``hbm_budget_bytes`` share the rest in proportion to their
            full size (docs/dynamicemb_storage.md). None: per-table budgets only.

    Forward: ``module(ids, offsets=None, per_sample_weights=None, lengths=None, validate=None)``
        ids (N,) key_dtype; offsets (F * B + 1,) int64 or lengths (F * B,) int64; per_sample_weights (N,) float
        (sum pooling). Returns (B, sum of the features' dims) for sum/mean, (N, dim) for "none".
        ``validate``: None (device-side checks on CUDA, no sync), "host"/True (eager host checks), "off"/False;
        see the module docstring. Invalid device values raise ``DeviceInputError`` at the next call (CUDA) or at
        once (CPU).
        In training mode (``module.train()``) new ids are inserted and the backward updates rows; in eval,
        missing ids get the ``eval_initializer`` value and nothing is inserted.

    Example:
        >>> opts = [DynamicEmbTableOptions(dim=16, max_capacity=1024)] * 2
        >>> emb = BatchedDynamicEmbeddingTables(opts, feature_table_map=[0, 1, 1], optimizer=Adam(lr=1e-3))
        >>> out = emb(ids, offsets)             # (B, 48)
        >>> out.sum().backward()                # updates the rows of the ids seen
    """

    def __init__(
        self,
        tables: Sequence[DynamicEmbTableOptions],
        feature_table_map: Optional[Sequence[int]] = None,
        pooling: str = "sum",
        optimizer: Optional[EmbOptimizer] = None,
        table_names: Optional[Sequence[str]] = None,
        key_dtype: torch.dtype = torch.int64,
        output_dtype: torch.dtype = torch.float32,
        device=None,
        hbm_budget_bytes: Optional[int] = None,
    ):
        super().__init__()
        tables = list(tables)
        if not tables or not all(isinstance(t, DynamicEmbTableOptions) for t in tables):
            raise TypeError("tables: expected a non-empty sequence of DynamicEmbTableOptions")
        # copies: a caller mutating its options objects afterwards must not change the module
        self.options = [dataclasses.replace(t).validate() for t in tables]
        T = len(tables)
        fmap = list(range(T)) if feature_table_map is None else _int_list(feature_table_map, "feature_table_map")
        if not fmap or any(not 0 <= x < T for x in fmap):
            raise ValueError(f"feature_table_map: expected non-empty indices in [0, {T}), got {fmap}")
        if pooling not in _POOLINGS:
            raise ValueError(f"pooling: expected one of {list(_POOLINGS)}, got {pooling!r}")
        dims = [o.dim for o in self.options]
        if pooling == "none" and len(set(dims[t] for t in fmap)) != 1:
            raise ValueError(f"pooling='none': expected one dim for all tables of the features, got dims {dims}")
        optimizer = SGD(lr=0.01) if optimizer is None else optimizer
        if not isinstance(optimizer, EmbOptimizer) or type(optimizer) is EmbOptimizer:
            raise TypeError(f"optimizer: expected SGD, Adam, Adagrad or RowWiseAdagrad, got {optimizer!r}")
        names = [f"t{i}" for i in range(T)] if table_names is None else list(table_names)
        if len(names) != T or len(set(names)) != T or not all(isinstance(n, str) and n and "." not in n for n in names):
            raise ValueError(f"table_names: expected {T} distinct non-empty names without '.', got {names}")
        if key_dtype not in (torch.int64, torch.uint64):
            raise TypeError(f"key_dtype: expected torch.int64 or torch.uint64, got {key_dtype}")
        if output_dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"output_dtype: expected torch.float32, torch.float16 or torch.bfloat16, got {output_dtype}")
        dev = torch.device(device if device is not None else "cpu")
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        self.device = dev
        self.table_names = names
        self.feature_table_map = fmap
        self.pooling = pooling
        self.optimizer = optimizer
        self.key_dtype = key_dtype
        self.output_dtype = output_dtype
        self.dims = dims
        self.feature_dims = [dims[t] for t in fmap]
        self.max_dim = max(self.feature_dims)
        if getattr(optimizer, "state_dtype", torch.float32) == torch.bfloat16 and any(
                o.dtype != torch.float32 for o in self.options):
            raise ValueError("optimizer: state_dtype=torch.bfloat16 packs Adam's moments into fp32 rows; expected "
                             f"every table's dtype torch.float32, got {[o.dtype for o in self.options]}")
        self.state_dims = [optimizer.state_dim(d) for d in dims]
        self.row_widths = [optimizer.row_width(d) for d in dims]
        self._hbm_rows = _resolve_budgets(self.options, self.row_widths, hbm_budget_bytes)
        paths = [os.path.abspath(str(getattr(o.backing_store, "path", o.backing_store))) for o in self.options
                 if isinstance(o.backing_store, (str, os.PathLike)) or hasattr(o.backing_store, "path")]
        if len(set(paths)) != len(paths):
            raise ValueError(f"backing_store: expected one store directory per table, got {paths}")
        self.tables: List[ScoredHashTable] = [self._make_table(i, self.options[i].capacity) for i in range(T)]
        self.admission_tables: List[Optional[ScoredHashTable]] = [
            ScoredHashTable(o.admission_slots, 1, torch.float32, key_dtype, o.bucket_capacity, "lfu",
                            device=dev, check_keys=False)
            if o.admission_threshold > 1 else None
            for o in self.options
        ]
        self._train_init = [o.initializer.resolved(o.max_capacity) for o in self.options]
        self._eval_init = [o.eval_initializer.resolved(o.max_capacity) for o in self.options]
        self.register_buffer("learning_rate", torch.tensor(float(optimizer.lr), dtype=torch.float32, device=dev))
        self.register_buffer("step", torch.zeros((), dtype=torch.float32, device=dev))
        self.register_buffer("refused_count", torch.zeros(T, dtype=torch.int64, device=dev))
        #: rows [0] and steps [1] the fused update skipped for a non-finite gradient (``optimizer.nonfinite``)
        self.register_buffer("nonfinite_count", torch.zeros(2, dtype=torch.int64, device=dev), persistent=False)
        self._nonfinite_seen = torch.zeros(1, dtype=torch.int64, device=dev)  # the total at the last report
        self._feature_table = torch.tensor(fmap, dtype=torch.int64, device=dev)
        self._anchor = torch.empty(0, device=dev, requires_grad=True)
        self._sizes = _HostMirror(T)
        self._refused_seen = _HostMirror(T)
        #: the kernel path's view of refused_count: lookup_step copies it into pinned memory after its insert
        self._refused_pinned = _PinnedMirror(T)
        self._refused_warned = [0] * T
        self._make_lock()
        self._link_groups()
        used = sorted(set(fmap))
        self._value_kind = _VALUE_KIND[self.options[used[0]].dtype]
        self._vec4 = all(dims[t] % 4 == 0 and self.row_widths[t] % 4 == 0 for t in used)
        widest = max(dims[t] for t in used)
        #: run the fused CUDA kernels (csrc/lookup) where they cover the configuration; tests turn it off to
        #: compare with the torch path on the same device
        self.use_kernels = (
            dev.type == "cuda" and _kernels_available()
            and all(self.admission_tables[t] is None for t in used)
            and len(set(self.options[t].dtype for t in used)) == 1
            and widest <= (512 if self._vec4 else 128)
        )
        self._meta = None
        self._meta_key = None
        self._set = None
        self._gsum = None
        self._seg = None
        #: backward: CSR entries (id occurrences sorted by unique) per warp of the segmented reduction; 0 selects
        #: the atomic scatter (which global-norm clipping and rows wider than one 128 (4-wide) / 32-column chunk
        #: always take)
        self.backward_chunk = 128
        #: atomic scatter: sum the gradients of repeated rows among 32 consecutive ids in registers first
        self.aggregate_grads = True
        #: segmented backward: build its CSR in the training forward on a side stream, forked after the dedup (it
        #: overlaps the insert; forking after the insert, overlapping the pooling, measured 0.035 ms slower)
        #: instead of at the start of the backward
        self.overlap_csr = True
        # the step counter of plain fp32 SGD and Adam advanced by the segmented update kernel (True) or by a tensor add
        # before it (private: for A/B; _batched_kernels.py _backward_kernels)
        self._step_in_update = True
        #: hybrid tables (each bucket's rows beyond its HBM slots in pinned host memory), fused kernel path: how
        #: the step's kernels reach the host rows. "forward" (the default): the forward reads them from HBM scratch
        #: rows copied in host-address order (sorted UVA accesses run 3-6x faster than random ones), the backward
        #: reads and writes them in place (random order, but reads and writes overlap on the bus); "step": the
        #: backward too copies whole rows in, updates them there and writes them back in that order (faster than
        #: "forward" only for SGD with a quarter of the rows in HBM); "off": every kernel in place
        #: (docs/dynamicemb_storage.md "hybrid")
        self.host_rows_order = "forward"
        #: prefetch jobs (_prefetch.py) queue their miss count before their first host wait (a masked lookup per
        #: caching table of the whole batch) instead of after reading the feature bounds back (a lookup per
        #: feature): their launches then overlap the step's forward but compete with its thread for the GIL. On
        #: (the default): the job's count then ends right after the forward on the device, one host wait, the
        #: step's own count does the same (``_count_with_bounds``)
        self.prefetch_early_count = True
        #: a device prefetch over device-staged tables (op cache_stage) samples its jobs' miss counts (a copy to
        #: pinned memory after each queued job, read once it landed, no wait); after a sample with no miss (a warm
        #: working set) the next ``_prefetch.SAMPLE_EVERY - 1`` prefetches queue nothing: their steps stage
        #: inside their own lookup_step (a warm staging: launches that return at once), which a prefetch would only
        #: duplicate at the cost of an op call. Over the other (host-staged) stores, after a step took a job that
        #: read no miss, prefetches queue a count only (``_prefetch.queue_count``: op cache_probe on the side stream,
        #: no thread, no staging): the step waits for that count instead of making its own behind the backward
        #: queued meanwhile; a miss turns staging jobs back on. False: every prefetch queues its (staging) job
        self.prefetch_adaptive = True
        #: caching tables over the uva store stage on the device (op cache_stage: no host wait, capacity failures
        #: raised from the device error record; _device_stage.py); False: the Python staging (one wait or two)
        self.device_staging = dev.type == "cuda"
        if dev.type == "cuda":
            self._ftable_i32 = torch.tensor(fmap, dtype=torch.int32, device=dev)
            cols = [0]
            for d in self.feature_dims[:-1]:
                cols.append(cols[-1] + d)
            self._fcol = torch.tensor(cols, dtype=torch.int64, device=dev)
        if self.use_kernels:
            self._kernel_meta()  # built eagerly: a torch.compile'd step reuses it (it cannot read data_ptr)
        if dev.type == "cuda":
            CHANNEL.ensure_block()  # eagerly, so that errors of compiled steps are seen too

    # ------------------------------------------------------------------ construction helpers
    def _make_table(self, i: int, capacity: int) -> ScoredHashTable:
        o = self.options[i]
        init = o.initializer.resolved(o.max_capacity)
        tinit = TableInitializer(
            kind=init.kind, value=float(init.value), low=init.low, high=init.high, mean=float(init.mean),
            std=init.std, seed=init.seed, init_cols=o.dim, fill=self.optimizer.initial_state(),
        )
        if o.storage == "caching":
            store = make_store(o.backing_store, self.key_dtype, self.row_widths[i], o.dtype, o.max_capacity,
                               o.bucket_capacity, self.device)
            return CachedTable(self._hbm_rows[i], self.row_widths[i], o.dtype, self.key_dtype, o.bucket_capacity,
                               o.score_policy, initializer=tinit, device=self.device, store=store)
        if o.storage == "hybrid":
            from ._hybrid import HybridTable

            # CUDA: slot-major host rows, host slots claimed lowest first (a batch's new host rows fall in a few
            # runs: fewer host regions per op; private bucket-major: table._set_host_slot_major(False)). The CPU
            # twin keeps one buffer (the torch path reads one) and claims in probe order: its slots may differ,
            # but every key's row, score, eviction (by score, digest, key) and output are the CUDA table's.
            return HybridTable(o.max_capacity, self.row_widths[i], o.dtype, self.key_dtype, o.bucket_capacity,
                               o.score_policy, initializer=tinit, device=self.device, hbm_rows=self._hbm_rows[i],
                               _slot_major=self.device.type == "cuda")
        return ScoredHashTable(
            capacity, self.row_widths[i], o.dtype, self.key_dtype, o.bucket_capacity, o.score_policy,
            max_capacity=o.max_capacity, initializer=tinit, device=self.device, check_keys=False,
        )

    def _link_groups(self):
        """Puts the value rows of the tables that share (row width, dtype) into one buffer (each table's
        ``values`` becomes a view of it), so a step gathers and updates all of them in one pass. Re-run when a
        table reallocated its rows (grow, load); never during CUDA-graph capture."""
        used = sorted(set(self.feature_table_map))
        keys = []
        # a hybrid table with host rows is a group of its own (its rows are in two buffers)
        gkey = lambda t: (self.tables[t].value_dim, self.options[t].dtype,  # noqa: E731
                          t if getattr(self.tables[t], "values_host", None) is not None else -1)
        for t in used:
            k = gkey(t)
            if k not in keys:
                keys.append(k)
        self._groups, self._group_of = [], {}
        # tables below their own max_capacity may grow: only then does a step mirror the table sizes to the host
        # (a hybrid table or a caching table's cache never grows: its max_capacity is its capacity)
        self._may_grow = any(t.capacity() < t.max_capacity for t in self.tables)
        for k in keys:
            members = [t for t in used if gkey(t) == k]
            base, off = {}, 0
            if len(members) == 1:  # a group of one is its table's own rows: no copy, no second buffer
                buf = self.tables[members[0]].values
                base[members[0]] = 0
            else:
                # Peak memory: the group plus the largest member (each member's old rows are released as soon
                # as they are copied), not twice the group.
                total = sum(self.tables[t].capacity() for t in members)
                buf = torch.empty(total, k[0], dtype=k[1], device=self.device)
                for t in members:
                    tb = self.tables[t]
                    cap = tb.capacity()
                    buf[off:off + cap].copy_(tb.values)
                    tb.values = buf[off:off + cap]
                    base[t] = off
                    off += cap
            for t in members:
                self._group_of[t] = len(self._groups)
            self._groups.append({"buf": buf, "base": base, "dim": self.dims[members[0]], "tables": members})
        # the linked value tensors: a table that replaced its `values` (grow), or a table replaced by another
        # (load), no longer holds the object
        self._linked = [(t, self.tables[t].values, getattr(self.tables[t], "values_host", None)) for t in used]

    def _refresh_links(self):
        """Re-links the groups and rebuilds the kernels' table metadata now (after a load replaced tables), so
        that a torch.compile'd step, which skips this bookkeeping, never reads the old tables' addresses."""
        self._check_groups()
        if self.use_kernels:
            self._kernel_meta()

    def _check_groups(self):
        """Re-links the groups when a table replaced its rows (an identity test per table: no device call; a hybrid
        table's host rows too)."""
        tables = self.tables
        for t, v, h in self._linked:
            if tables[t].values is not v or getattr(tables[t], "values_host", None) is not h:
                self._link_groups()
                return

    # ------------------------------------------------------------------ public helpers
    @property
    def num_features(self) -> int:
        return len(self.feature_table_map)

    def set_learning_rate(self, lr: float):
        """Changes the learning rate (a device tensor: also takes effect in captured CUDA graphs).

        Args:
            lr: a finite number >= 0 (an int or float; bool is refused).

        Raises:
            TypeError: ``lr`` is not an int or float (or is a bool); the module is unchanged.
            ValueError: ``lr`` is NaN, infinite or negative; the module is unchanged.

        Example:
            >>> emb.set_learning_rate(0.05)
        """
        if not isinstance(lr, (int, float)) or isinstance(lr, bool):
            raise TypeError(f"lr: expected a finite number >= 0, got {lr!r} ({type(lr).__name__})")
        if not math.isfinite(lr) or lr < 0:
            raise ValueError(f"lr: expected a finite number >= 0, got {lr!r}")
        self.learning_rate.fill_(float(lr))
        self.optimizer.lr = float(lr)

    def get_learning_rate(self) -> float:
        return float(self.learning_rate)

    @settled
    def set_epoch(self, epoch: int):
        """Sets the epoch of tables with an epoch_lru / epoch_lfu policy."""
        for t in self.tables:
            t.set_epoch(epoch)

    @settled
    def sizes(self) -> List[int]:
        """Stored ids per table (host sync)."""
        return [t.size() for t in self.tables]

    def capacities(self) -> List[int]:
        return [t.capacity() for t in self.tables]

    def _check_table(self, table) -> int:
        T = len(self.tables)
        if not isinstance(table, int) or isinstance(table, bool):
            raise TypeError(f"table: expected an int in [0, {T}), got {table!r} ({type(table).__name__})")
        if not 0 <= table < T:  # -1 would silently pick the last table
            raise ValueError(f"table: expected an int in [0, {T}), got {table}")
        return table

    @settled
    def set_rows(self, table: int, ids: torch.Tensor, weights: torch.Tensor, state: Optional[torch.Tensor] = None):
        """Inserts/overwrites rows: embedding ``weights`` (n, dim) and optimizer ``state`` (default: initial).

        Args:
            table: table index in [0, number of tables).
            ids: (n,) key_dtype on the module's device (n may be 0: a no-op).
            weights: (n, dim) float.
            state: (n, state_dim) float optimizer state, or None for the initial state.

        Raises:
            TypeError/ValueError: a bad argument; the module is unchanged.
            RefusedInsertError: some ids were refused (their buckets are full of higher scores); the table is
                restored to its state before the call (rows, keys, scores, size and op clock).

        Example:
            >>> emb.set_rows(0, torch.arange(10), torch.randn(10, 16))
        """
        table = self._check_table(table)
        t = self.tables[table]
        d, s = self.dims[table], self.state_dims[table]
        self._check_ids(ids, "ids")
        if weights.shape != (ids.numel(), d):
            raise ValueError(f"weights: expected shape ({ids.numel()}, {d}), got {tuple(weights.shape)}")
        if state is None:
            state = torch.full((ids.numel(), s), self.optimizer.initial_state(), device=self.device)
        if state.shape != (ids.numel(), s):
            raise ValueError(f"state: expected shape ({ids.numel()}, {s}), got {tuple(state.shape)}")
        pad = torch.full((ids.numel(), self.row_widths[table] - d - s), self.optimizer.initial_state(),
                         device=self.device)
        rows = torch.cat([weights.to(self.device, torch.float32), state.to(self.device, torch.float32), pad], 1)
        ids = ids.contiguous()
        with self._step_lock, t._lock:
            snap = t._snapshot_buckets(ids)  # a refused call leaves the table as it was
            stats = t.insert_or_assign(ids, rows.to(t.value_dtype).contiguous())
            refused = int(stats[3])
            if refused:
                t._restore_buckets(snap)
        if refused:
            raise RefusedInsertError(f"set_rows: {refused} of {ids.numel()} ids refused by table {table} (buckets "
                                     f"full of higher scores); the table is unchanged")

    @settled
    def get_rows(self, table: int, ids: torch.Tensor):
        """Reads the stored rows of ``ids`` in table ``table``; changes nothing (no insert, no score update).

        Args:
            table: table index in [0, number of tables).
            ids: (n,) key_dtype on the module's device.

        Returns:
            (weights (n, dim) fp32, state (n, state_dim) fp32, found (n,) bool); rows of ids not stored are 0.

        Raises:
            TypeError/ValueError: ``table`` is not an int in range, or bad ``ids``.

        Example:
            >>> w, state, found = emb.get_rows(0, torch.arange(10))
            >>> w[found]                            # the embeddings of the ids that are stored
        """
        table = self._check_table(table)
        self._check_ids(ids, "ids")
        r = self.tables[table].find(ids.contiguous())
        v = r.values.float()
        d = self.dims[table]
        return v[:, :d], v[:, d:d + self.state_dims[table]], r.found

    # ------------------------------------------------------------------ validation
    def _check_ids(self, ids, arg):
        _check_key_tensor(ids, arg, self.key_dtype, self.device, "the module")
        if ids.numel() and not _capturing():
            v = ids.view(torch.int64)
            if self.key_dtype == torch.int64:
                bad = v < 0
                if bool(bad.any()):
                    raise ValueError(f"{arg}: expected ids >= 0, got {int(v[bad][0])}")
            else:
                bad = v <= RESERVED_KEYS[-1]
                if bool(bad.any()):
                    k = int(v[bad][0]) & ((1 << 64) - 1)
                    raise ValueError(f"{arg}: got the reserved id {k} (reserved: 2**63 + 0, 1, 2)")

    def _check_args(self, ids, offsets, psw, lengths):
        """Host-side checks of the arguments (types, dtypes, shapes, devices); never reads device values."""
        _check_key_tensor(ids, "ids", self.key_dtype, self.device, "the module")
        F = self.num_features
        if offsets is None and lengths is None:
            raise ValueError("offsets/lengths: expected at least one of them, got neither")
        for name, t in (("offsets", offsets), ("lengths", lengths)):
            if t is None:
                continue
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
            if t.dtype not in (torch.int64, torch.int32):
                raise TypeError(f"{name}: expected dtype torch.int64 or torch.int32, got {t.dtype}")
            if t.dim() != 1:
                raise ValueError(f"{name}: expected a 1-d tensor, got shape {tuple(t.shape)}")
            if t.device != self.device:
                raise ValueError(f"{name}: expected a tensor on {self.device}, got {t.device}")
        nb = offsets.numel() - 1 if offsets is not None else lengths.numel()
        if nb < 0 or nb % F:
            arg = "offsets" if offsets is not None else "lengths"
            what = f"F * B + 1 entries with F={F}" if offsets is not None else f"F * B entries with F={F}"
            raise ValueError(f"{arg}: expected {arg} of {what}, got {nb + (offsets is not None)} entries")
        if offsets is not None and lengths is not None and lengths.numel() != nb:
            raise ValueError(f"lengths: expected {nb} entries (offsets has {nb + 1}), got {lengths.numel()}")
        if nb == 0 and ids.numel():
            raise ValueError(f"offsets/lengths: expected at least one bag for {ids.numel()} ids, got none")
        if psw is not None:
            if not isinstance(psw, torch.Tensor) or not psw.is_floating_point():
                got = getattr(psw, "dtype", type(psw))
                raise TypeError(f"per_sample_weights: expected a floating-point tensor, got {got}")
            if tuple(psw.shape) != (ids.numel(),):
                raise ValueError(
                    f"per_sample_weights: expected shape ({ids.numel()},) like ids, got {tuple(psw.shape)}")
            if psw.device != self.device:
                raise ValueError(f"per_sample_weights: expected a tensor on {self.device}, got {psw.device}")
            if self.pooling != "sum":
                raise ValueError(f"per_sample_weights: expected only with pooling='sum', got pooling={self.pooling!r}")

    def _check_values(self, ids, offsets, psw, lengths):
        """Host-side checks of the device values (validate="host", and CPU modules): read on the host, so on CUDA
        each synchronizes; raise at once."""
        self._check_ids(ids, "ids")
        n = ids.numel()
        if psw is not None and n:
            bad = ~torch.isfinite(psw)
            if bool(bad.any()):
                i = int(torch.nonzero(bad)[0])
                raise host_error(ERR_ARG_CODES["per_sample_weights"], 9, i, float(psw[i]), 0)
        if offsets is not None:
            o = offsets.long()
            if o.numel() and int(o[0]) != 0:
                raise ValueError(f"offsets: expected offsets[0] == 0, got {int(o[0])}")
            if o.numel() > 1 and bool((o[1:] < o[:-1]).any()):
                i = int(torch.nonzero(o[1:] < o[:-1])[0])
                raise ValueError(f"offsets: expected non-decreasing values, got offsets[{i}]={int(o[i])} > "
                                 f"offsets[{i + 1}]={int(o[i + 1])}")
            if int(o[-1]) != n:
                raise ValueError(f"offsets: expected offsets[-1] == ids.numel() == {n}, got {int(o[-1])}")
            if lengths is not None and not torch.equal(o[1:] - o[:-1], lengths.long()):
                raise ValueError("lengths/offsets: expected lengths == offsets[1:] - offsets[:-1], they differ")
        else:
            ln = lengths.long()
            if bool((ln < 0).any()):
                raise ValueError(f"lengths: expected values >= 0, got {int(ln.min())}")
            if int(ln.sum()) != n:
                raise ValueError(f"lengths: expected sum(lengths) == ids.numel() == {n}, got {int(ln.sum())}")

    # ------------------------------------------------------------------ forward
    def forward(self, ids: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None, lengths: Optional[torch.Tensor] = None,
                validate=None) -> torch.Tensor:
        """See the class docstring; ``validate`` selects the input checks (module docstring, "Input checks")."""
        compiling = _compiling()
        if not compiling:
            CHANNEL.raise_pending()  # an error found on the device by an earlier call (a memory load, no sync)
        mode = _VALIDATE.get(validate) if isinstance(validate, (bool, str, type(None))) else None
        if mode is None:
            raise ValueError(f"validate: expected None, 'device', 'host', 'off', True or False, got {validate!r}")
        self._check_args(ids, offsets, per_sample_weights, lengths)
        cuda = self.device.type == "cuda"
        if (mode == "host" or (mode == "device" and not cuda)) and not compiling and not _capturing():
            self._check_values(ids, offsets, per_sample_weights, lengths)
        lengths_only = offsets is None
        if lengths_only:
            offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
            torch.cumsum(lengths.long(), 0, out=offsets[1:])
        if offsets.dtype != torch.int64:  # (a call of .long() on int64 offsets costs a dispatch for nothing)
            offsets = offsets.long()
        skip = None  # the torch path's device-check flag (nonzero: the batch failed and is treated as empty)
        checks = None  # the kernel path's: (lengths, lengths_only), checked inside lookup_step
        if cuda:
            if not compiling:
                CHANNEL.ensure_block()
            if mode == "device":
                ln = None if lengths is None else lengths.long()
                if self.use_kernels:
                    checks = (ln, lengths_only)
                else:
                    pw = None if per_sample_weights is None else per_sample_weights.to(torch.float32).contiguous()
                    skip = torch.ops.dynamicemb.lookup_validate(ids, offsets, ln, pw, lengths_only)
        if not self.use_kernels and not _capturing() and not compiling:  # the kernel path runs these after the dedup
            if self.training and torch.is_grad_enabled():
                self._before_train_step()
            self._check_groups()
        if self.training and torch.is_grad_enabled():
            out = _LookupFunction.apply(self._anchor, self, ids, offsets, per_sample_weights, skip, checks)
        else:
            out, _ = self._forward_impl(ids, offsets, per_sample_weights, train=self.training, skip=skip,
                                        checks=checks)
        if not compiling:
            CHANNEL.after_call(self.device)
        return out

    def _after_insert(self, refused_step=None, ws=None):
        """After a training insert: the torch path adds its step's refusals (``refused_step``) to refused_count
        (lookup_step did so itself; its step's count is in the workspace header, ``ws``); on_refused="error"
        raises (a host sync, inherent to raising); the host mirrors of the sizes and refusals are refreshed."""
        if refused_step is not None:
            self.refused_count.add_(refused_step)  # in place, no attribute rebinding (torch.compile traces it)
        if not _capturing() and not _compiling():
            bad = [t for t, o in enumerate(self.options) if o.on_refused == "error"]
            if bad:
                if refused_step is None:
                    refused_step = ws[1:1 + len(self.tables)]  # the workspace header's int64 refusals per table
                counts = refused_step[bad].tolist()
                for t, c in zip(bad, counts):
                    if c:
                        raise RefusedInsertError(
                            f"table {self.table_names[t]!r}: {c} inserts refused (buckets full of higher "
                            f"scores); on_refused='error'")
            if self._may_grow and self._sizes.ready():
                self._sizes.push(torch.stack([tb.size_tensor() for tb in self.tables]))
            if refused_step is not None:  # the torch path (lookup_step copies into _refused_pinned itself)
                self._refused_seen.push(self.refused_count)

    def __getstate__(self):
        # A lock neither pickles nor deep-copies. Copies (deepcopy, pickle) rebuild the table metadata: it holds
        # this module's device addresses, and its key (the tensors' identities) would match the copy's tensors.
        _prefetch.settle(self)  # a copy must not see a table mid-staging
        d = dict(super().__getstate__())
        # (and the prefetch's CUDA events and pinned flag slots are this module's, not the copy's)
        for k in ("_step_lock", "_step_cond", "_inflight", "_prefetch_events", "_prefetch_flags", "_prefetch_bind",
                  "_prefetch_last", "_prefetch_jobs"):
            d.pop(k, None)
        d["_meta"] = d["_meta_key"] = d["_meta_host"] = None
        return d

    def __setstate__(self, d):
        super().__setstate__(d)
        self._make_lock()

    def _make_lock(self):
        self._step_lock = threading.RLock()
        self._step_cond = threading.Condition(self._step_lock)
        self._inflight = {}  # thread -> its training steps between forward and backward

    def _before_train_step(self):
        """Eager only: grow tables past their load factor, report refused inserts (non-blocking mirrors). A table
        grows only while no other step is between its forward and backward (their slots would go stale): it waits
        for other threads' steps (up to 10 s, else it grows at a later step) and defers if this thread has one."""
        sizes = self._sizes.poll()
        if sizes is not None:
            for i, t in enumerate(self.tables):
                o = self.options[i]
                if t.capacity() < t.max_capacity and sizes[i] > o.grow_load_factor * t.capacity():
                    me = threading.get_ident()
                    with self._step_cond:
                        if me not in self._inflight and self._step_cond.wait_for(
                                lambda: not self._inflight, timeout=10.0) and (
                                t.capacity() < t.max_capacity and sizes[i] > o.grow_load_factor * t.capacity()):
                            t.grow()
        refused = self._refused_pinned.poll() if self.use_kernels else self._refused_seen.poll()
        if refused is not None:
            for i, r in enumerate(refused):
                if r > self._refused_warned[i] and self.options[i].on_refused == "warn":
                    warnings.warn(f"dynamicemb: table {self.table_names[i]!r} refused {r - self._refused_warned[i]}"
                                  f" inserts (buckets full of higher scores); those ids got initializer values")
                self._refused_warned[i] = r

    def _dedup(self, ids, offsets, skip=None):
        """Fixed-shape per-table dedup. Returns (bag, ukeys, utbl, uidx_counts, inverse). In bounds for any
        offsets (bags are clamped); a nonzero ``skip`` flag turns every id into the reserved empty key (no row,
        no insert, no update), as the kernels' dedup does."""
        dev = ids.device
        n = ids.numel()
        F = self.num_features
        B = (offsets.numel() - 1) // F
        pos = torch.arange(n, dtype=torch.int64, device=dev)
        # out-of-place ops for the tensors the backward keeps: torch.compile refuses saving in-place results
        bag = torch.searchsorted(offsets[1:], pos, right=True).clamp(max=max(offsets.numel() - 2, 0))
        feat = torch.div(bag, max(B, 1), rounding_mode="floor").clamp_(max=F - 1)
        tbl = self._feature_table[feat]
        k64 = ids.view(torch.int64)
        if skip is not None:
            k64 = torch.where(skip.bool(), _EMPTY_KEY, k64)
        sk, p1 = torch.sort(k64, stable=True)
        st, p2 = torch.sort(tbl[p1], stable=True)
        perm = p1[p2]
        sk = sk[p2]
        flag = torch.ones(n, dtype=torch.bool, device=dev)
        if n > 1:
            flag[1:] = (sk[1:] != sk[:-1]) | (st[1:] != st[:-1])
        uidx = torch.cumsum(flag, 0) - 1
        inverse = torch.empty_like(uidx).scatter(0, perm, uidx)
        ukeys = torch.full((n,), _EMPTY_KEY, dtype=torch.int64, device=dev).scatter_(0, uidx, sk)
        utbl = torch.full((n,), -1, dtype=torch.int64, device=dev).scatter(0, uidx, st)
        # reserved keys (and a skipped batch) belong to no table: no row, not counted as refused (as the kernels)
        utbl = utbl.masked_fill(ukeys < RESERVED_KEYS[-1] + 1, -1)
        return bag, ukeys, utbl, uidx, inverse

    def _forward_impl(self, ids, offsets, psw, train: bool, backward: bool = False, skip=None, checks=None):
        """Forward of the step (``backward``: called by _LookupFunction, a backward follows; autograd runs this
        with grad mode off). ``skip``: the device checks' flag (nonzero: the batch is treated as empty)."""
        pins, stage_skip = self._stage_caches(ids, offsets, train, backward) if self._cached else (None, None)
        if self.use_kernels:
            out, saved = self._forward_kernels(ids, offsets, psw, train, backward, checks=checks, skip=stage_skip)
        else:
            out, saved = self._forward_torch(ids, offsets, psw, train, backward, skip)
        if saved is not None and pins is not None:
            saved["pins"] = pins  # released with the saved tensors (after the backward)
        return out, saved

    # ------------------------------------------------------------------ storage tiers
    # (the caching tables' staging and prefetch's private halves: _batched_tiers.py)
    def prefetch(self, ids: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                 lengths: Optional[torch.Tensor] = None) -> None:
        """Prepares a coming batch's step, in one of two forms (docs/dynamicemb_storage.md, "Prefetch"):

        - ids and offsets on the module's device (the batch already copied, as in TorchRec's prefetch pipeline;
          the fast form): returns at once; a job stages the batch into the caches on a side stream in a background
          host thread (it waits on the device for the work queued so far: call it after the current step's
          forward), with the rows of the steps in flight (forward run, backward not yet) pinned. Over tables
          staged on the device (op cache_stage, the default over a ``UvaStore``) the job is that op queued on the
          side stream with an event: no thread, no host wait. The step given
          these very tensors (int64 offsets, not modified in place since) then stages nothing and waits for
          nothing, as an all-HBM step, for every cache that did not change since the job; otherwise it checks and
          stages itself. Calls that touch the tables (the next step among them) wait for the job first. After the
          first such call the module keeps the job's op arguments bound (``_prefetch._DeviceBinding``: one op call
          and its stream/event calls per prefetch); with ``prefetch_adaptive`` (the default) it samples every
          queued job's misses and, over a warm working set (a sample with no miss), queues nothing for the next 15
          prefetches: their steps stage inside their own op, as without a prefetch. Over host-staged stores (host,
          disk) a warm working set gets count-only jobs (op cache_probe on the side stream, no thread).
        - ids on the CPU: reads the rows the caches miss from the backing stores into host memory (the step's
          staging then moves them into the caches without reading the stores; worth it for slow stores). Changes
          no table.

        Rows of steps in flight are never evicted by a prefetch. A no-op without caching tables.

        Args:
            ids: (N,) key_dtype, on the module's device or on the CPU.
            offsets: (F * B + 1,) int64/int32 or ``lengths`` (F * B,), as for forward, on the ids' device.

        Raises:
            StoreError: a backing store cannot be read (CPU ids; the device form leaves errors to the batch's
                step, which stages itself and raises what staging raises).

        Example:
            >>> out = emb(ids, offsets); emb.prefetch(next_ids, next_offsets); out.sum().backward()
        """
        if offsets is not None and _prefetch.queue_bound(self, ids, offsets) is not None:
            return  # a device batch over device-staged tables: the bound job (its checks are O(1) and its own)
        if not self._cached:
            return
        if not isinstance(ids, torch.Tensor) or ids.dtype != self.key_dtype or ids.dim() != 1:
            raise TypeError(f"ids: expected a 1-d {self.key_dtype} tensor, got {getattr(ids, 'dtype', type(ids))}")
        if offsets is None:
            if lengths is None:
                raise ValueError("offsets/lengths: expected at least one of them, got neither")
            offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
            torch.cumsum(lengths.long(), 0, out=offsets[1:])
        if (offsets.numel() - 1) % self.num_features:
            raise ValueError(f"offsets: expected F * B + 1 entries with F={self.num_features}, got {offsets.numel()}")
        if self.device.type != "cuda":
            self._prefetch_rows(ids, offsets.long())
            return
        stream = self._prefetch_stream()
        if ids.device.type == "cuda" and offsets.device == ids.device:
            # the batch is on the device already (TorchRec's prefetch pipeline): stage it now, off this thread
            self._prefetch_stage(ids, offsets.long(), stream)
            return
        # CPU ids: the rows the caches miss are read from the stores into host memory, the lookups on the side
        # stream (no wait for the step queued on the current stream); the step's staging moves them into the caches.
        self._prefetch_rows(ids, offsets.long(), stream)

    @settled
    def flush_storage(self) -> None:
        """Caching tables: moves every cached row to its backing store and makes the store durable (with the op
        clock and epoch), e.g. before a process exits so that a ``DiskStore`` reopened later holds every row.
        Host-synchronizing. A no-op for other tables.

        Example:
            >>> emb.flush_storage()   # then a new module over the same store directories continues from here
        """
        for t in self.tables:
            if isinstance(t, CachedTable):
                t.flush()

    # ------------------------------------------------------------------ checkpoints (see _checkpoint.py)
    def get_extra_state(self):
        from ._checkpoint import module_meta

        return module_meta(self)

    def set_extra_state(self, state):  # validated and applied by _load_from_state_dict
        pass

    @settled
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        from ._checkpoint import save_tables

        super()._save_to_state_dict(destination, prefix, keep_vars)
        save_tables(self, destination, prefix)

    @settled
    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``; the checkpoint is validated whole (layout, buffer values, table integrity)
        before anything changes.

        Args:
            state_dict: a ``state_dict()`` of a module of the same layout.
            strict: an entry this module does not have is an error (module unchanged); with False it is ignored
                (listed in the result's ``unexpected_keys``). A missing or ill-formed entry is an error either way.
            assign: as in torch (the tables are always rebuilt from copies).

        Returns:
            torch's ``_IncompatibleKeys(missing_keys, unexpected_keys)``.

        Raises:
            RuntimeError: torch's, listing our messages ("arg: expected X, got Y"); the module is unchanged.

        Example:
            >>> emb2.load_state_dict(emb.state_dict())
        """
        # torch calls every module's loader as strict; remember the caller's choice (a parent module's
        # load_state_dict cannot pass it: nested, unknown entries are only reported as unexpected)
        self._load_strict = bool(strict)
        try:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        finally:
            self._load_strict = None

    def _after_load(self):
        """Host views of the loaded state (sizes decide growth, counts the refusal warnings); loads may sync."""
        self._sizes.reset([t.size() for t in self.tables])
        refused = [int(x) for x in self.refused_count.tolist()]
        self._refused_seen.reset(refused)
        self._refused_pinned.reset(refused)
        self._refused_warned = refused

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        from ._checkpoint import load_tables

        load_tables(self, state_dict, prefix, strict, missing_keys, unexpected_keys, error_msgs)
        self._refresh_links()

    @settled
    def dump(self, path: str, score_threshold: Optional[int] = None, chunk_rows: int = 1 << 20):
        """Writes every table (keys, rows = [embedding | optimizer state] in native dtype, scores) to directory
        ``path``; with ``score_threshold`` only rows whose score >= threshold (incremental dump).

        Args:
            path: directory to write (created if missing).
            score_threshold: None for a full dump, else only rows whose score (unsigned) is >= it.
            chunk_rows: table slots exported per chunk (bounds the extra device memory of the dump).

        Example:
            >>> emb.dump("/tmp/emb_full")                          # every stored row
            >>> emb.dump("/tmp/emb_delta", score_threshold=1000)   # LRU: rows touched at op clock >= 1000
        """
        from ._checkpoint import dump

        dump(self, path, score_threshold, chunk_rows)

    @settled
    def load(self, path: str):
        """Loads a ``dump`` (a full dump replaces the tables, an incremental one is applied on top). A corrupt or
        mismatched dump raises ``ValueError`` and leaves the module unchanged.

        Args:
            path: a directory written by ``dump`` of a module of the same layout (table names, dims, dtypes,
                key dtype, optimizer and its state width, score policy, bucket and max capacity).

        Example:
            >>> emb.load("/tmp/emb_full")      # the tables now hold exactly the dumped rows
            >>> emb.load("/tmp/emb_delta")     # then the incremental rows on top
        """
        from ._checkpoint import load

        load(self, path)
        self._refresh_links()

    def extra_repr(self):
        return (f"tables={self.table_names}, dims={self.dims}, features={self.num_features}, pooling={self.pooling!r}"
                f", optimizer={self.optimizer.name}, device={self.device}")
