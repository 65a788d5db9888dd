// Scored hash table: the bucket-grouped upsert (private variant of launch_upsert for all-HBM tables with
// 128-slot buckets; find_or_insert, insert_or_assign, insert_and_evict).
//
// The batch's keys are grouped by bucket (a counting sort: per-bucket counts in the table's lock words, which are
// zero between kernels, an exclusive scan, a scatter of (key, index) pairs), then one tile of 16 or 32 lanes owns
// each touched bucket: it reads the bucket's digests once (and its scores when a key of the bucket is new), reads
// the key words the digests point at, and resolves all its keys with no lock and no second pass, because no other
// tile touches the bucket. Inside a bucket the keys are taken as the CPU twin takes a batch whose hits come first:
// first every key present before the op (in batch order), then the others in batch order, each inserting into the
// first free slot of its probe order, else evicting the least (score, digest, key) if its score is higher, else
// refused; a later duplicate of a key inserted by this op is a hit on it. The bucket's scores and digests live in
// registers while this runs; rows, keys, scores and digests are written once at the end. A tile is 16 lanes (two
// buckets per warp, 8 slots per lane) or a warp (4 slots per lane): bucket_upsert.h kModeGroupedWarp.
// Batch order inside a bucket holds for buckets that receive at most kBucketChunk keys of one batch; a bucket that
// receives more takes them in chunks of kBucketChunk (hits first within each chunk), in an unspecified chunk order.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "dynamicemb/csrc/table/bucket_upsert.h"
#include "dynamicemb/csrc/table/table_kernels.cuh"

namespace dynamicemb {
namespace table {

constexpr int kBucketSlots = kGroupedBucket;  // the bucket size this path serves
constexpr int kBucketChunk = 32;             // keys of one bucket resolved together
constexpr int kBucketBlock = 128;
constexpr int kScanItems = 8;
constexpr int kScanBlock = 256;
constexpr int kScanSpan = kScanItems * kScanBlock;  // counts per scan block
static_assert(kScanSpan == kGroupedScanSpan, "bucket_upsert.h sizes the scan's scratch");

// Scratch of the grouped upsert (bytes: grouped_scratch_bytes).
struct BucketScratch {
  uint64_t* packed;    // (n) bucket << 32 | rank inside the bucket; ~0 for reserved keys
  longlong2* entries;  // (n) (key, index), grouped by bucket
  uint32_t* offsets;   // (num_buckets + 1)
  uint32_t* partials;  // (num_buckets / kScanSpan + 2)
};
inline int64_t bucket_upsert_scratch_bytes(int64_t n, int64_t num_buckets) {
  return grouped_scratch_bytes(n, num_buckets);
}
inline BucketScratch bucket_upsert_scratch(void* base, int64_t n, int64_t num_buckets) {
  char* b = static_cast<char*>(base);
  BucketScratch s;
  s.packed = reinterpret_cast<uint64_t*>(b);
  b += up256(n * 8);
  s.entries = reinterpret_cast<longlong2*>(b);
  b += up256(n * 16);
  s.offsets = reinterpret_cast<uint32_t*>(b);
  b += up256((num_buckets + 1) * 4);
  s.partials = reinterpret_cast<uint32_t*>(b);
  return s;
}

// Counts keys per bucket (in the table's lock words) and gives each key its rank in its bucket. Reserved keys are
// answered here (illegal).
template <int K, int V, int P>
__global__ void __launch_bounds__(256) bucket_count_kernel(UpsertParams p, BucketScratch s) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (i >= p.n) return;
  const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
  if (is_reserved_key(key)) {
    s.packed[i] = ~0ull;
    if (p.slots_out) p.slots_out[i] = -1;
    if (p.found_out) p.found_out[i] = false;
    if (p.mode == kFindOrInsert && p.values_out) {
      T* out = row_ptr<T>(p.values_out, i, p.t.dim);
      const uint64_t clock = static_cast<uint64_t>(__ldg(p.t.counters + kCounterClock));
      for (int64_t j = 0; j < p.t.dim; ++j) out[j] = Val<V>::from_f(init_value(p.init, clock, key, j));
    }
    atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + kStatIllegal, 1ull);
    return;
  }
  const uint64_t b = bucket_of_hash(accel_hash_key(key), static_cast<uint64_t>(p.t.num_buckets));
  const uint32_t r = static_cast<uint32_t>(atomicAdd(reinterpret_cast<unsigned*>(p.t.locks) + b, 1u));
  s.packed[i] = b << 32 | r;
}

