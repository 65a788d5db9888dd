// Embedding hot path of BatchedDynamicEmbeddingTables: parameter structs and launcher declarations.
//
// Shared by the CUDA kernels (dedup_kernels.cu, insert_kernels.cu, pool_kernels.cu, segment_kernels.cu,
// update_kernels.cu) and the ops (dynamicemb/csrc/ops/lookup_ops.cc). No CUDA and no torch headers here.
//
// One training step (fixed shapes, no host synchronization, CUDA-graph capturable):
//   dedup    three passes (dedup_kernels.cu): a clear pass fills the per-step open-addressing (table, id) set with
//            FREE and writes the bag of every chunk's first id; an insert pass claims a 4-byte slot per new id
//            with one CAS (the slot holds the claimer's position: keys are compared through ids[pos] and the
//            table of pos), the claimers of a block take consecutive unique indices with one atomic (so
//            uniques follow the id order) and write their own inverse; a resolve pass gives the other ids the
//            unique of their claimer and writes every id's bag. No sort.
//   insert   find (the dedup's number pass: every unique's slot in its own table) then, training, an insert
//            pass of the misses (the scored hash table's device code) and a resolve pass (a key evicted by
//            another key of the same batch gets no row) -> urow (slot or -1) per unique, and the row address of every id (not for
//            a sequence with the segmented backward: its gather reads urow through the inverse). Eval of a
//            sequence skips the dedup and this pass: the gather probes each id's table (RowAddress below).
//   forward  one warp per 32 consecutive bags (pooled) or ids (sequence) streams the ids' rows in order, eight
//            row loads in flight per lane; each lane finds its id's bag once per round (binary search over the
//            lanes' bag ends).
//   backward segmented reduction (segment_kernels.cu): a stable radix sort of the occurrences by unique gives the
//            CSR unique -> occurrences (lookup_step: the training forward builds it on a side stream while the
//            insert runs); one warp sums 128 consecutive CSR entries' bag gradients in registers
//            and applies the optimizer to [embedding | state] once per whole segment (plain loads and stores);
//            segments cut by warp boundaries (hot ids) add their pieces atomically (fp32 SGD: into the row;
//            else into a per-unique fp32 sum that the completing piece applies). Clipping by the global norm
//            and rows wider than one 32 x 4 (4-wide) / 32-column chunk take the atomic scatter instead: the
//            stream over the ids scatter-adds each bag gradient with 16-byte vector atomics into the rows
//            (plain fp32 SGD) or per-unique fp32 sums that a warp-per-unique pass applies. lr and step are read
//            from device memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace lookup {

// Per-table metadata, kept in device memory and packed by Python (dynamicemb/_batched_kernels.py `_kernel_meta`) by field
// name from this ONE list (op lookup_contract lists the fields in order: 'q' int64, 'd' double). Every field is 8
// bytes, so the layout is the same on both sides.
#define DYNAMICEMB_TABLE_META_FIELDS(X)                                                                           \
  /* scored hash table tensors (device addresses) and shape */                                                 \
  X(int64_t, keys) X(int64_t, digests) X(int64_t, scores) X(int64_t, values) X(int64_t, locks)                  \
  X(int64_t, counters) X(int64_t, capacity) X(int64_t, num_buckets) X(int64_t, bucket_capacity)                  \
  X(int64_t, row_stride) /* value_dim: embedding dim + optimizer state columns */                               \
  X(int64_t, dim)        /* embedding dim */                                                                    \
  X(int64_t, policy) X(int64_t, use_epoch) X(int64_t, epoch)                                                    \
  /* training initializer of new rows (the table's own initializer: init_cols = dim, fill = initial state) */   \
  X(int64_t, init_kind) X(double, init_a) X(double, init_b) X(double, init_mean) X(double, init_std)            \
  X(double, init_value) X(int64_t, init_cols) X(double, init_fill) X(int64_t, init_seed)                        \
  /* what a row without a slot reads: train refused -> 0 (on_refused="zero") or the training initializer; */    \
  /* eval missing -> the eval initializer */                                                                    \
  X(int64_t, refused_zero) X(int64_t, eval_kind) X(double, eval_a) X(double, eval_b) X(double, eval_mean)       \
  X(double, eval_std) X(double, eval_value) X(int64_t, eval_seed)                                               \
  /* hybrid storage: device (UVA) address of the host rows (pinned host memory); 0: none; hbm_slots: each */   \
  /* bucket's first hbm_slots slots have their rows at `values` (HBM), the rest at values_host */              \
  X(int64_t, values_host) X(int64_t, hbm_slots)                                                                 \
  X(int64_t, host_run) /* 0: bucket-major host rows; num_buckets: slot-major (table::host_row_of) */

