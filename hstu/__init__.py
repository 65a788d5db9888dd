"""hstu_attn: HSTU attention (jagged batches, SiLU attention, recommender masks), forward and backward.

Public API:
    hstu_attn_varlen_func     q, k, v of shape (total, H, D) with cu_seqlens offsets
    hstu_attn_qkvpacked_func  packed (total, 3, H, D) input
    hstu_attn_reference       dense PyTorch reference (any dtype/device; the CPU implementation)
    hstu_mask                 the per-sequence boolean mask: the normative definition of every mask
    compiled_kernels          what the loaded op library was compiled with
Model layers (hstu/_layers.py, hstu/_jagged.py):
    HSTULayer, HSTUStack, HSTUKVCache, RelativeBucketedBias, dense_hstu_attention
    lengths_to_offsets, offsets_to_lengths, jagged_concat, jagged_split, jagged_to_padded, padded_to_jagged,
    jagged_positions
"""

from ._load import compiled_kernels, library_loaded
from ._ops import hstu_attn_qkvpacked_func, hstu_attn_varlen_func
from ._reference import hstu_attn_reference, hstu_mask

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "compiled_kernels",
    "hstu_attn_qkvpacked_func",
    "hstu_attn_reference",
    "hstu_attn_varlen_func",
    "hstu_mask",
    "library_loaded",
]

# --- model layers and jagged helpers (issue 33) ---
from ._jagged import (  # noqa: E402
    jagged_concat,
    jagged_positions,
    jagged_split,
    jagged_to_padded,
    lengths_to_offsets,
    offsets_to_lengths,
    padded_to_jagged,
)
from ._layers import HSTUKVCache, HSTULayer, HSTUStack, RelativeBucketedBias, dense_hstu_attention  # noqa: E402

__all__ += [
    "HSTUKVCache",
    "HSTULayer",
    "HSTUStack",
    "RelativeBucketedBias",
    "dense_hstu_attention",
    "jagged_concat",
    "jagged_positions",
    "jagged_split",
    "jagged_to_padded",
    "lengths_to_offsets",
    "offsets_to_lengths",
    "padded_to_jagged",
]
