"""The training step's autograd function of BatchedDynamicEmbeddingTables and its host bookkeeping: graph-capture
state, in-flight step counting, and non-blocking host mirrors of small device tensors."""

from __future__ import annotations

import contextlib
import threading
from typing import List, Optional

import torch


def _capturing() -> bool:
    """A CUDA graph is being captured on the current stream (never true while torch.compile traces: the query
    returns a bool dynamo cannot trace, and a compiled step skips the eager bookkeeping anyway)."""
    if torch.compiler.is_compiling():
        return False
    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()  # (no CUDA yet: no capture)


_compiling = torch.compiler.is_compiling


class _HostMirror:
    """Latest value of a small device tensor on the host without blocking (pinned async copy + event)."""

    def __init__(self, n: int):
        self._n = n
        self._host = None
        self._event = None
        self.value: Optional[List[int]] = None

    def __getstate__(self):
        # copies (deepcopy, pickle) keep the last value read; a copy in flight (a CUDA event, a pinned buffer of
        # this process) is not theirs
        return {"_n": self._n, "_host": None, "_event": None, "value": self.value, "_pending": False}

    def ready(self) -> bool:
        """Whether a push would start a copy now (none in flight), so the caller can skip building its tensor."""
        return self._event is None or not getattr(self, "_pending", False) or self._event.query()

    def push(self, t: torch.Tensor):
        if t.device.type != "cuda":
            self.value = [int(x) for x in t.tolist()]
            return
        if self._event is not None and not self._event.query():
            return  # the previous copy is still in flight
        if self._host is None:
            self._host = torch.empty(self._n, dtype=t.dtype, pin_memory=True)
            self._event = torch.cuda.Event()
        self.poll()
        self._host.copy_(t, non_blocking=True)
        self._event.record()
        self._pending = True

    def reset(self, value: List[int]):
        """Sets the value (after a load); a copy still in flight holds the old state and is dropped."""
        self.value = list(value)
        self._pending = False

    def poll(self) -> Optional[List[int]]:
        if self._event is not None and getattr(self, "_pending", False) and self._event.query():
            self.value = [int(x) for x in self._host.tolist()]
            self._pending = False
        return self.value


_SLAB_LOCK = threading.Lock()
_SLABS: list = []  # [pinned int64 slab, next free entry]: never freed (an op's copy may still be in flight)


def _pinned_slice(n: int) -> torch.Tensor:
    """(n,) int64 zeros in pinned host memory for the life of the process: an op copies into it without the host
    waiting, so it must never be returned to torch's pinned pool and reused while a copy is in flight. Slices of
    64 KB slabs (a few bytes per module)."""
    with _SLAB_LOCK:
        if not _SLABS or _SLABS[-1][1] + n > _SLABS[-1][0].numel():
            pin = torch.cuda.is_available()  # (a CPU-only process: plain memory; no op copies into it there)
            _SLABS.append([torch.zeros(max(8192, n), dtype=torch.int64, pin_memory=pin), 0])
        slab = _SLABS[-1]
        out = slab[0][slab[1]:slab[1] + n]
        slab[1] += n
        return out


class _PinnedMirror:
    """Latest value of a small int64 device tensor that an op copies into pinned host memory itself (lookup_step's
    ``refused_host``: the refusals after its insert): the host reads it with no copy, event or query of its own.
    The value lags the queued steps; between two reads it only grows (counters)."""

    def __init__(self, n: int):
        self._n = n
        self._host = None
        self._addr = 0

    def __getstate__(self):
        return {"_n": self._n, "_host": None, "_addr": 0}  # a copy gets its own buffer on its first step

    def address(self) -> int:
        """The pinned buffer's address for the op (allocated on first use)."""
        if self._host is None:
            self._host = _pinned_slice(self._n)
            self._addr = self._host.data_ptr()
        return self._addr

    def poll(self) -> Optional[List[int]]:
        return None if self._host is None else self._host.tolist()

    def reset(self, value: List[int]) -> None:
        """Sets the value (after a load, which synchronized: no copy is in flight)."""
        if self._host is not None:
            self._host.copy_(torch.tensor(value, dtype=torch.int64))


