"""TorchRec-shaped collections of dynamic embedding tables: drop-in for ``EmbeddingBagCollection`` /
``EmbeddingCollection`` (same configs in, ``KeyedJaggedTensor`` in, ``KeyedTensor`` / ``Dict[str, JaggedTensor]`` out).

TorchRec is optional: it is imported only when one of these classes is built or called, and only its data types
(configs, KJT, KeyedTensor, JaggedTensor) are used, never fbgemm's ops, so the GPU path needs no fbgemm CUDA wheel.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Union

import torch
from torch import nn

from ._batched import BatchedDynamicEmbeddingTables
from ._checks import CHANNEL
from ._optimizers import EmbOptimizer
from ._options import DynamicEmbTableOptions

__all__ = ["DynamicEmbeddingBagCollection", "DynamicEmbeddingCollection"]

_DATA_TYPES = {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}


def _torchrec():
    try:
        from torchrec.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor, KeyedTensor
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "dynamicemb: the TorchRec-shaped collections need torchrec (pip install torchrec); the plain-tensor "
            f"API BatchedDynamicEmbeddingTables works without it ({e})"
        ) from e
    return JaggedTensor, KeyedJaggedTensor, KeyedTensor


def _table_options(cfg, table_options, idx) -> DynamicEmbTableOptions:
    if isinstance(table_options, dict):
        if cfg.name not in table_options:
            raise ValueError(f"table_options: expected an entry for table {cfg.name!r}, got keys {sorted(table_options)}")
        o = table_options[cfg.name]
    elif table_options is None:
        o = DynamicEmbTableOptions()
    else:
        o = table_options
    if not isinstance(o, DynamicEmbTableOptions):
        raise TypeError(f"table_options: expected DynamicEmbTableOptions, got {type(o).__name__}")
    dt_name = getattr(getattr(cfg, "data_type", None), "name", "FP32")
    if dt_name not in _DATA_TYPES:
        raise ValueError(f"table {cfg.name!r} data_type: expected FP32, FP16 or BF16, got {dt_name}")
    if o.dtype != _DATA_TYPES[dt_name]:
        raise ValueError(f"table {cfg.name!r}: DynamicEmbTableOptions.dtype={o.dtype} differs from the config's "
                         f"data_type={dt_name}; set both alike")
    init = o.initializer
    lo, hi = getattr(cfg, "weight_init_min", None), getattr(cfg, "weight_init_max", None)
    if init.kind == "uniform" and init.low is None and init.high is None and lo is not None and hi is not None:
        o = dataclasses.replace(o, initializer=dataclasses.replace(init, low=float(lo), high=float(hi)))
    return o.completed(dim=int(cfg.embedding_dim), num_embeddings=int(cfg.num_embeddings))


class _CollectionBase(nn.Module):
    def _setup(self, tables, table_options, optimizer, pooling, device, key_dtype, output_dtype):
        tables = list(tables)
        if not tables:
            raise ValueError("tables: expected at least one embedding config")
        names = [t.name for t in tables]
        if len(set(names)) != len(names) or not all(names):
            raise ValueError(f"tables: expected distinct non-empty names, got {names}")
        feats, fmap = [], []
        for i, t in enumerate(tables):
            if not t.feature_names:
                raise ValueError(f"table {t.name!r}: expected at least one feature name")
            for f in t.feature_names:
                if f in feats:
                    raise ValueError(f"feature {f!r}: expected in one table only, found twice")
                feats.append(f)
                fmap.append(i)
        opts = [_table_options(t, table_options, i) for i, t in enumerate(tables)]
        self._embedding_configs = tables
        self._feature_names = feats
        self._feature_index = {f: i for i, f in enumerate(feats)}
        self._table_names = names
        return self._make_tables(opts, fmap, pooling=pooling, optimizer=optimizer, table_names=names,
                                 key_dtype=key_dtype, output_dtype=output_dtype, device=device)

    def _make_tables(self, opts, fmap, **kwargs):
        """The fused tables behind the collection (the sharded collections build sharded ones)."""
        return BatchedDynamicEmbeddingTables(opts, fmap, **kwargs)

    # KJT -> (ids, offsets, weights) in our feature order, without host syncs.
    def _flatten(self, features, weighted: bool):
        _, KeyedJaggedTensor, _ = _torchrec()
        if not isinstance(features, KeyedJaggedTensor):
            raise TypeError(f"features: expected a torchrec KeyedJaggedTensor, got {type(features).__name__}")
        keys = list(features.keys())
        extra = [k for k in keys if k not in self._feature_index]
        if extra:
            raise ValueError(f"features: keys {extra} are not in the config (expected {self._feature_names})")
        missing = [f for f in self._feature_names if f not in keys]
        if missing:
            raise ValueError(f"features: missing keys {missing} of the config (got {keys})")
        if features.variable_stride_per_key():
            raise ValueError("features: expected one stride (batch size) for all keys, got variable strides")
        m = self.tables
        F, B = len(keys), features.stride()
        ids = features.values()
        if ids.dtype in (torch.int32, torch.int64) and m.key_dtype == torch.int64:
            ids = ids.to(torch.int64)
        elif m.key_dtype == torch.uint64 and ids.dtype == torch.int64:
            ids = ids.view(torch.uint64)
        lengths = features.lengths().to(torch.int64)
        w = None
        if weighted:
            w = features.weights_or_none()
            if w is None:
                raise ValueError("features: expected weights (the collection is is_weighted=True), got none")
        if keys != self._feature_names:
            perm = self._perm(keys, ids.device)
            L = lengths.view(F, B)
            flen = L.sum(1)
            old_start = torch.cumsum(flen, 0) - flen
            new_len = flen[perm]
            new_end = torch.cumsum(new_len, 0)
            pos = torch.arange(ids.numel(), dtype=torch.int64, device=ids.device)
            k = torch.searchsorted(new_end, pos, right=True).clamp_(max=F - 1)
            src = old_start[perm][k] + pos - (new_end - new_len)[k]
            ids = ids[src]
            if w is not None:
                w = w[src]
            lengths = L[perm].reshape(-1)
        offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
        torch.cumsum(lengths, 0, out=offsets[1:])
        return ids.contiguous(), offsets, (None if w is None else w.contiguous()), lengths, B

    def _perm(self, keys, device) -> torch.Tensor:
        """Config order -> position in the KJT's key order (device tensor, cached per key order: no host copy per
        step)."""
        cache = self.__dict__.setdefault("_perm_cache", {})
        k = (tuple(keys), device)
        if k not in cache:
            cache[k] = torch.tensor([keys.index(f) for f in self._feature_names], dtype=torch.int64, device=device)
        return cache[k]

    # conveniences forwarded to the fused tables
    def set_learning_rate(self, lr: float):
        """Changes the fused optimizer's learning rate (also inside captured CUDA graphs)."""
        self.tables.set_learning_rate(lr)

    def dump(self, path: str, score_threshold: Optional[int] = None):
        """See ``BatchedDynamicEmbeddingTables.dump``."""
        self.tables.dump(path, score_threshold)

    def load(self, path: str):
        """See ``BatchedDynamicEmbeddingTables.load``."""
        self.tables.load(path)

    def embedding_configs(self):
        return self._embedding_configs


