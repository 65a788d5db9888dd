"""CUDA kernels against the reference, with the error-relative rule (FBGEMM HSTU convention):

    max|kernel - ref32| <= 2 * max|torch_same_dtype - ref32| + atol      (forward)
    max|kernel - ref32| <= 5 * max|torch_same_dtype - ref32| + atol      (gradients)

ref32 is `hstu_attn_reference` on float32 copies of the inputs (TF32 off); torch_same_dtype is the
reference computed entirely in the input dtype (upcast=False). Outputs are poisoned: before every kernel
call the CUDA caching allocator is handed a NaN-filled block, so unwritten output elements show up as
NaN (and rows that must be zero are checked to be exactly zero).

The grid (B up to 32, H in {1,2,4,8}, D in {32,64,128,256}, lengths incl. 0, 1, 27, 99, 256, 1111, 2000,
every mask and combination, alpha in {1, 0.1}, rab none/shared/per-head, Lq < Lk, bf16/fp16) is sampled:
every mask meets every D, dtype, rab kind and alpha across the cases, not all products. Plus hypothesis.
Budget: about 3 minutes on one H100.
"""

import itertools
import os
import random
import sys
import zlib

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_reference, hstu_attn_varlen_func

pytestmark = pytest.mark.gpu

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

# The case maker, the error rule's check and the fixtures live in hstu_kernel_checks.py (shared with
# test_sm80_forward_gpu.py); the fixtures are imported so that pytest finds them here.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hstu_kernel_checks import (GR_MASKS, LENGTHS, MASKS, PDS_DQ_CLAIM, _gr_case, _no_tf32,  # noqa: E402, F401
                                _varlen_kwargs, _with, assert_agree, check_case, kernel_opts, make_case, max_err,
                                poison_allocator)


# ------------------------------------------------------------------------------------------------
# The sampled grid
# ------------------------------------------------------------------------------------------------