// Exclusive scan of the counts into offsets, in three kernels: per-block sums, a scan of the sums, the block scans
// (which also zero the counts: the lock words are zero again after the op). Templates like every kernel here, so
// that each generated unit owns its instance (no duplicate symbols at link time).
template <int K, int V, int P>
__global__ void __launch_bounds__(kScanBlock) bucket_scan_sums_kernel(const uint32_t* counts, int64_t nb,
                                                                      uint32_t* partials) {
  using BS = cub::BlockReduce<uint32_t, kScanBlock>;
  __shared__ typename BS::TempStorage tmp;
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kScanSpan;
  uint32_t sum = 0;
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const int64_t j = b0 + k * kScanBlock + threadIdx.x;
    if (j < nb) sum += counts[j];
  }
  const uint32_t tot = BS(tmp).Sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = tot;
}
template <int K, int V, int P>
__global__ void __launch_bounds__(1024) bucket_scan_partials_kernel(uint32_t* partials, int64_t np) {
  using BS = cub::BlockScan<uint32_t, 1024>;
  __shared__ typename BS::TempStorage tmp;
  __shared__ uint32_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t j0 = 0; j0 < np; j0 += 1024) {
    const int64_t j = j0 + threadIdx.x;
    const uint32_t v = j < np ? partials[j] : 0u;
    uint32_t ex, agg;
    BS(tmp).ExclusiveSum(v, ex, agg);
    if (j < np) partials[j] = ex + carry;
    __syncthreads();
    if (threadIdx.x == 0) carry += agg;
    __syncthreads();
  }
}
template <int K, int V, int P>
__global__ void __launch_bounds__(kScanBlock) bucket_scan_kernel(uint32_t* counts, int64_t nb,
                                                                 const uint32_t* partials, uint32_t* offsets) {
  using BS = cub::BlockScan<uint32_t, kScanBlock>;
  __shared__ typename BS::TempStorage tmp;
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kScanSpan + static_cast<int64_t>(threadIdx.x) * kScanItems;
  uint32_t v[kScanItems];
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) v[k] = b0 + k < nb ? counts[b0 + k] : 0u;
  uint32_t ex[kScanItems];
  BS(tmp).ExclusiveSum(v, ex);
  const uint32_t base = partials[blockIdx.x];
#pragma unroll
  for (int k = 0; k < kScanItems; ++k)
    if (b0 + k < nb) {
      offsets[b0 + k] = base + ex[k];
      counts[b0 + k] = 0;
      if (b0 + k == nb - 1) offsets[nb] = base + ex[k] + v[k];  // the keys counted (reserved keys are not)
    }
}

template <int K, int V, int P>
__global__ void __launch_bounds__(256) bucket_scatter_kernel(UpsertParams p, BucketScratch s) {
  using KT = typename KeyT<K>::T;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (i >= p.n) return;
  const uint64_t pk = s.packed[i];
  if (pk == ~0ull) return;
  const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
  const uint32_t pos = s.offsets[pk >> 32] + static_cast<uint32_t>(pk);
  s.entries[pos] = make_longlong2(static_cast<long long>(key), static_cast<long long>(i));
}

