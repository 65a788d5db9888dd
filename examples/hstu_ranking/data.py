"""Data of the generative ranking example: interaction sequences, a synthetic generator, a MovieLens loader, and
the batcher that turns sequences into jagged training / eval batches.

A dataset is a list of `UserSequence`s (one user's interactions in time order). A sample cuts one user's sequence
at some point: the interactions before the cut are the history (item id, action id, timestamp), the next
``num_candidates`` interactions are the candidates to rank, with two labels: ``click`` (rating >= 4, binary) and
``rating`` (the rating / 5, regression). Ids are raw int64 (no vocabulary): the dynamic tables store what they see.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import Dict, List, Optional

import numpy as np
import torch

# Raw ids are mapped into disjoint, large int64 ranges (dynamic tables take any id >= 0; nothing is re-indexed).
USER_ID_BASE = 1 << 40
ITEM_ID_BASE = 1 << 41
ACTION_ID_BASE = 1 << 42


@dataclasses.dataclass
class UserSequence:
    """One user's interactions in time order: user id, item ids, ratings in 1..5 and timestamps (seconds)."""

    user: int
    items: np.ndarray
    ratings: np.ndarray
    timestamps: np.ndarray


def synthetic_sequences(num_users: int = 512, num_items: int = 2048, num_clusters: int = 4, min_len: int = 16,
                        max_len: int = 64, zipf_exponent: float = 1.1, taste_prob: float = 0.6,
                        noise: float = 0.1, seed: int = 0) -> List[UserSequence]:
    """Zipf-distributed interaction sequences with a planted signal.

    Every item belongs to a cluster (item % num_clusters) and every user has a taste cluster. Each interaction
    picks an item of the user's taste cluster with probability ``taste_prob``, else any item (both Zipf-popular:
    the item of popularity rank r is drawn with probability proportional to (r + 1) ** -zipf_exponent). The rating
    is 4 or 5 when the item is of the user's taste, 1..3 otherwise, flipped with probability ``noise``. A model
    that learns which items go together (from histories) or what each user likes (from the user id) ranks the
    liked candidates first; a model without that knowledge scores AUC 0.5.

    Args:
        num_users, num_items, num_clusters: sizes.
        min_len, max_len: range of the sequence lengths (uniform).
        zipf_exponent: popularity skew of the items.
        taste_prob: probability an interaction is of the user's taste cluster.
        noise: probability a rating is flipped between liked (4, 5) and not liked (1..3).
        seed: the generator's seed (the dataset is a function of the arguments).

    Returns:
        A list of num_users `UserSequence`s.
    """
    rng = np.random.default_rng(seed)
    # popularity ranks: a random permutation of the items, so popularity is independent of the cluster
    order = rng.permutation(num_items)
    weight = 1.0 / np.arange(1, num_items + 1) ** zipf_exponent
    pop = np.empty(num_items)
    pop[order] = weight
    cluster = np.arange(num_items) % num_clusters
    by_cluster = [np.flatnonzero(cluster == c) for c in range(num_clusters)]
    p_cluster = [pop[ids] / pop[ids].sum() for ids in by_cluster]
    p_all = pop / pop.sum()
    out = []
    for u in range(num_users):
        taste = int(rng.integers(num_clusters))
        n = int(rng.integers(min_len, max_len + 1))
        of_taste = rng.random(n) < taste_prob
        items = np.where(of_taste, rng.choice(by_cluster[taste], size=n, p=p_cluster[taste]),
                         rng.choice(num_items, size=n, p=p_all))
        liked = cluster[items] == taste
        liked = np.where(rng.random(n) < noise, ~liked, liked)
        ratings = np.where(liked, rng.integers(4, 6, size=n), rng.integers(1, 4, size=n))
        ts = np.cumsum(rng.exponential(3600.0, size=n)).astype(np.int64) + 1_000_000_000
        out.append(UserSequence(u, items.astype(np.int64), ratings.astype(np.int64), ts))
    return out


