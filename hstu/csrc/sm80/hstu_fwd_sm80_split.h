// The sm80-class forward's split of long KV ranges (host side: the device query, the split's plan and workspace).
//
// A batch whose query tiles fill a few waves of blocks (a Zipf batch of a few long and many short sequences, a few
// dense sequences) runs as long as its heaviest tiles: the causal last tile (or, with contexts, tile 0) walks
// every KV tile of the longest sequence. With the split, each query tile's walk is cut into chunks of at most
// `chunk` KV tiles, one block per chunk; a chunk of a split tile stores its fp32 accumulator (a partial) in the
// workspace and counts itself on the tile's counter; the last of the k chunks to arrive adds the k partials in chunk
// order 0, 1, ..., k - 1 (deterministic whichever arrives last) and stores the output. Tiles whose walk fits one
// chunk run as without the split. The blocks come from a work list that a one-block kernel builds on the device
// from cu_seqlens and the mask (no host sync): only the real (query tile, chunk) items, heaviest chunk first; the
// grid (heads, the list's upper bound) has its empty blocks at the end.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "common/device_info.h"
#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

// The current device's SM count, per-block opt-in shared memory and whether it is an sm86 / sm89 (compute
// capability 8.x other than 8.0: 99 KB per block, where the bigger tiles' code traps).
inline cudaError_t fwd_sm80_device(int& sms, int& max_smem, bool& narrow) {
  accel::DeviceInfo d;
  const cudaError_t err = accel::current_device_info(d);
  if (err != cudaSuccess) return err;
  sms = d.sms;
  max_smem = d.max_smem_optin;
  narrow = d.cc_major == 8 && d.cc_minor != 0;
  return cudaSuccess;
}

