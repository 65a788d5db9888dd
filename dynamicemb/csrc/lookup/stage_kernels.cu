// Device staging of caching tables over the uva store (stage_common.h has the algorithm, shared with the CPU
// twin): the probe (stamping hits), one thread per id for stage_one, one per id for unplace_one, and the report of
// the first failure. Four launches per step whatever the number of tables; a step without misses returns from
// the last three at once (every thread reads its found flag and exits).
#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/stage_common.h"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kStageBlock = 256;

// Device policy: bucket spin locks (the tables' eviction locks: no other kernel runs on these tables meanwhile),
// key, score and stamp reads from L2 (another SM may have written them under the same lock), keys published after
// a fence. Host branches are never called (the host twin uses HostStageAtomics).
struct DeviceStageAtomics {
  __host__ __device__ static uint64_t ld(const uint64_t* a) {
#if defined(__CUDA_ARCH__)
    return __ldcg(reinterpret_cast<const unsigned long long*>(a));
#else
    return *a;
#endif
  }
  __host__ __device__ static void add(int64_t* a, int64_t v) {
#if defined(__CUDA_ARCH__)
    atomicAdd(reinterpret_cast<unsigned long long*>(a), static_cast<unsigned long long>(v));
#endif
  }
  __host__ __device__ static bool claim(int32_t* f) {
#if defined(__CUDA_ARCH__)
    return atomicCAS(f, 0, 1) == 0;
#else
    return false;
#endif
  }
  __host__ __device__ static void publish(int64_t* rec, int32_t rule) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    *reinterpret_cast<volatile int64_t*>(rec) = rule;
#endif
  }
  __host__ __device__ static void publish_key(uint64_t* a, uint64_t k) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    *reinterpret_cast<volatile unsigned long long*>(a) = k;
#endif
  }
  __host__ __device__ static void lock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    while (atomicCAS(l, 0, 1) != 0) __nanosleep(64);
    __threadfence();
#endif
  }
  __host__ __device__ static void unlock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    atomicExch(l, 0);
#endif
  }
  __host__ __device__ static void copy_row(void* dst, const void* src, int64_t bytes) {
#if defined(__CUDA_ARCH__)
    const uintptr_t al = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
    if ((al & 15) == 0 && (bytes & 15) == 0) {
      // 8 loads in flight before their stores: one round trip per 128 bytes (a host row is ~1 us away)
      const uint4* s4 = static_cast<const uint4*>(src);
      uint4* d4 = static_cast<uint4*>(dst);
      const int64_t n4 = bytes >> 4;
      for (int64_t b = 0; b < n4; b += 8) {
        uint4 r[8];
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (b + k < n4) r[k] = __ldcg(s4 + b + k);
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (b + k < n4) d4[b + k] = r[k];
      }
    } else {
      for (int64_t b = 0; b < bytes; b += 2)
        *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(dst) + b) =
            *reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(src) + b);
    }
#endif
  }
};

__global__ void __launch_bounds__(kStageBlock) stage_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x; i < p.n; i += stride)
    stage_one<DeviceStageAtomics>(p, i);
}

__global__ void __launch_bounds__(kStageBlock) unplace_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x; i < p.n; i += stride)
    unplace_one<DeviceStageAtomics>(p, i);
}

}  // namespace detail

void launch_cache_stage(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  launch_cache_probe(probe, stream);
  if (p.n > 0) {
    const unsigned grid = blocks_for(p.n, detail::kStageBlock);
    const unsigned cap = static_cast<unsigned>(persistent_blocks(2048 / detail::kStageBlock));
    detail::stage_kernel<<<grid < cap ? grid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache stage");
    detail::unplace_kernel<<<grid < cap ? grid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache unplace");
  }
  if (report) launch_report_stage(p.first_fail, stream);
}

}  // namespace lookup
}  // namespace dynamicemb
