#!/bin/bash
# Fills the carry folder /work/main/.carry/rabf38 from this worktree (run from anywhere): the run scripts, setup.sh
# with carry_setup.sh, sm80_case_bench.py with fwd17_jag.py (its timing); the branch's hstu_attn wheel (mkwheel.sh's,
# $W/whl) and the branch's test files (tree/).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/rabf38
mkdir -p $C
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
cp $D/{setup.sh,run*.sh} $W/tools/hstu_dev/sm80_case_bench.py $W/tools/hstu_dev/carry_setup.sh \
    $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $C/
mkdir -p $C/whl $C/tree/tests/hstu
cp ${WHL:-/tmp/rabf38_obj/whl}/hstu_attn-*.whl $C/whl/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernel_options.py} $C/tree/tests/hstu/
du -sh $C