// HstuParams::fwd_sm80_cfg, set by the op (fwd_sm80_cfg_word) and read by the launcher (hstu_fwd_sm80_kernel.cuh):
// kernel_options(fwd_sm80_cfg=n) in the bits of kFwdSm80CfgMask, kFwdSm80NoQscale for
// kernel_options(fwd_sm80_qscale=False) (the bf16 defaults without Q scaled by alpha / 2) and kFwdSm80SplitMain for
// kernel_options(fwd_sm80_split_main=True) (the split as it was, for comparisons: the least chunk rounded up, the
// list kernel walking the sequences a second time to place the items instead of reading the first walk's tiles back
// from shared memory, the split kernel loading the list's bound before the item and Q behind the mask's setup);
// kFwdSm80NoIlv for kernel_options(fwd_sm80_interleave=False) (the bf16 D = 64 default without its interleaved
// groups: FwdSm80QregScaled instead of FwdSm80QregIlv); bits 6-7 (kFwdSm80SplitBm64Shift) for
// kernel_options(fwd_sm80_bm64=n) (the split at D = 64 / 128 in 64-row query tiles: FwdSm80SplitBm64<D, n>);
// kFwdSm80SplitPlain for kernel_options(fwd_sm80_split_plain=True) (the split synchronized as main had it: its list
// and split kernels as plain launches, a chunk's count behind full fences and its first partial's base loaded there;
// the list kernel as it was: hstu_sm80_fwd_list_kernel's MAIN).
constexpr int kFwdSm80CfgMask = 7;
constexpr int kFwdSm80NoQscale = 8;
constexpr int kFwdSm80SplitMain = 16;
constexpr int kFwdSm80NoIlv = 32;
constexpr int kFwdSm80SplitBm64Shift = 6;
constexpr int kFwdSm80SplitPlain = 256;
// kFwdSm80RabMain for kernel_options(fwd_sm80_cfg=8) (kFwdSm80CfgRabMain; the cfg bits 0, private, for comparisons):
// the bf16 defaults with rab as main had them (the rab read per element from global memory after the S MMAs), not
// FwdSm80QregRab's tiles in shared memory; the backward reads it too (hstu_bwd_sm80_kernel.cuh bwd_sm80_rab_smem)
constexpr int kFwdSm80RabMain = 2048;
constexpr int kFwdSm80CfgRabMain = 8;
// kFwdSm80RabLoadMain for kernel_options(fwd_sm80_cfg=9) (kFwdSm80CfgRabLoadMain; private, for comparisons): the
// bf16 defaults at D = 64 / 128 with rab form their rab and fragment addresses as main40 had them (FwdSm80QregRabW,
// FwdSm80QregRabF128) instead of D = 64's lane parts once per block (FwdSm80QregRabWH) and D = 128's rab pairs by
// ldmatrix (FwdSm80QregRabL128). (9 was the per-score rab add at D = 64, FwdSm80QregRabIlv, retired.)
constexpr int kFwdSm80RabLoadMain = 4096;
constexpr int kFwdSm80CfgRabLoadMain = 9;
// kFwdSm80RabTile64 for kernel_options(fwd_sm80_cfg=10) (kFwdSm80CfgRabTile64; private, for comparisons): the bf16
// default at D = 64 with rab in 128 x 64 tiles, the block's rab tile per KV tile (FwdSm80QregRabIlvMma), instead of
// FwdSm80QregRabW's 128-key tiles with each warp's rab rows per sub-tile
constexpr int kFwdSm80RabTile64 = 262144;
constexpr int kFwdSm80CfgRabTile64 = 10;
// kFwdSm80RabCopyMain for kernel_options(fwd_sm80_cfg=11) (kFwdSm80CfgRabCopyMain; private, for comparisons): the
// bf16 defaults at D = 128 / 256 with rab copy every rab tile with per-row predicates (FwdSm80QregRab<128>,
// FwdSm80PairsPfRab) instead of those inside the sequence without (FwdSm80QregRabF128, FwdSm80PairsPfRabF)
constexpr int kFwdSm80RabCopyMain = 524288;
constexpr int kFwdSm80CfgRabCopyMain = 11;
// kFwdSm80RabEvict for kernel_options(fwd_sm80_rab_evict=True) (opt-in while it is measured): the bf16 defaults with
// rab (FwdSm80QregRabWH, FwdSm80QregRabL128, FwdSm80PairsPfRabF) with an L2 evict-first policy on their rab copies
// without predicates (FwdSm80QregRabWHE, FwdSm80QregRabL128E, FwdSm80PairsPfRabFE)
constexpr int kFwdSm80RabEvict = 1048576;
constexpr int fwd_sm80_cfg_word(int cfg, bool qscale, bool split_main = false, bool ilv = true, int bm64 = 0,
                                bool split_plain = false, bool rab_evict = false) {
  return (cfg == kFwdSm80CfgRabMain       ? kFwdSm80RabMain
          : cfg == kFwdSm80CfgRabLoadMain ? kFwdSm80RabLoadMain
          : cfg == kFwdSm80CfgRabTile64   ? kFwdSm80RabTile64
          : cfg == kFwdSm80CfgRabCopyMain ? kFwdSm80RabCopyMain
                                          : cfg & kFwdSm80CfgMask) |
         (qscale ? 0 : kFwdSm80NoQscale) |
         (split_main ? kFwdSm80SplitMain : 0) | (ilv ? 0 : kFwdSm80NoIlv) | (bm64 & 3) << kFwdSm80SplitBm64Shift |
         (split_plain ? kFwdSm80SplitPlain : 0) | (rab_evict ? kFwdSm80RabEvict : 0);
}
// kernel_options(fwd_sm80_bm64=n) from HstuParams::fwd_sm80_cfg: 0 none, 1 / 2 (FwdSm80SplitBm64)
constexpr int fwd_sm80_bm64(int cfg_word) { return (cfg_word >> kFwdSm80SplitBm64Shift) & 3; }

