"""TorchRec integration: plain ``EmbeddingBagCollection`` / ``EmbeddingCollection`` models sharded by
``DistributedModelParallel`` with some tables dynamic (ours, row-wise by key) next to TorchRec's static tables.

How a table becomes dynamic: its planner constraint is ``DynamicEmbParameterConstraints(use_dynamicemb=True,
options=...)``. The planner (``DynamicEmbeddingShardingPlanner``: TorchRec's planner with our enumerator) then
offers it only row_wise with the ``customized_kernel`` compute kernel and charges our memory (the scored hash
table's slots, rows with optimizer state and admission counts of each rank's share: ``shard_storage_bytes``);
every other table keeps TorchRec's own options (our kernel is removed from them). Our sharders
(``DynamicEmbeddingBagCollectionSharder``, ``DynamicEmbeddingCollectionSharder``) shard a collection whose
tables all got our kernel with ``ShardedDynamicEmbeddingTables`` and hand every other collection to TorchRec's
sharder. A collection mixing dynamic and static tables is refused: put them in two collections.

TorchRec is imported here at module import: ``dynamicemb`` imports this module only when one of these names is
first used, so TorchRec stays optional. Our sharded path uses only TorchRec's data types (KJT, KeyedTensor,
JaggedTensor), never fbgemm ops.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, List, Optional

import torch
import torch.distributed as dist
from torch import nn
from torchrec.distributed.embedding import EmbeddingCollectionSharder
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner
from torchrec.distributed.planner.constants import BATCH_SIZE
from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
from torchrec.distributed.planner.types import ParameterConstraints, Perf, Storage
from torchrec.distributed.types import (
    LazyNoWait,
    NoWait,
    NullShardedModuleContext,
    ShardedModule,
    ShardingEnv,
    ShardingType,
)

from . import _TORCHREC_SHARDING
from ._collection import DynamicEmbeddingBagCollection, DynamicEmbeddingCollection
from ._optimizers import SGD, Adagrad, Adam, EmbOptimizer, RowWiseAdagrad
from ._options import DynamicEmbTableOptions
from ._sharded import QCommsConfig, ShardedDynamicEmbeddingTables, shard_options

__all__ = list(_TORCHREC_SHARDING)  # one list: the names dynamicemb/__init__.py resolves on first use

KERNEL = EmbeddingComputeKernel.CUSTOMIZED_KERNEL.value
ROW_WISE = ShardingType.ROW_WISE.value


def shard_storage_bytes(options: DynamicEmbTableOptions, world_size: int,
                        optimizer: Optional[EmbOptimizer] = None) -> int:
    """Bytes one rank holds for its share of a dynamic table at full capacity: per slot the key (8), digest (1),
    score (8) and row ([embedding | optimizer state] in the table's dtype), a lock per bucket, and the admission
    table's slots (key, digest, score, one fp32 count) when the table counts admission.

    Args:
        options: the table's (global) options, ``dim`` and ``max_capacity`` set.
        world_size: ranks the table is sharded over.
        optimizer: the fused optimizer (its state widens the rows); default Adam (the widest state).

    Example:
        >>> shard_storage_bytes(DynamicEmbTableOptions(dim=128, max_capacity=1 << 20), 8, SGD())
        69341184
    """
    o = shard_options(options, world_size)
    opt = optimizer if optimizer is not None else Adam()
    elem = torch.empty((), dtype=o.dtype).element_size()
    slots = o.max_capacity
    b = slots * (8 + 1 + 8 + opt.row_width(o.dim) * elem) + (slots // o.bucket_capacity) * 4
    if o.admission_threshold > 1:
        b += o.admission_slots * (8 + 1 + 8 + 4) + (o.admission_slots // o.bucket_capacity) * 4
    return b


@dataclasses.dataclass
class DynamicEmbParameterConstraints(ParameterConstraints):
    """TorchRec ``ParameterConstraints`` that make a table dynamic.

    Args:
        use_dynamicemb: shard this table with dynamicemb (row-wise by key, ``customized_kernel``).
        options: its ``DynamicEmbTableOptions`` (``dim``/``max_capacity`` left unset come from the config:
            ``embedding_dim`` and ``num_embeddings`` rounded up to whole buckets); default options if None.
        (every ``ParameterConstraints`` field; for a dynamic table ``sharding_types`` and ``compute_kernels``
        default to ["row_wise"] and ["customized_kernel"] and may be nothing else.)

    Raises:
        ValueError: other sharding types or kernels for a dynamic table; options of the wrong type.

    Example:
        >>> constraints = {"user_id": DynamicEmbParameterConstraints(
        ...     use_dynamicemb=True, options=DynamicEmbTableOptions(score_policy="lfu"))}
    """

    use_dynamicemb: bool = False
    options: Optional[DynamicEmbTableOptions] = None

    def __post_init__(self):
        if self.options is not None and not isinstance(self.options, DynamicEmbTableOptions):
            raise ValueError(f"options: expected DynamicEmbTableOptions or None, got {type(self.options).__name__}")
        if not self.use_dynamicemb:
            return
        if self.sharding_types is None:
            self.sharding_types = [ROW_WISE]
        if self.compute_kernels is None:
            self.compute_kernels = [KERNEL]
        if list(self.sharding_types) != [ROW_WISE]:
            raise ValueError(f"sharding_types: expected ['row_wise'] for a dynamic table, got {self.sharding_types}")
        if list(self.compute_kernels) != [KERNEL]:
            raise ValueError(f"compute_kernels: expected ['{KERNEL}'] for a dynamic table, got {self.compute_kernels}")


def _is_dynamic(constraints, name: str) -> bool:
    c = (constraints or {}).get(name)
    return isinstance(c, DynamicEmbParameterConstraints) and c.use_dynamicemb


class DynamicEmbEnumerator(EmbeddingEnumerator):
    """TorchRec's enumerator, then: dynamic tables keep only (row_wise, customized_kernel) with our storage
    estimate; static tables lose the customized_kernel options."""

    def __init__(self, *args, optimizer: Optional[EmbOptimizer] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._dyn_optimizer = optimizer

    def enumerate(self, module, sharders):
        options = super().enumerate(module, sharders)
        keep = []
        for so in options:
            dyn = _is_dynamic(self._constraints, so.name)
            ours = so.compute_kernel == KERNEL
            if dyn == ours and (not dyn or so.sharding_type == ROW_WISE):
                keep.append(so)
        return keep

    def populate_estimates(self, sharding_options) -> None:
        # TorchRec's estimators do not know our kernel: they estimate the other options, we estimate ours
        super().populate_estimates([so for so in sharding_options if so.compute_kernel != KERNEL])
        for so in sharding_options:
            if so.compute_kernel != KERNEL:
                continue
            c = (self._constraints or {}).get(so.name)
            o = getattr(c, "options", None) or DynamicEmbTableOptions()
            o = o.completed(dim=int(so.tensor.shape[1]), num_embeddings=int(so.tensor.shape[0]))
            nbytes = shard_storage_bytes(o, self._world_size, self._dyn_optimizer)
            on_gpu = self._compute_device == "cuda"
            perf = _perf(o, so, self._world_size, self._batch_size, on_gpu)
            for sh in so.shards:
                sh.storage = Storage(hbm=nbytes if on_gpu else 0, ddr=0 if on_gpu else nbytes)
                sh.perf = perf


def _perf(o: DynamicEmbTableOptions, so, world: int, batch_size: int, on_gpu: bool) -> Perf:
    """A rough per-shard time (s) for the partitioner to balance: each rank's ids (batch x pooling factors)
    spread over the owners; per id a hash probe + row read on the owner and (id, row) over the network both
    ways; the backward twice the forward (gradients + optimizer state). docs/dynamicemb_sharding.md has the
    model this simplifies."""
    ids = batch_size * sum(so.input_lengths) * world / world  # ids that reach one owner from all ranks
    row = o.dim * torch.empty((), dtype=o.dtype).element_size()
    mem_bw = 2e12 if on_gpu else 5e10
    net_bw = 5e10 if on_gpu else 1e9
    fwd_compute = ids * (256 + row) / mem_bw  # a bucket probe (~2 cache lines) and the row
    fwd_comms = ids * (8 + row) / net_bw
    return Perf(fwd_compute=fwd_compute, fwd_comms=fwd_comms, bwd_compute=2 * fwd_compute, bwd_comms=fwd_comms)


class DynamicEmbeddingShardingPlanner(EmbeddingShardingPlanner):
    """TorchRec's ``EmbeddingShardingPlanner`` with ``DynamicEmbEnumerator`` (see the module docstring).

    Args:
        topology, batch_size, constraints, **kwargs: as ``EmbeddingShardingPlanner``; dynamic tables are those
            whose constraint is ``DynamicEmbParameterConstraints(use_dynamicemb=True)``.
        optimizer: the dynamic tables' fused optimizer, for the storage estimate (default: Adam, the widest).

    Example:
        >>> planner = DynamicEmbeddingShardingPlanner(Topology(world_size=2, compute_device="cpu"),
        ...                                           constraints=constraints)
        >>> plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
    """

    def __init__(self, topology=None, batch_size=None, constraints=None, optimizer=None, **kwargs):
        if topology is None:
            raise ValueError("topology: expected a torchrec Topology, got None")
        batch_size = batch_size if batch_size else BATCH_SIZE  # TorchRec's default, as its planner's
        enumerator = kwargs.pop("enumerator", None) or DynamicEmbEnumerator(
            topology=topology, batch_size=batch_size, constraints=constraints, optimizer=optimizer)
        super().__init__(topology=topology, batch_size=batch_size, enumerator=enumerator, constraints=constraints,
                         **kwargs)


# ---------------------------------------------------------------------- sharded collections
_TORCHREC_OPT = {"SGD": SGD, "ADAM": Adam, "EXACT_ADAGRAD": Adagrad, "EXACT_ROWWISE_ADAGRAD": RowWiseAdagrad,
                 "ROWWISE_ADAGRAD": RowWiseAdagrad, "ADAGRAD": Adagrad}


def optimizer_from_fused_params(fused_params: Optional[dict]) -> Optional[EmbOptimizer]:
    """Our fused optimizer from TorchRec ``fused_params`` (``optimizer``: an EmbOptimType, ``learning_rate``,
    ``eps``, ``beta1``, ``beta2``, ``weight_decay``); None when they name no optimizer."""
    if not fused_params or fused_params.get("optimizer") is None:
        return None
    name = getattr(fused_params["optimizer"], "name", str(fused_params["optimizer"])).upper()
    if name not in _TORCHREC_OPT:
        raise ValueError(f"fused_params optimizer: expected one of {sorted(_TORCHREC_OPT)}, got {name}")
    cls = _TORCHREC_OPT[name]
    kw = {"lr": float(fused_params.get("learning_rate", 0.01)),
          "weight_decay": float(fused_params.get("weight_decay", 0.0))}
    if cls in (Adam, Adagrad, RowWiseAdagrad) and "eps" in fused_params:
        kw["eps"] = float(fused_params["eps"])
    if cls is Adam and ("beta1" in fused_params or "beta2" in fused_params):
        kw["betas"] = (float(fused_params.get("beta1", 0.9)), float(fused_params.get("beta2", 0.999)))
    return cls(**kw)


class _ShardedMixin:
    """The sharded collections build ShardedDynamicEmbeddingTables instead of the single-rank tables."""

    def _make_tables(self, opts, fmap, **kwargs):
        ks = [int(c.num_embeddings) for c in self._embedding_configs]
        return ShardedDynamicEmbeddingTables(opts, fmap, process_group=self._pg, routing=self._routing,
                                             key_space=ks, qcomms=self._qcomms, **kwargs)


class ShardedDynamicEmbeddingBagCollection(_ShardedMixin, DynamicEmbeddingBagCollection):
    """``DynamicEmbeddingBagCollection`` whose tables are sharded row-wise by key over a process group (each
    rank passes its own KJT and gets its own KeyedTensor); usable without DistributedModelParallel.

    Args:
        tables, table_options, optimizer, is_weighted, device, key_dtype, output_dtype: as
            ``DynamicEmbeddingBagCollection`` (capacities are global).
        process_group: ranks to shard over (default: the default group).
        routing: "hash", "roundrobin" or "continuous" (key space: each config's ``num_embeddings``).
        qcomms: a ``QCommsConfig``: rows / gradients on the all_to_alls in bf16 / fp16 (default None: exact).

    Example:
        >>> ebc = ShardedDynamicEmbeddingBagCollection([EmbeddingBagConfig(num_embeddings=1 << 20, embedding_dim=64,
        ...                                             name="t0", feature_names=["f0"])], optimizer=Adam(lr=1e-3))
        >>> kt = ebc(kjt)                        # this rank's KeyedTensor
    """

    def __init__(self, tables, table_options=None, optimizer=None, is_weighted=False, device=None,
                 key_dtype=torch.int64, output_dtype=torch.float32, process_group=None, routing="hash", qcomms=None):
        self._pg, self._routing, self._qcomms = process_group, routing, qcomms
        super().__init__(tables, table_options, optimizer, is_weighted, device, key_dtype, output_dtype)


class ShardedDynamicEmbeddingCollection(_ShardedMixin, DynamicEmbeddingCollection):
    """``DynamicEmbeddingCollection`` sharded row-wise by key over a process group (arguments as
    ``ShardedDynamicEmbeddingBagCollection``).

    Example:
        >>> ec = ShardedDynamicEmbeddingCollection([EmbeddingConfig(num_embeddings=4096, embedding_dim=32,
        ...                                         name="t", feature_names=["f"])])
        >>> ec(kjt)["f"].values().shape          # (ids of f on this rank, 32)
    """

    def __init__(self, tables, table_options=None, optimizer=None, device=None, key_dtype=torch.int64,
                 output_dtype=torch.float32, process_group=None, routing="hash", qcomms=None):
        self._pg, self._routing, self._qcomms = process_group, routing, qcomms
        super().__init__(tables, table_options, optimizer, device, key_dtype, output_dtype)


class _DMPShardedCollection(ShardedModule):
    """What DistributedModelParallel puts in place of a collection of dynamic tables: a ShardedModule whose
    input_dist / output_dist are no-ops (the lookup runs its own all_to_alls) and whose compute is our sharded
    collection. Its buffers are reported as sharded, so DMP's DDP wrapper neither syncs nor broadcasts them."""

    def __init__(self, collection: nn.Module, unsharded_type: type):
        super().__init__()
        self.collection = collection
        self._unsharded_type = unsharded_type

    @property
    def unsharded_module_type(self) -> type:
        return self._unsharded_type

    def create_context(self):
        return NullShardedModuleContext()

    def input_dist(self, ctx, features):
        return NoWait(NoWait(features))

    def compute(self, ctx, dist_input):
        return self.collection(dist_input)

    def output_dist(self, ctx, output):
        return LazyNoWait(output)

    def sharded_parameter_names(self, prefix: str = "") -> Iterator[str]:
        for key, _ in self.named_parameters(prefix):
            yield key
        for key, _ in self.named_buffers(prefix):
            yield key

    # forwarded conveniences
    def dump(self, path: str, score_threshold=None):
        """See ``ShardedDynamicEmbeddingTables.dump`` (a collective)."""
        self.collection.tables.dump(path, score_threshold)

    def load(self, path: str):
        """See ``ShardedDynamicEmbeddingTables.load`` (a collective)."""
        self.collection.tables.load(path)


def _split_params(params, module_fqn) -> bool:
    kinds = {p.compute_kernel == KERNEL for p in params.values()}
    if kinds == {True, False}:
        dyn = sorted(n for n, p in params.items() if p.compute_kernel == KERNEL)
        raise ValueError(f"{module_fqn or 'collection'}: expected all tables dynamic ({KERNEL}) or none, got "
                         f"dynamic tables {dyn} next to static ones; put them in two collections")
    for n, p in params.items():
        if p.compute_kernel == KERNEL and p.sharding_type != ROW_WISE:
            raise ValueError(f"table {n!r}: expected sharding_type 'row_wise' with {KERNEL}, got {p.sharding_type}")
    return kinds == {True}


def _sharder_options(constraints, table_options):
    opts = dict(table_options or {})
    for name, c in (constraints or {}).items():
        if isinstance(c, DynamicEmbParameterConstraints) and c.use_dynamicemb and name not in opts:
            opts[name] = c.options if c.options is not None else DynamicEmbTableOptions()
    return opts


class _DynamicSharderBase:
    def _init_dynamic(self, constraints, table_options, optimizer, routing, qcomms):
        if optimizer is not None and not isinstance(optimizer, EmbOptimizer):
            raise TypeError(f"optimizer: expected an EmbOptimizer (SGD, Adam, Adagrad, RowWiseAdagrad), got "
                            f"{type(optimizer).__name__}")
        if routing not in ShardedDynamicEmbeddingTables.ROUTINGS:
            raise ValueError(
                f"routing: expected one of {list(ShardedDynamicEmbeddingTables.ROUTINGS)}, got {routing!r}")
        self._dyn_options = _sharder_options(constraints, table_options)
        self._dyn_optimizer = optimizer
        self._dyn_routing = routing
        self._dyn_qcomms = QCommsConfig._checked(qcomms)

    def sharding_types(self, compute_device_type: str) -> List[str]:
        types = list(super().sharding_types(compute_device_type))
        return types if ROW_WISE in types else types + [ROW_WISE]

    def compute_kernels(self, sharding_type: str, compute_device_type: str) -> List[str]:
        base = list(super().sharding_types(compute_device_type))
        ks = list(super().compute_kernels(sharding_type, compute_device_type)) if sharding_type in base else []
        return ks + [KERNEL] if sharding_type == ROW_WISE else ks

    def _dynamic_args(self, module, env: ShardingEnv, device):
        bag = hasattr(module, "embedding_bag_configs")
        cfgs = module.embedding_bag_configs() if bag else module.embedding_configs()
        # tables planned dynamic without options of ours get the defaults (completed from their configs)
        opts = {c.name: self._dyn_options.get(c.name, DynamicEmbTableOptions()) for c in cfgs}
        opt = self._dyn_optimizer or optimizer_from_fused_params(self.fused_params) or SGD(lr=0.01)
        pg = env.process_group if env.process_group is not None else dist.group.WORLD
        dev = torch.device(device) if device is not None else torch.device("cpu")
        return cfgs, opts, opt, pg, dev


class DynamicEmbeddingBagCollectionSharder(_DynamicSharderBase, EmbeddingBagCollectionSharder):
    """TorchRec's ``EmbeddingBagCollectionSharder`` that also shards collections of dynamic tables (those
    planned row_wise with ``customized_kernel``, see ``DynamicEmbParameterConstraints``) with dynamicemb.

    Args:
        constraints: the planner constraints (dynamic tables and their options are read from them).
        table_options: options by table name (override those in ``constraints``).
        optimizer: the dynamic tables' fused optimizer (default: from ``fused_params``, else SGD(lr=0.01)).
        routing: "hash", "roundrobin" or "continuous" (key space: the config's ``num_embeddings``).
        qcomms: a ``QCommsConfig`` for the dynamic tables' all_to_alls (default None: exact).
        fused_params, qcomm_codecs_registry: passed to TorchRec's sharder (its static tables).

    Raises:
        ValueError: (at shard time) a collection mixing dynamic and static tables.

    Example:
        >>> sharders = [DynamicEmbeddingBagCollectionSharder(constraints, optimizer=Adam(lr=1e-3))]
        >>> model = DistributedModelParallel(model, env, device, plan=plan, sharders=sharders)
    """

    def __init__(self, constraints=None, table_options: Optional[Dict[str, DynamicEmbTableOptions]] = None,
                 optimizer: Optional[EmbOptimizer] = None, routing: str = "hash", fused_params=None,
                 qcomm_codecs_registry=None, qcomms: Optional[QCommsConfig] = None):
        super().__init__(fused_params=fused_params, qcomm_codecs_registry=qcomm_codecs_registry)
        self._init_dynamic(constraints, table_options, optimizer, routing, qcomms)

    def shard(self, module, params, env, device=None, module_fqn=None):
        if not _split_params(params, module_fqn):
            return super().shard(module, params, env, device, module_fqn)
        cfgs, opts, opt, pg, dev = self._dynamic_args(module, env, device)
        ebc = ShardedDynamicEmbeddingBagCollection(cfgs, opts, opt, is_weighted=module.is_weighted(), device=dev,
                                                   process_group=pg, routing=self._dyn_routing,
                                                   qcomms=self._dyn_qcomms)
        return _DMPShardedCollection(ebc, type(module))


class DynamicEmbeddingCollectionSharder(_DynamicSharderBase, EmbeddingCollectionSharder):
    """``DynamicEmbeddingBagCollectionSharder`` for ``EmbeddingCollection`` (sequence embeddings); same
    arguments (``use_index_dedup`` is passed to TorchRec's sharder).

    Example:
        >>> sharders = [DynamicEmbeddingCollectionSharder(constraints),
        ...             DynamicEmbeddingBagCollectionSharder(constraints)]
    """

    def __init__(self, constraints=None, table_options: Optional[Dict[str, DynamicEmbTableOptions]] = None,
                 optimizer: Optional[EmbOptimizer] = None, routing: str = "hash", fused_params=None,
                 qcomm_codecs_registry=None, use_index_dedup: bool = False, qcomms: Optional[QCommsConfig] = None):
        super().__init__(fused_params=fused_params, qcomm_codecs_registry=qcomm_codecs_registry,
                         use_index_dedup=use_index_dedup)
        self._init_dynamic(constraints, table_options, optimizer, routing, qcomms)

    def shard(self, module, params, env, device=None, module_fqn=None):
        if not _split_params(params, module_fqn):
            return super().shard(module, params, env, device, module_fqn)
        cfgs, opts, opt, pg, dev = self._dynamic_args(module, env, device)
        ec = ShardedDynamicEmbeddingCollection(cfgs, opts, opt, device=dev, process_group=pg,
                                               routing=self._dyn_routing, qcomms=self._dyn_qcomms)
        return _DMPShardedCollection(ec, type(module))

