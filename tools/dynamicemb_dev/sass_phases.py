"""Warp instructions and stall samples of one profiled kernel by source phase (issue 35's insert-pass profiles).

Joins ncu's SASS source page (SourceCounters) with the line table of the same binary, so that every executed SASS
instruction is charged to the outermost source line of a phase (a line range of one file, inlined calls included):

    cuobjdump -xelf all BINARY && nvdisasm -gi -c -sf *.cubin > bin.sass      (binary built with -lineinfo)
    ncu ... --section SourceCounters -o R BINARY ...; ncu --import R.ncu-rep --page source --csv --print-source sass > src.csv
    python3 tools/dynamicemb_dev/sass_phases.py bin.sass src.csv --kernel 1 --function upsert_insert_kernel \\
        --per 12792 --phase "scan=table_kernels.cuh:458-459" --phase "lock=table_kernels.cuh:444-455" ...

--kernel: the index of the kernel's block in src.csv (ncu's order); --function: a substring of the section's functions
(the kernel and the out-of-line functions it calls share its section); --per: divide instruction counts by this (e.g.
warp groups). Lines outside every phase are charged to their innermost file:line. Prints a markdown table: warp
instructions (per --per), threads per instruction, share of stall samples and the top stall reasons.
"""

import argparse
import collections
import csv
import re


def line_table(path):
    """{section offset: (innermost (file, line), [every (file, line) of the inline chain])} of functions in path."""
    rows, fn, chain, inner, prev = {}, None, [], ("?", 0), False
    for line in open(path, errors="replace"):
        if line.startswith(".text.") or (line and line[0] not in " \t/." and line.rstrip().endswith(":")):
            fn = line.strip().rstrip(":").removeprefix(".text.")
            prev = False
            continue
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)(.*)', line)
        if m:
            locs = [(m.group(1).split("/")[-1], int(m.group(2)))]
            locs += [(a.split("/")[-1], int(b)) for a, b in re.findall(r'"([^"]+)", line (\d+)', m.group(3))]
            inner, chain = (locs[0], list(locs)) if not prev else (inner, chain + locs)
            prev = True
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+", line)
        if m and fn:
            prev = False
            rows.setdefault(fn, {})[int(m.group(1), 16)] = (inner, chain)
    return rows


def source_page(path, index):
    """Header and rows of the index-th kernel block of ncu's SASS source page."""
    blocks = []
    with open(path, errors="replace", newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Address":
                blocks.append((row, []))
            elif blocks and len(row) == len(blocks[-1][0]):
                blocks[-1][1].append(row)
    return blocks[index]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sass")
    ap.add_argument("src")
    ap.add_argument("--kernel", type=int, required=True)
    ap.add_argument("--function", required=True)
    ap.add_argument("--per", type=float, default=1.0)
    ap.add_argument("--phase", action="append", default=[], help="NAME=FILE:LO-HI")
    a = ap.parse_args()
    phases = []
    for p in a.phase:
        name, rest = p.split("=", 1)
        f, rng = rest.rsplit(":", 1)
        lo, hi = (int(x) for x in rng.split("-"))
        phases.append((name, f, lo, hi))
    table = {}
    for fn, rows in line_table(a.sass).items():
        if a.function in fn:
            table.update(rows)
    hdr, data = source_page(a.src, a.kernel)
    col = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda v: float(v.replace(",", "")) if v not in ("", "-") else 0.0  # noqa: E731
    base = int(data[0][0], 16)
    agg = collections.defaultdict(lambda: [0.0, 0.0, 0.0, collections.Counter()])
    total = collections.Counter()
    for r in data:
        inner, chain = table.get(int(r[0], 16) - base, (("?", 0), []))
        key = next((n for f, ln in reversed(chain) for n, pf, lo, hi in phases if f == pf and lo <= ln <= hi),
                   f"{inner[0]}:{inner[1]}")
        s = agg[key]
        s[0] += num(r[col["Instructions Executed"]])
        s[1] += num(r[col["Thread Instructions Executed"]])
        s[2] += num(r[col["Warp Stall Sampling (All Samples)"]])
        st = {h: num(r[col[h]]) for h in stalls}
        s[3].update(st)
        total.update(st)
    ti = sum(s[0] for s in agg.values())
    ts = sum(s[2] for s in agg.values()) or 1.0
    print(f"{ti / a.per:.0f} warp instructions per {a.per:g}; stalls: "
          + ", ".join(f"{h[6:]} {v / ts * 100:.1f} %" for h, v in total.most_common(8)))
    print("| phase | warp instr | threads / instr | stall samples | top stalls |")
    print("|---|---|---|---|---|")
    for k, (ie, te, sm, st) in sorted(agg.items(), key=lambda kv: -kv[1][2])[:25]:
        top = ", ".join(f"{h[6:]} {v / max(sm, 1) * 100:.0f} %" for h, v in st.most_common(3))
        print(f"| {k} | {ie / a.per:.0f} | {te / max(ie, 1):.1f} | {sm / ts * 100:.1f} % | {top} |")


if __name__ == "__main__":
    main()
