"""Checkpoints of ``ShardedDynamicEmbeddingTables`` that load on any number of ranks.

Layout of ``dump(path)`` written by W ranks (a shared file system; no data goes through rank 0):

    path/manifest.json              written by rank 0 last, once every rank reported success
    path/rank{r}-of-{W}/{shard}/    rank r's shard module ``{shard}`` (e.g. "dim16") as a single-rank dump
                                    (``_checkpoint.dump``: meta.json + keys/values/scores per table, CRC32s)

The manifest records the format version, W, the routing, the layout (tables: name, dim, dtype, bucket, policy,
admission, key space; features, pooling, key dtype, optimizer) and the rank directories. Rows are
[embedding | optimizer state] and scores, so optimizer state and eviction order survive.

``load(path)`` on M ranks: every rank validates the manifest and every shard's meta.json against its own module
(routing mode, layout, optimizer, key dtype); then it reads the shard files (all of them; only its own when W == M
and the routing is unchanged), keeps the keys (and admission counts) it owns under the module's routing, and
builds new tables aside. The ranks agree (one all_gather of their errors) before any rank swaps its tables in:
a mismatch, a corrupt file or a key that does not fit raises ValueError on every rank and changes nothing.
Capacities may differ from the writer's (each rank keeps its own ``max_capacity`` share); the op clock of a table
becomes the largest of its shards' clocks, the step and learning rate are the writer's.

torch.distributed.checkpoint (DCP): not supported directly. ``state_dict()`` of a sharded module holds each rank's
hash-table tensors under the same names on every rank, which DCP would treat as one replicated tensor (saving
rank 0's only). Use ``dump``/``load`` (also from a DCP ``Stateful`` wrapper that calls them with a directory
next to the DCP checkpoint).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List

import torch
import torch.distributed as dist

from ._checkpoint import _blank_like, _meta_errors, _read, dump as dump_single, read_json

__all__ = ["dump_sharded", "load_sharded", "SHARDED_FORMAT_VERSION"]

SHARDED_FORMAT_VERSION = 1
_FORMAT = "dynamicemb-sharded"


def _rank_dir(r: int, world: int) -> str:
    return f"rank{r}-of-{world}"


def _agree(m, err: str) -> List[str]:
    """Every rank's error string (empty: success), gathered on every rank."""
    got = [None] * m.world_size
    dist.all_gather_object(got, err, group=m.process_group)
    return [f"rank {r}: {e}" for r, e in enumerate(got) if e]


def dump_sharded(m, path: str, score_threshold=None):
    """Each rank writes its shard modules; rank 0 writes the manifest after all succeeded (a collective)."""
    err = ""
    try:
        os.makedirs(path, exist_ok=True)
        rd = os.path.join(path, _rank_dir(m.rank, m.world_size))
        for name, inner in m.shards.items():
            dump_single(inner, os.path.join(rd, name), score_threshold)
    except Exception as e:  # every rank must learn of a failure, or the others would wait for it
        err = f"{type(e).__name__}: {e}"
    errs = _agree(m, err)
    if errs:
        raise RuntimeError(f"dump({path!r}) failed: " + "; ".join(errs))
    if m.rank == 0:
        manifest = {
            "format": _FORMAT,
            "version": SHARDED_FORMAT_VERSION,
            "world_size": m.world_size,
            "routing": m.routing,
            "layout": m.layout(),
            "shards": list(m.shards.keys()),
            "ranks": [_rank_dir(r, m.world_size) for r in range(m.world_size)],
            "incremental": score_threshold is not None,
        }
        tmp = os.path.join(path, "manifest.json.tmp")
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(path, "manifest.json"))
    dist.barrier(group=m.process_group)


