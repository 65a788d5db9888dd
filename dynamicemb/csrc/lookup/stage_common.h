// Staging of one step's ids into the HBM caches of caching tables over the uva store (UvaStore: a scored hash
// table with its rows in pinned host memory and its index in HBM), for every table in one pass and with no host
// wait: op cache_stage (ops/stage_ops.cc), CUDA kernels in stage_kernels.cu, the CPU twin in stage_ops.cc. Both
// run the per-id steps below (`stage_one`, `move_out_one` / `move_in_one`, `unplace_one`), written once for host
// and device; only the atomics, the bucket locks and the lanes of a row copy differ (the policy `A`).
//
// Per step (cur: the step's stamp, min_live: the stamp of the oldest step whose backward has not run):
//   probe    every id of a masked table is looked up in its cache; a hit stamps its slot with cur (the guard: a
//            slot stamped >= min_live is never evicted, so the rows of this step and of steps in flight stay);
//            misses are counted per table (CacheProbeParams, probe_kernels.cu);
//   stage    per missing id (CUDA: one warp each, its lanes scanning the buckets together; duplicates allowed:
//            a repeat that finds its key in the cache before locking returns at once), under its cache bucket's
//            lock: if the id is in the cache by now (a duplicate staged it) nothing; else its store row, if any,
//            moves into a slot of the bucket (a free slot, else the unguarded row of lowest score, ties lowest
//            slot, never one of the maximum score: that row is first written back into a free slot of its store
//            bucket); a new id (training) takes such a slot as a placeholder (score 0), so the step's insert finds
//            room; the slot is stamped with cur. Store buckets are locked one at a time while a cache bucket lock
//            is held (locks are acquired in that order only: no deadlock). A bucket with neither a free nor an
//            evictable slot, or a store bucket without a free slot for the evicted row, leaves the id unstaged
//            (nothing changes for it) and records the failure: `failed` (the step's skip flag: its lookup_step
//            inserts and updates nothing) and the first failure's [rule, table, id, bucket slots] in `first_fail`.
//            The rows themselves are not copied here: keys, scores, digests, stamps and counters change under the
//            locks, and the copies are appended as a move record [cache slot, victim's store slot, stored row's
//            slot, table] (`moves`, `move_count`). The store slot a moved-in row leaves keeps the key kPendingKey
//            (its record's index in its score) until `move` read it: no other id's victim can overwrite the row
//            first. A victim takes the first empty slot of its store bucket; only a bucket with no empty slot but
//            a pending one makes it run that record's copies itself (`settle_pending`, under the store bucket's
//            lock: two row copies through UVA in hash order, inside the pass), mark the record done and write its
//            own row there. (Settling a pending slot ahead of the first empty one instead cost the staging pass
//            1.39 against 0.77 ms on an H200: docs/dynamicemb_storage_notes.md; any empty slot of the bucket is as
//            good: a bucket's keys are found by a scan of all its slots);
//            CUDA, by default: the same outcome without the cache lock: the misses listed by cache bucket, a warp
//            per bucket (its only writer) gives them their slots in position order (free slots, then victims by
//            (score, slot): what stage_one gives id by id), the victims' empty store slots claimed by a
//            compare-and-swap of the key; an id whose victim finds no empty slot, and the ids after it, one at a
//            time (a pending slot, or a refusal); the misses beyond a bucket's list by stage_one under the locks
//            (stage_kernels.cu stage_owner_kernel);
//   move     per record: its victim's row cache -> store, and its stored row store -> cache (its pending key
//            leaves: empty). Every record touches its own cache slot and store slots only (a slot is stamped cur
//            once taken, so no later id of the launch evicts it; victims are never ids of the step, whose cached
//            rows the probe stamped; a victim's store slot was empty, never a pending one): no order between
//            records is needed, only a record's victim copy before its stored row's (they share its cache slot).
//            The CPU twin: every victim's copy, then every stored row's. CUDA (kMoveLanes threads per row): the
//            victims' rows of the first records (as many as the HBM stash holds) are first copied into the stash,
//            then one pass runs every copy in the order of the store slots' host addresses, both directions
//            mixed (a stashed record's victim copy reads the stash, so its stored row may land at any time; the
//            host pages a pass touches are shared by the copies of both directions), and a last pass the stored
//            rows of the records without a stash row (their victims' copies read the cache slot in the first);
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
  int64_t* moves;             // (kMoveWords n) scratch: the move records of the staged ids (stage_one)
  int64_t* move_count;        // (1) zero on entry: records in `moves`
  int64_t* move_split;        // (3) zero on entry: [records with a stash row, copies in `move_order`, stash row
                              // pitch in bytes] (CUDA; move_scan_kernel)
  int32_t* move_bins;         // (2 num_tables bins_per_table) zero on entry: copies per (bin of store slots, kind),
                              // index 2 bin + kind (0: a victim's row out, 1: a stored row in) (CUDA)
  int bins_per_table;         // move_bins_per_table(num_tables)
  int32_t* move_order;        // (2 n) scratch: the copies (2 record + kind) by store address, both kinds in one
                              // order (CUDA)
  uint8_t* stash;             // (stash_bytes) scratch, 16-byte aligned, or null: victims' rows in HBM (CUDA)
  int64_t stash_bytes;
  int64_t cur, min_live;
  bool insert_new;            // training: reserve a slot for every new id
  int32_t* failed;            // (1) zero on entry; 1 when some id was left unstaged
  int64_t* first_fail;        // (4) [rule, table, id, bucket slots] of the first failure
  int value_bytes;            // bytes per value element (2 or 4)
  const int32_t* gate;        // (1) or null: *gate == 0 -> nothing to stage (CacheProbeParams::gate)
  int32_t* own_cnt;           // (bins + 1) zero on entry, or null: ids listed per bin of the bucket owners, then the
                              // misses they left to the locked pass (CUDA, stage_owner_kernel; bins: num_tables x
                              // bins_per_table)
  int32_t* own_list;          // (bins kOwnList) scratch: the listed ids' positions (CUDA)
};

