// The workload both lab timers of the scored hash table share (evict_bench.cu, assign_bench.cu): hash_table.py
// --fill hkv's key streams and fill, generated on the device from a 64-bit mixer so that two source trees see the same
// keys; the copy bandwidth of the byte bound. Lab only (not in the wheel); included by relative path after
// benchmarks/table_timing_harness.cuh (the timed instance K / V / P, smix, CK, timed_op).
#pragma once
#include <cmath>
#include <cstdlib>
#include <vector>

#include "../../benchmarks/table_timing_harness.cuh"

// Random keys below 2^62 (stored) from a stream id.
__global__ void gen_keys(uint64_t* out, int64_t n, uint64_t stream) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1 + smix(smix(stream) ^ (uint64_t)i) % ((1ull << 62) - 1);
}
__global__ void gen_values(float* v, int64_t n, uint64_t salt) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) v[i] = (float)((smix(i ^ salt) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}
// Whether position j of rep r's batch is a hit (60 %), and the new key (>= 2^62) it gets otherwise.
__device__ __host__ __forceinline__ uint64_t batch_hash(uint64_t r, int64_t j) {
  return smix((r << 40) ^ (uint64_t)j ^ 0x5bd1e995ull);
}
__device__ __host__ __forceinline__ bool batch_hit(uint64_t h) { return h % 1000 < 600; }
// The pool index of uniform hit j of rep r: (a j + b) mod n, a odd (a permutation of the pool: distinct hits).
__device__ __host__ __forceinline__ int64_t uniform_hit_index(uint64_t r, int64_t j, int64_t n) {
  const uint64_t a = (smix(r) | 1ull), b = smix(r + 7);
  return static_cast<int64_t>((a * (uint64_t)j + b) & (uint64_t)(n - 1));
}
// Batch of rep r: 60 % distinct hits from the pool and 40 % new keys, shuffled by position (position j gets a hit
// iff its hash says so; hits take consecutive pool indices).
__global__ void gen_batch(const uint64_t* pool, uint64_t* keys, int64_t n, uint64_t r) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t h = batch_hash(r, j);
  keys[j] = batch_hit(h) ? pool[uniform_hit_index(r, j, n)] : (1ull << 62) + smix(h) % ((1ull << 62) - 1);
}
// `dupnew` batch (a stress of duplicates of missing keys): gen_batch's hits, the new keys drawn from n / 16 values
// (each ~6.4 times in the batch).
__global__ void gen_batch_dup(const uint64_t* pool, uint64_t* keys, int64_t n, uint64_t r) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t h = batch_hash(r, j);
  keys[j] = batch_hit(h) ? pool[uniform_hit_index(r, j, n)]
                         : (1ull << 62) + smix((r << 40) ^ (smix(h) % (uint64_t)(n / 16))) % ((1ull << 62) - 1);
}
// Batch from host-drawn pool indices: idx[j] >= 0 takes pool[idx[j]], -1 a new key as in gen_batch.
__global__ void gen_batch_idx(const uint64_t* pool, const int64_t* idx, uint64_t* keys, int64_t n, uint64_t r) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t h = batch_hash(r, j);
  keys[j] = idx[j] >= 0 ? pool[idx[j]] : (1ull << 62) + smix(h) % ((1ull << 62) - 1);
}
// Input rows as a function of the key (every duplicate writes the same row: checksums stay order-independent).
__global__ void gen_values_of_keys(float* v, const uint64_t* keys, int64_t n, int64_t dim) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n * dim) v[i] = (float)((smix(keys[i / dim] ^ smix(i % dim)) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}
// numpy's Zipf sampler (rejection, Devroye), on a 53-bit uniform stream.
static int64_t zipf_draw(uint64_t& st, double a) {
  auto u01 = [&] { st = smix(st); return (double)(st >> 11) * (1.0 / 9007199254740992.0); };
  const double am1 = a - 1.0, b = std::pow(2.0, am1);
  while (true) {
    const double U = 1.0 - u01(), V = u01();
    const double X = std::floor(std::pow(U, -1.0 / am1));
    if (X > 9.2e18 || X < 1.0) continue;
    const double T = std::pow(1.0 + 1.0 / X, am1);
    if (V * X * (T - 1.0) / (b - 1.0) <= T / b) return (int64_t)X;
  }
}
// The pool indices of reps 0..nreps-1 (device arrays of n, -1 = a new key; rep r's batch is gen_batch_idx(..., r + 1)):
// Zipf(1.05) hits as hash_table.py's ((Zipf - 1) mod n, so hot keys repeat), else gen_batch's distinct hits.
static std::vector<int64_t*> batch_indices(int64_t n, int nreps, bool zipf) {
  std::vector<int64_t*> idx(nreps, nullptr);
  std::vector<int64_t> h(n);
  for (int r = 0; r < nreps; ++r) {
    uint64_t st = 0x2545f4914f6cdd1dull + r;
    for (int64_t j = 0; j < n; ++j)
      h[j] = !batch_hit(batch_hash(r + 1, j)) ? -1
             : zipf                           ? (zipf_draw(st, 1.05) - 1) % n
                                              : uniform_hit_index(r + 1, j, n);
    CK(cudaMalloc(&idx[r], n * 8));
    CK(cudaMemcpy(idx[r], h.data(), n * 8, cudaMemcpyHostToDevice));
  }
  return idx;
}
// Comma-separated numbers ("0.5,0.75,1").
static std::vector<double> parse_list(const char* q) {
  std::vector<double> v;
  while (*q) {
    char* e = nullptr;
    v.push_back(std::strtod(q, &e));
    q = *e ? e + 1 : e;
  }
  return v;
}
// Device-to-device copy bandwidth (read + write bytes per second) over 1 GB, for the byte bound.
static double copy_bandwidth(cudaStream_t s) {
  void *a, *b;
  const size_t sz = size_t(1) << 30;
  CK(cudaMalloc(&a, sz));
  CK(cudaMalloc(&b, sz));
  for (int k = 0; k < 3; ++k) CK(cudaMemcpyAsync(b, a, sz, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(g_ev[0], s));
  for (int k = 0; k < 5; ++k) CK(cudaMemcpyAsync(b, a, sz, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(g_ev[1], s));
  CK(cudaEventSynchronize(g_ev[1]));
  float ms;
  CK(cudaEventElapsedTime(&ms, g_ev[0], g_ev[1]));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * sz * 5 / (ms / 1e3);
}
// hash_table.py --fill hkv: insert_or_assign in batches of n random keys, load * capacity / n full batches, at load
// 1.0 topped up until the size is within 0.001 of the capacity; the state carries from one load to the next (loads
// ascending). After fill_to, pool_stream is the stream id of the last full batch (gen_keys(pool, n, pool_stream):
// the hits' pool, all present under LRU) and size the table's size.
struct TableFill {
  uint64_t stream = 1;
  int64_t size = 0;
  int it = 0;
  uint64_t pool_stream = 0;
  void fill_to(double load, const UpsertParams& base, uint64_t* keys, const float* vin, int64_t n, cudaStream_t s) {
    const int64_t cap = base.t.capacity;
    const int64_t nfull = std::max<int64_t>(1, static_cast<int64_t>(load * cap / n));
    for (; it < 100000; ++it) {
      const int64_t deficit = it < nfull ? n : cap - size;
      if (it >= nfull && (load < 1.0 || deficit <= cap / 1000)) break;
      const int64_t next = std::min<int64_t>(n, deficit);
      gen_keys<<<(n + 255) / 256, 256, 0, s>>>(keys, next, stream++);
      UpsertParams p = base;
      p.mode = kInsertOrAssign;
      p.keys = keys;
      p.n = next;
      p.pending_words = 2 * next + kPendingExtra;
      p.values_in = vin;
      launch_upsert<K, V, P>(p, s);
      if (it >= nfull - 1) {
        CK(cudaMemcpyAsync(&size, base.t.counters + kCounterSize, 8, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
      }
    }
    pool_stream = static_cast<uint64_t>(nfull);
  }
};
