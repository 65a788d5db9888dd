// Which kernels run for one call: one plan per direction, made once from the params, the device and the options.
// The op allocates what the plan asks for and runs it; launchers only launch (host side; no torch headers).
#pragma once

#include <cstdint>
#include <string>

#include "hstu/csrc/common/hstu_launch.h"
#include "common/device_info.h"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm80/hstu_bwd_sm80_limits.h"
#include "hstu/csrc/sm80/hstu_fwd_sm80_split.h"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"

namespace hstu {

// Comparison switches, packed in an int64 by the private ops `hstu_attn::fwd_with_options` / `bwd_with_options`
// (hstu/_ops.py kernel_options packs the same bits; tests/hstu/test_api.py checks both agree). 0 is the product.
enum HstuOptionBits : int64_t {
  kOptNoSm90 = 1 << 0,          // the sm80-class kernels even where the Hopper ones apply
  kOptNoFwdWorkList = 1 << 1,   // Hopper forward (bf16 / fp16; FP8 under kOptFp8Sched): grid order for jagged
                                // batches too
  kOptNoFwdPersist = 1 << 2,    // Hopper forward D <= 128 (bf16 / fp16; FP8 under kOptFp8Sched): one CTA per query
                                // tile instead of persistent CTAs
  kOptNoBwdWorkList = 1 << 3,   // Hopper backward D = 256: grid order for jagged batches too
  kOptNoDqSelfZero = 1 << 4,    // Hopper backward D = 64 / 128: a zeroed dq workspace instead of self-zeroing
  kOptNoDqConvBehind = 1 << 5,  // Hopper backward D = 128 causal / local: a separate dq conversion pass
  kOptBwdSm80Pair = 1 << 6,     // sm80-class backward D = 256: warp pairs splitting D (BwdSm80PairConfig) instead of
                                // two column chunks recomputing S and dP (BwdSm80Config). Opt-in until its GPU tests
                                // and benchmark have run (docs/hstu_attn.md, portable-kernel notes)
  kOptNoBwdSm80Pair2Stage = 1 << 7,  // the warp-pair kernel with one Q / dO stage even where two fit (as on sm80)
  kOptBwdGridShift = 8,         // bits 8-9: Hopper backward D = 256 grid order, 0 auto, 1 (key block, head, batch),
                                // 2 (head, key block, batch)
  kOptNoFp8Kernel = 1 << 10,    // FP8 forward calls on Hopper dequantize and run the bf16/fp16 kernels even where the
                                // FP8 kernel applies (read by hstu/_fp8.py, which routes hstu_attn::fp8_fwd)
  kOptFwdSplitShift = 11,       // bits 11-18: Hopper forward work list's split of long KV ranges, 0 auto (120 % of
                                // the average work per SM, chunks of at least 4 KV tiles), 255 never, 254 the
                                // one-wave rule, n in 1-253 chunks of at most n KV tiles (HstuParams::fwd_split_tiles)
  kOptFwdTrace = 1 << 19,      // SET: the paged Hopper forward's work-list CTAs stamp their phases (%globaltimer)
                                // into a device buffer (hstu_attn::paged_fwd_trace; diagnostics, slower)
  kOptFp8Bwd = 1 << 20,         // SET: FP8 backward calls on Hopper run the FP8 backward (pre-pass + e4m3 kernel;
                                // private, opt-in while it is built: read by hstu/_fp8.py, which refuses what it
                                // cannot run yet) instead of dequantize + the bf16/fp16 backward
  kOptPdl = 1 << 21,            // the paged Hopper forward and the cache append (kv_cache_append) launched as
                                // programmatic dependent launches: their CTAs start under the previous kernel and
                                // wait for it in-kernel (opt-in until its GPU tests and the serving benchmark have
                                // run; docs/hstu_inference.md)
  kOptFp8Sched = 1 << 22,       // SET: the Hopper FP8 forward with the bf16 forward's work list / persistent CTAs
                                // (plan_fwd_fp8; opt-in: on the H200 both lost to the grid order on Zipf and dense
                                // batches; docs/hstu_kernel_notes.md)
  kOptNoFp8EarlyPack = 1 << 23, // the Hopper FP8 forward converts P to e4m3 after the P V wait (the order before
                                // issue 36's fp8fast, with the tanh SiLU: bitwise the tanh form's output)
  kOptFp8Bn192 = 1 << 24,       // SET: the Hopper FP8 forward at D = 128 with 192-key tiles where they apply (grid
                                // order, descale modes other than block) at any length (the default: from 4,096 keys
                                // per sequence on average, fp8_wide_tiles)
  kOptBwdSm80CfgShift = 25,     // bits 25-28: sm80-class backward comparison cfg (hstu_bwd_sm80_kernel.cuh
                                // kBwdSm80*Cfg), 0 the default (FA2's warp layout where it fits:
                                // hstu_bwd_sm80_pds_kernel.cuh), 1 the two-barrier kernels, 2 D = 64's one-barrier
                                // loop with the Q / dO copies together, 4 / 5 the default's one / two stage kernels,
                                // 8 the old layouts (BwdSm80Config, the warp-pair switch) (issue 39)
  kOptFwdSm80CfgShift = 29,     // bits 29-31 (bit 3 of the value: kOptFwdSm80CfgHi): sm80-class forward comparison
                                // cfg (HstuParams::fwd_sm80_cfg, hstu_fwd_sm80_split.h), 0 the default, 1-5 issue
                                // 39's candidates (FwdSm80Candidate in hstu_fwd_sm80_kernel.cuh, bf16), 6 the old
                                // tiles, 7 the split, 8 the default with rab as main had it, 15 the default
                                // with the backward's drab zeroed by the op (kFwdSm80CfgDrabMain); 9-14 the other
                                // private comparisons (hstu/_ops.py FWD_SM80_CFG_*: rab, drab, dQ claims, the
                                // backward's split)
  kOptKnownMask = 0xffffffff,
  // bits 48-49 (above the semantic flags; the low 32 are taken): the Hopper FP8 forward's timing-only variants
  // (HstuFp8FwdParams::diag, kFp8FwdDiag* in hstu_fwd_fp8_sm90_kernel.cuh; private, WRONG outputs, grid order)
  kOptFp8FwdDiagShift = 48,
  kOptFp8FwdDiagMask = int64_t{3} << kOptFp8FwdDiagShift,
  // bits 50-51: the Hopper FP8 forward's SiLU form on unmasked tiles (HstuFp8FwdParams::silu; Fp8Silu in
  // hstu_fwd_fp8_sm90_kernel.cuh): 0 the default (fp8_silu_default), 1 + an Fp8Silu value that form, in grid order
  // (for comparisons): 1 the tanh form, 2 half of the scores in half2 arithmetic
  kOptFp8SiluShift = 50,
  kOptFp8SiluMask = int64_t{3} << kOptFp8SiluShift,
  // bits 52-55: the Hopper FP8 forward's variants (HstuFp8FwdParams::var; Fp8FwdVar in
  // hstu_fwd_fp8_sm90_kernel.cuh; private, for comparisons): 0 the default
  kOptFp8FwdVarShift = 52,
  kOptFp8FwdVarMask = int64_t{15} << kOptFp8FwdVarShift,
  // bit 58: the sm80-class forward's bf16 D = 64 long-row default without its unmasked sub-tiles' work interleaved
  // in 16-key groups (FwdSm80QregIlv in hstu_fwd_sm80_kernel.cuh: FwdSm80QregScaled instead), for comparisons
  kOptNoFwdSm80Ilv = int64_t{1} << 58,
  // bit 61: the sm80-class forward's bf16 D = 64 long-row default without its Q fragments scaled by alpha / 2 (where
  // that is a power of two; FwdSm80QregScaled in hstu_fwd_sm80_kernel.cuh): the FMUL per score, for comparisons
  kOptNoFwdSm80Qscale = int64_t{1} << 61,
  // bit 62: the sm80-class forward's split as it was (its least chunk rounded up, its list kernel walking the
  // sequences twice, its kernel loading Q behind the mask's setup: HstuParams::fwd_sm80_cfg's kFwdSm80SplitMain),
  // for comparisons
  kOptFwdSm80SplitMain = int64_t{1} << 62,
  // bits 46-47 (above the semantic flags, below the FP8 fields): the sm80-class forward's split at D = 64 / 128 in
  // 64-row query tiles: 0 the rule (fwd_sm80_bm64_rule), 1 / 2 FwdSm80SplitBm64<D, 1 / 2> wherever the split runs,
  // 3 never (the 128-row tiles) (HstuParams::fwd_sm80_cfg bits 6-7; private, for comparisons)
  kOptFwdSm80Bm64Shift = 46,
  kOptFwdSm80Bm64Mask = int64_t{3} << kOptFwdSm80Bm64Shift,
  // bit 45: the sm80-class forward's split synchronized as main has it (HstuParams::fwd_sm80_cfg's
  // kFwdSm80SplitPlain: its list and split kernels as plain launches, a chunk's count behind full fences), for
  // comparisons
  kOptFwdSm80SplitPlain = int64_t{1} << 45,
  // bit 41 (below the paged bits 42-44): bit 3 of kernel_options(fwd_sm80_cfg=n), whose values outgrew bits 29-31
  kOptFwdSm80CfgHi = int64_t{1} << 41,
  // bit 57: the sm80-class backward never splits long key-block walks (kernel_options(bwd_sm80_split=False); by
  // default bwd_split_default decides, hstu_bwd_sm80_walk_split.h), for comparisons
  kOptNoBwdSm80Split = int64_t{1} << 57,
  // bit 40 (below bit 41, the semantic flags' bits 33-39 left free; 57 is main41's kOptNoBwdSm80Split): the
  // sm80-class forward's bf16 rab defaults (D = 64 / 128 / 256) with evict-first L2 policies on their rab copies
  // (HstuParams::fwd_sm80_cfg's kFwdSm80RabEvict), opt-in while it is measured
  kOptFwdSm80RabEvict = int64_t{1} << 40,
};

// Semantic flags, in the upper half of the same int64 `options` (what the call computes, not which kernel computes
// it; hstu/_ops.py FLAG_BITS, and its CPU path honours them too). HstuOptions::from_bits ignores them.
enum HstuFlagBits : int64_t {
  kFlagMaskGr = int64_t{1} << 32,  // mask_convention="meta_gr" (HstuParams::mask_gr)
  kFlagKnownMask = kFlagMaskGr,
};

// Set by hstu/_paged.py itself (never by kernel_options), in the upper half too: the paged Hopper forward's split
// sum with the quick arrival (Sm90PagedKV::split_arrive; KVCacheManager._split_arrive, the serving step's default).
// HstuOptions::from_bits ignores it.
constexpr int64_t kOptPagedSplitArrive = int64_t{1} << 42;

struct HstuOptions {
  bool sm90 = true;
  bool fwd_work_list = true;
  bool fwd_persist = true;
  bool bwd_work_list = true;
  bool dq_self_zero = true;
  bool dq_conv_behind = true;
  bool bwd_sm80_pair = false;
  bool bwd_sm80_pair_2stage = true;
  int bwd_grid = 0;
  int fwd_split_tiles = 0;  // HstuParams::fwd_split_tiles
  int bwd_sm80_cfg = 0;
  int fwd_sm80_cfg = 0;  // kernel_options(fwd_sm80_cfg=n), 0-15 (fwd_sm80_cfg_word: HstuParams::fwd_sm80_cfg)
  bool fwd_sm80_qscale = true;  // HstuParams::fwd_sm80_cfg bit 3 cleared
  bool fwd_sm80_split_main = false;  // HstuParams::fwd_sm80_cfg bit 4
  bool fwd_sm80_ilv = true;  // HstuParams::fwd_sm80_cfg bit 5 cleared
  int fwd_sm80_bm64 = 0;  // HstuParams::fwd_sm80_cfg bits 6-7 (fwd_sm80_bm64_rule)
  bool fwd_sm80_split_plain = false;  // HstuParams::fwd_sm80_cfg bit 8
  bool bwd_sm80_split = true;  // the backward's split where bwd_split_default says so (false: never)
  bool fwd_sm80_rab_evict = false;  // HstuParams::fwd_sm80_cfg bit 20
  bool pdl = false;  // Sm90PagedKV::pdl
  bool fwd_trace = false;  // Sm90PagedKV::trace
  bool fp8_sched = false;
  bool fp8_early_pack = true;
  bool fp8_bn192 = false;
  bool fp8_bwd = false;
  int fp8_fwd_diag = 0;  // HstuFp8FwdParams::diag
  int fp8_silu = 0;      // HstuFp8FwdParams::silu
  int fp8_fwd_var = 0;   // HstuFp8FwdParams::var