// Ids a bin of the bucket owners lists (stage_kernels.cu stage_owner_kernel); the rest go to the locked pass.
constexpr int kOwnList = 32;

// A move record: [cache slot, store slot the victim's row goes to or -1, store slot the id's row comes from or -1,
// table | kMoveDone once settle_pending copied its rows].
constexpr int kMoveWords = 4;
constexpr int64_t kMoveDone = int64_t(1) << 40;
// The CUDA move passes copy in the order of the store rows' host addresses (random host rows are ~5x slower through
// UVA than the same rows in address order, H200): a counting sort of the copies into ranges (bins) of each
// table's store slots (the counts by stage_one, then a scan and a scatter); in a bin the victims' copies come
// before the stored rows' copies, and the bins of both kinds interleave, so one pass walks each table's host rows in
// address order in both directions at once. Bins per table: up to 2048 (a 1M-row store: 512 rows per bin), fewer for many tables (the scan
// is one block).
TABLE_HD int move_bins_per_table(int num_tables) {
  const int b = 65536 / (num_tables > 0 ? num_tables : 1);
  return b > 2048 ? 2048 : (b < 16 ? 16 : b);
}
// Key of a store slot whose row moves into the cache in this launch and has not been read yet (a reserved key:
// never a free slot to stage_find(kEmptyKey), never an id); its score holds its move record's index. Only inside
// one op call: the stored rows' move pass empties every such slot.
constexpr uint64_t kPendingKey = table::kReclaimedKey;

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
    A::st(p.first_fail + 1, static_cast<int64_t>(table));
    A::st(p.first_fail + 2, static_cast<int64_t>(key));
    A::st(p.first_fail + 3, bound);
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

// The row at `slot` of a store / of a cache (bytes).
TABLE_HD uint8_t* store_row(const StageTable& s, int64_t slot, int64_t row_bytes) {
  return table::table_row<uint8_t>(reinterpret_cast<void*>(s.values), reinterpret_cast<void*>(s.values_host),
                                   s.hbm_slots, s.bucket_capacity, s.host_run, slot, row_bytes);
}
TABLE_HD uint8_t* cache_row(const TableMeta& c, int64_t slot, int64_t row_bytes) {
  return table::table_row<uint8_t>(reinterpret_cast<void*>(c.values), nullptr, 0, c.bucket_capacity, 0, slot,
                                   row_bytes);
}

