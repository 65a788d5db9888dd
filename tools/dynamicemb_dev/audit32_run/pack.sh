#!/bin/bash
# Copies what audit32's device runs need into the carry folder (run from the worktree root; no wheel: audit32
# changes Python, tests and scripts only, laid over main26's wheel on the device; rocksdict's cp312 wheel is
# downloaded into $C/whl once, see the brief):
#   bash tools/dynamicemb_dev/audit32_run/pack.sh /work/main/.carry/audit32
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/dynamicemb $C/tree/dynamicemb $C/tree/examples
ls $C/whl/rocksdict-*.whl > /dev/null
rm -f $C/tree/tests/dynamicemb/*.py $C/tree/dynamicemb/*.py
cp tools/dynamicemb_dev/audit32_run/{run*.sh,setup.sh,nccl_storage.py} $C/
cp tests/conftest.py $C/tree/tests/
cp tests/dynamicemb/*.py $C/tree/tests/dynamicemb/
cp examples/embedding_beyond_hbm.py $C/tree/examples/
git diff --quiet main -- dynamicemb/ || cp dynamicemb/*.py $C/tree/dynamicemb/
bash -n $C/run*.sh $C/setup.sh
du -sh $C
