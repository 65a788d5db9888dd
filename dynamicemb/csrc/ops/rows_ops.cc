// Row ops of ShardedDynamicEmbeddingTables' CUDA step (dynamicemb/_sharded.py), CPU and CUDA (the CPU kernels add
// in the same order, for the CPU tests of that step):
//   gather_rows(src (m, D), index (n,), out_kind=-1) -> (n, D): out[i] = src[index[i]] (any dtype; an index
//     outside [0, m): a zero row); out_kind (ValueKind: 0 fp16, 1 bf16, 2 fp32) other than src's (fp16, bf16 or
//     fp32): the rows converted (round to nearest)
//   pool_rows(src (m, D) fp32 / fp16 / bf16, index (n,), offsets (nb + 1,) int64, weight (n,) fp32 or None, mean,
//     batch=0) -> (nb, D) fp32: bag b sums weight[i] * src[index[i]] over i in [offsets[b], offsets[b+1]) in
//     order, in fp32 (mean: divided by the bag's length; empty bags zero); batch > 0 (dividing nb): bag
//     f * batch + j goes to row j * (nb / batch) + f, i.e. the output viewed as (batch, nb / batch * D) holds
//     sample j's features in a row
//   segment_sum_rows(grad (rows, D) fp32, inverse (n,), num_unique, row_of (n,) or None, weight (n,) fp32 or
//     None, out_kind=-1) -> (num_unique, D) fp32 (out_kind 0 / 1: fp16 / bf16, the fp32 sums rounded once):
//     unique u sums weight[i] * grad[row_of[i]] (row_of None: row i) over the entries i with inverse[i] == u, in
//     increasing i (no atomics: deterministic)
// Index tensors are int32 or int64. Device values are not validated (no host sync): out-of-range indices and rows
// add nothing, offsets are clamped to [0, n].
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/rows_types.h"
#include "dynamicemb/csrc/ops/value_kind.h"
#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace lookup {
namespace {

using torch::stable::Tensor;
using accel::ScalarType;

void check_index(const Tensor& t, const char* name, int64_t n, const Tensor& ref, const char* ref_name) {
  ACCEL_CHECK(t.scalar_type() == ScalarType::Long || t.scalar_type() == ScalarType::Int, name,
              ": expected dtype int64 or int32, got ", accel::dtype_name(t.scalar_type()));
  ACCEL_CHECK(t.dim() == 1 && (n < 0 || t.numel() == n), name, ": expected a 1-d tensor",
              n < 0 ? "" : " of the entries' length", ", got ", accel::shape_str(t));
  accel::check_contiguous(t, name);
  accel::check_same_device(t, name, ref, ref_name);
}

void check_rows(const Tensor& t, const char* name, bool fp32) {
  accel::check_dim(t, name, 2);
  accel::check_contiguous(t, name);
  if (fp32) accel::check_dtype(t, name, ScalarType::Float);
  ACCEL_CHECK(t.is_cpu() || t.is_cuda(), name, ": expected a CPU or CUDA tensor, got ", accel::device_name(t));
}

void check_kind(int64_t k, const char* name) {
  ACCEL_CHECK(k >= table::kValueFp16 && k <= table::kValueFp32, name, ": expected 0 (fp16), 1 (bf16) or 2 (fp32), ",
              "got ", k);
}

// Element `off` of CPU rows of kind k, as fp32, and a store rounding to nearest.
float load_f(const void* base, int k, int64_t off) {
  if (k == table::kValueFp16) return static_cast<float>(static_cast<const c10::Half*>(base)[off]);
  if (k == table::kValueBf16) return static_cast<float>(static_cast<const c10::BFloat16*>(base)[off]);
  return static_cast<const float*>(base)[off];
}
void store_f(void* base, int k, int64_t off, float v) {
  if (k == table::kValueFp16)
    static_cast<c10::Half*>(base)[off] = c10::Half(v);
  else if (k == table::kValueBf16)
    static_cast<c10::BFloat16*>(base)[off] = c10::BFloat16(v);
  else
    static_cast<float*>(base)[off] = v;
}

void check_weight(const std::optional<Tensor>& w, int64_t n, const Tensor& ref, const char* ref_name) {
  if (!w.has_value()) return;
  accel::check_dtype(*w, "weight", ScalarType::Float);
  ACCEL_CHECK(w->dim() == 1 && w->numel() == n, "weight: expected shape (", n, ",) (one per entry), got ",
              accel::shape_str(*w));
  accel::check_contiguous(*w, "weight");
  accel::check_same_device(*w, "weight", ref, ref_name);
}

int64_t index_at(const Tensor& t, int64_t i) {
  return t.scalar_type() == ScalarType::Long ? static_cast<const int64_t*>(t.data_ptr())[i]
                                             : static_cast<const int32_t*>(t.data_ptr())[i];
}

bool aligned(const void* p, int64_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

constexpr int64_t kMaxEntries = (int64_t(1) << 31) - 2;

// ---------------------------------------------------------------- gather_rows
Tensor gather_rows(Tensor src, Tensor index, int64_t out_kind) {
  check_rows(src, "src", false);
  check_index(index, "index", -1, src, "src");
  const int64_t n = index.numel(), m = src.size(0), d = src.size(1);
  const int sk = value_kind_of(src.scalar_type());
  const bool convert = out_kind != -1 && out_kind != sk;
  if (convert) {
    check_kind(out_kind, "out_kind");
    ACCEL_CHECK(sk >= 0, "src: expected dtype float16, bfloat16 or float32 to convert to out_kind, got ",
                accel::dtype_name(src.scalar_type()));
  }
  Tensor out = convert ? torch::stable::new_empty(src, {n, d}, dtype_of_kind(out_kind))
                       : torch::stable::new_empty(src, {n, d});
  const int64_t rb = d * static_cast<int64_t>(src.element_size());
  if (n == 0 || rb == 0) return out;
  if (convert && src.is_cpu()) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = index_at(index, i);
      for (int64_t c = 0; c < d; ++c)
        store_f(out.data_ptr(), static_cast<int>(out_kind), i * d + c,
                r >= 0 && r < m ? load_f(src.data_ptr(), sk, r * d + c) : 0.f);
    }
    return out;
  }
  if (src.is_cpu()) {
    const char* s = static_cast<const char*>(src.data_ptr());
    char* o = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = index_at(index, i);
      if (r >= 0 && r < m)
        std::memcpy(o + i * rb, s + r * rb, rb);
      else
        std::memset(o + i * rb, 0, rb);
    }
    return out;
  }
  torch::stable::accelerator::DeviceGuard guard(src.get_device_index());
  GatherRowsParams p{};
  p.src = static_cast<const char*>(src.data_ptr());
  p.out = static_cast<char*>(out.data_ptr());
  p.index = index.data_ptr();
  p.index64 = index.scalar_type() == ScalarType::Long;
  p.n = n;
  p.m = m;
  p.row_bytes = rb;
  p.src_kind = convert ? sk : -1;
  p.out_kind = convert ? static_cast<int>(out_kind) : -1;
  p.d = d;
  p.vec4 = d % 4 == 0 && aligned(p.src, 4 * src.element_size()) && aligned(p.out, 4 * out.element_size());
  p.vec = 1;
  for (int v : {16, 8, 4, 2}) {
    if (rb % v == 0 && aligned(p.src, v) && aligned(p.out, v)) {
      p.vec = v;
      break;
    }
  }
  launch_gather_rows(p, accel::current_cuda_stream(src.get_device_index()));
  return out;
}

