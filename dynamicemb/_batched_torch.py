"""The torch path of BatchedDynamicEmbeddingTables: the CPU step and the reference of the fused kernels (also the
CUDA step the kernels do not cover): initial rows, pooling, id gradients, and the module's torch forward and
backward (``_TorchStep``, a mixin of the module class in _batched.py)."""

from __future__ import annotations

import torch

from ._batched_step import _compiling
from ._checks import CHANNEL, ERR_ARG_CODES, RULE_NONFINITE_GRAD, host_error
from ._hash import _to_i64, fmix64_tensor
from ._optimizers import SGD
from ._options import DynamicEmbInitializer
from ._table import RESERVED_KEYS

_EMPTY_KEY = RESERVED_KEYS[0]


def _uniform01(seed: int, clock: torch.Tensor, keys: torch.Tensor, ctr: torch.Tensor) -> torch.Tensor:
    """table::uniform01: (m, c) fp32 in [0, 1) from keys (m, 1), counters ctr (1, c) and the op clock (0-d)."""
    ck = fmix64_tensor(clock + _to_i64(0x632BE59BD9B4E019))
    h = fmix64_tensor(_to_i64(seed) ^ fmix64_tensor(keys + (ctr + 1) * _to_i64(0x9E3779B97F4A7C15) + ck))
    return ((h >> 40) & ((1 << 24) - 1)).to(torch.float32) * (1.0 / 16777216.0)


def _normal01(seed, clock, keys, ctr):
    """table::normal01 (Box-Muller on the counters 2 ctr, 2 ctr + 1), fp32."""
    u1 = 1.0 - _uniform01(seed, clock, keys, 2 * ctr)
    u2 = _uniform01(seed, clock, keys, 2 * ctr + 1)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.28318530717958647692 * u2)


def _init_rows(init: DynamicEmbInitializer, keys: torch.Tensor, clock, d: int) -> torch.Tensor:
    """(m, d) fp32 rows of ``keys`` (m,) from ``init`` (resolved): the table's counter-based initializer
    (table::init_value), so a value depends only on (seed, op clock, key, column) and never on torch's RNG.

    The fused kernels give a row without a slot the same value (lookup_common.cuh fallback_value: training reads
    the table's clock after the step's insert, eval clock 0), equal to the initial row the key would have got had
    it been inserted in that op; normal kinds agree to float rounding of log/cos (the kernels use cospif).
    ``clock`` is an int64 0-d tensor on the keys' device or an int; graph-capturable (no host sync)."""
    m, dev = keys.numel(), keys.device
    if init.kind == "constant":
        return torch.full((m, d), float(init.value), dtype=torch.float32, device=dev)
    k = keys.view(torch.int64).reshape(m, 1)
    ctr = torch.arange(d, dtype=torch.int64, device=dev).reshape(1, d)
    if not isinstance(clock, torch.Tensor):
        clock = torch.tensor(_to_i64(clock), dtype=torch.int64, device=dev)
    f32 = lambda x: torch.tensor(float(x), dtype=torch.float32, device=dev)  # noqa: E731  the kernels' float fields
    if init.kind == "uniform":
        a, b = f32(init.low), f32(init.high)
        return a + (b - a) * _uniform01(init.seed, clock, k, ctr)
    mean, std = f32(init.mean), f32(init.std)
    if init.kind == "normal":
        return mean + std * _normal01(init.seed, clock, k, ctr)
    # truncated normal: the first of 32 draws (counters 32 col + t) inside [low, high], else the last one clamped
    a, b = f32(init.low), f32(init.high)
    out = torch.zeros(m, d, dtype=torch.float32, device=dev)
    done = torch.zeros(m, d, dtype=torch.bool, device=dev)
    for t in range(32):
        x = mean + std * _normal01(init.seed, clock, k, ctr * 32 + t)
        ok = (x >= a) & (x <= b) & ~done
        out = torch.where(ok, x, out)
        done = done | ok
    return torch.where(done, out, torch.minimum(torch.maximum(x, a), b))


