// find_or_insert (train) / find (eval) of the uniques of ALL tables of a step, in one pass per phase.
//
// Works on the scored hash table's documented layout (dynamicemb/csrc/table/table_types.h: buckets of
// bucket_capacity slots chosen by the key hash, 8-bit digests, probe order a rotation from hash & (B - 1), free
// slots claimed EMPTY -> LOCKED and published with a release store, eviction of the slot of least (score, digest,
// key) (table::evicts_before) under the bucket lock when the new score is strictly higher, scores by the table's
// policy, rows initialized by the table's counter-based initializer), with the table's probe primitives (table/probe.cuh:
// key-word claim / publish / wait, digest match, home bucket). The uniques are distinct (table, id) pairs (the dedup guarantees it), which
// keeps this simpler than a general upsert:
//   1. find: read-only probe of every unique; hits take their new score (a single writer per slot); misses
//      are left to the insert pass (urow = kUrowPending). No key, digest or free slot changes in this pass. It
//      runs inside the dedup's number pass (dedup_kernels.cu, probe_meta.cuh find_slots).
//   2. insert pass: claim a free slot in probe order, or evict under the bucket lock. Every key touched by this
//      step has a score >= any new key's score, so an insert never evicts a key of the same step.
//   3. resolve (train): keep a slot only if it still holds the unique's key (a safety net for 2).
// A step whose uniques all hit (the steady state of a warm table) skips 2 and 3: the find raises the step's
// `pending` flag on a miss, and both passes return at once without it (their launches stay: no host sync).
// The insert pass serves one unique per 8-thread tile: each lane reads 16 digests (one 16-byte load) per round.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/probe_meta.cuh"
#include "dynamicemb/csrc/table/probe.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

namespace cg = cooperative_groups;
constexpr int kTile = 8;
constexpr int kInsBlock = 256;
constexpr int kSharedTables = 64;  // tables counted in shared memory; more go straight to global atomics
using Tile = cg::thread_block_tile<kTile, cg::thread_block>;

using table::claim_free;
using table::home_of;
using table::KeyHome;
using table::ld_key;
using table::match16;
using table::publish_key;
using table::wait_unlocked;

__global__ void begin_step_kernel(const TableMeta* meta, int num_tables) {
  for (int t = threadIdx.x; t < num_tables; t += blockDim.x)
    reinterpret_cast<int64_t*>(meta[t].counters)[table::kCounterClock] += 1;
}

// Writes the initial row [embedding from the initializer | optimizer state fill], score and digest of a claimed
// slot, then publishes the key.
template <int V>
__device__ __forceinline__ void fill_new(const Tile& tile, const TableMeta& m, int64_t slot, uint64_t key,
                                         const KeyHome& h, uint64_t clock, uint64_t score) {
  using T = typename Val<V>::T;
  T* row = meta_row<T>(m, slot);
  const table::Initializer in = train_init(m);
  for (int64_t j = tile.thread_rank(); j < m.row_stride; j += kTile)
    row[j] = Val<V>::from_f(table::init_value(in, clock, key, j));
  if (tile.thread_rank() == 0) {
    reinterpret_cast<uint64_t*>(m.scores)[slot] = score;
    reinterpret_cast<uint8_t*>(m.digests)[slot] = static_cast<uint8_t>(h.d4);
  }
  tile.sync();
  if (tile.thread_rank() == 0) publish_key(reinterpret_cast<void*>(m.keys), slot, key);
}

