// Launcher declarations for the Hopper (sm_90a) HSTU kernels (host side; no torch headers).
//
// run_hstu_fwd_sm90<T, D> is defined in hstu_fwd_sm90_launch.cuh and explicitly instantiated once per (dtype, head
// dim) by a .cu file compiled for sm_90a only (see docs/archive/hstu_sm90_log.md). Same HstuParams as the sm80 kernels, plus the number
// of key/value rows (total_k, the row extent of the K/V tensor maps), which HstuParams does not carry.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

// Jagged work lists (hstu_sm90_work_list.cuh; docs/archive/hstu_sm90_log.md): layout of the workspace the op
// allocates (uninitialized) when `bytes > 0`; 0 means the kernel keeps its grid order. Host arithmetic only.
struct Sm90SchedLayout {
  int64_t capacity = 0;   // work items (units + extra chunks); the grid is capacity * H CTAs
  int64_t max_parts = 0;  // fp32 partials (part_bytes each) over all split units, chunks and heads
  int64_t items = 0, counters = 0, parts = 0;  // byte offsets (a 16-byte header with the item count is at 0)
  int64_t bytes = 0;
};

// `units`: an upper bound of the units over all sequences; partials of part_bytes, part_budget bytes of them at most
// (0: a list that never splits a unit).
inline Sm90SchedLayout hstu_sm90_sched_layout(int64_t units, int64_t heads, int64_t part_bytes,
                                              int64_t part_budget = int64_t{16} << 20) {
  Sm90SchedLayout l;
  l.max_parts = part_budget / part_bytes;  // (128 at D = 256 with 16 MB)
  l.capacity = units + l.max_parts / heads;         // each split unit of k chunks adds k - 1 items, k * H parts
  if (l.capacity * heads >= (int64_t{1} << 31)) return Sm90SchedLayout{};
  l.items = 16;
  l.counters = l.items + 32 * l.capacity * heads;  // (grid-order lists: an item per unit and head)
  l.parts = (l.counters + 4 * l.max_parts + 255) / 256 * 256;
  l.bytes = l.parts + l.max_parts * part_bytes;
  return l;
}

// The kernels keep their grid (blocks x H x B CTAs) where a list would not pay for its planner: dense lengths (every
// sequence has max_seqlen_q queries and max_seqlen_k keys, no seqused), at most one wave (kSm90ListMinCtas, an H100's
// SMs: nothing to order), or at least half of the grid's CTAs have work (`units`, an upper bound of the units;
// measured: lengths 1K-4K, B16, the lists 3-8 % slower than the grids, docs/archive/hstu_sm90_log.md). The forward
// makes one exception, short causal grids of long sequences (hstu_fwd_sm90_sched_layout).
constexpr int64_t kSm90ListMinCtas = 132;
inline bool hstu_sm90_keep_grid(const HstuParams& p, int64_t total_k, int64_t blocks, int64_t units) {
  const int64_t grid = blocks * p.batch;
  return grid * p.heads <= kSm90ListMinCtas || 2 * units > grid ||
         (p.seqused_q == nullptr && p.seqused_k == nullptr && p.total_q == int64_t{p.batch} * p.max_seqlen_q &&
          total_k == int64_t{p.batch} * p.max_seqlen_k);
}

