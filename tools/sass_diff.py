"""Compares the SASS of every kernel in two builds of an op library, function by function.

    python3 tools/sass_diff.py OLD/_C.so NEW/_C.so [--cuobjdump PATH]

A host-only change (launchers, ops, file layout) must leave every kernel's machine code as it was: this prints the
kernels whose SASS differs, those only in one build, and a summary line; exit status 1 if any differ. cuobjdump and
nvdisasm come with the CUDA toolkit (or PyPI's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from collections import Counter
from typing import Dict, List

_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_OFFSET = re.compile(r"/\*[0-9a-f]{4,}\*/")


def kernels(lib: str, cuobjdump: str) -> Dict[str, List[str]]:
    """{(arch, mangled name): [sha1 of each instance's SASS]} (a name can occur in several units)."""
    out = subprocess.run([cuobjdump, "-sass", lib], check=True, capture_output=True, text=True).stdout
    found: Dict[str, List[str]] = {}
    arch, name, body = "?", None, []

    def flush():
        if name is not None:
            digest = hashlib.sha1("\n".join(body).encode()).hexdigest()
            found.setdefault(f"{arch} {name}", []).append(digest)

    for line in out.splitlines():
        if line.startswith("arch = "):
            arch = line.split("=", 1)[1].strip()
            continue
        m = _FUNCTION.match(line)
        if m:
            flush()
            name, body = m.group(1), []
        elif name is not None and line.strip():
            body.append(_OFFSET.sub("", line).strip())
    flush()
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    a = ap.parse_args(argv)
    old, new = kernels(a.old, a.cuobjdump), kernels(a.new, a.cuobjdump)
    changed = [k for k in sorted(set(old) & set(new)) if Counter(old[k]) != Counter(new[k])]
    for k in changed:
        print(f"differs: {k}")
    for k in sorted(set(old) - set(new)):
        print(f"only in {a.old}: {k}")
    for k in sorted(set(new) - set(old)):
        print(f"only in {a.new}: {k}")
    same = len(set(old) & set(new)) - len(changed)
    print(f"{same} kernels identical, {len(changed)} differ, {len(set(old) - set(new))} removed, "
          f"{len(set(new) - set(old))} added")
    return 1 if changed or set(old) != set(new) else 0


if __name__ == "__main__":
    sys.exit(main())
