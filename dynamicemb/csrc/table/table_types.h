// Scored hash table: layout, sentinels, parameter structs and launcher declarations.
//
// Shared by the CUDA kernels (table_kernels.cuh), the CPU twin (table_cpu.h) and the ops (table_ops.cc).
// No CUDA and no torch headers here: the ops file is plain host C++.
//
// Layout (all arrays owned by Python as torch tensors, indexed by slot = bucket * bucket_capacity + i):
//   keys     (capacity,)        int64/uint64  EMPTY for a free slot
//   digests  (capacity,)        uint8         8 bits of the key hash; kEmptyDigest for a free slot
//   scores   (capacity,)        int64         uint64 bit patterns (eviction order is unsigned)
//   values   (capacity, dim)    fp16/bf16/fp32; a row per slot (the embedding collection stores
//                                [embedding | optimizer state] here and gathers by slot)
//   locks    (num_buckets,)     int32         eviction lock per bucket (0 when no kernel runs)
//   counters (4,)               int64         [clock, size, spare, spare] (the CUDA upsert's pending count lives
//                                             in its pending scratch, see UpsertParams::pending)
// A key lives in bucket accel_hash_key(key) fast-ranged onto num_buckets; its probe order inside the bucket is
// a rotation starting at (hash & (bucket_capacity - 1)).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TABLE_HD __host__ __device__ __forceinline__
#else
#define TABLE_HD inline
#endif

#include "dynamicemb/csrc/table/hash.cuh"

namespace dynamicemb {
namespace table {

// Reserved key bit patterns: int64 min, min+1, min+2 (as uint64: 2^63, 2^63+1, 2^63+2).
constexpr uint64_t kEmptyKey = 0x8000000000000000ull;
constexpr uint64_t kReclaimedKey = 0x8000000000000001ull;  // reserved for future tombstones
constexpr uint64_t kLockedKey = 0x8000000000000002ull;
constexpr int kNumReservedKeys = 3;

TABLE_HD bool is_reserved_key(uint64_t k) { return k - kEmptyKey < uint64_t(kNumReservedKeys); }

// Eviction order (every eviction path: the table kernels' scan (probe.cuh), the step's insert (insert_kernels.cu),
// the CPU twin (table_cpu.h)): a full bucket evicts its slot of minimum (score, digest, key), scores and keys in
// unsigned 64-bit order. No slot position takes part, so tables whose keys sit in other slots of the bucket (an
// all-HBM and a hybrid table, whose inserts claim the HBM slots first; two runs whose claims raced) evict the same
// key. The digest (8 hash bits, stored per slot) settles almost every tie of score without reading a key word; the
// key settles the rest. True when slot a is evicted before slot b (a total order on distinct keys).
TABLE_HD bool evicts_before(uint64_t score_a, uint8_t digest_a, uint64_t key_a, uint64_t score_b, uint8_t digest_b,
                            uint64_t key_b) {
  if (score_a != score_b) return score_a < score_b;
  if (digest_a != digest_b) return digest_a < digest_b;
  return key_a < key_b;
}

TABLE_HD uint8_t digest_of_hash(uint64_t h) { return static_cast<uint8_t>(h >> 32); }
// Free slots carry the digest of the EMPTY key: an insert finds candidate free slots by a digest compare.
TABLE_HD uint8_t empty_digest() { return digest_of_hash(accel_hash_key(kEmptyKey)); }

TABLE_HD uint64_t bucket_of_hash(uint64_t h, uint64_t num_buckets) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(h, num_buckets);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * num_buckets) >> 64);
#endif
}
TABLE_HD int start_of_hash(uint64_t h, int bucket_capacity) { return static_cast<int>(h & (bucket_capacity - 1)); }

enum KeyKind : int { kKeyInt64 = 0, kKeyUInt64 = 1 };
enum ValueKind : int { kValueFp16 = 0, kValueBf16 = 1, kValueFp32 = 2 };
// Policy family (the template parameter); the epoch variants are a runtime flag of LRU/LFU.
enum PolicyKind : int { kPolicyLru = 0, kPolicyLfu = 1, kPolicyCustomized = 2 };

