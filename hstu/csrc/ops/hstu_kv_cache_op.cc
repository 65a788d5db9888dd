// hstu_attn::kv_cache_begin_step on the torch stable ABI: the fused bookkeeping step of KVCacheManager (schema,
// argument checks, output allocation, launch on the caller's current stream). Kept apart from hstu_ops.cc (its own
// library fragment). The CPU path and the reference are the torch ops in hstu/_kv_cache.py; the fake (meta)
// implementation is registered there too.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <tuple>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "hstu/csrc/kv_cache/hstu_kv_cache.h"
#include "hstu/csrc/ops/hstu_plan.h"

namespace hstu {
namespace kvcache_op {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

void check_vec(const Tensor& t, const char* arg, const Tensor& ref, ScalarType dtype, int64_t len,
               const char* ref_arg = "slot_user") {
  ACCEL_CHECK(t.is_cuda(), arg, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, arg, ref, ref_arg);
  accel::check_dtype(t, arg, dtype);
  accel::check_contiguous(t, arg);
  ACCEL_CHECK(t.numel() == len, arg, ": expected ", len, " elements, got shape ", accel::shape_str(t));
}

// kv_cache_begin_step's options: bit 0 = no gather plan (src_rows returned empty; KVCacheManager makes it on demand
// where the paged forward reads the pages itself); bit 2 = the lengths' ready word (BeginStepParams::ready) in
// the int32 after cu_seqlens_k's B + 1 (returned as a view of its first B + 1; the step plan's block under
// kOptPlanReadyWord spins on it: KVCacheManager._plan_ready, on by default under pdl).
constexpr int64_t kBeginStepNoGatherPlan = 1;
constexpr int64_t kBeginStepLengthsReady = 4;
// bit 4 = with bit 2, the ready word's early form (BeginStepParams::early; KVCacheManager._begin_early, on by default).
constexpr int64_t kBeginStepEarly = 16;
constexpr int64_t kBeginStepKnownOptions = kBeginStepNoGatherPlan | kBeginStepLengthsReady | kBeginStepEarly;

using Outputs = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

Outputs begin_step_cuda(Tensor slot_user, Tensor slot_valid, Tensor slot_len, Tensor slot_pages, Tensor last_used,
                        Tensor free_pages, Tensor free_count, Tensor clock, Tensor error_flags, Tensor user_ids,
                        Tensor cu_seqlens_q, Tensor num_append, int64_t total_q, int64_t page_size, bool create,
                        bool evict, int64_t options) {
  torch::stable::accelerator::DeviceGuard guard(slot_user.get_device());
  ACCEL_CHECK(slot_user.is_cuda(), "slot_user: expected a CUDA tensor, got ", accel::device_name(slot_user));
  const int64_t U = slot_user.numel() - 1;
  accel::check_dim(slot_pages, "slot_pages", 2);
  const int64_t M = slot_pages.size(1), P = free_pages.numel() - 1, B = user_ids.numel();
  ACCEL_CHECK(U >= 1 && U <= kvcache::kMaxUsers, "max_users: expected 1 to ", kvcache::kMaxUsers,
              " for the CUDA kernel, got ", U);
  ACCEL_CHECK(B >= 1 && B <= kvcache::kMaxBatch && B <= U, "user_ids: expected 1 to min(", kvcache::kMaxBatch,
              ", max_users) users for the CUDA kernel, got ", B);
  ACCEL_CHECK(M >= 1 && P >= 1, "slot_pages/free_pages: expected at least one page per user and in the pool, got ",
              M, " and ", P);
  ACCEL_CHECK(page_size >= 1 && total_q >= 0, "page_size/total_q: expected >= 1 and >= 0, got ", page_size, ", ",
              total_q);
  check_vec(slot_user, "slot_user", slot_user, ScalarType::Long, U + 1);
  check_vec(slot_valid, "slot_valid", slot_user, ScalarType::Bool, U + 1);
  check_vec(slot_len, "slot_len", slot_user, ScalarType::Long, U + 1);
  check_vec(slot_pages, "slot_pages", slot_user, ScalarType::Long, (U + 1) * M);
  check_vec(last_used, "last_used", slot_user, ScalarType::Long, U + 1);
  check_vec(free_pages, "free_pages", slot_user, ScalarType::Long, P + 1);
  check_vec(free_count, "free_count", slot_user, ScalarType::Long, 1);
  check_vec(clock, "clock", slot_user, ScalarType::Long, 1);
  check_vec(error_flags, "error_flags", slot_user, ScalarType::Int, 1);
  check_vec(user_ids, "user_ids", slot_user, ScalarType::Long, B);
  check_vec(cu_seqlens_q, "cu_seqlens_q", slot_user, ScalarType::Int, B + 1);
  check_vec(num_append, "num_append", slot_user, ScalarType::Int, B);

  ACCEL_CHECK((options & ~kBeginStepKnownOptions) == 0, "options: expected bits of ", kBeginStepKnownOptions,
              ", got ", options);
  const bool gather_plan = (options & kBeginStepNoGatherPlan) == 0;
  const bool ready = (options & kBeginStepLengthsReady) != 0;
  const int64_t capacity = B * M * page_size + total_q;
  auto i64 = [&](int64_t n) { return torch::stable::new_empty(slot_user, {n}, ScalarType::Long); };
  auto i32 = [&](int64_t n) { return torch::stable::new_empty(slot_user, {n}, ScalarType::Int); };
  Tensor slots = i64(B), num_app = i32(B), page_offsets = i32(B + 1), page_ids = i32(B * M);
  Tensor last_page_lens = i32(B), cached_lens = i32(B), append_rows = i64(total_q);
  Tensor src_rows = i64(gather_plan ? 2 * (capacity + 1) : 0), dst_new = i64(total_q);
  Tensor cu_k = i32(B + 1 + (ready ? 1 : 0)), layout_flags = i32(1);

  kvcache::BeginStepParams p{};
  p.slot_user = static_cast<int64_t*>(slot_user.data_ptr());
  p.slot_valid = static_cast<bool*>(slot_valid.data_ptr());
  p.slot_len = static_cast<int64_t*>(slot_len.data_ptr());
  p.slot_pages = static_cast<int64_t*>(slot_pages.data_ptr());
  p.last_used = static_cast<int64_t*>(last_used.data_ptr());
  p.free_pages = static_cast<int64_t*>(free_pages.data_ptr());
  p.free_count = static_cast<int64_t*>(free_count.data_ptr());
  p.clock = static_cast<int64_t*>(clock.data_ptr());
  p.error_flags = static_cast<int32_t*>(error_flags.data_ptr());
  p.user_ids = static_cast<const int64_t*>(user_ids.data_ptr());
  p.cu_seqlens_q = static_cast<const int32_t*>(cu_seqlens_q.data_ptr());
  p.num_append = static_cast<const int32_t*>(num_append.data_ptr());
  p.slots = static_cast<int64_t*>(slots.data_ptr());
  p.num_append_out = static_cast<int32_t*>(num_app.data_ptr());
  p.page_offsets = static_cast<int32_t*>(page_offsets.data_ptr());
  p.page_ids = static_cast<int32_t*>(page_ids.data_ptr());
  p.last_page_lens = static_cast<int32_t*>(last_page_lens.data_ptr());
  p.cached_lens = static_cast<int32_t*>(cached_lens.data_ptr());
  p.append_rows = static_cast<int64_t*>(append_rows.data_ptr());
  p.src_rows = static_cast<int64_t*>(src_rows.data_ptr());
  p.dst_new = static_cast<int64_t*>(dst_new.data_ptr());
  p.cu_seqlens_k = static_cast<int32_t*>(cu_k.data_ptr());
  p.ready = ready ? p.cu_seqlens_k + B + 1 : nullptr;
  p.layout_flags = static_cast<int32_t*>(layout_flags.data_ptr());
  p.batch = static_cast<int>(B);
  p.max_users = U;
  p.num_pages = P;
  p.max_pages_per_user = M;
  p.page_size = page_size;
  p.total_q = total_q;
  p.create = create;
  p.evict = evict;
  p.gather_plan = gather_plan;
  p.early = (options & kBeginStepEarly) != 0;
  cudaStream_t s = static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(slot_user.get_device())));
  const cudaError_t err = kvcache::launch_begin_step(p, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::kv_cache_begin_step: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(slots, num_app, page_offsets, page_ids, last_page_lens, cached_lens, append_rows, src_rows,
                         dst_new, ready ? torch::stable::narrow(cu_k, 0, 0, B + 1) : cu_k, layout_flags);
}

// kv_cache_copy_pages: the offload / reload copies of KVCacheManager (hstu_kv_cache.h PageCopyParams). src and dst
// are page pools (layers, pages, ...) of the same dtype and page shape; one of them may be a CPU tensor in pinned
// memory (reached through UVA: its data pointer is its device address; the caller allocates it pinned). The page
// lists and the live count are device tensors: nothing is read on the host.
void copy_pages_cuda(Tensor src, Tensor dst, Tensor src_pages, Tensor dst_pages, Tensor count) {
  const Tensor& dev = src_pages;  // the page lists are always on the device
  ACCEL_CHECK(dev.is_cuda(), "src_pages: expected a CUDA tensor, got ", accel::device_name(dev));
  torch::stable::accelerator::DeviceGuard guard(dev.get_device());
  for (const Tensor* t : {&src, &dst}) {
    const char* arg = t == &src ? "src" : "dst";
    ACCEL_CHECK(t->is_cpu() || t->is_cuda(), arg, ": expected a CUDA tensor or pinned CPU memory, got ",
                accel::device_name(*t));
    if (t->is_cuda()) accel::check_same_device(*t, arg, dev, "src_pages");
    accel::check_contiguous(*t, arg);
    ACCEL_CHECK(t->dim() >= 2, arg, ": expected (layers, pages, ...), got shape ", accel::shape_str(*t));
  }
  ACCEL_CHECK(src.is_cuda() || dst.is_cuda(), "src/dst: expected at least one CUDA pool, got two CPU tensors");
  ACCEL_CHECK(src.scalar_type() == dst.scalar_type(), "dst: expected the dtype of src, got another");
  ACCEL_CHECK(src.size(0) == dst.size(0), "dst: expected ", src.size(0), " layers (those of src), got ", dst.size(0));
  const int64_t L = src.size(0), sp = src.size(1), dp = dst.size(1);
  ACCEL_CHECK(sp >= 1 && dp >= 1, "src/dst: expected at least one page, got shapes ", accel::shape_str(src), " and ",
              accel::shape_str(dst));
  const int64_t page_elems = src.numel() / (L * sp);
  ACCEL_CHECK(dst.numel() == L * dp * page_elems, "dst: expected pages of ", page_elems,
              " elements (those of src), got shape ", accel::shape_str(dst));
  const int64_t E = src_pages.numel();
  check_vec(src_pages, "src_pages", dev, ScalarType::Long, E, "src_pages");
  check_vec(dst_pages, "dst_pages", dev, ScalarType::Long, E, "src_pages");
  check_vec(count, "count", dev, ScalarType::Long, 1, "src_pages");
  kvcache::PageCopyParams p{};
  p.src = static_cast<const uint8_t*>(src.data_ptr());
  p.dst = static_cast<uint8_t*>(dst.data_ptr());
  p.src_pages = static_cast<const int64_t*>(src_pages.data_ptr());
  p.dst_pages = static_cast<const int64_t*>(dst_pages.data_ptr());
  p.count = static_cast<const int64_t*>(count.data_ptr());
  p.entries = E;
  p.layers = L;
  p.src_layer_pages = sp;
  p.dst_layer_pages = dp;
  p.page_bytes = page_elems * static_cast<int64_t>(src.element_size());
  ACCEL_CHECK(p.page_bytes % 16 == 0, "src: expected pages of a multiple of 16 bytes, got ", p.page_bytes);
  cudaStream_t s = static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(dev.get_device())));
  const cudaError_t err = kvcache::launch_page_copy(p, s);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::kv_cache_copy_pages: CUDA error ", cudaGetErrorString(err));
}

