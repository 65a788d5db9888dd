// Per-kernel device times of the scored hash table's inserting ops at HKV's fill (load factor 1.0 by default),
// one key/value/policy instance (uint64 keys, fp32 values, LRU) of dynamicemb/csrc/table/table_kernels.cuh built
// on its own, so that two source trees (main's and a branch's) can be timed and profiled side by side:
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I<tree> \
//        tools/dynamicemb_dev/evict_bench.cu -o /tmp/eb && /tmp/eb [capacity_log2=26] [batch_log2=20] [reps=5] \
//        [ncu|-] [uniform|zipf|dupnew] [loads=1] [dedup|-] [variants=0]
//
// Workload (benchmarks/hash_table.py --fill hkv --lambdas 1.0): 2^capacity_log2 slots (buckets of 128) filled by
// insert_or_assign in batches of 2^batch_log2 random keys, topped up until the size is within 0.001 of the
// capacity (`loads`, comma-separated and ascending, e.g. 0.5,0.75,1: the table filled on from one to the next,
// load * capacity / batch full batches, the top-ups only at 1.0; each load's ops on its own snapshot); then per op
// (find_or_insert, insert_or_assign, insert_and_evict) and rep: the table restored from a snapshot, a batch of 60 %
// distinct hits drawn from the last batch inserted and 40 % new keys in random order, each kernel timed by CUDA events around its launch (the stream kept busy before, so launches queue up); medians.
// Prints the insert pass's pending count and an order-independent checksum of the table after the op (the multiset
// of (bucket, key, score, digest, first row word)) and of the evicted (key, score) pairs: equal checksums between
// two trees = the same eviction results. `ncu`: one rep per op inside cudaProfilerStart/Stop (for
// `ncu --profile-from-start off`). `zipf`: the hits drawn as benchmarks/hash_table.py's Zipf keys (pool index
// (Zipf(1.05) - 1) mod n, numpy's sampler, so hot keys repeat), the input rows a function of the key (every
// duplicate writes the same row: the checksums stay order-independent). assign (every hit writes its row, misses
// do nothing) is timed after the three inserting ops. The key streams, fill and timed op are table_lab_workload.cuh's
// (shared with assign_bench.cu).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "table_lab_workload.cuh"

__global__ void table_sum(TableRef t, unsigned long long* out) {
  unsigned long long s = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < t.capacity;
       i += (int64_t)gridDim.x * blockDim.x) {
    const uint64_t k = reinterpret_cast<const uint64_t*>(t.keys)[i];
    if (is_reserved_key(k)) continue;
    uint32_t w0;
    memcpy(&w0, reinterpret_cast<const float*>(t.values) + i * t.dim, 4);
    s += smix(k ^ smix(t.scores[i] ^ (uint64_t(t.digests[i]) << 56) ^ smix(i / t.bucket_capacity) ^ w0));
  }
  atomicAdd(out, s);
}
__global__ void evicted_sum(const uint64_t* k, const uint64_t* sc, const float* v, int64_t dim, int64_t n,
                            unsigned long long* out) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t w0;
  memcpy(&w0, v + i * dim, 4);
  atomicAdd(out, smix(k[i] ^ smix(sc[i] ^ w0)));
}

