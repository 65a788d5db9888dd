"""dynamicemb: dynamic embedding tables on a scored GPU hash table.

Public API (everything else is private):
    ScoredHashTable, TableInitializer        the scored hash table (GPU kernels + CPU twin)
    DynamicEmbTableOptions, DynamicEmbInitializer
    BatchedDynamicEmbeddingTables             fused tables: flat ids + offsets, pooling, fused optimizers
    ShardedDynamicEmbeddingTables, route_keys the same tables sharded row-wise by key over torch.distributed ranks
    QCommsConfig                              rows / gradients on the sharded step's wire in bf16 / fp16 (opt-in)
    DynamicEmbParameterConstraints, DynamicEmbeddingShardingPlanner, DynamicEmbeddingBagCollectionSharder,
    DynamicEmbeddingCollectionSharder, ShardedDynamicEmbeddingBagCollection, ShardedDynamicEmbeddingCollection,
    shard_storage_bytes                       TorchRec planner/sharders (DistributedModelParallel); loaded lazily
    DynamicEmbeddingBagCollection, DynamicEmbeddingCollection   TorchRec-shaped modules (TorchRec optional)
    SGD, Adam, Adagrad, RowWiseAdagrad, EmbOptimizer            optimizers fused into the backward
    RefusedInsertError
    DeviceInputError, check_errors, strict_checks, set_strict_checks   device-side input checks (no host sync)
    hash_keys                                 the table's key hash as an op (CPU and CUDA)
    BackingStore, HostStore, DiskStore, DiskStoreSpec, UvaStore, UvaStoreSpec, StoreError, CacheCapacityError
                                              storage tiers (caching tables over a backing store;
                                              docs/dynamicemb_storage.md)
"""

from ._load import load_library

load_library()

from ._batched import BatchedDynamicEmbeddingTables, RefusedInsertError  # noqa: E402
from ._caching import CacheCapacityError  # noqa: E402
from ._checks import DeviceInputError, check_errors, set_strict_checks, strict_checks  # noqa: E402
from ._collection import DynamicEmbeddingBagCollection, DynamicEmbeddingCollection  # noqa: E402
from ._hash import hash_keys  # noqa: E402
from ._optimizers import SGD, Adagrad, Adam, EmbOptimizer, RowWiseAdagrad  # noqa: E402
from ._options import DynamicEmbInitializer, DynamicEmbTableOptions  # noqa: E402
from ._routing import route_keys  # noqa: E402
from ._sharded import QCommsConfig, ShardedDynamicEmbeddingTables  # noqa: E402
from ._storage import BackingStore, DiskStore, DiskStoreSpec, HostStore, StoreError  # noqa: E402
from ._table import ScoredHashTable, TableInitializer  # noqa: E402
from ._uva_store import UvaStore, UvaStoreSpec  # noqa: E402

__version__ = "0.1.0"

# TorchRec sharding: imported on first use, so importing dynamicemb never needs torchrec (kept out of __all__:
# a star import must not import torchrec either)
_TORCHREC_SHARDING = (
    "DynamicEmbParameterConstraints",
    "DynamicEmbeddingBagCollectionSharder",
    "DynamicEmbeddingCollectionSharder",
    "DynamicEmbeddingShardingPlanner",
    "ShardedDynamicEmbeddingBagCollection",
    "ShardedDynamicEmbeddingCollection",
    "shard_storage_bytes",
)


def __getattr__(name):
    if name in _TORCHREC_SHARDING:
        from . import _torchrec_sharding

        return getattr(_torchrec_sharding, name)
    raise AttributeError(f"module 'dynamicemb' has no attribute {name!r}")


__all__ = [
    "Adagrad",
    "Adam",
    "BackingStore",
    "BatchedDynamicEmbeddingTables",
    "CacheCapacityError",
    "DeviceInputError",
    "DiskStore",
    "DiskStoreSpec",
    "DynamicEmbInitializer",
    "DynamicEmbTableOptions",
    "DynamicEmbeddingBagCollection",
    "DynamicEmbeddingCollection",
    "EmbOptimizer",
    "HostStore",
    "QCommsConfig",
    "RefusedInsertError",
    "RowWiseAdagrad",
    "SGD",
    "ScoredHashTable",
    "ShardedDynamicEmbeddingTables",
    "StoreError",
    "TableInitializer",
    "UvaStore",
    "UvaStoreSpec",
    "__version__",
    "check_errors",
    "hash_keys",
    "route_keys",
    "set_strict_checks",
    "strict_checks",
]