// Per-tile shared state of the bucket pass (one bucket, up to kBucketChunk of its keys).
struct BucketSmem {
  uint64_t key[kBucketChunk];
  int64_t idx[kBucketChunk];
  uint64_t new_score[kBucketChunk];  // the score an insert of this entry would get
  int16_t slot[kBucketChunk];     // bucket-local slot holding the key at the op's start, or -1
  int8_t order[kBucketChunk];     // entries in batch order
  int8_t first[kBucketChunk];     // the first entry (batch order) of the same key
  int16_t cur[kBucketChunk];      // for a first entry: the key's slot now (-1: absent)
  int16_t res[kBucketChunk];      // the entry's outcome slot (-1: refused)
  int8_t stat[kBucketChunk];
  bool hit[kBucketChunk];         // found: present before the op, or inserted by an earlier duplicate
  uint8_t digest[kBucketChunk];
  uint8_t start[kBucketChunk];
  bool has_match[kBucketChunk];
  int8_t owner[kBucketSlots];     // the first entry whose key the slot holds now (-1: a key of no entry)
  // evictions of keys held by an earlier entry of this op (insert_and_evict reports them)
  int16_t ev_slot[kBucketChunk];
  uint64_t ev_score[kBucketChunk];
  int8_t ev_owner[kBucketChunk];  // -1: the slot's key at the op's start
  int8_t ev_src[kBucketChunk];    // owner != -1: the entry whose row the evicted key held
  int8_t src[kBucketChunk];       // for a first entry: its key's last occurrence applied so far (its row)
  int n_ev;
};

// One bucket of the grouped upsert. Lane l holds the digests and scores of slots [8 l, 8 l + 8) in registers.
template <int K, int V, int P, int G>
__device__ __forceinline__ void bucket_resolve(const cg::thread_block_tile<G, cg::thread_block>& tile, const Tile& sub,
                                               const UpsertParams& p,
                                               BucketSmem& sm, int64_t bucket, const longlong2* ents, int c,
                                               uint64_t clock, unsigned* s_stats, uint2 dg2) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  constexpr int kBucketTile = G;                          // lanes per bucket (16 or 32)
  constexpr int kLaneSlots = kBucketSlots / kBucketTile;  // lane l: slots [kLaneSlots l, kLaneSlots (l + 1))
  static_assert(kLaneSlots == 4 || kLaneSlots == 8, "lane digests are one 4- or 8-byte load");
  const TableRef& t = p.t;
  const int lane = static_cast<int>(tile.thread_rank());
  const int64_t base = bucket * kBucketSlots;
  const int64_t dim = t.dim;
  const bool copier = p.mode != kFindOrInsert;
  // dg2: the digests of the lane's slots (loaded by the caller, in the round trip of the bucket's offsets).
  // Entries.
  for (int e = lane; e < c; e += kBucketTile) {
    const longlong2 en = ents[e];
    const uint64_t key = static_cast<uint64_t>(en.x);
    const uint64_t h = accel_hash_key(key);
    sm.key[e] = key;
    sm.idx[e] = en.y;
    sm.digest[e] = digest_of_hash(h);
    sm.start[e] = static_cast<uint8_t>(start_of_hash(h, kBucketSlots));
    sm.has_match[e] = false;
    const bool given = p.scores_in != nullptr;
    sm.new_score[e] = policy_score(P, p.use_epoch, p.epoch, clock, given, given ? p.scores_in[en.y] : 0, false, 0);
  }
  for (int j = lane; j < kBucketSlots; j += kBucketTile) sm.owner[j] = -1;
  if (lane == 0) sm.n_ev = 0;
  tile.sync();
  // Batch order, the first entry of each key.
  for (int e = lane; e < c; e += kBucketTile) {
    int rank = 0, first = e;
    const uint64_t k = sm.key[e];
    const int64_t ie = sm.idx[e];
    for (int f = 0; f < c; ++f) {
      const int64_t jf = sm.idx[f];
      rank += jf < ie;
      if (sm.key[f] == k && jf < sm.idx[first]) first = f;
    }
    sm.order[rank] = static_cast<int8_t>(e);
    sm.first[e] = static_cast<int8_t>(first);
    sm.slot[e] = -1;
    sm.res[e] = -1;
    sm.hit[e] = false;
  }
  tile.sync();
  // Slots whose digest is an entry's or the empty digest: their key words are read (one round trip).
  const uint8_t ed = empty_digest();
  uint32_t look = 0, empty_dg = 0;
  uint8_t dgs[kLaneSlots];
