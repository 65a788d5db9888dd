"""Model layers (HSTULayer, HSTUStack, RelativeBucketedBias), jagged helpers and Meta GR's mask convention.

The layer is judged against a plain PyTorch composition of the same math written here (per sequence, with the mask
of `hstu_mask`), forward and gradients: CPU float64 tightly; CUDA bfloat16 with the error-relative rule
|ours - ref64| <= k |torch_bf16 - ref64| (k = 2 forward, 5 backward). GR's convention is checked against an
independent implementation of GR's rule. FP8 attention (``attention_fp8``, issue 36): the same composition with an
FP8-emulating attention (`fp8_attention_ref`), in float64 as the reference and in bfloat16 as "same-dtype torch".
"""

import math

import pytest
import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import (HSTUKVCache, HSTULayer, HSTUStack, RelativeBucketedBias, dense_hstu_attention, hstu_mask,
                       jagged_concat, jagged_positions, jagged_split, jagged_to_padded, lengths_to_offsets,
                       offsets_to_lengths, padded_to_jagged)
from hstu_attn._fp8 import DESCALE_MODES, dequantize_fp8, hstu_attn_fp8_reference, quantize_fp8


def rand_lengths(gen, B, lo, hi):
    return torch.randint(lo, hi + 1, (B,), generator=gen)


# ---------------------------------------------------------------------------------------------- jagged helpers
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jagged_helpers_round_trip(seed):
    gen = torch.Generator().manual_seed(seed)
    B = 5
    lens = [rand_lengths(gen, B, 0, 6) for _ in range(3)]  # zero-length sequences included
    offs = [lengths_to_offsets(ln) for ln in lens]
    for ln, off in zip(lens, offs):
        assert off.dtype == torch.int32 and off[0] == 0 and torch.equal(offsets_to_lengths(off).long(), ln)
    vals = [torch.randn(int(ln.sum()), 3, generator=gen, requires_grad=True) for ln in lens]
    cat, cu = jagged_concat(vals, offs)
    assert torch.equal(cu, lengths_to_offsets(lens[0] + lens[1] + lens[2]))
    # sequence b of the result is part 0's sequence b, then part 1's, then part 2's
    for b in range(B):
        want = torch.cat([v[o[b]:o[b + 1]] for v, o in zip(vals, offs)])
        assert torch.equal(cat[cu[b]:cu[b + 1]], want)
    parts = jagged_split(cat, offs, [v.shape[0] for v in vals])
    for p, v in zip(parts, vals):
        assert torch.equal(p, v)
    # gradients: the backward of the concatenation is the split of the gradient
    g = torch.randn(cat.shape, generator=gen)
    cat.backward(g)
    for v, gp in zip(vals, jagged_split(g, offs, [v.shape[0] for v in vals])):
        assert torch.equal(v.grad, gp)
    # padded round trip, positions
    max_len = int(lens[0].max())
    pad = jagged_to_padded(vals[0].detach(), offs[0], max_len, padding_value=7.0)
    assert pad.shape == (B, max_len, 3)
    for b in range(B):
        n = int(lens[0][b])
        assert torch.equal(pad[b, :n], vals[0][offs[0][b]:offs[0][b + 1]].detach())
        assert bool((pad[b, n:] == 7.0).all())
    assert torch.equal(padded_to_jagged(pad, offs[0], vals[0].shape[0]), vals[0].detach())
    pos = jagged_positions(offs[0], vals[0].shape[0])
    assert torch.equal(pos, torch.cat([torch.arange(int(n)) for n in lens[0]]))


def test_jagged_helpers_errors_name_the_argument():
    off = torch.tensor([0, 2, 3])
    with pytest.raises(ValueError, match="values_list\\[1\\]: expected trailing shape"):
        jagged_concat([torch.randn(3, 2), torch.randn(3, 4)], [off, off])
    with pytest.raises(TypeError, match="offsets_list\\[0\\]: expected dtype"):
        jagged_concat([torch.randn(3, 2)], [off.float()])
    with pytest.raises(ValueError, match="values: expected 6 rows"):
        jagged_split(torch.randn(5, 2), [off, off], [3, 3])


def test_jagged_helpers_trace_without_graph_breaks():
    def f(a, b, oa, ob):
        v, cu = jagged_concat([a, b], [oa, ob])
        x, y = jagged_split(v * 2, [oa, ob], [a.shape[0], b.shape[0]])
        return x.sum() + y.sum() + jagged_to_padded(v, cu, 6).sum()

    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(5, 3, generator=gen)
    oa, ob = torch.tensor([0, 1, 4]), torch.tensor([0, 3, 5])
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(a, b, oa, ob), f(a, b, oa, ob))