enum UpsertMode : int {
  kFindOrInsert = 0,    // hit: read row; miss: insert an initialized row
  kInsertOrAssign = 1,  // hit: write row; miss: insert row
  kInsertAndEvict = 2,  // insert_or_assign that also reports the evicted (key, row, score)
  kAssign = 3,          // hit: write row; miss: nothing
  kAssignScores = 4,    // hit: set score; miss: nothing
  kAccumOrAssign = 5,   // flag set & hit: row += value; flag clear & miss: insert row; otherwise nothing
};

enum StatIndex : int { kStatInserted = 0, kStatAssigned = 1, kStatEvicted = 2, kStatRefused = 3, kStatIllegal = 4 };
constexpr int kNumStats = 5;
enum CounterIndex : int { kCounterClock = 0, kCounterSize = 1 };
// int64 words of the CUDA upsert's pending scratch past its 2n entries; the pending count is word 2n + 8, at
// least 64 bytes past the last entry, and the insert pass's group counter word 2n + 12.
constexpr int64_t kPendingExtra = 16;
// Optional tail of the pending scratch (LRU row copiers of all-HBM tables): a first-writer set of the batch's keys,
// a power of two >= 4n int64 words, zeroed on the device when the batch repeats keys (table_kernels.cuh, dedup_set),
// then kDedupTail words holding the device's choice of the set (word kDedupTail / 2).
constexpr int64_t kDedupTail = 16;
TABLE_HD int64_t dedup_set_words(int64_t n) {
  int64_t w = 64;
  while (w < 4 * n) w *= 2;
  return w + kDedupTail;
}
constexpr int kNumCounters = 4;

enum InitKind : int { kInitConstant = 0, kInitUniform = 1, kInitNormal = 2, kInitTruncNormal = 3 };

struct Initializer {
  int kind = kInitConstant;
  float a = 0.f, b = 0.f;        // uniform bounds / truncation bounds
  float mean = 0.f, std = 1.f;   // normal
  float value = 0.f;             // constant
  int64_t init_cols = -1;        // columns [0, init_cols) drawn from the initializer (-1: all)
  float fill = 0.f;              // columns [init_cols, dim) set to this
  uint64_t seed = 0;
};

struct TableRef {
  void* keys;
  uint8_t* digests;
  uint64_t* scores;
  void* values;
  int32_t* locks;
  int64_t* counters;
  int64_t capacity;
  int64_t num_buckets;
  int bucket_capacity;
  int64_t dim;
  void* values_host;  // hybrid storage: each bucket's slots [hbm_slots, bucket_capacity) (pinned host memory, UVA
                      // on CUDA; a second buffer on the CPU); null: every row at `values`
  int64_t hbm_slots;  // hybrid storage: each bucket's first hbm_slots slots have their rows at `values`
  int64_t host_run;   // hybrid storage: 0: bucket-major host rows; num_buckets: slot-major (host_row_of)
};

// Hybrid placement (split buckets): slot = bucket * B + j. Slots j < hbm_slots of every bucket have their rows in
// HBM (`values`, row bucket * hbm_slots + j), the others in host memory (`values_host`): inserts claim a bucket's
// HBM slots first (next_free_candidate), so host rows hold only the buckets' overflow. B is a power of two.
// Host rows are bucket-major (host_run 0: row bucket * (B - hbm_slots) + j - hbm_slots) or slot-major (host_run =
// num_buckets: row (j - hbm_slots) * num_buckets + bucket): buckets fill lowest slot first, so slot-major packs a
// store's rows into the first few runs of num_buckets rows, and a pass over them touches fewer host regions.
TABLE_HD int bucket_shift(int64_t bucket_capacity) {
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(bucket_capacity)) - 1;
#else
  return __builtin_ctzll(static_cast<unsigned long long>(bucket_capacity));
#endif
}
// Whether `slot` of a table with host rows (values_host != null) has its row in host memory.
TABLE_HD bool is_host_slot(int64_t hbm_slots, int64_t bucket_capacity, int64_t slot) {
  return (slot & (bucket_capacity - 1)) >= hbm_slots;
}
// The host row of a host slot (is_host_slot): the ONE place a host row is placed (layout above).
TABLE_HD int64_t host_row_of(int64_t hbm_slots, int64_t bucket_capacity, int64_t host_run, int64_t slot) {
  const int64_t b = slot >> bucket_shift(bucket_capacity), j = (slot & (bucket_capacity - 1)) - hbm_slots;
  return host_run != 0 ? j * host_run + b : b * (bucket_capacity - hbm_slots) + j;
}

