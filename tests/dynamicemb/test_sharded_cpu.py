"""ShardedDynamicEmbeddingTables on CPU with gloo: ranks spawned from pytest (2 and 3), each case checked against
the single-rank module fed all ranks' batches; checkpoints across world sizes; routing rules; bad input.
Runs in CI (needs the op library's CPU twin); every spawn is bounded in time."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import shard_workers as sw  # noqa: E402
from dist_helpers import run_ranks  # noqa: E402

import dynamicemb as de  # noqa: E402
from dynamicemb._hash import fmix64  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402

pytestmark = pytest.mark.skipif(not (load_library() and torch.distributed.is_available()),
                                reason="needs dynamicemb/_C.so and torch.distributed")


# ---------------------------------------------------------------------- routing rules (exact, against Python ints)
def _py_owner(key, world, mode, table, key_space):
    k = key & ((1 << 64) - 1)
    if mode == "hash":
        h = fmix64(k ^ ((0x9E3779B97F4A7C15 * (table + 1)) & ((1 << 64) - 1)))
        return ((h >> 32) * world) >> 32
    if mode == "roundrobin":
        return k % world
    block = -(-key_space // world)
    return world - 1 if k >= key_space else k // block


@pytest.mark.parametrize("mode", ["hash", "roundrobin", "continuous"])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_route_keys_rule(mode, world):
    g = torch.Generator().manual_seed(world)
    keys = torch.cat([torch.randint(0, 1000, (200,), generator=g),
                      torch.randint(-(2**63), 2**63 - 1, (200,), generator=g, dtype=torch.int64)])
    for dtype in (torch.int64, torch.uint64):
        if dtype == torch.int64:
            ks = keys.abs()
        else:
            ks = keys.view(torch.uint64)
        got = de.route_keys(ks, world, mode, table=3, key_space=700).tolist()
        want = [_py_owner(k, world, mode, 3, 700) if world > 1 else 0 for k in ks.view(torch.int64).tolist()]
        assert got == want


@pytest.mark.parametrize("mode", ["hash", "roundrobin", "continuous"])
def test_route_keys_by_table_matches_per_table(mode):
    from dynamicemb._routing import route_keys_by_table

    g = torch.Generator().manual_seed(7)
    keys = torch.cat([torch.randint(0, 2000, (300,), generator=g),
                      torch.randint(-(2**63), 2**63 - 1, (300,), generator=g, dtype=torch.int64)]).view(torch.uint64)
    tables = torch.randint(0, 3, (600,), generator=g)
    spaces = [1000, None, 2**63]
    got = route_keys_by_table(keys, tables, 5, mode, spaces)
    for t in range(3):
        m = tables == t
        assert torch.equal(got[m], de.route_keys(keys[m], 5, mode, table=t, key_space=spaces[t]))


def test_route_keys_spreads_sequential_ids():
    owners = de.route_keys(torch.arange(1 << 14), 8, "hash")
    counts = torch.bincount(owners, minlength=8)
    assert counts.min() > 0.9 * (1 << 11) and counts.max() < 1.1 * (1 << 11), counts.tolist()
    # the same id of two tables lands on unrelated owners
    other = de.route_keys(torch.arange(1 << 14), 8, "hash", table=1)
    assert (owners == other).float().mean() < 0.2


def test_route_keys_bad_args():
    with pytest.raises(ValueError, match="mode: expected one of"):
        de.route_keys(torch.arange(3), 2, "random")
    with pytest.raises(ValueError, match="world_size: expected an int"):
        de.route_keys(torch.arange(3), 0)
    with pytest.raises(TypeError, match="keys: expected an int64 or uint64 tensor"):
        de.route_keys(torch.arange(3, dtype=torch.int32), 2)
    with pytest.raises(ValueError, match="key_space: expected an int in"):
        de.route_keys(torch.arange(3), 2, "continuous", key_space=2**63 + 1)


def test_needs_process_group():
    if torch.distributed.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(RuntimeError, match="process_group: expected an initialized"):
        de.ShardedDynamicEmbeddingTables([de.DynamicEmbTableOptions(dim=4, max_capacity=128)])


# ---------------------------------------------------------------------- training parity with one rank
CASES_2, CASES_3 = sw.CASES_2, sw.CASES_3  # every routing, pooling and optimizer (shared with the NCCL tests)


# The ranks of one world size are spawned once (start-up costs seconds on busy cores) and run several checks; the
# checkpoints written by one world are loaded by the next, so the tests below run in file order and share a
# directory: 2 ranks write; 1 rank writes; 3 ranks load 2's (2 -> 3) and write; 2 ranks load 3's and 1's
# (3 -> 2, 1 -> 2). Each load: rows bit-exact under eviction (admission counts too) for every routing, a dump of
# another routing refused on every rank, and (one routing per load) training on equals one rank trained on all
# batches.
@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("sharded_ckpt"))


def _need(ckpt_dir, world):
    if not os.path.exists(os.path.join(ckpt_dir, "hash", "evict", f"w{world}", "manifest.json")):
        pytest.skip(f"needs the dumps of world {world} written by an earlier test of this file (run it whole)")


def test_two_ranks_parity_storage_bad_input_and_dump(ckpt_dir):
    run_ranks(sw.suite, 2, CASES_2, ckpt_dir, [], True, True, True)


def test_one_rank_dump(ckpt_dir):
    run_ranks(sw.suite, 1, [], ckpt_dir, [], True)


def test_three_ranks_parity_and_reshard_2_to_3(ckpt_dir):
    _need(ckpt_dir, 2)
    run_ranks(sw.suite, 3, CASES_3, ckpt_dir, [2], True)


def test_reshard_3_to_2_and_1_to_2(ckpt_dir):
    _need(ckpt_dir, 3)
    _need(ckpt_dir, 1)
    run_ranks(sw.suite, 2, [], ckpt_dir, [3, 1], False)


# ---------------------------------------------------------------------- rows / gradients on the wire in bf16 / fp16
@pytest.mark.parametrize("world", [2, 3])
def test_qcomms_rounding_against_the_exact_step(world):
    run_ranks(sw.qcomms_parity, world)


def test_qcomms_config_bad_args():
    with pytest.raises(TypeError, match="qcomms.forward_precision: expected None, torch.float32"):
        de.QCommsConfig(torch.int8).validate()
    with pytest.raises(TypeError, match="qcomms.backward_precision: expected"):
        de.QCommsConfig(torch.bfloat16, torch.float64).validate()
    assert de.QCommsConfig() == de.QCommsConfig(torch.bfloat16, torch.bfloat16)
    # the module's and the sharders' argument check (one helper): a non-QCommsConfig, or a bad dtype inside one
    with pytest.raises(TypeError, match="qcomms: expected None or a QCommsConfig, got str"):
        de.QCommsConfig._checked("bf16")
    with pytest.raises(TypeError, match="qcomms.forward_precision: expected"):
        de.QCommsConfig._checked(de.QCommsConfig(torch.int8))
    assert de.QCommsConfig._checked(None) is None
