"""Model layers (HSTULayer, HSTUStack, RelativeBucketedBias), jagged helpers and Meta GR's mask convention.

The layer is judged against a plain PyTorch composition of the same math written here (per sequence, with the mask
of `hstu_mask`), forward and gradients: CPU float64 tightly; CUDA bfloat16 with the error-relative rule
|ours - ref64| <= k |torch_bf16 - ref64| (k = 2 forward, 5 backward). GR's convention is checked against an
independent implementation of GR's rule.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import hstu_attn
from hstu_attn import (HSTUKVCache, HSTULayer, HSTUStack, RelativeBucketedBias, dense_hstu_attention, hstu_mask,
                       jagged_concat, jagged_positions, jagged_split, jagged_to_padded, lengths_to_offsets,
                       offsets_to_lengths, padded_to_jagged)


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
                convention="nvidia"):
    """The same math as HSTULayer, written as a plain per-sequence PyTorch composition (independent of the
    layer's code path): LayerNorm -> uvqk + SiLU -> masked SiLU attention -> LayerNorm * u -> projection + residual.
    ``dtype`` casts inputs and weights (float64 reference or bfloat16 "same-dtype torch")."""
    p = {n: t.to(dtype) for n, t in layer.named_parameters()}
    x = x.to(dtype)
    H, D = layer.num_heads, layer.head_dim
    E = x.shape[1]
    n = F.layer_norm(x, (E,), p["input_norm.weight"], p["input_norm.bias"], 1e-5)
    uvqk = F.silu(n @ p["uvqk.weight"].t() + p["uvqk.bias"])
    u, v, q, k = uvqk.split(H * D, dim=-1)
    attn = torch.zeros_like(v)
    scaling = layer.scaling_seqlen if layer.scaling_seqlen > 0 else max_seqlen
    for b in range(cu.shape[0] - 1):
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

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up outside the graph (allocations, lazy init)
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
    torch.testing.assert_close(captured, eager)
    torch.testing.assert_close(stack.layers[0].uvqk.weight.grad, eager_grad)