// Claim order of free slots (probe.cuh next_free_candidate, the lookup insert, the CPU twin): a bucket's HBM slots
// before its host slots, each part in probe order (rotated from the key's start), except the host slots of
// slot-major host rows, claimed lowest first: with no churn a bucket's host rows are then its first host slots,
// and a batch's new host rows fall in the first few runs of num_buckets rows (fewer host regions per pass).
TABLE_HD bool host_first_fit(bool has_host_rows, int64_t host_run) { return has_host_rows && host_run != 0; }
// The bucket position of claim rank `d` (a rotated distance in [0, B), or B + that of a host slot; first fit:
// B + the position).
TABLE_HD int claim_position(int d, int start, int bucket_capacity, bool first_fit) {
  return first_fit && d >= bucket_capacity ? d - bucket_capacity : (d + start) & (bucket_capacity - 1);
}

// Address of row `slot` of a table's values: the ONE place a table row address is computed (table kernels, CPU
// twin, lookup kernels). values_host == null: every row at `values`; else the split above.
template <typename T>
TABLE_HD T* table_row(void* values, void* values_host, int64_t hbm_slots, int64_t bucket_capacity, int64_t host_run,
                      int64_t slot, int64_t dim) {
  if (values_host == nullptr) return static_cast<T*>(values) + slot * dim;
  const int64_t j = slot & (bucket_capacity - 1);
  if (j < hbm_slots) return static_cast<T*>(values) + ((slot >> bucket_shift(bucket_capacity)) * hbm_slots + j) * dim;
  return static_cast<T*>(values_host) + host_row_of(hbm_slots, bucket_capacity, host_run, slot) * dim;
}
// A table's own row (TableRef).
template <typename T>
TABLE_HD T* ref_row(const TableRef& t, int64_t slot) {
  return table_row<T>(t.values, t.values_host, t.hbm_slots, t.bucket_capacity, t.host_run, slot, t.dim);
}
// The host row of a host slot of table t.
TABLE_HD int64_t ref_host_row(const TableRef& t, int64_t slot) {
  return host_row_of(t.hbm_slots, t.bucket_capacity, t.host_run, slot);
}
// Whether `slot` (-1: none) of table t has its row in host memory.
TABLE_HD bool ref_host_slot(const TableRef& t, int64_t slot) {
  return t.values_host != nullptr && slot >= 0 && is_host_slot(t.hbm_slots, t.bucket_capacity, slot);
}

// Hybrid tables: host-row copies deferred out of the table kernels, so that they reach pinned host memory in
// host-slot order (random-order UVA accesses of 256-byte rows ran ~5x slower than the same rows sorted by address,
// measured on H200). The table kernel writes one entry per key, entry i = (code << 32) | i with
// code = (host_slot << 1) | read (a row to read into the caller's output, or to write from the caller's rows), or
// code = 2 << bits (nothing: above every slot's code); launch_host_rows sorts the entries on the code (stable:
// same-slot entries stay in key order, a slot's writes before its reads) and copies every row in ONE pass over the
// host addresses (a pass costs per host region touched, not per byte: see hybrid_rows.cu).
struct HostOps {
  uint64_t* ops;  // (n) or null: host rows are copied in place by the table kernels
  int bits;       // host slots < 2^bits (bits <= 29)
};
TABLE_HD uint64_t host_op(int bits, bool read, int64_t host_slot, int64_t i) {
  (void)bits;
  return ((static_cast<uint64_t>(host_slot) << 1 | static_cast<uint64_t>(read)) << 32) | static_cast<uint32_t>(i);
}
TABLE_HD uint64_t host_op_none(int bits, int64_t i) { return ((uint64_t(2) << bits) << 32) | static_cast<uint32_t>(i); }

