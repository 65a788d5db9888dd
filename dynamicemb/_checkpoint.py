"""Checkpoints of ``BatchedDynamicEmbeddingTables``: state_dict entries and directory dumps.

state_dict: per table ``{prefix}{name}.{keys,digests,scores,values,counters}`` (the scored hash table's own
tensors in slot order, so a round trip is bit-exact, evictions included), per admission table
``{prefix}{name}.admission.*``, the buffers ``learning_rate``/``step``/``refused_count``, and ``_extra_state``: the
layout every entry must match (dims, dtypes, key dtype, optimizer and its state width, score policy).

dump(dir): ``meta.json`` plus per table ``{name}.keys.bin`` (key dtype), ``{name}.values.bin`` (rows
[embedding | optimizer state] in the table's dtype) and ``{name}.scores.bin`` (uint64 scores as int64 bits), raw
little-endian bytes written in chunks of ``chunk_rows`` slots (so a table never needs a second full copy), each
file's byte count and CRC32 in the meta. ``score_threshold`` dumps only rows scored >= threshold (incremental).

Loading validates everything (layout, file sizes, CRCs, capacities) before anything changes; a failure raises
``ValueError`` (state_dict: torch's RuntimeError listing our messages) and leaves the module unchanged.
"""

from __future__ import annotations

import ctypes
import json
import os
import zlib
from typing import Dict

import torch

from ._table import ScoredHashTable

__all__ = ["module_meta", "save_tables", "load_tables", "dump", "load", "CHECKPOINT_VERSION"]

CHECKPOINT_VERSION = 1
_TABLE_ENTRIES = ("keys", "digests", "scores", "values", "counters")
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64", torch.uint64: "uint64"}
_DTYPES = {v: k for k, v in _DTYPE_NAMES.items()}


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
    to = theirs.get("optimizer") or {}
    if to.get("name") != mine["optimizer"]["name"]:
        errs.append(f"optimizer: expected {mine['optimizer']['name']!r}, got {to.get('name')!r}")
    tt = theirs.get("tables") or {}
    if set(tt) != set(mine["tables"]):
        errs.append(f"tables: expected {sorted(mine['tables'])}, got {sorted(tt)}")
    for name, want in mine["tables"].items():
        got = tt.get(name)
        if not isinstance(got, dict):
            continue
        # row_width: absent before RowWiseAdagrad rows were padded to 4 columns (then it was dim + state_dim)
        got = {**got, "row_width": got.get("row_width", (got.get("dim") or 0) + (got.get("state_dim") or 0))}
        for k in ("dim", "state_dim", "row_width", "dtype", "score_policy", "bucket_capacity"):
            if got.get(k) != want[k]:
                errs.append(f"table {name!r} {k}: expected {want[k]!r}, got {got.get(k)!r}")
    return errs


def _all_tables(m):
    for i, name in enumerate(m.table_names):
        yield f"{name}.", m.tables[i]
        if m.admission_tables[i] is not None:
            yield f"{name}.admission.", m.admission_tables[i]


# ---------------------------------------------------------------------- state_dict
def save_tables(m, destination: Dict, prefix: str):
    for sub, table in _all_tables(m):
        sd = table.state_dict()
        for k in _TABLE_ENTRIES:
            destination[prefix + sub + k] = sd[k]


