// Per-kernel device times of the scored hash table's upsert (no torch, no wheel): one key/value/policy
// instantiation (uint64 keys, fp32 values, LRU) of dynamicemb/csrc/table/table_kernels.cuh, built on its own:
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I. \
//        benchmarks/table_kernel_timing.cu -o /tmp/tkt && /tmp/tkt [capacity_log2=26] [dim=32] [lambda=0.5]
//
// Same workload as benchmarks/hash_table.py: a table of 2^capacity_log2 slots (buckets of 128) filled to lambda
// with random keys below 2^62 by insert_or_assign in 1M batches; then batches of 1M keys, 60% of them stored keys
// and 40% new keys (>= 2^62) in random order; the new keys are erased after each upsert (untimed). Each kernel
// of an op is timed by CUDA events around its launch (the stream is kept busy before the first event so that the
// launches queue up); medians over the repetitions. Also prints how many keys reach the insert pass and checks
// the accounting identity and that every key of the batch is found afterwards.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "table_timing_harness.cuh"

__global__ void gen_stored(uint64_t* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1 + smix(i * 7919 + 17) % ((1ull << 62) - 1);
}
__global__ void gen_values(float* v, int64_t n, uint64_t salt) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) v[i] = (float)((smix(i ^ salt) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}
// Batch rep r: position j is a hit (a random stored key) with probability 0.6, else a new key >= 2^62.
// `erase` gets the new keys (hit positions get another new-range key, absent w.h.p.).
__global__ void gen_batch(const uint64_t* stored, int64_t n_fill, uint64_t* keys, uint64_t* erase, int64_t n,
                          uint64_t r) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t h = smix((r << 40) ^ j ^ 0x5bd1e995ull);
  const uint64_t m = (1ull << 62) + smix(h) % ((1ull << 62) - 1);
  if (h % 1000 < 600) {
    keys[j] = stored[smix(h + 1) % n_fill];
    erase[j] = (1ull << 62) + smix(h + 2) % ((1ull << 62) - 1);
  } else {
    keys[j] = m;
    erase[j] = m;
  }
}
__global__ void count_found(const bool* f, int64_t n, unsigned long long* c) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j < n && f[j]) atomicAdd(c, 1ull);
}

int main(int argc, char** argv) {
  const int cap_log2 = argc > 1 ? std::atoi(argv[1]) : 26;
  const int64_t dim = argc > 2 ? std::atoi(argv[2]) : 32;
  const double lam = argc > 3 ? std::atof(argv[3]) : 0.5;
  const int64_t cap = int64_t(1) << cap_log2, B = 128, n = 1 << 20;
  const int reps = 7;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TableRef t = make_table(cap, dim, s);
  const int64_t n_fill = int64_t(cap * lam);
  uint64_t *stored, *keys, *erase;
  float *vin, *vout;
  bool* found;
  int64_t *stats, *pending;
  unsigned long long* cnt;
  CK(cudaMalloc(&stored, n_fill * 8));
  CK(cudaMalloc(&keys, n * 8));
  CK(cudaMalloc(&erase, n * 8));
  CK(cudaMalloc(&vin, n * dim * 4));
  CK(cudaMalloc(&vout, n * dim * 4));
  CK(cudaMalloc(&found, n));
  CK(cudaMalloc(&stats, 64 * 8));
  CK(cudaMalloc(&pending, (2 * n + kPendingExtra) * 8));
  CK(cudaMalloc(&cnt, 8));
  gen_stored<<<(n_fill + 255) / 256, 256, 0, s>>>(stored, n_fill);
  gen_values<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, n * dim, 1);
  CK(cudaGetLastError());

  UpsertParams base{};
  base.t = t;
  base.stats = stats;
  base.pending = pending;
  for (int64_t off = 0; off < n_fill; off += n) {
    UpsertParams p = base;
    p.mode = kInsertOrAssign;
    p.keys = stored + off;
    p.n = std::min<int64_t>(n, n_fill - off);
    p.values_in = vin;
    launch_upsert<K, V, P>(p, s);
  }
  CK(cudaStreamSynchronize(s));
  std::printf("filled %lld of %lld slots, dim %lld\n", (long long)n_fill, (long long)cap, (long long)dim);

  EraseParams ep{};
  ep.t = t;
  ep.n = n;
  ep.keys = erase;
  ep.stats = stats + 32;
  LookupParams lp{};
  lp.t = t;
  lp.keys = keys;
  lp.n = n;
  lp.found_out = found;

  const char* names[] = {"find", "find_or_insert", "insert_or_assign", "assign"};
  for (int k = 0; k < 8; ++k) CK(cudaEventCreate(&g_ev[k]));
  bool ok = true;
  for (int op = 0; op < 4; ++op) {
    std::vector<float> tk[8], ttot;
    std::vector<long long> pend;
    for (int r = 0; r < reps + 1; ++r) {
      gen_batch<<<n / 256, 256, 0, s>>>(stored, n_fill, keys, erase, n, uint64_t(op * 100 + r + 1));
      UpsertParams p = base;
      p.keys = keys;
      p.n = n;
      p.mode = op == 1 ? kFindOrInsert : op == 2 ? kInsertOrAssign : kAssign;
      if (op == 1) {
        p.values_out = vout;
        p.found_out = found;
      } else {
        p.values_in = vin;
      }
      const int ne = timed_op(s, false, [&] {
        if (op == 0) {
          lp.values_out = vout;
          launch_lookup<K, V, P>(lp, s);
        } else {
          launch_upsert<K, V, P>(p, s);
        }
      });
      if (r > 0) {
        collect_times(ne, tk, ttot);
      }
      if (op != 0) {
        long long h_stats[kNumStats], h_pend = -1;
        CK(cudaMemcpy(h_stats, stats, sizeof h_stats, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&h_pend, pending + 2 * n + kPendingExtra / 2, 8, cudaMemcpyDeviceToHost));
        pend.push_back(h_pend);
        long long sum = 0;
        for (long long x : h_stats) sum += x;
        const long long expect = op == 3 ? -1 : n;  // assign: misses are no-ops
        if (expect >= 0 && sum != expect) {
          std::printf("  ACCOUNTING %s rep %d: %lld %lld %lld %lld %lld sum %lld\n", names[op], r, h_stats[0],
                      h_stats[1], h_stats[2], h_stats[3], h_stats[4], sum);
          ok = false;
        }
        if (op != 3) {  // every key of the batch is found now
          lp.values_out = nullptr;
          launch_lookup<K, V, P>(lp, s);
          CK(cudaMemsetAsync(cnt, 0, 8, s));
          count_found<<<n / 256, 256, 0, s>>>(found, n, cnt);
          unsigned long long c = 0;
          CK(cudaMemcpyAsync(&c, cnt, 8, cudaMemcpyDeviceToHost, s));
          CK(cudaStreamSynchronize(s));
          if ((int64_t)c != n) {
            std::printf("  LOST %s rep %d: %llu of %lld found\n", names[op], r, c, (long long)n);
            ok = false;
          }
          launch_erase<K, V, P>(ep, s);
        }
      }
    }
    std::printf("%-17s total %7.1f us (%.2f billion/s)", names[op], med(ttot), n / med(ttot) / 1e3);
    for (int k = 0; k < 8; ++k)
      if (!tk[k].empty()) std::printf("  k%d %6.1f", k, med(tk[k]));
    if (!pend.empty()) std::printf("  pending %lld", pend.back());
    std::printf("\n");
  }
  CK(cudaStreamSynchronize(s));
  std::printf(ok ? "checks OK\n" : "checks FAILED\n");
  return ok ? 0 : 1;
}
