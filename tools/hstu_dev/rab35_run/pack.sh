#!/bin/bash
# Fills the carry folder /work/main/.carry/rab35 from this worktree (run from anywhere; runlib/pack.sh): the run
# scripts, setup.sh with runlib's common.sh and carry_setup.sh, rab35_bench.py with sm80_case_bench.py and
# fwd17_jag.py (its timing), the ncu helpers; with --wheel the branch's hstu_attn wheel (bazel-bin) and the branch's
# test files (tree/).
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin rab35
pack_add tools/hstu_dev/rab35_run/{setup.sh,run*.sh,rab35_bench.py} tools/hstu_dev/sm80_case_bench.py \
  tools/hstu_dev/fwd17_run/fwd17_jag.py tools/hstu_dev/bwd15_run/ncu_digest.py tools/hstu_dev/bwd19_run/src_parts.py
if [ "${1:-}" = --wheel ]; then
  pack_wheel $R/bazel-bin
  pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py}
fi
pack_end