// kernel_options(fwd_sm80_cfg=7): the bf16 default tile (D = 256 the warp pairs, 128 candidate 2, 64 candidate 1)
// with the split where the plan splits, as the default (kernel_options(fwd_split_tiles=n): chunks of at most n KV
// tiles; 0: none).
constexpr int kFwdSm80CfgSplit = 7;
// The split's tile per head dim: query rows BM, keys per KV tile BN, blocks per SM (FwdSm80Candidate: checked there);
// bm64 (fwd_sm80_bm64, D = 64 / 128): 64 x 64 tiles, 1 (and 2 at D = 128): 4 warps, 2 per SM; 2 (D = 64): 2 warps,
// 4 per SM (FwdSm80SplitBm64).
struct FwdSm80SplitTile {
  int bm, bn, minb;
};
constexpr FwdSm80SplitTile fwd_sm80_split_tile(int head_dim, int bm64 = 0) {
  return head_dim == 256 || bm64 == 1 || (bm64 == 2 && head_dim != 64) ? FwdSm80SplitTile{64, 64, 2}
         : bm64 == 2                                                    ? FwdSm80SplitTile{64, 64, 4}
         : head_dim == 128                                              ? FwdSm80SplitTile{128, 64, 2}
                                                                        : FwdSm80SplitTile{128, 128, 2};
}
// The rule's smallest chunk: a chunk costs one more Q load, prologue and partial (about one KV tile's work).
constexpr int kFwdSm80SplitMinChunk = 4;

struct FwdSm80Split {
  int chunk = 0;              // KV tiles per chunk (the least where not exact); 0: no split
  bool exact = false;         // kernel_options(fwd_split_tiles=n): chunks of n KV tiles; else the list's kernel
                              // raises chunk to the mean work per block slot of the real walks
  int ns = 1;                 // chunks of the longest walk (at most)
  int64_t slots = 0;          // query tile slots: total_q / BM + batch (q_start / BM + b + m0 / BM is unique)
  int64_t items = 0;          // the work list's upper bound: slots x ns (grid y)
  int64_t counter_bytes = 0;  // one int per (slot, head), zeroed by the list's kernel, then each split tile's first
                              // partial per slot (256-aligned)
  int64_t list_bytes = 0;     // the work list: a 32-byte header, then 32 bytes per item (256-aligned)
  int64_t partials = 0;       // BM x D fp32 partials: slots x heads x ns for exact chunks, at most 2 x resident
                              // for the rule's (fwd_sm80_split_partials)
  int64_t bytes = 0;          // counters + list + partials
};

// The counters' and the split tiles' first partials' bytes (the work list follows them): one int per query tile
// slot and head, then one per slot, 256-aligned.
__host__ __device__ inline int64_t fwd_sm80_split_counter_bytes(int64_t slots, int heads) {
  return (slots * (heads + 1) * 4 + 255) / 256 * 256;
}

// The partials of a split (host values): the list's kernel gives each split query tile k consecutive partials per
// head (its k chunks). With exact chunks (resident 0) at most slots x heads x ns. With the rule's (resident block
// slots): the device's chunk is at least the real walks' work W (KV tiles, all query tiles) x heads / resident, and
// a split tile's k = ceil(steps / chunk) < 2 steps / chunk (steps > chunk), so the split tiles' chunks over the heads
// number below 2 W heads / chunk <= 2 resident, however long or many the sequences.
inline int64_t fwd_sm80_split_partials(int64_t slots, int heads, int64_t ns, int64_t resident) {
  const int64_t all = slots * heads * ns;
  return resident > 0 ? std::min<int64_t>(all, 2 * resident) : all;
}

// The workspace of chunks of `chunk` KV tiles (host values only; resident: the rule's block slots, 0 for exact
// chunks): counters and first partials | list | partials.
inline FwdSm80Split fwd_sm80_split_layout(const HstuParams& p, FwdSm80SplitTile t, int64_t chunk, int64_t resident) {
  FwdSm80Split s;
  const int64_t n_kv = (int64_t{p.max_seqlen_k} + t.bn - 1) / t.bn;
  s.chunk = static_cast<int>(chunk);
  s.ns = static_cast<int>((n_kv + chunk - 1) / chunk);
  s.slots = p.total_q / t.bm + p.batch;
  s.items = s.slots * s.ns;
  s.counter_bytes = fwd_sm80_split_counter_bytes(s.slots, p.heads);
  s.list_bytes = ((s.items + 1) * 32 + 255) / 256 * 256;
  s.partials = fwd_sm80_split_partials(s.slots, p.heads, s.ns, resident);
  s.bytes = s.counter_bytes + s.list_bytes + s.partials * t.bm * p.head_dim * 4;
  return s;
}

