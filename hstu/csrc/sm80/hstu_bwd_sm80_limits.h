// Grid limits of the sm80-class backward of FlashAttention-2's warp layout (hstu_bwd_sm80_pds_kernel.cuh), shared
// by its launcher and the op's plan (hstu/csrc/ops/hstu_plan.h): host-only constants, no CUDA headers.
#pragma once

#include <cstdint>

namespace hstu {

// The launcher puts a sequence's key blocks in gridDim.y (at most 65535), so a call takes at most 65535 blocks of
// its smallest kBlockN, 64 keys (the D = 256 and 4-warp D = 128 tiles; launch_hstu_bwd_pds asserts every tile is at
// least that wide and refuses a grid over the limit).
constexpr int64_t kBwdSm80MaxKeyBlocks = 65535;
constexpr int64_t kBwdSm80MinBlockN = 64;

}  // namespace hstu
