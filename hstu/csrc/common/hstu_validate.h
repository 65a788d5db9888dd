// Device-side validation of the int32 vectors of an HSTU call (no host synchronization; no torch headers).
//
// Before the attention kernels, one block checks cu_seqlens_{q,k}, seqused_{q,k}, num_targets and num_contexts
// (the rules below) and writes sanitized copies into the op's scratch; the kernels read the copies. On a violation
// the copies make every sequence empty (nothing is read or written out of bounds), the first violation goes to the
// package's device error record (common/device_errors.cuh), and the outputs become NaN: the forward's `out` here,
// the backward's dq/dk/dv/drab by hstu_poison_outputs after its kernels (they write zeros outside sequences).
//
// The argument and rule codes are read by Python (hstu/_checks.py: ARGS, RULES; tests/hstu/test_checks.py
// compares both tables with this file).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/device_errors.cuh"

namespace hstu {

// Argument codes (DeviceErrorRecord::arg).
enum HstuArg : int32_t {
  kArgCuSeqlensQ = 1,
  kArgCuSeqlensK = 2,
  kArgSequsedQ = 3,
  kArgSequsedK = 4,
  kArgNumTargets = 5,
  kArgNumContexts = 6,
  kArgQDescale = 7,  // the FP8 descale factors (hstu_check_fp8_scales)
  kArgKDescale = 8,
  kArgVDescale = 9,
};

// Rule codes (DeviceErrorRecord::rule), with what index / value / bound hold.
enum HstuRule : int32_t {
  kRuleOffsetNegative = 1,    // cu_seqlens[0] < 0: index 0, value cu[0], bound 0
  kRuleOffsetDecreasing = 2,  // cu[i] < cu[i - 1]: index i, value cu[i], bound cu[i - 1]
  kRuleOffsetPastEnd = 3,     // cu[B] > tokens: index B, value cu[B], bound tokens (rows of q or k)
  kRuleSeqTooLong = 4,        // cu[b + 1] - cu[b] > max_seqlen: index b, value the length, bound max_seqlen
  kRuleSeqused = 5,           // seqused[b] outside [0, length]: index b, value seqused[b], bound the length
  kRuleDeltaQ = 6,            // Lq > Lk (after seqused): arg cu_seqlens_q, index b, value Lq, bound Lk
  kRuleTargets = 7,           // num_targets[b] outside [0, Lk]: index b, value, bound Lk
  kRuleContexts = 8,          // num_contexts[b] outside [0, Lk - targets]: index b, value, bound Lk - targets
  kRuleScale = 9,             // a descale factor 0, negative, inf or NaN: index the flat element, value its double
                              // bits, bound 0
};

// Scratch layout (int32 words, allocated uninitialized by the op): the status word (0: valid, 1: a violation), then
// the sanitized vectors, each starting on a 16-byte boundary: cu_q (B + 1), cu_k (B + 1), then those given of
// seqused_q, seqused_k, num_targets, num_contexts (B each).
struct HstuScratchLayout {
  int64_t cu_q = 0, cu_k = 0, seqused_q = -1, seqused_k = -1, num_targets = -1, num_contexts = -1;  // word offsets
  int64_t words = 0;
};

inline HstuScratchLayout hstu_scratch_layout(int64_t batch, bool seqused_q, bool seqused_k, bool num_targets,
                                             bool num_contexts) {
  auto round4 = [](int64_t n) { return (n + 3) / 4 * 4; };
  HstuScratchLayout l;
  int64_t w = 4;  // the status word, padded
  l.cu_q = w;
  w += round4(batch + 1);
  l.cu_k = w;
  w += round4(batch + 1);
  const bool given[4] = {seqused_q, seqused_k, num_targets, num_contexts};
  int64_t* offs[4] = {&l.seqused_q, &l.seqused_k, &l.num_targets, &l.num_contexts};
  for (int i = 0; i < 4; ++i) {
    if (given[i]) {
      *offs[i] = w;
      w += round4(batch);
    }
  }
  l.words = w;
  return l;
}

struct HstuValidateParams {
  const int32_t* cu_seqlens_q;  // (B + 1)
  const int32_t* cu_seqlens_k;  // (B + 1)
  const int32_t* seqused_q;     // (B) or nullptr
  const int32_t* seqused_k;     // (B) or nullptr
  const int32_t* num_targets;   // (B) or nullptr
  const int32_t* num_contexts;  // (B) or nullptr
  int batch;
  int64_t total_q, total_k;  // rows of q and of k
  int64_t max_seqlen_q, max_seqlen_k;

  int32_t* scratch;  // (HstuScratchLayout::words), the sanitized copies and the status word
  HstuScratchLayout layout;

  // On a violation the block fills these 16-bit elements with `nan_bits` (the forward's out; nullptr: none).
  uint16_t* fill;
  int64_t fill_numel;
  uint16_t nan_bits;

  accel::DeviceErrorBlock* errors;  // the package's pinned block (nullptr: not allocated, nothing recorded)
  int device;                       // the CUDA device of the call (the record's slot)
  // A programmatic dependent launch (compute capability 9.0 devices only; the paged forward's kOptPdl): the block
  // may start while the kernel before it on the stream runs (the serving step's begin_step) and waits for it
  // (griddepcontrol.wait) before its first read. false: a plain launch.
  bool pdl = false;
};

// Launches the validation block on `stream`.
cudaError_t hstu_validate(const HstuValidateParams& v, cudaStream_t stream);

// After the backward's kernels: when the status word says a violation, fills up to four tensors of 16-bit elements
// (dq, dk, dv, drab; nullptr / 0 entries are skipped) with `nan_bits`.
struct HstuPoisonParams {
  const int32_t* status;
  uint16_t* ptr[4];
  int64_t numel[4];
  uint16_t nan_bits;
};
cudaError_t hstu_poison_outputs(const HstuPoisonParams& p, cudaStream_t stream);

// FP8 descale factors (q, k, v; float32, contiguous): one block checks every element is finite and > 0 and writes
// copies to `out`; on a violation every copy is NaN (so is everything computed from them) and the first violation
// (q before k before v, lowest flat index first) goes to the device error record.
struct HstuScaleCheckParams {
  const float* in[3];  // (n[i]) q_descale, k_descale, v_descale
  float* out[3];       // (n[i]) the checked copies
  int64_t n[3];
  accel::DeviceErrorBlock* errors;  // nullptr: not allocated, nothing recorded
  int device;
};
cudaError_t hstu_check_fp8_scales(const HstuScaleCheckParams& p, cudaStream_t stream);

// Resets this library's claim word on the current device (in `stream` order), so that a later violation is recorded.
cudaError_t hstu_clear_device_error_claim(cudaStream_t stream);

// The device address of that claim word on the current device (for a kernel of another unit that validates: the
// paged step plan's, hstu/csrc/paged); nullptr if the runtime cannot give it, or before the first call outside a
// capture of `stream` (the lookup is not made while it is captured).
int* hstu_error_claim_word(cudaStream_t stream);

}  // namespace hstu
