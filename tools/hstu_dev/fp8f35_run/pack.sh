#!/bin/bash
# Fills fp8f35's carry folder from this worktree (run from anywhere): the run scripts and setup, fp8f31's setup (as
# setup_f31.sh), fp8b29's (as setup_b29.sh), the common carry setup, fp8_fwd_split.py, the branch's hstu_attn wheel
# under whl/ where bazel-bin has one and `WHEEL=1` (run 1 needs none: main's wheel), the benchmark and FP8 test
# files under tree/.
# Usage: [WHEEL=1] bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8f35)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=${1:-/work/main/.carry/fp8f35}
mkdir -p $D/whl $D/tree/tests/hstu $D/tree/benchmarks
rm -f $D/run*.sh $D/whl/*.whl
cp $H/run*.sh $H/setup.sh $H/vt_ab.py $R/tools/hstu_dev/carry_setup.sh $R/tools/hstu_dev/fp8_fwd_split.py $D/
cp $R/tools/hstu_dev/fp8f31_run/setup.sh $D/setup_f31.sh
cp $R/tools/hstu_dev/fp8b29_run/setup.sh $D/setup_b29.sh
[ "${WHEEL:-0}" = 1 ] && cp $R/bazel-bin/hstu_attn-*.whl $D/whl/
cp $R/benchmarks/{hstu_attention.py,bench_util.py} $D/tree/benchmarks/
cp $R/tests/conftest.py $D/tree/tests/
cp $R/tests/hstu/{test_fp8.py,fp8_checks.py} $D/tree/tests/hstu/
ls $D $D/whl
du -sh $D
