"""ShardedDynamicEmbeddingTables over NCCL with one process per GPU, spawned from pytest (world sizes 2, 4, 8):
training equal to the single-rank CUDA module fed all ranks' batches for every routing mode, pooling and
optimizer (the CPU gloo tests' cases, shard_workers.CASES_2 + CASES_3) and with hybrid / caching shards, and N -> M reshards through the sharded
checkpoint (2 -> 4, 4 -> 2, 8 -> 3, 2 -> 1, 1 -> 2), bit-exact under eviction. The rank bodies are the gloo tests'
(shard_workers.py); each world size skips cleanly when fewer GPUs are present (the ``gpus(n)`` marker). NVLink multicast stays off in
every rank (dist_helpers.MULTICAST_OFF)."""

import os
import sys

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import shard_workers as sw  # noqa: E402
from dist_helpers import run_ranks  # noqa: E402

from dynamicemb._load import load_library  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not (load_library() and torch.cuda.is_available() and dist.is_available() and dist.is_nccl_available()),
    reason="needs dynamicemb/_C.so, a CUDA device and NCCL")]

# a spawn costs seconds (CUDA context + NCCL communicator per rank); the bounds cover busy hosts
TIMEOUT = 180


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("nccl_ckpt"))


def _dumps(ckpt_dir, world):
    """The dumps of ``world`` ranks (every routing, "evict" and "clean"), written once per module."""
    if not os.path.exists(os.path.join(ckpt_dir, "hash", "evict", f"w{world}", "manifest.json")):
        run_ranks(sw.suite, world, [], ckpt_dir, [], True, backend="nccl", timeout=TIMEOUT)


@pytest.mark.parametrize("world", [pytest.param(w, marks=pytest.mark.gpus(w), id=f"w{w}") for w in (2, 4, 8)])
def test_parity_with_single_rank_and_dump(ckpt_dir, world):
    # every case of the CPU tests on this world size, the hybrid and caching shards (a quarter of the rows in HBM),
    # then this world's dumps (the reshard tests load them)
    run_ranks(sw.suite, world, sw.CASES_2 + sw.CASES_3, ckpt_dir, [], True, False, True, backend="nccl",
              timeout=TIMEOUT)  # (cases, dir, loads, write, bad, storage)


@pytest.mark.parametrize("src,dst", [pytest.param(s, d, marks=pytest.mark.gpus(max(s, d)), id=f"{s}to{d}")
                                     for s, d in ((2, 4), (4, 2), (8, 3), (2, 1), (1, 2))])
def test_reshard_bit_exact_under_eviction(ckpt_dir, src, dst):
    # rows, optimizer state, scores and admission counts of every routing reload bit-exact on dst ranks; a dump of
    # another routing is refused; one routing trains on equal to one rank trained on both worlds' batches
    _dumps(ckpt_dir, src)
    run_ranks(sw.suite, dst, [], ckpt_dir, [src], False, backend="nccl", timeout=TIMEOUT)


@pytest.mark.parametrize("world", [pytest.param(w, marks=pytest.mark.gpus(w), id=f"w{w}") for w in (2, 4)])
def test_qcomms_rounding(world):
    # rows / gradients on the NCCL all_to_alls in bf16 / fp16 against the exact single-rank CUDA module (each
    # direction apart and both; shard_workers.qcomms_parity's bounds)
    run_ranks(sw.qcomms_parity, world, backend="nccl", timeout=TIMEOUT)
