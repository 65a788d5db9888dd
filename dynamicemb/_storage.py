"""Backing stores of the caching storage mode: where every row that is not in a table's HBM cache lives.

A store maps keys to (row, score) and is *exclusive* with its cache: a key lives either in the HBM cache or in the
store, never in both (a cache miss moves the row into the cache, an eviction moves it back). All tensors crossing
this interface are on the CPU.

Three implementations (and ``UvaStore`` in ``_uva_store.py``: rows in pinned host memory indexed in HBM, staged
by CUDA kernels; its tensors live on the device):
  - ``HostStore``: host memory, a CPU scored hash table (the C++ twin of the GPU table) with caller scores, so
    a full store evicts per bucket by score exactly like an all-HBM table of the same capacity.
  - ``DiskStore``: a RocksDB database in a directory (PyPI ``rocksdict``, RocksDB bundled), for tables larger than
    host RAM. It survives a process restart; every mutation is one atomic RocksDB write batch (rows, erasures and
    the row count together), so a failed write (disk full, quota, read-only) changes nothing.

Custom stores subclass ``BackingStore`` and are passed as a factory in ``DynamicEmbTableOptions.backing_store``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Dict, Iterator, NamedTuple, Optional, Tuple, Union

import torch

__all__ = ["BackingStore", "HostStore", "DiskStore", "DiskStoreSpec", "StoreError", "StoreRows", "make_store"]

_ELEM = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64", torch.uint64: "uint64"}


class StoreError(RuntimeError):
    """A backing store cannot be opened, read or written (missing, read-only, full or corrupt directory). The
    operation that raised changed nothing in the store nor in the module's tables."""


class StoreRows(NamedTuple):
    values: torch.Tensor  # (n, dim) value dtype, CPU; rows of missing keys are unspecified
    scores: torch.Tensor  # (n,) int64 (uint64 bits), CPU
    found: torch.Tensor  # (n,) bool, CPU


