"""Loading of the compiled op library `_C.so` that ships inside the wheel."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

import torch

__all__ = ["load_library", "library_path", "library_loaded", "compiled_kernels"]

_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C.so")
_loaded: Optional[bool] = None


def library_path() -> str:
    """Where `_C.so` is expected: next to this file."""
    return _LIB_PATH


def _is_source_checkout() -> bool:
    # A wheel install holds neither the C++ sources nor the Bazel files; the repository's hstu/ does.
    pkg = os.path.dirname(os.path.realpath(__file__))
    repo = os.path.dirname(pkg)
    return any(os.path.exists(os.path.join(pkg, n)) for n in ("csrc", "BUILD.bazel")) or any(
        os.path.exists(os.path.join(repo, n)) for n in ("WORKSPACE", "MODULE.bazel", "bazelw")
    )


def load_library() -> bool:
    """Load `_C.so` (CUDA kernels, C++ op schemas) once; return whether it is loaded.

    A wheel always carries `_C.so`; its absence is an error there. In a source checkout (the package
    imported straight from the repository's `hstu/` directory) the library may be missing: then only
    the CPU implementation works and this returns False.
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    if os.path.exists(_LIB_PATH):
        torch.ops.load_library(_LIB_PATH)
        _loaded = True
    elif _is_source_checkout():
        _loaded = False
    else:
        raise ImportError(
            f"hstu_attn: the op library {_LIB_PATH} is missing from the installed package; "
            "reinstall the hstu_attn wheel"
        )
    return _loaded


def library_loaded() -> bool:
    """Whether `_C.so` was loaded (False in a source checkout without a build)."""
    return bool(load_library())


def compiled_kernels() -> Dict[str, Any]:
    """The kernel instantiations compiled into `_C.so` (architectures, dtypes, head dims, ...).

    Returns the JSON of the C++ op `hstu_attn::compiled_kernels()` decoded into a dict, or
    ``{"library_loaded": False}`` when the library is absent (source checkout, CPU only).

    Example:
        >>> import hstu_attn
        >>> sorted(hstu_attn.compiled_kernels())  # doctest: +SKIP
    """
    if not load_library() or not hasattr(torch.ops.hstu_attn, "compiled_kernels"):
        return {"library_loaded": bool(_loaded)}
    return json.loads(torch.ops.hstu_attn.compiled_kernels())
