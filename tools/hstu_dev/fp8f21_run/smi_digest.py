"""fp8f21 run helper: the nvidia-smi log ($OUT/smi.csv every 50 ms: timestamp, SM MHz, C, W (1 s average), W
instant where this nvidia-smi has it, throttle reasons; the fields named in smi.err's first line) summarized per
benchmark case (fp8_fwd_split.py's "timed until <timestamp>"), per single sustained window ("sustain ... from A
until B") and per row of the --fwd-vars sustained tables ("| variant | ms | TFLOP/s | ratio | A / M - B (n calls)
|": the samples from M to B): SM clock median / min / max, temperature, power, the throttle reasons seen (0x4:
software power cap), and for the tables the energy per call (W x ms; instant power where logged) and the SM cycles
per call (MHz x ms: the kernel's cycles apart from the clock).
Usage: smi_digest.py SMI_CSV BENCH_LOG"""
import os
import re
import statistics
import sys


def load(path):
    fields = ["timestamp", "clocks.sm", "temperature.gpu", "power.draw"]
    err = os.path.join(os.path.dirname(path), "smi.err")
    if os.path.exists(err):
        first = open(err).readline()
        if first.startswith("smi fields: "):
            fields = first[len("smi fields: "):].strip().split(",")
    inst = fields.index("power.draw.instant") if "power.draw.instant" in fields else None
    why = len(fields) - 1 if "reasons" in fields[-1] else None
    rows = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        try:
            rows.append(dict(t=f[0], mhz=float(f[1]), c=float(f[2]), w=float(f[3]),
                             wi=float(f[inst]) if inst is not None else None,
                             why=f[why] if why is not None and why < len(f) else ""))
        except (ValueError, IndexError):
            continue
    return rows


def stats(sel):
    if not sel:
        return None
    wi = [r["wi"] for r in sel if r["wi"] is not None]
    return dict(n=len(sel), mhz=statistics.median(r["mhz"] for r in sel), lo=min(r["mhz"] for r in sel),
                hi=max(r["mhz"] for r in sel), c=statistics.median(r["c"] for r in sel),
                w=statistics.median(r["w"] for r in sel), wi=statistics.median(wi) if wi else None,
                why=" ".join(sorted(set(r["why"] for r in sel))))


def fmt(s):
    if s is None:
        return "0 | - | - | - | - | - | - | -"
    wi = f"{s['wi']:.0f}" if s["wi"] is not None else "-"
    return (f"{s['n']} | {s['mhz']:.0f} | {s['lo']:.0f} | {s['hi']:.0f} | {s['c']:.0f} | {s['w']:.0f} | {wi} | "
            f"{s['why']}")


def main():
    rows = load(sys.argv[1])
    log = open(sys.argv[2]).read()
    day = rows[0]["t"][:11] if rows else ""
    print("| case (smi samples while timed) | n | SM MHz median | min | max | C | W (1 s) | W instant | reasons |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    m = re.search(r"\(process start (\S+ \S+)\)", log)
    start = m.group(1) if m else ""
    for case, end in re.findall(r"\(case (\S+ \S+ \S+) timed until (\S+ \S+);", log):
        print(f"| {case} | " + fmt(stats([r for r in rows if start < r["t"] <= end])) + " |")
        start = end
    for case, a, b, tf in re.findall(r"\(sustain (\S+ \S+ \S+) from (\S+ \S+) until (\S+ \S+): .*?([\d.]+) TFLOP/s\)",
                                     log):
        print(f"| sustained {case} ({tf} TFLOP/s) | " + fmt(stats([r for r in rows if a <= r["t"] <= b])) + " |")
    for block in re.split(r"\n(?=sustained )", log)[1:]:
        print("\n" + block.splitlines()[0])
        print("| variant | TFLOP/s | / default | n | SM MHz median | min | max | C | W (1 s) | W instant | reasons | "
              "J per call | M SM cycles per call |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for line in block.splitlines()[3:]:
            f = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(f) < 5:
                break
            mm = re.match(r"(\S+) / (\S+) - (\S+)", f[4])
            if not mm:
                continue
            ms = float(f[1])
            s = stats([r for r in rows if day + mm.group(2) <= r["t"] <= day + mm.group(3)])
            j = cyc = "-"
            if s is not None:
                w = s["wi"] if s["wi"] is not None else s["w"]
                j, cyc = f"{w * ms / 1e3:.3f}", f"{s['mhz'] * ms / 1e3:.2f}"
            print(f"| {f[0]} | {f[2]} | {f[3]} | " + fmt(s) + f" | {j} | {cyc} |")


if __name__ == "__main__":
    main()
