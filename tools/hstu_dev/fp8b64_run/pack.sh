#!/bin/bash
# Fills .carry/fp8b64: the run scripts, setup.sh, the benchmark with bench_util.py, the branch's wheel
# (tools/hstu_dev/fp8b64_run/mkwheel.sh: $W/whl), the test files under tree/.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin fp8b64 "${1:-}"
pack_add tools/hstu_dev/fp8b64_run/{setup.sh,run*.sh} benchmarks/{hstu_fp8_bwd.py,bench_util.py}
pack_wheel ${WHL:-/tmp/fp8b64_obj/whl}
pack_tree tests/conftest.py tests/hstu/{test_fp8_bwd.py,fp8_checks.py,fp8_bwd_sync_model.py} \
  tests/hstu/{test_kernels_gpu.py,hstu_kernel_checks.py,test_fp8.py}
pack_end
