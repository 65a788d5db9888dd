// Embedding hot-path ops of BatchedDynamicEmbeddingTables (torch stable ABI, CUDA only; the CPU path is the
// torch code in dynamicemb/_batched.py). Kernels: dynamicemb/csrc/lookup/. Every op runs on the current stream
// and never synchronizes with the host, so a whole training step can be captured in a CUDA graph. Outputs are
// allocated here through torch's allocator (graph-capture aware). Argument checks keep memory safe; the
// user-facing validation lives in Python.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {
namespace {

using torch::stable::Tensor;
using accel::ScalarType;
constexpr int64_t kMetaFields = sizeof(TableMeta) / 8;

void check_cuda(const Tensor& t, const char* name, const Tensor& ref, ScalarType dtype, const char* ref_name = "ids") {
  accel::check_dtype(t, name, dtype);
  accel::check_contiguous(t, name);
  ACCEL_CHECK(t.is_cuda(), name, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, name, ref, ref_name);
}

// per-sample weights: none, or one fp32 weight per id
void check_psw(const std::optional<Tensor>& psw, int64_t n, const Tensor& ref, const char* ref_name = "ids") {
  if (!psw.has_value()) return;
  check_cuda(*psw, "per_sample_weights", ref, ScalarType::Float, ref_name);
  ACCEL_CHECK(psw->dim() == 1 && psw->numel() == n, "per_sample_weights: expected shape (", n,
              ",) (one weight per id), got ", accel::shape_str(*psw));
}

int64_t num_tables_of(const Tensor& meta) {
  ACCEL_CHECK(meta.scalar_type() == ScalarType::Long && meta.is_contiguous() && meta.numel() % kMetaFields == 0,
              "meta: expected a contiguous int64 tensor of num_tables x ", kMetaFields, " fields");
  return meta.numel() / kMetaFields;
}

const TableMeta* meta_ptr(const Tensor& meta) { return static_cast<const TableMeta*>(meta.data_ptr()); }

template <typename Fn>
void dispatch_value(int64_t v, Fn&& fn) {
  switch (v) {
    case kFp16: fn(std::integral_constant<int, kFp16>{}); break;
    case kBf16: fn(std::integral_constant<int, kBf16>{}); break;
    case kFp32: fn(std::integral_constant<int, kFp32>{}); break;
    default: ACCEL_CHECK(false, "value_kind: expected 0 (fp16), 1 (bf16) or 2 (fp32), got ", v);
  }
}

ScalarType scalar_of(int64_t v) {
  switch (v) {
    case kFp16: return ScalarType::Half;
    case kBf16: return ScalarType::BFloat16;
    default: return ScalarType::Float;
  }
}

// ---------------------------------------------------------------- device-side checks
// Checks one step's device values (validate_types.h) on the current stream; returns the (1,) int32 flag that
// lookup_dedup's `skip` reads (nonzero: the batch failed and is treated as empty). `offsets` is int64; with
// `lengths_only` it was built from `lengths` by the caller and violations are reported on lengths.
Tensor lookup_validate(Tensor ids, Tensor offsets, std::optional<Tensor> lengths, std::optional<Tensor> psw,
                       bool lengths_only) {
  ACCEL_CHECK(ids.scalar_type() == ScalarType::Long || ids.scalar_type() == ScalarType::UInt64,
              "ids: expected dtype int64 or uint64, got ", accel::dtype_name(ids.scalar_type()));
  accel::check_dim(ids, "ids", 1);
  check_cuda(ids, "ids", ids, ids.scalar_type());
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  accel::check_dim(offsets, "offsets", 1);
  ACCEL_CHECK(offsets.numel() >= 1, "offsets: expected at least 1 entry, got 0");
  const int64_t nb = offsets.numel() - 1;
  if (lengths.has_value()) {
    check_cuda(*lengths, "lengths", ids, ScalarType::Long);
    ACCEL_CHECK(lengths->numel() == nb, "lengths: expected ", nb, " entries (offsets has ", nb + 1, "), got ",
                lengths->numel());
  }
  ACCEL_CHECK(!lengths_only || lengths.has_value(), "lengths_only: expected lengths, got None");
  check_psw(psw, ids.numel(), ids);
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  Tensor bad = torch::stable::new_zeros(ids, {1}, ScalarType::Int);
  ValidateParams p{};
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.n = ids.numel();
  p.uint64_keys = ids.scalar_type() == ScalarType::UInt64;
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.num_bags = nb;
  p.lengths = lengths.has_value() ? static_cast<const int64_t*>(lengths->data_ptr()) : nullptr;
  p.lengths_only = lengths_only;
  p.psw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  p.bad = static_cast<int32_t*>(bad.data_ptr());
  launch_validate(p, accel::current_cuda_stream(ids.get_device_index()));
  return bad;
}

// The pinned error block's host address (0: none, e.g. without a CUDA device) and the reset of a device's claim
// after the host read its record (DeviceErrorChannel in dynamicemb/_device_errors.py).
int64_t device_error_block() { return error_block_address(); }

void clear_device_error(int64_t device) {
  if (error_block_address() == 0) return;
  clear_error_claim(static_cast<int>(device), accel::current_cuda_stream(static_cast<int32_t>(device)));
}

// Reports the rows / steps skipped for non-finite gradients since the last report (nonfinite="raise" of the
// torch path on CUDA; lookup_backward reports its own): counts (2) int64 [rows, steps], seen (1) int64.
void report_nonfinite(Tensor counts, Tensor seen) {
  check_cuda(counts, "counts", counts, ScalarType::Long, "counts");
  check_cuda(seen, "seen", counts, ScalarType::Long, "counts");
  ACCEL_CHECK(counts.numel() == 2 && seen.numel() == 1, "counts/seen: expected 2 and 1 entries, got ",
              counts.numel(), " and ", seen.numel());
  torch::stable::accelerator::DeviceGuard guard(counts.get_device_index());
  launch_report_nonfinite(static_cast<const int64_t*>(counts.data_ptr()), static_cast<int64_t*>(seen.data_ptr()),
                          accel::current_cuda_stream(counts.get_device_index()));
}

// ---------------------------------------------------------------- dedup
// Entries of the per-step (table, id) set that the dedup uses for n ids (at most 80% full); the caller allocates
// at least this many (op lookup_dedup_set_size), the dedup uses no more.
int64_t dedup_set_size(int64_t n) { return n + n / 4 + 1024; }

int64_t lookup_dedup_set_size(int64_t n) {
  ACCEL_CHECK(n >= 0, "n: expected >= 0 ids, got ", n);
  return dedup_set_size(n);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> lookup_dedup(Tensor ids, Tensor offsets, Tensor feature_table,
                                                                int64_t batch, Tensor set,
                                                                std::optional<Tensor> skip) {
  ACCEL_CHECK(ids.scalar_type() == ScalarType::Long || ids.scalar_type() == ScalarType::UInt64,
              "ids: expected dtype int64 or uint64, got ", accel::dtype_name(ids.scalar_type()));
  accel::check_dim(ids, "ids", 1);
  check_cuda(ids, "ids", ids, ids.scalar_type());
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(set, "set", ids, ScalarType::Int);
  const int64_t n = ids.numel();
  // the set's first dedup_set_size(n) entries: 4-byte slots, refilled by every call
  const int64_t cap = std::min<int64_t>(set.numel(), dedup_set_size(n));
  ACCEL_CHECK(set.is_contiguous() && cap >= n && reinterpret_cast<uintptr_t>(set.data_ptr()) % 16 == 0,
              "set: expected a contiguous 16-byte aligned int32 tensor of at least ids.numel() = ", n,
              " entries, got ", set.numel());
  ACCEL_CHECK(offsets.numel() >= 2, "offsets: expected at least 2 entries");
  ACCEL_CHECK(feature_table.numel() >= 1, "feature_table: expected at least one feature");
  ACCEL_CHECK(n < (int64_t(1) << 31) - 1, "ids: at most 2^31 - 2 ids per step, got ", n);
  ACCEL_CHECK(batch > 0, "batch: expected > 0, got ", batch);
  if (skip.has_value()) {
    check_cuda(*skip, "skip", ids, ScalarType::Int);
    ACCEL_CHECK(skip->numel() == 1, "skip: expected 1 entry (lookup_validate's flag), got ", skip->numel());
  }
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  auto i32 = [&](int64_t k) { return torch::stable::new_empty(ids, {k}, ScalarType::Int); };
  Tensor inverse = i32(n), bag = i32(n), utables = i32(n), count = i32(1);
  Tensor ukeys = torch::stable::new_empty(ids, {n}, ScalarType::Long);
  DedupParams p{};
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.n = n;
  p.num_bags = offsets.numel() - 1;
  p.batch = batch;
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.num_features = static_cast<int>(feature_table.numel());
  p.set = static_cast<uint32_t*>(set.data_ptr());
  p.set_capacity = cap;
  p.bag = static_cast<int32_t*>(bag.data_ptr());
  p.inverse = static_cast<int32_t*>(inverse.data_ptr());
  p.ukeys = static_cast<uint64_t*>(ukeys.data_ptr());
  p.utables = static_cast<int32_t*>(utables.data_ptr());
  p.count = static_cast<int32_t*>(count.data_ptr());
  p.skip = skip.has_value() ? static_cast<const int32_t*>(skip->data_ptr()) : nullptr;
  launch_dedup(p, stream);
  return std::make_tuple(inverse, bag, ukeys, utables, count);
}

// ---------------------------------------------------------------- insert / find
std::tuple<Tensor, Tensor, Tensor> lookup_insert(Tensor meta, int64_t value_kind, Tensor ukeys, Tensor utables,
                                                 Tensor count, Tensor inverse, bool train) {
  const int64_t T = num_tables_of(meta);
  check_cuda(meta, "meta", ukeys, ScalarType::Long, "ukeys");
  check_cuda(ukeys, "ukeys", ukeys, ScalarType::Long, "ukeys");
  check_cuda(utables, "utables", ukeys, ScalarType::Int, "ukeys");
  check_cuda(count, "count", ukeys, ScalarType::Int, "ukeys");
  const int64_t n = ukeys.numel();
  ACCEL_CHECK(utables.numel() == n && count.numel() == 1, "utables/count: expected ", n, " and 1 entries");
  check_cuda(inverse, "inverse", ukeys, ScalarType::Int, "ukeys");
  ACCEL_CHECK(inverse.numel() == n, "inverse: expected ", n, " entries (one per id), got ", inverse.numel());
  torch::stable::accelerator::DeviceGuard guard(ukeys.get_device_index());
  Tensor urow = torch::stable::new_empty(ukeys, {n}, ScalarType::Long);
  Tensor rowp = torch::stable::new_empty(ukeys, {n}, ScalarType::Long);
  Tensor refused = torch::stable::new_zeros(ukeys, {T}, ScalarType::Long);
  InsertParams p{};
  p.meta = meta_ptr(meta);
  p.num_tables = static_cast<int>(T);
  p.ukeys = static_cast<const uint64_t*>(ukeys.data_ptr());
  p.utables = static_cast<const int32_t*>(utables.data_ptr());
  p.count = static_cast<const int32_t*>(count.data_ptr());
  p.n = n;
  p.train = train;
  p.urow = static_cast<int64_t*>(urow.data_ptr());
  p.refused = static_cast<int64_t*>(refused.data_ptr());
  p.inverse = static_cast<const int32_t*>(inverse.data_ptr());
  p.n_ids = n;
  p.rowp = static_cast<uint64_t*>(rowp.data_ptr());
  void* stream = accel::current_cuda_stream(ukeys.get_device_index());
  dispatch_value(value_kind, [&](auto V) { launch_insert<V.value>(p, stream); });
  return std::make_tuple(urow, refused, rowp);
}

// ---------------------------------------------------------------- forward
Tensor lookup_forward(Tensor meta, int64_t value_kind, Tensor ids, Tensor offsets, Tensor bag, Tensor rowp,
                      std::optional<Tensor> psw, Tensor feature_table, Tensor feature_col, int64_t batch,
                      int64_t pooling, bool train, int64_t max_dim, int64_t out_cols, int64_t out_kind, bool vec4) {
  num_tables_of(meta);
  check_cuda(meta, "meta", ids, ScalarType::Long);
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  check_cuda(bag, "bag", ids, ScalarType::Int);
  check_cuda(rowp, "rowp", ids, ScalarType::Long);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(feature_col, "feature_col", ids, ScalarType::Long);
  const int64_t n = ids.numel();
  ACCEL_CHECK(bag.numel() == n && rowp.numel() == n, "bag/rowp: expected ", n, " entries");
  ACCEL_CHECK(feature_col.numel() == feature_table.numel(), "feature_col: expected one entry per feature");
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none)");
  ACCEL_CHECK(max_dim > 0 && max_dim <= kMaxVecDim && max_dim <= out_cols, "max_dim: expected 1..",
              kMaxVecDim, " and <= out_cols, got ", max_dim);
  ACCEL_CHECK(offsets.numel() >= 2 && batch > 0, "offsets/batch: expected >= 2 offsets and batch > 0");
  check_psw(psw, n, ids);
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  const int64_t rows = pooling == kPoolNone ? n : batch;
  Tensor out = torch::stable::new_empty(ids, {rows, out_cols}, scalar_of(out_kind));
  ForwardParams p{};
  p.meta = meta_ptr(meta);
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.bag = static_cast<const int32_t*>(bag.data_ptr());
  p.rowp = static_cast<const uint64_t*>(rowp.data_ptr());
  p.psw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.feature_col = static_cast<const int64_t*>(feature_col.data_ptr());
  p.n = n;
  p.num_bags = offsets.numel() - 1;
  p.batch = batch;
  p.num_features = static_cast<int>(feature_table.numel());
  p.pooling = static_cast<int>(pooling);
  p.train = train;
  p.max_dim = static_cast<int>(max_dim);
  p.out_stride = out_cols;
  p.out = out.data_ptr();
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  dispatch_value(value_kind, [&](auto V) {
    dispatch_value(out_kind, [&](auto O) { launch_forward<V.value, O.value>(p, vec4, stream); });
  });
  return out;
}

// ---------------------------------------------------------------- CSR of the segmented backward
// One int64 workspace per step holds the CSR (sort keys and values, segment bounds, entries, scales) and the sort's
// scratch; byte offsets of its parts (256-aligned).
struct CsrLayout {
  int64_t keys, vals, start, occ, scale, temp, temp_bytes, total;
};

// Whether the CSR carries a per-entry gradient scale (per-sample weights or mean pooling). The one place that
// decides it: the workspace size (lookup_csr_size), the build (lookup_csr, or lookup_backward's inline build) and
// the backward's use of the CSR all derive it from the same (psw, pooling) arguments here.
bool csr_scaled(const std::optional<Tensor>& psw, int64_t pooling) { return psw.has_value() || pooling == kPoolMean; }

CsrLayout csr_layout(int64_t n, bool scaled) {
  auto up = [](int64_t b) { return (b + 255) / 256 * 256; };
  CsrLayout l{};
  int64_t off = 0;
  l.keys = off; off += up(2 * n * 4);
  l.vals = off; off += up(2 * n * 4);
  l.start = off; off += up((2 * n + 1) * 4);
  l.occ = off; off += up(n * 8);
  l.scale = off; off += up(scaled ? n * 4 : 0);
  l.temp_bytes = static_cast<int64_t>(segment_scan_bytes(n));
  l.temp = off; off += up(l.temp_bytes > 0 ? l.temp_bytes : 1);
  l.total = off;
  return l;
}

int64_t csr_size(int64_t n, bool scaled) { return (csr_layout(n, scaled).total + 7) / 8; }

// Binds the workspace of n > 0 ids. Its size must be exactly csr_size(n, scaled): for n > 0 the scaled layout is
// at least 32 entries larger than the unscaled one, so a CSR built by lookup_csr with other (psw, pooling) than the
// backward's is refused here instead of read with the wrong layout.
void bind_csr(BackwardParams& p, const Tensor& ws, int64_t n, bool scaled) {
  const CsrLayout l = csr_layout(n, scaled);
  const int64_t want = (l.total + 7) / 8;
  ACCEL_CHECK(ws.numel() != csr_size(n, !scaled), "csr: expected ", want, " int64 entries (lookup_csr_size of ",
              n, " ids, ", scaled ? "scaled" : "unscaled", "), got ", ws.numel(), ": the size of a CSR ",
              scaled ? "without" : "with", " per-entry scales; psw/pooling must be the same in lookup_csr_size, ",
              "lookup_csr and lookup_backward (scaled: per-sample weights or mean pooling)");
  ACCEL_CHECK(ws.scalar_type() == ScalarType::Long && ws.is_contiguous() && ws.numel() == want,
              "csr: expected a contiguous int64 workspace of exactly lookup_csr_size = ", want, " entries (", n,
              " ids), got ", ws.numel());
  char* b = static_cast<char*>(ws.data_ptr());
  p.seg_keys = reinterpret_cast<int32_t*>(b + l.keys);
  p.seg_vals = reinterpret_cast<int32_t*>(b + l.vals);
  p.seg_start = reinterpret_cast<int32_t*>(b + l.start);
  p.seg_end = p.seg_start + (n + 1);
  p.seg_occ = reinterpret_cast<int2_t*>(b + l.occ);
  p.seg_scale = scaled ? reinterpret_cast<float*>(b + l.scale) : nullptr;
  p.scan_temp = b + l.temp;
  p.scan_temp_bytes = static_cast<size_t>(l.temp_bytes);
}

// The inputs of the CSR build (what launch_segment_csr reads), checked and bound by one function for lookup_csr
// and for lookup_backward (whose inline build and whose apply read the same fields). `ref` names the device.
void check_csr_inputs(const Tensor& inverse, const Tensor& bag, const Tensor& offsets,
                      const std::optional<Tensor>& psw, int64_t pooling, const Tensor& ref, const char* ref_name) {
  check_cuda(inverse, "inverse", ref, ScalarType::Int, ref_name);
  check_cuda(bag, "bag", ref, ScalarType::Int, ref_name);
  check_cuda(offsets, "offsets", ref, ScalarType::Long, ref_name);
  const int64_t n = inverse.numel();
  ACCEL_CHECK(bag.numel() == n, "bag: expected ", n, " entries (one per id, like inverse), got ", bag.numel());
  ACCEL_CHECK(offsets.numel() >= 2, "offsets: expected at least 2 entries, got ", offsets.numel());
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none), got ",
              pooling);
  check_psw(psw, n, ref, ref_name);
}