// The forward's: units = query tiles of 128 rows (sum over b of ceil(L_b / 128) <= total_q / 128 + B, and at most B *
// m_blocks, the grid's), partials 128 x D fp32. Short grids of long sequences under a causal mask (keys bounded on the
// right only, contexts and targets allowed; at most kSm90FwdShortGridCtas CTAs, at least kSm90FwdShortGridBlocks query
// tiles) take the list for dense lengths too: the last query tiles' KV ranges (about twice the average) set the grid's
// time, and the list splits them (a left window bounds every range: nothing to split, only the planner to pay).
// Measured on the H100 (D = 256 / 128, us, grid -> list): B1 S2K 48.7 -> 41.0, B2 S4K 147 -> 126 / 83.4 -> 74.0, B1 S8K
// 253 -> 215 / 142 -> 120; B1 S4K D256 a tie; shorter sequences (B2 S1820, B4 S1K, S512) 15-50 % slower (the planner
// and more CTAs for little work), hence the 16 tiles (docs/archive/hstu_sm90_log.md).
// Few queries over long keys (a cached inference step of few users: B1, 384 new tokens, H4 is 12 CTAs on 132 SMs,
// each over ~34 KV tiles) take the list too under a causal mask without rab: a grid of at most kSm90FwdFewQueryCtas
// CTAs (half an H100's SMs) over max_seqlen_k >= kSm90FwdShortGridBlocks tiles of 128 keys; the list splits those
// ranges (docs/hstu_inference.md; the rule hstu_attn._paged applied by raising max_seqlen_q to 16 tiles before).
constexpr int64_t kSm90FwdShortGridCtas = 264;
constexpr int64_t kSm90FwdShortGridBlocks = 16;
constexpr int64_t kSm90FwdFewQueryCtas = 66;
// splits = false (the FP8 forward, hstu_fwd_fp8_sm90_launch.cuh): a list that only orders the query tiles (no
// partials, so the outputs do not depend on it), taken for jagged batches alone (the short-grid and few-query cases
// gain from the splits only).
inline Sm90SchedLayout hstu_fwd_sm90_sched_layout(const HstuParams& p, int64_t total_k, bool splits = true) {
  const int64_t B = p.batch, H = p.heads, D = p.head_dim, BM = 128;
  if (B <= 0 || H <= 0 || p.max_seqlen_q <= 0 || p.total_q <= 0 || (D != 64 && D != 128 && D != 256)) return {};
  const int64_t m_blocks = (p.max_seqlen_q + BM - 1) / BM;
  const int64_t units = std::min((p.total_q + BM - 1) / BM + B, B * m_blocks);
  const bool causal = p.window_right >= 0 && p.window_left < 0;
  const bool short_grid =
      splits && causal && m_blocks >= kSm90FwdShortGridBlocks && m_blocks * B * H <= kSm90FwdShortGridCtas;
  const bool few_queries = splits && causal && p.rab == nullptr && m_blocks * B * H <= kSm90FwdFewQueryCtas &&
                           p.max_seqlen_k >= kSm90FwdShortGridBlocks * BM;
  if (!short_grid && !few_queries && hstu_sm90_keep_grid(p, total_k, m_blocks, units)) return {};
  return hstu_sm90_sched_layout(units, H, BM * D * 4, splits ? int64_t{16} << 20 : 0);
}

// The D = 256 backward's (no rab): units = key blocks of 64 keys (at most total_k / 64 + B, and B * nblk),
// partials fp32 dK and dV of 64 keys x 256 columns (128 KB).
inline Sm90SchedLayout hstu_bwd_sm90_sched_layout(const HstuParams& p, int64_t total_k) {
  const int64_t B = p.batch, H = p.heads, BN = 64;
  if (p.head_dim != 256 || p.rab != nullptr || B <= 0 || H <= 0 || p.max_seqlen_k <= 0 || total_k <= 0) return {};
  const int64_t nblk = (p.max_seqlen_k + BN - 1) / BN;
  const int64_t units = std::min(total_k / BN + B, B * nblk);
  if (hstu_sm90_keep_grid(p, total_k, nblk, units)) return {};
  return hstu_sm90_sched_layout(units, H, BN * 256 * 2 * 4);
}

// Forward on the caller's stream. Requirements (validated by the op): q/k/v last dim contiguous, data pointers
// 16-byte aligned, row/head strides multiples of 8 elements, D in {64, 128, 256}
// (instantiated ones), p.total_q = rows of q. At D <= 128 without rab, grids of more than one wave run as
// persistent CTAs where p.fwd_tile_counter is set (FwdPlan::tile_counter), else one CTA per query tile.
template <typename T, int D>
cudaError_t run_hstu_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream);

// The D = 128 backward with a right window (causal, local; no rab) runs its works in a longest-first 1-D order in
// groups of gp (batch, head) pairs (hstu_bwd_sm90_kernel.cuh, kLpt); the other kernels in the (key block, head, batch)
// grid, where gp pairs are about as many CTAs. The D = 64 / 128 kernels (with or without rab) zero their own dq
// workspace: the launcher zeroes the first gp pairs' rows (and the rows outside the sequences), and every CTA of pair P
// zeroes its share of the 128-row chunks of pair P + gp (a group later; still in L2 when they are reduced into) with
// its otherwise idle producer warp 1, then flags them; a CTA waits for a chunk's flag before its first reduce-add into
// it. Instead of a fill of the whole workspace through HBM (docs/archive/hstu_sm90_log.md). The D = 128 kernel with a
// right window also converts pair P's rows into dq in the CTAs of pair P + 2 gp (p.dq_conv_behind; its words follow the
// flags). Returns the number of words the op appends to dq_accum (then allocated uninitialized, p.dq_zero_flags
// pointing behind the (total_q, H, D) floats), or 0: a zeroed dq_accum.
constexpr int kBwdSm90LptPairs = 16;  // BwdSm90Traits<D>::kLptPairs / kLptCtas (asserted in the launcher)
constexpr int kBwdSm90LptCtas = 128;
// Keys per CTA of the backward (BwdSm90Traits<D>::kBlockN): 64 for the split-D kernel (D = 256), else 128.
inline int hstu_bwd_sm90_block_n(int head_dim) { return head_dim == 256 ? 64 : 128; }
inline int hstu_bwd_sm90_lpt_pairs(int max_seqlen_k, int block_n) {
  const int nblk_k = (max_seqlen_k + block_n - 1) / block_n;
  return std::max(1, std::min(kBwdSm90LptPairs, kBwdSm90LptCtas / nblk_k));
}
inline int64_t hstu_bwd_sm90_dq_zero_words(const HstuParams& p) {
  if ((p.head_dim != 64 && p.head_dim != 128) || p.batch <= 0 ||
      p.heads <= 0 || p.max_seqlen_q <= 0 || p.max_seqlen_k <= 0 || p.total_q <= 0) {
    return 0;
  }
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads;
  const int gp = hstu_bwd_sm90_lpt_pairs(p.max_seqlen_k, hstu_bwd_sm90_block_n(p.head_dim));
  if (pairs <= gp) return 0;  // one group: the launcher's zeroing would be the whole fill anyway
  // zero flags (pairs - gp) x nq, then the converted-behind words (hstu_bwd_sm90_kernel.cuh: bwd_dq_done_words,
  // bwd_dq_list_words): pairs + 1 + (pairs - gp) x nq x 8
  const int64_t words = (pairs - gp) * ((p.max_seqlen_q + 127) / 128) * 9 + pairs + 1;
  // Flags per 128 rows of the longest sequence, for every pair: for very uneven lengths (many short sequences and
  // a long one) they could outgrow the workspace; then a zeroed workspace (kernel indices are 32-bit too).
  if (words * 64 > p.total_q * p.heads * p.head_dim || words >= (int64_t{1} << 31)) return 0;
  return words;
}