def _grid():
    cases = []
    dims = itertools.cycle([32, 64, 128, 256])
    heads = itertools.cycle([1, 2, 4, 8])
    dtypes = itertools.cycle([torch.bfloat16, torch.float16])
    rabs = itertools.cycle([0, 1, 2])  # none, shared (1 head), per-head
    alphas = itertools.cycle([1.0, 0.1])
    length_sets = itertools.cycle([
        [27, 0, 99, 1],
        [256, 1111],
        [2000],
        [1, 0, 27, 99, 256, 0, 5, 64],
        [99] * 32,
    ])
    for mask in MASKS:
        for delta_q in (False, True):
            for _ in range(2):
                lens = next(length_sets)
                D = next(dims)
                H = next(heads)
                if max(lens) >= 1111 and D * H > 256:
                    H = max(1, 256 // D)  # keep the fp32 reference of the long cases cheap
                cases.append(pytest.param(mask, delta_q, lens, H, D, next(dtypes), next(rabs), next(alphas),
                                          id=f"{mask}-dq{int(delta_q)}-L{max(lens)}x{len(lens)}-H{H}-D{D}"))
    return cases


@pytest.mark.parametrize("mask,delta_q,lens,H,D,dtype,rab_heads,alpha", _grid())
def test_kernel_grid(mask, delta_q, lens, H, D, dtype, rab_heads, alpha):
    seed = zlib.crc32(repr((mask, delta_q, lens, H, D)).encode())
    case = make_case(seed, lens, H, D, dtype, mask, rab_heads, delta_q=delta_q)
    check_case(case, alpha)


@pytest.mark.parametrize("D", [32, 64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kernel_every_head_dim_and_dtype(D, dtype):
    case = make_case(D, [27, 99, 256, 0, 1], 2, D, dtype, "causal", 2)
    check_case(case, 0.1)


@pytest.mark.parametrize("mask", ["none", "causal", "context_target", "local_context_target"])
def test_kernel_seqused(mask):
    case = make_case(3, [99, 27, 0, 256], 4, 64, torch.bfloat16, mask, 1, delta_q=True, seqused=True)
    check_case(case, 1.0)


def test_kernel_rab_without_drab():
    case = make_case(9, [99, 27], 2, 128, torch.bfloat16, "causal", 2)
    check_case(case, 0.5, has_drab=False)


@pytest.mark.parametrize("D,dtype,mask,rab_heads", [
    (32, torch.float16, "target_group", 1),
    (64, torch.bfloat16, "causal", 2),
    (128, torch.bfloat16, "context_target", 1),
    (256, torch.float16, "local_context_target", 0),
])
def test_kernel_deterministic_backward(D, dtype, mask, rab_heads):
    """deterministic=True (dq from a query-parallel kernel instead of fp32 atomics; a shared rab's drab summed over
    heads in a fixed order): as accurate as the default path, and two runs are bit-identical."""
    case = make_case(40 + D, [256, 99, 1111, 0, 27], 4, D, dtype, mask, rab_heads, delta_q=True)
    check_case(case, 0.5, deterministic=True)
    args = {n: case[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "num_contexts",
                                 "num_targets", "target_group_size", "window_size")}
    dout = torch.randn_like(case["q"])
    runs = []
    for _ in range(2):
        leaves = [case[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
        rab = None if case["rab"] is None else case["rab"].detach().clone().requires_grad_()
        out = hstu_attn_varlen_func(*leaves, rab=rab, has_drab=rab is not None, deterministic=True, **args)
        runs.append(torch.autograd.grad(out, leaves + ([rab] if rab is not None else []), dout))
    for name, g0, g1 in zip(("dq", "dk", "dv", "drab"), *runs):
        assert torch.equal(g0, g1), f"{name} differs between two deterministic runs"


if given is not None:

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        seed=st.integers(0, 2**20),
        lens=st.lists(st.sampled_from(LENGTHS[:5] + [3, 17, 64, 128, 200]), min_size=1, max_size=12),
        H=st.sampled_from([1, 2, 4, 8]),
        D=st.sampled_from([32, 64, 128, 256]),
        dtype=st.sampled_from([torch.bfloat16, torch.float16]),
        mask=st.sampled_from(sorted(MASKS)),
        rab_heads=st.sampled_from([0, 1, 2]),
        alpha=st.sampled_from([1.0, 0.1, 0.37]),
        delta_q=st.booleans(),
        seqused=st.booleans(),
    )
    def test_kernel_hypothesis(seed, lens, H, D, dtype, mask, rab_heads, alpha, delta_q, seqused):
        case = make_case(seed, lens, H, D, dtype, mask, rab_heads, delta_q=delta_q, seqused=seqused)
        check_case(case, alpha)


# ------------------------------------------------------------------------------------------------
# Validation that only applies on CUDA
# ------------------------------------------------------------------------------------------------


def test_cuda_rejects_unsupported_head_dim_and_dtype():
    cu = torch.tensor([0, 4], dtype=torch.int32, device="cuda")
    x = torch.randn(4, 2, 48, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="q:.*head_dim"):
        hstu_attn_varlen_func(x, x, x, cu, cu, 4, 4)
    x = torch.randn(4, 2, 64, device="cuda", dtype=torch.float32)
    with pytest.raises(TypeError, match="q:.*dtype"):
        hstu_attn_varlen_func(x, x, x, cu, cu, 4, 4)
    y = torch.randn(4, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="k:"):
        hstu_attn_varlen_func(x.bfloat16(), y, y, cu, cu, 4, 4)


def test_library_is_loaded_and_reports_kernels():
    assert hstu_attn.library_loaded()
    info = hstu_attn.compiled_kernels()
    assert isinstance(info, dict) and info


# ------------------------------------------------------------------------------------------------
# torch.compile and CUDA graphs
# ------------------------------------------------------------------------------------------------


def _graph_case():
    return make_case(21, [99, 256, 0, 27], 4, 128, torch.bfloat16, "context_target", 2)


def _call_args(case):
    return {n: case[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "num_contexts",
                                 "num_targets", "target_group_size", "window_size", "rab")}


def test_torch_compile_fullgraph_matches_eager():
    case = _graph_case()
    args = _call_args(case)

    def f(q, k, v):
        return hstu_attn_varlen_func(q, k, v, alpha=0.5, **args) * 2

    eager_in = [case[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
    comp_in = [case[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
    ref = f(*eager_in)
    dout = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, eager_in, dout)
    out = torch.compile(f, fullgraph=True)(*comp_in)
    grads = torch.autograd.grad(out, comp_in, dout)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-3)  # dq may accumulate in any order


def test_cuda_graph_capture_and_replay():
    case = _graph_case()
    args = _call_args(case)
    q, k, v = (case[n].clone() for n in ("q", "k", "v"))
    dout = torch.randn_like(q)
    op_args = (case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"], case["max_seqlen_k"],
               case["num_contexts"], case["num_targets"], case["target_group_size"], -1, 0, 0.5, case["rab"], float(case["max_seqlen_q"]),
               None, None)

    def step():
        out = hstu_attn_varlen_func(q, k, v, alpha=0.5, **args)
        grads = torch.ops.hstu_attn.bwd(dout, q, k, v, *op_args, True, False)
        return out, grads

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_grads = step()
    # New input values, same buffers: the replay must see them.
    for t in (q, k, v, dout):
        t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    out, grads = step()
    torch.testing.assert_close(g_out, out, rtol=0, atol=0)
    for a, b in zip(g_grads, grads):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-3)  # dq/drab atomics may add in any order


# ------------------------------------------------------------------------------------------------
# Both forward kernel families on a Hopper GPU
# ------------------------------------------------------------------------------------------------


def _is_sm90():
    return torch.cuda.get_device_capability() == (9, 0)


def test_sm90_kernels_present_when_built_for_sm90a():
    """On an H100/H200 with a wheel built for sm_90a, the Hopper forward, backward and FP8 forward / backward units are
    in the library."""
    info = hstu_attn.compiled_kernels()["instance_archs"]
    sm90 = {name: archs for name, archs in info.items() if "_sm90_" in name}
    built_for_90a = any("sm_90a" in archs for archs in info.values())
    if not built_for_90a:
        assert not sm90, "sm90 units registered in a build without sm_90a"
        pytest.skip("this wheel was built without sm_90a")
    expected = [f"hstu_fwd_sm90_{dt}_hdim{d}" for dt in ("bf16", "fp16") for d in (64, 128, 256)]
    expected += [f"hstu_bwd_sm90_{dt}_hdim{d}" for dt in ("bf16", "fp16") for d in (64, 128, 256)]
    expected += [f"hstu_fwd_sm90_fp8_hdim{d}" for d in (64, 128, 256)]  # the FP8 (e4m3) forward (issue 36)
    expected += [f"hstu_bwd_sm90_fp8_hdim{d}" for d in (64, 128, 256)]  # the FP8 backward (issue 36)
    assert sorted(sm90) == sorted(expected), sorted(sm90)


@pytest.mark.parametrize("mask,D,delta_q,seqused,rab_heads,long", [
    ("causal", 256, False, False, 0, 3000),
    ("context", 256, True, False, 0, 3000),
    ("context_target_group", 128, False, True, 0, 3000),
    ("local_context_target", 64, True, False, 0, 3000),
    ("none", 128, False, False, 1, 1500),
    ("target_group", 256, True, True, 2, 1500),
])
def test_jagged_work_list_forward(mask, D, delta_q, seqused, rab_heads, long, kernel_opts):
    """Jagged lengths with one long sequence. On sm90 the forward runs its longest-first work list and splits the
    long query tiles' KV ranges into chunks (fp32 partials summed in chunk order by the last chunk): it meets the
    error rule, is bitwise repeatable, and so does the grid order (kernel_options(fwd_work_list=False)). Elsewhere both
    calls run the same kernel."""
    lens = [long, 1, 27, 0, 99, 256, 5, 700, 1111, 2, 64, 129]
    case = make_case(zlib.crc32(repr((mask, D, long)).encode()), lens, 2, D, torch.bfloat16, mask, rab_heads,
                     delta_q=delta_q, seqused=seqused)
    check_case(case, 0.5, backward=False)
    args = _varlen_kwargs(case)
    with torch.no_grad():
        o1 = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"], **args)
        o2 = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"], **args)
    assert torch.equal(o1, o2), "forward differs between two calls"
    kernel_opts(fwd_work_list=False)
    check_case(case, 0.5, backward=False)


@pytest.mark.parametrize("mask,D,delta_q,seqused", [
    ("causal", 128, False, False),
    ("context_target_group", 128, True, True),
    ("local", 64, False, True),
    ("none", 64, True, False),
    ("local_context_target", 128, False, False),
])
def test_persistent_forward_matches_grid(mask, D, delta_q, seqused, kernel_opts):
    """Grids of more than one wave (here 48 sequences x 2 heads x 3 query tiles, most of them with work, so no work
    list) run on sm90 at D = 64 / 128 as persistent CTAs that take their query tiles from a counter: past-the-end
    tiles are skipped, tiles without keys (seqused) still write their zeros. The output meets the error rule and is
    bitwise the grid order's (kernel_options(fwd_persist=False), one CTA per query tile: the same arithmetic per tile)."""
    rng = random.Random(zlib.crc32(repr(("persist", mask, D)).encode()))
    lens = [rng.randint(200, 384) for _ in range(42)] + [0, 1, 128, 129, 256, 383]
    case = make_case(zlib.crc32(repr((mask, D, "persist")).encode()), lens, 2, D, torch.bfloat16, mask, 0,
                     delta_q=delta_q, seqused=seqused)
    check_case(case, 0.5, backward=False)
    args = _varlen_kwargs(case)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        persistent = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **args)
        torch.cuda.synchronize()
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if _is_sm90() and any("sm_90a" in archs for archs in info.values()):
        names = [e.name for e in prof.events() if "hstu_fwd_sm90_kernel" in e.name]
        assert names and all("FwdSm90Persistent" in n.split("(")[0] for n in names), sorted(set(names))
    kernel_opts(fwd_persist=False)
    with torch.no_grad():
        grid = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **args)
    assert torch.equal(persistent, grid), "persistent CTAs and the grid order differ"


@pytest.mark.parametrize("mask,delta_q,seqused,long", [
    ("causal", False, False, 3000),
    ("context", True, False, 3000),
    ("context_target_group", False, True, 3000),
    ("local_context_target", True, False, 2000),
    ("none", False, False, 1500),
    ("local", False, True, 1500),
])
def test_jagged_work_list_backward_d256(mask, delta_q, seqused, long, kernel_opts):
    """Jagged lengths with one long sequence at D = 256. On sm90 the backward runs its longest-first work list (a
    planner kernel, then the split-D kernel on the list) and splits the long key blocks' query tiles into chunks
    whose fp32 dK / dV partials the last chunk adds: it meets the error rule and agrees with the grid
    (kernel_options(bwd_work_list=False)) to the fp32 reduction order. Elsewhere both calls run the same kernel."""
    lens = [long, 1, 27, 0, 99, 256, 5, 700, 1111, 2, 64, 129, 63, 65]
    seed = zlib.crc32(repr(("bwd_list", mask, long)).encode())
    case = make_case(seed, lens, 2, 256, torch.bfloat16, mask, 0, delta_q=delta_q, seqused=seqused)
    check_case(case, 0.5)
    do = torch.randn_like(case["q"])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        listed = _bwd_op(case, do, case["q"], case["k"], case["v"], 0)
        torch.cuda.synchronize()
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if _is_sm90() and any("sm_90a" in archs for archs in info.values()):
        names = [e.name for e in prof.events()]
        assert any("hstu_sm90_plan_kernel" in n and "BwdPlanUnits" in n for n in names), sorted(set(names))
    kernel_opts(bwd_work_list=False)
    check_case(case, 0.5)
    grid = _bwd_op(case, do, case["q"], case["k"], case["v"], 0)
    assert_agree(("dq", "dk", "dv"), listed[:3], grid[:3], "work list vs grid")


@pytest.mark.parametrize("D,long,mask", [
    (256, 6500, "causal"),
    (256, 0, "context_target_group"),
    (128, 0, "causal"),
    (64, 3000, "local_context_target"),
])
def test_jagged_work_list_large_batches(D, long, mask, kernel_opts):
    """Many uneven jagged sequences (more than 8 waves of CTAs, nothing to split): on sm90 the work lists keep the
    kernels' grid orders less their empty CTAs (each sequence's units in a row; the forward and, with one long
    sequence, the D = 256 backward: one head's units of a sequence, then the next head's; the D = 256 backward of
    short sequences: the heads of a unit side by side). Forward and backward meet the error rule and agree with the
    grids (kernel_options(fwd_work_list=False, bwd_work_list=False)) to the fp32 reduction order."""
    seed = zlib.crc32(repr(("list_large", D, long, mask)).encode())
    rng = random.Random(seed)
    lens = [long] if long else []
    lens += [rng.randint(1, 100) for _ in range(120)] + [rng.randint(100, 700) for _ in range(30)] + [0, 1, 64, 128]
    rng.shuffle(lens)
    case = make_case(seed, lens, 4, D, torch.bfloat16, mask, 0)
    check_case(case, 0.5)
    do = torch.randn_like(case["q"])
    listed = _fwd_bwd_ops(case, do)
    kernel_opts(fwd_work_list=False, bwd_work_list=False)
    grid = _fwd_bwd_ops(case, do)
    assert_agree(("out", "dq", "dk", "dv"), listed, grid, "work list vs grid")


@pytest.mark.parametrize("D,mask", [(256, "causal"), (256, "context_target_group"), (128, "causal")])
def test_jagged_work_list_many_sequences(D, mask, kernel_opts):
    """More sequences than the planner's threads (1,101: it walks them in two rounds), one long and the rest short
    (some empty): on sm90 the forward's and the D = 256 backward's work lists run (the planner kernel shows in the
    profile) and agree with the grids (kernel_options(fwd_work_list=False, bwd_work_list=False)) to the fp32
    reduction order, with no NaN; elsewhere both calls run the same kernels."""
    seed = zlib.crc32(repr(("list_many", D, mask)).encode())
    rng = random.Random(seed)
    lens = [2000] + [rng.randint(0, 40) for _ in range(1100)]
    rng.shuffle(lens)
    case = make_case(seed, lens, 2, D, torch.bfloat16, mask, 0)
    do = torch.randn_like(case["q"])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        listed = _fwd_bwd_ops(case, do)
        torch.cuda.synchronize()
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if _is_sm90() and any("sm_90a" in archs for archs in info.values()):
        names = [e.name for e in prof.events()]
        assert any("hstu_sm90_plan_kernel" in n and "FwdPlanUnits" in n for n in names), sorted(set(names))
        if D == 256:
            assert any("hstu_sm90_plan_kernel" in n and "BwdPlanUnits" in n for n in names), sorted(set(names))
    kernel_opts(fwd_work_list=False, bwd_work_list=False)
    grid = _fwd_bwd_ops(case, do)
    for name, g in zip(("out", "dq", "dk", "dv"), listed):
        assert not torch.isnan(g).any(), f"NaN in {name}"
    assert_agree(("out", "dq", "dk", "dv"), listed, grid, "work list vs grid")


@pytest.mark.parametrize("D,mask,lens", [
    (256, "causal", [2100]),
    (128, "context_target_group", [2048, 2048]),
    (64, "context", [3000]),
])
def test_short_causal_grid_forward_work_list(D, mask, lens, kernel_opts):
    """Dense lengths, a short grid of long sequences (at most 264 CTAs, at least 16 query tiles) under a causal mask
    (contexts and targets allowed): on sm90 the forward runs its work list (the planner shows in the profile) and
    splits the last query tiles' KV ranges; it meets the error rule, is bitwise repeatable and agrees with the grid
    (kernel_options(fwd_work_list=False)) to the fp32 reduction order. Elsewhere all calls run the same kernel. A left window
    (local masks) keeps the grid."""
    case = make_case(zlib.crc32(repr(("short_grid", D, mask, lens)).encode()), lens, 2, D, torch.bfloat16, mask, 0)
    check_case(case, 0.5, backward=False)
    args = _varlen_kwargs(case)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        o1 = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **args)
        torch.cuda.synchronize()
    with torch.no_grad():
        o2 = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **args)
    assert torch.equal(o1, o2), "forward differs between two calls"
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if _is_sm90() and any("sm_90a" in archs for archs in info.values()):
        names = [e.name for e in prof.events()]
        assert any("hstu_sm90_plan_kernel" in n and "FwdPlanUnits" in n for n in names), sorted(set(names))
    kernel_opts(fwd_work_list=False)
    with torch.no_grad():
        grid = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **args)
    assert_agree(("out",), [o1], [grid], "work list vs grid")


