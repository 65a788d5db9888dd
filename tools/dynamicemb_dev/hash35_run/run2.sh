#!/bin/bash
# hash35 run 2 (issue 35, load 1.0; run 1 as packed did not run: its binary was missing from the carry).
# evict_bench (uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill), insert-pass lab values interleaved in
# one process: 1 = main's path, 3 = the eviction's bucket-lock CAS and victim exchange relaxed (no acquire: no L1
# invalidation per evicting key), 4 = 3 + the first pass's hit key loads and hit-lock CASes relaxed, 5 = main's path +
# insert_and_evict's victim row prefetched into L2 beside its exchange. Equal checksums = the same evictions. Then the
# SASS's CCTL / MEMBAR / atomic counts of the upsert kernels, and ncu of main's upsert kernels (all three inserting
# ops + assign, 2^24 slots, 256K keys): DRAM / L2 bytes by kind, for the bytes per key against the floor.
. .carry/hash35/common.sh
eb uniform_1345 12 26 20 5 - uniform 1 - 1,3,4,5
eb zipf_134 10 26 20 3 - zipf 1 - 1,3,4
eb dupnew_1345 10 26 20 3 - dupnew 1 - 1,3,4,5
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$CO" ]; then
  timeout 5 $CO -sass $C/eb_lab > $OUT/sass.txt 2>/dev/null
  python3 - $OUT/sass.txt <<'PY' || true
import re, sys
cur, cnt = None, {}
for l in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", l)
    if m:
        cur = m.group(1); cnt[cur] = {}; continue
    if cur and re.search(r"/\*[0-9a-f]{4}\*/", l):
        for op in ("CCTL", "MEMBAR", "ATOMG", "LDL", "STL"):
            if re.search(r"\b" + op + r"\b", l) or re.search(r"\b" + op + r"\.", l):
                cnt[cur][op] = cnt[cur].get(op, 0) + 1
        cnt[cur]["all"] = cnt[cur].get("all", 0) + 1
for f, c in cnt.items():
    if "insert" in f or "upsert_main" in f:
        print(f[:72], c)
PY
  gzip -f $OUT/sass.txt
fi
ncu_mem "upsert_" 8 1
digest uniform_1345 zipf_134 dupnew_1345
