"""Public API on CPU: input validation, qkvpacked == varlen, op registrations, torch.compile."""

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_qkvpacked_func, hstu_attn_varlen_func

H, D = 2, 8
LENS = [3, 0, 5]
MAXLEN = 5


def make(dtype=torch.float32, lens=LENS, seed=0):
    gen = torch.Generator().manual_seed(seed)
    cu = torch.tensor([0] + list(lens)).cumsum(0).to(torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, H, D, generator=gen, dtype=dtype) for _ in range(3))
    return q, k, v, cu


def call(**over):
    q, k, v, cu = make()
    args = dict(q=q, k=k, v=v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=MAXLEN, max_seqlen_k=MAXLEN)
    args.update(over)
    return hstu_attn_varlen_func(**args)


def i32(*vals):
    return torch.tensor(vals, dtype=torch.int32)


q0, k0, v0, cu0 = make()

BAD = {
    "q_not_tensor": (dict(q=[1.0]), "q"),
    "q_2d": (dict(q=q0[:, 0]), "q"),
    "q_int_dtype": (dict(q=q0.to(torch.int32)), "q"),
    "k_dtype_mismatch": (dict(k=k0.double()), "k"),
    "v_device_mismatch": (dict(v=v0.to("meta")), "v"),
    "q_last_dim_not_contiguous": (dict(q=torch.randn(8, H, 2 * D)[..., ::2]), "q"),
    "k_heads_mismatch": (dict(k=torch.randn(8, H + 1, D)), "k"),
    "v_head_dim_mismatch": (dict(v=torch.randn(8, H, D + 1)), "v"),
    "v_tokens_mismatch": (dict(v=torch.randn(7, H, D)), "v"),
    "cu_seqlens_q_int64": (dict(cu_seqlens_q=cu0.long()), "cu_seqlens_q"),
    "cu_seqlens_q_2d": (dict(cu_seqlens_q=cu0.view(1, -1)), "cu_seqlens_q"),
    "cu_seqlens_k_wrong_length": (dict(cu_seqlens_k=i32(0, 3, 8)), "cu_seqlens_k"),
    "cu_seqlens_q_not_monotonic": (dict(cu_seqlens_q=i32(0, 3, 2, 8)), "cu_seqlens_q"),
    "cu_seqlens_k_negative": (dict(cu_seqlens_k=i32(-1, 3, 3, 8)), "cu_seqlens_k"),
    "cu_seqlens_q_past_end": (dict(cu_seqlens_q=i32(0, 3, 3, 9)), "cu_seqlens_q"),
    "sequence_longer_than_max_seqlen_k": (dict(max_seqlen_k=4, max_seqlen_q=4, q=torch.randn(6, H, D),
                                               cu_seqlens_q=i32(0, 2, 2, 6)), "cu_seqlens_k"),
    "sequence_longer_than_max_seqlen_q": (dict(cu_seqlens_q=i32(0, 1, 1, 7), q=torch.randn(7, H, D),
                                              max_seqlen_q=5, cu_seqlens_k=i32(0, 1, 1, 8)), "cu_seqlens_q"),
    "max_seqlen_q_not_int": (dict(max_seqlen_q=5.0), "max_seqlen_q"),
    "max_seqlen_q_gt_k": (dict(max_seqlen_q=6), "max_seqlen_q"),
    "delta_q_longer_query": (dict(cu_seqlens_q=i32(0, 4, 4, 8), q=torch.randn(8, H, D),
                                  cu_seqlens_k=i32(0, 3, 3, 8)), "cu_seqlens_q"),
    "window_size_not_pair": (dict(window_size=(-1,)), "window_size"),
    "window_size_below_minus_one": (dict(window_size=(-2, 0)), "window_size"),
    "contexts_without_causal": (dict(num_contexts=i32(1, 0, 1)), "num_contexts"),
    "contexts_with_two_sided_window": (dict(num_contexts=i32(1, 0, 1), window_size=(2, 2)), "num_contexts"),
    "targets_without_causal": (dict(num_targets=i32(1, 0, 1)), "num_targets"),
    "targets_longer_than_sequence": (dict(num_targets=i32(1, 0, 6), window_size=(-1, 0)), "num_targets"),
    "targets_negative": (dict(num_targets=i32(1, 0, -1), window_size=(-1, 0)), "num_targets"),
    "targets_int64": (dict(num_targets=torch.tensor([1, 0, 1]), window_size=(-1, 0)), "num_targets"),
    "targets_wrong_batch": (dict(num_targets=i32(1, 0), window_size=(-1, 0)), "num_targets"),
    "contexts_plus_targets_too_long": (dict(num_targets=i32(1, 0, 3), num_contexts=i32(0, 0, 3),
                                            window_size=(-1, 0)), "num_contexts"),
    "target_group_size_zero": (dict(target_group_size=0, num_targets=i32(1, 0, 1), window_size=(-1, 0)),
                               "target_group_size"),
    "rab_wrong_rank": (dict(rab=torch.randn(3, H, MAXLEN)), "rab"),
    "rab_wrong_heads": (dict(rab=torch.randn(3, H + 1, MAXLEN, MAXLEN)), "rab"),
    "rab_wrong_seqlen": (dict(rab=torch.randn(3, 1, MAXLEN, MAXLEN - 1)), "rab"),
    "rab_wrong_batch": (dict(rab=torch.randn(2, 1, MAXLEN, MAXLEN)), "rab"),
    "rab_wrong_dtype": (dict(rab=torch.randn(3, 1, MAXLEN, MAXLEN, dtype=torch.float64)), "rab"),
    "has_drab_without_rab": (dict(has_drab=True), "has_drab"),
    "scaling_seqlen_zero": (dict(scaling_seqlen=0), "scaling_seqlen"),
    "seqused_q_too_long": (dict(seqused_q=i32(4, 0, 5)), "seqused_q"),
    "seqused_k_int64": (dict(seqused_k=torch.tensor([1, 0, 1])), "seqused_k"),
    "seqused_k_shorter_than_q": (dict(seqused_k=i32(2, 0, 5)), "cu_seqlens_q"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_validation_error_names_argument(case):
    over, arg = BAD[case]
    with pytest.raises((ValueError, TypeError)) as info:
        call(**over)
    msg = str(info.value)
    assert f"{arg}:" in msg, msg
    assert "expected" in msg and "got" in msg, msg


def test_qkvpacked_wrong_shape():
    with pytest.raises(ValueError, match="qkv"):
        hstu_attn_qkvpacked_func(torch.randn(8, 2, H, D), cu0, MAXLEN)


def test_valid_edge_cases_pass():
    # Targets filling the whole sequence, contexts + targets == length, zero-length sequences, seqused.
    call(num_targets=i32(3, 0, 5), window_size=(-1, 0))
    call(num_targets=i32(1, 0, 2), num_contexts=i32(2, 0, 3), window_size=(-1, 0), target_group_size=2)
    call(num_targets=i32(1, 0, 2), num_contexts=i32(2, 0, 3), window_size=(2, 0))  # local + context/targets
    call(seqused_q=i32(2, 0, 5), seqused_k=i32(3, 0, 5))
    call(rab=torch.randn(3, 1, MAXLEN, MAXLEN).transpose(2, 3), has_drab=True)  # non-contiguous rab is fine


@pytest.mark.parametrize("mask", ["none", "causal_targets"])
def test_qkvpacked_equals_varlen(mask):
    kw = {} if mask == "none" else dict(num_targets=i32(1, 0, 2), window_size=(-1, 0), target_group_size=2)
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(8, 3, H, D, generator=gen, dtype=torch.float64, requires_grad=True)
    rab = torch.randn(3, H, MAXLEN, MAXLEN, generator=gen, dtype=torch.float64, requires_grad=True)
    out = hstu_attn_qkvpacked_func(qkv, cu0, MAXLEN, alpha=0.5, rab=rab, has_drab=True, **kw)
    dout = torch.randn_like(out)
    dqkv, drab = torch.autograd.grad(out, (qkv, rab), dout)
    q, k, v = (qkv.detach()[:, i].clone().requires_grad_() for i in range(3))
    rab2 = rab.detach().clone().requires_grad_()
    out2 = hstu_attn_varlen_func(q, k, v, cu0, cu0, MAXLEN, MAXLEN, alpha=0.5, rab=rab2, has_drab=True, **kw)
    grads = torch.autograd.grad(out2, (q, k, v, rab2), dout)
    torch.testing.assert_close(out, out2, rtol=0, atol=0)
    torch.testing.assert_close(dqkv, torch.stack(grads[:3], 1), rtol=0, atol=0)
    torch.testing.assert_close(drab, grads[3], rtol=0, atol=0)


def test_no_drab_when_has_drab_false():
    q, k, v, cu = make(torch.float64)
    rab = torch.randn(3, 1, MAXLEN, MAXLEN, dtype=torch.float64, requires_grad=True)
    q.requires_grad_()
    hstu_attn_varlen_func(q, k, v, cu, cu, MAXLEN, MAXLEN, rab=rab).sum().backward()
    assert rab.grad is None and q.grad is not None


def test_op_bwd_returns_empty_drab():
    q, k, v, cu = make()
    dq, dk, dv, drab = torch.ops.hstu_attn.bwd(torch.randn_like(q), q, k, v, cu, cu, MAXLEN, MAXLEN, None, None,
                                               1, -1, 0, 1.0, None, 5.0, None, None, False, False)
    assert drab.shape == (0,) and dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


def test_opcheck_fwd_bwd():
    q, k, v, cu = make()
    rab = torch.randn(3, H, MAXLEN, MAXLEN)
    nt, nc = i32(1, 0, 2), i32(1, 0, 1)
    fwd_args = (q, k, v, cu, cu, MAXLEN, MAXLEN, nc, nt, 2, -1, 0, 0.5, rab, 5.0, None, None)
    utils = ("test_schema", "test_faketensor")
    torch.library.opcheck(torch.ops.hstu_attn.fwd.default, fwd_args, test_utils=utils)
    bwd_args = (torch.randn_like(q),) + fwd_args + (True, False)
    torch.library.opcheck(torch.ops.hstu_attn.bwd.default, bwd_args, test_utils=utils)


def test_compiled_kernels_without_library():
    info = hstu_attn.compiled_kernels()
    assert isinstance(info, dict)
    if not hstu_attn.library_loaded():
        assert info == {"library_loaded": False}


def test_torch_compile_inductor_forward():
    # Inductor on CPU compiles C++ (about 20 s here): forward only.
    q, k, v, cu = make(torch.float32)
    nt = i32(1, 0, 2)

    def f(q, k, v):
        return hstu_attn_varlen_func(q, k, v, cu, cu, MAXLEN, MAXLEN, None, nt, 2, (-1, 0), 0.5) + 1.0

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(q, k, v), f(q, k, v))


def test_torch_compile_fullgraph_matches_eager():
    q, k, v, cu = make(torch.float32)
    rab = torch.randn(3, 1, MAXLEN, MAXLEN)
    nt = i32(1, 0, 2)

    def f(q, k, v, rab):
        out = hstu_attn_varlen_func(q, k, v, cu, cu, MAXLEN, MAXLEN, None, nt, 1, (-1, 0), 0.5, rab, True)
        return out * 2.0

    eager_in = [t.clone().requires_grad_() for t in (q, k, v, rab)]
    comp_in = [t.clone().requires_grad_() for t in (q, k, v, rab)]
    ref = f(*eager_in)
    ref.sum().backward()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out = compiled(*comp_in)
    out.sum().backward()
    torch.testing.assert_close(out, ref)
    for a, b in zip(comp_in, eager_in):
        torch.testing.assert_close(a.grad, b.grad)


def test_same_tensor_for_q_k_v_sums_gradients():
    x = torch.randn(8, H, D, dtype=torch.float64, requires_grad=True)
    hstu_attn_varlen_func(x, x, x, cu0, cu0, MAXLEN, MAXLEN, window_size=(-1, 0)).square().sum().backward()
    q, k, v = (x.detach().clone().requires_grad_() for _ in range(3))
    hstu_attn_varlen_func(q, k, v, cu0, cu0, MAXLEN, MAXLEN, window_size=(-1, 0)).square().sum().backward()
    torch.testing.assert_close(x.grad, q.grad + k.grad + v.grad)
