#!/bin/bash
# hash37 run 3 (issue 35): the branch's wheel, table_ab.py (hash_table.py's fill and timer; 2^26 slots, 1M keys, fp32
# rows) main's path (`pdl+wide`, _upsert_lab bits 2-4 = 3) against the default (`pdl`), interleaved in one process:
# dims 8 / 32 / 64 at load 1.0 uniform, then loads 0.5 / 0.75 at dim 32, then Zipf at load 1.0 dim 32, each while time
# is left.
B=53
. .carry/hash37/common.sh
. .carry/hash37/setup.sh
tab() {
  echo "## table_ab $* ($(( $(date +%s) - t0 )) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) + 2 )) python3 tools/dynamicemb_dev/table_ab.py \
    --variants pdl+wide pdl --reps 3 "$@" 2>&1 | tee -a $OUT/table_ab.txt | grep "^|" | cut -c1-150)
}
tab --lambdas 1.0 --dists uniform --dims 32 8 64
[ $(left) -gt 8 ] && tab --lambdas 0.75 0.5 --dists uniform --dims 32
[ $(left) -gt 6 ] && tab --lambdas 1.0 --dists zipf --dims 32
echo "total: $(( $(date +%s) - t0 )) s"
