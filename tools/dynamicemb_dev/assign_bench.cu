// Device times of the scored hash table's assign (and find beside it) under private variants, one key/value/policy
// instance (uint64 keys, fp32 values, LRU) of dynamicemb/csrc/table/table_kernels.cuh built on its own with the lab
// variants compiled in (DYNAMICEMB_TABLE_LAB):
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I<tree> \
//        tools/dynamicemb_dev/assign_bench.cu -o /tmp/ab && /tmp/ab [capacity_log2=26] [reps=5] [ncu|-]
//        [uniform|zipf] [loads=1] [dims=32] [variants=0,1]
//
// Workload (benchmarks/hash_table.py --fill hkv): 2^capacity_log2 slots (buckets of 128) filled by insert_or_assign
// in batches of 1M random keys, at load 1.0 topped up until the size is within 0.001 of the capacity (`loads`
// comma-separated and ascending: the table filled on from one to the next); per rep a batch of 60 % hits drawn from
// the last full fill batch (uniform: distinct; zipf: pool index (Zipf(1.05) - 1) mod 2^20, numpy's sampler, hot keys
// repeat) and 40 % new keys in random order; input rows a function of the key. Every variant runs assign on the same
// batch (interleaved, CUDA events around the op behind a spin kernel), then find (lookup with values_out). Variants:
// assign_lru_variant's values (0 the LRU assign kernel, 1 the copiers' two passes = main's path, 2 early prefetch,
// 3 blocks of 256, 4 relaxed publish, 5 no slot lock, 6 blocks of 64). Prints median us, billion KV/s, the ratio to
// the first variant, the fraction of the byte bound (hash_table.py's op_bytes at the measured copy bandwidth) and the
// stats. `ncu`: one rep per variant inside cudaProfilerStart/Stop.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef DYNAMICEMB_TABLE_LAB
#define DYNAMICEMB_TABLE_LAB 1
#endif
#include "../../benchmarks/table_timing_harness.cuh"

