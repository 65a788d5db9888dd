"""The scored hash table's key hash, exposed for tests and tools."""

import torch

from ._device_check import check_cuda_device
from ._load import load_library


def hash_keys(keys: torch.Tensor) -> torch.Tensor:
    """Hashes keys with the table's 64-bit hash (MurmurHash3's fmix64 finalizer) on their device.

    Args:
        keys: (n,) int64 or uint64 tensor, contiguous, on CPU or CUDA.

    Returns:
        (n,) tensor of the keys' dtype holding the 64 hash bits of each key (same bits for an int64 key and the
        uint64 key with the same bit pattern).

    Example:
        >>> import torch, dynamicemb
        >>> h = dynamicemb.hash_keys(torch.tensor([0, 1, 2], dtype=torch.int64))
        >>> h.shape
        torch.Size([3])
    """
    if not isinstance(keys, torch.Tensor):
        raise TypeError(f"keys: expected a torch.Tensor, got {type(keys).__name__}")
    if keys.dtype not in (torch.int64, torch.uint64):
        raise TypeError(f"keys: expected dtype torch.int64 or torch.uint64, got {keys.dtype}")
    if keys.dim() != 1:
        raise ValueError(f"keys: expected a 1-d tensor, got shape {tuple(keys.shape)}")
    if keys.device.type not in ("cpu", "cuda"):
        raise ValueError(f"keys: expected a cpu or cuda tensor, got device {keys.device}")
    if not load_library():
        raise RuntimeError("dynamicemb: the op library _C.so is missing (install the built wheel)")
    if keys.is_cuda:
        check_cuda_device(keys.device)
    return torch.ops.dynamicemb.hash_keys(keys.contiguous())


_MASK64 = (1 << 64) - 1


def fmix64(k: int) -> int:
    """The key hash on one Python int (bit pattern taken modulo 2**64): MurmurHash3's fmix64 finalizer."""
    k &= _MASK64
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def fmix64_tensor(x: torch.Tensor) -> torch.Tensor:
    """``fmix64`` elementwise on an int64 tensor holding uint64 bit patterns (wrapping multiplies; each ``>> 33``
    is an arithmetic shift masked to the bits a logical shift keeps). The kernels' ``table::mix64``."""
    x = x ^ ((x >> 33) & ((1 << 31) - 1))
    x = x * _to_i64(0xFF51AFD7ED558CCD)
    x = x ^ ((x >> 33) & ((1 << 31) - 1))
    x = x * _to_i64(0xC4CEB9FE1A85EC53)
    return x ^ ((x >> 33) & ((1 << 31) - 1))


def _to_i64(x: int) -> int:
    """A 64-bit pattern (taken modulo 2**64) as the signed int64 Python int that torch stores."""
    x = int(x) & _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def hash_keys_reference(keys: torch.Tensor) -> torch.Tensor:
    """Pure-Python fmix64 (for tests): same result as `hash_keys`, computed with Python ints."""
    out = [fmix64(k) for k in keys.tolist()]
    if keys.dtype == torch.int64:
        out = [_to_i64(k) for k in out]
    return torch.tensor(out, dtype=keys.dtype)
