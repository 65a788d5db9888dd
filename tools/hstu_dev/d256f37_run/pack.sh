#!/bin/bash
# Fills the carry folder /work/main/.carry/d256f37 from this worktree (runlib/pack.sh): this folder's scripts,
# fwd30_run's setup as setup30.sh, the common carry setup, bwd15_run's ncu digest, the bench scripts (d256_bench37.py
# and what it imports, in jag/), the branch's hstu_attn wheel (whl/, from mkwheel.sh's $W, default /tmp/d256f37_obj2)
# and its test files (tree/), NVIDIA's Ampere HSTU module (peer/, from .carry/peer35); --no-wheel: without whl/ and
# tree/.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin d256f37
pack_add -d jag tools/hstu_dev/{fwd17_run/fwd17_jag.py,fwd30_run/fwd30_bench.py,fwd31_run/fwd31_bench.py} \
  tools/hstu_dev/{fwd32_run/fwd32_bench.py,d256f36_run/d256_bench.py,d256f37_run/d256_bench37.py}
pack_add tools/hstu_dev/bwd15_run/ncu_digest.py tools/hstu_dev/d256f37_run/{setup.sh,ncu36.sh,run*.sh}
pack_as tools/hstu_dev/fwd30_run/setup.sh setup30.sh
# (NVIDIA's Ampere HSTU module, peer35's build: d256_bench37.py --peer --peer-dir $C/peer)
pack_add -d peer /work/main/.carry/peer35/peer/hstu_attn_2_cuda*.so
if [ "${1:-}" != --no-wheel ]; then
  pack_wheel ${OBJ:-/tmp/d256f37_obj2}/whl
  pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py}
fi
pack_end
