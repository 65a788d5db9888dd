"""Entry point of pytest_test: unpacks the given wheels, puts them first on sys.path, runs pytest.

    pytest_main.py [--wheel=W.whl ...] [pytest args] test_files...
"""

import os
import sys
import tempfile
import zipfile


def main(argv):
    wheels = [a.split("=", 1)[1] for a in argv if a.startswith("--wheel=")]
    rest = [a for a in argv if not a.startswith("--wheel=") and a != "--no-unpack"]
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    site = os.path.join(tmp, "site")
    os.makedirs(site, exist_ok=True)
    for w in wheels:
        with zipfile.ZipFile(w) as zf:
            zf.extractall(site)
        for root, _, files in os.walk(site):
            for f in files:
                if f.endswith(".so"):
                    os.chmod(os.path.join(root, f), 0o755)
    sys.path.insert(0, site)
    os.environ["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    os.environ.setdefault("ACCEL_WHEEL_SITE", site)

    import pytest

    args = ["-p", "no:cacheprovider", "--import-mode=importlib", "-rs", "--rootdir", os.getcwd()]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args += ["--junitxml", xml]
    return pytest.main(args + rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
