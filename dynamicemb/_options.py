"""Options of one dynamic embedding table: storage, eviction, initialization, admission, refused inserts.

Every field is validated in ``__post_init__`` and used by ``BatchedDynamicEmbeddingTables``:

- ``dim``/``dtype``: the embedding row width and the storage dtype of the table's rows (optimizer state inline
  after the embedding uses the same dtype).
- ``max_capacity``/``init_capacity``/``bucket_capacity``: the scored hash table's slots; the table starts at
  ``init_capacity`` and doubles (eager mode only, never inside a CUDA graph) while its load factor exceeds
  ``grow_load_factor`` until it reaches ``max_capacity``; then full buckets evict by score.
- ``score_policy``: "lru", "lfu", "epoch_lru", "epoch_lfu" (eviction order; ``customized`` is not offered here
  because the lookups supply no scores).
- ``initializer``/``eval_initializer``: rows of new ids in training / of missing ids in eval.
- ``admission_threshold``: an id is stored only once it was seen that many times (counted in a second LFU table
  of ``admission_capacity`` slots); until then it gets the initializer value, and its gradient is dropped.
- ``on_refused``: a refused insert (a full bucket whose scores are all higher) "error"s, "warn"s (the id gets
  the initializer value) or yields a "zero" row; in the last two its gradient is dropped. "error" raises
  ``RefusedInsertError`` after the step's insert (the other ids stay inserted; see its docstring).
- ``storage``/``hbm_budget_bytes``/``backing_store``: where the value rows live (docs/dynamicemb_storage.md):
  "hbm" (all rows in HBM), "hybrid" (rows past the HBM budget in pinned host memory, reached by the kernels
  through UVA) or "caching" (an HBM cache of the budget's size over a backing store holding every other row).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

__all__ = ["DynamicEmbInitializer", "DynamicEmbTableOptions"]

_INIT_KINDS = ("uniform", "normal", "truncated_normal", "constant")
_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_POLICIES = ("lru", "lfu", "epoch_lru", "epoch_lfu")
_ON_REFUSED = ("error", "warn", "zero")
_STORAGE = ("hbm", "hybrid", "caching")


def _is_finite_number(v) -> bool:
    """An int or float (bool excluded: it is an int subclass, but True is no number a user means) and finite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclasses.dataclass(frozen=True)
