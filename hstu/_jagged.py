"""Jagged-batch helpers: offsets <-> lengths, per-sequence concatenation / split, jagged <-> padded.

A jagged batch is ``values`` (total, ...) plus ``offsets`` (B + 1,): sequence b is
``values[offsets[b] : offsets[b + 1]]``. Every helper here runs on the device with static shapes and no host
synchronization (output sizes come from tensor shapes or from max lengths the caller passes), so they work under
torch.compile and inside CUDA graphs; all are differentiable (gathers, whose backward is a scatter-add).
"""

from __future__ import annotations

from typing import List, Sequence

import torch

__all__ = [
    "lengths_to_offsets",
    "offsets_to_lengths",
    "jagged_concat",
    "jagged_split",
    "jagged_to_padded",
    "padded_to_jagged",
    "jagged_positions",
]


def _err(arg: str, expected: str, got, exc=ValueError):
    raise exc(f"hstu_attn: {arg}: expected {expected}, got {got}")


def _check_offsets(offsets, arg: str = "offsets"):
    if not isinstance(offsets, torch.Tensor):
        _err(arg, "a torch.Tensor", type(offsets).__name__, TypeError)
    if offsets.dim() != 1 or offsets.shape[0] < 1:
        _err(arg, "a 1-d tensor of length batch_size + 1", f"shape {tuple(offsets.shape)}")
    if offsets.dtype not in (torch.int32, torch.int64):
        _err(arg, "dtype torch.int32 or torch.int64", offsets.dtype, TypeError)


