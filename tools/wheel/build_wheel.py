"""Writes a deterministic wheel (PEP 427) for a package with prebuilt native libraries.

Entries are sorted, timestamps fixed (1980-01-01), permissions normalized (0644, 0755 for shared
libraries), and the compression level fixed, so the same inputs give byte-identical wheels on any
checkout or machine.

    build_wheel.py --distribution hstu_attn --version 0.1.0 --platform manylinux_2_28_x86_64 --out X.whl \
        --requires 'torch>=2.10' --summary '...' --readme README.md --classifier '...' --keyword cuda \
        --project-url 'Source, URL' --build-info 'CUDA_ARCHS=...' ARCNAME=PATH ...

The metadata's long description is the README plus a line naming the CUDA archs of this build.
"""

import argparse
import base64
import hashlib
import zipfile

EPOCH = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def describe_archs(archs: str) -> str:
    """'sm_80,sm_90a' -> 'sm_80 (+ compute_80 PTX), sm_90a' (tools/cuda/cuda.bzl embeds that PTX with sm_80)."""
    return ", ".join(a + (" (+ compute_80 PTX)" if a == "sm_80" else "") for a in archs.split(",") if a)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distribution", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--platform", required=True, help="platform tag, e.g. manylinux_2_28_x86_64")
    ap.add_argument("--python-requires", default=">=3.10")
    ap.add_argument("--readme", help="markdown file: the long description")
    ap.add_argument("--classifier", action="append", default=[])
    ap.add_argument("--keyword", action="append", default=[])
    ap.add_argument("--project-url", action="append", default=[], help="'LABEL, URL'")
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

    facts = dict(spec.split("=", 1) for spec in a.build_info)
    dist_info = f"{a.distribution}-{a.version}.dist-info"
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {a.distribution}",
        f"Version: {a.version}",
        f"Summary: {a.summary}",
        "License: Apache-2.0",
        f"Requires-Python: {a.python_requires}",
    ]
    meta += [f"Classifier: {c}" for c in a.classifier]
    if a.keyword:
        meta.append("Keywords: " + ",".join(a.keyword))
    meta += [f"Project-URL: {u}" for u in a.project_url]
    meta += [f"Requires-Dist: {r}" for r in a.requires]
    body = ""
    if a.readme:
        meta.append("Description-Content-Type: text/markdown")
        with open(a.readme, encoding="utf-8") as f:
            body = f.read().rstrip("\n") + "\n"
        if "CUDA_ARCHS" in facts:
            body += (f"\n## This wheel\n\nBuilt with CUDA {facts.get('CUDA_VERSION', '?')} for "
                     f"{describe_archs(facts['CUDA_ARCHS'])}, platform {a.platform}.\n")
    metadata = "\n".join(meta) + "\n" + ("\n" + body if body else "")
    entries[f"{dist_info}/METADATA"] = metadata.encode()
    entries[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: accelerated_modules build_wheel.py\n"
        f"Root-Is-Purelib: false\nTag: py3-none-{a.platform}\n"
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