// kv_cache_append: KVCacheManager.append in one launch (hstu_kv_cache.h AppendParams). pool (layers, pages + 1, 2,
// page_size, H, D) contiguous (page `num_pages` the sink); k, v (layers, tokens, H, D) with contiguous rows; dst
// (entries) int64 K rows of a layer's pool viewed as rows of H * D (V at + page_size); src (entries) int64 token rows
// of k / v, or None: entry i reads token i. Sink and out-of-range entries are skipped. options: kernel_options bits
// (kOptPdl: a programmatic dependent launch, on compute capability 9.0 devices, which run its sm_90 code).
void append_cuda(Tensor pool, Tensor k, Tensor v, Tensor dst, std::optional<Tensor> src, int64_t page_size,
                 int64_t num_pages, int64_t options) {
  ACCEL_CHECK(pool.is_cuda(), "pool: expected a CUDA tensor, got ", accel::device_name(pool));
  torch::stable::accelerator::DeviceGuard guard(pool.get_device());
  accel::check_contiguous(pool, "pool");
  ACCEL_CHECK(pool.dim() == 6 && pool.size(1) == num_pages + 1 && pool.size(2) == 2 && pool.size(3) == page_size,
              "pool: expected (layers, ", num_pages + 1, ", 2, ", page_size, ", H, D), got ", accel::shape_str(pool));
  const int64_t L = pool.size(0), H = pool.size(4), D = pool.size(5);
  for (const Tensor* t : {&k, &v}) {
    const char* arg = t == &k ? "k" : "v";
    ACCEL_CHECK(t->is_cuda(), arg, ": expected a CUDA tensor, got ", accel::device_name(*t));
    accel::check_same_device(*t, arg, pool, "pool");
    ACCEL_CHECK(t->scalar_type() == pool.scalar_type(), arg, ": expected the dtype of the pool, got ",
                accel::dtype_name(t->scalar_type()));
    ACCEL_CHECK(t->dim() == 4 && t->size(0) == L && t->size(2) == H && t->size(3) == D && t->stride(3) == 1 &&
                    t->stride(2) == D,
                arg, ": expected (", L, ", tokens, ", H, ", ", D, ") with contiguous rows, got shape ",
                accel::shape_str(*t));
  }
  ACCEL_CHECK(k.size(1) == v.size(1), "v: expected ", k.size(1), " tokens like k, got ", v.size(1));
  const int64_t E = dst.numel();
  check_vec(dst, "dst", pool, ScalarType::Long, E, "pool");
  if (src.has_value()) check_vec(*src, "src", pool, ScalarType::Long, E, "pool");
  const int64_t es = pool.element_size();
  kvcache::AppendParams p{};
  p.pool = static_cast<uint8_t*>(pool.data_ptr());
  p.k = static_cast<const uint8_t*>(k.data_ptr());
  p.v = static_cast<const uint8_t*>(v.data_ptr());
  p.dst = static_cast<const int64_t*>(dst.data_ptr());
  p.src = src.has_value() ? static_cast<const int64_t*>(src->data_ptr()) : nullptr;
  p.entries = E;
  p.layers = L;
  p.layer_rows = (num_pages + 1) * 2 * page_size;
  p.row_bytes = H * D * es;
  p.page_size = page_size;
  p.sink_row = num_pages * 2 * page_size;
  p.src_rows = k.size(1);
  p.k_layer_stride = k.stride(0) * es;
  p.k_row_stride = k.stride(1) * es;
  p.v_layer_stride = v.stride(0) * es;
  p.v_row_stride = v.stride(1) * es;
  cudaStream_t s = static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(pool.get_device())));
  ACCEL_CHECK((options & ~int64_t{kOptKnownMask}) == 0, "options: expected bits of ", int64_t{kOptKnownMask},
              ", got ", options);
  const bool pdl = (options & kOptPdl) != 0 && device_is_sm90(pool.get_device());
  const cudaError_t err = kvcache::launch_append(p, s, pdl);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::kv_cache_append: CUDA error ", cudaGetErrorString(err),
              " (16-byte aligned rows and strides expected)");
}

}  // namespace kvcache_op
}  // namespace hstu

