#!/bin/bash
# hkv41 run 2 (prepared; for a second slot): the product-level comparison the RESULTS row uses, benchmarks/hash_table.py
# (dim 32, 64M slots, HKV's fill, 1M keys, uniform, loads 0.5 and 1.0, 3 reps; device time) with main43's wheel and
# the branch's in alternating processes (main, branch, main, branch while time lasts); DIGEST: per load and op the
# median billion KV/s of main -> branch. Pack: `NVDIS=... bash pack.sh 2` (the same carry as run 1 plus this script).
B=54
export SITES="main self"
. .carry/hkv41/common.sh
. .carry/hkv41/setup.sh
HT="benchmarks/hash_table.py --dims 32 --capacity 67108864 --reps 3 --fill hkv --lambdas 0.5 1.0 --dists uniform \
  --no-plot"
r=0
while [ $(left) -ge 14 ] && [ $r -lt 4 ]; do
  for s in main hkv41; do
    [ $(left) -ge 12 ] || break
    (cd $C/tree && PYTHONPATH=/tmp/site_$s timeout $(( $(left) - 2 )) python3 -P $HT > $OUT/ht_${s}_$r.txt 2>&1)
    echo "## hash_table $s $r rc $? ($(elapsed) s)"
  done
  r=$(( r + 1 ))
done
tar czf $OUT/hkv41.tgz -C $OUT $(cd $OUT && ls | grep -v '\.tgz$') 2> /dev/null
echo "## DIGEST (billion KV/s, median over processes: main -> branch)"
python3 - $OUT <<'PY'
import glob, os, re, statistics, sys
out = sys.argv[1]
def read(tag):
    d = {}
    for p in glob.glob(os.path.join(out, "ht_%s_*.txt" % tag)):
        for line in open(p):
            m = re.match(r"dim 32 capacity \d+ lambda ([0-9.]+) uniform .*?\): (.*)", line)
            if m:
                for kv in m.group(2).split(", "):
                    k, v = kv.split()
                    d.setdefault((m.group(1), k), []).append(float(v))
    return d
a, b = read("main"), read("hkv41")
for k in sorted(a):
    if k in b:
        x, y = statistics.median(a[k]), statistics.median(b[k])
        print("%s %s %.3f -> %.3f (%+.1f %%) n %d/%d" % (k[0], k[1][:16], x, y, 100 * (y / x - 1), len(a[k]), len(b[k])))
PY
echo "total: $(elapsed) s"
