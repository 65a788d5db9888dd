"""dynamicemb.hash_keys: CPU vs a pure-Python fmix64, CUDA vs CPU, and input validation."""

import pytest
import torch

import dynamicemb
from dynamicemb._hash import hash_keys_reference


def _keys(n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(-(2**63), 2**63 - 1, (n,), generator=g, dtype=torch.int64)
    edges = torch.tensor([0, 1, -1, -(2**63)])  # edges of the range
    k[: min(n, 4)] = edges[: min(n, 4)]
    return k if dtype == torch.int64 else k.view(torch.uint64)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint64])
def test_cpu_matches_python_reference(dtype):
    keys = _keys(1000, dtype)
    assert torch.equal(dynamicemb.hash_keys(keys).view(torch.int64), hash_keys_reference(keys).view(torch.int64))


def test_same_bits_same_hash():
    k = _keys(257, torch.int64, seed=1)
    assert torch.equal(dynamicemb.hash_keys(k), dynamicemb.hash_keys(k.view(torch.uint64)).view(torch.int64))


def test_hash_spreads_buckets():
    # Consecutive ids must spread over buckets (the table relies on it): chi-square-like bound on 64 buckets.
    h = dynamicemb.hash_keys(torch.arange(64 * 1000, dtype=torch.int64)).view(torch.uint64)
    buckets = torch.bincount((h.view(torch.int64) & 63), minlength=64)
    assert buckets.min() > 850 and buckets.max() < 1150, buckets


def test_empty():
    assert dynamicemb.hash_keys(torch.empty(0, dtype=torch.int64)).numel() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint64])
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_cuda_matches_cpu(dtype, n):
    keys = _keys(n, dtype, seed=n)
    out = torch.full((n,), 7, dtype=dtype, device="cuda")  # poison: the op allocates its own output
    out = dynamicemb.hash_keys(keys.cuda())
    torch.cuda.synchronize()
    assert torch.equal(out.cpu().view(torch.int64), dynamicemb.hash_keys(keys).view(torch.int64))


@pytest.mark.gpu
def test_cuda_graph_capture():
    keys = _keys(4096, torch.int64, seed=3).cuda()
    dynamicemb.hash_keys(keys)  # warm up
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = dynamicemb.hash_keys(keys)
    fresh = _keys(4096, torch.int64, seed=4)
    keys.copy_(fresh)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), dynamicemb.hash_keys(fresh))


@pytest.mark.parametrize(
    "bad, exc, words",
    [
        (torch.zeros(3, dtype=torch.int32), TypeError, ["keys", "int64", "int32"]),
        (torch.zeros(3, dtype=torch.float32), TypeError, ["keys", "float32"]),
        (torch.zeros(2, 2, dtype=torch.int64), ValueError, ["keys", "1-d", "(2, 2)"]),
        ([1, 2, 3], TypeError, ["keys", "Tensor", "list"]),
    ],
)
def test_bad_input_names_the_argument(bad, exc, words):
    with pytest.raises(exc) as e:
        dynamicemb.hash_keys(bad)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_op_level_validation_names_the_argument():
    """The C++ op validates too (callers may reach torch.ops directly)."""
    with pytest.raises(RuntimeError, match="keys: expected dtype int64 or uint64, got int32"):
        torch.ops.dynamicemb.hash_keys(torch.zeros(3, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="keys: expected a contiguous tensor"):
        torch.ops.dynamicemb.hash_keys(torch.zeros(6, dtype=torch.int64)[::2])
