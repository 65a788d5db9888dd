// HSTU attention forward for Hopper (sm_90a): O = (SiLU(alpha * (Q K^T + rab)) masked) V / scaling_seqlen.
//
// Warp-specialized: warpgroup 0 is the producer (one thread issues TMA loads of Q once and of K/V tiles into a
// 2-stage mbarrier pipeline, setmaxnreg 40), warpgroups 1 and 2 are consumers (64 query rows each, 128 per CTA,
// setmaxnreg 232). Per KV tile a consumer computes S = Q K^T with wgmma (both operands in smem, 128B-swizzled,
// K-major), applies SiLU + mask in registers, rounds P to the input dtype and computes O += P V with wgmma (P from
// registers, V from smem as an MN-major operand). The SiLU of tile i runs while the P V wgmma of tile i-1 is in
// flight (S of tile i is issued before P V of tile i-1).
//
// Jagged sequences: one tensor map over the whole (total_tokens, H, D) tensor, tiles addressed by the sequence's
// first token + tile offset. Keys past the sequence end (next sequence, or zero-filled past the tensor) are masked
// to P = 0 by the element mask (select, not multiply), and the V rows past the used keys of the boundary tile are
// zeroed in smem before P V, so non-finite garbage there (seqused) cannot turn 0 * x into NaN. Fully masked KV
// tiles are never loaded (SeqMask::key_tiles: outside the range, and the gap of other groups' targets between the
// history and a tile of targets' own group); query tiles are launched heaviest (last) first.
//
// Persistent (kQB = 2, D <= 128 grids of more than one wave): one CTA per SM takes query tiles from a global counter
// in the grid's order; the next tile's Q and first K / V tiles load under the current tile's GEMMs and epilogue.
//
// Paged K/V (pk.pool set, hstu_fwd_sm90_paged.h; not the persistent or rab kernels): the full barriers count 128
// arrivals, one per producer thread. A tile of cached keys only is TMA-loaded page segment by page segment (a map over
// the pool's rows, box min(page_size, BN) rows; pages and tiles are both aligned powers of 2), a tile of new tokens
// only from the new tokens' map (lane 0 expects the bytes, the other threads arrive); the one tile of a sequence
// that holds both is copied by the whole producer warpgroup with 16-byte cp.async, row by row, into the swizzled
// layout the TMA writes (each thread waits for its copies, fences the proxies, then arrives). The consumers are
// unchanged.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_paged.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_split.cuh"
#include "hstu/csrc/sm90/hstu_fwd_sm90_tiles.cuh"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"

