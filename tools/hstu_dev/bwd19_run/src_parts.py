"""Instructions and warp-stall samples of a backward kernel by part (branch bwd19, issue 39), from
`ncu --import R --page source --csv --print-source sass` (SourceCounters): per profiled kernel, each SASS line's
executed warp instructions and stall samples summed over the parts of a (query tile, key block) pair (MMA,
ldmatrix, shared stores / loads, global loads / cp.async, dQ reductions, MUFU, FP32 arithmetic, conversions,
barriers, integer / address arithmetic, moves, control), per warp and pair with --pairs N (one N per kernel, in
order; 8 warps a pair); then every BAR line (its executed count, samples, top stall columns).
Usage: src_parts.py SOURCE.csv [--pairs N ...]"""
import csv
import re
import sys
from collections import defaultdict

PARTS = [("MMA", r"^HMMA"), ("ldmatrix", r"^LDSM"), ("shared st", r"^STS"), ("shared ld", r"^LDS"),
         ("cp.async / global ld", r"^(LDGSTS|LDGDEPBAR|DEPBAR|LDG)"), ("reductions / global st", r"^(RED|ATOM|STG)"),
         ("MUFU", r"^MUFU"), ("FP32", r"^(FFMA|FMUL|FADD|FSEL|FMNMX|FSETP|FCHK|FSET)"),
         ("conversions", r"^(F2FP|F2F|I2F|F2I|HADD2|HMUL2|HFMA2)"), ("barrier", r"^(BAR|WARPSYNC|MEMBAR)"),
         ("int / address", r"^(IADD|IMAD|LEA|LOP|SHF|ISETP|IMNMX|IABS|SEL|PRMT|POPC|FLO|BMSK|SGXT|VIADD|VIMNMX)"),
         ("uniform", r"^U"), ("moves", r"^(MOV|S2R|CS2R|S2UR|P2R|R2P|PLOP|SHFL|VOTE)"),
         ("control", r"^(BRA|EXIT|BSSY|BSYNC|CALL|RET|NOP|YIELD|BREAK|JMP)")]


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


pairs = [int(x) for x in sys.argv[sys.argv.index("--pairs") + 1:]] if "--pairs" in sys.argv else []
# One kernel per (header row "Address", ...; its SASS rows) group; the rows before a header (the kernel's name) are
# skipped.
kernels = []
with open(sys.argv[1], errors="replace", newline="") as f:
    for row in csv.reader(f):
        if row and "Address" in row[0]:
            kernels.append((row, []))
        elif kernels and len(row) == len(kernels[-1][0]):
            kernels[-1][1].append(row)
for bi, (hdr, data) in enumerate(kernels):

    def col(*subs):
        return next((i for i, h in enumerate(hdr) if all(s.lower() in h.lower() for s in subs)), None)

    src, exe, allc = col("Source"), col("Instructions Executed"), col("Warp Stall Sampling (All")
    if src is None or exe is None:
        print(f"block {bi}: columns {hdr[:30]}")
        continue
    stall_cols = [i for i, h in enumerate(hdr) if re.search(r"stall", h, re.I) and i != allc and "Not-issued" not in h
                  and "Sampling" not in h]
    per = pairs[bi] * 8 if bi < len(pairs) and pairs[bi] else 0
    tot_i = sum(num(r[exe]) for r in data) or 1.0
    tot_s = sum(num(r[allc]) for r in data) if allc is not None else 0.0
    by_i, by_s, by_op = defaultdict(float), defaultdict(float), defaultdict(float)
    bars = []
    for r in data:
        op = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
        name = next((n for n, pat in PARTS if re.match(pat, op)), "other")
        by_i[name] += num(r[exe])
        by_op[".".join(op.split(" ")[0].split(".")[:2])] += num(r[exe])
        if allc is not None:
            by_s[name] += num(r[allc])
        if op.startswith("BAR"):
            st = sorted(((num(r[c]), hdr[c]) for c in stall_cols), reverse=True)[:3]
            bars.append((r[0], op[:40], num(r[exe]), num(r[allc]) if allc is not None else 0, st))
    d = per or 1
    print(f"\n### kernel {bi}: {len(data)} SASS lines, {tot_i:.4g} warp instructions"
          + (f", {tot_i / per:.0f} per warp and pair" if per else "") + f", {tot_s:.0f} stall samples")
    print("| part | instructions" + (" per warp and pair" if per else "") + " | share | stall samples share |")
    print("|---|---:|---:|---:|")
    for name in [n for n, _ in PARTS] + ["other"]:
        if by_i[name] or by_s[name]:
            print(f"| {name} | {by_i[name] / d:.1f} | {by_i[name] / tot_i:.1%} | "
                  f"{(by_s[name] / tot_s if tot_s else 0):.1%} |")
    print("opcodes" + (" per warp and pair" if per else "") + ": " +
          ", ".join(f"{k} {v / d:.1f}" for k, v in sorted(by_op.items(), key=lambda t: -t[1])[:40]))
    print("| BAR line | SASS | executed per warp and pair | samples share | top stall columns |\n|---|---|---:|---:|---|")
    for a, op, e, smp, st in bars:
        sts = ", ".join(f"{h[:30]} {v:.0f}" for v, h in st if v > 0)
        print(f"| {a} | {op} | {e / d:.2f} | {(smp / tot_s if tot_s else 0):.1%} | {sts} |")
