"""Helpers of the CUDA kernel tests (test_kernels_gpu.py, test_sm80_forward_gpu.py): the sampled masks, the case
maker, the error-relative check against the fp32 reference with poisoned outputs (the rule: test_kernels_gpu.py's
docstring), the kernel_options fixture."""

import contextlib
import random
import zlib

import pytest
import torch

import hstu_attn
from hstu_attn import hstu_attn_reference, hstu_attn_varlen_func

LENGTHS = [0, 1, 27, 99, 256, 1111, 2000]

# kPdsDqClaim (hstu_bwd_sm80_pds_kernel.cuh): the portable backward loops' BODY flag of the dQ claims, in the kernel
# names the tests expect
PDS_DQ_CLAIM = 1048576

# name -> (window, contexts, targets, target_group_size)
MASKS = {
    "none": ((-1, -1), False, False, 1),
    "causal": ((-1, 0), False, False, 1),
    "local": ((64, 32), False, False, 1),
    "local_causal": ((100, 0), False, False, 1),
    "context": ((-1, 0), True, False, 1),
    "target": ((-1, 0), False, True, 1),
    "target_group": ((-1, 0), False, True, 3),
    "context_target": ((-1, 0), True, True, 1),
    "context_target_group": ((-1, 0), True, True, 4),
    "local_context_target": ((50, 0), True, True, 2),
    "local_target": ((17, 0), False, True, 1),
}


@pytest.fixture(autouse=True)
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


@pytest.fixture
def kernel_opts():
    """set(**switches): the rest of the test runs with these `hstu_attn._ops.kernel_options` (each call replaces
    the previous switches; restored at the end)."""
    stack = contextlib.ExitStack()

    def set_options(**switches):
        stack.close()
        stack.enter_context(hstu_attn._ops.kernel_options(**switches))

    yield set_options
    stack.close()