// Bin of store slot `slot` of table t (its rows in address order: host rows are one allocation per store, placed
// by table::host_row_of; a store's hbm_slots is 0).
TABLE_HD int64_t move_bin(const StageParams& p, int t, int64_t slot) {
  const StageTable& s = p.stage[t];
  const int64_t r = s.host_run != 0 ? table::host_row_of(0, s.bucket_capacity, s.host_run, slot) : slot;
  return static_cast<int64_t>(t) * p.bins_per_table + r * p.bins_per_table / (s.num_buckets * s.bucket_capacity);
}

// The slot of the store bucket [base, base + cap) that a victim takes: the first empty one, else the first pending
// one (a row of this launch leaves it: settle_pending first). -1 when neither.
template <class A>
TABLE_HD int64_t stage_find_room(const uint64_t* keys, int64_t base, int cap) {
  int64_t pending = -1;
  for (int j = 0; j < cap; j += kScan) {
    uint64_t k[kScan];
#pragma unroll
    for (int r = 0; r < kScan; ++r) k[r] = A::ld(keys + base + j + r);
#pragma unroll
    for (int r = 0; r < kScan; ++r) {
      if (k[r] == table::kEmptyKey) return base + j + r;
      if (k[r] == kPendingKey && pending < 0) pending = base + j + r;
    }
  }
  return pending;
}

// What stage_one needs of its cache bucket [base, base + cap) (keys, scores, stamps): the slot of its key, its first
// free slot, its eviction candidate (the unguarded row of lowest score, ties lowest slot, never the maximum score
// nor a reserved key), each -1 when none. The host scans slot by slot (stage_scan_bucket); the CUDA staging's
// lanes scan it together and reduce with the same rule (stage_kernels.cu): the same slots either way.
struct BucketScan {
  int64_t hit, free_slot, victim;
  uint64_t vscore;
};

template <class A>
TABLE_HD BucketScan stage_scan_bucket(const uint64_t* ck, const uint64_t* cs, const int64_t* stamps, int64_t base,
                                      int cap, uint64_t key, int64_t min_live) {
  BucketScan b{-1, -1, -1, 0};
  for (int j0 = 0; j0 < cap; j0 += kScan) {
    uint64_t k2[kScan], sc[kScan], st[kScan];
#pragma unroll
    for (int r = 0; r < kScan; ++r) {
      k2[r] = A::ld(ck + base + j0 + r);
      sc[r] = A::ld(cs + base + j0 + r);
      st[r] = A::ld(reinterpret_cast<const uint64_t*>(stamps + base + j0 + r));
    }
#pragma unroll
    for (int r = 0; r < kScan; ++r) {
      const int64_t slot = base + j0 + r;
      if (k2[r] == key && b.hit < 0) b.hit = slot;
      if (k2[r] == table::kEmptyKey) {
        if (b.free_slot < 0) b.free_slot = slot;
      } else if (!table::is_reserved_key(k2[r]) && sc[r] != ~0ull && static_cast<int64_t>(st[r]) < min_live &&
                 (b.victim < 0 || sc[r] < b.vscore)) {
        b.victim = slot;
        b.vscore = sc[r];
      }
    }
    if (b.hit >= 0) return b;
  }
  return b;
}

// The HBM stash row of record r (move_split: [records with a stash row, copies, pitch]), or null when r has none.
TABLE_HD const uint8_t* stash_row(const StageParams& p, int64_t r) {
  return r < p.move_split[0] ? p.stash + r * p.move_split[2] : nullptr;
}

// A victim found the pending store slot `at` (its store bucket's lock held): the record that left it runs its
// copies now (its victim's row out of its cache slot, then the row at `at` into that slot) and is marked done,
// so `at` may take another row. The record was complete before its pending key was published under this lock.
// (A pending slot of table t's store was left by an id of table t: the record's cache is `c`.)
template <class A>
TABLE_HD void settle_pending(const StageParams& p, const TableMeta& c, const StageTable& s, int64_t at,
                             int64_t row_bytes) {
  int64_t* rec = p.moves + kMoveWords * static_cast<int64_t>(A::ld(reinterpret_cast<uint64_t*>(s.scores) + at));
  const int64_t slot = static_cast<int64_t>(A::ld(reinterpret_cast<uint64_t*>(rec)));
  const int64_t out = static_cast<int64_t>(A::ld(reinterpret_cast<uint64_t*>(rec + 1)));
  uint8_t* crow = cache_row(c, slot, row_bytes);
  if (out >= 0) A::copy_rows(store_row(s, out, row_bytes), crow, row_bytes);
  A::copy_rows(crow, store_row(s, at, row_bytes), row_bytes);
  A::st(rec + 3, static_cast<int64_t>(A::ld(reinterpret_cast<uint64_t*>(rec + 3))) | kMoveDone);
}