void bind_csr_inputs(BackwardParams& p, const Tensor& inverse, const Tensor& bag, const Tensor& offsets,
                     const std::optional<Tensor>& psw, int64_t pooling) {
  p.n = inverse.numel();
  p.inverse = static_cast<const int32_t*>(inverse.data_ptr());
  p.bag = static_cast<const int32_t*>(bag.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.num_bags = offsets.numel() - 1;
  p.pooling = static_cast<int>(pooling);
  p.psw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
}

// int64 entries of the CSR workspace for the ids of `inverse` (only their count matters) and the scaling that
// (psw, pooling) imply; pass the same psw and pooling to lookup_csr and lookup_backward.
int64_t lookup_csr_size(Tensor inverse, std::optional<Tensor> psw, int64_t pooling) {
  ACCEL_CHECK(inverse.numel() < (int64_t(1) << 31) - 1, "inverse: at most 2^31 - 2 ids per step, got ",
              inverse.numel());
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none), got ",
              pooling);
  return csr_size(inverse.numel(), csr_scaled(psw, pooling));
}

// Builds the CSR unique -> occurrences of the segmented backward into `csr` (int64, lookup_csr_size(inverse, psw,
// pooling) entries) from the dedup's inverse and bags alone, so the training forward can run it on a side stream
// while the insert and the pooling run.
void lookup_csr(Tensor inverse, Tensor bag, Tensor offsets, std::optional<Tensor> psw, int64_t pooling, Tensor csr) {
  check_csr_inputs(inverse, bag, offsets, psw, pooling, inverse, "inverse");
  check_cuda(csr, "csr", inverse, ScalarType::Long, "inverse");
  const int64_t n = inverse.numel();
  if (n == 0) return;
  torch::stable::accelerator::DeviceGuard guard(inverse.get_device_index());
  BackwardParams p{};
  bind_csr_inputs(p, inverse, bag, offsets, psw, pooling);
  bind_csr(p, csr, n, csr_scaled(psw, pooling));
  launch_segment_csr(p, accel::current_cuda_stream(inverse.get_device_index()));
}

