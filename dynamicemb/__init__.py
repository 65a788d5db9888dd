"""dynamicemb: dynamic embedding tables on a scored GPU hash table.

Public API (everything else is private):
    hash_keys        the table's key hash as an op (CPU and CUDA)
"""

from ._hash import hash_keys
from ._load import load_library

__version__ = "0.1.0"

load_library()

__all__ = ["hash_keys", "__version__"]
