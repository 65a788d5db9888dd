"""bwd41: one line per kernel of ncu's raw csv page (time, warp instructions per warp and (64 x 128) tile pair at
B4 S16K H4 causal (2,113,536 warp-pairs), tensor pipe, issue active, the five largest stalls per issue)."""
import csv
import sys

PAIRS = 2113536
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0]
col = {h: i for i, h in enumerate(hdr)}
pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
stall = [(i, h[len(pre):-len(post)]) for i, h in enumerate(hdr) if h.startswith(pre) and h.endswith(post)]


def num(r, h):
    return float(r[col[h]].replace(",", "")) if h in col and r[col[h]] else float("nan")


for r in rows[2:]:
    name = r[col["Kernel Name"]]
    base = name.replace("void ", "").split("<")[0].replace("hstu::hstu_bwd_pds_", "")
    short = "fa2" if "flash" in name else f"{base}<{name.split('>(')[0].split(',')[-1].strip()}>"
    st = sorted(((float(r[i].replace(",", "") or 0), n) for i, n in stall), reverse=True)[:5]
    print(f"{short} {num(r, 'gpu__time_duration.sum'):.3f}ms inst/pair "
          f"{num(r, 'smsp__inst_executed.sum') / PAIRS:.0f} tens "
          f"{num(r, 'sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):.1f} iss "
          f"{num(r, 'smsp__issue_active.avg.pct_of_peak_sustained_active'):.1f} | "
          + " ".join(f"{n[:10]}={v:.2f}" for v, n in st))
