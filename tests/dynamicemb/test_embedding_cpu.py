"""BatchedDynamicEmbeddingTables on CPU: parity with dense PyTorch references, eviction, admission, refused
inserts, train/eval, bad input. Runs in CI (needs the op library's CPU twin)."""

import math
import warnings
import zlib

import pytest
import torch
import torch.nn.functional as Fn

from dynamicemb._batched import BatchedDynamicEmbeddingTables, RefusedInsertError
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbInitializer, DynamicEmbTableOptions

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")

V = 40  # ids 0..V-1, all pre-inserted (no eviction)
B = 5


def make_batch(gen, F, B=B, max_len=3, weighted=False):
    lengths = torch.randint(0, max_len + 1, (F * B,), generator=gen)
    ids = torch.randint(0, V, (int(lengths.sum()),), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    w = torch.rand(ids.numel(), generator=gen) + 0.5 if weighted else None
    return ids, offsets, w


def reference_forward(weights, fmap, ids, offsets, psw, pooling, F, B):
    outs = []
    for f in range(F):
        lo, hi = int(offsets[f * B]), int(offsets[(f + 1) * B])
        W = weights[fmap[f]]
        idf = ids[lo:hi]
        if pooling == "none":
            outs.append(Fn.embedding(idf, W))
            continue
        off = offsets[f * B:(f + 1) * B] - lo
        w = psw[lo:hi] if psw is not None else None
        outs.append(Fn.embedding_bag(idf, W, off, mode=pooling, per_sample_weights=w,
                                     sparse=isinstance(W, torch.Tensor) and W.is_sparse))
    return torch.cat(outs, dim=0 if pooling == "none" else 1)


def build(dims, fmap, pooling, opt, gen, **opt_kw):
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=1024, bucket_capacity=128, **opt_kw) for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, fmap, pooling=pooling, optimizer=opt)
    w0 = [torch.randn(V, d, generator=gen) * 0.1 for d in dims]
    for t in range(len(dims)):
        m.set_rows(t, torch.arange(V), w0[t])
    return m, w0


def lazy_update(opt, W, state, g, rows, step):
    """Hand-written lazy reference: only ``rows`` (the ids of the step) change, weight decay included (fused in
    the row update); ``state`` holds what the optimizer keeps per row. torch.optim has no lazy twin of these."""
    lr, wd = opt.lr, opt.weight_decay
    for r in rows:
        gr = g[r].clone()
        if isinstance(opt, Adam) and opt.decoupled_weight_decay:
            W[r] *= 1.0 - lr * wd  # AdamW: decay the weight, not the gradient
        else:
            gr += wd * W[r]
        if isinstance(opt, Adam):
            b1, b2 = opt.betas
            m, v = state["m"][r], state["v"][r]
            m.mul_(b1).add_((1.0 - b1) * gr)
            v.mul_(b2).add_((1.0 - b2) * gr * gr)
            step_size = lr * math.sqrt(1.0 - b2 ** step) / (1.0 - b1 ** step)  # SparseAdam's form
            W[r] -= step_size * m / (v.sqrt() + opt.eps)
        elif isinstance(opt, RowWiseAdagrad):
            state["s"][r] += (gr * gr).mean()
            W[r] -= lr * gr / (state["s"][r].sqrt() + opt.eps)
        elif isinstance(opt, Adagrad):
            state["s"][r] += gr * gr
            W[r] -= lr * gr / (state["s"][r].sqrt() + opt.eps)
        else:
            W[r] -= lr * gr


OPTIMIZERS = {
    "sgd": lambda: SGD(lr=0.3),
    "adagrad": lambda: Adagrad(lr=0.2),
    "rowwise_adagrad": lambda: RowWiseAdagrad(lr=0.2, eps=1e-8),
    "adam": lambda: Adam(lr=0.05),
    "sgd_wd": lambda: SGD(lr=0.3, weight_decay=0.1),
    "adagrad_wd": lambda: Adagrad(lr=0.2, weight_decay=0.1),
    "rowwise_adagrad_wd": lambda: RowWiseAdagrad(lr=0.2, eps=1e-8, weight_decay=0.1),
    "adam_wd": lambda: Adam(lr=0.05, weight_decay=0.1),
    "adamw": lambda: Adam(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True),
    "sgd_clip_norm": lambda: SGD(lr=0.3, max_grad_norm=0.5),
    "sgd_clip_value": lambda: SGD(lr=0.3, max_grad_value=0.05),
}
# checked against torch.optim on dense weights (SparseAdam on sparse ones); the others against lazy_update
TORCH_OPTIM = {"sgd", "adagrad", "adam", "sgd_clip_norm", "sgd_clip_value"}


