"""Digest of prof17's ncu raw CSV (ncu --import R --page raw --csv --print-metric-instances values): one markdown
table, a column per profiled kernel, of where the backward's time goes (branches bwd17, bwd18): L2 hit
rates of reads and of the dQ reductions, DRAM bytes, issue / tensor pipe, achieved occupancy, stall reasons per
issued instruction, the SMs' active cycles (min / avg / max: the tail), instructions per warp and tile pair.
Usage: ncu18.py RAW.csv [--pairs N ...] (the pairs of each kernel in order)."""
import csv
import re
import sys

with open(sys.argv[1]) as f:
    hdr, _units, *body = csv.reader(f)  # header, units, a row per kernel
pairs = [int(x) for x in sys.argv[sys.argv.index("--pairs") + 1:]] if "--pairs" in sys.argv else []
data = [r for r in body if len(r) == len(hdr)]
col = {h: i for i, h in enumerate(hdr)}
names = [r[col["Kernel Name"]][:40] if "Kernel Name" in col else f"k{i}" for i, r in enumerate(data)]
pats = [r"^gpu__time_duration\.sum$", r"^sm__throughput\.avg\.pct", r"^dram__bytes_(read|write)\.sum$",
        r"^dram__throughput\.avg\.pct", r"^lts__t_sector.*hit_rate\.pct$", r"^lts__t_sectors_op_(red|read)\.sum$",
        r"^lts__throughput\.avg\.pct", r"^smsp__issue_active\.avg\.pct", r"pipe_tensor.*hmma.*pct",
        r"^sm__warps_active\.avg\.pct", r"^sm__cycles_active\.(min|avg|max)$", r"^smsp__inst_executed\.sum$",
        r"^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$", r"^launch__(grid_size|registers)",
        r"^lts__average_gcomp", r"^l1tex__m_xbar2l1tex_read_bytes", r"^sm__maximum_warps_per_active_cycle_pct",
        r"^l1tex__t_(requests|sectors)_pipe_lsu_mem_global_op_red\.sum$"]
print("| metric | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


for i, h in enumerate(hdr):
    if not any(re.search(p, h) for p in pats):
        continue
    vals = [r[i] for r in data]
    if "stalled" in h:
        if all((num(v) or 0) < 0.05 for v in vals):
            continue
        h = h.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
    print(f"| {h} | " + " | ".join(v[:16] for v in vals) + " |")
    if h == "smsp__inst_executed.sum" and len(pairs) >= len(vals):
        print("| instructions per warp and pair | " + " | ".join(
            f"{num(v) / p / 8:.0f}" if num(v) else "?" for v, p in zip(vals, pairs)) + " |")
