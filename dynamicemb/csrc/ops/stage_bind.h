// The caching tables' staging arguments, checked and bound once for the two ops that stage (torch stable ABI,
// host code): op cache_stage (stage_ops.cc: the prefetch's, the CPU twin's) and op lookup_step (lookup_ops.cc: a
// step that stages its own batch first, so that a step costs one op call). The scratch the kernels use (found,
// place, info, failed) comes from the caller; `scratch_words` says how many int64 words it needs.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <optional>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/stage_common.h"

namespace dynamicemb {
namespace lookup {
namespace stage_bind {

constexpr int64_t kMetaWords = sizeof(TableMeta) / 8;
constexpr int64_t kStageWords = sizeof(StageTable) / 8;
constexpr int64_t kFailWords = 4;  // the first failure [rule, table, id, bucket slots]

// Bins of the bucket owners (one per cache bucket up to bins_per_table buckets a table).
inline int64_t owner_bins(int64_t num_tables) {
  return num_tables * move_bins_per_table(static_cast<int>(num_tables));
}

// int64 words of info's tail (zeroed with it): the first failure, then the move records' count (1), the move
// passes' split (3: stashed records, copies, stash pitch), the copies' bins (2 T bins_per_table int32), the bucket
// owners' bin counts and their rest count (owner_bins + 1 int32).
inline int64_t info_tail(int64_t num_tables) {
  return kFailWords + 4 + (2 * num_tables * move_bins_per_table(static_cast<int>(num_tables)) + 1) / 2 +
         (owner_bins(num_tables) + 2) / 2;
}

// The HBM stash of the CUDA move passes (stage_common.h "move"): the victims' rows of the first records, so that one
// pass moves rows both ways. 256 bytes per id of the batch (a cold step stages ~10 % of its ids: a 2.5 KB row's
// records fit), at most 64 MiB (131K rows of D128 fp32 SGD, 43K of D128 Adam): the scratch a step adds. Records
// beyond it take the two-pass path (their victims' copies in the mixed pass, their stored rows after it). No stash
// for the CPU twin.
constexpr int64_t kStashCapBytes = int64_t(64) << 20;
inline int64_t stash_bytes(int64_t n, bool cuda) {
  const int64_t want = n * 256;
  return cuda ? (want < kStashCapBytes ? want : kStashCapBytes) : 0;
}

inline void check_arg(const torch::stable::Tensor& t, const char* name, const torch::stable::Tensor& ref,
                      accel::ScalarType dtype) {
  accel::check_dtype(t, name, dtype);
  accel::check_contiguous(t, name);
  accel::check_same_device(t, name, ref, "ids");
}

// int64 words of info: per table its misses, the F + 1 feature bounds, then `extra` words (the first failure).
inline int64_t info_words(int64_t num_tables, int64_t num_features, int64_t extra) {
  return num_tables + num_features + 1 + extra;
}

// int64 words of the owners' lists (CUDA): owner_bins x kOwnList int32.
inline int64_t owner_list_words(int64_t num_tables, bool cuda) {
  return cuda ? owner_bins(num_tables) * kOwnList / 2 : 0;
}

// int64 words of the probe's and the staging's per-id scratch for n ids over T tables: place (n int64), the move
// records (kMoveWords n int64), their order (2 n int32), found (n bool), then the stash (stash_bytes, CUDA) and a
// word to align it to 16 bytes, then the bucket owners' lists (CUDA).
inline int64_t scratch_words(int64_t n, int64_t num_tables, bool cuda) {
  return (n > 0 ? n : 1) + (kMoveWords + 1) * n + (n + 7) / 8 + (cuda ? stash_bytes(n, true) / 8 + 1 : 0) +
         owner_list_words(num_tables, cuda);
}

// Checks the miss check's arguments and binds them; `found` / `info` point to the caller's scratch (info zeroed).
inline CacheProbeParams bind_probe(const torch::stable::Tensor& meta, const torch::stable::Tensor& ids,
                                   const torch::stable::Tensor& offsets, const torch::stable::Tensor& feature_table,
                                   int64_t batch, const torch::stable::Tensor& table_mask) {
  using accel::ScalarType;
  ACCEL_CHECK(ids.scalar_type() == ScalarType::Long || ids.scalar_type() == ScalarType::UInt64,
              "ids: expected dtype int64 or uint64, got ", accel::dtype_name(ids.scalar_type()));
  accel::check_dim(ids, "ids", 1);
  accel::check_contiguous(ids, "ids");
  check_arg(meta, "meta", ids, ScalarType::Long);
  check_arg(offsets, "offsets", ids, ScalarType::Long);
  accel::check_dim(offsets, "offsets", 1);
  check_arg(feature_table, "feature_table", ids, ScalarType::Int);
  check_arg(table_mask, "table_mask", ids, ScalarType::Int);
  ACCEL_CHECK(meta.numel() % kMetaWords == 0 && meta.numel() > 0, "meta: expected num_tables x ", kMetaWords,
              " int64 fields, got ", meta.numel());
  const int64_t T = meta.numel() / kMetaWords, F = feature_table.numel();
  ACCEL_CHECK(table_mask.numel() == T, "table_mask: expected ", T, " entries (one per table), got ", table_mask.numel());
  ACCEL_CHECK(F >= 1, "feature_table: expected at least one feature");
  ACCEL_CHECK(batch >= 0, "batch: expected >= 0, got ", batch);
  ACCEL_CHECK(offsets.numel() == F * batch + 1, "offsets: expected F * batch + 1 = ", F * batch + 1, " entries, got ",
              offsets.numel());
  CacheProbeParams p{};
  p.meta = static_cast<const TableMeta*>(meta.data_ptr());
  p.num_tables = static_cast<int>(T);
  p.table_mask = static_cast<const int32_t*>(table_mask.data_ptr());
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.n = ids.numel();
  p.num_bags = offsets.numel() - 1;
  p.batch = batch;
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.num_features = static_cast<int>(F);
  return p;
}

// Checks the staging's own arguments and binds the staging over a bound probe (`probe`, updated: its stamps and
// gate). Scratch: `scratch` (scratch_words(n, T, cuda) int64: place, moves, order, found, stash, lists), `info`
// (info_words(T, F, info_tail(T)), zeroed), `failed` (1 int32, zeroed).
inline StageParams bind_stage(CacheProbeParams& probe, const torch::stable::Tensor& ids,
                              const torch::stable::Tensor& stage, const torch::stable::Tensor& totals, int64_t cur,
                              int64_t min_live, bool insert_new, int64_t value_bytes,
                              const std::optional<torch::stable::Tensor>& gate, int64_t* scratch, int64_t* info,
                              int32_t* failed, bool cuda) {
  using accel::ScalarType;
  const int64_t T = probe.num_tables, n = probe.n;
  check_arg(stage, "stage", ids, ScalarType::Long);
  ACCEL_CHECK(stage.numel() == T * kStageWords, "stage: expected ", T, " x ", kStageWords, " int64 fields, got ",
              stage.numel());
  check_arg(totals, "totals", ids, ScalarType::Long);
  ACCEL_CHECK(totals.numel() == 3 * T, "totals: expected ", T, " x 3 int64 counts, got ", totals.numel());
  ACCEL_CHECK(value_bytes == 2 || value_bytes == 4, "value_bytes: expected 2 or 4, got ", value_bytes);
  ACCEL_CHECK(cur >= 1 && min_live >= 1 && min_live <= cur, "cur/min_live: expected 1 <= min_live <= cur, got ",
              min_live, " and ", cur);
  if (gate.has_value()) {
    check_arg(*gate, "gate", ids, ScalarType::Int);
    ACCEL_CHECK(gate->numel() == 1, "gate: expected 1 entry (a prefetch's failed flag), got ", gate->numel());
  }
  probe.found = reinterpret_cast<bool*>(scratch + (n > 0 ? n : 1) + (kMoveWords + 1) * n);
  probe.info = info;
  probe.stage = static_cast<const StageTable*>(stage.data_ptr());
  probe.cur = cur;
  probe.gate = gate.has_value() ? static_cast<const int32_t*>(gate->data_ptr()) : nullptr;
  StageParams p{};
  p.meta = probe.meta;
  p.stage = probe.stage;
  p.num_tables = probe.num_tables;
  p.table_mask = probe.table_mask;
  p.ids = probe.ids;
  p.offsets = probe.offsets;
  p.n = n;
  p.num_bags = probe.num_bags;
  p.batch = probe.batch;
  p.feature_table = probe.feature_table;
  p.num_features = probe.num_features;
  p.found = probe.found;
  p.counts = static_cast<int64_t*>(totals.data_ptr());
  p.place = scratch;
  p.moves = scratch + (n > 0 ? n : 1);
  p.move_order = reinterpret_cast<int32_t*>(p.moves + kMoveWords * n);
  p.stash_bytes = stash_bytes(n, cuda);
  if (p.stash_bytes > 0) {  // after found, 16-byte aligned
    const auto at = reinterpret_cast<uintptr_t>(scratch + (n > 0 ? n : 1) + (kMoveWords + 1) * n + (n + 7) / 8);
    p.stash = reinterpret_cast<uint8_t*>((at + 15) / 16 * 16);
  }
  p.cur = cur;
  p.min_live = min_live;
  p.insert_new = insert_new;
  p.failed = failed;
  p.first_fail = info + T + probe.num_features + 1;
  p.move_count = p.first_fail + kFailWords;
  p.move_split = p.move_count + 1;
  p.move_bins = reinterpret_cast<int32_t*>(p.move_split + 3);
  p.bins_per_table = move_bins_per_table(static_cast<int>(T));
  p.value_bytes = static_cast<int>(value_bytes);
  p.gate = probe.gate;
  if (cuda) {
    p.own_cnt = reinterpret_cast<int32_t*>(p.move_bins + 2 * T * p.bins_per_table);
    p.own_list = reinterpret_cast<int32_t*>(scratch + scratch_words(n, T, true) - owner_list_words(T, true));
  }
  return p;
}

}  // namespace stage_bind
}  // namespace lookup
}  // namespace dynamicemb
