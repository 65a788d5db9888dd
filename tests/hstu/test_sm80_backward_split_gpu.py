"""The sm80-class backward's split of long key-block walks (kernel_options(fwd_sm80_cfg=14), bf16, D = 64 / 128 / 256
on sm_90-class devices, no rab; hstu/csrc/sm80/hstu_bwd_sm80_split.cuh): a list kernel lists every key block of the
call and cuts the long walks into chunks of query tiles; the chunks' fp32 dK / dV partials are summed by the last
chunk in chunk order. Each case meets the error rule of test_kernels_gpu.py against the fp32 reference (fresh random
inputs, gradients poisoned), runs the split's kernel, agrees with the default (main's path) to the fp32 reduction
order, and gives the same dK / dV bit for bit on a second run (the sums' order does not depend on which chunk ends
last). Jagged batches of long and short sequences (0, 1 and tile-edge lengths beside 2,100 keys), causal with and
without contexts, targets with groups, a local window, no mask; the rule's chunks and forced 2-tile chunks (many
split blocks, chunks crossing the context gap)."""
import os
import sys
import zlib

import pytest
import torch

from hstu_attn import hstu_attn_varlen_func

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_kernel_checks import _no_tf32, kernel_opts  # noqa: E402, F401  (the fixtures)

pytestmark = pytest.mark.gpu

SPLIT_CFG = 14  # (hstu_attn._ops.FWD_SM80_CFG_BWD_SPLIT)


def _sm90():
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def _grads(case, dout):
    """dq, dk, dv of one backward of case at alpha 0.5, the allocator poisoned before the backward"""
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    out = hstu_attn_varlen_func(*leaves, alpha=0.5, **kg._varlen_kwargs(case))
    kg.poison_allocator(8 * case["q"].numel() * case["q"].element_size())
    return torch.autograd.grad(out, leaves, dout)


def _bwd_kernels(case):
    """names of the sm80-class backward's kernels (main's and the split's list) one backward of case runs"""
    leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    out = hstu_attn_varlen_func(*leaves, alpha=0.5, rab=case["rab"], **kg._varlen_kwargs(case))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.autograd.grad(out, leaves, torch.randn_like(out))
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if "hstu_bwd_pds" in e.name or "hstu_bwd_split" in e.name}


