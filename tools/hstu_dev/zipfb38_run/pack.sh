#!/bin/bash
# Fills the carry folder /work/main/.carry/zipfb38 from this worktree (runlib/pack.sh): the branch's hstu_attn wheel
# (mkwheel.sh's, in $WHL, default /tmp/zipfb38_obj/whl; or bazel-bin's with BAZEL=1), the test files (tree/), the bench
# with fwd17_jag.py, runlib's common.sh with carry_setup.sh and this folder's scripts.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin zipfb38
if [ "${BAZEL:-0}" = 1 ]; then pack_wheel $R/bazel-bin; else pack_wheel ${WHL:-/tmp/zipfb38_obj/whl}; fi
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_split_gpu.py}
pack_add tools/hstu_dev/fwd17_run/fwd17_jag.py tools/hstu_dev/zipfb38_run/{zipfb38_bench.py,setup.sh,run*.sh}
pack_end
