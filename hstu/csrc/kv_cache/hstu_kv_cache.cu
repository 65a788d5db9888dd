// KVCacheManager.begin_step as one single-block CUDA kernel (+ one grid kernel for a gather plan of more than
// kFoldRows rows; smaller ones are written by the first kernel).
//
// Why one block: the batch is small (B <= 511) and every phase depends on the previous one (lookup -> slots ->
// victims -> pages -> page table), so one block with __syncthreads between phases replaces ~250 launches of the
// torch-ops path. Loops over the user table (up to 64K slots) are strided over the block; the only serial part
// is the LRU selection, one block-wide argmin per user evicted. Deterministic: ties break by slot index (the
// torch path's stable sorts), atomics are only min/or.
//
// Semantics: identical to _kv_cache.py's torch path (the reference; tests/hstu/test_kv_cache.py compares every
// state tensor) for valid cu_seqlens_q (non-decreasing, within [0, total_q]); other values are clamped here.
#include "hstu/csrc/kv_cache/hstu_kv_cache.h"

#include <algorithm>
#include <climits>

#include "common/pdl.cuh"

namespace hstu {
namespace kvcache {
namespace detail {

constexpr uint64_t kNone = ~uint64_t{0};

// Inclusive block scan (sum or max) of one value per thread; every thread gets its prefix and the total.
template <bool kMax>
__device__ int64_t block_scan(int64_t v, int64_t* total, int64_t* buf) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int64_t x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t y = __shfl_up_sync(~0u, x, o);
    if (lane >= o) x = kMax ? max(x, y) : x + y;
  }
  if (lane == 31) buf[w] = x;
  __syncthreads();
  if (w == 0) {
    int64_t t = lane < nw ? buf[lane] : (kMax ? LLONG_MIN : 0);
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t y = __shfl_up_sync(~0u, t, o);
      if (lane >= o) t = kMax ? max(t, y) : t + y;
    }
    if (lane < nw) buf[lane] = t;
  }
  __syncthreads();
  const int64_t res = w > 0 ? (kMax ? max(x, buf[w - 1]) : x + buf[w - 1]) : x;
  *total = buf[nw - 1];
  __syncthreads();
  return res;
}

__device__ uint64_t block_min(uint64_t v, uint64_t* buf) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = min(v, static_cast<uint64_t>(__shfl_xor_sync(~0u, v, o)));
  if (lane == 0) buf[w] = v;
  __syncthreads();
  if (w == 0) {
    uint64_t t = lane < nw ? buf[lane] : kNone;
    for (int o = 16; o > 0; o >>= 1) t = min(t, static_cast<uint64_t>(__shfl_xor_sync(~0u, t, o)));
    if (lane == 0) buf[32] = t;
  }
  __syncthreads();
  const uint64_t r = buf[32];
  __syncthreads();
  return r;
}

// Quotient and remainder of x >= 0 by the page size: a shift and a mask for the powers of 2 (every size in
// PAGE_SIZES), else the 64-bit division (a ~70-instruction subroutine per call: the folded gather plan made 2 per
// row, ~9 rows per thread at batch 1, all on the step's critical path).
struct PageDiv {
  int64_t ps;
  int shift;  // log2(ps) when ps is a power of 2, else -1
  __device__ explicit PageDiv(int64_t page_size) : ps(page_size), shift(-1) {
    if (page_size > 0 && (page_size & (page_size - 1)) == 0) {
      shift = 0;
      while ((int64_t{1} << shift) < page_size) ++shift;
    }
  }
  __device__ __forceinline__ int64_t div(int64_t x) const { return shift >= 0 ? x >> shift : x / ps; }
  __device__ __forceinline__ int64_t mod(int64_t x) const { return shift >= 0 ? x & (ps - 1) : x % ps; }
};

// A found slot and its cached length in one word (lookup), so the length comes with the slot's id and valid flag
// (one dependent round trip less): the lowest slot wins the atomicMin. Lengths outside [0, kLenMask) (never for
// a table this kernel wrote: lengths are at most max_pages_per_user * page_size < 2^39) carry kLenMask, and the
// user's thread reads the length again.
constexpr int kLenBits = 47;  // slots < 2^17 (kMaxUsers + 1)
constexpr uint64_t kLenMask = (uint64_t{1} << kLenBits) - 1;

