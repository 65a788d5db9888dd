#!/bin/bash
# Fills the carry folder /work/main/.carry/rabf37 from this worktree (run from anywhere; runlib/pack.sh): the run
# scripts, setup.sh with runlib's common.sh and carry_setup.sh, rab35_bench.py with sm80_case_bench.py (its code since
# tidy37; main's pack carried the entry alone) and fwd17_jag.py (its timing); the branch's hstu_attn wheel
# (mkwheel.sh's, $WHL, default /tmp/rabf37_obj/whl) and the branch's test files (tree/).
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin rabf37
pack_add tools/hstu_dev/rabf37_run/{setup.sh,run*.sh} tools/hstu_dev/rab35_run/rab35_bench.py tools/hstu_dev/sm80_case_bench.py tools/hstu_dev/fwd17_run/fwd17_jag.py
pack_wheel ${WHL:-/tmp/rabf37_obj/whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernel_options.py}
pack_end