#pragma unroll
  for (int j = 0; j < kLaneSlots; ++j) {
    dgs[j] = static_cast<uint8_t>((j < 4 ? dg2.x >> (8 * j) : dg2.y >> (8 * (j - 4))) & 0xffu);
    if (dgs[j] == ed) empty_dg |= 1u << j;
  }
  for (int e = 0; e < c; ++e) {
    const uint8_t d = sm.digest[e];
    bool any = false;
#pragma unroll
    for (int j = 0; j < kLaneSlots; ++j)
      if (dgs[j] == d) { look |= 1u << j; any = true; }
    if (any) sm.has_match[e] = true;
  }
  look |= empty_dg;
  tile.sync();
  // A key with no digest match is missing: the scores are needed (loaded in the same round trip as the key words).
  bool need_scores = P != kPolicyLru;
  for (int e = lane; e < c; e += kBucketTile) need_scores |= !sm.has_match[e];
  need_scores = tile.any(need_scores);
  uint64_t sc[kLaneSlots];
  const uint4* sp = reinterpret_cast<const uint4*>(t.scores + base + kLaneSlots * lane);
  bool have_scores = false;
  const auto load_scores = [&] {
#pragma unroll
    for (int b = 0; b < kLaneSlots / 2; ++b) {
      const uint4 v = sp[b];
      sc[2 * b] = static_cast<uint64_t>(v.y) << 32 | v.x;
      sc[2 * b + 1] = static_cast<uint64_t>(v.w) << 32 | v.z;
    }
    have_scores = true;
  };
  if (need_scores) load_scores();
  uint32_t free_m = 0;
  {
    uint32_t m = look;
    while (m) {
      const int j = __ffs(m) - 1;
      m &= m - 1;
      const uint64_t k = reinterpret_cast<const unsigned long long*>(t.keys)[base + kLaneSlots * lane + j];
      if (k == kEmptyKey && ((empty_dg >> j) & 1u)) free_m |= 1u << j;
      for (int e = 0; e < c; ++e)
        if (sm.key[e] == k && sm.digest[e] == dgs[j]) sm.slot[e] = static_cast<int16_t>(kLaneSlots * lane + j);
    }
  }
  tile.sync();
  // Keys present at the op's start.
  bool any_new = false;
  for (int e = lane; e < c; e += kBucketTile) {
    const int s = sm.slot[e];
    if (s >= 0) {
      sm.hit[e] = true;
      sm.res[e] = static_cast<int16_t>(s);
      if (sm.first[e] == e) {
        sm.cur[e] = static_cast<int16_t>(s);
        sm.owner[s] = static_cast<int8_t>(e);
      }
    } else {
      any_new = true;
      if (sm.first[e] == e) sm.cur[e] = -1;
    }
  }
  any_new = tile.any(any_new);
  if (any_new && !have_scores) load_scores();
  tile.sync();
  uint32_t dirty = 0;  // the lane's slots whose score / digest changed
  uint32_t fresh = 0;  // the lane's slots given a new key
  // Hits first, in batch order: scores (a fold over the key's occurrences).
  for (int r = 0; r < c; ++r) {
    const int e = sm.order[r];
    const int s = sm.slot[e];
    if (s < 0) continue;
    if (s / kLaneSlots == lane) {
      const int j = s % kLaneSlots;
      const bool given = p.scores_in != nullptr;
      const uint64_t nsc = policy_score(P, p.use_epoch, p.epoch, clock, given, given ? p.scores_in[sm.idx[e]] : 0,
                                        true, have_scores ? sc[j] : 0);
#pragma unroll
      for (int q = 0; q < kLaneSlots; ++q)
        if (q == j) sc[q] = nsc;
      dirty |= 1u << j;
    }
    if (lane == 0) {
      sm.stat[e] = kStatAssigned;
      sm.src[sm.first[e]] = static_cast<int8_t>(e);
    }
    tile.sync();
  }
  // The other keys in batch order: a duplicate of a key inserted by this op is a hit on it; otherwise the first free
  // slot in probe order, else the least (score, digest, key) if the new score is higher, else refused.
  if (any_new) {
    for (int r = 0; r < c; ++r) {
      const int e = sm.order[r];
      if (sm.slot[e] >= 0) continue;
      const int f = sm.first[e];
      const int cur = sm.cur[f];
      if (cur >= 0) {  // inserted by an earlier duplicate: a hit
        if (cur / kLaneSlots == lane) {
          const int j = cur % kLaneSlots;
          const bool given = p.scores_in != nullptr;
          uint64_t old = 0;
#pragma unroll
          for (int q = 0; q < kLaneSlots; ++q)
            if (q == j) old = sc[q];
          const uint64_t nsc =
              policy_score(P, p.use_epoch, p.epoch, clock, given, given ? p.scores_in[sm.idx[e]] : 0, true, old);
#pragma unroll
          for (int q = 0; q < kLaneSlots; ++q)
            if (q == j) sc[q] = nsc;
          dirty |= 1u << j;
        }
        if (lane == 0) {
          sm.hit[e] = true;
          sm.res[e] = static_cast<int16_t>(cur);
          sm.stat[e] = kStatAssigned;
          sm.src[f] = static_cast<int8_t>(e);
        }
        tile.sync();
        continue;
      }
      const uint64_t ns = sm.new_score[e];
      int target = -1;
      int stat = kStatRefused;
      if (tile.any(free_m != 0)) {
        // first free slot in probe order from the key's start
        const int st = sm.start[e];
        int best = 1 << 20;
        uint32_t m = free_m;
        while (m) {
          const int j = __ffs(m) - 1;
          m &= m - 1;
          const int d = (kLaneSlots * lane + j - st) & (kBucketSlots - 1);
          best = min(best, d);
        }
#pragma unroll
        for (int o = kBucketTile / 2; o > 0; o >>= 1) best = min(best, tile.shfl_xor(best, o));
        target = (best + st) & (kBucketSlots - 1);
        if (target / kLaneSlots == lane) free_m &= ~(1u << (target % kLaneSlots));
        stat = kStatInserted;
      } else {
        // least (score, digest) of the lane, then of the tile; key words only where two slots tie
        uint64_t bs = ~0ull;
        uint32_t bd = 0x100u;
        int bj = -1, ties = 0;
#pragma unroll
        for (int j = 0; j < kLaneSlots; ++j) {
          const uint32_t dj = dgs[j];
          if (sc[j] < bs || (sc[j] == bs && dj < bd)) {
            bs = sc[j];
            bd = dj;
            bj = j;
            ties = 0;
          } else if (sc[j] == bs && dj == bd) {
            ++ties;
          }
        }
        int bslot = kLaneSlots * lane + bj;
#pragma unroll
        for (int o = kBucketTile / 2; o > 0; o >>= 1) {
          const uint64_t os = tile.shfl_xor(bs, o);
          const uint32_t od = tile.shfl_xor(bd, o);
          const int oslot = tile.shfl_xor(bslot, o);
          const int oties = tile.shfl_xor(ties, o);
          if (os < bs || (os == bs && od < bd)) {
            bs = os;
            bd = od;
            bslot = oslot;
            ties = oties;
          } else if (os == bs && od == bd) {
            ties += oties + 1;
          }
        }
        if (ties > 0) {
          // (score, digest) shared by several slots: the least key among them
          uint64_t bk = ~0ull;
          int ks = -1;
#pragma unroll
          for (int j = 0; j < kLaneSlots; ++j) {
            if (sc[j] == bs && dgs[j] == bd) {
              const int s = kLaneSlots * lane + j;
              const int ow = sm.owner[s];
              const uint64_t k = (ow >= 0 && ((fresh >> j) & 1u))
                                     ? sm.key[ow]
                                     : reinterpret_cast<const unsigned long long*>(t.keys)[base + s];
              if (ks < 0 || k < bk) {
                bk = k;
                ks = s;
              }
            }
          }
#pragma unroll
          for (int o = kBucketTile / 2; o > 0; o >>= 1) {
            const uint64_t ok = tile.shfl_xor(bk, o);
            const int oks = tile.shfl_xor(ks, o);
            if (oks >= 0 && (ks < 0 || ok < bk)) {
              bk = ok;
              ks = oks;
            }
          }
          bslot = ks;
        }
        if (ns > bs) {
          target = bslot;
          stat = kStatEvicted;
          const int ow = sm.owner[target];
          if (lane == 0) {
            const int q = sm.n_ev++;
            sm.ev_slot[q] = static_cast<int16_t>(target);
            sm.ev_score[q] = bs;
            // a key of an earlier entry of this op (it held the row of its last occurrence so far)
            sm.ev_owner[q] = static_cast<int8_t>(ow);
            sm.ev_src[q] = ow >= 0 ? sm.src[ow] : static_cast<int8_t>(-1);
          }
          if (ow >= 0) {
            tile.sync();
            if (lane == 0) sm.cur[ow] = -1;
          }
        }
      }
      if (target >= 0) {
        if (target / kLaneSlots == lane) {
          const int j = target % kLaneSlots;
#pragma unroll
          for (int q = 0; q < kLaneSlots; ++q)
            if (q == j) {
              sc[q] = ns;
              dgs[q] = sm.digest[e];
            }
          dirty |= 1u << j;
          fresh |= 1u << j;
        }
        tile.sync();
        if (lane == 0) {
          sm.owner[target] = static_cast<int8_t>(f);
          sm.cur[f] = static_cast<int16_t>(target);
          sm.res[e] = static_cast<int16_t>(target);
          sm.src[f] = static_cast<int8_t>(e);
        }
      }
      if (lane == 0) sm.stat[e] = static_cast<int8_t>(stat);
      tile.sync();
    }
  }
  tile.sync();
  // Rows. Reads of rows as they were at the op's start first (hits' output rows, evicted copies), then the writes.
  const int nsub = kBucketTile / kTile;
  const int q = lane / kTile;
  if (p.mode == kFindOrInsert && p.values_out) {
    for (int e = q; e < c; e += nsub)
      if (sm.slot[e] >= 0 && sm.res[e] >= 0)
        copy_row(sub, row_ptr<T>(p.values_out, sm.idx[e], dim), row_ptr<T>(t, base + sm.slot[e]), dim, false);
  }
  if (p.mode == kInsertAndEvict) {
    const int nev = sm.n_ev;
    unsigned long long pos0 = 0;
    if (lane == 0 && nev > 0)
      pos0 = atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + kStatEvicted, static_cast<unsigned long long>(nev));
    pos0 = tile.shfl(pos0, 0);
    for (int k = q; k < nev; k += nsub) {
      const int s = sm.ev_slot[k];
      const int ow = sm.ev_owner[k];
      const unsigned long long pos = pos0 + k;
      if (sub.thread_rank() == 0) {
        const uint64_t vk = ow >= 0 ? sm.key[ow] : reinterpret_cast<const unsigned long long*>(t.keys)[base + s];
        if (p.evicted_keys) reinterpret_cast<KT*>(p.evicted_keys)[pos] = static_cast<KT>(vk);
        if (p.evicted_scores) p.evicted_scores[pos] = sm.ev_score[k];
      }
      if (p.evicted_values) {
        // a key of this op leaves with the row of its last occurrence before the eviction (rare: non-LRU scores)
        const T* src = ow >= 0 ? reinterpret_cast<const T*>(p.values_in) + sm.idx[sm.ev_src[k]] * dim
                               : row_ptr<T>(t, base + s);
        copy_row(sub, row_ptr<T>(p.evicted_values, pos, dim), src, dim, false);
      }
    }
  }
  tile.sync();
  // Writes: each slot whose key this op set or assigned gets its final row.
  for (int e = q; e < c; e += nsub) {
    if (sm.first[e] != e) continue;  // one writer per key: its first entry
    const int s = sm.cur[e];
    if (s < 0) continue;  // refused, or evicted later in this op
    if (copier)
      copy_row(sub, row_ptr<T>(t, base + s), reinterpret_cast<const T*>(p.values_in) + sm.idx[sm.src[e]] * dim, dim,
               false);
    else if (s != sm.slot[e])  // a key this op inserted
      init_row<V>(sub, row_ptr<T>(t, base + s), nullptr, dim, p.init, clock, sm.key[e]);
  }
  // find_or_insert: output rows of the keys that were not present (initial rows: inserted or refused).
  if (p.mode == kFindOrInsert && p.values_out) {
    for (int e = q; e < c; e += nsub)
      if (sm.slot[e] < 0) init_row<V>(sub, row_ptr<T>(p.values_out, sm.idx[e], dim), nullptr, dim, p.init, clock, sm.key[e]);
  }
  // Scores, digests, keys of the lane's slots.