// The sorted copy of a hybrid op's host rows (hybrid_rows.cu), after the table kernel that wrote `ops`.
struct HostRowsParams {
  uint64_t* ops;        // (n) entries (HostOps)
  int64_t n;
  int bits;
  void* scratch;        // host_rows_scratch_bytes(n, bits) bytes, 256-byte aligned
  void* host;           // the table's host rows (values_host, UVA)
  int64_t row_bytes;
  const void* src;      // (n, row) rows written to host rows (entries without the read bit), or null
  void* dst;            // (n, row) rows read from host rows (entries with the read bit), or null; a read of
                        // a slot this op also writes copies the last writer's src row (src and dst may alias:
                        // their rows are distinct keys')
};
size_t host_rows_scratch_bytes(int64_t n, int bits);
void launch_host_rows(const HostRowsParams& p, void* stream);

struct LookupParams {
  TableRef t;
  HostOps host;  // hybrid: the rows of host slots are read by launch_host_rows (values_out set)
  const void* keys;   // (n)
  int64_t n;
  void* values_out;   // (n, dim) or null
  bool* found_out;    // (n) or null
  uint64_t* scores_out;  // (n) or null
  int64_t* slots_out;    // (n) or null; -1 when missing
  bool fill_missing;     // write `missing_value` into values_out rows of missing keys
  float missing_value;
};

// UpsertParams::mode's bits from here carry the op's private override of the insert pass's schedule (table_ops.cc,
// ScoredHashTable._upsert_lab bits 2-3: 1 dynamic with the plain eviction scan, 2 static, 3 dynamic with the wide
// scan, the default; A/B timing); launch_upsert strips them, insert_schedule reads them (table_kernels.cuh). A field
// of UpsertParams would do, at the cost of rebuilding every unit.
constexpr int kUpsertModeLabShift = 8;

struct UpsertParams {
  TableRef t;
  // Hybrid (find_or_insert with values_out, insert_or_assign, insert_and_evict, assign): the first pass defers
  // its host-row copies to launch_host_rows, which runs between the two passes (the op calls launch_upsert
  // twice: first_pass_only, then insert_pass_only; both false: the whole upsert).
  HostOps host;
  bool first_pass_only, insert_pass_only;
  bool pdl;  // the op's kernels after begin_op as programmatic dependent launches (default; table_kernels.cuh)
  int mode;
  const void* keys;           // (n)
  int64_t n;
  const void* values_in;      // (n, dim) or null
  const uint64_t* scores_in;  // (n) or null (Customized: scores; LFU: increments)
  const bool* accum_flags;    // (n) accum_or_assign only
  void* values_out;           // (n, dim) or null (find_or_insert)
  bool* found_out;            // (n) or null: the key was stored when this occurrence was served (present before
                              // this op, or inserted by another occurrence in the batch; _table.py find_or_insert)
  int64_t* slots_out;         // (n) or null; -1 when refused/illegal/missing
  int64_t* stats;             // (kNumStats)
  void* evicted_keys;         // (n) or null
  void* evicted_values;       // (n, dim) or null
  uint64_t* evicted_scores;   // (n) or null
  bool use_epoch;
  uint64_t epoch;
  Initializer init;
  int64_t* pending;           // (2n + kPendingExtra) CUDA scratch: (key, index) of the keys the hit pass leaves to
                              // the insert pass, then the pending count (word 2n + kPendingExtra / 2)
  int64_t pending_words;      // its length; 2n + kPendingExtra + dedup_set_words(n): the first-writer set too
};

struct EraseParams {
  TableRef t;
  const void* keys;  // (n) or null: erase_if scans the table
  int64_t n;
  uint64_t threshold;  // erase_if: erase slots with score < threshold
  int64_t* stats;      // [erased]
};

struct ExportParams {
  TableRef t;
  int64_t offset, n;   // slot range
  bool use_threshold;
  uint64_t threshold;  // export slots with score >= threshold
  void* keys_out;      // (n)
  void* values_out;    // (n, dim) or null
  uint64_t* scores_out;  // (n) or null
  int64_t* slots_out;    // (n) or null
  int64_t* count;        // (1)
};

struct RehashParams {
  TableRef src, dst;
  int64_t* stats;  // (kNumStats) of the inserts into dst
};

