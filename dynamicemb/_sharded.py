"""Dynamic embedding tables sharded row-wise by key over a torch.distributed process group.

Every rank holds, per table, the keys it owns under the routing mode (``_routing.py``), in ordinary single-rank
tables: one ``BatchedDynamicEmbeddingTables`` per embedding width ("shard module", sequence pooling, one feature
per table), so the scored hash table, its kernels, optimizers, score policies, admission and growth are reused
unchanged. A step on each rank, for its own batch:

  forward   1. dedup (owner, table, id) of the local ids (CUDA: the single-rank module's dedup kernel, then a
               sort of the uniques' (owner, table) codes; CPU: sorts of the ids; fixed shapes);
            2. all_to_all of the (W, T) unique counts (fixed size), then ONE host sync for the split sizes;
            3. all_to_all of the unique ids (plus their occurrence counts when a table counts admission);
            4. the owner looks its received ids up in its shard modules (find_or_insert in training, find in
               eval): ids from all peers in one call, so an id sent by two ranks is one unique there;
            5. all_to_all of the rows back (in the tables' dtype when they share one, else fp32; ``qcomms``:
               bf16 / fp16);
            6. pooling (sum / mean / none, per-sample weights) where the bag lives, as the single-rank module
               (CUDA: op pool_rows / gather_rows from the uniques' rows; CPU: the single-rank torch path's ops).
  backward  1. bag gradients -> per-unique sums on the sending rank (CUDA: op segment_sum_rows, a stable sort
               of the ids by unique and ordered sums per unique; CPU: index_add_); 2. all_to_all of them (fp32;
               ``qcomms``: bf16 / fp16) to the owners;
            3. the owner runs its shard modules' backward: sums per unique over peers, clips, fused optimizer.

Global gradient clipping (``max_grad_value``, ``max_grad_norm``) is applied by the owner to the per-id sums over
all ranks before the update, the norm all-reduced over ranks (one all_reduce of a scalar), so the semantics equal
the single-rank module fed the concatenation of all ranks' batches. Capacities of the options are global: each
rank stores ``ceil(capacity / (W * bucket)) * bucket`` slots per table; initializer bounds default from the global
``max_capacity`` (the rows of a new id equal the single-rank module's). The storage mode (hbm / hybrid / caching)
applies to every rank's shard; a table's ``hbm_budget_bytes`` is global too (each rank's shard gets budget // W),
and a disk ``backing_store`` opens one folder per rank, ``<path>/rank<r>-of-<W>``.

Host syncs per step: the split sizes (one ``.tolist()`` after the counts' all_to_all), plus one for the
occurrence counts of admission tables and one error-flag all_reduce when a table has ``on_refused="error"``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from typing import Dict, List, Optional, Sequence, Union

import torch
import torch.distributed as dist
from torch import nn

from ._batched import BatchedDynamicEmbeddingTables, RefusedInsertError, _id_gradients, _pool_rows
from ._batched_kernels import _VALUE_KIND, _dedup_set_size, _kernels_available
from ._optimizers import SGD, EmbOptimizer
from ._options import DynamicEmbTableOptions
from ._storage import DiskStoreSpec
from ._routing import ROUTING_MODES, check_key_space, route_keys, route_keys_by_table
from ._rows import rows_ops_available  # (importing it registers the row ops' fake kernels)
from ._table import RESERVED_KEYS

__all__ = ["QCommsConfig", "ShardedDynamicEmbeddingTables"]

_POOLINGS = ("sum", "mean", "none")
_WIRE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclasses.dataclass(frozen=True)
class QCommsConfig:
    """Precision of the rows and gradients that the sharded step's all_to_alls carry (opt-in; the default module
    sends rows in the tables' dtype and gradients in fp32, exactly).

    Args:
        forward_precision: dtype of the rows sent back to the senders (torch.float32, torch.float16 or
            torch.bfloat16; None: the tables' dtype). Each row is rounded once, on the owner; the sender pools the
            rounded rows in fp32.
        backward_precision: dtype of the per-unique gradient sums sent to the owners (None: torch.float32). Each
            sender's sum is rounded once; the owner adds the peers' sums in fp32 before its optimizer.

    The rounding happens at every world size (one rank too), so a run's numerics do not depend on the number of
    ranks through the forward. bf16 keeps fp32's range (8 bits of precision: a relative error <= 2**-8 per
    element); fp16 keeps 11 bits but overflows past 65504 and loses precision below 6.1e-5 (small gradients).

    Example:
        >>> emb = ShardedDynamicEmbeddingTables(tables, qcomms=QCommsConfig(torch.bfloat16, torch.bfloat16))
    """

    forward_precision: Optional[torch.dtype] = torch.bfloat16
    backward_precision: Optional[torch.dtype] = torch.bfloat16

    @staticmethod
    def _checked(qcomms) -> Optional["QCommsConfig"]:
        """``qcomms`` as an argument (None or a QCommsConfig; TypeError otherwise), validated."""
        if qcomms is not None and not isinstance(qcomms, QCommsConfig):
            raise TypeError(f"qcomms: expected None or a QCommsConfig, got {type(qcomms).__name__}")
        return None if qcomms is None else qcomms.validate()

    def validate(self) -> "QCommsConfig":
        for name in ("forward_precision", "backward_precision"):
            v = getattr(self, name)
            if v is not None and v not in _WIRE_DTYPES:
                raise TypeError(f"qcomms.{name}: expected None, torch.float32, torch.float16 or torch.bfloat16, "
                                f"got {v!r}")
        return self


def _shard_capacity(c: Optional[int], world: int, bucket: int) -> Optional[int]:
    """A global slot count split over ``world`` ranks, rounded up to whole buckets (at least one)."""
    return None if c is None else max(bucket, -(-c // (world * bucket)) * bucket)


def _rank_store(store, world: int, rank: int):
    """One rank's backing store of a caching table: a disk store's directory gets a folder per rank,
    ``<path>/rank<r>-of-<W>`` (ranks on one host must not share a store; the world size in the name keeps a store
    of another sharding from being reopened as this one's: reshard through a checkpoint instead). ``<path>`` is
    created when the spec may create its store. One rank, host / uva stores and store factories: unchanged."""
    if world == 1 or store is None or not isinstance(store, (str, os.PathLike, DiskStoreSpec)):
        return store
    spec = store if isinstance(store, DiskStoreSpec) else DiskStoreSpec(str(store))
    if spec.create:
        os.makedirs(spec.path, exist_ok=True)
    return dataclasses.replace(spec, path=os.path.join(str(spec.path), f"rank{rank}-of-{world}"))


def shard_options(o: DynamicEmbTableOptions, world: int, rank: int = 0) -> DynamicEmbTableOptions:
    """One rank's options of a table whose options ``o`` describe the whole (global) table."""
    bc = o.bucket_capacity
    mc = _shard_capacity(o.max_capacity, world, bc)
    ic = None if o.init_capacity is None else min(mc, _shard_capacity(o.init_capacity, world, bc))
    # the HBM budget of a hybrid/caching table is global too: each rank keeps its share
    hb = None if o.hbm_budget_bytes is None else o.hbm_budget_bytes // world
    return dataclasses.replace(
        o, max_capacity=mc, init_capacity=ic, admission_capacity=_shard_capacity(o.admission_capacity, world, bc),
        hbm_budget_bytes=hb, backing_store=_rank_store(o.backing_store, world, rank),
        # resolved against the global capacity, so default bounds and new rows equal the unsharded table's
        initializer=o.initializer.resolved(o.max_capacity, "initializer"),
        eval_initializer=o.eval_initializer.resolved(o.max_capacity, "eval_initializer"),
    ).validate()


def _excl_cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, 0) - x