__device__ __forceinline__ bool bit(const uint32_t* m, int64_t s) { return (m[s >> 5] >> (s & 31)) & 1u; }
__device__ __forceinline__ void set_bit(uint32_t* m, int64_t s) { atomicOr(&m[s >> 5], 1u << (s & 31)); }

// Pages a slot holds (entries < P of its row).
__device__ int64_t pages_held(const int64_t* row, int64_t M, int64_t P) {
  int64_t n = 0;
  for (int64_t c = 0; c < M; ++c) n += row[c] < P;
  return n;
}

// The next least-recently-used slot after key `prev` among valid slots outside `excl_a` / `excl_b`; key =
// last_used * (U + 1) + slot, so ties break by slot index. kNone if there is none.
__device__ uint64_t next_lru(const BeginStepParams& p, const uint32_t* excl_a, const uint32_t* excl_b, uint64_t prev,
                             uint64_t* buf) {
  const int64_t U = p.max_users;
  uint64_t best = kNone;
  for (int64_t s = threadIdx.x; s < U; s += blockDim.x) {
    if (!p.slot_valid[s] || bit(excl_a, s) || (excl_b != nullptr && bit(excl_b, s))) continue;
    const uint64_t key = static_cast<uint64_t>(p.last_used[s]) * static_cast<uint64_t>(U + 1) + s;
    if ((prev == kNone || key > prev) && key < best) best = key;
  }
  return block_min(best, buf);
}

