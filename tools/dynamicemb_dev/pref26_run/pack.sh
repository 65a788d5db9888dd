#!/bin/bash
# Copies what pref26's device runs need into the carry folder (run from the worktree root; no wheel: pref26 changes
# Python only, laid over main26's wheel on the device; rocksdict's cp312 wheel from audit32's carry):
#   bash tools/dynamicemb_dev/pref26_run/pack.sh /work/main/.carry/pref26
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/dynamicemb $C/tree/dynamicemb $C/tree/benchmarks
cp /work/main/.carry/audit32/whl/rocksdict-*.whl $C/whl/
rm -f $C/tree/tests/dynamicemb/*.py $C/tree/dynamicemb/*.py $C/tree/benchmarks/*.py
cp tools/dynamicemb_dev/pref26_run/{run*.sh,setup.sh} $C/
cp tests/conftest.py $C/tree/tests/
cp tests/dynamicemb/*.py $C/tree/tests/dynamicemb/
cp dynamicemb/*.py $C/tree/dynamicemb/
cp benchmarks/{embedding_tiers.py,bench_util.py,embedding.py} $C/tree/benchmarks/
bash -n $C/run*.sh $C/setup.sh
du -sh $C