// ---------------------------------------------------------------- pool_rows
Tensor pool_rows(Tensor src, Tensor index, Tensor offsets, std::optional<Tensor> weight, bool mean, int64_t batch) {
  check_rows(src, "src", false);
  const int sk = value_kind_of(src.scalar_type());
  ACCEL_CHECK(sk >= 0, "src: expected dtype float32, float16 or bfloat16, got ", accel::dtype_name(src.scalar_type()));
  check_index(index, "index", -1, src, "src");
  accel::check_dtype(offsets, "offsets", ScalarType::Long);
  accel::check_dim(offsets, "offsets", 1);
  accel::check_contiguous(offsets, "offsets");
  accel::check_same_device(offsets, "offsets", src, "src");
  ACCEL_CHECK(offsets.numel() >= 1, "offsets: expected at least 1 entry (num_bags + 1), got 0");
  const int64_t n = index.numel(), m = src.size(0), d = src.size(1), nb = offsets.numel() - 1;
  check_weight(weight, n, src, "src");
  ACCEL_CHECK(batch >= 0 && (batch == 0 || nb % batch == 0), "batch: expected 0 or a divisor of the ", nb,
              " bags, got ", batch);
  const int64_t per = batch > 0 ? nb / batch : 0;  // features per sample
  Tensor out = torch::stable::new_empty(src, {nb, d}, ScalarType::Float);
  if (nb == 0 || d == 0) return out;
  const void* s = src.data_ptr();
  const int64_t* off = static_cast<const int64_t*>(offsets.data_ptr());
  const float* w = weight.has_value() ? static_cast<const float*>(weight->data_ptr()) : nullptr;
  float* o = static_cast<float*>(out.data_ptr());
  if (src.is_cpu()) {
    auto clamp = [n](int64_t v) { return v < 0 ? 0 : (v > n ? n : v); };
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t lo = clamp(off[b]), e1 = clamp(off[b + 1]), hi = e1 < lo ? lo : e1;
      float* ob = o + (batch > 0 ? (b % batch) * per + b / batch : b) * d;
      std::fill(ob, ob + d, 0.f);
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t r = index_at(index, i);
        if (r < 0 || r >= m) continue;
        const float wi = w ? w[i] : 1.f;
        for (int64_t c = 0; c < d; ++c) ob[c] += wi * load_f(s, sk, r * d + c);
      }
      if (mean && hi > lo)
        for (int64_t c = 0; c < d; ++c) ob[c] /= static_cast<float>(hi - lo);
    }
    return out;
  }
  torch::stable::accelerator::DeviceGuard guard(src.get_device_index());
  PoolRowsParams p{};
  p.src = s;
  p.src_kind = sk;
  p.out = o;
  p.index = index.data_ptr();
  p.index64 = index.scalar_type() == ScalarType::Long;
  p.offsets = off;
  p.weight = w;
  p.n = n;
  p.m = m;
  p.d = d;
  p.num_bags = nb;
  p.batch = batch;
  p.mean = mean;
  p.vec4 = d % 4 == 0 && aligned(s, 4 * src.element_size()) && aligned(o, 16);
  launch_pool_rows(p, accel::current_cuda_stream(src.get_device_index()));
  return out;
}