// The split of a forward with tiles `t` on a device with `sms` SMs (host values only). p.fwd_split_tiles: -1 never,
// n > 0 chunks of at most n KV tiles, else the rule: chunks of the mean work per block slot of the real walks (the
// list's kernel counts them on the device), at least half the mean work per block slot if every query tile walked
// as far as the longest sequence's (dense causal: half the mean; shorter sequences make it an over-estimate) and
// kFwdSm80SplitMinChunk: that least chunk sizes the workspace and the grid, and no split where it (rounded up)
// reaches the longest walk (from about four waves of query tiles on: balanced batches; below, the device's chunk
// leaves the tiles of a balanced batch whole); as the device's floor it is rounded down (above the real mean it sets
// the chunk: one KV tile more cost the Zipf batch 4-8 % at D = 64). No split where the list's bound exceeds the
// grid's y limit (forced short chunks on long batches).
inline FwdSm80Split fwd_sm80_split_plan(const HstuParams& p, FwdSm80SplitTile t, int sms) {
  if (p.fwd_split_tiles == -1 || p.batch <= 0 || p.heads <= 0 || p.max_seqlen_q <= 0 || p.max_seqlen_k <= 0)
    return {};
  const int64_t n_m = (int64_t{p.max_seqlen_q} + t.bm - 1) / t.bm;
  const int64_t n_kv = (int64_t{p.max_seqlen_k} + t.bn - 1) / t.bn;
  const int64_t tiles = std::min<int64_t>(int64_t{p.batch} * n_m, p.total_q / t.bm + p.batch);
  int64_t chunk = p.fwd_split_tiles;
  if (chunk <= 0) {
    const int64_t blocks = tiles * p.heads, resident = int64_t{sms} * t.minb;  // (chunk >= n_kv past ~4 waves)
    const int64_t half = blocks * (n_kv + 1) / 2;
    chunk = std::max<int64_t>(kFwdSm80SplitMinChunk, (half + 2 * resident - 1) / (2 * resident));
    if (chunk >= n_kv) return {};
    if (!(p.fwd_sm80_cfg & kFwdSm80SplitMain)) chunk = std::max<int64_t>(kFwdSm80SplitMinChunk, half / (2 * resident));
  }
  if (chunk >= n_kv || n_kv >= 32768) return {};  // (the list's items hold KV tile indices in 15 bits)
  FwdSm80Split s = fwd_sm80_split_layout(p, t, chunk, p.fwd_split_tiles > 0 ? 0 : int64_t{sms} * t.minb);
  s.exact = p.fwd_split_tiles > 0;
  return s.items <= 65535 ? s : FwdSm80Split{};
}

// The op's plan of the split for the sm80-class forward (bf16 at D = 64 / 128 / 256: the default and
// kernel_options(fwd_sm80_cfg=7)); bytes 0: no split. The op sets p.fwd_sched to the workspace and
// p.fwd_split_tiles to the chunk, negated where not exact (the least chunk); the launcher reads both
// (fwd_sm80_split_layout).
inline FwdSm80Split fwd_sm80_split_for(const HstuParams& p) {
  const int cfg = p.fwd_sm80_cfg & kFwdSm80CfgMask;
  if ((cfg != 0 && cfg != kFwdSm80CfgSplit) ||
      (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256))
    return {};
  int sms = 0, max_smem = 0;
  bool narrow = false;
  if (fwd_sm80_device(sms, max_smem, narrow) != cudaSuccess) return {};
  return fwd_sm80_split_plan(p, fwd_sm80_split_tile(p.head_dim, fwd_sm80_bm64(p.fwd_sm80_cfg)), sms);
}

}  // namespace hstu