@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_parity_with_dense_reference(pooling, opt_name):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{pooling}/{opt_name}".encode()))  # same in every process
    dims = [8, 8] if pooling == "none" else [8, 4]
    fmap = [0, 1, 1]
    F = len(fmap)
    opt = OPTIMIZERS[opt_name]()
    m, w0 = build(dims, fmap, pooling, opt, gen)
    sparse = opt_name == "adam"
    ref = [w.clone().requires_grad_(True) for w in w0]
    topt = None
    if opt_name in ("sgd", "sgd_clip_norm", "sgd_clip_value"):
        topt = torch.optim.SGD(ref, lr=opt.lr)
    elif opt_name == "adagrad":
        topt = torch.optim.Adagrad(ref, lr=opt.lr)
    elif opt_name == "adam":
        topt = torch.optim.SparseAdam(ref, lr=opt.lr)
    assert (topt is not None) == (opt_name in TORCH_OPTIM)
    state = [{"s": torch.zeros(V, 1 if isinstance(opt, RowWiseAdagrad) else d), "m": torch.zeros(V, d),
              "v": torch.zeros(V, d)} for d in dims]
    for step in range(3):
        ids, offsets, psw = make_batch(gen, F, weighted=pooling == "sum" and step % 2 == 0)
        out = m(ids, offsets, per_sample_weights=psw)
        if sparse:
            outs = []
            for f in range(F):
                lo, hi = int(offsets[f * B]), int(offsets[(f + 1) * B])
                off = offsets[f * B:(f + 1) * B] - lo
                mode = pooling if pooling != "none" else "sum"
                if pooling == "none":
                    outs.append(Fn.embedding(ids[lo:hi], ref[fmap[f]], sparse=True))
                else:
                    outs.append(Fn.embedding_bag(ids[lo:hi], ref[fmap[f]], off, mode=mode, sparse=True,
                                                 per_sample_weights=None if psw is None else psw[lo:hi]))
            out_ref = torch.cat(outs, dim=0 if pooling == "none" else 1)
        else:
            out_ref = reference_forward(ref, fmap, ids, offsets, psw, pooling, F, B)
        torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=1e-6)
        R = torch.randn(out.shape, generator=gen)
        (out * R).sum().backward()
        (out_ref * R).sum().backward()
        if opt_name == "sgd_clip_norm":
            torch.nn.utils.clip_grad_norm_(ref, opt.max_grad_norm)
        if opt_name == "sgd_clip_value":
            torch.nn.utils.clip_grad_value_(ref, opt.max_grad_value)
        with torch.no_grad():
            if topt is not None:
                topt.step()
            else:
                for t, f_ids in enumerate(_ids_per_table(ids, offsets, fmap, B, len(dims))):
                    lazy_update(opt, ref[t], state[t], ref[t].grad, f_ids, step + 1)
        for r in ref:
            r.grad = None
    for t in range(len(dims)):
        w, _, found = m.get_rows(t, torch.arange(V))
        assert bool(found.all())
        torch.testing.assert_close(w, ref[t].detach(), atol=1e-6, rtol=1e-6)


def _ids_per_table(ids, offsets, fmap, B, T):
    out = [set() for _ in range(T)]
    for f, t in enumerate(fmap):
        lo, hi = int(offsets[f * B]), int(offsets[(f + 1) * B])
        out[t].update(ids[lo:hi].tolist())
    return [sorted(s) for s in out]


def test_adam_state_inline_and_lr_change():
    gen = torch.Generator().manual_seed(3)
    m, w0 = build([4], [0], "sum", Adam(lr=0.1), gen)
    ids = torch.tensor([1, 2, 2])
    offsets = torch.tensor([0, 1, 3])
    m(ids, offsets).sum().backward()
    w, st, _ = m.get_rows(0, torch.tensor([1, 2, 3]))
    assert st.shape == (3, 8)
    g = torch.tensor([[1.0] * 4, [2.0] * 4, [0.0] * 4])
    torch.testing.assert_close(st[:, :4], 0.1 * g)  # m = (1 - b1) g
    torch.testing.assert_close(st[:, 4:], 0.001 * g * g)  # v = (1 - b2) g^2
    torch.testing.assert_close(w[:2], w0[0][1:3] - 0.1, atol=1e-6, rtol=0)  # first Adam step moves by lr
    m.set_learning_rate(0.0)
    before, _, _ = m.get_rows(0, ids)
    m(ids, offsets).sum().backward()
    after, _, _ = m.get_rows(0, ids)
    assert torch.equal(before, after)
    assert m.get_learning_rate() == 0.0 and float(m.step) == 2.0


