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

namespace dynamicemb {
namespace lookup {
namespace {

using torch::stable::Tensor;
using accel::ScalarType;
constexpr int64_t kMetaFields = sizeof(TableMeta) / 8;

void check_cuda(const Tensor& t, const char* name, const Tensor& ref, ScalarType dtype) {
  accel::check_dtype(t, name, dtype);
  accel::check_contiguous(t, name);
  ACCEL_CHECK(t.is_cuda(), name, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, name, ref, "ids");
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

// ---------------------------------------------------------------- dedup
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> lookup_dedup(Tensor ids, Tensor offsets, Tensor feature_table,
                                                                int64_t batch, Tensor set) {
  ACCEL_CHECK(ids.scalar_type() == ScalarType::Long || ids.scalar_type() == ScalarType::UInt64,
              "ids: expected dtype int64 or uint64, got ", accel::dtype_name(ids.scalar_type()));
  accel::check_dim(ids, "ids", 1);
  check_cuda(ids, "ids", ids, ids.scalar_type());
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(set, "set", ids, ScalarType::Int);
  const int64_t n = ids.numel();
  // the set's first n + n / 4 + 1024 entries (at most 80% full): 4-byte slots, refilled by every call
  const int64_t cap = std::min<int64_t>(set.numel(), n + n / 4 + 1024);
  ACCEL_CHECK(set.is_contiguous() && cap >= n && reinterpret_cast<uintptr_t>(set.data_ptr()) % 16 == 0,
              "set: expected a contiguous 16-byte aligned int32 tensor of at least ids.numel() = ", n,
              " entries, got ", set.numel());
  ACCEL_CHECK(offsets.numel() >= 2, "offsets: expected at least 2 entries");
  ACCEL_CHECK(feature_table.numel() >= 1, "feature_table: expected at least one feature");
  ACCEL_CHECK(n < (int64_t(1) << 31) - 1, "ids: at most 2^31 - 2 ids per step, got ", n);
  ACCEL_CHECK(batch > 0, "batch: expected > 0, got ", batch);
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
  launch_dedup(p, stream);
  return std::make_tuple(inverse, bag, ukeys, utables, count);
}

// ---------------------------------------------------------------- insert / find
std::tuple<Tensor, Tensor, Tensor> lookup_insert(Tensor meta, int64_t value_kind, Tensor ukeys, Tensor utables,
                                                 Tensor count, Tensor inverse, bool train) {
  const int64_t T = num_tables_of(meta);
  check_cuda(meta, "meta", ukeys, ScalarType::Long);
  check_cuda(ukeys, "ukeys", ukeys, ScalarType::Long);
  check_cuda(utables, "utables", ukeys, ScalarType::Int);
  check_cuda(count, "count", ukeys, ScalarType::Int);
  const int64_t n = ukeys.numel();
  ACCEL_CHECK(utables.numel() == n && count.numel() == 1, "utables/count: expected ", n, " and 1 entries");
  check_cuda(inverse, "inverse", ukeys, ScalarType::Int);
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
  if (psw.has_value()) {
    check_cuda(*psw, "per_sample_weights", ids, ScalarType::Float);
    ACCEL_CHECK(psw->numel() == n, "per_sample_weights: expected ", n, " entries");
  }
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

void bind_csr(BackwardParams& p, const Tensor& ws, int64_t n, bool scaled) {
  const CsrLayout l = csr_layout(n, scaled);
  ACCEL_CHECK(ws.scalar_type() == ScalarType::Long && ws.is_contiguous() && ws.numel() * 8 >= l.total,
              "csr: expected a contiguous int64 workspace of >= ", l.total / 8, " entries (lookup_csr_size), got ",
              ws.numel());
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

int64_t csr_size(int64_t n, bool scaled) { return (csr_layout(n, scaled).total + 7) / 8; }

// int64 entries of the CSR workspace of the ids' inverse map (the ids' count is all that matters).
int64_t lookup_csr_size(Tensor inverse, bool scaled) {
  ACCEL_CHECK(inverse.numel() < (int64_t(1) << 31) - 1, "inverse: at most 2^31 - 2 ids per step");
  return csr_size(inverse.numel(), scaled);
}

// Builds the CSR unique -> occurrences of the segmented backward into `csr` (int64, lookup_csr_size(n, scaled)
// entries; scaled: per-sample weights or mean pooling) from the dedup's inverse and bags alone, so the training
// forward can run it on a side stream while the insert and the pooling run.
void lookup_csr(Tensor inverse, Tensor bag, Tensor offsets, std::optional<Tensor> psw, int64_t pooling, Tensor csr) {
  check_cuda(inverse, "inverse", inverse, ScalarType::Int);
  check_cuda(bag, "bag", inverse, ScalarType::Int);
  check_cuda(offsets, "offsets", inverse, ScalarType::Long);
  check_cuda(csr, "csr", inverse, ScalarType::Long);
  const int64_t n = inverse.numel();
  ACCEL_CHECK(bag.numel() == n, "bag: expected ", n, " entries");
  ACCEL_CHECK(offsets.numel() >= 2, "offsets: expected at least 2 entries");
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none)");
  if (psw.has_value()) {
    check_cuda(*psw, "per_sample_weights", inverse, ScalarType::Float);
    ACCEL_CHECK(psw->numel() == n, "per_sample_weights: expected ", n, " entries");
  }
  if (n == 0) return;
  torch::stable::accelerator::DeviceGuard guard(inverse.get_device_index());
  BackwardParams p{};
  p.n = n;
  p.inverse = static_cast<const int32_t*>(inverse.data_ptr());
  p.bag = static_cast<const int32_t*>(bag.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.num_bags = offsets.numel() - 1;
  p.pooling = static_cast<int>(pooling);
  p.psw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  bind_csr(p, csr, n, psw.has_value() || pooling == kPoolMean);
  launch_segment_csr(p, accel::current_cuda_stream(inverse.get_device_index()));
}

// ---------------------------------------------------------------- backward + optimizer
Tensor lookup_backward(Tensor meta, int64_t value_kind, Tensor grad, Tensor ids, Tensor offsets, Tensor inverse,
                       Tensor bag, Tensor rowp, Tensor count, Tensor urow, Tensor utables, std::optional<Tensor> psw,
                       Tensor feature_table, Tensor feature_col, int64_t batch, int64_t pooling, bool vec4,
                       int64_t max_dim, int64_t opt, Tensor lr, Tensor step, double weight_decay,
                       bool decoupled_weight_decay, double beta1, double beta2, double eps, double max_grad_value,
                       double max_grad_norm, bool psw_grad, bool direct, bool aggregate, Tensor gsum, Tensor seg,
                       int64_t seg_chunk, std::optional<Tensor> csr) {
  num_tables_of(meta);
  check_cuda(meta, "meta", ids, ScalarType::Long);
  check_cuda(grad, "grad", ids, ScalarType::Float);
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  for (const Tensor* t : {&inverse, &bag, &utables}) check_cuda(*t, "index tensor", ids, ScalarType::Int);
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
  ACCEL_CHECK(max_dim > 0 && max_dim <= kMaxVecDim && max_dim <= grad.size(1), "max_dim: expected 1..", kMaxVecDim,
              " and <= grad.size(1), got ", max_dim);
  ACCEL_CHECK(offsets.numel() >= 2 && batch > 0, "offsets/batch: expected >= 2 offsets and batch > 0");
  ACCEL_CHECK(!direct || (value_kind == kFp32 && opt == kSgd && weight_decay == 0.0 && max_grad_value <= 0.0 &&
                          max_grad_norm <= 0.0),
              "direct: only for fp32 SGD without weight decay or clipping");
  ACCEL_CHECK(opt >= kSgd && opt <= kAdam, "opt: expected 0..3, got ", opt);
  ACCEL_CHECK(grad.dim() == 2, "grad: expected a 2-d tensor");
  if (psw.has_value()) {
    check_cuda(*psw, "per_sample_weights", ids, ScalarType::Float);
    ACCEL_CHECK(psw->numel() == n, "per_sample_weights: expected ", n, " entries");
  }
  ACCEL_CHECK(!psw_grad || psw.has_value(), "psw_grad: needs per_sample_weights");
  check_cuda(gsum, "gsum", ids, ScalarType::Float);
  ACCEL_CHECK(gsum.dim() == 2 && (direct || gsum.size(0) >= n) && gsum.size(1) % 4 == 0 &&
                  (direct || gsum.size(1) >= max_dim),
              "gsum: expected a zeroed (>= n, >= max_dim multiple of 4) fp32 buffer, got shape ",
              accel::shape_str(gsum));
  // the segmented reduction (rows of one 32 x 4 / 32-column chunk, no global-norm clipping), else the scatter
  const bool segmented = seg_chunk > 0 && max_grad_norm <= 0.0 && max_dim <= (vec4 ? 128 : 32);
  if (segmented) {
    check_cuda(seg, "seg", ids, ScalarType::Int);
    ACCEL_CHECK(seg.numel() >= n + 1, "seg: expected a zeroed int32 buffer of >= ids.numel() + 1 = ", n + 1,
                " entries, got ", seg.numel());
    ACCEL_CHECK(seg_chunk <= (int64_t(1) << 20), "seg_chunk: expected 1..2^20, got ", seg_chunk);
    ACCEL_CHECK(direct || gsum.size(0) >= n, "gsum: the segmented path needs >= ", n, " rows");
  }
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  Tensor grad_psw = torch::stable::new_empty(ids, {psw_grad ? n : 0}, ScalarType::Float);
  Tensor norm = torch::stable::new_empty(ids, {1}, ScalarType::Double);
  BackwardParams p{};
  p.meta = meta_ptr(meta);
  p.grad = static_cast<const float*>(grad.data_ptr());
  p.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  p.bag = static_cast<const int32_t*>(bag.data_ptr());
  p.rowp = static_cast<const uint64_t*>(rowp.data_ptr());
  p.count = static_cast<const int32_t*>(count.data_ptr());
  p.urow = static_cast<const int64_t*>(urow.data_ptr());
  p.utables = static_cast<const int32_t*>(utables.data_ptr());
  p.psw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.feature_col = static_cast<const int64_t*>(feature_col.data_ptr());
  p.n = n;
  p.num_bags = offsets.numel() - 1;
  p.batch = batch;
  p.num_features = static_cast<int>(feature_table.numel());
  p.pooling = static_cast<int>(pooling);
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
  p.grad_psw = psw_grad ? static_cast<float*>(grad_psw.data_ptr()) : nullptr;
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.inverse = static_cast<const int32_t*>(inverse.data_ptr());
  p.gsum = static_cast<float*>(gsum.data_ptr());
  p.gsum_stride = gsum.size(1);
  // the CSR of the segmented path: built by lookup_csr (the forward's side stream) when `csr` is given, else here
  // into a per-step workspace (the caching allocator / the graph's pool)
  Tensor csr_ws;
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  if (segmented && n > 0) {
    const bool scaled = psw.has_value() || pooling == kPoolMean;
    csr_ws = csr.has_value() ? *csr : torch::stable::new_empty(ids, {csr_size(n, scaled)}, ScalarType::Long);
    if (csr.has_value()) check_cuda(*csr, "csr", ids, ScalarType::Long);
    p.seg_chunk = static_cast<int>(seg_chunk);
    p.seg_done = static_cast<int32_t*>(seg.data_ptr());
    bind_csr(p, csr_ws, n, scaled);
    if (!csr.has_value()) launch_segment_csr(p, stream);
  }
  dispatch_value(value_kind, [&](auto V) { launch_backward<V.value>(p, vec4, stream); });
  return grad_psw;
}

}  // namespace
}  // namespace lookup
}  // namespace dynamicemb

STABLE_TORCH_LIBRARY_FRAGMENT(dynamicemb, m) {
  m.def(
      "lookup_dedup(Tensor ids, Tensor offsets, Tensor feature_table, int batch, Tensor(a!) set) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
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
      "Tensor(c!) seg, int seg_chunk, Tensor? csr=None) -> Tensor");
  m.def("lookup_csr_size(Tensor inverse, bool scaled) -> int");
  m.def("lookup_csr(Tensor inverse, Tensor bag, Tensor offsets, Tensor? psw, int pooling, Tensor(a!) csr) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("lookup_dedup", TORCH_BOX(&dynamicemb::lookup::lookup_dedup));
  m.impl("lookup_insert", TORCH_BOX(&dynamicemb::lookup::lookup_insert));
  m.impl("lookup_forward", TORCH_BOX(&dynamicemb::lookup::lookup_forward));
  m.impl("lookup_backward", TORCH_BOX(&dynamicemb::lookup::lookup_backward));
  m.impl("lookup_csr", TORCH_BOX(&dynamicemb::lookup::lookup_csr));
  m.impl("lookup_csr_size", TORCH_BOX(&dynamicemb::lookup::lookup_csr_size));
}
