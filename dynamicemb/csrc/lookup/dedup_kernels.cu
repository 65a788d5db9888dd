// Per-table id dedup of one step, without a sort, in five passes over the ids:
//   clear    fills the per-step set with FREE (so the set is in L2 when the insert starts), zeroes the unique
//            count, and writes the bag of the first id of every chunk of kChunk ids (a thread per bag); in a
//            lookup_step it also sets the step's header (DedupParams: skip flag, refusals, pending, clocks) and
//            zeroes the CSR sort's counters (DedupParams::zero);
//   insert   exact (table, id) insert of every id into the set; a slot holds the LOWEST POSITION of its (table,
//            id) (4 bytes: an 8M-slot set is 32 MB and lives in L2: FREE -> position by CAS, then atomicMin by
//            every later match), and a prober compares its key with ids[pos] and its table with the table of pos
//            (from the feature boundaries in offsets). The block's ids of one (table, id) first elect their
//            lowest position in shared memory, and only that one probes the set. Every id writes its slot into
//            inverse;
//   count    the claimer of a slot is the id at its final position (the first occurrence, whatever the
//            scheduling); per chunk of kChunk ids: the number of claimers (into bag[chunk * kChunk + 1], a word
//            the resolve pass rewrites); the other ids write -(claimer + 2);
//   number   claimers take unique indices in position order (the claimers of all earlier chunks, then the
//            chunk's own) and write ukeys / utables / inverse; the last chunk's block writes the unique count
//            (no atomic: 1,024 same-address adds serialize in L2). The numbering, and so the CSR of the segmented
//            backward and where its warp boundaries cut a hot id, is the same in every run. In lookup_step
//            (find_meta) they also find their slot in their table (urow; a training hit writes its new score):
//            the step's hit pass, folded in (no launch, no re-read of the uniques, and every unique's probe in
//            flight at once instead of ~10 in turn per 8-lane tile of a resident wave);
//   resolve  inverse[i] = inverse[pos] for the others, and bag[i] of every id (binary search over the bag ends
//            of its chunk, starting at the chunk's first bag).
// no_bags (a sequence step whose kernels read no bags): clear and resolve write no bags.
// Nothing depends on the set's content before the step (the clear pass rewrites it), so an interrupted step
// leaves nothing to clean up.
#include <atomic>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/probe_meta.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kClearBlock = 256;
constexpr int kInsertBlock = 256;
constexpr int kResolveBlock = 256;
constexpr int kChunk = 1024;       // ids per block of the resolve pass (4 per thread)
constexpr int kBagWindow = 256;    // bag ends a resolve block keeps in shared memory
constexpr uint32_t kFree = 0xffffffffu;

static_assert(kChunk % kResolveBlock == 0, "resolve: whole rounds of ids");

// Bag b covers positions [start(b), start(b + 1)) with start(b) = offsets[b] clamped to [0, n]; ids before the
// first offset belong to bag 0 and ids after the last to the last bag, so the bag of position i is the last b in
// [0, num_bags) with start(b) <= i (0 if none).
__device__ __forceinline__ int64_t start_of(const DedupParams& p, int64_t b) { return clamp_off(__ldg(p.offsets + b), p.n); }

__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t* a) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}

// ---------------------------------------------------------------- clear
// Grid-stride over max(set words / 4, bags): set[...] = FREE (16-byte stores; the set is 16-byte aligned), and
// for bag b every chunk start c * kChunk inside [lo, hi) gets bag[c * kChunk] = b, where [lo, hi) is the range of
// positions whose bag is b (bag 0 from 0, the last bag to n; empty bags own none). With monotone offsets the
// ranges partition [0, n) and every chunk start is written once; otherwise the resolve pass clamps what it reads.
__global__ void __launch_bounds__(kClearBlock) dedup_clear_kernel(DedupParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kClearBlock;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kClearBlock + threadIdx.x;
  if (p.flags & kDedupPdl) accel::griddep_launch_dependents();
  const int64_t q = p.set_capacity >> 2;
  uint4* s4 = reinterpret_cast<uint4*>(p.set);
  const uint4 free4 = make_uint4(kFree, kFree, kFree, kFree);
  if (p.flags & kStepPdl) {  // the set (no pass before reads it in this step) beside the checks, then the wait
    for (int64_t k = t0; k < q; k += stride) s4[k] = free4;
    if (t0 < (p.set_capacity & 3)) p.set[(q << 2) + t0] = kFree;
    accel::griddep_wait();
  }
  if (t0 == 0) *p.count = 0;
  // the step's header (lookup_step): the device checks' verdict, zeroed counters, the step clocks
  if (blockIdx.x == 0 && p.skip_out != nullptr) {  // block-uniform
    int bad = 0;
    for (int k = threadIdx.x; k < p.check_blocks; k += kClearBlock) bad |= p.check_flags[k];
    if (threadIdx.x == 0 && p.skip_in != nullptr) bad |= *p.skip_in;
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) *p.skip_out = bad != 0;
  }
  if (t0 == 0 && p.pending != nullptr) *p.pending = 0;
  for (int64_t t = t0; t < p.num_tables; t += stride) {
    if (p.refused != nullptr) p.refused[t] = 0;
    if (p.clock_meta != nullptr) reinterpret_cast<int64_t*>(p.clock_meta[t].counters)[table::kCounterClock] += 1;
  }
  if (!(p.flags & kStepPdl)) {
    for (int64_t k = t0; k < q; k += stride) s4[k] = free4;
    if (t0 < (p.set_capacity & 3)) p.set[(q << 2) + t0] = kFree;
  }
  for (int64_t k = t0; k < p.zero_bytes / 16; k += stride) static_cast<uint4*>(p.zero)[k] = make_uint4(0, 0, 0, 0);
  if (p.no_bags) return;
  for (int64_t b = t0; b < p.num_bags; b += stride) {
    const int64_t lo = b == 0 ? 0 : start_of(p, b);
    const int64_t hi = b == p.num_bags - 1 ? p.n : start_of(p, b + 1);
    for (int64_t c = (lo + kChunk - 1) / kChunk * kChunk; c < hi; c += kChunk) p.bag[c] = static_cast<int32_t>(b);
  }
}

