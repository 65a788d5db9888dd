#!/bin/bash
# Fills the carry folder /work/main/.carry/drab38 from this worktree (run from anywhere): the run scripts, setup.sh
# with carry_setup.sh, drab38_bench.py with fwd17_jag.py (its timing), the branch's hstu_attn wheel (WHEEL, default
# mkwheel.sh's /tmp/drab38_obj/whl) and the branch's test files (tree/).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/drab38
WHEEL=${WHEEL:-/tmp/drab38_obj/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl}
mkdir -p $C
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
cp $D/{setup.sh,run*.sh,drab38_bench.py} $W/tools/hstu_dev/carry_setup.sh $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $C/
mkdir -p $C/whl $C/tree/tests/hstu
cp $WHEEL $C/whl/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_device_checks_gpu.py} \
  $C/tree/tests/hstu/
md5sum $C/whl/*.whl
du -sh $C
