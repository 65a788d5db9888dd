"""The generative ranking model: dynamic embedding tables (dynamicemb) + an HSTU stack (hstu_attn) + task heads.

Each sample is one jagged sequence ``[user] + history + candidates``: the user token is a context (it sees the
whole history), history tokens are item + action embeddings, candidate tokens are item embeddings plus a learned
"candidate" vector; the candidates are the targets of the mask (each sees the history and itself, not the other
candidates), so one forward scores all candidates of all users. The heads read the candidates' outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import torch
from torch import nn

import hstu_attn
from dynamicemb import Adam, BatchedDynamicEmbeddingTables, DynamicEmbInitializer, DynamicEmbTableOptions


@dataclasses.dataclass
class ModelConfig:
    dim: int = 32                 # embedding width = HSTU width
    heads: int = 2
    head_dim: int = 32            # on CUDA: 32, 64, 128 or 256
    layers: int = 2
    dropout: float = 0.1
    max_attn_len: int = -1        # -1: causal; > 0: causal local window (left) of that many positions
    mask_convention: str = "nvidia"
    time_buckets: int = 16        # 0: position bias only
    max_distance: int = 256       # relative position buckets; 0: no relative bias at all (position or time)
    user_capacity: int = 1 << 12  # table slots (a multiple of 128); a full table evicts by score (LRU)
    item_capacity: int = 1 << 14
    emb_lr: float = 0.01
    embedding: str = "dynamicemb"  # or "torch": torch.nn.Embedding over ids hashed into the capacity
    max_seqlen: int = 64           # attention divisor (scaling_seqlen): fixed, so a user's scores do not depend on
                                   # the other sequences of the batch (train, eval and cached scoring agree)
    attn_impl: str = "auto"        # "kernel" (hstu_attn), "torch" (dense PyTorch attention), auto: kernel on CUDA
    fused: bool = True             # HSTULayer's fused kernels on CUDA (False: the plain torch composition)
    attention_fp8: str = ""        # "": attention in bf16; tensor / head / batch_head / block: FP8 (e4m3) attention
                                   # with descale factors of that granularity (HSTULayer(attention_fp8=); needs
                                   # max_distance 0 in training: FP8 attention computes no relative-bias gradient)


class TorchEmbeddings(nn.Module):
    """Baseline of the dynamic tables: one torch.nn.Embedding (sparse gradients, for torch.optim.SparseAdam) per
    table over ids hashed modulo its rows (collisions instead of eviction)."""

    def __init__(self, capacities, dim, feature_table_map, device):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(c, dim, sparse=True, device=device) for c in capacities)
        for t in self.tables:
            nn.init.uniform_(t.weight, -0.05, 0.05)
        self.capacities = list(capacities)
        self.feature_table_map = list(feature_table_map)

    def lookup(self, feats):
        """Rows of each feature's ids (a list of (n_f,) int64 tensors, feature f reads table feature_table_map[f])."""
        out = []
        for f, ids in enumerate(feats):
            t = self.feature_table_map[f]
            # multiplicative hash, then modulo the rows (the raw ids live in disjoint 2**40 ranges)
            out.append(self.tables[t]((ids * 0x9E3779B1).remainder(self.capacities[t])))
        return out


