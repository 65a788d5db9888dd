// Pieces shared by the Hopper forwards (bf16 and FP8): the KV tiles a query tile visits (also the work-list
// planner's), their scheduling (the work list's units, the persistent CTAs' tiles) and the masked SiLU of an S tile.
#pragma once

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"  // tanh_fast

namespace hstu {
namespace sm90 {

// KV tiles (of BN keys) that query tile m0 (BM rows) of a sequence must visit: [nb_begin, nb_end) less the masked
// gap [gap_end - gap_len, gap_end) between its history and its target group (gap_len = 0: none; SeqMask::key_tiles);
// empty (0, 0) when no row is used or every key is masked. The Hopper forwards (bf16 and FP8) walk them from the
// last down: the i-th is fwd_kv_tile(nb_end, gap_end, gap_len, i). No gap is skipped past 65535 tiles (4M keys),
// for both: the bf16 one packs the gap into one word (fwd_gap_word: 16 bits each). Shared by the kernels and the
// work-list planner (whose units count the visited tiles, n = fwd_kv_count; an item's chunk of them: fwd_kv_chunk).
template <int BM, int BN>
__device__ __forceinline__ void fwd_kv_tiles(const SeqInfo& si, int m0, int& nb_begin, int& nb_end, int& gap_end,
                                             int& gap_len) {
  int gap_begin;
  si.mask.key_tiles(m0 + si.mask.offset, max(0, min(BM, si.lq - m0)), BN, nb_begin, nb_end, gap_begin, gap_end);
  gap_len = gap_end - gap_begin;
  if (gap_end > 0xffff) gap_end = gap_len = 0;
}
__device__ __forceinline__ int fwd_kv_count(int nb_begin, int nb_end, int gap_len) {
  return nb_end - nb_begin - gap_len;
}
__device__ __forceinline__ int fwd_kv_tile(int nb_end, int gap_end, int gap_len, int i) {
  const int t = nb_end - 1 - i;
  return t < gap_end ? t - gap_len : t;
}

// The forwards' work-list units (hstu_sm90_work_list.cuh): query tiles of BM rows, their KV tiles of BN keys.
template <int BM, int BN>
struct FwdPlanUnits {
  static constexpr bool kHeavyLast = true;  // (causal: the last query tiles see the most keys)
  static __device__ __forceinline__ int count(const HstuParams& p, const SeqInfo& si) {
    return min((p.max_seqlen_q + BM - 1) / BM, (si.lq_alloc + BM - 1) / BM);
  }
  // A unit's tiles as positions [0, n) of its visited KV tiles (the kernel maps an item's chunk: fwd_kv_chunk).
  static __device__ __forceinline__ void range(const SeqInfo& si, int u, int& lo, int& hi) {
    int nb_begin, nb_end, gap_end, gap_len;
    fwd_kv_tiles<BM, BN>(si, u * BM, nb_begin, nb_end, gap_end, gap_len);
    lo = 0;
    hi = fwd_kv_count(nb_begin, nb_end, gap_len);
  }
};

// Persistent CTAs (one per SM): the producer takes query tiles of the grid kernels' head-major order (m_block
// reversed, then h, then b) from a global counter (p.fwd_tile_counter, zeroed by the launcher; CTA x starts with
// tile x) and publishes each in a shared-memory slot beside the Q buffer it loads (fwd_persist_produce); the
// consumers read it there (fwd_persist_consume); h = -1 ends the CTA.
struct FwdTile {
  SeqInfo si;
  int h, b, m_block, nb_begin, nb_end, gap_end, gap_len;
};
static_assert(sizeof(FwdTile) <= 128, "the forwards reserve 128 bytes per slot");

// The producer thread of a persistent CTA: takes the tiles (CTA x first tile x, then the counter's; tiles past their
// sequence are skipped), publishes each in the slot of Q buffer q_it % 2 once that buffer is free (bar_q_empty), then
// load_q(qb) (its arrive on bar_q(qb) releases the slot; a tile without keys: a plain arrive) and load_kv(kv_it, nb)
// for each of its KV tiles nb, from the last down (kv_it counts the K / V tiles loaded before); ends with a tile of
// h = -1. si ... n_tiles: the current tile's, which the loaders read. The callables go by reference: taken by value
// (copies of the kernel's lambdas), ptxas spilled 4 bytes in the bf16 persistent D = 128 kernel.
template <int BM, int BN, class BarQ, class BarQEmpty, class Slot, class LoadQ, class LoadKV>
__device__ __forceinline__ void fwd_persist_produce(const HstuParams& p, const BarQ& bar_q,
                                                    const BarQEmpty& bar_q_empty, const Slot& tile_slot,
                                                    const LoadQ& load_q, const LoadKV& load_kv, SeqInfo& si, int& h,
                                                    int& b, int& m_block, int& m0, int& nb_begin, int& nb_end,
                                                    int& gap_end, int& gap_len, int& n_tiles) {
  const int m_blocks = (p.max_seqlen_q + BM - 1) / BM;
  const int n_work = m_blocks * p.heads * p.batch;
  int kv_it = 0, q_it = 0;
  for (int tile = blockIdx.x;;) {
    const int qb = q_it % 2;
    const uint32_t qph = (q_it / 2) & 1;
    if (tile >= n_work) {  // the end: a tile of h = -1
      mbar_wait(bar_q_empty(qb), qph ^ 1);
      tile_slot(qb)->h = -1;
      mbar_arrive(bar_q(qb));
      break;
    }
    // The next tile is taken once this one's loads are issued (a few K / V tiles before the consumers need it):
    // taken earlier, a CTA would hold a tile it cannot start while others run out of work at the end.
    auto take_next = [&]() { tile = atomicAdd(p.fwd_tile_counter, 1) + static_cast<int>(gridDim.x); };
    m_block = m_blocks - 1 - tile % m_blocks;
    h = tile / m_blocks % p.heads;
    b = tile / m_blocks / p.heads;
    si = seq_info(p, b);
    m0 = m_block * BM;
    if (m0 >= si.lq_alloc) {  // past the sequence: nothing to publish
      take_next();
      continue;
    }
    fwd_kv_tiles<BM, BN>(si, m0, nb_begin, nb_end, gap_end, gap_len);
    n_tiles = fwd_kv_count(nb_begin, nb_end, gap_len);
    ++q_it;
    mbar_wait(bar_q_empty(qb), qph ^ 1);
    FwdTile* slot = tile_slot(qb);
    slot->si = si;
    slot->h = h;
    slot->b = b;
    slot->m_block = m_block;
    slot->nb_begin = nb_begin;
    slot->nb_end = nb_end;
    slot->gap_end = gap_end;
    slot->gap_len = gap_len;
    if (n_tiles > 0) {
      load_q(qb);  // (its arrive releases the slot's stores to the consumers)
    } else {
      mbar_arrive(bar_q(qb));  // no keys: the slot turns all the same (zeros are staged there)
    }
    for (int i = 0; i < n_tiles; ++i) load_kv(kv_it + i, fwd_kv_tile(nb_end, gap_end, gap_len, i));
    kv_it += n_tiles;
    take_next();
  }
}

// The consumers' next tile of a persistent CTA: waits for its Q buffer's full barrier (bar_full, phase), reads the
// published tile; false: the end.
template <int BM>
__device__ __forceinline__ bool fwd_persist_consume(uint32_t bar_full, uint32_t phase, const FwdTile* slot,
                                                    SeqInfo& si, int& h, int& b, int& m_block, int& m0,
                                                    int& nb_begin, int& nb_end, int& gap_end, int& gap_len,
                                                    int& n_tiles) {
  mbar_wait(bar_full, phase);
  h = slot->h;
  if (h < 0) return false;
  b = slot->b;
  m_block = slot->m_block;
  nb_begin = slot->nb_begin;
  nb_end = slot->nb_end;
  gap_end = slot->gap_end;
  gap_len = slot->gap_len;
  si = slot->si;
  m0 = m_block * BM;
  n_tiles = fwd_kv_count(nb_begin, nb_end, gap_len);
  return true;
}

// Thread 0's setup of a forward's mbarriers, 8 bytes each from `bar`: Q full at + 0 (one TMA arrive); the K full,
// V full, K empty and V empty barriers of S stages from + 8 (full: full_count arrivals, empty: one per consumer
// warp); persistent: the second Q full at + q1 and the two Q empty barriers behind it (one arrive per consumer warp).
template <int S, bool kPersist>
__device__ __forceinline__ void fwd_init_barriers(uint32_t bar, uint32_t q1, int full_count) {
  mbar_init(bar, 1);
  if constexpr (kPersist) {
    mbar_init(bar + q1, 1);
    mbar_init(bar + q1 + 8u, 8);
    mbar_init(bar + q1 + 16u, 8);
  }
#pragma unroll
  for (int s = 0; s < S; ++s) {
    mbar_init(bar + 8u + 8u * s, full_count);
    mbar_init(bar + 8u + 8u * (S + s), full_count);
    mbar_init(bar + 8u + 8u * (2 * S + s), 8);
    mbar_init(bar + 8u + 8u * (3 * S + s), 8);
  }
  fence_barrier_init();
}

// P = SiLU(S) as h + h tanh(h) with h = sc S (sc: alpha / 2 times any descale factors; one MUFU op), masked to 0,
// in place in acc_s: this thread's part (warp, lane of a warpgroup) of the m64nBN fp32 wgmma accumulator of rows
// [row_w0, row_w0 + 64) and keys [n0, n0 + BN). full_targets: the unmasked fast path is decided by tile_full_targets
// (else tile_full). Shared by the bf16 and FP8 forwards (the same accumulator layout). tail(): called at the end of
// each of the three paths, in its basic block (the FP8 forward packs P to e4m3 there, so that ptxas interleaves the
// conversions with the path's MUFU stream instead of running them after it; the bf16 forward passes nothing).
struct NoSiluTail {
  __device__ __forceinline__ void operator()() const {}
};
template <int BN, class Tail = NoSiluTail>
__device__ __forceinline__ void fwd_silu_mask(float (&acc_s)[BN / 2], float sc, const SeqMask& mk, int row_w0,
                                              int warp, int lane, int n0, bool full_targets,
                                              const Tail& tail = Tail()) {
  if (full_targets ? mk.tile_full_targets(row_w0, row_w0 + 64, n0, n0 + BN)
                   : mk.tile_full(row_w0, row_w0 + 64, n0, n0 + BN)) {
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const float x = acc_s[e] * sc;
      acc_s[e] = fmaf(x, tanh_fast(x), x);
    }
    tail();
  } else if (mk.hist == mk.lk) {
    // No targets: every row sees one key interval [lo, hi) (window, contexts, keys/rows past the end).
    const int jj = n0 + 2 * (lane % 4);
    int lo[2], hi[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row_w0 + 16 * warp + lane / 4 + 8 * half;
      lo[half] = mk.wl < 0 ? 0 : r - mk.wl;
      if (mk.gr && lo[half] < mk.ctx) lo[half] = 0;  // GR: the collapsed contexts are inside the window
      hi[half] = mk.wr < 0 ? mk.lk : min(mk.lk, r + mk.wr + 1);
      if (r < mk.ctx) {
        lo[half] = 0;
        hi[half] = mk.lk;
      }
      if (r >= mk.lk) hi[half] = lo[half];
    }
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const float x = acc_s[e] * sc;
      const float v = fmaf(x, tanh_fast(x), x);
      const int half = (e % 4) / 2;
      const int j = jj + 8 * (e / 4) + (e % 2);
      acc_s[e] = (j >= lo[half] && j < hi[half]) ? v : 0.f;
    }
    tail();
  } else {
    // Targets: each row sees two key intervals (SeqMask::row_keys: its history keys, its group's targets), turned
    // into a bit mask over this thread's elements (the element rule, allowed() per element by a rolled loop, took
    // ~12 us per tile on H200: two integer divisions per element; the bits keep its register footprint).
    const int jj = n0 + 2 * (lane % 4);
    uint32_t bits[BN / 64];
#pragma unroll
    for (int w = 0; w < BN / 64; ++w) bits[w] = 0u;
    // (rolled at BN = 192: unrolled, the FP8 BN = 192 kernel spilled 4 bytes; rolled everywhere, the bf16 / fp16
    // persistent D = 128 kernels 32)
#pragma unroll(BN > 128 ? 1 : 2)
    for (int half = 0; half < 2; ++half) {
      int hlo, hhi, tlo, thi;
      mk.row_keys(row_w0 + 16 * warp + lane / 4 + 8 * half, hlo, hhi, tlo, thi);
      fwd_key_interval_bits<BN>(bits, jj, half, hlo, hhi);
      fwd_key_interval_bits<BN>(bits, jj, half, tlo, thi);
    }
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const float x = acc_s[e] * sc;
      const float v = fmaf(x, tanh_fast(x), x);
      acc_s[e] = ((bits[e / 32] >> (e % 32)) & 1u) ? v : 0.f;
    }
    tail();
  }
}

}  // namespace sm90
}  // namespace hstu
