"""Shared pytest configuration: markers that turn into skips where the hardware is missing.

    @pytest.mark.gpu        needs a CUDA device
    @pytest.mark.sm90       needs a CUDA device of compute capability >= 9.0
    @pytest.mark.gpus(n)    needs at least n CUDA devices
So one suite runs everywhere: on CPU-only CI the GPU tests report as skipped.
"""

import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "sm90: needs a CUDA device of compute capability >= 9.0")
    config.addinivalue_line("markers", "gpus(n): needs at least n CUDA devices")


def pytest_collection_modifyitems(config, items):
    have_cuda = torch.cuda.is_available()
    cap = torch.cuda.get_device_capability() if have_cuda else None
    count = torch.cuda.device_count() if have_cuda else 0
    for item in items:
        needs_gpu = any(m in item.keywords for m in ("gpu", "sm90", "gpus"))
        if needs_gpu and not have_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
            continue
        if "sm90" in item.keywords and cap < (9, 0):
            item.add_marker(pytest.mark.skip(reason=f"needs compute capability >= 9.0, have {cap}"))
        marker = item.get_closest_marker("gpus")
        if marker is not None and count < int(marker.args[0]):
            item.add_marker(pytest.mark.skip(reason=f"needs {marker.args[0]} CUDA devices, have {count}"))
