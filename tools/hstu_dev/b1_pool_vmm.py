"""The KV cache's pool in memory mapped by the driver's virtual memory API (cuMemCreate / cuMemMap) with a chosen
physical allocation size, instead of the caching allocator's cudaMalloc segment (issue 34: which memory layer 0's
first K / V tile waits for; docs/hstu_inference.md, "Where the batch-1 step's time goes beyond its kernels").

Modes (b1_step_bench.py's variants of the same names):
  vmm2m   one physical allocation per granule (the minimum granularity, 2 MB on the H200), each mapped on its own:
          the pool's translations are at most 2 MB pages, whatever the driver does with a large cudaMalloc
  vmm     one physical allocation of the whole (rounded) size, its virtual range reserved at a 1 GB alignment: the
          driver may use its largest page size

swap_pool(cache, mode) replaces cache.pool by such memory (same shape, dtype and contents); the memory is never freed
(a lab tool: one process, a few pools).
"""
from __future__ import annotations

import ctypes

import torch

_KEEP = []  # (the mapped memory's owners: never freed in the process)


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int), ("loc_type", ctypes.c_int),
                ("loc_id", ctypes.c_int), ("win32", ctypes.c_void_p), ("compression", ctypes.c_ubyte),
                ("rdma", ctypes.c_ubyte), ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int), ("flags", ctypes.c_int)]


class _Mapped:
    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None}


def _cu():
    cu = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemGetAllocationGranularity"):
        getattr(cu, name).restype = ctypes.c_int
    return cu


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"b1_pool_vmm: {what} returned CUresult {rc}")


def mapped_bytes(nbytes: int, mode: str, device: torch.device):
    """(a uint8 CUDA tensor of >= nbytes bytes in memory mapped as `mode` says (module docstring), the granularity)."""
    torch.cuda.init()
    torch.zeros(1, device=device)  # (the primary context current on this thread)
    cu = _cu()
    dev = device.index if device.index is not None else torch.cuda.current_device()
    prop = _Prop(type=1, handle_types=0, loc_type=1, loc_id=dev)  # pinned, device memory
    gran = ctypes.c_size_t(0)
    _check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "granularity")
    g = gran.value
    size = (nbytes + g - 1) // g * g
    ptr = ctypes.c_uint64(0)
    align = (1 << 30) if mode == "vmm" else g
    _check(cu.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(align),
                                  ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
    chunks = [(0, size)] if mode == "vmm" else [(o, g) for o in range(0, size, g)]
    for off, n in chunks:
        h = ctypes.c_uint64(0)
        _check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(n), ctypes.byref(prop), ctypes.c_uint64(0)),
               "cuMemCreate")
        _check(cu.cuMemMap(ctypes.c_uint64(ptr.value + off), ctypes.c_size_t(n), ctypes.c_size_t(0), h,
                           ctypes.c_uint64(0)), "cuMemMap")
    acc = _Access(loc_type=1, loc_id=dev, flags=3)  # read / write
    _check(cu.cuMemSetAccess(ctypes.c_uint64(ptr.value), ctypes.c_size_t(size), ctypes.byref(acc),
                             ctypes.c_size_t(1)), "cuMemSetAccess")
    owner = _Mapped(ptr.value, size)
    _KEEP.append(owner)
    t = torch.as_tensor(owner, device=device)
    assert t.data_ptr() == ptr.value and t.numel() == size
    return t, g


def swap_pool(cache, mode: str) -> str:
    """cache.pool moved into mapped memory (mode: "vmm2m" or "vmm"); returns a one-line note (granularity, base)."""
    old = cache.pool
    raw, g = mapped_bytes(old.numel() * old.element_size(), mode, old.device)
    new = raw[: old.numel() * old.element_size()].view(old.dtype).view(old.shape)
    new.copy_(old)
    torch.cuda.synchronize()
    cache.pool = new
    return f"pool {mode}: {raw.numel() >> 20} MiB at {new.data_ptr():#x}, granularity {g >> 10} KiB"
