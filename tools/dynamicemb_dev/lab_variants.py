"""The lab variants of a dynamicemb build's training step, for tools/dynamicemb_dev/csr_sort_ab.py and step_same.py:
a variant "S/F[/D[/A]]" sets the CSR sort S (op _lookup_lab_csr_sort), where the step finds its uniques F
(_lookup_lab_find_later) and, in builds that have them, the dedup's flags D (_lookup_lab_dedup; without /D the
build's default stays) and the segmented update's kernel A (_lookup_lab_seg_apply, builds before session 17)."""

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


def preset_step(opt_name, batches, dev):
    """(module, train): a module at NVIDIA's config (10 tables, D128 fp32, 1M slots each, pooling none) under SGD,
    Adam, Adagrad ("adagrad": rows of [w | one fp32 state column per element], the bytes of Adam with bf16 moments) or
    Adam with bf16 moments ("adam_bf16", builds with Adam's state_dtype), and one training step over the next of
    `batches` with a gradient of ones (made once per shape)."""
    from dynamicemb._batched import BatchedDynamicEmbeddingTables
    from dynamicemb._optimizers import SGD, Adagrad, Adam
    from dynamicemb._options import DynamicEmbTableOptions

    opt = {"sgd": lambda: SGD(lr=0.01), "adam": lambda: Adam(lr=1e-3), "adagrad": lambda: Adagrad(lr=0.01),
           "adam_bf16": lambda: Adam(lr=1e-3, state_dtype=torch.bfloat16)}[opt_name]()
    tables = [DynamicEmbTableOptions(dim=128, max_capacity=1 << 20, on_refused="zero")] * 10
    m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
    it = [0]
    grads = {}

    def train():
        it[0] = (it[0] + 1) % len(batches)
        ids, off = batches[it[0]]
        out = m(ids, off)
        g = grads.get(out.shape)
        if g is None:
            g = grads[out.shape] = torch.ones_like(out)
        out.backward(g)

    return m, train
