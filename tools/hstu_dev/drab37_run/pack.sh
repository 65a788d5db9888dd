#!/bin/bash
# Fills the carry folder /work/main/.carry/drab37 from this worktree (run from anywhere; runlib/pack.sh): the run
# scripts, setup.sh with runlib's common.sh and carry_setup.sh, drab37_bench.py with drab_bench.py and fwd17_jag.py
# (its timing), the branch's hstu_attn wheel (WHEEL, default mkwheel.sh's /tmp/drab37_obj/whl) and the branch's test
# files (tree/).
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin drab37
pack_add tools/hstu_dev/drab37_run/{setup.sh,run*.sh,drab37_bench.py} tools/hstu_dev/drab_bench.py \
  tools/hstu_dev/fwd17_run/fwd17_jag.py
pack_wheel ${WHEEL:-/tmp/drab37_obj/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_device_checks_gpu.py}
pack_end