class BackingStore:
    """Interface of a caching table's backing store (all tensors on the CPU; keys of the table's key dtype).

    Subclasses implement ``find``, ``write``, ``export_batches``, ``size`` and ``clear``; ``flush``/``close``
    and the small ``meta`` dict (the op clock and epoch kept with a persistent store) are optional.

    Example:
        >>> class MyStore(BackingStore):
        ...     def find(self, keys): ...
        >>> DynamicEmbTableOptions(dim=16, max_capacity=1 << 20, storage="caching", hbm_budget_bytes=1 << 24,
        ...                        backing_store=lambda key_dtype, dim, dtype, capacity: MyStore())
    """

    key_dtype: torch.dtype
    value_dim: int
    value_dtype: torch.dtype

    def find(self, keys: torch.Tensor) -> StoreRows:
        """Rows of ``keys`` (n,); changes nothing. Returns StoreRows(values (n, dim), scores (n,), found (n,))."""
        raise NotImplementedError

    def write(self, put_keys: torch.Tensor, put_values: torch.Tensor, put_scores: torch.Tensor,
              erase_keys: torch.Tensor) -> None:
        """Atomically inserts/overwrites rows (put_*: (m,), (m, dim), (m,)) and erases ``erase_keys`` (missing ones
        are ignored). Raises StoreError and changes nothing when the store cannot take the write."""
        raise NotImplementedError

    def export_batches(self, batch_rows: int, threshold: Optional[int] = None
                       ) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Yields (keys, values, scores) of every stored row (score >= threshold as unsigned, if given) in batches
        of at most ``batch_rows`` rows."""
        raise NotImplementedError

    def size(self) -> int:
        """Number of stored rows."""
        raise NotImplementedError

    def clear(self) -> None:
        """Removes every row."""
        raise NotImplementedError

    def flush(self) -> None:
        """Makes every completed write durable (persistent stores)."""

    def close(self) -> None:
        """Releases the store (persistent stores flush first)."""

    @property
    def dropped(self) -> int:
        """Rows the store itself evicted or refused because it was full (a store with a capacity)."""
        return 0

    def get_meta(self) -> Dict:
        """The small dict of table state kept with the store (op clock, epoch); {} when never set."""
        return dict(getattr(self, "_meta", {}))

    def set_meta(self, meta: Dict) -> None:
        self._meta = dict(meta)

    # convenience forms of ``write``
    def insert(self, keys, values, scores):
        self.write(keys, values, scores, keys[:0])

    def erase(self, keys):
        self.write(keys[:0], torch.empty(0, self.value_dim, dtype=self.value_dtype), keys.new_zeros(0, dtype=torch.int64),
                   keys)


def _unsigned_ge(scores: torch.Tensor, threshold: int) -> torch.Tensor:
    """scores (int64 holding uint64 bits) >= threshold, compared as unsigned."""
    flip = -(2**63)
    t = threshold & ((1 << 64) - 1)
    t = t - (1 << 64) if t >= 1 << 63 else t
    return (scores ^ flip) >= (t ^ flip)


class HostStore(BackingStore):
    """Rows in host memory: a CPU scored hash table of ``capacity`` slots with caller scores (customized policy).

    When full, an insert evicts the minimum-score row of its bucket if its own score is higher, otherwise it is
    refused, as in an all-HBM table of that capacity; such rows are counted in ``dropped``.

    Args:
        key_dtype, value_dim, value_dtype: the table's.
        capacity: slots (a multiple of ``bucket_capacity``).
        bucket_capacity: slots per bucket.

    Example:
        >>> s = HostStore(torch.int64, 8, torch.float32, 1024)
        >>> s.insert(torch.tensor([1, 2]), torch.ones(2, 8), torch.tensor([5, 6]))
        >>> s.find(torch.tensor([2, 3])).found
        tensor([ True, False])
    """

    def __init__(self, key_dtype: torch.dtype, value_dim: int, value_dtype: torch.dtype, capacity: int,
                 bucket_capacity: int = 128):
        from ._table import ScoredHashTable

        self.key_dtype, self.value_dim, self.value_dtype = key_dtype, value_dim, value_dtype
        self._t = ScoredHashTable(capacity, value_dim, value_dtype, key_dtype, bucket_capacity, "customized",
                                  device="cpu", check_keys=False)
        self._dropped = 0

    def find(self, keys):
        r = self._t.find(keys.contiguous(), return_scores=True)
        return StoreRows(r.values, r.scores, r.found)

    def write(self, put_keys, put_values, put_scores, erase_keys):
        # Erase first: a key both erased and put (never done by the cache) ends up stored.
        if erase_keys.numel():
            self._t.erase(erase_keys.contiguous())
        if put_keys.numel():
            stats = self._t.insert_or_assign(put_keys.contiguous(), put_values.contiguous(),
                                             put_scores.view(torch.int64).contiguous())
            self._dropped += int(stats[2]) + int(stats[3])

    def export_batches(self, batch_rows, threshold=None):
        cap = self._t.capacity()
        for off in range(0, cap, batch_rows):
            r = self._t.export_batch(off, min(batch_rows, cap - off), threshold=threshold)
            c = int(r.count)
            if c:
                yield r.keys[:c], r.values[:c], r.scores[:c]

    def size(self):
        return self._t.size()

    def clear(self):
        self._t.clear()

    @property
    def dropped(self):
        return self._dropped


@dataclasses.dataclass(frozen=True)
class DiskStoreSpec:
    """Where and how a caching table opens its ``DiskStore`` (the value of ``DynamicEmbTableOptions.backing_store``;
    a plain string is ``DiskStoreSpec(path)``).

    Args:
        path: the store's directory. Its parent must exist.
        create: create the store when ``path`` does not exist (else a missing directory is an error: use False
            to reopen a store that must be there, e.g. after a restart).
        read_only: open without write access (lookups only; any write raises StoreError).
        max_bytes: refuse writes once the store's files exceed this many bytes (a disk quota).

    Example:
        >>> DynamicEmbTableOptions(dim=64, max_capacity=1 << 24, storage="caching", hbm_budget_bytes=1 << 30,
        ...                        backing_store=DiskStoreSpec("/data/emb/t0", create=False))
    """

    path: str
    create: bool = True
    read_only: bool = False
    max_bytes: Optional[int] = None

    def __post_init__(self):
        if not isinstance(self.path, (str, os.PathLike)) or not str(self.path):
            raise ValueError(f"DiskStoreSpec.path: expected a directory path, got {self.path!r}")
        if self.max_bytes is not None and (not isinstance(self.max_bytes, int) or self.max_bytes <= 0):
            raise ValueError(f"DiskStoreSpec.max_bytes: expected None or a positive int, got {self.max_bytes!r}")

    def open(self, key_dtype, value_dim, value_dtype, capacity=None) -> "DiskStore":
        return DiskStore(str(self.path), key_dtype, value_dim, value_dtype, create=self.create,
                         read_only=self.read_only, max_bytes=self.max_bytes)


_META_KEY = b"__dynamicemb_store_meta__"  # not 8 bytes long: never a row key
_FORMAT = "dynamicemb-diskstore"
_VERSION = 1


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


class DiskStore(BackingStore):
    """Rows in a RocksDB database (``rocksdict``) in directory ``path``: key -> row bytes + 8-byte score.

    The database also holds one meta record: the layout (key dtype, dim, value dtype), the row count and the
    table's op clock/epoch. A reopened store must match the table's layout. Each ``write`` is one atomic RocksDB
    write batch, so an error (read-only, quota ``max_bytes``, disk full) leaves the store as it was.

    Args:
        path: directory of the database; its parent directory must exist.
        key_dtype, value_dim, value_dtype: the table's layout.
        create: create the database when ``path`` is missing (else a missing path raises StoreError).
        read_only: open read-only (writes raise StoreError).
        max_bytes: a quota on the database's files; a write that finds them above it raises StoreError.

    Raises:
        StoreError: missing path (create=False) or parent, a path that is no store, a corrupt or locked store, a
            read-only directory, a layout mismatch.

    Example:
        >>> s = DiskStore("/tmp/emb_t0", torch.int64, 8, torch.float32)
        >>> s.insert(torch.tensor([7]), torch.ones(1, 8), torch.tensor([3]))
        >>> s.close(); DiskStore("/tmp/emb_t0", torch.int64, 8, torch.float32, create=False).size()
        1
    """

    def __init__(self, path: str, key_dtype: torch.dtype, value_dim: int, value_dtype: torch.dtype,
                 create: bool = True, read_only: bool = False, max_bytes: Optional[int] = None):
        try:
            import rocksdict
        except ImportError as e:  # a dependency of the disk store only
            raise StoreError(f"DiskStore: expected the rocksdict package (pip install rocksdict), got {e}") from None
        self._rd = rocksdict
        self.path = os.path.abspath(str(path))
        self.key_dtype, self.value_dim, self.value_dtype = key_dtype, value_dim, value_dtype
        self.read_only = read_only
        self.max_bytes = max_bytes
        self._row_bytes = value_dim * _ELEM[value_dtype]
        self._db = None
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise StoreError(f"store path: expected a directory whose parent exists, got {self.path!r} (parent "
                             f"{parent!r} is missing)")
        exists = os.path.exists(self.path)
        if exists and not os.path.isdir(self.path):
            raise StoreError(f"store path: expected a directory, got the file {self.path!r}")
        if not exists and (not create or read_only):
            raise StoreError(f"store path: expected an existing store directory (create=False), got missing "
                             f"{self.path!r}")
        if exists and os.listdir(self.path) and not os.path.exists(os.path.join(self.path, "CURRENT")):
            raise StoreError(f"store path: expected an empty directory or a dynamicemb DiskStore, got {self.path!r}"
                             f" holding other files (nothing was changed)")
        if not read_only and exists and not os.access(self.path, os.W_OK):
            raise StoreError(f"store path: expected a writable directory, got read-only {self.path!r} (open it "
                             f"with read_only=True to look rows up)")
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(create and not read_only)
        opts.set_paranoid_checks(True)
        try:
            if read_only:
                self._db = rocksdict.Rdict(self.path, opts, access_type=rocksdict.AccessType.read_only())
            else:
                self._db = rocksdict.Rdict(self.path, opts)
        except Exception as e:  # rocksdict raises plain Exception with RocksDB's status text
            raise StoreError(f"store path {self.path!r}: cannot open the RocksDB store ({e}); it may be corrupt, "
                             f"read-only or in use by another process; nothing was changed") from None
        meta = self._read_meta()
        want = {"format": _FORMAT, "version": _VERSION, "key_dtype": _DTYPE_NAMES[key_dtype], "value_dim": value_dim,
                "value_dtype": _DTYPE_NAMES[value_dtype]}
        if meta is None:
            if read_only:
                self._meta_rec = dict(want, count=0, table={})
            else:
                self._meta_rec = dict(want, count=0, table={})
                self._commit([], [], [])
        else:
            bad = {k: (v, meta.get(k)) for k, v in want.items() if meta.get(k) != v}
            if bad:
                self._db.close()
                self._db = None
                raise StoreError(f"store path {self.path!r}: expected a store of layout {want}, got "
                                 + ", ".join(f"{k}={got!r}" for k, (_, got) in bad.items()))
            self._meta_rec = meta

    # ------------------------------------------------------------------ internals
    def _check_open(self):
        if self._db is None:
            raise StoreError(f"store {self.path!r}: expected an open store, got a closed one")

    def _read_meta(self) -> Optional[dict]:
        try:
            raw = self._db.get(_META_KEY)
        except Exception as e:
            raise StoreError(f"store path {self.path!r}: cannot read the store's meta record ({e}); corrupt store"
                             ) from None
        if raw is None:
            return None
        try:
            meta = json.loads(bytes(raw).decode())
            assert isinstance(meta, dict) and isinstance(meta.get("count"), int)
        except Exception:
            raise StoreError(f"store path {self.path!r}: expected a valid meta record, got {bytes(raw)[:80]!r} "
                             f"(corrupt store)") from None
        return meta

    def _keys_bytes(self, keys: torch.Tensor):
        b = keys.contiguous().view(torch.int64).numpy().astype("<i8").tobytes()
        return [b[i:i + 8] for i in range(0, len(b), 8)]

    def _get(self, kb):
        self._check_open()
        try:
            return self._db.get(kb) if kb else []
        except Exception as e:
            raise StoreError(f"store {self.path!r}: read failed ({e}); corrupt store? nothing was changed") from None

    def _commit(self, puts, erases, new_meta_count_delta):
        """One atomic write batch: puts [(key, value)], erases [key] and the meta record."""
        if self.read_only:
            raise StoreError(f"store {self.path!r}: expected a writable store, got one opened read_only=True "
                             f"(nothing was written)")
        if self.max_bytes is not None and puts and _dir_bytes(self.path) > self.max_bytes:
            raise StoreError(f"store {self.path!r}: full: expected at most max_bytes={self.max_bytes} bytes of files,"
                             f" got {_dir_bytes(self.path)} (nothing was written)")
        meta = dict(self._meta_rec)
        meta["count"] = int(meta.get("count", 0)) + int(sum(new_meta_count_delta) if new_meta_count_delta else 0)
        wb = self._rd.WriteBatch(raw_mode=True)
        for k in erases:
            wb.delete(k)
        for k, v in puts:
            wb.put(k, v)
        wb.put(_META_KEY, json.dumps(meta, sort_keys=True).encode())
        try:
            self._db.write(wb)
        except Exception as e:
            raise StoreError(f"store {self.path!r}: write failed ({e}); disk full or read-only? nothing was "
                             f"written") from None
        self._meta_rec = meta

    def _parse(self, vals, n):
        import numpy as np  # only the disk store needs numpy (torch does not require it)
        rb = self._row_bytes
        values = torch.zeros(n, self.value_dim, dtype=self.value_dtype)
        scores = torch.zeros(n, dtype=torch.int64)
        found = torch.tensor([v is not None for v in vals], dtype=torch.bool) if n else torch.zeros(0, dtype=torch.bool)
        idx = [i for i, v in enumerate(vals) if v is not None]
        if idx:
            blobs = [vals[i] for i in idx]
            if any(len(b) != rb + 8 for b in blobs):
                bad = next(len(b) for b in blobs if len(b) != rb + 8)
                raise StoreError(f"store {self.path!r}: expected rows of {rb + 8} bytes, got {bad} (corrupt store)")
            arr = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(idx), rb + 8)
            it = torch.tensor(idx, dtype=torch.int64)
            values[it] = torch.from_numpy(arr[:, :rb].copy()).view(self.value_dtype).view(len(idx), self.value_dim)
            scores[it] = torch.from_numpy(arr[:, rb:].copy()).view(torch.int64).view(len(idx))
        return values, scores, found

    # ------------------------------------------------------------------ interface
    def find(self, keys):
        n = keys.numel()
        values, scores, found = self._parse(self._get(self._keys_bytes(keys)), n)
        return StoreRows(values, scores, found)

    def write(self, put_keys, put_values, put_scores, erase_keys):
        import numpy as np  # only the disk store needs numpy (torch does not require it)
        self._check_open()
        pk = self._keys_bytes(put_keys)
        ek = self._keys_bytes(erase_keys)
        # exact row count: which puts are new and which erasures remove a row (duplicates counted once)
        put_set = dict.fromkeys(pk)
        erase_set = dict.fromkeys(k for k in ek if k not in put_set)
        present = self._get(list(put_set) + list(erase_set))
        delta = sum(v is None for v in present[:len(put_set)]) - sum(v is not None for v in present[len(put_set):])
        if pk:
            rows = put_values.contiguous().view(torch.uint8).numpy().reshape(len(pk), self._row_bytes)
            sc = put_scores.contiguous().view(torch.int64).numpy().astype("<i8").view(np.uint8).reshape(len(pk), 8)
            blob = np.concatenate([rows, sc], axis=1).tobytes()
            w = self._row_bytes + 8
            puts = [(k, blob[i * w:(i + 1) * w]) for i, k in enumerate(pk)]
        else:
            puts = []
        self._commit(puts, list(erase_set), [delta])

    def export_batches(self, batch_rows, threshold=None):
        import numpy as np  # only the disk store needs numpy (torch does not require it)
        self._check_open()
        it = self._db.iter()
        it.seek_to_first()
        while True:
            kb, vb = [], []
            try:
                while it.valid() and len(kb) < batch_rows:
                    k = it.key()
                    if len(k) == 8:
                        kb.append(k)
                        vb.append(it.value())
                    it.next()
            except Exception as e:
                raise StoreError(f"store {self.path!r}: read failed while exporting ({e}); corrupt store?") from None
            if not kb:
                return
            keys = torch.from_numpy(np.frombuffer(b"".join(kb), dtype="<i8").copy()).view(self.key_dtype)
            values, scores, _ = self._parse(vb, len(kb))
            if threshold is not None:
                keep = _unsigned_ge(scores, threshold)
                keys, values, scores = keys[keep], values[keep], scores[keep]
            if keys.numel():
                yield keys, values, scores

    def size(self):
        return int(self._meta_rec.get("count", 0))

    def clear(self):
        self._check_open()
        keys = []
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            if len(it.key()) == 8:
                keys.append(it.key())
            it.next()
        self._commit([], keys, [-self.size()])

    def get_meta(self):
        return dict(self._meta_rec.get("table", {}))

    def set_meta(self, meta):
        if self.read_only:
            return
        self._meta_rec = dict(self._meta_rec, table=dict(meta))
        self._commit([], [], [])

    def flush(self):
        self._check_open()
        if not self.read_only:
            try:
                self._db.flush()
            except Exception as e:
                raise StoreError(f"store {self.path!r}: flush failed ({e})") from None

    def close(self):
        if self._db is not None:
            try:
                if not self.read_only:
                    self._db.flush()
            finally:
                self._db.close()
                self._db = None

    def checkpoint(self, path: str) -> None:
        """Writes a consistent RocksDB checkpoint (hard links where possible) of the store to new directory
        ``path``; open it later with ``DiskStore(path, ..., create=False)``."""
        self._check_open()
        try:
            self._rd.Checkpoint(self._db).create_checkpoint(path)
        except Exception as e:
            raise StoreError(f"store {self.path!r}: checkpoint to {path!r} failed ({e})") from None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


StoreFactory = Callable[[torch.dtype, int, torch.dtype, int], BackingStore]


def make_store(spec: Union[None, str, DiskStoreSpec, StoreFactory], key_dtype: torch.dtype, value_dim: int,
               value_dtype: torch.dtype, capacity: int, bucket_capacity: int, device=None) -> BackingStore:
    """Opens the backing store a ``DynamicEmbTableOptions.backing_store`` value describes (None: ``HostStore`` of
    ``capacity`` slots; a path or ``DiskStoreSpec``: ``DiskStore``; ``UvaStoreSpec``: ``UvaStore`` of ``capacity``
    slots on ``device``; a callable: its result)."""
    from ._uva_store import UvaStoreSpec

    if spec is None:
        return HostStore(key_dtype, value_dim, value_dtype, capacity, bucket_capacity)
    if isinstance(spec, UvaStoreSpec):
        return spec.open(key_dtype, value_dim, value_dtype, capacity, bucket_capacity, device)
    if isinstance(spec, (str, os.PathLike)):
        spec = DiskStoreSpec(str(spec))
    if isinstance(spec, DiskStoreSpec):
        return spec.open(key_dtype, value_dim, value_dtype, capacity)
    store = spec(key_dtype, value_dim, value_dtype, capacity)
    if not isinstance(store, BackingStore):
        raise TypeError(f"backing_store: expected its factory to return a BackingStore, got {type(store).__name__}")
    return store
