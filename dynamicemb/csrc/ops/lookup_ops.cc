// Embedding hot-path ops of BatchedDynamicEmbeddingTables (torch stable ABI, CUDA only; the CPU path is the
// torch code in dynamicemb/_batched_torch.py). Kernels: dynamicemb/csrc/lookup/. Every op runs on the current stream
// and never synchronizes with the host, so a whole training step can be captured in a CUDA graph. Outputs are
// allocated here through torch's allocator (graph-capture aware). Argument checks keep memory safe; the
// user-facing validation lives in Python.
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <tuple>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/validate_types.h"
#include "dynamicemb/csrc/ops/forward_mirror.h"
#include "dynamicemb/csrc/ops/stage_bind.h"
#include "dynamicemb/csrc/ops/value_kind.h"
#include "dynamicemb/csrc/table/value_kind_dispatch.h"

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

// ids: a contiguous 1-d int64 / uint64 CUDA tensor (the device every other argument is checked against)
void check_ids(const Tensor& ids) {
  ACCEL_CHECK(ids.scalar_type() == ScalarType::Long || ids.scalar_type() == ScalarType::UInt64,
              "ids: expected dtype int64 or uint64, got ", accel::dtype_name(ids.scalar_type()));
  accel::check_dim(ids, "ids", 1);
  check_cuda(ids, "ids", ids, ids.scalar_type());
}

int64_t num_tables_of(const Tensor& meta) {
  ACCEL_CHECK(meta.scalar_type() == ScalarType::Long && meta.is_contiguous() && meta.numel() % kMetaFields == 0,
              "meta: expected a contiguous int64 tensor of num_tables x ", kMetaFields, " fields");
  return meta.numel() / kMetaFields;
}

const TableMeta* meta_ptr(const Tensor& meta) { return static_cast<const TableMeta*>(meta.data_ptr()); }

template <typename Fn>
void dispatch_value(int64_t v, Fn&& fn) {
  ACCEL_CHECK(table::with_value_kind(v, fn), "value_kind: expected 0 (fp16), 1 (bf16) or 2 (fp32), got ", v);
}

