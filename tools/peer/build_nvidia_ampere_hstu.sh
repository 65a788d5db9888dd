#!/usr/bin/env bash
# Builds a reduced copy of NVIDIA's Ampere HSTU attention (recsys-examples corelib/hstu/csrc/hstu_attn: the
# FA2-derived mma.sync kernels; FBGEMM carries the same ones), the peer that benchmarks/hstu_attention.py
# --peer nvidia-ampere times beside hstu_attn's portable kernels: bf16, head dims 64 / 128 / 256, masks none /
# causal / causal + contexts, no rab, forward and backward (non-deterministic). That is every cell of the benchmark's
# dense, jagged and portable sweeps; other cells print "n/a". The kernels are compiled for the GPU at hand.
#
# Usage: tools/peer/build_nvidia_ampere_hstu.sh CHECKOUT OUT_DIR
#   CHECKOUT  a checkout of recsys-examples (uses corelib/hstu; nothing in it is modified: the peer's own source
#             generator runs on a copy of its csrc/ under OUT_DIR)
#   OUT_DIR   gets the extension module hstu_attn_2_cuda*.so (and the objects under OUT_DIR/obj)
# Then: PYTHONPATH=OUT_DIR python -P benchmarks/hstu_attention.py --kernels portable --sweep portable --no-ref \
#           --peer nvidia-ampere
# (the peer's Python package is also named hstu_attn: the benchmark loads the extension module directly).
#
# Environment: NVCC (default: nvcc on PATH), JOBS (parallel nvcc, default 2), CUDA_CC (compute capability to build
# for, e.g. 80, 89, 90; default: the first GPU's, from torch), CUTLASS_INCLUDE_DIR (default: the checkout's
# third_party/cutlass/include, a submodule), TORCH_DIR (the torch package folder; default: the importable torch's),
# CUDA_LIB_INCLUDE (cuSPARSE / cuBLAS / cuSOLVER headers, which ATen's CUDA headers include; default: the CUDA
# library wheels' nvidia/cu*/include beside TORCH_DIR), UNITS (all, the default: 18 kernel units; causal: the 6
# causal units without contexts, all that --sweep portable times, a third of the build; the other units' launch
# functions then throw "not built", and the benchmark prints n/a for their cells). python3 must be the Python that
# will load the module (its headers and extension suffix are used). The .so must be built against the torch version that will load it.
# On a host without a GPU (the module then carried to the GPU machine): CUDA_CC=90 TORCH_DIR=<a pip-installed torch of
# the GPU machine's version, for the same Python>; e.g. a venv with `pip install torch==X --no-deps` and
# `cuda-toolkit[cublas,cusolver,cusparse,cudart]` of its CUDA version for CUDA_LIB_INCLUDE.
set -euo pipefail
if [ $# -ne 2 ]; then
    sed -n '2,26p' "$0"
    exit 2
fi
checkout=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
src="$checkout/corelib/hstu"
[ -f "$src/csrc/hstu_attn/hstu_api.cpp" ] || { echo "no $src/csrc/hstu_attn/hstu_api.cpp" >&2; exit 2; }
[ -f "$src/setup.py" ] || { echo "no $src/setup.py (the peer's source generator)" >&2; exit 2; }
cutlass=${CUTLASS_INCLUDE_DIR:-$checkout/third_party/cutlass/include}
[ -f "$cutlass/cute/tensor.hpp" ] || { echo "CUTLASS_INCLUDE_DIR: no cute/tensor.hpp in $cutlass (init the" \
    "checkout's third_party/cutlass submodule or set CUTLASS_INCLUDE_DIR)" >&2; exit 2; }
nvcc=${NVCC:-nvcc}
# (nvcc resolved through links: /usr/local/bin/nvcc -> the toolkit's bin/nvcc gives the toolkit's folder)
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v "$nvcc")")")")
torch_dir=${TORCH_DIR:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
cc=${CUDA_CC:-$(python3 -c 'import torch; a, b = torch.cuda.get_device_capability(0); print(10 * a + b)')}
jobs=${JOBS:-2}
units=${UNITS:-all}
[ "$units" = all ] || [ "$units" = causal ] || { echo "UNITS: all or causal, got $units" >&2; exit 2; }

# Everything but the benchmark's cells switched off, once for the peer's generator (environment) and once for the
# compiler (macros). The sm86 / sm89 kernels only where the GPU is one.
disable="FP16 HDIM32 LOCAL TARGET ARBITRARY RAB DRAB DELTA_Q PAGED_KV"
if [ "$cc" != 86 ] && [ "$cc" != 89 ]; then disable="$disable 86OR89"; fi
features="-DHSTU_ARBITRARY_NFUNC=1"
export HSTU_ARBITRARY_NFUNC=1 HSTU_DISABLE_DETERMINISTIC=TRUE
features="$features -DHSTU_DISABLE_DETERMINISTIC"
for x in $disable; do
    export "HSTU_DISABLE_$x=TRUE"
    features="$features -DHSTU_DISABLE_$x"
done

# The peer's own instantiation generator (generate_cuda_sources in its setup.py, with the DISABLE_* switches it
# reads), run on a copy of csrc/ so that the checkout stays as it is.
work="$out/work"
obj="$out/obj"
rm -rf "$work"
mkdir -p "$work" "$obj"
cp -r "$src/csrc" "$work/csrc"
mkdir -p "$work/csrc/hstu_attn/src/generated"
(cd "$work" && python3 - "$src/setup.py" <<'PY'
import ast, itertools, os, subprocess, sys
tree = ast.parse(open(sys.argv[1]).read())
keep = [n for n in tree.body if isinstance(n, ast.Assign) and all(
            isinstance(t, ast.Name) and (t.id.startswith("DISABLE_") or t.id == "ARBITRARY_NFUNC") for t in n.targets)]
keep += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "generate_cuda_sources"]
if not any(isinstance(n, ast.FunctionDef) for n in keep):
    sys.exit("peer: no generate_cuda_sources() in " + sys.argv[1])
ns = {"os": os, "itertools": itertools, "subprocess": subprocess}
exec(compile(ast.Module(body=keep, type_ignores=[]), sys.argv[1], "exec"), ns)
srcs = ns["generate_cuda_sources"]()
open("sources.txt", "w").write("\n".join(srcs) + "\n")
print(f"peer: {len(srcs)} generated units")
PY
)

