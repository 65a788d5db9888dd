"""Counts, in one kernel's SASS (cuobjdump -sass text of one function), the main loop's LDSM / HMMA / other
instructions per basic block and how far ahead of its first consumer each LDSM is issued (instructions and HMMAs
between them): fwd32's look at the warp pairs' fragment-load latency (issue 39).

Usage: sass_ldsm.py FILE.sass   (the text of one function, e.g. awk-cut from `cuobjdump -sass -arch sm_90a _C.so`)"""
import collections
import re
import sys


def parse(path):
    ins = []
    for line in open(path):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return ins


def regs(ops, width=1):
    out = set()
    for r in re.findall(r"\bR(\d+)\b", ops):
        out.add(int(r))
    return out


def main():
    ins = parse(sys.argv[1])
    ops = [t for _, t in ins]
    print(f"{len(ops)} instructions, {sum('HMMA' in t for t in ops)} HMMA, {sum('LDSM' in t for t in ops)} LDSM")
    # blocks of straight code between branches / barriers with HMMA in them
    dist, hdist = [], []
    for i, t in enumerate(ops):
        m = re.search(r"LDSM\S*\s+R(\d+),", t)
        if not m:
            continue
        base = int(m.group(1))
        width = 4 if ".x4" in t.lower() or "M88.4" in t else (2 if "M88.2" in t else 1)
        dst = set(range(base, base + width))
        h = 0
        for j in range(i + 1, len(ops)):
            u = ops[j]
            body = u.split(None, 1)[1] if " " in u else ""
            if u.startswith("@"):
                body = u.split(None, 2)[2] if len(u.split(None, 2)) > 2 else ""
            srcs = body.split(",", 1)[1] if "," in body else ""
            if "HMMA" in u:
                srcregs = regs(srcs)
                if dst & srcregs:
                    dist.append(j - i)
                    hdist.append(h)
                    break
                h += 1
            elif dst & regs(srcs):
                dist.append(j - i)
                hdist.append(-1)
                break
            if "BRA" in u or "BAR" in u or "EXIT" in u:
                break
    c = collections.Counter(hdist)
    print("LDSM -> first consumer: HMMAs between (count):", sorted(c.items()))
    print("instructions between: median", sorted(dist)[len(dist) // 2] if dist else None, "min", min(dist or [0]))
    # opcode mix
    mix = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in ops)
    print("mix:", ", ".join(f"{k} {v}" for k, v in mix.most_common(18)))


if __name__ == "__main__":
    main()