def test_rowwise_adagrad_rows_padded_to_4_columns():
    """RowWiseAdagrad's one state column is padded to a 4-aligned row (4-wide kernels); the padding is never read,
    keeps the initial state value through updates, and is invisible through get_rows / set_rows."""
    gen = torch.Generator().manual_seed(5)
    m, w0 = build([16, 6], [0, 1], "sum", RowWiseAdagrad(lr=0.2, eps=1e-8), gen)
    assert m.row_widths == [20, 7] and m.tables[0].value_dim == 20 and m.tables[1].value_dim == 7
    ids = torch.tensor([1, 2, 2, 3])
    offsets = torch.tensor([0, 1, 3, 3, 4])
    m(ids, offsets).sum().backward()
    w, st, _ = m.get_rows(0, torch.tensor([1, 2, 5]))
    assert st.shape == (3, 1)
    g = torch.tensor([1.0, 2.0, 0.0])  # bag sums of 1.0 per occurrence, all 16 columns
    torch.testing.assert_close(st[:, 0], g * g)
    torch.testing.assert_close(w, w0[0][[1, 2, 5]] - 0.2 * (g / (g + 1e-8))[:, None].expand(3, 16))
    rows = m.tables[0].find(torch.tensor([1, 2, 5])).values
    assert torch.equal(rows[:, 17:], torch.zeros(3, 3))  # padding: initial state value
    m.set_rows(0, torch.tensor([7]), torch.ones(1, 16), torch.full((1, 1), 0.5))
    w, st, _ = m.get_rows(0, torch.tensor([7]))
    assert torch.equal(w, torch.ones(1, 16)) and torch.equal(st, torch.full((1, 1), 0.5))
    with pytest.raises(ValueError, match=r"state: expected shape \(1, 1\), got \(1, 4\)"):
        m.set_rows(0, torch.tensor([7]), torch.ones(1, 16), torch.zeros(1, 4))


def test_eval_does_not_insert_and_uses_eval_initializer():
    opts = DynamicEmbTableOptions(dim=4, max_capacity=256, eval_initializer=DynamicEmbInitializer("constant", value=0.25))
    m = BatchedDynamicEmbeddingTables([opts], pooling="none")
    m.set_rows(0, torch.tensor([7]), torch.ones(1, 4))
    m.eval()
    out = m(torch.tensor([7, 8, 9]), torch.tensor([0, 3]))
    assert torch.equal(out, torch.tensor([[1.0] * 4, [0.25] * 4, [0.25] * 4]))
    assert m.sizes() == [1]
    with torch.no_grad():
        m.train()
        m(torch.tensor([8]), torch.tensor([0, 1]))  # training forward without grad still inserts
    assert m.sizes() == [2]


def test_initializers_and_default_bounds():
    cap = 1024
    for kind in ("uniform", "normal", "truncated_normal", "constant"):
        o = DynamicEmbTableOptions(dim=16, max_capacity=cap, initializer=DynamicEmbInitializer(kind, value=0.3))
        m = BatchedDynamicEmbeddingTables([o], pooling="none", optimizer=SGD(lr=0.0))
        ids = torch.arange(1, 501)
        out = m(ids, torch.tensor([0, 500])).detach()
        b = (1.0 / cap) ** 0.5
        if kind == "constant":
            assert torch.all(out == 0.3)
        elif kind == "uniform":
            assert out.min() >= -b and out.max() <= b and out.std() > b / 3
        elif kind == "truncated_normal":
            assert out.min() >= -b - 1e-6 and out.max() <= b + 1e-6
        else:
            assert abs(float(out.std()) - b) < 0.2 * b
        # stored rows equal what the forward returned; state columns start at the optimizer's initial value
        w, _, found = m.get_rows(0, ids)
        assert bool(found.all()) and torch.equal(w, out.detach())


