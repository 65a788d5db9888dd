// Row ops of the sharded module's CUDA step (dynamicemb/csrc/ops/rows_ops.cc): a gather of rows by an index, a
// pooled gather (bags of rows), and per-unique sums of gradient rows through a CSR (unique -> its entries in
// position order, built by a stable radix sort: deterministic, no atomics).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dynamicemb {
namespace lookup {

// out[i] = src[index[i]] for rows of row_bytes bytes; an index outside [0, m) gives a zero row. vec: the bytes
// each thread moves at once (16, 8, 4, 2 or 1; divides row_bytes and both base addresses' alignment).
// src_kind != out_kind (table_types.h ValueKind, rows of d columns): each element converted through fp32 (round to
// nearest), vec4: four columns per thread (d % 4 == 0, both bases aligned to four elements).
struct GatherRowsParams {
  const char* src;
  char* out;
  const void* index;
  bool index64;
  int64_t n, m, row_bytes;
  int vec;
  int src_kind, out_kind;
  int64_t d;
  bool vec4;
};
void launch_gather_rows(const GatherRowsParams& p, void* stream);

// out[b] = sum over i in [offsets[b], offsets[b+1]) of weight[i] * src[index[i]] (rows of d columns of kind
// src_kind, summed in fp32; index outside [0, m) skipped, offsets clamped to [0, n]); mean: divided by the bag's
// length, empty bags zero. batch > 0: bag b = f * batch + j is written to row j * (num_bags / batch) + f (the
// (batch, F * d) layout). vec4: src aligned to four elements, out to 16 bytes, d % 4 == 0.
struct PoolRowsParams {
  const void* src;
  int src_kind;
  float* out;
  const void* index;
  bool index64;
  const int64_t* offsets;
  const float* weight;  // null: 1
  int64_t n, m, d, num_bags, batch;
  bool mean, vec4;
};
void launch_pool_rows(const PoolRowsParams& p, void* stream);

// out[u] = sum over the entries i with inverse[i] == u, in increasing i, of weight[i] * grad[row_of[i]] (fp32
// sums of d columns, stored as out_kind: rounded once). row_of null: row i; weight null: 1; entries whose unique
// is outside [0, num_unique) or whose row is outside [0, grad_rows) are skipped. Scratch (temp,
// segment_sum_temp_bytes): sort keys and values, segment starts, the pieces (fp32) of segments cut by chunk
// boundaries, the radix sort's storage.
struct SegmentSumParams {
  const float* grad;
  void* out;
  int out_kind;
  const void* inverse;
  bool inverse64;
  const void* row_of;
  bool row_of64;
  const float* weight;
  int64_t n, d, grad_rows, num_unique;
  bool vec4;
  char* temp;
};
size_t segment_sum_temp_bytes(int64_t n, int64_t num_unique, int64_t d);
void launch_segment_sum_rows(const SegmentSumParams& p, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