def test_short_local_grid_forward_keeps_the_grid():
    """The same short dense grid under a left window (every KV range bounded: nothing to split): the forward keeps
    its grid on sm90 (no planner in the profile) and meets the error rule."""
    case = make_case(zlib.crc32(b"short_grid_local"), [2048], 2, 128, torch.bfloat16, "local_causal", 0)
    check_case(case, 0.5, backward=False)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **_varlen_kwargs(case))
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert not any("hstu_sm90_plan_kernel" in n for n in names), sorted(set(names))


@pytest.mark.parametrize("mask", ["causal", "none", "local", "context_target_group", "local_context_target"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_and_sm90_kernels_agree_with_reference(mask, D, kernel_opts):
    """The sm80-class kernels (forced with kernel_options(sm90=False)) and the default ones (the Hopper kernels on
    sm90; backward not deterministic) both meet the error rule, forward and backward; on other
    GPUs both calls run the sm80-class kernels."""
    case = make_case(zlib.crc32(repr((mask, D)).encode()), [300, 0, 1, 129, 128, 77], 2, D, torch.bfloat16,
                     mask, 0, delta_q=True)
    check_case(case, 0.5)
    kernel_opts(sm90=False)
    check_case(case, 0.5)


@pytest.mark.parametrize("mask,delta_q,rab_heads,deterministic", [
    ("causal", False, 0, False), ("none", True, 0, False), ("local", False, 2, False),
    ("context_target_group", True, 1, False), ("local_context_target", False, 0, True), ("causal", False, 1, True)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sm80_d256_backward_layouts(mask, delta_q, rab_heads, deterministic, dtype, kernel_opts):
    """The sm80-class D = 256 backward in its four layouts (kernel_options(sm90=False)): warp pairs
    (bwd_sm80_pair=True) with two Q / dO stages where 168 KB fit (sm90), with one (bwd_sm80_pair_2stage=False; the
    sm80 layout), the two column chunks (bwd_sm80_cfg=8, the old default; sm86 / sm89 run their compact form) and
    the default (FA2's warp layout, bf16 and fp16) each meet the error rule, with lengths at the 64-key / 32-query
    tile edges, rab / drab and the deterministic dq kernel; where a layout does not fit the GPU the launcher runs the
    next one, so every call is checked all the same."""
    case = make_case(zlib.crc32(repr((mask, delta_q, rab_heads, dtype)).encode()), [300, 0, 1, 129, 128, 77, 64, 33],
                     2, 256, dtype, mask, rab_heads, delta_q=delta_q)
    for switches in (dict(bwd_sm80_pair=True), dict(bwd_sm80_pair=True, bwd_sm80_pair_2stage=False),
                     dict(bwd_sm80_cfg=8), dict()):
        kernel_opts(sm90=False, **switches)
        check_case(case, 0.5, deterministic=deterministic)


def test_sm80_d256_backward_runs_the_layout_that_fits(kernel_opts):
    """Which D = 256 sm80-class backward kernel runs (hstu_bwd_kernel's template arguments: ..., warps, column chunk,
    Q / dO stages, KSPLIT), by the switches and the device's per-block shared memory: warp pairs 168 KB with two
    stages, 136 KB with one; else (bwd_sm80_cfg=8, the old default) the column chunks, 104 KB, else their compact
    96 KB layout; by default FA2's warp layout where it fits (_sm80_default_kernel)."""
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    chunks = _sm80_old_kernel(256)
    pair1 = "256, 32, 64, 8, 128, 1, 2>" if optin >= 139264 else chunks
    pair2 = "256, 32, 64, 8, 128, 2, 2>" if optin >= 172032 else pair1
    case = make_case(7, [200, 64], 2, 256, torch.bfloat16, "causal", 0)
    for switches, want in ((dict(bwd_sm80_pair=True), pair2), (dict(bwd_sm80_pair=True, bwd_sm80_pair_2stage=False),
                                                               pair1), (dict(bwd_sm80_cfg=8), chunks),
                           (dict(), _sm80_default_kernel(256, torch.bfloat16, 200))):
        kernel_opts(sm90=False, **switches)
        leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
        out = hstu_attn_varlen_func(*leaves, **_varlen_kwargs(case))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.autograd.grad(out, leaves, torch.randn_like(out))
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if "hstu_bwd_kernel<" in e.name or "hstu_bwd_pds" in e.name]
        assert names and all(n.endswith(f"{want}{_sig(want)}") for n in names), (switches, names)


# The default's one / two Q / dO stage kernels (kernel_options(bwd_sm80_cfg=4 / 5), bf16): the end of the kernel's
# name (hstu_bwd_pds_kernel<T, D, stages, warps>) and its shared memory bytes (K, V, the Q / dO stages, P, dS:
# bwd_pds_smem_bytes in hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh).
def _candidate_tile(D, cfg, dtype=torch.bfloat16):
    stages, bm, bn = cfg - 3, 64, 128 if D <= 128 else 64
    ctype = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
    return f"pds_kernel<{ctype}, {D}, {stages}, 8>", (2 * bn * D + stages * 2 * bm * D + 2 * bm * bn) * 2


def _sig(name):
    """the parameter list ending a backward kernel's name (the body kernels also take the device's SM count)"""
    return "(hstu::HstuParams, int)" if "body_kernel" in name else "(hstu::HstuParams)"


def _candidate_fits(smem):
    major, minor = torch.cuda.get_device_capability(0)
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    return smem <= (min(optin, 99 * 1024) if major == 8 and minor != 0 else optin)


def _sm80_old_kernel(D):
    """The old default's hstu_bwd_kernel (bwd_sm80_cfg=8; BwdSm80Config) on this GPU, as the end of its name: D = 128
    32 x 128 tiles of 8 warps with two Q / dO stages (112 KB) or one; D = 256 two column chunks of 4 warps, one stage
    (104 KB) or the compact layout."""
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    if D == 128:
        return f"128, 32, 128, 8, 128, {2 if optin >= 114688 else 1}, 1>"
    return f"256, 32, 64, 4, 128, {1 if _candidate_fits(106496) else 0}, 1>"


def _sm80_default_kernel(D, dtype, max_seqlen_k):
    """The sm80-class backward's default kernel at D = 128 / 256 on this GPU (calls without contexts): FA2's warp
    layout, at D = 128 on sm_90+ with three Q / dO stages and one barrier per tile pair where they fit (224 KB; up to
    2,048 keys in the grid order heads first: the body kernel with kPdsHeadsFirst; both with kPdsSmemEpilogue,
    kPdsStsmPdS, kPdsPtrCopies, kPdsLaneOnce, the dQ-first body: 10 | 32 | 512 | 1024 | 2048 | 8192 = 11818), at D =
    256 on sm_90+ one barrier per tile pair with two Q / dO stages on mbarriers (224 KB), else two Q / dO stages where
    they fit (bwd_sm80_cfg 5's kernel; at D = 256 up to 2,048 keys heads first), else one (4's), else the old layouts."""
    ctype = "__nv_bfloat16" if dtype == torch.bfloat16 else "__half"
    if D == 128 and torch.cuda.get_device_capability(0)[0] >= 9 and _candidate_fits(229376):
        if max_seqlen_k <= 2048:  # (bf16 heads first: the default's dQ claims)
            return f"pds_body_kernel<{ctype}, 128, 3, 8, {11818 | (PDS_DQ_CLAIM if dtype == torch.bfloat16 else 0)}>"
        return f"pds_kernel<{ctype}, 128, 3, 8>"
    if D == 256 and torch.cuda.get_device_capability(0)[0] >= 9 and _candidate_fits(229392):
        # one barrier per tile pair, two Q / dO stages on mbarriers, the lean copies, dK / dV through shared memory,
        # S / dP split over D across warp pairs (kPdsMbarCopies | kPdsLeanCopies | kPdsSmemEpilogue | kPdsKSplitS;
        # heads first with kPdsTailBlocksFirst)
        # (bf16 heads first: the default's dQ claims)
        claims = PDS_DQ_CLAIM if dtype == torch.bfloat16 else 0
        return f"pds_body_kernel<{ctype}, 256, 2, 8, {33770 | claims if max_seqlen_k <= 2048 else 33482}>"
    if D == 256 and max_seqlen_k <= 2048 and _candidate_fits(_candidate_tile(256, 5, dtype)[1]):
        return f"pds_body_kernel<{ctype}, 256, 2, 8, 42>"
    for cfg in (5, 4):
        tile, smem = _candidate_tile(D, cfg, dtype)
        if _candidate_fits(smem):
            return tile
    return _sm80_old_kernel(D)


@pytest.mark.parametrize("D", [128, 256])
def test_sm80_backward_candidate_runs_its_kernel(D, kernel_opts):
    """kernel_options(sm90=False, bwd_sm80_cfg=4 / 5) runs the default's one / two Q / dO stage kernel where its
    shared memory fits the GPU (else the default one), for bf16; fp16 runs the default kernel. The default (0) is
    FA2's warp layout where it fits (both dtypes), 8 the old default's kernel."""
    for dtype in (torch.bfloat16, torch.float16):
        case = make_case(11, [200, 64], 2, D, dtype, "causal", 0)
        names_by_cfg = {}
        for cfg in (0, 4, 5, 8):
            kernel_opts(sm90=False, bwd_sm80_cfg=cfg)
            leaves = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
            out = hstu_attn_varlen_func(*leaves, **_varlen_kwargs(case))
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                torch.autograd.grad(out, leaves, torch.randn_like(out))
                torch.cuda.synchronize()
            names_by_cfg[cfg] = {e.name for e in prof.events() if "hstu_bwd_kernel<" in e.name or
                                 "hstu_bwd_pds" in e.name}
            assert len(names_by_cfg[cfg]) == 1, (cfg, names_by_cfg[cfg])
        (default,), (old,) = names_by_cfg[0], names_by_cfg[8]
        want = _sm80_default_kernel(D, dtype, 200)
        assert default.endswith(f"{want}{_sig(want)}"), (dtype, default)
        assert "hstu_bwd_kernel<" in old and old.endswith(f"{_sm80_old_kernel(D)}(hstu::HstuParams)"), (dtype, old)
        for cfg in (4, 5):
            tile, smem = _candidate_tile(D, cfg)
            (name,) = names_by_cfg[cfg]
            if dtype == torch.bfloat16 and _candidate_fits(smem):
                assert name.endswith(f"{tile}(hstu::HstuParams)"), (cfg, name)
            else:
                assert names_by_cfg[cfg] == names_by_cfg[0], (dtype, cfg, name)


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 2, False), ("local_context_target", True, 1, True), ("target_group", True, 0, False)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_backward_fa2_layout_matches_the_old_default(D, dtype, mask, delta_q, rab_heads, seqused, kernel_opts):
    """FA2's warp layout (the default, bwd_sm80_cfg=0, and its one / two stage kernels 4 / 5 (bf16), P and dS through
    shared memory) gives the old default kernel's gradients (bwd_sm80_cfg=8) up to fp32 summation order and bf16 /
    fp16 rounding (outputs poisoned), lengths across several 64-query / 128-key tiles, seqused and rab / drab; each
    meets the error rule against the fp32 reference (the default in deterministic mode too: its dQ from
    hstu_bwd_dq_kernel)."""
    case = make_case(zlib.crc32(repr(("pds", D, mask)).encode()), [700, 129, 0, 1, 64, 255], 2, D, dtype,
                     mask, rab_heads, delta_q=delta_q, seqused=seqused)
    q, k, v, rab = case["q"], case["k"], case["v"], case["rab"]
    dout = torch.randn_like(q)
    grads = {}
    cfgs = (8, 0, 4, 5) if dtype == torch.bfloat16 else (8, 0)  # (fp16 runs the default for 4 / 5)
    for cfg in cfgs:
        kernel_opts(sm90=False, bwd_sm80_cfg=cfg)
        check_case(case, 0.5)
        if cfg == 0:
            check_case(case, 0.5, deterministic=True)
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, rab) if t is not None]
        out = hstu_attn_varlen_func(*leaves[:3], alpha=0.5, rab=None if rab is None else leaves[3],
                                    has_drab=rab is not None, **_varlen_kwargs(case))
        poison_allocator(8 * q.numel() * q.element_size())
        grads[cfg] = torch.autograd.grad(out, leaves, dout)
        assert not any(torch.isnan(g).any() for g in grads[cfg]), cfg
    for cfg in cfgs[1:]:
        assert_agree(("dq", "dk", "dv", "drab"), grads[cfg], grads[8], f"bwd_sm80_cfg={cfg} vs the old default")


