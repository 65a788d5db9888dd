#!/bin/bash
# Fills the carry folder /work/main/.carry/d256f37 from this worktree: this folder's scripts, fwd30_run's setup as
# setup30.sh, the common carry setup, bwd15_run's ncu digest, the bench scripts (d256_bench37.py and what it imports,
# in jag/), the branch's hstu_attn wheel (whl/, from mkwheel.sh's $W, default /tmp/d256f37_obj2) and its test files
# (tree/), NVIDIA's Ampere HSTU module (peer/, from .carry/peer35); --no-wheel: without whl/ and tree/.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/d256f37 OBJ=${OBJ:-/tmp/d256f37_obj2}
H=$W/tools/hstu_dev
rm -rf $C/whl $C/tree $C/run*.sh $C/jag
mkdir -p $C/jag
cp $H/fwd17_run/fwd17_jag.py $H/fwd30_run/fwd30_bench.py $H/fwd31_run/fwd31_bench.py $H/fwd32_run/fwd32_bench.py \
  $H/d256f36_run/d256_bench.py $H/d256f37_run/d256_bench37.py $C/jag/
cp $H/carry_setup.sh $H/bwd15_run/ncu_digest.py $C/
cp $H/fwd30_run/setup.sh $C/setup30.sh
cp $H/d256f37_run/{setup.sh,ncu36.sh,run*.sh} $C/
mkdir -p $C/peer  # (NVIDIA's Ampere HSTU module, peer35's build: d256_bench37.py --peer --peer-dir $C/peer)
cp /work/main/.carry/peer35/peer/hstu_attn_2_cuda*.so $C/peer/
if [ "${1:-}" != --no-wheel ]; then
  mkdir -p $C/whl $C/tree/tests/hstu
  cp $OBJ/whl/hstu_attn-*.whl $C/whl/
  cp $W/tests/conftest.py $C/tree/tests/
  cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py} $C/tree/tests/hstu/
fi
du -sh $C
