"""Row ops of the sharded module's CUDA step (dynamicemb/csrc/ops/rows_ops.cc; CPU kernels too, adding in the same
order): ``gather_rows`` (rows by an index, 16-byte vector copies, or converted to another float dtype),
``pool_rows`` (bags of weighted fp32 / fp16 / bf16 rows, fp32 sums) and ``segment_sum_rows`` (per-unique sums of
gradient rows through a CSR built by a stable sort: deterministic, no atomics; fp32, or rounded once to fp16 /
bf16). Fake kernels are registered here so torch.compile/export can trace a step that calls them."""

import torch

from ._batched_kernels import _VALUE_KIND
from ._load import load_library

#: the row ops' out_kind codes (table_types.h ValueKind, the codes the table ops check) -> dtype
ROW_DTYPES = {code: dtype for dtype, code in _VALUE_KIND.items()}


def rows_ops_available() -> bool:
    return load_library() and hasattr(torch.ops.dynamicemb, "segment_sum_rows")


def _register_fakes():
    if not rows_ops_available():
        return

    def gather(src, index, out_kind=-1):
        dtype = src.dtype if out_kind == -1 else ROW_DTYPES[out_kind]
        return src.new_empty(index.shape[0], src.shape[1], dtype=dtype)

    def pool(src, index, offsets, weight, mean, batch=0):
        return src.new_empty(offsets.shape[0] - 1, src.shape[1], dtype=torch.float32)

    def segment_sum(grad, inverse, num_unique, row_of=None, weight=None, out_kind=-1):
        dtype = torch.float32 if out_kind == -1 else ROW_DTYPES[out_kind]
        return grad.new_empty(num_unique, grad.shape[1], dtype=dtype)

    for name, fn in (("gather_rows", gather), ("pool_rows", pool), ("segment_sum_rows", segment_sum)):
        try:
            torch.library.register_fake(f"dynamicemb::{name}")(fn)
        except (RuntimeError, AttributeError):  # already registered, or an older torch
            pass


_register_fakes()
