"""A GPU without kernels in this build gets a clear error naming the device and the built archs, before any launch.

No GPU here: the capability query is monkeypatched, and CUDA tensors are fake (FakeTensorMode), which is enough to
reach the check in each public entry. The real no-driver / hidden-GPU case runs in tools/gpu_check.sh.
"""

import importlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

PACKAGES = ("hstu_attn", "dynamicemb")


@pytest.fixture(params=PACKAGES)
def dc(request, monkeypatch):
    mod = importlib.import_module(f"{request.param}._device_check")
    monkeypatch.setattr(mod, "_checked", set())
    return mod


def _gpu(monkeypatch, capability, name="Fake GPU", archs=None, dc=None):
    """Pretends cuda:0 has `capability`; returns the list of indices whose capability was queried."""
    calls = []

    def cap(index=None):
        calls.append(index)
        return capability

    monkeypatch.setattr(torch.cuda, "get_device_capability", cap)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: name)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for mod in [dc] if dc else [importlib.import_module(f"{p}._device_check") for p in PACKAGES]:
        monkeypatch.setattr(mod, "_checked", set())
        if archs is not None:
            monkeypatch.setattr(mod, "built_archs", lambda: archs)
    return calls


def test_wheel_records_its_archs(dc):
    archs = dc.built_archs()
    assert archs and all(a.startswith("sm_") for a in archs), archs


@pytest.mark.parametrize("archs,cap,ok", [
    (("sm_80", "sm_90a"), (8, 0), True),
    (("sm_80", "sm_90a"), (8, 6), True),
    (("sm_80", "sm_90a"), (9, 0), True),
    (("sm_80", "sm_90a"), (10, 0), True),  # compute_80 PTX, JIT-compiled
    (("sm_80", "sm_90a"), (7, 5), False),
    (("sm_90a",), (9, 0), True),
    (("sm_90a",), (8, 0), False),
    (("sm_90a",), (10, 0), False),  # sm_90a SASS runs on sm_90 only, and carries no PTX
])
def test_check(dc, monkeypatch, archs, cap, ok):
    _gpu(monkeypatch, cap, name="NVIDIA Test", archs=archs, dc=dc)
    if ok:
        dc.check_cuda_device(torch.device("cuda", 0))
        return
    with pytest.raises(RuntimeError) as e:
        dc.check_cuda_device(torch.device("cuda", 0))
    msg = str(e.value)
    assert msg.startswith(dc.__package__.split(".")[0] + ": cuda:0 (NVIDIA Test, compute capability ")
    assert f"{cap[0]}.{cap[1]}" in msg and dc.describe_archs(archs) in msg
    if cap < (8, 0):
        assert "older than compute capability 8.0" in msg


def test_cached_per_device(dc, monkeypatch):
    calls = _gpu(monkeypatch, (9, 0), archs=("sm_80",), dc=dc)
    for _ in range(3):
        dc.check_cuda_device(torch.device("cuda", 0))
    dc.check_cuda_device(torch.device("cuda"))  # no index: the current device, same cache entry
    assert calls == [0]


def test_source_checkout_passes(dc, monkeypatch):
    _gpu(monkeypatch, (7, 0), archs=None, dc=dc)
    monkeypatch.setattr(dc, "built_archs", lambda: None)
    dc.check_cuda_device(torch.device("cuda", 0))


def _fake_cuda(*shape, dtype):
    with FakeTensorMode():
        return torch.empty(*shape, dtype=dtype, device="cuda:0")


def test_hstu_entry_checks_device(monkeypatch):
    import hstu_attn

    _gpu(monkeypatch, (7, 0), name="Tesla V100", archs=("sm_80", "sm_90a"))
    q = _fake_cuda(8, 2, 64, dtype=torch.bfloat16)
    cu = _fake_cuda(3, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"hstu_attn: cuda:0 \(Tesla V100, compute capability 7\.0\)"):
        hstu_attn.hstu_attn_varlen_func(q, q, q, cu, cu, 4, 4)


def test_dynamicemb_entries_check_device(monkeypatch):
    import dynamicemb

    _gpu(monkeypatch, (8, 0), name="NVIDIA A100", archs=("sm_90a",))
    with pytest.raises(RuntimeError, match=r"dynamicemb: cuda:0 \(NVIDIA A100, compute capability 8\.0\).*sm_90a"):
        dynamicemb.ScoredHashTable(capacity=128, value_dim=4, device="cuda:0")
    with pytest.raises(RuntimeError, match=r"dynamicemb: cuda:0 \(NVIDIA A100"):
        dynamicemb.hash_keys(_fake_cuda(4, dtype=torch.int64))


def test_cpu_paths_untouched(monkeypatch):
    """CPU calls never query a GPU."""
    import dynamicemb
    import hstu_attn

    def boom(*a, **k):
        raise AssertionError("a CPU call queried the GPU")

    monkeypatch.setattr(torch.cuda, "get_device_capability", boom)
    keys = torch.arange(4, dtype=torch.int64)
    dynamicemb.hash_keys(keys)
    t = dynamicemb.ScoredHashTable(capacity=128, value_dim=4)
    t.insert_or_assign(keys, torch.ones(4, 4))
    q = torch.randn(6, 2, 32)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    hstu_attn.hstu_attn_varlen_func(q, q, q, cu, cu, 4, 4)
