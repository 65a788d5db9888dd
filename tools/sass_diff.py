"""Compares the SASS of every kernel in two builds of an op library, function by function.

    python3 tools/sass_diff.py OLD/_C.so NEW/_C.so [--cuobjdump PATH] [--renames]

A host-only change (launchers, ops, file layout) must leave every kernel's machine code as it was: this prints the
kernels whose SASS differs, those only in one build, and a summary line; exit status 1 if any differ. With --renames
a kernel only in OLD and one only in NEW with the same arch and identical SASS count as renamed, not changed (a
template argument list that lost a retired flag renames a kernel without changing its code); they are listed as
`renamed: OLD -> NEW`. cuobjdump and nvdisasm come with the CUDA toolkit (or PyPI's nvidia-cuda-cuobjdump /
nvidia-cuda-nvdisasm wheels).
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
        if line.startswith("Fatbin "):  # the next unit's header: the function before it has ended
            flush()
            name, body = None, []
            continue
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
    ap.add_argument("--renames", action="store_true", help="pair kernels only in one build by identical SASS")
    a = ap.parse_args(argv)
    old, new = kernels(a.old, a.cuobjdump), kernels(a.new, a.cuobjdump)
    changed = [k for k in sorted(set(old) & set(new)) if Counter(old[k]) != Counter(new[k])]
    removed, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    renamed = []
    if a.renames:
        by_code: Dict[tuple, List[str]] = {}
        for k in added:
            by_code.setdefault((k.split(" ", 1)[0], tuple(sorted(new[k]))), []).append(k)
        for k in removed:
            match = by_code.get((k.split(" ", 1)[0], tuple(sorted(old[k]))))
            if match:
                renamed.append((k, match.pop(0)))
        removed = [k for k in removed if k not in {o for o, _ in renamed}]
        added = [k for k in added if k not in {n for _, n in renamed}]
    for k in changed:
        print(f"differs: {k}")
    for o, n in renamed:
        print(f"renamed: {o} -> {n.split(' ', 1)[1]}")
    for k in removed:
        print(f"only in {a.old}: {k}")
    for k in added:
        print(f"only in {a.new}: {k}")
    same = len(set(old) & set(new)) - len(changed)
    print(f"{same} kernels identical, {len(renamed)} renamed with identical SASS, {len(changed)} differ, "
          f"{len(removed)} removed, {len(added)} added")
    return 1 if changed or removed or added else 0


if __name__ == "__main__":
    sys.exit(main())