// The stored row at store slot `at` (bucket sb) leaves the store for record r: its key turns pending (the record's
// index in its score) until the move pass reads it. Returns its score (what the cache slot takes).
template <class A>
TABLE_HD uint64_t stage_leave_store(const StageParams& p, const StageTable& s, int t, int64_t sb, int64_t at,
                                    int64_t r) {
  uint64_t* ss = reinterpret_cast<uint64_t*>(s.scores);
  int32_t* slock = reinterpret_cast<int32_t*>(s.locks) + sb;
  A::lock(slock);
  const uint64_t score = A::ld(ss + at);
  A::st(reinterpret_cast<uint8_t*>(s.digests) + at, table::empty_digest());
  A::st(ss + at, static_cast<uint64_t>(r));
  A::publish_key(reinterpret_cast<uint64_t*>(s.keys) + at, kPendingKey);
  A::add(reinterpret_cast<int64_t*>(s.counters) + table::kCounterSize, -1);
  A::unlock(slock);
  A::add(p.counts + 3 * t, 1);
  return score;
}

// Stages id i (see the header). The policy `A` does the bucket scans (A::find_first, A::find_room, A::scan_bucket:
// the host slot by slot, the CUDA staging with the lanes of one warp on one id), the locks and every write (A::st and
// the atomics: the host directly, on CUDA lane 0 only) and the row copies settle_pending runs (A::copy_rows: every
// lane of the warp); every read that steers the control flow gives the same value to every lane (A::ld), so a
// warp takes one path through this function.
template <class A>
TABLE_HD void stage_one(const StageParams& p, int64_t i) {
  if (p.found[i]) return;  // (a warm step: every id returns here; `place` is read only where found is clear)
  A::st(p.place + i, int64_t(-1));
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
  // a repeat of an id a duplicate already staged returns here, without a lock: a key of this step found in the
  // cache stays there for the whole launch (stamped cur), and an id the probe missed is in the cache only once a
  // duplicate staged it (what the locked scan below would find too). Else the key in its store, before the cache
  // lock: only a duplicate of this id (under the same cache lock, which then finds the key in the cache below)
  // moves it; victims written back are never ids of the step (A::find_first: both scans)
  const int64_t sbase = static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(s.num_buckets))) * scap;
  int64_t at = -1;
  if (A::find_first(ck, cbase, ccap, sk, sbase, scap, key, &at)) return;
  // A::kLate: the stored row's score read here (only this id's staging changes slot `at`: a duplicate finds the
  // key in the cache under the cache lock first), and `at` turned pending after the cache lock is released (a
  // shorter section under the cache lock; the record is complete before either)
  const uint64_t at_score = A::kLate && at >= 0 ? A::ld(ss + at) : 0;
  int32_t* clock = reinterpret_cast<int32_t*>(c.locks) + cb;
  A::lock(clock);
  // the cache bucket: the key (a duplicate of this step staged it), its first free slot, its eviction candidate
  const BucketScan b = A::scan_bucket(ck, cs, stamps, cbase, ccap, key, p.min_live);
  if (b.hit >= 0 || (at < 0 && !p.insert_new)) {  // staged by a duplicate; or not stored, no slot to reserve (eval)
    A::unlock(clock);
    return;
  }
  const int64_t slot = b.free_slot >= 0 ? b.free_slot : b.victim;
  if (slot < 0) {
    stage_fail<A>(p, kRuleCacheFull, t, key, ccap);
    A::unlock(clock);
    return;
  }
  int64_t out = -1;        // the store slot the victim's row goes to (copied by move_out_one)
  if (slot == b.victim) {  // the victim's row goes back to a free slot of its store bucket first
    const uint64_t vk = A::ld(ck + slot);
    const uint64_t vh = accel_hash_key(vk);
    const int64_t vb = static_cast<int64_t>(table::bucket_of_hash(vh, static_cast<uint64_t>(s.num_buckets)));
    int32_t* slock = reinterpret_cast<int32_t*>(s.locks) + vb;
    A::lock(slock);
    const int64_t fs = A::find_room(sk, vb * scap, scap);
    if (fs < 0) {
      A::unlock(slock);
      stage_fail<A>(p, kRuleStoreFull, t, key, scap);
      A::unlock(clock);
      return;
    }
    if (A::ld(sk + fs) == kPendingKey) {  // a row of this launch leaves fs: its copies first, then the victim's
      settle_pending<A>(p, c, s, fs, row_bytes);
      A::copy_rows(store_row(s, fs, row_bytes), cache_row(c, slot, row_bytes), row_bytes);
    } else {
      out = fs;
    }
    A::st(ss + fs, b.vscore);
    A::st(sd + fs, table::digest_of_hash(vh));
    A::publish_key(sk + fs, vk);
    A::add(reinterpret_cast<int64_t*>(s.counters) + table::kCounterSize, 1);
    A::unlock(slock);
    A::add(reinterpret_cast<int64_t*>(c.counters) + table::kCounterSize, -1);
    A::add(p.counts + 3 * t + 1, 1);
  }
  uint64_t score = at_score;
  int64_t r = -1;
  if (out >= 0 || at >= 0) {  // the copies to run: a record, complete before `at` turns pending
    r = A::claim_index(p.move_count);
    int64_t* rec = p.moves + kMoveWords * r;
    A::st(rec, slot);
    A::st(rec + 1, out);
    A::st(rec + 2, at);
    A::st(rec + 3, static_cast<int64_t>(t));
    A::count_move(p, t, out, at);
    if (at >= 0 && !A::kLate) score = stage_leave_store<A>(p, s, t, sbase / scap, at, r);
  }
  if (at < 0) A::st(p.place + i, slot);  // a new id's placeholder (unplace frees it)
  A::st(cs + slot, score);
  A::st(cd + slot, table::digest_of_hash(h));
  A::st(stamps + slot, p.cur);
  A::publish_key(ck + slot, key);
  A::add(reinterpret_cast<int64_t*>(c.counters) + table::kCounterSize, 1);
  A::unlock(clock);
  if (at >= 0 && A::kLate) stage_leave_store<A>(p, s, t, sbase / scap, at, r);
}