def _pack(rows: torch.Tensor, off: torch.Tensor, width: torch.Tensor, total: int) -> torch.Tensor:
    """(n, Dm) rows -> flat (total,): row i's first width[i] columns at off[i] (rows of mixed widths)."""
    col = torch.arange(rows.shape[1], device=rows.device)
    idx = torch.where(col < width[:, None], off[:, None] + col, total)  # columns past a row's width -> a dump slot
    flat = torch.zeros(total + 1, dtype=rows.dtype, device=rows.device)
    flat.scatter_(0, idx.reshape(-1), rows.reshape(-1))
    return flat[:total]


def _unpack(flat: torch.Tensor, off: torch.Tensor, width: torch.Tensor, dm: int) -> torch.Tensor:
    """Inverse of ``_pack``: (n, dm) rows, zero past each row's width."""
    col = torch.arange(dm, device=flat.device)
    keep = col < width[:, None]
    padded = torch.cat([flat, flat.new_zeros(1)])
    idx = torch.where(keep, off[:, None] + col, flat.numel())
    return padded[idx]


def _a2a(send: torch.Tensor, send_splits: List[int], recv_splits: List[int], group) -> torch.Tensor:
    out = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:]))
    dist.all_to_all_single(out, send.contiguous(), recv_splits, send_splits, group=group)
    return out


class _ShardedLookup(torch.autograd.Function):
    """Forward: the sharded lookup + pooling. Backward: gradients to the owners, their fused update."""

    @staticmethod
    def forward(ctx, anchor, module, ids, offsets, psw):
        out, saved = module._step_forward(ids, offsets, psw, train=True, backward=True)
        ctx.module, ctx.saved = module, saved
        ctx.psw_requires_grad = psw is not None and psw.requires_grad
        return out

    @staticmethod
    def backward(ctx, grad_out):
        grad_psw = ctx.module._step_backward(grad_out, ctx.saved, ctx.psw_requires_grad)
        ctx.saved = None
        return None, None, None, None, grad_psw


