// Scored hash table ops (torch stable ABI), CPU (the twin, table_cpu.h) and CUDA (table_kernels.cuh via the 18
// generated instantiation units). Every op is stateless: the table is the tensors passed in
// (keys, digests, scores, values, locks, counters; see table_types.h), outputs are caller-allocated and
// written in place, so the ops are CUDA-graph capturable. Validation with user-facing messages lives in
// dynamicemb/_table.py; the checks here only keep memory safe.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <optional>
#include <type_traits>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/ops/value_kind.h"
#include "dynamicemb/csrc/table/table_cpu.h"
#include "dynamicemb/csrc/table/table_types.h"
#include "dynamicemb/csrc/table/value_kind_dispatch.h"

namespace dynamicemb {
namespace table {
namespace {

using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;
using accel::ScalarType;

int key_kind(const Tensor& t) {
  ACCEL_CHECK(t.scalar_type() == ScalarType::Long || t.scalar_type() == ScalarType::UInt64,
              "table keys: expected dtype int64 or uint64, got ", accel::dtype_name(t.scalar_type()));
  return t.scalar_type() == ScalarType::Long ? kKeyInt64 : kKeyUInt64;
}
int value_kind(const Tensor& t) {
  const int k = value_kind_of(t.scalar_type());
  ACCEL_CHECK(k >= 0, "table values: expected dtype float16, bfloat16 or float32, got ",
              accel::dtype_name(t.scalar_type()));
  return k;
}

struct Table {
  TableRef ref;
  int key_kind, value_kind;
  bool cuda;
  int32_t device;
};

Table make_table(const Tensor& keys, const Tensor& digests, const Tensor& scores, const Tensor& values,
                 const Tensor& locks, const Tensor& counters, int64_t bucket_capacity,
                 const OptTensor& values_host = std::nullopt) {
  Table t{};
  t.key_kind = key_kind(keys);
  t.value_kind = value_kind(values);
  accel::check_dim(keys, "table keys", 1);
  accel::check_dim(values, "table values", 2);
  accel::check_dtype(digests, "table digests", ScalarType::Byte);
  accel::check_dtype(scores, "table scores", ScalarType::Long);
  accel::check_dtype(locks, "table locks", ScalarType::Int);
  accel::check_dtype(counters, "table counters", ScalarType::Long);
  const int64_t cap = keys.numel();
  ACCEL_CHECK(bucket_capacity >= 16 && bucket_capacity <= 256 && (bucket_capacity & (bucket_capacity - 1)) == 0,
              "bucket_capacity: expected a power of two in [16, 256], got ", bucket_capacity);
  ACCEL_CHECK(cap % bucket_capacity == 0, "table capacity: expected a multiple of bucket_capacity ",
              bucket_capacity, ", got ", cap);
  // hybrid: rows in host memory, (n, dim) bucket-major or (B - hbm_slots, num_buckets, dim) slot-major
  const int64_t host_rows = values_host.has_value() ? values_host->numel() / std::max<int64_t>(values.size(1), 1) : 0;
  ACCEL_CHECK(digests.numel() == cap && scores.numel() == cap && values.size(0) + host_rows == cap,
              "table tensors: keys, digests, scores and values must have capacity ", cap, " rows");
  ACCEL_CHECK(locks.numel() == cap / bucket_capacity, "table locks: expected ", cap / bucket_capacity,
              " entries, got ", locks.numel());
  ACCEL_CHECK(counters.numel() >= kNumCounters, "table counters: expected ", kNumCounters, " entries");
  for (const Tensor* x : {&keys, &digests, &scores, &values, &locks, &counters}) {
    accel::check_contiguous(*x, "table tensor");
    accel::check_same_device(*x, "table tensor", keys, "table keys");
  }
  t.cuda = keys.is_cuda();
  t.device = keys.get_device_index();
  t.ref.keys = keys.data_ptr();
  t.ref.digests = static_cast<uint8_t*>(digests.data_ptr());
  t.ref.scores = static_cast<uint64_t*>(scores.data_ptr());
  t.ref.values = values.data_ptr();
  t.ref.locks = static_cast<int32_t*>(locks.data_ptr());
  t.ref.counters = static_cast<int64_t*>(counters.data_ptr());
  t.ref.capacity = cap;
  t.ref.bucket_capacity = static_cast<int>(bucket_capacity);
  t.ref.num_buckets = cap / bucket_capacity;
  t.ref.dim = values.size(1);
  t.ref.hbm_slots = bucket_capacity;  // every row at `values`
  if (values_host.has_value()) {  // hybrid: host rows (pinned, reached through UVA; the CPU twin: a second buffer)
    ACCEL_CHECK(!values_host->is_cuda() && values_host->scalar_type() == values.scalar_type() &&
                    (values_host->dim() == 2 || values_host->dim() == 3) &&
                    values_host->size(-1) == values.size(1) && values_host->is_contiguous(),
                "table_values_host: expected contiguous host rows (n, ", values.size(1), ") or (slots, buckets, ",
                values.size(1), ") like the values of the table");
    t.ref.values_host = values_host->data_ptr();
    // split buckets (table_types.h table_row): every bucket's first hbm_slots slots in HBM, the rest in host memory
    const int64_t nb = cap / bucket_capacity;
    ACCEL_CHECK(values.size(0) % nb == 0, "table_values: a hybrid table keeps the same number of HBM rows in each of "
                "its ", nb, " buckets; expected a multiple of ", nb, " rows, got ", values.size(0));
    t.ref.hbm_slots = values.size(0) / nb;
    if (values_host->dim() == 3) {  // slot-major host rows (table_types.h host_row_of)
      ACCEL_CHECK(values_host->size(0) == bucket_capacity - t.ref.hbm_slots && values_host->size(1) == nb,
                  "table_values_host: slot-major host rows expected shape (", bucket_capacity - t.ref.hbm_slots, ", ",
                  nb, ", dim), got (", values_host->size(0), ", ", values_host->size(1), ", dim)");
      t.ref.host_run = nb;
    }
  }
  return t;
}

// Checks an argument tensor: on the table's device, contiguous, dtype, numel.
void* arg_ptr(const Tensor& x, const char* name, const Tensor& table_keys, ScalarType dtype, int64_t numel) {
  accel::check_dtype(x, name, dtype);
  accel::check_contiguous(x, name);
  accel::check_same_device(x, name, table_keys, "table keys");
  ACCEL_CHECK(x.numel() == numel, name, ": expected ", numel, " elements, got ", x.numel());
  return x.data_ptr();
}
void* opt_ptr(const OptTensor& x, const char* name, const Tensor& table_keys, ScalarType dtype, int64_t numel) {
  return x.has_value() ? arg_ptr(*x, name, table_keys, dtype, numel) : nullptr;
}

template <int N> using IC = std::integral_constant<int, N>;

// fn(IC<V>) for a table's value kind; an unknown code is an error (it was a silent fp32 before).
template <typename Fn>
void dispatch_value(int v, Fn&& fn) {
  ACCEL_CHECK(with_value_kind(v, fn), "value_kind: expected 0 (fp16), 1 (bf16) or 2 (fp32), got ", v);
}

// Calls fn(IC<K>, IC<V>, IC<P>) for the runtime kinds.
template <typename Fn>
void dispatch(int k, int v, int p, Fn&& fn) {
  auto with_p = [&](auto K, auto V) {
    switch (p) {
      case kPolicyLru: fn(K, V, IC<kPolicyLru>{}); break;
      case kPolicyLfu: fn(K, V, IC<kPolicyLfu>{}); break;
      case kPolicyCustomized: fn(K, V, IC<kPolicyCustomized>{}); break;
      default: ACCEL_CHECK(false, "policy: expected 0 (lru), 1 (lfu) or 2 (customized), got ", p);
    }
  };
  auto with_v = [&](auto K) { dispatch_value(v, [&](auto V) { with_p(K, V); }); };
  if (k == kKeyInt64) with_v(IC<kKeyInt64>{});
  else with_v(IC<kKeyUInt64>{});
}


void* stream_of(const Table& t) { return accel::current_cuda_stream(t.device); }

// Hybrid CUDA tables: the scratch of the deferred host-row copies (HostOps in table_types.h) of an op on n keys:
// the entries, then launch_host_rows' own scratch. `rows`: the host-row parameters, filled but for src / dst.
struct HostRows {
  Tensor scratch;
  HostRowsParams rows{};
};
std::optional<HostRows> host_rows_for(const Table& t, const Tensor& keys, int64_t n, const OptTensor& tvh,
                                      HostOps& host) {
  if (!tvh.has_value() || n == 0) return std::nullopt;
  const int64_t host_rows = tvh->numel() / std::max<int64_t>(tvh->size(-1), 1);
  if (host_rows == 0) return std::nullopt;
  int bits = 0;
  while ((int64_t(1) << bits) < host_rows) ++bits;
  ACCEL_CHECK(bits <= 29 && n < (int64_t(1) << 31), "hybrid table: expected at most 2^29 host rows and 2^31 keys "
              "per op, got ", host_rows, " rows and ", n, " keys");
  const int64_t ops_words = (n + 31) / 32 * 32;  // 256-byte aligned start of launch_host_rows' scratch
  const int64_t extra = static_cast<int64_t>((host_rows_scratch_bytes(n, bits) + 7) / 8);
  HostRows h{torch::stable::new_empty(keys, {ops_words + extra}, ScalarType::Long)};
  host.ops = static_cast<uint64_t*>(h.scratch.data_ptr());
  host.bits = bits;
  h.rows.ops = host.ops;
  h.rows.n = n;
  h.rows.bits = bits;
  h.rows.scratch = host.ops + ops_words;
  h.rows.host = t.ref.values_host;
  h.rows.row_bytes = t.ref.dim * tvh->element_size();
  return h;
}

// ---------------------------------------------------------------- ops
void table_lookup(Tensor tk, Tensor td, Tensor ts, Tensor tv, Tensor tl, Tensor tc, int64_t bucket_capacity,
                  int64_t policy, Tensor keys, OptTensor values_out, OptTensor found_out, OptTensor scores_out,
                  OptTensor slots_out, bool fill_missing, double missing_value, OptTensor tvh) {
  Table t = make_table(tk, td, ts, tv, tl, tc, bucket_capacity, tvh);
  accel::check_dim(keys, "keys", 1);
  LookupParams p{};
  p.t = t.ref;
  p.n = keys.numel();
  p.keys = arg_ptr(keys, "keys", tk, tk.scalar_type(), p.n);
  p.values_out = opt_ptr(values_out, "values_out", tk, tv.scalar_type(), p.n * t.ref.dim);
  p.found_out = static_cast<bool*>(opt_ptr(found_out, "found_out", tk, ScalarType::Bool, p.n));
  p.scores_out = static_cast<uint64_t*>(opt_ptr(scores_out, "scores_out", tk, ScalarType::Long, p.n));
  p.slots_out = static_cast<int64_t*>(opt_ptr(slots_out, "slots_out", tk, ScalarType::Long, p.n));
  p.fill_missing = fill_missing;
  p.missing_value = static_cast<float>(missing_value);
  if (t.cuda) {
    torch::stable::accelerator::DeviceGuard guard(t.device);
    // Hybrid: the rows of host slots are read in host-slot order after the probe.
    std::optional<HostRows> h = p.values_out ? host_rows_for(t, keys, p.n, tvh, p.host) : std::nullopt;
    dispatch(t.key_kind, t.value_kind, static_cast<int>(policy),
             [&](auto K, auto V, auto P) { launch_lookup<K.value, V.value, P.value>(p, stream_of(t)); });
    if (h) {
      h->rows.dst = p.values_out;
      launch_host_rows(h->rows, stream_of(t));
    }
  } else {
    dispatch_value(t.value_kind, [&](auto V) { cpu::lookup<V.value>(p); });
  }
}

void table_upsert(Tensor tk, Tensor td, Tensor ts, Tensor tv, Tensor tl, Tensor tc, int64_t bucket_capacity,
                  int64_t policy, int64_t mode, Tensor keys, OptTensor values, OptTensor scores,
                  OptTensor accum_flags, OptTensor values_out, OptTensor found_out, OptTensor slots_out,
                  Tensor stats, OptTensor evicted_keys, OptTensor evicted_values, OptTensor evicted_scores,
                  bool use_epoch, int64_t epoch, int64_t init_kind, double init_a, double init_b,
                  double init_mean, double init_std, double init_value, int64_t init_cols, double init_fill,
                  int64_t seed, OptTensor pending, OptTensor tvh, int64_t hbm_slots, int64_t lab) {
  Table t = make_table(tk, td, ts, tv, tl, tc, bucket_capacity, tvh);
  // hybrid tables claim each bucket's HBM slots first. A CPU twin of one buffer: hbm_slots (>= 0) gives it the same
  // claim order as the CUDA table of that split; tables of two buffers take it from them (make_table).
  ACCEL_CHECK(hbm_slots >= -1 && hbm_slots <= bucket_capacity && (!tvh.has_value() || hbm_slots < 0 ||
                                                                   hbm_slots == t.ref.hbm_slots),
              "hbm_slots: expected -1 or the table's HBM slots per bucket in [0, ", bucket_capacity, "] (",
              t.ref.hbm_slots, " for its buffers), got ", hbm_slots);
  if (hbm_slots >= 0) t.ref.hbm_slots = hbm_slots;
  accel::check_dim(keys, "keys", 1);
  ACCEL_CHECK(mode >= kFindOrInsert && mode <= kAccumOrAssign, "mode: unknown upsert mode ", mode);
  UpsertParams p{};
  p.t = t.ref;
  p.mode = static_cast<int>(mode);
  p.pdl = (lab & 1) != 0;  // private option (_table.py ScoredHashTable._upsert_lab)
  p.n = keys.numel();
  const int64_t nd = p.n * t.ref.dim;
  p.keys = arg_ptr(keys, "keys", tk, tk.scalar_type(), p.n);
  p.values_in = opt_ptr(values, "values", tk, tv.scalar_type(), nd);
  p.scores_in = static_cast<const uint64_t*>(opt_ptr(scores, "scores", tk, ScalarType::Long, p.n));
  p.accum_flags = static_cast<const bool*>(opt_ptr(accum_flags, "accum_or_assigns", tk, ScalarType::Bool, p.n));
  p.values_out = opt_ptr(values_out, "values_out", tk, tv.scalar_type(), nd);
  p.found_out = static_cast<bool*>(opt_ptr(found_out, "found_out", tk, ScalarType::Bool, p.n));
  p.slots_out = static_cast<int64_t*>(opt_ptr(slots_out, "slots_out", tk, ScalarType::Long, p.n));
  p.stats = static_cast<int64_t*>(arg_ptr(stats, "stats", tk, ScalarType::Long, kNumStats));
  p.evicted_keys = opt_ptr(evicted_keys, "evicted_keys", tk, tk.scalar_type(), p.n);
  p.evicted_values = opt_ptr(evicted_values, "evicted_values", tk, tv.scalar_type(), nd);
  p.evicted_scores = static_cast<uint64_t*>(opt_ptr(evicted_scores, "evicted_scores", tk, ScalarType::Long, p.n));
  const bool needs_values = mode == kInsertOrAssign || mode == kInsertAndEvict || mode == kAssign ||
                            mode == kAccumOrAssign;
  // Presence, not data pointers: an empty batch's tensors have none, and is a valid op (zero stats).
  ACCEL_CHECK(!needs_values || values.has_value(), "values: required by this operation");
  ACCEL_CHECK(mode != kAccumOrAssign || accum_flags.has_value(), "accum_or_assigns: required by accum_or_assign");
  ACCEL_CHECK(policy != kPolicyCustomized || scores.has_value() || mode == kAssign || mode == kAccumOrAssign ||
                  mode == kFindOrInsert,
              "scores: the customized policy needs caller scores for inserts");
  p.use_epoch = use_epoch;
  p.epoch = static_cast<uint64_t>(epoch);
  p.init.kind = static_cast<int>(init_kind);
  p.init.a = static_cast<float>(init_a);
  p.init.b = static_cast<float>(init_b);
  p.init.mean = static_cast<float>(init_mean);
  p.init.std = static_cast<float>(init_std);
  p.init.value = static_cast<float>(init_value);
  p.init.init_cols = init_cols;
  p.init.fill = static_cast<float>(init_fill);
  p.init.seed = static_cast<uint64_t>(seed);
  if (t.cuda) {
    // _upsert_lab bits 2-3: a private override of the insert pass's schedule (1 dynamic with the plain eviction
    // scan, 2 static, 3 dynamic with the wide scan = the default; A/B timing),
    // passed in mode's bits from kUpsertModeLabShift (table_types.h); launch_upsert strips them.
    p.mode |= static_cast<int>((lab >> 1) & 3) << kUpsertModeLabShift;
    // _upsert_lab bits 4-7: the LRU assign's path (1 = the row copiers' two passes instead of assign_lru_kernel;
    // table_kernels.cuh assign_lru_variant), in mode's bits 4-7 from kUpsertModeLabShift.
    p.mode |= static_cast<int>((lab >> 4) & 15) << (kUpsertModeLabShift + 4);
    // Scratch of the two-pass CUDA upsert (table_kernels.cuh): the keys the hit pass leaves to the insert pass.
    ACCEL_CHECK(p.n == 0 || pending.has_value(), "pending: the CUDA upsert needs an int64 scratch of ",
                2 * p.n + kPendingExtra, " elements");
    // 2n + kPendingExtra, or that plus the first-writer set of the LRU row copiers (private option).
    const int64_t pw = pending.has_value() && pending->numel() == 2 * p.n + kPendingExtra + dedup_set_words(p.n)
                           ? 2 * p.n + kPendingExtra + dedup_set_words(p.n)
                           : 2 * p.n + kPendingExtra;
    p.pending = static_cast<int64_t*>(opt_ptr(pending, "pending", tk, ScalarType::Long, pw));
    p.pending_words = pw;
    ACCEL_CHECK(reinterpret_cast<uintptr_t>(p.pending) % 16 == 0, "pending: expected a 16-byte aligned tensor");
    torch::stable::accelerator::DeviceGuard guard(t.device);
    // Hybrid: the first pass leaves its host-row copies (rows written; find_or_insert: rows read) to
    // launch_host_rows, which runs before the insert pass (that one, and accum_or_assign, copy in place).
    const bool defers = (mode == kFindOrInsert && p.values_out) || mode == kInsertOrAssign ||
                        mode == kInsertAndEvict || mode == kAssign;
    std::optional<HostRows> h = defers ? host_rows_for(t, keys, p.n, tvh, p.host) : std::nullopt;
    auto launch = [&] {
      dispatch(t.key_kind, t.value_kind, static_cast<int>(policy),
               [&](auto K, auto V, auto P) { launch_upsert<K.value, V.value, P.value>(p, stream_of(t)); });
    };
    if (!h) {
      launch();
    } else {
      p.first_pass_only = true;
      launch();
      h->rows.src = mode == kFindOrInsert ? p.values_out : p.values_in;
      h->rows.dst = mode == kFindOrInsert ? p.values_out : nullptr;
      launch_host_rows(h->rows, stream_of(t));
      p.first_pass_only = false;
      p.insert_pass_only = true;
      launch();
    }
  } else {
    dispatch_value(t.value_kind, [&](auto V) { cpu::upsert<V.value>(p, static_cast<int>(policy)); });
  }
}

void table_erase(Tensor tk, Tensor td, Tensor ts, Tensor tv, Tensor tl, Tensor tc, int64_t bucket_capacity,
                 OptTensor keys, int64_t threshold, Tensor stats, OptTensor tvh) {
  Table t = make_table(tk, td, ts, tv, tl, tc, bucket_capacity, tvh);  // rows untouched; tvh: the hybrid layout
  EraseParams p{};
  p.t = t.ref;
  if (keys.has_value()) {
    accel::check_dim(*keys, "keys", 1);
    p.n = keys->numel();
    p.keys = arg_ptr(*keys, "keys", tk, tk.scalar_type(), p.n);
  }
  p.threshold = static_cast<uint64_t>(threshold);
  p.stats = static_cast<int64_t*>(arg_ptr(stats, "stats", tk, ScalarType::Long, 1));
  if (t.cuda) {
    torch::stable::accelerator::DeviceGuard guard(t.device);
    dispatch(t.key_kind, t.value_kind, kPolicyLru,
             [&](auto K, auto V, auto P) { launch_erase<K.value, V.value, P.value>(p, stream_of(t)); });
  } else {
    cpu::erase(p);
  }
}

void table_export(Tensor tk, Tensor td, Tensor ts, Tensor tv, Tensor tl, Tensor tc, int64_t bucket_capacity,
                  int64_t offset, int64_t n, bool use_threshold, int64_t threshold, Tensor keys_out,
                  OptTensor values_out, OptTensor scores_out, OptTensor slots_out, Tensor count, OptTensor tvh) {
  Table t = make_table(tk, td, ts, tv, tl, tc, bucket_capacity, tvh);
  ACCEL_CHECK(offset >= 0 && n >= 0 && offset + n <= t.ref.capacity, "offset/n: the slot range [", offset, ", ",
              offset + n, ") is outside [0, ", t.ref.capacity, ")");
  ExportParams p{};
  p.t = t.ref;
  p.offset = offset;
  p.n = n;
  p.use_threshold = use_threshold;
  p.threshold = static_cast<uint64_t>(threshold);
  p.keys_out = arg_ptr(keys_out, "keys_out", tk, tk.scalar_type(), n);
  p.values_out = opt_ptr(values_out, "values_out", tk, tv.scalar_type(), n * t.ref.dim);
  p.scores_out = static_cast<uint64_t*>(opt_ptr(scores_out, "scores_out", tk, ScalarType::Long, n));
  p.slots_out = static_cast<int64_t*>(opt_ptr(slots_out, "slots_out", tk, ScalarType::Long, n));
  p.count = static_cast<int64_t*>(arg_ptr(count, "count", tk, ScalarType::Long, 1));
  if (t.cuda) {
    torch::stable::accelerator::DeviceGuard guard(t.device);
    dispatch(t.key_kind, t.value_kind, kPolicyLru,
             [&](auto K, auto V, auto P) { launch_export<K.value, V.value, P.value>(p, stream_of(t)); });
  } else {
    dispatch_value(t.value_kind, [&](auto V) { cpu::export_batch<V.value>(p); });
  }
}

void table_rehash(Tensor sk, Tensor sd, Tensor ss, Tensor sv, Tensor sl, Tensor sc, Tensor dk, Tensor dd,
                  Tensor ds, Tensor dv, Tensor dl, Tensor dc, int64_t bucket_capacity, Tensor stats) {
  Table s = make_table(sk, sd, ss, sv, sl, sc, bucket_capacity);
  Table d = make_table(dk, dd, ds, dv, dl, dc, bucket_capacity);
  ACCEL_CHECK(s.key_kind == d.key_kind && s.value_kind == d.value_kind && s.ref.dim == d.ref.dim,
              "rehash: source and destination tables differ in key dtype, value dtype or dim");
  accel::check_same_device(dk, "destination keys", sk, "source keys");
  RehashParams p{};
  p.src = s.ref;
  p.dst = d.ref;
  p.stats = static_cast<int64_t*>(arg_ptr(stats, "stats", sk, ScalarType::Long, kNumStats));
  if (s.cuda) {
    torch::stable::accelerator::DeviceGuard guard(s.device);
    dispatch(s.key_kind, s.value_kind, kPolicyCustomized,
             [&](auto K, auto V, auto P) { launch_rehash<K.value, V.value, P.value>(p, stream_of(s)); });
  } else {
    dispatch_value(s.value_kind, [&](auto V) { cpu::rehash<V.value>(p); });
  }
}

}  // namespace
}  // namespace table
}  // namespace dynamicemb