// ---------------------------------------------------------------- device-side checks
// Checks one step's device values (validate_types.h) on the current stream; returns the (1,) int32 flag that
// lookup_dedup's `skip` reads (nonzero: the batch failed and is treated as empty). `offsets` is int64; with
// `lengths_only` it was built from `lengths` by the caller and violations are reported on lengths.
Tensor lookup_validate(Tensor ids, Tensor offsets, std::optional<Tensor> lengths, std::optional<Tensor> psw,
                       bool lengths_only) {
  check_ids(ids);
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
// Entries of the per-step (table, id) set for n ids that the caller allocates (op lookup_dedup_set_size): the
// largest capacity the dedup uses under any of its flags (dedup_set_capacity with kDedupSet4x, the default).
int64_t dedup_set_size(int64_t n) { return dedup_set_capacity(n, INT64_MAX, kDedupSet4x); }

// Lab (benchmarks, tests): selects the CSR sort of later steps in this process (CsrSort in lookup_types.h; any
// other value only reads it), returns the one before.
int64_t lookup_lab_csr_sort(int64_t variant) {
  return csr_sort_variant(variant >= 0 && variant <= kCsrSortHand8Match ? static_cast<int>(variant) : -1);
}

// Lab: where a step finds its uniques (find_later_variant: 0 the dedup's number pass, 1 after the CSR fork, 2 the
// dedup's insert); other values only read it. Returns the one before.
int64_t lookup_lab_find_later(int64_t variant) {
  return find_later_variant(variant >= 0 && variant <= 2 ? static_cast<int>(variant) : -1);
}

// Lab: the DedupFlags of later steps' dedup (0..kDedupFlagsAll; other values only read them). Returns the ones
// before.
int64_t lookup_lab_dedup(int64_t variant) {
  return dedup_flags_variant(variant >= 0 && variant <= kDedupFlagsAll ? static_cast<int>(variant) : -1);
}

// Lab: how a training step writes the refusals' host mirror: 0 the forward kernel's first block (default), 1 a
// copy after the forward (as before the kernel wrote it); other values only read it. Returns the one before.
std::atomic<int> g_mirror_copy{0};

int64_t lookup_lab_mirror(int64_t variant) {
  const int old = g_mirror_copy.load();
  if (variant == 0 || variant == 1) g_mirror_copy.store(static_cast<int>(variant));
  return old;
}

// Lab: how a training step of a sequence forks its CSR build: 1 its sort after the dedup's count pass (keys: claimer
// positions), beside the number pass, and its bounds after the dedup (default); 0 all of it after the dedup; other
// values only read it. Returns the one before.
std::atomic<int> g_step_lab{1};

int64_t lookup_lab_step(int64_t variant) {
  const int old = g_step_lab.load();
  if (variant == 0 || variant == 1) g_step_lab.store(static_cast<int>(variant));
  return old;
}

int64_t lookup_dedup_set_size(int64_t n) {
  ACCEL_CHECK(n >= 0, "n: expected >= 0 ids, got ", n);
  return dedup_set_size(n);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> lookup_dedup(Tensor ids, Tensor offsets, Tensor feature_table,
                                                                int64_t batch, Tensor set,
                                                                std::optional<Tensor> skip) {
  check_ids(ids);
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
  p.flags = dedup_flags_variant(-1);  // (the prefetch bits need the step's find: none here)
  launch_dedup(p, stream);
  return std::make_tuple(inverse, bag, ukeys, utables, count);
}

// ---------------------------------------------------------------- one step's workspace
// The step's forward (lookup_step) returns one int64 workspace holding every per-step array the backward reads,
// so a step costs two allocations (workspace, output) and two op calls (lookup_step, lookup_backward). Byte
// offsets of its parts (each 256-aligned): a header (int32 skip flag of the device checks, int32 unique count,
// int64 refused inserts per table, int32 miss flag of the find, the checks' int32 block flags; set by the
// dedup's clear pass, so a step with ids launches no memset), the dedup's and the insert's arrays, and,
// when the forward built it, the CSR of the segmented backward (sort keys and values, segment bounds, entries,
// scales, the sort's scratch).
// X(enumerator, python name, bit): op lookup_contract lists them; dynamicemb/_batched_kernels.py checks its _STEP_* against it.
#define DYNAMICEMB_STEP_FLAGS(X)                                                                              \
  X(kStepTrain, "train", 1)                /* find_or_insert (else find) */                                   \
  X(kStepValidate, "validate", 2)          /* device-side checks of ids / offsets / lengths / weights first */ \
  X(kStepLengthsOnly, "lengths_only", 4)   /* offsets were built from lengths: report violations on lengths */ \
  X(kStepCsr, "csr", 8)                    /* build the backward's CSR in the forward (the workspace holds it) */ \
  X(kStepOverlap, "overlap", 16)           /* build it on the side stream, overlapping the insert and pooling */ \
  X(kStepVec4, "vec4", 32)                 /* 4-wide row access (every dim a multiple of 4) */                 \
  X(kStepPswGrad, "psw_grad", 64)          /* backward: gradient of the per-sample weights */                  \
  X(kStepDirect, "direct", 128)            /* backward: plain fp32 SGD adds -lr g straight into the rows */    \
  X(kStepAggregate, "aggregate", 256)      /* backward: sum repeated targets of 32 consecutive ids first */    \
  X(kStepDecoupledWd, "decoupled_wd", 512) /* backward: Adam's decoupled weight decay */                     \
  X(kStepHostRows, "host_rows", 1024)      /* hybrid tables: host rows through HBM in address order (below) */ \
  X(kStepBump, "bump_step", 2048)          /* backward: the update kernel advances `step` (plain fp32 SGD, Adam) */
#define DYNAMICEMB_STEP_FLAG(e, name, v) e = v,
enum StepFlags : int64_t { DYNAMICEMB_STEP_FLAGS(DYNAMICEMB_STEP_FLAG) };
#undef DYNAMICEMB_STEP_FLAG

// The codes and layouts Python passes to these ops, by name, as text (one "group name value" line each): TableMeta
// fields in order with their kind ('q' int64, 'd' double), step flags, optimizers, non-finite policies, poolings,
// value kinds. Python reads it once (dynamicemb/_batched_kernels.py `_contract`), so the two sides cannot drift.
std::string lookup_contract() {
  std::string out;
  auto line = [&](const char* group, const char* name, const std::string& value) {
    out += group;
    out += ' ';
    out += name;
    out += ' ';
    out += value;
    out += '\n';
  };
#define DYNAMICEMB_META_LINE(type, name) line("meta", #name, std::is_same<type, double>::value ? "d" : "q");
  DYNAMICEMB_TABLE_META_FIELDS(DYNAMICEMB_META_LINE)
#undef DYNAMICEMB_META_LINE
#define DYNAMICEMB_CODE_LINE(group) [&](const char* name, int64_t v) { line(group, name, std::to_string(v)); }
  auto step = DYNAMICEMB_CODE_LINE("step");
  auto opt = DYNAMICEMB_CODE_LINE("opt");
  auto nonfinite = DYNAMICEMB_CODE_LINE("nonfinite");
  auto pool = DYNAMICEMB_CODE_LINE("pool");
  auto value = DYNAMICEMB_CODE_LINE("value");
#undef DYNAMICEMB_CODE_LINE
#define DYNAMICEMB_STEP_LINE(e, name, v) step(name, e);
  DYNAMICEMB_STEP_FLAGS(DYNAMICEMB_STEP_LINE)
#undef DYNAMICEMB_STEP_LINE
#define DYNAMICEMB_OPT_LINE(e, name, v) opt(name, e);
  DYNAMICEMB_OPT_KINDS(DYNAMICEMB_OPT_LINE)
#undef DYNAMICEMB_OPT_LINE
#define DYNAMICEMB_NONFINITE_LINE(e, name, v) nonfinite(name, e);
  DYNAMICEMB_NONFINITE(DYNAMICEMB_NONFINITE_LINE)
#undef DYNAMICEMB_NONFINITE_LINE
#define DYNAMICEMB_POOL_LINE(e, name, v) pool(name, e);
  DYNAMICEMB_POOLING(DYNAMICEMB_POOL_LINE)
#undef DYNAMICEMB_POOL_LINE
  value("float16", table::kValueFp16);  // torch dtype names
  value("bfloat16", table::kValueBf16);
  value("float32", table::kValueFp32);
  return out;
}

struct CsrLayout {
  int64_t keys, vals, start, occ, scale, temp, temp_bytes, total;
};

// Whether the CSR carries a per-entry gradient scale (per-sample weights or mean pooling).
bool csr_scaled(bool psw, int64_t pooling) { return psw || pooling == kPoolMean; }

CsrLayout csr_layout(int64_t n, bool scaled) {
  CsrLayout l{};
  int64_t off = 0;
  l.keys = off; off += up256(2 * n * 4);
  l.vals = off; off += up256(2 * n * 4);
  l.start = off; off += up256((2 * n + 1) * 4);
  l.occ = off; off += up256(n * 8);
  l.scale = off; off += up256(scaled ? n * 4 : 0);
  l.temp_bytes = static_cast<int64_t>(segment_scan_bytes(n));
  l.temp = off; off += up256(l.temp_bytes > 0 ? l.temp_bytes : 1);
  l.total = off;
  return l;
}

struct StepLayout {
  int64_t header, pending, checks, inverse, bag, utables, ukeys, urow, rowp, csr, total;  // csr: -1 without one
};

StepLayout step_layout(int64_t n, int64_t num_tables, bool with_csr, bool scaled) {
  StepLayout l{};
  int64_t off = 0;
  // int32 skip flag, int32 count, int64 refused[num_tables], int32 pending (the find's miss flag) + 4 spare,
  // int32 block flags of the device checks (kValidateSlots; the dedup's clear pass ORs them into the skip flag)
  l.pending = 8 + 8 * num_tables;
  l.checks = l.pending + 8;
  l.header = l.checks + 4 * kValidateSlots;
  off = up256(l.header);
  l.inverse = off; off += up256(n * 4);
  l.bag = off; off += up256(n * 4);
  l.utables = off; off += up256(n * 4);
  l.ukeys = off; off += up256(n * 8);
  l.urow = off; off += up256(n * 8);
  l.rowp = off; off += up256(n * 8);
  l.csr = with_csr && n > 0 ? off : -1;
  if (l.csr >= 0) off += csr_layout(n, scaled).total;
  l.total = off;
  return l;
}

// int64 entries of the workspace (Python's fake kernel computes the same without a CSR; a CPU test compares).
int64_t lookup_step_ws_size(int64_t n, int64_t num_tables, bool with_csr, bool scaled) {
  ACCEL_CHECK(n >= 0 && num_tables >= 1, "n/num_tables: expected n >= 0 and num_tables >= 1, got ", n, " and ",
              num_tables);
  return step_layout(n, num_tables, with_csr, scaled).total / 8;
}

// The step's per-id and per-unique arrays inside a workspace.
struct StepArrays {
  int32_t *skip, *count, *pending, *check_flags, *inverse, *bag, *utables;
  int64_t *refused, *urow;
  uint64_t *ukeys, *rowp;
  char* csr;  // null without one
};

StepArrays step_arrays(const Tensor& ws, const StepLayout& l) {
  char* b = static_cast<char*>(ws.data_ptr());
  StepArrays a{};
  a.skip = reinterpret_cast<int32_t*>(b);
  a.count = reinterpret_cast<int32_t*>(b + 4);
  a.refused = reinterpret_cast<int64_t*>(b + 8);
  a.pending = reinterpret_cast<int32_t*>(b + l.pending);
  a.check_flags = reinterpret_cast<int32_t*>(b + l.checks);
  a.inverse = reinterpret_cast<int32_t*>(b + l.inverse);
  a.bag = reinterpret_cast<int32_t*>(b + l.bag);
  a.utables = reinterpret_cast<int32_t*>(b + l.utables);
  a.ukeys = reinterpret_cast<uint64_t*>(b + l.ukeys);
  a.urow = reinterpret_cast<int64_t*>(b + l.urow);
  a.rowp = reinterpret_cast<uint64_t*>(b + l.rowp);
  a.csr = l.csr >= 0 ? b + l.csr : nullptr;
  return a;
}

// The inputs the CSR build and the backward share: the dedup's output, the bags and their weights.
void bind_inputs(BackwardParams& p, const StepArrays& a, const int64_t* offsets, int64_t num_bags, const float* psw,
                 int64_t pooling, int64_t n) {
  p.n = n;
  p.inverse = a.inverse;
  p.bag = a.bag;
  p.offsets = offsets;
  p.num_bags = num_bags;
  p.pooling = static_cast<int>(pooling);
  p.psw = psw;
}

// The CSR's parts inside its workspace (csr_layout's offsets); the scales exist only for a scaled CSR.
void bind_csr_parts(BackwardParams& p, char* csr, bool scaled, int64_t n) {
  const CsrLayout l = csr_layout(n, scaled);
  p.seg_keys = reinterpret_cast<int32_t*>(csr + l.keys);
  p.seg_vals = reinterpret_cast<int32_t*>(csr + l.vals);
  p.seg_start = reinterpret_cast<int32_t*>(csr + l.start);
  p.seg_end = p.seg_start + (n + 1);
  p.seg_occ = reinterpret_cast<int2_t*>(csr + l.occ);
  p.seg_scale = scaled ? reinterpret_cast<float*>(csr + l.scale) : nullptr;
  p.scan_temp = csr + l.temp;
  p.scan_temp_bytes = static_cast<size_t>(l.temp_bytes);
}

// Joins the CSR build of the side stream when it goes out of scope (also when a launch throws), so the workspace
// is never freed while the side stream still writes it.
struct SideJoin {
  void* token = nullptr;
  void* stream = nullptr;
  ~SideJoin() {
    if (token) {
      try {
        join_side_stream(token, stream);
      } catch (...) {
      }
    }
  }
};

// kStepHostRows (a module with hybrid tables; lookup_types.h HostStageParams): the step's host rows are copied into
// HBM scratch rows in host-address order after the insert, the kernels run on them, and the backward writes them
// back in that order. The backward's flags carry the scratch row pitch (bytes, a multiple of 16, >= the widest row
// of a table with host rows) in bits kHostPitchShift and up. The scratch is one allocation per op (stream ordered).
constexpr int kHostPitchShift = 32;

// Binds `hs` and its scratch (returned) for the uniques of workspace `a` (n ids).
Tensor bind_host_rows(HostStageParams& hs, const Tensor& ids, const Tensor& meta, const StepArrays& a, int64_t n,
                      int64_t value_kind, bool whole_row, int64_t pitch) {
  hs.meta = meta_ptr(meta);
  hs.count = a.count;
  hs.n = n;
  hs.urow = a.urow;
  hs.utables = a.utables;
  hs.inverse = a.inverse;
  hs.n_ids = n;
  hs.whole_row = whole_row;
  hs.value_bytes = value_kind == kValueFp32 ? 4 : 2;
  hs.pitch = pitch;
  const int64_t bytes = static_cast<int64_t>(host_stage_bytes(n, pitch));
  Tensor scratch = torch::stable::new_empty(ids, {(bytes + 7) / 8}, ScalarType::Long);
  bind_host_stage(hs, scratch.data_ptr());
  return scratch;
}

// ---------------------------------------------------------------- the step's forward
// One op for a whole forward (train or eval) on the current stream: the device checks (kStepValidate; a failing
// batch is treated as empty), the dedup, the CSR of the backward (kStepCsr; on the side stream with kStepOverlap,
// joined before return), find_or_insert / find of every unique, the gather / pooling into the output. Returns
// (output, workspace); the workspace goes to lookup_backward. `refused_total` (num_tables int64) is the module's
// running count of refused inserts; this step's own count is in the workspace header. With `stage` (and
// stage_totals, stage_mask, stage_cur, stage_min_live, gate: op cache_stage's arguments, stage_bind.h) the step
// first stages its ids into the caches of the masked caching tables (op cache_stage's kernels, reporting into the
// device error record, insert_new = training, gated by a prefetch's failed flag `gate`), and the staging's failed
// flag is its skip flag: one op call per step instead of two (the Python: _device_stage.stage(defer=True)).
// `refused_host` (nonzero: the address of a pinned num_tables int64 buffer): a training step copies refused_total
// there after its insert (the host's non-blocking view of the refusals, read for on_refused="warn").
std::tuple<Tensor, Tensor> lookup_step(Tensor meta, int64_t value_kind, Tensor ids, Tensor offsets,
                                       std::optional<Tensor> lengths, std::optional<Tensor> psw,
                                       Tensor feature_table, Tensor feature_col, int64_t batch, int64_t pooling,
                                       int64_t flags, int64_t max_dim, int64_t out_cols, int64_t out_kind, Tensor set,
                                       Tensor refused_total, std::optional<Tensor> skip, std::optional<Tensor> stage,
                                       std::optional<Tensor> stage_totals, std::optional<Tensor> stage_mask,
                                       int64_t stage_cur, int64_t stage_min_live, std::optional<Tensor> gate,
                                       int64_t refused_host) {
  const int64_t T = num_tables_of(meta);
  const bool train = flags & kStepTrain, validate = flags & kStepValidate, with_csr = flags & kStepCsr;
  check_ids(ids);
  check_cuda(meta, "meta", ids, ScalarType::Long);
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  accel::check_dim(offsets, "offsets", 1);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(feature_col, "feature_col", ids, ScalarType::Long);
  check_cuda(set, "set", ids, ScalarType::Int);
  check_cuda(refused_total, "refused_total", ids, ScalarType::Long);
  const int64_t n = ids.numel();
  const int64_t nb = offsets.numel() - 1;
  ACCEL_CHECK(nb >= 1, "offsets: expected at least 2 entries, got ", offsets.numel());
  ACCEL_CHECK(n < (int64_t(1) << 31) - 1, "ids: at most 2^31 - 2 ids per step, got ", n);
  ACCEL_CHECK(batch > 0, "batch: expected > 0, got ", batch);
  ACCEL_CHECK(feature_table.numel() >= 1 && feature_col.numel() == feature_table.numel(),
              "feature_table/feature_col: expected one entry per feature (at least one), got ",
              feature_table.numel(), " and ", feature_col.numel());
  ACCEL_CHECK(refused_total.numel() == T, "refused_total: expected ", T, " entries (one per table), got ",
              refused_total.numel());
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none), got ",
              pooling);
  ACCEL_CHECK(max_dim > 0 && max_dim <= kMaxVecDim && max_dim <= out_cols, "max_dim: expected 1..", kMaxVecDim,
              " and <= out_cols, got ", max_dim);
  ACCEL_CHECK(!with_csr || train, "flags: a CSR (", int64_t(kStepCsr), ") only in training");
  const int64_t cap = std::min<int64_t>(set.numel(), dedup_set_size(n));
  ACCEL_CHECK(set.is_contiguous() && cap >= n && reinterpret_cast<uintptr_t>(set.data_ptr()) % 16 == 0,
              "set: expected a contiguous 16-byte aligned int32 tensor of at least ids.numel() = ", n,
              " entries, got ", set.numel());
  if (lengths.has_value()) {
    check_cuda(*lengths, "lengths", ids, ScalarType::Long);
    ACCEL_CHECK(lengths->numel() == nb, "lengths: expected ", nb, " entries (offsets has ", nb + 1, "), got ",
                lengths->numel());
  }
  if (skip.has_value()) {
    check_cuda(*skip, "skip", ids, ScalarType::Int);
    ACCEL_CHECK(skip->numel() == 1, "skip: expected 1 entry (cache_stage's flag), got ", skip->numel());
  }
  ACCEL_CHECK(!stage.has_value() || (stage_totals.has_value() && stage_mask.has_value() && !skip.has_value()),
              "stage: expected stage_totals and stage_mask with it, and no skip flag (the staging's is the step's)");
  ACCEL_CHECK(!(flags & kStepLengthsOnly) || lengths.has_value(), "flags: lengths only, but lengths is None");
  check_psw(psw, n, ids);
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  const float* pw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  // Staging first (caching tables over the uva store; _device_stage.py): op cache_stage's kernels on this stream,
  // before the insert, their failed flag the step's external skip flag. Its scratch is one allocation: [failed +
  // pad | info | place | found]; the flag and info are zeroed by one memset.
  Tensor sws;
  const int32_t* staged_skip = nullptr;
  if (stage.has_value()) {
    namespace sb = stage_bind;
    CacheProbeParams probe = sb::bind_probe(meta, ids, offsets, feature_table, batch, *stage_mask);
    const int64_t head = 1 + sb::info_words(T, probe.num_features, sb::info_tail(T));
    sws = torch::stable::new_empty(ids, {head + sb::scratch_words(n, T, true)}, ScalarType::Long);
    auto* w = static_cast<int64_t*>(sws.data_ptr());
    const StageParams sp = sb::bind_stage(probe, ids, *stage, *stage_totals, stage_cur, stage_min_live, train,
                                          value_kind == kValueFp32 ? 4 : 2, gate, w + head, w + 1,
                                          reinterpret_cast<int32_t*>(w), /*cuda=*/true);
    zero_async(w, static_cast<size_t>(head) * 8, stream);
    launch_cache_stage(probe, sp, /*report=*/true, stream);
    staged_skip = sp.failed;
  }
  const StepLayout l = step_layout(n, T, with_csr, csr_scaled(pw != nullptr, pooling));
  Tensor ws = torch::stable::new_empty(ids, {l.total / 8}, ScalarType::Long);
  const StepArrays a = step_arrays(ws, l);
  // eval of a sequence (pooling none): no dedup and no find pass; the forward probes each id's table itself
  const bool probe = !train && pooling == kPoolNone;
  // with the dedup's clear pass (ids, no probe) that pass sets the header (skip flag from the checks' block
  // flags and the external flag, count, refused, pending) and advances the step clocks: no memset, no begin_step
  const bool header_by_clear = n > 0 && !probe;
  const auto* skip_in = skip.has_value() ? static_cast<const int32_t*>(skip->data_ptr()) : staged_skip;
  if (!header_by_clear) {
    zero_async(ws.data_ptr(), static_cast<size_t>(l.header), stream);  // skip, count, refused
    // an external skip flag (a device staging that could not stage every id: the step inserts and updates nothing)
    if (skip_in != nullptr) copy_async(a.skip, skip_in, sizeof(int32_t), stream);
  }
  const bool skipping = validate || skip_in != nullptr;
  const auto* id_ptr = static_cast<const uint64_t*>(ids.data_ptr());
  const auto* off_ptr = static_cast<const int64_t*>(offsets.data_ptr());
  int check_blocks = 0;
  // lab kStepPdl (with kDedupPdl): the checks, the clear pass, the insert pass's resolve and the forward as
  // programmatic dependents (the clear pass's early set fill only behind the checks' kernel)
  const int dflags = dedup_flags_variant(-1);
  const bool pdl_step = (dflags & kDedupPdl) && (dflags & kStepPdl) && pdl_supported();
  if (validate) {
    ValidateParams v{};
    v.ids = id_ptr;
    v.n = n;
    v.uint64_keys = ids.scalar_type() == ScalarType::UInt64;
    v.offsets = off_ptr;
    v.num_bags = nb;
    v.lengths = lengths.has_value() ? static_cast<const int64_t*>(lengths->data_ptr()) : nullptr;
    v.lengths_only = flags & kStepLengthsOnly;
    v.psw = pw;
    v.bad = a.skip;
    v.block_bad = header_by_clear ? a.check_flags : nullptr;
    v.pdl = pdl_step;
    check_blocks = launch_validate(v, stream);
  }
  DedupParams d{};
  d.ids = id_ptr;
  d.offsets = off_ptr;
  d.n = n;
  d.num_bags = nb;
  d.batch = batch;
  d.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  d.num_features = static_cast<int>(feature_table.numel());
  d.set = static_cast<uint32_t*>(set.data_ptr());
  d.set_capacity = cap;
  d.bag = a.bag;
  d.inverse = a.inverse;
  d.ukeys = a.ukeys;
  d.utables = a.utables;
  d.count = a.count;
  d.skip = skipping ? a.skip : nullptr;
  // a sequence whose backward is segmented (the CSR is built here) reads its rows through the uniques: no row
  // addresses and no bags (only the atomic scatter, the pooled forward and the pooled CSR read them)
  const bool via_unique = with_csr && pooling == kPoolNone;
  d.no_bags = via_unique;
  if (header_by_clear) {
    d.skip_out = a.skip;
    d.skip_in = skip_in;
    d.check_flags = validate ? a.check_flags : nullptr;
    d.check_blocks = validate ? check_blocks : 0;
    d.refused = a.refused;
    d.pending = a.pending;
    d.clock_meta = train ? meta_ptr(meta) : nullptr;
    d.num_tables = static_cast<int>(T);
    // the find of every unique (the insert's first pass) in the dedup's number pass
    d.find_meta = meta_ptr(meta);
    d.urow = a.urow;
    d.find_train = train;
  }
  d.flags = dflags;
  if (!(validate && pdl_step)) d.flags &= ~kStepPdl;
  BackwardParams c{};
  if (a.csr) {  // the CSR needs only the dedup, whose clear pass zeroes its sort's counters
    bind_inputs(c, a, off_ptr, nb, pw, pooling, n);
    bind_csr_parts(c, a.csr, csr_scaled(pw != nullptr, pooling), n);
    d.zero = c.scan_temp;
    d.zero_bytes = static_cast<int64_t>(segment_sort_zero_bytes(n));
    c.sort_zeroed = true;  // (a.csr: a training step with ids, so the dedup and its clear pass run)
    d.find_later = d.find_meta != nullptr && find_later_variant(-1) == 1;
  }
  // the early fork (lab op _lookup_lab_step 1): a sequence's CSR sort beside the number pass, keyed by claimer
  bool early =
      a.csr && !probe && (flags & kStepOverlap) && pooling == kPoolNone && !d.find_later && g_step_lab.load() == 1;
  if (early) {
    d.csr_keys = segment_csr_first_keys(c, stream);
    early = d.csr_keys != nullptr;
    c.keys_by_claimer = early;
  }
  Tensor slot_row;  // lab: the find in the dedup's insert
  if (d.find_meta != nullptr && find_later_variant(-1) == 2) {
    slot_row = torch::stable::new_empty(ids, {cap}, ScalarType::Long);
    d.slot_row = static_cast<int64_t*>(slot_row.data_ptr());
  }
  SideJoin side;
  struct EarlyFork {
    const BackwardParams* c;
    void* stream;
    SideJoin* side;
  } fork_at{&c, stream, &side};
  auto fork_sort = [](void* x) {
    auto* f = static_cast<EarlyFork*>(x);
    f->side->stream = f->stream;
    f->side->token = fork_segment_sort(*f->c, f->stream);
  };
  if (!probe) launch_dedup(d, stream, early ? +fork_sort : nullptr, &fork_at);
  if (a.csr) {
    if (early) {
      side.token = fork_segment_bounds(c, stream);
    } else if (flags & kStepOverlap) {
      side.stream = stream;
      side.token = fork_segment_csr(c, stream);
    } else {
      launch_segment_csr(c, stream);
    }
  }
  if (d.find_later) launch_dedup_find(d, stream);
  InsertParams ip{};
  ip.meta = meta_ptr(meta);
  ip.num_tables = static_cast<int>(T);
  ip.ukeys = a.ukeys;
  ip.utables = a.utables;
  ip.count = a.count;
  ip.n = n;
  ip.train = train;
  ip.urow = a.urow;
  ip.refused = a.refused;
  ip.refused_total = static_cast<int64_t*>(refused_total.data_ptr());
  ip.inverse = a.inverse;
  ip.n_ids = n;
  ip.rowp = via_unique ? nullptr : a.rowp;
  ip.pending = a.pending;
  ip.clock_done = header_by_clear && train;
  ip.pdl = pdl_step;
  // the output is allocated after the first launches (the checks, the dedup): a synchronized call's device starts
  // one allocation earlier
  const int64_t rows = pooling == kPoolNone ? n : batch;
  Tensor out = torch::stable::new_empty(ids, {rows, out_cols}, dtype_of_kind(out_kind));
  ForwardParams f{};
  f.meta = ip.meta;
  f.ids = id_ptr;
  f.offsets = off_ptr;
  f.bag = a.bag;
  f.rowp = a.rowp;
  f.psw = pw;
  f.feature_table = d.feature_table;
  f.feature_col = static_cast<const int64_t*>(feature_col.data_ptr());
  f.n = n;
  f.num_bags = nb;
  f.batch = batch;
  f.num_features = d.num_features;
  f.pooling = static_cast<int>(pooling);
  f.train = train;
  f.max_dim = static_cast<int>(max_dim);
  f.out_stride = out_cols;
  f.out = out.data_ptr();
  f.addr = probe ? kAddrProbe : (via_unique ? kAddrUnique : kAddrRowp);
  f.inverse = a.inverse;
  f.urow = a.urow;
  f.utables = a.utables;
  f.skip = d.skip;
  f.pdl = pdl_step;
  const bool vec4 = flags & kStepVec4;
  // hybrid tables: the forward reads the `dim` columns of its host rows from HBM scratch rows, copied in host order
  HostStageParams hs{};
  Tensor host_scratch;
  const bool host_rows = (flags & kStepHostRows) && !probe && n > 0;
  if (host_rows) {
    const int64_t vb = value_kind == kValueFp32 ? 4 : 2;
    host_scratch = bind_host_rows(hs, ids, meta, a, n, value_kind, /*whole_row=*/false, (max_dim * vb + 15) / 16 * 16);
    f.uaddr = hs.uaddr;
    if (!via_unique) f.rowp = hs.rowp;
    else hs.rowp = nullptr;
  }
  // the module's host mirror of refused_total (pinned, num_tables int64), written after the insert, so the host
  // reads the refusals without a copy, an event or a query of its own per step (_batched_step._PinnedMirror): by
  // the forward kernel's first block when the forward launches (forward_mirror.h), else by a copy
  const bool forward_runs = (pooling == kPoolNone ? n : nb) > 0;
  auto* mirror = refused_host != 0 && train && forward_runs && g_mirror_copy.load() == 0
                     ? reinterpret_cast<int64_t*>(static_cast<uintptr_t>(refused_host))
                     : nullptr;
  dispatch_value(value_kind, [&](auto V) {
    if (!probe) launch_insert<V.value>(ip, stream);
    if (host_rows) launch_host_stage_in(hs, stream);
    dispatch_value(out_kind, [&](auto O) {
      launch_forward_mirrored<V.value, O.value>(f, vec4, static_cast<const int64_t*>(refused_total.data_ptr()), mirror,
                                                static_cast<int>(T), stream);
    });
  });
  if (refused_host != 0 && train && mirror == nullptr) {
    const cudaError_t e = cudaMemcpyAsync(reinterpret_cast<void*>(static_cast<uintptr_t>(refused_host)),
                                          refused_total.data_ptr(), static_cast<size_t>(T) * sizeof(int64_t),
                                          cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream));
    ACCEL_CHECK(e == cudaSuccess, "lookup_step: the refusals' host copy failed: ", cudaGetErrorString(e));
  }
  return std::make_tuple(out, ws);
}

