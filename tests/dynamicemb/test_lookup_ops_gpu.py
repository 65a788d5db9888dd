"""Bad input of the step ops on a CUDA device (dynamicemb/csrc/ops/lookup_ops.cc): lookup_step (the whole forward
of a step) refuses wrong dtypes, devices, layouts and sizes of its arguments; lookup_backward refuses a workspace
that is not its forward's (size, CSR or not, the other scaling: per-sample weights or mean pooling) and a segmented
request (seg_chunk > 0) its kernels cannot serve. Every case names the argument in a RuntimeError; nothing is
launched before the checks. The arguments are those of one real training step of a module, captured on the way."""

import pytest
import torch

from dynamicemb._batched import _STEP_CSR, _STEP_PSW_GRAD, BatchedDynamicEmbeddingTables
from dynamicemb._batched_kernels import _META_FIELDS
from dynamicemb._load import load_library
from dynamicemb._optimizers import Adam
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available() or not load_library(),
                                                  reason="needs CUDA and dynamicemb/_C.so")]

N, BAGS = 64, 4


def _arg_index(op):
    return {a.name: i for i, a in enumerate(getattr(torch.ops.dynamicemb, op).default._schema.arguments)}


def captured_step(monkeypatch, dims=(16, 8), weighted=False, pooling="sum", **opt_kw):
    """(module, lookup_step args, lookup_backward args) of one real training step (Adam: not the direct SGD
    path), captured on the way to the ops; the step itself runs."""
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=1 << 12, on_refused="zero") for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1], pooling=pooling, optimizer=Adam(lr=0.01, **opt_kw),
                                      device="cuda")
    assert m.use_kernels
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 30, (N,), generator=gen).cuda()
    offsets = torch.arange(0, N + 1, N // BAGS, dtype=torch.int64).cuda()
    w = (torch.rand(N, generator=gen) + 0.5).cuda().requires_grad_(True) if weighted else None
    calls = {}
    real = {k: getattr(torch.ops.dynamicemb, k) for k in ("lookup_step", "lookup_backward")}

    def spy(name):
        def f(*args):
            calls.setdefault(name, []).append(list(args))
            return real[name](*args)
        return f

    for k in real:
        monkeypatch.setattr(torch.ops.dynamicemb, k, spy(k))
    m(ids, offsets, per_sample_weights=w).sum().backward()
    monkeypatch.undo()
    torch.cuda.synchronize()
    assert len(calls["lookup_step"]) == 1 and len(calls["lookup_backward"]) == 1
    return m, calls["lookup_step"][0], calls["lookup_backward"][0]


def test_backward_gets_the_modules_decision(monkeypatch):
    """seg_chunk is backward_chunk only where _segmented() holds (with the forward's CSR in the workspace), else 0
    (and no CSR)."""
    ix = _arg_index("lookup_backward")
    m, _, a = captured_step(monkeypatch)
    assert m._segmented() and a[ix["seg_chunk"]] == m.backward_chunk and a[ix["flags"]] & _STEP_CSR
    for kw in (dict(dims=(16, 8), max_grad_norm=1.0), dict(dims=(160, 8)), dict(dims=(40, 3))):
        m, _, a = captured_step(monkeypatch, **kw)
        assert not m._segmented() and a[ix["seg_chunk"]] == 0 and not a[ix["flags"]] & _STEP_CSR, kw


def test_step_ws_size_with_csr():
    """A workspace with the backward's CSR is larger, and larger again with per-entry scales."""
    size = torch.ops.dynamicemb.lookup_step_ws_size
    assert size(64, 2, True, True) > size(64, 2, True, False) > size(64, 2, False, False)


@pytest.mark.parametrize("case, match", [
    ("ids_dtype", r"ids: expected dtype int64 or uint64, got int32"),
    ("ids_device", r"ids: expected a CUDA tensor, got cpu"),
    ("ids_strided", r"ids: expected a contiguous tensor"),
    ("offsets_dtype", r"offsets: expected dtype int64, got int32"),
    ("offsets_device", r"offsets: expected a CUDA tensor, got cpu"),
    ("offsets_count", r"offsets: expected at least 2 entries, got 1"),
    ("pooling", r"pooling: expected 0 \(sum\), 1 \(mean\) or 2 \(none\), got 3"),
    ("psw_dtype", r"per_sample_weights: expected dtype float32, got float64"),
    ("psw_length", rf"per_sample_weights: expected shape \({N},\) \(one weight per id\), got \({N - 1},\)"),
    ("set_small", r"set: expected a contiguous 16-byte aligned int32 tensor of at least ids.numel\(\)"),
    ("refused_total", r"refused_total: expected 2 entries \(one per table\), got 3"),
    ("meta", rf"meta: expected a contiguous int64 tensor of num_tables x {_META_FIELDS} fields"),
    ("csr_eval", r"flags: a CSR \(8\) only in training"),
    ("lengths_only", r"flags: lengths only, but lengths is None"),
])
def test_step_bad_input(monkeypatch, case, match):
    ix = _arg_index("lookup_step")
    _, a, _ = captured_step(monkeypatch, weighted=case.startswith("psw"))
    if case == "ids_dtype":
        a[ix["ids"]] = a[ix["ids"]].int()
    elif case == "ids_device":
        a[ix["ids"]] = a[ix["ids"]].cpu()
    elif case == "ids_strided":
        a[ix["ids"]] = torch.stack([a[ix["ids"]]] * 2, 1)[:, 0]
    elif case == "offsets_dtype":
        a[ix["offsets"]] = a[ix["offsets"]].int()
    elif case == "offsets_device":
        a[ix["offsets"]] = a[ix["offsets"]].cpu()
    elif case == "offsets_count":
        a[ix["offsets"]] = a[ix["offsets"]][:1]
    elif case == "pooling":
        a[ix["pooling"]] = 3
    elif case == "psw_dtype":
        a[ix["psw"]] = a[ix["psw"]].double()
    elif case == "psw_length":
        a[ix["psw"]] = a[ix["psw"]][:-1]
    elif case == "set_small":
        a[ix["set"]] = a[ix["set"]][:N - 1]
    elif case == "refused_total":
        a[ix["refused_total"]] = torch.zeros(3, dtype=torch.int64, device="cuda")
    elif case == "meta":
        a[ix["meta"]] = a[ix["meta"]][:-1]
    elif case == "csr_eval":
        a[ix["flags"]] = _STEP_CSR
    elif case == "lengths_only":
        a[ix["flags"]] |= 4
        a[ix["lengths"]] = None
    with pytest.raises(RuntimeError, match=match):
        torch.ops.dynamicemb.lookup_step(*a)


@pytest.mark.parametrize("case, match", [
    ("clip_norm", r"seg_chunk: expected 0 \(the atomic scatter\) with max_grad_norm > 0.*got seg_chunk = 128 "
                  r"with max_grad_norm = 1"),
    ("wide_rows", r"seg_chunk: expected 0 \(the atomic scatter\) for max_dim > 128 \(vec4 rows.*got seg_chunk = 128 "
                  r"with max_dim = 160"),
    ("negative_chunk", r"seg_chunk: expected 0 \(atomic scatter\) or 1..2\^20 \(segmented\), got -1"),
    ("csr_without_segments", r"flags: a CSR in the workspace \(8\) with seg_chunk = 0"),
    ("csr_scaled_without_psw", r"ws: expected \d+ int64 entries .*unscaled CSR\).*the size of a CSR with per-entry"),
    ("ws_small", r"ws: expected the workspace of lookup_step for these ids \(\d+ int64 entries with a CSR\)"),
    ("ws_no_csr", r"ws: expected the workspace of lookup_step for these ids \(\d+ int64 entries without a CSR\)"),
    ("ws_dtype", r"ws: expected dtype int64, got int32"),
])
def test_backward_refuses_impossible_requests(monkeypatch, case, match):
    ix = _arg_index("lookup_backward")
    if case == "clip_norm":
        _, _, a = captured_step(monkeypatch, max_grad_norm=1.0)
        a[ix["seg_chunk"]] = 128
    elif case == "wide_rows":
        _, _, a = captured_step(monkeypatch, dims=(160, 8))
        a[ix["seg_chunk"]] = 128
    elif case == "negative_chunk":
        _, _, a = captured_step(monkeypatch)
        a[ix["seg_chunk"]] = -1
    elif case == "csr_without_segments":
        _, _, a = captured_step(monkeypatch)
        a[ix["seg_chunk"]] = 0
        g = a[ix["gsum"]]  # the atomic scatter's per-unique sums (the segmented path sized it per warp)
        a[ix["gsum"]] = torch.zeros(a[ix["ids"]].numel(), g.shape[1], dtype=g.dtype, device=g.device)
    elif case == "csr_scaled_without_psw":  # the forward built a CSR with per-entry scales (weighted ids)
        _, _, a = captured_step(monkeypatch, weighted=True)
        assert a[ix["psw"]] is not None and a[ix["flags"]] & _STEP_CSR
        a[ix["psw"]], a[ix["flags"]] = None, a[ix["flags"]] & ~_STEP_PSW_GRAD
    elif case == "ws_small":
        _, _, a = captured_step(monkeypatch)
        a[ix["ws"]] = a[ix["ws"]][:-1]
    elif case == "ws_no_csr":
        _, _, a = captured_step(monkeypatch)
        a[ix["flags"]] &= ~_STEP_CSR
    else:
        _, _, a = captured_step(monkeypatch)
        a[ix["ws"]] = a[ix["ws"]].view(torch.int32)
    with pytest.raises(RuntimeError, match=match):
        torch.ops.dynamicemb.lookup_backward(*a)
