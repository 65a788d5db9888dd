// The sm80-class bf16 D = 256 forward's warp pairs (FwdSm80PairsPf: 64 x 64 tiles, 4 warps in pairs, one K / V
// stage, the fragments two MMA steps ahead) as a persistent grid (issue 39, branch fwd33): a block per resident
// slot takes the default grid's query tiles (launch_hstu_fwd's order: chunks of sequences, heaviest ranks first)
// from a counter, as the hardware hands out blocks (a static order, run 1, ran 1.13-1.48x the default's time: the
// long tiles unbalanced, and the two blocks of an SM in step, their prologues together). Each tile runs the
// default's KV loop (the same MMAs in the same order: bit for bit hstu_fwd_xpf_kernel); behind the epilogue's first
// barrier the next tile's setup runs and its Q and first K copies are issued (both buffers are free once every warp
// has computed the last S), then the tile's epilogue stages O through the V buffer and stores it while those copies
// are in flight (run 2: issued before the last step's P V 1.01x slower; O stored from the registers without the
// staging 1.09-1.16x slower). At
// B256 S256 (1-4 KV steps per tile) the prologue and the epilogue held ~40 % of a block (fwd32): this kernel
// overlaps the next tile's Q / K latency with the epilogue instead of leaving it to the SM's other block.
// Its own directory and unit: kept out of the sm80 instance units' inputs (their objects stay unchanged).
#include "hstu/csrc/persist/hstu_fwd_sm80_persist.h"

#include "hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh"

namespace hstu {
namespace {

using PTile = FwdSm80PairsPf;

template <typename T>
__global__ void __launch_bounds__(PTile::kWarps * 32, PTile::kMinBlocks)
    hstu_fwd_persist_kernel(const HstuParams p, int lg, int items) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ < 900
  // sm86 / sm89 (99 KB per block): never launched there (run_hstu_fwd_sm80_persist_bf16_d256: fwd_sm80_fits)
  __trap();
#else
  constexpr int D = 256, BM = PTile::kBlockM, BN = PTile::kBlockN, NWARPS = PTile::kWarps, PAIR = PTile::kPair;
  static_assert(BN == PTile::kSubN && PAIR == 2 && PTile::kStages == 1 && PTile::kSkip == 0, "the pairs' tile");
  constexpr int NT = NWARPS * 32;
  constexpr int MT = BM * PAIR / (16 * NWARPS);  // m16 tiles per warp
  constexpr int NTILES = BN / 8 / PAIR;          // n8 tiles of S per m16 tile (the warp's half of the keys)
  constexpr int DTILES = D / 8 / PAIR;           // n8 tiles of O per m16 tile (the warp's half of the columns)
  constexpr int KSW = BN / 16 / PAIR;            // k16 steps of P V over the warp's own keys
  static_assert(BM * D * 2 == BN * D * 2, "O staged through the V buffer");
  using L = SmemLayout<D>;
  constexpr uint32_t kTileBytes = BN * D * 2;

  extern __shared__ __align__(128) char smem[];
  // smem: Q | K | V (O staged here) | row keys | P
  const uint32_t sQ0 = smem_u32(smem);
  const uint32_t sKV0 = sQ0 + BM * D * 2;
  const uint32_t sV0 = sKV0 + kTileBytes;
  const uint32_t sRowKeys0 = sQ0 + (BM + 2 * BN) * D * 2;
  const uint32_t sP0 = sQ0 + PTile::kSmemP;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wh = warp % PAIR;
  const int warp_row0 = (warp / PAIR) * MT * 16;
  const float half_alpha = 0.5f * p.alpha;
  const int n_m = (p.max_seqlen_q + BM - 1) / BM;

