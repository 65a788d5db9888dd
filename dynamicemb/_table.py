"""The scored hash table: a GPU (and CPU) map from int64/uint64 keys to value rows, evicting by score.

Layout (HierarchicalKV-style): ``capacity = num_buckets * bucket_capacity`` slots; a key lives in one bucket
(chosen by its 64-bit hash) and in one slot of it. Per slot: the key, an 8-bit digest of its hash, a uint64 score
(stored in an int64 tensor as the same bits) and a value row ``values[slot]``. A bucket evicts only when full: a
new key replaces the slot of least (score, digest, key) (scores and keys in unsigned 64-bit order) if its score is
strictly higher than that slot's, otherwise the insert is refused. No slot position takes part in the choice, so
tables whose keys sit in other slots of a bucket (a ``HybridTable``, the CPU twin) evict the same keys
(docs/dynamicemb_storage_notes.md, "The eviction order").

All state is torch tensors owned by the table object (``keys, digests, scores, values, locks, counters``), so it
moves with ``state_dict()`` and allocates through torch. Every op is a stateless kernel on the current stream;
none synchronizes with the host except the documented host-count results (``size()``, ``load_factor()``,
``reserve()``/``grow()`` and the reserved-key check, which is skipped while a CUDA graph is being captured or with
``check_keys=False``).

Reserved keys: the three bit patterns 0x8000000000000000 + {0, 1, 2} (int64 -2**63 .. -2**63+2; uint64
2**63 .. 2**63+2) mark empty/reclaimed/locked slots and cannot be stored.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Dict, NamedTuple, Optional, Union

import torch

from ._device_check import check_cuda_device
from ._hash import _to_i64, fmix64, fmix64_tensor
from ._load import load_library

__all__ = [
    "ScoredHashTable",
    "TableInitializer",
    "FindResult",
    "FindOrInsertResult",
    "SlotsResult",
    "EvictResult",
    "ExportResult",
    "STAT_NAMES",
    "RESERVED_KEYS",
]

#: Order of the entries of every per-op accounting tensor ``stats`` (int64, shape (5,), on the table's device).
#: For every insert-type op: inserted + assigned + evicted + refused + illegal == len(keys), where `assigned`
#: counts keys that were present (hits), `evicted` inserts that replaced another key, `refused` inserts that lost
#: to a full bucket of higher scores (or were skipped: assign of a missing key), `illegal` reserved keys.
STAT_NAMES = ("inserted", "assigned", "evicted", "refused", "illegal")
RESERVED_KEYS = (-(2**63), -(2**63) + 1, -(2**63) + 2)  # as int64 bit patterns
_EMPTY_KEY_I64 = -(2**63)

_POLICIES = {  # name -> (policy family of the kernels, epoch flag)
    "lru": (0, False),
    "lfu": (1, False),
    "customized": (2, False),
    "epoch_lru": (0, True),
    "epoch_lfu": (1, True),
}
_MODE = {"find_or_insert": 0, "insert_or_assign": 1, "insert_and_evict": 2, "assign": 3, "assign_scores": 4,
         "accum_or_assign": 5}
_COPY_MODES = frozenset((_MODE["insert_or_assign"], _MODE["insert_and_evict"], _MODE["assign"]))
_INIT_KINDS = {"constant": 0, "uniform": 1, "normal": 2, "truncated_normal": 3}
_VALUE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_KEY_DTYPES = (torch.int64, torch.uint64)
_NUM_COUNTERS = 4  # [clock, size, spare, spare]


_EMPTY_DIGEST = (fmix64(1 << 63) >> 32) & 0xFF
# Attributes whose replacement changes what a kernel's table record points to (and the caching table's store).
# The epoch is in the kernels' table record too.
_STATE_ATTRS = frozenset({"keys", "digests", "scores", "values", "values_host", "hbm_rows", "hbm_slots", "locks",
                          "counters", "store", "epoch"})
_STATE_EPOCH = [0]


def state_epoch() -> int:
    """A process-wide count of replaced table tensors (any ``ScoredHashTable`` assigning one of its state
    attributes, or unpickled): records built from tables' tensors (``_device_stage.stage_meta``) stay valid while it
    does not change, so the hot path checks one int instead of every tensor's identity."""
    return _STATE_EPOCH[0]


@dataclasses.dataclass(frozen=True)
class TableInitializer:
    """How ``find_or_insert`` fills the rows of new keys.

    Values depend only on (seed, the op's clock, key, column), so duplicates and thread order never change them,
    and the CPU twin produces the same rows (to float rounding of log/cos for the normal kinds).

    Args:
        kind: "constant" (``value``), "uniform" on [low, high), "normal"(mean, std), or "truncated_normal"
            (mean, std) truncated to [low, high].
        value: the constant.
        low, high: uniform bounds / truncation bounds.
        mean, std: normal parameters.
        seed: random seed.
        init_cols: if set, only columns [0, init_cols) are drawn; columns [init_cols, dim) get ``fill`` (e.g.
            an embedding row followed by optimizer state).
        fill: value of the columns past ``init_cols``.

    Example:
        >>> TableInitializer("uniform", low=-0.05, high=0.05, seed=7, init_cols=16, fill=0.0)
    """

    kind: str = "constant"
    value: float = 0.0
    low: float = -0.05
    high: float = 0.05
    mean: float = 0.0
    std: float = 1.0
    seed: int = 0
    init_cols: Optional[int] = None
    fill: float = 0.0

    def __post_init__(self):
        if self.kind not in _INIT_KINDS:
            raise ValueError(f"initializer kind: expected one of {sorted(_INIT_KINDS)}, got {self.kind!r}")
        if self.kind in ("uniform", "truncated_normal") and not self.low <= self.high:
            raise ValueError(f"initializer bounds: expected low <= high, got low={self.low}, high={self.high}")
        if self.std < 0:
            raise ValueError(f"initializer std: expected >= 0, got {self.std}")
        if self.init_cols is not None and self.init_cols < 0:
            raise ValueError(f"initializer init_cols: expected None or >= 0, got {self.init_cols}")

    def op_args(self):
        cols = -1 if self.init_cols is None else int(self.init_cols)
        seed = int(self.seed) & ((1 << 64) - 1)
        if seed >= 1 << 63:
            seed -= 1 << 64
        return (_INIT_KINDS[self.kind], float(self.low), float(self.high), float(self.mean), float(self.std),
                float(self.value), cols, float(self.fill), seed)


