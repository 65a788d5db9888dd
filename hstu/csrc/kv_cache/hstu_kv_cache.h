// The fused bookkeeping step of KVCacheManager.begin_step (hstu/_kv_cache.py): host-side declarations, no torch
// headers. One single-block kernel does lookup, slot assignment, LRU eviction, the free-page stack, the page
// table and the append rows; a second small grid kernel writes the gather plan (PagedLayout.src_rows).
// Semantics are those of the torch-ops path in _kv_cache.py (the reference), state tensor for state tensor.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hstu {
namespace kvcache {

constexpr int kThreads = 512;        // the bookkeeping kernel's block
constexpr int kMaxBatch = kThreads - 1;  // B + 1 offsets are scanned one per thread
constexpr int64_t kMaxUsers = 65536;     // user-table bitmasks live in shared memory
// Gather plans of at most this many rows (and page tables of at most kFoldRows / 16 entries) are written by the
// bookkeeping kernel itself (a few rows per thread, the page table staged in shared memory) instead of the grid
// kernel: one launch less per step for small batches (NVIDIA's batch 1: 4,481 rows).
constexpr int64_t kFoldRows = 8192;

// CACHE_ERROR_BITS of _kv_cache.py.
constexpr int32_t kPoolFull = 1 << 8;
constexpr int32_t kUsersFull = 1 << 9;
constexpr int32_t kUnknownUser = 1 << 10;
constexpr int32_t kUserTooLong = 1 << 11;
constexpr int32_t kDuplicateUser = 1 << 12;

struct BeginStepParams {
  // Cache state, updated in place (shapes of KVCacheManager: U = max_users, P = num_pages, M = pages per user).
  int64_t* slot_user;   // (U + 1)
  bool* slot_valid;     // (U + 1)
  int64_t* slot_len;    // (U + 1)
  int64_t* slot_pages;  // (U + 1, M)
  int64_t* last_used;   // (U + 1)
  int64_t* free_pages;  // (P + 1)
  int64_t* free_count;  // ()
  int64_t* clock;       // ()
  int32_t* error_flags; // (1)
  // The batch.
  const int64_t* user_ids;      // (B)
  const int32_t* cu_seqlens_q;  // (B + 1)
  const int32_t* num_append;    // (B)
  // Outputs (CacheStep / PagedLayout fields).
  int64_t* slots;            // (B)
  int32_t* num_append_out;   // (B) tokens actually appended
  int32_t* page_offsets;     // (B + 1)
  int32_t* page_ids;         // (B * M)
  int32_t* last_page_lens;   // (B)
  int32_t* cached_lens;      // (B)
  int64_t* append_rows;      // (total_q), tokens not appended on the sink page (row t % page_size)
  int64_t* src_rows;         // (2 * (B * M * page_size + total_q + 1))
  int64_t* dst_new;          // (total_q)
  int32_t* cu_seqlens_k;     // (B + 1)
  int32_t* layout_flags;     // (1), always 0: the manager's page tables are valid by construction
  // The lengths' ready word (nullptr: none): 0 from the kernel's start, then 1 (a release at GPU scope) once
  // cu_seqlens_k is written, before the page table and the table updates; 2 once every step tensor (the page
  // table, the append rows, the gather plan) is written, before the table updates (read by the next step only).
  // The serving step's plan block (hstu/csrc/paged, kOptPlanReadyWord) spins on it instead of waiting for this
  // grid's completion, so its validation and planning run beside the rest of this kernel. The kernel lets its
  // dependents launch only after the word's reset is visible at GPU scope.
  int32_t* ready = nullptr;
  int batch;
  int64_t max_users, num_pages, max_pages_per_user, page_size, total_q;
  bool create, evict;
  // The gather plan (src_rows) is written at all: false when its reader computes it on demand (KVCacheManager on
  // a Hopper device, where the paged forward reads the pages itself and only a rab call gathers).
  bool gather_plan = true;
  // With the ready word (KVCacheManager._begin_early, on by default; kv_cache_begin_step's option bit 4): the
  // lookup's slot loads issued with the batch's, the word's reset and the dependents' launch by the last thread
  // beside the batch's loads, and its 2 published before the append rows (step 9). The same values.
  bool early = false;
  bool fold_layout;  // set by launch_begin_step: the gather plan is small (kFoldRows), the first kernel writes it
  bool rows_in_smem;  // set by launch_begin_step: the batch's page-table rows fit in shared memory (kRowsInSmem)
};

// The batch's page-table rows (B x max_pages_per_user int64) are kept in the bookkeeping kernel's shared memory up
// to this many entries (32 KB).
constexpr int64_t kRowsInSmem = 4096;
bool begin_step_rows_in_smem(int batch, int64_t max_pages_per_user);

// Bytes of dynamic shared memory the bookkeeping kernel needs.
size_t begin_step_smem_bytes(int batch, int64_t max_users, int64_t max_pages_per_user);

// Enqueues the kernels on `stream` (the second only for gather plans over kFoldRows rows, none without
// p.gather_plan; no synchronization; CUDA-graph capturable).
cudaError_t launch_begin_step(const BeginStepParams& p, cudaStream_t stream);

// Page copies between two page pools of the same page shape, for KVCacheManager's offload to pinned host memory
// and reload (hstu_kv_page_copy.cu). Either pool may be pinned host memory, reached through UVA (its data pointer
// is its device address). Entry e < *count copies page src_pages[e] of every layer to page dst_pages[e]; entries
// at or past the count return at once, so a fixed-size list costs what its live entries move. Page numbers out of
// range are skipped (never an out-of-bounds access).
struct PageCopyParams {
  const uint8_t* src;  // (layers, src_pages_per_layer, page_bytes)
  uint8_t* dst;        // (layers, dst_pages_per_layer, page_bytes)
  const int64_t* src_pages;  // (entries)
  const int64_t* dst_pages;  // (entries)
  const int64_t* count;      // (1) live entries
  int64_t entries, layers, src_layer_pages, dst_layer_pages, page_bytes;  // page_bytes: a multiple of 16
};

// Enqueues the copy kernel on `stream` (no synchronization; CUDA-graph capturable).
cudaError_t launch_page_copy(const PageCopyParams& p, cudaStream_t stream);

// KVCacheManager.append in one launch for K and V (and for every layer): entry i of layer l copies the row src[i]
// (i without src) of k[l] and v[l] to rows dst[i] and dst[i] + page_size of layer l's pool viewed as
// (layer_rows, row_bytes). Entries whose destination is the sink page or out of range (dst[i] < 0 or dst[i] +
// page_size >= sink_row) and sources out of range are skipped: tokens that are not appended move no bytes.
struct AppendParams {
  uint8_t* pool;               // (layers, layer_rows, row_bytes)
  const uint8_t* k;            // row r of layer l at k + l * k_layer_stride + r * k_row_stride (bytes)
  const uint8_t* v;
  const int64_t* dst;          // (entries)
  const int64_t* src;          // (entries) or nullptr
  int64_t entries, layers, layer_rows, row_bytes, page_size, sink_row, src_rows;
  int64_t k_layer_stride, k_row_stride, v_layer_stride, v_row_stride;  // bytes, multiples of 16
};

// pdl: launched with programmatic stream serialization (its CTAs may start while the kernel before it runs; the
// kernel waits for it first thing). Only on devices that run the kernel's sm_90 code (the caller checks).
cudaError_t launch_append(const AppendParams& p, cudaStream_t stream, bool pdl = false);

}  // namespace kvcache
}  // namespace hstu
