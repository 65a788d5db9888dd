"""The lab variants of a dynamicemb build's training step, for tools/dynamicemb_dev/csr_sort_ab.py and step_same.py:
a variant "S/F[/D[/A]]" sets the CSR sort S (op _lookup_lab_csr_sort), where the step finds its uniques F
(_lookup_lab_find_later) and, in builds that have them, the dedup's flags D (_lookup_lab_dedup; without /D the
build's default stays) and the segmented update's kernel A (_lookup_lab_seg_apply)."""

from __future__ import annotations

import torch


def lab_ops():
    """(csr_sort, find_later) ops, or None for a build without them; and the dedup-flags op, or None."""
    ops = torch.ops.dynamicemb
    try:
        lab = (ops._lookup_lab_csr_sort, ops._lookup_lab_find_later)
    except (AttributeError, RuntimeError):
        lab = None
    try:
        dedup = ops._lookup_lab_dedup
    except (AttributeError, RuntimeError):
        dedup = None
    return lab, dedup


def use_variant(lab, dedup, v):
    """Selects variant v ("S/F[/D]") for later steps; None: nothing."""
    if v is None:
        return
    parts = [int(x) for x in v.split("/")]
    lab[0](parts[0])
    lab[1](parts[1])
    if dedup is not None and len(parts) > 2:
        dedup(parts[2])
    if len(parts) > 3:
        torch.ops.dynamicemb._lookup_lab_seg_apply(parts[3])
