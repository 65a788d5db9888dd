"""Robustness of dynamicemb on CPU (issue 29, item 3): argument and checkpoint validation, empty batches,
refused inserts, resuming from checkpoints under growth and eviction, atomic dumps and concurrent use."""

import math

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables, RefusedInsertError
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


def make(cap=128, init_cap=None, policy="lru", opt=None, on_refused="warn", dim=4, grow=0.75, seed=0):
    opts = [DynamicEmbTableOptions(dim=dim, max_capacity=cap, init_capacity=init_cap, bucket_capacity=16,
                                   score_policy=policy, on_refused=on_refused, grow_load_factor=grow),
            DynamicEmbTableOptions(dim=2, max_capacity=64, bucket_capacity=16, on_refused=on_refused)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1], pooling="sum", optimizer=opt or Adam(lr=0.05),
                                         table_names=["user", "item"])


def batch(gen, hi, n=40, dims=(4, 2)):
    ids = torch.randint(0, hi, (n,), generator=gen)
    offsets = torch.tensor([0, n // 4, n // 2, 3 * n // 4, n])  # F=2, B=2
    return ids, offsets, torch.randn(2, sum(dims), generator=gen)


def step(m, b):
    ids, offsets, g = b
    (m(ids, offsets) * g).sum().backward()


def train(m, steps, seed, hi):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        step(m, batch(gen, hi, dims=(m.dims[0], m.dims[1])))


def contents(table):
    """Sorted (keys, rows, scores) of a table."""
    k, v, s = table.items()
    o = torch.argsort(k.view(torch.int64))
    return k[o], v[o], s[o]


def same(a, b, slots=False):
    for ta, tb in zip(a.tables, b.tables):
        if slots:
            if not (torch.equal(ta.keys, tb.keys) and torch.equal(ta.values, tb.values)
                    and torch.equal(ta.scores, tb.scores) and torch.equal(ta.counters, tb.counters)):
                return False
        elif not all(torch.equal(x, y) for x, y in zip(contents(ta), contents(tb))):
            return False
    return True


def state(m):
    return {k: v.clone() for k, v in m.state_dict().items() if isinstance(v, torch.Tensor)}


def unchanged(m, before):
    now = state(m)
    return now.keys() == before.keys() and all(torch.equal(now[k], v) for k, v in before.items())


# ---------------------------------------------------------------------- learning rate and buffers
@pytest.mark.parametrize("lr, exc", [(math.nan, ValueError), (math.inf, ValueError), (-0.5, ValueError),
                                     (True, TypeError), ("0.1", TypeError)])
def test_set_learning_rate_refuses_bad_values(lr, exc):
    m = make()
    train(m, 2, 0, 300)
    before = state(m)
    with pytest.raises(exc, match=r"lr: expected a finite number >= 0, got"):
        m.set_learning_rate(lr)
    assert unchanged(m, before) and m.optimizer.lr == 0.05
    train(m, 1, 1, 300)
    assert all(bool(torch.isfinite(t.values).all()) for t in m.tables)


@pytest.mark.parametrize("entry, value, match", [
    ("learning_rate", math.nan, r"learning_rate: expected a finite number >= 0, got nan"),
    ("learning_rate", -1e-3, r"learning_rate: expected a finite number >= 0, got -0.001"),
    ("step", -3.0, r"step: expected a finite number >= 0, got -3.0"),
    ("step", math.inf, r"step: expected a finite number >= 0, got inf"),
    ("refused_count", [-1, 0], r"refused_count: expected counts >= 0, got \[-1, 0\]"),
])
def test_load_state_dict_refuses_bad_buffers(entry, value, match):
    src, dst = make(), make()
    train(src, 2, 0, 300)
    train(dst, 1, 5, 300)
    sd = dict(src.state_dict())
    sd[entry] = torch.tensor(value, dtype=sd[entry].dtype)
    before = state(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(sd)
    assert unchanged(dst, before)


# ---------------------------------------------------------------------- arguments
def test_feature_table_map_must_be_ints():
    o = [DynamicEmbTableOptions(dim=2, max_capacity=64, bucket_capacity=16)] * 2
    for bad in ([0.9, 1], [True, 0], ["0", 1]):
        with pytest.raises(TypeError, match=r"feature_table_map: expected a sequence of ints, got"):
            BatchedDynamicEmbeddingTables(o, feature_table_map=bad)
    m = BatchedDynamicEmbeddingTables(o, feature_table_map=[torch.tensor(1), 0])
    assert m.feature_table_map == [1, 0]


def test_unknown_state_dict_key():
    src, dst = make(), make()
    train(src, 2, 0, 300)
    train(dst, 1, 5, 300)
    sd = dict(src.state_dict())
    sd["bogus"] = torch.randn(3)
    before = state(dst)
    with pytest.raises(RuntimeError, match=r"unexpected entry 'bogus'"):
        dst.load_state_dict(sd)
    assert unchanged(dst, before)
    r = dst.load_state_dict(sd, strict=False)
    assert r.unexpected_keys == ["bogus"] and same(dst, src)


@pytest.mark.parametrize("table, exc", [(-1, ValueError), (2, ValueError), (5, ValueError), (True, TypeError),
                                        (0.0, TypeError)])
def test_rows_table_index(table, exc):
    m = make()
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 1000, (5,), generator=gen)
    w = torch.randn(5, 2, generator=gen)
    before = state(m)
    with pytest.raises(exc, match=r"table: expected an int in \[0, 2\), got"):
        m.set_rows(table, ids, w)
    with pytest.raises(exc, match=r"table: expected an int in \[0, 2\), got"):
        m.get_rows(table, ids)
    assert unchanged(m, before)
