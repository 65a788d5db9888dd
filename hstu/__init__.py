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
"""

from ._checks import check_errors, set_strict_checks, strict_checks
from ._device_errors import DeviceInputError
from ._load import compiled_kernels, library_loaded
from ._ops import hstu_attn_qkvpacked_func, hstu_attn_varlen_func
from ._reference import hstu_attn_reference, hstu_mask

__version__ = "0.1.0"

__all__ = [
    "DeviceInputError",
    "__version__",
    "check_errors",
    "compiled_kernels",
    "hstu_attn_qkvpacked_func",
    "hstu_attn_reference",
    "hstu_attn_varlen_func",
    "hstu_mask",
    "library_loaded",
    "set_strict_checks",
    "strict_checks",
]
