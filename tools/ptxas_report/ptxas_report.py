"""Collects nvcc `--resource-usage` (ptxas -v) reports into one CSV and one markdown table.

    ptxas_report.py --csv out.csv --md out.md [--fail-on-spill GLOB ...] [--fail-on-wgmma GLOB ...] LOG...

Each row: translation unit, kernel (demangled when c++filt is available), arch, registers, shared memory
(static, bytes), stack frame, spill stores, spill loads (bytes), barriers, and ptxas's wgmma performance
diagnostics for the kernel (the `(C75nn)` lines: wgmma instructions serialized, warpgroup.arrive / warpgroup.wait
injected by the compiler; empty when there are none). With --fail-on-spill, a kernel whose name matches a glob and
that spills makes the tool exit 1 after writing the reports; with --fail-on-wgmma, one that has a wgmma diagnostic.
"""

import argparse
import csv
import fnmatch
import os
import re
import shutil
import subprocess
import sys

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
# e.g. "(C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to ... in the function
# '_Z...'" or "(C7519) warpgroup.arrive is injected in around line 11626 by compiler ... in function '_Z...'"; ptxas
# prints them before the function's "Compiling entry function" line.
_WGMMA = re.compile(r"\((C75\d\d)\) (.*?)\s+in (?:the )?function '([^']+)'")

FIELDS = ["unit", "kernel", "arch", "registers", "smem_bytes", "stack_bytes", "spill_stores", "spill_loads", "barriers",
          "wgmma"]


def parse_log(text, unit):
    """Parses one nvcc --resource-usage log into a list of row dicts (one per kernel and arch)."""
    rows = []
    cur = None
    # Diagnostics precede their kernel's "Compiling entry function" line; with several archs in one log, each goes
    # to the next compile of that kernel (its arch's), not to every arch. mangled kernel -> ["C7514 ...", ...]
    pending = {}
    for line in text.splitlines():
        m = _WGMMA.search(line)
        if m:
            msg = " ".join(m.group(2).replace("Potential Performance Loss:", "").split())
            pending.setdefault(m.group(3), []).append(f"{m.group(1)} {msg}")
            continue
        m = _ENTRY.search(line)
        if m:
            cur = {"unit": unit, "kernel": m.group(1), "arch": m.group(2), "registers": 0, "smem_bytes": 0,
                   "stack_bytes": 0, "spill_stores": 0, "spill_loads": 0, "barriers": 0,
                   "wgmma": "; ".join(pending.pop(m.group(1), []))}
            rows.append(cur)
            continue
        if cur is None:
            continue
        m = _PROPS.search(line)
        if m:
            cur["stack_bytes"], cur["spill_stores"], cur["spill_loads"] = (int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            cur["barriers"] = int(m.group(2) or 0)
            s = _SMEM.search(m.group(3) or "")
            cur["smem_bytes"] = int(s.group(1)) if s else 0
    for kernel, found in pending.items():  # printed after the entry line: the kernel's last compile
        last = [r for r in rows if r["kernel"] == kernel][-1:]
        for r in last:
            r["wgmma"] = "; ".join([d for d in [r["wgmma"]] if d] + found)
    return rows


def wgmma_codes(row):
    """The diagnostic codes of a row, e.g. "C7514 C7519" ("" when none)."""
    return " ".join(d.split(" ", 1)[0] for d in row["wgmma"].split("; ") if d)


def demangle(names):
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def to_markdown(rows):
    head = ["unit", "kernel", "arch", "regs", "smem B", "stack B", "spill st B", "spill ld B", "wgmma"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        k = r["kernel"] if len(r["kernel"]) <= 90 else r["kernel"][:87] + "..."
        lines.append(f"| {r['unit']} | `{k}` | {r['arch']} | {r['registers']} | {r['smem_bytes']} | "
                     f"{r['stack_bytes']} | {r['spill_stores']} | {r['spill_loads']} | {wgmma_codes(r)} |")
    spills = sum(1 for r in rows if r["spill_stores"] or r["spill_loads"])
    diag = [r for r in rows if r["wgmma"]]
    lines.append("")
    lines.append(f"{len(rows)} kernels, {spills} with spills, {len(diag)} with wgmma diagnostics.")
    if diag:
        lines.append("")
        lines.append("wgmma diagnostics (ptxas):")
        for r in diag:
            for d in r["wgmma"].split("; "):
                lines.append(f"- `{r['kernel']}` ({r['arch']}): {d}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--fail-on-spill", action="append", default=[], help="kernel name glob (demangled)")
    ap.add_argument("--fail-on-wgmma", action="append", default=[],
                    help="kernel name glob (demangled): fail if ptxas reports a wgmma diagnostic for it")
    ap.add_argument("logs", nargs="*")
    a = ap.parse_args(argv)
    rows = []
    for path in sorted(a.logs):
        unit = os.path.basename(path).replace(".ptxas.txt", ".cu")
        with open(path) as f:
            rows.extend(parse_log(f.read(), unit))
    names = demangle(sorted({r["kernel"] for r in rows}))
    for r in rows:
        r["kernel"] = names[r["kernel"]]
    rows.sort(key=lambda r: (r["unit"], r["kernel"], r["arch"]))
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(a.md, "w") as f:
        f.write(to_markdown(rows))
    bad = [r for r in rows if (r["spill_stores"] or r["spill_loads"])
           and any(fnmatch.fnmatch(r["kernel"], g) for g in a.fail_on_spill)]
    for r in bad:
        print(f"ptxas_report: {r['kernel']} ({r['arch']}) spills {r['spill_stores']}/{r['spill_loads']} bytes",
              file=sys.stderr)
    serial = [r for r in rows if r["wgmma"] and any(fnmatch.fnmatch(r["kernel"], g) for g in a.fail_on_wgmma)]
    for r in serial:
        print(f"ptxas_report: {r['kernel']} ({r['arch']}) wgmma: {r['wgmma']}", file=sys.stderr)
    return 1 if bad or serial else 0


if __name__ == "__main__":
    sys.exit(main())
