"""Markdown tables from hkv41 run 1's output folder (lab.txt, main.txt, zipf.txt, ncu_first.csv[.gz], phases_*.txt).

    python3 tools/dynamicemb_dev/hkv41_run/analyze.py OUTPUT_FOLDER
"""
import csv
import gzip
import os
import re
import sys

out = sys.argv[1]
OPS = ("find_or_insert", "insert_or_assign", "insert_and_evict")
UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def read(name):
    d, load = {}, "?"
    p = os.path.join(out, name + ".txt")
    if not os.path.exists(p):
        return d
    for line in open(p):
        m = re.match(r"filled: .*\(load ([0-9.]+)\)", line)
        if m:
            load = "%g" % round(float(m.group(1)), 2)
        f = line.split()
        if f and f[0] in OPS and len(f) > 1 and f[1].startswith("L"):
            def g(k):
                return f[f.index(k) + 1] if k in f else "nan"
            d[(load, f[0], int(f[1][1:]))] = dict(first=float(g("first")), total=float(g("total")),
                                                  insert=float(g("insert")),
                                                  sig=(g("table"), g("evicted"), g("ins"), g("asg"), g("evi")))
    return d


def pc(a, b):
    return "%+.1f %%" % (100 * (a / b - 1))


lab, main, zipf = read("lab"), read("main"), read("zipf")
print("| load | op | main first / total | G first | P first (vs G) | q4 | q8 | q13 | q14 | P total (vs main) "
      "| checks |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for load in ("0.5", "1"):
    for op in OPS:
        G, P, M = lab.get((load, op, 256)), lab.get((load, op, 0)), main.get((load, op, 0))
        if not G or not P:
            continue
        cells = [pc(lab[(load, op, v)]["first"], G["first"]) if (load, op, v) in lab else "-"
                 for v in (16384, 32768, 53248, 57344)]
        ok = all(lab[k]["sig"] == G["sig"] for k in lab if k[:2] == (load, op))
        same = M and M["sig"] == P["sig"]
        print("| %s | %s | %s | %.1f | %.1f (%s) | %s | %s | %s | %s | %s | %s |" % (
            load, op, "%.1f / %.1f" % (M["first"], M["total"]) if M else "-", G["first"], P["first"],
            pc(P["first"], G["first"]), *cells, "%.1f (%s)" % (P["total"], pc(P["total"], M["total"])) if M else "-",
            ("labs equal" if ok else "LAB DIFF") + (", = main" if same else ", DIFF main")))
    print("insert pass G / P at %s: " % load + "; ".join(
        "%s %.1f / %.1f" % (op, lab[(load, op, 256)]["insert"], lab[(load, op, 0)]["insert"])
        for op in OPS if (load, op, 256) in lab and (load, op, 0) in lab))
for op in OPS:
    a, b, c = zipf.get(("1", op, 0)), zipf.get(("1", op, 256)), zipf.get(("1", op, 57344))
    if a and b:
        eq = a["sig"] == b["sig"] and (not c or c["sig"] == b["sig"])
        print("zipf 1.0 %s: G %.1f P %.1f (%s) q14 %s; total G %.1f P %.1f; %s" % (
            op, b["first"], a["first"], pc(a["first"], b["first"]), pc(c["first"], b["first"]) if c else "-",
            b["total"], a["total"], "equal" if eq else "DIFF"))
for f in ("ncu_first.csv.gz", "ncu_first.csv"):
    p = os.path.join(out, f)
    if not os.path.exists(p):
        continue
    lines = (gzip.open(p, "rt") if f.endswith(".gz") else open(p)).read().splitlines()
    st = [i for i, line in enumerate(lines) if line.startswith('"ID"')]
    rows = list(csv.reader(lines[st[0]:])) if st else []
    if len(rows) < 3:
        break
    h = rows[0]

    def v(r, k):
        try:
            return float(r[h.index(k)].replace(",", ""))
        except (ValueError, IndexError):
            return float("nan")
    us = UNIT.get(rows[1][h.index("gpu__time_duration.sum")], float("nan"))
    ki = h.index("Kernel Name")
    print("| kernel | us | warp instr / key | occupancy % | issue % | regs | stalls per issue (top 5) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows[2:]:
        n = r[ki][r[ki].find("<"):r[ki].find(">") + 1]
        stl = sorted(((v(r, c), c) for c in h if "issue_stalled" in c and c.endswith("per_issue_active.ratio")),
                     reverse=True)[:5]
        s = ", ".join("%s %.2f" % (c.replace("smsp__average_warps_issue_stalled_", "")
                                   .replace("_per_issue_active.ratio", ""), x) for x, c in stl)
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.0f | %s |" % (
            n, v(r, "gpu__time_duration.sum") * us, v(r, "smsp__inst_executed.sum") / 2 ** 20,
            v(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
            v(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"), v(r, "launch__registers_per_thread"), s))
    break
for f in ("phases_first05.txt", "phases_first1.txt", "phases_insert1.txt"):
    p = os.path.join(out, f)
    if os.path.exists(p):
        print("\n" + f + ":\n" + open(p).read())
