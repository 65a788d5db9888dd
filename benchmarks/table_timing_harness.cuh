// Shared by the stand-alone hash-table timers (benchmarks/table_kernel_timing.cu, tools/dynamicemb_dev/evict_bench.cu):
// the per-kernel event hook, table_kernels.cuh with it, CUDA error checks, the timed instance (uint64 keys, fp32
// values, LRU), a 64-bit mixer and the table's empty-state fill. Included by relative path, so a timer built
// against another source tree (-I<tree>) still finds it.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

// Records an event after each kernel of an upsert (table_kernels.cuh calls the hook between its launches).
static cudaEvent_t g_ev[8];
static int g_ne = 0;
#define DYNAMICEMB_TABLE_PHASE_HOOK(stream)                          \
  do {                                                               \
    if (g_ne > 0 && g_ne < 8) cudaEventRecord(g_ev[g_ne++], stream); \
  } while (0)
#include "dynamicemb/csrc/table/table_kernels.cuh"

using namespace dynamicemb::table;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr int K = kKeyUInt64, V = kValueFp32, P = kPolicyLru;

__host__ __device__ __forceinline__ uint64_t smix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__global__ void init_table(uint64_t* keys, uint8_t* digests, uint64_t* scores, int64_t cap, uint8_t ed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cap; i += (int64_t)gridDim.x * blockDim.x) {
    keys[i] = kEmptyKey;
    digests[i] = ed;
    scores[i] = 0;
  }
}