  // Tile w of the grid order (x fastest over (n_m << lg) ranks x chunk members, then chunks, then heads); false
  // for tiles past the batch or past their sequence's rows.
  auto tile_of = [&](int w, int& b, int& m0, int& h) {
    const int xs = n_m << lg, ys = (p.batch + (1 << lg) - 1) >> lg;
    const int bx = w % xs, rest = w / xs;
    h = rest / ys;
    b = ((rest % ys) << lg) + (bx & ((1 << lg) - 1));
    m0 = (n_m - 1 - (bx >> lg)) * BM;
    if (b >= p.batch) return false;
    return m0 < p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  };
  // The tiles are taken from a counter (p.fwd_tile_counter, zeroed by the launcher): block x starts with tile x,
  // then thread 0 takes the next in the tile's last KV step (its latency under that P V; taken at the tile's start,
  // run 2, a block held its next tile a whole tile ahead: 1.5-3.7 % in a list-scheduling model) and publishes it in
  // slot s before the epilogue's barrier, s the tile's parity: a slot is rewritten only behind a barrier that every
  // thread passed after reading it. settle: from tile w (block-uniform) to the first one that has rows (b,
  // m0, h), taking more where w has none; false when none is left. The tile's (b, m0, h) sit in shared memory too
  // (info s: every thread stores the same words, its own reads need no barrier), read where used in the loop and
  // the epilogue instead of three registers live through the loop (at 250 registers ptxas moved the fragment loads
  // closer to their MMAs: run 2).
  const uint32_t sSlot = sQ0 + PTile::kSmem, sInfo = sSlot + 16;
  auto slot_store = [&](int s, int w) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sSlot + 4 * s), "r"(w));
  };
  auto slot_load = [&](int s) {
    int w;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(w) : "r"(sSlot + 4 * s));
    return w;
  };
  auto take = [&]() { return atomicAdd(p.fwd_tile_counter, 1) + static_cast<int>(gridDim.x); };
  auto settle = [&](int w, int s, int& b, int& m0, int& h) {
    for (;;) {
      if (w >= items) return false;
      if (tile_of(w, b, m0, h)) return true;
      __syncthreads();  // (every thread read slot s)
      if (tid == 0) slot_store(s, take());
      __syncthreads();
      w = slot_load(s);
    }
  };
  // a tile's KV walk: tiles [nb_begin, nb_end) less the masked gap [gap_begin, gap_end), walked down
  auto walk = [&](const SeqInfo& si, int m0, int& nb_begin, int& nb_end, int& gap_begin, int& gap_end) {
    const int rows_used = max(0, min(BM, si.lq - m0));
    si.mask.key_tiles(m0 + si.mask.offset, rows_used, BN, nb_begin, nb_end, gap_begin, gap_end);
  };
  auto q_rows = [&](const SeqInfo& si, int m0, int h) {
    return static_cast<const T*>(p.q) + (int64_t)(si.q_start + m0) * p.q_row_stride + h * p.q_head_stride;
  };
  auto k_rows = [&](const SeqInfo& si, int h) {
    return static_cast<const T*>(p.k) + (int64_t)si.k_start * p.k_row_stride + h * p.k_head_stride;
  };

  // the tile's (b, m0, h) from info s
  auto info = [&](int s, int i) {
    int v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(sInfo + 16 * s + 4 * i));
    return v;
  };
  int b = 0, m0 = 0, h = 0, slot = 0, nxt = 0;
  bool have = settle(static_cast<int>(blockIdx.x), 1, b, m0, h);  // (slot 1: the first tile publishes in 0)
  bool pre = false;  // the tile's Q and first K copies issued behind the previous tile's loop
  // The next tile: its setup, then its Q and first K copies (Q and K are free once every warp computed the last S;
  // an empty walk's own Q copy lands first); (b, m0, h) become the next tile's.
  auto prefetch_next = [&]() {
    have = settle(slot_load(slot), slot, b, m0, h);
    cp_async_wait<0>();
    if (have) {
      const SeqInfo sn = seq_info(p, b);
      int nbb, nbe, gb, ge;
      walk(sn, m0, nbb, nbe, gb, ge);
      load_tile_async<BM, D, NT>(sQ0, q_rows(sn, m0, h), p.q_row_stride, max(0, min(BM, sn.lq - m0)), tid);
      if (nbe > nbb) {
        const int n0 = (nbe - 1) * BN;
        load_tile_async<BN, D, NT>(sKV0, k_rows(sn, h) + (int64_t)n0 * p.k_row_stride, p.k_row_stride,
                                   sn.lk - n0, tid);
      }
      cp_async_commit();
      pre = true;
    }
  };
  while (have) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sInfo + 16 * slot), "r"(b), "r"(m0), "r"(h),
                 "r"(0));
    const SeqInfo si = seq_info(p, b);
    const SeqMask& mk = si.mask;
    const int rows_used = max(0, min(BM, si.lq - m0));
    if (!pre) {
      load_tile_async<BM, D, NT>(sQ0, q_rows(si, m0, h), p.q_row_stride, rows_used, tid);
      cp_async_commit();
    }
    const int r0 = m0 + mk.offset;
    const int lk = si.lk;
    int full_lo, full_hi;
    {  // (hstu_fwd_block's rule for the tiles over 128 registers: the targets counted as history, clipped to it)
      SeqMask mh = mk;
      mh.hist = mk.lk;
      mh.full_tiles(r0, r0 + BM, BN, full_lo, full_hi);
      full_hi = min(full_hi, mk.hist - BN);
    }
    int nb_begin, nb_end, gap_begin, gap_end;
    walk(si, m0, nb_begin, nb_end, gap_begin, gap_end);
    const int gap_skip = gap_end - gap_begin;

    float acc_o[MT][DTILES][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < DTILES; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[mt][i][e] = 0.f;

    // K / V of the sequence and head re-derived inside the loop (not two pointers live through it)
    auto kv_rows = [&](const void* base, int64_t row_stride, int64_t head_stride) {
      return static_cast<const T*>(base) + (int64_t)p.cu_seqlens_k[info(slot, 0)] * row_stride +
             static_cast<int64_t>(info(slot, 2)) * head_stride;
    };
    if (nb_end > nb_begin) {
      if (!pre) {
        const int n0 = (nb_end - 1) * BN;
        load_tile_async<BN, D, NT>(sKV0, k_rows(si, h) + (int64_t)n0 * p.k_row_stride, p.k_row_stride, lk - n0,
                                   tid);
      }
      cp_async_commit();
      if (tid < BM) {  // each row's key intervals (visible after the loop's first barrier)
        int hlo, hhi, tlo, thi;
        mk.row_keys(r0 + tid, hlo, hhi, tlo, thi);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sRowKeys0 + tid * 16), "r"(hlo), "r"(hhi),
                     "r"(tlo), "r"(thi));
      }
      for (int nb = nb_end - 1; nb >= nb_begin; nb -= 1 + (nb == gap_end ? gap_skip : 0)) {
        cp_async_wait<0>();
        __syncthreads();  // K of tile nb (and Q) landed; every warp is done with V (the tile before)
        {
          const int n0 = nb * BN;
          const T* vn = kv_rows(p.v, p.v_row_stride, p.v_head_stride) + (int64_t)n0 * p.v_row_stride;
          load_tile_async<BN, D, NT, true>(sV0, vn, p.v_row_stride, lk - n0, opaque(tid));
          cp_async_commit();
        }
        const int n0 = nb * BN;
        const uint32_t sK = sKV0;
        const uint32_t sV = sV0;
        const int kw0 = n0 + wh * (BN / PAIR);  // the warp's first key of S
        const bool full = n0 >= full_lo && n0 <= full_hi;
        const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
        const uint32_t tQ = L::swz(warp_row0 + ln % 16, (ln / 16) * 8);
        const uint32_t tK = L::swz(ln % 8 + (ln / 16) * 8, ((ln / 8) % 2) * 8);
        const uint32_t tV = L::swz(ln % 8 + ((ln / 8) % 2) * 8, (ln / 16) * 8);
        float acc_s[MT][NTILES][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < NTILES; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[mt][i][e] = 0.f;
        {  // S = Q K^T, k16 step ks + kFwdPf's Q and K fragments loaded before step ks's MMAs
          constexpr int NP = BN / 16 / PAIR, NB = kFwdPf + 1;
          uint32_t fa[NB][MT][4], fb[NB][NP][4];
          auto load_s = [&](int ks, int buf) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) ldsm_x4(fa[buf][mt], sQ0 + L::xadd(tQ, mt * 16, ks * 16));
#pragma unroll
            for (int np = 0; np < NP; ++np)
              ldsm_x4(fb[buf][np], sK + wh * (BN / PAIR) * D * 2 + L::xadd(tK, np * 16, ks * 16));
          };
#pragma unroll
          for (int ks = 0; ks < kFwdPf; ++ks) load_s(ks, ks);
#pragma unroll
          for (int ks = 0; ks < D / 16; ++ks) {
            if (ks + kFwdPf < D / 16) load_s(ks + kFwdPf, (ks + kFwdPf) % NB);
#pragma unroll
            for (int np = 0; np < NP; ++np)
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                mma_16816<T>(acc_s[mt][2 * np], fa[ks % NB][mt], fb[ks % NB][np][0], fb[ks % NB][np][1]);
                mma_16816<T>(acc_s[mt][2 * np + 1], fa[ks % NB][mt], fb[ks % NB][np][2], fb[ks % NB][np][3]);
              }
          }
        }
        // P = SiLU(alpha * (S + rab)), masked (hstu_fwd_block's passes)
        if (p.rab != nullptr) {
          const T* rab = static_cast<const T*>(p.rab) + info(slot, 0) * p.rab_batch_stride +
                         info(slot, 2) * p.rab_head_stride;
          const int rw0 = r0 + warp_row0;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NTILES; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int rr = rw0 + mt * 16 + lane / 4 + (e / 2) * 8;
                const int j = kw0 + nt * 8 + (lane % 4) * 2 + (e & 1);
                if (rr < lk && j < lk) acc_s[mt][nt][e] += to_float(rab[(int64_t)rr * p.rab_row_stride + j]);
              }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NTILES; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = silu_from_half(acc_s[mt][nt][e] * half_alpha);
        uint32_t pk[MT][KSW][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int ks = 0; ks < KSW; ++ks)