struct TableMeta {
#define DYNAMICEMB_META_MEMBER(type, name) type name;
  DYNAMICEMB_TABLE_META_FIELDS(DYNAMICEMB_META_MEMBER)
#undef DYNAMICEMB_META_MEMBER
};
static_assert(sizeof(TableMeta) == 34 * 8, "TableMeta: 34 fields of 8 bytes");

// Address of row `r` of a table (table::table_row: HBM or, for hybrid tables, host rows).
template <typename T>
TABLE_HD T* meta_row(const TableMeta& m, int64_t r) {
  return table::table_row<T>(reinterpret_cast<void*>(m.values), reinterpret_cast<void*>(m.values_host), m.hbm_slots,
                             m.bucket_capacity, m.host_run, r, m.row_stride);
}

// (unique, gradient row) of the segmented backward; layout of CUDA's int2 without its header.
struct alignas(8) int2_t {
  int32_t x, y;
};

// Value kinds are the table's (table_types.h).
using table::ValueKind;
using table::kValueFp16;
using table::kValueBf16;
using table::kValueFp32;
// The codes Python passes (op lookup_contract lists them by name; dynamicemb/_batched_kernels.py checks its tables
// against it): X(enumerator, python name, value).
#define DYNAMICEMB_POOLING(X) X(kPoolSum, "sum", 0) X(kPoolMean, "mean", 1) X(kPoolNone, "none", 2)
#define DYNAMICEMB_OPT_KINDS(X) \
  X(kSgd, "sgd", 0) X(kAdagrad, "adagrad", 1) X(kRowWiseAdagrad, "rowwise_adagrad", 2) X(kAdam, "adam", 3)
#define DYNAMICEMB_NONFINITE(X)                                                                          \
  X(kNonFinitePropagate, "propagate", 0) X(kNonFiniteSkipRow, "skip_row", 1) X(kNonFiniteSkipStep, "skip_step", 2) \
  X(kNonFiniteRaise, "raise", 3)
#define DYNAMICEMB_ENUMERATOR(e, name, v) e = v,
enum Pooling : int { DYNAMICEMB_POOLING(DYNAMICEMB_ENUMERATOR) };
enum OptKind : int { DYNAMICEMB_OPT_KINDS(DYNAMICEMB_ENUMERATOR) };
// What the fused update does with a row whose summed gradient (over the step, before clipping) holds a NaN or an
// inf (dynamicemb/_optimizers.py `nonfinite`): propagate it into the row; skip the row (counted); skip every row of
// the step (counted once; needs the two-pass atomic scatter); skip the row and report it (the device error record).
// Under max_grad_norm any policy but propagate also skips the whole step when the global norm is non-finite.
enum NonFinite : int { DYNAMICEMB_NONFINITE(DYNAMICEMB_ENUMERATOR) };
#undef DYNAMICEMB_ENUMERATOR

