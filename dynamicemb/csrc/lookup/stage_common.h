// Staging of one step's ids into the HBM caches of caching tables over the uva store (UvaStore: a scored hash
// table with its rows in pinned host memory and its index in HBM), for every table in one pass and with no host
// wait: op cache_stage (ops/stage_ops.cc), CUDA kernels in stage_kernels.cu, the CPU twin in stage_ops.cc. Both
// run the per-id step below (`stage_one`, `unplace_one`), written once for host and device; only the atomics and
// the bucket locks differ (the policy `A`).
//
// Per step (cur: the step's stamp, min_live: the stamp of the oldest step whose backward has not run):
//   probe    every id of a masked table is looked up in its cache; a hit stamps its slot with cur (the guard: a
//            slot stamped >= min_live is never evicted, so the rows of this step and of steps in flight stay);
//            misses are counted per table (CacheProbeParams, probe_kernels.cu);
//   stage    per missing id (one thread each, duplicates allowed), under its cache bucket's lock: if the id is in
//            the cache by now (a duplicate staged it) nothing; else its store row, if any, moves into a slot of
//            the bucket (a free slot, else the unguarded row of lowest score, ties lowest slot, never one of the
//            maximum score: that row is first written back into a free slot of its store bucket); a new id
//            (training) takes such a slot as a placeholder (score 0), so the step's insert finds room; the slot is
//            stamped with cur. Store buckets are locked one at a time while a cache bucket lock is held (locks are
//            acquired in that order only: no deadlock). A bucket with neither a free nor an evictable slot, or a
//            store bucket without a free slot for the evicted row, leaves the id unstaged (nothing changes for
//            it) and records the failure: `failed` (the step's skip flag: its lookup_step inserts and updates
//            nothing) and the first failure's [rule, table, id, bucket slots] in `first_fail`;
//   unplace  the placeholders leave (their slots are free for the step's insert), and every free slot of their
//            buckets is stamped with cur, so the slot the step's insert takes is guarded as well.
// The moved rows keep their scores; no score and no op clock of the cache changes otherwise, so the step sees
// what the Python staging (_uva_store.stage_tables_device) gives. No CUDA and no torch headers here.
#pragma once

#include <cstdint>

#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/validate_types.h"
#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace lookup {


struct StageParams {
  const TableMeta* meta;      // (num_tables) the caches
  const StageTable* stage;    // (num_tables) their stores (used for masked tables only)
  int num_tables;
  const int32_t* table_mask;  // (num_tables) nonzero: stage this table
  const uint64_t* ids;        // (n)
  const int64_t* offsets;     // (num_bags + 1)
  int64_t n, num_bags, batch;
  const int32_t* feature_table;
  int num_features;
  const bool* found;          // (n) the probe's
  int64_t* counts;            // (3 num_tables): per table [rows moved in, rows written back, ids refused],
                              // running totals (added to)
  int64_t* place;             // (n) scratch: the placeholder slot of id i, else -1 (ids not found only)
  int64_t cur, min_live;
  bool insert_new;            // training: reserve a slot for every new id
  int32_t* failed;            // (1) zero on entry; 1 when some id was left unstaged
  int64_t* first_fail;        // (4) [rule, table, id, bucket slots] of the first failure
  int value_bytes;            // bytes per value element (2 or 4)
  const int32_t* gate;        // (1) or null: *gate == 0 -> nothing to stage (CacheProbeParams::gate)
};

// Feature of position i (host and device; the dedup's function, see probe_meta.cuh feature_of_pos).
TABLE_HD int stage_feature_of(const int64_t* offsets, int64_t n, int64_t num_bags, int64_t batch, int num_features,
                              int64_t i) {
  int f = 0, hi = num_features - 1;
  while (f < hi) {
    const int mid = (f + hi + 1) >> 1;
    const int64_t b = static_cast<int64_t>(mid) * batch;
    int64_t o = b < num_bags ? offsets[b] : 0;
    o = o < 0 ? 0 : (o > n ? n : o);
    const bool ge = b < num_bags && o <= i;
    f = ge ? mid : f;
    hi = ge ? hi : mid - 1;
  }
  return f;
}

template <class A>
TABLE_HD void stage_fail(const StageParams& p, int32_t rule, int table, uint64_t key, int64_t bound) {
  A::add(p.counts + 3 * table + 2, 1);
  if (A::claim(p.failed)) {
    p.first_fail[1] = table;
    p.first_fail[2] = static_cast<int64_t>(key);
    p.first_fail[3] = bound;
    A::publish(p.first_fail, rule);
  }
}

