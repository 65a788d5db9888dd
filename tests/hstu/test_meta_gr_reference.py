"""hstu_attn against Meta generative-recommenders' own PyTorch reference (`pytorch_hstu_mha`,
`pytorch_cached_hstu_mha`, generative_recommenders/ops/pytorch/pt_hstu_attention.py).

GR's code is not part of this repository. The tests load it from:
    HSTU_GR_REFERENCE=<path>   the file pt_hstu_attention.py, or a directory holding it or a
                               generative-recommenders checkout (generative_recommenders/ops/pytorch/...)
or, without the variable, an importable `generative_recommenders` package; without either every test skips.
GR's reference calls `torch.ops.fbgemm.jagged_to_padded_dense` / `dense_to_jagged`; each test stands in plain
differentiable torch functions for them (monkeypatched on `torch.ops.fbgemm`, undone after the test), so fbgemm
is not needed.

The argument mapping (docs/hstu_attn.md, "Meta generative-recommenders"):
    GR                                    hstu_attn_varlen_func
    q, k, v (L, H, D) + seq_offsets        q, k, v + cu_seqlens_q = cu_seqlens_k = seq_offsets (int32)
    max_seq_len N                          max_seqlen_q = max_seqlen_k = N, scaling_seqlen = N (GR divides by N)
    alpha                                  alpha (GR has no rab)
    causal=True                            window_size = (-1, 0)
    max_attn_len w > 0                     window_size = (w, 0)
    contextual_seq_len c (one int)         num_contexts = full((B,), c)
    num_targets (B,)                       num_targets (int32), target_group_size = 1
    w > 0 and c > 0                        mask_convention = "meta_gr" (the default "nvidia" differs)
    cached: delta_q (B * delta, H, D)      q, cu_seqlens_q = arange(B + 1) * delta, max_seqlen_q = delta,
                                           keys at seq_offsets (delta-q: queries are the last delta positions)

Checks: CPU float64, our CPU op (the reference) equals GR's to rounding; CUDA bf16/fp16, our kernels agree with an
fp32 evaluation of GR's reference by the error-relative rule max|ours - gr32| <= k max|gr_same_dtype - gr32| + atol
(k = 2 forward, 5 gradients), where gr_same_dtype is GR's reference run in the kernels' dtype.
"""

import importlib
import importlib.util
import os

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_varlen_func, hstu_mask

ENV = "HSTU_GR_REFERENCE"
_REL = os.path.join("generative_recommenders", "ops", "pytorch", "pt_hstu_attention.py")


def _load_gr():
    """GR's pt_hstu_attention module, or (None, why)."""
    path = os.environ.get(ENV)
    if path:
        files = [path] if os.path.isfile(path) else [os.path.join(path, "pt_hstu_attention.py"),
                                                     os.path.join(path, _REL)]
        for f in files:
            if os.path.isfile(f):
                spec = importlib.util.spec_from_file_location("gr_pt_hstu_attention", f)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                return mod, None
        return None, f"{ENV}={path}: no pt_hstu_attention.py there"
    try:
        return importlib.import_module("generative_recommenders.ops.pytorch.pt_hstu_attention"), None
    except ImportError as e:
        return None, f"Meta generative-recommenders not found (set {ENV} or install it): {e}"


GR, _WHY = _load_gr()
pytestmark = pytest.mark.skipif(GR is None, reason=str(_WHY))


# ---------------------------------------------------------------------------------------------- fbgemm stand-ins
def _jagged_to_padded_dense(values, offsets, max_lengths, padding_value=0.0):
    """(L, F) rows at offsets[0] -> (B, N, F), N = max_lengths[0] (fbgemm's op, plain torch, differentiable)."""
    off, n = offsets[0].long(), int(max_lengths[0])
    lengths = off[1:] - off[:-1]
    pos = torch.arange(n, device=values.device)
    idx = (off[:-1].view(-1, 1) + pos).clamp(0, max(values.shape[0] - 1, 0))
    valid = (pos < lengths.view(-1, 1)).unsqueeze(-1)
    return torch.where(valid, values[idx], torch.full((), padding_value, dtype=values.dtype, device=values.device))


def _dense_to_jagged(dense, x_offsets, total_L=None):
    """(B, N, F) -> ((L, F) rows at x_offsets[0], [x_offsets[0]]) (fbgemm's op, plain torch, differentiable)."""
    off = x_offsets[0].long()
    total = int(off[-1]) if total_L is None else int(total_L)
    rows = torch.arange(total, device=dense.device)
    b = torch.searchsorted(off[1:], rows, right=True)
    return dense[b, rows - off[b]], [x_offsets[0]]


