// The device attributes that planners and launchers read on every call (SM count, compute capability, per-block
// opt-in shared memory): asked of the driver once per device and process (no sync), then read from one cache.
// Shared by both packages; callers pass the value to assume where the driver cannot be asked.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

namespace accel {

struct DeviceInfo {
  int sms = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int max_smem_optin = 0;  // bytes per block
};

namespace device_info_detail {

constexpr int kMaxDevices = 64;

struct Slot {
  std::atomic<int> ready{0};
  std::atomic<int> v[4] = {};  // sms, cc_major, cc_minor, max_smem_optin
};

inline Slot* slots() {
  static Slot s[kMaxDevices];
  return s;
}

}  // namespace device_info_detail

// Attributes of CUDA device `dev` (a failed query is returned, not cached; racing first calls store equal values).
inline cudaError_t device_info(int dev, DeviceInfo& out) {
  if (dev < 0 || dev >= device_info_detail::kMaxDevices) return cudaErrorInvalidDevice;
  device_info_detail::Slot& s = device_info_detail::slots()[dev];
  if (s.ready.load(std::memory_order_acquire) == 0) {
    int v[4] = {};
    const cudaDeviceAttr attrs[4] = {cudaDevAttrMultiProcessorCount, cudaDevAttrComputeCapabilityMajor,
                                     cudaDevAttrComputeCapabilityMinor, cudaDevAttrMaxSharedMemoryPerBlockOptin};
    for (int i = 0; i < 4; ++i) {
      const cudaError_t err = cudaDeviceGetAttribute(&v[i], attrs[i], dev);
      if (err != cudaSuccess) return err;
    }
    if (v[0] <= 0) v[0] = 1;
    for (int i = 0; i < 4; ++i) s.v[i].store(v[i], std::memory_order_relaxed);
    s.ready.store(1, std::memory_order_release);
  }
  out.sms = s.v[0].load(std::memory_order_relaxed);
  out.cc_major = s.v[1].load(std::memory_order_relaxed);
  out.cc_minor = s.v[2].load(std::memory_order_relaxed);
  out.max_smem_optin = s.v[3].load(std::memory_order_relaxed);
  return cudaSuccess;
}

// The current device's attributes.
inline cudaError_t current_device_info(DeviceInfo& out) {
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  return err != cudaSuccess ? err : device_info(dev, out);
}

// SMs assumed where the driver cannot be asked (an H100 SXM / H200, the GPU the launch rules are tuned on).
constexpr int kSmsIfUnknown = 132;

namespace device_info_detail {

// One attribute of device `dev` (the current device where dev < 0); `fallback` where the driver cannot be asked (the
// error is cleared).
inline int field(int dev, int DeviceInfo::*member, int fallback) {
  DeviceInfo d;
  if ((dev < 0 ? current_device_info(d) : device_info(dev, d)) != cudaSuccess) {
    cudaGetLastError();
    return fallback;
  }
  return d.*member;
}

}  // namespace device_info_detail

// SMs of device `dev` / of the current device; compute capability major of the current device.
inline int device_sms(int dev, int fallback = kSmsIfUnknown) {
  return device_info_detail::field(dev, &DeviceInfo::sms, fallback);
}
inline int current_device_sms(int fallback = kSmsIfUnknown) {
  return device_info_detail::field(-1, &DeviceInfo::sms, fallback);
}
inline int current_device_cc_major(int fallback) {
  return device_info_detail::field(-1, &DeviceInfo::cc_major, fallback);
}

}  // namespace accel