// After every stage_one: record r's copies, the victim's row out (before its stored row comes in: the same cache
// slot; from `from`, its stash row, when not null), then the stored row in and its pending key leaves (empty).
// Lanes `lanes` share a row; lane `lane` copies its 16-byte words of it. Records settle_pending marked done do
// nothing.
template <class A>
TABLE_HD void move_out_one(const StageParams& p, int64_t r, int lane, int lanes, const uint8_t* from = nullptr) {
  const int64_t* rec = p.moves + kMoveWords * r;
  if (rec[1] < 0 || (rec[3] & kMoveDone)) return;
  const int t = static_cast<int>(rec[3]);
  const int64_t row_bytes = p.meta[t].row_stride * p.value_bytes;
  A::copy_row(store_row(p.stage[t], rec[1], row_bytes), from != nullptr ? from : cache_row(p.meta[t], rec[0], row_bytes),
              row_bytes, lane, lanes);
}

// Record r's victim row into its stash row (CUDA, before the mixed pass; a record without a victim, or done: nothing).
template <class A>
TABLE_HD void stash_one(const StageParams& p, int64_t r, int lane, int lanes) {
  const int64_t* rec = p.moves + kMoveWords * r;
  if (rec[1] < 0 || (rec[3] & kMoveDone)) return;
  const int t = static_cast<int>(rec[3]);
  const int64_t row_bytes = p.meta[t].row_stride * p.value_bytes;
  A::copy_row(p.stash + r * p.move_split[2], cache_row(p.meta[t], rec[0], row_bytes), row_bytes, lane, lanes);
}

