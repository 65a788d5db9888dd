"""Dense-per-sequence PyTorch reference of HSTU attention.

This module is the executable specification of `hstu_attn`: the CUDA kernels implement exactly what
`hstu_mask` and `hstu_attn_reference` compute, the tests judge the kernels against it, and the CPU
implementation of the `hstu_attn::fwd` / `hstu_attn::bwd` ops calls it (so the API works without a GPU).

Math, per sequence b, head h, query row r and key column j of that sequence::

    S[r, j] = alpha * (q[r] . k[j] + rab[b, h, i(r), j])      i(r) = r + (Lk - Lq)   (see delta-q)
    P[r, j] = SiLU(S[r, j])  if hstu_mask(...)[r, j]  else 0
    out[r]  = (sum_j P[r, j] * v[j]) / scaling_seqlen

Everything here is plain differentiable torch code, so autograd of it is the reference backward.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

__all__ = ["hstu_mask", "hstu_attn_reference", "resolve_lengths", "MASK_CONVENTIONS"]

#: mask conventions of `hstu_mask`: "nvidia" (the default) and "meta_gr" (Meta generative-recommenders')
MASK_CONVENTIONS = ("nvidia", "meta_gr")


def hstu_mask(
    seqlen_q: int,
    seqlen_k: int,
    num_context: int = 0,
    num_target: int = 0,
    target_group_size: int = 1,
    window_size: Tuple[int, int] = (-1, -1),
    device: Optional[torch.device] = None,
    mask_convention: str = "nvidia",
) -> torch.Tensor:
    """The boolean (seqlen_q, seqlen_k) mask of one sequence: True where a query may attend a key.

    This docstring is the normative definition of every HSTU mask; kernels implement these rules.

    Coordinates. Keys are numbered j = 0 .. Lk-1 (Lk = seqlen_k). Queries are the LAST Lq = seqlen_q
    positions of the key sequence (delta-q, Lq <= Lk): query row r sits at key position
    ``i = r + (Lk - Lq)``. All rules below use i and j, both key positions. When Lq == Lk, i == r.

    Let ``c = num_context``, ``t = num_target``, ``g = target_group_size`` (>= 1),
    ``(wl, wr) = window_size`` (-1 means unlimited on that side), and ``h = Lk - t`` the history
    length. Key positions ``x >= h`` are targets; target x belongs to group ``(x - h) // g``.
    Define the *time position* of a key position x::

        tpos(x) = x                      if x < h       (history, contexts included)
        tpos(x) = h + (x - h) % g        if x >= h      (a target sits right after the history,
                                                          at its offset inside its own group)

    Then ``mask[r, j]`` (with i = r + Lk - Lq) is::

        base   = (wl < 0 or tpos(j) >= tpos(i) - wl) and (wr < 0 or tpos(j) <= tpos(i) + wr)
        group  = j < h  or  (i >= h and (i - h) // g == (j - h) // g)
        mask   = (base and group)  or  (i < c and j < h)

    In words:

    - No mask: window (-1, -1). Causal: window (-1, 0), i.e. j <= i. Local: (wl, wr) with
      i - wl <= j <= i + wr (flash-attention convention).
    - Targets (t > 0; the public API requires wr == 0): a target key is seen only by target rows of
      its own group, causally inside the group; history rows never see targets; every target row
      sees the history. With t = 0 (h = Lk) targets and groups play no role and tpos(x) = x.
    - Contexts (c > 0; the public API requires wr == 0): the first c rows (key positions i < c)
      additionally see every history (non-target) key, past and future. Other rows see context
      keys like any other history key (causally / through the window).
    - Local window combined with targets (beyond the predecessor): a target row is placed, for the
      window, at ``tpos(i)``, i.e. as if its group were appended right after the history. So with
      causal local window (wl, 0) every target group sees the last wl - ((i - h) % g) history keys
      and its own earlier group members within wl; with g = 1 each target sees the last wl history
      keys and itself (FBGEMM's max_attn_len convention). Context rows ignore the window for
      history keys (they see all of it) but keep it for anything else.
    - With wl = -1, wr = 0 this is exactly NVIDIA recsys-examples / FBGEMM's
      ``_get_valid_attn_mask`` (contexts, targets, target groups, causal), which we cross-checked.

    Conventions. The rules above are ``mask_convention="nvidia"`` (the default; the kernels implement both
    conventions, SeqMask in hstu/csrc/common/hstu_common.cuh).
    ``mask_convention="meta_gr"`` follows Meta generative-recommenders (``max_attn_len`` with
    ``contextual_seq_len``): the window distances are measured after collapsing the c context positions
    into one, i.e. the window tests ``base`` use ``wpos(x) = max(tpos(x) - c + 1, 0)`` instead of
    ``tpos(x)`` when c > 0 (every context key sits at position 0, the first history key after them at 1).
    A history or target row at key position i then sees all context keys as soon as
    ``tpos(i) - c + 1 <= wl``, where the NVIDIA rule needs ``tpos(i) - j <= wl`` for each context key j.
    Everything else is the same, and the two conventions give the same mask whenever c == 0 or wl < 0
    (no left window): collapsing keeps the causal order (``wpos`` is non-decreasing, and strictly
    increasing from position c - 1 on, while context rows see all history anyway).

    Args:
        seqlen_q: Lq, number of query rows (0 <= Lq <= Lk).
        seqlen_k: Lk, number of keys.
        num_context: c >= 0.
        num_target: t, 0 <= t <= Lk.
        target_group_size: g >= 1.
        window_size: (wl, wr), each >= -1.
        device: device of the returned mask.
        mask_convention: "nvidia" (default) or "meta_gr" (see Conventions).

    Returns:
        torch.bool tensor of shape (seqlen_q, seqlen_k).

    Example:
        >>> hstu_mask(4, 4, window_size=(-1, 0)).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    if seqlen_q > seqlen_k:
        raise ValueError(f"seqlen_q: expected <= seqlen_k ({seqlen_k}), got {seqlen_q}")
    if target_group_size < 1:
        raise ValueError(f"target_group_size: expected >= 1, got {target_group_size}")
    if mask_convention not in MASK_CONVENTIONS:
        raise ValueError(f"mask_convention: expected one of {list(MASK_CONVENTIONS)}, got {mask_convention!r}")
    wl, wr = int(window_size[0]), int(window_size[1])
    c, t, g = int(num_context), int(num_target), int(target_group_size)
    t = min(max(t, 0), seqlen_k)
    h = seqlen_k - t
    i = torch.arange(seqlen_k - seqlen_q, seqlen_k, device=device).view(-1, 1)
    j = torch.arange(seqlen_k, device=device).view(1, -1)

    def tpos(x: torch.Tensor) -> torch.Tensor:
        return torch.where(x < h, x, h + (x - h).remainder(g))

    ti, tj = tpos(i), tpos(j)
    if mask_convention == "meta_gr" and c > 0:  # window distances with the c contexts collapsed into one position
        ti, tj = (ti - c + 1).clamp(min=0), (tj - c + 1).clamp(min=0)
    base = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if wl >= 0:
        base = base & (tj >= ti - wl)
    if wr >= 0:
        base = base & (tj <= ti + wr)
    group = (j < h) | ((i >= h) & (torch.div(i - h, g, rounding_mode="floor") == torch.div(j - h, g, rounding_mode="floor")))
    mask = base & group
    if c > 0:
        mask = mask | ((i < c) & (j < h))
    return mask


def _host_list(x: Optional[torch.Tensor]) -> Optional[List[int]]:
    return None if x is None else [int(v) for v in x.detach().to("cpu", torch.int64).tolist()]


def resolve_lengths(
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
) -> List[Tuple[int, int, int, int]]:
    """Per-sequence (start_q, len_q, start_k, len_k) on the host, lengths after seqused_q/seqused_k.

    A sequence b occupies rows ``cu_seqlens[b] : cu_seqlens[b + 1]``; when ``seqused_*`` is given only
    the first ``seqused_*[b]`` of them are used (the rest of the q rows get output 0, of the k rows
    gradient 0). Synchronizes with the device (reads the tensors on the host).
    """
    cq, ck = _host_list(cu_seqlens_q), _host_list(cu_seqlens_k)
    uq, uk = _host_list(seqused_q), _host_list(seqused_k)
    out = []
    for b in range(len(cq) - 1):
        lq = cq[b + 1] - cq[b] if uq is None else uq[b]
        lk = ck[b + 1] - ck[b] if uk is None else uk[b]
        out.append((cq[b], lq, ck[b], lk))
    return out


def _compute_dtype(dtype: torch.dtype, upcast: bool) -> torch.dtype:
    if not upcast:
        return dtype
    return torch.float64 if dtype == torch.float64 else torch.float32


def _sequence_scores(q, k, v, rab, alpha, cdt, b, sq, lq, sk, lk, ctx_list, tgt_list, target_group_size,
                     window_size, mask_convention="nvidia"):
    """Per-sequence pieces shared by the forward and backward references.

    Returns qb (H, lq, D), kb (H, lk, D), vb (H, lk, D) in `cdt`, the pre-activation S = alpha * (q·k + rab)
    (H, lq, lk) and the boolean mask (lq, lk) of sequence `b`.
    """
    qb = q[sq : sq + lq].to(cdt).transpose(0, 1)
    kb = k[sk : sk + lk].to(cdt).transpose(0, 1)
    vb = v[sk : sk + lk].to(cdt).transpose(0, 1)
    s = torch.matmul(qb, kb.transpose(1, 2))
    if rab is not None:
        s = s + rab[b, :, lk - lq : lk, :lk].to(cdt)
    s = s * alpha
    mask = hstu_mask(
        lq,
        lk,
        num_context=0 if ctx_list is None else ctx_list[b],
        num_target=0 if tgt_list is None else tgt_list[b],
        target_group_size=target_group_size,
        window_size=(int(window_size[0]), int(window_size[1])),
        device=q.device,
        mask_convention=mask_convention,
    )
    return qb, kb, vb, s, mask


def _attend(q, k, v, rab, alpha, cdt, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, num_contexts, num_targets,
            target_group_size, window_size, mask_convention, p_of) -> torch.Tensor:
    """The forward of every sequence: out (total_q, H, D) in `cdt` = p_of(SiLU(S) masked) · V per sequence, where
    p_of is the caller's P as its P·V sees it (the 1 / scaling_seqlen factor and any rounding)."""
    ctx_list, tgt_list = _host_list(num_contexts), _host_list(num_targets)
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=cdt, device=q.device)
    zero = torch.zeros((), dtype=cdt, device=q.device)
    for b, (sq, lq, sk, lk) in enumerate(resolve_lengths(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)):
        if lq <= 0 or lk <= 0:
            continue
        _, _, vb, s, mask = _sequence_scores(q, k, v, rab, alpha, cdt, b, sq, lq, sk, lk, ctx_list, tgt_list,
                                             target_group_size, window_size, mask_convention)
        p = torch.where(mask, torch.nn.functional.silu(s), zero)
        out[sq : sq + lq] = torch.matmul(p_of(p), vb).transpose(0, 1)  # (H, lq, D) -> (lq, H, D)
    return out


def hstu_attn_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Sequence[int] = (-1, -1),
    alpha: float = 1.0,
    rab: Optional[torch.Tensor] = None,
    scaling_seqlen: float = -1,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    upcast: bool = True,
    mask_convention: str = "nvidia",
) -> torch.Tensor:
    """HSTU attention computed densely, one sequence at a time, with plain (differentiable) torch ops.

    Same arguments and semantics as `hstu_attn_varlen_func` (masks: see `hstu_mask`), any floating dtype
    and device, no validation beyond what the math needs. Reads cu_seqlens/seqused/num_* on the host.

    Numerics:
        upcast=True (default): S, SiLU and P·V in float32 (float64 for float64 inputs); for inputs of
            lower precision P / scaling_seqlen is rounded to the input dtype before P·V (as the kernels round
            P); the result is
            returned in the input dtype. Pass float32/float64 inputs to get a gold reference.
        upcast=False: every step in the input dtype (the "same-dtype PyTorch" result the error-relative
            test rule compares against).

    Args:
        q: (total_q, H, D). k, v: (total_k, H, D).
        cu_seqlens_q, cu_seqlens_k: (B + 1,) integer offsets.
        max_seqlen_q, max_seqlen_k: ints; max_seqlen_k sizes rab; max_seqlen_q is the default scaling.
        num_contexts, num_targets: optional (B,) integers. target_group_size: int >= 1.
        window_size: (left, right), -1 = unlimited; (-1, 0) is causal.
        alpha: float. rab: optional (B, 1 or H, max_seqlen_k, max_seqlen_k), indexed
            ``rab[b, h, i, j]`` with i, j key positions of sequence b (query row r uses i = r + Lk - Lq).
        scaling_seqlen: divisor of P·V; <= 0 means max_seqlen_q (at least 1).
        seqused_q, seqused_k: optional (B,) used lengths (see `resolve_lengths`).
        upcast: see Numerics.
        mask_convention: "nvidia" (default) or "meta_gr"; see `hstu_mask`.

    Returns:
        out: (total_q, H, D) in q.dtype; rows outside every used query range are 0.

    Example:
        >>> q = k = v = torch.randn(5, 2, 8, dtype=torch.float64)
        >>> cu = torch.tensor([0, 2, 5], dtype=torch.int32)
        >>> hstu_attn_reference(q, k, v, cu, cu, 3, 3, window_size=(-1, 0)).shape
        torch.Size([5, 2, 8])
    """
    cdt = _compute_dtype(q.dtype, upcast)
    round_p = upcast and q.dtype in (torch.float16, torch.bfloat16)
    if scaling_seqlen is None or scaling_seqlen <= 0:
        scaling_seqlen = max(int(max_seqlen_q), 1)

    def p_of(p):
        # Scale P before P·V so that a same-dtype (upcast=False) float16 run does not overflow.
        p = p / scaling_seqlen
        return p.to(q.dtype).to(cdt) if round_p else p

    out = _attend(q, k, v, rab, alpha, cdt, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, num_contexts,
                  num_targets, target_group_size, window_size, mask_convention, p_of)
    if torch.is_grad_enabled() and not out.requires_grad:
        # No used row touched the inputs (all sequences empty or unused): still hand autograd a graph so
        # gradients come back as zeros, like the CUDA op's, instead of an error. Empty sums are exact zeros.
        links = [t[:0].sum().to(cdt) for t in (q, k, v, rab) if t is not None and t.requires_grad]
        if links:
            out = out + sum(links)
    return out.to(q.dtype)