__global__ void __launch_bounds__(kThreads) begin_step_kernel(BeginStepParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int B = p.batch, tid = threadIdx.x, NT = blockDim.x;
  const int64_t U = p.max_users, P = p.num_pages, M = p.max_pages_per_user, ps = p.page_size;
  const PageDiv pd(ps);
  const bool small_table = int64_t{B} * M <= INT_MAX;
  const int64_t words = (U + 1 + 31) / 32;
  // Shared layout: int64 arrays first (alignment), then int32, then the two slot bitmasks.
  int64_t* s_uid = reinterpret_cast<int64_t*>(smem);
  int64_t* s_sorted = s_uid + B;
  int64_t* s_old = s_sorted + B;
  int64_t* s_new = s_old + B;
  int64_t* s_start = s_new + B;
  int64_t* s_cq = s_start + B;       // B + 1, clamped to [0, total_q] and made non-decreasing
  int64_t* s_po = s_cq + (B + 1);    // B + 1
  int64_t* s_cuk = s_po + (B + 1);   // B + 1, cu_seqlens_k (step 9 and the folded gather plan read it here)
  int64_t* s_buf = s_cuk + (B + 1);  // 40 (scans, reductions)
  uint64_t* s_fkey = reinterpret_cast<uint64_t*>(s_buf + 40);  // B: (lowest matching slot, its length)
  // B x M: the batch's page-table rows after the pops (step 7), read by steps 8 and 9 instead of slot_pages
  // (two dependent round trips less); nullptr when they do not fit (begin_step_rows_in_smem).
  int64_t* s_rows = p.rows_in_smem ? reinterpret_cast<int64_t*>(s_fkey + B) : nullptr;
  int32_t* s_sorted_idx = reinterpret_cast<int32_t*>(s_fkey + B + (p.rows_in_smem ? int64_t{B} * M : 0));
  int32_t* s_found = s_sorted_idx + B;
  int32_t* s_dup = s_found + B;
  int32_t* s_slot = s_dup + B;
  int32_t* s_have = s_slot + B;
  int32_t* s_alloc = s_have + B;
  int32_t* s_newslot = s_alloc + B;  // the r-th missing user's slot
  uint32_t* s_inbatch = reinterpret_cast<uint32_t*>(s_newslot + B);  // held by this batch
  uint32_t* s_evict = s_inbatch + words;                             // evicted this step
  __shared__ int32_t s_flags;
  __shared__ int32_t s_pids[kFoldRows / 16];  // the page table, for the folded gather plan (B * M <= this)
  __shared__ int64_t s_clock, s_fc, s_before;
  __shared__ uint64_t s_prev;
  // A kernel launched behind this one with programmatic serialization (the step plan under
  // kernel_options(pdl=True), the serving step's default) may start now; it waits for this grid to complete
  // (griddepcontrol.wait) before reading anything. A no-op for plain launches behind it. With the ready word, only
  // after the barrier below, which follows its reset's fence.
  if (p.ready == nullptr) accel::griddep_launch_dependents();
  // p.early: the reset, its fence and the launch of the dependents by the last thread (a CTA's first
  // launch_dependents counts for it), beside the batch's loads instead of before thread 0's and every thread's first
  // barrier.
  const bool reset_last = p.early && p.ready != nullptr;
  if (reset_last && tid == NT - 1) {
    *p.ready = 0;
    __threadfence();
    accel::griddep_launch_dependents();
  }

  if (tid == 0) {
    if (p.ready != nullptr && !reset_last) {
      *p.ready = 0;
      __threadfence();
    }
    s_flags = 0;
    s_clock = *p.clock;
    s_fc = *p.free_count;
  }
  for (int b = tid; b < B; b += NT) {
    s_uid[b] = p.user_ids[b];
    s_found[b] = INT_MAX;
    s_fkey[b] = kNone;
  }
  // (loaded now, with the batch's ids: step 4 reads it; one entry per thread, B <= NT)
  const int64_t num_append_t = tid < B ? static_cast<int64_t>(p.num_append[tid]) : 0;
  // (p.early: the lookup's first slot per thread loaded now too, one dependent round trip less; nothing in this
  // kernel writes the slot table before step 6)
  const bool hoist = p.early && tid < U;
  const bool h_valid = hoist ? p.slot_valid[tid] : false;
  const int64_t h_user = hoist ? p.slot_user[tid] : 0, h_len = hoist ? p.slot_len[tid] : 0;
  for (int64_t i = tid; i < words; i += NT) s_inbatch[i] = s_evict[i] = 0u;
  {  // cu_seqlens_q, clamped and cummax-ed (paged_kv_layout's rule); one entry per thread (B + 1 <= NT)
    int64_t v = tid <= B ? min(max(static_cast<int64_t>(p.cu_seqlens_q[tid]), int64_t{0}), p.total_q) : 0;
    int64_t tot;
    v = block_scan<true>(v, &tot, s_buf);
    if (tid <= B) s_cq[tid] = v;
  }
  __syncthreads();
  if (p.ready != nullptr && !reset_last) accel::griddep_launch_dependents();

  // 1. Sort the batch's ids (rank sort, ties by position); a later copy of an id is a duplicate (served empty).
  for (int b = tid; b < B; b += NT) {
    const int64_t u = s_uid[b];
    int rank = 0, dup = 0;
    for (int c = 0; c < B; ++c) {
      const int64_t v = s_uid[c];
      rank += v < u || (v == u && c < b);
      dup |= v == u && c < b;
    }
    s_sorted[rank] = u;
    s_sorted_idx[rank] = b;
    s_dup[b] = dup;
    if (dup) atomicOr(&s_flags, kDuplicateUser);
  }
  __syncthreads();

  // 2. Lookup: each valid slot binary-searches its id among the batch's; the lowest matching slot wins.
  for (int64_t s = tid; s < U; s += NT) {
    const bool first = hoist && s == tid;
    const bool valid = first ? h_valid : p.slot_valid[s];
    const int64_t u = first ? h_user : p.slot_user[s];  // (loaded with valid, not after it: one round trip)
    const int64_t len = first ? h_len : p.slot_len[s];
    if (!valid) continue;
    const uint64_t key = (static_cast<uint64_t>(s) << kLenBits) |
                         (len >= 0 && static_cast<uint64_t>(len) < kLenMask ? static_cast<uint64_t>(len) : kLenMask);
    int lo = 0, hi = B;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s_sorted[mid] < u) lo = mid + 1; else hi = mid;
    }
    for (int j = lo; j < B && s_sorted[j] == u; ++j) {
      atomicMin(reinterpret_cast<unsigned long long*>(&s_fkey[s_sorted_idx[j]]), static_cast<unsigned long long>(key));
    }
  }
  __syncthreads();
  int64_t found_len = 0;  // thread b < B: the cached length of its found slot
  if (tid < B && s_fkey[tid] != kNone) {
    const uint64_t key = s_fkey[tid];
    s_found[tid] = static_cast<int32_t>(key >> kLenBits);
    found_len = static_cast<int64_t>(key & kLenMask);
    if (found_len == static_cast<int64_t>(kLenMask)) found_len = p.slot_len[s_found[tid]];
  }

  const bool found_t = tid < B && !s_dup[tid] && s_found[tid] != INT_MAX;
  // The key offsets: each user's cached length (its found slot's, else 0) plus its new tokens; written here, as
  // soon as they are known, for the step plan's block behind this kernel (the ready word).
  {
    const int64_t lk = tid < B ? (found_t ? found_len : 0) + (s_cq[tid + 1] - s_cq[tid]) : 0;
    int64_t tot_k;
    const int64_t incl = block_scan<false>(lk, &tot_k, s_buf);
    if (tid < B) {
      s_cuk[tid + 1] = incl;
      p.cu_seqlens_k[tid + 1] = static_cast<int32_t>(incl);
    }
    if (tid == 0) {
      s_cuk[0] = 0;
      p.cu_seqlens_k[0] = 0;
    }
  }

  // 3. Slots. Found users keep theirs; the r-th missing user (batch order) takes the r-th free slot (index
  // order), then, with eviction on, the least-recently-used valid slots not held by the batch.
  const bool missing_t = tid < B && p.create && !s_dup[tid] && !found_t;
  int64_t n_miss;
  const int64_t miss_rank = block_scan<false>(missing_t, &n_miss, s_buf) - missing_t;
  // (the scan's barriers order every thread's cu_seqlens_k stores before thread 0's release)
  if (tid == 0 && p.ready != nullptr) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p.ready), "r"(1) : "memory");
  }
  if (found_t) set_bit(s_inbatch, s_found[tid]);
  int64_t n_free_taken = 0;
  if (n_miss > 0) {
    const int64_t chunk = (static_cast<int>(U) + NT - 1) / NT, s0 = min(U, tid * chunk), s1 = min(U, s0 + chunk);
    int64_t cnt = 0;
    for (int64_t s = s0; s < s1; ++s) cnt += !p.slot_valid[s];
    int64_t n_free;
    int64_t r = block_scan<false>(cnt, &n_free, s_buf) - cnt;
    for (int64_t s = s0; s < s1 && r < n_miss; ++s)
      if (!p.slot_valid[s]) s_newslot[r++] = static_cast<int32_t>(s);
    n_free_taken = min(n_free, n_miss);
    __syncthreads();  // s_inbatch (found slots) complete
    if (p.evict) {
      uint64_t prev = kNone;
      for (int64_t r2 = n_free_taken; r2 < n_miss; ++r2) {
        const uint64_t key = next_lru(p, s_inbatch, nullptr, prev, reinterpret_cast<uint64_t*>(s_buf));
        if (key == kNone) break;  // cannot happen: max_users >= B
        if (tid == 0) s_newslot[r2] = static_cast<int32_t>(key % static_cast<uint64_t>(U + 1));
        prev = key;
      }
    }
  }
  __syncthreads();
  if (tid < B) {
    int32_t slot = static_cast<int32_t>(U);
    if (found_t) {
      slot = s_found[tid];
    } else if (missing_t) {
      if (miss_rank < n_free_taken) {
        slot = s_newslot[miss_rank];
      } else if (p.evict) {
        slot = s_newslot[miss_rank];
        set_bit(s_evict, slot);  // a valid slot taken over: its user is evicted
      } else {
        atomicOr(&s_flags, kUsersFull);
      }
    } else if (!p.create && !s_dup[tid]) {
      atomicOr(&s_flags, kUnknownUser);
    }
    s_slot[tid] = slot;
    if (slot < U) set_bit(s_inbatch, slot);
  }
  __syncthreads();

  // 4. Pages the appended tokens need.
  int64_t n_alloc_t = 0, victim_pages = 0;
  if (tid < B) {
    const int32_t slot = s_slot[tid];
    const int64_t old = found_t ? found_len : 0;
    int64_t app = max(num_append_t, int64_t{0});
    if (slot == U) app = 0;
    int64_t nl = old + app;
    if (nl > M * ps) {
      atomicOr(&s_flags, kUserTooLong);
      nl = M * ps;
    }
    const int64_t have = pd.div(old + ps - 1), need = pd.div(nl + ps - 1);
    n_alloc_t = need - have;
    s_old[tid] = old;
    s_new[tid] = nl;
    s_have[tid] = static_cast<int32_t>(have);
    s_alloc[tid] = static_cast<int32_t>(n_alloc_t);
    if (missing_t && slot < U && bit(s_evict, slot)) victim_pages = pages_held(p.slot_pages + slot * M, M, P);
  }
  int64_t total;
  const int64_t start_t = block_scan<false>(n_alloc_t, &total, s_buf) - n_alloc_t;
  if (tid < B) s_start[tid] = start_t;
  int64_t vp_total;
  block_scan<false>(victim_pages, &vp_total, s_buf);
  int64_t avail = s_fc + vp_total;

  // 5. Short of pages: evict users outside the batch in LRU order until the free pages cover the need.
  if (p.evict) {
    if (tid == 0) {
      s_before = 0;
      s_prev = kNone;
    }
    __syncthreads();
    while (true) {
      if (avail + s_before >= total) break;
      const uint64_t key = next_lru(p, s_inbatch, s_evict, s_prev, reinterpret_cast<uint64_t*>(s_buf));
      if (key == kNone) break;
      if (tid == 0) {
        const int64_t s = static_cast<int64_t>(key % static_cast<uint64_t>(U + 1));
        set_bit(s_evict, s);
        s_before += pages_held(p.slot_pages + s * M, M, P);
        s_prev = key;
      }
      __syncthreads();
    }
    avail += s_before;
  }
  if (tid == 0 && total > avail) atomicOr(&s_flags, kPoolFull);
  __syncthreads();

  // 6. Push the evicted users' pages on the free stack (slot order, each row's pages in column order) and clear
  // their slots (last_used stays, as in the torch path).
  {
    const int64_t chunk = (static_cast<int>(U) + NT - 1) / NT, s0 = min(U, tid * chunk), s1 = min(U, s0 + chunk);
    int64_t cnt = 0;
    for (int64_t s = s0; s < s1; ++s)
      if (bit(s_evict, s)) cnt += pages_held(p.slot_pages + s * M, M, P);
    int64_t pushed;
    int64_t off = block_scan<false>(cnt, &pushed, s_buf) - cnt + s_fc;
    for (int64_t s = s0; s < s1; ++s) {
      if (!bit(s_evict, s)) continue;
      int64_t* row = p.slot_pages + s * M;
      for (int64_t c = 0; c < M; ++c) {
        if (row[c] < P) p.free_pages[off++] = row[c];
        row[c] = P;
      }
      p.slot_valid[s] = false;
      p.slot_len[s] = 0;
      p.slot_user[s] = -1;
    }
    __syncthreads();
    if (tid == 0) s_fc += pushed;
    __syncthreads();
  }

  // 7. Pop: user b takes stack entries fc - 1 - (start[b] + i), i < n_alloc[b]; past the bottom: the sink page.
  const int64_t fc = s_fc;
  for (int64_t idx = tid; idx < int64_t{B} * M; idx += NT) {
    // (32-bit division where the table fits: U <= 65536 users, B <= 511; the 64-bit one is a subroutine call)
    const int b = small_table ? static_cast<int>(idx) / static_cast<int>(M) : static_cast<int>(idx / M);
    const int64_t i = idx - int64_t{b} * M;
    if (s_rows != nullptr) {  // entry i of b's row: popped (have <= i < have + alloc) or as it was
      const int64_t k = i - s_have[b];
      int64_t val;
      if (k >= 0 && k < s_alloc[b]) {
        const int64_t pos = fc - 1 - (s_start[b] + k);
        val = pos >= 0 ? p.free_pages[pos] : P;
        p.slot_pages[s_slot[b] * M + i] = val;
      } else {
        val = p.slot_pages[s_slot[b] * M + i];
      }
      s_rows[idx] = val;
      continue;
    }
    if (i >= s_alloc[b]) continue;
    const int64_t pos = fc - 1 - (s_start[b] + i);
    p.slot_pages[s_slot[b] * M + s_have[b] + i] = pos >= 0 ? p.free_pages[pos] : P;
  }
  if (tid < B) {  // a user that got fewer pages than it needed keeps only the tokens that fit
    const int64_t got = min(static_cast<int64_t>(s_alloc[tid]), max(fc - s_start[tid], int64_t{0}));
    s_new[tid] = min(s_new[tid], (s_have[tid] + got) * ps);
  }
  {  // page offsets of the cached tokens (compacted)
    const int64_t h = tid < B ? s_have[tid] : 0;
    int64_t tot_pages;
    const int64_t incl = block_scan<false>(h, &tot_pages, s_buf);
    if (tid < B) s_po[tid] = incl - h;
    if (tid == 0) s_po[B] = tot_pages;
  }
  __syncthreads();

  // 8. Outputs: page table, lengths, key offsets.
  for (int64_t e = tid; e < int64_t{B} * M; e += NT) {
    // entry e belongs to the user whose [po[b], po[b] + have[b]) holds it; entries past po[B] are the sink page
    int32_t val = static_cast<int32_t>(P);
    if (e < s_po[B]) {
      int lo = 0, hi = B - 1;  // last b with po[b] <= e
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (s_po[mid] <= e) lo = mid; else hi = mid - 1;
      }
      val = static_cast<int32_t>(s_rows != nullptr ? s_rows[lo * M + (e - s_po[lo])]
                                                   : p.slot_pages[s_slot[lo] * M + (e - s_po[lo])]);
    }
    p.page_ids[e] = val;
    if (p.fold_layout) s_pids[e] = val;
  }
  {
    if (tid < B) {
      const int64_t old = s_old[tid], have = s_have[tid];
      p.page_offsets[tid] = static_cast<int32_t>(s_po[tid]);
      p.slots[tid] = s_slot[tid];
      p.num_append_out[tid] = static_cast<int32_t>(s_new[tid] - old);
      p.last_page_lens[tid] = static_cast<int32_t>(have > 0 ? old - (have - 1) * ps : 0);
      p.cached_lens[tid] = static_cast<int32_t>(old);
    }
    if (tid == 0) p.page_offsets[B] = static_cast<int32_t>(s_po[B]);
  }

  // 9. Where each new token goes: its K row in the cache (append_rows) and in the gathered buffer (dst_new).
  const int64_t capacity = int64_t{B} * M * ps + p.total_q;
  __syncthreads();
  // p.early: the ready word says 2 now (the barrier orders step 8's stores before the release): the step's first
  // attention reads the page table, the lengths and the key offsets, not the rows below (the appends and the gather
  // read those only behind this grid's completion); not with the folded gather plan.
  const bool early_two = p.early && !p.fold_layout && p.ready != nullptr;
  if (tid == 0 && early_two) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p.ready), "r"(2) : "memory");
  }
  for (int64_t t = tid; t < p.total_q; t += NT) {
    int lo = 0, hi = B;  // bt = #{b in 1..B : cq[b] <= t}, clamped to B - 1
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s_cq[mid + 1] <= t) lo = mid + 1; else hi = mid;
    }
    const int bt = min(lo, B - 1);
    const int64_t r = t - s_cq[bt];
    const bool ok = t >= s_cq[0] && r < s_new[bt] - s_old[bt];
    const int64_t sink = P * 2 * ps;
    int64_t row = sink;
    if (ok) {
      const int64_t pos = s_old[bt] + r;
      const int64_t c = min(pd.div(pos), M - 1);
      row = (s_rows != nullptr ? s_rows[bt * M + c] : p.slot_pages[s_slot[bt] * M + c]) * 2 * ps +
            pd.mod(pos);  // (pos >= 0)
    }
    // Tokens that are not appended (and those past a full pool) land on the sink page, token t on its row
    // t % page_size (_kv_cache._spread_sink: same-row stores would serialize on the index_copy_ path).
    p.append_rows[t] = row >= sink ? sink + pd.mod(t) : row;
    const bool inside = t >= s_cq[0] && t < s_cq[B];
    p.dst_new[t] = inside ? static_cast<int32_t>(s_cuk[bt]) + s_old[bt] + r : capacity;
  }
  // The gather plan (layout_kernel's rows), here when it is small: one launch less per step.
  if (p.fold_layout) {
    const int64_t n_entries = int64_t{B} * M, rows = capacity + 1;
    for (int64_t q = tid; q < rows; q += NT) {
      int lo = 0, hi = B;  // b = #{b in 1..B : cu_k[b] <= q}, clamped to B - 1
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (static_cast<int32_t>(s_cuk[mid + 1]) <= q) lo = mid + 1; else hi = mid;
      }
      const int b = min(lo, B - 1);
      const int64_t j = q - static_cast<int32_t>(s_cuk[b]);
      int64_t k_row = 0;
      if (j >= 0 && j < static_cast<int32_t>(s_old[b])) {
        const int64_t e = min(max(static_cast<int32_t>(s_po[b]) + pd.div(j), int64_t{0}), n_entries - 1);
        const int64_t page = min(max(static_cast<int64_t>(s_pids[e]), int64_t{0}), P);
        k_row = page * 2 * ps + pd.mod(j);  // (j >= 0)
      }
      p.src_rows[2 * q] = k_row;
      p.src_rows[2 * q + 1] = k_row + ps;
    }
  }
  __syncthreads();
  // (the barrier orders every thread's stores of the step's tensors before thread 0's release)
  if (tid == 0 && p.ready != nullptr && !early_two) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p.ready), "r"(2) : "memory");
  }

  // 10. Table updates: ids, lengths after the append, clock; then the sink slot is reset (except last_used).
  if (tid < B) {
    const int32_t slot = s_slot[tid];
    p.slot_user[slot] = s_uid[tid];
    p.slot_valid[slot] = true;
    p.slot_len[slot] = s_new[tid];
    p.last_used[slot] = s_clock + 1;
  }
  __syncthreads();
  for (int64_t c = tid; c < M; c += NT) p.slot_pages[U * M + c] = P;
  if (tid == 0) {
    p.slot_valid[U] = false;
    p.slot_len[U] = 0;
    p.slot_user[U] = -1;
    *p.clock = s_clock + 1;
    *p.free_count = s_fc - min(total, s_fc);
    *p.error_flags |= s_flags;
    *p.layout_flags = 0;
  }
}

