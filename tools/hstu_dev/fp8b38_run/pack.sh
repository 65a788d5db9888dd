#!/bin/bash
# Fills fp8b38's carry folder from this worktree (run from anywhere): the run scripts, setup.sh and the common carry
# setup, path_ab.py and fp8p32's path_gaps.py, the hstu_attn wheel under whl/ (WHL, default the branch's bazel-bin
# one), and under tree/ the branch's FP8 backward test files and benchmarks/hstu_fp8_bwd.py (+ bench_util.py).
# Usage: [WHL=path.whl] bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b38)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=${1:-/work/main/.carry/fp8b38}
W=${WHL:-$(ls $R/bazel-bin/hstu_attn-*.whl)}
rm -rf $D/whl $D/tree
mkdir -p $D/whl $D/tree/tests/hstu $D/tree/benchmarks
rm -f $D/run*.sh
cp $H/run*.sh $H/setup.sh $H/path_ab.py $H/lab_ab.py $R/tools/hstu_dev/carry_setup.sh $R/tools/hstu_dev/fp8p32_run/path_gaps.py $D/
cp $W $D/whl/
cp $R/tests/conftest.py $D/tree/tests/
cp $R/tests/hstu/{test_fp8_bwd.py,fp8_checks.py,fp8_bwd_sync_model.py} $D/tree/tests/hstu/
cp $R/benchmarks/{hstu_fp8_bwd.py,bench_util.py} $D/tree/benchmarks/
ls $D $D/whl
du -sh $D
