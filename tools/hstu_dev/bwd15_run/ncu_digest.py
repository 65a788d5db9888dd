"""Digest of an ncu raw CSV page (ncu --import R --page raw --csv --print-metric-instances values): one markdown
table, a column per profiled kernel, for the metrics that say where a backward's cycles go (issue slots, tensor pipe,
stall reasons per issued instruction, shared-memory traffic) and the SASS opcode mix per MMA (branch bwd15; bwd16:
with --pairs N, executed instructions and the opcode mix per warp and (query tile, key block) pair, 8 warps; fwd21:
the pipes' utilization (XU: MUFU and conversions, FMA, ALU, LSU) and occupancy where the report has them; bwd21:
DRAM bytes read / written, the L2 hit rate, the SMs' active cycles min / max, the global reductions)."""
import csv
import re
import sys

rows = list(csv.reader(open(sys.argv[1])))
pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 0
# header row, units row, then one row per kernel
hdr = rows[0]
data = [r for r in rows[2:] if len(r) == len(hdr)]
name_col = hdr.index("Kernel Name") if "Kernel Name" in hdr else None
names = [(r[name_col] if name_col is not None else f"k{i}")[:60] for i, r in enumerate(data)]
pats = [r"gpu__time_duration\.sum", r"sm__throughput\.avg\.pct", r"smsp__issue_active\.avg\.pct",
        r"smsp__inst_executed\.sum$", r"smsp__inst_executed\.avg\.per_cycle_active$", r"pipe_tensor.*pct",
        r"smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio", r"smsp__warps_active\.avg\.per_cycle_active",
        r"smsp__warps_eligible\.avg\.per_cycle_active", r"l1tex__data_pipe_lsu_wavefronts_mem_shared\.sum$",
        r"l1tex__data_bank_conflicts_pipe_lsu_mem_shared\.sum$", r"dram__bytes\.sum$", r"lts__t_bytes\.sum$",
        r"launch__registers_per_thread", r"sm__cycles_elapsed\.avg$", r"smsp__cycles_active\.avg$",
        r"launch__grid_size", r"launch__shared_mem_per_block", r"sm__inst_executed_pipe_\w+\.avg\.pct",
        r"sm__pipe_\w+_cycles_active\.avg\.pct", r"launch__occupancy_limit", r"sm__warps_active\.avg\.pct",
        r"launch__waves_per_multiprocessor", r"launch__block_size", r"sm__maximum_warps_per_active_cycle_pct",
        r"dram__bytes_(read|write)\.sum$", r"lts__t_sector_hit_rate\.pct$", r"sm__cycles_active\.(min|max|avg)$",
        r"inst_executed_op_global_red\.sum$"]
print("| metric | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
for i, h in enumerate(hdr):
    if any(re.search(p, h) for p in pats):
        vals = [r[i] for r in data]
        if "stalled" in h and all(_v in ("", "0", "0.00") for _v in vals):
            continue
        print(f"| {h} | " + " | ".join(v[:24] for v in vals) + " |")
        if pairs and re.search(r"smsp__inst_executed\.sum$", h):
            per = []
            for v in vals:
                try:
                    per.append(f"{float(v.replace(',', '')) / pairs / 8:.0f}")
                except ValueError:
                    per.append("?")
            print("| instructions per warp and pair | " + " | ".join(per) + " |")
# opcode mix: sass__inst_executed_per_opcode instance values "OP: n; OP: n" (format varies by version)
for i, h in enumerate(hdr):
    if "per_opcode" in h:
        print(f"\n#### {h}")
        for n, r in zip(names, data):
            cells = re.findall(r"([A-Z][A-Z0-9_.]*)\W+([0-9.,]+)", r[i])
            cnt = {}
            for op, v in cells:
                try:
                    cnt[op] = cnt.get(op, 0) + float(v.replace(",", ""))
                except ValueError:
                    pass
            mma = cnt.get("HMMA", 0) or 1
            tot = sum(cnt.values())
            top = sorted(cnt.items(), key=lambda t: -t[1])[:24]
            print(f"{n}: total {tot:.4g}, HMMA {cnt.get('HMMA', 0):.4g}, per HMMA {tot / mma:.2f}: " +
                  ", ".join(f"{op} {v / mma:.2f}" for op, v in top))
            if pairs:
                print(f"{n}: per warp and pair {tot / pairs / 8:.0f} instructions: " +
                      ", ".join(f"{op} {v / pairs / 8:.0f}" for op, v in top))
            if not cnt:
                print("  raw:", r[i][:600])