template <class A>
TABLE_HD void move_in_one(const StageParams& p, int64_t r, int lane, int lanes) {
  const int64_t* rec = p.moves + kMoveWords * r;
  const int64_t in = rec[2];
  if (in < 0 || (rec[3] & kMoveDone)) return;
  const int t = static_cast<int>(rec[3]);
  const StageTable& s = p.stage[t];
  const int64_t row_bytes = p.meta[t].row_stride * p.value_bytes;
  A::copy_row(cache_row(p.meta[t], rec[0], row_bytes), store_row(s, in, row_bytes), row_bytes, lane, lanes);
  if (lane == 0) {
    reinterpret_cast<uint64_t*>(s.scores)[in] = 0;
    reinterpret_cast<uint64_t*>(s.keys)[in] = table::kEmptyKey;
  }
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
  static constexpr bool kLate = false;  // (one thread: the same outcome either way)
  static uint64_t ld(const uint64_t* a) { return *a; }
  static void add(int64_t* a, int64_t v) { *a += v; }
  static bool claim(int32_t* f) {
    if (*f) return false;
    *f = 1;
    return true;
  }
  static void publish(int64_t* rec, int32_t rule) { rec[0] = rule; }
  static void publish_key(uint64_t* a, uint64_t k) { *a = k; }
  static int64_t claim_index(int64_t* count) { return (*count)++; }
  static void count_move(const StageParams&, int, int64_t, int64_t) {}  // (the twin copies in record order)
  static void lock(int32_t*) {}
  static void unlock(int32_t*) {}
  template <class T, class U>
  static void st(T* a, U v) {
    *a = static_cast<T>(v);
  }
  static int64_t find(const uint64_t* keys, int64_t base, int cap, uint64_t key) {
    return stage_find<HostStageAtomics>(keys, base, cap, key);
  }
  static int64_t find_room(const uint64_t* keys, int64_t base, int cap) {
    return stage_find_room<HostStageAtomics>(keys, base, cap);
  }
  static bool find_first(const uint64_t* ck, int64_t cbase, int ccap, const uint64_t* sk, int64_t sbase, int scap,
                         uint64_t key, int64_t* at) {
    if (find(ck, cbase, ccap, key) >= 0) return true;
    *at = find(sk, sbase, scap, key);
    return false;
  }
  static BucketScan scan_bucket(const uint64_t* ck, const uint64_t* cs, const int64_t* stamps, int64_t base, int cap,
                                uint64_t key, int64_t min_live) {
    return stage_scan_bucket<HostStageAtomics>(ck, cs, stamps, base, cap, key, min_live);
  }
  static void copy_rows(void* dst, const void* src, int64_t bytes) { copy_row(dst, src, bytes, 0, 1); }
  // (one lane: lanes == 1)
  static void copy_row(void* dst, const void* src, int64_t bytes, int, int) {
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    for (int64_t b = 0; b < bytes; ++b) d[b] = s[b];
  }
};

// The CPU twin of the staging after its probe: the same passes in the kernels' order, one thread.
inline void stage_host(const StageParams& p) {
  for (int64_t i = 0; i < p.n; ++i) stage_one<HostStageAtomics>(p, i);
  for (int64_t r = 0; r < *p.move_count; ++r) move_out_one<HostStageAtomics>(p, r, 0, 1);
  for (int64_t r = 0; r < *p.move_count; ++r) move_in_one<HostStageAtomics>(p, r, 0, 1);
  for (int64_t i = 0; i < p.n; ++i) unplace_one<HostStageAtomics>(p, i);
}

// The op's launchers (CUDA, stage_kernels.cu): the probe (with stamps), then stage_one over every id, the order
// of the copies (scan, scatter), the stash (stash_one), move_out_one and move_in_one in that order (one pass of
// both directions, then the stored rows of the records without a stash row), unplace_one over every id, then the
// report of the first failure into the device error record (when `report`).
void launch_cache_stage(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream);
// Lab switch of the CUDA staging's variant (stage_kernels.cu; op _lookup_lab_stage): sets it when 0 <= v <
// kStageVariants, returns the previous one.
constexpr int kStageVariants = 13;
int set_stage_variant(int v);

}  // namespace lookup
}  // namespace dynamicemb
