"""Checks of the values that live in an HSTU call's int32 tensors, on the device and on the host.

On CUDA the op checks them on the device (hstu/csrc/common/hstu_validate.cu: no host synchronization) and records the first
violation in the package's device error record; `DeviceErrorChannel` (``_device_errors.py``) raises it as a
`DeviceInputError` at the next call, at `check_errors()`, or at once in strict mode. On CPU, and on CUDA with
``check_values=True``, `check_values_host` reads the values and raises at once. Both find the same first violation
and word it the same way (`RULES`).
"""

from __future__ import annotations

import contextlib
from typing import List, Optional, Sequence, Tuple

import torch

from . import _load
from ._device_errors import DeviceErrorChannel, DeviceInputError

__all__ = ["ARGS", "FLOAT_ARGS", "RULES", "DeviceInputError", "channel", "check_errors", "check_values_host", "find_violation",
           "set_strict_checks", "strict_checks"]

# Argument and rule codes: hstu/csrc/common/hstu_validate.h (HstuArg, HstuRule); tests/hstu/test_checks.py compares them.
(ARG_CU_SEQLENS_Q, ARG_CU_SEQLENS_K, ARG_SEQUSED_Q, ARG_SEQUSED_K, ARG_NUM_TARGETS, ARG_NUM_CONTEXTS, ARG_Q_DESCALE,
 ARG_K_DESCALE, ARG_V_DESCALE) = range(1, 10)
ARGS = {
    ARG_CU_SEQLENS_Q: "cu_seqlens_q",
    ARG_CU_SEQLENS_K: "cu_seqlens_k",
    ARG_SEQUSED_Q: "seqused_q",
    ARG_SEQUSED_K: "seqused_k",
    ARG_NUM_TARGETS: "num_targets",
    ARG_NUM_CONTEXTS: "num_contexts",
    ARG_Q_DESCALE: "q_descale",  # the FP8 descale factors (hstu/_fp8.py); their records hold float values
    ARG_K_DESCALE: "k_descale",
    ARG_V_DESCALE: "v_descale",
}
FLOAT_ARGS = (ARG_Q_DESCALE, ARG_K_DESCALE, ARG_V_DESCALE)
(RULE_OFFSET_NEGATIVE, RULE_OFFSET_DECREASING, RULE_OFFSET_PAST_END, RULE_SEQ_TOO_LONG, RULE_SEQUSED, RULE_DELTA_Q,
 RULE_TARGETS, RULE_CONTEXTS, RULE_SCALE) = range(1, 10)

# rule -> (arg name, index, value, bound) -> "expected ..., got ..." (the record's fields: hstu_validate.h).
RULES = {
    RULE_OFFSET_NEGATIVE: lambda a, i, v, b: f"expected non-negative offsets, got {a}[0] = {v}",
    RULE_OFFSET_DECREASING: lambda a, i, v, b: f"expected non-decreasing offsets, got {a}[{i - 1}] = {b} > "
                                               f"{a}[{i}] = {v}",
    RULE_OFFSET_PAST_END: lambda a, i, v, b: f"expected offsets <= {b} (tokens in {a[-1]}), got {a}[{i}] = {v}",
    RULE_SEQ_TOO_LONG: lambda a, i, v, b: f"expected sequence lengths <= max_seqlen_{a[-1]} ({b}), got length {v} "
                                          f"for sequence {i}",
    RULE_SEQUSED: lambda a, i, v, b: f"expected 0 <= {a}[{i}] <= {b} (its cu_seqlens_{a[-1]} length), got {v}",
    RULE_DELTA_Q: lambda a, i, v, b: f"expected query length <= key length ({b}) for sequence {i} (delta-q), got {v}",
    RULE_TARGETS: lambda a, i, v, b: f"expected 0 <= {a}[{i}] <= {b} (the key length of sequence {i}), got {v}",
    RULE_CONTEXTS: lambda a, i, v, b: f"expected 0 <= {a}[{i}] <= {b} (key length minus targets of sequence {i}), "
                                      f"got {v}",
    RULE_SCALE: lambda a, i, v, b: f"expected finite descale factors > 0, got {a}[{i}] = {v} (flat index)",
}


class _NoLibraryOps:
    """Stands in for the op library's two error ops in a source checkout without `_C.so` (CPU only)."""

    @staticmethod
    def device_error_block() -> int:
        return 0

    @staticmethod
    def clear_device_error(device: int) -> None:
        return None


def _error_ops():
    ops = torch.ops.hstu_attn
    if _load.load_library() and hasattr(ops, "device_error_block") and hasattr(ops, "clear_device_error"):
        return ops
    return _NoLibraryOps()


channel = DeviceErrorChannel("hstu_attn", _error_ops(), ARGS, RULES, float_args=FLOAT_ARGS)


