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

__global__ void __launch_bounds__(kCheckBlock) validate_kernel(ValidateParams p, accel::DeviceErrorBlock* block,
                                                               int device) {
  const int64_t items = p.n > p.num_bags + 1 ? p.n : p.num_bags + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCheckBlock;
  bool seen = false;  // this thread saw a violation that empties the batch
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kCheckBlock + threadIdx.x; i < items; i += stride) {
    if (i < p.n) {
      const uint64_t k = p.ids[i];
      if (p.uint64_keys) {
        if (table::is_reserved_key(k)) fail(p, seen, block, device, kArgIds, kRuleReservedId, i, static_cast<int64_t>(k), 0);
      } else if (static_cast<int64_t>(k) < 0) {
        fail(p, seen, block, device, kArgIds, kRuleNegativeId, i, static_cast<int64_t>(k), 0);
      }
      if (p.psw != nullptr) {
        const float w = p.psw[i];
        if (!isfinite(w)) {  // reported only: the optimizer's non-finite policy keeps it out of the rows
          const double d = static_cast<double>(w);
          report(block, device, kArgPerSampleWeights, kRuleNonFinite, i, *reinterpret_cast<const int64_t*>(&d), 0);
        }
      }
    }
    if (i > p.num_bags) continue;
    const int64_t o = p.offsets[i];
    if (i == p.num_bags) {
      if (o != p.n) {
        if (p.lengths_only) fail(p, seen, block, device, kArgLengths, kRuleLengthSum, i, o, p.n);
        else fail(p, seen, block, device, kArgOffsets, kRuleLastOffset, i, o, p.n);
      }
      continue;
    }
    if (i == 0 && o != 0) fail(p, seen, block, device, kArgOffsets, kRuleFirstOffset, 0, o, 0);
    const int64_t next = p.offsets[i + 1];
    if (p.lengths_only) {
      const int64_t len = p.lengths[i];
      if (len < 0) fail(p, seen, block, device, kArgLengths, kRuleNegativeLength, i, len, 0);
      else if (next < o) mark_bad(p, seen);  // an overflowed cumsum
      continue;
    }
    if (o > next) fail(p, seen, block, device, kArgOffsets, kRuleDecreasing, i, o, next);
    if (p.lengths != nullptr && p.lengths[i] != next - o)
      fail(p, seen, block, device, kArgLengths, kRuleLengthMismatch, i, p.lengths[i], next - o);
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
  const unsigned grid = blocks_for(items, detail::kCheckBlock);
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
