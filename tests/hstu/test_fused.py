"""The fused HSTULayer steps (hstu_attn._fused): LayerNorm(x) * u and the SiLU + split of the uvqk projection.

Judged against an independent float64 formula (mean / variance written out, sigmoid written out), forward and
gradients. CPU: the functions (the torch composition the CPU path runs) tightly. CUDA: the kernels with the
error-relative rule |ours - ref64| <= k |torch_same_dtype - ref64| + a floor of 1e-6 (1 + max |ref64|), k = 2
forward and 5 backward, over random shapes (odd widths, one column, empty batch), float32 / float16 / bfloat16
activations and float32 or same-dtype parameters; outputs come from an allocator poisoned with NaN. Also: the
fakes (torch.compile), opcheck, a compiled and a CUDA-graph-captured call, argument errors, and the fused layer
against the unfused one and the float64 CPU layer.
"""

import pytest
import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import HSTULayer, lengths_to_offsets
from hstu_attn._fused import fused_kernels_available, layer_norm_mul, silu_split

LN_SHAPES = [(0, 64), (1, 1), (3, 7), (37, 33), (129, 256), (1000, 255), (257, 1024), (64, 2050), (5000, 256)]
SPLIT_SHAPES = [(0, 8), (1, 1), (3, 3), (37, 13), (129, 64), (1000, 256), (33, 1000)]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def ref_ln_mul(x, u, w, b, eps=1e-5):
    mean = x.mean(1, keepdim=True)
    var = ((x - mean) ** 2).mean(1, keepdim=True)
    return ((x - mean) / torch.sqrt(var + eps) * w + b) * u


def ref_silu_split(x):
    y = x / (1 + torch.exp(-x))
    W = x.shape[1] // 4
    return [y[:, i * W:(i + 1) * W] for i in range(4)]


def ln_inputs(gen, rows, cols, dtype, wdtype, device):
    x = (torch.randn(rows, cols, generator=gen, dtype=torch.float64) * 2 + 0.5).to(device, dtype)
    u = torch.randn(rows, cols, generator=gen, dtype=torch.float64).to(device, dtype)
    w = (1 + 0.3 * torch.randn(cols, generator=gen, dtype=torch.float64)).to(device, wdtype)
    b = (0.2 * torch.randn(cols, generator=gen, dtype=torch.float64)).to(device, wdtype)
    g = torch.randn(rows, cols, generator=gen, dtype=torch.float64).to(device, dtype)
    return x, u, w, b, g


def run_grads(fn, inputs, g):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    gs = list(g) if isinstance(g, (tuple, list)) else [g]
    grads = torch.autograd.grad(outs, leaves, [gi.to(o.dtype) for gi, o in zip(gs, outs)], allow_unused=True)
    return [o.detach() for o in outs], list(grads)


def poison_allocator(device):
    """Fill freed blocks of the caching allocator with NaN, so that an unwritten output element shows."""
    blocks = [torch.full((n,), float("nan"), device=device) for n in (128, 1024, 8192, 65536, 1 << 20, 1 << 22)
              for _ in range(4)]
    del blocks


def err_rel(ours, ref, low, k, what):
    ours, ref, low = ours.cpu(), ref.double().cpu(), low.cpu()
    floor = 1e-6 * (1 + (ref.abs().max().item() if ref.numel() else 0.0))
    bound = k * ((low.double() - ref).abs().max().item() if ref.numel() else 0.0) + floor
    err = (ours.double() - ref).abs().max().item() if ref.numel() else 0.0
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    assert not torch.isnan(ours).any(), f"{what}: NaN (an unwritten element?)"
    assert err <= bound, f"{what}: max |ours - ref64| = {err:.3e} > {k} x max |torch - ref64| + floor = {bound:.3e}"


