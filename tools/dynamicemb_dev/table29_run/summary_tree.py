"""Makes the lab tree of table29 (evict_bench only): a copy of SRC's table kernels, common/, the timing harness and
evict_bench.cu in which the insert pass has a second instance (upsert_insert_kernel's template S = 2 / 3, chosen by mode
lab value 4 / 5) whose eviction scan reads the bucket's victim summary (victim_summary.cuh) and falls back to the full
scan; S = 2 keeps the product's prefetch of the whole bucket (1.1 KB) beside the lock, S = 3 (and 4) prefetch the digest
line and the 8 entries' score sectors only. S = 0 is the product code unchanged. evict_bench builds every bucket's
summary before each op of variants 4 and 5 (the oracle: every summary fresh). S = 4 (lab value 6) is the
steady state: the evictor flags a summary it could not use or left with <= kVsumRefreshAt entries below its bound,
a kernel after the insert pass (timed in the op) rebuilds the flagged ones; evict_bench runs 16 warm-up
find_or_insert ops on that path before its snapshot (for every variant: the same evictions) and restores the
summaries with the table before each op. Lab value 7: the same, the refresh of the previous op's flags on a second
stream beside begin_op and the first pass, joined before the insert pass (warm-up on that path when 7 is listed:
list one of 6-9). Lab values 8 / 9: as 6 / 7 with 16-entry summaries (32 bytes per bucket; S = 5), the
requests in a bitmap and the refresh a warp per bitmap word (vs16_refresh).

Usage: python3 summary_tree.py SRC DEST
"""
import os
import shutil
import sys

src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True)
for d in ("dynamicemb/csrc/table", "common"):
    shutil.copytree(os.path.join(src, d), os.path.join(dst, d))
for f in ("benchmarks/table_timing_harness.cuh", "tools/dynamicemb_dev/evict_bench.cu",
          "tools/dynamicemb_dev/table29_run/victim_summary.cuh", "tools/dynamicemb_dev/table_lab_workload.cuh"):
    if not os.path.exists(os.path.join(src, f)):  # (the workload header exists from session 35 on)
        continue
    os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
    shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def patch(rel, pairs):
    path = os.path.join(dst, rel)
    text = open(path).read()
    for old, new in pairs:
        assert text.count(old) == 1, (rel, old, text.count(old))
        text = text.replace(old, new)
    open(path, "w").write(text)