def load_tables(m, state_dict, prefix, strict, missing_keys, unexpected_keys, error_msgs):
    errs = []
    meta_key = prefix + "_extra_state"
    if meta_key not in state_dict:
        missing_keys.append(meta_key)
        errs.append("missing the checkpoint layout entry '_extra_state'")
    else:
        errs += _layout_errors(module_meta(m), state_dict[meta_key])
    expected = {meta_key}
    for b in ("learning_rate", "step", "refused_count"):
        key = prefix + b
        expected.add(key)
        own = getattr(m, b)
        if key not in state_dict:
            missing_keys.append(key)
            continue
        v = state_dict[key]
        if not isinstance(v, torch.Tensor) or v.shape != own.shape:
            errs.append(f"{b}: expected a tensor of shape {tuple(own.shape)}, got {getattr(v, 'shape', type(v))}")
    staged = []
    for sub, table in _all_tables(m):
        entry = {}
        for k in _TABLE_ENTRIES:
            key = prefix + sub + k
            expected.add(key)
            if key not in state_dict:
                missing_keys.append(key)
                errs.append(f"missing entry {sub + k!r}")
            else:
                entry[k] = state_dict[key]
        if len(entry) != len(_TABLE_ENTRIES):
            continue
        errs += [f"{sub[:-1]}: {e}" for e in _table_state_errors(table, entry)]
        staged.append((table, entry))
    if strict:
        for key in state_dict:
            if key.startswith(prefix) and key not in expected and _belongs_to(m, key[len(prefix):]):
                unexpected_keys.append(key)
    if errs:
        error_msgs.extend(errs)
        return
    # Everything checked: apply (the table's own load copies into fresh tensors).
    for table, entry in staged:
        table.load_state_dict(entry)
    with torch.no_grad():
        for b in ("learning_rate", "step", "refused_count"):
            if prefix + b in state_dict:
                getattr(m, b).copy_(state_dict[prefix + b])
    m.optimizer.lr = float(m.learning_rate)


def _belongs_to(m, rest: str) -> bool:
    head = rest.split(".", 1)[0]
    return head in m.table_names or head in ("learning_rate", "step", "refused_count", "_extra_state")


def _table_state_errors(table: ScoredHashTable, s) -> list:
    errs = []
    keys, values = s["keys"], s["values"]
    if not all(isinstance(s[k], torch.Tensor) for k in _TABLE_ENTRIES):
        return ["entries must be tensors"]
    cap = keys.numel()
    if keys.dtype != table.key_dtype:
        errs.append(f"keys: expected dtype {table.key_dtype}, got {keys.dtype}")
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
    if s["scores"].numel() != cap or s["scores"].dtype not in (torch.int64, torch.uint64):
        errs.append(f"scores: expected {cap} int64 entries, got {s['scores'].numel()} {s['scores'].dtype}")
    if s["digests"].numel() != cap or s["digests"].dtype != torch.uint8:
        errs.append(f"digests: expected {cap} uint8 entries, got {s['digests'].numel()} {s['digests'].dtype}")
    return errs


# ---------------------------------------------------------------------- dump / load
def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def _row_bytes(table: ScoredHashTable) -> int:
    return table.value_dim * torch.empty((), dtype=table.value_dtype).element_size()


