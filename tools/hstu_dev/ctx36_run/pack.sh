#!/bin/bash
# Fills the carry folder /work/main/.carry/ctx36 from this worktree (run from anywhere): the run scripts, setup.sh
# with carry_setup.sh, ctx35_bench.py with sm80_case_bench.py and fwd17_jag.py (its timing); with --wheel the
# branch's hstu_attn wheel (bazel-bin, or the folder WHL names) and the branch's test files that differ from main
# (tree/).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/ctx36
mkdir -p $C
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
cp $D/{setup.sh,run*.sh} $W/tools/hstu_dev/carry_setup.sh $W/tools/hstu_dev/ctx35_run/ctx35_bench.py \
   $W/tools/hstu_dev/sm80_case_bench.py $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $C/
if [ "${1:-}" = --wheel ]; then
  mkdir -p $C/whl $C/tree/tests/hstu
  cp ${WHL:-$W/bazel-bin}/hstu_attn-*.whl $C/whl/
  cp $W/tests/conftest.py $C/tree/tests/
  cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} \
     $C/tree/tests/hstu/
fi
du -sh $C
