// Device-side input validation without a host synchronization (both packages).
//
// Kernels that check values living on the device (offsets, lengths, ids, weights) report the first violation
// into a DeviceErrorRecord in pinned host memory mapped into every device (UVA). The host reads it with a plain
// load (no sync) at the start of the package's next call and raises there; `check_errors()` synchronizes first.
// Python side: common/device_errors.py (copied into each package as `_device_errors.py`).
//
// Protocol: a reporter claims the record with an atomicCAS on `claim`, a word in DEVICE memory (a `__device__`
// variable of the reporting translation unit: atomics on host memory are not atomic across PCIe), writes the
// fields, fences (system scope), then publishes `arg` and the record's global `pending` word. The host reads
// `pending`, then the fields; it clears the host fields and resets `claim` on the stream (clear_device_claim).
#pragma once

#include <cstdint>

namespace accel {

constexpr int kMaxErrorDevices = 64;

// One violation. `arg` names the argument by a package-defined code (0: none), `rule` the check that failed.
struct DeviceErrorRecord {
  int32_t arg;
  int32_t rule;
  int64_t index;  // element of the argument (e.g. the sequence b or the id's position)
  int64_t value;  // the offending value (float checks store the value's double bits)
  int64_t bound;  // the limit it broke (or a second value, e.g. the neighbour of a decreasing offset)
};

// Layout of the pinned block: one `pending` word (the index of the last reporting device + 1, 0 when clear),
// then one record per device. Python reads it with the same offsets (device_errors.py: _HEADER_BYTES, _RECORD).
struct DeviceErrorBlock {
  int32_t pending;
  int32_t pad;
  DeviceErrorRecord records[kMaxErrorDevices];
};
static_assert(sizeof(DeviceErrorRecord) == 32, "device_errors.py reads 32-byte records");
static_assert(sizeof(DeviceErrorBlock) == 8 + 32 * kMaxErrorDevices, "device_errors.py reads this layout");

#ifdef __CUDACC__
// Reports one violation into `block` (device pointer of the pinned block) unless one is already claimed on this
// device. `claim` is the reporting translation unit's `__device__ int` (see the file comment).
__device__ inline void report_device_error(DeviceErrorBlock* block, int* claim, int device, int32_t arg,
                                           int32_t rule, int64_t index, int64_t value, int64_t bound) {
  if (block == nullptr || device < 0 || device >= kMaxErrorDevices || atomicCAS(claim, 0, 1) != 0) return;
  DeviceErrorRecord* r = &block->records[device];
  volatile DeviceErrorRecord* vr = r;
  vr->rule = rule;
  vr->index = index;
  vr->value = value;
  vr->bound = bound;
  __threadfence_system();
  vr->arg = arg;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&block->pending) = device + 1;
}
#endif

}  // namespace accel

#ifndef __CUDACC_RTC__
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>

namespace accel {

// The package's pinned, mapped error block, allocated at the first call (cudaHostAlloc, portable + mapped). Under
// unified addressing (every 64-bit CUDA platform) kernels use the host address as is. A failed allocation (e.g.
// attempted during a CUDA-graph capture) is retried at the next call; nullptr until then (nothing is recorded).
// `Tag` keeps the two packages' blocks apart even if both libraries' symbols were merged.
template <class Tag>
struct DeviceErrorBlockHolder {
  static std::atomic<DeviceErrorBlock*>& ptr() {
    static std::atomic<DeviceErrorBlock*> p{nullptr};
    return p;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
};

template <class Tag>
DeviceErrorBlock* device_error_block() {
  DeviceErrorBlock* b = DeviceErrorBlockHolder<Tag>::ptr().load(std::memory_order_acquire);
  if (b != nullptr) return b;
  std::lock_guard<std::mutex> lock(DeviceErrorBlockHolder<Tag>::mutex());
  b = DeviceErrorBlockHolder<Tag>::ptr().load(std::memory_order_relaxed);
  if (b != nullptr) return b;
  void* p = nullptr;
  if (cudaHostAlloc(&p, sizeof(DeviceErrorBlock), cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  b = static_cast<DeviceErrorBlock*>(p);
  *b = DeviceErrorBlock{};
  DeviceErrorBlockHolder<Tag>::ptr().store(b, std::memory_order_release);
  return b;
}

// The block if it was allocated, else nullptr (never allocates, never touches CUDA).
template <class Tag>
DeviceErrorBlock* device_error_block_if_allocated() {
  return DeviceErrorBlockHolder<Tag>::ptr().load(std::memory_order_acquire);
}

}  // namespace accel
#endif