class FindResult(NamedTuple):
    values: torch.Tensor  # (n, dim) value dtype; rows of missing keys hold `default`
    found: torch.Tensor  # (n,) bool
    scores: Optional[torch.Tensor]  # (n,) int64 (uint64 bits) when asked for; missing keys: unspecified


class FindOrInsertResult(NamedTuple):
    values: torch.Tensor  # (n, dim): stored row, or the initial row for new/refused/illegal keys
    found: torch.Tensor  # (n,) bool: the key was stored when this occurrence was served (find_or_insert's docstring)
    stats: torch.Tensor  # (5,) int64, see STAT_NAMES


class SlotsResult(NamedTuple):
    slots: torch.Tensor  # (n,) int64 slot index into `values`, -1 when missing/refused/illegal
    found: torch.Tensor  # (n,) bool: find_slots: present; find_or_insert_slots: as find_or_insert's `found`
    stats: Optional[torch.Tensor]  # (5,) int64 for find_or_insert_slots, None for find_slots


class EvictResult(NamedTuple):
    evicted_keys: torch.Tensor  # (n,) key dtype; the first `num_evicted` entries are valid
    evicted_values: torch.Tensor  # (n, dim)
    evicted_scores: torch.Tensor  # (n,) int64
    num_evicted: torch.Tensor  # 0-d int64 device tensor (== stats[2])
    stats: torch.Tensor  # (5,) int64


class ExportResult(NamedTuple):
    keys: torch.Tensor  # (n,) the first `count` entries are valid
    values: torch.Tensor  # (n, dim)
    scores: torch.Tensor  # (n,) int64
    slots: torch.Tensor  # (n,) int64
    count: torch.Tensor  # (1,) int64 device tensor


def _ops():
    if not load_library():
        raise RuntimeError("dynamicemb: the op library _C.so is missing (install the built wheel)")
    return torch.ops.dynamicemb


def _register_fakes():
    """Fake (meta) kernels so torch.compile/export can trace the ops (they only mutate their arguments)."""
    if not load_library():
        return
    for name in ("table_lookup", "table_upsert", "table_erase", "table_export", "table_rehash"):
        try:
            torch.library.register_fake(f"dynamicemb::{name}")(lambda *args, **kwargs: None)
        except (RuntimeError, AttributeError):  # already registered, or an older torch
            pass


_register_fakes()


