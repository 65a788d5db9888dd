"""Optimizers fused into the backward of dynamic embedding tables (the update is applied to the table rows).

A row of a table holds ``[embedding (dim) | optimizer state (state_dim(dim)) | padding]`` in the table's dtype,
``row_width(dim)`` columns: when dim is a multiple of 4 the width is too (RowWiseAdagrad's one state column gets 3
padding columns), so rows stay 4-element aligned for the vectorized kernels; padding holds the initial state
value and is never read. Updates
compute in fp32 and round once when written back. Updates are lazy (sparse): only the rows of the ids of a batch
change, like ``torch.optim.SparseAdam`` / FBGEMM TBE. The learning rate and the step count live in device tensors
of the module, so ``set_learning_rate`` works between CUDA-graph replays.

Gradient handling, in order, per row gradient ``g`` (the sum over the batch of the id's gradients):
``max_grad_value`` clamps every element to ±value; ``max_grad_norm`` scales all row gradients of the batch (all
tables of the module together) by ``min(1, max_grad_norm / (global L2 norm + 1e-6))`` like
``torch.nn.utils.clip_grad_norm_``; ``weight_decay`` adds ``weight_decay * w`` (L2, as torch.optim), or with
``decoupled_weight_decay`` (Adam only, AdamW) multiplies ``w`` by ``1 - lr * weight_decay`` first.

Non-finite gradients (``nonfinite``): a row whose summed gradient ``g`` holds a NaN or an inf (from the output
gradient or a per-sample weight; checked before clipping) would otherwise be written into the table for good, and
under ``max_grad_norm`` one such row makes every row of the step NaN. The policy is applied on the device, in the
update itself (no host synchronization), and the same way by the CPU path:
``"skip_row"`` (default): that row keeps its value and optimizer state; the module's ``nonfinite_count[0]`` counts it.
``"skip_step"``: no row of the step changes if any row's gradient is non-finite; ``nonfinite_count[1]`` counts it.
``"raise"``: like ``"skip_row"``, and the module raises ``DeviceInputError`` (CUDA: at its next call or
``dynamicemb.check_errors()``; CPU: from the backward).
``"propagate"``: write it into the rows (the behaviour before the option existed).
Under ``max_grad_norm`` every policy but ``"propagate"`` skips the whole step (``nonfinite_count[1]``) when the global
norm is non-finite. The step count (Adam's bias correction) advances for skipped steps too.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import torch

from ._options import _is_finite_number

__all__ = ["SGD", "Adagrad", "RowWiseAdagrad", "Adam", "EmbOptimizer", "NONFINITE_POLICIES"]

#: Non-finite gradient policies, in the order of their codes (lookup_types.h NonFinite).
NONFINITE_POLICIES = ("propagate", "skip_row", "skip_step", "raise")


@dataclasses.dataclass
class EmbOptimizer:
    """Fields every fused optimizer has; build a subclass (SGD, Adagrad, RowWiseAdagrad, Adam), not this class.

    Args:
        lr: learning rate (>= 0); change it later with the module's ``set_learning_rate``.
        weight_decay: L2 decay (>= 0) of the rows a step updates, fused in their update (see the module docstring).
        max_grad_value: clamp every row-gradient element to ±value (> 0), or None.
        max_grad_norm: scale the step's row gradients (all tables together) to at most this global L2 norm (> 0),
            or None.
        nonfinite: what the update does with a row whose summed gradient holds a NaN or an inf: "skip_row"
            (default), "skip_step", "raise" or "propagate" (see the module docstring).

    A table row holds the embedding, then ``state_dim(dim)`` state columns, padded to ``row_width(dim)``.

    Example:
        >>> opt = RowWiseAdagrad(lr=0.1, weight_decay=1e-5, max_grad_norm=1.0)
        >>> isinstance(opt, EmbOptimizer), opt.state_dim(16), opt.row_width(16)  # 1 state column, padded to 4
        (True, 1, 20)
    """

    lr: float = 0.01
    weight_decay: float = 0.0
    max_grad_norm: Optional[float] = None
    max_grad_value: Optional[float] = None
    nonfinite: str = "skip_row"

    name = "base"

    def __post_init__(self):
        def num(name, lo=0.0, strict=False, optional=False):
            v = getattr(self, name)
            if v is None and optional:
                return
            ok = _is_finite_number(v) and (v > lo if strict else v >= lo)
            if not ok:
                raise ValueError(
                    f"{type(self).__name__}.{name}: expected a finite number {'>' if strict else '>='} {lo}"
                    f"{' or None' if optional else ''}, got {v!r}"
                )

        num("lr")
        num("weight_decay")
        num("max_grad_norm", strict=True, optional=True)
        num("max_grad_value", strict=True, optional=True)
        if self.nonfinite not in NONFINITE_POLICIES:
            raise ValueError(f"{type(self).__name__}.nonfinite: expected one of {list(NONFINITE_POLICIES)}, got "
                             f"{self.nonfinite!r}")
        self._check()

    def _check(self):
        pass

    def state_dim(self, dim: int) -> int:
        """Columns of optimizer state after an embedding row of ``dim``."""
        raise NotImplementedError

    def row_width(self, dim: int) -> int:
        """Columns of a table row: ``dim + state_dim(dim)``, rounded up to a multiple of 4 when ``dim`` is one."""
        w = dim + self.state_dim(dim)
        return (w + 3) // 4 * 4 if dim % 4 == 0 else w

    def initial_state(self) -> float:
        """Value of every state column of a new row."""
        return 0.0

    def signature(self) -> dict:
        """What a checkpoint must match (name and state layout), plus the hyper-parameters for reference."""
        fields = {k: (str(v).replace("torch.", "") if isinstance(v, torch.dtype) else v)
                  for k, v in dataclasses.asdict(self).items()}
        return {"name": self.name, **fields}

    def apply_weight_decay(self, w, g, lr):
        if self.weight_decay:
            g = g + self.weight_decay * w
        return g

    def update(self, w: torch.Tensor, state: torch.Tensor, g: torch.Tensor, lr: torch.Tensor,
               step: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """New (w, state) from fp32 rows ``w`` (n, dim), ``state`` (n, state_dim), gradient ``g`` (n, dim);
        ``lr`` and ``step`` (already counting this step) are 0-d fp32 device tensors."""
        raise NotImplementedError


@dataclasses.dataclass
class SGD(EmbOptimizer):
    """w -= lr * (g + weight_decay * w). No state.

    Example:
        >>> from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions
        >>> emb = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)],
        ...                                     optimizer=SGD(lr=0.5))
        >>> emb.set_rows(0, torch.tensor([7]), torch.ones(1, 4))
        >>> emb(torch.tensor([7, 7]), torch.tensor([0, 2])).sum().backward()  # one bag holding id 7 twice: g = 2
        >>> emb.get_rows(0, torch.tensor([7]))[0]  # 1 - 0.5 * 2
        tensor([[0., 0., 0., 0.]])
    """

    name = "sgd"

    def state_dim(self, dim):
        return 0

    def update(self, w, state, g, lr, step):
        g = self.apply_weight_decay(w, g, lr)
        return w - lr * g, state


@dataclasses.dataclass
class Adagrad(EmbOptimizer):
    """torch.optim.Adagrad (lr_decay 0), lazy: s += g²; w -= lr * g / (sqrt(s) + eps). State: dim columns.

    Args:
        eps: added to sqrt(s) (> 0).
        initial_accumulator_value: s of a new row (>= 0).

    Example:
        >>> from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions
        >>> emb = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)],
        ...                                     optimizer=Adagrad(lr=0.1, weight_decay=0.5))
        >>> emb.set_rows(0, torch.tensor([7]), torch.ones(1, 4))
        >>> emb(torch.tensor([7]), torch.tensor([0, 1])).sum().backward()  # g = 1 + 0.5 * w = 1.5
        >>> w, s, found = emb.get_rows(0, torch.tensor([7]))
        >>> w, s  # s = 1.5², w = 1 - 0.1 * 1.5 / 1.5
        (tensor([[0.9000, 0.9000, 0.9000, 0.9000]]), tensor([[2.2500, 2.2500, 2.2500, 2.2500]]))
    """

    eps: float = 1e-10
    initial_accumulator_value: float = 0.0
    name = "adagrad"

    def _check(self):
        if not (_is_finite_number(self.eps) and self.eps > 0):
            raise ValueError(f"{type(self).__name__}.eps: expected a number > 0, got {self.eps!r}")
        if not (_is_finite_number(self.initial_accumulator_value) and self.initial_accumulator_value >= 0):
            raise ValueError(
                f"{type(self).__name__}.initial_accumulator_value: expected a number >= 0, got "
                f"{self.initial_accumulator_value!r}"
            )

    def state_dim(self, dim):
        return dim

    def initial_state(self):
        return float(self.initial_accumulator_value)

    def update(self, w, state, g, lr, step):
        g = self.apply_weight_decay(w, g, lr)
        s = state + g * g
        return w - lr * g / (s.sqrt() + self.eps), s


@dataclasses.dataclass
class RowWiseAdagrad(Adagrad):
    """FBGEMM's row-wise Adagrad, lazy: s += mean(g²) per row; w -= lr * g / (sqrt(s) + eps). State: 1 column
    (padded to a multiple of 4 columns when dim is one). Args as ``Adagrad``.

    Example:
        >>> from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions
        >>> emb = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)],
        ...                                     optimizer=RowWiseAdagrad(lr=0.1))
        >>> emb.set_rows(0, torch.tensor([7]), torch.ones(1, 4))
        >>> (emb(torch.tensor([7]), torch.tensor([0, 1])) * torch.tensor([1.0, 1.0, 3.0, 3.0])).sum().backward()
        >>> w, s, found = emb.get_rows(0, torch.tensor([7]))
        >>> w, s  # s = mean(1, 1, 9, 9) = 5 for the row; w = 1 - 0.1 * g / sqrt(5)
        (tensor([[0.9553, 0.9553, 0.8658, 0.8658]]), tensor([[5.]]))
    """

    name = "rowwise_adagrad"

    def state_dim(self, dim):
        return 1

    def update(self, w, state, g, lr, step):
        g = self.apply_weight_decay(w, g, lr)
        s = state + (g * g).mean(dim=1, keepdim=True)
        return w - lr * g / (s.sqrt() + self.eps), s


@dataclasses.dataclass
class Adam(EmbOptimizer):
    """Lazy Adam (torch.optim.SparseAdam semantics, one step count per module): m, v updated for the rows seen;
    w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps) (SparseAdam's form). State: 2 * dim columns
    [m | v]; with ``state_dtype=torch.bfloat16``, dim columns holding m then v as 2 * dim bf16 values.

    Args:
        betas, eps: as torch.optim.Adam.
        decoupled_weight_decay: AdamW-style decay (w *= 1 - lr * weight_decay) instead of L2 on the gradient.
        state_dtype: torch.float32 (default) or torch.bfloat16 (fp32 tables only): m and v stored as bf16, a row
            of dim 128 moves 1,024 bytes instead of 1,536 per update. The update computes in fp32 (w from the fp32
            m and v of this step) and rounds m and v stochastically when it stores them (dithers hashed from the
            two values, their column and the step count: repeatable), so a moment that moves by less than half a
            bf16 ulp per step (v under beta2 = 0.999) still moves on average. ``moments(state)`` unpacks the
            state columns of ``get_rows`` into fp32 (m, v).

    Example:
        >>> from dynamicemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions
        >>> emb = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=4, max_capacity=128)],
        ...                                     optimizer=Adam(lr=0.1, weight_decay=0.5, decoupled_weight_decay=True))
        >>> emb.set_rows(0, torch.tensor([7]), torch.ones(1, 4))
        >>> emb(torch.tensor([7]), torch.tensor([0, 1])).sum().backward()  # g = 1
        >>> w, mv, found = emb.get_rows(0, torch.tensor([7]))
        >>> w  # AdamW: 1 * (1 - 0.1 * 0.5), then the first Adam step moves by lr
        tensor([[0.8500, 0.8500, 0.8500, 0.8500]])
        >>> mv  # [m | v] = [(1 - b1) g | (1 - b2) g²]
        tensor([[0.1000, 0.1000, 0.1000, 0.1000, 0.0010, 0.0010, 0.0010, 0.0010]])
    """

    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    decoupled_weight_decay: bool = False
    state_dtype: torch.dtype = torch.float32
    name = "adam"

    def _check(self):
        b = self.betas
        if not (isinstance(b, (tuple, list)) and len(b) == 2
                and all(_is_finite_number(x) and 0.0 <= x < 1.0 for x in b)):
            raise ValueError(f"Adam.betas: expected two numbers in [0, 1), got {b!r}")
        self.betas = (float(b[0]), float(b[1]))
        if not (_is_finite_number(self.eps) and self.eps > 0):
            raise ValueError(f"Adam.eps: expected a number > 0, got {self.eps!r}")
        if not isinstance(self.decoupled_weight_decay, bool):
            raise ValueError(f"Adam.decoupled_weight_decay: expected a bool, got {self.decoupled_weight_decay!r}")
        if self.state_dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"Adam.state_dtype: expected torch.float32 or torch.bfloat16, got {self.state_dtype!r}")

    def state_dim(self, dim):
        return dim if self.state_dtype == torch.bfloat16 else 2 * dim

    def moments(self, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """fp32 (m, v), each (n, dim), from a table's state columns (n, state_dim(dim)) as ``get_rows`` returns
        them (fp32 values, or with ``state_dtype=torch.bfloat16`` the packed bf16 words)."""
        if self.state_dtype != torch.bfloat16:
            d = state.shape[1] // 2
            return state[:, :d].float(), state[:, d:].float()
        h = state.float().contiguous().view(torch.bfloat16)
        d = state.shape[1]
        return h[:, :d].float(), h[:, d:].float()

    def update(self, w, state, g, lr, step):
        b1, b2 = self.betas
        if self.state_dtype == torch.bfloat16:
            state = torch.cat(self.moments(state), dim=1)
        if self.decoupled_weight_decay:
            if self.weight_decay:
                w = w * (1.0 - lr * self.weight_decay)
        else:
            g = self.apply_weight_decay(w, g, lr)
        d = w.shape[1]
        m0, v0 = state[:, :d], state[:, d:]
        m = m0 + (g - m0) * (1.0 - b1)
        v = v0 + (g * g - v0) * (1.0 - b2)
        t = step.double()  # bias corrections in fp64 like torch.optim (1 - 0.999 in fp32 is 1.3e-5 off)
        bc1 = 1.0 - torch.pow(b1, t)
        bc2 = 1.0 - torch.pow(b2, t)
        step_size = (lr.double() * bc2.sqrt() / bc1).float()
        w = w - step_size * (m / (v.sqrt() + self.eps))
        if self.state_dtype == torch.bfloat16:
            return w, torch.cat(_bf16_moments(m, v, step), 1).view(torch.float32)
        return w, torch.cat([m, v], dim=1)


def _moment_hash(x: torch.Tensor) -> torch.Tensor:
    """csrc/lookup/optimizer.cuh moment_hash on uint32 values held in int64."""
    m = 0xFFFFFFFF
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & m
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def _bf16_bits(b: torch.Tensor, dither: torch.Tensor) -> torch.Tensor:
    """bf16 bits (int64) of fp32 bits b (int64) rounded up with probability (the dropped 16 bits) / 2^16; NaN stays
    NaN, inf stays inf (optimizer.cuh bf16_dither)."""
    special = (b & 0x7F800000) == 0x7F800000
    nan = special & ((b & 0x7FFFFF) != 0)
    return torch.where(special, (b >> 16) | torch.where(nan, 0x40, 0), (b + dither) >> 16)


def _bf16_moments(m: torch.Tensor, v: torch.Tensor, step: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """bf16 m and v from fp32 ``m``, ``v`` (n, dim), rounded stochastically as the CUDA update rounds them
    (optimizer.cuh moments_bf16): one hash of the column's two values, the column and the step count gives both
    dithers."""
    mask = 0xFFFFFFFF
    bm = m.contiguous().view(torch.int32).to(torch.int64) & mask
    bv = v.contiguous().view(torch.int32).to(torch.int64) & mask
    col = torch.arange(m.shape[1], device=m.device, dtype=torch.int64)
    h = _moment_hash(bm ^ ((bv * 0x68E31DA4) & mask) ^ ((col * 0x9E3779B9) & mask)
                     ^ ((step.to(torch.int64) * 0x85EBCA6B) & mask))

    def bf16(bits):
        return torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(torch.bfloat16)

    return bf16(_bf16_bits(bm, h & 0xFFFF)), bf16(_bf16_bits(bv, h >> 16))