// CUDA launchers, one explicit instantiation per (key, value, policy) in the generated units.
// `stream` is a cudaStream_t.
template <int K, int V, int P> void launch_lookup(const LookupParams& p, void* stream);
template <int K, int V, int P> void launch_upsert(const UpsertParams& p, void* stream);
template <int K, int V, int P> void launch_erase(const EraseParams& p, void* stream);
template <int K, int V, int P> void launch_export(const ExportParams& p, void* stream);
template <int K, int V, int P> void launch_rehash(const RehashParams& p, void* stream);
// launch_upsert first advances the op clock (counters[kCounterClock]) and zeroes `stats`; it needs
// `p.pending` (2n + kPendingExtra int64, 16-byte aligned) when p.n > 0.

// Deterministic counter-based random numbers shared by GPU and CPU (initial rows depend on seed, op clock,
// key and column only, so duplicates and thread order do not change them).
TABLE_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
TABLE_HD float uniform01(uint64_t seed, uint64_t clock, uint64_t key, uint64_t ctr) {
  uint64_t h = mix64(seed ^ mix64(key + 0x9e3779b97f4a7c15ull * (ctr + 1) + mix64(clock + 0x632be59bd9b4e019ull)));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

}  // namespace table

// Bytes rounded up to a multiple of 256: the alignment of every region the ops carve out of a workspace.
inline int64_t up256(int64_t b) { return (b + 255) / 256 * 256; }

}  // namespace dynamicemb

// ---- initializer math (shared by GPU and CPU; float math, so values agree to rounding) ----
#include <cmath>
namespace dynamicemb {
namespace table {

TABLE_HD float normal01(uint64_t seed, uint64_t clock, uint64_t key, uint64_t ctr) {
  float u1 = 1.0f - uniform01(seed, clock, key, 2 * ctr);  // (0, 1]
  float u2 = uniform01(seed, clock, key, 2 * ctr + 1);
#if defined(__CUDA_ARCH__)
  // cos(2 pi u2) as cospif: its range reduction needs no local memory (keeps the upsert's first pass, which
  // inlines the initializer, spill-free); equal to the host's cosf form to rounding.
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
#else
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
#endif
}

// Value of column `col` of the initial row of `key` in the op with clock `clock`.
TABLE_HD float init_value(const Initializer& in, uint64_t clock, uint64_t key, int64_t col) {
  if (in.init_cols >= 0 && col >= in.init_cols) return in.fill;
  switch (in.kind) {
    case kInitUniform:
      return in.a + (in.b - in.a) * uniform01(in.seed, clock, key, static_cast<uint64_t>(col));
    case kInitNormal:
      return in.mean + in.std * normal01(in.seed, clock, key, static_cast<uint64_t>(col));
    case kInitTruncNormal: {
      // Rejection sampling on [a, b]; after 32 rejections (a very narrow window) the clamped draw is used.
      float x = 0.f;
      for (uint64_t t = 0; t < 32; ++t) {
        x = in.mean + in.std * normal01(in.seed, clock, key, static_cast<uint64_t>(col) * 32 + t);
        if (x >= in.a && x <= in.b) return x;
      }
      return fminf(fmaxf(x, in.a), in.b);
    }
    default:
      return in.value;
  }
}

// New score of a slot under a policy. `hit`: the key was present with score `old`.
TABLE_HD uint64_t policy_score(int policy, bool use_epoch, uint64_t epoch, uint64_t clock, bool have_in,
                               uint64_t in, bool hit, uint64_t old) {
  if (policy == kPolicyLru) {
    return use_epoch ? ((epoch << 32) | (clock & 0xffffffffull)) : clock;
  }
  if (policy == kPolicyLfu) {
    uint64_t inc = have_in ? in : 1;
    if (!use_epoch) {
      uint64_t base = hit ? old : 0;
      return base + inc < base ? ~0ull : base + inc;  // saturating
    }
    uint64_t low = hit ? (old & 0xffffffffull) : 0;
    low = low + inc > 0xffffffffull || low + inc < low ? 0xffffffffull : low + inc;
    return (epoch << 32) | low;
  }
  return have_in ? in : (hit ? old : 0);  // Customized: a touch without a caller score keeps the score
}

}  // namespace table
}  // namespace dynamicemb
