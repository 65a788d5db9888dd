"""The row ops' CPU kernels (gather_rows, pool_rows, segment_sum_rows; the sharded module's CUDA step runs them on
CPU in test_sharded_kernel_step_cpu.py) against fp64 references: dtypes, int32 / int64 indices, out-of-range
indices, empty bags and uniques, long segments, argument errors."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import rows_checks as rc  # noqa: E402

from dynamicemb._rows import rows_ops_available  # noqa: E402

pytestmark = pytest.mark.skipif(not rows_ops_available(), reason="dynamicemb/_C.so not built")


@pytest.mark.parametrize("d,dtype", [(16, torch.float32), (3, torch.float32), (5, torch.bfloat16), (0, torch.float32)])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_gather_rows(d, dtype, idx_dtype):
    rc.check_gather("cpu", 500, 40, d, dtype, idx_dtype, seed=d + 11)
    rc.check_gather("cpu", 0, 40, d, dtype, idx_dtype, seed=1)


@pytest.mark.parametrize("d", [8, 3])
def test_gather_rows_converting(d):
    rc.check_gather_converts("cpu", 300, 40, d, seed=d + 5)


@pytest.mark.parametrize("src_dtype", [torch.bfloat16, torch.float16])
def test_pool_rows_half_rows(src_dtype):
    rc.check_pool("cpu", 60, 30, 8, True, False, seed=4, src_dtype=src_dtype)
    rc.check_pool("cpu", 60, 30, 8, False, True, seed=5, src_dtype=src_dtype, batch=12)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_segment_sum_rows_half_out(out_dtype):
    rc.check_segment("cpu", 700, 90, 12, True, True, torch.int64, seed=8, hot=60, out_dtype=out_dtype)
    assert rc.check_segment("cpu", 0, 4, 12, False, False, torch.int64, seed=3, out_dtype=out_dtype).shape == (4, 12)


@pytest.mark.parametrize("weighted,mean", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("d", [8, 3])
def test_pool_rows(weighted, mean, d):
    rc.check_pool("cpu", 60, 30, d, weighted, mean, seed=d * 3 + weighted + 2 * mean)
    rc.check_pool("cpu", 60, 30, d, weighted, mean, seed=d * 3 + weighted + 2 * mean + 1, batch=12)


@pytest.mark.parametrize("pooled,weighted", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_segment_sum_rows(pooled, weighted, idx_dtype):
    rc.check_segment("cpu", 700, 90, 12, pooled, weighted, idx_dtype, seed=5 + pooled + 2 * weighted, hot=60)
    out = rc.check_segment("cpu", 0, 4, 12, pooled, weighted, idx_dtype, seed=3)
    assert out.shape == (4, 12)
    assert rc.OPS.segment_sum_rows(torch.randn(5, 3), torch.zeros(5, dtype=torch.int64), 0).shape == (0, 3)


def test_argument_errors():
    src = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match="index: expected dtype int64 or int32"):
        rc.OPS.gather_rows(src, torch.zeros(2))
    with pytest.raises(RuntimeError, match="src: expected"):
        rc.OPS.pool_rows(src.double(), torch.zeros(2, dtype=torch.int64), torch.tensor([0, 2]), None, False)
    with pytest.raises(RuntimeError, match="batch: expected 0 or a divisor"):
        rc.OPS.pool_rows(src, torch.zeros(2, dtype=torch.int64), torch.tensor([0, 1, 2]), None, False, 3)
    with pytest.raises(RuntimeError, match="weight: expected shape"):
        rc.OPS.pool_rows(src, torch.zeros(2, dtype=torch.int64), torch.tensor([0, 2]), torch.ones(3), False)
    with pytest.raises(RuntimeError, match="grad: expected a row per entry"):
        rc.OPS.segment_sum_rows(src, torch.zeros(9, dtype=torch.int64), 2)
    with pytest.raises(RuntimeError, match="out_kind: expected 0 .fp16., 1 .bf16. or 2 .fp32."):
        rc.OPS.gather_rows(src, torch.zeros(2, dtype=torch.int64), 7)
    with pytest.raises(RuntimeError, match="src: expected dtype float16, bfloat16 or float32 to convert"):
        rc.OPS.gather_rows(src.double(), torch.zeros(2, dtype=torch.int64), 2)
    with pytest.raises(RuntimeError, match="out_kind: expected"):
        rc.OPS.segment_sum_rows(src, torch.zeros(4, dtype=torch.int64), 2, None, None, 3)
    with pytest.raises(RuntimeError, match="row_of: expected a 1-d tensor"):
        rc.OPS.segment_sum_rows(src, torch.zeros(9, dtype=torch.int64), 2, torch.zeros(8, dtype=torch.int64))


def test_fake_kernels_trace():
    """The fake kernels give the shapes torch.compile traces with."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        src, idx = torch.empty(7, 5), torch.empty(11, dtype=torch.int64)
        assert rc.OPS.gather_rows(src, idx).shape == (11, 5)
        assert rc.OPS.pool_rows(src, idx, torch.empty(4, dtype=torch.int64), None, True).shape == (3, 5)
        assert rc.OPS.pool_rows(src, idx, torch.empty(5, dtype=torch.int64), None, True, 2).shape == (4, 5)
        assert rc.OPS.segment_sum_rows(torch.empty(11, 5), idx, 6).shape == (6, 5)
        assert rc.OPS.gather_rows(src.bfloat16(), idx, 2).dtype == torch.float32
        assert rc.OPS.pool_rows(src.half(), idx, torch.empty(4, dtype=torch.int64), None, False).dtype == torch.float32
        assert rc.OPS.segment_sum_rows(torch.empty(11, 5), idx, 6, None, None, 1).dtype == torch.bfloat16