// ---------------------------------------------------------------- insert
// Feature of position i: the feature of its bag (bag / batch, clamped to the last feature), found without the
// bag: the largest f in [0, num_features) with bound(f) <= i, where bound(0) = 0 and bound(f) = start(f * batch)
// (infinite when f * batch >= num_bags). For monotone offsets this is the bag's feature; for any offsets it is a
// function of i alone, which is all the set needs (a prober's table and the table it compares are computed by
// the same function). K positions at once, the bounds of each search step loaded before any is used.
// Positions and bounds are int32 (n < 2^31 - 1); INT32_MAX is the infinite bound.
__device__ __forceinline__ int32_t feature_bound(const DedupParams& p, int f) {
  const int64_t b = static_cast<int64_t>(f) * p.batch;
  const int64_t raw = __ldg(p.offsets + (b < p.num_bags ? b : p.num_bags));  // a valid address for every f
  return f == 0 ? 0 : (b < p.num_bags ? static_cast<int32_t>(clamp_off(raw, p.n)) : INT32_MAX);
}

template <int K, typename Bound>
__device__ __forceinline__ void features_of(int num_features, Bound bound, const int32_t (&pos)[K],
                                            const bool (&act)[K], int (&f)[K]) {
  int hi[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    f[r] = 0;
    hi[r] = act[r] ? num_features - 1 : 0;
  }
  const int steps = num_features > 1 ? 32 - __clz(num_features - 1) : 0;  // ceil(log2(num_features))
  for (int it = 0; it < steps; ++it) {
    int mid[K];
    int32_t bv[K];
#pragma unroll
    for (int r = 0; r < K; ++r) {
      mid[r] = (f[r] + hi[r] + 1) >> 1;
      bv[r] = bound(mid[r]);
    }
#pragma unroll
    for (int r = 0; r < K; ++r) {
      const bool open = f[r] < hi[r], ge = bv[r] <= pos[r];
      f[r] = open && ge ? mid[r] : f[r];
      hi[r] = open && !ge ? mid[r] - 1 : hi[r];
    }
  }
}

// kPerThread ids per thread (ids base + r * kInsertBlock + thread, r < kPerThread), their probes in lockstep so that
// each step's loads / CASes of all of them are in flight together, so a warp loops until the longest probe of its 128
// ids ends: the set's capacity (dedup_set_capacity, default 4 n + 1024) keeps that tail short (NVIDIA's config: ~2.3
// rounds a warp against ~3.9 at 1.25 n; the insert 0.045 -> 0.034 ms: docs/dynamicemb.md). The home slot of (table,
// key) is a 64-bit mix of both scaled to the capacity; linear probing. A FREE slot is taken with one CAS (FREE ->
// position); each probe step is that CAS (kDedupCasFirst, default: a CAS that takes nothing returns the slot's value,
// one L2 round trip) or a load and then the CAS on FREE (H200, NVIDIA preset: 0.048 -> 0.045 ms with the CAS first); an
// occupied slot matches when ids[pos] is the key and pos is in a feature of the same table, and a match at a higher
// position lowers it (atomicMin), so that the slot ends at the id's first position whatever the order the ids arrive
// in. A slot only ever holds positions of one (table, key), so a prober needs no fence: whichever of them it reads
// compares the same. The set has at least n slots and at most n - 1 are taken while a thread still probes, so every
// probe ends. Every id writes inverse: its slot, or -1 (reserved id, skipped step). kSmem (at most kSmemFeatures
// features): the bounds live in shared memory, and when they are monotone (valid offsets) a key match at a position
// inside the prober's own feature needs no search. Else every search reads the bounds from offsets (the same function
// either way).
constexpr int kPerThread = 4;
// The set's table salt differs from the "hash" routing's (dynamicemb/_routing.py: mix64(key ^ 0x9e37...15 * (t + 1)),
// owner from the top bits): with the same salt, the ids one rank of W owns share the top bits of this hash too and
// pile into 1/W of the set, whose linear probes then run ~n long (a 200x slower sharded step at W = 2).
constexpr uint64_t kSetSalt = 0xd6e8feb86659fd93ull;
constexpr int kInsertWarps = kInsertBlock / 32;
constexpr int kSmemFeatures = 256;
static_assert(kPerThread * kInsertWarps == 32, "number: one lane per (round, warp) in the block's scan");
static_assert(kPerThread * kInsertBlock == kChunk, "count / number: a block per chunk of the resolve pass");

