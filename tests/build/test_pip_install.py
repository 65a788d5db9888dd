"""`pip install` of the wheels into a fresh virtualenv that has torch: resolves offline, `pip check` passes, imports.

Offline stand-in for "a venv with torch": the new venv sees torch and its requirements (only those: the project venv
also holds packages installed with --no-deps, which `pip check` would rightly flag) through a .pth file.
"""

import glob
import json
import os
import subprocess
import sys
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

WHEELS = ("dynamicemb", "hstu_attn")


def _wheel(dist):
    hits = [p for p in glob.glob("**/*.whl", recursive=True) if os.path.basename(p).startswith(dist + "-")]
    assert hits, f"no {dist} wheel among the test's data files"
    return os.path.abspath(hits[0])


def _closure(name):
    """The installed distributions `name` needs (markers evaluated, no extras), itself included."""
    seen, todo = {}, [name]
    while todo:
        key = canonicalize_name(todo.pop())
        if key in seen:
            continue
        dist = seen[key] = metadata.distribution(key)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen.values()


def _link_site(dists, site):
    """A directory holding only `dists` (symlinks to their top-level files and directories)."""
    os.makedirs(site)
    for dist in dists:
        for top in sorted({f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}):
            dst = os.path.join(site, top)
            if not os.path.lexists(dst):
                os.symlink(os.path.abspath(dist.locate_file(top)), dst)


def _run(py, *args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_TARGET")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run([py, *args], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, site-packages) of a fresh venv with torch visible and both wheels pip-installed."""
    root = tmp_path_factory.mktemp("pip")
    _link_site(list(_closure("torch")) + [metadata.distribution("pip")], str(root / "torch_site"))
    env_dir = root / "venv"
    # No bundled pip/setuptools: this Python's ensurepip brings a setuptools older than torch requires.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = str(env_dir / "bin" / "python")
    site = _run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    with open(os.path.join(site, "torch_site.pth"), "w") as f:
        f.write(str(root / "torch_site") + "\n")
    out = _run(py, "-m", "pip", "install", "--no-index", "--no-cache-dir", *[_wheel(d) for d in WHEELS])
    assert out.returncode == 0, out.stdout + out.stderr
    return py, site


def test_pip_check(installed):
    py, _ = installed
    out = _run(py, "-m", "pip", "check")
    assert out.returncode == 0, out.stdout + out.stderr


def test_import_and_cpu_ops(installed, tmp_path):
    py, site = installed
    code = (
        "import json, torch, dynamicemb, hstu_attn\n"
        "keys = torch.arange(8, dtype=torch.int64)\n"
        "assert torch.equal(dynamicemb.hash_keys(keys), dynamicemb._hash.hash_keys_reference(keys))\n"
        "q = torch.randn(6, 2, 32)\n"
        "cu = torch.tensor([0, 2, 6], dtype=torch.int32)\n"
        "o = hstu_attn.hstu_attn_varlen_func(q, q, q, cu, cu, 4, 4)\n"
        "assert o.shape == q.shape and bool(torch.isfinite(o).all())\n"
        "try:\n"  # a C++ exception from our static libstdc++ reaches torch's handler and Python
        "    torch.ops.dynamicemb.hash_keys(keys.int())\n"
        "    raise AssertionError('no error')\n"
        "except RuntimeError as e:\n"
        "    assert 'int64 or uint64' in str(e), e\n"
        "print(json.dumps([dynamicemb.__file__, hstu_attn.__file__]))\n"
    )
    out = _run(py, "-I", "-c", code, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(f.startswith(site) for f in files), files


@pytest.mark.parametrize("dist", WHEELS)
def test_installed_metadata(installed, dist):
    py, _ = installed
    out = _run(py, "-I", "-c", f"import importlib.metadata as m, json; md = m.metadata({dist!r}); "
               "print(json.dumps({k: md.get_all(k) for k in set(md.keys())} | {'body': md.get_payload()}))")
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    assert md["Requires-Python"] == [">=3.10"]
    assert md["Requires-Dist"] == ["torch>=2.10"]
    assert md["Description-Content-Type"] == ["text/markdown"]
    assert "Programming Language :: Python :: 3.10" in md["Classifier"]
    assert md["Project-URL"] and all("," in u for u in md["Project-URL"])
    assert [k for k in md["Keywords"][0].split(",") if k.startswith("sm_")], md["Keywords"]
    assert md["body"].startswith("# accelerated_modules") and "Built with CUDA" in md["body"]
