#!/bin/bash
# Fills fp8b29's carry folder from this worktree (run from anywhere): the run scripts, the common carry setup,
# fp8b27's variant_split.py / clock_split.py / smi_join.py, the branch's hstu_attn wheel under whl/, and the
# branch's FP8 backward test files under tree/.
# Usage: bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b29)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=${1:-/work/main/.carry/fp8b29}
mkdir -p $D/whl $D/tree/tests/hstu
cp $H/run*.sh $H/setup.sh $R/tools/hstu_dev/carry_setup.sh $D/
cp $R/tools/hstu_dev/fp8b28_run/sancase.py $D/
cp $R/tools/hstu_dev/fp8b27_run/{variant_split,clock_split,smi_join}.py $D/
rm -f $D/whl/*.whl
cp $R/bazel-bin/hstu_attn-*.whl $D/whl/
cp $R/tests/conftest.py $D/tree/tests/
cp $R/tests/hstu/{test_fp8_bwd.py,fp8_checks.py,fp8_bwd_sync_model.py} $D/tree/tests/hstu/
du -sh $D
