"""fp8b27 run helper: the nvidia-smi log ($OUT/smi.csv every 50 ms; fields named in smi.err's first line: timestamp,
SM MHz, C, W (1 s average), W instant where this nvidia-smi has it, throttle reasons) beside clock_split.py's calls
($OUT/calls_<case>.csv): per case, bins of --bin seconds from the window's start: calls, median event ms and main
kernel ms, the smi samples' median SM MHz / W / W instant / reasons, and the main kernel's SM cycles per call (ms x
MHz: constant when only the clock moves). Then the burst (calls 0-2) and sustained (last 0.5 s) rows with the same.
Usage: smi_join.py OUT_DIR [--bin 0.5]"""
import csv
import datetime
import glob
import os
import statistics
import sys


def ts(s):
    return datetime.datetime.strptime(s.strip(), "%Y/%m/%d %H:%M:%S.%f")


def load_smi(out):
    fields = ["timestamp", "clocks.sm", "temperature.gpu", "power.draw"]
    err = os.path.join(out, "smi.err")
    if os.path.exists(err):
        first = open(err).readline()
        if first.startswith("smi fields: "):
            fields = first[len("smi fields: "):].strip().split(",")
    inst = fields.index("power.draw.instant") if "power.draw.instant" in fields else None
    why = len(fields) - 1 if "reasons" in fields[-1] else None
    rows = []
    path = os.path.join(out, "smi.csv")
    for line in open(path) if os.path.exists(path) else []:
        f = [x.strip() for x in line.split(",")]
        try:
            rows.append(dict(t=ts(f[0]), mhz=float(f[1]), c=float(f[2]), w=float(f[3]),
                             wi=float(f[inst]) if inst is not None else None,
                             why=f[why] if why is not None and why < len(f) else ""))
        except (ValueError, IndexError):
            continue
    return rows


def smi_cells(smi, a, b):
    sel = [r for r in smi if a <= r["t"] <= b]
    if not sel:
        return None, "0 | - | - | - | - | -"
    mhz = statistics.median(r["mhz"] for r in sel)
    wi = [r["wi"] for r in sel if r["wi"] is not None]
    return mhz, (f"{len(sel)} | {mhz:.0f} ({min(r['mhz'] for r in sel):.0f}-{max(r['mhz'] for r in sel):.0f}) | "
                 f"{statistics.median(r['c'] for r in sel):.0f} | {statistics.median(r['w'] for r in sel):.0f} | "
                 f"{statistics.median(wi):.0f}" if wi else "-") + \
        f" | {' '.join(sorted(set(r['why'] for r in sel)))}"


def cycles(main_ms, event_ms, mhz):
    """M SM cycles per call of the main kernel (of the whole call, marked *, where no kernel times were kept)."""
    if not mhz:
        return "-"
    return f"{main_ms * mhz / 1e3:.2f}" if main_ms > 0 else f"{event_ms * mhz / 1e3:.2f}*"


def main():
    out = sys.argv[1]
    width = float(sys.argv[sys.argv.index("--bin") + 1]) if "--bin" in sys.argv else 0.5
    smi = load_smi(out)
    print(f"(smi samples: {len(smi)})")
    for path in sorted(glob.glob(os.path.join(out, "calls_*.csv"))):
        rows = list(csv.DictReader(open(path)))
        if not rows:
            continue
        name = os.path.basename(path)[6:-4]
        ends = [ts(r["t_end"]) for r in rows]
        ev = [float(r["event_ms"]) for r in rows]
        main_ms = [float(r.get("main_ms") or 0) for r in rows]
        starts = [e - datetime.timedelta(milliseconds=x) for e, x in zip(ends, ev)]
        t0 = starts[0]
        print(f"\n#### {name}: {len(rows)} calls; bins of {width} s from the first call's start "
              "(M cycles = main kernel ms x SM MHz / 1e3)")
        print("| bin s | calls | event ms | main ms | smi n | SM MHz (min-max) | C | W (1 s) | W instant | reasons | "
              "M cycles (main) |")
        print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|")
        b = 0
        while t0 + datetime.timedelta(seconds=b * width) <= ends[-1]:
            a_, b_ = t0 + datetime.timedelta(seconds=b * width), t0 + datetime.timedelta(seconds=(b + 1) * width)
            idx = [i for i in range(len(rows)) if a_ <= ends[i] < b_]
            b += 1
            if not idx:
                continue
            mhz, cells = smi_cells(smi, a_, b_)
            mm = statistics.median(main_ms[i] for i in idx)
            cyc = cycles(mm, statistics.median(ev[i] for i in idx), mhz)
            print(f"| {(b - 1) * width:.1f} | {len(idx)} | {statistics.median(ev[i] for i in idx):.3f} | {mm:.3f} | "
                  f"{cells} | {cyc} |")
        last = [i for i in range(len(rows)) if (ends[-1] - ends[i]).total_seconds() <= 0.5]
        for label, idx in (("burst (calls 0-2)", [0, 1, 2][:len(rows)]), ("sustained (last 0.5 s)", last)):
            mhz, cells = smi_cells(smi, starts[idx[0]] - datetime.timedelta(milliseconds=60), ends[idx[-1]])
            mm = statistics.median(main_ms[i] for i in idx)
            cyc = cycles(mm, statistics.median(ev[i] for i in idx), mhz)
            print(f"| {label} | {len(idx)} | {statistics.median(ev[i] for i in idx):.3f} | {mm:.3f} | {cells} | "
                  f"{cyc} |")


if __name__ == "__main__":
    main()
