"""TorchRec integration on CPU with gloo: DistributedModelParallel shards a plain TorchRec model (a dynamic
EmbeddingBagCollection, a static one sharded by TorchRec, a dynamic EmbeddingCollection) with our planner and
sharders, 2 spawned ranks; the dynamic outputs and rows equal one rank's. Skips without torchrec."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import shard_workers as sw  # noqa: E402
from dist_helpers import run_ranks  # noqa: E402

import dynamicemb as de  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402

torchrec = pytest.importorskip("torchrec")
pytestmark = pytest.mark.skipif(not (load_library() and torch.distributed.is_available()),
                                reason="needs dynamicemb/_C.so and torch.distributed")


def test_dmp_dynamic_and_static_tables_two_ranks(tmp_path):
    run_ranks(sw.dmp_model, 2, str(tmp_path), timeout=240)


def test_constraints_validate():
    c = de.DynamicEmbParameterConstraints(use_dynamicemb=True)
    assert c.sharding_types == ["row_wise"] and c.compute_kernels == ["customized_kernel"]
    with pytest.raises(ValueError, match="sharding_types: expected \\['row_wise'\\] for a dynamic table"):
        de.DynamicEmbParameterConstraints(use_dynamicemb=True, sharding_types=["table_wise"])
    with pytest.raises(ValueError, match="options: expected DynamicEmbTableOptions or None"):
        de.DynamicEmbParameterConstraints(use_dynamicemb=True, options={"dim": 8})


def test_sharder_refuses_mixed_collection():
    from torchrec.distributed.types import ParameterSharding

    from dynamicemb._torchrec_sharding import _split_params

    dyn = ParameterSharding(sharding_type="row_wise", compute_kernel="customized_kernel", ranks=[0, 1])
    static = ParameterSharding(sharding_type="table_wise", compute_kernel="fused", ranks=[0])
    assert _split_params({"a": dyn}, "m") and not _split_params({"b": static}, "m")
    with pytest.raises(ValueError, match="expected all tables dynamic"):
        _split_params({"a": dyn, "b": static}, "m")


def test_storage_estimate():
    o = de.DynamicEmbTableOptions(dim=16, max_capacity=1024, bucket_capacity=128)
    per = 512 * (8 + 1 + 8 + 16 * 4) + 4 * 4  # 512 slots per rank (2 ranks), SGD rows, 4 bucket locks
    assert de.shard_storage_bytes(o, 2, de.SGD()) == per
    assert de.shard_storage_bytes(o, 2, de.Adam()) > per  # Adam's state widens the rows
