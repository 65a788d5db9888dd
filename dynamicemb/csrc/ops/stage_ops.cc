// The caching tables' ops over the step's tables (torch stable ABI, CPU twin + CUDA): cache_probe (the miss
// check, one launch) and cache_stage (the miss check and the staging of every missing id into the HBM caches of
// caching tables over the uva store, five launches, no host wait; stage_common.h). The CPU twin runs the same
// per-id code in one thread (tests). Python: dynamicemb/_prefetch.py count_step, dynamicemb/_device_stage.py.
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/stage_common.h"
#include "dynamicemb/csrc/ops/stage_bind.h"

namespace dynamicemb {
namespace lookup {

#ifdef HSTU_DEV_VARIANTS
// Lab 13-15 of dev builds (stage_kernels.cu; timing what-ifs, rows lost): the selector's range with them, whether
// the variant set runs a prefetch job's moves on a stream of their own beside its step, and its launcher.
int lab_stage_variants();
bool lab_split_moves();
void launch_cache_stage_split(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream);
#endif

namespace {

using torch::stable::Tensor;
using accel::ScalarType;
namespace sb = stage_bind;

// Zeroes `bytes` at `ptr` on the tensors' device (CUDA: on the current stream, no kernel of torch's).
void zero_on(const Tensor& ids, void* ptr, size_t bytes) {
  if (ids.is_cuda()) zero_async(ptr, bytes, accel::current_cuda_stream(ids.get_device_index()));
  else std::memset(ptr, 0, bytes);
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
  CacheProbeParams p = sb::bind_probe(meta, ids, offsets, feature_table, batch, table_mask);
  std::optional<torch::stable::accelerator::DeviceGuard> guard;
  if (ids.is_cuda()) guard.emplace(ids.get_device_index());
  Tensor found = torch::stable::new_empty(ids, {ids.numel()}, ScalarType::Bool);
  Tensor info = torch::stable::new_empty(ids, {sb::info_words(p.num_tables, p.num_features, 0)}, ScalarType::Long);
  p.found = static_cast<bool*>(found.data_ptr());
  p.info = static_cast<int64_t*>(info.data_ptr());
  zero_on(ids, p.info, static_cast<size_t>(info.numel()) * 8);
  if (ids.is_cuda()) {
    launch_cache_probe(p, accel::current_cuda_stream(ids.get_device_index()));
  } else {
    probe_cpu(p);
  }
  return std::make_tuple(found, info);
}

// (failed (1,) int32: the step's skip flag; info: the probe's T + F + 1, then the first failure [rule, table, id,
// bucket slots] (4), then the staging's own counts (stage_bind.h info_tail)). `stage`: num_tables StageTable
// records; `totals` (num_tables, 3) int64: per table [moved in, written back, refused] accumulated by the kernels
// (the module's running counts: no add of the caller's per step);
// `cur` / `min_live`: this step's stamp and the oldest guarded one; `report`: the first failure goes to the device
// error record (CUDA; the CPU caller raises from info); `gate` (1,) int32 or None: when it reads 0 the op does
// nothing (the step after a prefetch of its batch passes the prefetch's failed flag: it stages only what the
// prefetch left); `failed_host` (CUDA, nonzero): the address of a pinned int32 that gets a copy of the failed flag
// after the kernels (the host learns, without waiting, that a prefetch staged its whole batch).
std::tuple<Tensor, Tensor> cache_stage(Tensor meta, Tensor stage, Tensor totals, Tensor ids, Tensor offsets,
                                       Tensor feature_table, int64_t batch, Tensor table_mask, int64_t cur,
                                       int64_t min_live, bool insert_new, int64_t value_bytes, bool report,
                                       std::optional<Tensor> gate, int64_t failed_host) {
  CacheProbeParams probe = sb::bind_probe(meta, ids, offsets, feature_table, batch, table_mask);
  const int64_t n = ids.numel();
  std::optional<torch::stable::accelerator::DeviceGuard> guard;
  if (ids.is_cuda()) guard.emplace(ids.get_device_index());
  // three allocations (the per-id scratch, info, the flag) and two memsets: no fill kernels of torch's
  Tensor scratch = torch::stable::new_empty(ids, {sb::scratch_words(n, probe.num_tables, ids.is_cuda())}, ScalarType::Long);
  const int64_t info_n = sb::info_words(probe.num_tables, probe.num_features, sb::info_tail(probe.num_tables));
  Tensor info = torch::stable::new_empty(ids, {info_n}, ScalarType::Long);
  Tensor failed = torch::stable::new_empty(ids, {1}, ScalarType::Int);
  StageParams p = sb::bind_stage(probe, ids, stage, totals, cur, min_live, insert_new, value_bytes, gate,
                                 static_cast<int64_t*>(scratch.data_ptr()), static_cast<int64_t*>(info.data_ptr()),
                                 static_cast<int32_t*>(failed.data_ptr()), ids.is_cuda());
  zero_on(ids, info.data_ptr(), static_cast<size_t>(info.numel()) * 8);
  zero_on(ids, failed.data_ptr(), sizeof(int32_t));
  if (ids.is_cuda()) {
    void* stream = accel::current_cuda_stream(ids.get_device_index());
#ifdef HSTU_DEV_VARIANTS
    if (failed_host != 0 && lab_split_moves()) {
      launch_cache_stage_split(probe, p, report, stream);
      // the moves read the scratch after this op returns: held until the next split job (which waits for them)
      static auto* keep = new std::vector<Tensor>();
      keep->assign({scratch, info, failed, ids, offsets});
    } else {
      launch_cache_stage(probe, p, report, stream);
    }
#else
    launch_cache_stage(probe, p, report, stream);
#endif
    if (failed_host != 0) {  // the flag's host copy (a prefetch's: its step skips staging when it reads 0 there)
      const cudaError_t e = cudaMemcpyAsync(reinterpret_cast<void*>(static_cast<uintptr_t>(failed_host)), p.failed,
                                            sizeof(int32_t), cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream));
      ACCEL_CHECK(e == cudaSuccess, "cache_stage: the failed flag's host copy failed: ", cudaGetErrorString(e));
    }
  } else if (p.gate == nullptr || *p.gate != 0) {  // (the CPU twin reads its gate at once)
    probe_cpu(probe);
    stage_host(p);
  }
  return std::make_tuple(failed, info);
}

// Lab only (benchmarks, tools/dynamicemb_dev): selects the CUDA staging's variant of later steps in this process
// (stage_kernels.cu, kStageVariants); -1 only reads it. Returns the one before.
int64_t lookup_lab_stage(int64_t variant) {
#ifdef HSTU_DEV_VARIANTS
  const int nv = lab_stage_variants();
#else
  const int nv = kStageVariants;
#endif
  ACCEL_CHECK(variant >= -1 && variant < nv, "variant: expected -1 (read) or 0..", nv - 1,
              " (a staging variant), got ", variant);
  return set_stage_variant(static_cast<int>(variant));
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
      "Tensor table_mask, int cur, int min_live, bool insert_new, int value_bytes, bool report, Tensor? gate=None, "
      "int failed_host=0) -> (Tensor, Tensor)");
  m.def("_lookup_lab_stage(int variant) -> int");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CPU, m) {
  m.impl("cache_probe", TORCH_BOX(&dynamicemb::lookup::cache_probe));
  m.impl("cache_stage", TORCH_BOX(&dynamicemb::lookup::cache_stage));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CompositeExplicitAutograd, m) {
  m.impl("_lookup_lab_stage", TORCH_BOX(&dynamicemb::lookup::lookup_lab_stage));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("cache_probe", TORCH_BOX(&dynamicemb::lookup::cache_probe));
  m.impl("cache_stage", TORCH_BOX(&dynamicemb::lookup::cache_stage));
}