@pytest.mark.parametrize("rab_heads", [1, 2])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm90_backward_with_rab_runs_the_hopper_kernel(D, rab_heads):
    """On sm90 with an sm_90a wheel, the backward with rab and drab (shared rab with H > 1: drab through fp32
    atomics; per-head: direct stores) runs the Hopper kernel's rab instantiation at every head dim (D = 256: the
    split-D kernel), not the sm80-class fallback, and meets the error rule."""
    info = hstu_attn.compiled_kernels()["instance_archs"]
    if not _is_sm90() or not any("sm_90a" in archs for archs in info.values()):
        pytest.skip("needs an sm90 GPU and a wheel built for sm_90a")
    case = make_case(zlib.crc32(repr(("rab_dispatch", D, rab_heads)).encode()), [257, 1, 0, 130], 2, D,
                     torch.bfloat16, "causal", rab_heads, delta_q=True)
    check_case(case, 0.5)
    do = torch.randn_like(case["q"])
    args = (do, case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"],
            case["max_seqlen_k"], None, None, 1, -1, 0, 0.5, case["rab"], -1.0, None, None, True, False)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.ops.hstu_attn.bwd(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if "hstu_bwd_sm90_kernel" in e.name]
    # demangled "hstu_bwd_sm90_kernel<__nv_bfloat16, 256, hstu::sm90::BwdSm90Rab, 1>" (D, named config, grid order)
    assert any(f", {D}, hstu::sm90::BwdSm90Rab," in n for n in names), sorted(set(names))


