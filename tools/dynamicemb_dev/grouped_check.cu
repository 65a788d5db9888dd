// Device check of the bucket-grouped upsert (dynamicemb/csrc/table/bucket_upsert.cuh) against the CPU twin
// (table_cpu.h) given the batch with its present keys first: a small table (64 buckets of 128, some full, some
// not), batches with duplicates of present and new keys, reserved keys, several keys per bucket, under LRU, LFU and
// customized scores (ties and refusals), for find_or_insert, insert_or_assign and insert_and_evict. Compares the
// table slot for slot (keys, digests, scores, rows), the per-key outputs (found, slots, rows), the stats and the
// evicted (key, score, row) multiset. Prints one line per case and "ALL OK" / "FAILED".
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I. -I<torch>/include \
//        tools/dynamicemb_dev/grouped_check.cu -o grouped_check && ./grouped_check
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "../../benchmarks/table_timing_harness.cuh"  // CK, the table kernels (the grouped upsert among them)
#include "dynamicemb/csrc/table/table_cpu.h"

constexpr int64_t NB = 64, B = 128, CAP = NB * B, DIM = 8;
static int g_lanes = 16;  // lanes per bucket of the grouped upsert

struct HostTable {
  std::vector<uint64_t> keys;
  std::vector<uint8_t> digests;
  std::vector<uint64_t> scores;
  std::vector<float> values;
  std::vector<int32_t> locks;
  std::vector<int64_t> counters;
  HostTable() : keys(CAP, kEmptyKey), digests(CAP, empty_digest()), scores(CAP, 0), values(CAP * DIM, 0.f),
                locks(NB, 0), counters(kNumCounters, 0) {}
  TableRef ref() {
    TableRef t{};
    t.keys = keys.data();
    t.digests = digests.data();
    t.scores = scores.data();
    t.values = values.data();
    t.locks = locks.data();
    t.counters = counters.data();
    t.capacity = CAP;
    t.num_buckets = NB;
    t.bucket_capacity = B;
    t.dim = DIM;
    t.hbm_slots = B;
    return t;
  }
};

template <int P>
void cpu_upsert(HostTable& h, int mode, const std::vector<uint64_t>& keys, const std::vector<uint64_t>* scores,
                const std::vector<float>& vin, std::vector<float>& vout, std::vector<uint8_t>& found,
                std::vector<int64_t>& slots, int64_t* stats, std::vector<uint64_t>& ek, std::vector<uint64_t>& es,
                std::vector<float>& ev) {
  UpsertParams p{};
  p.t = h.ref();
  p.mode = mode;
  p.keys = keys.data();
  p.n = static_cast<int64_t>(keys.size());
  p.values_in = mode != kFindOrInsert ? vin.data() : nullptr;
  p.scores_in = scores ? scores->data() : nullptr;
  p.values_out = mode == kFindOrInsert ? vout.data() : nullptr;
  p.found_out = reinterpret_cast<bool*>(found.data());
  p.slots_out = slots.data();
  p.stats = stats;
  if (mode == kInsertAndEvict) {
    p.evicted_keys = ek.data();
    p.evicted_scores = es.data();
    p.evicted_values = ev.data();
  }
  p.init.kind = kInitUniform;
  p.init.a = -1.f;
  p.init.b = 1.f;
  p.init.seed = 7;
  cpu::upsert<kValueFp32>(p, P);
}

