"""Checkpoints of ``BatchedDynamicEmbeddingTables``: state_dict entries and directory dumps.

state_dict: per table ``{prefix}{name}.{keys,digests,scores,values,counters,epoch}`` (the scored hash table's own
tensors in slot order, so a round trip is bit-exact, evictions included; ``epoch`` is the 0-d int64 epoch of the
epoch_lru / epoch_lfu policies), the same per admission table under ``{prefix}{name}.admission.``, the buffers
``learning_rate``/``step``/``refused_count``, and ``_extra_state``: the layout every entry must match (dims, dtypes,
key dtype, optimizer and its state width, score policy). ``epoch`` may be absent (checkpoints written before it was
saved): the epoch is then left as it is.

dump(dir): ``meta.json`` plus per table ``{name}.{keys,values,scores,slots}.{generation}.bin``: keys (key dtype),
rows [embedding | optimizer state] (table dtype), uint64 scores as int64 bits and int64 slot indices, raw
little-endian bytes written in chunks of ``chunk_rows`` slots (so a table never needs a second full copy), each
file's byte count and CRC32 in the meta with the table's row count, capacity, op clock and epoch. A load puts the
rows back into their slots when the capacity fits (so later evictions choose exactly as in the source), else
re-inserts them. ``score_threshold`` dumps only rows scored >= threshold (incremental) plus a live index
``{name}.live.{keys,slots,scores}.{generation}.bin`` of every stored key: loading it on top of its base gives the
source's state exactly (keys evicted since the base are dropped, untouched rows come from the base). A table with
admission also writes its frequency counts (the admission table) as ``{name}.admission.*``, always whole.
Every dump writes files of a fresh generation and replaces meta.json last (atomically), so a failed re-dump leaves
the previous one loadable. Dumps without a generation, slots or live index (older ones) still load.

Storage modes: "hbm" and "hybrid" tables save the same slot-order entries (a hybrid table's ``values`` is one
(capacity, dim) CPU tensor joining its HBM and host rows). A caching table's state_dict holds its rows instead of
slots: ``{name}.rows.{keys,values,scores}`` (every row of cache and store, on the CPU), ``counters`` and ``epoch``;
for stores larger than host RAM use ``dump``, which streams the cache and then the store in chunks. Dumps have one
format for every mode, so a dump moves between modes; loading into a caching table puts the rows into its store
(the cache refills on use).

Loading validates everything (layout, every meta field, file sizes, CRCs, capacities, tensor dtypes and shapes)
before anything changes; a failure raises ``ValueError`` (state_dict: torch's RuntimeError listing our messages)
and leaves the module unchanged.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import secrets
import time
import zlib
from typing import Dict, List, Optional

import torch

from ._caching import CachedTable
from ._hash import fmix64_tensor
from ._hybrid import HybridTable
from ._table import _NUM_COUNTERS, ScoredHashTable, slot_integrity_errors

__all__ = ["module_meta", "save_tables", "load_tables", "dump", "load", "CHECKPOINT_VERSION"]

CHECKPOINT_VERSION = 1
_TABLE_ENTRIES = ("keys", "digests", "scores", "values", "counters")  # required; "epoch" is optional
_CACHED_ENTRIES = ("rows.keys", "rows.values", "rows.scores", "counters")  # a caching table's
_BUFFERS = ("learning_rate", "step", "refused_count")
_DUMP_FILES = ("keys", "values", "scores")
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64", torch.uint64: "uint64"}
_DTYPES = {v: k for k, v in _DTYPE_NAMES.items()}
_EPOCH_END = 2**32  # epochs are the high 32 bits of epoch_* scores
_CLOCK_END = 2**63


def module_meta(m) -> dict:
    """The layout a checkpoint of ``m`` records and must match when loaded."""
    opt = m.optimizer.signature()
    opt["betas"] = list(opt["betas"]) if "betas" in opt else None
    return {
        "format": "dynamicemb",
        "version": CHECKPOINT_VERSION,
        "key_dtype": _DTYPE_NAMES[m.key_dtype],
        "optimizer": opt,
        "tables": {
            name: {
                "dim": m.dims[i],
                "state_dim": m.state_dims[i],
                "row_width": m.row_widths[i],
                "dtype": _DTYPE_NAMES[m.options[i].dtype],
                "score_policy": m.options[i].score_policy,
                "bucket_capacity": m.options[i].bucket_capacity,
                "max_capacity": m.options[i].max_capacity,
                "admission": m.admission_tables[i] is not None,
            }
            for i, name in enumerate(m.table_names)
        },
    }


def _layout_errors(mine: dict, theirs) -> list:
    """Differences in what must match (hyper-parameters like lr may differ)."""
    if not isinstance(theirs, dict) or theirs.get("format") != "dynamicemb":
        return [f"not a dynamicemb checkpoint (metadata {str(theirs)[:80]!r})"]
    errs = []
    if theirs.get("version") != CHECKPOINT_VERSION:
        errs.append(f"version: expected {CHECKPOINT_VERSION}, got {theirs.get('version')!r}")
    if theirs.get("key_dtype") != mine["key_dtype"]:
        errs.append(f"key_dtype: expected {mine['key_dtype']}, got {theirs.get('key_dtype')!r}")
    to = theirs.get("optimizer")
    got_opt = to.get("name") if isinstance(to, dict) else None
    if got_opt != mine["optimizer"]["name"]:
        errs.append(f"optimizer: expected {mine['optimizer']['name']!r}, got "
                    f"{got_opt if isinstance(to, dict) else to!r}")
    tt = theirs.get("tables")
    if not isinstance(tt, dict):
        return errs + [f"tables: expected a mapping of table name to layout, got {str(tt)[:80]!r}"]
    if set(tt) != set(mine["tables"]):
        errs.append(f"tables: expected {sorted(mine['tables'])}, got {sorted(map(str, tt))}")
    for name, want in mine["tables"].items():
        got = tt.get(name)
        if got is None:
            continue
        if not isinstance(got, dict):
            errs.append(f"table {name!r}: expected a mapping of its layout, got {str(got)[:80]!r}")
            continue
        # row_width: absent before RowWiseAdagrad rows were padded to 4 columns (then it was dim + state_dim)
        if "row_width" not in got and isinstance(got.get("dim"), int) and isinstance(got.get("state_dim"), int):
            got = {**got, "row_width": got["dim"] + got["state_dim"]}
        for k in ("dim", "state_dim", "row_width", "dtype", "score_policy", "bucket_capacity"):
            if got.get(k) != want[k]:
                errs.append(f"table {name!r} {k}: expected {want[k]!r}, got {got.get(k)!r}")
    return errs


def _all_tables(m):
    """(state_dict prefix, owning list, index) of every table and admission table of ``m``."""
    for i, name in enumerate(m.table_names):
        yield f"{name}.", m.tables, i
        if m.admission_tables[i] is not None:
            yield f"{name}.admission.", m.admission_tables, i


def _blank_like(table: ScoredHashTable, capacity: int) -> ScoredHashTable:
    """An empty table configured like ``table`` (built aside, swapped in once a load has fully succeeded). A
    hybrid table stays hybrid, with its own capacity, HBM rows (it does not grow) and host-row layout."""
    if isinstance(table, HybridTable):
        return HybridTable(table.capacity(), table.value_dim, table.value_dtype, table.key_dtype,
                           table.bucket_capacity, table.score_policy, initializer=table.initializer,
                           device=table.device, hbm_rows=table.hbm_rows, _slot_major=table._slot_major)
    return ScoredHashTable(capacity, table.value_dim, table.value_dtype, table.key_dtype, table.bucket_capacity,
                           table.score_policy, max_capacity=table.max_capacity, initializer=table.initializer,
                           device=table.device, check_keys=table.check_keys)


# ---------------------------------------------------------------------- state_dict
def _entries(table) -> tuple:
    return _CACHED_ENTRIES if isinstance(table, CachedTable) else _TABLE_ENTRIES


def save_tables(m, destination: Dict, prefix: str):
    for sub, owner, i in _all_tables(m):
        table = owner[i]
        sd = table.state_dict()
        for k in _entries(table):
            destination[prefix + sub + k] = sd[k]
        destination[prefix + sub + "epoch"] = torch.tensor(table.epoch, dtype=torch.int64)


def load_tables(m, state_dict, prefix, strict, missing_keys, unexpected_keys, error_msgs):
    """Validates every entry of ``m`` first and applies them only if all are valid: the module loads whole or not
    at all. torch calls every module's ``_load_from_state_dict`` with strict=True and raises for missing or
    unexpected keys only after all of them returned, so a missing entry, or an unexpected one naming a table or
    buffer, is an error here even under ``load_state_dict(strict=False)`` (else a refused strict load would have
    changed the module). Any other unknown entry is listed as unexpected, and is an error when the module's own
    ``load_state_dict`` was called with strict=True."""
    errs = []
    meta_key = prefix + "_extra_state"
    if meta_key not in state_dict:
        missing_keys.append(meta_key)
        errs.append("missing the checkpoint layout entry '_extra_state'")
    else:
        errs += _layout_errors(module_meta(m), state_dict[meta_key])
    expected = {meta_key}
    for b in _BUFFERS:
        key = prefix + b
        expected.add(key)
        own = getattr(m, b)
        if key not in state_dict:
            missing_keys.append(key)
            errs.append(f"missing entry {b!r}")
            continue
        v = state_dict[key]
        if not isinstance(v, torch.Tensor) or v.shape != own.shape:
            errs.append(f"{b}: expected a tensor of shape {tuple(own.shape)}, got {getattr(v, 'shape', type(v))}")
        else:
            errs += _buffer_errors(b, v)
    staged = []
    for sub, owner, i in _all_tables(m):
        table = owner[i]
        entry = {}
        names = _entries(table)
        for k in names + ("epoch",):
            key = prefix + sub + k
            expected.add(key)
            if key in state_dict:
                entry[k] = state_dict[key]
            elif k != "epoch":
                missing_keys.append(key)
                errs.append(f"missing entry {sub + k!r}")
        if not all(k in entry for k in names):
            continue
        table_errs = _rows_state_errors(table, entry) if isinstance(table, CachedTable) else _table_state_errors(
            table, entry)
        errs += [f"{sub[:-1]}: {e}" for e in table_errs]
        if not table_errs:
            staged.append((owner, i, entry))
    strict_call = getattr(m, "_load_strict", None)  # set by the module's load_state_dict; None when nested
    for key in state_dict:
        if key.startswith(prefix) and key not in expected:
            unexpected_keys.append(key)
            if _belongs_to(m, key[len(prefix):]) or strict_call:
                errs.append(f"unexpected entry {key[len(prefix):]!r} (a table, admission table or entry this "
                            f"module does not have)")
    if errs:
        error_msgs.extend(errs)
        return
    # Everything checked: build the new tables aside (allocations may fail), then swap them in.
    built = []
    for owner, i, entry in staged:
        if isinstance(owner[i], CachedTable):  # applied in place below (a store is not built twice)
            built.append((owner, i, entry))
            continue
        e = dict(entry, scores=entry["scores"].view(torch.int64))
        if "epoch" in e:
            e["epoch"] = int(e["epoch"])
        t = _blank_like(owner[i], owner[i].bucket_capacity)
        t.load_state_dict(e)
        built.append((owner, i, t))
    for owner, i, t in built:
        if isinstance(owner[i], CachedTable):
            _apply_rows(owner[i], t["rows.keys"], t["rows.values"], t["rows.scores"], int(t["counters"][0]),
                        int(t["epoch"]) if "epoch" in t else None, replace=True)
        else:
            owner[i] = t
    with torch.no_grad():
        for b in _BUFFERS:
            if prefix + b in state_dict:
                getattr(m, b).copy_(state_dict[prefix + b])
    m.optimizer.lr = float(m.learning_rate)
    m._after_load()


def _buffer_errors(name: str, v: torch.Tensor) -> list:
    """Values of the module buffers: a NaN/negative lr or a negative step or count would poison the next update."""
    if name == "refused_count":
        if v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool:
            return [f"refused_count: expected an integer tensor, got {v.dtype}"]
        if v.numel() and bool((v < 0).any()):
            return [f"refused_count: expected counts >= 0, got {v.tolist()}"]
        return []
    if not v.dtype.is_floating_point:
        return [f"{name}: expected a floating-point tensor, got {v.dtype}"]
    x = float(v)
    if not math.isfinite(x) or x < 0:
        return [f"{name}: expected a finite number >= 0, got {x}"]
    return []


def _apply_rows(table: CachedTable, keys, values, scores, clock: int, epoch: Optional[int], replace: bool):
    table.load_rows(keys.cpu(), values.cpu(), scores.cpu().view(torch.int64), replace=replace)
    table.counters[0] = clock
    if epoch is not None:
        table.set_epoch(epoch)


def _rows_state_errors(table: CachedTable, s) -> list:
    """Checks a caching table's state_dict entries (rows, not slots)."""
    if not all(isinstance(v, torch.Tensor) for v in s.values()):
        return [f"entries must be tensors, got {', '.join(f'{k}: {type(v).__name__}' for k, v in s.items())}"]
    errs = []
    keys, values, scores, counters = s["rows.keys"], s["rows.values"], s["rows.scores"], s["counters"]
    n = keys.numel()
    if keys.dtype != table.key_dtype or keys.dim() != 1:
        errs.append(f"rows.keys: expected a 1-d {table.key_dtype} tensor, got {tuple(keys.shape)} {keys.dtype}")
    if values.dtype != table.value_dtype or tuple(values.shape) != (n, table.value_dim):
        errs.append(f"rows.values: expected ({n}, {table.value_dim}) {table.value_dtype}, got {tuple(values.shape)} "
                    f"{values.dtype}")
    if scores.dtype not in (torch.int64, torch.uint64) or tuple(scores.shape) != (n,):
        errs.append(f"rows.scores: expected ({n},) int64, got {tuple(scores.shape)} {scores.dtype}")
    if counters.dtype != torch.int64 or counters.dim() != 1 or counters.numel() < 1 or int(counters[0]) < 0:
        errs.append(f"counters: expected a 1-d int64 tensor starting with a clock >= 0, got {counters.tolist()!r}")
    if "epoch" in s and (s["epoch"].numel() != 1 or not 0 <= int(s["epoch"]) < _EPOCH_END):
        errs.append(f"epoch: expected one integer in [0, 2**32), got {s['epoch'].tolist()!r}")
    return errs