  static HstuOptions from_bits(int64_t bits) {
    HstuOptions o;
    o.sm90 = !(bits & kOptNoSm90);
    o.fwd_work_list = !(bits & kOptNoFwdWorkList);
    o.fwd_persist = !(bits & kOptNoFwdPersist);
    o.bwd_work_list = !(bits & kOptNoBwdWorkList);
    o.dq_self_zero = !(bits & kOptNoDqSelfZero);
    o.dq_conv_behind = !(bits & kOptNoDqConvBehind);
    o.bwd_sm80_pair = (bits & kOptBwdSm80Pair) != 0;
    o.bwd_sm80_pair_2stage = !(bits & kOptNoBwdSm80Pair2Stage);
    o.bwd_grid = static_cast<int>((bits >> kOptBwdGridShift) & 3);
    const int split = static_cast<int>((bits >> kOptFwdSplitShift) & 255);
    o.fwd_split_tiles = split == 255 ? -1 : split == 254 ? -2 : split;
    o.bwd_sm80_cfg = static_cast<int>((bits >> kOptBwdSm80CfgShift) & 15);
    o.fwd_sm80_cfg = static_cast<int>((bits >> kOptFwdSm80CfgShift) & 7) | ((bits & kOptFwdSm80CfgHi) ? 8 : 0);
    o.fwd_sm80_qscale = !(bits & kOptNoFwdSm80Qscale);
    o.fwd_sm80_split_main = (bits & kOptFwdSm80SplitMain) != 0;
    o.fwd_sm80_ilv = !(bits & kOptNoFwdSm80Ilv);
    o.fwd_sm80_bm64 = static_cast<int>((bits >> kOptFwdSm80Bm64Shift) & 3);
    o.fwd_sm80_split_plain = (bits & kOptFwdSm80SplitPlain) != 0;
    o.bwd_sm80_split = !(bits & kOptNoBwdSm80Split);
    o.fwd_sm80_rab_evict = (bits & kOptFwdSm80RabEvict) != 0;
    o.pdl = (bits & kOptPdl) != 0;
    o.fwd_trace = (bits & kOptFwdTrace) != 0;
    o.fp8_sched = (bits & kOptFp8Sched) != 0;
    o.fp8_early_pack = !(bits & kOptNoFp8EarlyPack);
    o.fp8_bn192 = (bits & kOptFp8Bn192) != 0;
    o.fp8_bwd = (bits & kOptFp8Bwd) != 0;
    o.fp8_fwd_diag = static_cast<int>((bits >> kOptFp8FwdDiagShift) & 3);
    o.fp8_silu = static_cast<int>((bits >> kOptFp8SiluShift) & 3);
    o.fp8_fwd_var = static_cast<int>((bits >> kOptFp8FwdVarShift) & 15);
    return o;
  }
};

// The sm80-class forward's split tile at D = 64 / 128 (HstuParams::fwd_sm80_cfg bits 6-7, read where the split runs:
// hstu_fwd_sm80_kernel.cuh FwdSm80SplitBm64) for kernel_options(fwd_sm80_bm64=opt): 1 / 2 as given (set with the
// other option fields), 3 none (the 128-row tiles), 0 the rule (fwd_sm80_bm64_rule, once the split is planned).
inline int fwd_sm80_bm64_forced(int opt) { return opt == 1 || opt == 2 ? opt : 0; }
// The rule, given the split planned in the 128-row tiles (`s`, fwd_sm80_split_for): where its least chunk (the
// host's half of the mean work per block slot if every query tile walked the longest sequence's keys, at least 4
// KV tiles) covers at most kFwdSm80Bm64Keys keys, the split in 64 x 64 tiles, of 2 warps x 32 rows at D = 64 (2), of
// 4 warps x 16 rows at D = 128 (1). On an H200 (issue 39; bf16 H4 ctx3) they ran 0.95-0.96x the 128-row tiles' time
// on the Zipf(1.2) B32 max 4K batch and B2 S1820 (least chunks of 4-7: 256-512 keys), B8 S1K at D = 128 0.96x
// (4: 256), and 1.01-1.14x on B2 S4K, B4 S4K, B2 S4646 and a 9,292-token Zipf batch (least chunks 8-31: 960 keys
// and more; docs/hstu_kernel_notes.md). Exact chunks (kernel_options(fwd_split_tiles=n)) keep the 128-row tiles.
constexpr int64_t kFwdSm80Bm64Keys = 640;
inline int fwd_sm80_bm64_rule(const HstuParams& p, int opt, const FwdSm80Split& s) {
  if (opt != 0 || s.bytes == 0 || s.exact || (p.head_dim != 64 && p.head_dim != 128)) return 0;
  const int64_t keys = int64_t{s.chunk} * fwd_sm80_split_tile(p.head_dim).bn;
  return keys > kFwdSm80Bm64Keys ? 0 : p.head_dim == 64 ? 2 : 1;
}

enum class KernelFamily { kSm80, kSm90 };

// Whether this build holds the Hopper unit of (direction, dtype, D): the generated files register themselves
// (hstu_sm90_instance.cu.tmpl) only when compiled for sm_90a. Looked up once per key.
inline bool sm90_unit_compiled(bool fwd, bool half, int head_dim) {
  static int8_t cache[2][2][3] = {};  // 0 unknown, 1 yes, -1 no
  const int di = head_dim == 64 ? 0 : head_dim == 128 ? 1 : head_dim == 256 ? 2 : -1;
  if (di < 0) return false;
  int8_t& c = cache[fwd][half][di];
  if (c == 0) {
    const std::string name = std::string("hstu_") + (fwd ? "fwd" : "bwd") + "_sm90_" + (half ? "fp16" : "bf16") +
                             "_hdim" + std::to_string(head_dim);
    c = -1;
    for (const InstanceRecord& r : compiled_instances()) {
      if (r.name == name) c = 1;
    }
  }
  return c == 1;
}

// The device's compute capability into major / minor (false, the CUDA error cleared, where the query fails).
inline bool device_cc(int device, int& major, int& minor) {
  accel::DeviceInfo d;
  if (accel::device_info(device, d) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  major = d.cc_major;
  minor = d.cc_minor;
  return true;
}

// Compute capability 9.0 (the Hopper kernels' sm_90a).
inline bool device_is_sm90(int device) {
  int major = 0, minor = 0;
  return device_cc(device, major, minor) && major == 9 && minor == 0;
}

// Compute capability 9.0 or newer: where the sm80-class family runs its sm_90-class loops (hstu_bwd_sm80_kernel.cuh
// bwd_sm80_sm90_class, the same test on the current device).
inline bool device_sm90_class(int device) {
  int major = 0, minor = 0;
  return device_cc(device, major, minor) && major >= 9;
}

// The Hopper kernels apply: D 64 / 128 / 256, grid limits, a compute capability 9.0 device, the unit compiled.
inline bool sm90_applies(const HstuParams& p, int64_t total_k, int device, bool fwd, bool half,
                         const HstuOptions& o) {
  if (!o.sm90 || total_k <= 0 || p.total_q <= 0) return false;
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return false;
  if (p.batch > 65535 || p.heads > 65535 || p.total_q >= (int64_t{1} << 31) || total_k >= (int64_t{1} << 31)) {
    return false;
  }
  return device_is_sm90(device) && sm90_unit_compiled(fwd, half, p.head_dim);
}

struct FwdPlan {
  KernelFamily family = KernelFamily::kSm80;
  int64_t sched_bytes = 0;    // Hopper: workspace of the jagged work list (uninitialized); 0 keeps the grid order
  // Hopper D <= 128 without rab or list: the persistent CTAs' tile counter (4 bytes); without it (kOptNoFwdPersist)
  // the forward runs one CTA per query tile (FwdSm90Tile).
  bool tile_counter = false;
};

inline FwdPlan plan_fwd(const HstuParams& p, int64_t total_k, int device, bool half, const HstuOptions& o) {
  FwdPlan plan;
  if (!sm90_applies(p, total_k, device, /*fwd=*/true, half, o)) return plan;
  plan.family = KernelFamily::kSm90;
  if (o.fwd_work_list) plan.sched_bytes = hstu_fwd_sm90_sched_layout(p, total_k).bytes;
  plan.tile_counter = p.rab == nullptr && p.head_dim <= 128 && plan.sched_bytes == 0 && o.fwd_persist;
  return plan;
}

// The Hopper FP8 forward's (hstu_fwd_fp8_sm90_launch.cuh; the op checked that it applies): the grid order by
// default; with kernel_options(fp8_sched=True) the bf16 forward's work list for jagged batches, without its splits
// (hstu_fwd_sm90_sched_layout, splits = false), else persistent CTAs at D <= 128, under the same switches
// (fwd_work_list, fwd_persist). Opt-in since both lost to the grid on the H200 (Zipf B32 max 4K: 0.86x / 0.89x at
// D 128 / 256 with the planner's launch; dense B16 S16K D128 persistent: 0.97x; only targets B32 1K+2K won, 1.05x).
inline FwdPlan plan_fwd_fp8(const HstuParams& p, int64_t total_k, const HstuOptions& o) {
  FwdPlan plan;
  plan.family = KernelFamily::kSm90;
  if (!o.fp8_sched) return plan;
  if (o.fwd_work_list) plan.sched_bytes = hstu_fwd_sm90_sched_layout(p, total_k, /*splits=*/false).bytes;
  plan.tile_counter = p.head_dim <= 128 && plan.sched_bytes == 0 && o.fwd_persist;
  return plan;
}

// The sm80-class backward of FlashAttention-2's warp layout takes at most kBwdSm80MaxKeyBlocks key blocks of
// kBwdSm80MinBlockN keys or more (hstu/csrc/sm80/hstu_bwd_sm80_limits.h): 4,194,240 keys. The op refuses a larger
// max_seqlen_k with a message before any launch, at every head dim (one rule).
constexpr int64_t kBwdSm80MaxSeqlenK = kBwdSm80MaxKeyBlocks * kBwdSm80MinBlockN;

struct BwdPlan {
  KernelFamily family = KernelFamily::kSm80;
  int64_t dq_floats = 0;    // fp32 dq workspace (bwd_sm80_dq_floats, or the Hopper layouts); 0 when deterministic
  int64_t zero_words = 0;   // Hopper D = 64 / 128: self-zeroing flags behind the floats (workspace uninitialized);
                            // sm80 D = 128 / 256 with kBwdSm80DqClaim: its claim words (hstu_ops.cc)
  int64_t sched_bytes = 0;  // Hopper D = 256: work-list workspace (its planner zeroes the dq workspace)
  int dq_conv_behind = 0;   // p.dq_conv_behind
  int bwd_grid = 0;         // p.bwd_grid
  int bwd_sm80_pair = 0;    // p.bwd_sm80_pair
  int bwd_sm80_cfg = 0;     // p.bwd_sm80_cfg
  bool zeroed_workspace() const { return dq_floats > 0 && zero_words == 0 && sched_bytes == 0; }
};

// deterministic: the sm80-class query-parallel dq kernel (no fp32 atomics, no workspace).
inline BwdPlan plan_bwd(const HstuParams& p, int64_t total_k, int device, bool half, bool deterministic,
                        int64_t dq_row_stride, const HstuOptions& o) {
  BwdPlan plan;
  plan.bwd_sm80_pair = !o.bwd_sm80_pair ? 0 : o.bwd_sm80_pair_2stage ? 2 : 1;
  plan.bwd_sm80_cfg = o.bwd_sm80_cfg;
  if (deterministic) return plan;
  plan.dq_floats = bwd_sm80_dq_floats(p.total_q, p.batch, p.heads, p.head_dim);
  if (!sm90_applies(p, total_k, device, /*fwd=*/false, half, o)) return plan;
  plan.family = KernelFamily::kSm90;
  plan.bwd_grid = o.bwd_grid;
  HstuParams q = p;
  q.bwd_grid = o.bwd_grid;
  plan.dq_floats = hstu_bwd_sm90_dq_accum_floats(q);
  if (o.dq_self_zero) plan.zero_words = hstu_bwd_sm90_dq_zero_words(q);
  if (o.bwd_grid == 0 && o.bwd_work_list) plan.sched_bytes = hstu_bwd_sm90_sched_layout(q, total_k).bytes;
  // (the converters address 16 rows of dq and of the workspace with 32-bit offsets)
  if (plan.zero_words > 0 && o.dq_conv_behind && dq_row_stride < (int64_t{1} << 26) &&
      int64_t{p.heads} * p.head_dim < (int64_t{1} << 26)) {
    plan.dq_conv_behind = 1;
  }
  return plan;
}

}  // namespace hstu