#pragma unroll
            for (int q = 0; q < 4; ++q)
              pk[mt][ks][q] = pack2<T>(acc_s[mt][2 * ks + q / 2][2 * (q % 2)],
                                       acc_s[mt][2 * ks + q / 2][2 * (q % 2) + 1]);
        if (!full) {
          const int lm = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t tr = sRowKeys0 + (warp_row0 + lm / 4) * 16;
          const int jw = kw0 + (lm % 4) * 2;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t bits[1] = {0u};
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              int hlo, hhi, tlo, thi;
              asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                           : "=r"(hlo), "=r"(hhi), "=r"(tlo), "=r"(thi)
                           : "r"(tr + (mt * 16 + hf * 8) * 16));
              fwd_key_interval_bits<NTILES * 8>(bits, jw, hf, hlo, hhi);
              fwd_key_interval_bits<NTILES * 8>(bits, jw, hf, tlo, thi);
            }
#pragma unroll
            for (int ks = 0; ks < KSW; ++ks)
#pragma unroll
              for (int q = 0; q < 4; ++q) pk[mt][ks][q] &= fwd_pair_keep(bits[0], ks, q);
          }
        }
        {  // P's A fragments to the partner (lane-major, slot (warp, mt, ks))
          const int lp = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t sPw = sP0 + (warp * MT * KSW * 32 + lp) * 16;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int ks = 0; ks < KSW; ++ks)
              asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sPw + (mt * KSW + ks) * 512),
                           "r"(pk[mt][ks][0]), "r"(pk[mt][ks][1]), "r"(pk[mt][ks][2]), "r"(pk[mt][ks][3]));
        }
        cp_async_wait<0>();
        __syncthreads();  // V of tile nb landed; every warp is done with Q and K: K of the next tile loads during P V
        const int nn = nb - 1 - (nb == gap_end ? gap_skip : 0);  // the next step's tile
        if (nn >= nb_begin) {
          const T* kn = kv_rows(p.k, p.k_row_stride, p.k_head_stride) + (int64_t)nn * BN * p.k_row_stride;
          load_tile_async<BN, D, NT, true>(sKV0, kn, p.k_row_stride, lk - nn * BN, opaque(tid));
          cp_async_commit();
        } else if (tid == 0) {
          nxt = take();  // (the last step: the next tile, its latency under this P V)
        }
        {  // O += P V: the warp's own keys, then its partner's P; step i + kFwdPf's V fragment before step i
          constexpr int DP = D / 16 / PAIR, STEPS = PAIR * KSW * DP, NB = kFwdPf + 1;
          auto v_addr = [&](int i) {
            const int hh = wh ^ (i / (KSW * DP));
            return sV + hh * (BN / PAIR) * D * 2 + wh * (D / PAIR) * 2 + L::xadd(tV, (i / DP) % KSW * 16,
                                                                                    i % DP * 16);
          };
          uint32_t fv[NB][4], po[MT][KSW][4];
#pragma unroll
          for (int i = 0; i < kFwdPf; ++i) ldsm_x4_t(fv[i], v_addr(i));
#pragma unroll
          for (int i = 0; i < STEPS; ++i) {
            const int j = i / (KSW * DP), ks = (i / DP) % KSW, dp = i % DP;
            if (i == KSW * DP - 2) {
              const uint32_t sPo = sP0 + ((warp ^ 1) * MT * KSW * 32 + lane) * 16;
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int k2 = 0; k2 < KSW; ++k2)
                  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                               : "=r"(po[mt][k2][0]), "=r"(po[mt][k2][1]), "=r"(po[mt][k2][2]), "=r"(po[mt][k2][3])
                               : "r"(sPo + (mt * KSW + k2) * 512));
            }
            if (i + kFwdPf < STEPS) ldsm_x4_t(fv[(i + kFwdPf) % NB], v_addr(i + kFwdPf));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const uint32_t(&a)[4] = j == 0 ? pk[mt][ks] : po[mt][ks];
              mma_16816<T>(acc_o[mt][2 * dp], a, fv[i % NB][0], fv[i % NB][1]);
              mma_16816<T>(acc_o[mt][2 * dp + 1], a, fv[i % NB][2], fv[i % NB][3]);
            }
          }
        }
      }
    }

    if (tid == 0) {
      if (nb_end <= nb_begin) nxt = take();  // (an empty walk)
      slot_store(slot, nxt);
    }
    // Epilogue: scale, round, stage through the V buffer (every warp done with V and P after the barrier), store
    // 16-byte rows. Rows past seqused are zeros. The next tile's copies in flight during it.
    __syncthreads();
    const int cur = slot;
    prefetch_next();
    slot ^= 1;
    const int le = static_cast<int>(opaque(static_cast<uint32_t>(lane)));  // (not hoisted out of the tiles' loop)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int dt = 0; dt < DTILES; ++dt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = warp_row0 + mt * 16 + le / 4 + half * 8;
          const uint32_t v = pack2<T>(acc_o[mt][dt][2 * half] * p.inv_scaling,
                                      acc_o[mt][dt][2 * half + 1] * p.inv_scaling);
          const uint32_t addr = sV0 + L::offset(row, wh * DTILES + dt) + (le % 4) * 4;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v));
        }
      }
    }
    __syncthreads();
    {
      const int eb = info(cur, 0), em0 = info(cur, 1);
      const int q_start = p.cu_seqlens_q[eb];
      const int lq_alloc = p.cu_seqlens_q[eb + 1] - q_start;
      T* og = static_cast<T*>(p.out) + (int64_t)(q_start + em0) * p.o_row_stride + info(cur, 2) * p.o_head_stride;
      const int rows_store = min(BM, lq_alloc - em0);
      constexpr int kChunks = D / 8;
      for (int idx = static_cast<int>(opaque(static_cast<uint32_t>(tid))); idx < BM * kChunks; idx += NT) {
        const int rr = idx / kChunks;
        const int c = idx % kChunks;
        if (rr < rows_store) {
          uint4 val;
          asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                       : "=r"(val.x), "=r"(val.y), "=r"(val.z), "=r"(val.w)
                       : "r"(sV0 + L::offset(rr, c)));
          *reinterpret_cast<uint4*>(og + (int64_t)rr * p.o_row_stride + c * 8) = val;
        }
      }
    }
  }