def dump(m, path: str, score_threshold=None, chunk_rows: int = 1 << 20):
    if not isinstance(chunk_rows, int) or chunk_rows <= 0:
        raise ValueError(f"chunk_rows: expected a positive int, got {chunk_rows!r}")
    os.makedirs(path, exist_ok=True)
    meta = module_meta(m)
    meta["incremental"] = score_threshold is not None
    meta["score_threshold"] = None if score_threshold is None else int(score_threshold)
    meta["learning_rate"] = float(m.learning_rate)
    meta["step"] = float(m.step)
    for i, name in enumerate(m.table_names):
        table = m.tables[i]
        files = {k: open(os.path.join(path, f"{name}.{k}.bin"), "wb") for k in ("keys", "values", "scores")}
        crcs = {k: 0 for k in files}
        sizes = {k: 0 for k in files}
        count = 0
        try:
            cap = table.capacity()
            for off in range(0, cap, chunk_rows):
                r = table.export_batch(off, min(chunk_rows, cap - off), threshold=score_threshold)
                c = int(r.count.item())
                count += c
                for k, t in (("keys", r.keys[:c]), ("values", r.values[:c]), ("scores", r.scores[:c])):
                    b = _tensor_bytes(t)
                    files[k].write(b)
                    crcs[k] = zlib.crc32(b, crcs[k])
                    sizes[k] += len(b)
        finally:
            for f in files.values():
                f.close()
        meta["tables"][name].update(
            count=count, capacity=table.capacity(), clock=int(table.counters[0]), epoch=table.epoch,
            files={k: {"bytes": sizes[k], "crc32": crcs[k]} for k in files},
        )
    with open(os.path.join(path, "meta.json.tmp"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    os.replace(os.path.join(path, "meta.json.tmp"), os.path.join(path, "meta.json"))


def _read(path, name, k, info):
    fn = os.path.join(path, f"{name}.{k}.bin")
    if not os.path.exists(fn):
        raise ValueError(f"load({path!r}): missing file {fn}")
    with open(fn, "rb") as f:
        b = f.read()
    want = info["files"][k]
    if len(b) != want["bytes"]:
        raise ValueError(f"load({path!r}): {fn}: expected {want['bytes']} bytes, got {len(b)} (truncated or corrupt)")
    if zlib.crc32(b) != want["crc32"]:
        raise ValueError(f"load({path!r}): {fn}: CRC32 mismatch (corrupt file)")
    return bytearray(b)


def load(m, path: str):
    mf = os.path.join(path, "meta.json")
    if not os.path.exists(mf):
        raise ValueError(f"load({path!r}): no meta.json (not a dynamicemb dump)")
    try:
        with open(mf) as f:
            meta = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"load({path!r}): meta.json is corrupt: {e}") from None
    errs = _layout_errors(module_meta(m), meta)
    if errs:
        raise ValueError(f"load({path!r}): checkpoint does not match the module: " + "; ".join(errs))
    incremental = bool(meta.get("incremental"))
    new_tables = []
    for i, name in enumerate(m.table_names):
        info = meta["tables"][name]
        old = m.tables[i]
        count = int(info["count"])
        rb = _row_bytes(old)
        if info["files"]["keys"]["bytes"] != 8 * count or info["files"]["scores"]["bytes"] != 8 * count or (
            info["files"]["values"]["bytes"] != rb * count
        ):
            raise ValueError(f"load({path!r}): table {name!r}: file sizes do not match count={count}")
        keys = torch.frombuffer(_read(path, name, "keys", info), dtype=m.key_dtype) if count else torch.empty(
            0, dtype=m.key_dtype)
        values = torch.frombuffer(_read(path, name, "values", info), dtype=old.value_dtype) if count else torch.empty(
            0, dtype=old.value_dtype)
        scores = torch.frombuffer(_read(path, name, "scores", info), dtype=torch.int64) if count else torch.empty(
            0, dtype=torch.int64)
        values = values.view(count, old.value_dim)
        # Build the new table aside (a copy of the current one for an incremental dump), swap in at the end.
        cap = max(old.capacity(), int(info.get("capacity", 0)))
        cap = min(cap, old.max_capacity)
        t = m._make_table(i, cap)
        if incremental:
            t.load_state_dict({k: v.clone() for k, v in old.state_dict().items()})
        else:
            t.counters[0] = max(int(info.get("clock", 0)), int(old.counters[0]))
        t.set_epoch(int(info.get("epoch", 0)))
        dev = old.device
        chunk = 1 << 20
        for off in range(0, count, chunk):
            k = keys[off:off + chunk].to(dev)
            stats = t.insert_or_assign(k, values[off:off + chunk].to(dev))
            t.assign_scores(k, scores[off:off + chunk].to(dev))
            if int(stats[3]) or int(stats[4]):
                raise ValueError(
                    f"load({path!r}): table {name!r}: {int(stats[3])} rows refused / {int(stats[4])} illegal keys "
                    f"when inserting (capacity {t.capacity()} too small or corrupt keys); module unchanged")
        new_tables.append(t)
    for i, t in enumerate(new_tables):
        m.tables[i] = t
    with torch.no_grad():
        m.learning_rate.fill_(float(meta.get("learning_rate", float(m.learning_rate))))
        m.step.fill_(float(meta.get("step", 0.0)))
    m.optimizer.lr = float(m.learning_rate)
