"""dynamicemb: dynamic embedding tables on a scored GPU hash table.

Public API (everything else is private):
    ScoredHashTable, TableInitializer        the scored hash table (GPU kernels + CPU twin)
    DynamicEmbTableOptions, DynamicEmbInitializer
    BatchedDynamicEmbeddingTables             fused tables: flat ids + offsets, pooling, fused optimizers
    ShardedDynamicEmbeddingTables, route_keys the same tables sharded row-wise by key over torch.distributed ranks
    DynamicEmbParameterConstraints, DynamicEmbeddingShardingPlanner, DynamicEmbeddingBagCollectionSharder,
    DynamicEmbeddingCollectionSharder, ShardedDynamicEmbeddingBagCollection, ShardedDynamicEmbeddingCollection,
    shard_storage_bytes                       TorchRec planner/sharders (DistributedModelParallel); loaded lazily
    DynamicEmbeddingBagCollection, DynamicEmbeddingCollection   TorchRec-shaped modules (TorchRec optional)
    SGD, Adam, Adagrad, RowWiseAdagrad, EmbOptimizer            optimizers fused into the backward
    RefusedInsertError
    hash_keys                                 the table's key hash as an op (CPU and CUDA)
"""

from ._load import load_library

load_library()

from ._batched import BatchedDynamicEmbeddingTables, RefusedInsertError  # noqa: E402
from ._collection import DynamicEmbeddingBagCollection, DynamicEmbeddingCollection  # noqa: E402
from ._hash import hash_keys  # noqa: E402
from ._optimizers import SGD, Adagrad, Adam, EmbOptimizer, RowWiseAdagrad  # noqa: E402
from ._options import DynamicEmbInitializer, DynamicEmbTableOptions  # noqa: E402
from ._routing import route_keys  # noqa: E402
from ._sharded import ShardedDynamicEmbeddingTables  # noqa: E402
from ._table import ScoredHashTable, TableInitializer  # noqa: E402

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
    "BatchedDynamicEmbeddingTables",
    "DynamicEmbInitializer",
    "DynamicEmbTableOptions",
    "DynamicEmbeddingBagCollection",
    "DynamicEmbeddingCollection",
    "EmbOptimizer",
    "RefusedInsertError",
    "RowWiseAdagrad",
    "SGD",
    "ScoredHashTable",
    "ShardedDynamicEmbeddingTables",
    "TableInitializer",
    "__version__",
    "hash_keys",
    "route_keys",
]