// Slots are read kScan at a time (independent loads in flight; bucket_capacity is a multiple of 16).
constexpr int kScan = 8;

// Slot of `key` in the bucket [base, base + cap) of `keys` (a scan of its keys), or -1.
template <class A>
TABLE_HD int64_t stage_find(const uint64_t* keys, int64_t base, int cap, uint64_t key) {
  for (int j = 0; j < cap; j += kScan) {
    uint64_t k[kScan];
#pragma unroll
    for (int r = 0; r < kScan; ++r) k[r] = A::ld(keys + base + j + r);
#pragma unroll
    for (int r = 0; r < kScan; ++r)
      if (k[r] == key) return base + j + r;
  }
  return -1;
}

template <class A>
TABLE_HD void stage_one(const StageParams& p, int64_t i) {
  if (p.found[i]) return;  // (a warm step: every thread returns here; `place` is read only where found is clear)
  p.place[i] = -1;
  const uint64_t key = p.ids[i];
  if (table::is_reserved_key(key)) return;
  const int t = p.feature_table[stage_feature_of(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i)];
  if (!p.table_mask[t]) return;
  const TableMeta& c = p.meta[t];
  const StageTable& s = p.stage[t];
  uint64_t* ck = reinterpret_cast<uint64_t*>(c.keys);
  uint64_t* cs = reinterpret_cast<uint64_t*>(c.scores);
  uint8_t* cd = reinterpret_cast<uint8_t*>(c.digests);
  int64_t* stamps = reinterpret_cast<int64_t*>(s.stamps);
  uint64_t* sk = reinterpret_cast<uint64_t*>(s.keys);
  uint64_t* ss = reinterpret_cast<uint64_t*>(s.scores);
  uint8_t* sd = reinterpret_cast<uint8_t*>(s.digests);
  const int ccap = static_cast<int>(c.bucket_capacity), scap = static_cast<int>(s.bucket_capacity);
  const int64_t row_bytes = c.row_stride * p.value_bytes;
  const uint64_t h = accel_hash_key(key);
  const int64_t cb = static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(c.num_buckets)));
  const int64_t cbase = cb * ccap;
  int32_t* clock = reinterpret_cast<int32_t*>(c.locks) + cb;
  A::lock(clock);
  // the cache bucket: the key (a duplicate of this step staged it), its first free slot, its eviction candidate
  int64_t free_slot = -1, victim = -1;
  uint64_t vscore = 0;
  for (int j0 = 0; j0 < ccap; j0 += kScan) {
    uint64_t k2[kScan], sc[kScan], st[kScan];
#pragma unroll
    for (int r = 0; r < kScan; ++r) {
      k2[r] = A::ld(ck + cbase + j0 + r);
      sc[r] = A::ld(cs + cbase + j0 + r);
      st[r] = A::ld(reinterpret_cast<uint64_t*>(stamps + cbase + j0 + r));
    }
    bool hit = false;
#pragma unroll
    for (int r = 0; r < kScan; ++r) {
      const int64_t slot = cbase + j0 + r;
      hit |= k2[r] == key;
      if (k2[r] == table::kEmptyKey) {
        if (free_slot < 0) free_slot = slot;
      } else if (!table::is_reserved_key(k2[r]) && sc[r] != ~0ull && static_cast<int64_t>(st[r]) < p.min_live &&
                 (victim < 0 || sc[r] < vscore)) {
        victim = slot;
        vscore = sc[r];
      }
    }
    if (hit) {
      A::unlock(clock);
      return;
    }
  }
  // the key in its store
  const int64_t sbase = static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(s.num_buckets))) * scap;
  const int64_t at = stage_find<A>(sk, sbase, scap, key);
  if (at < 0 && !p.insert_new) {  // not stored, no slot to reserve (eval)
    A::unlock(clock);
    return;
  }
  const int64_t slot = free_slot >= 0 ? free_slot : victim;
  if (slot < 0) {
    stage_fail<A>(p, kRuleCacheFull, t, key, ccap);
    A::unlock(clock);
    return;
  }
  void* crow = table::table_row<uint8_t>(reinterpret_cast<void*>(c.values), nullptr, 0, slot, row_bytes);
  if (slot == victim) {  // the victim's row goes back to a free slot of its store bucket first
    const uint64_t vk = A::ld(ck + slot);
    const uint64_t vh = accel_hash_key(vk);
    const int64_t vb = static_cast<int64_t>(table::bucket_of_hash(vh, static_cast<uint64_t>(s.num_buckets)));
    int32_t* slock = reinterpret_cast<int32_t*>(s.locks) + vb;
    A::lock(slock);
    const int64_t fs = stage_find<A>(sk, vb * scap, scap, table::kEmptyKey);
    if (fs < 0) {
      A::unlock(slock);
      stage_fail<A>(p, kRuleStoreFull, t, key, scap);
      A::unlock(clock);
      return;
    }
    A::copy_row(table::table_row<uint8_t>(reinterpret_cast<void*>(s.values), reinterpret_cast<void*>(s.values_host),
                                          s.hbm_rows, fs, row_bytes), crow, row_bytes);
    ss[fs] = vscore;
    sd[fs] = table::digest_of_hash(vh);
    A::publish_key(sk + fs, vk);
    A::add(reinterpret_cast<int64_t*>(s.counters) + table::kCounterSize, 1);
    A::unlock(slock);
    A::add(reinterpret_cast<int64_t*>(c.counters) + table::kCounterSize, -1);
    A::add(p.counts + 3 * t + 1, 1);
  }
  uint64_t score = 0;
  if (at >= 0) {  // the stored row moves in with its score, and leaves the store
    const int64_t kb = sbase / scap;
    int32_t* slock = reinterpret_cast<int32_t*>(s.locks) + kb;
    A::lock(slock);
    A::copy_row(crow, table::table_row<uint8_t>(reinterpret_cast<void*>(s.values),
                                                reinterpret_cast<void*>(s.values_host), s.hbm_rows, at, row_bytes),
                row_bytes);
    score = A::ld(ss + at);
    sd[at] = table::empty_digest();
    ss[at] = 0;
    A::publish_key(sk + at, table::kEmptyKey);
    A::add(reinterpret_cast<int64_t*>(s.counters) + table::kCounterSize, -1);
    A::unlock(slock);
    A::add(p.counts + 3 * t, 1);
  } else {
    p.place[i] = slot;  // a new id's placeholder (unplace frees it)
  }
  cs[slot] = score;
  cd[slot] = table::digest_of_hash(h);
  stamps[slot] = p.cur;
  A::publish_key(ck + slot, key);
  A::add(reinterpret_cast<int64_t*>(c.counters) + table::kCounterSize, 1);
  A::unlock(clock);
}

