"""Digest of steady_ab.py --json (with --timeline) for step39's runs: per optimizer and variant the steady step, the
host-ahead span / busy and its ratio to main's path ("-"); then main's mean step timeline against byte floors at
4.3 TB/s (bytes per kernel from earlier sessions' ncu of this step, docs/dynamicemb.md), the gaps between the main
stream's kernels, and how much of the side stream's CSR runs beside the gather. Usage: step39_digest.py steady.json [--brief] (--brief: without main's timeline table)"""

import json
import statistics
import sys

# DRAM bytes (MB) per kernel of one SGD step at NVIDIA's config (ncu, sessions 19 and 35; the update's from session
# 33's count: gradient 537 + rows 179 + 179 + CSR ~13)
MB = {"validate": 16.8, "dedup_clear": 0.0, "dedup_insert": 13.3, "dedup_count": 9.4, "dedup_number": 41.5 + 37.3,
      "dedup_resolve": 4.2, "sequence_kernel": 206.6 + 511.0, "seg_apply": 908.0}
RATE = 4.3e6  # MB per second


def short(n):
    n = n.split("(")[0].replace("void ", "").replace("dynamicemb::lookup::detail::", "")
    return n if len(n) < 40 else n[:37] + "..."


def main():
    d = json.load(open(sys.argv[1]))
    for opt, res in d.items():
        base = res.get("-")
        print(f"## {opt}: variant | steady | span | busy | span / main's")
        for v, r in res.items():
            st = statistics.median(r["steady"]) if r.get("steady") else float("nan")
            ratio = r["span"] / base["span"] if base else float("nan")
            print(f"  {v:>5} | {st:.4f} | {r['span']:.4f} | {r['busy']:.4f} | {ratio:.4f}")
        for v, r in res.items():
            tl = r.get("timeline") or []
            if not tl:
                continue
            main_tid = tl[0][3]
            mains = [(s, e, n) for s, e, n, t in tl if t == main_tid]
            sides = [(s, e, n) for s, e, n, t in tl if t != main_tid]
            key = {}
            for s, e, n in mains:
                for k in ("validate", "dedup_clear", "dedup_insert", "dedup_count", "dedup_number", "dedup_resolve",
                          "insert_kernel", "sequence_kernel", "seg_apply"):
                    if short(n).startswith(k) and k not in key:
                        key[k] = (s, e)
            print(f"# {opt} {v}: " + ", ".join(f"{k.replace('_kernel', '').replace('dedup_', 'd.')} {a:.1f}-{b:.1f}"
                                              for k, (a, b) in key.items()))
            if v != "-" or "--brief" in sys.argv:
                continue
            print(f"# {opt} main timeline (us): kernel | start | end | us | floor us at 4.3 TB/s | gap before")
            prev_end = None
            for s, e, n in mains:
                f = next((MB[k] for k in MB if k in n), None)
                if f is not None and "seg_apply" in n and opt.startswith("adam"):
                    f = 1652.0  # gradient 537 + [w | m | v] 538 + 538 + CSR
                fl = f"{f / RATE * 1e6:.1f}" if f is not None else "-"
                gap = f"{s - prev_end:+.1f}" if prev_end is not None else ""
                print(f"  {short(n)} | {s:.1f} | {e:.1f} | {e - s:.1f} | {fl} | {gap}")
                prev_end = e if prev_end is None else max(prev_end, e)
            if sides:
                s0, s1 = min(s for s, _, _ in sides), max(e for _, e, _ in sides)
                g = key.get("sequence_kernel")
                side_busy = sum(e - s for s, e, _ in sides)
                beside = sum(max(0.0, min(e, g[1]) - max(s, g[0])) for s, e, _ in sides) if g else 0.0
                print(f"# {opt} side stream: {s0:.1f}-{s1:.1f} us, ops busy {side_busy:.1f} us, of which beside the "
                      f"gather {beside:.1f} us ({len(sides)} ops)")


if __name__ == "__main__":
    main()
