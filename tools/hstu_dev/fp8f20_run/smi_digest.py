"""fp8f20 run helper: the nvidia-smi log ($OUT/smi.csv: timestamp, SM MHz, C, W, throttle reasons, every 50 ms)
summarized per benchmark case (fp8_fwd_split.py prints "timed until <timestamp>" after each case; the first case's
window starts at its "process start") and per sustained window ("sustain ... from <timestamp> until <timestamp>: ... TFLOP/s"):
samples, SM clock median / min / max, temperature, power, the throttle reasons seen (0x4: software power cap).
Usage: smi_digest.py SMI_CSV BENCH_LOG"""
import re
import statistics
import sys


def row(name, sel, extra=""):
    if not sel:
        return f"| {name} | 0 | - | - | - | - | - | - |{extra}"
    mhz = [r[1] for r in sel]
    return (f"| {name} | {len(sel)} | {statistics.median(mhz):.0f} | {min(mhz):.0f} | {max(mhz):.0f} | "
            f"{statistics.median(r[2] for r in sel):.0f} | {statistics.median(r[3] for r in sel):.0f} | "
            f"{' '.join(sorted(set(r[4] for r in sel)))} |{extra}")


def main():
    rows = []
    for line in open(sys.argv[1]):
        f = [x.strip() for x in line.split(",")]
        try:
            rows.append((f[0], float(f[1]), float(f[2]), float(f[3]), f[4] if len(f) > 4 else ""))
        except (ValueError, IndexError):
            continue
    log = open(sys.argv[2]).read()
    print("| case (smi samples while timed) | n | SM MHz median | min | max | C | W | throttle reasons |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    m = re.search(r"\(process start (\S+ \S+)\)", log)
    start = m.group(1) if m else ""
    for case, end in re.findall(r"\(case (\S+ \S+ \S+) timed until (\S+ \S+);", log):
        print(row(case, [r for r in rows if start < r[0] <= end]))
        start = end
    sus = re.findall(r"\(sustain (\S+ \S+ \S+) from (\S+ \S+) until (\S+ \S+): .*?([\d.]+) TFLOP/s\)", log)
    if sus:
        print("\n| sustained window | n | SM MHz median | min | max | C | W | throttle reasons | TFLOP/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
        for case, a, b, tf in sus:
            print(row(case, [r for r in rows if a <= r[0] <= b], f" {tf} |"))


if __name__ == "__main__":
    main()
