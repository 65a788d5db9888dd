"""Safety of the embedding step on CPU (runs in CI): the validate modes, the device-error codes shared with the
kernels, the optimizer's non-finite policy (skip_row / skip_step / raise / propagate, with and without clipping).
torch.compile of a step: test_compile_cpu.py."""

import os
import re

import pytest
import torch

import dynamicemb
from dynamicemb._batched import BatchedDynamicEmbeddingTables
from dynamicemb._checks import ERR_ARGS, ERR_RULES
from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad
from dynamicemb._options import DynamicEmbTableOptions

pytestmark = pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "dynamicemb", "csrc", "lookup", "validate_types.h")
V, B, F = 64, 6, 3


def module(opt, pooling="sum", dims=(8, 4), device="cpu"):
    if pooling == "none":
        dims = (dims[0], dims[0])
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=256, on_refused="zero") for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling=pooling, optimizer=opt, device=device)
    gen = torch.Generator().manual_seed(11)
    for t, d in enumerate(m.dims):
        m.set_rows(t, torch.arange(V, device=device), (torch.randn(V, d, generator=gen) * 0.1).to(device))
    return m


def batch(gen, device="cpu"):
    lengths = torch.randint(1, 4, (F * B,), generator=gen)
    ids = torch.randint(0, V, (int(lengths.sum()),), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    w = torch.rand(ids.numel(), generator=gen) + 0.5
    return ids.to(device), offsets.to(device), w.to(device)


def all_rows(m):
    probe = torch.arange(V, device=m.device)
    out = []
    for t in range(len(m.tables)):
        w, s, f = m.get_rows(t, probe)
        out.append(torch.cat([w, s], 1))
    return out


# ---------------------------------------------------------------------- codes shared with the kernels
@pytest.mark.skipif(not os.path.exists(HEADER), reason="source tree not available")
def test_error_codes_match_the_kernels_header():
    text = open(HEADER).read()
    args = {int(v): k for k, v in re.findall(r"\bkArg(\w+) = (\d+)", text)}
    rules = {int(v) for v in re.findall(r"\bkRule\w+ = (\d+)", text)}
    names = {"Ids": "ids", "Offsets": "offsets", "Lengths": "lengths", "PerSampleWeights": "per_sample_weights",
             "Gradient": "gradient", "HbmBudget": "hbm_budget_bytes", "MaxCapacity": "max_capacity"}
    assert {c: names[k] for c, k in args.items()} == ERR_ARGS
    assert rules == set(ERR_RULES)


def test_public_error_api():
    for name in ("DeviceInputError", "check_errors", "strict_checks", "set_strict_checks"):
        assert name in dynamicemb.__all__ and getattr(dynamicemb, name).__doc__
    assert issubclass(dynamicemb.DeviceInputError, ValueError)
    dynamicemb.check_errors()  # nothing pending (and no CUDA work): returns
    old = dynamicemb.set_strict_checks(True)
    assert dynamicemb.set_strict_checks(old) is True
    with dynamicemb.strict_checks():
        pass
    assert torch.ops.dynamicemb.device_error_block() >= 0  # 0 without a CUDA device
    if not torch.cuda.is_available():
        assert torch.ops.dynamicemb.device_error_block() == 0
        torch.ops.dynamicemb.clear_device_error(0)  # a no-op without CUDA


# ---------------------------------------------------------------------- validate modes on CPU
@pytest.mark.parametrize("validate", [None, "host", True, "device"])
def test_cpu_validates_at_once(validate):
    m = module(SGD(lr=0.1))
    before = all_rows(m)
    ids = torch.tensor([1, -3, 2] + [4] * (F * B - 3))
    offsets = torch.arange(F * B + 1)
    with pytest.raises(ValueError, match=r"ids: expected ids >= 0, got -3"):
        m(ids, offsets, validate=validate)
    bad_off = offsets.clone()
    bad_off[3], bad_off[4] = 5, 2
    with pytest.raises(ValueError, match=r"offsets: expected non-decreasing values, got offsets\[3\]=5"):
        m(ids.abs(), bad_off, validate=validate)
    w = torch.rand(F * B) + 0.5
    w[7] = float("nan")
    with pytest.raises(dynamicemb.DeviceInputError, match=r"per_sample_weights: expected finite values, got "
                                                          r"per_sample_weights\[7\] = nan"):
        m(ids.abs(), offsets, per_sample_weights=w, validate=validate)
    for a, b in zip(before, all_rows(m)):
        assert torch.equal(a, b)


def test_validate_argument_and_zero_bags():
    m = module(SGD(lr=0.1))
    ids, offsets, _ = batch(torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match=r"validate: expected None, 'device', 'host', 'off', True or False, got 'x'"):
        m(ids, offsets, validate="x")
    m1 = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)])
    with pytest.raises(ValueError, match=r"offsets/lengths: expected at least one bag for 2 ids, got none"):
        m1(torch.tensor([1, 2]), torch.tensor([0]))


def test_validate_off_stays_in_bounds_with_bad_offsets():
    """validate="off" skips the value checks; the torch path still stays in bounds (bags are clamped)."""
    m = module(SGD(lr=0.1), pooling="mean")
    ids = torch.randint(0, V, (F * B,))
    offsets = torch.arange(F * B + 1)
    offsets[-1] = 3  # past-the-end ids and a decreasing tail
    out = m(ids, offsets, validate="off")
    assert out.shape == (B, 16) and torch.isfinite(out).all()
    out.sum().backward()


