// Shared by the stand-alone hash-table timers (benchmarks/table_kernel_timing.cu, tools/dynamicemb_dev/evict_bench.cu
// and assign_bench.cu): the per-kernel event hook, table_kernels.cuh with it, CUDA error checks, the timed instance
// (uint64 keys, fp32 values, LRU), a 64-bit mixer, an empty table, the median and the timed op. Included by relative
// path, so a timer built against another source tree (-I<tree>) still finds it.
#pragma once
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

// Keeps the stream busy so that the timed launches behind it queue up.
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// A table of cap slots (buckets of 128) and dim fp32 values per row, every slot empty (enqueued on s).
inline TableRef make_table(int64_t cap, int64_t dim, cudaStream_t s) {
  const int64_t B = 128;
  TableRef t{};
  CK(cudaMalloc(&t.keys, cap * 8));
  CK(cudaMalloc(&t.digests, cap));
  CK(cudaMalloc(&t.scores, cap * 8));
  CK(cudaMalloc(&t.values, cap * dim * 4));
  CK(cudaMalloc(&t.locks, cap / B * 4));
  CK(cudaMalloc(&t.counters, kNumCounters * 8));
  CK(cudaMemset(t.locks, 0, cap / B * 4));
  CK(cudaMemset(t.counters, 0, kNumCounters * 8));
  t.capacity = cap;
  t.num_buckets = cap / B;
  t.bucket_capacity = B;
  t.dim = dim;
  init_table<<<4096, 256, 0, s>>>((uint64_t*)t.keys, t.digests, t.scores, cap, empty_digest());
  return t;
}

static float med(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.f : v[v.size() / 2];
}

// Appends the times (us) between the events g_ev[0..ne-1]: kernel k's to tk[k], the whole op's to total.
static void collect_times(int ne, std::vector<float>* tk, std::vector<float>& total) {
  for (int k = 1; k < ne; ++k) {
    float ms;
    CK(cudaEventElapsedTime(&ms, g_ev[k - 1], g_ev[k]));
    tk[k - 1].push_back(ms * 1e3f);
  }
  float ms;
  CK(cudaEventElapsedTime(&ms, g_ev[0], g_ev[ne - 1]));
  total.push_back(ms * 1e3f);
}

// Times one op: waits for the stream, keeps it busy (spin) so that the op's launches queue up behind the start event
// g_ev[0], runs launch() (table_kernels.cuh's hook records an event after each of its kernels; a launch without the
// hook, launch_lookup, gets its end event here) and returns the number of events recorded (collect_times' ne). ncu:
// the op inside cudaProfilerStart / Stop (for `ncu --profile-from-start off`).
template <class F>
int timed_op(cudaStream_t s, bool ncu, F&& launch) {
  CK(cudaStreamSynchronize(s));
  if (ncu) CK(cudaProfilerStart());
  spin<<<1, 1, 0, s>>>(400000);
  CK(cudaEventRecord(g_ev[0], s));
  g_ne = 1;
  launch();
  if (g_ne == 1) CK(cudaEventRecord(g_ev[g_ne++], s));
  const int ne = g_ne;
  g_ne = 0;
  CK(cudaStreamSynchronize(s));
  if (ncu) CK(cudaProfilerStop());
  CK(cudaGetLastError());
  return ne;
}