// kDedupChunkFeature: the feature of every position of the block's chunk [c0, c0 + kChunk) (clamped to n) when the
// bounds are in shared memory and monotone and the chunk lies inside one feature (fb), else -1. Then features_of
// would give fb for each of them (the largest f with bound(f) <= i: every later bound is >= sbound[fb + 1] > i).
__device__ __forceinline__ int chunk_feature(const DedupParams& p, const int32_t* sbound, bool mono, int64_t c0) {
  if (!mono || !(p.flags & kDedupChunkFeature)) return -1;
  const int64_t last = c0 + kChunk <= p.n ? c0 + kChunk - 1 : p.n - 1;
  const int32_t first[1] = {static_cast<int32_t>(c0)};
  const bool act[1] = {true};
  int fb[1];
  features_of<1>(p.num_features, [&](int g) { return sbound[g]; }, first, act, fb);
  return last < sbound[fb[0] + 1] ? fb[0] : -1;
}

// The feature bounds in shared memory (kSmem) and whether they are monotone; block-wide (syncs).
template <bool kSmem>
__device__ __forceinline__ bool load_bounds(const DedupParams& p, int32_t* sbound) {
  if constexpr (!kSmem) return false;
  const int F = p.num_features;
  for (int f = threadIdx.x; f <= F; f += kInsertBlock) sbound[f] = f < F ? feature_bound(p, f) : INT32_MAX;
  __syncthreads();
  return __syncthreads_and(threadIdx.x >= F || sbound[threadIdx.x] <= sbound[threadIdx.x + 1]);
}

// Block pre-dedup of the insert: the block's ids of one (table, key) elect their lowest position in a shared-memory
// set over the block's kChunk ids (2 x kChunk slots, linear probing, the same CAS / atomicMin rule as the global
// set); only that leader probes the global set, the others take its slot. The global set then sees one prober per
// block and (table, key): a hot id (the NVIDIA preset's top id is ~7 % of its table's ids, ~70 per block) costs
// one global CAS per block instead of a burst of same-address CASes and atomicMins from every occurrence (H200,
// NVIDIA preset: insert 0.050 -> 0.044 ms). The slots' final positions (the global minimum is a block's minimum)
// are unchanged.
constexpr int kLocalSlots = 2 * kChunk;
constexpr uint32_t kLocalMask = kLocalSlots - 1;
static_assert((kLocalSlots & kLocalMask) == 0, "local set: a power of two");

