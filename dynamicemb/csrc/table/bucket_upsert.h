// The bucket-grouped upsert (bucket_upsert.cuh): what the op layer needs (plain C++, no CUDA headers).
// A private variant of launch_upsert, chosen by the caller (the private option ScoredHashTable._upsert_grouped),
// for all-HBM CUDA tables with 128-slot buckets and the ops find_or_insert, insert_or_assign, insert_and_evict.
#pragma once

#include <cstdint>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {

// Bits of the op's `mode` argument asking for the grouped upsert (the op strips them before UpsertParams::mode):
// with 16-lane tiles (two buckets per warp), or with kModeGroupedWarp a warp per bucket.
constexpr int64_t kModeGrouped = int64_t(1) << 8;
constexpr int64_t kModeGroupedWarp = int64_t(1) << 9;
constexpr int kGroupedBucket = 128;            // the bucket size the grouped upsert serves
constexpr int kGroupedScanSpan = 2048;         // bucket counts per scan block (bucket_upsert.cuh)

inline bool grouped_supported(int mode, int64_t bucket_capacity, bool host_rows) {
  return bucket_capacity == kGroupedBucket && !host_rows &&
         (mode == kFindOrInsert || mode == kInsertOrAssign || mode == kInsertAndEvict);
}
// Scratch bytes (in UpsertParams::pending's tensor): (bucket, rank) per key, the grouped (key, index) pairs, the
// bucket offsets and the scan's block sums, each 256-byte aligned.
inline int64_t grouped_scratch_bytes(int64_t n, int64_t num_buckets) {
  return up256(n * 8) + up256(n * 16) + up256((num_buckets + 1) * 4) + up256((num_buckets / kGroupedScanSpan + 2) * 4);
}

// `scratch`: grouped_scratch_bytes(p.n, p.t.num_buckets) bytes, 256-byte aligned; `lanes`: 16 or 32 per bucket;
// `stream`: a cudaStream_t.
template <int K, int V, int P>
void launch_upsert_grouped(const UpsertParams& p, void* scratch, int lanes, void* stream);

}  // namespace table
}  // namespace dynamicemb