#pragma unroll
  for (int j = 0; j < kLaneSlots; ++j) {
    if (!((dirty >> j) & 1u)) continue;
    const int64_t slot = base + kLaneSlots * lane + j;
    t.scores[slot] = sc[j];
    if ((fresh >> j) & 1u) {
      t.digests[slot] = dgs[j];
      const int ow = sm.owner[kLaneSlots * lane + j];
      reinterpret_cast<KT*>(t.keys)[slot] = static_cast<KT>(sm.key[ow]);
    }
  }
  // Per-key outputs and stats.
  for (int e = lane; e < c; e += kBucketTile) {
    const int64_t i = sm.idx[e];
    const int s = sm.res[e];
    const int st = sm.stat[e];
    if (p.found_out) p.found_out[i] = sm.hit[e];
    if (p.slots_out) p.slots_out[i] = s >= 0 ? base + s : -1;  // (a later entry of this op may evict it)
    if (!(st == kStatEvicted && p.mode == kInsertAndEvict)) atomicAdd(&s_stats[st], 1u);
  }
}

// The bucket pass: a tile of G lanes per bucket, striding over the buckets (the grid is the blocks that fit at once,
// so that no block waits at a barrier for its slowest bucket before the next bucket starts: one barrier, at the end).
template <int K, int V, int P, int G>
__global__ void __launch_bounds__(kBucketBlock) bucket_upsert_kernel(UpsertParams p, BucketScratch s) {
  constexpr int kLaneSlots = kBucketSlots / G;
  __shared__ BucketSmem s_b[kBucketBlock / G];
  __shared__ unsigned s_stats[kNumStats];
  __shared__ unsigned long long s_clock;
  if (threadIdx.x < kNumStats) s_stats[threadIdx.x] = 0;
  if (threadIdx.x == 0) s_clock = static_cast<unsigned long long>(__ldg(p.t.counters + kCounterClock));
  __syncthreads();
  const cg::thread_block blk = cg::this_thread_block();
  const cg::thread_block_tile<G, cg::thread_block> tile = cg::tiled_partition<G>(blk);
  const Tile sub = cg::tiled_partition<kTile>(blk);
  const int64_t ntiles = static_cast<int64_t>(gridDim.x) * (kBucketBlock / G);
  BucketSmem& sm = s_b[threadIdx.x / G];
#pragma unroll 1
  for (int64_t bucket = (static_cast<int64_t>(blockIdx.x) * kBucketBlock + threadIdx.x) / G;
       bucket < p.t.num_buckets; bucket += ntiles) {
    // The lane's digests are loaded with the offsets (one round trip; an untouched bucket wastes them).
    const uint8_t* dgp = p.t.digests + bucket * kBucketSlots + kLaneSlots * tile.thread_rank();
    const auto load_dg = [&] {
      return kLaneSlots == 8 ? *reinterpret_cast<const uint2*>(dgp)
                             : make_uint2(*reinterpret_cast<const uint32_t*>(dgp), 0u);
    };
    uint2 dg2 = load_dg();
    const uint32_t o0 = s.offsets[bucket], o1 = s.offsets[bucket + 1];
    for (uint32_t c0 = o0; c0 < o1; c0 += kBucketChunk) {
      const int c = static_cast<int>(o1 - c0 < kBucketChunk ? o1 - c0 : kBucketChunk);
      if (c0 != o0) dg2 = load_dg();  // the chunk before changed the bucket
      bucket_resolve<K, V, P, G>(tile, sub, p, sm, bucket, s.entries + c0, c, static_cast<uint64_t>(s_clock),
                                 s_stats, dg2);
      tile.sync();
    }
  }
  flush_stats(p, s_stats);
}
template <int K, int V, int P, int G>
void launch_bucket_pass(const UpsertParams& p, const BucketScratch& s, cudaStream_t st) {
  static int fit = 0;  // blocks per SM (the kernel's resources are fixed: asked once per process)
  if (fit <= 0 && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, bucket_upsert_kernel<K, V, P, G>,
                                                                 kBucketBlock, 0) != cudaSuccess ||
                   fit <= 0))
    fit = 4;
  const int64_t need = (p.t.num_buckets * G + kBucketBlock - 1) / kBucketBlock;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(need, (insert_grid_cap() / 2) * int64_t(fit)));
  bucket_upsert_kernel<K, V, P, G><<<grid, kBucketBlock, 0, st>>>(p, s);
}

