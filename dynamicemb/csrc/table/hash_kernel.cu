#include <cuda_runtime.h>

#include "dynamicemb/csrc/table/hash.cuh"

namespace dynamicemb {
namespace detail {

__global__ void hash_keys_kernel(const uint64_t* __restrict__ keys,  // (n)
                                 uint64_t* __restrict__ out,         // (n)
                                 int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = accel_hash_key(keys[i]);
  }
}

}  // namespace detail

void launch_hash_keys(const uint64_t* keys, uint64_t* out, int64_t n, void* stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  detail::hash_keys_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(keys, out, n);
}

}  // namespace dynamicemb
