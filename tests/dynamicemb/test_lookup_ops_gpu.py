"""Bad input of the lookup ops of the segmented backward on a CUDA device (dynamicemb/csrc/ops/lookup_ops.cc):
lookup_csr refuses wrong dtypes, devices, layouts and sizes of its arguments, a CSR workspace of another size than
lookup_csr_size (in particular one sized for the other scaling: per-sample weights or mean pooling), and
lookup_backward refuses a segmented request (seg_chunk > 0) its kernels cannot serve and a CSR that does not fit its
own (psw, pooling). Every case names the argument in a RuntimeError; nothing is launched before the checks."""

import pytest
import torch

from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._load import load_library
from dynamicemb._optimizers import Adam
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available() or not load_library(),
                                                  reason="needs CUDA and dynamicemb/_C.so")]

N, BAGS = 64, 4
POOL = {"sum": 0, "mean": 1, "none": 2}


def csr_args(psw=False, pooling="sum"):
    """Valid lookup_csr arguments for N ids in BAGS bags: (inverse, bag, offsets, psw, pooling, csr)."""
    gen = torch.Generator().manual_seed(3)
    inverse = torch.randint(0, 20, (N,), generator=gen, dtype=torch.int32).cuda()
    bag = torch.arange(BAGS, dtype=torch.int32).repeat_interleave(N // BAGS).cuda()
    offsets = torch.arange(0, N + 1, N // BAGS, dtype=torch.int64).cuda()
    w = (torch.rand(N, generator=gen) + 0.5).cuda() if psw else None
    size = torch.ops.dynamicemb.lookup_csr_size(inverse, w, POOL[pooling])
    return [inverse, bag, offsets, w, POOL[pooling], torch.empty(size, dtype=torch.int64, device="cuda")]


def test_csr_valid_arguments_and_sizes():
    """The valid arguments pass; a scaled CSR (per-sample weights or mean pooling) needs a larger workspace."""
    for psw, pooling in ((False, "sum"), (True, "sum"), (False, "mean"), (False, "none")):
        torch.ops.dynamicemb.lookup_csr(*csr_args(psw, pooling))
    torch.cuda.synchronize()
    inverse = csr_args()[0]
    plain = torch.ops.dynamicemb.lookup_csr_size(inverse, None, POOL["sum"])
    assert torch.ops.dynamicemb.lookup_csr_size(inverse, None, POOL["none"]) == plain
    assert torch.ops.dynamicemb.lookup_csr_size(inverse, None, POOL["mean"]) > plain
    assert torch.ops.dynamicemb.lookup_csr_size(inverse, torch.ones(N, device="cuda"), POOL["sum"]) > plain


def _bad(case):
    """lookup_csr arguments with one thing wrong."""
    a = csr_args(psw=case.startswith("psw") or case == "csr_unscaled_for_psw",
                 pooling="mean" if case == "csr_scaled_for_plain" else "sum")
    inverse, bag, offsets, w, pooling, csr = a
    if case == "inverse_dtype":
        a[0] = inverse.long()
    elif case == "inverse_device":
        a[0] = inverse.cpu()
    elif case == "inverse_strided":
        a[0] = torch.stack([inverse, inverse], 1)[:, 0]
    elif case == "bag_dtype":
        a[1] = bag.long()
    elif case == "bag_device":
        a[1] = bag.cpu()
    elif case == "bag_length":
        a[1] = bag[:-1]
    elif case == "offsets_dtype":
        a[2] = offsets.int()
    elif case == "offsets_device":
        a[2] = offsets.cpu()
    elif case == "offsets_count":
        a[2] = offsets[:1]
    elif case == "pooling":
        a[4] = 3
    elif case == "psw_dtype":
        a[3] = w.double()
    elif case == "psw_device":
        a[3] = w.cpu()
    elif case == "psw_length":
        a[3] = w[:-1]
    elif case == "psw_2d":
        a[3] = w.view(N, 1)
    elif case == "csr_dtype":
        a[5] = csr.view(torch.int32)
    elif case == "csr_device":
        a[5] = csr.cpu()
    elif case == "csr_small":
        a[5] = csr[:-1]
    elif case == "csr_large":
        a[5] = torch.empty(csr.numel() + 1, dtype=torch.int64, device="cuda")
    elif case == "csr_unscaled_for_psw":  # sized without the weights, built with them
        a[5] = torch.empty(torch.ops.dynamicemb.lookup_csr_size(inverse, None, POOL["sum"]), dtype=torch.int64,
                           device="cuda")
    elif case == "csr_scaled_for_plain":  # sized for mean pooling, built for sum pooling
        a[4] = POOL["sum"]
    else:
        raise AssertionError(case)
    return a


@pytest.mark.parametrize("case, match", [
    ("inverse_dtype", r"inverse: expected dtype int32, got int64"),
    ("inverse_device", r"inverse: expected a CUDA tensor, got cpu"),
    ("inverse_strided", r"inverse: expected a contiguous tensor"),
    ("bag_dtype", r"bag: expected dtype int32, got int64"),
    ("bag_device", r"bag: expected a CUDA tensor, got cpu"),
    ("bag_length", rf"bag: expected {N} entries \(one per id, like inverse\), got {N - 1}"),
    ("offsets_dtype", r"offsets: expected dtype int64, got int32"),
    ("offsets_device", r"offsets: expected a CUDA tensor, got cpu"),
    ("offsets_count", r"offsets: expected at least 2 entries, got 1"),
    ("pooling", r"pooling: expected 0 \(sum\), 1 \(mean\) or 2 \(none\), got 3"),
    ("psw_dtype", r"per_sample_weights: expected dtype float32, got float64"),
    ("psw_device", r"per_sample_weights: expected a CUDA tensor, got cpu"),
    ("psw_length", rf"per_sample_weights: expected shape \({N},\) \(one weight per id\), got \({N - 1},\)"),
    ("psw_2d", rf"per_sample_weights: expected shape \({N},\) \(one weight per id\), got \({N}, 1\)"),
    ("csr_dtype", r"csr: expected dtype int64, got int32"),
    ("csr_device", r"csr: expected a CUDA tensor, got cpu"),
    ("csr_small", r"csr: expected a contiguous int64 workspace of exactly lookup_csr_size = \d+ entries"),
    ("csr_large", r"csr: expected a contiguous int64 workspace of exactly lookup_csr_size = \d+ entries"),
    ("csr_unscaled_for_psw", r"csr: expected \d+ int64 entries .*scaled\).*the size of a CSR without per-entry"),
    ("csr_scaled_for_plain", r"csr: expected \d+ int64 entries .*unscaled\).*the size of a CSR with per-entry"),
])
def test_csr_bad_input(case, match):
    args = _bad(case)
    with pytest.raises(RuntimeError, match=match):
        torch.ops.dynamicemb.lookup_csr(*args)


def test_csr_size_bad_pooling():
    with pytest.raises(RuntimeError, match=r"pooling: expected 0 \(sum\), 1 \(mean\) or 2 \(none\), got -1"):
        torch.ops.dynamicemb.lookup_csr_size(torch.zeros(4, dtype=torch.int32, device="cuda"), None, -1)


# ---------------------------------------------------------------- lookup_backward: the requested path
def _arg_index():
    return {a.name: i for i, a in enumerate(torch.ops.dynamicemb.lookup_backward.default._schema.arguments)}


def captured_backward(monkeypatch, dims=(16, 8), weighted=False, **opt_kw):
    """The lookup_backward arguments of one real training step of a module (Adam: not the direct SGD path),
    captured on the way to the op; the step itself runs."""
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=1 << 12, on_refused="zero") for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1], pooling="sum", optimizer=Adam(lr=0.01, **opt_kw),
                                      device="cuda")
    assert m.use_kernels
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 30, (N,), generator=gen).cuda()
    offsets = torch.arange(0, N + 1, N // BAGS, dtype=torch.int64).cuda()
    w = (torch.rand(N, generator=gen) + 0.5).cuda().requires_grad_(True) if weighted else None
    calls = []
    real = torch.ops.dynamicemb.lookup_backward

    def spy(*args):
        calls.append(list(args))
        return real(*args)

    monkeypatch.setattr(torch.ops.dynamicemb, "lookup_backward", spy)
    m(ids, offsets, per_sample_weights=w).sum().backward()
    monkeypatch.undo()
    torch.cuda.synchronize()
    assert len(calls) == 1
    return m, calls[0]


def test_backward_gets_the_modules_decision(monkeypatch):
    """seg_chunk is backward_chunk only where _segmented() holds (with the forward's CSR), else 0 (and no CSR)."""
    ix = _arg_index()
    m, a = captured_backward(monkeypatch)
    assert m._segmented() and a[ix["seg_chunk"]] == m.backward_chunk and a[ix["csr"]] is not None
    for kw in (dict(dims=(16, 8), max_grad_norm=1.0), dict(dims=(160, 8)), dict(dims=(40, 3))):
        m, a = captured_backward(monkeypatch, **kw)
        assert not m._segmented() and a[ix["seg_chunk"]] == 0 and a[ix["csr"]] is None, kw


@pytest.mark.parametrize("case, match", [
    ("clip_norm", r"seg_chunk: expected 0 \(the atomic scatter\) with max_grad_norm > 0.*got seg_chunk = 128 "
                  r"with max_grad_norm = 1"),
    ("wide_rows", r"seg_chunk: expected 0 \(the atomic scatter\) for max_dim > 128 \(vec4 rows.*got seg_chunk = 128 "
                  r"with max_dim = 160"),
    ("negative_chunk", r"seg_chunk: expected 0 \(atomic scatter\) or 1..2\^20 \(segmented\), got -1"),
    ("csr_without_segments", r"csr: expected None with seg_chunk = 0"),
    ("csr_scaled_without_psw", r"csr: expected \d+ int64 entries .*unscaled\).*the size of a CSR with per-entry"),
])
def test_backward_refuses_impossible_requests(monkeypatch, case, match):
    ix = _arg_index()
    if case == "clip_norm":
        _, a = captured_backward(monkeypatch, max_grad_norm=1.0)
        a[ix["seg_chunk"]] = 128
    elif case == "wide_rows":
        _, a = captured_backward(monkeypatch, dims=(160, 8))
        a[ix["seg_chunk"]] = 128
    elif case == "negative_chunk":
        _, a = captured_backward(monkeypatch)
        a[ix["seg_chunk"]], a[ix["csr"]] = -1, None
    elif case == "csr_without_segments":
        _, a = captured_backward(monkeypatch)
        a[ix["seg_chunk"]] = 0
        g = a[ix["gsum"]]  # the atomic scatter's per-unique sums (the segmented path sized it per warp)
        a[ix["gsum"]] = torch.zeros(a[ix["ids"]].numel(), g.shape[1], dtype=g.dtype, device=g.device)
    else:  # the forward built a CSR with per-entry scales (weighted ids); the backward is asked without weights
        _, a = captured_backward(monkeypatch, weighted=True)
        assert a[ix["psw"]] is not None and a[ix["csr"]] is not None
        a[ix["psw"]], a[ix["psw_grad"]] = None, False
    with pytest.raises(RuntimeError, match=match):
        torch.ops.dynamicemb.lookup_backward(*a)