def _belongs_to(m, rest: str) -> bool:
    head = rest.split(".", 1)[0]
    return head in m.table_names or head in _BUFFERS + ("_extra_state",)


def _table_state_errors(table: ScoredHashTable, s) -> list:
    if not all(isinstance(v, torch.Tensor) for v in s.values()):
        return [f"entries must be tensors, got {', '.join(f'{k}: {type(v).__name__}' for k, v in s.items())}"]
    errs = []
    keys, values, counters = s["keys"], s["values"], s["counters"]
    cap = keys.numel()
    if keys.dtype != table.key_dtype:
        errs.append(f"keys: expected dtype {table.key_dtype}, got {keys.dtype}")
    if keys.dim() != 1:
        errs.append(f"keys: expected a 1-d tensor, got shape {tuple(keys.shape)}")
    if values.dtype != table.value_dtype:
        errs.append(f"values: expected dtype {table.value_dtype}, got {values.dtype}")
    if values.dim() != 2 or values.shape[1] != table.value_dim:
        errs.append(f"values: expected shape (capacity, {table.value_dim}) ([embedding | optimizer state]), got "
                    f"{tuple(values.shape)}")
    elif values.shape[0] != cap:
        errs.append(f"values: expected {cap} rows like keys, got {values.shape[0]}")
    if cap == 0 or cap % table.bucket_capacity or cap > table.max_capacity:
        errs.append(f"keys: expected a capacity that is a multiple of {table.bucket_capacity} and <= max_capacity="
                    f"{table.max_capacity}, got {cap}")
    for k, dtypes, what in (("scores", (torch.int64, torch.uint64), "int64"), ("digests", (torch.uint8,), "uint8")):
        t = s[k]
        if t.dim() != 1 or t.numel() != cap or t.dtype not in dtypes:
            errs.append(f"{k}: expected a 1-d tensor of {cap} {what} entries, got shape {tuple(t.shape)} {t.dtype}")
    # counters: [clock, size, spare, spare]; older tables may have fewer
    if counters.dtype != torch.int64 or counters.dim() != 1 or not 1 <= counters.numel() <= _NUM_COUNTERS:
        errs.append(f"counters: expected a 1-d int64 tensor of 1..{_NUM_COUNTERS} entries ([clock, size, ...]), got "
                    f"shape {tuple(counters.shape)} {counters.dtype}")
    else:
        c = counters.tolist()
        if c[0] < 0:
            errs.append(f"counters: expected a clock (entry 0) >= 0, got {c[0]}")
        if len(c) > 1 and not 0 <= c[1] <= cap:
            errs.append(f"counters: expected a size (entry 1) in [0, {cap}], got {c[1]}")
        elif not errs:  # shapes are right: the slots must be findable (as dump/load re-inserting them ensures)
            errs += slot_integrity_errors(keys, s["digests"], c[1] if len(c) > 1 else None, table.bucket_capacity)
    if "epoch" in s:
        e = s["epoch"]
        if e.numel() != 1 or e.dtype.is_floating_point or e.dtype.is_complex or e.dtype == torch.bool or not (
            0 <= int(e) < _EPOCH_END
        ):
            errs.append(f"epoch: expected one integer in [0, 2**32), got {e.tolist()!r} ({e.dtype})")
    return errs


