"""fp8f21 run helper: the instruction and byte counts of the profiled FP8 forward kernels (ncu raw CSV: --page raw
--csv --print-metric-instances values), per consumer warp and (query tile, KV tile) pair and per score, for the
energy count of the 192-key loop. Pairs: causal B4 H4 S16K, 128-row query tiles over 192-key tiles (88,752).
Usage: ncu_count.py NCU_RAW_CSV [--pairs N]"""
import csv
import re
import sys

rows = list(csv.reader(open(sys.argv[1])))
pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 88752
hdr = rows[0]
data = [r for r in rows[2:] if len(r) == len(hdr)]
name_col = hdr.index("Kernel Name") if "Kernel Name" in hdr else None


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


scores = pairs * 128 * 192
print(f"ncu counts ({pairs} tile pairs of 128 x 192 scores; per warp: / 8 consumer warps)")
print("| metric | " + " | ".join(
    re.sub(r"\s+", "", r[name_col])[:70] if name_col is not None else f"k{i}" for i, r in enumerate(data)) + " |")
print("|---|" + "---:|" * len(data))
for i, h in enumerate(hdr):
    if not re.search(r"inst_executed|lts__t_bytes|dram__bytes|gpu__time|cycles_elapsed|wavefronts_mem_shared|"
                     r"issue_active", h) or "per_opcode" in h:
        continue
    vals = [num(r[i]) for r in data]
    print(f"| {h} | " + " | ".join("-" if v is None else f"{v:,.0f}" if v > 1000 else f"{v:.3g}" for v in vals) + " |")
    if re.search(r"inst_executed(_pipe_\w+)?\.sum$", h):
        print(f"| ... per warp and pair | " + " | ".join("-" if v is None else f"{v / pairs / 8:.1f}" for v in vals)
              + " |")
    if re.search(r"bytes", h) and h.endswith(".sum"):
        print(f"| ... bytes per pair | " + " | ".join("-" if v is None else f"{v / pairs:,.0f}" for v in vals)
              + " |")
for i, h in enumerate(hdr):
    if "per_opcode" in h:
        for r in data:
            print(f"\nopcodes ({h}): {r[i][:3000]}")
