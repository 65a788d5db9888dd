"""The FP8 backward kernel's SASS by part (issue 36, fp8b21; e4m3 QGMMA counted as wgmma since fp8b22), from `ncu
--import R --page source --csv --print-source sass` (SourceCounters; one block per profiled kernel, e.g. S16K then
S4K): per opcode class and per region of the consumer loop (landmarks: the wgmma groups in SASS order), executed warp
instructions per consumer warp and CTA tile (--tiles N ...: CTA tiles of each kernel) and the share of the
warp-stall samples with their top reasons.
Usage: src_digest.py SRC.csv[.gz] [--tiles N ...] [--top K]"""
import csv
import gzip
import re
import sys
from collections import defaultdict

PARTS = [("wgmma", r"^(HGMMA|QGMMA|WARPGROUP)"), ("mbarrier / sync", r"^(SYNCS|BAR|WARPSYNC|MEMBAR|FENCE|ERRBAR|CCTL)"),
         ("shared st", r"^(STS|STSM)"), ("shared ld", r"^(LDS|LDSM)"), ("global ld", r"^(LDG|ULDC|LDC)"),
         ("global red / st", r"^(RED|ATOM|STG|UBLKRED|UTMA|UBLK)"), ("MUFU", r"^MUFU"),
         ("FP32", r"^(FFMA|FMUL|FADD|FSEL|FMNMX|FSETP|FCHK|FSET)"),
         ("conversions", r"^(F2FP|F2F|I2F|F2I|HADD2|HMUL2|HFMA2|I2FP|F2IP)"), ("reduce / vote", r"^(REDUX|VOTE|SHFL)"),
         ("int / address", r"^(IADD|IMAD|LEA|LOP|SHF|ISETP|IMNMX|IABS|SEL|PRMT|POPC|FLO|BMSK|SGXT|VIADD|VIMNMX)"),
         ("uniform", r"^U"), ("moves", r"^(MOV|S2R|CS2R|S2UR|P2R|R2P|PLOP|R2UR)"),
         ("control", r"^(BRA|EXIT|BSSY|BSYNC|CALL|RET|NOP|YIELD|BREAK|JMP|WARPGROUP)")]


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


args = sys.argv[1:]
tiles = [float(x) for x in args[args.index("--tiles") + 1:] if not x.startswith("--")] if "--tiles" in args else []
top = int(args[args.index("--top") + 1]) if "--top" in args else 25
path = args[0]
opener = gzip.open if path.endswith(".gz") else open
kernels = []
with opener(path, "rt", errors="replace", newline="") as f:
    for row in csv.reader(f):
        if row and "Address" in row[0]:
            kernels.append((row, []))
        elif kernels and row and row[0].startswith("0x") and len(row) == len(kernels[-1][0]):
            kernels[-1][1].append(row)
# (ncu prints each kernel's source page twice: keep the first of two identical blocks)
kernels = [k for i, k in enumerate(kernels) if i == 0 or k[1] != kernels[i - 1][1]]
for bi, (hdr, data) in enumerate(kernels):
    def col(*subs, avoid=()):
        return next((i for i, h in enumerate(hdr) if all(s.lower() in h.lower() for s in subs)
                     and not any(a.lower() in h.lower() for a in avoid)), None)

    src = col("Source")
    exe = col("Instructions Executed", avoid=("Predicated",))
    allc = col("Warp Stall Sampling (All")
    if src is None or exe is None:
        print(f"block {bi}: columns {hdr[:40]}")
        continue
    stall_cols = [i for i, h in enumerate(hdr) if re.search(r"stall", h, re.I) and i != allc and "Sampling" not in h]
    per = tiles[bi] * 8 if bi < len(tiles) else 0  # consumer warps x CTA tiles
    tot_i = sum(num(r[exe]) for r in data) or 1.0
    tot_s = sum(num(r[allc]) for r in data) if allc is not None else 0.0
    print(f"\n### kernel {bi}: {len(data)} SASS lines, {tot_i:.4g} warp instructions"
          + (f" ({tot_i / per:.0f} per consumer warp and CTA tile, all warps counted)" if per else "")
          + f", {tot_s:.0f} stall samples; stall columns: {[hdr[c] for c in stall_cols][:40]}")
    by_i, by_s, by_r = defaultdict(float), defaultdict(float), defaultdict(lambda: defaultdict(float))
    for r in data:
        op = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
        name = next((n for n, pat in PARTS if re.match(pat, op)), "other")
        by_i[name] += num(r[exe])
        by_s[name] += num(r[allc]) if allc is not None else 0
        for c in stall_cols:
            by_r[name][hdr[c]] += num(r[c])
    print("| part | warp instr." + (" per consumer warp and tile" if per else "") + " | instr. share | samples share "
          "| top stall columns (share of all samples) |\n|---|---:|---:|---:|---|")
    for name in [n for n, _ in PARTS] + ["other"]:
        if by_i[name] or by_s[name]:
            st = sorted(by_r[name].items(), key=lambda t: -t[1])[:3]
            sts = ", ".join(f"{h[:28]} {v / tot_s:.1%}" for h, v in st if v > 0 and tot_s)
            print(f"| {name} | {by_i[name] / (per or 1):.1f} | {by_i[name] / tot_i:.1%} | "
                  f"{(by_s[name] / tot_s if tot_s else 0):.1%} | {sts} |")
    # the top lines by samples, with their neighbourhood's landmark
    print(f"\ntop {top} SASS lines by stall samples (index, address, SASS, executed, samples share, top reasons):")
    order = sorted(range(len(data)), key=lambda i: -num(data[i][allc]) if allc is not None else 0)[:top]
    for i in sorted(order):
        r = data[i]
        st = sorted(((num(r[c]), hdr[c]) for c in stall_cols), reverse=True)[:3]
        sts = ", ".join(f"{h[:24]} {v:.0f}" for v, h in st if v > 0)
        print(f"  {i:5d} {r[0]} {r[src].strip()[:60]:60s} {num(r[exe]):.4g} {num(r[allc]) / tot_s:.2%} {sts}")
    # windows of 64 lines: samples share and executed instructions, for mapping regions by reading the SASS
    print("\nwindows of 64 SASS lines (first line index: samples share, instructions per consumer warp and tile; "
          "landmarks):")
    for w0 in range(0, len(data), 64):
        rows = data[w0:w0 + 64]
        s = sum(num(r[allc]) for r in rows) if allc is not None else 0
        e = sum(num(r[exe]) for r in rows)
        marks = sorted({re.sub(r"^@!?U?P\w+\s+", "", r[src].strip()).split(" ")[0] for r in rows
                        if re.search(r"HGMMA|QGMMA|MUFU|BAR|SYNCS|RED|STSM|MEMBAR|REDUX|EXIT|UTMA", r[src])})
        if s / (tot_s or 1) >= 0.003 or e / tot_i >= 0.003:
            print(f"  {w0:5d}: {s / (tot_s or 1):6.1%} {e / (per or 1):7.1f}  {' '.join(marks)[:150]}")