class ShardedDynamicEmbeddingTables(nn.Module):
    """Dynamic embedding tables sharded row-wise by key over the ranks of a process group (same forward as
    ``BatchedDynamicEmbeddingTables``: each rank passes its own batch and gets its own outputs).

    Every rank must build the module with the same arguments and call forward (and backward) in the same order:
    each step runs collectives. The options describe the whole table: capacities are split over the ranks.

    Args:
        tables: one ``DynamicEmbTableOptions`` per table (``dim`` and ``max_capacity`` set; global capacities).
        feature_table_map: table index of each feature (default: feature i reads table i).
        pooling: "sum", "mean" or "none" (one row per id; all tables of the features share one dim).
        optimizer: an ``EmbOptimizer`` (SGD, Adam, Adagrad, RowWiseAdagrad), applied on the owner; default
            ``SGD(lr=0.01)``.
        process_group: the ranks to shard over (default: the default process group, which must be initialized).
            gloo: CPU tensors; nccl: CUDA tensors (each rank's current device).
        routing: "hash" (default), "roundrobin" or "continuous" (see ``dynamicemb.route_keys``).
        key_space: the "continuous" routing's key range per table (an int for all tables, or one per table); keys
            at or past it go to the last rank. Default 2**63.
        table_names: names used in state_dict keys and checkpoints (default "t0", "t1", ...).
        key_dtype: torch.int64 (ids >= 0) or torch.uint64.
        output_dtype: dtype of the outputs (pooling accumulates in fp32).
        device: "cpu" (gloo) or a CUDA device (nccl); default: the current CUDA device for nccl, else cpu.
        world_size: if given, the process group must have this many ranks (a guard against launching with the
            wrong number of processes).
        qcomms: a ``QCommsConfig``: rows and gradients on the wire in a lower precision (half the bytes of the
            all_to_alls in bf16 / fp16; results within the stated rounding of the exact step). Default None: rows
            in the tables' dtype, gradients in fp32 (exact).

    Forward: ``module(ids, offsets=None, per_sample_weights=None, lengths=None, validate=True)``: this rank's
        ids (N,), offsets (F * B + 1,) or lengths (F * B,), per_sample_weights (N,) (sum pooling). Returns
        (B, sum of the features' dims) for sum/mean, (N, dim) for "none"; the rows equal those of one
        ``BatchedDynamicEmbeddingTables`` fed all ranks' batches concatenated.

    Raises:
        RuntimeError: torch.distributed is not initialized; RefusedInsertError (on every rank) when a table with
            on_refused="error" refused an insert on some rank.
        ValueError / TypeError: a bad argument, a process group of another size than ``world_size``, or
            arguments that differ between ranks (checked at construction).

    Example:
        >>> dist.init_process_group("gloo")            # e.g. under torchrun --nproc_per_node 2
        >>> emb = ShardedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=16, max_capacity=1 << 16)] * 2,
        ...                                     feature_table_map=[0, 1], optimizer=Adam(lr=1e-3))
        >>> out = emb(ids, offsets)                     # (B, 32): this rank's bags
        >>> out.sum().backward()                        # rows updated on their owners
        >>> emb.dump("/ckpt/step100")                   # every rank writes its own shard
    """

    ROUTINGS = ROUTING_MODES

    def __init__(
        self,
        tables: Sequence[DynamicEmbTableOptions],
        feature_table_map: Optional[Sequence[int]] = None,
        pooling: str = "sum",
        optimizer: Optional[EmbOptimizer] = None,
        process_group=None,
        routing: str = "hash",
        key_space: Union[None, int, Sequence[int]] = None,
        table_names: Optional[Sequence[str]] = None,
        key_dtype: torch.dtype = torch.int64,
        output_dtype: torch.dtype = torch.float32,
        device=None,
        world_size: Optional[int] = None,
        qcomms: Optional[QCommsConfig] = None,
    ):
        super().__init__()
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("process_group: expected an initialized torch.distributed process group (call "
                               "torch.distributed.init_process_group first), got none")
        pg = process_group if process_group is not None else dist.group.WORLD
        W, rank = dist.get_world_size(pg), dist.get_rank(pg)
        if world_size is not None and world_size != W:
            raise ValueError(f"process_group: expected {world_size} ranks (world_size), got a group of {W}")
        tables = list(tables)
        if not tables or not all(isinstance(t, DynamicEmbTableOptions) for t in tables):
            raise TypeError("tables: expected a non-empty sequence of DynamicEmbTableOptions")
        opts = [dataclasses.replace(t).validate() for t in tables]
        T = len(opts)
        fmap = list(range(T)) if feature_table_map is None else [int(x) for x in feature_table_map]
        if not fmap or any(not 0 <= x < T for x in fmap):
            raise ValueError(f"feature_table_map: expected non-empty indices in [0, {T}), got {fmap}")
        if pooling not in _POOLINGS:
            raise ValueError(f"pooling: expected one of {list(_POOLINGS)}, got {pooling!r}")
        dims = [o.dim for o in opts]
        if pooling == "none" and len({dims[t] for t in fmap}) != 1:
            raise ValueError(f"pooling='none': expected one dim for all tables of the features, got dims {dims}")
        optimizer = SGD(lr=0.01) if optimizer is None else optimizer
        if not isinstance(optimizer, EmbOptimizer) or type(optimizer) is EmbOptimizer:
            raise TypeError(f"optimizer: expected SGD, Adam, Adagrad or RowWiseAdagrad, got {optimizer!r}")
        if routing not in ROUTING_MODES:
            raise ValueError(f"routing: expected one of {list(ROUTING_MODES)}, got {routing!r}")
        if key_space is None or isinstance(key_space, int):
            spaces = [key_space] * T
        else:
            spaces = list(key_space)
            if len(spaces) != T:
                raise ValueError(f"key_space: expected an int or {T} ints (one per table), got {len(spaces)}")
        spaces = [None if s is None else check_key_space(s) for s in spaces]
        names = [f"t{i}" for i in range(T)] if table_names is None else list(table_names)
        if len(names) != T or len(set(names)) != T or not all(isinstance(n, str) and n and "." not in n for n in names):
            raise ValueError(f"table_names: expected {T} distinct non-empty names without '.', got {names}")
        if key_dtype not in (torch.int64, torch.uint64):
            raise TypeError(f"key_dtype: expected torch.int64 or torch.uint64, got {key_dtype}")
        if output_dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(
                f"output_dtype: expected torch.float32, torch.float16 or torch.bfloat16, got {output_dtype}")
        qcomms = QCommsConfig._checked(qcomms)
        backend = str(dist.get_backend(pg))
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
        dev = torch.device(device)
        if backend == "nccl" and dev.type != "cuda":
            raise ValueError(f"device: expected a CUDA device for an nccl process group, got {dev}")
        if backend == "gloo" and dev.type != "cpu":
            raise ValueError(f"device: expected cpu for a gloo process group, got {dev}")
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())

        self.process_group, self.world_size, self.rank = pg, W, rank
        self.routing, self.key_spaces = routing, spaces
        self.options, self.table_names, self.feature_table_map = opts, names, fmap
        self.pooling, self.optimizer, self.key_dtype, self.output_dtype = pooling, optimizer, key_dtype, output_dtype
        self.device, self.dims, self.qcomms = dev, dims, qcomms
        self.feature_dims = [dims[t] for t in fmap]
        self.max_dim = max(self.feature_dims)
        self._check_same_on_all_ranks()

        # Shard modules: one per embedding width, features = its tables (one bag per table and step).
        self._clip = optimizer.max_grad_norm is not None or optimizer.max_grad_value is not None
        inner_opt = dataclasses.replace(optimizer, max_grad_norm=None, max_grad_value=None)  # the owner clips
        widths = sorted(set(dims))
        self._group_of, self._local_of, self._group_tables = [0] * T, [0] * T, []
        dtypes = {o.dtype for o in opts}
        self._row_dtype = dtypes.pop() if len(dtypes) == 1 else torch.float32  # rows travel in this dtype
        self._grad_dtype = torch.float32  # gradients travel in this dtype
        if qcomms is not None:
            self._row_dtype = qcomms.forward_precision or self._row_dtype
            self._grad_dtype = qcomms.backward_precision or torch.float32
        # the shard modules' outputs: fp32 (exact for every table dtype, so the gradients reach the update in fp32),
        # or the wire's dtype when rows and gradients travel in the same half dtype (the owner's lookup writes the
        # rows to send and its backward takes the received gradients, widening them to fp32 before its sums)
        inner_dtype = self._row_dtype if self._row_dtype == self._grad_dtype != torch.float32 else torch.float32
        shards = {}
        for g, d in enumerate(widths):
            members = [t for t in range(T) if dims[t] == d]
            for i, t in enumerate(members):
                self._group_of[t], self._local_of[t] = g, i
            self._group_tables.append(members)
            shards[f"dim{d}"] = BatchedDynamicEmbeddingTables(
                [shard_options(opts[t], W, rank) for t in members], feature_table_map=list(range(len(members))),
                pooling="none", optimizer=dataclasses.replace(inner_opt), table_names=[names[t] for t in members],
                key_dtype=key_dtype, output_dtype=inner_dtype, device=dev)
        self.shards = nn.ModuleDict(shards)
        # the owner's (peer, table) -> (group, table, peer) reorder of the received ids is the identity with one
        # table, or on one rank when the groups list the tables in index order (always so with one group)
        order = [t for g in self._group_tables for t in g]
        self._reorder_identity = T == 1 or (W == 1 and order == list(range(T)))
        self._order_t = torch.tensor(order, dtype=torch.int64, device=dev)
        self._members_t = [None if m == list(range(T)) else torch.tensor(m, dtype=torch.int64, device=dev)
                           for m in self._group_tables]
        self._zero1 = torch.zeros(1, dtype=torch.int64, device=dev)
        self._shard_list = list(self.shards.values())
        self._counts = any(o.admission_threshold > 1 for o in opts)
        self._error_check = any(o.on_refused == "error" for o in opts)
        self._feature_table = torch.tensor(fmap, dtype=torch.int64, device=dev)
        # the step's (owner, table) segment codes: the smallest int dtype holding W * T codes (the dedup's second,
        # stable sort sorts this many bits: int16 is 2 radix passes on CUDA where int64 is 8)
        self._seg_dtype = torch.int16 if W * T < 2**15 else torch.int32 if W * T < 2**31 else torch.int64
        self._fmap_identity = fmap == list(range(T))
        self._feature_table32 = self._feature_table.to(torch.int32)
        self._feature_table_seg = self._feature_table.to(self._seg_dtype)
        self._segs = torch.arange(W * T, dtype=self._seg_dtype, device=dev)
        self._seg_table = torch.arange(W * T, dtype=torch.int64, device=dev) % T  # table of each (peer, table)
        self._table_dim = torch.tensor(dims, dtype=torch.int64, device=dev)
        self._table_group = torch.tensor(self._group_of, dtype=torch.int64, device=dev)
        self._anchor = torch.empty(0, device=dev, requires_grad=True)
        # CUDA: the sender's dedup, pooling and gradient sums in fused ops (the dedup kernel, the row ops)
        self._kernel_dedup = dev.type == "cuda" and _kernels_available() and rows_ops_available()
        self._kset, self._iotas = None, {}  # the kernel dedup's set; 0 .. n - 1 per dtype (_iota)
        #: a list to time the phases of each step into (``(phase, event)`` pairs: CUDA events on CUDA, host
        #: times on CPU); None (default) records nothing. benchmarks/embedding_distributed.py reads it.
        self.phase_log: Optional[list] = None

    def _mark(self, phase: str):
        if self.phase_log is None:
            return
        if self.device.type == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.phase_log.append((phase, ev))
        else:
            self.phase_log.append((phase, time.perf_counter()))

    # ------------------------------------------------------------------ construction helpers
    def layout(self) -> dict:
        """What every rank (and every checkpoint) must agree on: tables, features, routing, optimizer."""
        return {
            "tables": [
                {"name": n, "dim": o.dim, "dtype": str(o.dtype), "max_capacity": o.max_capacity,
                 "bucket_capacity": o.bucket_capacity, "score_policy": o.score_policy,
                 "admission": o.admission_threshold > 1, "key_space": ks}
                for n, o, ks in zip(self.table_names, self.options, self.key_spaces)
            ],
            "feature_table_map": self.feature_table_map,
            "pooling": self.pooling,
            "routing": self.routing,
            "key_dtype": str(self.key_dtype),
            "optimizer": self.optimizer.name,
        }

    def _check_same_on_all_ranks(self):
        """All ranks must shard the same tables the same way: one all_gather of a digest of the full config."""
        full = dict(self.layout(), options=[repr(o) for o in self.options], optimizer_args=repr(self.optimizer),
                    output_dtype=str(self.output_dtype), qcomms=repr(self.qcomms))
        digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()[:16]
        got = [None] * self.world_size
        dist.all_gather_object(got, digest, group=self.process_group)
        bad = [r for r, d in enumerate(got) if d != digest]
        if bad:
            raise ValueError(f"tables/options: expected the same configuration on every rank, got ranks {bad} "
                             f"differing from rank {self.rank} (tables, options, features, pooling, optimizer, "
                             f"routing, key_space, dtypes must match)")

    # ------------------------------------------------------------------ public helpers
    @property
    def num_features(self) -> int:
        return len(self.feature_table_map)

    def shard_modules(self) -> Dict[str, BatchedDynamicEmbeddingTables]:
        """This rank's shard modules by name ("dim{width}"): ordinary single-rank modules holding the keys this
        rank owns (read them with their ``get_rows``, ``sizes``, ``tables``)."""
        return dict(self.shards)

    def local_table(self, table: int):
        """(shard module, its table index) holding this rank's shard of table ``table``."""
        if not isinstance(table, int) or not 0 <= table < len(self.options):
            raise ValueError(f"table: expected an index in [0, {len(self.options)}), got {table!r}")
        return self._shard_list[self._group_of[table]], self._local_of[table]

    def owner_of(self, keys: torch.Tensor, table: int = 0) -> torch.Tensor:
        """(n,) owner rank of each key of table ``table`` under this module's routing."""
        return route_keys(keys, self.world_size, self.routing, table, self.key_spaces[table])

    def set_learning_rate(self, lr: float):
        """Changes the learning rate on this rank (call it on every rank alike)."""
        for m in self._shard_list:
            m.set_learning_rate(lr)
        self.optimizer.lr = float(lr)

    def set_epoch(self, epoch: int):
        """Sets the epoch of epoch_lru / epoch_lfu tables (call it on every rank alike)."""
        for m in self._shard_list:
            m.set_epoch(epoch)

    def local_sizes(self) -> List[int]:
        """Ids stored on this rank per table."""
        return [self.local_table(t)[0].tables[self.local_table(t)[1]].size() for t in range(len(self.options))]

    def sizes(self) -> List[int]:
        """Ids stored over all ranks per table (a collective: every rank must call it)."""
        s = torch.tensor(self.local_sizes(), dtype=torch.int64, device=self.device)
        dist.all_reduce(s, group=self.process_group)
        return s.tolist()

    def dump(self, path: str, score_threshold: Optional[int] = None):
        """Writes this rank's shard to ``path/rank{r}-of-{W}/`` and (rank 0, after every rank finished) the
        manifest ``path/manifest.json``; a collective. See ``dynamicemb._sharded_checkpoint``.

        Example:
            >>> emb.dump("/ckpt/step100")           # on every rank; loadable on any number of ranks
        """
        from ._sharded_checkpoint import dump_sharded

        dump_sharded(self, path, score_threshold)

    def load(self, path: str):
        """Loads a sharded dump written by any number of ranks (each rank keeps the keys it owns now); a
        collective. Raises ValueError on every rank, changing nothing, on a mismatch (routing, table layout,
        optimizer) or a corrupt or missing file.

        Example:
            >>> emb.load("/ckpt/step100")           # written by 2 ranks, loaded by 3
        """
        from ._sharded_checkpoint import load_sharded

        load_sharded(self, path)

    # ------------------------------------------------------------------ validation (host values, then device values)
    def _check_inputs(self, ids, offsets, psw, lengths):
        if not isinstance(ids, torch.Tensor) or ids.dtype != self.key_dtype or ids.dim() != 1:
            got = f"{ids.dtype} of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise TypeError(f"ids: expected a 1-d {self.key_dtype} tensor, got {got}")
        if ids.device != self.device:
            raise ValueError(f"ids: expected a tensor on {self.device}, got {ids.device}")
        if offsets is None and lengths is None:
            raise ValueError("offsets/lengths: expected at least one of them, got neither")
        F = self.num_features
        for name, t in (("offsets", offsets), ("lengths", lengths)):
            if t is None:
                continue
            if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32) or t.dim() != 1:
                got = f"{t.dtype} of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
                raise TypeError(f"{name}: expected a 1-d int64 or int32 tensor, got {got}")
            if t.device != self.device:
                raise ValueError(f"{name}: expected a tensor on {self.device}, got {t.device}")
        nb = offsets.numel() - 1 if offsets is not None else lengths.numel()
        if nb < 0 or nb % F:
            arg = "offsets" if offsets is not None else "lengths"
            raise ValueError(f"{arg}: expected F * B{' + 1' if offsets is not None else ''} entries with F={F}, "
                             f"got {nb + (offsets is not None)}")
        if psw is not None:
            if not isinstance(psw, torch.Tensor) or not psw.is_floating_point() or tuple(psw.shape) != (ids.numel(),):
                got = f"{psw.dtype} {tuple(psw.shape)}" if isinstance(psw, torch.Tensor) else type(psw).__name__
                raise TypeError(f"per_sample_weights: expected a float tensor of shape ({ids.numel()},), got {got}")
            if psw.device != self.device:
                raise ValueError(f"per_sample_weights: expected a tensor on {self.device}, got {psw.device}")
            if self.pooling != "sum":
                raise ValueError(f"per_sample_weights: expected only with pooling='sum', got pooling={self.pooling!r}")
        n = ids.numel()
        v = ids.view(torch.int64)
        if n and self.key_dtype == torch.int64 and bool((v < 0).any()):
            raise ValueError(f"ids: expected ids >= 0, got {int(v[v < 0][0])}")
        if n and self.key_dtype == torch.uint64 and bool((v <= RESERVED_KEYS[-1]).any()):
            raise ValueError("ids: got a reserved id (reserved: 2**63 + 0, 1, 2)")
        if offsets is not None:
            o = offsets.long()
            if int(o[0]) != 0 or int(o[-1]) != n or (o.numel() > 1 and bool((o[1:] < o[:-1]).any())):
                raise ValueError(f"offsets: expected non-decreasing values from 0 to ids.numel()={n}, got "
                                 f"{o[:4].tolist()}...{o[-1:].tolist()}")
        if lengths is not None:
            ln = lengths.long()
            if bool((ln < 0).any()) or int(ln.sum()) != n:
                raise ValueError(f"lengths: expected values >= 0 summing to ids.numel()={n}, got sum "
                                 f"{int(ln.sum())}, min {int(ln.min()) if ln.numel() else 0}")
            if offsets is not None and not torch.equal(offsets.long()[1:] - offsets.long()[:-1], ln):
                raise ValueError("lengths/offsets: expected lengths == offsets[1:] - offsets[:-1], they differ")

    # ------------------------------------------------------------------ forward
    def forward(self, ids: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None, lengths: Optional[torch.Tensor] = None,
                validate: bool = True) -> torch.Tensor:
        """See the class docstring. ``validate=False`` skips the input checks that read device values."""
        if validate:
            self._check_inputs(ids, offsets, per_sample_weights, lengths)
        if offsets is None:
            offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
            torch.cumsum(lengths.long(), 0, out=offsets[1:])
        offsets = offsets.long()
        if self.training and torch.is_grad_enabled():
            return _ShardedLookup.apply(self._anchor, self, ids, offsets, per_sample_weights)
        out, _ = self._step_forward(ids, offsets, per_sample_weights, train=self.training)
        return out

    def _route(self, keys: torch.Tensor, tbl: torch.Tensor) -> torch.Tensor:
        """Owner of each (key, table) pair ("hash" salts by table, "continuous" has a key space per table)."""
        return route_keys_by_table(keys, tbl, self.world_size, self.routing, self.key_spaces)

    def _dedup_sort(self, ids, offsets, B):
        """Dedup of (owner, table, key) by sorts (the CPU path): returns (ukeys (n,) int64 whose first n_u entries
        are the uniques ordered by owner, table, key; (W * T,) unique counts per (owner, table); (n,) int64 unique
        index of each id; the bag of each id, pooling sum / mean). A stable sort by key, then a stable sort of the
        small (owner, table) code (int16 for W * T < 2**15); one sort when there is one segment. The code is made in
        key order: the table of an id from its position (features are contiguous runs of B bags: a search in the
        F - 1 feature boundaries), the owner from key and table."""
        dev, W, T, F = self.device, self.world_size, len(self.options), self.num_features
        n, nseg = ids.numel(), W * T
        k64 = ids.view(torch.int64)
        bag = None
        if self.pooling != "none":
            bag = torch.searchsorted(offsets[1:], torch.arange(n, dtype=torch.int64, device=dev), right=True)
        sk, perm = torch.sort(k64, stable=True)
        if nseg > 1:
            if B > 0 and F > 1:
                feature = torch.searchsorted(offsets[B:F * B:B].contiguous(), perm, right=True, out_int32=True)
            else:
                feature = torch.zeros(n, dtype=torch.int32, device=dev)
            if W == 1:
                seg = feature.to(self._seg_dtype) if self._fmap_identity else self._feature_table_seg[feature]
            else:
                tbl = feature if self._fmap_identity else self._feature_table32[feature]
                seg = torch.add(tbl, self._route(sk, tbl), alpha=T).to(self._seg_dtype)  # owner * T + table
            sseg, p2 = torch.sort(seg, stable=True)
            perm, sk = perm[p2], sk[p2]
        flag = torch.empty(n, dtype=torch.bool, device=dev)  # first id of each unique (segment, key)
        flag[:1] = True
        torch.ne(sk[1:], sk[:-1], out=flag[1:])
        if nseg > 1:
            flag[1:].bitwise_or_(sseg[1:] != sseg[:-1])  # (not "|=" on a slice: that copies it back)
        uidx = torch.empty(n, dtype=torch.int64, device=dev)  # unique index of each sorted id
        uidx[:1] = 0
        torch.cumsum(flag[1:], 0, out=uidx[1:])
        inverse = torch.empty_like(uidx).scatter_(0, perm, uidx)
        ukeys = torch.empty(n, dtype=torch.int64, device=dev).scatter_(0, uidx, sk)  # [:n_u] is read
        # uniques per segment from the segment ends in the sorted codes (no pass over the ids)
        if n == 0:
            cnt_send = torch.zeros(nseg, dtype=torch.int64, device=dev)
        elif nseg == 1:
            cnt_send = uidx[-1:] + 1
        else:
            ends = torch.searchsorted(sseg, self._segs, right=True)
            upto = torch.where(ends > 0, uidx[(ends - 1).clamp_(min=0)] + 1, 0)
            cnt_send = torch.diff(upto, prepend=upto.new_zeros(1))
        return ukeys, cnt_send, inverse, bag

    def _dedup_kernel(self, ids, offsets, B):
        """Dedup of (owner, table, key) on CUDA: op lookup_dedup (the single-rank module's per-table hash-set
        dedup: uniques in about the ids' order, the unique and the bag of every id) and one stable sort of the n
        uniques' (owner, table) codes (int16: two radix passes; the slots past the unique count sort last). The
        owner is routed on the uniques, not the ids. Returns (ukeys (n,) int64, the first n_u ordered by owner
        and table; (W * T,) counts; what ``_kernel_inverse`` needs after the split-size sync; the bag of each id
        (int32) or None)."""
        W, T, n, nseg = self.world_size, len(self.options), ids.numel(), self.world_size * len(self.options)
        inv, bag, uk, ut, count = torch.ops.dynamicemb.lookup_dedup(ids.contiguous(), offsets, self._feature_table32,
                                                                      B, self._dedup_buffer(n))
        bag = bag if self.pooling != "none" else None
        if nseg == 1:
            return uk, count.long(), (inv, None), bag
        valid = self._iota(n) < count  # the kernel leaves the slots past the unique count unwritten
        if W == 1:
            seg = ut
        else:
            ut = torch.where(valid, ut, 0)
            seg = torch.add(ut, self._route(uk, ut), alpha=T)  # owner * T + table
        seg = torch.where(valid, seg, nseg).to(self._seg_dtype)
        sseg, order = torch.sort(seg, stable=True)
        cnt_send = torch.diff(torch.searchsorted(sseg, self._segs, right=True), prepend=self._zero1)
        return uk[order], cnt_send, (inv, order), bag

    def _kernel_inverse(self, pending, n_u: int) -> torch.Tensor:
        """(n,) int64 unique index of each id in the sent order, from the kernel dedup's (its own order) and the
        codes' sort. Ids the kernel reserves (no unique: -1; refused by the input checks) read unique 0."""
        inv, order = pending
        inv = inv.clamp(min=0)
        if order is None:
            return inv.long()
        rank = torch.empty(max(n_u, 1), dtype=torch.int64, device=self.device)
        rank[:1] = 0
        rank.scatter_(0, order[:n_u], self._iota(n_u, torch.int64))
        return rank.index_select(0, inv)

    def _dedup_buffer(self, n: int) -> torch.Tensor:
        """The kernel dedup's per-step (table, id) set, allocated once per size (scratch: refilled by every call)."""
        cap = _dedup_set_size(n)
        if self._kset is None or self._kset.numel() < cap:
            self._kset = torch.empty(cap, dtype=torch.int32, device=self.device)
        return self._kset

    def _iota(self, n: int, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        """0 .. n - 1 in ``dtype``, made once per size and dtype."""
        a = self._iotas.get(dtype)
        if a is None or a.numel() < n:
            a = self._iotas[dtype] = torch.arange(max(n, 1024), dtype=dtype, device=self.device)
        return a[:n]

    def _step_forward(self, ids, offsets, psw, train: bool, backward: bool = False):
        dev, W, T, F = self.device, self.world_size, len(self.options), self.num_features
        pg = self.process_group
        n = ids.numel()
        B = (offsets.numel() - 1) // F
        Dm = self.max_dim
        # 1. dedup. CUDA: the single-rank module's dedup kernel (a hash set, three passes over the ids), then a
        #    sort of the uniques' small (owner, table) codes; CPU: two sorts of the ids (the torch path's order)
        fast = self._kernel_dedup and n > 0 and B > 0
        self._mark("start")
        if fast:
            ukeys, cnt_send, pending, bag = self._dedup_kernel(ids, offsets, B)
        else:
            ukeys, cnt_send, inverse, bag = self._dedup_sort(ids, offsets, B)
        self._mark("dedup")
        # 2. unique counts per (peer, table), then the one host sync of the step: the split sizes
        if W == 1:
            cnt_recv = cnt_send
            host = cnt_send.tolist() * 2
        else:
            cnt_recv = torch.empty_like(cnt_send)
            dist.all_to_all_single(cnt_recv, cnt_send, group=pg)
            self._mark("counts a2a")  # (the device's wait for the peers' counts, apart from the host sync)
            host = torch.cat([cnt_send, cnt_recv]).tolist()
        cs = [host[p * T:(p + 1) * T] for p in range(W)]
        cr = [host[W * T + p * T:W * T + (p + 1) * T] for p in range(W)]
        n_u = sum(map(sum, cs))
        n_r = sum(map(sum, cr))
        send_splits = [sum(c) for c in cs]
        recv_splits = [sum(c) for c in cr]

        self._mark("splits a2a")
        if fast:  # queued while the host prepares the rest (the device idles after the sync)
            inverse = self._kernel_inverse(pending, n_u)
            self._mark("inverse")
        # 3. unique ids (and occurrence counts for admission) to their owners (one rank: they are its own)
        ukeys = ukeys[:n_u]
        rkeys = ukeys if W == 1 else _a2a(ukeys, send_splits, recv_splits, pg)
        rocc = None
        if self._counts:
            occ = torch.zeros(max(n, 1), dtype=torch.int64, device=dev).scatter_add_(
                0, inverse, torch.ones_like(inverse))[:n_u]
            rocc = occ if W == 1 else _a2a(occ, send_splits, recv_splits, pg)

        self._mark("ids a2a")
        # 4. owner lookup: received ids reordered from (peer, table) to (group, table, peer) for the shard modules;
        #    id i of segment s moves by delta[s] = (start of s in the new layout) - (start in the old one)
        newpos = None
        inner_keys, inner_occ = rkeys, rocc
        if not self._reorder_identity:
            cnt_r = cnt_recv.view(W, T)
            cntT = cnt_r[:, self._order_t].t().reshape(-1)  # (table in group order, peer); tables by (group, table)
            start_new = _excl_cumsum(cntT).view(T, W)  # start of (order[i], p) in the new layout
            start_new_pt = torch.empty(T, W, dtype=torch.int64, device=dev)
            start_new_pt[self._order_t] = start_new
            delta = start_new_pt.t().reshape(-1) - _excl_cumsum(cnt_recv)
            newpos = torch.repeat_interleave(delta, cnt_recv, output_size=n_r)
            newpos += torch.arange(n_r, device=dev)
            inner_keys = torch.empty_like(rkeys).scatter_(0, newpos, rkeys)
            inner_occ = None if rocc is None else torch.empty_like(rocc).scatter_(0, newpos, rocc)
        tot_t = [sum(cr[p][t] for p in range(W)) for t in range(T)]
        outs, spans, first_pos, tcounts, error = [], [], [], [], None
        g0, tot_dev = 0, None
        for g, members in enumerate(self._group_tables):
            m = self._shard_list[g]
            ng = sum(tot_t[t] for t in members)
            keys_g = inner_keys[g0:g0 + ng]
            first = None
            if inner_occ is not None:
                per_table = torch.tensor([tot_t[t] for t in members], dtype=torch.int64, device=dev)
                tcounts.append(per_table)
                # admission counts occurrences: the shard module sees every occurrence (rows of the first used)
                occ_g = inner_occ[g0:g0 + ng]
                tbl_local = torch.repeat_interleave(torch.arange(len(members), device=dev), per_table, output_size=ng)
                per_table = torch.zeros(len(members), dtype=torch.int64, device=dev).index_add_(0, tbl_local, occ_g)
                keys_g = torch.repeat_interleave(keys_g, occ_g)  # a host sync (admission only)
                first = _excl_cumsum(occ_g)
                off_g = torch.cat([per_table.new_zeros(1), torch.cumsum(per_table, 0)])
            else:
                # the shard module's bag offsets from the counts on the device (a tensor made from the host
                # counts would be a blocking copy)
                if tot_dev is None:
                    tot_dev = cnt_recv.view(W, T).sum(0)
                per_table = tot_dev if self._members_t[g] is None else tot_dev[self._members_t[g]]
                tcounts.append(per_table)
                off_g = torch.cat([self._zero1, torch.cumsum(per_table, 0)])
            try:
                with torch.enable_grad() if backward else torch.no_grad():
                    out_g = m(keys_g.view(self.key_dtype), off_g, validate=False)
            except RefusedInsertError as e:
                error, out_g = e, torch.zeros(keys_g.numel(), m.dims[0], dtype=torch.float32, device=dev)
            outs.append(out_g)
            first_pos.append(first)
            spans.append((g0, ng))
            g0 += ng
        if self._error_check:
            flag_t = torch.tensor([0 if error is None else 1], dtype=torch.int64, device=dev)
            dist.all_reduce(flag_t, op=dist.ReduceOp.MAX, group=pg)
            if int(flag_t) or error is not None:
                raise error if error is not None else RefusedInsertError(
                    "a table with on_refused='error' refused inserts on another rank (see its error)")

        self._mark("lookup")
        # 5. rows back to the senders, (peer, table) order, each table's width (no reorder when it is the
        #    identity, no all_to_all on one rank)
        uniform = len(self._group_tables) == 1
        d0 = self.dims[self._group_tables[0][0]]
        rtbl = utbl = None
        if uniform:
            rows_g = outs[0] if first_pos[0] is None else outs[0][first_pos[0]]
            rows_g = rows_g.detach().to(self._row_dtype)  # (narrowed before the reorder's copy)
            if newpos is not None:
                rows_g = rows_g[newpos]
            flat_send = rows_g.reshape(-1)
        else:
            rtbl = torch.repeat_interleave(self._seg_table, cnt_recv, output_size=n_r)
            rwidth = self._table_dim[rtbl]
            roff = _excl_cumsum(rwidth)
            total = int(sum(cr[p][t] * self.dims[t] for p in range(W) for t in range(T)))
            flat_send = torch.zeros(total, dtype=self._row_dtype, device=dev)
            if newpos is None:
                inv = torch.arange(n_r, device=dev)
            else:
                inv = torch.empty_like(newpos).scatter_(0, newpos, torch.arange(n_r, device=dev))
            for g, (g0, ng) in enumerate(spans):
                rows_g = outs[g] if first_pos[g] is None else outs[g][first_pos[g]]
                r = inv[g0:g0 + ng]
                d = rows_g.shape[1]
                idx = (roff[r][:, None] + torch.arange(d, device=dev)).reshape(-1)
                flat_send.index_copy_(0, idx, rows_g.detach().reshape(-1).to(self._row_dtype))
        el_recv = [sum(cr[p][t] * self.dims[t] for t in range(T)) for p in range(W)]
        el_send = [sum(cs[p][t] * self.dims[t] for t in range(T)) for p in range(W)]
        flat = flat_send if W == 1 else _a2a(flat_send, el_recv, el_send, pg)
        fused = fast and not (psw is not None and psw.requires_grad)
        if uniform:
            U = flat.view(n_u, d0)
            # the CUDA ops read half rows off the wire themselves (pool_rows sums in fp32, gather_rows converts)
            if not (fused and d0 == Dm):
                U = U.to(torch.float32)
            if d0 != Dm:  # unused wider tables cannot exist in one group; keep the shape general
                U = torch.nn.functional.pad(U, (0, Dm - d0))
        else:
            utbl = torch.repeat_interleave(self._seg_table, cnt_send, output_size=n_u)
            uwidth = self._table_dim[utbl]
            U = _unpack(flat, _excl_cumsum(uwidth), uwidth, Dm).to(torch.float32)

        self._mark("rows a2a")
        # 6. pooling where the bag lives (the single-rank module's CPU path, op for op); "none" is a gather of the
        #    uniques' rows (in the output dtype: the same values as converting after the gather; CUDA: op
        #    gather_rows, 16-byte copies)
        if fast and n_u == 0:  # every id reserved (validate=False): they read a zero row
            U = U.new_zeros(1, Dm)
        if self.pooling == "none":
            if fast:  # (converted to the output dtype in the gather: the same values as converting first)
                out = torch.ops.dynamicemb.gather_rows(U.contiguous(), inverse, _VALUE_KIND[self.output_dtype])
            else:
                out = U.to(self.output_dtype).index_select(0, inverse)
            E, lengths = None, None
        elif fused:
            out, lengths = self._bag_pool(U, inverse, offsets, psw, B)
            E = None
        else:
            bag = bag.long()  # (the kernel dedup's bags are int32)
            out, E, lengths = _pool_rows(U, inverse, psw, offsets, bag, self.pooling, self.feature_dims, Dm, B,
                                         self.output_dtype)
        self._mark("pool")
        saved = None
        if backward:
            saved = dict(bag=bag, inverse=inverse, psw=psw, lengths=lengths, B=B, n=n, n_u=n_u, utbl=utbl, fused=fused,
                         E=E if (psw is not None and psw.requires_grad) else None, outs=outs, spans=spans,
                         first=first_pos, newpos=newpos, rtbl=rtbl, el_send=el_send, el_recv=el_recv,
                         inner_keys=inner_keys, ngroups=len(outs), tcounts=tcounts)
        return out, saved

    def _bag_pool(self, U, inverse, offsets, psw, B):
        """CUDA sum / mean pooling of the uniques' rows U (n_u, Dm; fp32, or the wire's half rows) into bags, in one
        op (pool_rows: a warp per bag adds its ids' rows in order, in fp32; no (n, Dm) per-id rows; offsets clamped
        to [0, n] by the op, in bounds for any offsets (validate=False), as the dedup kernel's bags). Returns
        (out (B, sum of dims) in the output dtype, the bags' lengths (int64))."""
        F, Dm = self.num_features, self.max_dim
        pw = None if psw is None else psw.to(torch.float32).contiguous()
        mean, U, offsets = self.pooling == "mean", U.contiguous(), offsets.contiguous()
        if all(d == Dm for d in self.feature_dims):  # bag f * B + b written straight to out[b, f * Dm:]
            out = torch.ops.dynamicemb.pool_rows(U, inverse, offsets, pw, mean, B).view(B, F * Dm)
        else:
            bags = torch.ops.dynamicemb.pool_rows(U, inverse, offsets, pw, mean).view(F, B, Dm)
            out = torch.cat([bags[f, :, :d] for f, d in enumerate(self.feature_dims)], dim=1)
        return out.to(self.output_dtype), offsets[1:] - offsets[:-1]

    def _bag_grad(self, grad_out, saved) -> torch.Tensor:
        """The backward of ``_bag_pool``: (n_u, Dm) per-unique sums of the ids' gradients (fp32 sums stored in the
        gradients' wire dtype; op
        segment_sum_rows: a stable sort of the ids by unique, then each unique's ids' bag gradients added in id
        order, times the ids' weights; the mean's division applied to the bag gradients first). With one dim for
        all features the bag gradients are read in place from the (B, F * Dm) output gradient (each id's bag
        renumbered to its row there)."""
        F, Dm, B = self.num_features, self.max_dim, saved["B"]
        g = grad_out.to(torch.float32)
        bag, lengths = saved["bag"], saved["lengths"]  # (int32 from the kernel dedup)
        if all(d == Dm for d in self.feature_dims):
            gb = g.contiguous().view(B * F, Dm)
            bag = (bag % B) * F + torch.div(bag, B, rounding_mode="floor")  # bag f * B + b -> row b * F + f
            lengths = lengths.view(F, B).t().reshape(-1)
        else:
            gb = torch.zeros(F, B, Dm, dtype=torch.float32, device=g.device)
            c = 0
            for f, d in enumerate(self.feature_dims):
                gb[f, :, :d] = g[:, c:c + d]
                c += d
            gb = gb.view(F * B, Dm)
        if self.pooling == "mean":
            gb = gb / lengths.clamp(min=1).to(torch.float32)[:, None]
        psw = saved["psw"]
        pw = None if psw is None else psw.to(torch.float32).contiguous()
        return torch.ops.dynamicemb.segment_sum_rows(gb, saved["inverse"], saved["n_u"], bag.contiguous(), pw,
                                                     _VALUE_KIND[self._grad_dtype])

    # ------------------------------------------------------------------ backward
    @torch.no_grad()
    def _step_backward(self, grad_out, saved, psw_requires_grad):
        self._mark("bwd start")
        dev, Dm = self.device, self.max_dim
        n_u = saved["n_u"]
        # per-unique sums straight into (n_u, Dm): one index_add_ over the ids ("none" has no bag gradient), or
        # on CUDA op segment_sum_rows (a stable sort of the ids by unique, then ordered sums per unique: no
        # atomics, deterministic, no (n, Dm) per-id buffer for bags)
        if saved["fused"] and self.pooling == "none":
            gU = torch.ops.dynamicemb.segment_sum_rows(grad_out.to(torch.float32).contiguous(), saved["inverse"],
                                                       n_u, None, None, _VALUE_KIND[self._grad_dtype])
            grad_psw = None
        elif saved["fused"]:
            gU, grad_psw = self._bag_grad(grad_out, saved), None
        else:
            gU, grad_psw = _id_gradients(grad_out, dict(saved, n=max(n_u, 1)), self.pooling, self.feature_dims, Dm,
                                         psw_requires_grad)
            gU = gU[:n_u]

        self._mark("grad reduce")
        # gradients of the uniques to their owners (fp32, each table's width; no all_to_all on one rank)
        uniform = saved["ngroups"] == 1
        gU = gU.to(self._grad_dtype)  # (CUDA: segment_sum_rows rounded its sums already; CPU: rounded here)
        if uniform:
            d0 = self.dims[self._group_tables[0][0]]
            flat_send = gU[:, :d0].reshape(-1)
        else:
            uw = self._table_dim[saved["utbl"]]
            flat_send = _pack(gU, _excl_cumsum(uw), uw, sum(saved["el_send"]))
        flat = flat_send if self.world_size == 1 else _a2a(flat_send, saved["el_send"], saved["el_recv"],
                                                           self.process_group)
        self._mark("grads a2a")
        newpos = saved["newpos"]
        if uniform:
            grow = flat.view(-1, d0)
        else:
            rw = self._table_dim[saved["rtbl"]]
            grow = _unpack(flat, _excl_cumsum(rw), rw, Dm)
        if newpos is not None:  # (peer, table) -> (group, table, peer): row i goes to newpos[i]
            grow = torch.empty_like(grow).index_copy_(0, newpos, grow)
        # (in the wire's dtype up to here: the shard modules take it, or fp32, below)
        grads = []
        for gi, (g0, ng) in enumerate(saved["spans"]):
            d = self._shard_list[gi].dims[0]
            grads.append(grow[g0:g0 + ng, :d])
        if self._clip:
            grads = self._clip_on_owner([g.to(torch.float32) for g in grads], saved)
        outs, gs = [], []
        for gi, (gr, out_g) in enumerate(zip(grads, saved["outs"])):
            first = saved["first"][gi]
            if first is not None:  # expanded occurrences: the unique's gradient on its first occurrence
                full = torch.zeros(out_g.shape[0], gr.shape[1], dtype=gr.dtype, device=dev)
                full.index_copy_(0, first, gr)
                gr = full
            if out_g.shape[0] == 0:
                # no ids reached this shard module: its backward has nothing to update, but its step count
                # (Adam's bias correction) advances as the single-rank module's does every step
                self._shard_list[gi].step.add_(1.0)
            elif out_g.requires_grad:
                outs.append(out_g)
                gs.append(gr.to(out_g.dtype))
        if outs:
            with torch.enable_grad():
                torch.autograd.backward(outs, gs)
        self._mark("update")
        return grad_psw

    def _clip_on_owner(self, grads: List[torch.Tensor], saved) -> List[torch.Tensor]:
        """Clipping of the per-id gradient sums over all ranks (the shard modules' optimizers do not clip):
        sums per (table, id) here, clamp by value, one all_reduce of the squared norm, scale; each id's sum is
        then put on its first entry (the shard module adds the zeros of the other entries)."""
        opt, dev = self.optimizer, self.device
        keys = saved["inner_keys"]
        sums, firsts, invs = [], [], []
        sq = torch.zeros((), dtype=torch.float32, device=dev)
        for gi, ((g0, ng), gr) in enumerate(zip(saved["spans"], grads)):
            members = self._group_tables[gi]
            k = keys[g0:g0 + ng]
            tl = torch.repeat_interleave(torch.arange(len(members), device=dev), saved["tcounts"][gi],
                                         output_size=ng)
            sk, p1 = torch.sort(k, stable=True)
            st, p2 = torch.sort(tl[p1], stable=True)
            perm, sk = p1[p2], sk[p2]
            flag = torch.ones(ng, dtype=torch.bool, device=dev)
            if ng > 1:
                flag[1:] = (sk[1:] != sk[:-1]) | (st[1:] != st[:-1])
            uidx = torch.cumsum(flag, 0) - 1
            inv = torch.empty_like(uidx).scatter_(0, perm, uidx)
            s = torch.zeros(ng, gr.shape[1], dtype=torch.float32, device=dev).index_add_(0, inv, gr)
            if opt.max_grad_value is not None:
                s.clamp_(-opt.max_grad_value, opt.max_grad_value)
            sq = sq + (s * s).sum()
            first = torch.full((ng,), ng, dtype=torch.int64, device=dev).scatter_reduce_(
                0, inv, torch.arange(ng, device=dev), "amin")
            sums.append(s)
            invs.append(inv)
            firsts.append(first)
        scale = None
        if opt.max_grad_norm is not None:
            dist.all_reduce(sq, group=self.process_group)
            scale = torch.clamp(opt.max_grad_norm / (torch.sqrt(sq) + 1e-6), max=1.0)
        out = []
        for s, inv, first in zip(sums, invs, firsts):
            if scale is not None:
                s = s * scale
            ng = inv.numel()
            is_first = first[inv] == torch.arange(ng, device=dev)
            out.append(torch.where(is_first[:, None], s[inv], torch.zeros((), device=dev)))
        return out

    def extra_repr(self):
        return (f"tables={self.table_names}, dims={self.dims}, features={self.num_features}, pooling={self.pooling!r}"
                f", optimizer={self.optimizer.name}, routing={self.routing!r}, world_size={self.world_size}, "
                f"rank={self.rank}, device={self.device}")