@pytest.fixture(autouse=True)
def _fbgemm_and_no_tf32(monkeypatch):
    monkeypatch.setattr(torch.ops.fbgemm, "jagged_to_padded_dense", _jagged_to_padded_dense, raising=False)
    monkeypatch.setattr(torch.ops.fbgemm, "dense_to_jagged", _dense_to_jagged, raising=False)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


# ---------------------------------------------------------------------------------------------- cases
# name -> (contextual_seq_len c, targets?, max_attn_len w); GR's mask with w > 0 and c > 0 is mask_convention="meta_gr"
CASES = {
    "causal": (0, False, 0),
    "targets": (0, True, 0),
    "contexts": (5, False, 0),
    "contexts_targets": (3, True, 0),
    "window": (0, False, 24),
    "window_targets": (0, True, 17),
    "gr_window_contexts": (6, False, 20),
    "gr_window_contexts_targets": (4, True, 13),
}


def _convention(c, w):
    return "meta_gr" if (c > 0 and w > 0) else "nvidia"


def make_case(name, seed, device, dtype, B=6, H=2, D=64, N=160, delta=0):
    """Random jagged q, k, v (lengths in [c + max targets + delta + 1, N], one sequence of length N) and both
    functions' arguments. delta > 0: GR's cached layout (the queries are each sequence's last delta positions)."""
    c, with_targets, w = CASES[name]
    gen = torch.Generator().manual_seed(seed)
    max_t = 6
    lo = c + (max_t if with_targets else 0) + max(delta, 1)
    lens = torch.randint(lo, N + 1, (B,), generator=gen)
    lens[int(torch.randint(0, B, (1,), generator=gen))] = N
    off = torch.zeros(B + 1, dtype=torch.int64)
    off[1:] = lens.cumsum(0)
    L = int(off[-1])
    q = torch.randn(B * delta if delta else L, H, D, generator=gen).to(dtype)
    k = torch.randn(L, H, D, generator=gen).to(dtype)
    v = torch.randn(L, H, D, generator=gen).to(dtype)
    nt = torch.randint(1, max_t + 1, (B,), generator=gen) if with_targets else None
    if delta and with_targets:
        nt = torch.full((B,), delta, dtype=torch.int64)  # the new tokens are the candidates
    alpha = 1.0 / D ** 0.5
    gr = dict(max_seq_len=N, alpha=alpha, seq_offsets=off.to(device),
              num_targets=None if nt is None else nt.to(device), max_attn_len=w, contextual_seq_len=c)
    cu_k = off.to(torch.int32).to(device)
    cu_q = (torch.arange(B + 1, dtype=torch.int32) * delta).to(device) if delta else cu_k
    ours = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=delta if delta else N, max_seqlen_k=N,
                num_contexts=torch.full((B,), c, dtype=torch.int32, device=device) if c else None,
                num_targets=None if nt is None else nt.to(torch.int32).to(device), target_group_size=1,
                window_size=(w if w > 0 else -1, 0), alpha=alpha, scaling_seqlen=float(N),
                mask_convention=_convention(c, w))
    return [t.to(device) for t in (q, k, v)], gr, ours


def gr_forward(qkv, gr, cached):
    q, k, v = qkv
    if cached:
        return GR.pytorch_cached_hstu_mha(delta_q=q, k=k, v=v, **gr)
    return GR.pytorch_hstu_mha(q=q, k=k, v=v, causal=True, dropout_pr=0.0, training=True, **gr)


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def _leaves(qkv, dtype=None):
    return [t.detach().to(dtype or t.dtype).clone().requires_grad_() for t in qkv]


def _all_cases():
    out = [(name, 0) for name in CASES]
    # delta-q (GR's cached attention): causal, with the candidates as targets, and GR's window + contexts
    out += [(name, 5) for name in ("causal", "targets", "window_targets", "gr_window_contexts_targets")]
    return out


CASE_IDS = [f"{n}{'_cached' if d else ''}" for n, d in _all_cases()]