class DynamicEmbeddingBagCollection(_CollectionBase):
    """Pooled dynamic embeddings, shaped like ``torchrec.EmbeddingBagCollection``.

    Args:
        tables: ``torchrec.EmbeddingBagConfig`` list; each table's pooling is SUM or MEAN. Tables of both kinds
            may be mixed, as in TorchRec: the fused tables then pool by sum (output in fp32) and the MEAN
            features' columns are divided by their bag lengths (at least 1) before the cast to ``output_dtype``.
        table_options: one ``DynamicEmbTableOptions`` for all tables or a dict by table name; ``dim`` and
            ``max_capacity`` left unset come from the config (num_embeddings rounded up to a bucket multiple).
        optimizer: the fused optimizer (SGD, Adam, Adagrad, RowWiseAdagrad).
        is_weighted: use the KJT's weights as per-sample weights (SUM tables only, as torch's embedding_bag).
        device, key_dtype, output_dtype: see ``BatchedDynamicEmbeddingTables``.

    Forward: ``KeyedJaggedTensor`` -> ``KeyedTensor`` with the config's feature names, in config order.

    Example:
        >>> ebc = DynamicEmbeddingBagCollection(
        ...     [EmbeddingBagConfig(num_embeddings=1 << 20, embedding_dim=64, name="t0", feature_names=["f0"])],
        ...     DynamicEmbTableOptions(score_policy="lfu"), optimizer=Adam(lr=1e-3))
        >>> kt = ebc(kjt); kt["f0"].shape        # (B, 64)
    """

    def __init__(self, tables, table_options: Union[None, DynamicEmbTableOptions, Dict[str, DynamicEmbTableOptions]] = None,
                 optimizer: Optional[EmbOptimizer] = None, is_weighted: bool = False, device=None,
                 key_dtype: torch.dtype = torch.int64, output_dtype: torch.dtype = torch.float32):
        super().__init__()
        _torchrec()
        tables = list(tables)
        pool = [getattr(getattr(t, "pooling", None), "name", "SUM") for t in tables]
        bad = sorted({p for p in pool if p not in ("SUM", "MEAN")})
        if bad:
            raise ValueError(f"tables pooling: expected SUM or MEAN for every table, got {bad}")
        if is_weighted and "MEAN" in pool:
            mean = [t.name for t, p in zip(tables, pool) if p == "MEAN"]
            raise ValueError(f"is_weighted: expected only SUM tables (per-sample weights need sum pooling), got "
                             f"MEAN tables {mean}")
        self._is_weighted = is_weighted
        self._output_dtype = output_dtype
        mixed = len(set(pool)) > 1
        pooling = "sum" if mixed or not pool else pool[0].lower()
        self.embedding_bags = self._setup(tables, table_options, optimizer, pooling, device, key_dtype,
                                          torch.float32 if mixed else output_dtype)
        self._mean_columns = None
        if mixed:
            # per output column, the index of its feature; per feature, whether it is MEAN-pooled
            t_of = {f: i for i, t in enumerate(tables) for f in t.feature_names}
            dev = self.embedding_bags.device
            is_mean = [pool[t_of[f]] == "MEAN" for f in self._feature_names]
            col = [f for f, d in enumerate(self.embedding_bags.feature_dims) for _ in range(d)]
            self._mean_columns = (torch.tensor(is_mean, device=dev), torch.tensor(col, dtype=torch.int64, device=dev))

    @property
    def tables(self) -> BatchedDynamicEmbeddingTables:
        return self.embedding_bags

    def is_weighted(self) -> bool:
        return self._is_weighted

    def forward(self, features):
        if not torch.compiler.is_compiling():
            CHANNEL.raise_pending()  # device-side input errors of an earlier call (no sync; see dynamicemb._checks)
        _, _, KeyedTensor = _torchrec()
        ids, offsets, w, lengths, B = self._flatten(features, self._is_weighted)
        out = self.embedding_bags(ids, offsets, per_sample_weights=w)
        if self._mean_columns is not None:  # SUM and MEAN tables mixed: sums in fp32 -> means of MEAN features
            is_mean, col = self._mean_columns
            L = lengths.view(len(self._feature_names), B).to(torch.float32).clamp(min=1.0)
            div = torch.where(is_mean[:, None], L, torch.ones_like(L))  # (F, B)
            out = (out / div.t().index_select(1, col)).to(self._output_dtype)
        return KeyedTensor(keys=list(self._feature_names), length_per_key=list(self.embedding_bags.feature_dims),
                           values=out, key_dim=1)


