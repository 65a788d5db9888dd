// Device-side checks of one embedding step's inputs (validate_types.h): one grid-stride launch over the ids and
// the bags. Every violation sets the step's `bad` flag (the dedup then treats the batch as empty); the first one
// claimed on this device is written into the package's error record (common/device_errors.cuh) for the host.
// This translation unit owns the device's claim word, so every dynamicemb report goes through it.
#include <cmath>

#include "common/device_errors.cuh"
#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {
namespace detail {

struct ErrorTag {};  // keeps dynamicemb's block apart from hstu_attn's

__device__ int g_claim;  // 1 while this device's record holds an unread report (reset by clear_error_claim)

constexpr int kCheckBlock = 256;

__device__ __forceinline__ void report(accel::DeviceErrorBlock* block, int device, int32_t arg, int32_t rule,
                                       int64_t index, int64_t value, int64_t bound) {
  accel::report_device_error(block, &g_claim, device, arg, rule, index, value, bound);
}

// Marks the batch bad: the step's flag (`bad`), or this thread's share of its block's slot (block_bad).
__device__ __forceinline__ void mark_bad(const ValidateParams& p, bool& seen) {
  if (p.block_bad == nullptr) *reinterpret_cast<volatile int32_t*>(p.bad) = 1;
  seen = true;
}

__device__ __forceinline__ void fail(const ValidateParams& p, bool& seen, accel::DeviceErrorBlock* block,
                                     int device, int32_t arg, int32_t rule, int64_t index, int64_t value,
                                     int64_t bound) {
  mark_bad(p, seen);
  report(block, device, arg, rule, index, value, bound);
}

// kCheckUnroll items per thread and round (at stride apart), all their loads issued before any check: ~16-24 MB
// of ids, offsets and lengths read with 4x the loads in flight of one item at a time.
constexpr int kCheckUnroll = 4;

__global__ void __launch_bounds__(kCheckBlock) validate_kernel(ValidateParams p, accel::DeviceErrorBlock* block,
                                                               int device) {
  constexpr int U = kCheckUnroll;
  if (p.pdl) accel::griddep_launch_dependents();
  const int64_t items = p.n > p.num_bags + 1 ? p.n : p.num_bags + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCheckBlock;
  bool seen = false;  // this thread saw a violation that empties the batch
  for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * kCheckBlock + threadIdx.x; i0 < items; i0 += stride * U) {
    uint64_t k[U];
    float w[U];
    int64_t o[U], nx[U], len[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = i0 + u * stride;
      k[u] = i < p.n ? p.ids[i] : 0;
      w[u] = p.psw != nullptr && i < p.n ? p.psw[i] : 0.f;
      o[u] = i <= p.num_bags ? p.offsets[i] : 0;
      nx[u] = i < p.num_bags ? p.offsets[i + 1] : 0;
      len[u] = p.lengths != nullptr && i < p.num_bags ? p.lengths[i] : 0;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = i0 + u * stride;
      if (i >= items) break;
      if (i < p.n) {
        if (p.uint64_keys) {
          if (table::is_reserved_key(k[u]))
            fail(p, seen, block, device, kArgIds, kRuleReservedId, i, static_cast<int64_t>(k[u]), 0);
        } else if (static_cast<int64_t>(k[u]) < 0) {
          fail(p, seen, block, device, kArgIds, kRuleNegativeId, i, static_cast<int64_t>(k[u]), 0);
        }
        if (p.psw != nullptr && !isfinite(w[u])) {  // reported only: the optimizer's non-finite policy keeps it out
          const double d = static_cast<double>(w[u]);
          report(block, device, kArgPerSampleWeights, kRuleNonFinite, i, *reinterpret_cast<const int64_t*>(&d), 0);
        }
      }
      if (i > p.num_bags) continue;
      if (i == p.num_bags) {
        if (o[u] != p.n) {
          if (p.lengths_only) fail(p, seen, block, device, kArgLengths, kRuleLengthSum, i, o[u], p.n);
          else fail(p, seen, block, device, kArgOffsets, kRuleLastOffset, i, o[u], p.n);
        }
        continue;
      }
      if (i == 0 && o[u] != 0) fail(p, seen, block, device, kArgOffsets, kRuleFirstOffset, 0, o[u], 0);
      if (p.lengths_only) {
        if (len[u] < 0) fail(p, seen, block, device, kArgLengths, kRuleNegativeLength, i, len[u], 0);
        else if (nx[u] < o[u]) mark_bad(p, seen);  // an overflowed cumsum
        continue;
      }
      if (o[u] > nx[u]) fail(p, seen, block, device, kArgOffsets, kRuleDecreasing, i, o[u], nx[u]);
      if (p.lengths != nullptr && len[u] != nx[u] - o[u])
        fail(p, seen, block, device, kArgLengths, kRuleLengthMismatch, i, len[u], nx[u] - o[u]);
    }
  }
  if (p.block_bad != nullptr) {  // every thread reaches this (no early return above)
    const int any = __syncthreads_or(seen);
    if (threadIdx.x == 0) p.block_bad[blockIdx.x] = any;
  }
}