// Fitted to 4 blocks per SM (<= 64 registers, no spills; at 5, 48 registers: slower, docs/dynamicemb.md).
template <bool kSmem, bool kFind = false>
__global__ void __launch_bounds__(kInsertBlock, 4) dedup_insert_kernel(DedupParams p) {
  constexpr int K = kPerThread;
  __shared__ int32_t sbound[kSmemFeatures + 1];
  __shared__ uint32_t lset[kLocalSlots];     // FREE or the lowest local index of a (table, key) in the block
  __shared__ unsigned long long lkey[kChunk];  // key of local index l = r * kInsertBlock + thread
  __shared__ int32_t ltab[kChunk];           // its table (-1: not inserted); then the leaders' global slots
  for (int k = threadIdx.x; k < kLocalSlots; k += kInsertBlock) lset[k] = kFree;  // (load_bounds syncs)
  // kDedupPdl: the block's own dedup (ids, bounds, shared memory) runs before the wait for the clear pass; the
  // skip flag and the set after it
  const bool pdl = (p.flags & kDedupPdl) != 0;
  if (pdl) accel::griddep_launch_dependents();
  const int F = p.num_features;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (K * kInsertBlock) + threadIdx.x;
  const uint32_t cap = static_cast<uint32_t>(p.set_capacity);
  const unsigned long long* ids = reinterpret_cast<const unsigned long long*>(p.ids);
  int32_t idx[K], t[K], inv[K];  // idx: position (valid where base + r * kInsertBlock < n)
  bool won[K];                    // kFind: this id's CAS took a FREE set slot (one per (table, key) and step)
  uint64_t key[K];
  uint32_t s[K];
  bool todo[K], live[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    live[r] = base + r * kInsertBlock < p.n;
    idx[r] = live[r] ? static_cast<int32_t>(base + r * kInsertBlock) : 0;
    key[r] = live[r] ? __ldg(ids + idx[r]) : 0;
  }
  const bool mono = load_bounds<kSmem>(p, sbound);
  auto bound = [&](int g) {
    if constexpr (kSmem) return sbound[g];
    else return feature_bound(p, g);
  };
  const bool skip = !pdl && p.skip != nullptr && *p.skip != 0;  // a batch that failed the device checks: no uniques
#pragma unroll
  for (int r = 0; r < K; ++r) {
    todo[r] = live[r] && !skip && !table::is_reserved_key(key[r]);
    inv[r] = -1;
    won[r] = false;
  }
  int f[K];
  int fb = -1;  // the chunk's one feature (kDedupChunkFeature), else -1
  if constexpr (kSmem) fb = chunk_feature(p, sbound, mono, static_cast<int64_t>(blockIdx.x) * (K * kInsertBlock));
  if (fb >= 0) {
#pragma unroll
    for (int r = 0; r < K; ++r) f[r] = fb;
  } else {
    features_of<K>(F, bound, idx, todo, f);
  }
  uint32_t lh[K];  // local set slot of id r's (table, key)
#pragma unroll
  for (int r = 0; r < K; ++r) {
    t[r] = todo[r] ? __ldg(p.feature_table + f[r]) : 0;
    const uint64_t mix = table::mix64(key[r] ^ (kSetSalt * static_cast<uint64_t>(t[r] + 1)));
    s[r] = static_cast<uint32_t>(__umul64hi(mix, cap));
    lh[r] = static_cast<uint32_t>(mix) & kLocalMask;
    const int l = r * kInsertBlock + threadIdx.x;
    lkey[l] = key[r];
    ltab[l] = todo[r] ? t[r] : -1;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (!todo[r]) continue;
    const uint32_t l = r * kInsertBlock + threadIdx.x;
    while (true) {
      uint32_t v = *reinterpret_cast<volatile uint32_t*>(lset + lh[r]);
      if (v == kFree) v = atomicCAS(lset + lh[r], kFree, l);
      if (v == kFree) break;  // took the slot
      if (lkey[v] == key[r] && (fb >= 0 || ltab[v] == t[r])) {
        if (v > l) atomicMin(lset + lh[r], l);
        break;
      }
      lh[r] = (lh[r] + 1) & kLocalMask;
    }
  }
  __syncthreads();
  if (pdl) {
    accel::griddep_wait();
    if (p.skip != nullptr && *p.skip != 0) {
#pragma unroll
      for (int r = 0; r < K; ++r) todo[r] = false;
    }
  }
  int32_t lead[K];  // the local index of id r's leader (the lowest of its (table, key) in the block)
  bool todo0[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    lead[r] = todo[r] ? static_cast<int32_t>(lset[lh[r]]) : -1;
    todo0[r] = todo[r];
    todo[r] = todo[r] && lead[r] == r * kInsertBlock + static_cast<int>(threadIdx.x);  // leaders probe the set
  }
  const bool cas_first = (p.flags & kDedupCasFirst) != 0;
  int32_t flo = 0, fhi = 0;  // the chunk's feature's positions [flo, fhi) (fb >= 0)
  if constexpr (kSmem) {
    if (fb >= 0) {
      flo = sbound[fb];
      fhi = sbound[fb + 1];
    }
  }
  while (true) {
    bool any = false;
#pragma unroll
    for (int r = 0; r < K; ++r) any |= todo[r];
    if (!any) break;
    uint32_t v[K];
    if (cas_first) {
#pragma unroll
      for (int r = 0; r < K; ++r) v[r] = todo[r] ? atomicCAS(p.set + s[r], kFree, static_cast<uint32_t>(idx[r])) : 0u;
    } else {
#pragma unroll
      for (int r = 0; r < K; ++r) v[r] = todo[r] ? ld_relaxed(p.set + s[r]) : 0u;
#pragma unroll
      for (int r = 0; r < K; ++r)
        if (todo[r] && v[r] == kFree) v[r] = atomicCAS(p.set + s[r], kFree, static_cast<uint32_t>(idx[r]));
    }
    uint64_t k2[K];
#pragma unroll
    for (int r = 0; r < K; ++r) {
      if (todo[r] && v[r] == kFree) {  // the CAS took it
        inv[r] = static_cast<int32_t>(s[r]);
        todo[r] = false;
        won[r] = true;
      }
      k2[r] = todo[r] ? __ldg(ids + v[r]) : 0;
    }
    bool m[K], need[K], any_need = false;
    int32_t vp[K];
#pragma unroll
    for (int r = 0; r < K; ++r) {
      m[r] = todo[r] && k2[r] == key[r];
      vp[r] = static_cast<int32_t>(v[r]);
      // same feature as the prober: same table (only when the bounds are in shared memory and monotone)
      if (fb >= 0) need[r] = m[r] && !(flo <= vp[r] && vp[r] < fhi);
      else need[r] = m[r] && !(mono && sbound[f[r]] <= vp[r] && vp[r] < sbound[f[r] + 1]);
      any_need |= need[r];
    }
    if (any_need) {  // a key match in another feature: compare that feature's table
      int fv[K];
      features_of<K>(F, bound, vp, need, fv);
#pragma unroll
      for (int r = 0; r < K; ++r)
        if (need[r]) m[r] = __ldg(p.feature_table + fv[r]) == t[r];
    }
#pragma unroll
    for (int r = 0; r < K; ++r) {
      if (m[r]) {  // the first position of the id wins the slot
        if (vp[r] > idx[r]) atomicMin(p.set + s[r], static_cast<uint32_t>(idx[r]));
        inv[r] = static_cast<int32_t>(s[r]);
        todo[r] = false;
      } else if (todo[r]) {
        s[r] = s[r] + 1 == cap ? 0 : s[r] + 1;
      }
    }
  }
  if constexpr (kFind) {
    // the step's find by the set slot's first taker (exactly one per (table, key)): its table slot (or -1) into
    // slot_row[set slot], for the number pass's claimer; a training hit takes its new score here
    int64_t slot[K];
    find_slots<K>(p.find_meta, p.find_train, won, key, t, slot);
#pragma unroll
    for (int r = 0; r < K; ++r)
      if (won[r]) p.slot_row[inv[r]] = slot[r];
  }
  int32_t* linv = ltab;  // the leaders' slots (every ltab read was before the last barrier)
#pragma unroll
  for (int r = 0; r < K; ++r)
    if (todo0[r] && lead[r] == r * kInsertBlock + static_cast<int>(threadIdx.x)) linv[lead[r]] = inv[r];
  __syncthreads();
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (todo0[r]) inv[r] = linv[lead[r]];
    if (live[r]) p.inverse[idx[r]] = inv[r];
  }
}

