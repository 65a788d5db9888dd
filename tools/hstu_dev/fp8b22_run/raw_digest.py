"""ncu's raw page (`ncu --import R --page raw --csv --print-metric-instances values`) of the FP8 backward kernel,
one column per profiled launch: the metrics that say where its cycles go (time, issue, pipes, stalls, shared memory,
L2 / DRAM). Usage: raw_digest.py RAW.csv[.gz] [REGEX ...] (extra metric-name patterns)"""
import csv
import gzip
import re
import sys

PATS = [r"^gpu__time_duration\.sum$", r"^sm__cycles_elapsed\.avg$", r"^sm__cycles_active\.(avg|max|min)$",
        r"^smsp__cycles_active\.avg$",
        r"^smsp__issue_active\.avg\.pct_of_peak_sustained_active$", r"^smsp__inst_executed\.sum$",
        r"^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$", r"gmma",
        r"^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$",
        r"^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$",
        r"^smsp__warps_eligible\.avg\.per_cycle_active$", r"^smsp__warps_active\.avg\.per_cycle_active$",
        r"^l1tex__data_pipe_lsu_wavefronts_mem_shared\.sum$", r"^l1tex__data_bank_conflicts_pipe_lsu_mem_shared\.sum$",
        r"^lts__t_sectors_op_red\.sum$", r"^lts__t_sectors_op_atom\.sum$", r"^lts__t_sector_hit_rate\.pct$",
        r"^lts__throughput\.avg\.pct_of_peak_sustained_elapsed$", r"^dram__bytes_(read|write)\.sum$",
        r"^dram__throughput\.avg\.pct_of_peak_sustained_elapsed$",
        r"^sm__throughput\.avg\.pct_of_peak_sustained_elapsed$",
        r"^l1tex__throughput\.avg\.pct_of_peak_sustained_active$",
        r"^launch__(grid_size|registers_per_thread|shared_mem_per_block_dynamic)$",
        r"^smsp__pcsamp_warps_issue_stalled_.*$", r"^sm__warps_active\.avg\.pct_of_peak_sustained_active$",
        r"^lts__t_sectors_srcunit_tex_op_read\.sum$", r"^lts__t_bytes\.sum$"]
args = sys.argv[1:]
pats = [re.compile(p) for p in PATS + args[1:]]
opener = gzip.open if args[0].endswith(".gz") else open
with opener(args[0], "rt", errors="replace", newline="") as f:
    rows = list(csv.reader(f))
hdr, units, data = rows[0], rows[1], [r for r in rows[2:] if len(r) == len(rows[0])]
name = hdr.index("Kernel Name") if "Kernel Name" in hdr else None
print("| metric | unit | " + " | ".join(f"launch {i}" + (f" ({r[name][:40]})" if name is not None else "")
                                      for i, r in enumerate(data)) + " |")
print("|---|---|" + "---:|" * len(data))
for i, m in enumerate(hdr):
    if any(p.search(m) for p in pats):
        vals = [r[i] for r in data]
        if all(v in ("", "n/a") for v in vals):
            continue
        print(f"| {m} | {units[i]} | " + " | ".join(v[:24] for v in vals) + " |")
