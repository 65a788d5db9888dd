"""The hybrid storage mode: one scored hash table whose value rows [0, hbm_rows) are in HBM and rows
[hbm_rows, capacity) in pinned host memory, which the kernels read and write through UVA (zero-copy); keys, digests
and scores stay in HBM. Every kernel reaches a table row through one helper (``table::table_row``,
csrc/table/table_types.h) that picks the pointer, so the hybrid table runs the same ops as an all-HBM one and
gives the same results. On the CPU the twin keeps one buffer (``hbm_rows`` is only recorded).
"""

from __future__ import annotations

from typing import Dict

import torch

from ._table import ScoredHashTable

__all__ = ["HybridTable"]


class HybridTable(ScoredHashTable):
    """A ``ScoredHashTable`` whose rows past ``hbm_rows`` live in pinned host memory (CUDA tables).

    Args:
        capacity, value_dim, value_dtype, key_dtype, bucket_capacity, score_policy, initializer, device: as for
            ``ScoredHashTable`` (``max_capacity`` is ``capacity``: a hybrid table does not grow).
        hbm_rows: rows kept in HBM, in [0, capacity].

    Attributes:
        values: (hbm_rows, dim) device rows on CUDA ((capacity, dim) on the CPU).
        values_host: (capacity - hbm_rows, dim) pinned host rows on CUDA (None on the CPU).

    Example:
        >>> t = HybridTable(1 << 20, 64, device="cuda", hbm_rows=1 << 18)   # 3/4 of the rows in host memory
    """

    def __init__(self, capacity: int, value_dim: int, value_dtype=torch.float32, key_dtype=torch.int64,
                 bucket_capacity: int = 128, score_policy: str = "lru", initializer=None, device=None,
                 hbm_rows: int = 0):
        if not isinstance(hbm_rows, int) or not 0 <= hbm_rows <= capacity:
            raise ValueError(f"hbm_rows: expected an int in [0, {capacity}], got {hbm_rows!r}")
        self.hbm_rows = hbm_rows
        self.values_host = None
        super().__init__(capacity, value_dim, value_dtype, key_dtype, bucket_capacity, score_policy,
                         max_capacity=capacity, initializer=initializer, device=device, check_keys=False)

    @property
    def split(self) -> bool:
        """Rows are in two buffers (a CUDA table with rows in host memory)."""
        return self.device.type == "cuda" and self.hbm_rows < self.capacity()

    def _new_state(self, capacity: int) -> Dict[str, torch.Tensor]:
        if self.device.type == "cpu" or self.hbm_rows >= capacity:
            return super()._new_state(capacity)
        # keys, digests, scores, locks, counters in HBM as usual; the rows split between HBM and pinned host memory
        d, dim = self.device, self.value_dim
        s = super()._new_state.__func__(_NoValues(self), capacity)
        s["values"] = torch.zeros(self.hbm_rows, dim, dtype=self.value_dtype, device=d)
        s["values_host"] = torch.zeros(capacity - self.hbm_rows, dim, dtype=self.value_dtype, pin_memory=True)
        return s

    def _values_host(self):
        return self.values_host

    def _set_state(self, s: Dict[str, torch.Tensor]):
        super()._set_state(s)
        self.values_host = s.get("values_host")

    def all_values(self) -> torch.Tensor:
        """(capacity, dim) every row in slot order (a copy on the CPU when the rows are split)."""
        if not self.split:
            return self.values
        return torch.cat([self.values.cpu(), self.values_host])

    def state_dict(self) -> Dict[str, torch.Tensor]:
        sd = super().state_dict()
        sd["values"] = self.all_values()
        return sd

    def _load_values(self, s: Dict[str, torch.Tensor], values: torch.Tensor):
        if "values_host" not in s:
            return super()._load_values(s, values)
        s["values"].copy_(values[: self.hbm_rows])
        s["values_host"].copy_(values[self.hbm_rows:])

    def _read_rows(self, slots: torch.Tensor) -> torch.Tensor:
        if not self.split:
            return super()._read_rows(slots)
        host = slots >= self.hbm_rows
        out = torch.empty(slots.numel(), self.value_dim, dtype=self.value_dtype, device=self.device)
        out[~host] = self.values[slots[~host]]
        hs = (slots[host] - self.hbm_rows).cpu()  # a blocking copy: the stream's kernels finished their writes
        out[host] = self.values_host[hs].to(self.device)
        return out

    def _write_rows(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        if not self.split:
            return super()._write_rows(slots, rows)
        host = slots >= self.hbm_rows
        self.values[slots[~host]] = rows[~host]
        hs = (slots[host] - self.hbm_rows).cpu()  # blocking: no kernel queued before still reads these rows
        self.values_host[hs] = rows[host].cpu()

    def reserve(self, capacity: int) -> torch.Tensor:
        """A hybrid table keeps its capacity; returns zero stats."""
        return torch.zeros(5, dtype=torch.int64, device=self.device)


class _NoValues:
    """Stands in for a HybridTable in ScoredHashTable._new_state with a zero-width row, so the parent allocates
    every tensor but the (capacity, dim) device rows."""

    def __init__(self, t):
        self.device, self.key_dtype, self.value_dtype, self.bucket_capacity = (t.device, t.key_dtype, t.value_dtype,
                                                                                t.bucket_capacity)
        self.value_dim = 0
