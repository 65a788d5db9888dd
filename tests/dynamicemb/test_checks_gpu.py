"""Safety of the fused CUDA step: device-side input checks without a host sync (a bad batch changes no table and
raises DeviceInputError at the next call / check_errors / in strict mode), the kernels staying in bounds with
checks off, the non-finite policy of the fused update against the CPU path, and torch.compile of a step.

The bad-input tests (`-k "bad or unchecked"`) are the ones to run under compute-sanitizer memcheck."""

import os
import re
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_helpers import assert_compiled_steps_match_eager  # noqa: E402

import dynamicemb  # noqa: E402
from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402
from dynamicemb._optimizers import SGD, Adagrad, Adam, RowWiseAdagrad  # noqa: E402
from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

V, B, F = 300, 16, 3


def make(device, opt, pooling="sum", dims=(16, 8), key_dtype=torch.int64, **kw):
    if pooling == "none":
        dims = (dims[0], dims[0])
    tables = [DynamicEmbTableOptions(dim=d, max_capacity=1 << 12, on_refused="zero", **kw) for d in dims]
    m = BatchedDynamicEmbeddingTables(tables, [0, 1, 1], pooling=pooling, optimizer=opt, device=device,
                                      key_dtype=key_dtype)
    gen = torch.Generator().manual_seed(13)
    probe = torch.arange(V).to(key_dtype)
    for t, d in enumerate(m.dims):
        m.set_rows(t, probe.to(device), (torch.randn(V, d, generator=gen) * 0.1).to(device))
    if torch.device(device).type == "cuda":
        assert m.use_kernels
    return m


def batch(gen, device="cuda", max_len=4):
    lengths = torch.randint(1, max_len + 1, (F * B,), generator=gen)
    ids = torch.randint(0, V, (int(lengths.sum()),), generator=gen)
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    w = torch.rand(ids.numel(), generator=gen) + 0.5
    return ids.to(device), offsets.to(device), w.to(device), lengths.to(device)


def snapshot(m):
    return [(t.keys.clone(), t.digests.clone(), t.scores.clone(), t.values.clone(), t.counters[1].clone())
            for t in m.tables]


def assert_unchanged(m, snap):
    for t, (k, d, s, v, size) in zip(m.tables, snap):
        assert torch.equal(t.keys, k) and torch.equal(t.digests, d) and torch.equal(t.scores, s)
        assert torch.equal(t.values, v) and torch.equal(t.counters[1], size)


def all_rows(m):
    probe = torch.arange(V, device=m.device).to(m.key_dtype)
    return [torch.cat(m.get_rows(t, probe)[:2], 1) for t in range(len(m.tables))]


