"""The training step at NVIDIA's config (benchmarks/embedding.py --preset nvidia: 10 tables x 104,857 ids, power law
1.05 over 1,677,721 ids, D128 fp32, pooling none) kernel by kernel under Nsight Compute: one steady step per
optimizer between cudaProfilerStart / Stop, and the table of the report (time, DRAM bytes, achieved bandwidth and
its byte floor, registers, occupancy, L2 hit rate, the largest stall reasons). Run (GPU; or `--metrics` alone with
those columns' metrics: fewer replay passes, so the Adam step's 16 GB of rows fit a short run):
    ncu --profile-from-start off --print-units base --csv --page raw \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \\
        python3 -P tools/dynamicemb_dev/step_ncu.py --bench benchmarks --opt sgd,adam > ncu.csv
    python3 tools/dynamicemb_dev/step_ncu.py --table ncu.csv [--tbs 4.27]
With --variant D the steps run under the dedup flags D (op _lookup_lab_dedup) of builds that have it; a list D1,D2
profiles one step per variant on the same module. --opt eval profiles an eval call after five SGD steps (its variants:
op _lookup_lab_eval's values, in builds that have it). With the access metrics (sectors per request of global loads /
stores: l1tex__t_{sectors,requests}_pipe_lsu_mem_global_op_{ld,st}.sum; L2 read / write misses from the SMs:
lts__t_sectors_srcunit_tex_op_{read,write}_lookup_miss.sum) --table adds a second table of them.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys


def steps(a):
    import torch

    sys.path.insert(0, os.path.abspath(a.bench))
    from embedding import make_batch  # noqa: E402

    from dynamicemb._batched import BatchedDynamicEmbeddingTables  # noqa: E402
    from dynamicemb._optimizers import SGD, Adam  # noqa: E402
    from dynamicemb._options import DynamicEmbTableOptions  # noqa: E402

    variants = [int(v) for v in str(a.variant).split(",")]
    dev = torch.device("cuda")
    T, D, B = 10, 128, 104_857
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(T, B, 1, 1_677_721, 1.05, gen) for _ in range(2)]
    batches = [(i.to(dev), o.to(dev)) for i, o in batches]
    cudart = torch.cuda.cudart()
    for opt_name in a.opt.split(","):
        opt = SGD(lr=0.01) if opt_name in ("sgd", "eval") else Adam(lr=1e-3)
        tables = [DynamicEmbTableOptions(dim=D, max_capacity=1 << 20, on_refused="zero")] * T
        m = BatchedDynamicEmbeddingTables(tables, pooling="none", optimizer=opt, device=dev)
        g = None
        for k in range(5):
            ids, off = batches[k % 2]
            out = m(ids, off, validate=None)
            if g is None:
                g = torch.ones_like(out)
            out.backward(g)
        torch.cuda.synchronize()
        if opt_name == "eval":  # one eval call per variant (op _lookup_lab_eval) after the training steps
            m.eval()
            lab = getattr(torch.ops.dynamicemb, "_lookup_lab_eval", None)
            old = lab(-1) if lab is not None else None
            with torch.no_grad():
                for v in variants:
                    if v >= 0 and lab is not None:
                        lab(v)
                    m(*batches[1])
                    torch.cuda.synchronize()
                    cudart.cudaProfilerStart()
                    m(*batches[0])
                    torch.cuda.synchronize()
                    cudart.cudaProfilerStop()
                    print(f"# profiled one eval call, variant {v}", file=sys.stderr)
            if lab is not None:
                lab(old)
            del m, out
            continue
        for k, v in enumerate(variants):
            if v >= 0:
                torch.ops.dynamicemb._lookup_lab_dedup(v)
            ids, off = batches[(k + 1) % 2]
            out = m(ids, off, validate=None)  # one step under the variant before the profiled one
            out.backward(g)
            torch.cuda.synchronize()
            ids, off = batches[k % 2]
            cudart.cudaProfilerStart()
            out = m(ids, off, validate=None)
            out.backward(g)
            torch.cuda.synchronize()
            cudart.cudaProfilerStop()
            print(f"# profiled one {opt_name} step, variant {v}", file=sys.stderr)
        del m, out


def short(name, n=48):
    name = name.replace("void ", "")
    for pre in ("dynamicemb::lookup::detail::", "at::native::", "cub::CUB_200800_900_NS::", "cub::"):
        name = name.replace(pre, "")
    name = name.split("(")[0]
    return name if len(name) <= n else name[: n - 3] + "..."


def fnum(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return float("nan")


def table(path, tbs):
    text = open(path).read()
    # ncu prints its own lines before the CSV: start at the header
    start = text.find('"ID"')
    if start < 0:
        print(f"no ncu rows in {path}")
        return
    rows = list(csv.reader(io.StringIO(text[start:])))
    head, data = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
    col = {h: i for i, h in enumerate(head)}

    def get(r, name):
        return fnum(r[col[name]]) if name in col else float("nan")

    stalls = [h for h in head if "issue_stalled_" in h and h.endswith("_per_issue_active.ratio")
              and "not_issued" not in h]
    print(f"| # | kernel | us | DRAM R MB | DRAM W MB | TB/s | floor us at {tbs} | regs | occ theo / achieved % | "
          "L2 hit % | top stalls (warps per issue) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|")
    tot_t = tot_b = tot_f = 0.0
    for k, r in enumerate(data):
        t = get(r, "gpu__time_duration.sum") / 1e3
        rd, wr = get(r, "dram__bytes_read.sum"), get(r, "dram__bytes_write.sum")
        floor = (rd + wr) / (tbs * 1e12) * 1e6
        bw = (rd + wr) / (t * 1e-6) / 1e12 if t > 0 else 0.0
        st = sorted(((get(r, h), h.split("issue_stalled_")[1].split("_per_issue")[0]) for h in stalls), reverse=True)
        st = ", ".join(f"{n} {v:.1f}" for v, n in st[:3] if v == v and v > 0.05)
        occ = f"{get(r, 'sm__maximum_warps_per_active_cycle_pct'):.0f} / " \
              f"{get(r, 'sm__warps_active.avg.pct_of_peak_sustained_active'):.0f}"
        print(f"| {k} | {short(r[col['Kernel Name']])} | {t:.1f} | {rd / 1e6:.1f} | {wr / 1e6:.1f} | {bw:.2f} | "
              f"{floor:.1f} | {get(r, 'launch__registers_per_thread'):.0f} | {occ} | "
              f"{get(r, 'lts__t_sector_hit_rate.pct'):.0f} | {st} |")
        tot_t += t
        tot_b += rd + wr
        tot_f += floor
    print(f"| | sum | {tot_t:.1f} | | | {tot_b / (tot_t * 1e-6) / 1e12:.2f} | {tot_f:.1f} | | | | |")
    ld = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
    if ld not in col:
        return
    print()
    print("| # | kernel | DRAM % of peak | ld sectors / request | st sectors / request | L2 read miss MB (SM) | "
          "L2 write miss MB (SM) | DRAM R - L2 read miss MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for k, r in enumerate(data):
        lr = get(r, ld) / max(get(r, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"), 1)
        sr = get(r, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") / \
            max(get(r, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"), 1)
        rm = get(r, "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum") * 32 / 1e6
        wm = get(r, "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum") * 32 / 1e6
        print(f"| {k} | {short(r[col['Kernel Name']])} | "
              f"{get(r, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | {lr:.2f} | {sr:.2f} | "
              f"{rm:.1f} | {wm:.1f} | {get(r, 'dram__bytes_read.sum') / 1e6 - rm:.1f} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", default="benchmarks")
    p.add_argument("--opt", default="sgd,adam", help="sgd, adam: a training step; eval: an eval call after 5 SGD steps")
    p.add_argument("--variant", default="-1", help="dedup flags (eval: op _lookup_lab_eval's ways), or a list: one "
                   "profiled step per variant")
    p.add_argument("--table", help="print the table of this ncu CSV (--csv --page raw --print-units base)")
    p.add_argument("--tbs", type=float, default=4.27, help="DRAM bandwidth of the floor column, TB/s")
    a = p.parse_args()
    if a.table:
        table(a.table, a.tbs)
    else:
        steps(a)


if __name__ == "__main__":
    main()