# ------------------------------------------------------------------------------------------------------ host check
def find_violation(cq: Sequence[int], ck: Sequence[int], total_q: int, total_k: int, max_q: int, max_k: int,
                   nc: Optional[Sequence[int]], nt: Optional[Sequence[int]], uq: Optional[Sequence[int]],
                   uk: Optional[Sequence[int]]) -> Optional[Tuple[int, int, int, int, int]]:
    """The first violation as (arg, rule, index, value, bound), in the device check's order, or None."""
    batch = len(cq) - 1
    for arg, cu, total, mx in ((ARG_CU_SEQLENS_Q, cq, total_q, max_q), (ARG_CU_SEQLENS_K, ck, total_k, max_k)):
        if cu[0] < 0:
            return arg, RULE_OFFSET_NEGATIVE, 0, cu[0], 0
        for i in range(1, batch + 1):
            if cu[i] < cu[i - 1]:
                return arg, RULE_OFFSET_DECREASING, i, cu[i], cu[i - 1]
        if cu[batch] > total:
            return arg, RULE_OFFSET_PAST_END, batch, cu[batch], total
        for b in range(batch):
            if cu[b + 1] - cu[b] > mx:
                return arg, RULE_SEQ_TOO_LONG, b, cu[b + 1] - cu[b], mx
    for b in range(batch):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        if uq is not None:
            if not 0 <= uq[b] <= lq:
                return ARG_SEQUSED_Q, RULE_SEQUSED, b, uq[b], lq
            lq = uq[b]
        if uk is not None:
            if not 0 <= uk[b] <= lk:
                return ARG_SEQUSED_K, RULE_SEQUSED, b, uk[b], lk
            lk = uk[b]
        if lq > lk:
            return ARG_CU_SEQLENS_Q, RULE_DELTA_Q, b, lq, lk
        t = 0
        if nt is not None:
            t = nt[b]
            if not 0 <= t <= lk:
                return ARG_NUM_TARGETS, RULE_TARGETS, b, t, lk
        if nc is not None and not 0 <= nc[b] <= lk - t:
            return ARG_NUM_CONTEXTS, RULE_CONTEXTS, b, nc[b], lk - t
    return None


def violation_message(arg: int, rule: int, index: int, value: int, bound: int) -> str:
    """The error message of a violation: "hstu_attn: <arg>: expected ..., got ..."."""
    name = ARGS[arg]
    return f"hstu_attn: {name}: {RULES[rule](name, index, value, bound)}"


def check_values_host(q: torch.Tensor, k: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                      max_seqlen_q: int, max_seqlen_k: int, num_contexts, num_targets, seqused_q, seqused_k) -> None:
    """Reads the int32 vectors (CUDA: one copy to the host, a synchronization) and raises ValueError naming the
    first violation."""
    tensors = [cu_seqlens_q, cu_seqlens_k, num_contexts, num_targets, seqused_q, seqused_k]
    if cu_seqlens_q.is_cuda:
        present = [t for t in tensors if t is not None]
        flat = torch.cat(present).cpu().tolist()
        lists: List[Optional[list]] = []
        pos = 0
        for t in tensors:
            if t is None:
                lists.append(None)
            else:
                lists.append(flat[pos:pos + t.shape[0]])
                pos += t.shape[0]
    else:
        lists = [None if t is None else t.tolist() for t in tensors]
    cq, ck, nc, nt, uq, uk = lists
    found = find_violation(cq, ck, q.shape[0], k.shape[0], max_seqlen_q, max_seqlen_k, nc, nt, uq, uk)
    if found is not None:
        raise ValueError(violation_message(*found))


# ------------------------------------------------------------------------------------------------------ public API
def check_errors() -> None:
    """Waits for the queued CUDA work, then raises the first error that the device-side checks recorded.

    The CUDA ops check the values of cu_seqlens_q/k, seqused_q/k, num_targets and num_contexts on the device,
    without a host synchronization; a violation is recorded and raised at the start of the next hstu_attn call.
    Call this to learn at once (e.g. after a CUDA-graph replay or a torch.compile'd step). Raising clears the record.

    Raises:
        DeviceInputError: (a ValueError) naming the argument, the sequence or element, the expected and the actual
            value, e.g. "hstu_attn: cu_seqlens_q: expected non-decreasing offsets, got cu_seqlens_q[1] = 5 >
            cu_seqlens_q[2] = 3 (found on cuda:0 ...)". The outputs of the call that broke the rule hold NaN.

    Example:
        >>> import hstu_attn
        >>> hstu_attn.check_errors()  # nothing recorded: returns None
    """
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        channel.ensure_block()  # a process that only ran compiled or captured calls learns the block's address here
    channel.check()


def set_strict_checks(enabled: bool) -> None:
    """Turns strict mode on or off for every thread: each CUDA call then synchronizes its stream and raises its own
    device-side error before it returns (for debugging; it costs a synchronization per call).

    Args:
        enabled: True for strict mode, False for the default (errors raised at the next call or `check_errors()`).

    Example:
        >>> import hstu_attn
        >>> hstu_attn.set_strict_checks(True)
        >>> hstu_attn.set_strict_checks(False)
    """
    channel.strict = bool(enabled)


def strict_checks(enabled: bool = True) -> contextlib.AbstractContextManager:
    """Context manager: strict mode (see `set_strict_checks`) inside the block, the previous mode after it.

    Args:
        enabled: the mode inside the block (default True).

    Returns:
        A context manager.

    Raises:
        DeviceInputError: from a call inside the block whose values broke a rule (at that call).

    Example:
        >>> import hstu_attn
        >>> with hstu_attn.strict_checks():
        ...     pass  # calls here raise their own device-side errors before they return
    """
    return channel.strict_mode(enabled)