def _manifest_errors(m, man) -> List[str]:
    if not isinstance(man, dict) or man.get("format") != _FORMAT:
        return [f"manifest.json: expected format {_FORMAT!r}, got {str(man)[:80]!r}"]
    errs = []
    if man.get("version") != SHARDED_FORMAT_VERSION:
        errs.append(f"version: expected {SHARDED_FORMAT_VERSION}, got {man.get('version')!r}")
    if man.get("routing") != m.routing:
        errs.append(f"routing: expected {m.routing!r} (this module), got {man.get('routing')!r} (checkpoint); "
                    f"build the module with routing={man.get('routing')!r} to load it")
    W = man.get("world_size")
    ranks = man.get("ranks")
    if not isinstance(W, int) or W < 1 or not isinstance(ranks, list) or len(ranks) != W:
        errs.append(f"world_size/ranks: expected an int W >= 1 and W rank directories, got {W!r}, {ranks!r}")
    if man.get("shards") != list(m.shards.keys()):
        errs.append(f"shards: expected {list(m.shards.keys())} (one per embedding width), got {man.get('shards')!r}")
    mine, theirs = m.layout(), man.get("layout")
    if not isinstance(theirs, dict):
        return errs + [f"layout: expected a mapping, got {str(theirs)[:80]!r}"]
    for k in ("key_dtype", "optimizer"):
        if theirs.get(k) != mine[k]:
            errs.append(f"{k}: expected {mine[k]!r}, got {theirs.get(k)!r}")
    tt = theirs.get("tables")
    want_names = [t["name"] for t in mine["tables"]]
    if not isinstance(tt, list) or [t.get("name") for t in tt if isinstance(t, dict)] != want_names:
        got = [t.get("name") if isinstance(t, dict) else t for t in tt] if isinstance(tt, list) else tt
        return errs + [f"tables: expected {want_names}, got {got!r}"]
    for want, got in zip(mine["tables"], tt):
        # max_capacity may differ: a reshard may give the tables more (or less) room
        for k in ("dim", "dtype", "bucket_capacity", "score_policy", "admission", "key_space"):
            if k == "key_space" and m.routing != "continuous":
                continue
            if got.get(k) != want[k]:
                errs.append(f"table {want['name']!r} {k}: expected {want[k]!r}, got {got.get(k)!r}")
    return errs


def _owned(m, keys: torch.Tensor, table: int) -> torch.Tensor:
    return m.owner_of(keys, table) == m.rank


def _collect(m, path: str, dirs: List[str], shard: str, metas: Dict[str, dict], filter_keys: bool):
    """Per table of shard module ``shard``: the owned (keys, values, scores) of the table and of its admission
    table read from every directory in ``dirs``, plus the largest clock and the epoch of each."""
    inner = m.shards[shard]
    members = m._group_tables[list(m.shards.keys()).index(shard)]
    out = []
    for i, name in enumerate(inner.table_names):
        parts = {"table": [], "admission": []}
        clock = {"table": 0, "admission": 0}
        epoch = 0
        for d in dirs:
            sp = os.path.join(path, d, shard)
            info = metas[d]["tables"][name]
            blocks = [("table", name, info, inner.tables[i])]
            if inner.admission_tables[i] is not None and info.get("admission_table") is not None:
                blocks.append(("admission", f"{name}.admission", info["admission_table"], inner.admission_tables[i]))
            for kind, stem, b, tab in blocks:
                gen = metas[d].get("generation")  # the data files' generation (dump writes a fresh one each time)
                k = _read(sp, stem, "keys", b["files"]["keys"], tab.key_dtype, gen)
                v = _read(sp, stem, "values", b["files"]["values"], tab.value_dtype, gen).view(b["count"],
                                                                                               tab.value_dim)
                s = _read(sp, stem, "scores", b["files"]["scores"], torch.int64, gen)
                if filter_keys:
                    keep = _owned(m, k, members[i])
                    k, v, s = k[keep], v[keep], s[keep]
                parts[kind].append((k, v, s))
                clock[kind] = max(clock[kind], b["clock"])
            epoch = max(epoch, info["epoch"])
        out.append((parts, clock, epoch))
    return out


