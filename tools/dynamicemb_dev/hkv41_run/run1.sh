#!/bin/bash
# hkv41 run 1 (issue 35): the first pass compiled for the default table (kQPlain) against the general instance.
# 1. GPU tests (test_table_digest_gpu.py, test_table_gpu.py, test_table_assign_gpu.py) on the branch's wheel.
# 2. evict_bench, 2^26 slots, 1M keys, loads 0.5 and 1, uniform: the branch (eb_lab; lab values: 0 = the product,
#    kQPlain; 256 = the general instance; q * 4096 with q = 4 / 8 its parts, 13 = kQPlain + the per-warp queue, 14 =
#    kQPlain + the staged block queue without the barrier) in one process, then main d7a8eec6 (eb_main). Checksums and
#    stats must equal between labs and trees.
# 3. ncu of the first passes (P / G, both loads, the three inserting ops): time, warp instructions, occupancy,
#    issue, stalls; then, if time is left, Zipf at 1.0 (P, G and P + the staged queue) and SASS source counters of
#    find_or_insert's first pass at 1.0 and 0.5 and its insert pass at 1.0 (P; 2^24 slots, 2^18 keys) by phase.
# Everything in $OUT/hkv41.tgz; a DIGEST of ~1.3 KB last.
B=54
. .carry/hkv41/common.sh
. .carry/hkv41/setup.sh  # (SITES=self: the branch's wheel in /tmp/site_hkv41)
run_tests 20 - "" tests/dynamicemb/test_table_digest_gpu.py tests/dynamicemb/test_table_gpu.py \
  tests/dynamicemb/test_table_assign_gpu.py