// ---------------------------------------------------------------- count
// Block c: ids [c * kChunk, (c + 1) * kChunk), laid out as in the insert. An id is its slot's claimer when the
// slot's final position is its own; the others write -(claimer + 2). The chunk's claimers go to
// bag[c * kChunk + 1] (read by the number pass of later chunks, all full; rewritten by the resolve pass).
__global__ void __launch_bounds__(kInsertBlock) dedup_count_kernel(DedupParams p) {
  constexpr int K = kPerThread;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kChunk;
  if (p.flags & kDedupPdl) {
    accel::griddep_launch_dependents();
    accel::griddep_wait();
  }
  int32_t x[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int64_t i = c0 + r * kInsertBlock + threadIdx.x;
    x[r] = i < p.n ? p.inverse[i] : -1;
  }
  uint32_t m[K];
#pragma unroll
  for (int r = 0; r < K; ++r) m[r] = x[r] >= 0 ? p.set[x[r]] : 0u;
  int total = 0;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int64_t i = c0 + r * kInsertBlock + threadIdx.x;
    const bool claimer = x[r] >= 0 && static_cast<int64_t>(m[r]) == i;
    if (x[r] >= 0 && !claimer) p.inverse[i] = -static_cast<int32_t>(m[r]) - 2;
    if (p.csr_keys != nullptr && i < p.n) {
      p.csr_keys[i] = x[r] >= 0 ? static_cast<int32_t>(m[r]) : static_cast<int32_t>(p.n);
    }
    total += __syncthreads_count(claimer);
  }
  if (threadIdx.x == 0 && c0 + 1 < p.n) p.bag[c0 + 1] = total;
}

// ---------------------------------------------------------------- number
// Block c: the claimers of chunk c (inverse >= 0 after the count pass) take unique indices from the claimers of
// chunks 0 .. c - 1 on, in position order ((round, warp) counts scanned by one warp, then the lane's rank), and
// write ukeys, utables (their table found again from the bounds) and their own inverse. With find_meta, then the
// find of the step's hit pass (probe_meta.cuh find_slots): urow = slot, or -2 (training miss: pending, for the
// insert pass) / -1 (eval miss).

// The numbered claimers' writes (ukeys, utables, their own inverse) and, with the find by the dedup insert
// (slot_row), their urow. Returns whether the pass's own find is still to run.
template <int K>
__device__ __forceinline__ bool write_claimers(const DedupParams& p, const bool (&claimed)[K], const int32_t (&idx)[K],
                                               const int32_t (&sset)[K], const int32_t (&u)[K], const int32_t (&t)[K],
                                               const uint64_t (&key)[K]) {
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (!claimed[r]) continue;
    p.ukeys[u[r]] = key[r];
    p.utables[u[r]] = t[r];
    p.inverse[idx[r]] = u[r];
  }
  if (p.find_meta == nullptr || p.find_later) return false;
  if (p.slot_row != nullptr) {  // found by the insert: the claimer's set slot holds its table slot
#pragma unroll
    for (int r = 0; r < K; ++r) {
      if (!claimed[r]) continue;
      const int64_t sl = p.slot_row[sset[r]];
      p.urow[u[r]] = sl >= 0 ? sl : (p.find_train ? kUrowPending : -1);
      if (p.find_train && sl < 0) *p.pending = 1;
    }
    return false;
  }
  return true;
}

