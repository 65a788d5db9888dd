"""hstu_attn: HSTU attention (jagged batches, SiLU attention, recommender masks), forward and backward.

Public API:
    hstu_attn_varlen_func     q, k, v of shape (total, H, D) with cu_seqlens offsets
    hstu_attn_qkvpacked_func  packed (total, 3, H, D) input
    hstu_attn_reference       dense PyTorch reference (any dtype/device; the CPU implementation)
    hstu_mask                 the per-sequence boolean mask: the normative definition of every mask
    compiled_kernels          what the loaded op library was compiled with

Inference (paged KV cache):
    hstu_attn_paged_func      new tokens' attention over cached pages + the new tokens (delta-q)
    KVCacheManager            a pool of pages for all layers, users' caches by id, LRU eviction, on the device
    cached_hstu_attention     one layer's attention in a serving step through a KVCacheManager
"""

from ._load import compiled_kernels, library_loaded
from ._ops import hstu_attn_qkvpacked_func, hstu_attn_varlen_func
from ._reference import hstu_attn_reference, hstu_mask

# --- inference (paged KV cache) ---
from ._paged import PAGE_SIZES, gather_paged_kv, hstu_attn_paged_func, hstu_attn_paged_reference, paged_kv_layout
from ._kv_cache import CacheStep, KVCacheError, KVCacheManager
from ._inference import PagedHSTUAttention, cached_hstu_attention

_INFERENCE_API = [
    "CacheStep", "KVCacheError", "KVCacheManager", "PAGE_SIZES", "PagedHSTUAttention", "cached_hstu_attention",
    "gather_paged_kv", "hstu_attn_paged_func", "hstu_attn_paged_reference", "paged_kv_layout",
]

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "compiled_kernels",
    "hstu_attn_qkvpacked_func",
    "hstu_attn_reference",
    "hstu_attn_varlen_func",
    "hstu_mask",
    "library_loaded",
] + _INFERENCE_API
