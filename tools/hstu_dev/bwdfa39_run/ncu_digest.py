"""bwdfa39: the digest of ncu's raw csv pages (one line of counters and one of the top stalls per kernel)."""
import csv
import os
import sys

WANT = ["gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__inst_executed_op_global_red.sum",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct", "lts__t_sectors_op_red.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"]
for f in sys.argv[1:]:
    if not os.path.exists(f):
        print(f"(no {f})")
        continue
    rows = list(csv.reader(open(f)))
    hdr = [h for h in rows[0]]
    print(f"## {os.path.basename(f)}")
    stall = [i for i, h in enumerate(hdr) if h.startswith("smsp__average_warps_issue_stalled_")
             and h.endswith("_per_issue_active.ratio")]
    for r in rows[2:]:
        name = r[hdr.index("Kernel Name")][:70]
        print(name)
        print("  ", " ".join(f"{w.split('__')[1].replace('inst_executed_', '')[:24]}={r[hdr.index(w)]}"
                             for w in WANT if w in hdr))
        for i, h in enumerate(hdr):
            if "per_opcode" in h and r[i]:
                print("  ", h[:40], r[i][:600])
        st = sorted(((float(r[i].replace(',', '') or 0), hdr[i].replace('smsp__average_warps_issue_stalled_', '')
                      .replace('_per_issue_active.ratio', '')) for i in stall), reverse=True)[:9]
        print("   stalls/issue:", " ".join(f"{n}={v:.2f}" for v, n in st))
