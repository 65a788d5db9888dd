"""The hybrid storage mode: one scored hash table whose value rows are split between HBM and pinned host memory,
which the kernels read and write through UVA (zero-copy); keys, digests and scores stay in HBM.

Placement (split buckets): every bucket's first ``hbm_slots`` slots have their rows in HBM, its other slots in host
memory, and inserts claim a bucket's free HBM slots before its host slots, so that host rows hold only the
buckets' overflow (at load factor 0.5 with half of each bucket in HBM: ~5 % of the stored rows, instead of 50 % when
whole buckets were HBM or host). Every kernel reaches a table row through one helper (``table::table_row``,
csrc/table/table_types.h) that picks the buffer and row, so the hybrid table runs the same ops as an all-HBM one.
On the CPU the twin claims slots in the same order; it keeps one buffer (slot order) for bucket-major host rows,
and two buffers laid out as the CUDA table's for slot-major ones (``_two_buffers``), whose host slots are claimed
lowest first (table_types.h ``claim_position``). The module's ``storage="hybrid"`` tables are slot-major on CUDA
(``_batched._make_table``) and keep one buffer on the CPU (the torch path reads one).
"""

from __future__ import annotations

from typing import Dict, Tuple

import torch

from ._table import ScoredHashTable

__all__ = ["HybridTable", "split_rows"]