// Grid order of the D = 256 backward (p.bwd_grid; 0 resolves here): (head, key block, batch) when the mask bounds
// the keys on the right (causal, local: key block 0 has the most query tiles) and either one batch's Q and dO
// (heads x max_seqlen_q x D x 4 bytes, read by all its CTAs) fit in kBwdSm90HeadsFirstBytes of L2 or the grid is
// at most kBwdSm90HeadsFirstCtas CTAs (about 24 waves: there the tail the order shortens outweighs the L2 locality);
// else (key block, head, batch), which keeps one head's CTAs together (docs/archive/hstu_sm90_log.md).
constexpr int64_t kBwdSm90HeadsFirstBytes = int64_t{24} << 20;
constexpr int64_t kBwdSm90HeadsFirstCtas = 3072;
inline bool hstu_bwd_sm90_heads_first(const HstuParams& p) {
  const int64_t nblk = (p.max_seqlen_k + 63) / 64;
  if (p.head_dim != 256 || nblk > 65535) return false;
  if (p.bwd_grid != 0) return p.bwd_grid == 2;
  return p.window_right >= 0 &&
         (static_cast<int64_t>(p.heads) * p.max_seqlen_q * p.head_dim * 4 <= kBwdSm90HeadsFirstBytes ||
          nblk * p.heads * p.batch <= kBwdSm90HeadsFirstCtas);
}

// Floats of the fp32 dq workspace the Hopper backward needs: (total_q, H, D) for D = 64 / 128; for D = 256 the
// 16-row groups of hstu_bwd_sm90_kernel.cuh (dq_red_tiled_block: every sequence padded to whole groups, at most
// total_q / 16 + B + 1 groups, + 3 for the last tile's warps past the last sequence), never smaller than
// (total_q, H, D), so a zeroed workspace of this size also serves the sm80-class fallback. The zeroing flags
// (hstu_bwd_sm90_dq_zero_words) go behind these floats.
inline int64_t hstu_bwd_sm90_dq_accum_floats(const HstuParams& p) {
  const int64_t rows = p.head_dim == 256 ? (p.total_q / 16 + p.batch + 4) * 16 : p.total_q;
  return rows * p.heads * p.head_dim;
}

// Backward (dq, dk, dv) on the caller's stream, defined in hstu_bwd_sm90_launch.cuh. Same requirements as the
// forward plus dout/dq/dk/dv set in p; p.dq_accum: fp32 workspace of hstu_bwd_sm90_dq_accum_floats floats, zeroed
// by the caller unless p.dq_zero_flags is set as hstu_bwd_sm90_dq_zero_words says or p.bwd_sched is set
// (hstu_bwd_sm90_sched_layout; the launcher zeroes it) (the launcher converts it into p.dq for all total_q rows);
// with rab, drab into p.drab when set (a shared rab with H > 1 through p.drab_accum, fp32, zeroed by the caller,
// converted by the launcher). Returns
// cudaErrorNotSupported (fall back to the sm80-class backward) when p.dq_accum == nullptr or p.drab_heads is set
// (deterministic mode), or for D not in {64, 128, 256}.
template <typename T, int D>
cudaError_t run_hstu_bwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream);

}  // namespace hstu