def test_eviction_accounting_and_reentry():
    init = DynamicEmbInitializer("constant", value=0.5)
    o = DynamicEmbTableOptions(dim=4, max_capacity=16, bucket_capacity=16, score_policy="lru", initializer=init)
    m = BatchedDynamicEmbeddingTables([o], pooling="sum", optimizer=SGD(lr=1.0))
    for start in range(0, 64, 8):
        ids = torch.arange(start, start + 8)
        out = m(ids, torch.arange(0, 9))
        assert torch.all(out == 0.5)  # every id new: the initial value
        out.sum().backward()  # each row -> 0.5 - 1
        assert m.sizes() == [min(16, start + 8)]
    # the table holds the 16 most recent ids; the oldest re-enter with fresh initial values
    _, _, found = m.get_rows(0, torch.arange(64))
    assert found.sum() == 16 and bool(found[48:].all())
    out = m(torch.tensor([0, 60]), torch.tensor([0, 1, 2]))
    assert torch.equal(out.detach(), torch.tensor([[0.5], [-0.5]]).expand(2, 4))


def test_admission_threshold():
    init = DynamicEmbInitializer("constant", value=0.5)
    o = DynamicEmbTableOptions(dim=2, max_capacity=256, admission_threshold=3, initializer=init)
    m = BatchedDynamicEmbeddingTables([o], pooling="none", optimizer=SGD(lr=1.0))
    ids = torch.tensor([5, 6, 6])
    for step in range(2):
        out = m(ids, torch.tensor([0, 3]))
        assert torch.all(out == 0.5)
        out.sum().backward()  # no rows: the gradient of non-admitted ids is dropped
        # 6 was seen 2 then 4 times: admitted at the second step; 5 (seen twice) not yet
        assert m.sizes() == [0 if step == 0 else 1]
    _, _, found = m.get_rows(0, torch.tensor([5, 6]))
    assert found.tolist() == [False, True]


def _full_lfu_table(on_refused):
    o = DynamicEmbTableOptions(dim=2, max_capacity=16, bucket_capacity=16, score_policy="lfu",
                               on_refused=on_refused, initializer=DynamicEmbInitializer("constant", value=1.0))
    m = BatchedDynamicEmbeddingTables([o], pooling="none", optimizer=SGD(lr=0.0))
    hot = torch.arange(16).repeat(4)  # 16 ids seen 4 times each fill the only bucket with score 4
    m(hot, torch.tensor([0, 64]))
    return m


@pytest.mark.parametrize("on_refused", ["error", "warn", "zero"])
def test_on_refused(on_refused):
    m = _full_lfu_table(on_refused)
    new = (torch.tensor([100]), torch.tensor([0, 1]))
    if on_refused == "error":
        with pytest.raises(RefusedInsertError, match="refused"):
            m(*new)
        return
    out = m(*new)
    assert torch.equal(out.detach(), torch.full((1, 2), 0.0 if on_refused == "zero" else 1.0))
    assert m.sizes() == [16] and int(m.refused_count[0]) == 1
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m(*new)
    assert any("refused" in str(r.message) for r in rec) == (on_refused == "warn")


def test_growth_doubles_capacity():
    o = DynamicEmbTableOptions(dim=2, max_capacity=1024, init_capacity=128, grow_load_factor=0.5)
    m = BatchedDynamicEmbeddingTables([o], pooling="none")
    m(torch.arange(100), torch.tensor([0, 100]))
    m(torch.arange(100, 110), torch.tensor([0, 10]))  # the step sees 100 > 0.5 * 128 stored: grows first
    assert m.capacities() == [256] and m.sizes() == [110]


def test_uint64_ids_full_range():
    o = DynamicEmbTableOptions(dim=2, max_capacity=256, initializer=DynamicEmbInitializer("constant", value=1.0))
    m = BatchedDynamicEmbeddingTables([o], pooling="sum", key_dtype=torch.uint64, optimizer=SGD(lr=1.0))
    ids = torch.tensor([-5, 3, -5], dtype=torch.int64).view(torch.uint64)  # 2**64 - 5 is a valid uint64 id
    m(ids, torch.tensor([0, 3])).sum().backward()
    w, _, _ = m.get_rows(0, ids[:2])
    assert torch.equal(w, torch.tensor([[-1.0, -1.0], [0.0, 0.0]]))