def bad_case(case, gen):
    """(ids, offsets, kwargs, key_dtype, message regex) of one invalid step."""
    ids, offsets, w, lengths = batch(gen)
    n = ids.numel()
    kw, key_dtype = {}, torch.int64
    if case == "negative_id":
        ids[5] = -12
        msg = r"ids: expected ids >= 0, got ids\[5\] = -12"
    elif case == "reserved_uint64":
        ids = ids.view(torch.uint64).clone()
        ids.view(torch.int64)[9] = -(2**63) + 1
        key_dtype = torch.uint64
        msg = r"ids: expected no reserved id \(2\*\*63 \+ 0, 1, 2\), got ids\[9\] = 9223372036854775809"
    elif case == "decreasing":
        offsets[4] = offsets[6] + 1
        msg = r"offsets: expected non-decreasing values, got offsets\[4\]="
    elif case == "past_end":
        offsets[-1] = n + 5
        msg = rf"offsets: expected offsets\[-1\] == ids.numel\(\) == {n}, got {n + 5}"
    elif case == "inner_past_end":
        offsets[F * B // 2] = n + 1000
        msg = r"offsets: expected non-decreasing values"
    elif case == "first":
        offsets[0] = 1
        msg = r"offsets: expected offsets\[0\] == 0, got 1"
    elif case == "short":
        offsets[-1] = n - 2
        msg = rf"offsets: expected offsets\[-1\] == ids.numel\(\) == {n}, got {n - 2}"
    elif case == "negative_length":
        lengths[4] += lengths[3] + 1  # the sum stays ids.numel(): the negative length is the only violation
        lengths[3] = -1
        offsets, kw["lengths"] = None, lengths
        msg = r"lengths: expected values >= 0, got lengths\[3\] = -1"
    elif case == "length_sum":
        lengths[2] += 3
        offsets, kw["lengths"] = None, lengths
        msg = rf"lengths: expected sum\(lengths\) == ids.numel\(\) == {n}, got {n + 3}"
    elif case == "length_mismatch":
        lengths[1] += 1
        kw["lengths"] = lengths
        msg = r"lengths: expected lengths == offsets\[1:\] - offsets\[:-1\], got lengths\[1\]"
    else:
        raise AssertionError(case)
    return ids, offsets, kw, key_dtype, msg


BAD = ["negative_id", "reserved_uint64", "decreasing", "past_end", "inner_past_end", "first", "short",
       "negative_length", "length_sum", "length_mismatch"]


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("case", BAD)
def test_bad_input_changes_nothing_and_raises_at_next_call(case, pooling, opt):
    gen = torch.Generator().manual_seed(hash(case) % 1000)
    ids, offsets, kw, key_dtype, msg = bad_case(case, gen)
    m = make("cuda", SGD(lr=0.3) if opt == "sgd" else Adam(lr=0.05), pooling, key_dtype=key_dtype)
    good = batch(torch.Generator().manual_seed(1))
    m(good[0].to(key_dtype) if key_dtype == torch.int64 else good[0].view(torch.uint64), good[1]).sum().backward()
    dynamicemb.check_errors()
    snap = snapshot(m)
    torch.cuda.set_sync_debug_mode("error")
    early = None
    try:
        out = m(ids, offsets, **kw)  # default validate: checked on the device, no sync
        out.sum().backward()
        m.eval()
        try:  # the next call raises the first call's error once the device has written it: maybe this one
            m(ids, offsets, **kw)
        except dynamicemb.DeviceInputError as err:
            early = err
        m.train()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert_unchanged(m, snap)
    if early is None:
        with pytest.raises(dynamicemb.DeviceInputError) as e:  # raised by the next call
            m(ids, offsets, **kw)
        early = e.value
    assert re.search(msg, str(early)), (msg, str(early))
    assert early.device == torch.cuda.current_device()
    dynamicemb.check_errors()  # read once: cleared
    # a good step afterwards trains and raises nothing
    gids = good[0] if key_dtype == torch.int64 else good[0].view(torch.uint64)
    m(gids, good[1]).sum().backward()
    dynamicemb.check_errors()
    assert not all(torch.equal(a[3], b.values) for a, b in zip(snap, m.tables))


@pytest.mark.parametrize("flags", [17, 48])
@pytest.mark.parametrize("case", ["negative_id", "decreasing"])
def test_bad_input_under_dedup_variants(case, flags):
    """The dedup's lab variants (op _lookup_lab_dedup: 16 the passes as programmatic dependent launches, whose
    insert reads the checks' verdict after its block-local dedup; 32 also the checks -> the clear pass, whose set
    fill runs before its wait; without 1 the insert's load-first probe) skip a bad batch and raise at the next call
    as the default does."""
    lab = torch.ops.dynamicemb._lookup_lab_dedup
    old = lab(flags)
    try:
        test_bad_input_changes_nothing_and_raises_at_next_call(case, "none", "adam")
        test_bad_input_changes_nothing_and_raises_at_next_call(case, "sum", "sgd")
    finally:
        lab(old)


@pytest.mark.parametrize("case", BAD)
def test_bad_input_strict_mode_and_check_errors(case):
    gen = torch.Generator().manual_seed(7)
    ids, offsets, kw, key_dtype, msg = bad_case(case, gen)
    m = make("cuda", Adam(lr=0.05), key_dtype=key_dtype)
    with dynamicemb.strict_checks():
        with pytest.raises(dynamicemb.DeviceInputError, match=msg):
            m(ids, offsets, **kw)
    dynamicemb.check_errors()
    m.eval()
    m(ids, offsets, **kw)
    with pytest.raises(dynamicemb.DeviceInputError, match=msg):
        dynamicemb.check_errors()


@pytest.mark.parametrize("case", BAD)
def test_bad_input_host_mode_raises_at_once(case):
    gen = torch.Generator().manual_seed(8)
    ids, offsets, kw, key_dtype, _ = bad_case(case, gen)
    m = make("cuda", SGD(lr=0.1), key_dtype=key_dtype)
    snap = snapshot(m)
    with pytest.raises(ValueError):
        m(ids, offsets, validate="host", **kw)
    assert_unchanged(m, snap)
    dynamicemb.check_errors()


def test_bad_psw_is_reported_and_kept_out_of_the_rows():
    gen = torch.Generator().manual_seed(3)
    ids, offsets, w, _ = batch(gen)
    w[4] = float("nan")
    m = make("cuda", SGD(lr=0.3))
    m(ids, offsets, per_sample_weights=w).sum().backward()
    with pytest.raises(dynamicemb.DeviceInputError, match=r"per_sample_weights: expected finite values, got "
                                                          r"per_sample_weights\[4\] = nan"):
        dynamicemb.check_errors()
    for r in all_rows(m):
        assert torch.isfinite(r).all()
    assert int(m.nonfinite_count[0]) == 1


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt", ["sgd", "adam_clip_norm"])
def test_bad_input_unchecked_stays_in_bounds(case, pooling, opt):
    """validate="off": the kernels read and write in bounds whatever the values (run under memcheck)."""
    gen = torch.Generator().manual_seed(17)
    ids, offsets, kw, key_dtype, _ = bad_case(case, gen)
    o = SGD(lr=0.1) if opt == "sgd" else Adam(lr=0.05, max_grad_norm=1.0)
    m = make("cuda", o, pooling, key_dtype=key_dtype)
    if "lengths" in kw and offsets is None:
        offsets = torch.zeros(kw["lengths"].numel() + 1, dtype=torch.int64, device="cuda")
        torch.cumsum(kw.pop("lengths"), 0, out=offsets[1:])
    kw.pop("lengths", None)
    for train in (True, False):
        m.train(train)
        out = m(ids, offsets, validate="off", **kw)
        if train:
            out.sum().backward()
    torch.cuda.synchronize()
    dynamicemb.check_errors()
    keys = m.tables[0].keys.view(torch.int64)
    assert not ((keys > -(2**63)) & (keys < -(2**63) + 3)).any()  # no reserved pattern ever stored


# ---------------------------------------------------------------------- no host sync by default
@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("inputs", ["offsets", "lengths", "weighted"])
def test_default_training_step_has_no_host_sync(opt, inputs):
    gen = torch.Generator().manual_seed(2)
    m = make("cuda", SGD(lr=0.1) if opt == "sgd" else Adam(lr=0.01))
    ids, offsets, w, lengths = batch(gen)
    kw = {"lengths": lengths} if inputs == "lengths" else {"offsets": offsets}
    if inputs == "weighted":
        kw["per_sample_weights"] = w
    m(ids, **kw).sum().backward()  # first step allocates the pinned mirrors and the error block
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            m(ids, **kw).sum().backward()
        m.eval()
        m(ids, **kw)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    dynamicemb.check_errors()


# ---------------------------------------------------------------------- non-finite policy: kernels vs CPU
NF_OPTS = {
    "sgd": lambda **kw: SGD(lr=0.3, **kw),  # direct SGD (segmented: whole segments and cut pieces)
    "sgd_wd": lambda **kw: SGD(lr=0.3, weight_decay=0.05, **kw),
    "adagrad": lambda **kw: Adagrad(lr=0.2, **kw),
    "rowwise": lambda **kw: RowWiseAdagrad(lr=0.2, **kw),
    "adam": lambda **kw: Adam(lr=0.05, **kw),
    "adam_clip_norm": lambda **kw: Adam(lr=0.05, max_grad_norm=0.5, **kw),
    "sgd_clip_value": lambda **kw: SGD(lr=0.3, max_grad_value=0.05, **kw),
}


def hot_batch(gen, where, value):
    """A batch whose id 7 (table 0) is hot (~300 occurrences, so its segment is cut by warp boundaries) and whose
    output gradient / per-sample weight is poisoned at one element touching id 7."""
    lengths = torch.randint(1, 30, (F * B,), generator=gen)
    lengths[:B] = 25  # feature 0: 16 bags of 25 ids
    ids = torch.randint(8, V, (int(lengths.sum()),), generator=gen)
    ids[: 25 * B : 2] = 7
    offsets = torch.zeros(F * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    w = torch.rand(ids.numel(), generator=gen) + 0.5
    if where == "psw":
        w[40] = value  # bag 1, an occurrence of id 7
    return ids, offsets, w


@pytest.mark.parametrize("chunk", [128, 0], ids=["segmented", "scatter"])
@pytest.mark.parametrize("opt", list(NF_OPTS))
@pytest.mark.parametrize("policy", ["skip_row", "skip_step", "raise", "propagate"])
@pytest.mark.parametrize("where, value", [("grad", float("nan")), ("psw", float("inf"))])
def test_nonfinite_policy_matches_cpu(where, value, policy, opt, chunk):
    if policy == "propagate" and opt == "sgd_clip_value":
        pytest.skip("propagate + max_grad_value: the kernels clamp NaN to -value, torch keeps NaN (as before)")
    if policy == "propagate" and opt == "adam_clip_norm" and where == "grad":
        pytest.skip("propagate + max_grad_norm with a NaN gradient: the kernels and torch spread the NaN norm to "
                    "different rows (the pre-policy behaviour, kept as is)")
    gen = torch.Generator().manual_seed(31)
    cpu, gpu = make("cpu", NF_OPTS[opt](nonfinite=policy)), make("cuda", NF_OPTS[opt](nonfinite=policy))
    gpu.backward_chunk = chunk
    for step in range(3):
        ids, offsets, w = hot_batch(gen, where if step == 1 else None, value)
        R = torch.randn(B, 32, generator=gen)
        if where == "grad" and step == 1:
            R[2, 3] = value  # bag 2 of feature 0 (it holds id 7)
        outs = []
        for m in (cpu, gpu):
            dev = m.device
            out = m(ids.to(dev), offsets.to(dev), per_sample_weights=w.to(dev), validate="off")
            raised = False
            try:
                (out * R.to(dev)).sum().backward()
                if dev.type == "cuda":
                    dynamicemb.check_errors()
            except dynamicemb.DeviceInputError:
                raised = True
            assert raised == (policy == "raise" and step == 1)
            outs.append(out.detach().cpu())
        torch.testing.assert_close(outs[1], outs[0], rtol=1e-4, atol=1e-4, equal_nan=True)  # fp32 sums, other orders
    for a, b in zip(all_rows(cpu), all_rows(gpu)):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert gpu.nonfinite_count.tolist() == cpu.nonfinite_count.tolist()
    if policy != "propagate":
        for r in all_rows(gpu):
            assert torch.isfinite(r).all()
        assert sum(gpu.nonfinite_count.tolist()) > 0


# ---------------------------------------------------------------------- torch.compile
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pooling", ["sum", "none"])
def test_compiled_training_step_matches_eager(backend, opt, pooling):
    torch._dynamo.reset()
    mk = (lambda: SGD(lr=0.3)) if opt == "sgd" else (lambda: Adam(lr=0.05))
    eager, compiled = make("cuda", mk(), pooling), make("cuda", mk(), pooling)

    def batches():
        gen = torch.Generator().manual_seed(21)
        for _ in range(3):
            ids, offsets, w, _ = batch(gen)
            w = w if pooling == "sum" else None
            width = 32 if pooling == "sum" else 16
            yield ids, offsets, w, torch.randn(ids.numel() if pooling == "none" else B, width, generator=gen).cuda()

    assert_compiled_steps_match_eager(eager, compiled, backend, batches(), all_rows, rtol=1e-5, atol=1e-6)
    dynamicemb.check_errors()