def load_movielens(path: str) -> List[UserSequence]:
    """Reads MovieLens ratings: ``ratings.dat`` (ML-1M/10M: ``user::item::rating::timestamp``) or ``ratings.csv``
    (ML-20M/25M/latest: a header ``userId,movieId,rating,timestamp``). Half-star ratings are rounded up.

    Args:
        path: the ratings file, or a directory holding ratings.dat or ratings.csv.

    Returns:
        One `UserSequence` per user, interactions sorted by (timestamp, file order), users in id order.

    Example:
        >>> seqs = load_movielens("ml-1m/ratings.dat")
    """
    if os.path.isdir(path):
        for name in ("ratings.dat", "ratings.csv"):
            if os.path.exists(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise FileNotFoundError(f"path: expected a directory with ratings.dat or ratings.csv, got {path}")
    rows = []
    with open(path, newline="", encoding="latin-1") as f:
        if path.endswith(".csv"):
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None or [h.strip() for h in header[:4]] != ["userId", "movieId", "rating", "timestamp"]:
                raise ValueError(f"{path}: expected the header userId,movieId,rating,timestamp, got {header}")
            for rec in reader:
                if rec:
                    rows.append((int(rec[0]), int(rec[1]), float(rec[2]), int(float(rec[3]))))
        else:
            for n, line in enumerate(f):
                line = line.strip()
                if not line:
                    continue
                rec = line.split("::")
                if len(rec) != 4:
                    raise ValueError(f"{path}:{n + 1}: expected user::item::rating::timestamp, got {line!r}")
                rows.append((int(rec[0]), int(rec[1]), float(rec[2]), int(rec[3])))
    if not rows:
        raise ValueError(f"{path}: expected at least one rating, got none")
    arr = np.array(rows, dtype=np.float64)
    users = arr[:, 0].astype(np.int64)
    order = np.lexsort((np.arange(len(arr)), arr[:, 3], users))  # by user, then time, then file order
    arr, users = arr[order], users[order]
    cut = np.flatnonzero(np.diff(users)) + 1
    out = []
    for chunk in np.split(arr, cut):
        out.append(UserSequence(int(chunk[0, 0]), chunk[:, 1].astype(np.int64),
                                np.clip(np.ceil(chunk[:, 2]), 1, 5).astype(np.int64), chunk[:, 3].astype(np.int64)))
    return out


class Batcher:
    """Cuts user sequences into jagged batches.

    Training samples cut a random user's sequence at a random point (leaving the last ``num_candidates``
    interactions of every user for eval); eval samples take each user's last ``num_candidates`` interactions as
    candidates. A training batch is a function of (seed, step), so a resumed run sees the same batches.

    Args:
        sequences: the dataset.
        batch_size: samples per batch.
        max_history: most history interactions kept (the latest ones).
        num_candidates: candidates per sample (fewer when the sequence is short).
        seed: seed of the sampling.
    """

    def __init__(self, sequences: List[UserSequence], batch_size: int, max_history: int, num_candidates: int,
                 seed: int = 0):
        self.seqs = [s for s in sequences if len(s.items) >= 2 * num_candidates + 1]
        if not self.seqs:
            raise ValueError(f"sequences: expected users with at least {2 * num_candidates + 1} interactions, "
                             "got none")
        self.batch_size, self.max_history, self.num_candidates, self.seed = (
            batch_size, max_history, num_candidates, seed)

    def _sample(self, seq: UserSequence, cut: int):
        lo = max(0, cut - self.max_history)
        end = min(len(seq.items), cut + self.num_candidates)
        return seq, slice(lo, cut), slice(cut, end)

    def train_batch(self, step: int) -> Dict[str, object]:
        rng = np.random.default_rng([self.seed, step])
        samples = []
        for u in rng.integers(len(self.seqs), size=self.batch_size):
            seq = self.seqs[int(u)]
            last = len(seq.items) - 2 * self.num_candidates  # candidates end before the eval candidates
            samples.append(self._sample(seq, int(rng.integers(1, last + 1))))
        return collate(samples)

    def eval_batches(self, max_batches: Optional[int] = None):
        samples = [self._sample(s, len(s.items) - self.num_candidates) for s in self.seqs]
        n = 0
        for i in range(0, len(samples), self.batch_size):
            if max_batches is not None and n >= max_batches:
                return
            yield collate(samples[i : i + self.batch_size])
            n += 1


def collate(samples) -> Dict[str, object]:
    """Jagged tensors of a list of (sequence, history slice, candidate slice): ids already in their id ranges."""
    def cat(parts, dtype):
        return torch.from_numpy(np.concatenate(parts).astype(dtype)) if parts else torch.zeros(0, dtype=torch.int64)

    hist_len = [h.stop - h.start for _, h, _ in samples]
    cand_len = [c.stop - c.start for _, _, c in samples]
    b = {
        "user": torch.tensor([USER_ID_BASE + s.user for s, _, _ in samples], dtype=torch.int64),
        "hist_items": cat([ITEM_ID_BASE + s.items[h] for s, h, _ in samples], np.int64),
        "hist_actions": cat([ACTION_ID_BASE + s.ratings[h] for s, h, _ in samples], np.int64),
        "hist_ts": cat([s.timestamps[h] for s, h, _ in samples], np.int64),
        "cand_items": cat([ITEM_ID_BASE + s.items[c] for s, _, c in samples], np.int64),
        "cand_ts": cat([s.timestamps[c] for s, _, c in samples], np.int64),
        "click": cat([(s.ratings[c] >= 4).astype(np.float32) for s, _, c in samples], np.float32),
        "rating": cat([s.ratings[c].astype(np.float32) / 5.0 for s, _, c in samples], np.float32),
        "hist_lengths": torch.tensor(hist_len, dtype=torch.int64),
        "cand_lengths": torch.tensor(cand_len, dtype=torch.int64),
        # host ints: the max lengths every jagged op needs (passed down, never read back from the device)
        "max_hist": max(hist_len),
        "max_cand": max(cand_len),
    }
    return b


def to_device(batch: Dict[str, object], device) -> Dict[str, object]:
    return {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
