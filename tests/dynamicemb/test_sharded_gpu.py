"""ShardedDynamicEmbeddingTables on a CUDA device over NCCL with world size 1 (the multi-GPU runs are another
issue): the owner's shard modules run the fused kernels; outputs and rows match the single-rank CUDA module;
an empty step; a dump/load round trip; bf16 rows on the wire. Skips without a GPU."""

import os
import sys
import tempfile

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from dist_helpers import global_batch, table_rows  # noqa: E402

import dynamicemb as de  # noqa: E402
from dynamicemb._load import load_library  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built")]

V, B, FMAP = 3000, 32, [0, 1, 1]


@pytest.fixture(scope="module")
def nccl():
    if not dist.is_available() or not dist.is_nccl_available():
        pytest.skip("needs NCCL")
    with tempfile.TemporaryDirectory() as tmp:
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def _opts(dims, dtype=torch.float32):
    return [de.DynamicEmbTableOptions(dim=d, dtype=dtype, max_capacity=1 << 14, score_policy="lru",
                                      initializer=de.DynamicEmbInitializer("uniform", low=-0.05, high=0.05, seed=i))
            for i, d in enumerate(dims)]


def _pair(pooling, opt, dims=(16, 16), dtype=torch.float32, routing="hash"):
    ref = de.BatchedDynamicEmbeddingTables(_opts(dims, dtype), FMAP, pooling=pooling, optimizer=opt(), device="cuda")
    sh = de.ShardedDynamicEmbeddingTables(_opts(dims, dtype), FMAP, pooling=pooling, optimizer=opt(), routing=routing,
                                          key_space=V)
    assert sh.device.type == "cuda"
    assert all(m.use_kernels for m in sh.shard_modules().values()), "the shard modules should run the kernels"
    return ref, sh


def _train(ref, sh, steps, gen, tol, weighted=False, empty=()):
    for step in range(steps):
        ids, off, w, _ = global_batch(gen, len(FMAP), 1, B, V, max_len=4, weighted=weighted,
                                      empty_features=empty if step == 1 else ())
        ids, off = ids.cuda(), off.cuda()
        w = None if w is None else w.cuda()
        a = ref(ids, off, per_sample_weights=w)
        b = sh(ids, off, per_sample_weights=w)
        torch.testing.assert_close(b.float(), a.float(), **tol)
        R = torch.randn(a.shape, generator=gen).cuda()
        (a.float() * R).sum().backward()
        (b.float() * R).sum().backward()


def _check_rows(ref, sh, tol):
    """Every table's ids and rows on the (one) rank equal the single-rank module's."""
    for t in range(2):
        inner, i = sh.local_table(t)
        mine, theirs = table_rows(inner.tables[i]), table_rows(ref.tables[t])
        assert set(mine) == set(theirs)
        k = sorted(mine)
        torch.testing.assert_close(torch.tensor([mine[x][0] for x in k]), torch.tensor([theirs[x][0] for x in k]),
                                   **tol)


@pytest.mark.parametrize("pooling", ["sum", "mean", "none"])
@pytest.mark.parametrize("opt", ["adam", "rowwise_clip"])
def test_parity_with_single_rank_cuda(nccl, pooling, opt):
    mk = {"adam": lambda: de.Adam(lr=0.02), "rowwise_clip": lambda: de.RowWiseAdagrad(lr=0.1, max_grad_norm=0.5)}[opt]
    ref, sh = _pair(pooling, mk, dims=(16, 16) if pooling == "none" else (16, 8))
    tol = dict(rtol=1e-5, atol=1e-5)
    _train(ref, sh, 4, torch.Generator().manual_seed(3), tol, weighted=pooling == "sum")
    _check_rows(ref, sh, tol)


@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_pooled_one_dim(nccl, pooling):
    # one dim for every feature: op pool_rows writes the (B, F * D) output directly and the gradient sums read
    # the output gradient in place (mixed dims take the per-feature copies)
    ref, sh = _pair(pooling, lambda: de.Adam(lr=0.02), dims=(16, 16))
    _train(ref, sh, 3, torch.Generator().manual_seed(11), dict(rtol=1e-5, atol=1e-5), weighted=pooling == "sum")
    _check_rows(ref, sh, dict(rtol=1e-5, atol=1e-5))


def test_step_with_a_table_without_ids(nccl):
    # step 1 has no ids of table 1: its shard module (the only one of width 8) runs on an empty input
    ref, sh = _pair("sum", lambda: de.Adam(lr=0.02))
    _train(ref, sh, 3, torch.Generator().manual_seed(6), dict(rtol=1e-5, atol=1e-5), empty=[1, 2])


def test_bf16_rows(nccl):
    ref, sh = _pair("sum", lambda: de.SGD(lr=0.1), dtype=torch.bfloat16)
    _train(ref, sh, 3, torch.Generator().manual_seed(4), dict(rtol=2e-2, atol=2e-2))


def test_qcomms_rounding(nccl):
    # rows / gradients rounded to bf16 / fp16 on the (one rank's) wire: the CUDA step's casts against the exact
    # single-rank CUDA module, each direction apart (shard_workers.qcomms_parity)
    import shard_workers as sw

    sw.qcomms_parity(0, 1)


def test_empty_batch(nccl):
    _, sh = _pair("sum", lambda: de.Adam(lr=0.02))
    ids = torch.empty(0, dtype=torch.int64, device="cuda")
    off = torch.zeros(len(FMAP) * 4 + 1, dtype=torch.int64, device="cuda")
    out = sh(ids, off)
    assert out.shape == (4, 48) and not out.any()
    out.sum().backward()


def test_dump_load_round_trip(nccl, tmp_path):
    ref, sh = _pair("sum", lambda: de.Adam(lr=0.02), routing="roundrobin")
    _train(ref, sh, 2, torch.Generator().manual_seed(5), dict(rtol=1e-5, atol=1e-5))
    sh.dump(str(tmp_path / "ck"))
    _, sh2 = _pair("sum", lambda: de.Adam(lr=0.02), routing="roundrobin")
    sh2.load(str(tmp_path / "ck"))
    for t in range(2):
        a, i = sh.local_table(t)
        b, j = sh2.local_table(t)
        assert table_rows(a.tables[i]) == table_rows(b.tables[j])


def test_weight_gradients(nccl):
    # per-sample weights that need a gradient take the unfused pooling (the ids' rows are kept for it)
    ref, sh = _pair("sum", lambda: de.SGD(lr=0.1), dims=(16, 8))
    gen = torch.Generator().manual_seed(8)
    for _ in range(3):
        ids, off, w, _ = global_batch(gen, len(FMAP), 1, B, V, max_len=4, weighted=True)
        ids, off = ids.cuda(), off.cuda()
        wa, wb = w.cuda().requires_grad_(), w.cuda().requires_grad_()
        a, b = ref(ids, off, per_sample_weights=wa), sh(ids, off, per_sample_weights=wb)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
        R = torch.randn(a.shape, generator=gen).cuda()
        (a * R).sum().backward()
        (b * R).sum().backward()
        torch.testing.assert_close(wb.grad, wa.grad, rtol=1e-5, atol=1e-5)


def test_storage_modes_bitwise_cuda(nccl, tmp_path):
    """On CUDA the sharded path over the hybrid and caching modes (host store, uva store, a disk store where rocksdict
    is installed) equals the sharded all-HBM module bit for bit (`shard_workers.storage_modes_bitwise`; the
    multi-GPU NCCL tests run it at 2 and 4 ranks)."""
    import shard_workers as sw

    sw.storage_modes_bitwise(0, 1, str(tmp_path))
