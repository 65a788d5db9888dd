// The caching tables' ops over the step's tables (torch stable ABI, CPU twin + CUDA): cache_probe (the miss
// check, one launch) and cache_stage (the miss check and the staging of every missing id into the HBM caches of
// caching tables over the uva store, four launches, no host wait; stage_common.h). The CPU twin runs the same
// per-id code in one thread (tests). Python: dynamicemb/_prefetch.py count_step, dynamicemb/_device_stage.py.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <optional>
#include <tuple>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/stage_common.h"

namespace dynamicemb {
namespace lookup {
namespace {

using torch::stable::Tensor;
using accel::ScalarType;
constexpr int64_t kMetaWords = sizeof(TableMeta) / 8;
constexpr int64_t kStageWords = sizeof(StageTable) / 8;

void check_arg(const Tensor& t, const char* name, const Tensor& ref, ScalarType dtype) {
  accel::check_dtype(t, name, dtype);
  accel::check_contiguous(t, name);
  accel::check_same_device(t, name, ref, "ids");
}

struct ProbeArgs {
  CacheProbeParams p{};
  Tensor found, info;
};

// Checks and binds the miss check's arguments; `extra` int64 words follow info's T + F + 1 (the staging's).
ProbeArgs bind_probe(const Tensor& meta, const Tensor& ids, const Tensor& offsets, const Tensor& feature_table,
                     int64_t batch, const Tensor& table_mask, int64_t extra) {
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
  ProbeArgs a;
  a.found = torch::stable::new_empty(ids, {ids.numel()}, ScalarType::Bool);
  a.info = torch::stable::new_zeros(ids, {T + F + 1 + extra}, ScalarType::Long);
  CacheProbeParams& p = a.p;
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
  p.found = static_cast<bool*>(a.found.data_ptr());
  p.info = static_cast<int64_t*>(a.info.data_ptr());
  return a;
}

// The CPU twin of the probe kernel (probe_kernels.cu): the same results, one thread.
void probe_cpu(const CacheProbeParams& p) {
  for (int f = 0; f <= p.num_features; ++f) p.info[p.num_tables + f] = p.batch > 0 ? p.offsets[f * p.batch] : 0;
  for (int64_t i = 0; i < p.n; ++i) {
    const int t = p.feature_table[stage_feature_of(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i)];
    bool hit = true;
    if (p.table_mask[t]) {
      const TableMeta& m = p.meta[t];
      const uint64_t key = p.ids[i];
      int64_t slot = -1;
      if (!table::is_reserved_key(key)) {
        const int cap = static_cast<int>(m.bucket_capacity);
        const int64_t b = static_cast<int64_t>(table::bucket_of_hash(accel_hash_key(key),
                                                                    static_cast<uint64_t>(m.num_buckets)));
        slot = stage_find<HostStageAtomics>(reinterpret_cast<const uint64_t*>(m.keys), b * cap, cap, key);
      }
      hit = slot >= 0;
      if (hit && p.stage != nullptr) {
        int64_t* st = reinterpret_cast<int64_t*>(p.stage[t].stamps) + slot;
        if (*st < p.cur) *st = p.cur;
      }
      if (!hit) ++p.info[t];
    }
    p.found[i] = hit;
  }
}

std::tuple<Tensor, Tensor> cache_probe(Tensor meta, Tensor ids, Tensor offsets, Tensor feature_table, int64_t batch,
                                       Tensor table_mask) {
  ProbeArgs a = bind_probe(meta, ids, offsets, feature_table, batch, table_mask, 0);
  if (ids.is_cuda()) {
    torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
    launch_cache_probe(a.p, accel::current_cuda_stream(ids.get_device_index()));
  } else {
    probe_cpu(a.p);
  }
  return std::make_tuple(a.found, a.info);
}

// (failed (1,) int32: the step's skip flag; info: the probe's T + F + 1, then the first failure [rule, table, id,
// bucket slots] (4)). `stage`: num_tables StageTable records; `totals` (num_tables, 3) int64: per table [moved in,
// written back, refused] accumulated by the kernels (the module's running counts: no add of the caller's per step);
// `cur` / `min_live`: this step's stamp and the oldest guarded one; `report`: the first failure goes to the device
// error record (CUDA; the CPU caller raises from info); `gate` (1,) int32 or None: when it reads 0 the op does
// nothing (the step after a prefetch of its batch passes the prefetch's failed flag: it stages only what the
// prefetch left).
std::tuple<Tensor, Tensor> cache_stage(Tensor meta, Tensor stage, Tensor totals, Tensor ids, Tensor offsets,
                                       Tensor feature_table, int64_t batch, Tensor table_mask, int64_t cur,
                                       int64_t min_live, bool insert_new, int64_t value_bytes, bool report,
                                       std::optional<Tensor> gate) {
  const int64_t T = meta.numel() / kMetaWords;
  ProbeArgs a = bind_probe(meta, ids, offsets, feature_table, batch, table_mask, 4);
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
  const int32_t* gate_ptr = gate.has_value() ? static_cast<const int32_t*>(gate->data_ptr()) : nullptr;
  const int64_t n = ids.numel(), F = feature_table.numel();
  Tensor failed = torch::stable::new_zeros(ids, {1}, ScalarType::Int);
  Tensor place = torch::stable::new_empty(ids, {n > 0 ? n : 1}, ScalarType::Long);
  a.p.stage = static_cast<const StageTable*>(stage.data_ptr());
  a.p.cur = cur;
  StageParams p{};
  p.meta = a.p.meta;
  p.stage = a.p.stage;
  p.num_tables = a.p.num_tables;
  p.table_mask = a.p.table_mask;
  p.ids = a.p.ids;
  p.offsets = a.p.offsets;
  p.n = n;
  p.num_bags = a.p.num_bags;
  p.batch = batch;
  p.feature_table = a.p.feature_table;
  p.num_features = a.p.num_features;
  p.found = a.p.found;
  p.counts = static_cast<int64_t*>(totals.data_ptr());
  p.place = static_cast<int64_t*>(place.data_ptr());
  p.cur = cur;
  p.min_live = min_live;
  p.insert_new = insert_new;
  p.failed = static_cast<int32_t*>(failed.data_ptr());
  p.first_fail = a.p.info + T + F + 1;
  p.value_bytes = static_cast<int>(value_bytes);
  a.p.gate = p.gate = gate_ptr;
  if (ids.is_cuda()) {
    torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
    launch_cache_stage(a.p, p, report, accel::current_cuda_stream(ids.get_device_index()));
  } else if (gate_ptr == nullptr || *gate_ptr != 0) {  // (the CPU twin reads its gate at once)
    probe_cpu(a.p);
    for (int64_t i = 0; i < n; ++i) stage_one<HostStageAtomics>(p, i);
    for (int64_t i = 0; i < n; ++i) unplace_one<HostStageAtomics>(p, i);
  }
  return std::make_tuple(failed, a.info);
}

}  // namespace
}  // namespace lookup
}  // namespace dynamicemb

STABLE_TORCH_LIBRARY_FRAGMENT(dynamicemb, m) {
  m.def(
      "cache_probe(Tensor meta, Tensor ids, Tensor offsets, Tensor feature_table, int batch, Tensor table_mask) "
      "-> (Tensor, Tensor)");
  m.def(
      "cache_stage(Tensor(a!) meta, Tensor(b!) stage, Tensor(c!) totals, Tensor ids, Tensor offsets, Tensor feature_table, int batch, "
      "Tensor table_mask, int cur, int min_live, bool insert_new, int value_bytes, bool report, Tensor? gate=None) "
      "-> (Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CPU, m) {
  m.impl("cache_probe", TORCH_BOX(&dynamicemb::lookup::cache_probe));
  m.impl("cache_stage", TORCH_BOX(&dynamicemb::lookup::cache_stage));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("cache_probe", TORCH_BOX(&dynamicemb::lookup::cache_probe));
  m.impl("cache_stage", TORCH_BOX(&dynamicemb::lookup::cache_stage));
}
