"""fwd40's digest of t40.py's logs and ncu's CSV (no torch): python3 dig40.py t1.log t2.log ncu.csv
rows: per shape main's kernels, then per variant ev / graph / kern ms and FA2 / it by each (t2: ours only);
ncu: chosen metrics per kernel."""
import csv
import re
import sys


def rows(path, ours_only):
    """per shape a header, then per variant: ev ms (ev's two rounds' ratio), graph ms, kern ms | FA2 / it by the three
    (> 1: ours faster), the variant's max relative difference from main; main's kernels"""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        print(f"({path}: none)")
        return
    rs, ks, tops, order = {}, {}, {}, []
    for line in lines:
        if "Traceback" in line or "rror" in line:
            print(line[:160])
        f = line.split()
        if not f or f[0] not in ("ROW", "KERN"):
            continue
        key = (f[1], f[2])
        if f[1] not in order:
            order.append(f[1])
        if f[0] == "KERN":
            ks[key] = float(f[3])
            if f[2] == "main":
                tops[f[1]] = line.split("|", 1)[1].strip()[:110]
        else:
            rs[key] = line
    # (the lead sees the tail of the output: the first shapes, the most important, print last; a shape without
    # profiled rows (the sweep) on one line: variant, ev ms, FA2 / it by ev)
    for s in reversed(order):
        sh = s.replace("B", "b").replace(":S", "s").replace(":D", "d")
        if not any(k[0] == s for k in ks):
            cells = []
            for (s2, x), line in rs.items():
                m = re.search(r"fa2/x ev ([\d.na]+)", line)
                if s2 == s and m:
                    v = dict(re.findall(r"(ev1|ev2) ([\d.na]+)", line.split("|")[0]))
                    cells.append(f"{x} {min(float(v['ev1']), float(v['ev2'])):.4f} {m.group(1)}")
            print(f"{sh} (ev, fa2/x): " + ", ".join(cells))
            continue
        print(f"{sh}: {tops.get(s, '')}")
        for (s2, x), line in rs.items():
            if s2 != s or (ours_only and x == "fa2"):
                continue
            v = dict(re.findall(r"(ev1|ev2|graph) ([\d.na]+)", line.split("|")[0]))
            e1, e2 = float(v["ev1"]), float(v["ev2"])
            k, kf = ks.get((s, x)), ks.get((s, "fa2"))
            out = f" {x:4s} ev {min(e1, e2):.4f} ({max(e1, e2) / min(e1, e2):.3f}) g {v['graph']}"
            out += f" k {k:.4f}" if k else ""
            m = re.search(r"fa2/x ev ([\d.na]+) graph ([\d.na]+)", line)
            if m:
                out += f" | {m.group(1)} {m.group(2)}" + (f" {kf / k:.3f}" if k and kf else "")
            d = re.search(r"diff (\S+)", line)
            if d:
                out += " d0" if float(d.group(1)) == 0 else f" d {d.group(1)}"
            print(out)


def ncu(path):
    short = {"gpu__time_duration.sum": "ns", "sm__cycles_active.avg": "cyc",
             "sm__warps_active.avg.pct_of_peak_sustained_active": "warps%",
             "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor%",
             "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%", "launch__registers_per_thread": "regs",
             "launch__occupancy_limit_registers": "occ_regs", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm%",
             "dram__bytes_read.sum": "dram_rd",
             "smsp__warp_issue_stalled_barrier_per_warp_active.pct": "st_bar%",
             "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct": "st_long%"}
    try:
        rs = [r for r in csv.reader(open(path)) if len(r) > 10]
    except OSError:
        print("(no ncu)")
        return
    if not rs:
        print("(ncu: no rows)")
        return
    h = rs[0]
    ki, mi, vi, ii, ui = (h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID"),
                          h.index("Metric Unit"))
    out = {}
    for r in rs[1:]:
        name = r[ki].replace("void ", "").split("(")[0]
        out.setdefault((r[ii], name.split("<")[0][-24:]), {})[short.get(r[mi], r[mi][:12])] = r[vi] + (
            r[ui] if r[ui] in ("byte", "Kbyte", "Mbyte", "Gbyte") else "")
    for (i, k), m in out.items():
        print("ncu", i, k, " ".join(f"{a}={b}" for a, b in m.items()))


if __name__ == "__main__":
    rows(sys.argv[1], False)
    rows(sys.argv[2], True)
    ncu(sys.argv[3])