class DynamicEmbInitializer:
    """How rows of new (training) or missing (eval) ids are initialized.

    Args:
        kind: "uniform" on [low, high), "normal"(mean, std), "truncated_normal"(mean, std) cut to [low, high],
            or "constant" (``value``).
        low, high: uniform / truncation bounds; None means ±sqrt(1 / max_capacity) of the table.
        mean, std: normal parameters; ``std`` None means sqrt(1 / max_capacity).
        value: the constant.
        seed: random seed of the table's initializer.

    Example:
        >>> DynamicEmbInitializer("truncated_normal", std=0.01, low=-0.02, high=0.02)
    """

    kind: str = "uniform"
    low: Optional[float] = None
    high: Optional[float] = None
    mean: float = 0.0
    std: Optional[float] = None
    value: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.kind not in _INIT_KINDS:
            raise ValueError(f"initializer.kind: expected one of {list(_INIT_KINDS)}, got {self.kind!r}")
        for name in ("low", "high", "std"):
            v = getattr(self, name)
            if v is not None and not _is_finite_number(v):
                raise ValueError(f"initializer.{name}: expected a finite number or None, got {v!r}")
        for name in ("mean", "value"):
            v = getattr(self, name)
            if not _is_finite_number(v):
                raise ValueError(f"initializer.{name}: expected a finite number, got {v!r}")
        if self.low is not None and self.high is not None and not self.low <= self.high:
            raise ValueError(f"initializer bounds: expected low <= high, got low={self.low}, high={self.high}")
        if self.std is not None and self.std < 0:
            raise ValueError(f"initializer.std: expected >= 0, got {self.std}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"initializer.seed: expected an int, got {self.seed!r}")

    def resolved(self, max_capacity: int, name: str = "initializer") -> "DynamicEmbInitializer":
        """The same initializer with None bounds/std replaced by the table's defaults (±sqrt(1 / max_capacity));
        raises ValueError (naming the option ``name``) when the bounds are then out of order, e.g. only ``low``
        given, above the default ``high``."""
        b = math.sqrt(1.0 / max_capacity)
        low = -b if self.low is None else float(self.low)
        high = b if self.high is None else float(self.high)
        if not low <= high:
            raise ValueError(
                f"{name} bounds: expected low <= high once unset bounds take their default ±sqrt(1 / max_capacity)"
                f" = ±{b:.6g} (max_capacity={max_capacity}), got low={low:.6g}, high={high:.6g}; set both")
        return dataclasses.replace(self, low=low, high=high, std=b if self.std is None else float(self.std))


@dataclasses.dataclass
class DynamicEmbTableOptions:
    """Options of one dynamic embedding table (see the module docstring for how each field is used).

    Args:
        dim: embedding width (> 0). In a TorchRec config this must equal the config's ``embedding_dim``.
        dtype: torch.float32, torch.float16 or torch.bfloat16 (storage of rows and optimizer state).
        max_capacity: most slots (a multiple of ``bucket_capacity``); with TorchRec configs None means the
            config's ``num_embeddings`` rounded up to a bucket multiple.
        init_capacity: starting slots (default ``max_capacity``); a multiple of ``bucket_capacity``.
        bucket_capacity: slots per bucket, a power of two in [16, 256].
        score_policy: "lru", "lfu", "epoch_lru" or "epoch_lfu".
        initializer: training initializer (default uniform ±sqrt(1/max_capacity)).
        eval_initializer: value of ids missing in eval (default constant 0).
        admission_threshold: 0 or 1 admit every id; k > 1 stores an id once it was seen k times.
        admission_capacity: slots of the frequency-counting table (default ``max_capacity``).
        on_refused: "error", "warn" or "zero" (see the module docstring).
        grow_load_factor: load factor above which an eager training step doubles the table first.
        storage: "hbm", "hybrid" or "caching" (see docs/dynamicemb_storage.md). Non-"hbm" tables do not grow
            (``init_capacity`` is ignored: the table has ``max_capacity`` slots).
        hbm_budget_bytes: HBM bytes for this table's value rows ([embedding | optimizer state], the table's dtype;
            keys, digests and scores are extra and stay in HBM). hybrid: the first budget // row_bytes slots'
            rows are in HBM, the rest in pinned host memory; caching: the cache has budget // row_bytes slots
            (rounded down to a bucket multiple, at least one bucket). None: the module's ``hbm_budget_bytes``
            share (or, without one, the whole table for hybrid).
        backing_store: caching only: None (host memory: a CPU table of ``max_capacity`` slots), a directory path
            or ``DiskStoreSpec`` (a RocksDB store there; sharded over W > 1 ranks: ``<path>/rank<r>-of-<W>``),
            ``UvaStoreSpec()`` (pinned host memory indexed in HBM, ``max_capacity`` slots: staging runs on the
            device), or a callable ``(key_dtype, row_width, dtype, max_capacity) -> BackingStore``.

    Example:
        >>> DynamicEmbTableOptions(dim=64, max_capacity=1 << 20, score_policy="lfu", admission_threshold=2)
        >>> DynamicEmbTableOptions(dim=128, max_capacity=1 << 24, storage="caching", hbm_budget_bytes=2 << 30,
        ...                        backing_store="/data/emb/t0")
    """

    dim: int = 0
    dtype: torch.dtype = torch.float32
    max_capacity: Optional[int] = None
    init_capacity: Optional[int] = None
    bucket_capacity: int = 128
    score_policy: str = "lru"
    initializer: DynamicEmbInitializer = dataclasses.field(default_factory=DynamicEmbInitializer)
    eval_initializer: DynamicEmbInitializer = dataclasses.field(
        default_factory=lambda: DynamicEmbInitializer("constant", value=0.0)
    )
    admission_threshold: int = 0
    admission_capacity: Optional[int] = None
    on_refused: str = "warn"
    grow_load_factor: float = 0.75
    storage: str = "hbm"
    hbm_budget_bytes: Optional[int] = None
    backing_store: object = None

    def __post_init__(self):
        self.validate(allow_unset=True)

    def validate(self, allow_unset: bool = False) -> "DynamicEmbTableOptions":
        """Checks every field; with ``allow_unset`` dim=0 and max_capacity=None are allowed (filled later)."""
        bad = lambda name, exp: ValueError(f"DynamicEmbTableOptions.{name}: expected {exp}, got {getattr(self, name)!r}")  # noqa: E731
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 0 or (
            self.dim == 0 and not allow_unset
        ):
            raise bad("dim", "a positive int")
        if self.dtype not in _DTYPES:
            raise bad("dtype", "torch.float32, torch.float16 or torch.bfloat16")
        bc = self.bucket_capacity
        if not isinstance(bc, int) or bc < 16 or bc > 256 or bc & (bc - 1):
            raise bad("bucket_capacity", "a power of two in [16, 256]")
        if self.max_capacity is None:
            if not allow_unset:
                raise bad("max_capacity", f"a positive multiple of bucket_capacity={bc}")
        elif not isinstance(self.max_capacity, int) or self.max_capacity <= 0 or self.max_capacity % bc:
            raise bad("max_capacity", f"a positive multiple of bucket_capacity={bc}")
        if self.init_capacity is not None:
            if not isinstance(self.init_capacity, int) or self.init_capacity <= 0 or self.init_capacity % bc:
                raise bad("init_capacity", f"None or a positive multiple of bucket_capacity={bc}")
            if self.max_capacity is not None and self.init_capacity > self.max_capacity:
                raise bad("init_capacity", f"<= max_capacity={self.max_capacity}")
        if self.score_policy not in _POLICIES:
            raise bad("score_policy", f"one of {list(_POLICIES)}")
        for name in ("initializer", "eval_initializer"):
            if not isinstance(getattr(self, name), DynamicEmbInitializer):
                raise bad(name, "a DynamicEmbInitializer")
            if self.max_capacity is not None:
                getattr(self, name).resolved(self.max_capacity, f"DynamicEmbTableOptions.{name}")
        at = self.admission_threshold
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise bad("admission_threshold", "an int >= 0")
        if self.admission_capacity is not None and (
            not isinstance(self.admission_capacity, int) or self.admission_capacity <= 0 or self.admission_capacity % bc
        ):
            raise bad("admission_capacity", f"None or a positive multiple of bucket_capacity={bc}")
        if self.on_refused not in _ON_REFUSED:
            raise bad("on_refused", f"one of {list(_ON_REFUSED)}")
        if not _is_finite_number(self.grow_load_factor) or not 0.0 < self.grow_load_factor <= 1.0:
            raise bad("grow_load_factor", "a number in (0, 1]")
        if self.storage not in _STORAGE:
            raise bad("storage", f"one of {list(_STORAGE)}")
        hb = self.hbm_budget_bytes
        if hb is not None and (not isinstance(hb, int) or isinstance(hb, bool) or hb < 0):
            raise bad("hbm_budget_bytes", "None or an int >= 0")
        if self.backing_store is not None:
            from ._storage import DiskStoreSpec

            if self.storage != "caching":
                raise bad("backing_store", f"None unless storage='caching' (storage={self.storage!r})")
            from ._uva_store import UvaStoreSpec

            if not isinstance(self.backing_store, (str, DiskStoreSpec, UvaStoreSpec)) and not callable(
                    self.backing_store):
                raise bad("backing_store", "None, a directory path, a DiskStoreSpec, a UvaStoreSpec or a store factory")
        return self

    # ------------------------------------------------------------------ derived values
    @property
    def capacity(self) -> int:
        """Starting number of slots."""
        return self.init_capacity if self.init_capacity is not None else self.max_capacity

    @property
    def admission_slots(self) -> int:
        return self.admission_capacity if self.admission_capacity is not None else self.max_capacity

    def completed(self, dim: Optional[int] = None, num_embeddings: Optional[int] = None) -> "DynamicEmbTableOptions":
        """A validated copy with ``dim``/``max_capacity`` filled from a config where they were left unset."""
        o = dataclasses.replace(self)
        if dim is not None:
            if o.dim not in (0, dim):
                raise ValueError(f"DynamicEmbTableOptions.dim: expected the config's embedding_dim={dim}, got {o.dim}")
            o.dim = dim
        if o.max_capacity is None and num_embeddings is not None:
            bc = o.bucket_capacity
            o.max_capacity = max(bc, -(-int(num_embeddings) // bc) * bc)
        return o.validate()

    @property
    def dtype_name(self) -> str:
        return _DTYPES[self.dtype]
