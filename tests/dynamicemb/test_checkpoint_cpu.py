"""Checkpoints of dynamic embedding tables on CPU: state_dict and dump/load round trips (bit-exact, after
eviction), incremental dumps, and refusal of corrupt or mismatched checkpoints leaving the module unchanged."""

import json
import os

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]


def make(dim=4, dtype=torch.float32, opt=None, cap=64, admission=0, policy="lfu"):
    opts = [DynamicEmbTableOptions(dim=dim, dtype=dtype, max_capacity=cap, bucket_capacity=16, score_policy=policy,
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


def same_tables(a, b, admission=False):
    pairs = zip(a.admission_tables, b.admission_tables) if admission else zip(a.tables, b.tables)
    for ta, tb in pairs:
        if ta is None or tb is None:
            if ta is not tb:
                return False
            continue
        ka, va, sa = items(ta)
        kb, vb, sb = items(tb)
        if not (torch.equal(ka, kb) and torch.equal(va.view(torch.uint8), vb.view(torch.uint8)) and torch.equal(sa, sb)):
            return False
    return True


def snapshot(m):
    """Everything a load may change: every state_dict tensor (tables, admission tables, buffers), the tables'
    epochs and stored items, and the optimizer's learning rate."""
    tensors = {k: v.clone() for k, v in m.state_dict().items() if isinstance(v, torch.Tensor)}
    tables = [t for t in m.tables + m.admission_tables if t is not None]
    return tensors, [t.epoch for t in tables], [[x.clone() for x in items(t)] for t in tables], m.optimizer.lr


def unchanged(m, snap):
    tensors, epochs, stored, lr = snap
    now_tensors, now_epochs, now_stored, now_lr = snapshot(m)
    return (now_tensors.keys() == tensors.keys() and all(torch.equal(now_tensors[k], v) for k, v in tensors.items())
            and now_epochs == epochs and now_lr == lr and len(now_stored) == len(stored)
            and all(torch.equal(a.view(torch.uint8) if a.is_floating_point() else a,
                                b.view(torch.uint8) if b.is_floating_point() else b)
                    for x, y in zip(now_stored, stored) for a, b in zip(x, y)))


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_dump_load_bit_exact(tmp_path, dtype):
    """Rows in their native dtype, scores and the admission tables' frequency counts, after eviction."""
    m = make(dtype=dtype, admission=2)
    train(m, 10, hi=150)
    assert m.sizes()[0] >= 56  # capacity pressure: 150 ids for 64 slots
    m.dump(str(tmp_path / "ck"), chunk_rows=16)
    m2 = make(dtype=dtype, admission=2)
    train(m2, 1, seed=3)  # different content first: load replaces it
    m2.load(str(tmp_path / "ck"))
    assert m2.tables[0].values.dtype == dtype
    assert same_tables(m, m2) and same_tables(m, m2, admission=True)
    assert float(m2.step) == float(m.step)
    assert [int(t.counters[0]) for t in m2.tables] == [int(t.counters[0]) for t in m.tables]  # op clocks


@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_dump_load_resumes_identically(tmp_path, policy):
    """Without capacity pressure a loaded module trains on exactly like the dumped one: the op clock (LRU scores,
    rows drawn for new ids) and the admission counts come back (under pressure too: test_robustness_cpu)."""
    m = make(policy=policy, admission=2)
    train(m, 4, hi=30)
    m.dump(str(tmp_path / "ck"))
    m2 = make(policy=policy, admission=2)
    m2.load(str(tmp_path / "ck"))
    train(m, 2, seed=5, hi=40)
    train(m2, 2, seed=5, hi=40)
    assert same_tables(m, m2) and same_tables(m, m2, admission=True)


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


def test_dump_corrupt_file_refused(tmp_path):
    m = make()
    train(m, 3)
    path = str(tmp_path / "ck")
    m.dump(path)
    dst = make()
    train(dst, 1, seed=4)
    snap = snapshot(dst)
    gen = json.load(open(os.path.join(path, "meta.json")))["generation"]
    fn = os.path.join(path, f"user.values.{gen}.bin")
    data = bytearray(open(fn, "rb").read())
    data[5] ^= 0xFF
    open(fn, "wb").write(bytes(data))
    with pytest.raises(ValueError, match=rf"user.values.{gen}.bin: CRC32 mismatch"):
        dst.load(path)
    assert unchanged(dst, snap)
    open(fn, "wb").write(bytes(data[:-3]))
    with pytest.raises(ValueError, match=r"expected \d+ bytes, got \d+ \(truncated or corrupt\)"):
        dst.load(path)
    with pytest.raises(ValueError, match=r"no meta.json"):
        dst.load(str(tmp_path))
    assert unchanged(dst, snap)


def _set(*path_and_value):
    *path, value = path_and_value

    def edit(meta):
        d = meta
        for k in path[:-1]:
            d = d[k]
        if value is _DEL:
            del d[path[-1]]
        else:
            d[path[-1]] = value
    return edit


_DEL = object()


# (module kwargs, meta.json edit, expected message); the edits hit the second table or module-wide fields, which
# a loader that applies while it validates would reach only after changing the first table
@pytest.mark.parametrize("kw, edit, match", [
    (dict(dim=8), None, r"table 'user' dim: expected 8, got 4"),
    (dict(dtype=torch.bfloat16), None, r"table 'user' dtype: expected 'bfloat16', got 'float32'"),
    (dict(opt=SGD(lr=0.1)), None, r"optimizer: expected 'sgd', got 'adam'"),
    ({}, _set("tables", "item", "count", _DEL), r"table 'item' count: missing"),
    ({}, _set("tables", "item", "files", "values", "crc32", _DEL), r"table 'item' files.values.crc32: missing"),
    ({}, _set("learning_rate", _DEL), r"learning_rate: expected a finite number >= 0, got None"),
    ({}, _set("tables", "item", "files", "keys", "bytes", "512"),
     r"table 'item' files.keys.bytes: expected an int >= 0, got '512'"),
    ({}, _set("tables", "item", "capacity", 128.0), r"table 'item' capacity: expected an int >= 1, got 128.0"),
    ({}, _set("learning_rate", "fast"), r"learning_rate: expected a finite number >= 0, got 'fast'"),
    ({}, _set("incremental", "no"), r"incremental: expected true or false, got 'no'"),
    ({}, _set("tables", "item", "clock", -1), r"table 'item' clock: expected an int in \[0, \d+\), got -1"),
    ({}, _set("tables", "item", "epoch", 2**32), r"table 'item' epoch: expected an int in \[0, \d+\), got 4294967296"),
    ({}, _set("tables", "user", "admission_table", "count", 10**9),
     r"table 'user' admission_table.count: expected <= capacity=64"),
    ({}, _set("tables", "item", "count", 3), r"table 'item' files.keys.bytes: expected 8 \* count=3 = 24"),
], ids=["dim", "dtype", "optimizer", "missing_count", "missing_crc32", "missing_lr", "str_bytes", "float_capacity",
        "str_lr", "str_incremental", "negative_clock", "epoch_range", "admission_count", "count_vs_bytes"])
def test_dump_mismatched_or_invalid_meta_refused(tmp_path, kw, edit, match):
    src = make(admission=2)
    train(src, 3)
    path = str(tmp_path / "ck")
    src.dump(path)
    if edit is not None:
        mp = os.path.join(path, "meta.json")
        meta = json.load(open(mp))
        edit(meta)
        json.dump(meta, open(mp, "w"))
    dst = make(admission=2, **kw)
    train(dst, 1, seed=4)
    snap = snapshot(dst)
    with pytest.raises(ValueError, match=match):
        dst.load(path)
    assert unchanged(dst, snap)


@pytest.mark.parametrize("entry, corrupt, match", [
    ("item.counters", lambda c: c.double(), r"item: counters: expected a 1-d int64 tensor"),
    ("item.counters", lambda c: torch.cat([c, c[:1]]), r"item: counters: expected a 1-d int64 tensor of 1..4"),
    ("item.counters", lambda c: torch.tensor([5, 10**6, 0, 0]), r"item: counters: expected a size \(entry 1\) in"),
    ("item.scores", lambda s: s.view(-1, 1), r"item: scores: expected a 1-d tensor"),
    ("item.epoch", lambda e: torch.tensor(2**32), r"item: epoch: expected one integer in \[0, 2\*\*32\)"),
    ("item.epoch", lambda e: torch.tensor(1.5), r"item: epoch: expected one integer"),
], ids=["counters_dtype", "counters_length", "counters_size", "scores_shape", "epoch_range", "epoch_dtype"])
def test_state_dict_corrupt_table_refused(entry, corrupt, match):
    """A bad entry of the last table is refused before the first table is replaced."""
    src = make(admission=2)
    train(src, 3)
    dst = make(admission=2)
    train(dst, 1, seed=9)
    sd = dict(src.state_dict())
    sd[entry] = corrupt(sd[entry])
    snap = snapshot(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(sd)
    assert unchanged(dst, snap)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("edit, match", [
    (lambda sd: sd.pop("step"), r"missing entry 'step'"),
    (lambda sd: sd.pop("user.admission.counters"), r"missing entry 'user.admission.counters'"),
    (lambda sd: sd.__setitem__("item.admission.keys", sd["item.keys"]), r"unexpected entry 'item.admission.keys'"),
], ids=["missing_buffer", "missing_admission_entry", "unexpected_admission_entry"])
def test_state_dict_incomplete_refused(strict, edit, match):
    """torch raises for missing/unexpected keys only after every module loaded, and calls each module's loader as
    strict even under strict=False: an incomplete checkpoint must be refused before anything is applied."""
    src, dst = make(admission=2), make(admission=2)
    train(src, 2)
    train(dst, 1, seed=9)
    sd = dict(src.state_dict())
    edit(sd)
    snap = snapshot(dst)
    with pytest.raises(RuntimeError, match=match):
        dst.load_state_dict(sd, strict=strict)
    assert unchanged(dst, snap)


@pytest.mark.parametrize("policy", ["epoch_lru", "epoch_lfu"])
def test_epoch_round_trip(tmp_path, policy):
    """state_dict and dump both restore each table's epoch (the high 32 bits of new scores), so training after a
    load scores rows as before it."""
    m = make(policy=policy)
    m.set_epoch(3)
    train(m, 3)
    m.set_epoch(7)
    m2 = make(policy=policy)
    m2.load_state_dict(m.state_dict())
    assert [t.epoch for t in m2.tables] == [7, 7]
    m.dump(str(tmp_path / "ck"))
    m3 = make(policy=policy)
    m3.load(str(tmp_path / "ck"))
    assert [t.epoch for t in m3.tables] == [7, 7] and same_tables(m, m3)
    train(m, 2, seed=5)
    train(m2, 2, seed=5)
    assert same_tables(m, m2)
    _, _, s = items(m2.tables[0])
    assert int((s.view(torch.int64) >> 32).max()) == 7
