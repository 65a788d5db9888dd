// Grid limits and the dQ workspace size of the sm80-class backward (FlashAttention-2's warp layout:
// hstu_bwd_sm80_pds_kernel.cuh), shared by its launcher and the op's plan (hstu/csrc/ops/hstu_plan.h): host-only, no
// CUDA headers.
#pragma once

#include <cstdint>

namespace hstu {

// The launcher puts a sequence's key blocks in gridDim.y (at most 65535), so a call takes at most 65535 blocks of
// its smallest kBlockN, 64 keys (the D = 256 and 4-warp D = 128 tiles; launch_hstu_bwd_pds asserts every tile is at
// least that wide and refuses a grid over the limit).
constexpr int64_t kBwdSm80MaxKeyBlocks = 65535;
constexpr int64_t kBwdSm80MinBlockN = 64;

// The drab contract between the op and the sm80-class backward (hstu/csrc/ops/hstu_ops.cc, run_hstu_bwd): the op
// allocates a per-head drab uninitialized, and the launcher either runs a kernel that writes every element of it
// (the rab-through-shared-memory loops, kPdsRabSmem: zeros where their walk stores no dS) or zeroes it first.
// kBwdSm80DrabZeroed, a bit of HstuParams::fwd_sm80_cfg (above its forward bits) set by the op for
// kernel_options(fwd_sm80_cfg=15) (kFwdSm80CfgDrabMain; private, for comparisons): the op zeroed drab itself and the
// kernels store only the dS of their walk (main's path).
constexpr int kBwdSm80DrabZeroed = 8192;
constexpr int kFwdSm80CfgDrabMain = 15;
// kBwdSm80DrabLsu, a bit of HstuParams::fwd_sm80_cfg set by the op for kernel_options(fwd_sm80_cfg=12)
// (kFwdSm80CfgDrabLsu; private, for comparisons): the rab loops store drab's zeros as 16-byte st.global per lane
// (main's path), not as bulk copies of a zeroed shared row (hstu_bwd_sm80_pds_kernel.cuh kPdsDrabBulk).
constexpr int kBwdSm80DrabLsu = 16384;
constexpr int kFwdSm80CfgDrabLsu = 12;

// kBwdSm80DqClaim, a bit of HstuParams::fwd_sm80_cfg (above its forward bits and kBwdSm80DrabZeroed) set by the op
// for kernel_options(fwd_sm80_cfg=13) (kFwdSm80CfgDqClaim; private, opt-in while it is measured) where the sm80-class
// family runs: the op allocates the dQ workspace uninitialized with bwd_sm80_dq_claim_words claim words behind it
// (p.dq_zero_flags); the launcher zeroes those (and the layout's flag word) and runs the heads-first D = 128 / 256
// loop with its dQ claims (hstu_bwd_sm80_pds_kernel.cuh kPdsDqClaim: the first writer of a block stores it, the
// others add), or zeroes the whole workspace and clears the bit where that loop does not apply.
constexpr int kBwdSm80DqClaim = 65536;
constexpr int kFwdSm80CfgDqClaim = 13;

// The fp32 dQ workspace of the sm80-class backward at head dim D: (total_q, H, D) row-major; at D = 64 / 128 / 256 it
// has room for the fragment-ordered layout of the 8-warp kernels (hstu_bwd_sm80_pds_kernel.cuh, DqFrag): per head, each
// sequence padded by kBwdSm80DqFragPad rows (H, total_q + 64 B, D), and one word behind it (the layout's flag).
constexpr int64_t kBwdSm80DqFragPad = 64;
inline int64_t bwd_sm80_dq_floats(int64_t total_q, int64_t batch, int64_t heads, int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) return total_q * heads * head_dim;
  return (total_q + kBwdSm80DqFragPad * batch) * heads * head_dim + 4;
}

// kBwdSm80DqClaim's claim words: one per workspace row of the fragment-ordered layout (H, total_q + 64 B); the word
// of row m0 + w belongs to warp w's block of the 64-row tile at m0.
inline int64_t bwd_sm80_dq_claim_words(int64_t total_q, int64_t batch, int64_t heads) {
  return (total_q + kBwdSm80DqFragPad * batch) * heads;
}

}  // namespace hstu