// Keep identical to KV_CACHE_BEGIN_STEP_SCHEMA in hstu/_kv_cache.py (defined there without _C.so).
STABLE_TORCH_LIBRARY_FRAGMENT(hstu_attn, m) {
  m.def(
      "kv_cache_begin_step(Tensor(a!) slot_user, Tensor(b!) slot_valid, Tensor(c!) slot_len, Tensor(d!) slot_pages, "
      "Tensor(e!) last_used, Tensor(f!) free_pages, Tensor(g!) free_count, Tensor(h!) clock, Tensor(i!) error_flags, "
      "Tensor user_ids, Tensor cu_seqlens_q, Tensor num_append, int total_q, int page_size, bool create, "
      "bool evict, int options=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // Keep identical to KV_CACHE_COPY_PAGES_SCHEMA in hstu/_kv_cache.py.
  m.def("kv_cache_copy_pages(Tensor src, Tensor(a!) dst, Tensor src_pages, Tensor dst_pages, Tensor count) -> ()");
  m.def("kv_cache_append(Tensor(a!) pool, Tensor k, Tensor v, Tensor dst, Tensor? src, int page_size, "
        "int num_pages, int options=0) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(hstu_attn, CUDA, m) {
  m.impl("kv_cache_begin_step", TORCH_BOX(&hstu::kvcache_op::begin_step_cuda));
  m.impl("kv_cache_copy_pages", TORCH_BOX(&hstu::kvcache_op::copy_pages_cuda));
  m.impl("kv_cache_append", TORCH_BOX(&hstu::kvcache_op::append_cuda));
}