// Pass 2 (train): insert the pending uniques.
template <int V>
__global__ void __launch_bounds__(kInsBlock, 1) insert_kernel(InsertParams p) {
  if (p.pdl) accel::griddep_launch_dependents();
  if (*p.pending == 0) return;  // no unique missed in the find (block-uniform)
  __shared__ unsigned long long s_inserted[kSharedTables];
  for (int t = threadIdx.x; t < kSharedTables; t += blockDim.x) s_inserted[t] = 0;
  __syncthreads();
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const bool lead = tile.thread_rank() == 0;
  const int64_t count = *p.count;
  const int64_t tiles = static_cast<int64_t>(gridDim.x) * (kInsBlock / kTile);
  const uint32_t e4 = 0x01010101u * table::empty_digest();
  for (int64_t u = (static_cast<int64_t>(blockIdx.x) * kInsBlock + threadIdx.x) / kTile; u < count; u += tiles) {
    if (p.urow[u] != kUrowPending) continue;  // tile-uniform
    const uint64_t key = p.ukeys[u];
    const int t = p.utables[u];
    const TableMeta& m = p.meta[t];
    const KeyHome h = home_of(m, key);
    uint64_t* keys = reinterpret_cast<uint64_t*>(m.keys);
    const uint8_t* digests = reinterpret_cast<const uint8_t*>(m.digests);
    const int B = static_cast<int>(m.bucket_capacity);
    const int chunks = B / 16;
    const uint64_t clock = static_cast<uint64_t>(__ldcg(reinterpret_cast<const long long*>(m.counters)));
    const uint64_t score = step_score(m, clock, false, 0);
    int64_t slot = -1;
    bool inserted = false;
    // free-slot candidates (digest == empty digest), claimed in probe order; a hybrid table's HBM slots (each
    // bucket's first hbm_slots) before its host slots, as table::next_free_candidate does (table::claim_position)
    const int hs = m.values_host != 0 ? static_cast<int>(m.hbm_slots) : B;
    const bool ff = table::host_first_fit(m.values_host != 0, m.host_run);
    uint32_t free_mask[2] = {0u, 0u};  // rounds of kTile chunks (bucket_capacity <= 256)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int c = r * kTile + static_cast<int>(tile.thread_rank());
      if (c < chunks) free_mask[r] = match16(__ldcg(reinterpret_cast<const uint4*>(digests + h.base) + c), e4);
    }
    while (true) {
      int best = 2 * B, best_r = 0, best_i = 0;  // rotated distance, + B for a host slot
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t mk = free_mask[r];
        const int c = r * kTile + static_cast<int>(tile.thread_rank());
        while (mk) {
          const int i = __ffs(mk) - 1;
          mk &= mk - 1;
          const int pos = c * 16 + i;
          const int dist = pos >= hs ? B + (ff ? pos : (pos - h.start) & (B - 1)) : (pos - h.start) & (B - 1);
          if (dist < best) { best = dist; best_r = r; best_i = i; }
        }
      }
      const int win = cg::reduce(tile, (best << 8) | static_cast<int>(tile.thread_rank()), cg::less<int>());
      if ((win >> 8) >= 2 * B) break;
      if ((win & 0xff) == static_cast<int>(tile.thread_rank())) free_mask[best_r] &= ~(1u << best_i);
      const int64_t cand = h.base + table::claim_position(win >> 8, h.start, B, ff);
      uint64_t seen = 0;
      if (lead) seen = claim_free(keys, cand);
      seen = tile.shfl(seen, 0);
      if (seen == table::kEmptyKey) {
        fill_new<V>(tile, m, cand, key, h, clock, score);
        slot = cand;
        inserted = true;
        break;
      }
    }
    if (slot < 0) {  // full bucket: evict the minimum score under the bucket's lock
      int32_t* lock = reinterpret_cast<int32_t*>(m.locks) + h.bucket;
      if (lead)
        while (!table::try_lock_bucket(lock)) __nanosleep(64);
      tile.sync();
      // The victim: the least (score, digest, key) (table::evicts_before, the table kernels' rule: no slot
      // position, so a hybrid table evicts the key an all-HBM one does). Every key word is read here anyway.
      int64_t free_slot = -1, min_slot = -1;
      uint64_t min_score = ~0ull, min_key = 0;
      uint32_t min_dg = 0;
      for (int s = tile.thread_rank(); s < B; s += kTile) {
        const int64_t q = h.base + s;
        const uint64_t k = wait_unlocked(keys, q);
        if (k == table::kEmptyKey) {
          if (free_slot < 0) free_slot = q;
        } else {
          const uint64_t sc = __ldcg(reinterpret_cast<const unsigned long long*>(m.scores) + q);
          const uint8_t dg = __ldcg(digests + q);
          if (min_slot < 0 || table::evicts_before(sc, dg, k, min_score, static_cast<uint8_t>(min_dg), min_key)) {
            min_score = sc;
            min_dg = dg;
            min_key = k;
            min_slot = q;
          }
        }
      }
#pragma unroll
      for (int o = kTile / 2; o > 0; o >>= 1) {
        const int64_t of = tile.shfl_xor(free_slot, o);
        if (of >= 0 && (free_slot < 0 || of < free_slot)) free_slot = of;
        const uint64_t os = tile.shfl_xor(min_score, o), ok = tile.shfl_xor(min_key, o);
        const uint32_t od = tile.shfl_xor(min_dg, o);
        const int64_t ol = tile.shfl_xor(min_slot, o);
        if (ol >= 0 && (min_slot < 0 || table::evicts_before(os, static_cast<uint8_t>(od), ok, min_score,
                                                             static_cast<uint8_t>(min_dg), min_key))) {
          min_score = os;
          min_dg = od;
          min_key = ok;
          min_slot = ol;
        }
      }
      int64_t victim = -1;
      if (free_slot >= 0) victim = free_slot;
      else if (min_slot >= 0 && score > min_score) victim = min_slot;
      if (victim >= 0) {
        bool claimed = false;
        if (lead) {
          const uint64_t expect = ld_key(keys, victim);
          claimed = !table::is_reserved_key(expect) || expect == table::kEmptyKey
                        ? atomicCAS(reinterpret_cast<unsigned long long*>(keys + victim), expect, table::kLockedKey) ==
                              expect
                        : false;
          if (claimed && expect == table::kEmptyKey) inserted = true;
        }
        claimed = tile.shfl(claimed, 0);
        inserted = tile.shfl(inserted, 0);
        if (claimed) {
          fill_new<V>(tile, m, victim, key, h, clock, score);
          slot = victim;
        }
      }
      tile.sync();
      if (lead) table::unlock_bucket(lock);
    }
    if (lead) {
      p.urow[u] = slot;
      if (inserted) {
        if (t < kSharedTables) atomicAdd(&s_inserted[t], 1ull);
        else atomicAdd(reinterpret_cast<unsigned long long*>(m.counters) + table::kCounterSize, 1ull);
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < kSharedTables && t < p.num_tables; t += blockDim.x)
    if (s_inserted[t])
      atomicAdd(reinterpret_cast<unsigned long long*>(p.meta[t].counters) + table::kCounterSize, s_inserted[t]);
}

