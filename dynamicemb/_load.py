"""Loads the package's op library (`_C.so`, torch stable ABI) once."""

import os

import torch

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C.so")
_loaded = False


def load_library() -> bool:
    """Loads `_C.so` (registers the `torch.ops.dynamicemb.*` ops); returns whether it is available.

    The wheel always ships it; a plain source checkout has none, and then only pure-Python parts work.
    """
    global _loaded
    if not _loaded and os.path.exists(_LIB):
        torch.ops.load_library(_LIB)
        _loaded = True
    return _loaded