def split_rows(slots: torch.Tensor, hbm_slots: int, bucket_capacity: int,
               host_run: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """(host, row) of table ``slots`` under the split-bucket placement (table_types.h ``table_row`` and
    ``host_row_of``): slot ``b * B + j`` is HBM row ``b * hbm_slots + j`` when ``j < hbm_slots``, else host row
    ``b * (B - hbm_slots) + j - hbm_slots`` (bucket-major, ``host_run`` 0) or ``(j - hbm_slots) * host_run + b``
    (slot-major, ``host_run`` = the number of buckets).

    Example:
        >>> split_rows(torch.tensor([0, 5, 6, 17]), 6, 16)
        (tensor([False, False,  True, False]), tensor([0, 5, 0, 7]))
        >>> split_rows(torch.tensor([6, 7, 22]), 6, 16, host_run=2)
        (tensor([True, True, True]), tensor([0, 2, 1]))
    """
    j = slots % bucket_capacity
    b = slots // bucket_capacity
    host = j >= hbm_slots
    hrow = (j - hbm_slots) * host_run + b if host_run else b * (bucket_capacity - hbm_slots) + j - hbm_slots
    return host, torch.where(host, hrow, b * hbm_slots + j)


class HybridTable(ScoredHashTable):
    """A ``ScoredHashTable`` whose buckets keep their first ``hbm_slots`` rows in HBM and the rest in pinned host
    memory (CUDA tables); inserts fill a bucket's HBM slots first.

    Args:
        capacity, value_dim, value_dtype, key_dtype, bucket_capacity, score_policy, initializer, device: as for
            ``ScoredHashTable`` (``max_capacity`` is ``capacity``: a hybrid table does not grow).
        hbm_rows: rows kept in HBM, in [0, capacity]; rounded down to a multiple of the number of buckets
            (``hbm_slots = hbm_rows // num_buckets`` slots of every bucket).

    Attributes:
        hbm_slots: HBM slots per bucket; hbm_rows: ``hbm_slots * num_buckets``.
        values: (hbm_rows, dim) device rows on CUDA ((capacity, dim) on a bucket-major CPU twin).
        values_host: (capacity - hbm_rows, dim) pinned host rows on CUDA, or (B - hbm_slots, num_buckets, dim)
            slot-major (``_slot_major``, the module's CUDA default: also on the CPU twin, not pinned); None on a
            bucket-major CPU twin.

    Example:
        >>> t = HybridTable(1 << 20, 64, device="cuda", hbm_rows=1 << 19)   # 64 of each bucket's 128 slots in HBM
    """

    def __init__(self, capacity: int, value_dim: int, value_dtype=torch.float32, key_dtype=torch.int64,
                 bucket_capacity: int = 128, score_policy: str = "lru", initializer=None, device=None,
                 hbm_rows: int = 0, _slot_major: bool = False):
        if not isinstance(hbm_rows, int) or not 0 <= hbm_rows <= capacity:
            raise ValueError(f"hbm_rows: expected an int in [0, {capacity}], got {hbm_rows!r}")
        nb = capacity // bucket_capacity if isinstance(bucket_capacity, int) and bucket_capacity > 0 else 1
        self.hbm_slots = hbm_rows // max(nb, 1)
        self.hbm_rows = self.hbm_slots * nb
        self.values_host = None
        # slot-major host rows (split_rows), host slots first fit; the module passes True on CUDA
        self._slot_major = bool(_slot_major)
        super().__init__(capacity, value_dim, value_dtype, key_dtype, bucket_capacity, score_policy,
                         max_capacity=capacity, initializer=initializer, device=device, check_keys=False)

    @property
    def split(self) -> bool:
        """Rows are in two buffers (``values`` and ``values_host``: ``_two_buffers``)."""
        return self.values_host is not None

    def _claim_hbm_slots(self) -> int:
        return self.hbm_slots

    def _new_state(self, capacity: int) -> Dict[str, torch.Tensor]:
        if not self._two_buffers(capacity):
            return super()._new_state(capacity)
        # keys, digests, scores, locks, counters as usual; the rows split between `values` and the host rows
        s = super()._new_state.__func__(_NoValues(self), capacity)
        s["values"] = torch.zeros(self.hbm_rows, self.value_dim, dtype=self.value_dtype, device=self.device)
        s["values_host"] = torch.zeros(self._host_shape(capacity), dtype=self.value_dtype,
                                       pin_memory=self.device.type == "cuda")
        return s

    def _two_buffers(self, capacity: int) -> bool:
        """Whether the rows are in two buffers: a CUDA table with host slots, and the CPU twin of a slot-major one
        (its rows where the CUDA table's are: the same bits, row for row, and the same claim order,
        table_types.h claim_position). A bucket-major CPU twin keeps one buffer in slot order."""
        return self.hbm_rows < capacity and (self.device.type == "cuda" or self._slot_major)

    def _host_shape(self, capacity: int) -> Tuple[int, ...]:
        """The host rows' tensor shape: (capacity - hbm_rows, dim) bucket-major, (B - hbm_slots, num_buckets, dim)
        slot-major (the ops read the layout from it: table_ops.cc make_table)."""
        if self._slot_major:
            return (self.bucket_capacity - self.hbm_slots, capacity // self.bucket_capacity, self.value_dim)
        return (capacity - self.hbm_rows, self.value_dim)

    @property
    def host_run(self) -> int:
        """The host rows' layout (table_types.h ``host_row_of``): 0 bucket-major, the number of buckets slot-major
        (the host tensor is then (B - hbm_slots, num_buckets, dim): the ops read the layout from its shape)."""
        vh = self.values_host
        return vh.size(1) if vh is not None and vh.dim() == 3 else 0

    def _host_buckets(self, vh: torch.Tensor, nb: int) -> torch.Tensor:
        """(nb, B - hbm_slots, dim) view of the host rows ``vh`` of nb buckets in either layout."""
        if vh.dim() == 3:
            return vh.transpose(0, 1)
        return vh.view(nb, self.bucket_capacity - self.hbm_slots, self.value_dim)

    def _set_host_slot_major(self, slot_major: bool = True) -> None:
        """Private (lab): moves the host rows into the slot-major (or back to the bucket-major) layout, keeping
        every row at its slot (a CPU twin changes between two buffers and one); later states (``clear``,
        ``load_state_dict``) keep the layout. Syncs the device."""
        cap, nb = self.capacity(), self.capacity() // self.bucket_capacity
        if bool(slot_major) == self._slot_major and self.split == self._two_buffers(cap):
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        one = None if self.split else self.values  # a one-buffer CPU twin's rows, slot order
        rows = self.all_values() if self.split and self.device.type == "cpu" else None
        self._slot_major = bool(slot_major)
        if not self._two_buffers(cap):  # a CPU twin back to one buffer
            self.values, self.values_host = rows, None
            return
        new = torch.empty(self._host_shape(cap), dtype=self.value_dtype, pin_memory=self.device.type == "cuda")
        if one is None:
            self._host_buckets(new, nb).copy_(self._host_buckets(self.values_host, nb))
        else:
            hbm, host = self._bucket_views(one)
            self.values = hbm.reshape(-1, self.value_dim).clone()
            self._host_buckets(new, nb).copy_(host)
        self.values_host = new

    def _values_host(self):
        return self.values_host

    def _set_state(self, s: Dict[str, torch.Tensor]):
        super()._set_state(s)
        self.values_host = s.get("values_host")

    def _bucket_views(self, values: torch.Tensor):
        """(HBM part, host part) of (capacity, dim) slot-order rows: (nb, hbm_slots, dim), (nb, B - hbm_slots, dim)
        views."""
        v = values.view(-1, self.bucket_capacity, self.value_dim)
        return v[:, : self.hbm_slots], v[:, self.hbm_slots:]

    def all_values(self) -> torch.Tensor:
        """(capacity, dim) every row in slot order (a copy on the CPU when the rows are split)."""
        if not self.split:
            return self.values
        out = torch.empty(self.capacity(), self.value_dim, dtype=self.value_dtype)
        hbm, host = self._bucket_views(out)
        self._host_rows_quiet()
        hbm.copy_(self.values.cpu().view(hbm.shape))
        host.copy_(self._host_buckets(self.values_host, host.shape[0]))
        return out

    def state_dict(self) -> Dict[str, torch.Tensor]:
        sd = super().state_dict()
        sd["values"] = self.all_values()
        return sd

    def _load_values(self, s: Dict[str, torch.Tensor], values: torch.Tensor):
        if "values_host" not in s:
            return super()._load_values(s, values)
        hbm, host = self._bucket_views(values.contiguous())
        self._host_rows_quiet()
        s["values"].copy_(hbm.reshape(-1, self.value_dim))
        self._host_buckets(s["values_host"], host.shape[0]).copy_(host)

    def _host_rows_quiet(self) -> None:
        """Before the CPU reads or writes the pinned host rows: on CUDA, wait for the queued kernels that write or
        read them (a copy of the HBM rows does not wait when there are none: a table with every row on the host)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _read_rows(self, slots: torch.Tensor) -> torch.Tensor:
        if not self.split:
            return super()._read_rows(slots)
        host, row = split_rows(slots, self.hbm_slots, self.bucket_capacity, self.host_run)
        out = torch.empty(slots.numel(), self.value_dim, dtype=self.value_dtype, device=self.device)
        out[~host] = self.values[row[~host]]
        hs = row[host].cpu()  # a blocking copy: the stream's kernels finished their writes
        out[host] = self.values_host.view(-1, self.value_dim)[hs].to(self.device)
        return out

    def _write_rows(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        if not self.split:
            return super()._write_rows(slots, rows)
        host, row = split_rows(slots, self.hbm_slots, self.bucket_capacity, self.host_run)
        self.values[row[~host]] = rows[~host]
        hs = row[host].cpu()  # blocking: no kernel queued before still reads these rows
        self.values_host.view(-1, self.value_dim)[hs] = rows[host].cpu()

    def host_slots(self, slots: torch.Tensor) -> torch.Tensor:
        """Which of ``slots`` (-1: none) have their rows in host memory (False for all on a table without host
        rows; on the CPU, where the placement applies to the slots, as on CUDA)."""
        if self.hbm_rows >= self.capacity():
            return torch.zeros_like(slots, dtype=torch.bool)
        return (slots >= 0) & split_rows(slots, self.hbm_slots, self.bucket_capacity)[0]

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
