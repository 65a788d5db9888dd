#!/bin/bash
# hkv40 run 2 (issue 35; prepared for the next session, not run): the branch's product change (match16 by the
# zero-byte test, find_or_insert's constant rows by 16-byte stores) on its wheel: the GPU table tests first (the new
# digest test, the table, assign and lookup tests), then evict_bench of main's headers (eb_main, 82f6f403) and of the
# branch's (eb_lab, EBC=.) in alternating processes at loads 0.5 and 1, uniform: first pass and op totals per op, and
# checksums equal between the two trees. Pack: `WHL=1 EBC=. EBMAIN=1 bash pack.sh 2` (the wheel: bazel-bin of this
# worktree's head).
B=54
. .carry/hkv40/common.sh
. .carry/hkv40/setup.sh
run_tests 30 - "" tests/dynamicemb/test_table_digest_gpu.py tests/dynamicemb/test_table_gpu.py \
  tests/dynamicemb/test_table_assign_gpu.py tests/dynamicemb/test_lookup_ops_gpu.py
for r in 1 2; do
  [ $(left) -ge 9 ] || break
  timeout 8 $BIN/eb_main 26 20 3 - uniform 0.5,1 > $OUT/main_$r.txt 2>&1
  [ $(left) -ge 9 ] || break
  timeout 8 $EB 26 20 3 - uniform 0.5,1 > $OUT/branch_$r.txt 2>&1
done
echo "## DIGEST (tests; then per load and op: first pass / total us, main -> branch, median of the processes)"
digest_tests
python3 - $OUT <<'PY'
import glob, os, re, statistics, sys
out = sys.argv[1]
def read(tag):
    d = {}
    for p in sorted(glob.glob(os.path.join(out, tag + "_*.txt"))):
        load = "?"
        for line in open(p):
            m = re.match(r"filled: .*\(load ([0-9.]+)\)", line)
            if m:
                load = "%g" % round(float(m.group(1)), 2)
            f = line.split()
            if f and f[0] in ("find_or_insert", "insert_or_assign", "insert_and_evict", "assign") and "total" in f:
                g = lambda k: f[f.index(k) + 1] if k in f else "nan"
                e = d.setdefault((load, f[0]), {"first": [], "tot": [], "sig": set()})
                e["first"].append(float(g("first")))
                e["tot"].append(float(g("total")))
                e["sig"].add((g("table"), g("evicted")))
    return d
a, b = read("main"), read("branch")
for k in sorted(a):
    if k not in b:
        continue
    fa, fb = statistics.median(a[k]["first"]), statistics.median(b[k]["first"])
    ta, tb = statistics.median(a[k]["tot"]), statistics.median(b[k]["tot"])
    same = "ok" if a[k]["sig"] == b[k]["sig"] and len(a[k]["sig"]) == 1 else "DIFF"
    print("%s %s first %.1f -> %.1f (%+.1f %%) total %.1f -> %.1f %s" % (k[0], k[1][:16], fa, fb,
          100 * (fb / fa - 1), ta, tb, same))
PY
echo "total: $(elapsed) s"