// ---------------------------------------------------------------- backward + optimizer
// seg_chunk > 0 asks for the segmented reduction (CSR entries per warp), 0 for the atomic scatter. The caller
// decides (_batched.py::_segmented); this op only refuses a request its kernels cannot serve.
Tensor lookup_backward(Tensor meta, int64_t value_kind, Tensor grad, Tensor ids, Tensor offsets, Tensor inverse,
                       Tensor bag, Tensor rowp, Tensor count, Tensor urow, Tensor utables, std::optional<Tensor> psw,
                       Tensor feature_table, Tensor feature_col, int64_t batch, int64_t pooling, bool vec4,
                       int64_t max_dim, int64_t opt, Tensor lr, Tensor step, double weight_decay,
                       bool decoupled_weight_decay, double beta1, double beta2, double eps, double max_grad_value,
                       double max_grad_norm, bool psw_grad, bool direct, bool aggregate, Tensor gsum, Tensor seg,
                       int64_t seg_chunk, std::optional<Tensor> csr, int64_t nonfinite,
                       std::optional<Tensor> nonfinite_count, std::optional<Tensor> nonfinite_seen) {
  num_tables_of(meta);
  check_cuda(meta, "meta", ids, ScalarType::Long);
  check_cuda(grad, "grad", ids, ScalarType::Float);
  check_csr_inputs(inverse, bag, offsets, psw, pooling, ids, "ids");
  check_cuda(utables, "utables", ids, ScalarType::Int);
  check_cuda(rowp, "rowp", ids, ScalarType::Long);
  check_cuda(count, "count", ids, ScalarType::Int);
  check_cuda(urow, "urow", ids, ScalarType::Long);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(feature_col, "feature_col", ids, ScalarType::Long);
  check_cuda(lr, "lr", ids, ScalarType::Float);
  check_cuda(step, "step", ids, ScalarType::Float);
  const int64_t n = ids.numel();
  ACCEL_CHECK(inverse.numel() == n && bag.numel() == n && rowp.numel() == n && urow.numel() == n &&
                  utables.numel() == n,
              "backward index tensors: expected ", n, " entries");
  ACCEL_CHECK(grad.dim() == 2, "grad: expected a 2-d tensor, got shape ", accel::shape_str(grad));
  ACCEL_CHECK(max_dim > 0 && max_dim <= kMaxVecDim && max_dim <= grad.size(1), "max_dim: expected 1..", kMaxVecDim,
              " and <= grad.size(1), got ", max_dim);
  ACCEL_CHECK(batch > 0, "batch: expected > 0, got ", batch);
  ACCEL_CHECK(!direct || (value_kind == kFp32 && opt == kSgd && weight_decay == 0.0 && max_grad_value <= 0.0 &&
                          max_grad_norm <= 0.0),
              "direct: only for fp32 SGD without weight decay or clipping");
  ACCEL_CHECK(nonfinite >= kNonFinitePropagate && nonfinite <= kNonFiniteRaise,
              "nonfinite: expected 0 (propagate), 1 (skip_row), 2 (skip_step) or 3 (raise), got ", nonfinite);
  if (nonfinite != kNonFinitePropagate) {
    ACCEL_CHECK(nonfinite_count.has_value(), "nonfinite_count: expected a (2,) int64 counter with nonfinite = ",
                nonfinite, ", got None");
    check_cuda(*nonfinite_count, "nonfinite_count", ids, ScalarType::Long);
    ACCEL_CHECK(nonfinite_count->numel() == 2, "nonfinite_count: expected 2 entries, got ", nonfinite_count->numel());
  }
  if (nonfinite == kNonFiniteRaise) {
    ACCEL_CHECK(nonfinite_seen.has_value(), "nonfinite_seen: expected a (1,) int64 tensor with nonfinite = 3, got ",
                "None");
    check_cuda(*nonfinite_seen, "nonfinite_seen", ids, ScalarType::Long);
    ACCEL_CHECK(nonfinite_seen->numel() == 1, "nonfinite_seen: expected 1 entry, got ", nonfinite_seen->numel());
  }
  ACCEL_CHECK(opt >= kSgd && opt <= kAdam, "opt: expected 0..3, got ", opt);
  ACCEL_CHECK(!psw_grad || psw.has_value(), "psw_grad: needs per_sample_weights");
  ACCEL_CHECK(seg_chunk >= 0 && seg_chunk <= (int64_t(1) << 20), "seg_chunk: expected 0 (atomic scatter) or ",
              "1..2^20 (segmented), got ", seg_chunk);
  const bool segmented = seg_chunk > 0;
  // gsum rows (lookup_types.h): segmented: one per warp of seg_chunk CSR entries (cut segments; none for direct
  // SGD that propagates non-finite gradients); atomic scatter: one per unique (none for direct SGD)
  const bool gsum_used = segmented ? !(direct && nonfinite == kNonFinitePropagate) : !direct;
  const int64_t gsum_rows = !gsum_used ? 0 : (segmented ? (n + seg_chunk - 1) / seg_chunk : n);
  check_cuda(gsum, "gsum", ids, ScalarType::Float);
  ACCEL_CHECK(gsum.dim() == 2 && gsum.size(0) >= gsum_rows && gsum.size(1) % 4 == 0 &&
                  (!gsum_used || gsum.size(1) >= max_dim),
              "gsum: expected a zeroed (>= ", gsum_rows, ", >= max_dim = ", max_dim,
              " rounded to 4) fp32 buffer, got shape ", accel::shape_str(gsum));
  ACCEL_CHECK(!direct || segmented || nonfinite == kNonFinitePropagate,
              "direct: the atomic scatter adds straight into the rows; expected nonfinite = 0 (propagate) with it, ",
              "got ", nonfinite);
  const int64_t seg_max_dim = vec4 ? 128 : 32;  // one 32 x 4 (vec4) / 32-column chunk per row
  if (segmented) {
    ACCEL_CHECK(nonfinite != kNonFiniteSkipStep, "seg_chunk: expected 0 (the atomic scatter) with nonfinite = 2 ",
                "(skip_step needs the whole step's gradients before any row changes), got seg_chunk = ", seg_chunk);
    ACCEL_CHECK(max_grad_norm <= 0.0, "seg_chunk: expected 0 (the atomic scatter) with max_grad_norm > 0 (the ",
                "segmented backward has no clipping by the global norm), got seg_chunk = ", seg_chunk,
                " with max_grad_norm = ", max_grad_norm);
    ACCEL_CHECK(max_dim <= seg_max_dim, "seg_chunk: expected 0 (the atomic scatter) for max_dim > ", seg_max_dim,
                " (", vec4 ? "vec4" : "scalar", " rows of the segmented backward), got seg_chunk = ", seg_chunk,
                " with max_dim = ", max_dim);
    check_cuda(seg, "seg", ids, ScalarType::Int);
    ACCEL_CHECK(seg.numel() >= n + 1, "seg: expected a zeroed int32 buffer of >= ids.numel() + 1 = ", n + 1,
                " entries, got ", seg.numel());
  } else {
    ACCEL_CHECK(!csr.has_value(), "csr: expected None with seg_chunk = 0 (the atomic scatter builds no CSR), got ",
                "a workspace");
  }
  if (csr.has_value()) check_cuda(*csr, "csr", ids, ScalarType::Long);
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  Tensor grad_psw = torch::stable::new_empty(ids, {psw_grad ? n : 0}, ScalarType::Float);
  Tensor norm = torch::stable::new_empty(ids, {1}, ScalarType::Double);
  BackwardParams p{};
  bind_csr_inputs(p, inverse, bag, offsets, psw, pooling);
  p.meta = meta_ptr(meta);
  p.grad = static_cast<const float*>(grad.data_ptr());
  p.rowp = static_cast<const uint64_t*>(rowp.data_ptr());
  p.count = static_cast<const int32_t*>(count.data_ptr());
  p.urow = static_cast<const int64_t*>(urow.data_ptr());
  p.utables = static_cast<const int32_t*>(utables.data_ptr());
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.feature_col = static_cast<const int64_t*>(feature_col.data_ptr());
  p.batch = batch;
  p.num_features = static_cast<int>(feature_table.numel());
  p.out_stride = grad.size(1);
  p.max_dim = static_cast<int>(max_dim);
  p.opt = static_cast<int>(opt);
  p.direct = direct;
  p.aggregate = aggregate;
  p.lr = static_cast<const float*>(lr.data_ptr());
  p.step = static_cast<const float*>(step.data_ptr());
  p.weight_decay = static_cast<float>(weight_decay);
  p.decoupled_weight_decay = decoupled_weight_decay;
  p.beta1 = beta1;
  p.beta2 = beta2;
  p.eps = static_cast<float>(eps);
  p.max_grad_value = static_cast<float>(max_grad_value);
  p.max_grad_norm = static_cast<float>(max_grad_norm);
  p.norm_sq = static_cast<double*>(norm.data_ptr());
  p.nonfinite = static_cast<int>(nonfinite);
  p.nonfinite_count = nonfinite_count.has_value() ? static_cast<int64_t*>(nonfinite_count->data_ptr()) : nullptr;
  p.grad_psw = psw_grad ? static_cast<float*>(grad_psw.data_ptr()) : nullptr;
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.gsum = static_cast<float*>(gsum.data_ptr());
  p.gsum_stride = gsum.size(1);
  // the CSR of the segmented path: built by lookup_csr (the forward's side stream) when `csr` is given, else here
  // into a per-step workspace (the caching allocator / the graph's pool)
  Tensor csr_ws;
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  if (segmented && n > 0) {
    const bool scaled = csr_scaled(psw, pooling);
    csr_ws = csr.has_value() ? *csr : torch::stable::new_empty(ids, {csr_size(n, scaled)}, ScalarType::Long);
    p.seg_chunk = static_cast<int>(seg_chunk);
    p.seg_done = static_cast<int32_t*>(seg.data_ptr());
    bind_csr(p, csr_ws, n, scaled);
    if (!csr.has_value()) launch_segment_csr(p, stream);
  }
  dispatch_value(value_kind, [&](auto V) { launch_backward<V.value>(p, vec4, stream); });
  if (nonfinite == kNonFiniteRaise)
    launch_report_nonfinite(p.nonfinite_count, static_cast<int64_t*>(nonfinite_seen->data_ptr()), stream);
  return grad_psw;
}

}  // namespace
}  // namespace lookup
}  // namespace dynamicemb