@pytest.mark.parametrize("chunk", [None, 2])
@pytest.mark.parametrize("mask", ["causal", "context", "context_target_group", "local_context_target", "none"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_split(D, mask, chunk, kernel_opts):
    if not _sm90():
        pytest.skip("the split runs on sm_90-class devices (the default's loops)")
    lens = [1500, 0, 1, 129, 700, 64, 33, 257, 2100, 128]
    case = kg.make_case(zlib.crc32(repr(("split38", D, mask, chunk)).encode()), lens, 2, D, torch.bfloat16, mask, 0)
    if case["num_contexts"] is not None:  # contexts of 0-200 rows on both sides of the tile edges
        nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
        want = [200, 0, 1, 65, 64, 63, 1, 130, 129, 0]
        nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
        case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    opts = dict(sm90=False, fwd_sm80_cfg=SPLIT_CFG)
    if chunk is not None:
        opts["fwd_split_tiles"] = chunk
    kernel_opts(**opts)
    kg.check_case(case, 0.5)
    dout = torch.randn_like(case["q"])
    got = _grads(case, dout)
    assert not any(torch.isnan(g).any() for g in got)
    names = _bwd_kernels(case)
    assert any("hstu_bwd_pds_split_kernel<" in n for n in names), names
    assert any("hstu_bwd_split_list_kernel<" in n for n in names), names
    again = _grads(case, dout)
    for name, a, b in zip(("dk", "dv"), got[1:], again[1:]):
        assert torch.equal(a, b), (name, kg.max_err(a, b))
    kernel_opts(sm90=False)
    want = _grads(case, dout)
    kg.assert_agree(("dq", "dk", "dv"), got, want, "the split vs the default")


@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_split_many_sequences(D, kernel_opts):
    """80 sequences of 0-1,000 keys and one of 4,000 (a list of several hundred items, two heads): the error rule
    against the fp32 reference with the rule's chunks."""
    if not _sm90():
        pytest.skip("the split runs on sm_90-class devices (the default's loops)")
    case, _ = kg.many_sequences_case("split38m", D)
    kernel_opts(sm90=False, fwd_sm80_cfg=SPLIT_CFG)
    kg.check_case(case, 0.5)
    names = _bwd_kernels(case)
    assert any("hstu_bwd_pds_split_kernel<" in n for n in names), names


@pytest.mark.parametrize("mask", ["causal", "context_target_group"])
def test_sm80_backward_split_d256_ksplit_loop(mask, kernel_opts):
    """D = 256: the split runs the loop without the split S / dP (kBwdPdsD256Unsplit; its context twin spills none),
    bwd_sm80_cfg=13 under the split the default's loop with it (kBwdPdsD256OneBar): both meet the error rule against
    the fp32 reference, run their kernel, and agree to the fp32 reduction order."""
    if not _sm90():
        pytest.skip("the split runs on sm_90-class devices (the default's loops)")
    lens = [1500, 0, 1, 129, 700, 64, 33, 257, 2100, 128]
    case = kg.make_case(zlib.crc32(repr(("split38u", mask)).encode()), lens, 2, 256, torch.bfloat16, mask, 0)
    dout = torch.randn_like(case["q"])
    got = {}
    for cfg, body in ((0, 714), (13, 33482)):  # (the BODY template argument of each)
        kernel_opts(sm90=False, fwd_sm80_cfg=SPLIT_CFG, bwd_sm80_cfg=cfg, fwd_split_tiles=3)
        kg.check_case(case, 0.5)
        names = _bwd_kernels(case)
        assert any(f"hstu_bwd_pds_split_kernel<__nv_bfloat16, 256, 2, 8, {body}," in n for n in names), (cfg, names)
        got[cfg] = _grads(case, dout)
    kg.assert_agree(("dq", "dk", "dv"), got[13], got[0], "the split's loops: split S / dP vs not")


@pytest.mark.parametrize("cfg", [0, SPLIT_CFG])
@pytest.mark.parametrize("D", [64, 128])
def test_sm80_backward_context_loops_repeated(D, cfg, kernel_opts):
    """The many-sequences case with contexts, 60 backwards back to back WITHOUT the allocator's poisoning (which
    hid the fault): the loops with contexts on sm_90-class devices (the default's context twins, cfg 0, and the
    split's kernel) once read the first tiles' rows from thread 0's shared tile map before the barrier that makes
    it visible, so now and then one key block's CTA walked a stale map (3 of 60 runs at D = 128 under the split).
    Every run meets the error rule against the fp32 reference, and dK / dV are the same bits in every run."""
    if not _sm90():
        pytest.skip("the context loops run on sm_90-class devices")
    case, _ = kg.many_sequences_case("split40r", D)
    args = kg._varlen_kwargs(case)
    dout = torch.randn_like(case["q"])
    ref, bound = kg.grad_reference(case, dout, 0.5)
    kernel_opts(sm90=False, fwd_sm80_cfg=cfg)
    first = None
    for run in range(60):
        leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
        out = hstu_attn_varlen_func(*leaves, alpha=0.5, **args)
        got = torch.autograd.grad(out, leaves, dout)
        for name, gt, r, bd in zip(("dq", "dk", "dv"), got, ref, bound):
            err = kg.max_err(gt, r)
            assert err <= bd, f"run {run}: {name} error {err:.3e} > {bd:.3e}"
        if first is None:
            first = got
        else:
            assert torch.equal(got[1], first[1]) and torch.equal(got[2], first[2]), f"run {run}: dK / dV differ"


@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_split_default_rule(D, kernel_opts):
    """The split by default (hstu_bwd_sm80_walk_split.h bwd_split_default): a jagged batch of a few sequences, one
    long (few key blocks x heads for the SMs) runs the split's kernels and meets the error rule; with
    kernel_options(bwd_sm80_split=False) it does not split; a many-wave dense batch, a dense batch at D = 256, fp16
    and rab never split by default."""
    if not _sm90():
        pytest.skip("the split runs on sm_90-class devices (the default's loops)")
    split = "hstu_bwd_pds_split_kernel<"
    lens = [2065, 0, 700, 31, 1290, 129, 300]
    case = kg.make_case(zlib.crc32(repr(("split40d", D)).encode()), lens, 2, D, torch.bfloat16, "context", 0)
    kernel_opts(sm90=False)
    kg.check_case(case, 0.5)
    assert any(split in n for n in _bwd_kernels(case)), D
    kernel_opts(sm90=False, bwd_sm80_split=False)
    kg.check_case(case, 0.5)
    assert not any(split in n for n in _bwd_kernels(case)), D
    kernel_opts(sm90=False)
    dense_many = kg.make_case(zlib.crc32(repr(("split40m", D)).encode()), [1024] * 32, 2, D, torch.bfloat16,
                              "causal", 0)
    assert not any(split in n for n in _bwd_kernels(dense_many)), D
    dense = kg.make_case(zlib.crc32(repr(("split40n", D)).encode()), [2048], 2, D, torch.bfloat16, "causal", 0)
    assert any(split in n for n in _bwd_kernels(dense)) == (D != 256), D
    half = kg.make_case(zlib.crc32(repr(("split40h", D)).encode()), lens, 2, D, torch.float16, "context", 0)
    assert not any(split in n for n in _bwd_kernels(half)), D
    rab = kg.make_case(zlib.crc32(repr(("split40r", D)).encode()), lens, 2, D, torch.bfloat16, "causal", 1)
    assert not any(split in n for n in _bwd_kernels(rab)), D
