#!/bin/bash
# Fills the carry folder /work/main/.carry/rab35 from this worktree (run from anywhere): the run scripts, setup.sh
# with carry_setup.sh, rab35_bench.py with sm80_case_bench.py and fwd17_jag.py (its timing), the ncu helpers; with
# --wheel the branch's hstu_attn wheel (bazel-bin) and the branch's test files (tree/).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/rab35
mkdir -p $C
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
cp $D/{setup.sh,run*.sh,rab35_bench.py} $W/tools/hstu_dev/carry_setup.sh $W/tools/hstu_dev/sm80_case_bench.py \
    $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/bwd15_run/ncu_digest.py \
    $W/tools/hstu_dev/bwd19_run/src_parts.py $C/
if [ "${1:-}" = --wheel ]; then
  mkdir -p $C/whl $C/tree/tests/hstu
  cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
  cp $W/tests/conftest.py $C/tree/tests/
  cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py} $C/tree/tests/hstu/
fi
du -sh $C
