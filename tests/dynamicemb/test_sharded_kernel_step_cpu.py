"""The sharded module's CUDA step on CPU gloo ranks: the dedup kernel replaced by its CPU twin (dedup_twin.py:
uniques in a random order, garbage past the unique count), the rest as on a GPU (the uniques' code sort, the
inverse through it, embedding_bag pooling and its backward, embedding backward for pooling none). Every parity
case of test_sharded_cpu.py (routing, pooling, optimizer, clipping, per-sample weights, admission, uint64 keys,
empty steps; weights with a gradient) must match the single-rank module fed all ranks' batches."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import dedup_twin  # noqa: E402
import shard_workers as sw  # noqa: E402
from dist_helpers import run_ranks  # noqa: E402

from dynamicemb._load import load_library  # noqa: E402

pytestmark = pytest.mark.skipif(not (load_library() and torch.distributed.is_available()),
                                reason="needs dynamicemb/_C.so and torch.distributed")


@pytest.mark.parametrize("world,cases", [(1, sw.CASES_2 + sw.CASES_3), (2, sw.CASES_2), (3, sw.CASES_3)],
                         ids=["w1", "w2", "w3"])
def test_kernel_step_parity(world, cases):
    run_ranks(dedup_twin.parity_with_twin, world, cases, timeout=300)


@pytest.mark.parametrize("world", [1, 2])
def test_kernel_step_qcomms(world):
    # rows / gradients rounded to bf16 / fp16 on the wire through the CUDA step's ops
    run_ranks(dedup_twin.qcomms_with_twin, world, timeout=300)


@pytest.mark.parametrize("twin", [True, False], ids=["cuda_step", "cpu_step"])
@pytest.mark.parametrize("world", [1, 2])
def test_weight_gradients(world, twin):
    run_ranks(dedup_twin.psw_grad_parity, world, twin, timeout=300)


def test_twin_keeps_the_op_contract():
    """The twin's outputs: every id's unique holds its (table, key); counts and bags as the op defines them."""
    g = torch.Generator().manual_seed(5)
    F, B = 3, 4
    lengths = torch.randint(0, 4, (F * B,), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    ids = torch.randint(0, 9, (int(off[-1]),), generator=g)
    ft = torch.tensor([0, 1, 0], dtype=torch.int32)
    inv, bag, uk, ut, cnt = dedup_twin.dedup_cpu(ids, off, ft, B, None)
    n_u = int(cnt)
    bag_ref = torch.repeat_interleave(torch.arange(F * B), lengths)
    assert torch.equal(bag.long(), bag_ref)
    tbl = ft.long()[bag_ref // B]
    assert torch.equal(uk[inv.long()], ids) and torch.equal(ut[inv.long()].long(), tbl)
    assert n_u == len(set(zip(tbl.tolist(), ids.tolist())))
    assert int(inv.max()) == n_u - 1 and int(inv.min()) == 0