# ---------------------------------------------------------------------------------------------- CPU
@pytest.mark.parametrize("rows,cols", [(0, 5), (1, 1), (7, 33), (40, 64)])
def test_layer_norm_mul_cpu_fp64_matches_formula(rows, cols):
    gen = torch.Generator().manual_seed(rows * 100 + cols)
    inputs = ln_inputs(gen, rows, cols, torch.float64, torch.float64, "cpu")
    ours, dours = run_grads(layer_norm_mul, inputs[:4], inputs[4])
    ref, dref = run_grads(ref_ln_mul, inputs[:4], inputs[4])
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-10, atol=1e-10)
    for name, a, r in zip(("dx", "du", "dweight", "dbias"), dours, dref):
        torch.testing.assert_close(a, torch.zeros_like(inputs[0][0]) if r is None else r, rtol=1e-9, atol=1e-9,
                                   msg=name)


@pytest.mark.parametrize("rows,width", [(0, 2), (1, 1), (9, 5), (33, 16)])
def test_silu_split_cpu_fp64_matches_formula(rows, width):
    gen = torch.Generator().manual_seed(rows * 10 + width)
    x = torch.randn(rows, 4 * width, generator=gen, dtype=torch.float64) * 3
    g = [torch.randn(rows, width, generator=gen, dtype=torch.float64) for _ in range(4)]
    ours, (dx,) = run_grads(silu_split, [x], g)
    ref, (dref,) = run_grads(ref_silu_split, [x], g)
    for a, r in zip(ours, ref):
        assert a.is_contiguous() and a.shape == (rows, width)
        torch.testing.assert_close(a, r, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dx, dref, rtol=1e-10, atol=1e-10)


def test_fakes_give_the_kernel_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(7, 12, dtype=torch.bfloat16)
        w = torch.empty(12)
        out, mean, rstd = torch.ops.hstu_attn.layer_norm_mul_fwd(x, x, w, w, 1e-5)
        assert out.shape == (7, 12) and out.dtype == torch.bfloat16
        assert mean.shape == rstd.shape == (7,) and mean.dtype == torch.float32
        dx, du, dw, db = torch.ops.hstu_attn.layer_norm_mul_bwd(x, x, x, w, w, mean, rstd)
        assert dx.shape == du.shape == (7, 12) and dw.shape == db.shape == (12,) and dw.dtype == torch.float32
        parts = torch.ops.hstu_attn.silu_split_fwd(x)
        assert [p.shape for p in parts] == [(7, 3)] * 4
        assert torch.ops.hstu_attn.silu_split_bwd(*parts, x).shape == (7, 12)


def test_errors_name_the_argument():
    x, u, w = torch.randn(4, 6), torch.randn(4, 6), torch.randn(6)
    with pytest.raises(ValueError, match="x: expected a \\(N, C\\) tensor"):
        layer_norm_mul(x[0], u[0], w, w)
    with pytest.raises(ValueError, match="u: expected shape \\(4, 6\\)"):
        layer_norm_mul(x, u[:3], w, w)
    with pytest.raises(TypeError, match="u: expected dtype torch.float32"):
        layer_norm_mul(x, u.double(), w, w)
    with pytest.raises(ValueError, match="weight: expected shape \\(6,\\)"):
        layer_norm_mul(x, u, w[:5], w)
    with pytest.raises(TypeError, match="bias: expected dtype"):
        layer_norm_mul(x, u, w, w.double())
    with pytest.raises(TypeError, match="x: expected a floating-point tensor"):
        layer_norm_mul(x.long(), u.long(), w, w)
    with pytest.raises(ValueError, match="eps: expected a positive number"):
        layer_norm_mul(x, u, w, w, eps=0.0)
    with pytest.raises(ValueError, match="x: expected a \\(N, 4 W\\) tensor"):
        silu_split(torch.randn(3, 10))
    with pytest.raises(TypeError, match="x: expected a tensor"):
        silu_split([1.0, 2.0])


# ---------------------------------------------------------------------------------------------- CUDA
needs_kernels = pytest.mark.skipif(not (torch.cuda.is_available() and fused_kernels_available()),
                                   reason="needs CUDA and the fused kernels in _C.so")


