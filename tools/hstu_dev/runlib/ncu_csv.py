"""Digests of ncu's CSV output for the HSTU lab's run scripts (runlib/common.sh calls it; carried beside them).

  python3 ncu_csv.py times CSV       `ncu --csv --metrics gpu__time_duration.sum` (one row a metric): one line a
                                     launch: ID, us, the kernel's name without `void` and HstuParams
  python3 ncu_csv.py metrics CSV     `ncu --csv --metrics ...` (one row a metric): one line a launch, its metrics
                                     as name=value (stall / tensor / dram / time names shortened)
  python3 ncu_csv.py raw CSV...      `ncu --import R --page raw --csv` (one row a launch): chosen metrics and the 7
                                     largest warp stalls per issue
"""
import csv
import os
import sys

UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3}


def metric_rows(path):
    """the rows of ncu's one-row-a-metric CSV (its header first)"""
    return [r for r in csv.reader(open(path)) if len(r) > 10]


def times(path):
    rows = metric_rows(path)
    head = rows[0]
    ki, vi, ii, ui = (head.index("Kernel Name"), head.index("Metric Value"), head.index("ID"),
                      head.index("Metric Unit"))
    for r in rows[1:]:
        v = float(r[vi].replace(",", "")) * UNIT_US.get(r[ui], 1.0)
        k = r[ki].replace("void ", "").replace("(hstu::HstuParams, int)", "").replace("(hstu::HstuParams)", "")
        print(r[ii], f"{v:9.1f}", k[:40] + (" .. " + k[-40:] if len(k) > 80 else k[40:80]))


def metrics(path):
    rows = metric_rows(path)
    head = rows[0]
    ki, mi, vi, ii = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("ID")
    out = {}
    for r in rows[1:]:
        m = r[mi].replace("smsp__average_warps_issue_stalled_", "st_").replace("_per_issue_active.ratio", "")
        m = m.replace("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor%")
        m = m.replace("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%")
        m = m.replace("gpu__time_duration.sum", "ns")
        out.setdefault((r[ii], r[ki][:26]), {})[m] = r[vi]
    for (i, k), m in out.items():
        print(i, k, " ".join(f"{a}={b}" for a, b in sorted(m.items())))


RAW_WANT = ["gpu__time_duration.sum", "smsp__inst_executed.sum",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "smsp__issue_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "lts__t_sector_hit_rate.pct", "lts__t_sectors_op_red.sum", "lts__t_sectors_op_atom.sum"]


def raw(paths):
    data, hdr = [], None
    for f in paths:
        if os.path.exists(f):
            rows = list(csv.reader(open(f)))
            hdr = rows[0]
            data += rows[2:]
    if hdr is None:
        return
    stall = [i for i, h in enumerate(hdr) if h.startswith("smsp__average_warp_latency_issue_stalled") or
             (h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio"))]
    for r in data:
        name = r[hdr.index("Kernel Name")][:60]
        print(name, " ".join(f"{w.split('__')[1][:22]}={r[hdr.index(w)]}" for w in RAW_WANT if w in hdr))
        st = sorted(((float(r[i].replace(",", "") or 0), hdr[i].replace("smsp__average_warps_issue_stalled_", "")
                      .replace("_per_issue_active.ratio", "")) for i in stall), reverse=True)[:7]
        print("   stalls/issue:", " ".join(f"{n}={v:.2f}" for v, n in st))


def main(argv):
    if len(argv) < 2 or argv[0] not in ("times", "metrics", "raw"):
        print(__doc__)
        return 2
    if argv[0] == "raw":
        raw(argv[1:])
    else:
        {"times": times, "metrics": metrics}[argv[0]](argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