template <int P>
bool run_case(int mode, int seed, bool many) {
  std::mt19937_64 rng(seed * 1000003ull + mode * 17 + P);
  HostTable h;
  // Fill: buckets 0..NB/2 full (130+ keys offered), the others partly.
  std::vector<uint64_t> present;
  {
    std::vector<uint64_t> fill;
    std::map<int64_t, int> per;
    while (fill.size() < static_cast<size_t>(CAP * 3 / 4 + 600)) {
      const uint64_t k = 1 + rng() % ((1ull << 62) - 1);
      const int64_t b = static_cast<int64_t>(bucket_of_hash(dynamicemb::accel_hash_key(k), NB));
      const int lim = b < NB / 2 ? B + 8 : static_cast<int>(B / 4 + (b % 5) * 12);
      if (per[b] >= lim) continue;
      ++per[b];
      fill.push_back(k);
    }
    std::vector<uint64_t> fs(fill.size());
    for (auto& s : fs) s = (P == kPolicyLru) ? 0 : 1 + rng() % 50;
    std::vector<float> vin(fill.size() * DIM);
    for (auto& v : vin) v = static_cast<float>(rng() % 1000) / 100.f;
    std::vector<float> vout;
    std::vector<uint8_t> found(fill.size());
    std::vector<int64_t> slots(fill.size());
    int64_t st[kNumStats];
    std::vector<uint64_t> ek, es;
    std::vector<float> ev;
    // a few ops so LRU scores differ
    const size_t chunk = fill.size() / 4 + 1;
    for (size_t o = 0; o < fill.size(); o += chunk) {
      const size_t m = std::min(chunk, fill.size() - o);
      std::vector<uint64_t> kk(fill.begin() + o, fill.begin() + o + m), ss(fs.begin() + o, fs.begin() + o + m);
      std::vector<float> vv(vin.begin() + o * DIM, vin.begin() + (o + m) * DIM);
      std::vector<uint8_t> ff(m);
      std::vector<int64_t> sl(m);
      cpu_upsert<P>(h, kInsertOrAssign, kk, P == kPolicyLru ? nullptr : &ss, vv, vout, ff, sl, st, ek, es, ev);
    }
    for (int64_t s = 0; s < CAP; ++s)
      if (!is_reserved_key(h.keys[s])) present.push_back(h.keys[s]);
  }
  // Batch: present keys (some repeated), new keys (some repeated), two reserved keys.
  std::vector<uint64_t> keys;
  const int nh = many ? 400 : 300, nn = many ? 250 : 200;
  for (int j = 0; j < nh; ++j) {
    const uint64_t k = present[rng() % present.size()];
    const int r = 1 + (rng() % 4 == 0 ? rng() % 3 : 0);
    for (int q = 0; q < r; ++q) keys.push_back(k);
  }
  for (int j = 0; j < nn; ++j) {
    const uint64_t k = (1ull << 62) + rng() % ((1ull << 62) - 1);
    const int r = 1 + (rng() % 4 == 0 ? rng() % 3 : 0);
    for (int q = 0; q < r; ++q) keys.push_back(k);
  }
  keys.push_back(kEmptyKey);
  keys.push_back(kLockedKey);
  std::shuffle(keys.begin(), keys.end(), rng);
  const int64_t n = static_cast<int64_t>(keys.size());
  std::vector<uint64_t> scores(n);
  for (auto& s : scores) s = P == kPolicyCustomized ? 1 + rng() % 80 : 1 + rng() % 3;
  const bool use_scores = P != kPolicyLru;
  std::vector<float> vin(n * DIM);
  for (auto& v : vin) v = static_cast<float>(rng() % 100000) / 1000.f;
  // The twin's batch: present keys first (stable), outputs put back.
  std::vector<int64_t> order(n);
  {
    std::vector<int64_t> a, b;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t k = keys[i];
      bool pre = false;
      if (!is_reserved_key(k)) {
        const auto home = cpu::home_of(h.ref(), k);
        pre = cpu::probe(h.ref(), k, home) >= 0;
      }
      (pre ? a : b).push_back(i);
    }
    order = a;
    order.insert(order.end(), b.begin(), b.end());
  }
  std::vector<uint64_t> kc(n), sc(n);
  std::vector<float> vc(n * DIM);
  for (int64_t r = 0; r < n; ++r) {
    kc[r] = keys[order[r]];
    sc[r] = scores[order[r]];
    std::memcpy(&vc[r * DIM], &vin[order[r] * DIM], DIM * 4);
  }
  // Device copy of the table before the op.
  TableRef d{};
  CK(cudaMalloc(&d.keys, CAP * 8));
  CK(cudaMalloc(&d.digests, CAP));
  CK(cudaMalloc(&d.scores, CAP * 8));
  CK(cudaMalloc(&d.values, CAP * DIM * 4));
  CK(cudaMalloc(&d.locks, NB * 4));
  CK(cudaMalloc(&d.counters, kNumCounters * 8));
  CK(cudaMemcpy(d.keys, h.keys.data(), CAP * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.digests, h.digests.data(), CAP, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.scores, h.scores.data(), CAP * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.values, h.values.data(), CAP * DIM * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.locks, h.locks.data(), NB * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.counters, h.counters.data(), kNumCounters * 8, cudaMemcpyHostToDevice));
  d.capacity = CAP;
  d.num_buckets = NB;
  d.bucket_capacity = B;
  d.dim = DIM;
  d.hbm_slots = B;
  // CPU.
  std::vector<float> vout_c(n * DIM, -9.f), ev_c(n * DIM, 0.f);
  std::vector<uint8_t> found_c(n, 2);
  std::vector<int64_t> slots_c(n, -7);
  std::vector<uint64_t> ek_c(n, 0), es_c(n, 0);
  int64_t st_c[kNumStats];
  cpu_upsert<P>(h, mode, kc, use_scores ? &sc : nullptr, vc, vout_c, found_c, slots_c, st_c, ek_c, es_c, ev_c);
  // GPU.
  uint64_t *dk, *dsc, *dek, *des;
  float *dvin, *dvout, *dev;
  bool* dfound;
  int64_t *dslots, *dstats;
  void* scratch;
  CK(cudaMalloc(&dk, n * 8));
  CK(cudaMalloc(&dsc, n * 8));
  CK(cudaMalloc(&dek, n * 8));
  CK(cudaMalloc(&des, n * 8));
  CK(cudaMalloc(&dvin, n * DIM * 4));
  CK(cudaMalloc(&dvout, n * DIM * 4));
  CK(cudaMalloc(&dev, n * DIM * 4));
  CK(cudaMalloc(&dfound, n));
  CK(cudaMalloc(&dslots, n * 8));
  CK(cudaMalloc(&dstats, kNumStats * 8));
  CK(cudaMalloc(&scratch, bucket_upsert_scratch_bytes(n, NB)));
  CK(cudaMemcpy(dk, keys.data(), n * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsc, scores.data(), n * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dvin, vin.data(), n * DIM * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dvout, 0xff, n * DIM * 4));
  CK(cudaMemset(dfound, 3, n));
  CK(cudaMemset(dslots, 0xee, n * 8));
  UpsertParams p{};
  p.t = d;
  p.mode = mode;
  p.keys = dk;
  p.n = n;
  p.values_in = mode != kFindOrInsert ? dvin : nullptr;
  p.scores_in = use_scores ? dsc : nullptr;
  p.values_out = mode == kFindOrInsert ? dvout : nullptr;
  p.found_out = dfound;
  p.slots_out = dslots;
  p.stats = dstats;
  if (mode == kInsertAndEvict) {
    p.evicted_keys = dek;
    p.evicted_scores = des;
    p.evicted_values = dev;
  }
  p.init.kind = kInitUniform;
  p.init.a = -1.f;
  p.init.b = 1.f;
  p.init.seed = 7;
  launch_upsert_grouped<kKeyUInt64, kValueFp32, P>(p, scratch, g_lanes, 0);
  CK(cudaDeviceSynchronize());
  HostTable g;
  CK(cudaMemcpy(g.keys.data(), d.keys, CAP * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.digests.data(), d.digests, CAP, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.scores.data(), d.scores, CAP * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.values.data(), d.values, CAP * DIM * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.locks.data(), d.locks, NB * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.counters.data(), d.counters, kNumCounters * 8, cudaMemcpyDeviceToHost));
  std::vector<float> vout_g(n * DIM), ev_g(n * DIM);
  std::vector<uint8_t> found_g(n);
  std::vector<int64_t> slots_g(n);
  std::vector<uint64_t> ek_g(n), es_g(n);
  int64_t st_g[kNumStats];
  CK(cudaMemcpy(vout_g.data(), dvout, n * DIM * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ev_g.data(), dev, n * DIM * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(found_g.data(), dfound, n, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(slots_g.data(), dslots, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ek_g.data(), dek, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(es_g.data(), des, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(st_g, dstats, sizeof st_g, cudaMemcpyDeviceToHost));
  int bad = 0;
  auto fail = [&](const char* what, long long a, long long b, long long at) {
    if (bad++ < 6) std::printf("  mismatch %s at %lld: gpu %lld cpu %lld\n", what, at, a, b);
  };
  for (int64_t s = 0; s < CAP; ++s) {
    if (g.keys[s] != h.keys[s]) fail("key", g.keys[s], h.keys[s], s);
    if (g.digests[s] != h.digests[s]) fail("digest", g.digests[s], h.digests[s], s);
    if (g.scores[s] != h.scores[s]) fail("score", g.scores[s], h.scores[s], s);
    if (std::memcmp(&g.values[s * DIM], &h.values[s * DIM], DIM * 4)) fail("row", s, s, s);
  }
  for (int64_t b = 0; b < NB; ++b)
    if (g.locks[b]) fail("lock", g.locks[b], 0, b);
  if (g.counters[kCounterSize] != h.counters[kCounterSize]) fail("size", g.counters[1], h.counters[1], 0);
  if (g.counters[kCounterClock] != h.counters[kCounterClock]) fail("clock", g.counters[0], h.counters[0], 0);
  for (int k = 0; k < kNumStats; ++k)
    if (st_g[k] != st_c[k]) fail("stat", st_g[k], st_c[k], k);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = order[r];
    if (found_g[i] != found_c[r]) fail("found", found_g[i], found_c[r], i);
    if (slots_g[i] != slots_c[r]) fail("slot", slots_g[i], slots_c[r], i);
    if (mode == kFindOrInsert && std::memcmp(&vout_g[i * DIM], &vout_c[r * DIM], DIM * 4)) fail("out row", i, i, i);
  }
  if (mode == kInsertAndEvict) {
    std::vector<std::tuple<uint64_t, uint64_t, std::vector<float>>> a, b;
    for (int64_t k = 0; k < st_c[kStatEvicted]; ++k)
      b.emplace_back(ek_c[k], es_c[k], std::vector<float>(&ev_c[k * DIM], &ev_c[k * DIM] + DIM));
    for (int64_t k = 0; k < st_g[kStatEvicted] && k < n; ++k)
      a.emplace_back(ek_g[k], es_g[k], std::vector<float>(&ev_g[k * DIM], &ev_g[k * DIM] + DIM));
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) fail("evicted", static_cast<long long>(a.size()), static_cast<long long>(b.size()), 0);
  }
  const char* mn[] = {"find_or_insert", "insert_or_assign", "insert_and_evict"};
  const char* pn[] = {"lru", "lfu", "customized"};
  std::printf("%-10s %-17s seed %d n %5lld  ins %lld asg %lld evi %lld ref %lld ill %lld  %s\n", pn[P], mn[mode], seed,
              (long long)n, (long long)st_c[0], (long long)st_c[1], (long long)st_c[2], (long long)st_c[3],
              (long long)st_c[4], bad ? "MISMATCH" : "ok");
  cudaFree(d.keys); cudaFree(d.digests); cudaFree(d.scores); cudaFree(d.values); cudaFree(d.locks);
  cudaFree(d.counters); cudaFree(dk); cudaFree(dsc); cudaFree(dek); cudaFree(des); cudaFree(dvin); cudaFree(dvout);
  cudaFree(dev); cudaFree(dfound); cudaFree(dslots); cudaFree(dstats); cudaFree(scratch);
  return bad == 0;
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // one line per case even when killed
  bool ok = true;
  for (int lanes : {16, 32}) {
    g_lanes = lanes;
    std::printf("lanes per bucket: %d\n", lanes);
    for (int seed = 1; seed <= 2; ++seed)
      for (int mode = 0; mode < 3; ++mode) {
        ok &= run_case<kPolicyLru>(mode, seed, seed == 2);
        ok &= run_case<kPolicyLfu>(mode, seed, seed == 2);
        ok &= run_case<kPolicyCustomized>(mode, seed, seed == 2);
      }
  }
  std::printf(ok ? "ALL OK\n" : "FAILED\n");
  return ok ? 0 : 1;
}