def _pool_rows(U, inverse, psw, offsets, bag, pooling: str, feature_dims, max_dim: int, B: int, output_dtype):
    """The torch path's forward after the lookup: the uniques' rows U (n_u, max_dim) fp32 expanded to ids,
    weighted, and pooled per bag (sum / mean) or kept per id ("none"). Returns (out, E (the ids' rows), lengths
    (the bags' lengths, fp32)). Also used by the sharded module; `_id_gradients` is its backward."""
    F, Dm = len(feature_dims), max_dim
    E = U[inverse]
    Ew = E * psw.to(torch.float32)[:, None] if psw is not None else E
    lengths = (offsets[1:] - offsets[:-1]).to(torch.float32).clamp(min=0.0)
    if pooling == "none":
        return Ew.to(output_dtype), E, lengths
    bags = torch.zeros(F * B, Dm, dtype=torch.float32, device=U.device).index_add_(0, bag, Ew)
    if pooling == "mean":
        bags = bags / lengths.clamp(min=1.0)[:, None]
    bags = bags.view(F, B, Dm)
    if all(d == Dm for d in feature_dims):
        out = bags.transpose(0, 1).reshape(B, F * Dm)
    else:
        out = torch.cat([bags[f, :, :d] for f, d in enumerate(feature_dims)], dim=1)
    return out.to(output_dtype), E, lengths


def _id_gradients(grad_out, saved, pooling: str, feature_dims, max_dim: int, psw_requires_grad: bool):
    """The torch path's backward up to the update: the output gradient taken back to each id (unpooled, divided by
    the bag length for "mean", weighted) and summed per unique (``saved``: bag, lengths, inverse, psw, E, B, n).
    Returns (gU (n, max_dim) fp32, the per-sample weights' gradient or None). Also used by the sharded module."""
    n, B, F, Dm = saved["n"], saved["B"], len(feature_dims), max_dim
    g = grad_out.to(torch.float32)
    if pooling == "none":
        gE = g
    else:
        if all(d == Dm for d in feature_dims):
            gb = g.reshape(B, F, Dm).transpose(0, 1)
        else:
            gb = torch.zeros(F, B, Dm, dtype=torch.float32, device=g.device)
            c = 0
            for f, d in enumerate(feature_dims):
                gb[f, :, :d] = g[:, c:c + d]
                c += d
        gb = gb.reshape(F * B, Dm)
        if pooling == "mean":
            gb = gb / saved["lengths"].clamp(min=1.0)[:, None]
        gE = gb[saved["bag"]]
    grad_psw = None
    psw = saved["psw"]
    if psw is not None:
        if psw_requires_grad:
            grad_psw = (gE * saved["E"]).sum(1).to(psw.dtype)
        gE = gE * psw.to(torch.float32)[:, None]
    gU = torch.zeros(n, Dm, dtype=torch.float32, device=g.device).index_add_(0, saved["inverse"], gE)
    return gU, grad_psw