# ---------------------------------------------------------------------------------------------- the layer
def plain_layer(layer, x, cu, max_seqlen, num_contexts=None, num_targets=None, rab=None, dtype=None,
                convention="nvidia", attention=None):
    """The same math as HSTULayer, written as a plain per-sequence PyTorch composition (independent of the
    layer's code path): LayerNorm -> uvqk + SiLU -> masked SiLU attention -> LayerNorm * u -> projection + residual.
    ``dtype`` casts inputs and weights (float64 reference or bfloat16 "same-dtype torch"). ``attention(q, k, v)``
    (packed (total, H, D)) replaces the per-sequence attention (the FP8 tests)."""
    p = {n: t.to(dtype) for n, t in layer.named_parameters()}
    x = x.to(dtype)
    H, D = layer.num_heads, layer.head_dim
    E = x.shape[1]
    n = F.layer_norm(x, (E,), p["input_norm.weight"], p["input_norm.bias"], 1e-5)
    uvqk = F.silu(n @ p["uvqk.weight"].t() + p["uvqk.bias"])
    u, v, q, k = uvqk.split(H * D, dim=-1)
    attn = torch.zeros_like(v)
    scaling = layer.scaling_seqlen if layer.scaling_seqlen > 0 else max_seqlen
    if attention is not None:
        attn = attention(q.reshape(-1, H, D), k.reshape(-1, H, D), v.reshape(-1, H, D)).reshape(-1, H * D)
    for b in range(cu.shape[0] - 1 if attention is None else 0):
        s0, s1 = int(cu[b]), int(cu[b + 1])
        L = s1 - s0
        if L == 0:
            continue
        qb, kb, vb = (t[s0:s1].view(L, H, D).transpose(0, 1) for t in (q, k, v))
        s = qb @ kb.transpose(1, 2)
        if rab is not None:
            s = s + rab[b, :, :L, :L].to(dtype)
        s = s * layer.alpha
        m = hstu_mask(L, L, 0 if num_contexts is None else int(num_contexts[b]),
                      0 if num_targets is None else int(num_targets[b]), layer.target_group_size, layer.window_size,
                      device=x.device, mask_convention=convention)
        pm = torch.where(m, F.silu(s), torch.zeros((), dtype=s.dtype, device=s.device)) / scaling
        attn[s0:s1] = (pm @ vb).transpose(0, 1).reshape(L, H * D)
    y = F.layer_norm(attn, (H * D,), p["attn_norm.weight"], p["attn_norm.bias"], 1e-5) * u
    return x + y @ p["output.weight"].t() + p["output.bias"]


def make_batch(gen, B=4, lo=0, hi=9, E=32, dtype=torch.float64, device="cpu"):
    lens = rand_lengths(gen, B, lo, hi)
    cu = lengths_to_offsets(lens).to(device)
    max_seqlen = int(lens.max())
    x = torch.randn(int(lens.sum()), E, generator=gen, dtype=dtype).to(device).requires_grad_()
    nt = torch.minimum(torch.randint(0, 3, (B,), generator=gen), lens).to(torch.int32)
    nc = torch.minimum(torch.randint(0, 3, (B,), generator=gen), lens - nt).to(torch.int32)
    return lens, cu, max_seqlen, x, nc.to(device), nt.to(device)


def grads(out, g, tensors):
    return torch.autograd.grad(out, tensors, g, allow_unused=True)


