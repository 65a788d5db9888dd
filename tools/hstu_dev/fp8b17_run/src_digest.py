"""Digest of `ncu --import R --page source --csv --print-source sass` (branch fp8b17): per kernel, the SASS
instructions with the most warp-stall samples (share of the kernel's samples, the top stall columns), and the
samples per opcode. Column names vary across ncu versions: matched by substring."""
import csv
import re
import sys
from collections import defaultdict

top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
text = open(sys.argv[1], errors="replace").read()
# several kernels: each block starts with its own header row (a line starting with "Address" or "# Address")
blocks, cur = [], []
for line in text.splitlines():
    if re.match(r'^"?#?\s*Address', line) and cur:
        blocks.append(cur)
        cur = []
    cur.append(line)
if cur:
    blocks.append(cur)
for bi, blk in enumerate(blocks):
    rows = list(csv.reader(blk))
    hdr_i = next((i for i, r in enumerate(rows) if r and "Address" in r[0]), None)
    if hdr_i is None:
        continue
    hdr, data = rows[hdr_i], [r for r in rows[hdr_i + 1:] if len(r) == len(rows[hdr_i])]

    def col(*subs):
        for i, h in enumerate(hdr):
            if all(s.lower() in h.lower() for s in subs):
                return i
        return None

    src = col("Source")
    allc = col("Warp Stall Sampling (All")
    exe = col("Instructions Executed")
    if allc is None or src is None:
        print(f"block {bi}: columns {hdr[:40]}")
        continue

    def num(v):
        try:
            return float(v.replace(",", ""))
        except ValueError:
            return 0.0

    tot = sum(num(r[allc]) for r in data) or 1.0
    stall_cols = [i for i, h in enumerate(hdr) if re.search(r"stall", h, re.I) and i != allc
                  and "Not-issued" not in h]
    print(f"\n### kernel block {bi}: {len(data)} SASS lines, {tot:.0f} samples; columns with stall: "
          f"{[hdr[i] for i in stall_cols][:30]}")
    byop = defaultdict(float)
    for r in data:
        op = r[src].strip().split(" ")[0].lstrip("@!P0123456789UPT ")
        byop[re.sub(r"^@\S+\s+", "", r[src].strip()).split(" ")[0]] += num(r[allc])
    print("samples per opcode: " + ", ".join(f"{k} {v / tot:.1%}" for k, v in
                                              sorted(byop.items(), key=lambda t: -t[1])[:25]))
    order = sorted(range(len(data)), key=lambda i: -num(data[i][allc]))[:top]
    print("| line | share | executed | SASS | top stall columns |\n|---:|---:|---:|---|---|")
    for i in order:
        r = data[i]
        st = sorted(((num(r[c]), hdr[c]) for c in stall_cols), reverse=True)[:3]
        st_s = ", ".join(f"{h.replace('stall_', '')[:28]} {v:.0f}" for v, h in st if v > 0)
        print(f"| {i} | {num(r[allc]) / tot:.1%} | {r[exe] if exe is not None else ''} | {r[src][:70]} | {st_s} |")