// The number pass's writes and find: every load of the find (each claimer's table record, the start
// group of keys and, training, its table's step clock) issued before the pass's stores (ukeys, utables, inverse,
// which the compiler cannot move loads above) and before any compare; then the digest scans and the score writes
// (the same slots, urow and scores as find_slots).
template <int K, int W>
__device__ __forceinline__ void number_find(const DedupParams& p, const bool (&claimed)[K],
                                                const int32_t (&idx)[K], const int32_t (&sset)[K],
                                                const uint64_t (&key)[K], const int (&f)[K], const int32_t* wbase,
                                                int warp, const unsigned (&ball)[K], unsigned below) {
  int32_t u[K], t[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    u[r] = claimed[r] ? wbase[r * W + warp] + __popc(ball[r] & below) : 0;
    t[r] = claimed[r] ? __ldg(p.feature_table + f[r]) : 0;
  }
  const bool find = p.find_meta != nullptr && !p.find_later && p.slot_row == nullptr;
  uint64_t k[K][kGroup];
  int64_t g[K];
  uint64_t clk[K];
  if (find) {
#pragma unroll
    for (int r = 0; r < K; ++r) {
      g[r] = 0;
      clk[r] = 0;
#pragma unroll
      for (int j = 0; j < kGroup; ++j) k[r][j] = 0;
      if (claimed[r]) {
        const TableMeta& m = p.find_meta[t[r]];
        g[r] = group_of(table::home_of(m, key[r]));
        const uint64_t* keys = reinterpret_cast<const uint64_t*>(m.keys) + g[r];
#pragma unroll
        for (int j = 0; j < kGroup; ++j) k[r][j] = keys[j];
        if (p.find_train) clk[r] = static_cast<uint64_t>(*reinterpret_cast<const int64_t*>(m.counters));
      }
    }
  }
  if (!write_claimers<K>(p, claimed, idx, sset, u, t, key)) return;
  int64_t slot[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    slot[r] = -1;
    if (!claimed[r]) continue;
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
      if (k[r][j] == key[r]) slot[r] = g[r] + j;
  }
#pragma unroll
  for (int r = 0; r < K; ++r)
    if (claimed[r] && slot[r] < 0) {
      const TableMeta& m = p.find_meta[t[r]];
      slot[r] = probe_digests(m, key[r], table::home_of(m, key[r]));
    }
  if (p.find_train) {
    uint64_t old[K];
#pragma unroll
    for (int r = 0; r < K; ++r) {  // (LFU / customized: the old scores, all loaded before the first store)
      old[r] = 0;
      if (slot[r] >= 0 && p.find_meta[t[r]].policy != table::kPolicyLru)
        old[r] = reinterpret_cast<const uint64_t*>(p.find_meta[t[r]].scores)[slot[r]];
    }
#pragma unroll
    for (int r = 0; r < K; ++r) {
      if (slot[r] < 0) continue;
      const TableMeta& m = p.find_meta[t[r]];
      reinterpret_cast<uint64_t*>(m.scores)[slot[r]] = step_score(m, clk[r], true, old[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (!claimed[r]) continue;
    p.urow[u[r]] = slot[r] >= 0 ? slot[r] : (p.find_train ? kUrowPending : -1);
    if (p.find_train && slot[r] < 0) *p.pending = 1;
  }
}

// Every load first (the ids' inverse and keys beside the earlier chunks' counts, 4 at once; then the find's,
// number_find), fitted to 3 blocks per SM (80 registers, no spills).
template <bool kSmem>
__global__ void __launch_bounds__(kInsertBlock, 3) dedup_number_kernel(DedupParams p) {
  constexpr int NB = kInsertBlock;
  constexpr int K = kChunk / NB, W = NB / 32;  // ids per thread, warps: K * W = 32 (round, warp) counts
  static_assert(K * W == 32 && K * NB == kChunk, "number: a chunk per block, 32 (round, warp) counts");
  __shared__ int32_t wbase[32];  // (round, warp) -> first unique of its claimers; first W: block sums
  __shared__ int32_t sbound[kSmemFeatures + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kChunk;
  if (p.flags & kDedupPdl) {
    accel::griddep_launch_dependents();
    accel::griddep_wait();
  }
  int32_t idx[K], sset[K];  // sset: a claimer's set slot (its inverse after the count pass)
  uint64_t key[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {  // the ids' loads first, beside the prefix's: one memory latency for all of them
    const int64_t i = c0 + r * NB + threadIdx.x;
    sset[r] = i < p.n ? p.inverse[i] : -1;
    key[r] = i < p.n ? __ldg(reinterpret_cast<const unsigned long long*>(p.ids) + i) : 0;
  }
  int before = 0;  // claimers of the earlier chunks
  for (int64_t c = threadIdx.x; c < blockIdx.x; c += 4 * NB) {
    int v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t cj = c + j * NB;
      v[j] = cj < blockIdx.x ? p.bag[cj * kChunk + 1] : 0;
    }
    before += (v[0] + v[1]) + (v[2] + v[3]);
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) before += __shfl_xor_sync(0xffffffffu, before, d);
  if (lane == 0) wbase[warp] = before;
  __syncthreads();
  before = 0;
#pragma unroll
  for (int k = 0; k < W; ++k) before += wbase[k];
  const bool mono = load_bounds<kSmem>(p, sbound);
  bool claimed[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int64_t i = c0 + r * NB + threadIdx.x;
    idx[r] = i < p.n ? static_cast<int32_t>(i) : 0;
    claimed[r] = sset[r] >= 0;
  }
  unsigned ball[K];
#pragma unroll
  for (int r = 0; r < K; ++r) ball[r] = __ballot_sync(0xffffffffu, claimed[r]);
  __syncthreads();  // every warp has read the block sums
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < K; ++r) wbase[r * W + warp] = __popc(ball[r]);
  }
  __syncthreads();
  if (warp == 0) {  // exclusive scan of the 32 (round, warp) counts in id order
    const int c = wbase[lane];
    int incl = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    wbase[lane] = before + incl - c;
    if (lane == 31 && blockIdx.x == gridDim.x - 1) *p.count = before + incl;  // all claimers: the unique count
  }
  bool any_claimed = false;
#pragma unroll
  for (int r = 0; r < K; ++r) any_claimed |= claimed[r];
  if (__syncthreads_or(any_claimed) == 0) return;
  auto bound = [&](int g) {
    if constexpr (kSmem) return sbound[g];
    else return feature_bound(p, g);
  };
  int f[K];
  const int fb = kSmem ? chunk_feature(p, sbound, mono, c0) : -1;
  if (fb >= 0) {
#pragma unroll
    for (int r = 0; r < K; ++r) f[r] = fb;
  } else {
    features_of<K>(p.num_features, bound, idx, claimed, f);
  }
  const unsigned below = (1u << lane) - 1u;
  number_find<K, W>(p, claimed, idx, sset, key, f, wbase, warp, ball, below);
}

// ---------------------------------------------------------------- find (find_later)
// The number pass's find over the numbered uniques (kPerThread per thread, probes in flight together): the same
// slots, urow, pending flag and scores, as a kernel the step queues after forking the CSR build.
__global__ void __launch_bounds__(kInsertBlock) dedup_find_kernel(DedupParams p) {
  constexpr int K = kPerThread;
  const int64_t count = *p.count;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (K * kInsertBlock) + threadIdx.x;
  if (base >= count) return;
  bool act[K];
  uint64_t key[K];
  int32_t t[K];
  int64_t slot[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int64_t u = base + r * kInsertBlock;
    act[r] = u < count;
    key[r] = act[r] ? p.ukeys[u] : 0;
    t[r] = act[r] ? p.utables[u] : 0;
  }
  find_slots<K>(p.find_meta, p.find_train, act, key, t, slot);
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (!act[r]) continue;
    p.urow[base + r * kInsertBlock] = slot[r] >= 0 ? slot[r] : (p.find_train ? kUrowPending : -1);
    if (p.find_train && slot[r] < 0) *p.pending = 1;
  }
}

// ---------------------------------------------------------------- resolve
// Block c: ids [c * kChunk, (c + 1) * kChunk). inverse[i] <= -2 (repeat of the id at -inverse[i] - 2, which
// claimed and so holds its unique) becomes that unique. bag[i]: the first bag b >= b0 (the chunk's first bag,
// from the clear pass) whose end (start(b + 1), or "infinity" for the last bag) is past i, by binary search over
// kBagWindow ends in shared memory, or over offsets for ids past the window (many empty bags). All loads of a
// thread's ids are issued before its stores.
__global__ void __launch_bounds__(kResolveBlock) dedup_resolve_kernel(DedupParams p) {
  constexpr int R = kChunk / kResolveBlock;
  __shared__ int64_t ends[kBagWindow];
  __shared__ int64_t first_bag;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t last = p.num_bags - 1;
  if (p.flags & kDedupPdl) accel::griddep_wait();
  int32_t x[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = c0 + r * kResolveBlock + threadIdx.x;
    x[r] = i < p.n ? p.inverse[i] : -1;
  }
  if (p.no_bags) {  // block-uniform: the repeats' uniques only
    int32_t y[R];
#pragma unroll
    for (int r = 0; r < R; ++r) y[r] = x[r] <= -2 ? p.inverse[-static_cast<int64_t>(x[r]) - 2] : x[r];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (x[r] <= -2) p.inverse[c0 + r * kResolveBlock + threadIdx.x] = y[r];
    return;
  }
  if (threadIdx.x == 0) {
    const int64_t b = p.bag[c0];
    first_bag = b < 0 ? 0 : (b > last ? last : b);
  }
  __syncthreads();
  const int64_t b0 = first_bag;
  for (int k = threadIdx.x; k < kBagWindow; k += kResolveBlock)
    ends[k] = b0 + k < last ? start_of(p, b0 + k + 1) : INT64_MAX;
  int32_t y[R];
#pragma unroll
  for (int r = 0; r < R; ++r) y[r] = x[r] <= -2 ? p.inverse[-static_cast<int64_t>(x[r]) - 2] : x[r];
  __syncthreads();
  const int64_t wend = ends[kBagWindow - 1];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = c0 + r * kResolveBlock + threadIdx.x;
    if (i >= p.n) break;
    int64_t b;
    if (i < wend) {
      int lo = 0, hi = kBagWindow - 1;  // first k with ends[k] > i
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (ends[mid] > i) hi = mid;
        else lo = mid + 1;
      }
      b = b0 + lo;
    } else {
      int64_t lo = b0 + kBagWindow, hi = last;  // first b in [lo, last] with end(b) > i (end(last) = infinity)
      while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        if (start_of(p, mid + 1) > i) hi = mid;
        else lo = mid + 1;
      }
      b = lo;
    }
    if (x[r] <= -2) p.inverse[i] = y[r];
    p.bag[i] = static_cast<int32_t>(b);
  }
}

}  // namespace detail