# ---------------------------------------------------------------------- bad input
def _m(**kw):
    return BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=2, max_capacity=128)] * 2, **kw)


@pytest.mark.parametrize("case, exc, match", [
    ("ids_dtype", TypeError, r"ids: expected dtype torch.int64.*got torch.int32"),
    ("ids_2d", ValueError, r"ids: expected a 1-d tensor"),
    ("negative", ValueError, r"ids: expected ids >= 0, got -3"),
    ("offsets_first", ValueError, r"offsets: expected offsets\[0\] == 0"),
    ("offsets_order", ValueError, r"offsets: expected non-decreasing values, got offsets\[1\]=3 > offsets\[2\]=1"),
    ("offsets_last", ValueError, r"offsets: expected offsets\[-1\] == ids.numel\(\) == 4, got 3"),
    ("offsets_count", ValueError, r"offsets: expected offsets of F \* B \+ 1 entries with F=2, got 4 entries"),
    ("lengths_mismatch", ValueError, r"lengths/offsets: expected lengths == offsets"),
    ("lengths_sum", ValueError, r"lengths: expected sum\(lengths\) == ids.numel\(\) == 4, got 5"),
    ("psw_shape", ValueError, r"per_sample_weights: expected shape \(4,\) like ids, got \(3,\)"),
    ("psw_dtype", TypeError, r"per_sample_weights: expected a floating-point tensor"),
    ("psw_mean", ValueError, r"per_sample_weights: expected only with pooling='sum'"),
])
def test_bad_input(case, exc, match):
    m = _m(pooling="mean" if case == "psw_mean" else "sum")
    ids = torch.tensor([1, 2, 3, 4])
    offsets = torch.tensor([0, 1, 2, 3, 4])
    kw = {}
    if case == "ids_dtype":
        ids = ids.int()
    elif case == "ids_2d":
        ids = ids.view(2, 2)
    elif case == "negative":
        ids = torch.tensor([1, -3, 3, 4])
    elif case == "offsets_first":
        offsets = torch.tensor([1, 1, 2, 3, 4])
    elif case == "offsets_order":
        offsets = torch.tensor([0, 3, 1, 3, 4])
    elif case == "offsets_last":
        offsets = torch.tensor([0, 1, 2, 3, 3])
    elif case == "offsets_count":
        offsets = torch.tensor([0, 1, 2, 4])
    elif case == "lengths_mismatch":
        kw["lengths"] = torch.tensor([1, 1, 2, 0])
    elif case == "lengths_sum":
        offsets, kw["lengths"] = None, torch.tensor([1, 1, 2, 1])
    elif case == "psw_shape":
        kw["per_sample_weights"] = torch.ones(3)
    elif case == "psw_dtype":
        kw["per_sample_weights"] = torch.ones(4, dtype=torch.int64)
    elif case == "psw_mean":
        kw["per_sample_weights"] = torch.ones(4)
    with pytest.raises(exc, match=match):
        m(ids, offsets, **kw)