namespace hstu {
namespace sm90 {

// QBUFS: 0 = one query tile per CTA (grid order or work list), 2 = persistent CTAs with two Q buffers (the next
// tile's Q loads under the current tile; the epilogue stages O in the current one).
template <int D, int STAGES = 2, int QBUFS = 0>
struct FwdSm90Traits {
  static constexpr int kBlockM = 128;                  // 2 consumer warpgroups x 64 rows
  static constexpr int kBlockN = D == 256 ? 64 : 128;  // keys per KV tile
  static constexpr int kStages = STAGES;  // K/V pipeline depth (3 fits in smem for D <= 128)
  static constexpr int kQBufs = QBUFS > 0 ? QBUFS : 1;
  static constexpr int kPanels = D / 64;  // 64-element (128-byte) column panels per row (TMA box width)
  static constexpr int kQPanelBytes = kBlockM * 128;
  static constexpr int kKVPanelBytes = kBlockN * 128;
  static constexpr int kQBytes = kBlockM * D * 2;  // one Q buffer
  static constexpr int kTileBytes = kBlockN * D * 2;  // one K or one V tile
  static constexpr int kBarOffset = kQBufs * kQBytes + 2 * kStages * kTileBytes;
  // Persistent: 3 more mbarriers at 128-151 (Q full 1, Q empty 0 / 1), then one FwdTile per Q buffer.
  static constexpr int kSlotOffset = 160;
  // + mbarriers (+ persistent slots) + slack to align the base to 1024 bytes
  static constexpr int kSmem = kBarOffset + (QBUFS > 0 ? kSlotOffset + QBUFS * 128 : 128) + 1024;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  static_assert(D % 64 == 0, "head dim must be a multiple of 64");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 65536, "register budget");
  static_assert(8 + 32 * kStages <= 104, "barrier offsets 104-123 (parked gaps and counts, split flag) must stay free");
  static_assert(kSmem <= 232448, "shared memory opt-in limit");
};

__device__ __forceinline__ uint32_t fwd_gap_word(int gap_end, int gap_len) {
  return static_cast<uint32_t>(gap_end) | (static_cast<uint32_t>(gap_len) << 16);
}
// Tiles [t_lo, t_hi) of the visited ones in ascending order (a work-list item's chunk): the range and gap become
// the chunk's (its gap_len 0 unless it has tiles on both sides of the gap).
__device__ __forceinline__ void fwd_kv_chunk(int t_lo, int t_hi, int& nb_begin, int& nb_end, int& gap_end,
                                             int& gap_len) {
  const int gap_begin = gap_end - gap_len;
  auto tile = [&](int c) { return nb_begin + c + (nb_begin + c >= gap_begin ? gap_len : 0); };
  const int lo = tile(t_lo), hi = tile(t_hi - 1) + 1;
  nb_begin = lo;
  nb_end = hi;
  if (!(lo < gap_begin && hi > gap_end)) gap_len = 0;
}
// Visited tiles of [nb_begin, nb_end) less the gap at or above tile x (nb_begin <= x <= nb_end).
__device__ __forceinline__ int fwd_kv_count_from(int nb_end, int gap_end, int gap_len, int x) {
  return nb_end - x - max(0, gap_end - max(x, gap_end - gap_len));
}

// The forward's named configurations (the plan picks one per call: FwdPlan::persistent).
// FwdSm90Tile: one CTA per query tile (grid order or work list); K/V pipeline as deep as smem allows.
struct FwdSm90Tile {
  static constexpr bool kPersistent = false;
  static constexpr int stages(int d) { return d <= 128 ? 3 : 2; }
};
// FwdSm90Persistent (D <= 128 grids of more than one wave): persistent CTAs, two Q buffers, two K/V stages.
struct FwdSm90Persistent {
  static constexpr bool kPersistent = true;
  static constexpr int stages(int) { return 2; }
};

// A paged forward over a plan made before (pk.status set: the plan's validation status word): after a violation
// the plan's lengths are all empty, so every CTA ends here without work and fills its share of `out` with NaN (what
// the validation does for a call that validates itself). Called by all threads of a CTA that has no work.
template <typename T>
__device__ __forceinline__ void paged_poison_if_invalid(const HstuParams& p, const Sm90PagedKV& pk) {
  if (pk.status == nullptr || *pk.status == 0) return;
  const uint16_t nan = std::is_same_v<T, __half> ? 0x7E00 : 0x7FC0;
  const int64_t n = static_cast<int64_t>(p.total_q) * p.heads * p.head_dim;  // (out is fresh and contiguous)
  const int64_t ctas = static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t cta =
      blockIdx.x + static_cast<int64_t>(gridDim.x) * (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
  uint16_t* o = static_cast<uint16_t*>(p.out);
  for (int64_t i = cta * blockDim.x + threadIdx.x; i < n; i += ctas * blockDim.x) o[i] = nan;
}

// A work-list CTA's wait for the kernel before (pk.pdl = 2: after its pre-wait reads), then the launch of the kernel
// after: after the wait, so that kernel's pre-wait part still sees every kernel before this one complete.
__device__ __forceinline__ void fwd_early_wait() {
  accel::griddep_wait();
  accel::griddep_launch_dependents();
}

// Both consumer warpgroups overlap the SiLU of tile i with the P V wgmma of tile i-1 and take turns issuing their
// wgmmas (pingpong, named barriers 4/5), so one's SiLU runs under the other's GEMMs.
// head_major: grid (m_blocks, H, B) with the query tiles of one (b, h) adjacent, so concurrently running CTAs share
// K/V in L2; else grid (B * H, m_blocks), the heaviest tiles of all heads first.
// kRab: S += rab before the SiLU. Each consumer thread loads its own accumulator elements of the rab tile from
// global memory (read-only path, any strides; adjacent key pairs as one 32-bit load where 4-byte aligned), issued
// right after the S / P V wgmmas of the tile so the loads fly under them.
// kSched: items from the jagged work list (hstu_sm90_work_list.cuh) instead of the grid's order.
// Persistent (kQB = 2): one CTA per SM at most. The producer thread takes query
// tiles of the head-major order (m_block reversed, h, b) from a global counter (p.fwd_tile_counter, zeroed by the
// launcher; CTA x starts with tile x), so the tiles run in the grid's order and a CTA that drew a heavy causal tile
// draws its next one later. It publishes each tile (its sequence, KV range) in a shared-memory slot beside one of
// the kQB Q buffers, read by the consumers once that buffer's Q has landed; a tile of h = -1 ends the CTA. The K/V
// pipeline runs on across tiles, so the next tile's Q and first K/V tiles load under the current tile's last GEMMs
// and epilogue (which stages O in its own Q buffer and then frees it).
template <typename T, int D, class Config, bool kRab, bool kSched>
__global__ void __launch_bounds__(384, 1)
    hstu_fwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const HstuParams p, const int head_major,
                         const SchedArgs sched, const Sm90PagedKV pk, const __grid_constant__ CUtensorMap tm_pool) {
  constexpr int kStagesT = Config::stages(D);
  constexpr int kQB = Config::kPersistent ? 2 : 0;
  static_assert(kQB == 0 || !kSched, "persistent CTAs: grid order");
  using C = FwdSm90Traits<D, kStagesT, kQB>;
  constexpr bool kPersist = kQB > 0;
  // Per-warpgroup KV ranges (skip the tiles that are P = 0 for all 64 rows of a warpgroup): work-list kernel only
  // (the grid-order kernel's code stays as measured for dense lengths).
  constexpr bool kWgSkip = kSched;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  // Phase stamps (fwd_trace_put): 0 start, 1 item read (pk.pdl = 2: the wait's return), 2 barriers set up, 3 Q
  // issued, 4 first K / V issued, 5 all issued, 6 consumers started, 7 Q landed, 8 first K landed, 9 first tile's P
  // ready, 10 main loop done, 11-13 the split sum (hstu_fwd_sm90_split.cuh), 14 end; 15 info (SM | tiles << 8 | head
  // << 24), 16 / 18 clock64 at 0 / 10, 17 b | m_block << 16 | t_lo << 32 | t_hi << 48 (the chunk's visited tiles).
  // (the paged kernels only: not with rab, whose D = 64 work-list kernel spilled with the stamps)
  constexpr bool kTrace = kSched && !kRab && D <= 128;
  unsigned long long* const trace = kTrace ? pk.trace : nullptr;
  if (kTrace && threadIdx.x == 0 && trace != nullptr) {
    fwd_trace_put(trace, 0, fwd_now());
    fwd_trace_put(trace, 16, clock64());
  }

  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  // Q buffer qb at base + qb * kQBytes, then the K and V stages (stage s at + s * kTileBytes)
  const uint32_t sK = base + C::kQBufs * C::kQBytes;
  const uint32_t sV = sK + S * C::kTileBytes;
  const uint32_t bar = base + C::kBarOffset;
  auto bar_q = [&](int qb) { return qb == 0 ? bar : bar + 128u; };
  auto bar_q_empty = [&](int qb) { return bar + 136u + 8u * qb; };  // persistent: one arrive per consumer warp
  auto bar_full_k = [&](int s) { return bar + 8u + 8u * s; };
  auto bar_full_v = [&](int s) { return bar + 8u + 8u * (S + s); };
  auto bar_empty_k = [&](int s) { return bar + 8u + 8u * (2 * S + s); };
  auto bar_empty_v = [&](int s) { return bar + 8u + 8u * (3 * S + s); };
  // Persistent: the tile published with Q buffer qb.
  auto slot_addr = [&](int qb) { return bar + C::kSlotOffset + qb * static_cast<uint32_t>(sizeof(FwdTile)); };
  auto tile_slot = [&](int qb) {
    return reinterpret_cast<FwdTile*>(smem_raw + (slot_addr(qb) - smem_addr(smem_raw)));
  };

  // Programmatic dependent launch (paged, pk.pdl): before the wait for the previous kernel only what needs the
  // kernel's arguments alone (the tensor-map prefetch); no global memory is read before it (pk.pdl = 2: below,
  // the step's tables that the previous kernel cannot be writing). The work list's CTAs
  // wait in sched_cta_work, the grid order's here. After its wait a CTA lets the next kernel launch (its CTAs take
  // the SMs this grid leaves free and wait for this grid in turn), so that kernel's pre-wait part still sees every
  // kernel before this one complete.
  if constexpr (!Config::kPersistent && !kRab) {
    if (pk.pdl != 0) {
      if (D <= 128 && threadIdx.x == 0) {  // (D = 256: the list kernel spilled with it; prefetched later)
        prefetch_tensormap(&tm_q);
        prefetch_tensormap(&tm_k);
        prefetch_tensormap(&tm_v);
        prefetch_tensormap(&tm_pool);
      }
      if constexpr (!kSched) {
        accel::griddep_wait();
        accel::griddep_launch_dependents();
      }
    }
  }

  // pk.pdl = 2 (a serving step's layer after its first): the plan and the page table were complete before the
  // kernel before this one started (the step's first layer waited for them, then let its dependents launch), so
  // the CTA reads its work item and its sequence's lengths before its wait, which then waits only for the layer
  // before (it writes none of them); writes, the split counters, the page entries and q / k / v follow the wait.
  // (D <= 128, as the stamps.)
  const bool early = kSched && !Config::kPersistent && !kRab && D <= 128 && pk.pdl == 2;
  int h = 0, b = 0, m_block = 0, nb_begin = 0, nb_end = 0, gap_end = 0, gap_len = 0;
  int t_lo = 0, t_hi = 0;
  int4 split = make_int4(-1, 0, 0, 0);
  int together = 0;
  if constexpr (kSched) {  // work list (jagged)
    int4 it;
    if (!sched_cta_work<true>(sched, p.heads, it, h, !Config::kPersistent && !kRab && pk.pdl != 0, &split,
                              &together, !early)) {
      if (early) fwd_early_wait();
      if (threadIdx.x == 0 && trace != nullptr) fwd_trace_put(trace, 1, fwd_now());
      paged_poison_if_invalid<T>(p, pk);
      if (threadIdx.x == 0 && trace != nullptr) fwd_trace_put(trace, 14, fwd_now());
      return;
    }
    if (!early) {
      if (threadIdx.x == 0 && trace != nullptr) fwd_trace_put(trace, 1, fwd_now());
      // A split unit's chunk counts itself as running (hstu_fwd_sm90_split.cuh; a reduction, nothing waits on it).
      if (threadIdx.x == 0) fwd_split_started(sched, p.heads, h, split, together);
    }
    b = it.x;
    m_block = it.y;
    t_lo = it.z;  // this chunk's KV tiles: positions among the query tile's visited ones
    t_hi = it.w;
  } else if (kPersist) {
    // (the producer takes the tiles, the consumers read them from shared memory)
  } else if (head_major) {
    m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) query tiles of each (b, h) first
    h = blockIdx.y;
    b = blockIdx.z;
  } else {
    h = blockIdx.x % p.heads;
    b = blockIdx.x / p.heads;
    m_block = gridDim.y - 1 - blockIdx.y;  // heaviest (causal) query tiles of all heads first
  }
  constexpr bool kPagedOk = !kPersist && !kRab;  // (with rab the kernels' registers have no room: ptxas spilled)
  // Paged: the sequence's cached length and page-table base load with seq_info's words (one round trip, not one
  // after the barriers below).
  int pg_cached = 0, pg_po = 0;
  if constexpr (kPagedOk) {
    if (pk.pool != nullptr && threadIdx.x < 128) {
      pg_cached = pk.cached_lens[b];
      pg_po = pk.page_offsets[b];
    }
  }
  SeqInfo si = seq_info(p, b);
  int m0 = m_block * BM;
  if (!kPersist && m0 >= si.lq_alloc) {
    if (early) fwd_early_wait();
    if constexpr (!kPersist && !kRab) paged_poison_if_invalid<T>(p, pk);
    return;
  }
  if constexpr (!kPersist) {
    fwd_kv_tiles<BM, BN>(si, m0, nb_begin, nb_end, gap_end, gap_len);
    if constexpr (kSched) fwd_kv_chunk(t_lo, t_hi, nb_begin, nb_end, gap_end, gap_len);
  }
  int n_tiles = fwd_kv_count(nb_begin, nb_end, gap_len);
  const bool paged = kPagedOk && pk.pool != nullptr;

