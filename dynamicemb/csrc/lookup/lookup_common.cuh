// Device helpers shared by the lookup kernels: value types, 4-wide loads/stores, fallback rows, grids.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/device_info.h"
#include "common/pdl.cuh"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/table/table_types.h"
#include "dynamicemb/csrc/table/value_types.cuh"

namespace dynamicemb {
namespace lookup {

using table::Val;

// N consecutive elements (N = 4: one 16-byte (fp32) or 8-byte (16-bit) access; N = 1: scalar).
template <int V, int N>
__device__ __forceinline__ void load_n(const typename Val<V>::T* p, float (&x)[N]) {
  using T = typename Val<V>::T;
  if constexpr (N == 4 && V == kValueFp32) {
    float4 v = *reinterpret_cast<const float4*>(p);
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
  } else if constexpr (N == 4) {
    uint2 v = *reinterpret_cast<const uint2*>(p);
    const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = Val<V>::to_f(h[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = Val<V>::to_f(p[k]);
  }
}
template <int V, int N>
__device__ __forceinline__ void store_n(typename Val<V>::T* p, const float (&x)[N]) {
  using T = typename Val<V>::T;
  if constexpr (N == 4 && V == kValueFp32) {
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  } else if constexpr (N == 4) {
    uint2 v;
    T* h = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = Val<V>::from_f(x[k]);
    *reinterpret_cast<uint2*>(p) = v;
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = Val<V>::from_f(x[k]);
  }
}

__device__ __forceinline__ table::Initializer train_init(const TableMeta& m) {
  table::Initializer in;
  in.kind = static_cast<int>(m.init_kind);
  in.a = static_cast<float>(m.init_a);
  in.b = static_cast<float>(m.init_b);
  in.mean = static_cast<float>(m.init_mean);
  in.std = static_cast<float>(m.init_std);
  in.value = static_cast<float>(m.init_value);
  in.init_cols = m.init_cols;
  in.fill = static_cast<float>(m.init_fill);
  in.seed = static_cast<uint64_t>(m.init_seed);
  return in;
}
__device__ __forceinline__ table::Initializer eval_init(const TableMeta& m) {
  table::Initializer in;
  in.kind = static_cast<int>(m.eval_kind);
  in.a = static_cast<float>(m.eval_a);
  in.b = static_cast<float>(m.eval_b);
  in.mean = static_cast<float>(m.eval_mean);
  in.std = static_cast<float>(m.eval_std);
  in.value = static_cast<float>(m.eval_value);
  in.init_cols = -1;
  in.fill = 0.f;
  in.seed = static_cast<uint64_t>(m.eval_seed);
  return in;
}

// Column `col` of the row read by an id that has no slot (refused / missing / reserved): training reads zeros
// (on_refused="zero") or its initializer value, eval the eval initializer (counter-based random numbers of the
// table: deterministic per key and column).
__device__ __forceinline__ float fallback_value(const TableMeta& m, bool train, uint64_t key, int64_t col) {
  if (train) {
    if (m.refused_zero) return 0.f;
    if (m.init_kind == table::kInitConstant) return static_cast<float>(m.init_value);
    const uint64_t clock = static_cast<uint64_t>(*reinterpret_cast<const int64_t*>(m.counters));
    return table::init_value(train_init(m), clock, key, col);
  }
  if (m.eval_kind == table::kInitConstant) return static_cast<float>(m.eval_value);
  return table::init_value(eval_init(m), 0, key, col);
}

// Programmatic dependent launch (lab, lookup_types.h kDedupPdl / kStepPdl; sm90+; common/pdl.cuh): a pass launched
// as a programmatic dependent of the pass before may start while that one drains; it waits for it (and so for
// everything before it: each such pass waits) before it touches what an earlier pass writes or reads.
// k<<<grid, block, 0, st>>>(args...), as a programmatic dependent of the stream's previous kernel when pdl.
template <typename... P, typename... A>
void launch_maybe_pdl(bool pdl, void (*k)(P...), unsigned grid, unsigned block, cudaStream_t st, A&&... args) {
  if (!pdl) {
    k<<<grid, block, 0, st>>>(static_cast<A&&>(args)...);
    return;
  }
  const cudaError_t e = accel::launch_pdl(k, dim3(grid), dim3(block), 0, st, true, static_cast<A&&>(args)...);
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: launch: ") + cudaGetErrorString(e));
}

inline void check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: ") + what + ": " + cudaGetErrorString(e));
}

// Blocks for grid-stride loops bounded by a device-side count: enough to fill every SM.
inline int persistent_blocks(int per_sm) { return accel::current_device_sms() * per_sm; }

// Blocks of `kernel` (block threads, no dynamic shared memory) resident on one SM at once (>= 1).
template <typename K>
inline int resident_per_sm(K kernel, int block) {
  int b = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, block, 0) != cudaSuccess) {
    cudaGetLastError();
    b = 1;
  }
  return b > 0 ? b : 1;
}

inline unsigned blocks_for(int64_t items, int per_block) {
  int64_t b = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 0x7fffffff ? 0x7fffffff : b));
}

// v clamped to [0, n] (offsets from the caller may be out of range; validated on the host only when asked).
__device__ __forceinline__ int64_t clamp_off(int64_t v, int64_t n) { return v < 0 ? 0 : (v > n ? n : v); }

// dst[0, N) += v atomically (N = 4 on sm90+: one 16-byte vector atomic).
template <int N>
__device__ __forceinline__ void red_n(float* dst, const float (&v)[N]) {
  if constexpr (N == 4) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(dst), make_float4(v[0], v[1], v[2], v[3]));
#else
#pragma unroll
    for (int e = 0; e < N; ++e) atomicAdd(dst + e, v[e]);
#endif
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) atomicAdd(dst + e, v[e]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Warp-uniform: the bag (among the warp's nb <= 32, lane m holding bag m's end offset `bend`) that position pos
// falls in: the first m with bend_m > pos (offsets are monotone). Binary search by shuffles.
__device__ __forceinline__ int warp_bag_of(int64_t bend, int nb, int64_t pos) {
  int lo = 0, hi = nb - 1;
#pragma unroll
  for (int it = 0; it < 5; ++it) {
    const int mid = (lo + hi) >> 1;
    const int64_t e = __shfl_sync(0xffffffffu, bend, mid);
    if (lo < hi) {
      if (e > pos) hi = mid;
      else lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace lookup
}  // namespace dynamicemb
