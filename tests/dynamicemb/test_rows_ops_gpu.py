"""The row ops' CUDA kernels (gather_rows, pool_rows, segment_sum_rows) against fp64 references: vector widths
(16-byte rows, odd widths, misaligned rows), int32 / int64 indices, out-of-range indices, long segments, a
benchmark-sized case; bitwise equal run to run (no atomics). Skips without a GPU."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import rows_checks as rc  # noqa: E402

from dynamicemb._rows import rows_ops_available  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not (torch.cuda.is_available() and rows_ops_available()),
                                 reason="needs a CUDA device and dynamicemb/_C.so")]


@pytest.mark.parametrize("d,dtype", [(128, torch.float32), (6, torch.float32), (3, torch.float32),
                                     (64, torch.bfloat16), (3, torch.float16), (5, torch.uint8)])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_gather_rows(d, dtype, idx_dtype):
    rc.check_gather("cuda", 3001, 257, d, dtype, idx_dtype, seed=d + 7)
    rc.check_gather("cuda", 0, 10, d, dtype, idx_dtype, seed=2)


def test_gather_rows_misaligned():
    src = torch.randn(129 * 32 + 1, device="cuda")[1:].view(129, 32)  # 4-byte aligned rows only
    idx = torch.randint(0, 129, (999,), device="cuda")
    assert torch.equal(rc.OPS.gather_rows(src, idx), src[idx])


@pytest.mark.parametrize("d", [128, 7])
def test_gather_rows_converting(d):
    rc.check_gather_converts("cuda", 3001, 257, d, seed=d + 17)


@pytest.mark.parametrize("src_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 6])
def test_pool_rows_half_rows(src_dtype, d):
    args = rc.check_pool("cuda", 3000, 400, d, True, False, seed=d + 60, max_len=13, src_dtype=src_dtype)
    rc.check_pool("cuda", 3000, 400, d, False, True, seed=d + 61, max_len=13, batch=1000, src_dtype=src_dtype)
    cpu = rc.OPS.pool_rows(*[None if t is None else t.cpu() for t in args], False)
    torch.testing.assert_close(rc.OPS.pool_rows(*args, False).cpu(), cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 5])
def test_segment_sum_rows_half_out(out_dtype, d):
    a = rc.check_segment("cuda", 20000, 3001, d, True, True, torch.int64, seed=d + 70, hot=2500, out_dtype=out_dtype)
    rc.check_segment("cuda", 0, 4, d, False, False, torch.int32, seed=3, out_dtype=out_dtype)
    grad, inv, row_of, w = rc.segment_inputs("cuda", 20000, 3001, d, True, True, torch.int64, d + 70, hot=2500)
    assert torch.equal(a, rc.OPS.segment_sum_rows(grad, inv, 3001, row_of, w, rc.KIND[out_dtype]))


@pytest.mark.parametrize("weighted,mean", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("d", [128, 7])
def test_pool_rows(weighted, mean, d):
    rc.check_pool("cuda", 3000, 400, d, weighted, mean, seed=d + weighted + 2 * mean + 50, max_len=13, batch=1000)
    args = rc.check_pool("cuda", 3000, 400, d, weighted, mean, seed=d + weighted + 2 * mean, max_len=13)
    a = rc.OPS.pool_rows(*args, mean)
    b = rc.OPS.pool_rows(*args, mean)
    assert torch.equal(a, b), "pool_rows: differs run to run"
    cpu = rc.OPS.pool_rows(*[None if t is None else t.cpu() for t in args], mean)
    torch.testing.assert_close(a.cpu(), cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pooled,weighted", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("d", [128, 12, 5])
def test_segment_sum_rows(pooled, weighted, idx_dtype, d):
    seed = d + 3 * pooled + 5 * weighted
    rc.check_segment("cuda", 20000, 3001, d, pooled, weighted, idx_dtype, seed=seed, hot=2500)
    rc.check_segment("cuda", 0, 4, d, pooled, weighted, idx_dtype, seed=seed)
    grad, inv, row_of, w = rc.segment_inputs("cuda", 20000, 3001, d, pooled, weighted, idx_dtype, seed, hot=2500)
    a = rc.OPS.segment_sum_rows(grad, inv, 3001, row_of, w)
    b = rc.OPS.segment_sum_rows(grad, inv, 3001, row_of, w)
    assert torch.equal(a, b), "segment_sum_rows: differs run to run"
    # the CPU kernel adds each unique's entries in one run (CUDA: in chunks of 64): both within the fp32 bound
    cpu = rc.OPS.segment_sum_rows(grad.cpu(), inv.cpu(), 3001, None if row_of is None else row_of.cpu(),
                                  None if w is None else w.cpu())
    ref, absref = rc.segment_reference(grad, inv, 3001, row_of, w)
    rc.check_close(cpu.cuda(), ref, absref, "segment_sum_rows cpu")


def test_benchmark_sized():
    """1M ids over ~400k uniques (Zipf-like repeats: the hottest unique has ~14 k entries, cut into ~220
    chunks), D=128: the sharded benchmark's per-rank shape."""
    g = torch.Generator().manual_seed(9)
    n, nu, d = 1 << 20, 400_000, 128
    inv = (torch.rand(n, generator=g).pow(3) * nu).long().clamp(max=nu - 1).cuda()
    grad = torch.randn(n, d, generator=g).cuda()
    rc.poison("cuda")
    out = rc.OPS.segment_sum_rows(grad, inv, nu)
    ref, absref = rc.segment_reference(grad, inv, nu, None, None)
    rc.check_close(out, ref, absref, "segment_sum_rows 1M")
    src = torch.randn(nu, d, generator=g).cuda()
    assert torch.equal(rc.OPS.gather_rows(src, inv), src[inv])
