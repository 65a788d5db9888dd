// Scored hash table: the CPU twin. Same layout, hash, probe order, scores and eviction choices as the CUDA
// kernels (table_kernels.cuh); the keys present at an op's start are served first, then the others, each sweep in
// batch order, so where the GPU has no contention for a full bucket inside one batch the two agree slot for slot
// (and the bucket-grouped upsert, bucket_upsert.cuh, everywhere). Rows are placed by ref_row, as on CUDA (a twin with a
// second row buffer keeps its rows where the CUDA table keeps them: table_types.h host_row_of). Used as the test
// oracle and as the CPU implementation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {
namespace cpu {

template <int V> struct CpuVal;
template <> struct CpuVal<kValueFp16> { using T = c10::Half; };
template <> struct CpuVal<kValueBf16> { using T = c10::BFloat16; };
template <> struct CpuVal<kValueFp32> { using T = float; };

template <typename T> inline float to_f(T v) { return static_cast<float>(v); }
template <typename T> inline T from_f(float v) { return T(v); }

struct Home {
  int64_t base;
  int start;
  uint8_t digest;
};
inline Home home_of(const TableRef& t, uint64_t key) {
  uint64_t h = accel_hash_key(key);
  return Home{static_cast<int64_t>(bucket_of_hash(h, static_cast<uint64_t>(t.num_buckets))) * t.bucket_capacity,
              start_of_hash(h, t.bucket_capacity), digest_of_hash(h)};
}
inline uint64_t key_at(const TableRef& t, int64_t slot) { return static_cast<const uint64_t*>(t.keys)[slot]; }
inline void set_key(const TableRef& t, int64_t slot, uint64_t k) { static_cast<uint64_t*>(t.keys)[slot] = k; }

inline int64_t probe(const TableRef& t, uint64_t key, const Home& h) {
  for (int s = 0; s < t.bucket_capacity; ++s) {
    int64_t slot = h.base + s;
    if (t.digests[slot] == h.digest && key_at(t, slot) == key) return slot;
  }
  return -1;
}

template <int V>
void lookup(const LookupParams& p) {
  using T = typename CpuVal<V>::T;
  const TableRef& t = p.t;
  const auto* keys = static_cast<const uint64_t*>(p.keys);
  for (int64_t i = 0; i < p.n; ++i) {
    const uint64_t key = keys[i];
    int64_t slot = is_reserved_key(key) ? -1 : probe(t, key, home_of(t, key));
    if (p.values_out) {
      T* out = static_cast<T*>(p.values_out) + i * t.dim;
      if (slot >= 0) std::memcpy(out, ref_row<const T>(t, slot), sizeof(T) * t.dim);
      else if (p.fill_missing) std::fill(out, out + t.dim, from_f<T>(p.missing_value));
    }
    if (p.found_out) p.found_out[i] = slot >= 0;
    if (p.slots_out) p.slots_out[i] = slot;
    if (p.scores_out && slot >= 0) p.scores_out[i] = t.scores[slot];
  }
}

template <int V>
void init_row(typename CpuVal<V>::T* dst, int64_t dim, const Initializer& in, uint64_t clock, uint64_t key) {
  using T = typename CpuVal<V>::T;
  for (int64_t j = 0; j < dim; ++j) dst[j] = from_f<T>(init_value(in, clock, key, j));
}

template <int V>
void upsert(const UpsertParams& p, int policy) {
  using T = typename CpuVal<V>::T;
  const TableRef& t = p.t;
  const int64_t dim = t.dim;
  t.counters[kCounterClock] += 1;
  const uint64_t clock = static_cast<uint64_t>(t.counters[kCounterClock]);
  std::fill(p.stats, p.stats + kNumStats, 0);
  const uint8_t empty_dg = empty_digest();
  const int mode = p.mode;
  const auto* keys = static_cast<const uint64_t*>(p.keys);

  // As the CUDA upsert: every key present at the op's start is served first (in batch order), then the others in
  // batch order, so that no insert of the batch evicts a key the same batch hits. (Serving the present keys changes
  // no key's slot, so "present now" in the first sweep is "present at the op's start".)
  std::vector<char> served(static_cast<size_t>(p.n), 0);
  const auto serve = [&](int64_t i) {
    const uint64_t key = keys[i];
    const T* row_in = p.values_in ? static_cast<const T*>(p.values_in) + i * dim : nullptr;
    const bool given = p.scores_in != nullptr;
    const uint64_t score_in = given ? p.scores_in[i] : 0;
    const bool flag = p.accum_flags ? p.accum_flags[i] : false;
    T* out_row = p.values_out ? static_cast<T*>(p.values_out) + i * dim : nullptr;
    int64_t result_slot = -1;
    bool hit = false;
    int stat = -1;
    if (is_reserved_key(key)) {
      stat = kStatIllegal;
    } else {
      const Home h = home_of(t, key);
      int64_t slot = probe(t, key, h);
      const bool may_insert = mode == kFindOrInsert || mode == kInsertOrAssign || mode == kInsertAndEvict ||
                              (mode == kAccumOrAssign && !flag);
      if (slot >= 0) {
        hit = true;
        result_slot = slot;
        if (!(mode == kAccumOrAssign && !flag)) {
          stat = kStatAssigned;
          T* row = ref_row<T>(t, slot);
          if (mode == kFindOrInsert) {
            if (out_row) std::memcpy(out_row, row, sizeof(T) * dim);
          } else if (mode == kInsertOrAssign || mode == kInsertAndEvict || mode == kAssign) {
            std::memcpy(row, row_in, sizeof(T) * dim);
          } else if (mode == kAccumOrAssign) {
            for (int64_t j = 0; j < dim; ++j) row[j] = from_f<T>(to_f(row[j]) + to_f(row_in[j]));
          }
          t.scores[slot] = (mode == kAssignScores && given)
                               ? score_in
                               : policy_score(policy, p.use_epoch, p.epoch, clock, given, score_in, true,
                                              t.scores[slot]);
        }
      } else if (may_insert) {
        const uint64_t new_score = policy_score(policy, p.use_epoch, p.epoch, clock, given, score_in, false, 0);
        int64_t target = -1;
        // claim order (probe.cuh next_free_candidate): the probe order, a hybrid table's HBM slots (each bucket's
        // first hbm_slots) before its host slots (slot-major host rows: lowest first, table_types.h claim_position)
        const bool ff = host_first_fit(t.values_host != nullptr, t.host_run);
        for (int part = 0; part < 2 && target < 0; ++part) {
          for (int d = 0; d < t.bucket_capacity && target < 0; ++d) {
            const int j = claim_position(d + part * t.bucket_capacity, h.start, t.bucket_capacity, ff);
            const int64_t s = h.base + j;
            if ((j >= t.hbm_slots) == (part == 1) && t.digests[s] == empty_dg && key_at(t, s) == kEmptyKey) target = s;
          }
        }
        stat = kStatInserted;
        if (target < 0) {
          // the minimum (score, digest, key): evicts_before, the CUDA kernels' rule (no slot position)
          int64_t victim = -1;
          uint64_t min_score = ~0ull;
          for (int s = 0; s < t.bucket_capacity; ++s) {
            const int64_t q = h.base + s;
            if (victim < 0 || evicts_before(t.scores[q], t.digests[q], key_at(t, q), t.scores[victim],
                                            t.digests[victim], key_at(t, victim)))
              victim = q;
          }
          min_score = t.scores[victim];
          if (new_score > min_score) {
            target = victim;
            stat = kStatEvicted;
            if (mode == kInsertAndEvict) {
              const int64_t pos = p.stats[kStatEvicted];
              if (p.evicted_keys) static_cast<uint64_t*>(p.evicted_keys)[pos] = key_at(t, victim);
              if (p.evicted_scores) p.evicted_scores[pos] = t.scores[victim];
              if (p.evicted_values)
                std::memcpy(static_cast<T*>(p.evicted_values) + pos * dim,
                            ref_row<const T>(t, victim), sizeof(T) * dim);
            }
          } else {
            stat = kStatRefused;
          }
        }
        if (target >= 0) {
          T* row = ref_row<T>(t, target);
          if (mode == kFindOrInsert) {
            init_row<V>(row, dim, p.init, clock, key);
            if (out_row) std::memcpy(out_row, row, sizeof(T) * dim);
          } else {
            std::memcpy(row, row_in, sizeof(T) * dim);
          }
          t.scores[target] = new_score;
          t.digests[target] = h.digest;
          set_key(t, target, key);
          result_slot = target;
        }
      }
    }
    if (mode == kFindOrInsert && result_slot < 0 && out_row) init_row<V>(out_row, dim, p.init, clock, key);
    if (p.slots_out) p.slots_out[i] = result_slot;
    if (p.found_out) p.found_out[i] = hit;
    if (stat >= 0) {
      p.stats[stat] += 1;
      if (stat == kStatInserted) t.counters[kCounterSize] += 1;
    }
  };
  for (int64_t i = 0; i < p.n; ++i) {
    const uint64_t key = keys[i];
    if (!is_reserved_key(key) && probe(t, key, home_of(t, key)) >= 0) {
      serve(i);
      served[i] = 1;
    }
  }
  for (int64_t i = 0; i < p.n; ++i)
    if (!served[i]) serve(i);
}

inline void erase(const EraseParams& p) {
  const TableRef& t = p.t;
  const uint8_t empty_dg = empty_digest();
  int64_t erased = 0;
  if (p.keys) {
    const auto* keys = static_cast<const uint64_t*>(p.keys);
    for (int64_t i = 0; i < p.n; ++i) {
      if (is_reserved_key(keys[i])) continue;
      int64_t slot = probe(t, keys[i], home_of(t, keys[i]));
      if (slot < 0) continue;
      t.digests[slot] = empty_dg;
      set_key(t, slot, kEmptyKey);
      ++erased;
    }
  } else {
    for (int64_t slot = 0; slot < t.capacity; ++slot) {
      if (!is_reserved_key(key_at(t, slot)) && t.scores[slot] < p.threshold) {
        t.digests[slot] = empty_dg;
        set_key(t, slot, kEmptyKey);
        ++erased;
      }
    }
  }
  p.stats[0] += erased;
  t.counters[kCounterSize] -= erased;
}

template <int V>
void export_batch(const ExportParams& p) {
  using T = typename CpuVal<V>::T;
  const TableRef& t = p.t;
  int64_t pos = *p.count;
  for (int64_t slot = p.offset; slot < p.offset + p.n; ++slot) {
    const uint64_t k = key_at(t, slot);
    if (is_reserved_key(k) || (p.use_threshold && t.scores[slot] < p.threshold)) continue;
    static_cast<uint64_t*>(p.keys_out)[pos] = k;
    if (p.scores_out) p.scores_out[pos] = t.scores[slot];
    if (p.slots_out) p.slots_out[pos] = slot;
    if (p.values_out)
      std::memcpy(static_cast<T*>(p.values_out) + pos * t.dim, ref_row<const T>(t, slot), sizeof(T) * t.dim);
    ++pos;
  }
  *p.count = pos;
}

template <int V>
void rehash(const RehashParams& rp) {
  // Re-insert slot by slot with the stored score (Customized semantics), rows copied.
  const TableRef& s = rp.src;
  int64_t saved_clock = rp.dst.counters[kCounterClock];
  for (int64_t slot = 0; slot < s.capacity; ++slot) {
    const uint64_t k = key_at(s, slot);
    if (is_reserved_key(k)) continue;
    UpsertParams p{};
    p.t = rp.dst;
    p.mode = kInsertOrAssign;
    p.keys = &k;
    p.n = 1;
    p.values_in = ref_row<const typename CpuVal<V>::T>(s, slot);
    p.scores_in = s.scores + slot;
    int64_t st[kNumStats];
    p.stats = st;
    upsert<V>(p, kPolicyCustomized);
    for (int j = 0; j < kNumStats; ++j) rp.stats[j] += st[j];
  }
  rp.dst.counters[kCounterClock] = saved_clock;  // the rehash is no op of the table's clock
}

}  // namespace cpu
}  // namespace table
}  // namespace dynamicemb
