"""Whether this wheel's CUDA kernels run on a device; a clear error before the first launch when they do not.

One source for both packages: linked as `hstu/_device_check.py` and `dynamicemb/_device_check.py`. The check
reads the device's compute capability (cached by torch, no host sync) once per device index and compares it
with the archs in `_build_info.CUDA_ARCHS` (written by tools/wheel/build_wheel.py).
"""

from typing import Iterable, Optional, Set, Tuple

import torch

__all__ = ["built_archs", "check_cuda_device", "covers", "describe_archs"]

_PACKAGE = (__package__ or "accelerated_modules").split(".")[0]
_checked: Set[int] = set()  # device indices that passed


def built_archs() -> Optional[Tuple[str, ...]]:
    """The CUDA archs this package was built for, e.g. ('sm_80', 'sm_90a'); None in a source checkout."""
    try:
        from . import _build_info
    except ImportError:
        return None
    return tuple(a for a in _build_info.CUDA_ARCHS.split(",") if a)


def covers(archs: Iterable[str], capability: Tuple[int, int]) -> bool:
    """Whether kernels built for `archs` run on a GPU of `capability` (major, minor).

    SASS runs on its own major version at a minor at least as high ('a' variants only on that exact arch);
    sm_80 also carries compute_80 PTX (tools/cuda/cuda.bzl), which the driver JIT-compiles on any newer GPU.
    """
    major, minor = capability
    for a in archs:
        digits = a[len("sm_"):].rstrip("a")
        am, an = int(digits[:-1]), int(digits[-1])
        if a.endswith("a"):
            if (am, an) == (major, minor):
                return True
        elif am == major and an <= minor:
            return True
        if a == "sm_80" and (major, minor) >= (8, 0):
            return True  # compute_80 PTX
    return False


def describe_archs(archs: Iterable[str]) -> str:
    """e.g. 'sm_80 (+ compute_80 PTX), sm_90a'."""
    return ", ".join(a + (" (+ compute_80 PTX)" if a == "sm_80" else "") for a in archs) or "no CUDA arch"


def check_cuda_device(device: torch.device) -> None:
    """Raises RuntimeError naming the device and the built archs when this build has no kernels for it.

    Cheap after the first call per device index (a set lookup); a source checkout (no build facts) passes, and
    so does tracing under torch.compile.
    """
    if torch.compiler.is_compiling():
        return  # not traced: eager calls check
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index in _checked:
        return
    archs = built_archs()
    if archs is not None:
        cap = torch.cuda.get_device_capability(index)
        if not covers(archs, cap):
            name = torch.cuda.get_device_name(index)
            hint = ("GPUs older than compute capability 8.0 (Ampere) are not supported"
                    if cap < (8, 0) else "build the wheel for it (README: build configurations)")
            raise RuntimeError(
                f"{_PACKAGE}: cuda:{index} ({name}, compute capability {cap[0]}.{cap[1]}) has no kernels in this "
                f"build, which was compiled for {describe_archs(archs)}; {hint}. CPU tensors still work."
            )
    _checked.add(index)
