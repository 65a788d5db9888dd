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

// The fp32 dQ workspace of the sm80-class backward at head dim D: (total_q, H, D) row-major; at D = 64 / 128 / 256 it
// has room for the fragment-ordered layout of the 8-warp kernels (hstu_bwd_sm80_pds_kernel.cuh, DqFrag): per head, each
// sequence padded by kBwdSm80DqFragPad rows (H, total_q + 64 B, D), and one word behind it (the layout's flag).
constexpr int64_t kBwdSm80DqFragPad = 64;
inline int64_t bwd_sm80_dq_floats(int64_t total_q, int64_t batch, int64_t heads, int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) return total_q * heads * head_dim;
  return (total_q + kBwdSm80DqFragPad * batch) * heads * head_dim + 4;
}

// bwd_sm80_cfg 14 at D = 128 (bf16): the fp32 dQ workspace left uninitialized and zeroed beside the backward kernel
// (hstu_dq_zero_beside_kernel on a few SMs while the kernel runs on the rest, a flag word per (sequence, head) behind
// the workspace) instead of a fill before it. The launcher zeroes the whole workspace itself where that path does not
// apply (hstu_bwd_sm80_kernel.cuh bwd_sm80_zero_beside).
constexpr int kBwdSm80ZeroBesideCfg = 14;
// 15 at D = 128 (bf16): 14 with the dQ convert behind the loop as a programmatic dependent launch, the last sequences
// first (their workspace lines still in L2), each line dropped from L2 once read (never written back).
constexpr int kBwdSm80ZeroConvCfg = 15;
inline int64_t bwd_sm80_zero_words(int64_t batch, int64_t heads) { return (batch * heads + 3) / 4 * 4; }

}  // namespace hstu