def _check_key_tensor(t, arg: str, key_dtype: torch.dtype, device: torch.device, owner: str) -> None:
    """Type, dtype, rank and device checks shared by the table's keys and the embedding modules' ids (each caller
    adds its own value checks). ``owner`` names whose key_dtype/device the tensor must match in the message."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{arg}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != key_dtype:
        raise TypeError(f"{arg}: expected dtype {key_dtype} ({owner}'s key_dtype), got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{arg}: expected a 1-d tensor, got shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{arg}: expected a tensor on {device} ({owner}'s device), got {t.device}")


def _bucket_of_hash(h: torch.Tensor, nb: int) -> torch.Tensor:
    """table::bucket_of_hash: (h * nb) >> 64 (unsigned) from 32-bit halves; exact for nb < 2**30."""
    hi, lo = (h >> 32) & 0xFFFFFFFF, h & 0xFFFFFFFF
    return (hi * nb + ((lo * nb) >> 32)) >> 32


def slot_integrity_errors(keys: torch.Tensor, digests: torch.Tensor, size: Optional[int],
                          bucket_capacity: int) -> list:
    """What makes a table's slots unusable, checked vectorized with one host sync: every stored key sits in its
    home bucket with the digest of its hash, free slots hold the empty key and digest, no key is stored twice and
    ``size`` (the size counter, None: unchecked) equals the number of stored keys.

    Args:
        keys: (capacity,) int64/uint64; digests: (capacity,) uint8; bucket_capacity: slots per bucket.

    Returns:
        a list of messages (empty when consistent).
    """
    k = keys.reshape(-1).view(torch.int64)
    cap = k.numel()
    nb = cap // bucket_capacity
    empty = k == _EMPTY_KEY_I64
    reserved = (k > _EMPTY_KEY_I64) & (k <= RESERVED_KEYS[-1])
    live = ~empty & ~reserved
    h = fmix64_tensor(k)
    dig = ((h >> 32) & 0xFF).to(torch.uint8)
    bucket = _bucket_of_hash(h, nb)
    home = torch.arange(cap, device=k.device) // bucket_capacity
    bad_digest = live & (digests.reshape(-1) != dig)
    bad_empty = empty & (digests.reshape(-1) != _EMPTY_DIGEST)
    bad_bucket = live & (bucket != home) if nb < 2**30 else torch.zeros_like(live)
    sk = torch.sort(k[live]).values
    checks = torch.stack([live.sum(), reserved.sum(), bad_digest.sum(), bad_empty.sum(), bad_bucket.sum(),
                          (sk[1:] == sk[:-1]).sum() if sk.numel() > 1 else torch.zeros((), dtype=torch.int64,
                                                                                        device=k.device)])
    n_live, n_res, n_dig, n_empty, n_bucket, n_dup = checks.tolist()  # the one host sync
    errs = []
    if n_res:
        errs.append(f"keys: expected stored keys or the empty key, got {n_res} slots holding a reserved key")
    if n_dig:
        errs.append(f"digests: expected the digest of each stored key's hash, got {n_dig} mismatching slots")
    if n_empty:
        errs.append(f"digests: expected the empty digest in free slots, got {n_empty} free slots with another")
    if n_bucket:
        errs.append(f"keys: expected every key in its home bucket, got {n_bucket} keys in another bucket")
    if n_dup:
        errs.append(f"keys: expected each key stored once, got {n_dup} duplicates")
    if size is not None and size != n_live:
        errs.append(f"counters: expected a size (entry 1) equal to the {n_live} stored keys, got {size}")
    return errs


def _locked(fn):
    """Runs a table method under the table's lock: ops release the GIL, and two threads mutating one table would
    race on its slots and size counter (CPU). Uncontended, the lock costs well under a microsecond."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if torch.compiler.is_compiling():  # a traced step (dynamo cannot enter a lock): one thread drives it
            return fn(self, *args, **kwargs)
        with self._lock:
            return fn(self, *args, **kwargs)
    return wrapper


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class ScoredHashTable:
    """A scored hash table from int64/uint64 keys to rows of ``value_dim`` values (fp16/bf16/fp32).

    Args:
        capacity: number of slots; a multiple of ``bucket_capacity``.
        value_dim: row width.
        value_dtype: torch.float16, torch.bfloat16 or torch.float32.
        key_dtype: torch.int64 or torch.uint64.
        bucket_capacity: slots per bucket, a power of two in [16, 256] (128 by default).
        score_policy: "lru" (score = the table's op clock), "lfu" (score += count per touch, saturating),
            "epoch_lru" / "epoch_lfu" (score = epoch << 32 | clock-or-count; set the epoch with ``set_epoch``),
            "customized" (caller scores on every insert).
        max_capacity: upper bound for ``reserve``/``grow`` (default: capacity).
        initializer: default ``TableInitializer`` for ``find_or_insert``.
        device: "cpu" (the C++ twin) or a CUDA device.
        check_keys: reject reserved keys with a ValueError (one host sync per op; skipped during graph capture;
            the kernels count them as `illegal` either way).

    Example:
        >>> t = ScoredHashTable(1024, 8, device="cpu")
        >>> keys = torch.tensor([1, 2, 3])
        >>> t.insert_or_assign(keys, torch.ones(3, 8))
        >>> t.find(keys).found.all()
        tensor(True)
    """

    # Private option (class or instance attribute): the LRU row copiers' op gets a first-writer set, which the first
    # pass uses when the device's sample of the batch finds repeated keys: each key's first occurrence writes its
    # row without a slot lock, the others yield (table_kernels.cuh, begin_op_kernel). Batches of distinct keys keep
    # the slot-lock path. Measured (H200, 1M keys): Zipf +18 to +56 %, distinct keys -1.5 to -2.5 % (the sample and
    # the set's own first-pass instance; docs/dynamicemb_storage_notes.md, "A sampled choice of the first-writer
    # set"): off by default.
    _upsert_dedup = False
    # Private option (bits; class or instance attribute): 1 = the CUDA upsert's kernels after begin_op as
    # programmatic dependent launches on sm_90+ (table_kernels.cuh launch_upsert_kernel; H200, 1M keys: +0.4 to
    # +1.3 % on the inserting ops, docs/dynamicemb_storage_notes.md "The first-writer set's slot-lock copy"); on by
    # default, 0 = plain launches (for A/B timing). Bits 2-3 choose the insert pass's variant for every op
    # (table_kernels.cuh insert_schedule): 1 the dynamic group schedule with the plain eviction scan, 2 the static
    # schedule, 3 dynamic with the wide scan (what 0 gives: the default; docs/dynamicemb_storage_notes.md "Keys in
    # flight", "What limits the load-1.0 insert pass"). Bits 4-7: the LRU assign's path (table_kernels.cuh
    # assign_lru_variant): 0 its own kernel (assign_lru_kernel, the default), 1 the row copiers' two passes (as before
    # that kernel; docs/dynamicemb.md, "assign at 2x HierarchicalKV").
    _upsert_lab = 1

    def __init__(
        self,
        capacity: int,
        value_dim: int,
        value_dtype: torch.dtype = torch.float32,
        key_dtype: torch.dtype = torch.int64,
        bucket_capacity: int = 128,
        score_policy: str = "lru",
        max_capacity: Optional[int] = None,
        initializer: Optional[TableInitializer] = None,
        device: Union[str, torch.device, None] = None,
        check_keys: bool = True,
    ):
        if not isinstance(bucket_capacity, int) or bucket_capacity < 16 or bucket_capacity > 256 or (
            bucket_capacity & (bucket_capacity - 1)
        ):
            raise ValueError(f"bucket_capacity: expected a power of two in [16, 256], got {bucket_capacity!r}")
        if not isinstance(capacity, int) or capacity <= 0 or capacity % bucket_capacity:
            raise ValueError(
                f"capacity: expected a positive multiple of bucket_capacity={bucket_capacity}, got {capacity!r}"
            )
        if not isinstance(value_dim, int) or value_dim <= 0:
            raise ValueError(f"value_dim: expected a positive int, got {value_dim!r}")
        if value_dtype not in _VALUE_DTYPES:
            raise TypeError(f"value_dtype: expected one of {_VALUE_DTYPES}, got {value_dtype}")
        if key_dtype not in _KEY_DTYPES:
            raise TypeError(f"key_dtype: expected torch.int64 or torch.uint64, got {key_dtype}")
        if score_policy not in _POLICIES:
            raise ValueError(f"score_policy: expected one of {sorted(_POLICIES)}, got {score_policy!r}")
        max_capacity = capacity if max_capacity is None else max_capacity
        if not isinstance(max_capacity, int) or max_capacity < capacity or max_capacity % bucket_capacity:
            raise ValueError(
                f"max_capacity: expected a multiple of bucket_capacity={bucket_capacity} that is >= capacity="
                f"{capacity}, got {max_capacity!r}"
            )
        if initializer is not None and not isinstance(initializer, TableInitializer):
            raise TypeError(f"initializer: expected a TableInitializer, got {type(initializer).__name__}")
        self.device = torch.device(device if device is not None else "cpu")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device: expected cpu or cuda, got {self.device}")
        if self.device.type == "cuda":
            check_cuda_device(self.device)
        self.value_dim = value_dim
        self.value_dtype = value_dtype
        self.key_dtype = key_dtype
        self.bucket_capacity = bucket_capacity
        self.score_policy = score_policy
        self.max_capacity = max_capacity
        self.initializer = initializer or TableInitializer()
        self.check_keys = check_keys
        self.epoch = 0
        self._policy, self._use_epoch = _POLICIES[score_policy]
        self._lock = threading.RLock()
        self._allocate(capacity)

    def __getstate__(self):  # a lock neither pickles nor deep-copies
        d = dict(self.__dict__)
        d.pop("_lock", None)
        d.pop("_prefetch_last", None)  # a caching table's pending prefetch job (_prefetch.py): not the copy's
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._lock = threading.RLock()
        _STATE_EPOCH[0] += 1

    def __setattr__(self, name, value):
        if name in _STATE_ATTRS:
            _STATE_EPOCH[0] += 1
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ state
    def _new_state(self, capacity: int) -> Dict[str, torch.Tensor]:
        d = self.device
        return {
            "keys": torch.full((capacity,), _EMPTY_KEY_I64, dtype=torch.int64, device=d).view(self.key_dtype),
            "digests": torch.full((capacity,), _EMPTY_DIGEST, dtype=torch.uint8, device=d),
            "scores": torch.zeros(capacity, dtype=torch.int64, device=d),
            "values": torch.zeros(capacity, self.value_dim, dtype=self.value_dtype, device=d),
            "locks": torch.zeros(capacity // self.bucket_capacity, dtype=torch.int32, device=d),
            "counters": torch.zeros(_NUM_COUNTERS, dtype=torch.int64, device=d),
        }

    def _allocate(self, capacity: int):
        self._set_state(self._new_state(capacity))

    def _set_state(self, s: Dict[str, torch.Tensor]):
        self.keys, self.digests, self.scores = s["keys"], s["digests"], s["scores"]
        self.values, self.locks, self.counters = s["values"], s["locks"], s["counters"]

    @_locked
    def _snapshot_buckets(self, keys: torch.Tensor):
        """Copies of everything an upsert of ``keys`` can change (their home buckets' slots and the counters), for
        ``_restore_buckets``; O(unique buckets * bucket_capacity) rows."""
        nb = self.capacity() // self.bucket_capacity
        b = torch.unique(_bucket_of_hash(fmix64_tensor(keys.view(torch.int64)), nb))
        idx = (b[:, None] * self.bucket_capacity + torch.arange(self.bucket_capacity, device=self.device)).reshape(-1)
        keys = self.keys.view(torch.int64)  # (uint64 has no CUDA indexing kernels)
        return (self.keys.data_ptr(), idx, keys[idx], self.digests[idx], self.scores[idx], self._read_rows(idx),
                self.counters.clone())

    @_locked
    def _restore_buckets(self, snap):
        ptr, idx, k, d, s, v, c = snap
        assert ptr == self.keys.data_ptr(), "the table reallocated since its snapshot"
        self.keys.view(torch.int64)[idx], self.digests[idx], self.scores[idx] = k, d, s
        self._write_rows(idx, v)
        self.counters.copy_(c)

    def _read_rows(self, slots: torch.Tensor) -> torch.Tensor:
        """(n, dim) copies of the rows of ``slots`` (int64 on the table's device; a hybrid table reads both
        buffers). Host-side helper for snapshots and checkpoints, not for steps."""
        return self.values[slots]

    def _write_rows(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Writes ``rows`` (n, dim) into the rows of ``slots`` (see ``_read_rows``)."""
        self.values[slots] = rows

    def _values_host(self) -> Optional[torch.Tensor]:
        """The pinned host rows of a hybrid table (passed to the ops after their own arguments), else None."""
        return None

    def _claim_hbm_slots(self) -> int:
        """HBM slots per bucket that inserts claim before the others (a hybrid table's split), -1: no split."""
        return -1

    def _table_args(self):
        return (self.keys, self.digests, self.scores, self.values, self.locks, self.counters, self.bucket_capacity)

    def state_dict(self) -> Dict[str, torch.Tensor]:
        """The table's tensors (keys, digests, scores, values, counters) plus its configuration.

        Returns:
            dict of tensors; ``keys`` has the key dtype, ``scores`` int64 (uint64 bits). Slots are in table order,
            so ``load_state_dict`` restores the table bit for bit.
        """
        return {
            "keys": self.keys,
            "digests": self.digests,
            "scores": self.scores,
            "values": self.values,
            "counters": self.counters,
            "bucket_capacity": torch.tensor(self.bucket_capacity),
            "epoch": torch.tensor(self.epoch),
        }

    @_locked
    def load_state_dict(self, state: Dict[str, torch.Tensor]):
        """Restores a ``state_dict()`` (capacity may differ from the current one; dim/dtypes must match).

        Raises:
            ValueError: on a missing entry, a mismatched dtype, dim or bucket capacity, or inconsistent slots
                (a key outside its bucket, a wrong digest, a duplicate, a size counter that does not count the
                stored keys); the table is unchanged.
        """
        for name in ("keys", "digests", "scores", "values", "counters"):
            if name not in state:
                raise ValueError(f"state_dict: missing entry {name!r}")
        keys, values = state["keys"], state["values"]
        if keys.dtype != self.key_dtype:
            raise ValueError(f"state_dict keys: expected dtype {self.key_dtype}, got {keys.dtype}")
        if values.dtype != self.value_dtype or values.dim() != 2 or values.shape[1] != self.value_dim:
            raise ValueError(
                f"state_dict values: expected (capacity, {self.value_dim}) {self.value_dtype}, got "
                f"{tuple(values.shape)} {values.dtype}"
            )
        bc = int(state.get("bucket_capacity", torch.tensor(self.bucket_capacity)))
        cap = keys.numel()
        if bc != self.bucket_capacity or cap % bc or values.shape[0] != cap or state["digests"].numel() != cap or (
            state["scores"].numel() != cap
        ):
            raise ValueError(
                f"state_dict: inconsistent capacity/bucket_capacity (keys {cap}, values {values.shape[0]}, "
                f"bucket_capacity {bc}, expected {self.bucket_capacity})"
            )
        counters = state["counters"]
        errs = slot_integrity_errors(keys, state["digests"], int(counters[1]) if counters.numel() > 1 else None,
                                     bc)
        if errs:
            raise ValueError("state_dict: " + "; ".join(errs))
        s = self._new_state(cap)
        for name in ("keys", "digests", "scores"):
            s[name].copy_(state[name])
        self._load_values(s, values)
        s["counters"][: state["counters"].numel()].copy_(state["counters"])
        self._set_state(s)
        self.epoch = int(state.get("epoch", torch.tensor(self.epoch)))

    def _load_values(self, s: Dict[str, torch.Tensor], values: torch.Tensor):
        """Copies the (capacity, dim) rows of a state_dict into a new state (a hybrid table splits them)."""
        s["values"].copy_(values)

    # ------------------------------------------------------------------ validation
    def _check_keys(self, keys, arg="keys"):
        _check_key_tensor(keys, arg, self.key_dtype, self.device, "the table")
        if not keys.is_contiguous():
            raise ValueError(f"{arg}: expected a contiguous tensor")
        if self.check_keys and keys.numel() and not _capturing():
            bad = keys.view(torch.int64) < RESERVED_KEYS[-1] + 1
            if bool(bad.any()):
                k = keys[bad][0].item()
                raise ValueError(
                    f"{arg}: contains the reserved key {k} (reserved: the bit patterns 0x8000000000000000 + 0, 1, 2"
                    f", i.e. int64 {RESERVED_KEYS[0]}..{RESERVED_KEYS[-1]} / uint64 2**63..2**63+2)"
                )

    def _check_values(self, values, n, arg="values"):
        if not isinstance(values, torch.Tensor):
            raise TypeError(f"{arg}: expected a torch.Tensor, got {type(values).__name__}")
        if values.dtype != self.value_dtype:
            raise TypeError(f"{arg}: expected dtype {self.value_dtype} (the table's value_dtype), got {values.dtype}")
        if tuple(values.shape) != (n, self.value_dim):
            raise ValueError(f"{arg}: expected shape ({n}, {self.value_dim}), got {tuple(values.shape)}")
        if values.device != self.device:
            raise ValueError(f"{arg}: expected a tensor on {self.device} (the table's device), got {values.device}")
        if not values.is_contiguous():
            raise ValueError(f"{arg}: expected a contiguous tensor")

    def _check_scores(self, scores, n, required, arg="scores"):
        if scores is None:
            if required:
                raise ValueError(f"{arg}: the {self.score_policy!r} policy needs caller scores for this op")
            return None
        if not isinstance(scores, torch.Tensor):
            raise TypeError(f"{arg}: expected a torch.Tensor, got {type(scores).__name__}")
        if scores.dtype not in (torch.int64, torch.uint64):
            raise TypeError(f"{arg}: expected dtype torch.int64 or torch.uint64, got {scores.dtype}")
        if tuple(scores.shape) != (n,):
            raise ValueError(f"{arg}: expected shape ({n},), got {tuple(scores.shape)}")
        if scores.device != self.device:
            raise ValueError(f"{arg}: expected a tensor on {self.device} (the table's device), got {scores.device}")
        if not scores.is_contiguous():
            raise ValueError(f"{arg}: expected a contiguous tensor")
        return scores.view(torch.int64)

    def _empty(self, *shape, dtype):
        return torch.empty(*shape, dtype=dtype, device=self.device)

    # ------------------------------------------------------------------ core op wrappers (no validation)
    @_locked
    def _upsert(self, mode, keys, values=None, scores=None, accum=None, values_out=None, found_out=None,
                slots_out=None, evicted=(None, None, None), initializer=None):
        stats = self._empty(len(STAT_NAMES), dtype=torch.int64)
        init = (initializer or self.initializer).op_args()
        # CUDA upserts run a first pass (hits and inserts into free slots) and an insert pass; the first queues
        # the keys the second handles (evictions, duplicates) here: 2n words of (key, index) pairs, then
        # kPendingExtra = 16 words holding the pending count.
        # The LRU row copiers of all-HBM tables (`_upsert_dedup`) append the first-writer set: a power of two >= 4n
        # words and 16 more (table_types.h dedup_set_words), zeroed by the device only when the batch repeats keys.
        n = keys.numel()
        words = 2 * n + 16
        # (LRU assign: not with all-HBM rows, whose own kernel does not use it)
        if self._upsert_dedup and self._policy == 0 and _MODE[mode] in _COPY_MODES and n > 0 and not (
                mode == "assign" and self._values_host() is None):
            words += max(64, 1 << (4 * n - 1).bit_length()) + 16  # + kDedupTail
        pending = self._empty(words, dtype=torch.int64) if self.device.type == "cuda" else None
        _ops().table_upsert(
            *self._table_args(), self._policy, _MODE[mode], keys, values, scores, accum, values_out, found_out,
            slots_out, stats, evicted[0], evicted[1], evicted[2], self._use_epoch, int(self.epoch), *init, pending,
            self._values_host(), self._claim_hbm_slots(), self._upsert_lab,
        )
        return stats

    @_locked
    def _lookup(self, keys, values_out=None, found_out=None, scores_out=None, slots_out=None, default=None):
        _ops().table_lookup(
            *self._table_args(), self._policy, keys, values_out, found_out, scores_out, slots_out,
            default is not None, float(default or 0.0), self._values_host(),
        )

    # ------------------------------------------------------------------ lookups (read-only)
    def find(self, keys: torch.Tensor, *, return_scores: bool = False, default: float = 0.0) -> FindResult:
        """Looks keys up; changes nothing (scores are not touched).

        Args:
            keys: (n,) key dtype, on the table's device.
            return_scores: also return the stored scores.
            default: value written into the rows of missing keys.

        Returns:
            FindResult(values (n, dim) value dtype, found (n,) bool, scores (n,) int64 or None).

        Example:
            >>> values, found, _ = table.find(keys)
        """
        self._check_keys(keys)
        n = keys.numel()
        values = self._empty(n, self.value_dim, dtype=self.value_dtype)
        found = self._empty(n, dtype=torch.bool)
        scores = self._empty(n, dtype=torch.int64) if return_scores else None
        self._lookup(keys, values, found, scores, None, default)
        return FindResult(values, found, scores)

    def contains(self, keys: torch.Tensor) -> torch.Tensor:
        """Returns (n,) bool: whether each key is stored. Example: ``table.contains(keys).sum()``."""
        self._check_keys(keys)
        found = self._empty(keys.numel(), dtype=torch.bool)
        self._lookup(keys, found_out=found)
        return found

    def find_slots(self, keys: torch.Tensor) -> SlotsResult:
        """Slot of each key (for gathering rows of ``values`` directly); changes nothing.

        Returns:
            SlotsResult(slots (n,) int64, -1 for missing keys; found (n,) bool; stats None).

        Example:
            >>> slots, found, _ = table.find_slots(keys); rows = table.values[slots.clamp(min=0)]
        """
        self._check_keys(keys)
        n = keys.numel()
        slots = self._empty(n, dtype=torch.int64)
        found = self._empty(n, dtype=torch.bool)
        self._lookup(keys, found_out=found, slots_out=slots)
        return SlotsResult(slots, found, None)

    # ------------------------------------------------------------------ inserts
    def find_or_insert(self, keys: torch.Tensor, scores: Optional[torch.Tensor] = None,
                       initializer: Optional[TableInitializer] = None) -> FindOrInsertResult:
        """Finds keys, inserting the missing ones with rows from the initializer.

        Present keys get their score updated by the policy (LRU: clock; LFU: +1 or +scores[i]; customized:
        scores[i]). A refused insert (full bucket of higher scores) or a reserved key still returns the
        initial row, with found=False and counted in stats.

        ``found[i]`` is True when keys[i] was present before this op, or when another occurrence of it in this
        batch inserted it: a key absent before the op is inserted once, by one of its occurrences, which reports
        found=False and counts as `inserted` (or `evicted`), while its other occurrences report found=True, get the
        inserted row and count as `assigned`. Which occurrence inserts: the first in batch order on the CPU; on
        CUDA whichever got there first (not specified). Every occurrence of a refused or reserved key reports
        found=False.

        Args:
            keys: (n,) key dtype. Duplicates share one slot (see ``found``).
            scores: (n,) int64/uint64; required by the customized policy; LFU increments otherwise.
            initializer: overrides the table's initializer for this call.

        Returns:
            FindOrInsertResult(values (n, dim), found (n,) bool, stats (5,) int64).

        Example:
            >>> values, found, stats = table.find_or_insert(keys)
        """
        self._check_keys(keys)
        n = keys.numel()
        sc = self._check_scores(scores, n, required=self._policy == 2)
        values = self._empty(n, self.value_dim, dtype=self.value_dtype)
        found = self._empty(n, dtype=torch.bool)
        stats = self._upsert("find_or_insert", keys, scores=sc, values_out=values, found_out=found,
                             initializer=initializer)
        return FindOrInsertResult(values, found, stats)

    def find_or_insert_slots(self, keys: torch.Tensor, scores: Optional[torch.Tensor] = None,
                             initializer: Optional[TableInitializer] = None) -> SlotsResult:
        """Like ``find_or_insert`` but returns slots instead of copying rows (new rows are initialized in place).

        Returns:
            SlotsResult(slots (n,) int64, -1 where refused/illegal; found (n,) bool as in ``find_or_insert``;
            stats (5,)).

        Example:
            >>> slots, found, stats = table.find_or_insert_slots(ids)
            >>> rows = table.values[slots.clamp(min=0)]   # gather; scatter updates back the same way
        """
        self._check_keys(keys)
        n = keys.numel()
        sc = self._check_scores(scores, n, required=self._policy == 2)
        slots = self._empty(n, dtype=torch.int64)
        found = self._empty(n, dtype=torch.bool)
        stats = self._upsert("find_or_insert", keys, scores=sc, found_out=found, slots_out=slots,
                             initializer=initializer)
        return SlotsResult(slots, found, stats)

    def insert_or_assign(self, keys: torch.Tensor, values: torch.Tensor,
                         scores: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Writes rows: present keys are assigned, missing keys inserted (evicting if their bucket is full).

        Args:
            keys: (n,); values: (n, dim) value dtype; scores: (n,) (customized: required).

        Returns:
            stats (5,) int64 device tensor (see STAT_NAMES). Duplicates: one of the rows wins, whole.

        Example:
            >>> stats = table.insert_or_assign(keys, rows)
        """
        self._check_keys(keys)
        n = keys.numel()
        self._check_values(values, n)
        sc = self._check_scores(scores, n, required=self._policy == 2)
        return self._upsert("insert_or_assign", keys, values=values, scores=sc)

    def insert_and_evict(self, keys: torch.Tensor, values: torch.Tensor,
                         scores: Optional[torch.Tensor] = None) -> EvictResult:
        """``insert_or_assign`` that also returns what it evicted.

        Returns:
            EvictResult(evicted_keys (n,), evicted_values (n, dim), evicted_scores (n,) int64, num_evicted 0-d
            device tensor, stats); only the first num_evicted entries are valid (their order is unspecified).

        Example:
            >>> ek, ev, es, count, stats = table.insert_and_evict(keys, rows)
            >>> ek[: int(count)]
        """
        self._check_keys(keys)
        n = keys.numel()
        self._check_values(values, n)
        sc = self._check_scores(scores, n, required=self._policy == 2)
        ek = self._empty(n, dtype=self.key_dtype)
        ev = self._empty(n, self.value_dim, dtype=self.value_dtype)
        es = self._empty(n, dtype=torch.int64)
        stats = self._upsert("insert_and_evict", keys, values=values, scores=sc, evicted=(ek, ev, es))
        return EvictResult(ek, ev, es, stats[2], stats)

    def assign(self, keys: torch.Tensor, values: torch.Tensor, scores: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Writes rows of present keys only; missing keys are skipped (counted as `refused`), nothing is inserted or
        evicted, the rest of the table is untouched.

        Args:
            keys: (n,) key dtype; duplicates allowed: each stored key ends with the row of one of its occurrences,
                whole (the last in batch order on the CPU; not specified on CUDA), and every occurrence counts as
                `assigned`.
            values: (n, dim) value dtype.
            scores: (n,) int64/uint64 or None. The score of an assigned key: LRU the op's clock (epoch LRU: epoch << 32
                | clock), given scores ignored; LFU + scores[i] (default 1) per occurrence, saturating; customized
                scores[i], or unchanged without scores.

        Returns:
            stats (5,) int64 device tensor (see STAT_NAMES).

        Example:
            >>> stats = table.assign(keys, rows)
        """
        self._check_keys(keys)
        n = keys.numel()
        self._check_values(values, n)
        sc = self._check_scores(scores, n, required=False)
        return self._fix_skips(self._upsert("assign", keys, values=values, scores=sc), n)

    def assign_scores(self, keys: torch.Tensor, scores: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Sets scores of present keys (to ``scores`` if given, else the policy's touch). Returns stats."""
        self._check_keys(keys)
        n = keys.numel()
        sc = self._check_scores(scores, n, required=False)
        return self._fix_skips(self._upsert("assign_scores", keys, scores=sc), n)

    def accum_or_assign(self, keys: torch.Tensor, values: torch.Tensor, accum_or_assigns: torch.Tensor,
                        scores: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Per key: if ``accum_or_assigns[i]`` and present, row += values[i]; if not set and missing, insert
        values[i]; otherwise nothing (counted as `refused`). Returns stats.

        Args:
            accum_or_assigns: (n,) bool.
        """
        self._check_keys(keys)
        n = keys.numel()
        self._check_values(values, n)
        if not isinstance(accum_or_assigns, torch.Tensor) or accum_or_assigns.dtype != torch.bool or tuple(
            accum_or_assigns.shape
        ) != (n,) or accum_or_assigns.device != self.device:
            raise ValueError(f"accum_or_assigns: expected a ({n},) bool tensor on {self.device}")
        sc = self._check_scores(scores, n, required=self._policy == 2)
        return self._fix_skips(
            self._upsert("accum_or_assign", keys, values=values, scores=sc, accum=accum_or_assigns.contiguous()), n
        )

    @staticmethod
    def _fix_skips(stats, n):
        # Ops that skip keys count them as `refused` so that the accounting identity holds.
        stats[3] += n - stats.sum()
        return stats

    # ------------------------------------------------------------------ erase / export
    @_locked
    def erase(self, keys: torch.Tensor) -> torch.Tensor:
        """Removes keys (missing ones are ignored). Returns (1,) int64 device tensor: keys erased."""
        self._check_keys(keys)
        count = torch.zeros(1, dtype=torch.int64, device=self.device)
        _ops().table_erase(*self._table_args(), keys, 0, count, self._values_host())
        return count

    @_locked
    def erase_if(self, threshold: int) -> torch.Tensor:
        """Removes every key whose score (unsigned) is < ``threshold``. Returns (1,) int64 device count."""
        count = torch.zeros(1, dtype=torch.int64, device=self.device)
        _ops().table_erase(*self._table_args(), None, _to_i64(threshold), count, self._values_host())
        return count

    @_locked
    def export_batch(self, offset: int, n: int, *, threshold: Optional[int] = None) -> ExportResult:
        """Exports the stored keys of slots [offset, offset + n) (with score >= threshold if given).

        Returns:
            ExportResult(keys (n,), values (n, dim), scores (n,), slots (n,), count (1,) device tensor); the first
            ``count`` entries are valid, in unspecified order on CUDA (slot order on CPU).

        Example:
            >>> for off in range(0, table.capacity(), 1 << 20):
            ...     k, v, s, slots, c = table.export_batch(off, min(1 << 20, table.capacity() - off))
        """
        cap = self.capacity()
        if not (0 <= offset <= cap and 0 <= n and offset + n <= cap):
            raise ValueError(f"offset/n: expected a slot range inside [0, {cap}), got offset={offset}, n={n}")
        keys = self._empty(n, dtype=self.key_dtype)
        values = self._empty(n, self.value_dim, dtype=self.value_dtype)
        scores = self._empty(n, dtype=torch.int64)
        slots = self._empty(n, dtype=torch.int64)
        count = torch.zeros(1, dtype=torch.int64, device=self.device)
        _ops().table_export(*self._table_args(), int(offset), int(n), threshold is not None,
                            _to_i64(threshold or 0), keys, values, scores, slots, count, self._values_host())
        return ExportResult(keys, values, scores, slots, count)

    def export_batch_if(self, threshold: int, offset: int, n: int) -> ExportResult:
        """``export_batch`` of the slots whose score (unsigned) is >= ``threshold``."""
        return self.export_batch(offset, n, threshold=threshold)

    def export_chunks(self, chunk_rows: int, threshold: Optional[int] = None):
        """Yields (keys, values, scores) of every stored row (score >= threshold as unsigned, if given), exporting
        ``chunk_rows`` slots at a time (host-synchronizing; bounds the extra device memory).

        Example:
            >>> for keys, values, scores in table.export_chunks(1 << 20): ...
        """
        cap = self.capacity()
        for off in range(0, cap, chunk_rows):
            r = self.export_batch(off, min(chunk_rows, cap - off), threshold=threshold)
            c = int(r.count.item())
            if c:
                yield r.keys[:c], r.values[:c], r.scores[:c]

    def items(self):
        """All stored (keys, values, scores), host-synchronizing (for checkpoints and tests)."""
        with self._lock:
            r = self.export_batch(0, self.capacity())
        c = int(r.count.item())
        return r.keys[:c], r.values[:c], r.scores[:c]

    # ------------------------------------------------------------------ size / capacity
    def size(self) -> int:
        """Number of stored keys (host sync)."""
        return int(self.counters[1].item())

    def size_tensor(self) -> torch.Tensor:
        """Number of stored keys as a 0-d int64 device tensor (no sync)."""
        return self.counters[1]

    def capacity(self) -> int:
        """Number of slots."""
        return self.keys.numel()

    def load_factor(self) -> float:
        """size() / capacity() (host sync)."""
        return self.size() / self.capacity()

    def set_epoch(self, epoch: int):
        """Sets the epoch of the epoch_lru / epoch_lfu policies (the high 32 bits of new scores)."""
        if not isinstance(epoch, int) or not 0 <= epoch < 2**32:
            raise ValueError(f"epoch: expected an int in [0, 2**32), got {epoch!r}")
        self.epoch = epoch

    @_locked
    def clear(self):
        """Removes every key (keeps capacity; the op clock keeps counting)."""
        self.keys.view(torch.int64).fill_(_EMPTY_KEY_I64)
        self.digests.fill_(_EMPTY_DIGEST)
        self.scores.zero_()
        self.counters[1].zero_()

    @_locked
    def reserve(self, capacity: int) -> torch.Tensor:
        """Grows to at least ``capacity`` slots (doubling, at most max_capacity), rehashing every key with its row
        and score. Doubling maps each bucket onto two new ones, so nothing is lost. Returns the rehash stats.
        """
        if capacity > self.max_capacity:
            raise ValueError(f"capacity: expected <= max_capacity={self.max_capacity}, got {capacity}")
        new_cap = self.capacity()
        while new_cap < capacity:
            new_cap = min(new_cap * 2, self.max_capacity)
        stats = torch.zeros(len(STAT_NAMES), dtype=torch.int64, device=self.device)
        if new_cap == self.capacity():
            return stats
        s = self._new_state(new_cap)
        s["counters"][0].copy_(self.counters[0])
        _ops().table_rehash(self.keys, self.digests, self.scores, self.values, self.locks, self.counters,
                            s["keys"], s["digests"], s["scores"], s["values"], s["locks"], s["counters"],
                            self.bucket_capacity, stats)
        self._set_state(s)
        return stats

    def grow(self) -> torch.Tensor:
        """Doubles capacity (up to max_capacity); see ``reserve``."""
        return self.reserve(min(self.capacity() * 2, self.max_capacity))

    def __repr__(self):
        return (
            f"ScoredHashTable(capacity={self.capacity()}, value_dim={self.value_dim}, value_dtype={self.value_dtype}"
            f", key_dtype={self.key_dtype}, bucket_capacity={self.bucket_capacity}, score_policy="
            f"{self.score_policy!r}, device={self.device})"
        )