// ---------------------------------------------------------------- the step's backward + optimizer
// `ws` is the workspace of the step's lookup_step (same ids, offsets, psw, pooling, meta; kStepCsr in `flags` as
// there). seg_chunk > 0 asks for the segmented reduction (CSR entries per warp), 0 for the atomic scatter; the
// caller decides (_batched_kernels.py::_segmented), this op refuses a request its kernels cannot serve. The optimizer's
// constants: weight_decay, beta1, beta2, eps, max_grad_value (<= 0: off), max_grad_norm (<= 0: off); lr and step
// are device scalars (step already counts this step).
Tensor lookup_backward(Tensor meta, int64_t value_kind, Tensor grad, Tensor ids, Tensor offsets, Tensor ws,
                       std::optional<Tensor> psw, Tensor feature_table, Tensor feature_col, int64_t batch,
                       int64_t pooling, int64_t flags, int64_t max_dim, int64_t opt, double weight_decay,
                       double beta1, double beta2, double eps, double max_grad_value, double max_grad_norm, Tensor lr,
                       Tensor step, Tensor gsum, Tensor seg, int64_t seg_chunk, int64_t nonfinite,
                       std::optional<Tensor> nonfinite_count, std::optional<Tensor> nonfinite_seen) {
  const int64_t T = num_tables_of(meta);
  const bool vec4 = flags & kStepVec4, psw_grad = flags & kStepPswGrad, direct = flags & kStepDirect;
  check_cuda(meta, "meta", ids, ScalarType::Long);
  check_cuda(grad, "grad", ids, ScalarType::Float);
  check_cuda(offsets, "offsets", ids, ScalarType::Long);
  check_cuda(ws, "ws", ids, ScalarType::Long);
  check_cuda(feature_table, "feature_table", ids, ScalarType::Int);
  check_cuda(feature_col, "feature_col", ids, ScalarType::Long);
  check_cuda(lr, "lr", ids, ScalarType::Float);
  check_cuda(step, "step", ids, ScalarType::Float);
  check_psw(psw, ids.numel(), ids);
  const int64_t n = ids.numel();
  ACCEL_CHECK(offsets.numel() >= 2, "offsets: expected at least 2 entries, got ", offsets.numel());
  ACCEL_CHECK(pooling >= kPoolSum && pooling <= kPoolNone, "pooling: expected 0 (sum), 1 (mean) or 2 (none), got ",
              pooling);
  const bool scaled = csr_scaled(psw.has_value(), pooling);
  const bool has_csr = flags & kStepCsr;
  const StepLayout l = step_layout(n, T, has_csr, scaled);
  ACCEL_CHECK(ws.numel() != step_layout(n, T, has_csr, !scaled).total / 8 || n == 0 || !has_csr, "ws: expected ",
              l.total / 8, " int64 entries (lookup_step_ws_size of ", n, " ids, ", scaled ? "scaled" : "unscaled",
              " CSR), got ", ws.numel(), ": the size of a CSR ", scaled ? "without" : "with",
              " per-entry scales; psw/pooling must be the same in lookup_step and lookup_backward (scaled: ",
              "per-sample weights or mean pooling)");
  ACCEL_CHECK(ws.numel() == l.total / 8, "ws: expected the workspace of lookup_step for these ids (",
              l.total / 8, " int64 entries ", has_csr ? "with" : "without", " a CSR), got ", ws.numel());
  ACCEL_CHECK(grad.dim() == 2, "grad: expected a 2-d tensor, got shape ", accel::shape_str(grad));
  ACCEL_CHECK(max_dim > 0 && max_dim <= kMaxVecDim && max_dim <= grad.size(1), "max_dim: expected 1..", kMaxVecDim,
              " and <= grad.size(1), got ", max_dim);
  ACCEL_CHECK(batch > 0, "batch: expected > 0, got ", batch);
  ACCEL_CHECK(!direct || (value_kind == kValueFp32 && opt == kSgd && weight_decay == 0.0 && max_grad_value <= 0.0 &&
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
  const int64_t host_pitch = (flags & kStepHostRows) ? (flags >> kHostPitchShift) : 0;
  ACCEL_CHECK(!(flags & kStepHostRows) ||
                  (host_pitch % 16 == 0 && host_pitch >= max_dim * (value_kind == kValueFp32 ? 4 : 2) &&
                   host_pitch <= (int64_t(1) << 20)),
              "flags: host_rows (", int64_t(kStepHostRows), ") needs the scratch row pitch in bytes (a multiple of ",
              "16, >= max_dim values, <= 2^20) in bits ", kHostPitchShift, " and up, got ", host_pitch);
  ACCEL_CHECK(!psw_grad || psw.has_value(), "flags: psw_grad needs per_sample_weights");
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
    ACCEL_CHECK(!has_csr, "flags: a CSR in the workspace (", int64_t(kStepCsr), ") with seg_chunk = 0 (the atomic ",
                "scatter reads none)");
  }
  torch::stable::accelerator::DeviceGuard guard(ids.get_device_index());
  Tensor grad_psw = torch::stable::new_empty(ids, {psw_grad ? n : 0}, ScalarType::Float);
  // the global norm's accumulator: only global-norm clipping and skip_step read it (one allocation less otherwise)
  std::optional<Tensor> norm;
  if (max_grad_norm > 0 || nonfinite == kNonFiniteSkipStep) norm = torch::stable::new_empty(ids, {1}, ScalarType::Double);
  const StepArrays a = step_arrays(ws, l);
  const float* pw = psw.has_value() ? static_cast<const float*>(psw->data_ptr()) : nullptr;
  BackwardParams p{};
  bind_inputs(p, a, static_cast<const int64_t*>(offsets.data_ptr()), offsets.numel() - 1, pw, pooling, n);
  p.meta = meta_ptr(meta);
  p.grad = static_cast<const float*>(grad.data_ptr());
  p.rowp = a.rowp;
  p.count = a.count;
  p.urow = a.urow;
  p.utables = a.utables;
  p.feature_table = static_cast<const int32_t*>(feature_table.data_ptr());
  p.feature_col = static_cast<const int64_t*>(feature_col.data_ptr());
  p.batch = batch;
  p.num_features = static_cast<int>(feature_table.numel());
  p.out_stride = grad.size(1);
  p.max_dim = static_cast<int>(max_dim);
  p.opt = static_cast<int>(opt);
  p.direct = direct;
  p.aggregate = flags & kStepAggregate;
  p.lr = static_cast<const float*>(lr.data_ptr());
  p.step = static_cast<const float*>(step.data_ptr());
  // kStepBump: the segmented update advances the step instead of a kernel of its own before it (direct SGD never
  // reads it: the first thread adds 1; Adam: the last block writes it, segment_kernels.cu bump_step_last_block)
  const bool bump = flags & kStepBump;
  ACCEL_CHECK(!bump || (segmented && n > 0 && !(flags & kStepHostRows) && ((direct && vec4) || opt == kAdam)),
              "flags: bump_step (", int64_t(kStepBump), ") only with the segmented update of ids, direct SGD over ",
              "4-wide rows or Adam");
  p.step_bump = bump ? static_cast<float*>(step.data_ptr()) : nullptr;
  p.weight_decay = static_cast<float>(weight_decay);
  p.decoupled_weight_decay = flags & kStepDecoupledWd;
  p.beta1 = beta1;
  p.beta2 = beta2;
  p.eps = static_cast<float>(eps);
  p.max_grad_value = static_cast<float>(max_grad_value);
  p.max_grad_norm = static_cast<float>(max_grad_norm);
  p.norm_sq = norm.has_value() ? static_cast<double*>(norm->data_ptr()) : nullptr;
  p.nonfinite = static_cast<int>(nonfinite);
  p.nonfinite_count = nonfinite_count.has_value() ? static_cast<int64_t*>(nonfinite_count->data_ptr()) : nullptr;
  p.grad_psw = psw_grad ? static_cast<float*>(grad_psw.data_ptr()) : nullptr;
  p.ids = static_cast<const uint64_t*>(ids.data_ptr());
  p.gsum = static_cast<float*>(gsum.data_ptr());
  p.gsum_stride = gsum.size(1);
  void* stream = accel::current_cuda_stream(ids.get_device_index());
  Tensor csr_ws;  // the CSR built here when the forward built none (a compiled step, a capture that asked none)
  if (segmented && n > 0) {
    char* csr = a.csr;
    if (!csr) {
      csr_ws = torch::stable::new_empty(ids, {csr_layout(n, scaled).total / 8}, ScalarType::Long);
      csr = static_cast<char*>(csr_ws.data_ptr());
    }
    bind_csr_parts(p, csr, scaled, n);
    p.seg_chunk = static_cast<int>(seg_chunk);
    p.seg_done = static_cast<int32_t*>(seg.data_ptr());
    if (!a.csr) launch_segment_csr(p, stream);
  }
  // hybrid tables: the update reads and writes whole host rows ([embedding | state]) in HBM scratch rows, copied in
  // and back in host order
  HostStageParams hs{};
  Tensor host_scratch;
  const bool host_rows = (flags & kStepHostRows) && n > 0;
  if (host_rows) {
    host_scratch = bind_host_rows(hs, ids, meta, a, n, value_kind, /*whole_row=*/true, host_pitch);
    launch_host_stage_in(hs, stream);
    p.uaddr = hs.uaddr;
    p.rowp = hs.rowp;
  }
  dispatch_value(value_kind, [&](auto V) { launch_backward<V.value>(p, vec4, stream); });
  if (host_rows) launch_host_stage_out(hs, stream);
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
      "lookup_step(Tensor(a!) meta, int value_kind, Tensor ids, Tensor offsets, Tensor? lengths, Tensor? psw, "
      "Tensor feature_table, Tensor feature_col, int batch, int pooling, int flags, int max_dim, int out_cols, "
      "int out_kind, Tensor(b!) set, Tensor(c!) refused_total, Tensor? skip=None, Tensor(d!)? stage=None, "
      "Tensor(e!)? stage_totals=None, Tensor? stage_mask=None, int stage_cur=0, int stage_min_live=0, "
      "Tensor? gate=None, int refused_host=0) -> (Tensor, Tensor)");
  m.def(
      "lookup_backward(Tensor(a!) meta, int value_kind, Tensor grad, Tensor ids, Tensor offsets, Tensor ws, "
      "Tensor? psw, Tensor feature_table, Tensor feature_col, int batch, int pooling, int flags, int max_dim, "
      "int opt, float weight_decay, float beta1, float beta2, float eps, float max_grad_value, "
      "float max_grad_norm, Tensor lr, Tensor(f!) step, Tensor(b!) gsum, Tensor(c!) seg, int seg_chunk, "
      "int nonfinite=0, Tensor(d!)? nonfinite_count=None, Tensor(e!)? nonfinite_seen=None) -> Tensor");
  m.def("lookup_step_ws_size(int n, int num_tables, bool with_csr, bool scaled) -> int");
  m.def("lookup_dedup_set_size(int n) -> int");
  m.def("lookup_contract() -> str");
  m.def("_lookup_lab_csr_sort(int variant) -> int");
  m.def("_lookup_lab_find_later(int variant) -> int");
  m.def("_lookup_lab_dedup(int variant) -> int");
  m.def("_lookup_lab_mirror(int variant) -> int");
  m.def("_lookup_lab_step(int variant) -> int");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("lookup_dedup", TORCH_BOX(&dynamicemb::lookup::lookup_dedup));
  m.impl("lookup_validate", TORCH_BOX(&dynamicemb::lookup::lookup_validate));
  m.impl("report_nonfinite", TORCH_BOX(&dynamicemb::lookup::report_nonfinite));
  m.impl("lookup_step", TORCH_BOX(&dynamicemb::lookup::lookup_step));
  m.impl("lookup_backward", TORCH_BOX(&dynamicemb::lookup::lookup_backward));
}

