// Device-side input checks of the embedding step and the codes they report (common/device_errors.cuh).
//
// The step's device values (ids, offsets, lengths, per-sample weights) are checked by one kernel on the stream
// (validate_kernels.cu), never on the host: a violation is written into the package's pinned error record (the
// host raises it at the next call, dynamicemb/_checks.py) and sets a device flag that makes the dedup treat the
// batch as empty, so the step inserts and updates nothing. Non-finite per-sample weights are reported but do not
// empty the batch (the optimizer's non-finite policy keeps them out of the rows).
// The codes below are mirrored in dynamicemb/_checks.py (`ERR_ARGS`, `ERR_RULES`); a CPU test compares them.
// No CUDA and no torch headers here.
#pragma once

#include <cstdint>

namespace dynamicemb {
namespace lookup {

// Argument codes of the error record (`arg`).
enum CheckArg : int32_t {
  kArgIds = 1,
  kArgOffsets = 2,
  kArgLengths = 3,
  kArgPerSampleWeights = 4,
  kArgGradient = 5,  // the summed row gradients of the fused update (nonfinite="raise")
  kArgHbmBudget = 6,    // a caching table's HBM cache (its hbm_budget_bytes) could not hold a step's ids
  kArgMaxCapacity = 7,  // a caching table's uva store (its max_capacity) could not take an evicted row
};

// Rule codes of the error record (`rule`); index / value / bound as noted.
enum CheckRule : int32_t {
  kRuleNegativeId = 1,       // int64 ids: ids[index] = value < 0
  kRuleReservedId = 2,       // uint64 ids: ids[index] = value is a reserved pattern (2**63 + 0, 1, 2)
  kRuleFirstOffset = 3,      // offsets[0] = value != 0
  kRuleDecreasing = 4,       // offsets[index] = value > offsets[index + 1] = bound
  kRuleLastOffset = 5,       // offsets[-1] = value != ids.numel() = bound (index: num_bags)
  kRuleNegativeLength = 6,   // lengths[index] = value < 0
  kRuleLengthSum = 7,        // sum(lengths) = value != ids.numel() = bound
  kRuleLengthMismatch = 8,   // lengths[index] = value != offsets[index + 1] - offsets[index] = bound
  kRuleNonFinite = 9,        // per_sample_weights[index] = value (double bits) is NaN or inf
  kRuleNonFiniteGrad = 10,   // value rows (and steps) skipped since the last report; bound: their total so far
  kRuleCacheFull = 11,       // index: table, value: the id, bound: bucket slots (the device staging, stage_common.h)
  kRuleStoreFull = 12,       // index: table, value: the id being staged, bound: the store's bucket slots
};

struct ValidateParams {
  const uint64_t* ids;      // (n)
  int64_t n;
  bool uint64_keys;         // uint64 ids (only the reserved patterns are invalid), else int64 (>= 0)
  const int64_t* offsets;   // (num_bags + 1)
  int64_t num_bags;
  const int64_t* lengths;   // (num_bags) or null
  bool lengths_only;        // offsets = cumsum(lengths) built by the caller: report the rules on lengths
  const float* psw;         // (n) or null
  int32_t* bad;             // (1) zero on entry; 1 after a violation of ids / offsets / lengths (block_bad null)
  int32_t* block_bad;       // (kValidateSlots) or null: every block writes its own slot (0 / 1 after a violation)
                            // instead of `bad`, so nothing needs zeroing first; the dedup's clear pass ORs them
                            // into the step's flag (lookup_step: one launch fewer than a memset of the flag)
  bool pdl;                 // lab (lookup_types.h kStepPdl): lets the next pass (the dedup's clear) start early
};

// Slots of block_bad: the grid of a launch that writes them has at most this many blocks (grid-stride).
constexpr int kValidateSlots = 1024;

// Checks one step's inputs (one launch) on `stream`; returns the number of blocks launched (the slots of
// block_bad it writes).
int launch_validate(const ValidateParams& p, void* stream);

// Reports the rows / steps the update skipped for non-finite gradients since the last report (nonfinite="raise"):
// counts (2) = [rows, steps] of the module, seen (1) = the total at the last report.
void launch_report_nonfinite(const int64_t* counts, int64_t* seen, void* stream);

// Reports the first failure of a device staging (op cache_stage; first_fail (4) = [rule, table, id, bucket
// slots], rule 0: none) into the error record, on `stream`.
void launch_report_stage(const int64_t* first_fail, void* stream);

// The package's pinned error block (its host address; 0 if it could not be allocated) and the reset of a
// device's claim word (in stream order on `stream`, a stream of `device`).
int64_t error_block_address();
void clear_error_claim(int device, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