class DenseTower(nn.Module):
    """Everything but the embedding tables: HSTU stack, candidate marker, relative bias, heads."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.attention_fp8 and cfg.max_distance > 0:
            raise ValueError(f"max_distance: expected 0 with attention_fp8={cfg.attention_fp8!r} (FP8 attention "
                             f"computes no gradient for the relative bias), got {cfg.max_distance}")
        bias = (hstu_attn.RelativeBucketedBias(1, cfg.max_distance, cfg.time_buckets) if cfg.max_distance > 0
                else None)
        self.stack = hstu_attn.HSTUStack(
            cfg.layers, cfg.dim, cfg.heads, cfg.head_dim, dropout=cfg.dropout,
            window_size=(cfg.max_attn_len, 0), scaling_seqlen=cfg.max_seqlen, mask_convention=cfg.mask_convention,
            attn_impl=cfg.attn_impl, fused=cfg.fused, attention_fp8=cfg.attention_fp8 or None,
            relative_bias=bias)
        self.candidate = nn.Parameter(torch.randn(cfg.dim) * 0.05)
        self.heads = nn.Sequential(nn.Linear(cfg.dim, cfg.dim), nn.SiLU(), nn.Linear(cfg.dim, 2))

    def forward(self, user, hist, cand, hist_off, cand_off, max_hist: int, max_cand: int, user_ts, hist_ts, cand_ts):
        B = user.shape[0]
        one = torch.arange(B + 1, dtype=torch.int32, device=user.device)  # one user token per sample
        x, cu = hstu_attn.jagged_concat([user, hist, cand + self.candidate], [one, hist_off, cand_off])
        ts, _ = hstu_attn.jagged_concat([user_ts, hist_ts, cand_ts], [one, hist_off, cand_off])
        ones = torch.ones(B, dtype=torch.int32, device=user.device)
        num_targets = (cand_off[1:] - cand_off[:-1]).to(torch.int32)
        y = self.stack(x, cu, 1 + max_hist + max_cand, num_contexts=ones, num_targets=num_targets, timestamps=ts)
        _, _, cand_y = hstu_attn.jagged_split(y, [one, hist_off, cand_off], [B, hist.shape[0], cand.shape[0]])
        return self.heads(cand_y)  # (num candidates, 2): click logit, rating


class RankingModel(nn.Module):
    """Dynamic tables user / item / action (the item table serves history and candidate items) + `DenseTower`.

    ``model(batch)`` returns (num_candidates, 2) predictions: click logit and rating (/ 5).
    ``model.encode_history(batch)`` / ``model.score_cached(cache, batch)`` are the inference path: the histories'
    keys and values are computed once, then new candidates are scored against them (delta-q attention).
    """

    FEATURES = ("user", "hist_items", "hist_actions", "cand_items")

    def __init__(self, cfg: ModelConfig, device):
        super().__init__()
        if cfg.attn_impl == "auto":
            # the CPU op is the per-sequence reference (a Python loop): the batched dense PyTorch attention computes
            # the same math faster there; on CUDA the hstu_attn kernels; FP8 attention: the op (on CPU its emulation)
            kernel = torch.device(device).type == "cuda" or bool(cfg.attention_fp8)
            cfg = dataclasses.replace(cfg, attn_impl="kernel" if kernel else "torch")
        self.cfg = cfg
        caps = [cfg.user_capacity, cfg.item_capacity, 128]
        fmap = [0, 1, 2, 1]
        if cfg.embedding == "dynamicemb":
            init = DynamicEmbInitializer("uniform", low=-0.05, high=0.05, seed=1)
            opts = [DynamicEmbTableOptions(dim=cfg.dim, max_capacity=c, score_policy="lru", initializer=init,
                                           on_refused="warn") for c in caps]
            self.emb = BatchedDynamicEmbeddingTables(opts, feature_table_map=fmap, pooling="none",
                                                     optimizer=Adam(lr=cfg.emb_lr),
                                                     table_names=["user", "item", "action"], device=device)
        elif cfg.embedding == "torch":
            self.emb = TorchEmbeddings(caps, cfg.dim, fmap, device)
        else:
            raise ValueError(f"embedding: expected 'dynamicemb' or 'torch', got {cfg.embedding!r}")
        self.dense = DenseTower(cfg).to(device)

    def _lookup(self, b, with_candidates=True):
        """Rows of every id of the batch, split per feature (one fused lookup over all tables). The tables take
        all four features in every call (bags are feature-major); without candidates their bags are empty."""
        B, dev = b["user"].shape[0], b["user"].device
        cand = b["cand_items"] if with_candidates else b["cand_items"][:0]
        feats = [b["user"], b["hist_items"], b["hist_actions"], cand]
        cand_len = b["cand_lengths"] if with_candidates else torch.zeros_like(b["cand_lengths"])
        lens = [torch.ones(B, dtype=torch.int64, device=dev), b["hist_lengths"], b["hist_lengths"], cand_len]
        if isinstance(self.emb, TorchEmbeddings):
            return self.emb.lookup(feats)
        ids = torch.cat(feats)
        offsets = hstu_attn.lengths_to_offsets(torch.cat(lens), dtype=torch.int64)
        return self.emb(ids, offsets, validate=False).split([f.shape[0] for f in feats])

    @staticmethod
    def _user_ts(b):
        # the user token's time: the first candidate's (the request time)
        return b["cand_ts"][hstu_attn.lengths_to_offsets(b["cand_lengths"], torch.int64)[:-1]
                            .clamp(max=max(b["cand_ts"].shape[0] - 1, 0))]

    def forward(self, b: Dict[str, object], dense: Optional[nn.Module] = None) -> torch.Tensor:
        """(num candidates, 2) predictions; ``dense`` replaces the dense tower (e.g. its torch.compile'd twin)."""
        user, hist_i, hist_a, cand = self._lookup(b)
        hist_off = hstu_attn.lengths_to_offsets(b["hist_lengths"])
        cand_off = hstu_attn.lengths_to_offsets(b["cand_lengths"])
        return (self.dense if dense is None else dense)(user, hist_i + hist_a, cand, hist_off, cand_off, b["max_hist"], b["max_cand"],
                          self._user_ts(b), b["hist_ts"], b["cand_ts"])

    # ------------------------------------------------------------------ inference with a cached history
    @torch.no_grad()
    def encode_history(self, b: Dict[str, object]):
        """Runs [user] + history through the stack once; returns its per-layer key/value cache (delta-q)."""
        user, hist_i, hist_a, _ = self._lookup(b, with_candidates=False)
        B = user.shape[0]
        one = torch.arange(B + 1, dtype=torch.int32, device=user.device)
        hist_off = hstu_attn.lengths_to_offsets(b["hist_lengths"])
        x, cu = hstu_attn.jagged_concat([user, hist_i + hist_a], [one, hist_off])
        ts, _ = hstu_attn.jagged_concat([self._user_ts(b), b["hist_ts"]], [one, hist_off])
        ones = torch.ones(B, dtype=torch.int32, device=user.device)
        _, cache = self.dense.stack(x, cu, 1 + b["max_hist"], num_contexts=ones, timestamps=ts, return_kv=True)
        return cache

    @torch.no_grad()
    def score_cached(self, cache, b: Dict[str, object]) -> torch.Tensor:
        """Scores the batch's candidates against a cached history: queries = the candidates only, keys = cached
        history + candidates (cu_seqlens_q != cu_seqlens_k). Equals ``forward`` on the same batch in eval mode."""
        B, dev = b["user"].shape[0], b["user"].device
        cand = self._lookup(b)[3]  # eval mode: nothing is inserted; the other features' rows are unused
        cand_off = hstu_attn.lengths_to_offsets(b["cand_lengths"])
        ones = torch.ones(B, dtype=torch.int32, device=dev)
        num_targets = (cand_off[1:] - cand_off[:-1]).to(torch.int32)
        y = self.dense.stack(cand + self.dense.candidate, cand_off, b["max_cand"], num_contexts=ones,
                             num_targets=num_targets, timestamps=b["cand_ts"], kv_cache=cache)
        return self.dense.heads(y)