@pytest.mark.parametrize("mask", ["context", "context_target_group", "local_context_target"])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("delta_q", [False, True])
def test_backward_with_long_contexts(mask, D, delta_q):
    """Contexts longer than a query tile (and the tiles a key block skips between its context rows and its causal
    rows on the Hopper backward): the error rule holds for contexts of 0, 1, 63, 64, 65 and 200 rows over lengths
    around the tile edges, with targets and a local window where the mask has them."""
    lens = [700, 129, 64, 1, 330, 257]
    case = make_case(zlib.crc32(repr(("long_ctx", mask, D, delta_q)).encode()), lens, 2, D, torch.bfloat16, mask,
                     0, delta_q=delta_q)
    nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
    want = [200, 65, 63, 1, 64, 0]
    nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
    case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    check_case(case, 0.5)


@pytest.mark.parametrize("mask", ["context", "context_target_group", "local_context_target"])
@pytest.mark.parametrize("D,switches", [(64, {}), (128, {}), (128, dict(bwd_sm80_cfg=4)), (128, dict(deterministic=True)),
                                        (256, {}), (256, dict(deterministic=True))], ids=str)
def test_sm80_backward_with_long_contexts(mask, D, switches, kernel_opts):
    """The sm80-class backward (kernel_options(sm90=False)) with contexts longer than a query tile: FA2's warp
    layout skips the query tiles between a key block's context rows and its causal rows (bwd_work_tiles' gap, 64-row
    tiles: contexts of 63 / 64 / 65 / 200 rows sit on either side of a tile edge); the error rule for the default
    kernels, D = 128's one-stage context kernel (cfg 4, the A100's; bf16) and the deterministic dq kernel."""
    lens = [700, 129, 64, 1, 330, 257, 1100]
    case = make_case(zlib.crc32(repr(("long_ctx80", mask, D)).encode()), lens, 2, D, torch.bfloat16, mask, 0)
    nt = case["num_targets"].tolist() if case["num_targets"] is not None else [0] * len(lens)
    want = [200, 65, 63, 1, 64, 0, 130]
    nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
    case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    det = switches.get("deterministic", False)
    kernel_opts(sm90=False, **{k: v for k, v in switches.items() if k != "deterministic"})
    check_case(case, 0.5, deterministic=det)


