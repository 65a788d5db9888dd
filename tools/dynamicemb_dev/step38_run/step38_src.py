"""Digest of ncu's source page (`ncu --import R --page source --csv --print-source sass`, one section per profiled
kernel): per kernel the total warp-stall samples, the top SASS lines by samples (with the instruction's executed
count), and the samples per stall reason of the kernel's loads. Usage: step38_src.py src.csv[.gz] [--top N] [--k REGEX]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import re


def sections(path):
    op = gzip.open if path.endswith(".gz") else open
    text = op(path, "rt").read()
    parts = re.split(r'^"Kernel Name",', text, flags=re.M)
    for part in parts[1:]:
        name, _, body = part.partition("\n")
        rows = list(csv.reader(io.StringIO(body)))
        if not rows:
            continue
        yield name.strip().strip(",").strip('"'), rows[0], rows[1:]


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("path")
    p.add_argument("--top", type=int, default=18)
    p.add_argument("--k", default="")
    a = p.parse_args()
    for idx, (name, head, rows) in enumerate(sections(a.path)):
        short = re.sub(r"\(.*", "", name.replace("void ", "")).split("::")[-1]
        if a.k and not re.search(a.k, name):
            continue
        col = {h: i for i, h in enumerate(head)}
        s_all = col.get("Warp Stall Sampling (All Samples)")
        ex = col.get("Instructions Executed")
        src = col.get("Source")
        if s_all is None or src is None:
            print(f"## {idx} {short}: no sampling columns")
            continue
        tot = sum(num(r[s_all]) for r in rows if len(r) == len(head))
        print(f"## {idx} {short}: {len(rows)} SASS lines, {tot:.0f} samples")
        stall_cols = [h for h in head if h.startswith("stall_") or "Stall" in h and "Sampling" not in h]
        reasons = {}
        for r in rows:
            if len(r) != len(head):
                continue
            for h in stall_cols:
                reasons[h] = reasons.get(h, 0.0) + num(r[col[h]])
        reasons = {h: v for h, v in reasons.items() if "Not Issued" not in h}
        if reasons:
            top_r = sorted(reasons.items(), key=lambda kv: -kv[1])[:6]
            print("   reasons: " + ", ".join(f"{h} {v / max(tot, 1) * 100:.0f}%" for h, v in top_r if v > 0))
        ranked = sorted((r for r in rows if len(r) == len(head)), key=lambda r: -num(r[s_all]))[: a.top]
        order = {id(r): k for k, r in enumerate(rows)}
        for r in ranked:
            print(f"   {order[id(r)]:5d} {num(r[s_all]) / max(tot, 1) * 100:5.1f}% ex {num(r[ex]) if ex is not None else 0:9.0f}"
                  f"  {r[src].strip()[:80]}")


if __name__ == "__main__":
    main()