// The grouped upsert: begin_op, count, scan, scatter, the bucket pass (`lanes` per bucket: 16 or 32). `scratch`:
// grouped_scratch_bytes.
template <int K, int V, int P>
void launch_upsert_grouped(const UpsertParams& p, void* scratch, int lanes, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  detail::begin_op_kernel<K, V, P><<<1, 32, 0, st>>>(p.t.counters, p.stats, nullptr);
  check_launch("begin_op");
  DYNAMICEMB_TABLE_PHASE_HOOK(st);
  if (p.n == 0) return;
  const int64_t nb = p.t.num_buckets;
  const BucketScratch s = bucket_upsert_scratch(scratch, p.n, nb);
  const unsigned gk = static_cast<unsigned>((p.n + 255) / 256);
  bucket_count_kernel<K, V, P><<<gk, 256, 0, st>>>(p, s);
  const unsigned np = static_cast<unsigned>((nb + kScanSpan - 1) / kScanSpan);
  uint32_t* counts = reinterpret_cast<uint32_t*>(p.t.locks);
  bucket_scan_sums_kernel<K, V, P><<<np, kScanBlock, 0, st>>>(counts, nb, s.partials);
  bucket_scan_partials_kernel<K, V, P><<<1, 1024, 0, st>>>(s.partials, np);
  bucket_scan_kernel<K, V, P><<<np, kScanBlock, 0, st>>>(counts, nb, s.partials, s.offsets);
  bucket_scatter_kernel<K, V, P><<<gk, 256, 0, st>>>(p, s);
  check_launch("grouped upsert: sort");
  DYNAMICEMB_TABLE_PHASE_HOOK(st);
  if (lanes == 32)
    launch_bucket_pass<K, V, P, 32>(p, s, st);
  else
    launch_bucket_pass<K, V, P, 16>(p, s, st);
  check_launch("grouped upsert: bucket pass");
  DYNAMICEMB_TABLE_PHASE_HOOK(st);
}

}  // namespace table
}  // namespace dynamicemb
