// Device staging of caching tables over the uva store (stage_common.h has the algorithm, shared with the CPU
// twin): the probe (stamping hits), one thread per id for stage_one, the order of the row copies by store address
// (a one-block scan of the bins' counts, a scatter of the records), kMoveLanes threads per record for the victims'
// copies, then for the stored rows' copies (in one launch with unplace_one, one thread per id), and the report of
// the first failure. Seven launches per step whatever the number of tables; a step without misses returns from
// the last six at once (every thread reads its found flag, or the record count, and exits).
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
  // A record's copies counted into their bins (stage_one; the scan and the scatter order them).
  __host__ __device__ static void count_move(const StageParams& p, int t, int64_t out, int64_t in) {
#if defined(__CUDA_ARCH__)
    const int64_t half = static_cast<int64_t>(p.num_tables) * p.bins_per_table;  // (the stored rows' bins)
    if (out >= 0) atomicAdd(p.move_bins + move_bin(p, t, out), 1);
    if (in >= 0) atomicAdd(p.move_bins + half + move_bin(p, t, in), 1);
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

// kMoveLanes threads per move record (a 512-byte row: 32 16-byte words, 4 per lane, all in flight).
constexpr int kMoveLanes = 8;
constexpr int kScanThreads = 1024;

// One block: the bins' counts (victims' bins, then stored rows' bins) become their first positions in move_order
// (an exclusive scan over both halves); move_split = [victims' copies, all copies]. Nothing when no record.
__global__ void __launch_bounds__(kScanThreads) move_scan_kernel(StageParams p) {
  if (*p.move_count == 0) return;
  const int64_t half = static_cast<int64_t>(p.num_tables) * p.bins_per_table, total = 2 * half;
  const int64_t per = (total + kScanThreads - 1) / kScanThreads;
  const int64_t b0 = threadIdx.x * per, b1 = b0 + per < total ? b0 + per : total;
  int32_t sum = 0;
  for (int64_t b = b0; b < b1; ++b) sum += p.move_bins[b];
  // block exclusive scan of the per-thread sums: within warps, then over the warps' totals
  __shared__ int32_t warp_total[kScanThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t inc = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += v;
  }
  if (lane == 31) warp_total[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int32_t w = warp_total[lane];  // (kScanThreads / 32 == 32 warps)
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += v;
    }
    warp_total[lane] = w;  // inclusive over the warps
  }
  __syncthreads();
  int32_t run = inc - sum + (warp > 0 ? warp_total[warp - 1] : 0);
  for (int64_t b = b0; b < b1; ++b) {
    if (b == half) p.move_split[0] = run;
    const int32_t v = p.move_bins[b];
    p.move_bins[b] = run;
    run += v;
  }
  if (threadIdx.x == kScanThreads - 1) p.move_split[1] = run;
}

// Every record's copies into their bins' positions (the order within a bin is the atomics' order).
__global__ void __launch_bounds__(kStageBlock) move_scatter_kernel(StageParams p) {
  const int64_t count = *p.move_count, half = static_cast<int64_t>(p.num_tables) * p.bins_per_table;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x; r < count; r += stride) {
    const int64_t* rec = p.moves + kMoveWords * r;
    const int t = static_cast<int>(rec[3] & (kMoveDone - 1));
    if (rec[1] >= 0) p.move_order[atomicAdd(p.move_bins + move_bin(p, t, rec[1]), 1)] = static_cast<int32_t>(r);
    if (rec[2] >= 0)
      p.move_order[atomicAdd(p.move_bins + half + move_bin(p, t, rec[2]), 1)] = static_cast<int32_t>(r);
  }
}

// The victims' copies, kMoveLanes threads per record, consecutive groups on consecutive positions of move_order.
__global__ void __launch_bounds__(kStageBlock) move_out_kernel(StageParams p) {
  const int64_t end = p.move_split[0];
  const int lane = threadIdx.x % kMoveLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / kMoveLanes);
  for (int64_t k = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / kMoveLanes; k < end; k += stride)
    move_out_one<DeviceStageAtomics>(p, p.move_order[k], lane, kMoveLanes);
}

// The placeholders leave (unplace_one over every id), then the stored rows' copies in order (independent: a
// placeholder's slot receives no row).
__global__ void __launch_bounds__(kStageBlock) move_in_unplace_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = tid; i < p.n; i += stride) unplace_one<DeviceStageAtomics>(p, i);
  const int64_t begin = p.move_split[0], end = p.move_split[1];
  const int lane = threadIdx.x % kMoveLanes;
  for (int64_t k = begin + tid / kMoveLanes; k < end; k += stride / kMoveLanes)
    move_in_one<DeviceStageAtomics>(p, p.move_order[k], lane, kMoveLanes);
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
    const unsigned sgrid = grid < cap ? grid : cap;
    detail::move_scan_kernel<<<1, detail::kScanThreads, 0, st>>>(p);
    check_launch("cache move scan");
    detail::move_scatter_kernel<<<sgrid, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache move scatter");
    const unsigned mgrid = blocks_for(p.n * detail::kMoveLanes, detail::kStageBlock);
    detail::move_out_kernel<<<mgrid < cap ? mgrid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache move out");
    detail::move_in_unplace_kernel<<<mgrid < cap ? mgrid : cap, detail::kStageBlock, 0, st>>>(p);
    check_launch("cache move in, unplace");
  }
  if (report) launch_report_stage(p.first_fail, stream);
}

}  // namespace lookup
}  // namespace dynamicemb
