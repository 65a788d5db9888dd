"""Device-side input checks of dynamicemb: the error channel, its codes, and the public switches.

The embedding modules check host values (shapes, dtypes, devices) eagerly. On CUDA, device values (ids, offsets,
lengths, per-sample weights) are checked by a kernel on the stream (dynamicemb/csrc/lookup/validate_kernels.cu): a
violation makes that step treat its batch as empty (nothing inserted or updated) and is written into a pinned
error record that the next call of any dynamicemb module reads without a synchronization and raises as
``DeviceInputError``. ``check_errors()`` synchronizes and raises at once; in strict mode every call does.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Iterator

import torch

from ._device_errors import DeviceErrorChannel, DeviceInputError

__all__ = ["DeviceInputError", "check_errors", "strict_checks", "set_strict_checks"]


def _rid(v: int) -> int:
    return v & ((1 << 64) - 1)


#: Argument and rule codes of the error record: dynamicemb/csrc/lookup/validate_types.h (CheckArg, CheckRule);
#: tests/dynamicemb/test_embedding_cpu.py compares the two.
ERR_ARGS = {1: "ids", 2: "offsets", 3: "lengths", 4: "per_sample_weights", 5: "gradient", 6: "hbm_budget_bytes",
            7: "max_capacity"}
ERR_RULES = {
    1: lambda a, i, v, b: f"expected ids >= 0, got {a}[{i}] = {v}",
    2: lambda a, i, v, b: f"expected no reserved id (2**63 + 0, 1, 2), got {a}[{i}] = {_rid(v)}",
    3: lambda a, i, v, b: f"expected offsets[0] == 0, got {v}",
    4: lambda a, i, v, b: f"expected non-decreasing values, got offsets[{i}]={v} > offsets[{i + 1}]={b}",
    5: lambda a, i, v, b: f"expected offsets[-1] == ids.numel() == {b}, got {v}",
    6: lambda a, i, v, b: f"expected values >= 0, got lengths[{i}] = {v}",
    7: lambda a, i, v, b: f"expected sum(lengths) == ids.numel() == {b}, got {v}",
    8: lambda a, i, v, b: f"expected lengths == offsets[1:] - offsets[:-1], got lengths[{i}] = {v} != {b}",
    9: lambda a, i, v, b: f"expected finite values, got {a}[{i}] = {v}",
    10: lambda a, i, v, b: (f"expected finite summed row gradients (optimizer nonfinite='raise'), got {v} rows or "
                            f"steps skipped for a NaN/inf ({b} so far)"),
    # a caching table's device staging (dynamicemb/_device_stage.py): index = table, value = id, bound = slots
    11: lambda a, i, v, b: (f"expected the HBM cache of table {i} to hold the step's ids and those of steps in flight,"
                            f" got id {v} with no free or evictable slot in its bucket of {b} (that step was skipped:"
                            f" nothing inserted or updated); raise hbm_budget_bytes"),
    12: lambda a, i, v, b: (f"expected room in the uva store of table {i} for the rows its cache evicts, got a full "
                            f"store bucket of {b} slots while staging id {v} (that step was skipped: nothing inserted"
                            f" or updated, nothing lost); raise max_capacity"),
}
ERR_ARG_CODES = {v: k for k, v in ERR_ARGS.items()}
RULE_NONFINITE_GRAD = 10
_FLOAT_ARGS = (4,)

CHANNEL = DeviceErrorChannel("dynamicemb", torch.ops.dynamicemb, ERR_ARGS, ERR_RULES, _FLOAT_ARGS)


def host_error(arg: int, rule: int, index: int, value, bound) -> DeviceInputError:
    """The error a device check would report, for the host paths (CPU modules) that raise it at once."""
    name = ERR_ARGS[arg]
    if arg in _FLOAT_ARGS and isinstance(value, int):
        value = struct.unpack("<d", struct.pack("<q", value))[0]
    return DeviceInputError(f"dynamicemb: {name}: {ERR_RULES[rule](name, index, value, bound)}", "dynamicemb",
                            name, index, value, bound, -1)


def check_errors(synchronize: bool = True) -> None:
    """Raises the first error found by the device-side checks of earlier dynamicemb calls, if any.

    Args:
        synchronize: wait for the work queued on every CUDA device first (default), so that every call made so far
            has been checked; ``False`` only reads what has landed already (never blocks).

    Raises:
        DeviceInputError: (a ValueError) naming the argument, the element, the expected and the actual value.

    Example:
        >>> out = emb(ids, offsets)           # the checks run on the device; no synchronization
        >>> dynamicemb.check_errors()         # synchronizes; raises if ids/offsets/weights were invalid
    """
    CHANNEL.check(synchronize)


def set_strict_checks(enabled: bool) -> bool:
    """Turns strict mode on or off for the process; returns the previous setting.

    In strict mode every dynamicemb module call on CUDA synchronizes its stream before it returns and raises what
    its device-side checks found (debugging: the error points at the call that caused it). Off by default.

    Example:
        >>> dynamicemb.set_strict_checks(True)   # every call now raises its own input errors (and syncs)
    """
    old = CHANNEL.strict
    CHANNEL.strict = bool(enabled)
    return old


@contextlib.contextmanager
def strict_checks(enabled: bool = True) -> Iterator[None]:
    """Context manager form of ``set_strict_checks``: strict mode inside the block, the previous setting after.

    Example:
        >>> with dynamicemb.strict_checks():
        ...     emb(ids, bad_offsets)   # raises DeviceInputError here, not at the next call
    """
    with CHANNEL.strict_mode(enabled):
        yield