// ---------------------------------------------------------------- segment_sum_rows
Tensor segment_sum_rows(Tensor grad, Tensor inverse, int64_t num_unique, std::optional<Tensor> row_of,
                        std::optional<Tensor> weight, int64_t out_kind) {
  check_rows(grad, "grad", true);
  check_index(inverse, "inverse", -1, grad, "grad");
  const int64_t n = inverse.numel(), rows = grad.size(0), d = grad.size(1);
  ACCEL_CHECK(n <= kMaxEntries, "inverse: at most 2^31 - 2 entries, got ", n);
  ACCEL_CHECK(num_unique >= 0 && num_unique <= kMaxEntries, "num_unique: expected in [0, 2^31 - 2], got ",
              num_unique);
  if (row_of.has_value()) check_index(*row_of, "row_of", n, grad, "grad");
  ACCEL_CHECK(row_of.has_value() || rows >= n || n == 0, "grad: expected a row per entry (", n,
              ") without row_of, got ", rows);
  check_weight(weight, n, grad, "grad");
  if (out_kind == -1) out_kind = table::kValueFp32;
  check_kind(out_kind, "out_kind");
  Tensor out = torch::stable::new_empty(grad, {num_unique, d}, dtype_of_kind(out_kind));
  if (num_unique == 0 || d == 0) return out;
  const float* g = static_cast<const float*>(grad.data_ptr());
  const float* w = weight.has_value() ? static_cast<const float*>(weight->data_ptr()) : nullptr;
  if (grad.is_cpu()) {
    // fp32 sums (in the output when it is fp32), rounded once into a half output
    Tensor acc = out_kind == table::kValueFp32 ? out : torch::stable::new_empty(grad, {num_unique, d});
    float* o = static_cast<float*>(acc.data_ptr());
    std::fill(o, o + num_unique * d, 0.f);
    for (int64_t i = 0; i < n; ++i) {  // increasing i: each unique's entries in the CUDA kernel's order
      const int64_t u = index_at(inverse, i);
      const int64_t r = row_of.has_value() ? index_at(*row_of, i) : i;
      if (u < 0 || u >= num_unique || r < 0 || r >= rows) continue;
      const float wi = w ? w[i] : 1.f;
      for (int64_t c = 0; c < d; ++c) o[u * d + c] += wi * g[r * d + c];
    }
    if (out_kind != table::kValueFp32)
      for (int64_t e = 0; e < num_unique * d; ++e) store_f(out.data_ptr(), static_cast<int>(out_kind), e, o[e]);
    return out;
  }
  void* o = out.data_ptr();
  torch::stable::accelerator::DeviceGuard guard(grad.get_device_index());
  Tensor temp = torch::stable::new_empty(
      grad, {static_cast<int64_t>(segment_sum_temp_bytes(n, num_unique, d))}, ScalarType::Byte);
  SegmentSumParams p{};
  p.grad = g;
  p.out = o;
  p.out_kind = static_cast<int>(out_kind);
  p.inverse = inverse.data_ptr();
  p.inverse64 = inverse.scalar_type() == ScalarType::Long;
  p.row_of = row_of.has_value() ? row_of->data_ptr() : nullptr;
  p.row_of64 = row_of.has_value() && row_of->scalar_type() == ScalarType::Long;
  p.weight = w;
  p.n = n;
  p.d = d;
  p.grad_rows = rows;
  p.num_unique = num_unique;
  p.vec4 = d % 4 == 0 && aligned(g, 16) && aligned(o, 4 * out.element_size());
  p.temp = static_cast<char*>(temp.data_ptr());
  launch_segment_sum_rows(p, accel::current_cuda_stream(grad.get_device_index()));
  return out;
}

}  // namespace
}  // namespace lookup
}  // namespace dynamicemb

STABLE_TORCH_LIBRARY_FRAGMENT(dynamicemb, m) {
  m.def("gather_rows(Tensor src, Tensor index, int out_kind=-1) -> Tensor");
  m.def("pool_rows(Tensor src, Tensor index, Tensor offsets, Tensor? weight, bool mean, int batch=0) -> Tensor");
  m.def(
      "segment_sum_rows(Tensor grad, Tensor inverse, int num_unique, Tensor? row_of=None, Tensor? weight=None, "
      "int out_kind=-1) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CPU, m) {
  m.impl("gather_rows", TORCH_BOX(&dynamicemb::lookup::gather_rows));
  m.impl("pool_rows", TORCH_BOX(&dynamicemb::lookup::pool_rows));
  m.impl("segment_sum_rows", TORCH_BOX(&dynamicemb::lookup::segment_sum_rows));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("gather_rows", TORCH_BOX(&dynamicemb::lookup::gather_rows));
  m.impl("pool_rows", TORCH_BOX(&dynamicemb::lookup::pool_rows));
  m.impl("segment_sum_rows", TORCH_BOX(&dynamicemb::lookup::segment_sum_rows));
}