# The kernel units include ATen's headers too (CUDA context, philox), as the peer's setup.py build gives them: torch's
# include folders and its CXX11 ABI flag (from the torch that TORCH_DIR names; 1 where it does not import here).
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
includes="-I$work/csrc/hstu_attn/src -I$cutlass -I$torch_dir/include -I$torch_dir/include/torch/csrc/api/include"
features="$features -D_GLIBCXX_USE_CXX11_ABI=$abi"
# ATen's CUDA headers include cuSPARSE / cuBLAS / cuSOLVER ones, which a CUDA toolkit with only the compiler lacks:
# CUDA_LIB_INCLUDE (default: the CUDA library wheels' include folder beside a pip-installed torch) is searched last,
# after the toolkit's own headers, so that nvcc's runtime headers stay the ones it came with.
libinc=${CUDA_LIB_INCLUDE:-$(ls -d "$torch_dir"/../nvidia/cu*/include 2>/dev/null | head -1)}
if [ -n "$libinc" ]; then includes="$includes -Xcompiler -idirafter -Xcompiler $libinc"; fi
# UNITS=causal: the units to compile (build.txt) and the ones that get a stub (stub.txt); names such as
# flash_fwd_hdim128_bf16_causal_sm80.cu, flash_bwd_hdim128_bf16_causal_false_sm80.cu (contexts: _causal_context_).
if [ "$units" = causal ]; then
    grep -E '_causal_(sm|false)' "$work/sources.txt" > "$work/build.txt"
    grep -vE '_causal_(sm|false)' "$work/sources.txt" > "$work/stub.txt" || true
else
    cp "$work/sources.txt" "$work/build.txt"
    : > "$work/stub.txt"
fi
export nvcc features includes obj work cc
# shellcheck disable=SC2016
xargs -P "$jobs" -I{} bash -c '
    o="$obj/$(basename {} .cu).o"
    [ -f "$o" ] && exit 0
    TMPDIR=$(mktemp -d) "$nvcc" -O3 -std=c++17 -DNDEBUG --use_fast_math --expt-relaxed-constexpr \
        --expt-extended-lambda -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ \
        -U__CUDA_NO_BFLOAT16_OPERATORS__ -U__CUDA_NO_BFLOAT16_CONVERSIONS__ -U__CUDA_NO_BFLOAT162_OPERATORS__ \
        -U__CUDA_NO_BFLOAT162_CONVERSIONS__ -gencode "arch=compute_80,code=sm_$cc" $features $includes \
        -Xcompiler -fPIC -c "$work/{}" -o "$o.tmp" 2> "$o.log" && mv "$o.tmp" "$o" \
        && echo "peer: built $(basename "$o")" || { echo "peer: FAILED {} (log: $o.log)" >&2; exit 255; }' < "$work/build.txt"