@pytest.mark.gpu
@needs_kernels
@pytest.mark.parametrize("rows,cols", LN_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fp32_params", [True, False])
def test_layer_norm_mul_cuda_error_relative(rows, cols, dtype, fp32_params):
    gen = torch.Generator().manual_seed(rows * 7 + cols)
    wdtype = torch.float32 if fp32_params else dtype
    inputs = ln_inputs(gen, rows, cols, dtype, wdtype, "cuda")
    ref, dref = run_grads(ref_ln_mul, [t.double() for t in inputs[:4]], inputs[4].double())
    # torch in the activations' dtype: the norm in float32 rounded to x's dtype, times u (CUDA's layer_norm takes
    # no float32 parameters with 16-bit input; autocast runs it in float32 too)
    low, dlow = run_grads(lambda x, u, w, b: F.layer_norm(x.float(), (cols,), w.float(), b.float(), 1e-5).to(x.dtype)
                          * u, inputs[:4], inputs[4])
    poison_allocator("cuda")
    ours, dours = run_grads(layer_norm_mul, inputs[:4], inputs[4])
    assert ours[0].dtype == dtype
    err_rel(ours[0], ref[0], low[0], 2, "out")
    for name, a, r, lo, t in zip(("dx", "du", "dweight", "dbias"), dours, dref, dlow, inputs[:4]):
        assert a.dtype == t.dtype, name
        if rows == 0 and name in ("dweight", "dbias"):
            assert bool((a == 0).all()), f"{name}: expected zeros for an empty batch"
            continue
        err_rel(a, r, lo, 5, name)


@pytest.mark.gpu
@needs_kernels
@pytest.mark.parametrize("rows,width", SPLIT_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_split_cuda_error_relative(rows, width, dtype):
    gen = torch.Generator().manual_seed(rows * 3 + width)
    x = (torch.randn(rows, 4 * width, generator=gen, dtype=torch.float64) * 3).to("cuda", dtype)
    g = [torch.randn(rows, width, generator=gen, dtype=torch.float64).to("cuda", dtype) for _ in range(4)]
    ref, (dref,) = run_grads(ref_silu_split, [x.double()], [t.double() for t in g])
    low, (dlow,) = run_grads(lambda t: F.silu(t).split(width, dim=1), [x], g)
    poison_allocator("cuda")
    ours, (dx,) = run_grads(silu_split, [x], g)
    for i, (a, r, lo) in enumerate(zip(ours, ref, low)):
        assert a.is_contiguous() and a.dtype == dtype
        err_rel(a, r, lo, 2, f"out[{i}]")
    err_rel(dx, dref, dlow, 5, "dx")


@pytest.mark.gpu
@needs_kernels
def test_ops_pass_opcheck():
    gen = torch.Generator().manual_seed(5)
    x, u, w, b, g = ln_inputs(gen, 33, 40, torch.bfloat16, torch.float32, "cuda")
    torch.library.opcheck(torch.ops.hstu_attn.layer_norm_mul_fwd.default, (x, u, w, b, 1e-5))
    _, mean, rstd = torch.ops.hstu_attn.layer_norm_mul_fwd(x, u, w, b, 1e-5)
    torch.library.opcheck(torch.ops.hstu_attn.layer_norm_mul_bwd.default, (g, x, u, w, b, mean, rstd))
    torch.library.opcheck(torch.ops.hstu_attn.silu_split_fwd.default, (x,))
    parts = torch.ops.hstu_attn.silu_split_fwd(x)
    torch.library.opcheck(torch.ops.hstu_attn.silu_split_bwd.default, (*parts, x))


@pytest.mark.gpu
@needs_kernels
def test_compiled_and_graph_captured_calls_equal_eager():
    gen = torch.Generator().manual_seed(6)
    x, u, w, b, g = ln_inputs(gen, 300, 4 * 64, torch.bfloat16, torch.float32, "cuda")
    leaves = [t.detach().clone().requires_grad_() for t in (x, u, w, b)]

    def f(x, u, w, b):
        p0, p1, p2, p3 = silu_split(x)
        y = layer_norm_mul(torch.cat([p0, p1, p2, p3], 1), u, w, b)
        return (y.float() * g.float()).sum()

    def value_and_grads(fn):
        for t in leaves:
            t.grad = None
        loss = fn(*leaves)
        loss.backward()
        return [loss.detach().clone()] + [t.grad.clone() for t in leaves]

    eager = value_and_grads(f)
    compiled = value_and_grads(torch.compile(f, fullgraph=True))
    for a, e in zip(compiled, eager):
        torch.testing.assert_close(a, e, rtol=1e-2, atol=1e-2)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        value_and_grads(f)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    for t in leaves:
        t.grad = None
    with torch.cuda.graph(graph):
        loss = f(*leaves)
        loss.backward()
    for t in leaves:
        t.grad.zero_()
    graph.replay()
    torch.cuda.synchronize()
    for a, e in zip([loss] + [t.grad for t in leaves], eager):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.mark.gpu
@needs_kernels
def test_kernels_reject_bad_input_clearly():
    x = torch.randn(8, 16, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(16, device="cuda")
    with pytest.raises(RuntimeError, match="x: expected a contiguous tensor"):
        torch.ops.hstu_attn.layer_norm_mul_fwd(x.t(), x.t(), w, w, 1e-5)
    with pytest.raises(RuntimeError, match="u: expected dtype bfloat16"):
        torch.ops.hstu_attn.layer_norm_mul_fwd(x, x.float(), w, w, 1e-5)
    with pytest.raises(RuntimeError, match="weight: expected shape \\(16,\\)"):
        torch.ops.hstu_attn.layer_norm_mul_fwd(x, x, w[:8], w, 1e-5)
    with pytest.raises(RuntimeError, match="x: expected a column count divisible by 4"):
        torch.ops.hstu_attn.silu_split_fwd(x[:, :10].contiguous())
    with pytest.raises(ValueError, match="weight: expected a tensor on cuda"):
        layer_norm_mul(x, x, w.cpu(), w.cpu())


@pytest.mark.gpu
@needs_kernels
def test_fused_layer_meets_the_error_rule_under_autocast():
    """The model's setting (fp32 parameters, bf16 autocast): the fused layer vs the float64 CPU layer, with the
    unfused CUDA layer as the same-precision baseline; outputs, dx and the parameters' gradients."""
    torch.manual_seed(8)
    gen = torch.Generator().manual_seed(8)
    E, H, D, B = 128, 2, 64, 6
    lens = torch.randint(20, 150, (B,), generator=gen)
    cu, L = lengths_to_offsets(lens), int(lens.max())
    nt = torch.randint(1, 4, (B,), generator=gen).to(torch.int32)
    x = torch.randn(int(lens.sum()), E, generator=gen)
    g = torch.randn(x.shape, generator=gen)
    layer = HSTULayer(E, H, D, target_group_size=1)
    with torch.no_grad():  # non-trivial norm parameters
        layer.attn_norm.weight.add_(0.3 * torch.randn(H * D, generator=gen))
        layer.attn_norm.bias.add_(0.2 * torch.randn(H * D, generator=gen))
    params = ["uvqk.weight", "attn_norm.weight", "attn_norm.bias", "output.weight"]

    def run(device, dtype, fused, amp):
        m = HSTULayer(E, H, D, fused=fused).to(device, dtype)
        m.load_state_dict(layer.state_dict())
        xi = x.to(device, dtype).requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out = m(xi, cu.to(device), L, num_targets=nt.to(device))
        out.float().backward(g.to(device))
        named = dict(m.named_parameters())
        return [out.detach(), xi.grad] + [named[n].grad for n in params]

    ref = run("cpu", torch.float64, False, False)
    low = run("cuda", torch.float32, False, True)
    ours = run("cuda", torch.float32, True, True)
    for i, name in enumerate(["out", "dx"] + params):
        err_rel(ours[i], ref[i], low[i], 2 if i == 0 else 5, name)
