"""Shared pytest configuration: markers that turn into skips where the hardware is missing.

    @pytest.mark.gpu        needs a CUDA device
    @pytest.mark.sm90       needs a CUDA device of compute capability >= 9.0
    @pytest.mark.gpus(n)    needs at least n CUDA devices
So one suite runs everywhere: on CPU-only CI the GPU tests report as skipped.

The `load_script` fixture loads a script of benchmarks/ or examples/ as a module, for the tests of those scripts.
"""

import importlib.util
import os
import sys

import pytest
import torch

# The repository root: in a checkout, and in Bazel's runfiles (the scripts are data of the tests there).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


@pytest.fixture(scope="module")
def load_script():
    """load_script("benchmarks/x.py") -> that script loaded as a module; skips the test where the tree lacks it.

    The module stays in sys.modules (dataclasses look their module up while the script runs) until the test module
    ends."""
    names = []

    def load(rel):
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path):
            pytest.skip(f"{rel} is not in this tree")
        name = os.path.splitext(os.path.basename(rel))[0] + "_script"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        names.append(name)
        spec.loader.exec_module(mod)
        return mod

    yield load
    for name in names:
        sys.modules.pop(name, None)