__global__ void gen_keys(uint64_t* out, int64_t n, uint64_t stream) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1 + smix(smix(stream) ^ (uint64_t)i) % ((1ull << 62) - 1);
}
__global__ void gen_values(float* v, int64_t n, uint64_t salt) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) v[i] = (float)((smix(i ^ salt) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}
// idx[j] >= 0: pool[idx[j]]; -1: a new key (>= 2^62).
__global__ void gen_batch_idx(const uint64_t* pool, const int64_t* idx, uint64_t* keys, int64_t n, uint64_t r) {
  int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t h = smix((r << 40) ^ (uint64_t)j ^ 0x5bd1e995ull);
  keys[j] = idx[j] >= 0 ? pool[idx[j]] : (1ull << 62) + smix(h) % ((1ull << 62) - 1);
}
__global__ void gen_values_of_keys(float* v, const uint64_t* keys, int64_t n, int64_t dim) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n * dim) v[i] = (float)((smix(keys[i / dim] ^ smix(i % dim)) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}
static int64_t zipf_draw(uint64_t& st, double a) {  // numpy's sampler (rejection, Devroye)
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
static std::vector<double> parse_list(const char* q) {
  std::vector<double> v;
  while (*q) {
    char* e = nullptr;
    v.push_back(std::strtod(q, &e));
    q = *e ? e + 1 : e;
  }
  return v;
}

int main(int argc, char** argv) {
  const int cap_log2 = argc > 1 ? std::atoi(argv[1]) : 26;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool ncu = argc > 3 && !std::strcmp(argv[3], "ncu");
  const bool zipf = argc > 4 && !std::strcmp(argv[4], "zipf");
  const std::vector<double> loads = parse_list(argc > 5 ? argv[5] : "1");
  const std::vector<double> dims = parse_list(argc > 6 ? argv[6] : "32");
  std::vector<int> vars;
  for (double v : parse_list(argc > 7 ? argv[7] : "0,1")) vars.push_back((int)v);
  const int64_t cap = int64_t(1) << cap_log2, n = int64_t(1) << 20;
  const int nv = (int)vars.size(), nreps = ncu ? 1 : reps + 1;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int k = 0; k < 8; ++k) CK(cudaEventCreate(&g_ev[k]));
  // copy bandwidth (read + write bytes per second), for the byte bound
  double bw = 0;
  {
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
    bw = 2.0 * sz * 5 / (ms / 1e3);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  // batches' pool indices (-1: new key), the same for every load and dim
  std::vector<int64_t*> zidx(nreps, nullptr);
  {
    std::vector<int64_t> h(n);
    for (int r = 0; r < nreps; ++r) {
      uint64_t st = 0x2545f4914f6cdd1dull + r;
      const uint64_t a = smix(r) | 1ull, b = smix(r + 7);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t hh = smix(((uint64_t)(r + 1) << 40) ^ (uint64_t)j ^ 0x5bd1e995ull);
        h[j] = hh % 1000 < 600 ? (zipf ? (zipf_draw(st, 1.05) - 1) % n : (int64_t)((a * (uint64_t)j + b) & (n - 1)))
                               : -1;
      }
      CK(cudaMalloc(&zidx[r], n * 8));
      CK(cudaMemcpy(zidx[r], h.data(), n * 8, cudaMemcpyHostToDevice));
    }
  }
  std::printf("copy bandwidth %.2f TB/s; %s keys, 2^%d slots, 1M keys/op, %d reps\n", bw / 1e12,
              zipf ? "zipf 1.05 hit" : "uniform distinct hit", cap_log2, reps);
  uint64_t *fill, *keys, *pool;
  int64_t *stats, *pending;
  bool* found;
  CK(cudaMalloc(&fill, n * 8));
  CK(cudaMalloc(&keys, n * 8));
  CK(cudaMalloc(&pool, n * 8));
  CK(cudaMalloc(&found, n));
  CK(cudaMalloc(&stats, 64 * 8));
  CK(cudaMalloc(&pending, (2 * n + kPendingExtra) * 8));
  for (const double dd : dims) {
    const int64_t dim = (int64_t)dd;
    float *vin, *vout;
    CK(cudaMalloc(&vin, n * dim * 4));
    CK(cudaMalloc(&vout, n * dim * 4));
    gen_values<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, n * dim, 1);
    TableRef t = make_table(cap, dim, s);
    UpsertParams base{};
    base.t = t;
    base.stats = stats;
    base.pending = pending;
    base.pending_words = 2 * n + kPendingExtra;
    uint64_t stream = 1;
    int64_t size = 0;
    int it = 0;
    for (const double load : loads) {
      const int64_t nfull = std::max<int64_t>(1, static_cast<int64_t>(load * cap / n));
      for (; it < 100000; ++it) {
        const int64_t deficit = it < nfull ? n : cap - size;
        if (it >= nfull && (load < 1.0 || deficit <= cap / 1000)) break;
        const int64_t next = std::min<int64_t>(n, deficit);
        gen_keys<<<(n + 255) / 256, 256, 0, s>>>(fill, next, stream++);
        UpsertParams p = base;
        p.mode = kInsertOrAssign;
        p.keys = fill;
        p.n = next;
        p.pending_words = 2 * next + kPendingExtra;
        p.values_in = vin;
        launch_upsert<K, V, P>(p, s);
        if (it >= nfull - 1) {
          CK(cudaMemcpyAsync(&size, t.counters + kCounterSize, 8, cudaMemcpyDeviceToHost, s));
          CK(cudaStreamSynchronize(s));
        }
      }
      gen_keys<<<(n + 255) / 256, 256, 0, s>>>(pool, n, nfull);  // the last full fill batch (all present: LRU)
      CK(cudaStreamSynchronize(s));
      std::vector<std::vector<float>> tot(nv + 1), kt(nv * 8);
      std::vector<long long> st(nv * kNumStats, 0);
      for (int r = 0; r < nreps; ++r) {
        gen_batch_idx<<<(n + 255) / 256, 256, 0, s>>>(pool, zidx[r], keys, n, uint64_t(r + 1));
        gen_values_of_keys<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, keys, n, dim);
        for (int li = 0; li <= nv; ++li) {
          CK(cudaStreamSynchronize(s));
          if (ncu) CK(cudaProfilerStart());
          spin<<<1, 1, 0, s>>>(400000);
          CK(cudaEventRecord(g_ev[0], s));
          g_ne = 1;
          if (li < nv) {
            UpsertParams p = base;
            p.keys = keys;
            p.n = n;
            p.values_in = vin;
            p.pdl = true;
            p.mode = kAssign | (vars[li] << (kUpsertModeLabShift + 4));
            launch_upsert<K, V, P>(p, s);
          } else {  // find
            LookupParams q{};
            q.t = t;
            q.keys = keys;
            q.n = n;
            q.values_out = vout;
            q.found_out = found;
            launch_lookup<K, V, P>(q, s);
            CK(cudaEventRecord(g_ev[g_ne++], s));
          }
          const int ne = g_ne;
          g_ne = 0;
          CK(cudaStreamSynchronize(s));
          if (ncu) CK(cudaProfilerStop());
          CK(cudaGetLastError());
          if (r > 0 || ncu) collect_times(ne, li < nv ? &kt[li * 8] : &kt[0] /*unused*/, tot[li]);
          if (li < nv && r == nreps - 1)
            CK(cudaMemcpy(&st[li * kNumStats], stats, kNumStats * 8, cudaMemcpyDeviceToHost));
        }
      }
      const double real = double(size) / cap;
      const double row = 4.0 * dim, hit = 0.6;
      const double bytes_assign = 8 + 128 + 32 + hit * (8 + 2 * row), bytes_find = 8 + 128 + 32 + hit * 2 * row + 1;
      const double t0 = med(tot[0]);
      for (int li = 0; li <= nv; ++li) {
        const double us = med(tot[li]), rate = n / us / 1e3;
        const double frac = rate * 1e9 * (li < nv ? bytes_assign : bytes_find) / bw;
        if (li < nv) {
          std::printf("load %.4f dim %3lld assign v%d %7.1f us %6.3f bKV/s (%.3f) bound %4.1f %%", real, (long long)dim,
                      vars[li], us, rate, t0 / us, 100 * frac);
          const char* kn[] = {"begin", "k1", "k2"};
          for (int k = 0; k < 3; ++k)
            if (!kt[li * 8 + k].empty()) std::printf("  %s %.1f", kn[k], med(kt[li * 8 + k]));
          std::printf("  asg %lld ill %lld\n", st[li * kNumStats + kStatAssigned], st[li * kNumStats + kStatIllegal]);
        } else {
          std::printf("load %.4f dim %3lld find      %7.1f us %6.3f bKV/s (%.3f) bound %4.1f %%\n", real,
                      (long long)dim, us, rate, t0 / us, 100 * frac);
        }
      }
      std::fflush(stdout);
    }
    CK(cudaFree(vin));
    CK(cudaFree(vout));
    CK(cudaFree(t.keys));
    CK(cudaFree(t.digests));
    CK(cudaFree(t.scores));
    CK(cudaFree(t.values));
    CK(cudaFree(t.locks));
    CK(cudaFree(t.counters));
  }
  return 0;
}
