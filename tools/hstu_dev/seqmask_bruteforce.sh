#!/usr/bin/env bash
# Host-only brute force of SeqMask (hstu/csrc/common/hstu_common.cuh) against hstu_mask's rules, both conventions: allowed()
# exact, key_range / row_range / bwd_work_tiles (with the context gap) never miss an allowed element, tile_full /
# tile_full_targets / full_tiles never claim a masked one, the FP8 forward's fp8_full_tiles equals tile_full_targets /
# tile_full. Every Lk <= 14, Lq, contexts, targets, groups, windows in
# the API's domain. No GPU, no torch: g++ only (about 40 s).
#   tools/hstu_dev/seqmask_bruteforce.sh
set -euo pipefail
F="$(cd "$(dirname "$0")/../.." && pwd)/hstu/csrc/common/hstu_common.cuh"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
a=$(grep -n "^struct SeqMask {" "$F" | cut -d: -f1)
c=$(grep -n "^__device__ __forceinline__ SeqInfo seq_info" "$F" | cut -d: -f1)
d=$(grep -n "^template <int BM, int BN, bool kSkipGap>" "$F" | cut -d: -f1)
e=$(grep -n "^}  // namespace hstu" "$F" | cut -d: -f1)
{
  printf '#include <algorithm>\n#include <cstdint>\n#include <climits>\nusing std::min;\nusing std::max;\n'
  printf '#define __device__\n#define __forceinline__ inline\nnamespace hstu {\n'
  sed -n "${a},$((c - 1))p" "$F"
  sed -n "${d},$((e - 1))p" "$F"
  # the Hopper FP8 backward's full-tile bounds (hstu_bwd_fp8_sm90_kernel.cuh: fp8_bwd_full_rows)
  awk '/^__device__ __forceinline__ void fp8_bwd_full_rows/ {f = 1} f {print} f && /^}/ {exit}' \
      "$(dirname "$F")/../sm90/hstu_bwd_fp8_sm90_kernel.cuh"
  # the Hopper FP8 forward's (hstu_fwd_fp8_sm90_kernel.cuh: fp8_full_tiles)
  awk '/^__device__ __forceinline__ void fp8_full_tiles/ {f = 1} f {print} f && /^}/ {exit}' \
      "$(dirname "$F")/../sm90/hstu_fwd_fp8_sm90_kernel.cuh"
  printf '}\n'
} > "$T/mask.h"
cp "$(dirname "$0")/seqmask_bruteforce.cc" "$T/t.cc"
g++ -O2 -std=c++17 -I"$T" "$T/t.cc" -o "$T/t"
"$T/t"
