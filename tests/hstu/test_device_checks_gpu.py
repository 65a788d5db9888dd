"""Device-side value checks on CUDA (skipped without a GPU).

Bad values in cu_seqlens_q/k, seqused_q/k, num_targets, num_contexts (and Lq > Lk) reach both kernel families (on
compute capability 9.0 the Hopper kernels by default, the sm80-class kernels through kernel_options(sm90=False)):
no crash, every output element NaN (forward out; backward dq, dk, dv, drab), `check_errors()` raises
DeviceInputError naming the argument, index and value (the host check's message with check_values=True), the next
call raises when check_errors was not called, raising clears the record, strict mode raises at once, a CUDA graph
replay records its error, a good call afterwards computes as before, and the default path never synchronizes.
"""

import pytest
import torch

import hstu_attn
from hstu_attn import DeviceInputError, hstu_attn_varlen_func

pytestmark = pytest.mark.gpu

H = 2
VEC_ARGS = ("cu_seqlens_q", "cu_seqlens_k", "num_contexts", "num_targets", "seqused_q", "seqused_k")

# name -> (overrides of the base call (lists become int32 CUDA tensors), arg, index, value, bound). Base call: three
# sequences of lengths 5, 0, 7 (12 rows in q, k, v), max_seqlen 7.
BAD = {
    "decreasing_offsets": (dict(cu_seqlens_q=[0, 5, 3, 12]), "cu_seqlens_q", 2, 3, 5),
    "offsets_beyond_tokens": (dict(cu_seqlens_k=[0, 5, 5, 13]), "cu_seqlens_k", 3, 13, 12),
    "negative_first_offset": (dict(cu_seqlens_k=[-1, 5, 5, 12]), "cu_seqlens_k", 0, -1, 0),
    "length_over_max_seqlen": (dict(max_seqlen_q=6, max_seqlen_k=6), "cu_seqlens_q", 2, 7, 6),
    "seqused_over_length": (dict(seqused_q=[5, 0, 8]), "seqused_q", 2, 8, 7),
    "seqused_negative": (dict(seqused_k=[5, -1, 7]), "seqused_k", 1, -1, 0),
    "targets_over_length": (dict(num_targets=[1, 0, 8], window_size=(-1, 0)), "num_targets", 2, 8, 7),
    "targets_negative": (dict(num_targets=[-1, 0, 0], window_size=(-1, 0)), "num_targets", 0, -1, 5),
    "contexts_over_room": (dict(num_targets=[2, 0, 3], num_contexts=[4, 0, 0], window_size=(-1, 0)),
                           "num_contexts", 0, 4, 3),
    "query_longer_than_keys": (dict(cu_seqlens_k=[0, 4, 4, 12], max_seqlen_q=8, max_seqlen_k=8),
                               "cu_seqlens_q", 0, 5, 4),
}


@pytest.fixture(autouse=True)
def _clean_record():
    """Each test starts with no recorded error and must leave none behind."""
    try:
        hstu_attn.check_errors()
    except DeviceInputError:
        pass
    yield
    hstu_attn.check_errors()


@pytest.fixture(params=["default", "sm80"])
def family(request):
    """The default kernels (Hopper ones on compute capability 9.0) or the sm80-class ones, for the whole test."""
    with hstu_attn._ops.kernel_options(sm90=request.param != "sm80"):
        yield request.param


def i32(vals):
    return torch.tensor(vals, dtype=torch.int32, device="cuda")


def base_call(D=128, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(12, H, D, generator=gen, device="cuda", dtype=dtype) for _ in range(3))
    return dict(q=q, k=k, v=v, cu_seqlens_q=i32([0, 5, 5, 12]), cu_seqlens_k=i32([0, 5, 5, 12]), max_seqlen_q=7,
                max_seqlen_k=7)


def bad_call(case, **kw):
    call = base_call(**kw)
    over, *_ = BAD[case]
    for name, val in over.items():
        call[name] = i32(val) if name in VEC_ARGS else val
    return call


def with_rab(call, rab_kind, seed=1):
    if rab_kind is not None:
        gen = torch.Generator(device="cuda").manual_seed(seed)
        mk = call["max_seqlen_k"]
        call["rab"] = torch.randn(3, 1 if rab_kind == "shared" else H, mk, mk, generator=gen, device="cuda",
                                  dtype=call["q"].dtype)
        call["has_drab"] = True
    return call


def assert_recorded(case):
    _, arg, index, value, bound = BAD[case]
    with pytest.raises(DeviceInputError) as info:
        hstu_attn.check_errors()
    e = info.value
    assert (e.arg, e.index, e.value, e.bound) == (arg, index, value, bound), str(e)
    assert str(e).startswith(f"hstu_attn: {arg}: expected "), str(e)
    hstu_attn.check_errors()  # raising cleared it
    return str(e)


def all_nan(t):
    return t.numel() == 0 or bool(torch.isnan(t.float()).all())


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_forward(case, family):
    call = bad_call(case)
    with pytest.raises(ValueError) as host:  # check_values=True: the host check, same rule, at once
        hstu_attn_varlen_func(**call, check_values=True)
    out = hstu_attn_varlen_func(**call)
    torch.cuda.synchronize()
    assert all_nan(out)
    message = assert_recorded(case)
    assert message.startswith(str(host.value) + " (found on cuda:"), (message, str(host.value))


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_backward(case, family):
    call = bad_call(case)
    leaves = {n: call[n].clone().requires_grad_() for n in ("q", "k", "v")}
    call.update(leaves)
    out = hstu_attn_varlen_func(**call)
    assert_recorded(case)  # the forward's
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    for n, t in leaves.items():
        assert all_nan(t.grad), n
    assert_recorded(case)  # the backward's


