"""Remote cache round trip, for real: a local nginx WebDAV cache, Bazel with its own output base.

1. build the probe wheel with the cache (uploads), 2. `clean --expunge`, build again without any cache
(every action re-executed: the wheel bytes must be identical, i.e. the build is deterministic), 3. `clean
--expunge`, build with the cache: every nvcc compile action must be a remote cache hit, and the wheel bytes
identical again.
"""

import glob
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

TARGET = "//tests/build:probe_wheel"


def _workspace():
    return os.path.dirname(os.path.realpath("WORKSPACE"))


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        pytest.fail("nginx is not installed (./bazelw installs it: apt-get install nginx)")
    bazel = shutil.which("bazel-4") or shutil.which("bazel")
    assert bazel, "bazel not found"
    tmp = tmp_path_factory.mktemp("rc")
    port = _free_port()
    serve = os.path.realpath("tools/remote_cache/serve.sh")
    subprocess.run([serve, "start", "--port", str(port), "--dir", str(tmp / "cache")], check=True)
    try:
        yield {"bazel": bazel, "tmp": tmp, "url": f"http://127.0.0.1:{port}", "ws": _workspace()}
    finally:
        subprocess.run([serve, "stop", "--dir", str(tmp / "cache")], check=False)


def _bazel(env, *args, log=None):
    base = [env["bazel"], f"--output_user_root={env['tmp'] / 'root'}", "--batch"]
    e = dict(os.environ)
    e["ACCEL_VENV"] = sys.prefix  # the same venv the outer build uses
    e["HOME"] = str(env["tmp"])
    extra = []
    if log:
        extra = [f"--execution_log_json_file={log}"]
    cmd = base + list(args)
    if args[0] == "build":
        # --disk_cache=: a disk cache from .bazelrc.user would serve the "cold" and the clean builds.
        cmd += ["--symlink_prefix=/", "--config=sm80", "--disk_cache="] + extra
    if args[0] == "clean":
        cmd += ["--symlink_prefix=/"]  # leave the outer build's bazel-* convenience links alone
    out = subprocess.run(cmd, cwd=env["ws"], env=e, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]
    return out


def _wheel_bytes(env):
    bin_dir = _bazel(env, "info", "--config=sm80", "bazel-bin").stdout.strip()
    hits = glob.glob(os.path.join(bin_dir, "tests", "build", "accel_probe-*.whl"))
    assert len(hits) == 1, hits
    with open(hits[0], "rb") as f:
        return f.read()


def _actions(log):
    # The JSON execution log is a stream of concatenated objects.
    text = open(log).read()
    dec = json.JSONDecoder()
    i, out = 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        out.append(obj)
    return out


def test_round_trip(env):
    cache = [f"--remote_cache={env['url']}", "--remote_upload_local_results"]
    _bazel(env, "build", TARGET, *cache, log=str(env["tmp"] / "1.json"))
    first = _wheel_bytes(env)
    nvcc1 = [a for a in _actions(env["tmp"] / "1.json") if a.get("mnemonic") == "NvccCompile"]
    assert nvcc1 and not any(a.get("remoteCacheHit") for a in nvcc1), "a cold cache cannot hit"

    _bazel(env, "clean", "--expunge")
    _bazel(env, "build", TARGET, log=str(env["tmp"] / "2.json"))
    assert _wheel_bytes(env) == first, "a clean rebuild gave different wheel bytes (non-deterministic build)"

    _bazel(env, "clean", "--expunge")
    out = _bazel(env, "build", TARGET, *cache, log=str(env["tmp"] / "3.json"))
    nvcc3 = [a for a in _actions(env["tmp"] / "3.json") if a.get("mnemonic") == "NvccCompile"]
    assert nvcc3, "no nvcc action ran"
    assert all(a.get("remoteCacheHit") for a in nvcc3), [a.get("targetLabel") for a in nvcc3]
    assert "remote cache hit" in out.stderr
    assert _wheel_bytes(env) == first, "wheel from the cache differs"