# ---------------------------------------------------------------------- non-finite policy (torch path)
OPT_KINDS = {
    "sgd": lambda **kw: SGD(lr=0.2, **kw),
    "sgd_wd": lambda **kw: SGD(lr=0.2, weight_decay=0.05, **kw),
    "adagrad": lambda **kw: Adagrad(lr=0.2, **kw),
    "rowwise": lambda **kw: RowWiseAdagrad(lr=0.2, **kw),
    "adam": lambda **kw: Adam(lr=0.05, **kw),
}


def poisoned_step(m, gen, where, value):
    """One training step whose output gradient (where="grad") or per-sample weight (where="psw") holds `value` at
    one element; returns the ids of the poisoned row's table-0 entry."""
    ids, offsets, w = batch(gen)
    ids[0] = 7  # bag 0 (feature 0, table 0) holds id 7 first; id 7 appears nowhere else
    ids[1:] = torch.where(ids[1:] == 7, 8, ids[1:])
    if where == "psw":
        w[0] = value
    out = m(ids, offsets, per_sample_weights=w, validate="off")
    R = torch.randn(out.shape, generator=gen)
    if where == "grad":
        R[0, 0] = value  # sample 0, column 0: feature 0 -> every id of bag 0
    (out * R).sum().backward()
    return ids, offsets


@pytest.mark.parametrize("opt", list(OPT_KINDS))
@pytest.mark.parametrize("where, value", [("grad", float("nan")), ("grad", float("inf")), ("psw", float("nan")),
                                          ("psw", float("-inf"))])
def test_skip_row_keeps_the_row_and_counts(opt, where, value):
    gen = torch.Generator().manual_seed(5)
    m = module(OPT_KINDS[opt]())  # nonfinite="skip_row" is the default
    ref = module(OPT_KINDS[opt]())
    before = all_rows(m)
    ids, offsets = poisoned_step(m, gen, where, value)
    # the same step without the poison, applied to every row but those of bag 0 (all of its rows are skipped)
    gen = torch.Generator().manual_seed(5)
    ids_r, offsets_r, w_r = batch(gen)
    ids_r[0] = 7
    ids_r[1:] = torch.where(ids_r[1:] == 7, 8, ids_r[1:])
    out = ref(ids_r, offsets_r, per_sample_weights=w_r)
    R = torch.randn(out.shape, generator=gen)
    (out * R).sum().backward()
    after, want = all_rows(m), all_rows(ref)
    # skipped: every id of bag 0 (a poisoned bag gradient), or id 7 alone (its poisoned weight)
    skipped = ids[offsets[0]:offsets[1]].unique() if where == "grad" else torch.tensor([7])
    for t in range(2):
        assert torch.isfinite(after[t]).all()
    assert torch.equal(after[0][skipped], before[0][skipped])  # untouched
    others = torch.ones(V, dtype=torch.bool)
    others[skipped] = False
    for t in range(2):
        keep = others if t == 0 else torch.ones(V, dtype=torch.bool)
        torch.testing.assert_close(after[t][keep], want[t][keep], rtol=1e-6, atol=1e-7)
    assert m.nonfinite_count.tolist() == [skipped.numel(), 0]


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("mode", ["skip_step", "skip_row_clip_norm", "raise_clip_norm"])
def test_whole_step_skipped(opt, mode):
    kw = {"skip_step": dict(nonfinite="skip_step"), "skip_row_clip_norm": dict(max_grad_norm=0.5),
          "raise_clip_norm": dict(nonfinite="raise", max_grad_norm=0.5)}[mode]
    m = module(OPT_KINDS[opt](**kw))
    before = all_rows(m)
    gen = torch.Generator().manual_seed(9)
    if mode == "raise_clip_norm":
        with pytest.raises(dynamicemb.DeviceInputError, match=r"gradient: expected finite summed row gradients"):
            poisoned_step(m, gen, "grad", float("nan"))
    else:
        poisoned_step(m, gen, "grad", float("nan"))
    for a, b in zip(before, all_rows(m)):
        assert torch.equal(a, b)
    assert m.nonfinite_count.tolist() == [0, 1]
    # a clean step afterwards updates again
    ids, offsets, w = batch(gen)
    m(ids, offsets, per_sample_weights=w).sum().backward()
    assert not torch.equal(before[0], all_rows(m)[0])
    assert m.nonfinite_count.tolist() == [0, 1]


def test_raise_skips_the_row_then_raises():
    m = module(Adam(lr=0.05, nonfinite="raise"))
    before = all_rows(m)
    gen = torch.Generator().manual_seed(3)
    with pytest.raises(dynamicemb.DeviceInputError, match=r"got 1 rows or steps skipped for a NaN/inf \(1 so far\)"):
        poisoned_step(m, gen, "psw", float("nan"))
    assert torch.equal(all_rows(m)[0][7], before[0][7])
    assert m.nonfinite_count.tolist() == [1, 0]


def test_propagate_writes_nan_as_before():
    m = module(SGD(lr=0.2, nonfinite="propagate"))
    poisoned_step(m, torch.Generator().manual_seed(4), "grad", float("nan"))
    assert torch.isnan(all_rows(m)[0][7, 0])  # column 0 of the poisoned bag gradient
    assert m.nonfinite_count.tolist() == [0, 0]


def test_bad_nonfinite_option():
    with pytest.raises(ValueError, match=r"SGD.nonfinite: expected one of \['propagate', 'skip_row', 'skip_step', "
                                         r"'raise'\], got 'ignore'"):
        SGD(nonfinite="ignore")
