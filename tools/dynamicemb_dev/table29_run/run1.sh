#!/bin/bash
# table29 run 1 (issue 35, load 1.0): the upper bound of a per-bucket victim summary. evict_bench (uint64 / fp32 /
# LRU, 2^26 slots, 1M keys, 5 reps) from the lab tree, variants interleaved on the same snapshots and batches:
#   L0 = the product's insert pass (main's code), L4 = its eviction scan from a summary of the bucket's 8 least ranks
#   (built for every bucket before each op, untimed; its build time printed once) with main's prefetch of the whole
#   bucket, L5 = the same with the digest line and the 8 entries' score sectors prefetched only. Equal checksums =
#   the same evictions. Uniform, Zipf, uniform in reverse order; then ncu of find_or_insert's insert pass (2^24
#   slots, 256K keys; L0 / L4 / L5).
# (Rewritten onto common.sh after the run, the same commands; the script that ran is c012662a's.)
. .carry/table29/common.sh
eb uniform 10 26 20 5 - uniform 1 - 0,4,5
eb zipf 10 26 20 5 - zipf 1 - 0,4,5
eb uniform_rev 9 26 20 5 - uniform 1 - 5,4,0
ncu_pass upsert_insert_kernel 3 0,4,5
digest uniform zipf uniform_rev
