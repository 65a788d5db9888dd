#!/bin/bash
# hkv40 run 1 (issue 35): the first pass (upsert_main_kernel) at loads 0.5 / 0.75 / 1.0, uniform and Zipf keys,
# main's path (lab 0) against variants in one process on the same snapshots and batches (evict_bench lab values q *
# 4096, q's bits: 1 = per-warp queue, no block barrier; 2 = half-size blocks; 4 = the probe's digest matches by a
# zero-byte test, match16_zb; 8 = find_or_insert's constant initial rows by 16-byte stores (the copiers' kernel is
# the same code: a noise check); run: q = 0, 1, 2, 4, 8, 12, 15). The test: checksums of the
# table and of the evicted pairs, and the stats (ins / asg / evi) equal to lab 0's on every op and load. Then ncu of
# the first passes at load 0.5 (time, instructions, occupancy, issue, stalls).
B=54
. .carry/hkv40/common.sh
V=0,4096,8192,16384,32768,49152,61440
eb uniform 16 26 20 7 - uniform 0.5,0.75,1 - $V
eb zipf 14 26 20 5 - zipf 0.5,0.75,1 - $V
first_digest() {
  echo "## first pass us (ratio to lab 0), total us, pending, stats, checksum match with lab 0"
  local f
  for f in "$@"; do
    echo "# $f"
    awk '/^(find_or_insert|insert_or_assign|insert_and_evict|assign) / {
           fp = ""; for (i = 1; i < NF; ++i) if ($i == "first") fp = $(i + 1)
           for (i = 1; i < NF; ++i) { if ($i == "table") tb = $(i + 1); if ($i == "evicted") ev = $(i + 1);
                                      if ($i == "pending") pd = $(i + 1); if ($i == "ins") ins = $(i + 1);
                                      if ($i == "asg") asg = $(i + 1); if ($i == "evi") evi = $(i + 1) }
           sig = tb "/" ev "/" ins "/" asg "/" evi
           if (!($1 in base)) { base[$1] = fp; bsig[$1] = sig }
           printf "%s %s first %s (%.3f) tot %s pend %s %s\n", substr($1, 1, 16), $2, fp,
                  (base[$1] > 0 ? fp / base[$1] : 0), $4, pd, (sig == bsig[$1] ? "same" : "DIFF " sig) }
         /^filled/ { delete base; delete bsig; print substr($0, 1, 62) }' $OUT/$f.txt
  done
  echo "total: $(elapsed) s"
}
first_digest uniform zipf > $OUT/digest_full.txt
echo "## eb done ($(elapsed) s)"
l=$(left)
if [ -n "$NCU" ] && [ $l -ge 10 ]; then
  M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_requests.sum
  c=14; [ $l -lt 24 ] && c=7  # (short of time: find_or_insert's only)
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main" -c $c \
    --section WarpStateStats --metrics $M --csv --page raw $EB 26 20 1 ncu uniform 0.5 - $V \
    > $OUT/ncu_first.csv 2> $OUT/ncu_first.err
  echo "## ncu first pass load 0.5 (find_or_insert x7 labs, insert_or_assign x7) rc $? ($(elapsed) s)"
  ncu_table $OUT/ncu_first.csv ab > $OUT/ncu_first.txt
fi
l=$(left)
# Last, if time is left: ncu source counters (SASS) of find_or_insert's first pass at load 0.5, lab 0 and lab 61440
# (2^24 slots, 2^18 keys), for sass_phases.py with this carry's eb_lab (-lineinfo): warp instructions by phase.
if [ -n "$NCU" ] && [ $l -ge 12 ]; then
  timeout $(( l - 5 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main" -c 2 \
    --section SourceCounters --metrics smsp__inst_executed.sum,gpu__time_duration.sum \
    -o $OUT/src -f $EB 24 18 1 ncu uniform 0.5 - 0,61440 > $OUT/ncu_src.log 2>&1
  echo "## ncu source rc $? ($(elapsed) s)"
  timeout $(( $(left) + 1 )) $NCU --import $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/src.csv \
    2>> $OUT/ncu_src.log
  echo "## source export rc $? ($(elapsed) s)"
  gzip -f $OUT/src.csv
  rm -f $OUT/src.ncu-rep
fi
# DIGEST (short): per key set (u / z), load, op (fi find_or_insert, ia insert_or_assign, ie insert_and_evict): lab 0's
# first pass / op total in us, then the first pass's change in % against lab 0 for q = 1 2 4 8 12 15; "ok" when
# every variant's table / evicted checksums and ins / asg / evi stats equal lab 0's, else the q's that differ. Then
# ncu at load 0.5: per q, first pass us, warp instructions per key, occupancy %, issue %, stalls per issue
# (barrier, long scoreboard).
python3 - $OUT <<'PY'
import csv, os, re, sys
out = sys.argv[1]
short = {"find_or_insert": "fi", "insert_or_assign": "ia", "insert_and_evict": "ie"}
print("## DIGEST first pass: q0 first/total us; % vs q0 of q1 q2 q4 q8 q12 q15; checks")
for ks in ("uniform", "zipf"):
    p = os.path.join(out, ks + ".txt")
    if not os.path.exists(p):
        print(ks, "missing"); continue
    load, rows = "?", {}
    def flush():
        for op in ("find_or_insert", "insert_or_assign", "insert_and_evict"):
            r = rows.get(op)
            if not r or 0 not in r: continue
            b = r[0]
            rat = " ".join("%+.1f" % (100 * (r[q]["first"] / b["first"] - 1)) if q in r and b["first"]
                           else "-"
                           for q in (1, 2, 4, 8, 12, 15))
            bad = [str(q) for q in r if r[q]["sig"] != b["sig"]]
            print("%s%s %s %.0f/%.0f %s %s" % (ks[0], load.lstrip("0"), short[op], b["first"], b["tot"],
                                            rat, "ok" if not bad else "D:" + ",".join(bad)))
    for line in open(p):
        m = re.match(r"filled: .*\(load ([0-9.]+)\)", line)
        if m:
            if rows: flush()
            load, rows = "%g" % round(float(m.group(1)), 2), {}
            continue
        f = line.split()
        if not f or f[0] not in ("find_or_insert", "insert_or_assign", "insert_and_evict") or not f[1].startswith("L"):
            continue
        q = int(f[1][1:]) // 4096
        g = lambda k: f[f.index(k) + 1] if k in f else "?"
        rows.setdefault(f[0], {})[q] = {"first": float(g("first")), "tot": float(g("total")),
                                        "sig": (g("table"), g("evicted"), g("ins"), g("asg"), g("evi"))}
    if rows: flush()
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
        qs = (0, 1, 2, 4, 8, 12, 15)
        unit = rows[1][h.index("gpu__time_duration.sum")] if "gpu__time_duration.sum" in h else ""
        us = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, float("nan"))
        print("## ncu 0.5 per q: fi, ia: us/winst per key/occ%/issue%/barrier stall")
        def cell(r):
            return "%.0f/%.0f/%.0f/%.0f/%.1f" % (
                v(r, "gpu__time_duration.sum") * us, v(r, "smsp__inst_executed.sum") / 2 ** 20,
                v(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                v(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
                v(r, "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"))
        rs = rows[2:]
        for j, q in enumerate(qs):
            print("q%d %s %s" % (q, cell(rs[j]) if j < len(rs) else "-", cell(rs[j + 7]) if j + 7 < len(rs) else "-"))
PY
gzip -f $OUT/ncu_first.csv 2>/dev/null
echo "total: $(elapsed) s"
