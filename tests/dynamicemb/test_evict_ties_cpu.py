"""The eviction order on the CPU twin (table_types.h evicts_before): a full bucket's victim is its slot of least
(score, digest, key), so a hybrid table, whose inserts claim each bucket's HBM slots first and so put keys in other
slots, evicts the same keys as an all-HBM table (issue 32), and the training step of a hybrid module equals an
all-HBM module's under eviction pressure (rows, optimizer state, scores)."""

import os
import sys

import pytest
import torch

from dynamicemb._load import load_library

sys.path.insert(0, os.path.dirname(__file__))
from table_helpers import keys_in_bucket  # noqa: E402
from tie_helpers import digest, evict_order, tied_ops_agree, tied_steps_agree, victims_in_order  # noqa: E402

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


@pytest.mark.parametrize("bc", [16, 128, 256])
@pytest.mark.parametrize("hbm_rows", [None, 0, 5])
def test_victims_in_eviction_order_cpu(hbm_rows, bc):
    victims_in_order("cpu", hbm_rows, bc)


@pytest.mark.parametrize("policy", ["lru", "lfu", "epoch_lru", "big"])
@pytest.mark.parametrize("hbm_rows", [0, 48, 128, 256])
def test_hybrid_evicts_like_all_hbm_on_ties_cpu(hbm_rows, policy):
    """hbm_rows 48 / 128 (3 / 8 HBM slots per bucket): the keys sit in other slots than in the all-HBM table, yet
    every op evicts the same keys (with main's rule, the lowest slot of each layout, these failed)."""
    assert tied_ops_agree("cpu", hbm_rows, policy) > 0


def test_hybrid_module_evicts_like_all_hbm_cpu():
    tied_steps_agree("cpu")


def test_customized_ties_by_digest_then_key_cpu():
    """Customized scores: the least score goes first whatever its digest; among equal scores the least digest,
    then (equal digests) the least key in unsigned order."""
    from dynamicemb._table import ScoredHashTable

    t = ScoredHashTable(16, 2, bucket_capacity=16, score_policy="customized")
    ks = keys_in_bucket(0, 1, 16)
    sc = torch.tensor([7 if i % 3 else 5 for i in range(16)])
    t.insert_or_assign(torch.tensor(ks), torch.randn(16, 2), sc)
    expect = sorted(zip(ks, sc.tolist()), key=lambda x: evict_order(x[0], x[1]))
    got = []
    for j in range(6):
        r = t.insert_and_evict(torch.tensor([1000 + j]), torch.randn(1, 2), torch.tensor([9]))
        got.append((int(r.evicted_keys[0]), int(r.evicted_scores[0])))
    assert got == expect[:6]
    assert all(s == 5 for _, s in got[:6]) and [digest(k) for k, _ in got] == sorted(digest(k) for k, _ in got)