# ---------------------------------------------------------------------------------------------- CPU: exact mapping
def test_masks_equal_gr_valid_attn_mask():
    """hstu_mask per sequence equals GR's own mask construction (`_get_valid_attn_mask`) on the sequence's rows and
    columns, for every case (GR's causal rule, targets clamped to one position, contexts collapsed to position 0)."""
    build = getattr(GR, "_get_valid_attn_mask", None)
    if build is None:
        pytest.skip("this GR version has no _get_valid_attn_mask")
    for name, (c, with_targets, w) in CASES.items():
        for seed in range(3):
            _, gr, ours = make_case(name, seed, "cpu", torch.float64)
            off = gr["seq_offsets"]
            lens = off[1:] - off[:-1]
            m = build(torch.device("cpu"), True, gr["max_seq_len"], lens, num_targets=gr["num_targets"],
                      max_attn_len=w, contextual_seq_len=c)
            for b, L in enumerate(lens.tolist()):
                want = m[b if m.shape[0] > 1 else 0, :L, :L]
                got = hstu_mask(L, L, c, 0 if gr["num_targets"] is None else int(gr["num_targets"][b]), 1,
                                ours["window_size"], mask_convention=ours["mask_convention"])
                assert torch.equal(got, want), (name, seed, b)


@pytest.mark.parametrize("name,delta", _all_cases(), ids=CASE_IDS)
def test_cpu_float64_equals_gr(name, delta):
    """Our CPU op (float64) gives GR's output and gradients to float64 rounding."""
    qkv, gr, ours = make_case(name, 11, "cpu", torch.float64, B=4, N=64, delta=delta)
    a, b = _leaves(qkv), _leaves(qkv)
    out = hstu_attn_varlen_func(*a, **ours)
    want = gr_forward(b, gr, bool(delta))
    torch.testing.assert_close(out, want, rtol=1e-9, atol=1e-12)
    dout = torch.randn_like(out)
    for g, gw, n in zip(torch.autograd.grad(out, a, dout), torch.autograd.grad(want, b, dout), "qkv"):
        torch.testing.assert_close(g, gw, rtol=1e-9, atol=1e-12, msg=f"d{n}")


def test_cpu_default_convention_differs_from_gr_with_window_and_contexts():
    qkv, gr, ours = make_case("gr_window_contexts", 3, "cpu", torch.float64, B=4, N=64)
    want = gr_forward(qkv, gr, False)
    assert max_err(hstu_attn_varlen_func(*qkv, **ours), want) < 1e-9
    ours["mask_convention"] = "nvidia"
    assert max_err(hstu_attn_varlen_func(*qkv, **ours), want) > 1e-3


# ---------------------------------------------------------------------------------------------- CUDA: the kernels
def _need_kernels():
    if not hstu_attn.library_loaded():
        pytest.skip("the op library is not built")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name,delta", _all_cases(), ids=CASE_IDS)
def test_kernels_agree_with_gr_reference(name, delta, dtype):
    _need_kernels()
    D = 128 if dtype == torch.float16 else 64
    qkv, gr, ours = make_case(name, 7, "cuda", dtype, B=8, H=2, D=D, N=300, delta=delta)
    a, ref, lp = _leaves(qkv), _leaves(qkv, torch.float32), _leaves(qkv)
    out = hstu_attn_varlen_func(*a, **ours)
    want = gr_forward(ref, gr, bool(delta))
    same = gr_forward(lp, gr, bool(delta))
    assert out.shape == want.shape and not torch.isnan(out).any()
    atol = 1e-6 + 1e-4 * want.abs().max().item()
    err, err_lp = max_err(out, want), max_err(same, want)
    assert err <= 2 * err_lp + atol, f"forward: kernel err {err:.3e} > 2 * GR {dtype} err {err_lp:.3e} + {atol:.1e}"
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, a, dout)
    grads_ref = torch.autograd.grad(want, ref, dout.float())
    grads_lp = torch.autograd.grad(same, lp, dout)
    for n, g, gr32, gl in zip("qkv", grads, grads_ref, grads_lp):
        assert not torch.isnan(g).any(), f"NaN in d{n}"
        atol = 1e-6 + 1e-4 * gr32.abs().max().item()
        err, err_lp = max_err(g, gr32), max_err(gl, gr32)
        assert err <= 5 * err_lp + atol, f"d{n}: kernel err {err:.3e} > 5 * GR {dtype} err {err_lp:.3e} + {atol:.1e}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gr_window_contexts", "gr_window_contexts_targets"])
def test_kernels_default_convention_differs_from_gr(name):
    """With a local window and contexts the default (NVIDIA) convention is not GR's: far outside bf16 rounding."""
    _need_kernels()
    qkv, gr, ours = make_case(name, 7, "cuda", torch.bfloat16, B=8, N=300)
    want = gr_forward([t.float() for t in qkv], gr, False)
    tol = 2 * max_err(gr_forward(qkv, gr, False), want) + 1e-4 * want.abs().max().item()
    assert max_err(hstu_attn_varlen_func(*qkv, **ours), want) <= tol
    ours["mask_convention"] = "nvidia"
    assert max_err(hstu_attn_varlen_func(*qkv, **ours), want) > 10 * tol