def test_bad_input_reserved_uint64_and_device():
    m = _m(key_dtype=torch.uint64)
    ids = torch.tensor([1, -(2**63) + 1, 3, 4]).view(torch.uint64)
    with pytest.raises(ValueError, match=r"ids: got the reserved id 9223372036854775809"):
        m(ids, torch.tensor([0, 1, 2, 3, 4]))
    m = _m()
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"ids: expected a tensor on cpu"):
            m(torch.tensor([1, 2], device="cuda"), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"ids: expected a tensor on cpu .*got meta"):
        m(torch.empty(2, dtype=torch.int64, device="meta"), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("kw, match", [
    (dict(dim=0, max_capacity=128), r"dim: expected a positive int"),
    (dict(dim=4, max_capacity=100), r"max_capacity: expected a positive multiple of bucket_capacity=128"),
    (dict(dim=4, max_capacity=128, dtype=torch.float64), r"dtype: expected torch.float32"),
    (dict(dim=4, max_capacity=128, bucket_capacity=24), r"bucket_capacity: expected a power of two"),
    (dict(dim=4, max_capacity=128, init_capacity=256), r"init_capacity: expected <= max_capacity=128"),
    (dict(dim=4, max_capacity=128, score_policy="fifo"), r"score_policy: expected one of"),
    (dict(dim=4, max_capacity=128, on_refused="drop"), r"on_refused: expected one of"),
    (dict(dim=4, max_capacity=128, admission_threshold=-1), r"admission_threshold: expected an int >= 0"),
    (dict(dim=4, max_capacity=128, grow_load_factor=0.0), r"grow_load_factor: expected a number in \(0, 1\]"),
    # bool is an int subclass; True is no threshold or load factor anyone means
    (dict(dim=4, max_capacity=128, admission_threshold=True), r"admission_threshold: expected an int >= 0, got True"),
    (dict(dim=4, max_capacity=128, grow_load_factor=True),
     r"grow_load_factor: expected a number in \(0, 1\], got True"),
    # one bound given, out of order with the other's default ±sqrt(1 / max_capacity) = ±1/16
    (dict(dim=4, max_capacity=256, initializer=DynamicEmbInitializer(low=0.5)),
     r"DynamicEmbTableOptions.initializer bounds: expected low <= high .* = ±0.0625 \(max_capacity=256\), "
     r"got low=0.5, high=0.0625"),
    (dict(dim=4, max_capacity=256, initializer=DynamicEmbInitializer("truncated_normal", high=-0.5)),
     r"DynamicEmbTableOptions.initializer bounds: expected low <= high .*got low=-0.0625, high=-0.5"),
    (dict(dim=4, max_capacity=256, eval_initializer=DynamicEmbInitializer("uniform", high=-1.0)),
     r"DynamicEmbTableOptions.eval_initializer bounds: expected low <= high"),
])
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(**kw)])


def test_one_sided_initializer_bounds():
    """Bounds are checked once defaults fill them: in order they pass (here [0.01, 1/16)), and with max_capacity
    left for a TorchRec config to fill the check waits for it."""
    o = DynamicEmbTableOptions(dim=4, max_capacity=256, initializer=DynamicEmbInitializer(low=0.01))
    out = BatchedDynamicEmbeddingTables([o], pooling="none")(torch.arange(64), torch.tensor([0, 64]))
    assert out.min() >= 0.01 and out.max() < 0.0625
    late = DynamicEmbTableOptions(initializer=DynamicEmbInitializer(low=0.5))  # max_capacity unset: no error yet
    with pytest.raises(ValueError, match=r"DynamicEmbTableOptions.initializer bounds"):
        late.completed(dim=4, num_embeddings=256)


def test_bad_optimizer_and_initializer():
    with pytest.raises(ValueError, match=r"SGD.lr: expected a finite number >= 0"):
        SGD(lr=-1.0)
    with pytest.raises(ValueError, match=r"Adam.betas"):
        Adam(betas=(0.9, 1.5))
    with pytest.raises(ValueError, match=r"Adam.betas: expected two numbers in \[0, 1\), got \(False, 0.9\)"):
        Adam(betas=(False, 0.9))
    with pytest.raises(ValueError, match=r"Adam.decoupled_weight_decay: expected a bool, got 'yes'"):
        Adam(decoupled_weight_decay="yes")
    with pytest.raises(ValueError, match=r"RowWiseAdagrad.eps: expected a number > 0, got True"):
        RowWiseAdagrad(eps=True)
    with pytest.raises(ValueError, match=r"Adagrad.initial_accumulator_value: expected a number >= 0, got True"):
        Adagrad(initial_accumulator_value=True)
    with pytest.raises(ValueError, match=r"initializer.kind"):
        DynamicEmbInitializer("xavier")
    with pytest.raises(ValueError, match=r"initializer bounds: expected low <= high"):
        DynamicEmbInitializer("uniform", low=1.0, high=0.0)
    with pytest.raises(ValueError, match=r"initializer.value: expected a finite number, got True"):
        DynamicEmbInitializer("constant", value=True)
    with pytest.raises(ValueError, match=r"initializer.low: expected a finite number or None, got False"):
        DynamicEmbInitializer(low=False)