  const int tid = threadIdx.x;
  if (tid == 0) fwd_init_barriers<S, kPersist>(bar, 128u, paged ? 128 : 1);  // paged: one arrive per producer thread
  __syncthreads();
  if (early) {
    fwd_early_wait();
    if (tid == 0 && trace != nullptr) fwd_trace_put(trace, 1, fwd_now());
    if (tid == 0) fwd_split_started(sched, p.heads, h, split, together);
  }
  if (tid == 0 && trace != nullptr) {
    fwd_trace_put(trace, 2, fwd_now());
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
    fwd_trace_put(trace, 15, smid | (static_cast<uint64_t>(n_tiles) << 8) | (static_cast<uint64_t>(h) << 24));
    fwd_trace_put(trace, 17, static_cast<uint64_t>(b) | (static_cast<uint64_t>(m_block) << 16) |
                                 (static_cast<uint64_t>(t_lo) << 32) | (static_cast<uint64_t>(t_hi) << 48));
  }

  if (tid < 128) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<C::kProducerRegs>();
    if constexpr (kPagedOk) {
      if (paged && n_tiles > 0) {
        if (tid == 0) {
          prefetch_tensormap(&tm_q);
          prefetch_tensormap(&tm_k);
          prefetch_tensormap(&tm_v);
          prefetch_tensormap(&tm_pool);
          mbar_arrive_expect_tx(bar_q(0), C::kQBytes);
#pragma unroll
          for (int pn = 0; pn < C::kPanels; ++pn) {
            tma_load_3d(base + pn * C::kQPanelBytes, &tm_q, bar_q(0), pn * 64, h, si.q_start + m0);
          }
          if (trace != nullptr) fwd_trace_put(trace, 3, fwd_now());
        }
        // Thread tid copies 16-byte chunk tid % kChunks of rows tid / kChunks + k * kRowsPass of each K and V tile.
        constexpr int kChunks = D / 8;
        constexpr int kRowsPass = 128 / kChunks;
        const int c = tid % kChunks;
        const int cached = min(max(pg_cached, 0), si.lk);
        const int po = pg_po;
        const int ps_mask = (1 << pk.page_shift) - 1;
        const int64_t hd = int64_t{p.heads} * D;  // pool row stride (elements)
        const T* pool = static_cast<const T*>(pk.pool) + h * D + c * 8;
        const T* kn = static_cast<const T*>(p.k) + h * p.k_head_stride + c * 8;
        const T* vn = static_cast<const T*>(p.v) + h * p.v_head_stride + c * 8;
        for (int i = 0; i < n_tiles; ++i) {
          const int s = i % S;
          const uint32_t ph = (i / S) & 1;
          mbar_wait(bar_empty_k(s), ph ^ 1);
          mbar_wait(bar_empty_v(s), ph ^ 1);
          const int j0 = fwd_kv_tile(nb_end, gap_end, gap_len, i) * BN;
          if (j0 + BN <= cached || j0 >= cached) {
            // A tile of cached keys only (BN / box whole page segments) or of new tokens only: TMA loads issued by
            // lane 0 of warp 0 (its lanes look the pages up), the other 127 threads arrive.
            if (tid < 32) {
              const bool pages = j0 < cached;
              const int box = 1 << pk.box_shift, nseg = BN >> pk.box_shift;
              int row = 0;  // lane k: the pool row of segment k (K; V is page_size rows further)
              if (pages && tid < nseg) {
                const int j = j0 + tid * box;
                const int e = min(max(po + (j >> pk.page_shift), 0), pk.n_entries - 1);
                const int page = min(max(__ldg(pk.page_ids + e), 0), pk.num_pages - 1);
                row = (page << (pk.page_shift + 1)) + (j & ps_mask);
              }
              if (tid == 0) {
                mbar_arrive_expect_tx(bar_full_k(s), C::kTileBytes);
                mbar_arrive_expect_tx(bar_full_v(s), C::kTileBytes);
              }
              for (int k = 0; k < (pages ? nseg : 1); ++k) {
                const int rk = __shfl_sync(0xffffffffu, row, k);
                if (tid == 0) {
#pragma unroll
                  for (int pn = 0; pn < C::kPanels; ++pn) {
                    const uint32_t off = pn * C::kKVPanelBytes + (k * box) * 128;
                    if (pages) {
                      tma_load_3d(sK + s * C::kTileBytes + off, &tm_pool, bar_full_k(s), pn * 64, h, rk);
                      tma_load_3d(sV + s * C::kTileBytes + off, &tm_pool, bar_full_v(s), pn * 64, h, rk + ps_mask + 1);
                    } else {
                      const int rn = si.q_start + j0 - cached;
                      tma_load_3d(sK + s * C::kTileBytes + off, &tm_k, bar_full_k(s), pn * 64, h, rn);
                      tma_load_3d(sV + s * C::kTileBytes + off, &tm_v, bar_full_v(s), pn * 64, h, rn);
                    }
                  }
                }
              }
              if (tid != 0) {
                mbar_arrive(bar_full_k(s));
                mbar_arrive(bar_full_v(s));
              } else if (i == 0 && trace != nullptr) {
                fwd_trace_put(trace, 4, fwd_now());
              }
            } else {
              mbar_arrive(bar_full_k(s));
              mbar_arrive(bar_full_v(s));
            }
            continue;
          }
          // The tile holding the last cached keys and the first new ones: 16-byte cp.async by all 128 threads.
          for (int r = tid / kChunks; r < BN; r += kRowsPass) {
            const int j = j0 + r;
            if (j >= si.lk) break;  // rows past the keys stay as they are (masked; V zeroed by the consumers)
            const T* src_k;
            const T* src_v;
            if (j < cached) {  // (entry and page clamped: never out of bounds, whatever the table holds)
              const int e = min(max(po + (j >> pk.page_shift), 0), pk.n_entries - 1);
              const int64_t page = min(max(__ldg(pk.page_ids + e), 0), pk.num_pages - 1);
              src_k = pool + ((page << (pk.page_shift + 1)) + (j & ps_mask)) * hd;
              src_v = src_k + (int64_t{ps_mask} + 1) * hd;
            } else {
              const int64_t row = min(max(si.q_start + j - cached, 0), static_cast<int>(p.total_q) - 1);
              src_k = kn + row * p.k_row_stride;
              src_v = vn + row * p.v_row_stride;
            }
            const uint32_t off = (c / 8) * C::kKVPanelBytes + r * 128 + (((c % 8) ^ (r % 8)) << 4);
            cp_async_16(sK + s * C::kTileBytes + off, src_k);
            cp_async_16(sV + s * C::kTileBytes + off, src_v);
          }
          // The copies land, then a proxy fence orders these generic-proxy writes before the consumers' wgmma
          // reads (async proxy), then the arrives release them (one tile per sequence waits here).
          cp_async_commit();
          cp_async_wait<0>();
          fence_proxy_async_smem();
          mbar_arrive(bar_full_k(s));
          mbar_arrive(bar_full_v(s));
        }
        if (tid == 0 && trace != nullptr) fwd_trace_put(trace, 5, fwd_now());
      }
    }
    if (tid == 0 && !paged && (kPersist || n_tiles > 0)) {
      prefetch_tensormap(&tm_q);
      prefetch_tensormap(&tm_k);
      prefetch_tensormap(&tm_v);
      auto load_q = [&](int qb) {
        mbar_arrive_expect_tx(bar_q(qb), C::kQBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(base + qb * C::kQBytes + pn * C::kQPanelBytes, &tm_q, bar_q(qb), pn * 64, h,
                      si.q_start + m0);
        }
      };
      auto load_kv = [&](int it, int row) {  // it: K / V tiles loaded before this one
        const int s = it % S;
        const uint32_t ph = (it / S) & 1;
        mbar_wait(bar_empty_k(s), ph ^ 1);
        mbar_arrive_expect_tx(bar_full_k(s), C::kTileBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(sK + s * C::kTileBytes + pn * C::kKVPanelBytes, &tm_k, bar_full_k(s), pn * 64, h, row);
        }
        mbar_wait(bar_empty_v(s), ph ^ 1);
        mbar_arrive_expect_tx(bar_full_v(s), C::kTileBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(sV + s * C::kTileBytes + pn * C::kKVPanelBytes, &tm_v, bar_full_v(s), pn * 64, h, row);
        }
      };
      if constexpr (!kPersist) {
        load_q(0);
        for (int i = 0; i < n_tiles; ++i) load_kv(i, si.k_start + fwd_kv_tile(nb_end, gap_end, gap_len, i) * BN);
      } else {
        fwd_persist_produce<BM, BN>(p, bar_q, bar_q_empty, tile_slot, load_q,
                                    [&](int it, int nb) { load_kv(it, si.k_start + nb * BN); }, si, h, b, m_block, m0,
                                    nb_begin, nb_end, gap_end, gap_len, n_tiles);
      }
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<C::kConsumerRegs>();
    const int ctid = tid - 128;
    if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 6, fwd_now());
    const int wg = ctid / 128;  // 0 or 1: rows [64 wg, 64 wg + 64) of the tile
    const int wtid = ctid % 128;
    const int warp = wtid / 32;
    const int lane = wtid % 32;
    int kv0 = 0, q_it = 0;  // K / V tiles and Q tiles consumed before this tile (persistent)
    for (;;) {
      const int qb = q_it % C::kQBufs;
      const uint32_t qph = (q_it / C::kQBufs) & 1;
      if constexpr (kPersist) {
        ++q_it;
        if (!fwd_persist_consume<BM>(bar_q(qb), qph, tile_slot(qb), si, h, b, m_block, m0, nb_begin, nb_end, gap_end,
                                     gap_len, n_tiles)) {
          break;
        }
      }
      const uint32_t sQ = base + qb * C::kQBytes;
      const SeqMask& mk = si.mask;
      const int r0 = m0 + mk.offset;    // key position of the tile's first row
      const int row_w0 = r0 + 64 * wg;  // key position of this warpgroup's first row
      auto stage = [&](int i) { return (kv0 + i) % S; };
      auto phase = [&](int i) { return static_cast<uint32_t>(((kv0 + i) / S) & 1); };
      // The gap is parked in shared memory (one word per warpgroup, re-read per tile: no registers held through
      // the main loop) and the i-th tile re-derived from it.
      const uint32_t gap_park = bar + 104u + 4u * wg;
      st_shared_u32(gap_park, fwd_gap_word(gap_end, gap_len));
      auto kv_tile = [&](int i) {
        const uint32_t gw = ld_shared_u32(gap_park);
        return fwd_kv_tile(nb_end, static_cast<int>(gw & 0xffffu), static_cast<int>(gw >> 16), i);
      };

      float acc_o[D / 2];
#pragma unroll
      for (int i = 0; i < D / 2; ++i) acc_o[i] = 0.f;
      // KV tiles this warpgroup's 64 rows can see, [wg_lo, wg_hi) (the CTA's range is that of all 128 rows).
      int wg_lo = 0, wg_hi = 0;
      if constexpr (kWgSkip) {
        mk.key_tiles(row_w0, max(0, min(64, si.lq - (m0 + 64 * wg))), BN, wg_lo, wg_hi);
      }

      if (n_tiles > 0) {
        float acc_s[BN / 2];
        uint32_t pf[BN / 16][4];
        const float half_alpha = 0.5f * p.alpha;
        // rab pairs of this thread: pair 2 c + half = row (key position) row_w0 + 16 warp + lane/4 + 8 half, keys
        // j = n0 + 2 (lane % 4) + 8 c and j + 1, packed 16-bit (= accumulator elements 4 c + 2 half, + 1); 0 outside
        // [0, lk) (those elements are masked anyway).
        uint32_t rab_r[kRab ? BN / 4 : 1];
        auto load_rab = [&](int nb) {
          if constexpr (kRab) {
            const int lk = si.lk;
            const T* rb = static_cast<const T*>(p.rab) + static_cast<int64_t>(b) * p.rab_batch_stride +
                          static_cast<int64_t>(h) * p.rab_head_stride;
            const int n0 = nb * BN;
            // opaque: recompute the row addresses per tile instead of keeping them live (D = 256 spilled them).
            const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
            const int j0 = n0 + 2 * (ln % 4);
            const int rr = row_w0 + 16 * warp + ln / 4;
            const bool vec = (reinterpret_cast<uintptr_t>(p.rab) & 3u) == 0 &&
                             ((p.rab_batch_stride | p.rab_head_stride | p.rab_row_stride) & 1) == 0;
            if (vec && row_w0 + 64 <= lk && n0 + BN <= lk) {  // interior, all pairs aligned (uniform): no guards
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const T* row = rb + static_cast<int64_t>(rr + 8 * half) * p.rab_row_stride + j0;
#pragma unroll
                for (int c = 0; c < BN / 8; ++c) rab_r[2 * c + half] = ld_nc_u32(row + 8 * c);
              }
            } else {  // boundary tiles or odd strides: predicated loads (branch-free: branches here cost spills)
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const int r = rr + 8 * half;
                const T* row = rb + static_cast<int64_t>(r) * p.rab_row_stride + j0;
                const bool aligned = (reinterpret_cast<uintptr_t>(row) & 3u) == 0;  // j - j0 is even
#pragma unroll
                for (int c = 0; c < BN / 8; ++c) {
                  const int j = j0 + 8 * c;
                  rab_r[2 * c + half] = ld_nc_pair_if(row + 8 * c, r < lk && j < lk, r < lk && j + 1 < lk, aligned);
                }
              }
            }
          }
        };
        auto issue_qk = [&](int s) {
          wgmma_fence();
          // Work-list kernel, D >= 128: the Q descriptors are rebuilt per tile from one address (opaque), else they
          // were kept in registers and spilled inside the main loop (ptxas).
          const uint32_t q_wg = kSched && D >= 128 ? opaque(sQ + wg * 64 * 128) : sQ + wg * 64 * 128;
#pragma unroll
          for (int ks = 0; ks < D / 16; ++ks) {
            const uint64_t da = make_desc_sw128(q_wg + (ks / 4) * C::kQPanelBytes + (ks % 4) * 32, 16);
            const uint64_t db =
                make_desc_sw128(sK + s * C::kTileBytes + (ks / 4) * C::kKVPanelBytes + (ks % 4) * 32, 16);
            wgmma_ss<T, BN>(acc_s, da, db, ks > 0 ? 1 : 0);
          }
          wgmma_commit();
        };
        auto issue_pv = [&](int s) {
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < BN / 16; ++ks) {
            const uint64_t db = make_desc_sw128(sV + s * C::kTileBytes + ks * 16 * 128, C::kKVPanelBytes);
            wgmma_rs<T, D, 1>(acc_o, pf[ks], db, 1);
          }
          wgmma_commit();
        };
        // P = SiLU(alpha * (S + rab)), masked to 0, in place in acc_s (fwd_silu_mask).
        auto silu_mask = [&](int nb) {
          const int n0 = nb * BN;
          if constexpr (kRab) {
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) {
              acc_s[e] += (e % 2) ? unpack_hi<T>(rab_r[e / 2]) : unpack_lo<T>(rab_r[e / 2]);
            }
          }
          fwd_silu_mask<BN>(acc_s, half_alpha, mk, row_w0, warp, lane, n0, D <= 128);
        };
        auto pack_p = [&]() {
#pragma unroll
          for (int ks = 0; ks < BN / 16; ++ks) {
#pragma unroll
            for (int q = 0; q < 4; ++q) pf[ks][q] = pack2<T>(acc_s[8 * ks + 2 * q], acc_s[8 * ks + 2 * q + 1]);
          }
        };
        auto release = [&](uint32_t b) {
          if (lane == 0) mbar_arrive(b);
        };
        // The first (highest) KV tile may reach past the used keys: zero those V rows in smem (both consumer
        // warpgroups split the rows, then sync with each other) so that P = 0 never meets a non-finite V.
        auto fix_boundary_v = [&](int nb, int s) {
          const int valid = si.lk - nb * BN;
          if (valid >= BN) return;  // uniform over both consumer warpgroups
          const int nrows = BN - valid;
          const int total = C::kPanels * nrows * 8;
          for (int idx = ctid; idx < total; idx += 256) {
            const int chunk = idx % 8;
            const int rr = (idx / 8) % nrows;
            const int pn = idx / (8 * nrows);
            const uint32_t a = sV + s * C::kTileBytes + pn * C::kKVPanelBytes + (valid + rr) * 128 + chunk * 16;
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
          }
          fence_proxy_async_smem();
          named_barrier_sync(1, 256);
        };

        if constexpr (!kPersist) mbar_wait(bar_q(qb), qph);
        if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 7, fwd_now());
        // Pingpong turns: warpgroup wg syncs on barrier 4 + wg before issuing, then arrives on the other's. Each
        // issues n_tiles + 1 times; warpgroup 1 opens warpgroup 0's first turn and skips its last arrive.
        auto pp_sync = [&]() { named_barrier_sync(4 + wg, 256); };
        auto pp_arrive = [&]() { named_barrier_arrive(4 + (wg ^ 1), 256); };
        if (wg == 1) named_barrier_arrive(4, 256);
        // This warpgroup's tiles [ia, ib) (loop order: nb = kv_tile(i)); the others are P = 0 for all of its
        // rows (the diagonal tile's upper half for rows 0-63, the keys past the causal ones of the context tile
        // for rows 64-127, ...): waited for and released, with empty pingpong turns (slot i), no wgmma. The
        // pipelined section below uses slots ia .. ib (slot n_tiles is the last; warpgroup 1 skips its arrive).
        int ia = 0, ib = n_tiles;  // without kWgSkip the whole range: the code as before
        if constexpr (kWgSkip) {
          ia = n_tiles;
          const int lo = max(wg_lo, nb_begin), hi = min(wg_hi, nb_end);
          if (hi > lo) {
            ia = fwd_kv_count_from(nb_end, gap_end, gap_len, hi);
            ib = fwd_kv_count_from(nb_end, gap_end, gap_len, lo);
            if (ib <= ia) ia = n_tiles;  // (its keys all in the CTA's gap: none)
          }
        }
        auto pp_turn = [&](int slot, int n) {  // an empty turn in slot `slot` of n + 1
          pp_sync();
          if (wg == 0 || slot < n) pp_arrive();
        };
        auto skip_tile = [&](int i) {
          const int s = stage(i);
          const uint32_t ph = phase(i);
          mbar_wait(bar_full_k(s), ph);
          release(bar_empty_k(s));
          mbar_wait(bar_full_v(s), ph);
          if (i == 0) fix_boundary_v(nb_end - 1, stage(0));
          release(bar_empty_v(s));
        };
        if constexpr (kWgSkip) {
          for (int i = 0; i < ia; ++i) {
            pp_turn(i, n_tiles);
            skip_tile(i);
          }
          // n_tiles is parked in shared memory while the section runs (one register less in the loop: D = 256
          // spilled inside it otherwise).
          st_shared_u32(bar + 112u + 4u * wg, static_cast<uint32_t>(n_tiles));
          if (ia == n_tiles) pp_turn(n_tiles, n_tiles);  // no tile of this warpgroup: the last turn
        }
        if (ia < n_tiles) {
          // First tile of the section: S, P; zero the V rows past the used keys once V_0 has landed.
          {
            const int s0 = stage(ia);
            const uint32_t ph0 = phase(ia);
            mbar_wait(bar_full_k(s0), ph0);
            if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 8, fwd_now());
            pp_sync();
            issue_qk(s0);
            pp_arrive();
            load_rab(kv_tile(ia));
            wgmma_wait<0>();
            pin_all(acc_s);
            release(bar_empty_k(s0));
            silu_mask(kv_tile(ia));
            pack_p();
            mbar_wait(bar_full_v(s0), ph0);
            if (ia == 0) fix_boundary_v(nb_end - 1, s0);
            if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 9, fwd_now());
          }
          for (int i = ia + 1; i < ib; ++i) {
            const int nb = kv_tile(i);
            const int s = stage(i);
            const uint32_t ph = phase(i);
            const int sp = stage(i - 1);
            const uint32_t php = phase(i - 1);
            mbar_wait(bar_full_k(s), ph);
            mbar_wait(bar_full_v(sp), php);
            pp_sync();
            issue_qk(s);   // S_i, in flight during the P V below
            issue_pv(sp);  // O += P_{i-1} V_{i-1}
            pp_arrive();
            load_rab(nb);  // kRab: flies under both wgmmas
            wgmma_wait<1>();  // S_i done
            pin_all(acc_s);
            release(bar_empty_k(s));
            silu_mask(nb);  // overlaps the P V wgmma (and the other warpgroup's GEMMs)
            wgmma_wait<0>();
            pin_all(pf);
            release(bar_empty_v(sp));
            pack_p();
          }
          const int il = ib - 1;
          const int sl = stage(il);
          mbar_wait(bar_full_v(sl), phase(il));
          pp_sync();
          issue_pv(sl);
          int n_all = n_tiles;
          if constexpr (kWgSkip) {
            n_all = static_cast<int>(ld_shared_u32(bar + 112u + 4u * (opaque(static_cast<uint32_t>(ctid)) / 128u)));
          }
          if (wg == 0 || ib < n_all) pp_arrive();
          wgmma_wait<0>();
          pin_all(pf);
          release(bar_empty_v(sl));
          for (int i = ib; i < n_all; ++i) {
            skip_tile(i);
            pp_turn(i + 1, n_all);
          }
        }
        pin_all(acc_o);
      }
      if (ctid == 0 && trace != nullptr) {
        fwd_trace_put(trace, 10, fwd_now());
        fwd_trace_put(trace, 18, clock64());
      }

      // Split tile (work list): the chunks' fp32 partials summed (hstu_fwd_sm90_split.cuh); false: this CTA is
      // done (the chunks stored the tile together, or another chunk sums).
      if constexpr (kSched) {
        if (!fwd_split_reduce<T, BM, D>(sched, p, h, ctid, bar + 120u, si, m0, acc_o, trace, pk.split_arrive != 0)) {
          return;
        }
      }

      // Epilogue: scale, round, stage this warpgroup's 64 rows through its part of the Q buffer (same 128B swizzle),
      // then 16-byte coalesced stores. Rows past seqused hold zeros (masked); rows past the sequence are not stored.
      const float sc = p.inv_scaling;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int rr = 16 * warp + lane / 4 + 8 * half;
          const uint32_t v = pack2<T>(acc_o[4 * j + 2 * half] * sc, acc_o[4 * j + 2 * half + 1] * sc);
          const uint32_t a =
              sQ + (j / 8) * C::kQPanelBytes + (64 * wg + rr) * 128 + (((j % 8) ^ (rr % 8)) << 4) + (lane % 4) * 4;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
        }
      }
      named_barrier_sync(2 + wg, 128);
      int e_lq_alloc = si.lq_alloc, e_q_start = si.q_start, e_m0 = m0, e_h = h;
      if constexpr (kPersist) {  // re-read from the slot (kept live through the tile, they spilled)
        const uint32_t sl = slot_addr(qb);
        e_lq_alloc = static_cast<int>(ld_shared_u32(sl + offsetof(FwdTile, si) + offsetof(SeqInfo, lq_alloc)));
        e_q_start = static_cast<int>(ld_shared_u32(sl + offsetof(FwdTile, si) + offsetof(SeqInfo, q_start)));
        e_m0 = static_cast<int>(ld_shared_u32(sl + offsetof(FwdTile, m_block))) * BM;
        e_h = static_cast<int>(ld_shared_u32(sl + offsetof(FwdTile, h)));
      }
      const int rows_store = min(64, e_lq_alloc - e_m0 - 64 * wg);
      T* og = static_cast<T*>(p.out) + static_cast<int64_t>(e_q_start + e_m0 + 64 * wg) * p.o_row_stride +
              static_cast<int64_t>(e_h) * p.o_head_stride;
      constexpr int kChunks = D / 8;
#pragma unroll 4
      for (int idx = wtid; idx < 64 * kChunks; idx += 128) {
        const int rr = idx / kChunks;
        const int c = idx % kChunks;
        if (rr < rows_store) {
          const uint32_t a = sQ + (c / 8) * C::kQPanelBytes + (64 * wg + rr) * 128 + (((c % 8) ^ (rr % 8)) << 4);
          const uint4 val = lds_b128(a);
          st_global_v4(og + static_cast<int64_t>(rr) * p.o_row_stride + c * 8, val);
        }
      }
      if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 14, fwd_now());
      if constexpr (kPersist) {
        // This warp has read its part of the staging: the buffer may take a later tile's Q (its generic stores are
        // ordered before the TMA's writes by the proxy fence).
        fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_q_empty(qb));
      }
      kv0 += n_tiles;
      if constexpr (!kPersist) break;
    }  // query tiles
  }
}

}  // namespace sm90
}  // namespace hstu
