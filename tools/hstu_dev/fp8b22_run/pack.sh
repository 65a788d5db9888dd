#!/bin/bash
# Fills the carry folder of fp8b22 (issue 36, session 21) from this worktree: the run scripts, the branch's test /
# benchmark files and the drivers under tree/ (the device runs from main's tree). Usage: bash pack.sh CARRY_DIR
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=$1
mkdir -p $C/tree/tools $C/tree/benchmarks $C/tree/tests/hstu
cp $W/tools/hstu_dev/fp8b22_run/run*.sh $C/
cp $W/tools/hstu_dev/fp8b21_run/drive.py $W/tools/hstu_dev/fp8b22_run/ncu_case.py $C/tree/tools/  # (fp8b21's driver)
cp $W/benchmarks/bench_util.py $W/benchmarks/hstu_fp8_bwd.py $C/tree/benchmarks/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/test_fp8_bwd.py $W/tests/hstu/fp8_checks.py $W/tests/hstu/fp8_bwd_sync_model.py $C/tree/tests/hstu/
if [ "${WHEEL:-1}" = 1 ]; then
  mkdir -p $C/whl && rm -f $C/whl/*.whl && cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
fi
du -sh $C
