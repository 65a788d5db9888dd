"""The wheels as artifacts: names and tags, contents, RECORD, size, linkage, import in a clean interpreter."""

import base64
import glob
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

WHEELS = {
    "dynamicemb": "dynamicemb",
    "hstu_attn": "hstu_attn",
}
MAX_WHEEL_BYTES = 48 * 1024 * 1024  # must travel to a GPU machine next to the tests (64 MiB per call)


def _find(dist):
    hits = [p for p in glob.glob("**/*.whl", recursive=True) if os.path.basename(p).startswith(dist + "-")]
    if not hits:
        pytest.fail(f"no {dist} wheel among the test's data files")
    return hits[0]


@pytest.fixture(params=sorted(WHEELS))
def wheel(request):
    return request.param, _find(request.param)


def test_name_and_tag(wheel):
    dist, path = wheel
    name = os.path.basename(path)
    assert name.startswith(f"{dist}-0.") and name.endswith("-py3-none-manylinux_2_28_x86_64.whl"), name
    with zipfile.ZipFile(path) as zf:
        version = name.split("-")[1]
        meta = zf.read(f"{dist}-{version}.dist-info/WHEEL").decode()
        assert "Tag: py3-none-manylinux_2_28_x86_64" in meta
        assert "Root-Is-Purelib: false" in meta
        metadata = zf.read(f"{dist}-{version}.dist-info/METADATA").decode()
        assert f"Name: {dist}" in metadata and f"Version: {version}" in metadata
        assert "Requires-Dist: torch>=2.10" in metadata


def test_contents_and_record(wheel):
    dist, path = wheel
    pkg = WHEELS[dist]
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert f"{pkg}/__init__.py" in names
        assert f"{pkg}/_C.so" in names
        assert f"{pkg}/_build_info.py" in names
        assert not [n for n in names if "/csrc/" in n or n.endswith((".cu", ".cc", ".bzl", "BUILD.bazel"))], names
        assert not [n for n in names if "__pycache__" in n]
        record_name = [n for n in names if n.endswith(".dist-info/RECORD")][0]
        rows = [r.split(",") for r in zf.read(record_name).decode().splitlines()]
        listed = {r[0] for r in rows}
        assert listed == set(names)
        for name, digest, size in rows:
            if name == record_name:
                continue
            data = zf.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == want and int(size) == len(data), name
        for info in zf.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0), info.filename


def test_size(wheel):
    _, path = wheel
    assert os.path.getsize(path) < MAX_WHEEL_BYTES


def _extract(path, tmp_path):
    with zipfile.ZipFile(path) as zf:
        zf.extractall(tmp_path)
    return tmp_path


def test_library_linkage(wheel, tmp_path):
    """NEEDED libtorch_cpu.so; nothing undefined from Python or libtorch's C++ API (stable ABI only)."""
    dist, path = wheel
    so = os.path.join(_extract(path, tmp_path), WHEELS[dist], "_C.so")
    dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
    assert "[libtorch_cpu.so]" in dyn
    assert "libcudart" not in dyn, "the CUDA runtime must be linked statically"
    assert "libpython" not in dyn and "libtorch_cuda" not in dyn and "libc10" not in dyn
    undef = subprocess.run(["nm", "-D", "--undefined-only", so], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in undef.splitlines() if line.strip()]
    assert not [n for n in names if n.startswith("Py") or n.startswith("_Py")], "Python C-API symbols"
    cxx_torch = [n for n in names if n.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch", "_ZNK3c10", "_ZNK2at"))]
    assert not cxx_torch, f"libtorch C++ symbols: {cxx_torch[:5]}"
    assert [n for n in names if n.startswith(("aoti_torch_", "torch_"))], "expected stable-ABI C symbols"
    exported = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    assert "cudaMalloc" not in exported and "cudaLaunchKernel" not in exported, "static cudart symbols leaked"


def test_import_in_clean_interpreter(wheel, tmp_path):
    """Only the unpacked wheel and torch on the path: the package imports and registers its ops."""
    dist, path = wheel
    site = _extract(path, tmp_path)
    pkg = WHEELS[dist]
    code = (
        f"import torch, {pkg}; "
        f"assert {pkg}.__file__.startswith({str(site)!r}), {pkg}.__file__; "
        f"assert hasattr(torch.ops, {pkg!r}); "
        f"print({pkg}.__version__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("0.")