@pytest.mark.parametrize("attn_impl", ["kernel", "torch"])
@pytest.mark.parametrize("window", [(-1, 0), (3, 0)])
@pytest.mark.parametrize("with_rab", [False, True])
def test_layer_matches_plain_composition_cpu_fp64(attn_impl, window, with_rab):
    gen = torch.Generator().manual_seed(11)
    torch.manual_seed(11)
    layer = HSTULayer(32, 2, 8, window_size=window, target_group_size=2, attn_impl=attn_impl).double()
    with torch.no_grad():  # fresh random LayerNorm weights/biases (not the 1/0 defaults)
        for ln in (layer.input_norm, layer.attn_norm):
            ln.weight.copy_(torch.rand(ln.weight.shape, generator=gen, dtype=torch.float64) + 0.5)
            ln.bias.copy_(torch.randn(ln.bias.shape, generator=gen, dtype=torch.float64) * 0.1)
    lens, cu, L, x, nc, nt = make_batch(gen)
    rab = torch.randn(4, 2, L, L, generator=gen, dtype=torch.float64).requires_grad_() if with_rab else None
    out = layer(x, cu, L, nc, nt, rab)
    ref = plain_layer(layer, x, cu, L, nc, nt, rab, torch.float64)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    wrt = [x] + list(layer.parameters()) + ([rab] if with_rab else [])
    for a, b in zip(grads(out, g, wrt), grads(ref, g, wrt)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_layer_kv_cache_equals_full_pass():
    """Delta-q: tokens scored against cached keys/values of their sequences' earlier tokens give exactly the rows
    the full pass gives them."""
    gen = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    stack = HSTUStack(2, 32, 2, 8, relative_bias=RelativeBucketedBias(1, 16, num_time_buckets=8)).double()
    B = 3
    hist, new = rand_lengths(gen, B, 1, 7), rand_lengths(gen, B, 1, 3)
    oh, on = lengths_to_offsets(hist), lengths_to_offsets(new)
    xh = torch.randn(int(hist.sum()), 32, generator=gen, dtype=torch.float64)
    xn = torch.randn(int(new.sum()), 32, generator=gen, dtype=torch.float64)
    th = torch.randint(0, 10**6, (xh.shape[0],), generator=gen)
    tn = torch.randint(0, 10**6, (xn.shape[0],), generator=gen)
    mh, mn = int(hist.max()), int(new.max())
    ones = torch.ones(B, dtype=torch.int32)
    x, cu = jagged_concat([xh, xn], [oh, on])
    ts, _ = jagged_concat([th, tn], [oh, on])
    # HSTU divides by a sequence length: the history-only pass would use mh, the full one mh + mn; a fixed divisor
    # (as a model serving cached histories sets) makes the history rows, hence the cache, identical
    for layer in stack.layers:
        layer.scaling_seqlen = float(mh + mn)
    full = stack(x, cu, mh + mn, num_contexts=ones, num_targets=new.int(), timestamps=ts)
    _, full_new = jagged_split(full, [oh, on], [xh.shape[0], xn.shape[0]])
    _, cache = stack(xh, oh, mh, num_contexts=ones, timestamps=th, return_kv=True)
    cached = stack(xn, on, mn, num_contexts=ones, num_targets=new.int(), timestamps=tn, kv_cache=cache)
    torch.testing.assert_close(cached, full_new, rtol=1e-10, atol=1e-10)


def test_relative_bias_values():
    torch.manual_seed(0)
    bias = RelativeBucketedBias(num_heads=2, max_distance=4, num_time_buckets=5, time_bucket_base=2.0)
    cu = torch.tensor([0, 3, 5], dtype=torch.int32)
    ts = torch.tensor([0, 3, 100, 7, 7])
    rab = bias(cu, 3, ts)
    assert rab.shape == (2, 2, 3, 3)
    # sequence 0, rows i = 2, key j = 0: offset j - i = -2 (bucket -2 + 3), gap 100 -> floor(log2(101)) = 6 -> 4
    want = bias.pos_weight[:, 1] + bias.time_weight[:, 4]
    torch.testing.assert_close(rab[0, :, 2, 0], want)
    # sequence 1, i = 1, j = 0: offset -1, gap 0 -> bucket 0
    torch.testing.assert_close(rab[1, :, 1, 0], bias.pos_weight[:, 2] + bias.time_weight[:, 0])


def test_layer_errors_name_the_argument():
    with pytest.raises(ValueError, match="mask_convention: expected one of"):
        HSTULayer(16, 2, 8, mask_convention="meta")
    with pytest.raises(ValueError, match="attn_impl: expected one of"):
        HSTULayer(16, 2, 8, attn_impl="flash")
    layer = HSTULayer(16, 2, 8)
    with pytest.raises(ValueError, match="x: expected a \\(total, 16\\) tensor"):
        layer(torch.randn(4, 8), torch.tensor([0, 4], dtype=torch.int32), 4)


def test_layer_traces_fullgraph():
    """No graph break and no host sync in the layer (torch.compile traces the attention op through its fake)."""
    gen = torch.Generator().manual_seed(2)
    torch.manual_seed(2)
    stack = HSTUStack(2, 32, 2, 8, relative_bias=RelativeBucketedBias(1, 16))
    lens, cu, L, x, nc, nt = make_batch(gen, dtype=torch.float32)
    eager = stack(x, cu, L, nc, nt)
    compiled = torch.compile(stack, backend="aot_eager", fullgraph=True)
    out = compiled(x, cu, L, nc, nt)
    torch.testing.assert_close(out, eager)
    out.sum().backward()
    assert x.grad is not None and stack.layers[0].uvqk.weight.grad is not None


# ---------------------------------------------------------------------------------------------- GR convention
def gr_mask(L, c, t, max_attn_len):
    """Meta generative-recommenders' mask (its `_get_valid_attn_mask`, causal, one sequence), written from its rule:
    positions p(x) = max(x - c + 1, 0) when c > 0 (the c context positions collapse into position 0), targets all at
    the position right after the history (p clamped to p(h) = h - c + 1, h = L - t); query i sees key j when
    i == j, or 0 < p(i) - p(j) (<= max_attn_len when > 0); rows at position 0 (contexts) also see every key whose
    position is below p(h) (the history)."""
    x = torch.arange(L)
    p = x
    pmax = L
    if c > 0:
        p = (x - c + 1).clamp(min=0)
        pmax = L - c + 1
    pmax = pmax - t
    p = torch.minimum(p, torch.tensor(pmax))
    dist = p.view(-1, 1) - p.view(1, -1)
    m = torch.eye(L, dtype=torch.bool) | (dist > 0)
    if max_attn_len > 0:
        m = m & (dist <= max_attn_len)
    if c > 0:
        m = m | ((p.view(-1, 1) == 0) & (p.view(1, -1) < pmax))
    return m


@pytest.mark.parametrize("seed", range(4))
def test_gr_convention_matches_gr_rule(seed):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(60):
        L = int(torch.randint(1, 14, (1,), generator=gen))
        t = int(torch.randint(0, L + 1, (1,), generator=gen))
        c = int(torch.randint(0, L - t + 1, (1,), generator=gen))
        w = int(torch.randint(0, 6, (1,), generator=gen))  # GR's max_attn_len: 0 = no window
        ours = hstu_mask(L, L, c, t, 1, (w if w > 0 else -1, 0), mask_convention="meta_gr")
        assert torch.equal(ours, gr_mask(L, c, t, w)), (L, c, t, w)
        if c == 0 or w == 0:  # the conventions agree without a local window + contexts
            assert torch.equal(ours, hstu_mask(L, L, c, t, 1, (w if w > 0 else -1, 0)))


def test_gr_convention_differs_with_window_and_contexts():
    nv = hstu_mask(8, 8, num_context=3, window_size=(2, 0))
    gr = hstu_mask(8, 8, num_context=3, window_size=(2, 0), mask_convention="meta_gr")
    # row 4 (history): GR puts every context at distance p(4) - 0 = 2, inside the window; NVIDIA sees key 2 only
    assert gr[4, :3].tolist() == [True, True, True] and nv[4, :3].tolist() == [False, False, True]


@pytest.mark.parametrize("convention", ["nvidia", "meta_gr"])
def test_dense_attention_and_reference_agree_on_both_conventions(convention):
    gen = torch.Generator().manual_seed(9)
    lens, cu, L, x, nc, nt = make_batch(gen, B=5, lo=1, hi=10)
    q, k, v = (torch.randn(x.shape[0], 2, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    kw = dict(num_contexts=nc, num_targets=nt, target_group_size=2, window_size=(2, 0), alpha=0.3)
    d = dense_hstu_attention(q, k, v, cu, cu, L, L, mask_convention=convention, **kw)
    r = hstu_attn.hstu_attn_reference(q, k, v, cu, cu, L, L, mask_convention=convention, **kw)
    torch.testing.assert_close(d, r, rtol=1e-12, atol=1e-12)


def test_layer_gr_convention_on_cpu_uses_gr_mask():
    gen = torch.Generator().manual_seed(4)
    torch.manual_seed(4)
    layer = HSTULayer(32, 2, 8, window_size=(2, 0), mask_convention="meta_gr").double()
    lens, cu, L, x, _, nt = make_batch(gen, lo=5, hi=9)
    nc = torch.full((4,), 2, dtype=torch.int32)
    out = layer(x, cu, L, nc, nt)
    torch.testing.assert_close(out, plain_layer(layer, x, cu, L, nc, nt, None, torch.float64, "meta_gr"))
    layer.mask_convention = "nvidia"
    assert not torch.allclose(out, layer(x, cu, L, nc, nt))


# ---------------------------------------------------------------------------------------------- GPU
def _err_rel(ours, ref, low, k, what):
    bound = k * (low.double() - ref).abs().max() + 1e-6
    err = (ours.double() - ref).abs().max()
    assert err <= bound, f"{what}: max |ours - ref64| = {err:.3e} > {k} x max |torch_bf16 - ref64| = {bound:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("with_rab", [False, True])
def test_layer_bf16_cuda_error_relative(with_rab):
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    gen = torch.Generator().manual_seed(21)
    torch.manual_seed(21)
    layer = HSTULayer(128, 2, 64, window_size=(-1, 0), target_group_size=2).cuda()
    lens, cu, L, x, nc, nt = make_batch(gen, B=6, lo=20, hi=200, E=128, dtype=torch.float32)
    cu, nc, nt = cu.cuda(), nc.cuda(), nt.cuda()
    x = x.detach().cuda()
    rab = torch.randn(6, 1, L, L, generator=gen).cuda() if with_rab else None
    g = torch.randn(x.shape[0], 128, generator=gen).cuda()
    results = {}
    for name, dt in (("ours", torch.bfloat16), ("ref", torch.float64), ("low", torch.bfloat16)):
        xi = x.to(dt).requires_grad_()
        ri = rab.to(dt).requires_grad_() if with_rab else None
        if name == "ours":
            m = layer.to(torch.bfloat16)
            out = m(xi, cu, L, nc, nt, ri)
        else:
            m = layer.to(torch.float32)  # plain_layer casts the weights
            out = plain_layer(m, xi, cu, L, nc, nt, ri, dt)
        wrt = [xi] + ([ri] if with_rab else [])
        results[name] = [out] + list(torch.autograd.grad(out, wrt, g.to(dt)))
    names = ["out", "dx"] + (["drab"] if with_rab else [])
    for i, what in enumerate(names):
        _err_rel(results["ours"][i], results["ref"][i], results["low"][i], 2 if i == 0 else 5, what)


@pytest.mark.gpu
@pytest.mark.parametrize("sm90", [True, False])
def test_layer_gr_convention_with_window_and_contexts_on_cuda(sm90):
    """A GR layer (meta_gr, local window, contexts, targets) runs the kernels of both families on CUDA (no refusal)
    and meets the error rule against the plain composition with GR's mask; "nvidia" gives another result."""
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    gen = torch.Generator().manual_seed(22)
    torch.manual_seed(22)
    layer = HSTULayer(128, 2, 64, window_size=(8, 0), mask_convention="meta_gr").cuda()
    lens, cu, L, x, _, nt = make_batch(gen, B=6, lo=20, hi=200, E=128, dtype=torch.float32)
    nc = torch.minimum(torch.tensor([0, 1, 5, 17, 40, 70]), lens - nt).to(torch.int32)
    cu, nc, nt = cu.cuda(), nc.cuda(), nt.cuda()
    x = x.detach().cuda()
    g = torch.randn(x.shape[0], 128, generator=gen).cuda()
    results = {}
    with hstu_attn._ops.kernel_options(sm90=sm90):
        for name, dt in (("ours", torch.bfloat16), ("ref", torch.float64), ("low", torch.bfloat16)):
            xi = x.to(dt).requires_grad_()
            if name == "ours":
                out = layer.to(torch.bfloat16)(xi, cu, L, nc, nt)
            else:
                out = plain_layer(layer.to(torch.float32), xi, cu, L, nc, nt, None, dt, "meta_gr")
            results[name] = [out] + list(torch.autograd.grad(out, [xi], g.to(dt)))
        for i, what in enumerate(["out", "dx"]):
            _err_rel(results["ours"][i], results["ref"][i], results["low"][i], 2 if i == 0 else 5, what)
        layer.to(torch.bfloat16).mask_convention = "nvidia"
        nv = layer(x.to(torch.bfloat16), cu, L, nc, nt)
    assert (nv.double() - results["ours"][0].double()).abs().max() > 1e-2


def _graph_and_eager(stack, x, step):
    """Runs step() (forward + backward of ``stack`` on input ``x``) eagerly on a side stream (warm-up: allocations,
    lazy init, the error block), then captures it in a CUDA graph and replays it. Returns (captured output, eager
    output, eager grad of the first layer's uvqk weight); the replay's grads are left on the stack."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            stack.zero_grad(set_to_none=False)
            x.grad = None
            eager = step().detach().clone()
    torch.cuda.current_stream().wait_stream(s)
    eager_grad = stack.layers[0].uvqk.weight.grad.clone()
    graph = torch.cuda.CUDAGraph()
    stack.zero_grad(set_to_none=False)
    x.grad = None
    with torch.cuda.graph(graph):
        captured = step()
    stack.zero_grad(set_to_none=False)
    graph.replay()
    torch.cuda.synchronize()
    return captured, eager, eager_grad


@pytest.mark.gpu
def test_layer_forward_backward_in_a_cuda_graph():
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")
    torch.manual_seed(3)
    stack = HSTUStack(2, 128, 2, 64, relative_bias=RelativeBucketedBias(1, 64)).cuda()
    gen = torch.Generator().manual_seed(3)
    lens, cu, L, x, nc, nt = make_batch(gen, B=8, lo=10, hi=60, E=128, dtype=torch.float32)
    cu, nc, nt, x = cu.cuda(), nc.cuda(), nt.cuda(), x.detach().cuda().requires_grad_()

    def step():
        out = stack(x, cu, L, nc, nt)
        out.square().mean().backward()
        return out

    captured, eager, eager_grad = _graph_and_eager(stack, x, step)
    torch.testing.assert_close(captured, eager)
    torch.testing.assert_close(stack.layers[0].uvqk.weight.grad, eager_grad)


# ---------------------------------------------------------------------------------------------- FP8 attention
class _StraightThrough(torch.autograd.Function):
    """Value of `value`, gradient passed to `x` unchanged (the quantization's straight-through estimator)."""

    @staticmethod
    def forward(ctx, x, value):
        return value.detach().clone()

    @staticmethod
    def backward(ctx, g):
        return g, None


def fp8_attention_ref(layer, mode, cu, L, nc, nt, rab=None):
    """The attention of ``HSTULayer(attention_fp8=mode)`` written from its definition, for `plain_layer`: q, k, v
    rounded to bfloat16 (the layer's attn_dtype) and quantized in `mode` from the caller's own values; forward value
    = the FP8 emulation (`hstu_attn_fp8_reference`: P rounded to e4m3) computed in q's dtype (float64: the
    reference; bfloat16: "same-dtype torch"); gradients = those of the exact attention of the dequantized inputs,
    straight through to q, k, v (the layer's stated backward)."""
    scaling = layer.scaling_seqlen if layer.scaling_seqlen > 0 else float(L)
    kw = dict(num_contexts=nc, num_targets=nt, target_group_size=layer.target_group_size,
              window_size=layer.window_size, alpha=layer.alpha, scaling_seqlen=scaling)

    def attend(q, k, v):
        dt = q.dtype
        quant = [quantize_fp8(t.detach().to(torch.bfloat16), cu, mode) for t in (q, k, v)]
        deq = [_StraightThrough.apply(t, dequantize_fp8(x8, s, cu, mode, dt)) for t, (x8, s) in zip((q, k, v), quant)]
        r = None if rab is None else rab.to(dt)
        exact = hstu_attn.hstu_attn_reference(*deq, cu, cu, L, L, rab=r, upcast=False, **kw)
        emul = hstu_attn_fp8_reference(*(x8 for x8, _ in quant), *(s for _, s in quant), mode, cu, cu, L, L, rab=r,
                                       out_dtype=dt, compute_dtype=dt, **kw)
        return _StraightThrough.apply(exact, emul)

    return attend


def _fp8_layer_case(mode, device, dtype, window=(-1, 0), E=32, H=2, D=16, B=4, lo=1, hi=300, seed=31):
    """(layer, x, cu, L, nc, nt, g): an FP8 layer with fresh random LayerNorm weights (lengths past 128 so "block"
    has several blocks per sequence) and an output gradient."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = HSTULayer(E, H, D, window_size=window, target_group_size=2, attention_fp8=mode)
    with torch.no_grad():
        for ln in (layer.input_norm, layer.attn_norm):
            ln.weight.copy_(torch.rand(ln.weight.shape, generator=gen) + 0.5)
            ln.bias.copy_(torch.randn(ln.bias.shape, generator=gen) * 0.1)
    lens, cu, L, x, nc, nt = make_batch(gen, B=B, lo=lo, hi=hi, E=E, dtype=torch.float32)
    g = torch.randn(x.shape, generator=gen)
    return (layer.to(device=device, dtype=dtype), x.detach().to(device), cu.to(device), L, nc.to(device),
            nt.to(device), g.to(device))


def _fp8_layer_results(layer, x, cu, L, nc, nt, g, mode, ours_dtype, rab=None):
    """{"ours", "ref", "low"}: [out, dx, d uvqk.weight] of the layer (in ours_dtype) and of `plain_layer` with
    `fp8_attention_ref` in float64 and bfloat16."""
    results = {}
    for name, dt in (("ours", ours_dtype), ("ref", torch.float64), ("low", torch.bfloat16)):
        xi = x.to(dt).requires_grad_()
        if name == "ours":
            m = layer.to(dt)
            out = m(xi, cu, L, nc, nt, rab)
            w = m.uvqk.weight
        else:
            m = layer.to(torch.float32)
            w = m.uvqk.weight  # plain_layer reads the parameters through .to(dt): the gradient reaches them
            out = plain_layer(m, xi, cu, L, nc, nt, rab, dt, attention=fp8_attention_ref(m, mode, cu, L, nc, nt, rab))
        results[name] = [out] + list(torch.autograd.grad(out, [xi, w], g.to(dt)))
    return results


def _check_fp8_results(results, what):
    for i, name in enumerate(["out", "dx", "d uvqk.weight"]):
        ours = results["ours"][i]
        assert ours.dtype == results["ours"][0].dtype and not torch.isnan(ours).any(), f"{what} {name}: NaN"
        _err_rel(ours, results["ref"][i], results["low"][i], 2 if i == 0 else 5, f"{what} {name}")


@pytest.mark.parametrize("mode", DESCALE_MODES)
@pytest.mark.parametrize("window", [(-1, 0), (20, 0)])
def test_layer_fp8_cpu_error_relative(mode, window):
    """CPU (the op's fp32 emulation of the FP8 kernel): output and gradients of a float32 FP8 layer against the
    float64 FP8-emulating composition, 2x / 5x the bfloat16 composition's error; the layer without FP8 misses."""
    layer, x, cu, L, nc, nt, g = _fp8_layer_case(mode, "cpu", torch.float32, window)
    results = _fp8_layer_results(layer, x, cu, L, nc, nt, g, mode, torch.float32)
    _check_fp8_results(results, f"FP8 layer ({mode}, window {window})")
    # FP8 is what ran: the same layer without it (bf16 attention) is much farther from the FP8 reference
    layer.attention_fp8 = None
    plain, ref = layer(x, cu, L, nc, nt).double(), results["ref"][0]
    assert (plain - ref).abs().max() > 3 * (results["ours"][0].double() - ref).abs().max()


def test_layer_fp8_with_rab_and_kv_cache_cpu():
    """A rab without grad (inference with a relative bias) goes into the FP8 call; delta-q over a cache runs FP8 too
    and matches the full pass within FP8's rounding (the quantization groups differ)."""
    layer, x, cu, L, nc, nt, g = _fp8_layer_case("head", "cpu", torch.float32, hi=40)
    rab = torch.randn(4, 1, L, L, generator=torch.Generator().manual_seed(5))
    results = _fp8_layer_results(layer, x, cu, L, nc, nt, g, "head", torch.float32, rab=rab)
    _check_fp8_results(results, "FP8 layer with rab")
    lens = offsets_to_lengths(cu).long()
    hist = lens // 2
    new = lens - hist
    oh, on = lengths_to_offsets(hist), lengths_to_offsets(new)
    # history = the first half of each sequence, new tokens = the rest
    rows_h = torch.cat([torch.arange(int(cu[b]), int(cu[b]) + int(hist[b])) for b in range(4)])
    rows_n = torch.cat([torch.arange(int(cu[b]) + int(hist[b]), int(cu[b + 1])) for b in range(4)])
    layer.scaling_seqlen = float(L)
    with torch.no_grad():
        full = layer(x, cu, L)
        _, cache = layer(x[rows_h], oh, int(hist.max()), return_kv=True)
        cached = layer(x[rows_n], on, int(new.max()), kv_cache=cache)
    ref = full[rows_n]
    assert (cached - ref).abs().max() <= 0.1 * ref.abs().max()


def test_layer_fp8_errors_name_the_argument():
    with pytest.raises(ValueError, match="attention_fp8: expected None or one of \\['tensor'"):
        HSTULayer(16, 2, 8, attention_fp8="row")
    with pytest.raises(ValueError, match="attn_impl: expected 'kernel' with attention_fp8"):
        HSTULayer(16, 2, 8, attn_impl="torch", attention_fp8="tensor")
    with pytest.raises(ValueError, match="attention_fp8: expected None or one of"):
        HSTUStack(1, 16, 2, 8, attention_fp8=True)
    stack = HSTUStack(1, 16, 2, 8, relative_bias=RelativeBucketedBias(1, 8), attention_fp8="block")
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    x = torch.randn(7, 16)
    with pytest.raises(ValueError, match="rab: expected a bias without requires_grad with attention_fp8"):
        stack(x, cu, 4)
    with torch.no_grad():  # inference: the bias carries no gradient, the FP8 call takes it
        assert stack(x, cu, 4).shape == (7, 16)
    with pytest.raises(NotImplementedError, match="kv_manager: expected None with attention_fp8"):
        stack.layers[0](x, cu, 4, kv_manager=object())
    with pytest.raises(NotImplementedError, match="stack: expected layers without attention_fp8"):
        hstu_attn.CachedHSTUStack(HSTUStack(2, 16, 2, 8, attention_fp8="head"), 4, 8)


def test_layer_fp8_traces_fullgraph():
    """No graph break and no host sync with attention_fp8 (quantization, the FP8 op's fake, the straight-through
    autograd.Function): compiled output and gradients equal eager's."""
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(7)
    stack = HSTUStack(2, 32, 2, 8, attention_fp8="block")
    lens, cu, L, x, nc, nt = make_batch(gen, dtype=torch.float32)
    eager = stack(x, cu, L, nc, nt)
    eager.square().sum().backward()
    want = [x.grad.clone(), stack.layers[0].uvqk.weight.grad.clone()]
    x.grad = None
    stack.zero_grad()
    out = torch.compile(stack, backend="aot_eager", fullgraph=True)(x, cu, L, nc, nt)
    torch.testing.assert_close(out, eager)
    out.square().sum().backward()
    torch.testing.assert_close(x.grad, want[0])
    torch.testing.assert_close(stack.layers[0].uvqk.weight.grad, want[1])


def _needs_kernels():
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tensor", "head", "block"])
@pytest.mark.parametrize("D", [64, 128])
def test_layer_fp8_cuda_error_relative(mode, D):
    """A bfloat16 FP8 layer on CUDA (the Hopper FP8 forward where it runs, the dequantize path elsewhere; the
    dequantized bf16 backward) against the float64 FP8-emulating composition: 2x / 5x the bfloat16 composition's
    error; outputs poisoned first."""
    _needs_kernels()
    layer, x, cu, L, nc, nt, g = _fp8_layer_case(mode, "cuda", torch.bfloat16, E=128, H=2, D=D, B=6, lo=20, hi=300)
    torch.full((1 << 22,), float("nan"), device="cuda")  # NaN-filled cached block: the next allocations start NaN
    results = _fp8_layer_results(layer, x, cu, L, nc, nt, g, mode, torch.bfloat16)
    _check_fp8_results(results, f"FP8 layer cuda ({mode}, D {D})")


@pytest.mark.gpu
def test_layer_fp8_cuda_with_rab_no_grad():
    """With a rab (no grad) the FP8 call takes the dequantize path on CUDA: the same rule."""
    _needs_kernels()
    layer, x, cu, L, nc, nt, g = _fp8_layer_case("block", "cuda", torch.bfloat16, E=128, H=2, D=64, B=4, lo=20,
                                                 hi=200)
    rab = torch.randn(4, 1, L, L, generator=torch.Generator().manual_seed(8)).cuda()
    results = _fp8_layer_results(layer, x, cu, L, nc, nt, g, "block", torch.bfloat16, rab=rab)
    _check_fp8_results(results, "FP8 layer cuda with rab")


def _close_grads(got, want):
    """Gradients of two runs of the same step: the Hopper backward accumulates dq with atomics (not deterministic)."""
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())


def _fp8_stack_cuda(seed):
    torch.manual_seed(seed)
    stack = HSTUStack(2, 128, 2, 64, attention_fp8="block").cuda()
    gen = torch.Generator().manual_seed(seed)
    lens, cu, L, x, nc, nt = make_batch(gen, B=8, lo=10, hi=200, E=128, dtype=torch.float32)
    return stack, cu.cuda(), L, x.detach().cuda().requires_grad_(), nc.cuda(), nt.cuda()


@pytest.mark.gpu
def test_layer_fp8_forward_backward_in_a_cuda_graph():
    _needs_kernels()
    stack, cu, L, x, nc, nt = _fp8_stack_cuda(4)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = stack(x, cu, L, nc, nt)
        out.float().square().mean().backward()
        return out

    captured, eager, eager_grad = _graph_and_eager(stack, x, step)
    hstu_attn.check_errors()
    torch.testing.assert_close(captured, eager, rtol=0, atol=0)  # the FP8 forward is deterministic
    _close_grads(stack.layers[0].uvqk.weight.grad, eager_grad)


@pytest.mark.gpu
def test_layer_fp8_cuda_torch_compile():
    _needs_kernels()
    stack, cu, L, x, nc, nt = _fp8_stack_cuda(5)
    x2 = x.detach().clone().requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        eager = stack(x, cu, L, nc, nt)
    eager.float().sum().backward()
    want = stack.layers[0].uvqk.weight.grad.clone()
    stack.zero_grad()
    compiled = torch.compile(stack, backend="aot_eager", fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = compiled(x2, cu, L, nc, nt)
    out.float().sum().backward()
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    _close_grads(x2.grad, x.grad)
    _close_grads(stack.layers[0].uvqk.weight.grad, want)