# 0 = product (kQPlain), 256 = general, 16384 = rounds, 32768 = all-HBM, 53248 = + warp queue, 57344 = + staged queue
V=0,256,16384,32768,53248,57344
eb lab 12 26 20 5 - uniform 0.5,1 - $V
echo "## main ($(elapsed) s)"
timeout 8 $BIN/eb_main 26 20 5 - uniform 0.5,1 - 0 > $OUT/main.txt 2>&1
# ncu of the first passes: per load (0.5, 1), op (fi, ia, ie), lab (P = 0, G = 256): 12 kernels
l=$(left)
if [ -n "$NCU" ] && [ $l -ge 10 ]; then
  M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_requests.sum,launch__registers_per_thread
  timeout $(( l - 3 < 14 ? l - 3 : 14 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main" \
    -c 12 --section WarpStateStats --metrics $M --csv --page raw $EB 26 20 1 ncu uniform 0.5,1 - 0,256 \
    > $OUT/ncu_first.csv 2> $OUT/ncu_first.err
  echo "## ncu first passes rc $? ($(elapsed) s)"
fi
[ $(left) -ge 8 ] && eb zipf 6 26 20 3 - zipf 1 - 0,256,57344
# SASS source counters (2^24 slots, 2^18 keys, lab 0 = kQPlain): find_or_insert's first and insert passes at 1.0,
# then its first pass at 0.5; each kernel's block of the source page (ncu lists a kernel's block twice) by phase.
l=$(left)
if [ -n "$NCU" ] && [ $l -ge 11 ]; then
  for ld in 1 0.5; do
    l=$(left); [ $l -ge 11 ] || break
    c=2 re="upsert_main|upsert_insert"; [ $ld = 0.5 ] && c=1 re="upsert_main"
    timeout $(( l - 5 )) $NCU --clock-control none --profile-from-start off -k "regex:$re" -c $c \
      --section SourceCounters --metrics smsp__inst_executed.sum,gpu__time_duration.sum -o $OUT/src$ld -f \
      $EB 24 18 1 ncu uniform $ld - 0 > $OUT/src${ld}_eb.txt 2>> $OUT/ncu_src.err
    echo "## ncu source $ld rc $? ($(elapsed) s)"
    timeout $(( $(left) > 5 ? $(left) - 4 : 1 )) $NCU --import $OUT/src$ld.ncu-rep --page source --csv \
      --print-source sass > $OUT/src$ld.csv 2>> $OUT/ncu_src.err
    rm -f $OUT/src$ld.ncu-rep
  done
  [ $(left) -ge 6 ] && gunzip -c $C/eb_lab_gi.sass.gz > /tmp/hkv41_gi.sass 2> /dev/null
  pend=$(awk '/^find_or_insert/ {for (i = 1; i < NF; ++i) if ($i == "pending") print $(i + 1)}' $OUT/src1_eb.txt |
    head -1)
  . $C/phases.sh 2> /dev/null
  # blocks of a source page: "index rows" per block; the insert pass is the largest block of src1.csv
  blocks() { python3 -c "import csv, sys; b = [0]
for r in csv.reader(open(sys.argv[1], errors='replace')):
    if r and r[0] == 'Address': b.append(0)
    elif len(b) > 1: b[-1] += 1
print(' '.join(str(x) for x in b[1:]))" $1 2> /dev/null; }
  bi=$(blocks $OUT/src1.csv); echo "src1 blocks: $bi" > $OUT/blocks.txt
  ins=$(echo $bi | tr ' ' '\n' | awk '{if ($1 > m) {m = $1; k = NR - 1}} END {print k + 0}')
  fp=upsert_main_kernelILi1ELi2ELi0ELi3ELi12E  # find_or_insert's kQPlain instance
  # (each only with the time for it and the digest left; otherwise the csvs come back for sass_phases.py here)
  [ $(left) -ge 6 ] && timeout 3 python3 $C/sass_phases.py /tmp/hkv41_gi.sass $OUT/src1.csv --kernel 0 --function $fp \
    --per 262144 $PH_FIRST > $OUT/phases_first1.txt 2>&1
  [ $(left) -ge 6 ] && timeout 3 python3 $C/sass_phases.py /tmp/hkv41_gi.sass $OUT/src1.csv --kernel $ins \
    --function upsert_insert_kernelILi1ELi2ELi0ELi2E --per ${pend:-1} > $OUT/phases_insert1.txt 2>&1
  [ -f $OUT/src0.5.csv ] && [ $(left) -ge 6 ] && timeout 3 python3 $C/sass_phases.py /tmp/hkv41_gi.sass \
    $OUT/src0.5.csv --kernel 0 --function $fp --per 262144 $PH_FIRST > $OUT/phases_first05.txt 2>&1
  gzip -1 -f $OUT/src*.csv
fi
tar czf $OUT/hkv41.tgz -C $OUT $(cd $OUT && ls | grep -v '\.tgz$') 2> /dev/null
# DIGEST (the most important last: the lead keeps the tail): the source-counter totals; ncu per load, op (fi / ia) and
# instance (P = product kQPlain, G = general): us / warp instructions per key / occupancy / issue / registers / top
# stalls; Zipf 1.0; per load and op: the first pass us of P and G, P and the parts against G in %, main -> P first
# pass and total us, checksums and stats equal across labs (ok) and with main (=); the tests.
echo "## DIGEST"
python3 - $OUT <<'PY'
import csv, os, re, sys
out = sys.argv[1]
sh = {"find_or_insert": "fi", "insert_or_assign": "ia", "insert_and_evict": "ie"}
for k, name in (("first05", "src fi 1st .5"), ("first1", "src fi 1st 1"), ("insert1", "src fi ins 1")):
    p = os.path.join(out, "phases_%s.txt" % k)
    if os.path.exists(p):
        print(name + ": " + open(p).readline().strip().replace(" warp instructions per", " wi/")[:80])
p = os.path.join(out, "ncu_first.csv")
if os.path.exists(p):
    lines = open(p).read().splitlines()
    st = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
    rows = list(csv.reader(lines[st[0]:])) if st else []
    if len(rows) > 2:
        h = rows[0]
        def v(r, k):
            try: return float(r[h.index(k)].replace(",", ""))
            except (ValueError, IndexError): return float("nan")
        unit = rows[1][h.index("gpu__time_duration.sum")] if "gpu__time_duration.sum" in h else ""
        us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit,
                                                                                             float("nan"))
        print("ncu 1st: us/winst per key/occ/issue/regs; stalls/issue")
        names = [(ld, op, q) for ld in ("0.5", "1") for op in ("fi", "ia", "ie") for q in ("P", "G")]
        for j, r in enumerate(rows[2:]):
            if j < len(names) and names[j][1] == "ie":
                continue
            stl = sorted(((v(r, c), c) for c in h if "issue_stalled" in c and c.endswith("per_issue_active.ratio")),
                         reverse=True)[:3]
            s = " ".join("%s %.1f" % (c.replace("smsp__average_warps_issue_stalled_", "")
                                       .replace("_per_issue_active.ratio", "")[:6], x) for x, c in stl)
            ld, op, q = names[j] if j < len(names) else ("?", "?", "?")
            print("%s %s %s %.0f/%.0f/%.0f/%.0f/%.0f %s" % (ld, op, q, v(r, "gpu__time_duration.sum") * us,
                  v(r, "smsp__inst_executed.sum") / 2 ** 20, v(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                  v(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"), v(r, "launch__registers_per_thread"), s))
def read(name):
    d, load = {}, "?"
    p = os.path.join(out, name + ".txt")
    if not os.path.exists(p):
        return d
    for line in open(p):
        m = re.match(r"filled: .*\(load ([0-9.]+)\)", line)
        if m:
            load = "%g" % round(float(m.group(1)), 2)
        f = line.split()
        if f and f[0] in sh and len(f) > 1 and f[1].startswith("L"):
            g = lambda k: f[f.index(k) + 1] if k in f else "?"
            d[(load, f[0], int(f[1][1:]))] = (float(g("first")), float(g("total")),
                                              (g("table"), g("evicted"), g("ins"), g("asg"), g("evi")))
    return d
lab, main, zipf = read("lab"), read("main"), read("zipf")
for op in sh:
    a, b, c = zipf.get(("1", op, 0)), zipf.get(("1", op, 256)), zipf.get(("1", op, 57344))
    if a and b and c:
        print("zipf1 %s P/G %.0f/%.0f %+.1f%% q14 %+.1f%% %s" % (sh[op], a[0], b[0], 100 * (a[0] / b[0] - 1),
              100 * (c[0] / b[0] - 1), "ok" if a[2] == b[2] == c[2] else "DIFF"))
print("1st us P(product) G(general)|% vs G: P q4 q8 q13 q14|main>P 1st, total|sig")
order = {"find_or_insert": 0, "insert_or_assign": 1, "insert_and_evict": 2}
for (load, op, q) in sorted((k for k in lab if k[2] == 256), key=lambda k: (k[0], order[k[1]])):
    g = lab[(load, op, 256)]
    pc = lambda x: "%+.1f" % (100 * (lab[(load, op, x)][0] / g[0] - 1)) if (load, op, x) in lab else "-"
    ok = all(lab[k][2] == g[2] for k in lab if k[:2] == (load, op))
    mm = main.get((load, op, 0))
    mt = "%.0f>%.0f %.0f>%.0f" % (mm[0], lab[(load, op, 0)][0], mm[1], lab[(load, op, 0)][1]) if mm else "-"
    same = "=" if mm and mm[2] == lab[(load, op, 0)][2] else "DIFF"
    print("%s %s %.0f %.0f|%s %s %s %s %s|%s|%s%s" % (load, sh[op], lab[(load, op, 0)][0], g[0], pc(0),
          pc(16384), pc(32768), pc(53248), pc(57344), mt, "ok" if ok else "LABDIFF", same))
PY
digest_tests | grep -E "passed|failed|skipped|rror|rc |^[.sFE]+" | tail -3 | cut -c1-150
echo "total: $(elapsed) s"