def _new_table(old, parts, clock: int, epoch: int, incremental: bool, load_factor: float, what: str):
    """A table like ``old`` holding the rows ``parts`` (on top of a copy of ``old`` when ``incremental``)."""
    keys = torch.cat([p[0] for p in parts]) if parts else torch.empty(0, dtype=old.key_dtype)
    vals = torch.cat([p[1] for p in parts]) if parts else torch.empty(0, old.value_dim, dtype=old.value_dtype)
    scores = torch.cat([p[2] for p in parts]) if parts else torch.empty(0, dtype=torch.int64)
    need = keys.numel() + (old.size() if incremental else 0)
    cap = old.capacity()
    while cap < old.max_capacity and need > load_factor * cap:
        cap = min(2 * cap, old.max_capacity)
    t = _blank_like(old, cap)
    if incremental:
        t.load_state_dict({k: v.clone() for k, v in old.state_dict().items()})
        if t.capacity() < cap:
            t.reserve(cap)
    t.set_epoch(epoch)
    dev = old.device
    chunk = 1 << 20
    for off in range(0, keys.numel(), chunk):
        k = keys[off:off + chunk].to(dev)
        stats = t.insert_or_assign(k, vals[off:off + chunk].to(dev))
        t.assign_scores(k, scores[off:off + chunk].to(dev))
        refused, illegal = int(stats[3]), int(stats[4])
        if refused or illegal:
            raise ValueError(f"{what}: {refused} rows refused / {illegal} illegal keys when inserting {keys.numel()}"
                             f" rows into {t.capacity()} slots (max_capacity {old.max_capacity} of this rank too "
                             f"small for its share: raise the table's max_capacity)")
    t.counters[0] = max(clock, int(old.counters[0])) if incremental else clock
    return t


def load_sharded(m, path: str):
    """Loads a sharded dump written by any number of ranks into ``m`` (a collective; see the module docstring)."""
    err, staged, man = "", [], None
    try:
        man = read_json(path, "manifest.json", "not a sharded dynamicemb dump, or an unfinished one")
        errs = _manifest_errors(m, man)
        if errs:
            raise ValueError("checkpoint does not match the module: " + "; ".join(errs))
        same = man["world_size"] == m.world_size
        dirs = [man["ranks"][m.rank]] if same else list(man["ranks"])
        incremental = bool(man.get("incremental"))
        for shard, inner in m.shards.items():
            metas = {}
            for d in dirs:
                meta = read_json(os.path.join(path, d, shard), "meta.json", "a shard dump is missing")
                e = _meta_errors(inner, meta)
                if e:
                    raise ValueError(f"{d}/{shard}/meta.json: " + "; ".join(e))
                metas[d] = meta
            per_table = _collect(m, path, dirs, shard, metas, filter_keys=not same)
            step = max(float(metas[d]["step"]) for d in dirs)
            lr = float(metas[dirs[0]]["learning_rate"])
            new_t, new_a = [], []
            for i, (parts, clock, epoch) in enumerate(per_table):
                o = inner.options[i]
                new_t.append(_new_table(inner.tables[i], parts["table"], clock["table"], epoch, incremental,
                                        o.grow_load_factor, f"table {inner.table_names[i]!r}"))
                at = inner.admission_tables[i]
                new_a.append(None if at is None else _new_table(
                    at, parts["admission"], clock["admission"], 0, False, 1.0,
                    f"admission counts of table {inner.table_names[i]!r}"))
            staged.append((inner, new_t, new_a, step, lr))
    except Exception as e:  # every rank must learn of a failure before any rank changes its tables
        err = f"{type(e).__name__}: {e}"
    errs = _agree(m, err)
    if errs:
        raise ValueError(f"load({path!r}): nothing loaded on any rank: " + "; ".join(errs))
    for inner, new_t, new_a, step, lr in staged:
        for i in range(len(new_t)):
            inner.tables[i] = new_t[i]
            inner.admission_tables[i] = new_a[i]
        with torch.no_grad():
            inner.step.fill_(step)
        inner.set_learning_rate(lr)
    m.optimizer.lr = staged[0][4] if staged else m.optimizer.lr
