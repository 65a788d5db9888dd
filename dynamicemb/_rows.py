"""Row ops of the sharded module's CUDA step (dynamicemb/csrc/ops/rows_ops.cc; CPU kernels too, adding in the same
order): ``gather_rows`` (rows by an index, 16-byte vector copies), ``pool_rows`` (bags of weighted rows) and
``segment_sum_rows`` (per-unique sums of gradient rows through a CSR built by a stable sort: deterministic, no
atomics). Fake kernels are registered here so torch.compile/export can trace a step that calls them."""

import torch

from ._load import load_library


def rows_ops_available() -> bool:
    return load_library() and hasattr(torch.ops.dynamicemb, "segment_sum_rows")


def _register_fakes():
    if not rows_ops_available():
        return

    def gather(src, index):
        return src.new_empty(index.shape[0], src.shape[1])

    def pool(src, index, offsets, weight, mean, batch=0):
        return src.new_empty(offsets.shape[0] - 1, src.shape[1])

    def segment_sum(grad, inverse, num_unique, row_of=None, weight=None):
        return grad.new_empty(num_unique, grad.shape[1])

    for name, fn in (("gather_rows", gather), ("pool_rows", pool), ("segment_sum_rows", segment_sum)):
        try:
            torch.library.register_fake(f"dynamicemb::{name}")(fn)
        except (RuntimeError, AttributeError):  # already registered, or an older torch
            pass


_register_fakes()
