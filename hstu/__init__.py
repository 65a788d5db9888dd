"""hstu_attn: HSTU attention (jagged batches, SiLU attention, recommender masks), forward and backward.

Public API:
    hstu_attn_varlen_func     q, k, v of shape (total, H, D) with cu_seqlens offsets
    hstu_attn_qkvpacked_func  packed (total, 3, H, D) input
    hstu_attn_reference       dense PyTorch reference (any dtype/device; the CPU implementation)
    hstu_mask                 the per-sequence boolean mask: the normative definition of every mask
    compiled_kernels          what the loaded op library was compiled with
    check_errors              synchronize and raise the value error the device-side checks recorded
    strict_checks             context manager: every call raises its own device-side error before it returns
    set_strict_checks         the same, on or off for the process
    DeviceInputError          the error raised for values checked on the device (a ValueError)
Model layers (hstu/_layers.py, hstu/_jagged.py):
    HSTULayer, HSTUStack, HSTUKVCache, RelativeBucketedBias, dense_hstu_attention
    lengths_to_offsets, offsets_to_lengths, jagged_concat, jagged_split, jagged_to_padded, padded_to_jagged,
    jagged_positions

FP8 (e4m3) attention (hstu/_fp8.py; docs/hstu_attn.md "FP8"): hstu_attn_varlen_func(..., q_descale=, k_descale=,
v_descale=, descale_mode=, out_dtype=) or (..., fp8_quant_mode=), and
    quantize_fp8, dequantize_fp8, fp8_descale_shape, hstu_attn_fp8_reference, FP8_DESCALE_MODES

Inference (paged KV cache):
    hstu_attn_paged_func      new tokens' attention over cached pages + the new tokens (delta-q)
    KVCacheManager            a pool of pages for all layers, users' caches by id, LRU eviction, on the device
    cached_hstu_attention     one layer's attention in a serving step through a KVCacheManager
"""

from ._checks import check_errors, set_strict_checks, strict_checks
from ._device_errors import DeviceInputError
from ._fp8 import DESCALE_MODES as FP8_DESCALE_MODES
from ._fp8 import dequantize_fp8, hstu_attn_fp8_reference, quantize_fp8
from ._fp8 import descale_shape as fp8_descale_shape
from . import _fp8_bwd  # noqa: F401  (registers hstu_attn::fp8_bwd_prepass's CPU and fake kernels; private)
from ._inference import CachedHSTUStack, PagedHSTUAttention, cached_hstu_attention
from ._jagged import (
    jagged_concat,
    jagged_positions,
    jagged_split,
    jagged_to_padded,
    lengths_to_offsets,
    offsets_to_lengths,
    padded_to_jagged,
)
from ._kv_cache import CacheStep, KVCacheError, KVCacheManager
from ._layers import HSTUKVCache, HSTULayer, HSTUStack, RelativeBucketedBias, dense_hstu_attention
from ._load import compiled_kernels, library_loaded
from ._ops import hstu_attn_qkvpacked_func, hstu_attn_varlen_func
from ._paged import PAGE_SIZES, gather_paged_kv, hstu_attn_paged_func, hstu_attn_paged_reference, paged_kv_layout
from ._reference import hstu_attn_reference, hstu_mask

__version__ = "0.1.0"

__all__ = [
    "CacheStep",
    "DeviceInputError",
    "FP8_DESCALE_MODES",
    "HSTUKVCache",
    "HSTULayer",
    "HSTUStack",
    "KVCacheError",
    "KVCacheManager",
    "PAGE_SIZES",
    "PagedHSTUAttention",
    "CachedHSTUStack",
    "RelativeBucketedBias",
    "__version__",
    "cached_hstu_attention",
    "check_errors",
    "compiled_kernels",
    "dense_hstu_attention",
    "dequantize_fp8",
    "fp8_descale_shape",
    "gather_paged_kv",
    "hstu_attn_paged_func",
    "hstu_attn_fp8_reference",
    "hstu_attn_paged_reference",
    "hstu_attn_qkvpacked_func",
    "hstu_attn_reference",
    "hstu_attn_varlen_func",
    "hstu_mask",
    "jagged_concat",
    "jagged_positions",
    "jagged_split",
    "jagged_to_padded",
    "lengths_to_offsets",
    "library_loaded",
    "offsets_to_lengths",
    "padded_to_jagged",
    "paged_kv_layout",
    "quantize_fp8",
    "set_strict_checks",
    "strict_checks",
]