# ---------------------------------------------------------------------- dump / load
def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def _elem_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _file_name(stem: str, k: str, gen: Optional[str]) -> str:
    """``{stem}.{k}.{generation}.bin``; dumps written before generations: ``{stem}.{k}.bin``."""
    return f"{stem}.{k}.bin" if gen is None else f"{stem}.{k}.{gen}.bin"


def _write_files(path: str, stem: str, gen: str, export, names, written: List[str]) -> dict:
    """Writes ``{stem}.{k}.{gen}.bin`` for k in ``names`` from the ``export`` chunks (dicts of tensors, see
    ``_exports``); returns {count, files}. Names of opened files go to ``written`` (removed if the dump fails)."""
    files = {}
    for k in names:
        fn = os.path.join(path, _file_name(stem, k, gen))
        written.append(fn)
        files[k] = open(fn, "wb")
    crcs = {k: 0 for k in names}
    sizes = {k: 0 for k in names}
    count = 0
    try:
        for chunk in export:
            count += chunk["keys"].numel()
            for k in names:
                b = _tensor_bytes(chunk[k])
                files[k].write(b)
                crcs[k] = zlib.crc32(b, crcs[k])
                sizes[k] += len(b)
        for f in files.values():
            f.flush()
            os.fsync(f.fileno())
    finally:
        for f in files.values():
            f.close()
    return dict(count=count, files={k: {"bytes": sizes[k], "crc32": crcs[k]} for k in names})