int main(int argc, char** argv) {
  const int cap_log2 = argc > 1 ? std::atoi(argv[1]) : 26;
  const int n_log2 = argc > 2 ? std::atoi(argv[2]) : 20;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool ncu = argc > 4 && !std::strcmp(argv[4], "ncu");
  const bool zipf = argc > 5 && !std::strcmp(argv[5], "zipf");
  const bool dupnew = argc > 5 && !std::strcmp(argv[5], "dupnew");
  // dedup: the timed ops pass the first-writer set (the LRU row copiers' scratch tail; begin_op samples the batch and
  // uses it when keys repeat: "set" after the checksums).
  const bool dedup = argc > 7 && !std::strcmp(argv[7], "dedup");
  // Insert-pass variants (insert_schedule's override in mode's bits from kUpsertModeLabShift: 0 the op's default, 1
  // dynamic, 2 static; comma-separated, e.g. "0,1,2"): every op and rep runs each on the same snapshot and batch,
  // interleaved; one line per variant (a tree without them: build with -DEVICT_BENCH_NO_LAB, leave it out).
  std::vector<int> labs;
  for (const double v : parse_list(argc > 8 ? argv[8] : "0")) labs.push_back(static_cast<int>(v));
  // Load factors, comma-separated, ascending (the table is filled on from one to the next): "0.5,0.75,1".
  const std::vector<double> loads = parse_list(argc > 6 ? argv[6] : "1");
  const int64_t dim = 32;
  const int64_t cap = int64_t(1) << cap_log2, n = int64_t(1) << n_log2;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TableRef t = make_table(cap, dim, s);
  uint64_t *fill, *keys, *ek, *es;
  float *vin, *vout, *ev;
  bool* found;
  int64_t *stats, *pending;
  unsigned long long* cnt;
  CK(cudaMalloc(&fill, n * 8));
  CK(cudaMalloc(&keys, n * 8));
  CK(cudaMalloc(&ek, n * 8));
  CK(cudaMalloc(&es, n * 8));
  CK(cudaMalloc(&ev, n * dim * 4));
  CK(cudaMalloc(&vin, n * dim * 4));
  CK(cudaMalloc(&vout, n * dim * 4));
  CK(cudaMalloc(&found, n));
  CK(cudaMalloc(&stats, 64 * 8));
  CK(cudaMalloc(&pending, (2 * n + kPendingExtra + dedup_set_words(n)) * 8));
  CK(cudaMalloc(&cnt, 8));
  gen_values<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, n * dim, 1);
  UpsertParams base{};
  base.t = t;
  base.stats = stats;
  base.pending = pending;
  base.pending_words = 2 * n + kPendingExtra;
  // Snapshot (the table at each load, restored before every op).
  TableRef snap = t;
  CK(cudaMalloc(&snap.keys, cap * 8));
  CK(cudaMalloc(&snap.digests, cap));
  CK(cudaMalloc(&snap.scores, cap * 8));
  CK(cudaMalloc(&snap.values, cap * dim * 4));
  CK(cudaMalloc(&snap.counters, kNumCounters * 8));
  auto copy_table = [&](TableRef& d, const TableRef& src) {
    CK(cudaMemcpyAsync(d.keys, src.keys, cap * 8, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(d.digests, src.digests, cap, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(d.scores, src.scores, cap * 8, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(d.values, src.values, cap * dim * 4, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(d.counters, src.counters, kNumCounters * 8, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemsetAsync(d.locks, 0, cap / 128 * 4, s));  // (insert variant 5 leaves its intent words set)
  };
  uint64_t* pool;
  CK(cudaMalloc(&pool, n * 8));
  const char* names[] = {"find_or_insert", "insert_or_assign", "insert_and_evict", "assign"};
  for (int k = 0; k < 8; ++k) CK(cudaEventCreate(&g_ev[k]));
  const int nreps = ncu ? 1 : reps + 1;
  // Zipf batches: the pool index of each position (-1: a new key), the same for every op.
  const std::vector<int64_t*> zidx = zipf ? batch_indices(n, nreps, true) : std::vector<int64_t*>();
  // Fill state, carried from one load to the next (the table restored from the snapshot before filling on).
  TableFill tf;
  for (const double load : loads) {
    if (load != loads.front()) copy_table(t, snap);
    tf.fill_to(load, base, fill, vin, n, s);
    const int64_t size = tf.size;
    // The pool: the last full batch's keys (the top-ups are smaller; regenerate a full batch of the last stream).
    gen_keys<<<(n + 255) / 256, 256, 0, s>>>(pool, n, tf.pool_stream);  // all present: LRU
    CK(cudaStreamSynchronize(s));
    std::printf("filled: size %lld of %lld slots (load %.4f), dim %lld, batch %lld\n", (long long)size,
                (long long)cap, double(size) / cap, (long long)dim, (long long)n);
    copy_table(snap, t);

    std::printf("keys: %s%s\n",
                zipf ? "zipf 1.05 hits" : dupnew ? "uniform hits, new keys ~6.4 times each" : "uniform distinct hits",
                dedup ? ", first-writer set" : "");
    for (int op = 0; op < 4; ++op) {
      const int nl = static_cast<int>(labs.size());
      std::vector<std::vector<float>> tkv(nl * 8), ttotv(nl);
      std::vector<long long> pendv(nl, -1), setv(nl, 0), stv(nl * kNumStats, 0);
      std::vector<unsigned long long> tsumv(nl, 0), esumv(nl, 0);
      for (int r = 0; r < nreps; ++r)
      for (int li = 0; li < nl; ++li) {
        std::vector<float>* tk = &tkv[li * 8];
        std::vector<float>& ttot = ttotv[li];
        long long& pend = pendv[li];
        long long& set_used = setv[li];
        long long* st = &stv[li * kNumStats];
        unsigned long long& tsum = tsumv[li];
        unsigned long long& esum = esumv[li];
        copy_table(t, snap);
        if (zipf) {
          gen_batch_idx<<<(n + 255) / 256, 256, 0, s>>>(pool, zidx[r], keys, n, uint64_t(r + 1));
          gen_values_of_keys<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, keys, n, dim);
        } else if (dupnew) {
          gen_batch_dup<<<(n + 255) / 256, 256, 0, s>>>(pool, keys, n, uint64_t(r + 1));
          gen_values_of_keys<<<(n * dim + 255) / 256, 256, 0, s>>>(vin, keys, n, dim);
        } else {
          gen_batch<<<(n + 255) / 256, 256, 0, s>>>(pool, keys, n, uint64_t(r + 1));  // the same batches per op
        }
        UpsertParams p = base;
        p.keys = keys;
        p.n = n;
        if (dedup) p.pending_words = 2 * n + kPendingExtra + dedup_set_words(n);
        p.mode = op == 0 ? kFindOrInsert : op == 1 ? kInsertOrAssign : op == 2 ? kInsertAndEvict : kAssign;
#ifndef EVICT_BENCH_NO_LAB
        p.mode |= labs[li] << kUpsertModeLabShift;
#endif
        if (op == 0) {
          p.values_out = vout;
          p.found_out = found;
        } else {
          p.values_in = vin;
        }
        if (op == 2) {
          p.evicted_keys = ek;
          p.evicted_scores = es;
          p.evicted_values = ev;
        }
        const int ne = timed_op(s, ncu, [&] { launch_upsert<K, V, P>(p, s); });
        if (r > 0 || ncu) {
          collect_times(ne, tk, ttot);
        }
        if (r == nreps - 1) {  // checks of the last rep
          CK(cudaMemcpy(st, stats, kNumStats * sizeof(long long), cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(&pend, pending + 2 * n + kPendingExtra / 2, 8, cudaMemcpyDeviceToHost));
          if (dedup && op > 0)  // begin_op's choice of the first-writer set (the copiers only)
            CK(cudaMemcpy(&set_used, pending + 2 * n + kPendingExtra + dedup_set_words(n) - kDedupTail / 2, 8,
                          cudaMemcpyDeviceToHost));
          CK(cudaMemset(cnt, 0, 8));
          table_sum<<<1024, 256, 0, s>>>(t, cnt);
          CK(cudaMemcpyAsync(&tsum, cnt, 8, cudaMemcpyDeviceToHost, s));
          CK(cudaStreamSynchronize(s));
          if (op == 2) {
            CK(cudaMemset(cnt, 0, 8));
            evicted_sum<<<(st[kStatEvicted] + 255) / 256 + 1, 256, 0, s>>>(ek, es, ev, dim, st[kStatEvicted], cnt);
            CK(cudaMemcpyAsync(&esum, cnt, 8, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
          }
        }
      }
      for (int li = 0; li < nl; ++li) {
        const std::vector<float>* tk = &tkv[li * 8];
        const long long* st = &stv[li * kNumStats];
        std::printf("%-17s L%d total %7.1f us (%.3f billion/s)", names[op], labs[li], med(ttotv[li]),
                    n / med(ttotv[li]) / 1e3);
        const char* kn[] = {"begin", "first", "insert"};
        for (int k = 0; k < 3; ++k)
          if (!tk[k].empty()) std::printf("  %s %6.1f", kn[k], med(tk[k]));
        std::printf("  pending %lld  ins %lld asg %lld evi %lld ref %lld  table %016llx  evicted %016llx%s\n",
                    pendv[li], st[0], st[1], st[2], st[3], tsumv[li], esumv[li], setv[li] ? "  set" : "");
      }
    }
  }
  CK(cudaStreamSynchronize(s));
  return 0;
}