// Pass 3 (train): a unique keeps its slot only if the slot holds its key after all inserts; counts refusals.
__global__ void __launch_bounds__(256) resolve_kernel(InsertParams p) {
  if (p.pdl) {
    accel::griddep_launch_dependents();
    accel::griddep_wait();
  }
  // no miss: the insert pass changed no slot (every hit keeps its row) and nothing was refused
  if (*p.pending == 0) return;
  __shared__ unsigned long long s_refused[kSharedTables];
  for (int t = threadIdx.x; t < kSharedTables; t += blockDim.x) s_refused[t] = 0;
  __syncthreads();
  const int64_t count = *p.count;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < count;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t key = p.ukeys[u];
    if (table::is_reserved_key(key)) continue;
    const int t = p.utables[u];
    int64_t slot = p.urow[u];
    if (slot >= 0 && __ldcg(reinterpret_cast<const unsigned long long*>(p.meta[t].keys) + slot) != key) {
      slot = -1;
      p.urow[u] = -1;
    }
    if (slot < 0) {
      if (t < kSharedTables) atomicAdd(&s_refused[t], 1ull);
      else {
        atomicAdd(reinterpret_cast<unsigned long long*>(p.refused) + t, 1ull);
        if (p.refused_total) atomicAdd(reinterpret_cast<unsigned long long*>(p.refused_total) + t, 1ull);
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < kSharedTables && t < p.num_tables; t += blockDim.x)
    if (s_refused[t]) {
      atomicAdd(reinterpret_cast<unsigned long long*>(p.refused) + t, s_refused[t]);
      if (p.refused_total) atomicAdd(reinterpret_cast<unsigned long long*>(p.refused_total) + t, s_refused[t]);
    }
}

// Row address of every id (0: reserved id or no row), so the forward and the backward reach a row in one load.
template <int V>
__global__ void __launch_bounds__(256) row_address_kernel(InsertParams p) {
  using T = typename Val<V>::T;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (i >= p.n_ids) return;
  const int32_t u = p.inverse[i];
  uint64_t a = 0;
  if (u >= 0) {
    const int64_t r = p.urow[u];
    if (r >= 0) {
      const TableMeta& m = p.meta[p.utables[u]];
      a = reinterpret_cast<uint64_t>(meta_row<T>(m, r));
    }
  }
  p.rowp[i] = a;
}

}  // namespace detail

template <int V>
void launch_insert(const InsertParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (p.train && !p.clock_done) {
    detail::begin_step_kernel<<<1, 64, 0, st>>>(p.meta, p.num_tables);
    check_launch("begin step");
  }
  if (p.n == 0) return;
  // grid-stride passes: one resident wave (a second, partial wave of equal-work blocks would double the time)
  const int64_t need = (p.n * detail::kTile + detail::kInsBlock - 1) / detail::kInsBlock;
  // (the find ran in the dedup's number pass: urow holds every unique's slot or kUrowPending)
  static const int ins_per_sm = resident_per_sm(detail::insert_kernel<V>, detail::kInsBlock);
  const int64_t cap_ins = persistent_blocks(ins_per_sm);
  const unsigned grid_ins = static_cast<unsigned>(need < cap_ins ? need : cap_ins);
  const unsigned agrid = blocks_for(p.n_ids, 256);
  if (!p.train) {
    if (p.n_ids > 0) detail::row_address_kernel<V><<<agrid, 256, 0, st>>>(p);
    check_launch("row addresses");
    return;
  }
  detail::insert_kernel<V><<<grid_ins, detail::kInsBlock, 0, st>>>(p);
  check_launch("insert pass");
  const int64_t need2 = (p.n + 255) / 256;
  const int64_t cap2 = persistent_blocks(4);
  launch_maybe_pdl(p.pdl, detail::resolve_kernel, static_cast<unsigned>(need2 < cap2 ? need2 : cap2), 256, st, p);
  check_launch("resolve");
  if (p.n_ids > 0 && p.rowp) detail::row_address_kernel<V><<<agrid, 256, 0, st>>>(p);
  check_launch("row addresses");
}

template void launch_insert<kValueFp16>(const InsertParams&, void*);
template void launch_insert<kValueBf16>(const InsertParams&, void*);
template void launch_insert<kValueFp32>(const InsertParams&, void*);

}  // namespace lookup
}  // namespace dynamicemb