def test_optimizer_examples_run():
    """The Example blocks of the optimizers' docstrings run and print what they show."""
    import doctest

    from dynamicemb import _optimizers

    res = doctest.testmod(_optimizers, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted >= 20 and res.failed == 0, res


def test_rows_consistent_under_in_batch_eviction():
    """30 distinct ids with counts 1..3 into one 16-slot LFU bucket: ids evict each other inside the batch; every
    id stored afterwards holds exactly its own update (0.5 - count), none shares a slot with another."""
    o = DynamicEmbTableOptions(dim=2, max_capacity=16, bucket_capacity=16, score_policy="lfu", on_refused="zero",
                               initializer=DynamicEmbInitializer("constant", value=0.5))
    m = BatchedDynamicEmbeddingTables([o], pooling="none", optimizer=SGD(lr=1.0))
    gen = torch.Generator().manual_seed(0)
    counts = torch.randint(1, 4, (30,), generator=gen)
    ids = torch.repeat_interleave(torch.arange(100, 130), counts)
    ids = ids[torch.randperm(ids.numel(), generator=gen)]
    out = m(ids, torch.tensor([0, ids.numel()]))
    out.sum().backward()
    w, _, found = m.get_rows(0, torch.arange(100, 130))
    assert int(found.sum()) == m.sizes()[0] == 16
    expect = (0.5 - counts.float())[:, None].expand(30, 2)
    assert torch.equal(w[found], expect[found])


def test_dedup_set_size_rule():
    """The dedup's per-step set size comes from the op (lookup_dedup_set_size: 4 n + 1024 capped at 2^31 - 1, the
    largest capacity the dedup uses: its default), and the compiled step's Python copy of the rule says the same; the
    op has no tensor argument, so this runs without a GPU."""
    from dynamicemb._batched_kernels import _dedup_set_rule

    for n in (0, 1, 1000, 5_770_000, (2**31 - 1024) // 4, (2**31 - 1024) // 4 + 1, 2**31 - 2):
        assert torch.ops.dynamicemb.lookup_dedup_set_size(n) == min(4 * n + 1024, 2**31 - 1)
        # the compiled step's copy of the rule (_dedup_set_rule: it cannot ask the op) is the op's
        assert _dedup_set_rule(n) == torch.ops.dynamicemb.lookup_dedup_set_size(n)
    with pytest.raises(RuntimeError, match=r"n: expected >= 0 ids, got -1"):
        torch.ops.dynamicemb.lookup_dedup_set_size(-1)


def test_step_ws_size_matches_the_op():
    """The fake kernel's size of lookup_step's workspace (_step_ws_entries: torch.compile traces a step with it,
    n possibly symbolic) is the op's own (lookup_step_ws_size, no tensor argument: runs without a GPU)."""
    from dynamicemb._batched import _step_ws_entries

    for n in (0, 1, 31, 64, 1000, 12345, 1_048_570):
        for T in (1, 3, 40):
            assert _step_ws_entries(n, T) == torch.ops.dynamicemb.lookup_step_ws_size(n, T, False, False), (n, T)
            assert _step_ws_entries(n, T) == torch.ops.dynamicemb.lookup_step_ws_size(n, T, False, True), (n, T)
    with pytest.raises(RuntimeError, match=r"n/num_tables: expected n >= 0 and num_tables >= 1, got -1 and 2"):
        torch.ops.dynamicemb.lookup_step_ws_size(-1, 2, False, False)


def test_lookup_contract_matches_python():
    """The codes and the TableMeta layout Python passes to the lookup ops are the ops' own (lookup_contract, no
    tensor argument: runs without a GPU): every code table agrees, and TableMeta packed by name puts each field
    at the op's offset, with the op's kind."""
    import struct

    from dynamicemb._batched_kernels import _check_contract, _contract, _pack_meta

    _check_contract()
    layout = _contract()["meta"]
    assert len(layout) == 34 and set(layout.values()) == {"q", "d"}
    names = list(layout)
    assert names[:4] == ["keys", "digests", "scores", "values"]
    assert names[-3:] == ["values_host", "hbm_slots", "host_run"]
    assert [n for n in names if layout[n] == "d"] == [
        "init_a", "init_b", "init_mean", "init_std", "init_value", "init_fill",
        "eval_a", "eval_b", "eval_mean", "eval_std", "eval_value"]
    fields = {n: (i + 1 if k == "q" else i + 0.5) for i, (n, k) in enumerate(layout.items())}
    buf = _pack_meta(fields)
    assert len(buf) == 8 * len(layout)
    for i, (n, k) in enumerate(layout.items()):
        assert struct.unpack_from("<" + k, buf, 8 * i)[0] == fields[n], n
    with pytest.raises(RuntimeError, match=r"missing \['epoch'\]"):
        _pack_meta({n: v for n, v in fields.items() if n != "epoch"})


@pytest.mark.parametrize("dims, opt_kw, chunk, want", [
    ((16, 8), {}, 128, True),                         # 4-wide rows of at most 128 columns
    ((16, 8), dict(max_grad_norm=1.0), 128, False),   # clipping by the global norm: the atomic scatter
    ((16, 8), {}, 0, False),                          # backward_chunk = 0 turns it off
    ((160, 8), {}, 128, False),                       # 4-wide rows wider than 128 columns
    ((6, 3), {}, 128, True),                          # scalar rows of at most 32 columns
    ((40, 3), {}, 128, False),                        # scalar rows wider than 32 columns
])
def test_segmented_decision(dims, opt_kw, chunk, want):
    """_segmented() is the one place deciding the segmented backward (lookup_backward gets seg_chunk = 0
    otherwise); its rule, for every reason to fall back to the atomic scatter."""
    m = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=d, max_capacity=128) for d in dims], [0, 1],
                                      optimizer=SGD(lr=0.1, **opt_kw))
    m.backward_chunk = chunk
    assert m._segmented() is want