# Many candidates (targets) per sequence: a query tile of candidates sees the history and its own group, and the
# kernels skip the whole key tiles of the other groups between them (SeqMask::key_tiles: a gap in the KV walk of the
# forward kernels and of the sm80-class dq kernel). name -> (window, contexts, target_group_size, mask_convention)
TARGET_GAP_MASKS = {
    "target": ((-1, 0), False, 1, "nvidia"),
    "target_group": ((-1, 0), False, 37, "nvidia"),
    "context_target_group": ((-1, 0), True, 128, "nvidia"),
    "local_context_target": ((300, 0), True, 64, "nvidia"),
    "gr_local_context_target": ((300, 0), True, 5, "meta_gr"),
}
# name -> (history lengths, candidates, new history tokens among the queries or None: queries = whole sequences).
# mixed: the grid order (persistent CTAs at D <= 128); skewed: the Hopper forward's work list; one_user / few_users:
# a cached step of few queries over long keys (the work list, key ranges split into chunks).
TARGET_GAP_LAYOUTS = {
    "mixed": ([0, 5, 1000, 1024, 1500, 130], [700, 2048, 1300, 300, 0, 513], None),
    "skewed": ([1024, 20, 150, 64, 0, 99, 128, 33, 140, 7, 90, 128, 3, 111, 60, 12, 77],
               [2048, 30, 200, 129, 64, 190, 31, 128, 45, 170, 100, 2, 199, 57, 128, 88, 160], None),
    "one_user": ([2900], [2048], [128]),
    "few_users": ([1024, 3000, 0], [2048, 256, 300], [0, 128, 0]),
}


