#!/bin/bash
# Copies what run K needs into /work/main/.carry/hash26/ (the lead runs `OUT=... bash .carry/hash26/runK.sh` from
# main's tree root on the device): the run script, setup.sh, this branch's dynamicemb wheel (whl/), evict_bench
# built from this tree (eb_h26), table_ab.py and upsert_lab_plugin.py, and the branch's changed test files with their
# helpers (tests_h26/, not named like the package). Usage: pack.sh K   (run 1 carried two evict_bench binaries only)
set -e
R=$(cd "$(dirname "$0")/../../.." && pwd)
D=/work/main/.carry/hash26
K=$1
rm -rf $D && mkdir -p $D/whl $D/tests_h26
cp "$R/tools/dynamicemb_dev/hash26_run/run$K.sh" "$R/tools/dynamicemb_dev/hash26_run/setup.sh" $D/
cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
cp "$R/tools/dynamicemb_dev/table_ab.py" "$R/tools/dynamicemb_dev/upsert_lab_plugin.py" $D/
cp "$R/tests/dynamicemb/test_table_gpu.py" "$R/tests/dynamicemb/table_helpers.py" $D/tests_h26/
nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I"$R" "$R/tools/dynamicemb_dev/evict_bench.cu" \
  -o $D/eb_h26 2>&1 | grep -i "error" || true
ls -la $D $D/whl $D/tests_h26
du -sh $D