def _exports(table: ScoredHashTable, threshold: Optional[int], chunk_rows: int):
    """Chunks {keys, values, scores, slots} of the stored rows (score >= threshold if given). A caching table's rows
    (cache, then backing store) have no slot of one table: slots -1, and a load re-inserts them."""
    if isinstance(table, CachedTable):
        for keys, values, scores in table.export_chunks(chunk_rows, threshold):
            yield dict(keys=keys, values=values, scores=scores,
                       slots=torch.full((keys.numel(),), -1, dtype=torch.int64))
        return
    cap = table.capacity()
    for off in range(0, cap, chunk_rows):
        r = table.export_batch(off, min(chunk_rows, cap - off), threshold=threshold)
        c = int(r.count.item())
        if c:
            yield dict(keys=r.keys[:c], values=r.values[:c], scores=r.scores[:c], slots=r.slots[:c])


def _dump_table(path: str, stem: str, gen: str, table: ScoredHashTable, threshold: Optional[int], chunk_rows: int,
                written: List[str]) -> dict:
    """Writes the table's rows (keys, values, scores, slots; only scores >= threshold if given) and, for an
    incremental dump, its live index (keys, slots, scores of every stored key); returns the table's meta block."""
    info = _write_files(path, stem, gen, _exports(table, threshold, chunk_rows), _DUMP_FILES + ("slots",), written)
    if threshold is not None:
        info["live"] = _write_files(path, f"{stem}.live", gen, _exports(table, None, chunk_rows),
                                    ("keys", "slots", "scores"), written)
    cap = table.capacity()
    if isinstance(table, CachedTable):  # rows of cache + store: the capacity a table needs to hold them all
        bc = table.bucket_capacity
        rows = max(info["count"], info["live"]["count"] if "live" in info else 0)
        cap = max(cap, -(-rows // bc) * bc)
    info.update(capacity=cap, clock=int(table.counters[0]), epoch=table.epoch)
    return info


def _referenced_files(path: str) -> List[str]:
    """The data files the current meta.json of ``path`` names (none if there is no readable one)."""
    try:
        with open(os.path.join(path, "meta.json")) as f:
            meta = json.load(f)
        gen = meta.get("generation")
        out = []
        for name, info in meta["tables"].items():
            for stem, block in ((name, info), (f"{name}.admission", info.get("admission_table"))):
                if not isinstance(block, dict):
                    continue
                out += [_file_name(stem, k, gen) for k in block.get("files", {})]
                out += [_file_name(f"{stem}.live", k, gen) for k in (block.get("live") or {}).get("files", {})]
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def dump(m, path: str, score_threshold=None, chunk_rows: int = 1 << 20):
    """Writes ``m`` to directory ``path`` (see the module docstring for the format).

    Atomic: the data files carry a fresh generation in their names and meta.json (naming the generation) is
    replaced last, so a dump that fails midway leaves the previous dump in ``path`` loadable (the failed
    generation's files are removed); the previous generation's files are removed once the new meta.json is in.

    Args:
        m: a BatchedDynamicEmbeddingTables.
        path: directory, created if needed.
        score_threshold: dump only rows whose score (unsigned) is >= it (incremental dump), plus the live index
            (keys, slots and scores of every stored key) that lets a load drop the keys evicted since the base;
            admission tables (id frequency counts) are always dumped whole.
        chunk_rows: slots exported per step.

    Raises:
        ValueError: a bad ``chunk_rows``. OSError: from the file system (the previous dump stays loadable).

    Example:
        >>> dump(m, "/ckpt/step1000"); dump(m, "/ckpt/step1100.inc", score_threshold=last_clock)
    """
    if not isinstance(chunk_rows, int) or chunk_rows <= 0:
        raise ValueError(f"chunk_rows: expected a positive int, got {chunk_rows!r}")
    os.makedirs(path, exist_ok=True)
    old_files = _referenced_files(path)
    gen = f"{time.time_ns():x}{os.getpid():x}{secrets.token_hex(2)}"
    meta = module_meta(m)
    meta["generation"] = gen
    meta["incremental"] = score_threshold is not None
    meta["score_threshold"] = None if score_threshold is None else int(score_threshold)
    meta["learning_rate"] = float(m.learning_rate)
    meta["step"] = float(m.step)
    written: List[str] = []
    try:
        for i, name in enumerate(m.table_names):
            meta["tables"][name].update(
                _dump_table(path, name, gen, m.tables[i], score_threshold, chunk_rows, written))
            at = m.admission_tables[i]
            meta["tables"][name]["admission_table"] = (
                None if at is None else _dump_table(path, f"{name}.admission", gen, at, None, chunk_rows, written))
        tmp = os.path.join(path, f"meta.json.{gen}.tmp")
        written.append(tmp)
        with open(tmp, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, "meta.json"))
    except BaseException:
        for fn in written:
            try:
                os.remove(fn)
            except OSError:
                pass
        raise
    keep = set(os.path.basename(fn) for fn in written)
    for fn in old_files:
        if fn not in keep:
            try:
                os.remove(os.path.join(path, fn))
            except OSError:
                pass


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_field(errs: List[str], where: str, d: dict, k: str, lo: int, hi: Optional[int] = None) -> Optional[int]:
    """d[k] if it is an int in [lo, hi) (hi None: unbounded); else records an error naming the field."""
    rng = f">= {lo}" if hi is None else f"in [{lo}, {hi})"
    if k not in d:
        errs.append(f"{where}{k}: missing (expected an int {rng})")
        return None
    v = d[k]
    if not _is_int(v) or v < lo or (hi is not None and v >= hi):
        errs.append(f"{where}{k}: expected an int {rng}, got {v!r}")
        return None
    return v


def _block_errors(where: str, info, table: ScoredHashTable, key_dtype: torch.dtype) -> list:
    """Checks one table's meta block (count, capacity, clock, epoch, files) against ``table``."""
    if not isinstance(info, dict):
        return [f"{where[:-1]}: expected a mapping, got {str(info)[:80]!r}"]
    errs = []
    count = _int_field(errs, where, info, "count", 0)
    cap = _int_field(errs, where, info, "capacity", 1)
    _int_field(errs, where, info, "clock", 0, _CLOCK_END)
    _int_field(errs, where, info, "epoch", 0, _EPOCH_END)
    if cap is not None and cap % table.bucket_capacity:
        errs.append(f"{where}capacity: expected a multiple of bucket_capacity={table.bucket_capacity}, got {cap}")
    if count is not None and cap is not None and count > cap:
        errs.append(f"{where}count: expected <= capacity={cap}, got {count}")
    row = {"keys": _elem_bytes(key_dtype), "values": table.value_dim * _elem_bytes(table.value_dtype),
           "scores": 8, "slots": 8}
    errs += _files_errors(where, info.get("files"), _DUMP_FILES, ("slots",), row, count)
    live = info.get("live")
    if live is not None:  # the live index of an incremental dump
        if not isinstance(live, dict):
            return errs + [f"{where}live: expected null or a mapping {{count, files}}, got {str(live)[:80]!r}"]
        lc = _int_field(errs, f"{where}live.", live, "count", 0)
        if lc is not None and cap is not None and lc > cap:
            errs.append(f"{where}live.count: expected <= capacity={cap}, got {lc}")
        errs += _files_errors(f"{where}live.", live.get("files"), ("keys", "slots", "scores"), (), row, lc)
    return errs


def _files_errors(where: str, files, required, optional, row: dict, count: Optional[int]) -> list:
    """Checks {name: {bytes, crc32}} of the data files: every required name, bytes == row size * count."""
    if not isinstance(files, dict):
        return [f"{where}files: expected a mapping of {list(required)} to {{bytes, crc32}}, got {str(files)[:80]!r}"]
    errs = []
    for k in tuple(required) + tuple(x for x in optional if x in files):
        f = files.get(k)
        if not isinstance(f, dict):
            errs.append(f"{where}files.{k}: expected a mapping {{bytes, crc32}}, got {str(f)[:80]!r}")
            continue
        nbytes = _int_field(errs, f"{where}files.{k}.", f, "bytes", 0)
        _int_field(errs, f"{where}files.{k}.", f, "crc32", 0, 2**32)
        if nbytes is not None and count is not None and nbytes != row[k] * count:
            errs.append(f"{where}files.{k}.bytes: expected {row[k]} * count={count} = {row[k] * count}, got "
                        f"{nbytes}")
    return errs


def _meta_errors(m, meta: dict) -> list:
    """Every field ``load`` reads, checked before anything is read or applied."""
    errs = _layout_errors(module_meta(m), meta)
    if errs:
        return errs
    gen = meta.get("generation")
    if gen is not None and not (isinstance(gen, str) and gen.isalnum()):
        errs.append(f"generation: expected null or an alphanumeric string, got {gen!r}")
    if not isinstance(meta.get("incremental"), bool):
        errs.append(f"incremental: expected true or false, got {meta.get('incremental')!r}")
    for k in ("learning_rate", "step"):
        v = meta.get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            errs.append(f"{k}: expected a finite number >= 0, got {v!r}")
    for i, name in enumerate(m.table_names):
        info = meta["tables"][name]
        errs += _block_errors(f"table {name!r} ", info, m.tables[i], m.key_dtype)
        if "admission_table" not in info:
            errs.append(f"table {name!r} admission_table: missing (expected null or a mapping)")
        elif info["admission_table"] is not None and m.admission_tables[i] is not None:
            errs += _block_errors(f"table {name!r} admission_table.", info["admission_table"],
                                  m.admission_tables[i], m.key_dtype)
    return errs


def _read(path, stem, k, want, dtype, gen=None):
    fn = os.path.join(path, _file_name(stem, k, gen))
    if not os.path.exists(fn):
        raise ValueError(f"load({path!r}): missing file {fn}")
    with open(fn, "rb") as f:
        b = f.read()
    if len(b) != want["bytes"]:
        raise ValueError(f"load({path!r}): {fn}: expected {want['bytes']} bytes, got {len(b)} (truncated or corrupt)")
    if zlib.crc32(b) != want["crc32"]:
        raise ValueError(f"load({path!r}): {fn}: CRC32 mismatch (corrupt file)")
    return torch.frombuffer(bytearray(b), dtype=dtype) if b else torch.empty(0, dtype=dtype)


def _live_rows(path, stem, gen, info, old: ScoredHashTable, keys, values):
    """The state an incremental dump with a live index describes: every live key with its recorded slot and score,
    its row from the delta, else from ``old`` (unchanged since the base). Keys evicted since the base are dropped.
    Returns (keys, values, scores, slots, count) on the host."""
    live = info["live"]
    lk = _read(path, f"{stem}.live", "keys", live["files"]["keys"], old.key_dtype, gen)
    ls = _read(path, f"{stem}.live", "slots", live["files"]["slots"], torch.int64, gen)
    lsc = _read(path, f"{stem}.live", "scores", live["files"]["scores"], torch.int64, gen)
    cur = old.find(lk.to(old.device))
    rows, found = cur.values.cpu(), cur.found.cpu()
    l64 = lk.view(torch.int64)
    in_delta = torch.zeros(lk.numel(), dtype=torch.bool)
    if keys.numel():
        order = torch.argsort(keys.view(torch.int64))
        sk = keys.view(torch.int64)[order]
        idx = torch.searchsorted(sk, l64).clamp(max=sk.numel() - 1)
        in_delta = sk[idx] == l64
        rows[in_delta] = values[order[idx[in_delta]]]
        if int(in_delta.sum()) != keys.numel():
            raise ValueError(f"load({path!r}): {stem}: expected every row of the incremental dump among its live "
                             f"keys, got {keys.numel() - int(in_delta.sum())} rows of keys that are not live")
    missing = int((~(found | in_delta)).sum())
    if missing:
        raise ValueError(f"load({path!r}): {stem}: expected every live key in the dump or in the table it is "
                         f"applied to (its base), got {missing} live keys in neither; module unchanged")
    return lk, rows, lsc, ls, lk.numel()


def _place(t: ScoredHashTable, keys, values, scores, slots, count: int) -> list:
    """Writes the rows into their recorded slots of the blank table ``t``; returns integrity errors."""
    dev = t.device
    if count and not (0 <= int(slots.min()) and int(slots.max()) < t.capacity()):
        return [f"slots: expected slots in [0, {t.capacity()}), got [{int(slots.min())}, {int(slots.max())}]"]
    s = slots.to(dev)
    k = keys.view(torch.int64).to(dev)
    t.keys.view(torch.int64)[s] = k
    t.digests[s] = ((fmix64_tensor(k) >> 32) & 0xFF).to(torch.uint8)
    t.scores[s] = scores.to(dev)
    t._write_rows(s, values.to(dev))
    t.counters[1] = count
    return slot_integrity_errors(t.keys, t.digests, count, t.bucket_capacity)


def _build(path: str, stem: str, info: dict, old: ScoredHashTable, incremental: bool,
           gen: Optional[str] = None) -> ScoredHashTable:
    """A new table holding the dumped rows. Full dump (or incremental with a live index): the rows go back into
    their recorded slots when the dump has them and its capacity fits (so evictions after the load choose as in
    the source), else they are re-inserted. Incremental without a live index: on top of a copy of ``old``."""
    count = info["count"]
    files = info["files"]
    keys = _read(path, stem, "keys", files["keys"], old.key_dtype, gen)
    values = _read(path, stem, "values", files["values"], old.value_dtype, gen).view(count, old.value_dim)
    scores = _read(path, stem, "scores", files["scores"], torch.int64, gen)
    slots = _read(path, stem, "slots", files["slots"], torch.int64, gen) if "slots" in files else None
    if isinstance(old, CachedTable):  # applied in place once every table was read and checked
        return ("rows", keys, values, scores, info, incremental)
    overlay = incremental and info.get("live") is None
    if incremental and not overlay:
        keys, values, scores, slots, count = _live_rows(path, stem, gen, info, old, keys, values)
    # (slots -1: a caching table's dump, re-inserted below)
    # recorded slots fit a table of the dump's capacity (a hybrid table keeps its own: only that one)
    fits = info["capacity"] == old.capacity() if isinstance(old, HybridTable) else info["capacity"] <= old.max_capacity
    if not overlay and slots is not None and fits and (count == 0 or int(slots.min()) >= 0):
        t = _blank_like(old, info["capacity"])
        t.set_epoch(info["epoch"])
        errs = _place(t, keys, values, scores, slots, count)
        if errs:
            raise ValueError(f"load({path!r}): {stem}: " + "; ".join(errs) + "; module unchanged")
        t.counters[0] = info["clock"]
        return t
    cap = min(max(old.capacity(), info["capacity"]), old.max_capacity)
    t = _blank_like(old, cap)
    if overlay:
        t.load_state_dict({k: v.clone() for k, v in old.state_dict().items()})
    t.set_epoch(info["epoch"])
    dev = old.device
    chunk = 1 << 20
    for off in range(0, count, chunk):
        k = keys[off:off + chunk].to(dev)
        stats = t.insert_or_assign(k, values[off:off + chunk].to(dev))
        t.assign_scores(k, scores[off:off + chunk].to(dev))
        if int(stats[3]) or int(stats[4]):
            raise ValueError(
                f"load({path!r}): {stem}: {int(stats[3])} rows refused / {int(stats[4])} illegal keys when "
                f"inserting (capacity {t.capacity()} too small or corrupt keys); module unchanged")
    # The inserts above advanced the op clock; the dumped one continues the source's (LRU scores and the rows
    # drawn for new keys depend on it). On top of a newer table (overlay), the clock never goes back.
    t.counters[0] = max(info["clock"], int(old.counters[0])) if overlay else info["clock"]
    return t


def read_json(path: str, name: str, what: str) -> dict:
    """Reads ``path/name`` as JSON; a ValueError says ``what`` a missing file means, or why it is corrupt."""
    f = os.path.join(path, name)
    if not os.path.exists(f):
        raise ValueError(f"no {name} in {path!r} ({what})")
    try:
        with open(f) as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{f} is corrupt: {e}") from None


def load(m, path: str):
    """Loads a ``dump`` of a module with the same layout into ``m``.

    A full dump replaces every table (and admission table); an incremental one is applied on top of the current
    tables, its admission tables replace the current ones. The learning rate and step come from the dump.

    Raises:
        ValueError: no or corrupt meta.json, a missing or ill-typed meta field, a layout mismatch (dims, dtypes,
            key dtype, optimizer, score policy), a missing, truncated or corrupt file; ``m`` is unchanged.

    Example:
        >>> load(m, "/ckpt/step1000"); load(m, "/ckpt/step1100.inc")
    """
    try:
        meta = read_json(path, "meta.json", "not a dynamicemb dump")
    except ValueError as e:
        raise ValueError(f"load({path!r}): {e}") from None
    errs = _meta_errors(m, meta)
    if errs:
        raise ValueError(f"load({path!r}): checkpoint does not match the module or its meta.json is invalid: "
                         + "; ".join(errs))
    incremental = meta["incremental"]
    gen = meta.get("generation")
    # Build every new table aside (reads, CRCs and inserts may fail), then swap them all in.
    new_tables, new_admission = [], []
    for i, name in enumerate(m.table_names):
        info = meta["tables"][name]
        new_tables.append(_build(path, name, info, m.tables[i], incremental, gen))
        at, ainfo = m.admission_tables[i], info["admission_table"]
        if at is None:
            new_admission.append(None)
        elif ainfo is not None:
            new_admission.append(_build(path, f"{name}.admission", ainfo, at, False, gen))
        else:  # a dump without admission counts: a full load starts counting afresh, an incremental one keeps them
            new_admission.append(at if incremental else _blank_like(at, at.capacity()))
    for i in range(len(m.table_names)):
        if isinstance(new_tables[i], tuple):
            _, keys, values, scores, info, inc = new_tables[i]
            old = m.tables[i]
            clock = max(info["clock"], int(old.counters[0])) if inc else info["clock"]
            _apply_rows(old, keys, values, scores, clock, info["epoch"], replace=not inc)
            continue
        m.tables[i] = new_tables[i]
        m.admission_tables[i] = new_admission[i]
    with torch.no_grad():
        m.learning_rate.fill_(float(meta["learning_rate"]))
        m.step.fill_(float(meta["step"]))
    m.optimizer.lr = float(m.learning_rate)
    m._after_load()