K = "dynamicemb/csrc/table/table_kernels.cuh"
patch(K, [
    ('#include "dynamicemb/csrc/table/probe.cuh"\n',
     '#include "dynamicemb/csrc/table/probe.cuh"\n#include "dynamicemb/csrc/table/table_types.h"\n'
     '#include "tools/dynamicemb_dev/table29_run/victim_summary.cuh"\n'),
    ("template <int K, int V, int P>\n__device__ __noinline__ Outcome evict_insert(",
     "template <int K, int V, int P, int S = 0>\n__device__ __noinline__ Outcome evict_insert("),
    ("  prefetch_bucket_l2(tile, t, base);  // the scan's",
     "  uint4 vs = make_uint4(kVsumNone, kVsumNone, 0u, 0u);\n"
     "  if (S >= 2 && S <= 4 && t.bucket_capacity == 128) vs = __ldcg(g_vsum + bucket);\n"
     "  uint4 e16 = make_uint4(kVsumNone, kVsumNone, 0u, 0u);\n"
     "  uint64_t b16 = 0;\n"
     "  if (S == 5 && t.bucket_capacity == 128) {\n"
     "    e16 = __ldcg(g_vs16 + 2 * bucket);\n"
     "    const uint4 bb = __ldcg(g_vs16 + 2 * bucket + 1);\n"
     "    b16 = (static_cast<uint64_t>(bb.y) << 32) | bb.x;\n"
     "  }\n"
     "  if (S >= 3) vsum_prefetch_digests(tile, t, base); else\n"
     "  prefetch_bucket_l2(tile, t, base);  // the scan's"),
    ("    if (lead) got = try_lock_bucket(lock);\n    if (tile.shfl(got, 0)) break;\n",
     "    if (lead) got = try_lock_bucket(lock);\n    if (S >= 3 && S <= 4) vsum_prefetch_entries(tile, t, base, vs);\n"
     "    if (S == 5) vs16_prefetch_entries(tile, t, base, e16);\n"
     "    if (tile.shfl(got, 0)) break;\n"),
    ("    const BucketScan sc = scan_bucket(tile, t, base, d4);\n",
     "    BucketScan sc;\n"
     "    int vs_left = 0;\n"
     "    const bool vs_ok = S == 5 ? vs16_scan(tile, t, base, d4, e16, b16, sc, vs_left)\n"
     "                              : S >= 2 && vsum_scan(tile, t, base, d4, vs, sc, S == 4 ? &vs_left : nullptr);\n"
     "    if (!vs_ok) sc = scan_bucket(tile, t, base, d4);\n"
     "    if (S == 4 && lead && (!vs_ok || vs_left <= kVsumRefreshAt) && !(vs.w & kVsumStale)) {\n"
     "      vsum_mark_stale(bucket, vs);\n"
     "      vs.w |= kVsumStale;\n"
     "    }\n"
     "    if (S == 5 && lead && (!vs_ok || vs_left <= kVsumRefreshAt))\n"
     "      atomicOr(g_vflag + (bucket >> 5), 1u << (bucket & 31));\n"),
    ("template <int K, int V, int P>\n__device__ __forceinline__ Outcome upsert_one(",
     "template <int K, int V, int P, int S = 0>\n__device__ __forceinline__ Outcome upsert_one("),
    ("    return evict_insert<K, V, P>(\n", "    return evict_insert<K, V, P, S>(\n"),
    ("    return evict_insert<K, V, P>(p_cold, a,", "    return evict_insert<K, V, P, S>(p_cold, a,"),
    ("template <int K, int V, int P, int L>\n__global__ void __launch_bounds__(kBlock, 2) upsert_insert_kernel(",
     "template <int K, int V, int P, int L, int S = 0>\n"
     "__global__ void __launch_bounds__(kBlock, 2) upsert_insert_kernel("),
    ("upsert_one<K, V, P>(tile, p, &s_p, a, row_in,", "upsert_one<K, V, P, S>(tile, p, &s_p, a, row_in,"),
    ("  if (!p.insert_pass_only) launch_upsert_first<K, V, P>(p, s);\n",
     "  const bool lab7 = (p_op.mode >> kUpsertModeLabShift) == 7 || (p_op.mode >> kUpsertModeLabShift) == 9;\n"
     "  const bool k16 = (p_op.mode >> kUpsertModeLabShift) == 9;\n"
     "  if (lab7) vsum_refresh_beside(p.t, s, false, k16);\n"
     "  if (!p.insert_pass_only) launch_upsert_first<K, V, P>(p, s);\n"
     "  if (lab7) vsum_refresh_beside(p.t, s, true, k16);\n"),
    ("  if (insert_schedule(p_op.mode) == kScheduleStatic)\n",
     "  if ((p_op.mode >> kUpsertModeLabShift) == 4)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 2>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 8 || (p_op.mode >> kUpsertModeLabShift) == 9)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 5>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 6 || (p_op.mode >> kUpsertModeLabShift) == 7)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 4>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 5)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 3>, grid, kBlock, s, p);\n"
     "  else if (insert_schedule(p_op.mode) == kScheduleStatic)\n"),
    ('  check_launch("upsert insert pass");\n  DYNAMICEMB_TABLE_PHASE_HOOK(s);\n',
     '  check_launch("upsert insert pass");\n  DYNAMICEMB_TABLE_PHASE_HOOK(s);\n'
     '  if ((p_op.mode >> kUpsertModeLabShift) == 6) {  // the summaries flagged stale, rebuilt\n'
     '    vsum_refresh<<<static_cast<unsigned>((p.t.num_buckets + 255) / 256), 256, 0, s>>>(p.t);\n'
     '    check_launch("vsum_refresh");\n'
     '    DYNAMICEMB_TABLE_PHASE_HOOK(s);\n'
     '  }\n'
     '  if ((p_op.mode >> kUpsertModeLabShift) == 8) {  // the flagged 16-entry summaries rebuilt\n'
     '    vs16_refresh<<<static_cast<unsigned>(((p.t.num_buckets + 31) / 32 * 32 + 255) / 256), 256, 0, s>>>(p.t);\n'
     '    check_launch("vs16_refresh");\n'
     '    DYNAMICEMB_TABLE_PHASE_HOOK(s);\n'
     '  }\n'),
])
patch("tools/dynamicemb_dev/evict_bench.cu", [
    ("    copy_table(snap, t);\n",
     "    bool lab6 = false;\n"
     "    int warm_lab = 6;\n"
     "    for (int l : labs) lab6 = lab6 || l >= 6;\n"
     "    for (int l : labs) warm_lab = l >= 6 ? l : warm_lab;\n"
     "    if (lab6) {  // warm-up: 16 find_or_insert ops on lab 6's path (the same evictions), then the summaries' snapshot\n"
     "      lab_warm_begin(t, s);\n"
     "      for (int w = 0; w < 16; ++w) {\n"
     "        gen_batch<<<(n + 255) / 256, 256, 0, s>>>(pool, keys, n, uint64_t(1000 + w));\n"
     "        UpsertParams p = base;\n"
     "        p.keys = keys;\n"
     "        p.n = n;\n"
     "        p.mode = kFindOrInsert | (warm_lab << kUpsertModeLabShift);\n"
     "        p.values_out = vout;\n"
     "        p.found_out = found;\n"
     "        launch_upsert<K, V, P>(p, s);\n"
     "      }\n"
     "      lab_warm_end(t, s);\n"
     "    }\n"
     "    copy_table(snap, t);\n"),
    ('        const char* kn[] = {"begin", "first", "insert"};\n        for (int k = 0; k < 3; ++k)',
     '        const char* kn[] = {"begin", "first", "insert", "refresh"};\n        for (int k = 0; k < 4; ++k)'),
    ("        copy_table(t, snap);\n        if (zipf) {",
     "        copy_table(t, snap);\n        lab_prepare(labs[li], t, s);\n        if (zipf) {"),
])
print("lab tree:", dst)
