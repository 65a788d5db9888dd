#!/bin/bash
# Fills the carry folder /work/main/.carry/zipf37 from this worktree (runlib/pack.sh): the branch's hstu_attn wheel
# (mkwheel.sh's, in $WHL, default /tmp/zipf37_obj2/whl (run 1: W=/tmp/zipf37_obj); or bazel-bin's with BAZEL=1), the
# test files it changed (tree/), the bench scripts (fwd17_jag.py, fwd29_bench.py, zipf32_bench.py, zipf35_bench.py,
# zipf37_bench.py and labtime.py in jag/), the common carry setup, fwd28_run's setup as fwd28_setup.sh and this
# folder's scripts.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin zipf37
if [ "${BAZEL:-0}" = 1 ]; then pack_wheel $R/bazel-bin; else pack_wheel ${WHL:-/tmp/zipf37_obj2/whl}; fi
pack_tree tests/conftest.py \
  tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernel_options.py,test_kernels_gpu.py}
pack_add -d jag tools/hstu_dev/fwd17_run/fwd17_jag.py tools/hstu_dev/fwd29_run/fwd29_bench.py \
  tools/hstu_dev/zipf32_run/zipf32_bench.py tools/hstu_dev/zipf35_run/zipf35_bench.py \
  tools/hstu_dev/zipf37_run/zipf37_bench.py tools/hstu_dev/runlib/labtime.py
pack_as tools/hstu_dev/fwd28_run/setup.sh fwd28_setup.sh
pack_add tools/hstu_dev/zipf37_run/{setup.sh,run*.sh}
pack_end