objs=$(while read -r u; do echo "$obj/$(basename "$u" .cu).o"; done < "$work/build.txt")

# The Python binding (host C++ against torch's and Python's headers).
pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# shellcheck disable=SC2086
g++ -O3 -std=c++17 -fPIC $features -DTORCH_EXTENSION_NAME=hstu_attn_2_cuda \
    -DTORCH_API_INCLUDE_EXTENSION_H -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
    -I"$pyinc" -I"$cuda_home/include" ${includes//-Xcompiler /} -c "$src/csrc/hstu_attn/hstu_api.cpp" -o "$obj/hstu_api.o"
# The units not built: explicit specializations of the same launch functions (same symbols) that throw.
if [ -s "$work/stub.txt" ]; then
    python3 - "$work" > "$work/stubs.cpp" <<'PY'
import os, re, sys
work = sys.argv[1]
print('#include <stdexcept>\n#include "cutlass/numeric_types.h"\n#include "hstu.h"')
for u in open(os.path.join(work, "stub.txt")).read().split():
    decl = re.search(r"template (void run_hstu_\w+_<[^>]*>\s*\([^)]*\));", open(os.path.join(work, u)).read())
    if not decl:
        sys.exit(f"peer: no explicit instantiation in {u}")
    name = os.path.basename(u)[:-3]
    print(f'template <> {decl.group(1)} {{ throw std::runtime_error("peer: {name} not built (UNITS=causal)"); }}')
PY
    # shellcheck disable=SC2086
    g++ -O1 -std=c++17 -fPIC $features -I"$cuda_home/include" ${includes//-Xcompiler /} -c "$work/stubs.cpp" \
        -o "$work/stubs.o"
    objs="$objs $work/stubs.o"
    echo "peer: $(wc -l < "$work/stub.txt") units stubbed (UNITS=causal)"
fi
# The module should load wherever the torch wheel (manylinux_2_28) does, also where it was built on a newer glibc:
# the dl* calls of torch's headers go through trampolines to their oldest versions (libdl's before glibc 2.34), and
# libstdc++'s __libc_single_threaded (2.32) reads as 0, "always lock" (the way tools/manylinux does it for our wheels).
dlsyms="dlclose dlerror dlopen dlsym"
{
    for f in $dlsyms; do
        printf '  .section .text.__wrap_%s,"ax",@progbits\n  .globl __wrap_%s\n  .hidden __wrap_%s\n' "$f" "$f" "$f"
        printf '  .type __wrap_%s, @function\n__wrap_%s:\n  jmp __compat_%s@PLT\n' "$f" "$f" "$f"
        printf '  .size __wrap_%s, .-__wrap_%s\n  .symver __compat_%s, %s@GLIBC_2.2.5\n' "$f" "$f" "$f" "$f"
    done
    printf '  .data\n  .globl __wrap___libc_single_threaded\n  .hidden __wrap___libc_single_threaded\n'
    printf '  .type __wrap___libc_single_threaded, @object\n  .size __wrap___libc_single_threaded, 1\n'
    printf '__wrap___libc_single_threaded:\n  .byte 0\n  .section .note.GNU-stack,"",@progbits\n'
} > "$work/glibc_compat.S"
gcc -c "$work/glibc_compat.S" -o "$work/glibc_compat.o"
wraps=$(for f in $dlsyms __libc_single_threaded; do printf -- '-Wl,--wrap=%s ' "$f"; done)
# shellcheck disable=SC2086
g++ -shared -fuse-ld=bfd -o "$out/hstu_attn_2_cuda$suffix" $objs "$obj/hstu_api.o" "$work/glibc_compat.o" $wraps \
    -L"$torch_dir/lib" -ltorch_python -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda -L"$cuda_home/lib64" -lcudart \
    -Wl,--no-as-needed -l:libdl.so.2
glibc=$(objdump -T "$out/hstu_attn_2_cuda$suffix" | grep -o 'GLIBC_[0-9.]*' | sort -V -u | tail -1)
echo "peer: newest glibc symbol version needed: $glibc"
echo "peer: $out/hstu_attn_2_cuda$suffix ready (PYTHONPATH=$out), sm_$cc"
