"""Errors found on the device, raised on the host without a synchronization (shared by both packages).

Kernels that check values living on the device (offsets, lengths, ids, weights) write the first violation into a
pinned, device-mapped block (common/device_errors.cuh). The package reads that block with a plain memory load at
the start of its next call and raises `DeviceInputError` there; `check_errors()` synchronizes first and raises at
once; in strict mode every call synchronizes and checks before it returns (debugging).

Each package links this file as its `_device_errors.py` and builds one `DeviceErrorChannel` with its own tables.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
from typing import Callable, Dict, Iterator, Optional

import torch

__all__ = ["DeviceInputError", "DeviceErrorChannel"]

MAX_DEVICES = 64  # accel::kMaxErrorDevices
_HEADER_BYTES = 8  # DeviceErrorBlock::pending + pad
_RECORD = struct.Struct("<iiqqq")  # DeviceErrorRecord: arg, rule, index, value, bound
_BLOCK_BYTES = _HEADER_BYTES + _RECORD.size * MAX_DEVICES


class DeviceInputError(ValueError):
    """A value on the device broke an op's contract (found by the device-side checks of an earlier call).

    Attributes:
        package: "hstu_attn" or "dynamicemb".
        arg: the argument's name (e.g. "cu_seqlens_q", "ids").
        index: the element of the argument (a sequence, an id's position).
        value: the offending value.
        bound: the limit it broke (or the neighbouring value), as the message says.
        device: the CUDA device index of the call.
    """

    def __init__(self, message: str, package: str, arg: str, index: int, value, bound, device: int):
        super().__init__(message)
        self.package, self.arg, self.index, self.value, self.bound, self.device = (
            package, arg, index, value, bound, device)


class DeviceErrorChannel:
    """One package's view of its device error block.

    Args:
        package: the package name (messages start with it).
        ops: the package's ``torch.ops`` namespace; it must have ``device_error_block() -> int`` (the block's
            address, 0 if it could not be allocated) and ``clear_device_error(int device) -> ()``.
        args: argument code -> argument name.
        rules: rule code -> a function ``(arg, index, value, bound) -> "expected ..., got ..."``.
        float_args: argument codes whose ``value`` holds a double's bits.
    """

    def __init__(self, package: str, ops, args: Dict[int, str], rules: Dict[int, Callable[..., str]],
                 float_args=()):
        self.package = package
        self._ops = ops
        self._args = dict(args)
        self._rules = dict(rules)
        self._float_args = frozenset(float_args)
        self._pending: Optional[ctypes.c_int32] = None  # the block's `pending` word, once allocated
        self._base = 0
        self._lock = threading.Lock()
        self.strict = False

    # ------------------------------------------------------------------------------------------ the hot path
    def raise_pending(self) -> None:
        """Raises the recorded error, if any (a memory load; never synchronizes). Called first by every op."""
        p = self._pending
        if p is not None and p.value != 0:
            self._raise()

    def ensure_block(self) -> None:
        """Allocates the block before the first CUDA launch (once per process). Not while the current stream is
        being captured into a CUDA graph (the allocation would invalidate the capture): a later call does it."""
        if self._pending is None:
            if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
                return
            with self._lock:
                if self._pending is None:
                    base = int(self._ops.device_error_block())
                    if base:
                        self._base = base
                        self._pending = ctypes.c_int32.from_address(base)

    def after_call(self, device: torch.device) -> None:
        """In strict mode: synchronize the call's stream and raise what it found."""
        if self.strict and device.type == "cuda" and not torch.cuda.is_current_stream_capturing():
            torch.cuda.current_stream(device).synchronize()
            self.raise_pending()

    # ------------------------------------------------------------------------------------------ the public API
    def check(self, synchronize: bool = True) -> None:
        """Waits for the work queued on every CUDA device (unless ``synchronize=False``), then raises the first
        recorded device-side error, if any."""
        if synchronize and torch.cuda.is_available() and torch.cuda.is_initialized():
            for d in range(torch.cuda.device_count()):
                torch.cuda.synchronize(d)
        self.raise_pending()

    @contextlib.contextmanager
    def strict_mode(self, enabled: bool = True) -> Iterator[None]:
        old = self.strict
        self.strict = bool(enabled)
        try:
            yield
        finally:
            self.strict = old

    # ------------------------------------------------------------------------------------------ internals
    def _read(self, device: int):
        raw = ctypes.string_at(self._base + _HEADER_BYTES + device * _RECORD.size, _RECORD.size)
        return _RECORD.unpack(raw)

    def _clear(self, device: int) -> None:
        ctypes.memset(self._base + _HEADER_BYTES + device * _RECORD.size, 0, _RECORD.size)
        self._ops.clear_device_error(device)  # resets the device's claim word, in stream order

    def _raise(self) -> None:
        with self._lock:
            dev = self._pending.value - 1
            first = None
            for d in [dev] + [i for i in range(MAX_DEVICES) if i != dev]:
                if not 0 <= d < MAX_DEVICES:
                    continue
                rec = self._read(d)
                if rec[0] != 0:
                    if first is None:
                        first = (d, rec)
                    self._clear(d)
            self._pending.value = 0
        if first is None:
            return
        d, (arg, rule, index, value, bound) = first
        name = self._args.get(arg, f"argument #{arg}")
        if arg in self._float_args:
            value = struct.unpack("<d", struct.pack("<q", value))[0]
        what = self._rules.get(rule)
        detail = what(name, index, value, bound) if what else f"rule {rule} broken at {index}: {value} ({bound})"
        raise DeviceInputError(
            f"{self.package}: {name}: {detail} (found on cuda:{d} by the device-side checks of an earlier call; "
            f"that call's outputs are not valid)", self.package, name, index, value, bound, d)