// The gather plan: row q of the gathered K/V buffer reads cache row src (K) and src + page_size (V); rows that
// are not cached keys read row 0 (they are overwritten by a new token or lie past the keys).
__global__ void __launch_bounds__(256) layout_kernel(BeginStepParams p) {
  const int B = p.batch;
  const int64_t ps = p.page_size, n_entries = int64_t{B} * p.max_pages_per_user;
  const PageDiv pd(ps);
  const int64_t rows = int64_t{B} * p.max_pages_per_user * ps + p.total_q + 1;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < rows; q += int64_t{gridDim.x} * blockDim.x) {
    int lo = 0, hi = B;  // b = #{b in 1..B : cu_k[b] <= q}, clamped to B - 1
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (p.cu_seqlens_k[mid + 1] <= q) lo = mid + 1; else hi = mid;
    }
    const int b = min(lo, B - 1);
    const int64_t j = q - p.cu_seqlens_k[b];
    int64_t k_row = 0;
    if (j >= 0 && j < p.cached_lens[b]) {
      const int64_t e = min(max(p.page_offsets[b] + pd.div(j), int64_t{0}), n_entries - 1);
      const int64_t page = min(max(static_cast<int64_t>(p.page_ids[e]), int64_t{0}), p.num_pages);
      k_row = page * 2 * ps + pd.mod(j);  // (j >= 0)
    }
    p.src_rows[2 * q] = k_row;
    p.src_rows[2 * q + 1] = k_row + ps;
  }
}

}  // namespace detail