// ---------------------------------------------------------------- dedup
struct DedupParams {
  const uint64_t* ids;       // (n)
  const int64_t* offsets;    // (num_bags + 1)
  int64_t n, num_bags, batch;  // batch: samples per feature (bag b belongs to feature b / batch)
  const int32_t* feature_table;  // (num_features)
  int num_features;
  uint32_t* set;             // (set_capacity) per-step scratch, 16-byte aligned: claimer position or FREE (the
                             // dedup fills it first; nothing is kept between steps)
  int64_t set_capacity;      // >= n
  int32_t* bag;              // (n) bag of each id
  int32_t* inverse;          // (n) unique index of each id; -1 for reserved ids (no unique, no row)
  uint64_t* ukeys;           // (n) first `count` valid
  int32_t* utables;          // (n)
  int32_t* count;            // (1) number of uniques
  const int32_t* skip;       // (1) or null: nonzero (inputs that failed the device checks) -> no uniques, every
                             // inverse -1, so the step reads fallback rows and inserts and updates nothing
  bool no_bags;              // bag is not written (a sequence step whose kernels read no bags: kAddrUnique)
  // The step's workspace header, set by the clear pass so that lookup_step needs no memset (all null / 0 for
  // the plain dedup): skip_out = OR of the device checks' block flags (0 without checks), refused (num_tables)
  // and pending zeroed; with clock_meta, every table's step clock advances (insert's begin_step, folded here:
  // nothing between the clear and the hit pass reads the clock).
  int32_t* skip_out;         // (1) or null
  const int32_t* skip_in;    // (1) or null: an external skip flag (cache_stage's), ORed into skip_out
  const int32_t* check_flags;  // (check_blocks) validate's block_bad slots, or null
  int check_blocks;
  int64_t* refused;          // (num_tables) or null
  int32_t* pending;          // (1) or null
  const TableMeta* clock_meta;  // (num_tables) or null
  int num_tables;
  // The step's find (lookup_step; null for the plain dedup): the number pass finds every unique in its table
  // (read-only: no insert runs meanwhile) and writes urow = slot, or kUrowPending (training miss: sets *pending,
  // the insert pass takes it) / -1 (eval miss); a training hit takes its new score (a single writer per slot).
  const TableMeta* find_meta;  // (num_tables) or null
  int64_t* urow;             // (n)
  bool find_train;
  // lookup_step with a CSR fork (lab, op _lookup_lab_find_later): the number pass leaves the find to
  // launch_dedup_find, which the step queues after forking the CSR build, so that the sort overlaps the find
  bool find_later;
  // lab (op _lookup_lab_find_later 2): (set capacity) scratch; the insert's first taker of a set slot finds its
  // (table, key) and writes the table slot (or -1) here, the number pass copies the claimer's into urow
  int64_t* slot_row;
  // scratch the clear pass zeroes as well (the CSR sort's counters of the step: segment_sort_zero_bytes), or null
  void* zero;                // 16-byte aligned
  int64_t zero_bytes;        // a multiple of 16
  int flags;                 // DedupFlags (dedup_flags_variant: the default, or the lab op _lookup_lab_dedup's)
  // (n) or null: the count pass writes each id's CSR sort key here, its claimer's position (n: none), which orders
  // the ids as the unique index does (uniques are numbered in their claimers' position order), so the CSR's sort
  // can start before the number pass (lookup_step, op _lookup_lab_step 1)
  int32_t* csr_keys;
};
enum DedupFlags : int {
  kDedupCasFirst = 1,        // the insert's global set probe starts with the CAS, no load before it (default)
  kDedupPdl = 16,            // sm90+ (default): insert, count, number and resolve launched as programmatic
                             // dependents of the pass before (each starts while the one before drains, then waits)
  kStepPdl = 32,             // sm90+, with kDedupPdl (default): also the clear pass after the checks (its set fill
                             // before the wait), the insert pass's resolve and the forward as programmatic dependents
                             // (SGD step -3 % with the host ahead: docs/dynamicemb.md)
  // the insert's set at a lower load, so that its linear probes (and a warp's loop over its ids' probes) end sooner;
  // without either bit n + n / 4 + 1024 slots (load <= 0.8), dedup_set_capacity
  kDedupSet2x = 128,         // lab: 2.5 n + 1024 slots
  kDedupSet4x = 256,         // (default) 4 n + 1024 slots: the insert -25 % at NVIDIA's config (docs/dynamicemb.md)
  // (default) a chunk of ids inside one feature (monotone bounds in shared memory) takes its feature once per block
  // in the insert and the number pass instead of a search per id
  kDedupChunkFeature = 512,
  kDedupFlagsAll = 1023,     // (bits 2, 4, 8, 64: former lab variants, removed; docs/dynamicemb.md keeps their history)
};
// The set's capacity the dedup uses for n ids under `flags` (at most the set's entries; >= n).
int64_t dedup_set_capacity(int64_t n, int64_t entries, int flags);
// The DedupFlags of later steps' dedup in lookup_step (default kDedupCasFirst | kDedupPdl | kStepPdl | kDedupSet4x |
// kDedupChunkFeature = 817; 49 is main's before issue 35's hash28 branch); sets them
// when v is in [0, kDedupFlagsAll] (others only read), returns the ones before.
int dedup_flags_variant(int v);
// Whether the current device runs programmatic dependent launches (sm90+; asked once per device).
bool pdl_supported();
constexpr int64_t kUrowPending = -2;  // urow of a unique the insert pass still has to insert
// after_count (or null): called with ctx between the count and the number pass's launches (the early CSR fork).
void launch_dedup(const DedupParams& p, void* stream, void (*after_count)(void*) = nullptr, void* ctx = nullptr);
// The find of launch_dedup's number pass as a kernel of its own over the uniques (p.find_later).
void launch_dedup_find(const DedupParams& p, void* stream);
// Lab: where lookup_step finds its uniques: 0 = in the dedup's number pass, 1 = after the CSR fork
// (DedupParams::find_later), 2 = in the dedup's insert (DedupParams::slot_row); sets it when v is 0..2, returns
// the one before.
int find_later_variant(int v);