// No tensor argument to dispatch on: CompositeExplicitAutograd serves every backend (and CPU-only torch).
STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CompositeExplicitAutograd, m) {
  m.impl("lookup_dedup_set_size", TORCH_BOX(&dynamicemb::lookup::lookup_dedup_set_size));
  m.impl("lookup_contract", TORCH_BOX(&dynamicemb::lookup::lookup_contract));
  m.impl("_lookup_lab_csr_sort", TORCH_BOX(&dynamicemb::lookup::lookup_lab_csr_sort));
  m.impl("_lookup_lab_find_later", TORCH_BOX(&dynamicemb::lookup::lookup_lab_find_later));
  m.impl("_lookup_lab_dedup", TORCH_BOX(&dynamicemb::lookup::lookup_lab_dedup));
  m.impl("_lookup_lab_mirror", TORCH_BOX(&dynamicemb::lookup::lookup_lab_mirror));
  m.impl("_lookup_lab_step", TORCH_BOX(&dynamicemb::lookup::lookup_lab_step));
  m.impl("lookup_step_ws_size", TORCH_BOX(&dynamicemb::lookup::lookup_step_ws_size));
  m.impl("device_error_block", TORCH_BOX(&dynamicemb::lookup::device_error_block));
  m.impl("clear_device_error", TORCH_BOX(&dynamicemb::lookup::clear_device_error));
}
