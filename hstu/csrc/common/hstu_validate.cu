// Device-side validation of an HSTU call's int32 vectors and the NaN fill of its outputs on a violation
// (hstu_validate.h says what and why).
#include "hstu/csrc/common/hstu_validate.h"

#include <cstdint>

#include "common/pdl.cuh"
#include "hstu/csrc/common/hstu_validate_block.cuh"

namespace hstu {
namespace {

// This library's claim word of the device error record (one per device context; device_errors.cuh).
__device__ int g_hstu_error_claim = 0;

constexpr int kValidateThreads = 512;
using validate::fill_u16;
using validate::kNoViolation;

__global__ void __launch_bounds__(kValidateThreads) hstu_validate_kernel(const HstuValidateParams v) {
  __shared__ unsigned long long s_first;
  // v.pdl: launched with programmatic serialization, the block waits here, before any global read, for the kernel
  // before it to complete (its writes visible); a no-op in a plain launch. No launch_dependents: what follows (the
  // planner) is a plain launch.
  accel::griddep_wait();
  validate::validate_block(v, &g_hstu_error_claim, &s_first, threadIdx.x, kValidateThreads);
}

__global__ void __launch_bounds__(kValidateThreads) hstu_scale_check_kernel(const HstuScaleCheckParams p) {
  __shared__ unsigned long long s_first;
  validate::check_scales_block(p, &g_hstu_error_claim, &s_first, threadIdx.x, kValidateThreads);
}

__global__ void hstu_poison_kernel(const HstuPoisonParams p) {
  if (*p.status == 0) return;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nt = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int j = 0; j < 4; ++j) {
    if (p.ptr[j] != nullptr) fill_u16(p.ptr[j], p.numel[j], p.nan_bits, t, nt);
  }
}

}  // namespace

cudaError_t hstu_validate(const HstuValidateParams& v, cudaStream_t stream) {
  return accel::launch_pdl(hstu_validate_kernel, dim3(1), kValidateThreads, 0, stream, v.pdl, v);
}

cudaError_t hstu_check_fp8_scales(const HstuScaleCheckParams& p, cudaStream_t stream) {
  hstu_scale_check_kernel<<<1, kValidateThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t hstu_poison_outputs(const HstuPoisonParams& p, cudaStream_t stream) {
  int64_t n = 0;
  for (int j = 0; j < 4; ++j) n += p.ptr[j] != nullptr ? p.numel[j] : 0;
  // Enough blocks to fill at a fair rate on the error path; a valid call costs one no-op block wave.
  constexpr int kThreads = 256;
  const int64_t want = (n + kThreads * 64 - 1) / (kThreads * 64);
  const int blocks = static_cast<int>(want < 1 ? 1 : want > 264 ? 264 : want);
  hstu_poison_kernel<<<blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t hstu_clear_device_error_claim(cudaStream_t stream) {
  void* addr = nullptr;
  cudaError_t err = cudaGetSymbolAddress(&addr, g_hstu_error_claim);
  if (err != cudaSuccess) return err;
  return cudaMemsetAsync(addr, 0, sizeof(int), stream);
}

int* hstu_error_claim_word(cudaStream_t stream) {
  static int* cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return nullptr;
  }
  if (cache[dev] == nullptr) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone) {
      cudaGetLastError();
      return nullptr;  // (resolved outside a capture only: it may load the module)
    }
    void* addr = nullptr;
    if (cudaGetSymbolAddress(&addr, g_hstu_error_claim) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    cache[dev] = static_cast<int*>(addr);
  }
  return cache[dev];
}

}  // namespace hstu
