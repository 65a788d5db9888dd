#!/bin/bash
# Fills the carry folder /work/main/.carry/rab40 from this worktree (run from anywhere; runlib/pack.sh): the run
# scripts, setup.sh with runlib's common.sh and carry_setup.sh, sm80_case_bench.py with fwd17_jag.py (its timing); the
# branch's hstu_attn wheel ($WHL, default /tmp/rab40_obj2/whl: `W=/tmp/rab40_obj2 bash mkwheel.sh`; run 1 was packed
# first from /tmp/rab40_obj, the D = 64 / 128 units) and the branch's test files (tree/).
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin rab40
pack_add tools/hstu_dev/rab40_run/{setup.sh,run*.sh} tools/hstu_dev/sm80_case_bench.py \
  tools/hstu_dev/fwd17_run/fwd17_jag.py
pack_wheel ${WHL:-/tmp/rab40_obj2/whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernel_options.py}
pack_end
