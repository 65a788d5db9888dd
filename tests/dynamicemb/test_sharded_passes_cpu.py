"""The sharded step's passes over its large arrays (pass_count.py, aten ops counted on the CPU with gloo ranks):
the sender's full passes over the n ids and over the n_u uniques per training step do not grow with the number of
tables and stay below stated bounds (the step before issue-37's cuts made 33 passes over the ids and 14 over the
uniques at world 1, pooling none; 49 and 14 at world 2). Behaviour, not timing."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import pass_count as pc  # noqa: E402

from dynamicemb._load import load_library  # noqa: E402

pytestmark = pytest.mark.skipif(not (load_library() and torch.distributed.is_available()),
                                reason="needs dynamicemb/_C.so and torch.distributed")

# (world, pooling) -> (passes over the ids, passes over the uniques), shard modules and collectives excluded.
# World 1, pooling none (14): the key sort, the table of each id in key order and its int16 code, the code sort
# and its two gathers (6), unique flags and indices (6), the output gather (1), the gradient sums (1); sum pooling
# adds the bag search, the weighting, the bag sums and the bag-gradient gather. World 2 adds the routing hash of
# every id (7 ops: the salt gather and XOR, op hash_keys, the owner from the top bits; 17 with fmix64 in torch
# ops) and, per received id, the owner's reorder (passes over the uniques). (The CUDA step's dedup is the kernel.)
BOUNDS = {(1, "none"): (14, 1), (1, "sum"): (23, 1), (2, "none"): (22, 8), (2, "sum"): (31, 8)}


@pytest.mark.parametrize("world", [1, 2])
def test_passes_do_not_grow_with_tables_and_stay_bounded(world):
    cases = [(T, 600, pooling, "sgd") for pooling in ("none", "sum") for T in (4, 9)]
    res = pc.run_cases(cases, world)
    got = {}
    for (T, _, pooling, _), summary, n, n_u in res:
        # the workload separates passes over the ids from those over the uniques, and both from the B bags of a
        # feature (bags of one id: B = n / T)
        assert n / T < 0.8 * n_u < 0.8 * n, (n, n_u, T)
        ids_p, uniq_p, ops = pc.totals(summary)
        got[(T, pooling)] = (ids_p, uniq_p)
        assert ids_p > 0 and ops > 0  # the counter saw the step
    for pooling in ("none", "sum"):
        assert got[(4, pooling)] == got[(9, pooling)], (pooling, got)
        bound = BOUNDS[(world, pooling)]
        assert got[(9, pooling)][0] <= bound[0] and got[(9, pooling)][1] <= bound[1], (pooling, got, bound)


def test_counter_sees_one_pass_per_op():
    """The counter's classification: an elementwise op over n rows is a pass over the ids, a gather of n_u rows
    from a large source is a pass over the uniques, a view is free."""
    x = torch.randn(1000, 4)
    idx = torch.randint(0, 1000, (300,))
    c = pc.OpCounter()
    with c:
        y = x * 2.0
        z = y[idx]
        y.view(-1)
        z.sum()
    s = pc.summarize(c.ops, [("a", len(c.ops))], n=1000, n_u=300, dim=4)
    assert s["a"]["id_passes"] == 1 and s["a"]["uniq_passes"] == 2 and s["a"]["ops"] == 3, s
