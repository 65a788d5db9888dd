// The KV tiles a Hopper forward query tile visits (the bf16 and FP8 forwards and the work-list planner).
#pragma once

#include "hstu/csrc/common/hstu_common.cuh"

namespace hstu {
namespace sm90 {

// KV tiles (of BN keys) that query tile m0 (BM rows) of a sequence must visit: [nb_begin, nb_end) less the masked
// gap [gap_end - gap_len, gap_end) between its history and its target group (gap_len = 0: none; SeqMask::key_tiles);
// empty (0, 0) when no row is used or every key is masked. The Hopper forwards (bf16 and FP8) walk them from the
// last down: the i-th is fwd_kv_tile(nb_end, gap_end, gap_len, i). The bf16 one packs the gap into one word
// (fwd_gap_word: 16 bits each), so it is not skipped past 65535 tiles (4M keys). Shared by the kernels and the
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

}  // namespace sm90
}  // namespace hstu