def hstu_attn_reference_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rab: Optional[torch.Tensor],
    has_drab: bool,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    num_contexts: Optional[torch.Tensor] = None,
    num_targets: Optional[torch.Tensor] = None,
    target_group_size: int = 1,
    window_size: Sequence[int] = (-1, -1),
    alpha: float = 1.0,
    scaling_seqlen: float = -1,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    mask_convention: str = "nvidia",
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """Analytic gradients (dq, dk, dv, drab or None) of `hstu_attn_reference`, in float32 (float64 for
    float64 inputs), returned in the input dtypes. No autograd (usable inside a dispatcher kernel).

    With N = scaling_seqlen, sigma = sigmoid(S), M the mask, per sequence and head::

        dV = P^T dO / N          dP = dO V^T / N          dS = M * dP * sigma * (1 + S * (1 - sigma))
        dQ = alpha * dS K        dK = alpha * dS^T Q      drab[b, h, i, j] = alpha * dS[r, j]

    drab has rab's shape (summed over heads for a 1-head rab); entries no query reads are 0.
    """
    cdt = _compute_dtype(q.dtype, True)
    if scaling_seqlen is None or scaling_seqlen <= 0:
        scaling_seqlen = max(int(max_seqlen_q), 1)
    ctx_list = _host_list(num_contexts)
    tgt_list = _host_list(num_targets)
    dq = torch.zeros(q.shape, dtype=cdt, device=q.device)
    dk = torch.zeros(k.shape, dtype=cdt, device=q.device)
    dv = torch.zeros(v.shape, dtype=cdt, device=q.device)
    want_drab = has_drab and rab is not None
    drab = torch.zeros(rab.shape, dtype=cdt, device=q.device) if want_drab else None
    for b, (sq, lq, sk, lk) in enumerate(resolve_lengths(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k)):
        if lq <= 0 or lk <= 0:
            continue
        qb, kb, vb, s, mask = _sequence_scores(q, k, v, rab, alpha, cdt, b, sq, lq, sk, lk, ctx_list, tgt_list,
                                               target_group_size, window_size, mask_convention)
        dob = dout[sq : sq + lq].to(cdt).transpose(0, 1)  # (H, lq, D)
        zero = torch.zeros((), dtype=cdt, device=q.device)
        sig = torch.sigmoid(s)
        p = torch.where(mask, s * sig, zero)
        dv[sk : sk + lk] = (torch.matmul(p.transpose(1, 2), dob) / scaling_seqlen).transpose(0, 1)
        dp = torch.matmul(dob, vb.transpose(1, 2)) / scaling_seqlen
        ds = torch.where(mask, dp * sig * (1 + s * (1 - sig)), zero) * alpha
        dq[sq : sq + lq] = torch.matmul(ds, kb).transpose(0, 1)
        dk[sk : sk + lk] = torch.matmul(ds.transpose(1, 2), qb).transpose(0, 1)
        if want_drab:
            drab[b, :, lk - lq : lk, :lk] = ds.sum(0, keepdim=True) if rab.shape[1] == 1 else ds
    return (dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), drab.to(rab.dtype) if want_drab else None)