class DynamicEmbeddingCollection(_CollectionBase):
    """Sequence (unpooled) dynamic embeddings, shaped like ``torchrec.EmbeddingCollection``.

    Args:
        tables: ``torchrec.EmbeddingConfig`` list, all of one ``embedding_dim``.
        table_options, optimizer, device, key_dtype, output_dtype: as ``DynamicEmbeddingBagCollection``.

    Forward: ``KeyedJaggedTensor`` -> ``Dict[str, JaggedTensor]``: per feature, values (ids of the feature, dim)
    and the feature's lengths. Splitting by feature reads the lengths on the host, as TorchRec does.

    Example:
        >>> ec = DynamicEmbeddingCollection([EmbeddingConfig(num_embeddings=4096, embedding_dim=32, name="t",
        ...                                                  feature_names=["f"])])
        >>> ec(kjt)["f"].values().shape         # (number of ids of f, 32)
    """

    def __init__(self, tables, table_options=None, optimizer: Optional[EmbOptimizer] = None, device=None,
                 key_dtype: torch.dtype = torch.int64, output_dtype: torch.dtype = torch.float32):
        super().__init__()
        _torchrec()
        dims = {int(t.embedding_dim) for t in tables}
        if len(dims) != 1:
            raise ValueError(f"tables embedding_dim: expected one dim for all tables, got {sorted(dims)}")
        self.embeddings = self._setup(tables, table_options, optimizer, "none", device, key_dtype, output_dtype)

    @property
    def tables(self) -> BatchedDynamicEmbeddingTables:
        return self.embeddings

    def forward(self, features) -> Dict[str, object]:
        if not torch.compiler.is_compiling():
            CHANNEL.raise_pending()  # device-side input errors of an earlier call (no sync; see dynamicemb._checks)
        JaggedTensor, _, _ = _torchrec()
        ids, offsets, _, lengths, B = self._flatten(features, False)
        out = self.embeddings(ids, offsets)
        F = len(self._feature_names)
        L = lengths.view(F, B)
        # ids per feature: the KJT's host-side length_per_key when it carries one (no sync), else read from the
        # device (one sync, as TorchRec's own split by key)
        lpk = features.length_per_key_or_none() if hasattr(features, "length_per_key_or_none") else None
        if lpk is not None:
            by_key = dict(zip(features.keys(), lpk))
            sizes = [int(by_key[f]) for f in self._feature_names]
        else:
            sizes = L.sum(1).tolist()
        parts = torch.split(out, sizes, dim=0)
        return {f: JaggedTensor(values=parts[i], lengths=L[i]) for i, f in enumerate(self._feature_names)}