STABLE_TORCH_LIBRARY_FRAGMENT(dynamicemb, m) {
  m.def(
      "table_lookup(Tensor table_keys, Tensor table_digests, Tensor table_scores, Tensor table_values, "
      "Tensor table_locks, Tensor table_counters, int bucket_capacity, int policy, Tensor keys, "
      "Tensor(a!)? values_out, Tensor(b!)? found_out, Tensor(c!)? scores_out, Tensor(d!)? slots_out, "
      "bool fill_missing, float missing_value, Tensor? table_values_host=None) -> ()");
  m.def(
      "table_upsert(Tensor(a!) table_keys, Tensor(b!) table_digests, Tensor(c!) table_scores, "
      "Tensor(d!) table_values, Tensor(e!) table_locks, Tensor(f!) table_counters, int bucket_capacity, "
      "int policy, int upsert_mode, Tensor keys, Tensor? values, Tensor? scores, Tensor? accum_flags, "
      "Tensor(g!)? values_out, Tensor(h!)? found_out, Tensor(i!)? slots_out, Tensor(j!) stats, "
      "Tensor(k!)? evicted_keys, Tensor(l!)? evicted_values, Tensor(m!)? evicted_scores, bool use_epoch, "
      "int epoch, int init_kind, float init_a, float init_b, float init_mean, float init_std, "
      "float init_value, int init_cols, float init_fill, int seed, Tensor(n!)? pending=None, "
      "Tensor(o!)? table_values_host=None, int hbm_slots=-1, int lab=0) -> ()");
  m.def(
      "table_erase(Tensor(a!) table_keys, Tensor(b!) table_digests, Tensor table_scores, Tensor table_values, "
      "Tensor table_locks, Tensor(c!) table_counters, int bucket_capacity, Tensor? keys, int threshold, "
      "Tensor(d!) stats, Tensor? table_values_host=None) -> ()");
  m.def(
      "table_export(Tensor table_keys, Tensor table_digests, Tensor table_scores, Tensor table_values, "
      "Tensor table_locks, Tensor table_counters, int bucket_capacity, int offset, int n, bool use_threshold, "
      "int threshold, Tensor(a!) keys_out, Tensor(b!)? values_out, Tensor(c!)? scores_out, "
      "Tensor(d!)? slots_out, Tensor(e!) count, Tensor? table_values_host=None) -> ()");
  m.def(
      "table_rehash(Tensor src_keys, Tensor src_digests, Tensor src_scores, Tensor src_values, "
      "Tensor src_locks, Tensor src_counters, Tensor(a!) dst_keys, Tensor(b!) dst_digests, "
      "Tensor(c!) dst_scores, Tensor(d!) dst_values, Tensor(e!) dst_locks, Tensor(f!) dst_counters, "
      "int bucket_capacity, Tensor(g!) stats) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CPU, m) {
  m.impl("table_lookup", TORCH_BOX(&dynamicemb::table::table_lookup));
  m.impl("table_upsert", TORCH_BOX(&dynamicemb::table::table_upsert));
  m.impl("table_erase", TORCH_BOX(&dynamicemb::table::table_erase));
  m.impl("table_export", TORCH_BOX(&dynamicemb::table::table_export));
  m.impl("table_rehash", TORCH_BOX(&dynamicemb::table::table_rehash));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("table_lookup", TORCH_BOX(&dynamicemb::table::table_lookup));
  m.impl("table_upsert", TORCH_BOX(&dynamicemb::table::table_upsert));
  m.impl("table_erase", TORCH_BOX(&dynamicemb::table::table_erase));
  m.impl("table_export", TORCH_BOX(&dynamicemb::table::table_export));
  m.impl("table_rehash", TORCH_BOX(&dynamicemb::table::table_rehash));
}
