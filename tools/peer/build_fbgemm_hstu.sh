#!/usr/bin/env bash
# Builds a reduced copy of FBGEMM's HSTU attention (the peer that benchmarks/hstu_attention.py --peer fbgemm times
# beside hstu_attn): the Hopper (sm_90a) kernels only, bf16, head dims 128 and 256, masks none / causal / causal +
# contexts, no rab, forward and backward. That is every cell of the benchmark's dense and jagged sweeps, in 12 nvcc
# units (about 1.5 min each on one core) instead of the package's hundreds.
#
# Usage: tools/peer/build_fbgemm_hstu.sh FBGEMM_DIR CUTLASS_INCLUDE_DIR OUT_DIR
#   FBGEMM_DIR           a checkout of FBGEMM (uses fbgemm_gpu/experimental/hstu; nothing in it is modified)
#   CUTLASS_INCLUDE_DIR  CUTLASS's include/ (FBGEMM's external/cutlass/include, or a recent CUTLASS)
#   OUT_DIR              gets OUT_DIR/hstu/ (the Python package with fbgemm_gpu_experimental_hstu.so) and the objects
# Then: PYTHONPATH=OUT_DIR python -P benchmarks/hstu_attention.py --sweep dense --sweep jagged --no-ref --peer fbgemm
# (-P: from the repository root, this repository's hstu/ source folder would otherwise shadow the peer's `hstu`).
#
# Environment: NVCC (default: nvcc on PATH), JOBS (parallel nvcc, default 2), TORCH_DIR (the torch package folder;
# default: the importable torch's), EXTRA_INCLUDES (more -I folders, e.g. for cusparse.h / cublas_v2.h when the
# CUDA toolkit lacks them). The .so must be built against the torch version that will load it.
set -euo pipefail
if [ $# -ne 3 ]; then
    sed -n '2,18p' "$0"
    exit 2
fi
fbgemm=$(cd "$1" && pwd)
cutlass=$(cd "$2" && pwd)
out=$(mkdir -p "$3" && cd "$3" && pwd)
src="$fbgemm/fbgemm_gpu/experimental/hstu"
[ -f "$src/src/hstu_hopper/hstu_ops_gpu.cpp" ] || { echo "no $src/src/hstu_hopper/hstu_ops_gpu.cpp" >&2; exit 2; }
[ -f "$cutlass/cute/tensor.hpp" ] || { echo "CUTLASS_INCLUDE_DIR: no cute/tensor.hpp in $cutlass" >&2; exit 2; }
nvcc=${NVCC:-nvcc}
cuda_home=$(dirname "$(dirname "$(command -v "$nvcc")")")
torch_dir=${TORCH_DIR:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
jobs=${JOBS:-2}

# Everything but the benchmark's cells switched off, once for the peer's own instantiation generator (environment)
# and once for the compiler (macros).
features="-DHSTU_ARBITRARY_NFUNC=1"
for x in FP16 FP8 HDIM32 HDIM64 LOCAL TARGET ARBITRARY RAB DRAB DETERMINISTIC 86OR89; do
    export "HSTU_DISABLE_$x=TRUE"
    features="$features -DHSTU_DISABLE_$x"
done
gen="$out/instantiations"
obj="$out/obj"
mkdir -p "$gen" "$obj" "$out/hstu"
python3 - "$src/src" "$gen" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from generate_kernels import generate_kernels_hopper
generate_kernels_hopper(sys.argv[2])
PY
echo "peer: $(ls "$gen"/*.cu | wc -l) instantiation files in $gen"

includes="-I$cutlass -I$src/src/hstu_hopper"
export nvcc features includes obj
# shellcheck disable=SC2016
ls "$gen"/*.cu | xargs -P "$jobs" -I{} bash -c '
    o="$obj/$(basename {} .cu).o"
    [ -f "$o" ] && exit 0
    TMPDIR=$(mktemp -d) "$nvcc" -O3 -std=c++17 -DNDEBUG --use_fast_math --expt-relaxed-constexpr \
        --expt-extended-lambda -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ \
        -U__CUDA_NO_BFLOAT16_OPERATORS__ -U__CUDA_NO_BFLOAT16_CONVERSIONS__ -U__CUDA_NO_BFLOAT162_OPERATORS__ \
        -U__CUDA_NO_BFLOAT162_CONVERSIONS__ -gencode arch=compute_90a,code=sm_90a $features $includes \
        -Xcompiler -fPIC -c {} -o "$o.tmp" 2> "$o.log" && mv "$o.tmp" "$o" && echo "peer: built $(basename "$o")" \
        || { echo "peer: FAILED {} (log: $o.log)" >&2; exit 255; }'

# The op registration (host C++ against torch's headers; its CXX11 ABI flag from torch).
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
extra=""
for d in ${EXTRA_INCLUDES:-}; do extra="$extra -I$d"; done
# shellcheck disable=SC2086
g++ -O3 -std=c++17 -fPIC -D_GLIBCXX_USE_CXX11_ABI=$abi $features -I"$torch_dir/include" \
    -I"$torch_dir/include/torch/csrc/api/include" -I"$cuda_home/include" -I"$cuda_home/include/cccl" $extra \
    $includes -c "$src/src/hstu_hopper/hstu_ops_gpu.cpp" -o "$obj/hstu_ops_gpu.o"
g++ -shared -o "$out/hstu/fbgemm_gpu_experimental_hstu.so" "$obj"/*.o -L"$torch_dir/lib" -ltorch -ltorch_cpu \
    -ltorch_cuda -lc10 -lc10_cuda -L"$cuda_home/lib64" -lcudart -Wl,--no-undefined
cp "$src"/hstu/*.py "$out/hstu/"
echo "peer: $out/hstu ready (PYTHONPATH=$out)"