STABLE_TORCH_LIBRARY_FRAGMENT(dynamicemb, m) {
  m.def(
      "lookup_dedup(Tensor ids, Tensor offsets, Tensor feature_table, int batch, Tensor(a!) set, "
      "Tensor? skip=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "lookup_validate(Tensor ids, Tensor offsets, Tensor? lengths, Tensor? psw, bool lengths_only) -> Tensor");
  m.def("device_error_block() -> int");
  m.def("report_nonfinite(Tensor counts, Tensor(a!) seen) -> ()");
  m.def("clear_device_error(int device) -> ()");
  m.def(
      "lookup_insert(Tensor(a!) meta, int value_kind, Tensor ukeys, Tensor utables, Tensor count, Tensor inverse, "
      "bool train) -> (Tensor, Tensor, Tensor)");
  m.def(
      "lookup_forward(Tensor meta, int value_kind, Tensor ids, Tensor offsets, Tensor bag, Tensor rowp, "
      "Tensor? psw, Tensor feature_table, Tensor feature_col, int batch, int pooling, bool train, int max_dim, "
      "int out_cols, int out_kind, bool vec4) -> Tensor");
  m.def(
      "lookup_backward(Tensor(a!) meta, int value_kind, Tensor grad, Tensor ids, Tensor offsets, Tensor inverse, "
      "Tensor bag, Tensor rowp, Tensor count, Tensor urow, Tensor utables, Tensor? psw, Tensor feature_table, "
      "Tensor feature_col, int batch, int pooling, bool vec4, int max_dim, int opt, Tensor lr, Tensor step, "
      "float weight_decay, bool decoupled_weight_decay, float beta1, float beta2, float eps, "
      "float max_grad_value, float max_grad_norm, bool psw_grad, bool direct, bool aggregate, Tensor(b!) gsum, "
      "Tensor(c!) seg, int seg_chunk, Tensor? csr=None, int nonfinite=0, Tensor(d!)? nonfinite_count=None, "
      "Tensor(e!)? nonfinite_seen=None) -> Tensor");
  m.def("lookup_csr_size(Tensor inverse, Tensor? psw, int pooling) -> int");
  m.def("lookup_dedup_set_size(int n) -> int");
  m.def("lookup_csr(Tensor inverse, Tensor bag, Tensor offsets, Tensor? psw, int pooling, Tensor(a!) csr) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("lookup_dedup", TORCH_BOX(&dynamicemb::lookup::lookup_dedup));
  m.impl("lookup_validate", TORCH_BOX(&dynamicemb::lookup::lookup_validate));
  m.impl("report_nonfinite", TORCH_BOX(&dynamicemb::lookup::report_nonfinite));
  m.impl("lookup_insert", TORCH_BOX(&dynamicemb::lookup::lookup_insert));
  m.impl("lookup_forward", TORCH_BOX(&dynamicemb::lookup::lookup_forward));
  m.impl("lookup_backward", TORCH_BOX(&dynamicemb::lookup::lookup_backward));
  m.impl("lookup_csr", TORCH_BOX(&dynamicemb::lookup::lookup_csr));
  m.impl("lookup_csr_size", TORCH_BOX(&dynamicemb::lookup::lookup_csr_size));
}

// No tensor argument to dispatch on: CompositeExplicitAutograd serves every backend (and CPU-only torch).
STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CompositeExplicitAutograd, m) {
  m.impl("lookup_dedup_set_size", TORCH_BOX(&dynamicemb::lookup::lookup_dedup_set_size));
  m.impl("device_error_block", TORCH_BOX(&dynamicemb::lookup::device_error_block));
  m.impl("clear_device_error", TORCH_BOX(&dynamicemb::lookup::clear_device_error));
}
