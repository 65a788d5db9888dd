"""Shared pytest configuration: markers that turn into skips where the hardware is missing.

    @pytest.mark.gpu    needs a CUDA device
    @pytest.mark.sm90   needs a CUDA device of compute capability >= 9.0
So one suite runs everywhere: on CPU-only CI the GPU tests report as skipped.
"""

import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "sm90: needs a CUDA device of compute capability >= 9.0")


def _cuda_capability():
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def pytest_collection_modifyitems(config, items):
    cap = _cuda_capability()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_sm90 = pytest.mark.skip(reason=f"needs compute capability >= 9.0 (have {cap})")
    for item in items:
        if cap is None and ("gpu" in item.keywords or "sm90" in item.keywords):
            item.add_marker(skip_gpu)
        elif "sm90" in item.keywords and cap < (9, 0):
            item.add_marker(skip_sm90)
