"""Checkpoints of dynamic embedding tables on CPU: state_dict and dump/load round trips (bit-exact, after
eviction), incremental dumps, and refusal of corrupt or mismatched checkpoints leaving the module unchanged."""

import os

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


def make(dim=4, dtype=torch.float32, opt=None, cap=64, admission=0):
    opts = [DynamicEmbTableOptions(dim=dim, dtype=dtype, max_capacity=cap, bucket_capacity=16, score_policy="lfu",
                                   admission_threshold=admission),
            DynamicEmbTableOptions(dim=2, dtype=dtype, max_capacity=128, bucket_capacity=16)]
    return BatchedDynamicEmbeddingTables(opts, [0, 1], pooling="sum", optimizer=opt or Adam(lr=0.01),
                                         table_names=["user", "item"])


def train(m, steps=6, seed=0, hi=400):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, hi, (60,), generator=gen)
        offsets = torch.arange(0, 61, 6)  # F=2, B=5, 6 ids per bag
        (m(ids, offsets) * torch.randn(5, m.dims[0] + m.dims[1], generator=gen)).sum().backward()


def items(table):
    k, v, s = table.items()
    order = torch.argsort(k.view(torch.int64))
    return k[order], v[order], s[order]


def same_tables(a, b):
    for ta, tb in zip(a.tables, b.tables):
        ka, va, sa = items(ta)
        kb, vb, sb = items(tb)
        if not (torch.equal(ka, kb) and torch.equal(va.view(torch.uint8), vb.view(torch.uint8)) and torch.equal(sa, sb)):
            return False
    return True


def snapshot(m):
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in m.state_dict().items()}


def unchanged(m, snap):
    now = m.state_dict()
    return all(torch.equal(now[k], v) for k, v in snap.items() if isinstance(v, torch.Tensor))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_state_dict_round_trip_after_eviction(dtype):
    m = make(dtype=dtype, admission=2)
    train(m, 10, hi=150)
    assert m.sizes()[0] >= 56 and m.sizes()[1] >= 112  # capacity pressure: 150 ids for 64 / 128 slots
    m2 = make(dtype=dtype, admission=2)
    m2.load_state_dict(m.state_dict())
    assert same_tables(m, m2)
    for k, v in m.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, m2.state_dict()[k]), k
    # the two modules keep training identically
    train(m, 2, seed=5, hi=150)
    train(m2, 2, seed=5, hi=150)
    assert same_tables(m, m2)


@pytest.mark.parametrize("kw, match", [
    (dict(dim=8), r"table 'user' dim: expected 8, got 4"),
    (dict(dtype=torch.float16), r"table 'user' dtype: expected 'float16', got 'float32'"),
    (dict(opt=SGD(lr=0.1)), r"optimizer: expected 'sgd', got 'adam'"),
])
def test_state_dict_mismatch_refused(kw, match):
    src = make()
    train(src, 2)
    dst = make(**kw)
    train(dst, 1, seed=9)
    snap = snapshot(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(src.state_dict())
    assert unchanged(dst, snap)


def test_rowwise_adagrad_round_trip_and_unpadded_layout_refused():
    """RowWiseAdagrad rows are [emb | state | 3 padding] (row_width 8 at dim 4): the checkpoint records it, round
    trips bit-exact, and a checkpoint of unpadded rows (no row_width: dim + state_dim = 5) is refused unchanged."""
    src = make(opt=RowWiseAdagrad(lr=0.1))
    train(src, 3)
    dst = make(opt=RowWiseAdagrad(lr=0.1))
    dst.load_state_dict(src.state_dict())
    assert same_tables(src, dst) and src.tables[0].value_dim == 8
    sd = dict(src.state_dict())
    meta = {**sd["_extra_state"], "tables": {k: dict(v) for k, v in sd["_extra_state"]["tables"].items()}}
    del meta["tables"]["user"]["row_width"]
    sd["_extra_state"] = meta
    other = make(opt=RowWiseAdagrad(lr=0.1))
    snap = snapshot(other)
    with pytest.raises(RuntimeError, match=r"table 'user' row_width: expected 8, got 5"):
        other.load_state_dict(sd)
    assert unchanged(other, snap)


def test_state_dict_missing_entry_refused():
    src, dst = make(), make()
    train(src, 2)
    sd = dict(src.state_dict())
    del sd["item.values"]
    snap = snapshot(dst)
    with pytest.raises(RuntimeError, match=r"missing entry 'item.values'"):
        dst.load_state_dict(sd)
    assert unchanged(dst, snap)


def test_dump_load_bit_exact(tmp_path):
    m = make()
    train(m)
    m.dump(str(tmp_path / "ck"), chunk_rows=16)
    m2 = make()
    train(m2, 1, seed=3)  # different content first: load replaces it
    m2.load(str(tmp_path / "ck"))
    assert same_tables(m, m2)
    assert float(m2.step) == float(m.step)


def test_incremental_dump(tmp_path):
    m = make(opt=SGD(lr=0.1))
    train(m, 3)
    m.dump(str(tmp_path / "full"))
    m2 = make(opt=SGD(lr=0.1))
    m2.load(str(tmp_path / "full"))
    train(m, 2, seed=7, hi=40)  # touches few ids: LFU scores of those grow
    k, _, s = items(m.tables[0])
    thr = int(s.max())
    m.dump(str(tmp_path / "inc"), score_threshold=thr)
    import json
    meta = json.load(open(tmp_path / "inc" / "meta.json"))
    assert meta["incremental"] and meta["tables"]["user"]["count"] == int((s >= thr).sum()) > 0
    m2.load(str(tmp_path / "inc"))
    k2, v2, s2 = items(m2.tables[0])
    hot = k[s >= thr]
    vm = m.tables[0].find(hot).values
    r = m2.tables[0].find(hot)
    assert bool(r.found.all()) and torch.equal(r.values, vm)


def test_dump_corrupt_or_mismatched_refused(tmp_path):
    m = make()
    train(m, 3)
    path = str(tmp_path / "ck")
    m.dump(path)
    dst = make()
    train(dst, 1, seed=4)
    snap = snapshot(dst)
    fn = os.path.join(path, "user.values.bin")
    data = bytearray(open(fn, "rb").read())
    data[5] ^= 0xFF
    open(fn, "wb").write(bytes(data))
    with pytest.raises(ValueError, match=r"user.values.bin: CRC32 mismatch"):
        dst.load(path)
    assert unchanged(dst, snap)
    open(fn, "wb").write(bytes(data[:-3]))
    with pytest.raises(ValueError, match=r"expected \d+ bytes, got \d+ \(truncated or corrupt\)"):
        dst.load(path)
    other = make(dim=8)
    with pytest.raises(ValueError, match=r"table 'user' dim: expected 8, got 4"):
        other.load(path)
    with pytest.raises(ValueError, match=r"no meta.json"):
        dst.load(str(tmp_path))
    assert unchanged(dst, snap)
