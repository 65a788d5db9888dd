// Device times of the scored hash table's assign (and find beside it) on the LRU assign kernel and on the row
// copiers' two passes, one key/value/policy instance (uint64 keys, fp32 values, LRU) of
// dynamicemb/csrc/table/table_kernels.cuh built on its own (any source tree: -I<tree>):
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I<tree> \
//        tools/dynamicemb_dev/assign_bench.cu -o /tmp/ab && /tmp/ab [capacity_log2=26] [reps=5] [ncu|-]
//        [uniform|zipf] [loads=1] [dims=32] [variants=0,1]
//
// Workload (table_lab_workload.cuh, benchmarks/hash_table.py --fill hkv): 2^capacity_log2 slots (buckets of 128)
// filled by insert_or_assign in batches of 1M random keys, at load 1.0 topped up until the size is within 0.001 of
// the capacity (`loads` comma-separated and ascending: the table filled on from one to the next); per rep a batch of
// 60 % hits drawn from the last full fill batch (uniform: distinct; zipf: pool index (Zipf(1.05) - 1) mod 2^20,
// numpy's sampler, hot keys repeat) and 40 % new keys in random order; input rows a function of the key. Every
// variant runs assign on the same batch (interleaved, timed_op), then find (lookup with values_out). Variants: the
// op's private override in _upsert_lab bits 4-7 (0 the LRU assign kernel, 1 the copiers' two passes; the kernel's
// what-ifs of session 34 were deleted in session 35: a tree at 6ca06103 has them as values 2-14). Prints median us,
// billion KV/s, the ratio to the first variant, the fraction of the byte bound (hash_table.py's op_bytes at the
// measured copy bandwidth) and the stats. `ncu`: one rep per variant inside cudaProfilerStart/Stop.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "table_lab_workload.cuh"

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
  const double bw = copy_bandwidth(s);  // for the byte bound
  // batches' pool indices (-1: new key), the same for every load and dim
  const std::vector<int64_t*> zidx = batch_indices(n, nreps, zipf);
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
    TableFill tf;
    for (const double load : loads) {
      tf.fill_to(load, base, fill, vin, n, s);
      gen_keys<<<(n + 255) / 256, 256, 0, s>>>(pool, n, tf.pool_stream);  // the last full fill batch (all present: LRU)
      CK(cudaStreamSynchronize(s));
      std::vector<std::vector<float>> tot(nv + 1), kt(nv * 8);
      std::vector<long long> st(nv * kNumStats, 0);
      for (int r = 0; r < nreps; ++r) {
        gen_batch_idx<<<(n + 255) / 256, 256, 0, s>>>(pool, zidx[r], keys, n, uint64_t(r + 1));
        gen_values_of_keys<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, keys, n, dim);
        for (int li = 0; li <= nv; ++li) {
          const int ne = timed_op(s, ncu, [&] {
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
            }
          });
          if (r > 0 || ncu) collect_times(ne, li < nv ? &kt[li * 8] : &kt[0] /*unused*/, tot[li]);
          if (li < nv && r == nreps - 1)
            CK(cudaMemcpy(&st[li * kNumStats], stats, kNumStats * 8, cudaMemcpyDeviceToHost));
        }
      }
      const double real = double(tf.size) / cap;
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
