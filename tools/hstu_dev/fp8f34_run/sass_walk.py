"""Counts the instructions one consumer warp executes per steady unmasked KV tile of an FP8 forward kernel
(issue 36, session 31; lab script), from `cuobjdump -sass` text of one kernel: the executed path from the loop's
label to its back branch, and an opcode histogram.

    python3 sass_walk.py KERNEL.sass [--taken HEX,...] [--not-taken-first] [--list]

KERNEL.sass: lines "ADDR TEXT" (ADDR hex, no 0x), e.g. from
    cuobjdump -sass x.cubin | grep -E '^\\s+/\\*[0-9a-f]{4,}\\*/' | sed -E 's@^\\s+/\\*([0-9a-f]+)\\*/\\s+@\\1 @;s@\\s*;.*@@'
(a single-kernel TU: nvcc -cubin -gencode=arch=compute_90a,code=sm_90a with the build's flags, ~3 s; cuobjdump and
nvdisasm from PyPI's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels). The loop is the one holding the second
pingpong `BAR.SYNC.DEFER_BLOCKING R.., 0x100`; taken by default: the branch to that sync (no output rescale) and the
first branch after the S wait (`DEPBAR.LE gsb0, 0x1`: the 192-key tiles' index test jumps to the unmasked path;
--not-taken-first for kernels whose first branch there leads to the masked path, e.g. the 128- / 64-key tiles);
--taken adds branch addresses; other conditional branches fall through (waits' retry loops live past the loop).
Session 31's counts (nvcc 13.0, main 39ee30ed): D128 192-key 569, D128 128-key 439, D256 64-key 265, D64 426.
"""
import argparse
import re
from collections import Counter

BRA = re.compile(r"(@!?U?P\w+\s+)?BRA\s+(?:U?!?P\w+,\s*)?(0x[0-9a-f]+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sass")
    ap.add_argument("--taken", default="")
    ap.add_argument("--not-taken-first", action="store_true")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    lines = [ln.split(" ", 1) for ln in open(args.sass).read().splitlines() if " " in ln]
    addr = [int(a, 16) for a, _ in lines]
    index = {a: i for i, a in enumerate(addr)}
    syncs = [i for i, (_, t) in enumerate(lines) if t.startswith("BAR.SYNC.DEFER_BLOCKING R") and "0x100" in t]
    s2 = syncs[1]
    for i in range(s2, len(lines)):
        m = BRA.match(lines[i][1])
        if m and m.group(1) and int(m.group(2), 16) < addr[s2]:
            back, head = addr[i], int(m.group(2), 16)
            break
    taken = {int(x, 16) for x in args.taken.split(",") if x}
    for i in range(s2, 0, -1):
        m = BRA.search(lines[i][1])
        if m and int(m.group(2), 16) == addr[s2]:
            taken.add(addr[i])
            break
    dep = next(i for i in range(s2, len(lines)) if "DEPBAR.LE gsb0, 0x1" in lines[i][1])
    first = next(i for i in range(dep, len(lines)) if BRA.match(lines[i][1]) and BRA.match(lines[i][1]).group(1))
    if not args.not_taken_first:
        taken.add(addr[first])
    i, path = index[head], []
    while True:
        a, t = addr[i], lines[i][1]
        path.append((a, t))
        if a == back or len(path) > 5000:
            break
        m = BRA.match(t)
        if m and (m.group(1) is None or a in taken):
            i = index[int(m.group(2), 16)]
            continue
        i += 1
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for _, t in path)
    print(f"loop {head:#x}..{back:#x}, taken {sorted(hex(x) for x in taken)}")
    print(len(path), "executed:", " ".join(f"{k} {v}" for k, v in ops.most_common()))
    if args.list:
        for a, t in path:
            print(f"{a:#07x} {t}")


if __name__ == "__main__":
    main()