// ---------------------------------------------------------------- insert / find
struct InsertParams {
  const TableMeta* meta;    // (num_tables) device
  int num_tables;
  const uint64_t* ukeys;    // (n)
  const int32_t* utables;   // (n)
  const int32_t* count;     // (1) number of valid uniques
  int64_t n;                // capacity of the unique arrays (grid bound)
  bool train;               // find_or_insert (train) or find (eval)
  int64_t* urow;            // (n) slot in the unique's table, -1 without a row; found by the dedup's number pass
                            // (DedupParams::find_meta), kUrowPending where the insert pass has to insert
  int64_t* refused;         // (num_tables) refused inserts of this step (train)
  int64_t* refused_total;   // (num_tables) or null: the module's running count, added to as well
  const int32_t* inverse;   // (n_ids) unique of each id, -1 none
  int64_t n_ids;
  uint64_t* rowp;           // (n_ids) address of the row of each id; 0 without a row. Null: no row-address pass
                            // (the sequence forward reads the rows through inverse / urow, kAddrUnique)
  int32_t* pending;         // (1) zeroed before the step (train): the find sets it when a unique missed, so
                            // the insert and resolve passes of a step without misses return at once
  bool clock_done;          // the step clocks were advanced already (the dedup's clear pass): no begin_step
  bool pdl;                 // lab kStepPdl: the insert pass lets its resolve start early, which waits for it
};
template <int V>
void launch_insert(const InsertParams& p, void* stream);

// ---------------------------------------------------------------- forward
// Where the sequence forward (pooling none) takes an id's row address: the row-address pass (rowp); the dedup's
// unique of the id (inverse -> urow, utables); or a read-only probe of the id's table (eval without a dedup).
enum RowAddress : int { kAddrRowp = 0, kAddrUnique = 1, kAddrProbe = 2 };
struct ForwardParams {
  const TableMeta* meta;
  const uint64_t* ids;          // (n)
  const int64_t* offsets;       // (num_bags + 1)
  const int32_t* bag;           // (n)
  const uint64_t* rowp;         // (n) row address of each id (0: fallback value)
  const float* psw;             // (n) or null
  const int32_t* feature_table; // (num_features)
  const int64_t* feature_col;   // (num_features) first output column of each feature (pooled)
  int64_t n, num_bags, batch;
  int num_features;
  int pooling;
  bool train;
  int max_dim;                  // widest dim of the features
  int64_t out_stride;           // columns of the output
  void* out;                    // (batch, out_stride) pooled or (n, dim) sequence, output dtype
  int addr;                     // RowAddress (sequence forward; pooled: always kAddrRowp)
  const int32_t* inverse;       // (n) kAddrUnique: unique of each id, -1 none
  const int64_t* urow;          // (n) kAddrUnique: slot of each unique, -1 none
  const int32_t* utables;       // (n) kAddrUnique: table of each unique
  const int32_t* skip;          // (1) or null, kAddrProbe: the device checks' flag (nonzero: no id has a row)
  const uint64_t* uaddr;        // (n) or null, kAddrUnique: row address of each unique (HostStageParams), else
                                // meta_row of urow
  bool pdl;                     // lab kStepPdl: launched as a programmatic dependent (waits for the pass before)
};
template <int V, int O>
void launch_forward(const ForwardParams& p, bool vec4, void* stream);