def test_host_mirror_copies_keep_the_value_not_the_copy_in_flight():
    """A module's host mirrors (sizes, refusals) deep-copy and pickle without their CUDA event and pinned buffer
    (neither can be copied; a CUDA module's deepcopy failed on them): the copy keeps the last value read."""
    import copy
    import pickle

    from dynamicemb._batched_step import _HostMirror

    m = _HostMirror(3)
    m.push(torch.tensor([4, 5, 6]))
    m._event, m._host, m._pending = object(), object(), True  # as after a CUDA push whose copy is in flight
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert c.value == [4, 5, 6] and c._event is None and c._host is None and c.ready()


def test_host_rows_flags():
    """The step flags of hybrid tables (_host_rows_flags): none for all-HBM tables and for hybrid tables with every
    row in HBM; else kStepHostRows, and for the backward the widest host-row table's row bytes rounded up to 16 in
    bits 32 and up; host_rows_order picks which op gets them ("off": neither) and rejects other values."""
    from types import SimpleNamespace

    from dynamicemb._batched_kernels import _HOST_PITCH_SHIFT, _STEP_CODE, _host_rows_flags

    def table(cap, hbm_rows, width, dtype, host=True):
        return SimpleNamespace(capacity=lambda: cap, hbm_rows=hbm_rows, value_dim=width,
                               values=torch.empty(0, dtype=dtype), values_host=torch.empty(0) if host else None)

    hr = _STEP_CODE["host_rows"]
    assert hr == 1024
    assert _host_rows_flags([table(64, 64, 12, torch.float32, host=False)]) == (0, 0)
    assert _host_rows_flags([table(64, 64, 12, torch.float32)]) == (0, 0)  # every row in HBM
    assert _host_rows_flags([table(64, 0, 12, torch.float32)]) == (hr, hr | (48 << _HOST_PITCH_SHIFT))
    # the widest table with host rows sets the pitch (a wider all-HBM table does not); fp16 rows of 7: 14 -> 16
    got = _host_rows_flags([table(64, 64, 100, torch.float32), table(64, 8, 7, torch.float16),
                            table(64, 32, 9, torch.float16)])
    assert got == (hr, hr | (32 << _HOST_PITCH_SHIFT))
    m = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)], optimizer=SGD(lr=0.1))
    m.__dict__["_host_flags"] = got
    assert m.host_rows_order == "forward" and m._host_step_flags() == (hr, 0)  # the default
    expect = {"step": got, "forward": (hr, 0), "off": (0, 0)}
    for order, flags in expect.items():
        m.host_rows_order = order
        assert m._host_step_flags() == flags, order
    m.host_rows_order = "sorted"
    with pytest.raises(ValueError, match=r"host_rows_order: expected 'step', 'forward' or 'off', got 'sorted'"):
        m._host_step_flags()
    # every order with optimizer state too (session 9 refused "step" with Adam on a mismatch that was the
    # reference's own nondeterminism: test_hybrid_step_gpu.py)
    for opt in (Adam(lr=0.1), Adagrad(lr=0.1), RowWiseAdagrad(lr=0.1)):
        m = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)], optimizer=opt)
        m.__dict__["_host_flags"] = got
        assert m._host_step_flags() == (hr, 0)
        m.host_rows_order = "step"
        assert m._host_step_flags() == got
