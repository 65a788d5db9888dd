"""The eviction order on CUDA (skip without a GPU): the table kernels' eviction scan (probe.cuh scan_bucket: ranks
score << 8 | digest in a compare tree, key words only on a tie of rank or a score >= 2^56, victim_exact) and the
fused step's insert (insert_kernels.cu) evict the slot of least (score, digest, key), so hybrid tables (any
hbm_slots) evict the same keys as all-HBM tables and as the CPU twin. The batches cap each bucket's keys at its
evictable slots, so no choice is left to thread order."""

import os
import sys

import pytest
import torch

from dynamicemb._hybrid import HybridTable
from dynamicemb._load import load_library
from dynamicemb._table import ScoredHashTable

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import _contents  # noqa: E402
from table_helpers import key_tensor  # noqa: E402
from tie_helpers import (BIG, INIT, capped_per_bucket, small_module, tied_ops_agree, tied_steps_agree,  # noqa: E402
                         victims_in_order)

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


@pytest.mark.parametrize("bc", [16, 128, 256])
@pytest.mark.parametrize("hbm_rows", [None, 0, 5])
def test_victims_in_eviction_order_cuda(hbm_rows, bc):
    victims_in_order("cuda", hbm_rows, bc)


@pytest.mark.parametrize("policy", ["lru", "epoch_lru", "big"])
@pytest.mark.parametrize("hbm_rows", [0, 48, 128, 256])
def test_hybrid_evicts_like_all_hbm_on_ties_cuda(hbm_rows, policy):
    """(Not LFU here: its new keys score 1-3 and may evict one another, so a CUDA batch's outcome depends on thread
    order in any layout; LRU's and "big"'s new keys outscore every older key, so only older keys are evicted.)"""
    assert tied_ops_agree("cuda", hbm_rows, policy) > 0


@pytest.mark.parametrize("big", [False, True], ids=["lru", "big_scores"])
@pytest.mark.parametrize("nb,bc", [(16, 16), (4, 128), (2, 256)])
def test_cuda_tables_evict_like_the_cpu_twin(nb, bc, big):
    """The same tied sequence on a CUDA hybrid table and the CPU twin's all-HBM table: the same contents. (4, 128):
    ~50 keys of a bucket share each op's clock, spread over every lane of the eviction tile. big_scores: customized
    scores above 2^56 (few values: ties), which the CUDA scan leaves to victim_exact."""
    pol = "customized" if big else "lru"
    kw = dict(bucket_capacity=bc, initializer=INIT, score_policy=pol)
    c = ScoredHashTable(nb * bc, 8, device="cpu", **kw)
    d = HybridTable(nb * bc, 8, device="cuda", hbm_rows=5 * nb, **kw)
    g = torch.Generator().manual_seed(3 + bc)
    for i in range(10):
        ks = capped_per_bucket(torch.randint(-(1 << 62), 1 << 62, (200,), generator=g).tolist(), nb, bc // 2)
        keys = key_tensor(ks, torch.int64)
        sc = (torch.randint(0, 3, (keys.numel(),), generator=g) + BIG + 3 * i) if big else None
        if i % 2:
            v = torch.randn(keys.numel(), 8, generator=g)
            c.insert_or_assign(keys, v, sc)
            d.insert_or_assign(keys.cuda(), v.cuda(), None if sc is None else sc.cuda())
        else:
            c.find_or_insert(keys, sc)
            d.find_or_insert(keys.cuda(), None if sc is None else sc.cuda())
        for x, y in zip(_contents(c), _contents(d)):
            assert torch.equal(x, y.cpu()), i


@pytest.mark.parametrize("policies", [("lru", "lru"), ("lru", "epoch_lru")])
def test_hybrid_step_evicts_like_all_hbm_cuda(policies):
    """The fused step's insert kernel (m.use_kernels) under eviction pressure with tied step scores: hybrid ==
    all-HBM (outputs; rows with their optimizer state; scores). (Not LFU: its new ids score 1 and never evict, so
    where a step brings a bucket more new ids than it has free slots, thread order picks the ones refused, in any
    layout; device call 2 saw hybrid and all-HBM differ there.)"""
    assert small_module("hybrid", "cuda", policies).use_kernels
    tied_steps_agree("cuda", policies)