// ---------------------------------------------------------------- backward + optimizer
struct BackwardParams {
  const TableMeta* meta;
  const float* grad;            // like the forward's output, fp32
  const int64_t* offsets;
  const int32_t* bag;           // (n)
  const uint64_t* rowp;         // (n) row address of each id (0: no row)
  const int32_t* count;         // (1) uniques
  const int64_t* urow;          // (n) slot of each unique
  const uint64_t* uaddr;        // (n) or null: row address of each unique (HostStageParams), else meta_row of urow
  const int32_t* utables;       // (n)
  const float* psw;             // (n) or null
  const int32_t* feature_table;
  const int64_t* feature_col;
  int64_t n, num_bags, batch;
  int num_features;
  int pooling;
  int max_dim;
  int64_t out_stride;
  // optimizer
  int opt;
  bool direct;                  // plain fp32 SGD (no weight decay, no clipping): scatter -lr g into the rows
  bool aggregate;               // sum repeated targets of 32 consecutive ids in registers before the atomics
  const float* lr;              // () device
  const float* step;            // () device, already counting this step (with step_bump: the step before it)
  float* step_bump;             // () or null: the step the segmented update advances by 1 (segment_kernels.cu)
  float weight_decay;
  bool decoupled_weight_decay;
  bool state_bf16;              // Adam's m and v as bf16, stochastically rounded (fp32 rows; optimizer.cuh)
  double beta1, beta2;
  float eps;
  float max_grad_value;         // <= 0: off
  float max_grad_norm;          // <= 0: off
  double* norm_sq;              // (1) scratch (max_grad_norm, skip_step)
  int nonfinite;                // NonFinite policy
  int64_t* nonfinite_count;     // (2) [rows, steps] skipped so far (null with kNonFinitePropagate)
  // grad of per-sample weights (sum pooling): dot(bag gradient, unweighted row) per id, before the update
  float* grad_psw;              // (n) or null
  const uint64_t* ids;          // (n) (fallback rows of grad_psw)
  const int32_t* inverse;       // (n) unique of each id, -1 none
  // fp32 gradient sums, all zero between steps (their consumer re-zeroes every row it read). Atomic scatter (not
  // direct): one row per unique (>= count rows). Segmented: one row per segment cut by warp boundaries, the row of
  // the warp the segment starts in (seg_start[u] / seg_chunk; >= ceil(n / seg_chunk) rows)
  float* gsum;
  int64_t gsum_stride;
  // segmented reduction (segment_kernels.cu; seg_chunk > 0), else the atomic scatter above
  int seg_chunk;                // CSR entries per warp
  int32_t* seg_done;            // (n) summed occurrences of a cut segment, all zero between steps
  int32_t* seg_keys;            // (2 n) sort keys (unique, or n: none), then sorted
  int32_t* seg_vals;            // (2 n) sort values (id index), then sorted
  int32_t* seg_start;           // (n + 1) first CSR entry of each unique; [n] = valid entries in total
  int32_t* seg_end;             // (n) one past the last CSR entry of each unique
  int2_t* seg_occ;              // (n) CSR entries: (unique, gradient row: bag (pooled) or id (sequence))
  float* seg_scale;             // (n) per-entry gradient scale (per-sample weight / mean bag length) or null
  void* scan_temp;              // sort scratch of segment_scan_bytes(n) bytes
  size_t scan_temp_bytes;
  bool sort_zeroed;             // its first segment_sort_zero_bytes(n) bytes are zero (the step's dedup clear)
  // the sort's input keys are claimer positions the dedup's count pass wrote (DedupParams::csr_keys): the keys pass
  // writes only the values, the bounds map a position to its unique through inverse (the claimer's own entry)
  bool keys_by_claimer;
};
// ---------------------------------------------------------------- caching tables over the uva store
// Per table: its uva store's table (hbm_slots = 0: rows at values_host on CUDA, at values on the CPU) and the
// stamps of its cache slots. Packed by Python (dynamicemb/_device_stage.py `stage_meta`) in this field order.
struct StageTable {
  int64_t keys, digests, scores, values, values_host, hbm_slots, locks, counters, num_buckets, bucket_capacity;
  int64_t stamps;    // (cache capacity,) int64: the stamp of the last step that used the slot
  int64_t host_run;  // the store's host-row layout (table::host_row_of): 0 bucket-major, num_buckets slot-major
};
static_assert(sizeof(StageTable) == 12 * 8, "StageTable: 12 fields of 8 bytes");