#endif
}

}  // namespace

cudaError_t run_hstu_fwd_sm80_persist_bf16_d256(const HstuParams& p, cudaStream_t stream) {
  using T = __nv_bfloat16;
  if (p.head_dim != 256 || p.num_contexts != nullptr || p.fwd_sched != nullptr || p.fwd_tile_counter == nullptr) {
    return cudaErrorNotSupported;
  }
  bool fits = false;
  cudaError_t err = fwd_sm80_fits<PTile>(fits);
  if (err != cudaSuccess) return err;
  if (!fits) return cudaErrorNotSupported;
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0) return cudaSuccess;
  int sms = 0, max_smem = 0;
  bool narrow = false;
  err = fwd_sm80_device(sms, max_smem, narrow);
  if (err != cudaSuccess) return err;
  auto kernel = hstu_fwd_persist_kernel<T>;
  constexpr int kSmem = PTile::kSmem + 48;  // (+ the two slots of the next tile, the two tiles' (b, m0, h))
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  int per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, PTile::kWarps * 32, kSmem);
  if (err != cudaSuccess) return err;
  // the default grid's chunks (launch_hstu_fwd: G = 2^lg sequences, at most 2 resident / n_m, short rows capped)
  const int64_t n_m = (p.max_seqlen_q + PTile::kBlockM - 1) / PTile::kBlockM;
  int64_t want = std::min<int64_t>(p.batch, 2 * static_cast<int64_t>(sms) * PTile::kMinBlocks / n_m);
  if (n_m <= kFwdSm80ShortTiles) want = std::min<int64_t>(want, PTile::kShortChunk);
  int lg = 0;
  while ((int64_t{2} << lg) <= want && (n_m << (lg + 1)) <= INT32_MAX) ++lg;
  const int64_t items = (n_m << lg) * ((p.batch + (int64_t{1} << lg) - 1) >> lg) * p.heads;
  const int64_t blocks = std::min<int64_t>(items, static_cast<int64_t>(sms) * std::max(per_sm, 1));
  if (items + 2 * blocks > INT32_MAX) return cudaErrorInvalidConfiguration;  // (the counter's last takes)
  err = cudaMemsetAsync(p.fwd_tile_counter, 0, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(blocks), PTile::kWarps * 32, kSmem, stream>>>(p, lg, static_cast<int>(items));
  return cudaGetLastError();
}

}  // namespace hstu
