"""The fused-kernel step of BatchedDynamicEmbeddingTables (ops of dynamicemb/csrc/ops/lookup_ops.cc): the codes and
the TableMeta layout the ops take, their fake kernels for torch.compile, and the module's methods that call them
(``_KernelStep``, a mixin of the module class in _batched.py)."""

from __future__ import annotations

import functools
import operator
import struct

import torch

from ._batched_step import _capturing, _compiling
from ._checks import CHANNEL
from ._load import load_library
from ._optimizers import NONFINITE_POLICIES, SGD, Adagrad, Adam, EmbOptimizer, RowWiseAdagrad
from ._table import ScoredHashTable, state_epoch

# ---------------------------------------------------------------------- fused CUDA kernels (csrc/lookup)
# The codes the lookup ops take. The C++ side defines each once (lookup_types.h, lookup_ops.cc StepFlags) and
# lists them by name through op lookup_contract; _check_contract compares these tables with it when the library
# loads (and a CPU test does too), so the two sides cannot drift. The torch path needs them without the library.
_VALUE_KIND = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
_POOL_CODE = {"sum": 0, "mean": 1, "none": 2}
_NONFINITE_CODE = {name: i for i, name in enumerate(NONFINITE_POLICIES)}  # lookup_types.h NonFinite
_OPT_CODE = {"sgd": 0, "adagrad": 1, "rowwise_adagrad": 2, "adam": 3}  # lookup_types.h OptKind
_INIT_CODE = {"constant": 0, "uniform": 1, "normal": 2, "truncated_normal": 3}
_META_FIELDS = 34  # TableMeta in dynamicemb/csrc/lookup/lookup_types.h: 34 fields of 8 bytes (packed by name)

# lookup_step / lookup_backward flags (csrc/ops/lookup_ops.cc StepFlags)
_STEP_TRAIN, _STEP_VALIDATE, _STEP_LENGTHS_ONLY, _STEP_CSR, _STEP_OVERLAP, _STEP_VEC4 = 1, 2, 4, 8, 16, 32
_STEP_PSW_GRAD, _STEP_DIRECT, _STEP_AGGREGATE, _STEP_DECOUPLED_WD, _STEP_HOST_ROWS = 64, 128, 256, 512, 1024
_STEP_BUMP, _STEP_STATE_BF16 = 2048, 4096
_STEP_CODE = {"train": _STEP_TRAIN, "validate": _STEP_VALIDATE, "lengths_only": _STEP_LENGTHS_ONLY,
              "csr": _STEP_CSR, "overlap": _STEP_OVERLAP, "vec4": _STEP_VEC4, "psw_grad": _STEP_PSW_GRAD,
              "direct": _STEP_DIRECT, "aggregate": _STEP_AGGREGATE, "decoupled_wd": _STEP_DECOUPLED_WD,
              "host_rows": _STEP_HOST_ROWS, "bump_step": _STEP_BUMP, "state_bf16": _STEP_STATE_BF16}
_HOST_PITCH_SHIFT = 32  # lookup_backward's flags: the host rows' scratch pitch in bytes from this bit (lookup_ops.cc)


@functools.lru_cache(maxsize=1)
def _contract() -> dict:
    """{group: {name: value}} from op lookup_contract (read once): "meta" maps TableMeta's fields, in order, to
    their struct kind ('q' int64, 'd' double); the other groups map names to integer codes."""
    groups = {}
    for line in str(torch.ops.dynamicemb.lookup_contract()).splitlines():
        group, name, value = line.split()
        groups.setdefault(group, {})[name] = value if group == "meta" else int(value)
    return groups


def _check_contract() -> None:
    """Raises RuntimeError when a code table of this module differs from the ops' (lookup_contract)."""
    c = _contract()
    ours = {"step": _STEP_CODE, "opt": _OPT_CODE, "nonfinite": _NONFINITE_CODE, "pool": _POOL_CODE,
            "value": {str(dt).rsplit(".", 1)[-1]: v for dt, v in _VALUE_KIND.items()}}
    bad = [f"{g}: python {ours[g]} != ops {c.get(g)}" for g in ours if ours[g] != c.get(g)]
    if len(c.get("meta", {})) != _META_FIELDS:
        bad.append(f"meta: python expects {_META_FIELDS} fields, ops list {len(c.get('meta', {}))}")
    if bad:
        raise RuntimeError("dynamicemb: the lookup ops' codes differ from dynamicemb/_batched_kernels.py (a stale _C.so?): "
                           + "; ".join(bad))