// One launch for every caching table of a step (probe_kernels.cu): each id's feature (from offsets) and table; an
// id of a table with table_mask set is probed read-only in that table (its HBM cache), found[i] set when present
// (reserved ids never are), and each miss counted into info[table]; ids of other tables are found. info also gets
// the F + 1 feature bounds offsets[f * batch] (raw) at [num_tables, num_tables + F], so one readback gives both.
struct CacheProbeParams {
  const TableMeta* meta;        // (num_tables) device
  int num_tables;
  const int32_t* table_mask;    // (num_tables) nonzero: probe this table
  const uint64_t* ids;          // (n)
  const int64_t* offsets;       // (num_bags + 1)
  int64_t n, num_bags, batch;
  const int32_t* feature_table; // (num_features)
  int num_features;
  bool* found;                  // (n)
  int64_t* info;                // (num_tables + num_features + 1), zeroed by the caller
  const StageTable* stage;      // (num_tables) or null: a hit's cache slot gets stamps[slot] = cur (stage_common.h)
  int64_t cur;
  const int32_t* gate;          // (1) or null: *gate == 0 -> nothing to do (op cache_stage after a prefetch that
                                // staged the whole batch; its failed flag is the gate)
};
void launch_cache_probe(const CacheProbeParams& p, void* stream);

