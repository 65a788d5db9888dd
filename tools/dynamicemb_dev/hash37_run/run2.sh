#!/bin/bash
# hash37 run 2 (issue 35). Run 1 (call 1): scan_bucket_wide1 read group 1's scores from the next bucket (an index 64
# slots off): other victims (checksums differed) and DRAM misses; fixed. Here evict_bench of the fixed lab tree (the
# early fill's kernel with one fill site: run 1's ncu showed its instruction fetch stalls, no_instruction 6.5 per issue
# against 1.6), lab values 3 (main's wide scan) / 4 (one-round scan) / 5 (+ staged rows) / 6 (+ early fill) / 7 (+
# entries one group ahead) interleaved in one process, uniform / Zipf / dupnew / loads 0.75 and 1; then ncu of
# find_or_insert's insert passes at 3-7: units and stalls (ncu_units), requests and sectors (ncu_raw).
B=53
. .carry/hash37/common.sh
eb uniform 11 26 20 5 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 3 - zipf 1 - 3,4,5,6,7
eb dupnew 8 26 20 3 - dupnew 1 - 3,4,5,6,7
eb loads 9 26 20 3 - uniform 0.75,1 - 3,4,5,6,7
digest uniform zipf dupnew loads
ncu_units units 3,4,5,6,7 5
ncu_raw raw 3,4,5,6,7 5
echo "total: $(( $(date +%s) - t0 )) s"