def lengths_to_offsets(lengths: torch.Tensor, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """Offsets of a jagged batch from its sequence lengths (an exclusive cumulative sum, on the device).

    Args:
        lengths: (B,) integer tensor of sequence lengths (>= 0).
        dtype: dtype of the result (torch.int32 is what `hstu_attn_varlen_func` takes).

    Returns:
        offsets: (B + 1,) tensor on lengths' device, ``offsets[0] = 0``, ``offsets[b + 1] = sum(lengths[:b + 1])``.

    Example:
        >>> lengths_to_offsets(torch.tensor([3, 0, 2]))
        tensor([0, 3, 3, 5], dtype=torch.int32)
    """
    if not isinstance(lengths, torch.Tensor) or lengths.dim() != 1:
        _err("lengths", "a 1-d integer tensor", getattr(lengths, "shape", type(lengths).__name__), TypeError)
    out = torch.zeros(lengths.shape[0] + 1, dtype=dtype, device=lengths.device)
    out[1:] = torch.cumsum(lengths, 0).to(dtype)
    return out


def offsets_to_lengths(offsets: torch.Tensor) -> torch.Tensor:
    """Sequence lengths of a jagged batch from its offsets.

    Args:
        offsets: (B + 1,) int32/int64 offsets.

    Returns:
        lengths: (B,) of offsets' dtype, ``offsets[1:] - offsets[:-1]``.

    Example:
        >>> offsets_to_lengths(torch.tensor([0, 3, 3, 5]))
        tensor([3, 0, 2])
    """
    _check_offsets(offsets)
    return offsets[1:] - offsets[:-1]


def _segment_ids(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """(total,) int64 sequence index of every row of a jagged batch (rows past offsets[-1] count as the last)."""
    rows = torch.arange(total, device=offsets.device, dtype=offsets.dtype)
    seg = torch.searchsorted(offsets[1:].contiguous(), rows, right=True)
    return seg.clamp_(max=max(offsets.shape[0] - 2, 0)).long()


def jagged_positions(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """Position of every row inside its own sequence (0 for the first row of each sequence).

    Args:
        offsets: (B + 1,) int32/int64 offsets.
        total: number of rows (``values.shape[0]``; a host int, so no synchronization).

    Returns:
        (total,) int64 positions.

    Example:
        >>> jagged_positions(torch.tensor([0, 3, 3, 5]), 5)
        tensor([0, 1, 2, 0, 1])
    """
    _check_offsets(offsets)
    seg = _segment_ids(offsets, total)
    return torch.arange(total, device=offsets.device) - offsets.long()[seg]


def _concat_index(offsets_list: Sequence[torch.Tensor], totals: Sequence[int]):
    """For the concatenation of k jagged batches: output offsets and, for each output row, its row in
    ``torch.cat(values_list)``."""
    offs = [o.long() for o in offsets_list]
    lens = [o[1:] - o[:-1] for o in offs]
    out_off = torch.zeros_like(offs[0])
    for ln in lens:
        out_off[1:] += torch.cumsum(ln, 0)
    total = sum(totals)
    seg = _segment_ids(out_off, total)
    local = torch.arange(total, device=out_off.device) - out_off[seg]  # position inside the output sequence
    src = torch.zeros(total, dtype=torch.long, device=out_off.device)
    start = torch.zeros_like(local)  # where part p begins inside the output sequence
    base = 0  # where part p begins inside torch.cat(values_list)
    for p, (o, ln) in enumerate(zip(offs, lens)):
        ls, begin = ln[seg], start
        inside = (local >= begin) & (local < begin + ls)
        src = torch.where(inside, base + o[seg] + (local - begin), src)
        start = begin + ls
        base += totals[p]
    return out_off, src


def jagged_concat(values_list: Sequence[torch.Tensor], offsets_list: Sequence[torch.Tensor]):
    """Concatenates k jagged batches sequence by sequence: output sequence b is part 0's sequence b, then part 1's
    sequence b, ... (e.g. [user context token] + history + candidates of each user).

    Args:
        values_list: k tensors (total_p, ...) with equal trailing shapes, dtypes and devices.
        offsets_list: k (B + 1,) int32/int64 offsets, one per part, equal B.

    Returns:
        (values, offsets): values (sum of total_p, ...) and int32 offsets (B + 1,). Differentiable w.r.t. every
        part (a gather). No host synchronization.

    Example:
        >>> hist, cand = torch.randn(5, 4), torch.randn(3, 4)
        >>> v, off = jagged_concat([hist, cand], [torch.tensor([0, 2, 5]), torch.tensor([0, 1, 3])])
        >>> off
        tensor([0, 3, 8], dtype=torch.int32)
    """
    if len(values_list) == 0 or len(values_list) != len(offsets_list):
        _err("values_list", f"a non-empty list as long as offsets_list ({len(offsets_list)})", len(values_list))
    ref = values_list[0]
    for p, (v, o) in enumerate(zip(values_list, offsets_list)):
        if not isinstance(v, torch.Tensor):
            _err(f"values_list[{p}]", "a torch.Tensor", type(v).__name__, TypeError)
        if v.shape[1:] != ref.shape[1:] or v.dtype != ref.dtype or v.device != ref.device:
            _err(f"values_list[{p}]", f"trailing shape {tuple(ref.shape[1:])}, dtype {ref.dtype}, device "
                 f"{ref.device} (those of values_list[0])", f"{tuple(v.shape)} {v.dtype} {v.device}")
        _check_offsets(o, f"offsets_list[{p}]")
        if o.shape != offsets_list[0].shape:
            _err(f"offsets_list[{p}]", f"shape {tuple(offsets_list[0].shape)} (same batch size)", tuple(o.shape))
    out_off, src = _concat_index(offsets_list, [v.shape[0] for v in values_list])
    return torch.cat(list(values_list), 0)[src], out_off.to(torch.int32)


def jagged_split(values: torch.Tensor, offsets_list: Sequence[torch.Tensor],
                 totals: Sequence[int]) -> List[torch.Tensor]:
    """Inverse of `jagged_concat`: splits every sequence of ``values`` back into its k parts.

    Args:
        values: (sum(totals), ...) the concatenation of the parts.
        offsets_list: k (B + 1,) int32/int64 offsets of the parts (those given to `jagged_concat`).
        totals: k host ints, the row count of each part (its values' ``shape[0]``; passed so nothing syncs).

    Returns:
        A list of k tensors, part p of shape (totals[p], ...). Differentiable (gathers).

    Example:
        >>> hist_off, cand_off = torch.tensor([0, 2, 5]), torch.tensor([0, 1, 3])
        >>> v, off = jagged_concat([torch.randn(5, 4), torch.randn(3, 4)], [hist_off, cand_off])
        >>> hist, cand = jagged_split(v, [hist_off, cand_off], totals=[5, 3])
    """
    if len(offsets_list) != len(totals) or len(totals) == 0:
        _err("totals", f"{len(offsets_list)} ints (one per part)", list(totals))
    if not isinstance(values, torch.Tensor) or values.shape[0] != sum(int(t) for t in totals):
        _err("values", f"{sum(int(t) for t in totals)} rows (sum of totals)", getattr(values, "shape", None))
    for p, o in enumerate(offsets_list):
        _check_offsets(o, f"offsets_list[{p}]")
    totals = [int(t) for t in totals]
    _, src = _concat_index(offsets_list, totals)
    # dst[r] = output row of the concatenation's row r (the inverse permutation of src)
    dst = torch.empty_like(src)
    dst[src] = torch.arange(src.shape[0], device=src.device)
    parts, base = [], 0
    for t in totals:
        parts.append(values[dst[base : base + t]])
        base += t
    return parts


def jagged_to_padded(values: torch.Tensor, offsets: torch.Tensor, max_len: int,
                     padding_value: float = 0.0) -> torch.Tensor:
    """Pads a jagged batch to (B, max_len, ...); sequences longer than max_len are cut at max_len.

    Args:
        values: (total, ...) rows.
        offsets: (B + 1,) int32/int64 offsets.
        max_len: host int, the padded length (pass the batch's max length you already know: no sync).
        padding_value: fill of the padding.

    Returns:
        (B, max_len, ...) tensor of values' dtype. Differentiable.

    Example:
        >>> jagged_to_padded(torch.arange(5.).view(5, 1), torch.tensor([0, 3, 5]), 3)[:, :, 0]
        tensor([[0., 1., 2.],
                [3., 4., 0.]])
    """
    _check_offsets(offsets)
    if not isinstance(max_len, int) or max_len < 0:
        _err("max_len", "an int >= 0", max_len)
    B = offsets.shape[0] - 1
    total = values.shape[0]
    if total == 0 or B == 0:
        return values.new_full((B, max_len) + tuple(values.shape[1:]), padding_value)
    # A scatter of the rows (index_copy), not a gather with the padding pointing at one row: the gather's backward
    # accumulates every padding position into that row serially (it dominated the dense attention's train step).
    off = offsets.long()
    seg = _segment_ids(offsets, total)
    pos = torch.arange(total, device=values.device) - off[seg]
    keep = (pos >= 0) & (pos < torch.clamp(off[1:] - off[:-1], max=max_len)[seg])
    flat = torch.where(keep, seg * max_len + pos, torch.full_like(pos, B * max_len))  # others: a dropped row
    out = values.new_full((B * max_len + 1,) + tuple(values.shape[1:]), padding_value)
    return out.index_copy(0, flat, values)[:-1].reshape((B, max_len) + tuple(values.shape[1:]))


def padded_to_jagged(padded: torch.Tensor, offsets: torch.Tensor, total: int) -> torch.Tensor:
    """Inverse of `jagged_to_padded`: the valid rows of a (B, max_len, ...) tensor as a jagged batch.

    Args:
        padded: (B, max_len, ...).
        offsets: (B + 1,) offsets of the jagged batch (sequence lengths <= max_len).
        total: host int, the number of rows (``offsets[-1]``, known to the caller: no sync).

    Returns:
        (total, ...) rows. Differentiable.

    Example:
        >>> padded_to_jagged(torch.arange(6.).view(2, 3), torch.tensor([0, 3, 5]), 5)
        tensor([0., 1., 2., 3., 4.])
    """
    _check_offsets(offsets)
    seg = _segment_ids(offsets, total)
    pos = torch.arange(total, device=padded.device) - offsets.long()[seg]
    return padded[seg, pos]