def poison_allocator(nbytes):
    """Hand the caching allocator a NaN-filled block so the next allocations start out as NaN."""
    if nbytes > 0:
        torch.full((nbytes // 2 + 1024,), float("nan"), dtype=torch.float16, device="cuda")
    # The tensor is freed right away; its block stays cached and is reused by the op's outputs.


def make_case(seed, lens_k, H, D, dtype, mask, rab_heads, delta_q=False, seqused=False):
    rng = random.Random(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    window, ctx, tgt, g = MASKS[mask]
    lens_q = [lk - rng.randint(0, lk) if delta_q else lk for lk in lens_k]
    dev = "cuda"
    cu_q = torch.tensor([0] + lens_q, device=dev).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k, device=dev).cumsum(0).to(torch.int32)
    total_q, total_k = sum(lens_q), sum(lens_k)
    q = torch.randn(total_q, H, D, generator=gen, device=dev, dtype=dtype)
    k = torch.randn(total_k, H, D, generator=gen, device=dev, dtype=dtype)
    v = torch.randn(total_k, H, D, generator=gen, device=dev, dtype=dtype)
    max_q, max_k = max(lens_q + [0]), max(lens_k + [0])
    used_q, used_k = lens_q, lens_k
    seqused_q = seqused_k = None
    if seqused:
        used_k = [rng.randint(0, lk) for lk in lens_k]
        used_q = [rng.randint(0, min(lq, uk)) for lq, uk in zip(lens_q, used_k)]
        seqused_q = torch.tensor(used_q, dtype=torch.int32, device=dev)
        seqused_k = torch.tensor(used_k, dtype=torch.int32, device=dev)
    nt = [rng.randint(0, min(uk, 3 * g + 1)) for uk in used_k] if tgt else None
    nc = [rng.randint(0, min(uk - (nt[b] if nt else 0), 5)) for b, uk in enumerate(used_k)] if ctx else None
    rab = None
    if rab_heads:
        rab = torch.randn(len(lens_k), rab_heads if rab_heads == 1 else H, max_k, max_k, generator=gen,
                          device=dev, dtype=dtype)
    return dict(
        q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k,
        num_contexts=None if nc is None else torch.tensor(nc, dtype=torch.int32, device=dev),
        num_targets=None if nt is None else torch.tensor(nt, dtype=torch.int32, device=dev),
        target_group_size=g, window_size=window, rab=rab, seqused_q=seqused_q, seqused_k=seqused_k,
    )


def many_sequences_case(tag, D, H=2):
    """The many-sequences backward case: 80 sequences of 0-999 keys (lengths seeded by D) and one of 4,000, contexts
    and targets, bf16 (the split's list of several hundred items; the context loops' fault of session 37)."""
    g = torch.Generator().manual_seed(D)
    lens = torch.randint(0, 1000, (80,), generator=g).tolist() + [4000]
    return make_case(zlib.crc32(repr((tag, D)).encode()), lens, H, D, torch.bfloat16, "context_target", 0), lens


def grad_reference(case, dout, alpha):
    """(dq, dk, dv) of the fp32 reference and each one's error bound: 5x the error of the reference computed in the
    input dtype, plus 1e-6 and 1e-4 of the gradient's largest magnitude."""
    args = _varlen_kwargs(case)
    f32 = [t.detach().float().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    ref = torch.autograd.grad(hstu_attn_reference(*f32, alpha=alpha, **args), f32, dout.float())
    lp = [t.detach().clone().requires_grad_() for t in (case["q"], case["k"], case["v"])]
    ref_lp = torch.autograd.grad(hstu_attn_reference(*lp, alpha=alpha, upcast=False, **args), lp, dout)
    return ref, [5 * max_err(a, r) + 1e-6 + 1e-4 * r.abs().max().item() for a, r in zip(ref_lp, ref)]


def _with(case, **tensors):
    out = dict(case)
    out.update(tensors)
    return out


def max_err(a, b):
    return 0.0 if a.numel() == 0 else (a.double() - b.double()).abs().max().item()


def assert_agree(names, got, want, what):
    """Each got tensor agrees with its want to the fp32 reduction order: max |got - want| <= 1e-2 max |want| + 1e-6."""
    for name, g, w in zip(names, got, want):
        scale = w.abs().max().item()
        err = max_err(g, w)
        assert err <= 1e-2 * scale + 1e-6, f"{name}: {what} {err:.3e}"


def _varlen_kwargs(case):
    """hstu_attn_varlen_func's length and mask arguments of a make_case case (rab and alpha apart)."""
    return {n: case[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "num_contexts",
                                 "num_targets", "target_group_size", "window_size", "seqused_q", "seqused_k")}


def check_case(case, alpha, backward=True, has_drab=None, deterministic=False, mask_convention="nvidia"):
    q, k, v, rab = case["q"], case["k"], case["v"], case["rab"]
    has_drab = rab is not None if has_drab is None else has_drab
    args = dict(_varlen_kwargs(case), mask_convention=mask_convention)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    rab_leaf = None if rab is None else rab.detach().clone().requires_grad_(has_drab)
    poison_allocator(4 * q.numel() * q.element_size())
    out = hstu_attn_varlen_func(*leaves, alpha=alpha, rab=rab_leaf, has_drab=has_drab, deterministic=deterministic,
                                **args)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert not torch.isnan(out).any(), "NaN in output (unwritten elements?)"

    f32 = [t.detach().float().requires_grad_() for t in (q, k, v)]
    rab32 = None if rab is None else rab.detach().float().requires_grad_(has_drab)
    ref = hstu_attn_reference(*f32, alpha=alpha, rab=rab32, **args)
    lp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    rab_lp = None if rab is None else rab.detach().clone().requires_grad_(has_drab)
    ref_lp = hstu_attn_reference(*lp, alpha=alpha, rab=rab_lp, upcast=False, **args)

    scale = ref.abs().max().item() if ref.numel() else 0.0
    atol = 1e-6 + 1e-4 * scale
    err, err_lp = max_err(out, ref), max_err(ref_lp, ref)
    assert err <= 2 * err_lp + atol, f"forward: kernel err {err:.3e} > 2 * torch err {err_lp:.3e} + {atol:.1e}"
    # Rows that no sequence uses are exactly zero.
    used = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
    cu = case["cu_seqlens_q"].tolist()
    su = None if case["seqused_q"] is None else case["seqused_q"].tolist()
    for b in range(len(cu) - 1):
        used[cu[b] : cu[b] + (cu[b + 1] - cu[b] if su is None else su[b])] = True
    assert torch.all(out[~used] == 0)
    if not backward or q.shape[0] == 0:
        return
    dout = torch.randn_like(out)
    inputs = leaves + ([rab_leaf] if has_drab else [])
    poison_allocator(8 * q.numel() * q.element_size())
    grads = torch.autograd.grad(out, inputs, dout, allow_unused=True)
    grads_ref = torch.autograd.grad(ref, f32 + ([rab32] if has_drab else []), dout.float(), allow_unused=True)
    grads_lp = torch.autograd.grad(ref_lp, lp + ([rab_lp] if has_drab else []), dout, allow_unused=True)
    for name, g, gr, gl in zip(("dq", "dk", "dv", "drab"), grads, grads_ref, grads_lp):
        gr = torch.zeros_like(g, dtype=torch.float32) if gr is None else gr
        gl = torch.zeros_like(g) if gl is None else gl
        assert g is not None and g.shape == gr.shape, name
        assert not torch.isnan(g).any(), f"NaN in {name}"
        scale = gr.abs().max().item() if gr.numel() else 0.0
        atol = 1e-6 + 1e-4 * scale
        err, err_lp = max_err(g, gr), max_err(gl, gr)
        assert err <= 5 * err_lp + atol, f"{name}: kernel err {err:.3e} > 5 * torch err {err_lp:.3e} + {atol:.1e}"


# name -> (window, targets, target_group_size) of the GR-convention cases (contexts always)
GR_MASKS = {
    "gr_local_context": ((40, 0), False, 1),
    "gr_local_context_target": ((50, 0), True, 2),
    "gr_short_window_context_target": ((3, 0), True, 1),
}


def _gr_case(mask, D, delta_q, rab_heads):
    """Jagged lengths at tile edges with contexts of 0, 1, 63, 64, 65, 200, ... rows, so the collapsed contexts
    reach across query and key tiles of both families (64 / 128 rows, 64 / 128 keys)."""
    window, tgt, g = GR_MASKS[mask]
    lens = [700, 129, 64, 1, 330, 257, 128, 65, 0, 191]
    case = make_case(zlib.crc32(repr(("gr", mask, D, delta_q, rab_heads)).encode()), lens, 2, D, torch.bfloat16,
                     "context_target" if tgt else "context", rab_heads, delta_q=delta_q)
    case["window_size"], case["target_group_size"] = window, g
    nt = case["num_targets"].tolist() if tgt else [0] * len(lens)
    want = [200, 65, 63, 1, 64, 0, 127, 30, 0, 120]
    nc = [max(0, min(c, lk - t)) for c, lk, t in zip(want, lens, nt)]
    case["num_contexts"] = torch.tensor(nc, dtype=torch.int32, device="cuda")
    return case