class _LookupFunction(torch.autograd.Function):
    """Forward: pooled/sequence embeddings. Backward: optimizer update of the table rows; returns no table grad."""

    @staticmethod
    def forward(ctx, anchor, module, ids, offsets, psw, skip, checks):
        # Under the module's step lock (threads): the insert and the gather see one table layout; the step
        # counts as in flight until its backward (or its graph is freed), and no table grows meanwhile. A step
        # that torch.compile traces skips this host bookkeeping (one thread drives a compiled step).
        compiling = torch.compiler.is_compiling()
        with contextlib.nullcontext() if compiling else module._step_lock:
            if not compiling and not module.use_kernels and not _capturing():
                module._check_groups()  # another thread may have grown a table since forward() looked
            out, saved = module._forward_impl(ids, offsets, psw, train=True, backward=True, skip=skip, checks=checks)
            ctx.inflight = None if compiling else _InFlight(module)
        ctx.module = module
        ctx.psw_requires_grad = psw is not None and psw.requires_grad
        if not compiling:  # eager: the step's tensors stay on ctx as they are (no packing on the hot path)
            ctx.saved = saved
            return out
        # the step's tensors through save_for_backward (torch.compile traces it; a dict on ctx would escape the
        # traced region), the rest of `saved` as its structure
        keys = sorted(saved)
        flat, spec = [], []
        for k in keys:
            v = saved[k]
            if isinstance(v, list):  # per_group: [(gidx, valid), ...]
                spec.append((k, "pairs", len(v)))
                for a, b in v:
                    flat += [a, b]
            elif isinstance(v, torch.Tensor):
                spec.append((k, "tensor", None))
                flat.append(v)
            else:
                spec.append((k, "value", v))
        ctx.save_for_backward(*flat)
        ctx.spec = spec
        ctx.saved = None
        # + the empty anchor's sum (0.0): a new tensor. Torch 2.11 gives a traced Function a zero output gradient
        # when its output is a tensor its forward also made under another name (`.to(output_dtype)` of the same
        # dtype returns `out` itself): the backward (the table update) then ran in the forward with zeros and
        # never with the loss's gradient (docs/dynamicemb.md, "torch.compile")
        return out + anchor.sum()

    @staticmethod
    def backward(ctx, grad_out):
        saved = ctx.saved
        if saved is None:  # a traced step: unpack save_for_backward
            flat = list(ctx.saved_tensors)
            saved, i = {}, 0
            for k, kind, v in ctx.spec:
                if kind == "pairs":
                    saved[k] = [(flat[i + 2 * j], flat[i + 2 * j + 1]) for j in range(v)]
                    i += 2 * v
                elif kind == "tensor":
                    saved[k] = flat[i]
                    i += 1
                else:
                    saved[k] = v
            grad_psw = ctx.module._backward_impl(grad_out, saved, ctx.psw_requires_grad)
        else:
            with ctx.module._step_lock:
                grad_psw = ctx.module._backward_impl(grad_out, saved, ctx.psw_requires_grad)
                ctx.inflight.done()
        pins = saved.get("pins")
        if pins is not None:  # unpinned now, not when the last reference to the step's tensors goes
            pins.release()
        if ctx.inflight is not None:
            ctx.saved = None  # releases the step's tensors and host values now
        return None, None, None, None, grad_psw, None, None


class _InFlight:
    """Counts a training step of a thread between its forward and its backward (or until autograd frees its
    graph); growth waits for the other threads' steps (``_before_train_step``)."""

    def __init__(self, module):
        self._module = module
        self._thread = threading.get_ident()
        module._inflight[self._thread] = module._inflight.get(self._thread, 0) + 1

    def done(self):
        m = self._module
        if m is not None:
            with m._step_cond:
                m._inflight[self._thread] -= 1
                if not m._inflight[self._thread]:
                    del m._inflight[self._thread]
                self._module = None
                m._step_cond.notify_all()

    def __del__(self):
        self.done()