def _pack_meta(fields: dict) -> bytes:
    """One table's TableMeta: `fields` (name -> value) packed in the ops' field order and kinds (lookup_contract)."""
    layout = _contract()["meta"]
    if set(fields) != set(layout):
        raise RuntimeError(f"TableMeta fields: missing {sorted(set(layout) - set(fields))}, "
                           f"unknown {sorted(set(fields) - set(layout))}")
    return struct.pack("<" + "".join(layout.values()), *(fields[n] for n in layout))
_VALIDATE_SLOTS = 1024  # csrc/lookup/validate_types.h kValidateSlots (the step workspace's header holds them)
# lookup_step's staging arguments of a step that stages nothing (stage, stage_totals, stage_mask, stage_cur,
# stage_min_live, gate)
_NO_STAGING = (None, None, None, 0, 0, None)
# the forward builds the backward's CSR on a side stream from this many ids on (below it the stream handoff costs
# more host time than the overlap saves on the device)
_OVERLAP_MIN_IDS = 1 << 16


def _step_ws_entries(n, num_tables):
    """int64 entries of lookup_step's workspace without a CSR (csrc/ops/lookup_ops.cc step_layout; the op
    lookup_step_ws_size says the same, a CPU test compares): for the fake kernel, where n may be symbolic."""
    def up(b):
        return (b + 255) // 256 * 256
    # header: skip flag, count, refusals, pending + spare, the device checks' block flags (kValidateSlots int32)
    return (up(16 + 8 * num_tables + 4 * _VALIDATE_SLOTS) + 3 * up(4 * n) + 3 * up(8 * n)) // 8


def _kernels_available() -> bool:
    return load_library() and hasattr(torch.ops.dynamicemb, "lookup_step")


# The dedup set's rule (csrc/lookup/dedup_kernels.cu dedup_set_capacity at its default, kDedupSet4x): 4 slots per
# id plus 1,024, capped at int32's largest (slots are int32 positions). _dedup_set_rule is its Python copy for the
# compiled step, which cannot ask the op; a CPU test checks it against the op.
_DEDUP_SET_PER_ID, _DEDUP_SET_EXTRA, _DEDUP_SET_MAX = 4, 1024, 2**31 - 1


def _dedup_set_rule(n):
    """Entries of the dedup's set for n ids: the op's rule, written in Python. A SymInt n (a traced step with dynamic
    shapes) gets the uncapped 4 n + 1024 (torch 2.11's dynamo cannot trace torch.sym_min's int result inside the
    step's autograd.Function; the cap only binds from ~537M ids, and a larger set is valid: the op uses its first
    lookup_dedup_set_size(n) entries)."""
    want = _DEDUP_SET_PER_ID * n + _DEDUP_SET_EXTRA
    return want if isinstance(want, torch.SymInt) else min(want, _DEDUP_SET_MAX)


@functools.lru_cache(maxsize=64)
def _dedup_set_size(n: int) -> int:
    """Entries of the dedup's per-step set for n ids: the op's own rule (lookup_dedup_set_size), asked once per n
    (a host-side dispatcher call, kept off the eager step's latency)."""
    return torch.ops.dynamicemb.lookup_dedup_set_size(n)