bool begin_step_rows_in_smem(int batch, int64_t max_pages_per_user) {
  return int64_t{batch} * max_pages_per_user <= kRowsInSmem;
}

size_t begin_step_smem_bytes(int batch, int64_t max_users, int64_t max_pages_per_user) {
  const size_t B = static_cast<size_t>(batch), words = static_cast<size_t>((max_users + 1 + 31) / 32);
  const size_t rows = begin_step_rows_in_smem(batch, max_pages_per_user) ? B * max_pages_per_user : 0;
  return sizeof(int64_t) * (6 * B + 3 * (B + 1) + 40 + rows) + sizeof(int32_t) * 7 * B +
         sizeof(uint32_t) * 2 * words;
}

cudaError_t launch_begin_step(const BeginStepParams& p, cudaStream_t stream) {
  if (p.batch < 1 || p.batch > kMaxBatch || p.max_users < p.batch || p.max_users > kMaxUsers) {
    return cudaErrorInvalidValue;
  }
  const size_t smem = begin_step_smem_bytes(p.batch, p.max_users, p.max_pages_per_user);
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(detail::begin_step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  const int64_t rows = int64_t{p.batch} * p.max_pages_per_user * p.page_size + p.total_q + 1;
  BeginStepParams q = p;
  q.rows_in_smem = begin_step_rows_in_smem(p.batch, p.max_pages_per_user);
  q.fold_layout =
      p.gather_plan && rows <= kFoldRows && int64_t{p.batch} * p.max_pages_per_user <= kFoldRows / 16;
  detail::begin_step_kernel<<<1, kThreads, smem, stream>>>(q);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || q.fold_layout || !p.gather_plan) return e;
  const int64_t blocks = std::min<int64_t>((rows + 255) / 256, 1024);
  detail::layout_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcache
}  // namespace hstu