def make_target_case(seed, hists, cands, new_hist, H, D, mask, rab_heads=0, dtype=torch.bfloat16):
    """Sequences of hists[b] history tokens then cands[b] targets; the queries are whole sequences, or (new_hist)
    the last new_hist[b] history tokens and the candidates (a cached step, delta-q). Contexts of up to 70 tokens."""
    rng = random.Random(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    window, ctx, g, _ = TARGET_GAP_MASKS[mask]
    lens_k = [h + c for h, c in zip(hists, cands)]
    lens_q = lens_k if new_hist is None else [n + c for n, c in zip(new_hist, cands)]
    i32 = dict(dtype=torch.int32, device="cuda")
    max_k = max(lens_k)
    rnd = lambda n: torch.randn(n, H, D, generator=gen, device="cuda", dtype=dtype)  # noqa: E731
    return dict(
        q=rnd(sum(lens_q)), k=rnd(sum(lens_k)), v=rnd(sum(lens_k)),
        cu_seqlens_q=torch.tensor([0] + lens_q, device="cuda").cumsum(0).to(torch.int32),
        cu_seqlens_k=torch.tensor([0] + lens_k, device="cuda").cumsum(0).to(torch.int32),
        max_seqlen_q=max(lens_q), max_seqlen_k=max_k,
        num_contexts=torch.tensor([rng.randint(0, min(h, 70)) for h in hists], **i32) if ctx else None,
        num_targets=torch.tensor(cands, **i32), target_group_size=g, window_size=window,
        rab=None if not rab_heads else torch.randn(len(hists), rab_heads if rab_heads == 1 else H, max_k, max_k,
                                                   generator=gen, device="cuda", dtype=dtype),
        seqused_q=None, seqused_k=None,
    )


@pytest.mark.parametrize("layout", sorted(TARGET_GAP_LAYOUTS))
@pytest.mark.parametrize("mask", sorted(TARGET_GAP_MASKS))
def test_target_gap_both_families(layout, mask, kernel_opts):
    """Key tiles of other target groups skipped: the default kernels (Hopper on sm90: grid, persistent and work-list
    paths by layout) and the sm80-class kernels (kernel_options(sm90=False)) meet the error rule, forward and
    backward, with groups of 1 to 128, contexts, local windows, the GR convention, empty histories and users with
    candidates only. D and rab vary across the cases."""
    hists, cands, new_hist = TARGET_GAP_LAYOUTS[layout]
    D = [64, 128, 256][zlib.crc32(f"{layout}{mask}".encode()) % 3]
    rab_heads = 1 if (layout, mask) in (("mixed", "target_group"), ("few_users", "context_target_group")) else 0
    case = make_target_case(zlib.crc32(repr(("gap", layout, mask)).encode()), hists, cands, new_hist, 2, D, mask,
                            rab_heads)
    conv = TARGET_GAP_MASKS[mask][3]
    check_case(case, 0.5, mask_convention=conv)
    kernel_opts(sm90=False)
    check_case(case, 0.5, mask_convention=conv)


@pytest.mark.parametrize("mask", list(GR_MASKS))
@pytest.mark.parametrize("D", [32, 64, 128, 256])
@pytest.mark.parametrize("delta_q", [False, True])
def test_gr_convention_both_families_agree_with_reference(mask, D, delta_q, kernel_opts):
    """mask_convention="meta_gr" (local window + contexts, with targets, delta-q): the default kernels (the Hopper
    ones on sm90, D 64 / 128 / 256) and the sm80-class ones (kernel_options(sm90=False)) meet the error rule against
    the GR reference, forward and backward; rab (shared) at every other case."""
    rab_heads = 1 if (D // 32 + int(delta_q)) % 2 else 0
    case = _gr_case(mask, D, delta_q, rab_heads)
    args = _varlen_kwargs(case)
    # The case exercises the convention: the GR reference differs from the NVIDIA one.
    f32 = [case[n].float() for n in ("q", "k", "v")]
    gr = hstu_attn_reference(*f32, alpha=0.5, mask_convention="meta_gr", **args)
    assert max_err(gr, hstu_attn_reference(*f32, alpha=0.5, **args)) > 1e-5
    check_case(case, 0.5, mask_convention="meta_gr")
    kernel_opts(sm90=False)
    check_case(case, 0.5, mask_convention="meta_gr")


@pytest.mark.parametrize("mask", ["gr_local_context", "gr_local_context_target"])
def test_gr_convention_deterministic_backward(mask):
    """The deterministic backward (sm80-class, dq from the query-parallel kernel) under the GR convention."""
    case = _gr_case(mask, 128, True, 0)
    check_case(case, 0.5, deterministic=True, mask_convention="meta_gr")


def _pad_rows(t):
    """t with 5 random rows before and 7 after (rows outside every sequence once cu_seqlens is shifted by 5)."""
    return torch.cat([torch.randn_like(t[:5]), t, torch.randn_like(t[:7])])


def _fwd_bwd_ops(case, do):
    """[out, dq, dk, dv] of case (no rab) from the forward op and the backward op, each after handing the allocator a
    NaN-filled block (unwritten outputs show up as NaN)."""
    poison_allocator(4 * case["q"].numel() * case["q"].element_size())
    with torch.no_grad():
        out = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, **_varlen_kwargs(case))
    return [out] + list(_bwd_op(case, do, case["q"], case["k"], case["v"], 0)[:3])


def _bwd_op(case, do, q, k, v, shift):
    """torch.ops.hstu_attn.bwd on case's masks and rab (drab with it), cu_seqlens shifted by `shift` rows, after
    handing the allocator a NaN-filled block (unwritten outputs show up as NaN)."""
    window = case["window_size"]
    poison_allocator(8 * q.numel() * 4)
    args = (do, q, k, v, case["cu_seqlens_q"] + shift, case["cu_seqlens_k"] + shift, case["max_seqlen_q"],
            case["max_seqlen_k"], case["num_contexts"], case["num_targets"], case["target_group_size"], window[0],
            window[1], 0.5, case["rab"], -1.0, case["seqused_q"], case["seqused_k"], case["rab"] is not None, False)
    options = hstu_attn._ops._current_options()  # the kernel_opts fixture's switches, as the public call takes them
    return torch.ops.hstu_attn.bwd_with_options(*args, options) if options else torch.ops.hstu_attn.bwd(*args)


@pytest.mark.parametrize("mask,delta_q,seqused,lens_range,H,D,rab_heads", [
    ("causal", False, False, (60, 200), 4, 128, 0),
    ("context_target_group", True, False, (60, 200), 4, 128, 0),
    ("local_causal", False, True, (60, 200), 4, 128, 0),
    ("causal", True, True, (100, 700), 2, 128, 0),
    ("local", False, False, (1, 300), 2, 128, 0),
    ("none", False, False, (60, 200), 4, 128, 0),
    ("causal", False, True, (60, 200), 4, 64, 0),
    ("none", True, False, (1, 300), 2, 64, 0),
    ("local_context_target", True, True, (100, 700), 2, 64, 0),
    ("causal", False, False, (60, 200), 4, 128, 1),
    ("context_target", True, True, (60, 200), 2, 128, 2),
    ("local", False, False, (1, 300), 4, 64, 4),
])
def test_backward_self_zeroing_workspace_matches_zeroed(mask, delta_q, seqused, lens_range, H, D, rab_heads,
                                                        kernel_opts):
    """The Hopper D = 64 / 128 backward (with or without rab) zeroes its own fp32 dq workspace when there is more
    than one group of (batch, head) pairs (the launcher the first group's rows and the rows outside the sequences,
    each CTA its share of the 128-row chunks of the pairs a group later in its grid's order, flagged per chunk and
    waited for by the CTAs that add into them): the D = 128 causal / local kernel's longest-first grid and the (key
    block, head, batch) grid of the others (D = 64, full windows, rab: shared, per-head, with drab). Here 24-40
    sequences over several groups (lengths cut inside 16-row boxes, an empty one, a one-row one), unused rows before
    and after the sequences in q, the workspace poisoned with NaN: the error rule holds, and the result (drab too)
    agrees with a zeroed workspace (kernel_options(dq_self_zero=False)) to the fp32 reduction order; rows outside every
    sequence are exactly zero. The D = 128 causal / local kernel converts most of dq itself two groups behind (its
    CTAs' idle warps; the rest, the rows outside the sequences and what they listed, by a pass afterwards): also
    with that off (kernel_options(dq_conv_behind=False), the separate pass over all rows). Elsewhere the calls run the
    same kernels."""
    extra = ((D,) if D != 128 else ()) + ((rab_heads,) if rab_heads else ())
    seed = zlib.crc32(repr(("self_zero", mask, delta_q, seqused, lens_range) + extra).encode())
    rng = random.Random(seed)
    lens = [rng.randint(*lens_range) for _ in range(40 if H == 4 else 24)]
    lens[7] = 0
    lens[13] = 1
    case = make_case(seed, lens, H, D, torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
    check_case(case, 0.5)
    q, k, v = (_pad_rows(case[n]) for n in ("q", "k", "v"))
    do = torch.randn_like(q)
    grads = {}
    for mode in ("0", None, "conv_behind=0"):
        kernel_opts(dq_self_zero=mode != "0", dq_conv_behind=mode != "conv_behind=0")
        grads[mode] = _bwd_op(case, do, q, k, v, 5)
    inner_q, inner_k = slice(5, q.shape[0] - 7), slice(5, k.shape[0] - 7)
    for mode, (dq, dk, dv, drab) in grads.items():
        assert not torch.isnan(dq).any(), f"NaN in dq (self-zero={mode})"
        assert torch.all(dq[:5] == 0) and torch.all(dq[-7:] == 0), f"rows outside the sequences (self-zero={mode})"
        zeroed = grads["0"]
        assert_agree(["dq", "dk", "dv"] + (["drab"] if rab_heads else []),
                     (dq[inner_q], dk[inner_k], dv[inner_k], drab),
                     (zeroed[0][inner_q], zeroed[1][inner_k], zeroed[2][inner_k], zeroed[3]),
                     f"(self-zero={mode}) vs zeroed workspace")


@pytest.mark.parametrize("mask,delta_q,seqused,rab_heads", [
    ("causal", False, False, 0),
    ("context_target_group", True, True, 0),
    ("local_context_target", False, True, 2),
    ("none", True, False, 1),
])
def test_backward_d256_tiled_dq_workspace(mask, delta_q, seqused, rab_heads):
    """The Hopper D = 256 backward adds dQ into a tiled fp32 workspace (16-row groups, every sequence padded to
    groups of its own, each in a warp's wgmma accumulator register order) that a conversion kernel puts back into
    rows; elsewhere the same checks run the sm80-class kernel. Lengths at the group and tile edges (0, 1, 15, 16,
    17, 63, 64, 65, 127, 128, 129, 191) among random ones, with unused rows before and after the sequences in q (the
    last tile's warps past a sequence add zeros into the next one's groups): the error rule holds,
    the padded call's rows agree with the unpadded call's to the fp32 reduction order, and the rows outside every
    sequence are exactly zero (dq starts out as NaN)."""
    seed = zlib.crc32(repr(("d256_tiled", mask, delta_q, seqused, rab_heads)).encode())
    rng = random.Random(seed)
    lens = [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 191] + [rng.randint(1, 300) for _ in range(9)]
    lens += [rng.randint(1, 20) for _ in range(12)]
    rng.shuffle(lens)
    case = make_case(seed, lens, 2, 256, torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
    check_case(case, 0.5)
    q, k, v = (_pad_rows(case[n]) for n in ("q", "k", "v"))
    do = torch.randn_like(q)
    inner_q, inner_k = slice(5, q.shape[0] - 7), slice(5, k.shape[0] - 7)
    padded = _bwd_op(case, do, q, k, v, 5)
    plain = _bwd_op(case, do[inner_q].contiguous(), case["q"], case["k"], case["v"], 0)
    dq = padded[0]
    assert not torch.isnan(dq).any(), "NaN in dq (unwritten rows?)"
    assert torch.all(dq[:5] == 0) and torch.all(dq[-7:] == 0), "rows outside the sequences"
    names = ["dq", "dk", "dv"] + (["drab"] if rab_heads else [])
    assert_agree(names, (dq[inner_q], padded[1][inner_k], padded[2][inner_k], padded[3]), plain,
                 "padded vs unpadded call")


@pytest.mark.parametrize("mask,delta_q,seqused,rab_heads", [
    ("causal", False, False, 0),
    ("none", True, False, 0),
    ("context_target_group", False, True, 0),
    ("local_context_target", True, False, 0),
    ("causal", True, False, 1),
    ("context_target_group", False, True, 3),
])
def test_backward_d256_grid_orders(mask, delta_q, seqused, rab_heads, kernel_opts):
    """The Hopper D = 256 backward runs on a (key block, head, batch) grid or, where its launcher picks it (masks
    that bound the keys on the right, batches whose Q / dO fit in L2), on a (head, key block, batch) grid with its
    own kernel. Forced either way (kernel_options(bwd_grid=1 / 2); other GPUs run the sm80-class kernel both times),
    each meets the error rule and the two agree to the fp32 reduction order."""
    seed = zlib.crc32(repr(("d256_grid", mask, delta_q, seqused, rab_heads)).encode())
    rng = random.Random(seed)
    lens = [0, 1, 64, 65, 700] + [rng.randint(1, 400) for _ in range(6)]
    case = make_case(seed, lens, 3, 256, torch.bfloat16, mask, rab_heads, delta_q=delta_q, seqused=seqused)
    do = torch.randn_like(case["q"])
    grads = []
    for order in ("1", "2"):
        kernel_opts(bwd_grid=int(order))
        check_case(case, 0.5)
        grads.append(_bwd_op(case, do, case["q"], case["k"], case["v"], 0))
    names = ["dq", "dk", "dv"] + (["drab"] if rab_heads else [])
    assert_agree(names, grads[1], grads[0], "grid orders (head first vs key block first)")


def test_ops_from_a_fresh_thread():
    """The ops work on a thread whose first CUDA call they are (as the autograd engine's thread can be): the Hopper
    launchers encode tensor maps through the driver, which needs the device's context current on that thread
    (the backward below allocates its workspace without a kernel when it zeroes the workspace itself)."""
    import threading

    lens = [150, 90, 200, 64] * 10
    case = make_case(zlib.crc32(b"fresh_thread"), lens, 4, 128, torch.bfloat16, "causal", 0)
    do = torch.randn_like(case["q"])
    fwd_args = (case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"],
                case["max_seqlen_k"], None, None, 1, -1, 0, 0.5, None, -1.0, None, None)
    bwd_args = (do,) + fwd_args[:14] + (-1.0, None, None, False, False)
    want = [torch.ops.hstu_attn.fwd(*fwd_args)] + list(torch.ops.hstu_attn.bwd(*bwd_args)[:3])
    torch.cuda.synchronize()
    got, errors = [], []

    def run():
        try:
            got.append(torch.ops.hstu_attn.fwd(*fwd_args))
            got.extend(torch.ops.hstu_attn.bwd(*bwd_args)[:3])
            torch.cuda.synchronize()
        except Exception as e:  # re-raised on the test's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors, errors
    assert_agree(("out", "dq", "dk", "dv"), got, want, "fresh thread vs main thread")
