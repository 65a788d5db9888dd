#!/usr/bin/env bash
# Builds HierarchicalKV's own hash-table benchmark (the peer that benchmarks/hash_table.py --peer-hkv runs beside
# dynamicemb's scored hash table): one nvcc line over the checkout's benchmark/merlin_hashtable_benchmark.cc.cu
# (header-only library: include/ and benchmark/ are all it needs; no CMake, no googletest submodule). By default
# through tools/peer/hkv_benchmark_grid.cu, which includes that file unchanged and adds a grid selection
# (--dims / --lambdas / --apis; without arguments the binary is HKV's main as is); --plain compiles HKV's file alone.
# No GPU is needed to build (ARCH defaults to 90 without nvidia-smi).
#
# Usage: tools/peer/build_hkv_benchmark.sh [--dry-run] [--plain] HKV_DIR OUT_DIR
#   HKV_DIR   a checkout of HierarchicalKV (nothing in it is modified); its include/ and benchmark/ suffice
#   OUT_DIR   gets OUT_DIR/merlin_hashtable_benchmark (and OUT_DIR/build.log, OUT_DIR/hkv_commit.txt)
#   --dry-run print the checks' results and the nvcc command, build nothing (works without nvcc or a GPU)
#   --plain   HKV's benchmark file alone (no grid selection; the default for another BENCHMARK)
# Then: python -P benchmarks/hash_table.py --peer-hkv OUT_DIR/merlin_hashtable_benchmark ...
#
# Environment: NVCC (default: nvcc on PATH), ARCH (compute capability digits, e.g. 90 for H100/H200; default: the
# first GPU's from nvidia-smi, else 90), BENCHMARK (source under benchmark/ without .cc.cu; default
# merlin_hashtable_benchmark), EXTRA_NVCC_FLAGS (appended), HKV_COMMIT (recorded when HKV_DIR has no .git, e.g. an
# exported copy). The binary carries sm_ARCH code plus compute_ARCH PTX.
set -euo pipefail
usage() { sed -n '2,19p' "$0"; }
dry=0
plain=0
args=()
for a in "$@"; do
    case "$a" in
        --dry-run) dry=1 ;;
        --plain) plain=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "build_hkv_benchmark: unknown option $a" >&2; usage >&2; exit 2 ;;
        *) args+=("$a") ;;
    esac
done
if [ ${#args[@]} -ne 2 ]; then
    echo "build_hkv_benchmark: expected 2 arguments (HKV_DIR OUT_DIR), got ${#args[@]}" >&2
    usage >&2
    exit 2
fi
[ -d "${args[0]}" ] || { echo "HKV_DIR: no directory ${args[0]}" >&2; exit 2; }
hkv=$(cd "${args[0]}" && pwd)
bench=${BENCHMARK:-merlin_hashtable_benchmark}
src="$hkv/benchmark/$bench.cc.cu"
[ -f "$hkv/include/merlin_hashtable.cuh" ] || { echo "HKV_DIR: no include/merlin_hashtable.cuh in $hkv" >&2; exit 2; }
[ -f "$src" ] || { echo "HKV_DIR: no benchmark/$bench.cc.cu in $hkv" >&2; exit 2; }
[ -f "$hkv/benchmark/benchmark_util.cuh" ] || { echo "HKV_DIR: no benchmark/benchmark_util.cuh in $hkv" >&2; exit 2; }

nvcc=${NVCC:-nvcc}
if [ -z "${ARCH:-}" ]; then
    # "9.0" -> "90"; no nvidia-smi (or no GPU): Hopper.
    ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)
    ARCH=${ARCH:-90}
fi
case "$ARCH" in
    ''|*[!0-9a]*) echo "ARCH: expected compute capability digits such as 90, got '$ARCH'" >&2; exit 2 ;;
esac
commit=${HKV_COMMIT:-$(git -C "$hkv" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}

if [ $dry -eq 1 ]; then
    out="${args[1]}"
else
    out=$(mkdir -p "${args[1]}" && cd "${args[1]}" && pwd)
fi
bin="$out/$bench"
# HKV's own build: C++17, -O3, release (NDEBUG), pthread; include/ and benchmark/ on the include path.
cmd=("$nvcc" -O3 -std=c++17 -DNDEBUG --expt-relaxed-constexpr -Xcompiler -pthread
     -gencode "arch=compute_$ARCH,code=sm_$ARCH" -gencode "arch=compute_$ARCH,code=compute_$ARCH"
     -I"$hkv/include" -I"$hkv/benchmark")
# shellcheck disable=SC2206
[ -n "${EXTRA_NVCC_FLAGS:-}" ] && cmd+=(${EXTRA_NVCC_FLAGS})
# The grid driver includes HKV's benchmark file by name: only merlin_hashtable_benchmark's test_main is known to it.
driver="$(cd "$(dirname "$0")" && pwd)/hkv_benchmark_grid.cu"
if [ $plain -eq 0 ] && [ "$bench" = merlin_hashtable_benchmark ]; then
    [ -f "$driver" ] || { echo "no $driver beside this script" >&2; exit 2; }
    cmd+=("$driver" -o "$bin" -lpthread)
    what="$bench through hkv_benchmark_grid.cu"
else
    cmd+=("$src" -o "$bin" -lpthread)
    what="$bench"
fi

echo "peer: HierarchicalKV $commit, benchmark $what, sm_$ARCH"
echo "peer: ${cmd[*]}"
if [ $dry -eq 1 ]; then
    echo "peer: dry run, nothing built"
    exit 0
fi
command -v "$nvcc" >/dev/null || { echo "NVCC: '$nvcc' not found (set NVCC=/path/to/nvcc)" >&2; exit 2; }
echo "$commit" > "$out/hkv_commit.txt"
start=$(date +%s)
if ! "${cmd[@]}" > "$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log" >&2
    echo "peer: FAILED (log: $out/build.log)" >&2
    exit 1
fi
echo "peer: built $bin in $(( $(date +%s) - start )) s"
