"""fp8f20 run helper: the nvidia-smi log ($OUT/smi.csv: timestamp, SM MHz, C, W, throttle reasons, every 50 ms)
summarized per benchmark case (fp8_fwd_split.py prints "timed until <timestamp>" after each case): samples, SM clock
median / min / max, temperature, power, the throttle reasons seen. Usage: smi_digest.py SMI_CSV BENCH_LOG"""
import re
import statistics
import sys


def main():
    rows = []
    for line in open(sys.argv[1]):
        f = [x.strip() for x in line.split(",")]
        try:
            rows.append((f[0], float(f[1]), float(f[2]), float(f[3]), f[4] if len(f) > 4 else ""))
        except (ValueError, IndexError):
            continue
    ends = re.findall(r"\(case (\S+ \S+ \S+) timed until (\S+ \S+);", open(sys.argv[2]).read())
    print("| case (smi samples while timed) | n | SM MHz median | min | max | C | W | throttle reasons |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    start = ""
    for case, end in ends:
        sel = [r for r in rows if start < r[0] <= end]
        start = end
        if not sel:
            print(f"| {case} | 0 | - | - | - | - | - | - |")
            continue
        mhz = [r[1] for r in sel]
        print(f"| {case} | {len(sel)} | {statistics.median(mhz):.0f} | {min(mhz):.0f} | {max(mhz):.0f} | "
              f"{statistics.median(r[2] for r in sel):.0f} | {statistics.median(r[3] for r in sel):.0f} | "
              f"{' '.join(sorted(set(r[4] for r in sel)))} |")


if __name__ == "__main__":
    main()