class _TorchStep:
    """BatchedDynamicEmbeddingTables' torch forward and backward (and the backward's dispatch to the kernels)."""

    def _split_table(self, grp):
        """The hybrid table of a group whose rows are in two buffers (HBM and host rows: a group of its own, base
        0), else None. The torch path reads and writes its rows by slot through ``_read_rows`` / ``_write_rows``,
        which copy the host rows through the CPU (host syncs; the fused kernels reach them through UVA instead)."""
        t = self.tables[grp["tables"][0]]
        return t if getattr(t, "values_host", None) is not None else None

    def _forward_torch(self, ids, offsets, psw, train: bool, backward: bool = False, skip=None):
        dev = self.device
        n = ids.numel()
        F = self.num_features
        B = (offsets.numel() - 1) // F
        Dm = self.max_dim
        bag, ukeys, utbl, uidx, inverse = self._dedup(ids, offsets, skip)
        U = torch.zeros(n, Dm, dtype=torch.float32, device=dev) if len(self._groups) > 1 or any(
            grp["dim"] != Dm for grp in self._groups) else None
        acc = [(torch.full((n,), -1, dtype=torch.int64, device=dev), torch.zeros(n, dtype=torch.bool, device=dev), [])
               for _ in self._groups]
        per_table = []
        refused_step = torch.zeros(len(self.tables), dtype=torch.int64, device=dev) if train else None
        for t, table in enumerate(self.tables):
            if t not in self.feature_table_map:
                per_table.append(None)
                continue
            o, d = self.options[t], self.dims[t]
            member = utbl == t
            keys_t = torch.where(member, ukeys, _EMPTY_KEY)
            if train:
                admitted = member
                at = self.admission_tables[t]
                if at is not None:
                    found = table.contains(keys_t.view(self.key_dtype))
                    cnt = torch.zeros(n, dtype=torch.int64, device=dev).scatter_add_(
                        0, uidx, torch.ones_like(uidx))
                    ckeys = torch.where(member & ~found, ukeys, _EMPTY_KEY).view(self.key_dtype)
                    cs = at.find_or_insert_slots(ckeys, scores=cnt).slots
                    freq = torch.where(cs >= 0, at.scores[cs.clamp(min=0)], 0)
                    admitted = member & (found | (freq >= o.admission_threshold))
                    keys_t = torch.where(admitted, ukeys, _EMPTY_KEY)
                slots = table.find_or_insert_slots(keys_t.view(self.key_dtype)).slots
                # a key inserted and then evicted by another key of the same batch shares that key's slot: only
                # the slot's final owner is valid, the other counts as refused
                owner = table.keys.view(torch.int64)[slots.clamp(min=0)]
                valid = (slots >= 0) & (owner == ukeys)
                slots = torch.where(valid, slots, -1)
                refused = admitted & ~valid
                refused_step[t] = refused.sum()
                fallback_zero = refused if o.on_refused == "zero" else None
                init = self._train_init[t]
            else:
                slots = table.find_slots(keys_t.view(self.key_dtype)).slots
                valid = slots >= 0
                fallback_zero = None
                init = self._eval_init[t]
            g = self._group_of[t]
            gidx, gmember, fbs = acc[g]
            gidx = torch.where(valid, slots + self._groups[g]["base"][t], gidx)
            gmember = gmember | member
            if not (train and self.admission_tables[t] is None and o.on_refused == "zero"):
                # stored rows win; members without a row get the initializer (or 0 for refused, "zero"): the value
                # the kernels give them, a function of (seed, the table's op clock of this step, key, column)
                clock = table.counters[0] if train else 0
                if dev.type == "cpu":  # draw only the rows that need one (nothing is captured on CPU)
                    need = (member & ~valid).nonzero().squeeze(1)
                    fb = torch.zeros(n, d, dtype=torch.float32, device=dev)
                    fb[need] = _init_rows(init, ukeys[need], clock, d)
                else:
                    fb = _init_rows(init, ukeys, clock, d)
                if fallback_zero is not None:
                    fb.masked_fill_(fallback_zero[:, None], 0.0)
                fbs.append((member & ~valid, fb))
            acc[g] = (gidx, gmember, fbs)
            per_table.append((slots, valid))
        per_group = []
        for g, grp in enumerate(self._groups):
            gidx, gmember, fbs = acc[g]
            d = grp["dim"]
            gvalid = gidx >= 0
            split = self._split_table(grp)
            idx = gidx.clamp(min=0)
            rows = (grp["buf"][idx, :d] if split is None else split._read_rows(idx)[:, :d]).float()
            rows.masked_fill_(~gvalid[:, None], 0.0)
            for mask, fb in fbs:
                rows = torch.where(mask[:, None], fb, rows)
            if len(self._groups) == 1 and d == Dm:
                U = rows  # non-members of the group are 0 already
            else:
                U[:, :d] = torch.where(gmember[:, None], rows, U[:, :d])
            per_group.append((gidx, gvalid))
        if train:
            self._after_insert(refused_step)
        out, E, lengths = _pool_rows(U, inverse, psw, offsets, bag, self.pooling, self.feature_dims, Dm, B,
                                     self.output_dtype)
        saved = None
        if train:
            saved = dict(bag=bag, inverse=inverse, per_group=per_group, utbl=utbl, psw=psw, lengths=lengths,
                         B=B, n=n, E=E if (psw is not None and psw.requires_grad) else None)
        return out, saved

    # ------------------------------------------------------------------ backward + optimizer
    @torch.no_grad()
    def _backward_impl(self, grad_out, saved, psw_requires_grad):
        if saved.get("kernels"):
            return self._backward_kernels(grad_out, saved, psw_requires_grad)
        Dm = self.max_dim
        gU, grad_psw = _id_gradients(grad_out, saved, self.pooling, self.feature_dims, Dm, psw_requires_grad)
        opt = self.optimizer
        # non-finite policy (_optimizers.py; the kernels do the same): per unique row, before clipping
        guard = opt.nonfinite != "propagate"
        finite = torch.isfinite(gU).all(1) if guard else None
        skip_all = None  # 0-d bool: the whole step is skipped (skip_step, or a non-finite global norm)
        if guard and (opt.nonfinite == "skip_step" or opt.max_grad_norm is not None):
            skip_all = ~finite.all()
            self.nonfinite_count[1:].add_(skip_all)
        if opt.max_grad_value is not None:
            gU.clamp_(-opt.max_grad_value, opt.max_grad_value)
        if opt.max_grad_norm is not None:
            norm = torch.linalg.vector_norm(gU)
            gU.mul_(torch.clamp(opt.max_grad_norm / (norm + 1e-6), max=1.0))
        self.step.add_(1.0)
        lr = self.learning_rate
        for g, grp in enumerate(self._groups):
            gidx, valid = saved["per_group"][g]
            if guard:
                bad = valid & ~finite
                if skip_all is not None:
                    bad = bad & ~skip_all
                    valid = valid & ~skip_all
                self.nonfinite_count[:1].add_(bad.sum())
                valid = valid & finite
            d = grp["dim"]
            vals = grp["buf"]
            split = self._split_table(grp)
            sc = gidx.clamp(min=0)
            if sc.numel() == 0:  # an empty batch: nothing to update (argmax below needs a row)
                continue
            if split is None and type(opt) is SGD and not opt.weight_decay and vals.dtype == torch.float32:
                # plain fp32 SGD: add -lr * g in place (rows without a slot add 0 to row 0)
                delta = (gU[:, :d] * -lr).masked_fill_(~valid[:, None], 0.0)
                vals.index_add_(0, sc, delta)
                continue
            orig = vals[sc] if split is None else split._read_rows(sc)
            cur = orig.float()
            s = opt.state_dim(d)
            nw, nst = opt.update(cur[:, :d], cur[:, d:d + s], gU[:, :d], lr, self.step)
            new = torch.cat([nw, nst, cur[:, d + s:]], 1).to(vals.dtype) if cur.shape[1] > d else nw.to(vals.dtype)
            # Rows without a slot (other groups' uniques, padding, not stored) must not be written: they are
            # redirected to the first valid unique with its new row (or, if none, to row 0 with its own row), so
            # every duplicate index writes identical bytes.
            j = valid.to(torch.uint8).argmax().view(1)  # index_select, not [j]: a 0-d index would sync
            row_j = torch.where(valid.index_select(0, j)[:, None], new.index_select(0, j), orig.index_select(0, j))
            slot_fix = torch.where(valid, sc, sc.index_select(0, j))
            new_fix = torch.where(valid[:, None], new, row_j)
            if split is None:
                vals.index_copy_(0, slot_fix, new_fix)
            else:  # (plain fp32 SGD too: w - lr * g, the bits of the add above)
                split._write_rows(slot_fix, new_fix)
        if opt.nonfinite == "raise":
            self._report_nonfinite()
        if not _compiling():
            CHANNEL.after_call(self.device)
        return grad_psw

    def _report_nonfinite(self):
        """nonfinite="raise" of the torch path: CUDA reports through the device error record (no sync), CPU
        raises at once (reading the counter costs nothing there)."""
        if self.device.type == "cuda":
            torch.ops.dynamicemb.report_nonfinite(self.nonfinite_count, self._nonfinite_seen)
            return
        if _compiling():
            return
        total, seen = int(self.nonfinite_count.sum()), int(self._nonfinite_seen)
        if total != seen:
            self._nonfinite_seen.fill_(total)
            raise host_error(ERR_ARG_CODES["gradient"], RULE_NONFINITE_GRAD, 0, total - seen, total)
