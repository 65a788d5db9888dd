// The current device's SM count and compute capability for the launchers' grid sizes and feature checks: asked of
// the driver once per device and process (cudaDeviceGetAttribute needs no sync), then read from a cache.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace dynamicemb {
namespace device_info_detail {

constexpr int kMaxCachedDevices = 64;

// The attribute of the current device, or `fallback` when there is none or the query fails (not cached then).
inline int cached_device_attribute(std::atomic<int> (&cache)[kMaxCachedDevices], cudaDeviceAttr attr, int fallback) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) {
    cudaGetLastError();
    return fallback;
  }
  if (dev < kMaxCachedDevices) {
    const int v = cache[dev].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess || v <= 0) {
    cudaGetLastError();
    return fallback;
  }
  if (dev < kMaxCachedDevices) cache[dev].store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace device_info_detail

// Streaming multiprocessors of the current device (80 when it cannot be asked).
inline int sm_count() {
  static std::atomic<int> cache[device_info_detail::kMaxCachedDevices] = {};
  return device_info_detail::cached_device_attribute(cache, cudaDevAttrMultiProcessorCount, 80);
}

// Compute capability major of the current device (0 when it cannot be asked).
inline int cc_major() {
  static std::atomic<int> cache[device_info_detail::kMaxCachedDevices] = {};
  return device_info_detail::cached_device_attribute(cache, cudaDevAttrComputeCapabilityMajor, 0);
}

}  // namespace dynamicemb
