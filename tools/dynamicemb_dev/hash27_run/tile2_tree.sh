#!/bin/bash
# A lab copy of the table kernels with two lanes per key (kTile = 2; kMaxBucket = 128 so that a lane's `look` mask
# of 4 chunks x 16 slots still fits 64 bits), for evict_bench only: the product keeps 4 lanes (probe.cuh).
# Usage: tile2_tree.sh SRC_TREE DEST  (DEST gets dynamicemb/csrc/table, common, benchmarks' harness, evict_bench.cu)
set -e
S=$1; D=$2
rm -rf "$D" && mkdir -p "$D"
(cd "$S" && tar cf - dynamicemb/csrc/table common benchmarks/table_timing_harness.cuh tools/dynamicemb_dev/evict_bench.cu) |
  (cd "$D" && tar xf -)
sed -i 's/^constexpr int kTile = 4;/constexpr int kTile = 2;  \/\/ lab copy: two lanes per key/;
        s/^constexpr int kMaxBucket = 256;/constexpr int kMaxBucket = 128;  \/\/ lab copy/' "$D/dynamicemb/csrc/table/probe.cuh"
grep -q "^constexpr int kTile = 2;" "$D/dynamicemb/csrc/table/probe.cuh"
grep -q "^constexpr int kMaxBucket = 128;" "$D/dynamicemb/csrc/table/probe.cuh"
