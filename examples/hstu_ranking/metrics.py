"""Ranking metrics in plain torch: AUC (with ties) and normalized entropy."""

from __future__ import annotations

import math

import torch


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random negative (ties
    count one half), from the Mann-Whitney rank sum with average ranks of tied scores.

    Args:
        scores: (N,) any real scores. labels: (N,) 0/1.

    Returns:
        AUC in [0, 1]; NaN when there are no positives or no negatives.

    Example:
        >>> auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        0.75
    """
    s, y = scores.detach().double().flatten().cpu(), labels.detach().double().flatten().cpu()
    pos, n = float(y.sum()), y.numel()
    neg = n - pos
    if pos == 0 or neg == 0:
        return float("nan")
    order = torch.argsort(s)
    ss = s[order]
    ranks = torch.empty(n, dtype=torch.float64)
    # average rank (1-based) within each run of equal scores
    _, inverse, counts = torch.unique_consecutive(ss, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    avg = ends - (counts.double() - 1) / 2
    ranks[order] = avg[inverse]
    return float((ranks[y > 0].sum() - pos * (pos + 1) / 2) / (pos * neg))


def normalized_entropy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Normalized entropy (He et al. 2014): the mean log loss divided by the entropy of the base rate, so 1.0 is
    "no better than predicting the average click rate" and lower is better.

    Args:
        logits: (N,) predicted logits. labels: (N,) 0/1.

    Returns:
        NE (float); NaN when the labels are all equal.

    Example:
        >>> normalized_entropy(torch.tensor([2.0, -2.0]), torch.tensor([1.0, 0.0])) < 1
        True
    """
    x, y = logits.detach().double().flatten().cpu(), labels.detach().double().flatten().cpu()
    p = float(y.mean())
    if p <= 0 or p >= 1:
        return float("nan")
    loss = float(torch.nn.functional.binary_cross_entropy_with_logits(x, y))
    return loss / -(p * math.log(p) + (1 - p) * math.log(1 - p))
