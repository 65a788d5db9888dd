"""Writes a deterministic wheel (PEP 427) for a package with prebuilt native libraries.

Entries are sorted, timestamps fixed (1980-01-01), permissions normalized (0644, 0755 for shared
libraries), and the compression level fixed, so the same inputs give byte-identical wheels on any
checkout or machine.

    build_wheel.py --distribution hstu_attn --version 0.1.0 --out X.whl \
        --requires 'torch>=2.10' --summary '...' --build-info 'CUDA_ARCHS=...' ARCNAME=PATH ...
"""

import argparse
import base64
import hashlib
import zipfile

TAG = "py3-none-linux_x86_64"
EPOCH = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distribution", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--package", required=True, help="import name; _build_info.py goes there")
    ap.add_argument("--summary", default="")
    ap.add_argument("--requires", action="append", default=[])
    ap.add_argument("--build-info", action="append", default=[], help="NAME=value for _build_info.py")
    ap.add_argument("files", nargs="*", help="ARCNAME=PATH")
    a = ap.parse_args(argv)

    entries = {}
    for spec in a.files:
        arcname, path = spec.split("=", 1)
        with open(path, "rb") as f:
            entries[arcname] = f.read()
    info = ['"""Build facts of this wheel (written by tools/wheel/build_wheel.py)."""', ""]
    info.append(f"VERSION = {a.version!r}")
    for spec in sorted(a.build_info):
        k, v = spec.split("=", 1)
        info.append(f"{k} = {v!r}")
    entries[f"{a.package}/_build_info.py"] = ("\n".join(info) + "\n").encode()

    dist_info = f"{a.distribution}-{a.version}.dist-info"
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {a.distribution}",
        f"Version: {a.version}",
        f"Summary: {a.summary}",
        "License: Apache-2.0",
        "Requires-Python: >=3.9",
    ] + [f"Requires-Dist: {r}" for r in a.requires]
    entries[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    entries[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: accelerated_modules build_wheel.py\n"
        f"Root-Is-Purelib: false\nTag: {TAG}\n"
    ).encode()
    entries[f"{dist_info}/top_level.txt"] = f"{a.package}\n".encode()

    record_name = f"{dist_info}/RECORD"
    lines = [f"{n},{_record_hash(d)},{len(d)}" for n, d in sorted(entries.items())]
    lines.append(f"{record_name},,")
    entries[record_name] = ("\n".join(lines) + "\n").encode()

    # dist-info last (RECORD at the very end), everything else sorted.
    order = sorted(n for n in entries if not n.startswith(dist_info))
    order += sorted(n for n in entries if n.startswith(dist_info) and n != record_name) + [record_name]
    with zipfile.ZipFile(a.out, "w") as zf:
        for name in order:
            zi = zipfile.ZipInfo(name, date_time=EPOCH)
            zi.compress_type = zipfile.ZIP_DEFLATED
            mode = 0o755 if name.endswith(".so") else 0o644
            zi.external_attr = (0o100000 | mode) << 16
            zi.create_system = 3
            zf.writestr(zi, entries[name], compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)


if __name__ == "__main__":
    main()