// Rows wider than this many columns (4-wide access) / kMaxScalarDim (scalar access) take the torch path.
constexpr int kMaxVecDim = 512;
constexpr int kMaxScalarDim = 128;
template <int V>
void launch_backward(const BackwardParams& p, bool vec4, void* stream);
// The segmented path: rows up to 32 x 4 (vec4) / 32 columns, no clipping by the global gradient norm.
// launch_segment_csr builds the CSR (reads n, inverse, bag, offsets, num_bags, pooling, psw; writes seg_keys,
// seg_vals, seg_start, seg_end, seg_occ, seg_scale); it needs nothing of the insert, so the training forward
// runs it on a side stream; launch_segmented_backward applies the optimizer from a built CSR.
void launch_segment_csr(const BackwardParams& p, void* stream);
template <int V>
void launch_segmented_backward(const BackwardParams& p, bool vec4, void* stream);
size_t segment_scan_bytes(int64_t n);
// Bytes at the start of scan_temp that the CSR's sort needs zeroed before launch_segment_csr (0: none).
size_t segment_sort_zero_bytes(int64_t n);
// The CSR sort (op _lookup_lab_csr_sort compares them): cub's DeviceRadixSort, or cub's onesweep kernels
// dispatched by hand with 8-bit digits and cub's tile (the default), 10-bit digits (4K- or 6K-key tiles: 2 passes
// for ~1M ids, each slower than an 8-bit one), or 8-bit with a warp-aggregated histogram.
enum CsrSort : int { kCsrSortCub = 0, kCsrSortHand8 = 1, kCsrSortHand10 = 2, kCsrSortHand10W = 3, kCsrSortHand8Match = 4 };
// Sets the variant when v is one of CsrSort (else leaves it), returns the one before.
int csr_sort_variant(int v);
// The CSR build on a per-device high-priority side stream, after the work queued on `stream` so far, so that it
// overlaps what the caller queues next; returns what join_side_stream needs (null: it ran on `stream` itself,
// e.g. while `stream` is being captured into a CUDA graph). The caller joins before the workspace can be freed.
void* fork_segment_csr(const BackwardParams& p, void* stream);
// The same fork in two parts (keys_by_claimer): segment_csr_first_keys is where the sort's keys pass reads its input
// (null: `stream` is being captured, no fork); fork_segment_sort queues the keys pass and the sort on the side stream
// after the work queued on `stream` so far (the dedup's count pass), fork_segment_bounds the bounds after the rest
// (the number pass: inverse holds every claimer's unique); each returns the token join_side_stream needs.
int32_t* segment_csr_first_keys(const BackwardParams& p, void* stream);
void* fork_segment_sort(const BackwardParams& p, void* stream);
void* fork_segment_bounds(const BackwardParams& p, void* stream);
void join_side_stream(void* token, void* stream);
// ---------------------------------------------------------------- hybrid tables: the step's host rows in HBM
// Random-order UVA accesses of pinned host rows run at ~30 M rows/s, the same rows in host-address order at
// 94-206 M (docs/dynamicemb_storage.md). So a step over hybrid tables (kStepHostRows) does not let its kernels
// touch host rows in id/unique order: after the insert, launch_host_stage_in sorts the step's uniques with a host
// row by host address (cub radix sort of (address, unique)), copies those rows into HBM scratch rows in that order
// (16 lanes per row) and gives every unique its row address (uaddr: the scratch row, else meta_row, 0 without a
// row) and every id its unique's (rowp, when not null). The forward copies the `dim` embedding columns and reads
// them; the backward copies whole rows ([embedding | state]), runs its kernels on them, and launch_host_stage_out
// writes them back in the same order. Every host row of the step is one unique (a slot has one key in a step), so
// the scratch rows never alias. The scratch (host_stage_bytes) is the op's: nothing is kept between ops.
struct HostStageParams {
  const TableMeta* meta;
  const int32_t* count;         // (1) uniques
  int64_t n;                    // capacity of the unique arrays
  const int64_t* urow;          // (n) slot of each unique, -1 none
  const int32_t* utables;       // (n)
  const int32_t* inverse;       // (n_ids) unique of each id, -1 none
  int64_t n_ids;
  uint64_t* rowp;               // (n_ids <= n) the row address of each id (out; bind_host_stage), or null: none
  uint64_t* uaddr;              // (n) the row address of each unique (out; bind_host_stage)
  bool whole_row;               // copy row_stride columns (backward), else dim (forward)
  int value_bytes;              // bytes of one value (2 or 4)
  int64_t pitch;                // bytes between scratch rows (a multiple of 16, >= the widest copied row)
  void* scratch;                // host_stage_bytes(n, pitch) bytes, 256-byte aligned (bind_host_stage)
};
size_t host_stage_bytes(int64_t n, int64_t pitch);
// Sets p.scratch and points p.uaddr / p.rowp into it (host_stage_bytes(p.n, p.pitch) bytes; p.n and p.pitch set).
void bind_host_stage(HostStageParams& p, void* scratch);
void launch_host_stage_in(const HostStageParams& p, void* stream);
void launch_host_stage_out(const HostStageParams& p, void* stream);  // same p (and scratch) as the stage-in

// cudaMemsetAsync(ptr, 0, bytes) on `stream` (for the ops, which include no CUDA header).
void zero_async(void* ptr, size_t bytes, void* stream);
// cudaMemcpyAsync(dst, src, bytes, device to device) on `stream`.
void copy_async(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
