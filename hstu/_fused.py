"""Fused steps of `HSTULayer` on CUDA: LayerNorm(x) * u, and SiLU + split of the uvqk projection.

Three layers, as for the attention ops (`_ops.py`):

1. torch ops ``hstu_attn::layer_norm_mul_fwd / _bwd`` and ``hstu_attn::silu_split_fwd / _bwd``: CUDA kernels
   from `_C.so` (hstu/csrc/layers, hstu/csrc/ops/hstu_layer_op.cc); here the fake (meta) implementations
   (torch.compile, export, CUDA-graph capture) and, without `_C.so`, the schemas.
2. autograd.Functions around them.
3. `layer_norm_mul` and `silu_split`, which validate their arguments and run the kernels for CUDA tensors (when
   compiled in) and the plain torch composition otherwise (the CPU path and the reference).
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F

from . import _load

__all__ = ["layer_norm_mul", "silu_split", "fused_kernels_available"]

# Keep identical to the C++ definitions in hstu/csrc/ops/hstu_layer_op.cc.
SCHEMAS = {
    "layer_norm_mul_fwd": "layer_norm_mul_fwd(Tensor x, Tensor u, Tensor weight, Tensor bias, float eps) "
                          "-> (Tensor, Tensor, Tensor)",
    "layer_norm_mul_bwd": "layer_norm_mul_bwd(Tensor dout, Tensor x, Tensor u, Tensor weight, Tensor bias, "
                          "Tensor mean, Tensor rstd) -> (Tensor, Tensor, Tensor, Tensor)",
    "silu_split_fwd": "silu_split_fwd(Tensor x) -> (Tensor, Tensor, Tensor, Tensor)",
    "silu_split_bwd": "silu_split_bwd(Tensor du, Tensor dv, Tensor dq, Tensor dk, Tensor x) -> Tensor",
}
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_load.load_library()
_libs = []  # keep torch.library.Library objects alive
if not all(hasattr(torch.ops.hstu_attn, n) for n in SCHEMAS):
    _lib = torch.library.Library("hstu_attn", "FRAGMENT")
    _libs.append(_lib)
    for _n, _s in SCHEMAS.items():
        if not hasattr(torch.ops.hstu_attn, _n):
            _lib.define(_s)


def _err(arg: str, expected: str, got, exc=ValueError):
    raise exc(f"hstu_attn: {arg}: expected {expected}, got {got}")


def _ln_mul_fwd_fake(x, u, weight, bias, eps):
    rows = x.shape[0]
    return (x.new_empty(x.shape), x.new_empty((rows,), dtype=torch.float32),
            x.new_empty((rows,), dtype=torch.float32))


def _ln_mul_bwd_fake(dout, x, u, weight, bias, mean, rstd):
    return x.new_empty(x.shape), x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


def _silu_split_fwd_fake(x):
    shape = (x.shape[0], x.shape[1] // 4)
    return tuple(x.new_empty(shape) for _ in range(4))


def _silu_split_bwd_fake(du, dv, dq, dk, x):
    return x.new_empty(x.shape)


for _name, _fake in (("layer_norm_mul_fwd", _ln_mul_fwd_fake), ("layer_norm_mul_bwd", _ln_mul_bwd_fake),
                     ("silu_split_fwd", _silu_split_fwd_fake), ("silu_split_bwd", _silu_split_bwd_fake)):
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"hstu_attn::{_name}", "Meta"):
        torch.library.register_fake(f"hstu_attn::{_name}", _fake)


# Looked up once (the library is loaded above): a plain bool keeps the call path traceable by torch.compile.
_KERNELS = torch._C._dispatch_has_kernel_for_dispatch_key("hstu_attn::layer_norm_mul_fwd", "CUDA")


def fused_kernels_available() -> bool:
    """Whether the fused layer kernels are compiled in (a CUDA build of `_C.so`)."""
    return _KERNELS


# The overloads themselves (a call skips the packet's overload resolution: the layer's step is host-bound).
_LN_FWD = torch.ops.hstu_attn.layer_norm_mul_fwd.default
_LN_BWD = torch.ops.hstu_attn.layer_norm_mul_bwd.default
_SPLIT_FWD = torch.ops.hstu_attn.silu_split_fwd.default
_SPLIT_BWD = torch.ops.hstu_attn.silu_split_bwd.default


class LayerNormMulFunction(torch.autograd.Function):
    """LayerNorm(x) * u through the CUDA kernels (contiguous 2-d x and u of one dtype, 1-d weight and bias)."""

    @staticmethod
    def forward(ctx, x, u, weight, bias, eps):
        out, mean, rstd = _LN_FWD(x, u, weight, bias, eps)
        ctx.save_for_backward(x, u, weight, bias, mean, rstd)
        return out

    @staticmethod
    def backward(ctx, dout):
        x, u, weight, bias, mean, rstd = ctx.saved_tensors
        dx, du, dw, db = _LN_BWD(dout.contiguous(), x, u, weight, bias, mean, rstd)
        return dx, du, dw, db, None


class SiluSplitFunction(torch.autograd.Function):
    """SiLU of (rows, 4 W) split into four contiguous (rows, W) tensors through the CUDA kernels."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _SPLIT_FWD(x)

    @staticmethod
    def backward(ctx, du, dv, dq, dk):  # unused outputs arrive as zeros (materialized grads)
        (x,) = ctx.saved_tensors
        return _SPLIT_BWD(du.contiguous(), dv.contiguous(), dq.contiguous(), dk.contiguous(), x)