// After every stage_one: id i's placeholder leaves; every free slot of its bucket is stamped with cur.
template <class A>
TABLE_HD void unplace_one(const StageParams& p, int64_t i) {
  if (p.found[i]) return;
  const int64_t slot = p.place[i];
  if (slot < 0) return;
  const int t = p.feature_table[stage_feature_of(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i)];
  const TableMeta& c = p.meta[t];
  uint64_t* ck = reinterpret_cast<uint64_t*>(c.keys);
  int64_t* stamps = reinterpret_cast<int64_t*>(p.stage[t].stamps);
  reinterpret_cast<uint64_t*>(c.scores)[slot] = 0;
  reinterpret_cast<uint8_t*>(c.digests)[slot] = table::empty_digest();
  A::publish_key(ck + slot, table::kEmptyKey);
  A::add(reinterpret_cast<int64_t*>(c.counters) + table::kCounterSize, -1);
  const int cap = static_cast<int>(c.bucket_capacity);
  const int64_t base = slot / cap * cap;
  for (int j = 0; j < cap; ++j)
    if (base + j == slot || A::ld(ck + base + j) == table::kEmptyKey) stamps[base + j] = p.cur;
}

// Host policy (the CPU twin: one thread, no locks).
struct HostStageAtomics {
  static uint64_t ld(const uint64_t* a) { return *a; }
  static void add(int64_t* a, int64_t v) { *a += v; }
  static bool claim(int32_t* f) {
    if (*f) return false;
    *f = 1;
    return true;
  }
  static void publish(int64_t* rec, int32_t rule) { rec[0] = rule; }
  static void publish_key(uint64_t* a, uint64_t k) { *a = k; }
  static void lock(int32_t*) {}
  static void unlock(int32_t*) {}
  static void copy_row(void* dst, const void* src, int64_t bytes) {
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    for (int64_t b = 0; b < bytes; ++b) d[b] = s[b];
  }
};

// The op's launchers (CUDA, stage_kernels.cu): the probe (with stamps), then stage_one and unplace_one over
// every id, then the report of the first failure into the device error record (when `report`).
void launch_cache_stage(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
