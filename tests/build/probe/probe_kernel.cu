// Fixture for tests/build: a small CUDA unit for the remote-cache round trip and the ptxas report.
#include <cuda_runtime.h>

#include <cstdint>

namespace probe {
namespace detail {

// A plain kernel: registers only.
__global__ void probe_scale_kernel(const float* __restrict__ x,  // (n)
                                   float* __restrict__ y,        // (n)
                                   float a, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

// A kernel with a dynamically indexed local array: ptxas must give it a stack frame.
__global__ void probe_stack_kernel(const int* __restrict__ idx,  // (n)
                                   float* __restrict__ y,        // (n)
                                   int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float local[64];
  for (int j = 0; j < 64; ++j) local[j] = y[(i + j) % n];
  for (int j = 0; j < 64; ++j) local[idx[(i + j) % n] & 63] += 1.0f;
  y[i] = local[idx[i] & 63];
}

}  // namespace detail

void launch_probe_scale(const float* x, float* y, float a, int64_t n, cudaStream_t s) {
  detail::probe_scale_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, a, n);
}

void launch_probe_stack(const int* idx, float* y, int64_t n, cudaStream_t s) {
  detail::probe_stack_kernel<<<(n + 255) / 256, 256, 0, s>>>(idx, y, n);
}

}  // namespace probe
