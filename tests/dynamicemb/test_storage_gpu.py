"""Storage tiers on CUDA (skip without a GPU): hbm, hybrid (rows in pinned host memory through UVA) and caching
(host and disk stores) give bit-identical training on the fused kernels; prefetch on the side stream; the table
ops of a hybrid table equal an all-HBM table's."""

import os
import sys

import pytest
import torch

from dynamicemb._load import load_library
from dynamicemb._optimizers import SGD, Adam, RowWiseAdagrad
from dynamicemb._table import ScoredHashTable

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import HAVE_ROCKS, assert_same, batches, disk, make, rows, step  # noqa: E402

pytestmark = [pytest.mark.skipif(not (torch.cuda.is_available() and load_library()), reason="needs a GPU and _C.so"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

MODES = ["hybrid-0", "hybrid-half", "caching-host"] + (["caching-disk"] if HAVE_ROCKS else [])


def build(mode, tmp_path, opt):
    if mode == "hybrid-0":
        return make("hybrid", opt, device="cuda", budget_rows=0)
    if mode == "hybrid-half":
        return make("hybrid", opt, device="cuda", budget_rows=512)
    return make("caching", opt, device="cuda", stores=disk(tmp_path) if mode == "caching-disk" else (None, None))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("opt", [SGD(lr=0.1), Adam(lr=0.01), RowWiseAdagrad(lr=0.05)], ids=["sgd", "adam", "rwada"])
def test_mode_parity_cuda(mode, opt, tmp_path):
    ref, m = make("hbm", opt, device="cuda"), build(mode, tmp_path, opt)
    assert ref.use_kernels and m.use_kernels
    if mode.startswith("hybrid"):
        assert (m.tables[0].values_host is not None) == (mode == "hybrid-0" or mode == "hybrid-half")
    for ids, off, w in batches(10, device="cuda"):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)
    ref.eval(), m.eval()
    ids = torch.arange(0, 400, 3, device="cuda")
    off = torch.tensor([0, 40, 90, ids.numel()], device="cuda")
    assert torch.equal(ref(ids, off), m(ids, off))


def test_caching_torch_path_cuda():
    ref, m = make("hbm", device="cuda"), make("caching", device="cuda")
    ref.use_kernels = m.use_kernels = False
    for ids, off, w in batches(6, device="cuda"):
        assert torch.equal(step(ref, ids, off, w), step(m, ids, off, w))
    assert_same(ref, m)


def test_prefetch_cuda_side_stream(tmp_path):
    ref = make("hbm", device="cuda")
    m = make("caching", device="cuda", stores=disk(tmp_path) if HAVE_ROCKS else (None, None))
    data = list(batches(12, seed=3))
    for i, (ids, off, w) in enumerate(data):
        o_ref = step(ref, ids.cuda(), off.cuda(), w.cuda())
        out = m(ids.cuda(), off.cuda())
        if i + 1 < len(data):
            m.prefetch(data[i + 1][0], data[i + 1][1])  # CPU ids: no wait on this step
        (out * w.cuda()).sum().backward()
        assert torch.equal(o_ref, out)
    torch.cuda.synchronize()
    assert_same(ref, m)


@pytest.mark.parametrize("hbm_rows", [0, 96, 256])
def test_hybrid_table_ops_equal_hbm(hbm_rows):
    from dynamicemb._hybrid import HybridTable

    a = ScoredHashTable(256, 8, device="cuda", bucket_capacity=16, score_policy="lfu")
    b = HybridTable(256, 8, device="cuda", bucket_capacity=16, score_policy="lfu", hbm_rows=hbm_rows)
    g = torch.Generator().manual_seed(0)
    for _ in range(6):
        k = torch.randint(0, 600, (200,), generator=g).cuda()
        v = torch.randn(200, 8, generator=g).cuda()
        for t in (a, b):
            t.find_or_insert(k[:100])
            t.insert_or_assign(k[100:], v[100:])
        ea, eb = a.insert_and_evict(k[:50], v[:50]), b.insert_and_evict(k[:50], v[:50])
        assert int(ea.num_evicted) == int(eb.num_evicted)
        fa, fb = a.find(k), b.find(k)
        assert torch.equal(fa.values, fb.values) and torch.equal(fa.found, fb.found)
    for x, y in zip(rows(a), rows(b)):
        assert torch.equal(x, y)
    sd = b.state_dict()
    c = HybridTable(256, 8, device="cuda", bucket_capacity=16, score_policy="lfu", hbm_rows=hbm_rows)
    c.load_state_dict(sd)
    for x, y in zip(rows(a), rows(c)):
        assert torch.equal(x, y)
