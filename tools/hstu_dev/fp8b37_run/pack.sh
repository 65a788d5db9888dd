#!/bin/bash
# Fills fp8b37's carry folder from this worktree (run from anywhere; runlib/pack.sh): the run scripts, setup.sh with
# runlib's common.sh and carry_setup.sh, lab_ab.py / path_ab.py with fp8_bwd_ab.py and fp8p32's path_gaps.py, the
# hstu_attn wheel under whl/ (WHL, default the branch's bazel-bin one), and under tree/ the branch's FP8 backward test
# files and benchmarks/hstu_fp8_bwd.py (+ bench_util.py).
# Usage: [WHL=path.whl] bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b37)
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin fp8b37 "${1:-}"
pack_add tools/hstu_dev/fp8b37_run/{run*.sh,setup.sh,path_ab.py,lab_ab.py,ncu_call.py} tools/hstu_dev/fp8_bwd_ab.py \
  tools/hstu_dev/fp8p32_run/path_gaps.py
pack_wheel ${WHL:-$(ls $R/bazel-bin/hstu_attn-*.whl)}
pack_tree tests/conftest.py tests/hstu/{test_fp8_bwd.py,fp8_checks.py,fp8_bwd_sync_model.py} \
  benchmarks/{hstu_fp8_bwd.py,bench_util.py}
pack_end
