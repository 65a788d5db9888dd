// The sm80-class backward's split of long key-block walks (issue 39, kernel_options(fwd_sm80_cfg=14)): the layout of
// its workspace, shared by the op (hstu/csrc/ops/hstu_ops.cc, which allocates it) and the launcher
// (hstu_bwd_sm80_split.cuh); host-only, no CUDA headers.
//
// A key block's CTA walks every query tile that sees its keys; under a causal mask the longest sequence's block 0
// walks them all, and on a jagged batch that one walk bounds the kernel (docs/hstu_kernel_notes.md, "The portable
// backward's split of long key-block walks"). With the split a list kernel on the device lists every key block of
// the call, cuts the walks longer than a chunk of L query tiles into nc = ceil(n / L) chunks, and orders the items
// by their length (heaviest first); the backward runs one CTA per (item, head). A split block's chunks write fp32
// dK / dV partials into slots; the last of them to finish (a counter) sums the slots in chunk order (deterministic)
// and stores dK / dV. dQ is unchanged (the fp32 atomics of every tile pair).
#pragma once

#include <cstdint>

namespace hstu {

// HstuParams::fwd_sm80_cfg bit (above the forward's bits and kBwdSm80DrabZeroed, 8192) set by the op for
// kernel_options(fwd_sm80_cfg=14) (kFwdSm80CfgBwdSplit): the backward's split (the forward runs its default).
constexpr int kBwdSm80SplitWalk = 131072;
constexpr int kFwdSm80CfgBwdSplit = 14;
// The least chunk (query tiles): shorter walks cost their CTA's fixed part (K / V, the prologue, the epilogue) more
// than they save.
constexpr int kBwdSplitMinChunk = 4;

// The workspace: a 256-byte header (count of items, L, slots used), the counters (one int per (slot, head): a split
// block's first slot), the slots (per (slot, head) a CTA's dK / dV accumulators, BN x D x 2 floats), then the list
// (int4 items (b, key block, chunk | chunks << 16, first slot)). cap: the list's bound, (total_k / BN + batch) key
// blocks plus the extra chunks, which the list kernel keeps under 2 x slots / heads (its L >= work / (2 x slots /
// heads)); a split block takes nc <= 2 (nc - 1) slots.
struct BwdSplitLayout {
  int64_t cap = 0;        // items
  int64_t slot_cap = 0;   // slots a head
  int64_t counters = 0;   // byte offsets
  int64_t slots = 0;
  int64_t list = 0;
  int64_t bytes = 0;
};
inline int64_t bwd_split_round256(int64_t x) { return (x + 255) / 256 * 256; }
// ctas: the grid's resident CTAs (SMs x CTAs per SM); bn / d: the kernel's key block and head dim.
inline BwdSplitLayout bwd_split_layout(int64_t total_k, int64_t batch, int64_t heads, int bn, int d, int ctas) {
  BwdSplitLayout l;
  const int64_t extra = (2 * static_cast<int64_t>(ctas) + heads - 1) / heads;
  l.cap = (total_k + bn - 1) / bn + batch + extra;
  l.slot_cap = 2 * extra;
  l.counters = 256;
  l.slots = l.counters + bwd_split_round256(l.slot_cap * heads * 4);
  l.list = l.slots + l.slot_cap * heads * bn * d * 2 * 4;
  l.bytes = l.list + l.cap * 16;
  return l;
}
// The list's bound from the workspace's bytes (the launcher does not know total_k): the same layout, read back.
inline int64_t bwd_split_cap_from_bytes(int64_t bytes, int64_t heads, int bn, int d, int ctas) {
  const BwdSplitLayout l = bwd_split_layout(0, 0, heads, bn, d, ctas);
  return bytes > l.list ? (bytes - l.list) / 16 : 0;
}
// The key block of the split's kernels at head dim d (BwdPdsConfig: 128 keys at D = 64 / 128, 64 at D = 256); 0: no
// split at that head dim.
constexpr int bwd_split_block_n(int d) { return d == 64 || d == 128 ? 128 : d == 256 ? 64 : 0; }

// The split by default (kernel_options(bwd_sm80_split=False) turns it off): where the call's key blocks x heads
// fill less than two waves of the SMs (one CTA an SM: the grid cannot balance itself) and the longest sequence walks
// at least 8 query tiles (its block 0 then bounds the kernel); at D = 256 only on jagged batches (dense, its split
// kernel was 1.11x slower: nothing to balance and the context twin's spills). Host values only (total_k = k's rows;
// a batch is dense when total_k fills batch x max_seqlen_k). Measured in session 36 (H200, H4): the Zipf backward
// 0.61x / 0.60x / 0.75x the time at D = 64 / 128 / 256, B1 S8K 0.70x, B8 S1K 0.85-0.88x, B4 S2K D = 128 0.80x, but
// D = 64 B4 S2K 1.045x (docs/hstu_kernel_notes.md).
inline bool bwd_split_default(int64_t total_k, int64_t batch, int64_t heads, int64_t max_seqlen_q,
                              int64_t max_seqlen_k, int d, int sms) {
  const int bn = bwd_split_block_n(d);
  if (bn == 0 || sms <= 0 || total_k <= 0) return false;
  const int64_t bm = d == 64 ? 128 : 64;  // the loops' query tile (D = 64: the 128-row tiles)
  if (max_seqlen_q < 8 * bm) return false;
  if (d == 256 && total_k >= batch * max_seqlen_k) return false;
  return (total_k + bn - 1) / bn * heads < 2 * static_cast<int64_t>(sms);
}

}  // namespace hstu
