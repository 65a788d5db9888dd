#!/bin/bash
# hash34 run 1 (issue 35, load 1.0): the lean eviction scan against main's scan, interleaved in one process
# (evict_bench, uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill, 5 reps): lab value 1 = main's scan
# under the dynamic schedule, 3 = the lean scan (eb_lab2, commit 2420658d: the scan alone) or the lean scan + the
# group counter without warp aggregation (eb_lab, 343e1bfd). Equal checksums = the same evictions (dupnew:
# duplicates of missing keys); load 0.5: nothing evicts. Then ncu of find_or_insert's insert pass L1 / L3 (eb_lab,
# 2^24 slots, 256K keys): warp instructions and time.
. .carry/hash34/common.sh
chmod +x $C/eb_lab2
eb2() { local name=$1 to=$2; shift 2; echo "## $name"; timeout $to $C/eb_lab2 "$@" 2>&1 | tee $OUT/$name.txt | grep -v "^keys"; }
eb2 scan_uniform_13 9 26 20 5 - uniform 1 - 1,3
eb2 scan_zipf_13 10 26 20 5 - zipf 1 - 1,3
eb uniform_13 9 26 20 5 - uniform 1 - 1,3
eb uniform_31 9 26 20 5 - uniform 1 - 3,1
eb zipf_13 10 26 20 5 - zipf 1 - 1,3
eb dupnew_13 9 26 20 5 - dupnew 1 - 1,3
eb half_13 8 26 20 3 - uniform 0.5 - 1,3
ncu_pass "upsert_insert_kernel" 2 1,3
digest scan_uniform_13 scan_zipf_13 uniform_13 uniform_31 zipf_13 dupnew_13 half_13