namespace {
// k<<<grid, block, 0, st>>>(p), as a programmatic dependent of the stream's previous kernel when pdl.
void launch_pass(bool pdl, void (*k)(DedupParams), unsigned grid, unsigned block, cudaStream_t st,
                 const DedupParams& p, const char* what) {
  launch_maybe_pdl(pdl, k, grid, block, st, p);
  check_launch(what);
}
}  // namespace

bool pdl_supported() { return accel::current_device_cc_major(/*fallback=*/0) >= 9; }

int64_t dedup_set_capacity(int64_t n, int64_t entries, int flags) {
  int64_t want = n + n / 4 + 1024;
  if (flags & kDedupSet2x) want = 2 * n + n / 2 + 1024;
  if (flags & kDedupSet4x) want = 4 * n + 1024;
  if (want > INT32_MAX) want = INT32_MAX;  // slots are int32 in inverse (n < 2^31 - 1, so still >= n)
  return want < entries ? want : entries;
}

void launch_dedup(const DedupParams& p_in, void* stream, void (*after_count)(void*), void* ctx) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  DedupParams p = p_in;
  p.set_capacity = dedup_set_capacity(p.n, p.set_capacity, p.flags);
  if (!pdl_supported() || !(p.flags & kDedupPdl)) p.flags &= ~(kDedupPdl | kStepPdl);
  const bool pdl = (p.flags & kDedupPdl) != 0;
  if (p.n == 0) {
    cudaError_t e = cudaMemsetAsync(p.count, 0, sizeof(int32_t), st);
    if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: dedup: ") + cudaGetErrorString(e));
    return;
  }
  int64_t clear_items = (p.set_capacity >> 2) > p.num_bags ? (p.set_capacity >> 2) : p.num_bags;
  if (p.zero_bytes / 16 > clear_items) clear_items = p.zero_bytes / 16;
  const unsigned clear_grid = blocks_for(clear_items, detail::kClearBlock);
  const unsigned cap_grid = static_cast<unsigned>(persistent_blocks(2048 / detail::kClearBlock));
  if (p.find_meta != nullptr && (p.urow == nullptr || (p.find_train && p.pending == nullptr)))
    throw std::runtime_error("dynamicemb lookup: dedup: the find needs urow (and pending in training)");
  launch_pass((p.flags & kStepPdl) != 0, detail::dedup_clear_kernel, clear_grid < cap_grid ? clear_grid : cap_grid,
              detail::kClearBlock, st, p, "dedup clear");
  const unsigned insert_grid = blocks_for(p.n, detail::kInsertBlock * detail::kPerThread);
  const bool smem = p.num_features <= detail::kSmemFeatures;
  const unsigned B = detail::kInsertBlock;
  if (p.slot_row != nullptr && p.find_meta != nullptr) {  // the find by the set slots' first takers
    launch_pass(pdl, smem ? detail::dedup_insert_kernel<true, true> : detail::dedup_insert_kernel<false, true>,
                insert_grid, B, st, p, "dedup insert");
  } else {
    launch_pass(pdl, smem ? detail::dedup_insert_kernel<true> : detail::dedup_insert_kernel<false>, insert_grid, B,
                st, p, "dedup insert");
  }
  launch_pass(pdl, detail::dedup_count_kernel, insert_grid, B, st, p, "dedup count");
  if (after_count != nullptr) after_count(ctx);
  launch_pass(pdl, smem ? detail::dedup_number_kernel<true> : detail::dedup_number_kernel<false>, insert_grid, B, st,
              p, "dedup number");
  launch_pass(pdl, detail::dedup_resolve_kernel, blocks_for(p.n, detail::kChunk), detail::kResolveBlock, st, p,
              "dedup resolve");
}

namespace {
std::atomic<int> g_find_later{0};
std::atomic<int> g_dedup_flags{kDedupCasFirst | kDedupPdl | kStepPdl | kDedupSet4x | kDedupChunkFeature};
}

int dedup_flags_variant(int v) {
  const int old = g_dedup_flags.load();
  if (v >= 0 && v <= kDedupFlagsAll) g_dedup_flags.store(v);
  return old;
}

int find_later_variant(int v) {
  const int old = g_find_later.load();
  if (v >= 0 && v <= 2) g_find_later.store(v);
  return old;
}

void launch_dedup_find(const DedupParams& p, void* stream) {
  if (p.n == 0 || p.find_meta == nullptr) return;
  detail::dedup_find_kernel<<<blocks_for(p.n, detail::kInsertBlock * detail::kPerThread), detail::kInsertBlock, 0,
                              static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("dedup find");
}

}  // namespace lookup
}  // namespace dynamicemb