__global__ void report_nonfinite_kernel(const int64_t* counts, int64_t* seen, accel::DeviceErrorBlock* block,
                                        int device) {
  const int64_t total = counts[0] + counts[1];
  if (total != *seen) {
    report(block, device, kArgGradient, kRuleNonFiniteGrad, 0, total - *seen, total);
    *seen = total;
  }
}

// The first failure of a device staging (stage_common.h): a cache bucket without room reports on
// hbm_budget_bytes, a full store bucket on max_capacity.
__global__ void report_stage_kernel(const int64_t* first_fail, accel::DeviceErrorBlock* block, int device) {
  const int64_t rule = first_fail[0];
  if (rule == 0) return;
  report(block, device, rule == kRuleStoreFull ? kArgMaxCapacity : kArgHbmBudget, static_cast<int32_t>(rule),
         first_fail[1], first_fail[2], first_fail[3]);
}

inline int current_device() {
  int d = 0;
  cudaGetDevice(&d);
  return d;
}

}  // namespace detail

int64_t error_block_address() {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(accel::device_error_block<detail::ErrorTag>()));
}

void clear_error_claim(int device, void* stream) {
  if (accel::device_error_block<detail::ErrorTag>() == nullptr) return;  // nothing was ever reported
  int old = 0;
  cudaGetDevice(&old);
  cudaSetDevice(device);
  void* claim = nullptr;
  cudaError_t e = cudaGetSymbolAddress(&claim, detail::g_claim);
  if (e == cudaSuccess) e = cudaMemsetAsync(claim, 0, sizeof(int), static_cast<cudaStream_t>(stream));
  cudaSetDevice(old);
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb: clear_device_error: ") + cudaGetErrorString(e));
}

int launch_validate(const ValidateParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t items = p.n > p.num_bags + 1 ? p.n : p.num_bags + 1;
  const unsigned grid = blocks_for(items, detail::kCheckBlock * detail::kCheckUnroll);
  unsigned cap = static_cast<unsigned>(persistent_blocks(2048 / detail::kCheckBlock));
  if (p.block_bad != nullptr && cap > static_cast<unsigned>(kValidateSlots)) cap = kValidateSlots;
  const unsigned blocks = grid < cap ? grid : cap;
  detail::validate_kernel<<<blocks, detail::kCheckBlock, 0, st>>>(
      p, accel::device_error_block<detail::ErrorTag>(), detail::current_device());
  check_launch("validate");
  return static_cast<int>(blocks);
}

void launch_report_nonfinite(const int64_t* counts, int64_t* seen, void* stream) {
  detail::report_nonfinite_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      counts, seen, accel::device_error_block<detail::ErrorTag>(), detail::current_device());
  check_launch("report non-finite");
}

void launch_report_stage(const int64_t* first_fail, void* stream) {
  detail::report_stage_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      first_fail, accel::device_error_block<detail::ErrorTag>(), detail::current_device());
  check_launch("report staging");
}

}  // namespace lookup
}  // namespace dynamicemb
