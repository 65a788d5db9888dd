"""Which rank owns a key: the row-wise placement of sharded dynamic tables.

A key of table ``t`` lives on exactly one rank of a world of ``W``, its owner, given by the routing mode:

- ``"hash"`` (default): ``h = fmix64(key XOR salt(t))`` with ``salt(t) = (t + 1) * 0x9E3779B97F4A7C15`` (mod
  2**64), owner ``= ((h >> 32) * W) >> 32`` (the high 32 hash bits scaled to [0, W)). Sequential and hot ids
  spread evenly, the same id of two tables lands on unrelated owners, and the owner is independent of the bucket
  the owner's table picks (that uses the unsalted hash).
- ``"roundrobin"``: owner ``= key mod W`` (the key read as unsigned 64 bits).
- ``"continuous"``: contiguous key ranges. With the table's ``key_space`` K (1 <= K <= 2**63; TorchRec configs
  give ``num_embeddings``) and ``block = ceil(K / W)``: owner ``= key // block`` for keys in [0, K), and ``W - 1``
  for every key >= K (as unsigned: a uint64 key with the top bit set is >= K). Rank r owns [r * block,
  (r + 1) * block), the last rank also everything above.

All arithmetic is on int64 tensors holding the keys' 64 bits, elementwise, on the keys' device, with no host
synchronization; the same function routes a training step and re-routes a checkpoint on load.
"""

from __future__ import annotations

from typing import Optional

import torch

from ._hash import _to_i64, fmix64_tensor
from ._load import load_library

__all__ = ["ROUTING_MODES", "route_keys", "route_keys_by_table"]

ROUTING_MODES = ("hash", "roundrobin", "continuous")
_GOLDEN = 0x9E3779B97F4A7C15
_KEY_SPACE_MAX = 1 << 63
_LOW63 = (1 << 63) - 1


def _check_world(world_size) -> int:
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 1 <= world_size <= 1 << 20:
        raise ValueError(f"world_size: expected an int in [1, 2**20], got {world_size!r}")
    return world_size


def check_key_space(key_space) -> int:
    """Validates one table's key space of the continuous routing; returns it as an int."""
    if not isinstance(key_space, int) or isinstance(key_space, bool) or not 1 <= key_space <= _KEY_SPACE_MAX:
        raise ValueError(f"key_space: expected an int in [1, 2**63], got {key_space!r}")
    return key_space


def route_keys(keys: torch.Tensor, world_size: int, mode: str = "hash", table: int = 0,
               key_space: Optional[int] = None) -> torch.Tensor:
    """Owner rank of each key of one table (see the module docstring for the exact rule of each mode).

    Args:
        keys: (n,) int64 or uint64 tensor (CPU or CUDA).
        world_size: number of ranks W the table is sharded over.
        mode: "hash", "roundrobin" or "continuous".
        table: index of the table in its sharded module (salts the "hash" mode).
        key_space: the "continuous" mode's key range [0, K) split into W blocks; default 2**63.

    Returns:
        (n,) int64 tensor of owners in [0, W), on the keys' device.

    Raises:
        ValueError / TypeError: an unknown mode, a bad world size, key space or key tensor.

    Example:
        >>> route_keys(torch.arange(6), 2, "roundrobin").tolist()
        [0, 1, 0, 1, 0, 1]
        >>> route_keys(torch.arange(6), 2, "continuous", key_space=6).tolist()
        [0, 0, 0, 1, 1, 1]
    """
    W = _check_world(world_size)
    if mode not in ROUTING_MODES:
        raise ValueError(f"mode: expected one of {list(ROUTING_MODES)}, got {mode!r}")
    if not isinstance(keys, torch.Tensor) or keys.dtype not in (torch.int64, torch.uint64):
        raise TypeError(f"keys: expected an int64 or uint64 tensor, got {getattr(keys, 'dtype', type(keys))}")
    if keys.dim() != 1:
        raise ValueError(f"keys: expected a 1-d tensor, got shape {tuple(keys.shape)}")
    if not isinstance(table, int) or table < 0:
        raise ValueError(f"table: expected an int >= 0, got {table!r}")
    k = keys.view(torch.int64)
    if W == 1:
        return torch.zeros_like(k)
    if mode == "hash":
        h = fmix64_tensor(k ^ _to_i64(_GOLDEN * (table + 1)))
        return (((h >> 32) & 0xFFFFFFFF) * W) >> 32
    if mode == "roundrobin":
        # unsigned mod: the low 63 bits mod W, plus 2**63 mod W where the top bit is set
        low = (k & _LOW63) % W
        return torch.where(k < 0, (low + (1 << 63) % W) % W, low)
    K = check_key_space(_KEY_SPACE_MAX if key_space is None else key_space)
    block = -(-K // W)
    # k < 0 is an unsigned key >= 2**63 >= K: the last rank, like every key past the key space
    past = (k < 0) if K == _KEY_SPACE_MAX else (k < 0) | (k >= K)
    return torch.where(past, W - 1, torch.div(k.clamp(min=0), block, rounding_mode="floor"))


_CONSTANTS: dict = {}


def _table_constants(kind, W: int, T: int, device, values):
    """A per-table int64 constant tensor on ``device``, made once (a tensor from host values on every step would
    be a blocking host-to-device copy on the step's path)."""
    key = (kind, W, T, str(device))
    t = _CONSTANTS.get(key)
    if t is None:
        if len(_CONSTANTS) > 256:
            _CONSTANTS.clear()
        t = _CONSTANTS[key] = torch.tensor(values(), dtype=torch.int64, device=device)
    return t


def route_keys_by_table(keys: torch.Tensor, tables: torch.Tensor, world_size: int, mode: str,
                        key_spaces) -> torch.Tensor:
    """``route_keys`` of (key, table) pairs of many tables in one pass (the step's hot path: one hash of all ids,
    not one per table). ``tables`` (n,) int64 table index of each key; ``key_spaces``: one key space (or None)
    per table. Same owners as ``route_keys(keys[i:i+1], world_size, mode, tables[i], key_spaces[tables[i]])``."""
    W = world_size
    k = keys.view(torch.int64)
    if W == 1:
        return torch.zeros_like(k)
    if mode == "roundrobin":
        return route_keys(keys, W, mode)
    T = len(key_spaces)
    if mode == "hash":
        salts = _table_constants("salt", W, T, k.device, lambda: [_to_i64(_GOLDEN * (t + 1)) for t in range(T)])
        x = k ^ salts[tables]
        # fmix64 in one kernel (op hash_keys, the same bits) where the op library is loaded, else 11 torch ops
        h = torch.ops.dynamicemb.hash_keys(x) if load_library() else fmix64_tensor(x)
        return (((h >> 32) & 0xFFFFFFFF) * W) >> 32
    spaces = tuple(check_key_space(_KEY_SPACE_MAX if s is None else s) for s in key_spaces)
    # per table: the block size and the last key of the space (K - 1 fits int64 even for K = 2**63)
    block = _table_constants(("block", spaces), W, T, k.device, lambda: [-(-K // W) for K in spaces])[tables]
    last = _table_constants(("last", spaces), W, T, k.device, lambda: [K - 1 for K in spaces])[tables]
    past = (k < 0) | (k > last)
    return torch.where(past, W - 1, torch.div(k.clamp(min=0), block, rounding_mode="floor"))