def _use_kernel(*tensors) -> bool:
    return (tensors[0].is_cuda and all(t.dtype in KERNEL_DTYPES for t in tensors) and fused_kernels_available())


def layer_norm_mul(x: torch.Tensor, u: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm(x, (C,), weight, bias, eps) * u`` in one kernel on CUDA (forward and backward).

    Statistics and sums in float32; the output is rounded once to x's dtype. Gradients flow to x, u, weight and
    bias. CPU tensors (or a build without the CUDA kernels) run the torch composition.

    Args:
        x: (N, C) float32 / float16 / bfloat16 (on CPU also float64), C >= 1.
        u: (N, C), x's dtype and device.
        weight, bias: (C,) floating, on x's device (e.g. float32 parameters with bfloat16 activations).
        eps: the LayerNorm epsilon (> 0).

    Returns:
        (N, C) in x's dtype.

    Raises:
        ValueError / TypeError naming the argument, the expected and the actual value.

    Example:
        >>> x, u = torch.randn(5, 24), torch.randn(5, 24)
        >>> layer_norm_mul(x, u, torch.ones(24), torch.zeros(24)).shape
        torch.Size([5, 24])
    """
    for name, t in (("x", x), ("u", u), ("weight", weight), ("bias", bias)):
        if not isinstance(t, torch.Tensor):
            _err(name, "a tensor", type(t).__name__, TypeError)
        if not t.is_floating_point():
            _err(name, "a floating-point tensor", t.dtype, TypeError)
        if t.device != x.device:
            _err(name, f"a tensor on {x.device} (x's device)", t.device)
    if x.dim() != 2 or x.shape[1] < 1:
        _err("x", "a (N, C) tensor with C >= 1", tuple(x.shape))
    C = x.shape[1]
    if u.shape != x.shape:
        _err("u", f"shape {tuple(x.shape)} (x's)", tuple(u.shape))
    if u.dtype != x.dtype:
        _err("u", f"dtype {x.dtype} (x's)", u.dtype, TypeError)
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape != (C,):
            _err(name, f"shape ({C},)", tuple(t.shape))
    if bias.dtype != weight.dtype:
        _err("bias", f"dtype {weight.dtype} (weight's)", bias.dtype, TypeError)
    if not eps > 0:
        _err("eps", "a positive number", eps)
    if _use_kernel(x, weight):
        return LayerNormMulFunction.apply(x.contiguous(), u.contiguous(), weight.contiguous(), bias.contiguous(),
                                          float(eps))
    if weight.dtype != x.dtype and not x.is_cuda:  # CPU layer_norm takes the parameters in x's dtype
        weight, bias = weight.to(x.dtype), bias.to(x.dtype)
    return (F.layer_norm(x, (C,), weight, bias, eps) * u).to(x.dtype)


def silu_split(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``F.silu(x).split(W, dim=1)`` into four contiguous tensors (u, v, q, k of HSTU's projection); one kernel
    forward and one backward on CUDA.

    Args:
        x: (N, 4 W) float32 / float16 / bfloat16 (on CPU also float64).

    Returns:
        four (N, W) contiguous tensors in x's dtype.

    Example:
        >>> u, v, q, k = silu_split(torch.randn(3, 8))
        >>> q.shape
        torch.Size([3, 2])
    """
    if not isinstance(x, torch.Tensor):
        _err("x", "a tensor", type(x).__name__, TypeError)
    if not x.is_floating_point():
        _err("x", "a floating-point tensor", x.dtype, TypeError)
    if x.dim() != 2 or x.shape[1] < 4 or x.shape[1] % 4 != 0:
        _err("x", "a (N, 4 W) tensor with W >= 1", tuple(x.shape))
    if _use_kernel(x):
        return SiluSplitFunction.apply(x.contiguous())
    return tuple(t.contiguous() for t in F.silu(x).split(x.shape[1] // 4, dim=1))
