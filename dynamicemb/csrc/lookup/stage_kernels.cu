// Device staging of caching tables over the uva store (stage_common.h has the algorithm, shared with the CPU
// twin): the probe (stamping hits), one thread per id for stage_one, kMoveLanes threads per move record for
// move_one (the row copies, out of the bucket locks), one per id for unplace_one, and the report of the first
// failure. Five launches per step whatever the number of tables; a step without misses returns from the last four
// at once (every thread reads its found flag, or the record count, and exits).
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
  __host__ __device__ static int64_t claim_index(int64_t* count) {
#if defined(__CUDA_ARCH__)
    return static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(count), 1ull));
#else
    return 0;
#endif
  }
  // Lane `lane` of `lanes` copies its part of a row: 16-byte words lane, lane + lanes, ..., 4 loads in flight
  // before their stores (a host row is ~1 us away); 2-byte words when the row is not 16-byte aligned.
  __host__ __device__ static void copy_row(void* dst, const void* src, int64_t bytes, int lane, int lanes) {
#if defined(__CUDA_ARCH__)
    const uintptr_t al = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
    if ((al & 15) == 0 && (bytes & 15) == 0) {
      const uint4* s4 = static_cast<const uint4*>(src);
      uint4* d4 = static_cast<uint4*>(dst);
      const int64_t n4 = bytes >> 4;
      for (int64_t b = lane; b < n4; b += 4 * lanes) {
        uint4 r[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (b + k * lanes < n4) r[k] = __ldcg(s4 + b + k * lanes);
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (b + k * lanes < n4) d4[b + k * lanes] = r[k];
      }
    } else {
      for (int64_t b = 2 * lane; b < bytes; b += 2 * lanes)
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

// kMoveLanes threads per move record (a 512-byte row: 32 16-byte words, 4 per lane, all in flight); the records
// counted by stage_kernel (a gated or warm launch: none).
constexpr int kMoveLanes = 8;

__global__ void __launch_bounds__(kStageBlock) move_kernel(StageParams p) {
  const int64_t count = static_cast<int64_t>(DeviceStageAtomics::ld(reinterpret_cast<const uint64_t*>(p.move_count)));
  const int lane = threadIdx.x % kMoveLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / kMoveLanes);
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / kMoveLanes; r < count;
       r += stride)
    move_one<DeviceStageAtomics>(p, r, lane, kMoveLanes);
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
    const unsigned mgrid = blocks_for(p.n * detail::kMoveLanes, detail::kStageBlock);
    detail::move_kernel<<<mgrid < cap ? mgrid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache move");
    detail::unplace_kernel<<<grid < cap ? grid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache unplace");
  }
  if (report) launch_report_stage(p.first_fail, stream);
}

}  // namespace lookup
}  // namespace dynamicemb
