#!/bin/bash
# Fills .carry/fp8d256: the run scripts, setup.sh, the benchmark with bench_util.py, the branch's _C.so xz-compressed
# and its Python files (tools/hstu_dev/fp8d256_run/mkwheel.sh: $W/_C.so), the test files under tree/.
source "$(dirname "$0")/../runlib/pack.sh"
W=${W:-/tmp/fp8d256_obj}
pack_begin fp8d256 "${1:-}"
pack_add tools/hstu_dev/fp8d256_run/{setup.sh,run*.sh,d256_ab.py} benchmarks/{hstu_fp8_bwd.py,bench_util.py}
[ -f $W/_C.so.xz ] && [ $W/_C.so.xz -nt $W/_C.so ] || xz -6 -T2 -k -c $W/_C.so > $W/_C.so.xz
pack_add $W/_C.so.xz
pack_add -d py hstu/_fp8_bwd.py hstu/_ops.py
pack_tree tests/conftest.py tests/hstu/{test_fp8_bwd.py,fp8_checks.py,fp8_bwd_sync_model.py} \
  tests/hstu/{test_kernels_gpu.py,hstu_kernel_checks.py}
pack_end
md5sum $W/_C.so | cut -c1-12