@pytest.mark.parametrize("rab_kind,deterministic", [("shared", False), ("per_head", False), ("shared", True),
                                                    (None, True)])
@pytest.mark.parametrize("case", ["decreasing_offsets", "contexts_over_room"])
def test_bad_values_backward_rab_and_deterministic(case, rab_kind, deterministic, family):
    call = with_rab(bad_call(case), rab_kind)
    leaves = {n: call[n].clone().requires_grad_() for n in ("q", "k", "v") + (("rab",) if rab_kind else ())}
    call.update(leaves)
    out = hstu_attn_varlen_func(**call, deterministic=deterministic)
    assert_recorded(case)
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    for n, t in leaves.items():
        assert all_nan(t.grad), n
    assert_recorded(case)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_bad_values_jagged_work_lists(D, family):
    """Jagged batches large enough for the Hopper work lists (forward; D = 256 backward) and the self-zeroing dq
    workspace (D = 64 / 128 backward): an empty sequence with a target is reported, every output is NaN."""
    lens = [3000, 1, 27, 0, 99, 256, 5, 700, 1111, 2, 64, 129]
    gen = torch.Generator(device="cuda").manual_seed(D)
    cu = i32([0] + lens).cumsum(0).to(torch.int32)
    total = sum(lens)
    q, k, v = (torch.randn(total, H, D, generator=gen, device="cuda", dtype=torch.bfloat16).requires_grad_()
               for _ in range(3))
    nt = [min(2, n) for n in lens]
    nt[3] = 5  # sequence 3 is empty
    out = hstu_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), num_targets=i32(nt), window_size=(-1, 0))
    with pytest.raises(DeviceInputError) as info:
        hstu_attn.check_errors()
    assert (info.value.arg, info.value.index, info.value.value, info.value.bound) == ("num_targets", 3, 5, 0)
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    assert all_nan(out) and all_nan(q.grad) and all_nan(k.grad) and all_nan(v.grad)
    with pytest.raises(DeviceInputError):
        hstu_attn.check_errors()


def test_next_call_raises_and_a_good_call_after_works(family):
    good = base_call()
    with torch.no_grad():
        ref = hstu_attn_varlen_func(**good, window_size=(-1, 0))
        hstu_attn_varlen_func(**bad_call("decreasing_offsets"), window_size=(-1, 0))
        torch.cuda.synchronize()
        with pytest.raises(DeviceInputError, match="cu_seqlens_q: expected non-decreasing offsets"):
            hstu_attn_varlen_func(**good, window_size=(-1, 0))  # raises the earlier call's error
        out = hstu_attn_varlen_func(**good, window_size=(-1, 0))  # the record was cleared by raising
    torch.cuda.synchronize()
    assert torch.equal(out, ref)


def test_strict_mode_raises_at_once(family):
    call = bad_call("targets_over_length")
    with hstu_attn.strict_checks():
        with pytest.raises(DeviceInputError, match="num_targets"):
            hstu_attn_varlen_func(**call)
        out = hstu_attn_varlen_func(**base_call())  # a good call in strict mode returns normally
    assert torch.isfinite(out.float()).all()
    # backward: the forward outside strict mode, its error cleared, then the backward inside
    call = bad_call("seqused_over_length")
    q = call["q"].clone().requires_grad_()
    call["q"] = q
    out = hstu_attn_varlen_func(**call)
    assert_recorded("seqused_over_length")
    hstu_attn.set_strict_checks(True)
    try:
        with pytest.raises(DeviceInputError, match="seqused_q"):
            out.backward(torch.randn_like(out))
    finally:
        hstu_attn.set_strict_checks(False)


def test_cuda_graph_replay_records_the_error(family):
    call = base_call()
    cu_q = call["cu_seqlens_q"]
    with torch.no_grad():
        ref = hstu_attn_varlen_func(**call, window_size=(-1, 0))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            hstu_attn_varlen_func(**call, window_size=(-1, 0))  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = hstu_attn_varlen_func(**call, window_size=(-1, 0))
    graph.replay()
    hstu_attn.check_errors()
    assert torch.equal(out, ref)
    cu_q.copy_(i32([0, 5, 3, 12]))  # decreasing, in the captured buffer
    graph.replay()
    with pytest.raises(DeviceInputError) as info:
        hstu_attn.check_errors()
    assert (info.value.arg, info.value.index) == ("cu_seqlens_q", 2)
    assert all_nan(out)
    cu_q.copy_(i32([0, 5, 5, 12]))
    graph.replay()
    hstu_attn.check_errors()
    assert torch.equal(out, ref)


def test_default_path_does_not_synchronize(family):
    call = base_call()
    leaves = {n: call[n].clone().requires_grad_() for n in ("q", "k", "v")}
    call.update(leaves)
    dout = torch.randn_like(call["q"])
    hstu_attn_varlen_func(**call, window_size=(-1, 0)).backward(dout)  # first calls: allocations, error block
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = hstu_attn_varlen_func(**call, window_size=(-1, 0))
        out.backward(dout)
        with pytest.raises(RuntimeError, match="synchroniz"):  # the mode does catch the host check's copy
            hstu_attn_varlen_func(**call, window_size=(-1, 0), check_values=True)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert all(torch.isfinite(t.grad.float()).all() for t in leaves.values())