def _register_lookup_fakes():
    """Fake (meta) kernels of the lookup ops, so torch.compile/export can trace a step."""
    if not _kernels_available():
        return
    _check_contract()

    def dedup(ids, offsets, feature_table, batch, dedup_set, skip=None):
        n = ids.numel()
        i32 = lambda k: ids.new_empty(k, dtype=torch.int32)  # noqa: E731
        return i32(n), i32(n), ids.new_empty(n, dtype=torch.int64), i32(n), i32(1)

    def step(meta, value_kind, ids, offsets, lengths, psw, feature_table, feature_col, batch, pooling, flags,
             max_dim, out_cols, out_kind, dedup_set, refused_total, *staging):
        if flags & _STEP_CSR:
            raise RuntimeError("lookup_step: a traced step builds its CSR in the backward (flags without CSR)")
        n = ids.numel()
        rows = n if pooling == _POOL_CODE["none"] else batch
        dtype = {v: k for k, v in _VALUE_KIND.items()}[out_kind]
        ws = ids.new_empty(_step_ws_entries(n, meta.numel() // _META_FIELDS), dtype=torch.int64)
        return ids.new_empty(rows, out_cols, dtype=dtype), ws

    def backward(meta, value_kind, grad, ids, offsets, ws, psw, feature_table, feature_col, batch, pooling, flags,
                 *rest):
        return grad.new_empty(ids.numel() if flags & _STEP_PSW_GRAD else 0, dtype=torch.float32)

    def validate(ids, offsets, lengths, psw, lengths_only):
        return ids.new_empty(1, dtype=torch.int32)

    def report(counts, seen):
        return None

    for name, fn in (("lookup_dedup", dedup), ("lookup_step", step), ("lookup_backward", backward),
                     ("lookup_validate", validate), ("report_nonfinite", report)):
        try:
            torch.library.register_fake(f"dynamicemb::{name}")(fn)
        except (RuntimeError, AttributeError):  # already registered, or an older torch
            pass


_register_lookup_fakes()


def _opt_code(opt: EmbOptimizer) -> int:
    if isinstance(opt, Adam):
        return _OPT_CODE["adam"]
    if isinstance(opt, RowWiseAdagrad):  # before Adagrad: a subclass of it
        return _OPT_CODE["rowwise_adagrad"]
    if isinstance(opt, Adagrad):
        return _OPT_CODE["adagrad"]
    return _OPT_CODE["sgd"]


def _host_rows(t: ScoredHashTable):
    """(values_host address, hbm_slots, host_run) of TableMeta: a hybrid table's UVA address of its host rows, HBM
    slots per bucket and host-row layout, else (0, bucket_capacity, 0)."""
    host = getattr(t, "values_host", None)
    if host is None:
        return 0, t.bucket_capacity, 0
    return _uva_address(host), t.hbm_slots, t.host_run


def _host_rows_flags(tables) -> tuple:
    """(forward, backward) step flags of tables some of which keep rows in host memory (hybrid): kStepHostRows, and
    for the backward the scratch row pitch in bytes (the widest such row, rounded up to 16) in bits
    _HOST_PITCH_SHIFT and up: the ops then move the step's host rows through HBM in host-address order. (0, 0)
    for all-HBM tables."""
    rows = [t.value_dim * t.values.element_size() for t in tables
            if getattr(t, "values_host", None) is not None and t.hbm_rows < t.capacity()]
    if not rows:
        return 0, 0
    pitch = -(-max(rows) // 16) * 16
    return _STEP_HOST_ROWS, _STEP_HOST_ROWS | (pitch << _HOST_PITCH_SHIFT)


def _uva_address(host: torch.Tensor) -> int:
    """Device address of pinned host memory (cudaHostGetDevicePointer; equal to the host address on every 64-bit
    platform with unified addressing, which CUDA 13 requires)."""
    return host.data_ptr()


class _KernelStep:
    """BatchedDynamicEmbeddingTables' fused CUDA kernel path: the step's ops and their buffers."""

    def _kernel_meta(self) -> torch.Tensor:
        """(T * 34,) int64 device tensor of per-table pointers and parameters (lookup_types.h TableMeta); rebuilt
        (eagerly, with a pinned async copy) when a table's tensors or epoch changed, after re-linking the groups
        of a table that replaced its rows (_check_groups; not while capturing a CUDA graph)."""
        # fast path: no table tensor or epoch of the process was replaced since the last check, the same table
        # objects (one mark for the groups and the metadata)
        if self._meta is not None and self._tables_unchanged():
            return self._meta
        if not _capturing():
            self._check_groups()
        # identity of each table's tensors (held here, so a replaced tensor cannot be confused with a new one at
        # the same address), its hybrid host rows and its epoch: cheaper per step than reading data pointers
        key = self._meta_key
        if self._meta is not None and (_capturing() or all(
                t.keys is k and t.values is v and t.scores is sc and t.counters is c and t.epoch == e
                and getattr(t, "values_host", None) is h
                for t, (k, v, sc, c, e, h) in zip(self.tables, key))):
            if not _capturing():
                self._mark_tables()
            return self._meta
        key = [(t.keys, t.values, t.scores, t.counters, t.epoch, getattr(t, "values_host", None)) for t in self.tables]
        buf = bytearray()
        for i, t in enumerate(self.tables):
            o = self.options[i]
            kind, a, b, mean, std, value, cols, fill, seed = t.initializer.op_args()
            ev = self._eval_init[i]
            eseed = int(ev.seed) & ((1 << 64) - 1)
            eseed = eseed - (1 << 64) if eseed >= 1 << 63 else eseed
            values_host, hbm_slots, host_run = _host_rows(t)
            buf += _pack_meta(dict(
                keys=t.keys.data_ptr(), digests=t.digests.data_ptr(), scores=t.scores.data_ptr(),
                values=t.values.data_ptr(), locks=t.locks.data_ptr(), counters=t.counters.data_ptr(),
                capacity=t.capacity(), num_buckets=t.capacity() // t.bucket_capacity,
                bucket_capacity=t.bucket_capacity, row_stride=t.value_dim, dim=self.dims[i], policy=t._policy,
                use_epoch=int(t._use_epoch), epoch=int(t.epoch),
                init_kind=kind, init_a=a, init_b=b, init_mean=mean, init_std=std, init_value=value,
                init_cols=cols, init_fill=fill, init_seed=seed,
                refused_zero=int(o.on_refused == "zero"),
                eval_kind=_INIT_CODE[ev.kind], eval_a=float(ev.low), eval_b=float(ev.high),
                eval_mean=float(ev.mean), eval_std=float(ev.std), eval_value=float(ev.value), eval_seed=eseed,
                values_host=values_host, hbm_slots=hbm_slots, host_run=host_run,
            ))
        host = torch.frombuffer(buf, dtype=torch.int64).clone()
        if torch.cuda.is_available():
            host = host.pin_memory()
        self._meta_host = host  # keeps the pinned source alive until the copy ran
        self._meta = host.to(self.device, non_blocking=True)
        self._meta_key = key
        self.__dict__["_host_flags"] = _host_rows_flags(self.tables)
        self._mark_tables()
        return self._meta

    def _mark_tables(self) -> None:
        """Records the process's table state epoch and the module's table objects (_kernel_meta's fast path)."""
        self.__dict__["_tables_seen"] = (state_epoch(), list(self.tables))

    def _tables_unchanged(self) -> bool:
        """Whether, since ``_mark_tables()``, no table of the process replaced a state tensor or its epoch
        (_table.state_epoch: ``epoch`` is one of the state attributes) and the module holds the same table objects."""
        seen = self.__dict__.get("_tables_seen")
        return seen is not None and seen[0] == state_epoch() and all(map(operator.is_, seen[1], self.tables))

    def _host_step_flags(self) -> tuple:
        """(lookup_step, lookup_backward) flags of the hybrid tables' host rows (_host_rows_flags, set with the
        table metadata) under ``host_rows_order``."""
        fwd, bwd = self.__dict__.get("_host_flags", (0, 0))
        order = getattr(self, "host_rows_order", "forward")  # (a module pickled before the attribute)
        if order not in ("step", "forward", "off"):
            raise ValueError(f"host_rows_order: expected 'step', 'forward' or 'off', got {order!r}")
        return (fwd if order != "off" else 0), (bwd if order == "step" else 0)

    def _dedup_set(self, n: int) -> torch.Tensor:
        """(lookup_dedup_set_size(n)) int32 per-step (table, id) set of the dedup kernels: 4-byte slots holding the
        position of the id that claimed them. Scratch: the dedup fills it before every use, so it is allocated once
        per size (eagerly, before any graph capture) and never initialized here. A compiled step (which cannot ask
        the op for the size) reuses the set of an eager step if it has the op's minimum of n entries, else allocates
        _dedup_set_rule(n) entries, the op's rule written in Python."""
        if _compiling():
            if self._set is not None and self._set.numel() >= max(n, 1):
                return self._set
            return torch.empty(_dedup_set_rule(n), dtype=torch.int32, device=self.device)
        cap = _dedup_set_size(n)
        if self._set is None or self._set.numel() < cap:
            self._set = torch.empty(cap, dtype=torch.int32, device=self.device)
        return self._set

    def _direct_sgd(self, segmented=None) -> bool:
        """Plain fp32 SGD (no weight decay, no clipping): the backward adds -lr * g straight into the rows. The
        atomic scatter can do so only when non-finite gradients propagate (it never sees a row's whole sum).
        ``segmented``: _segmented(), when the caller has it."""
        opt = self.optimizer
        return (type(opt) is SGD and not opt.weight_decay and opt.max_grad_value is None
                and opt.max_grad_norm is None and self._value_kind == _VALUE_KIND[torch.float32]
                and (opt.nonfinite == "propagate" or (self._segmented() if segmented is None else segmented)))

    def _gsum_buffer(self, n: int, segmented=None, direct=None) -> torch.Tensor:
        """(rows, max dim rounded to 4) fp32 gradient sums of the backward (lookup_types.h BackwardParams::gsum:
        the atomic scatter needs one row per unique, the segmented reduction one per warp of backward_chunk
        entries, direct SGD without a non-finite policy none); zero between steps (the kernels restore the
        zeros), so it is allocated once per size (eagerly, before any graph capture; a compiled step that finds
        none allocates its own). ``segmented`` / ``direct``: _segmented() / _direct_sgd(), when the caller has them."""
        w = -(-self.max_dim // 4) * 4
        if segmented is None:
            segmented = self._segmented()
        if direct is None:
            direct = self._direct_sgd(segmented)
        if segmented:
            direct_prop = direct and self.optimizer.nonfinite == "propagate"
            n = 1 if direct_prop else -(-n // int(self.backward_chunk))
        elif direct:
            n = 1
        n = max(n, 1)
        if self._gsum is None or self._gsum.shape[0] < n:
            if _compiling():
                return torch.zeros(n, w, dtype=torch.float32, device=self.device)
            self._gsum = torch.zeros(n, w, dtype=torch.float32, device=self.device)
        return self._gsum

    def _seg_buffer(self, n: int) -> torch.Tensor:
        """(n + 1) int32 per-unique counters of the segmented backward (occurrences summed into a hot row's fp32
        sum); zero between steps (the kernels reset what they used), so allocated once per size, eagerly (before
        any graph capture)."""
        if self._seg is None or self._seg.numel() < n + 1:
            if _compiling():
                return torch.zeros(n + 1, dtype=torch.int32, device=self.device)
            self._seg = torch.zeros(n + 1, dtype=torch.int32, device=self.device)
        return self._seg

    def _segmented(self) -> bool:
        """The backward takes the segmented reduction (else the atomic scatter). The one place deciding it:
        lookup_backward gets seg_chunk = backward_chunk only when this holds (else 0) and refuses a segmented
        request its kernels cannot serve (global-norm clipping, rows wider than one 128 (4-wide) / 32-column
        chunk)."""
        mgn = self.optimizer.max_grad_norm
        return (self.backward_chunk > 0 and not (mgn is not None and mgn > 0)
                and self.optimizer.nonfinite != "skip_step" and self.max_dim <= (128 if self._vec4 else 32))

    def _forward_kernels(self, ids, offsets, psw, train: bool, backward: bool = False, checks=None, skip=None):
        """One lookup_step op: the device checks (``checks``), dedup, the backward's CSR (a training step that a
        backward follows; on a side stream for large batches), find_or_insert / find and the gather / pooling.
        ``skip``: the device staging's flag (``_device_stage``: nonzero, the step inserts and updates nothing), or
        the staging's arguments (``_device_stage.Deferred``): the op stages first and takes its flag."""
        n = ids.numel()
        F = self.num_features
        B = (offsets.numel() - 1) // F
        compiling = _compiling()
        # host bookkeeping of an eager step (grow tables, report refusals, re-link groups, table metadata); a
        # compiled step uses the metadata of the last eager one
        eager = not (compiling or _capturing())
        if not eager:
            meta = self._meta
        else:
            if backward:
                self._before_train_step()
            meta = self._kernel_meta()  # (skipped while no table's state changed: one int, a pass of identities)
        pw = None if psw is None else psw.to(torch.float32).contiguous()
        host_flags = self._host_step_flags()
        flags = (_STEP_TRAIN if train else 0) | (_STEP_VEC4 if self._vec4 else 0) | host_flags[0]
        lengths = None
        if checks is not None:
            lengths = checks[0]
            flags |= _STEP_VALIDATE | (_STEP_LENGTHS_ONLY if checks[1] else 0)
        # the backward's CSR needs only the dedup: built in the forward (a compiled step builds it in the backward)
        segmented = self._segmented() if backward else False
        if backward and n > 0 and self.overlap_csr and not compiling and segmented:
            flags |= _STEP_CSR | (_STEP_OVERLAP if n >= _OVERLAP_MIN_IDS else 0)
        out_cols = sum(self.feature_dims) if self.pooling != "none" else self.feature_dims[0]
        # an eager training step copies the refusals into the pinned mirror (_before_train_step reads it)
        mirror = self._refused_pinned.address() if train and eager else 0
        if skip is not None and not isinstance(skip, torch.Tensor):  # the step's staging, in its op (Deferred)
            skip, staging = None, tuple(skip)
        else:
            staging = _NO_STAGING
        # the staging and mirror arguments only when used (every argument positional: tests replay the captured list)
        extra = (*staging, mirror) if mirror or staging is not _NO_STAGING else ()
        # (an eager step reads the buffer from its dict: nn.Module's attribute fallback costs ~1-2 us)
        refused = self._buffers["refused_count"] if eager else self.refused_count
        out, ws = torch.ops.dynamicemb.lookup_step(
            meta, self._value_kind, ids, offsets, lengths, pw, self._ftable_i32, self._fcol, max(B, 1),
            _POOL_CODE[self.pooling], flags, self.max_dim, out_cols, _VALUE_KIND[self.output_dtype],
            self._dedup_set(n), refused, skip, *extra)
        if not train:
            return out, None
        self._after_insert(ws=ws)
        if backward and not compiling:
            self._gsum_buffer(n, segmented)
            self._seg_buffer(n)
        saved = dict(kernels=True, ids=ids, offsets=offsets, ws=ws, psw=pw, psw_dtype=None if psw is None else psw.dtype,
                     B=B, meta=meta, csr=flags & _STEP_CSR, host=host_flags[1])
        return out, saved

    @torch.no_grad()
    def _backward_kernels(self, grad_out, saved, psw_requires_grad):
        opt = self.optimizer
        g = grad_out if grad_out.dtype == torch.float32 else grad_out.to(torch.float32)
        if not g.is_contiguous():
            g = g.contiguous()
        if g.dim() == 1:
            g = g.view(-1, 1)
        compiling = _compiling()
        # (eager: the buffers from their dict, past nn.Module's attribute fallback)
        bufs = self._buffers if not compiling else None
        step = bufs["step"] if bufs is not None else self.step
        psw = saved["psw"]
        want_psw = psw is not None and psw_requires_grad
        ids = saved["ids"]
        n = ids.numel()
        segmented = self._segmented()
        direct = self._direct_sgd(segmented)
        # the segmented update advances the step itself (no kernel of its own and no launch gap before the update;
        # eager steps, lookup_ops.cc kStepBump): plain fp32 SGD (never reads it) and Adam (the last block writes it)
        bump = (self._step_in_update and segmented and ((direct and self._vec4) or isinstance(opt, Adam))
                and n > 0 and not compiling and not saved.get("host", 0))
        if not bump:
            step.add_(1.0)
        # seg_chunk > 0 selects the segmented reduction (the forward's CSR, if it built one, goes with it)
        seg_chunk = int(self.backward_chunk) if segmented else 0
        flags = (saved["csr"] | saved.get("host", 0) | (_STEP_VEC4 if self._vec4 else 0) | (_STEP_PSW_GRAD if want_psw else 0)
                 | (_STEP_DIRECT if direct else 0) | (_STEP_AGGREGATE if self.aggregate_grads else 0)
                 | (_STEP_BUMP if bump else 0)
                 | (_STEP_STATE_BF16 if getattr(opt, "state_dtype", None) == torch.bfloat16 else 0)
                 | (_STEP_DECOUPLED_WD if getattr(opt, "decoupled_weight_decay", False) else 0))
        grad_psw = torch.ops.dynamicemb.lookup_backward(
            saved["meta"], self._value_kind, g, ids, saved["offsets"], saved["ws"], psw, self._ftable_i32,
            self._fcol, max(saved["B"], 1), _POOL_CODE[self.pooling], flags, self.max_dim, _opt_code(opt),
            *self._opt_constants(), bufs["learning_rate"] if bufs is not None else self.learning_rate, step,
            self._gsum_buffer(n, segmented, direct), self._seg_buffer(n), seg_chunk, _NONFINITE_CODE[opt.nonfinite],
            bufs["nonfinite_count"] if bufs is not None else self.nonfinite_count, self._nonfinite_seen)
        if not compiling:
            CHANNEL.after_call(self.device)
        return grad_psw.to(saved["psw_dtype"]) if want_psw else None

    def _opt_constants(self):
        """lookup_backward's optimizer constants: weight_decay, beta1, beta2, eps, max_grad_value (-1: off),
        max_grad_norm (-1: off)."""
        opt = self.optimizer
        betas = getattr(opt, "betas", (0.9, 0.999))
        return (float(opt.weight_decay), float(betas[0]), float(betas[1]), float(getattr(opt, "eps", 1e-8)),
                float(opt.max_grad_value) if opt.max_grad_value is not None else -1.0,
                float(opt.max_grad_norm) if opt.max_grad_norm is not None else -1.0)
