"""Makes the lab tree of table30 (evict_bench only): table29's lab tree (table29_run/summary_tree.py: the product's
insert pass as S = 0, the victim-summary variants as S = 2-5) plus S = 6 / 7, chosen by mode lab value 10 / 11: the
8-entry summary kept up by the evicting insert itself (self_summary.cuh: E = 1 / 2), no refresh kernel. The summary is read before the
lock, beside the digest line's prefetch; after the lock's CAS is issued (so the CAS does not wait for the summary) a
bucket whose summary is none gets main's whole-bucket prefetch, one with a summary its 8 score sectors (table29's S =
3). An evictor that cannot use it runs scan_bucket_self (the full scan, leaving a new
summary under the lock); one that takes the last entry below the bound marks it none. evict_bench warms the table with
16 find_or_insert ops on the listed lab's path (table29's warm-up, every summary none at its start) and restores the
summaries with the table before each op (as lab 6).

Usage: python3 tree30.py SRC DEST
"""
import os
import runpy
import shutil
import sys

src, dst = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
# table29's tree (it reads SRC DEST from sys.argv); its patch() edits files of DEST
patch = runpy.run_path(os.path.join(here, "..", "table29_run", "summary_tree.py"), run_name="__main__")["patch"]
os.makedirs(os.path.join(dst, "tools/dynamicemb_dev/table30_run"), exist_ok=True)
shutil.copy(os.path.join(src, "tools/dynamicemb_dev/table30_run/self_summary.cuh"),
            os.path.join(dst, "tools/dynamicemb_dev/table30_run/self_summary.cuh"))

patch("dynamicemb/csrc/table/table_kernels.cuh", [
    ('#include "tools/dynamicemb_dev/table29_run/victim_summary.cuh"\n',
     '#include "tools/dynamicemb_dev/table29_run/victim_summary.cuh"\n'
     '#include "tools/dynamicemb_dev/table30_run/self_summary.cuh"\n'),
    ("  if (S >= 2 && S <= 4 && t.bucket_capacity == 128) vs = ",
     "  if ((S >= 2 && S <= 4 || S >= 6) && t.bucket_capacity == 128) vs = "),
    ("    if (S >= 3 && S <= 4) vsum_prefetch_entries(",
     "    if (S >= 6 && vs.x == kVsumNone && vs.y == kVsumNone) prefetch_bucket_l2(tile, t, base);\n"
     "    if (S >= 3 && S <= 4 || S >= 6) vsum_prefetch_entries("),
    ("S == 4 ? &vs_left : nullptr);\n    if (!vs_ok) sc = scan_bucket(tile, t, base, d4);\n",
     "(S == 4 || S >= 6) ? &vs_left : nullptr);\n"
     "    if (S >= 6 && !vs_ok) {  // the full scan, leaving a new summary (none when it cannot make one)\n"
     "      uint4 ns;\n"
     "      sc = scan_bucket_self<S >= 7 ? 2 : 1, S == 8>(tile, t, base, d4, new_score, ns);\n"
     "      if (lead) T30_ADD(0);\n"
     "      if (lead && ns.x == kVsumNone && ns.y == kVsumNone) T30_ADD(3);\n"
     "      if (lead && !(ns.x == kVsumNone && vs.x == kVsumNone && vs.y == kVsumNone)) g_vsum[bucket] = ns;\n"
     "      vs = ns;\n"
     "    } else if (S == 8 && lead && vs.x != kVsumNone) {  // the next guess, or none when no entry is left\n"
     "      if (nxt >= 0) reinterpret_cast<uint32_t*>(g_vsum + bucket)[3] = kVsumNext | static_cast<uint32_t>(nxt);\n"
     "      else g_vsum[bucket] = make_uint4(kVsumNone, kVsumNone, 0u, 0u);\n"
     "    } else if (S >= 6 && S < 8 && lead && vs_left <= 1) {  // its last entry below the bound taken: none\n"
     "      g_vsum[bucket] = make_uint4(kVsumNone, kVsumNone, 0u, 0u);\n"
     "      T30_ADD(2);\n"
     "    }\n"
     "    if (S >= 6 && lead && vs_ok) T30_ADD(1);\n"
     "    if (S < 6 && !vs_ok) sc = scan_bucket(tile, t, base, d4);\n"),
    ("  if ((p_op.mode >> kUpsertModeLabShift) == 4)\n    launch_upsert_kernel(",
     "  if ((p_op.mode >> kUpsertModeLabShift) == 12)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 8>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 11)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 7>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 10)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 6>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 4)\n    launch_upsert_kernel("),
    # lab 12 (S = 8): the digest chunks loaded before the lock, the guessed victim claimed in the scan's round trip
    ("  if ((S >= 2 && S <= 4 || S >= 6) && t.bucket_capacity == 128) vs = __ldcg(g_vsum + bucket);\n",
     "  if ((S >= 2 && S <= 4 || S >= 6) && t.bucket_capacity == 128) vs = __ldcg(g_vsum + bucket);\n"
     "  uint4 pc0 = make_uint4(0u, 0u, 0u, 0u), pc1 = pc0;  // S = 8: the digest chunks before the lock\n"
     "  if (S == 8) {\n"
     "    pc0 = load_digests(t.digests, base, static_cast<int>(tile.thread_rank()), true);\n"
     "    pc1 = load_digests(t.digests, base, static_cast<int>(tile.thread_rank()) + kTile, true);\n"
     "  }\n"),
    ("  while (true) {\n    BucketScan sc;\n    int vs_left = 0;\n",
     "  bool first = true;\n"
     "  while (true) {\n    BucketScan sc;\n    int vs_left = 0;\n"
     "    const bool claim_now = first;\n"
     "    first = false;\n"
     "    int guess = -1, ej0 = -1, nxt = -1;\n"
     "    uint64_t e_old = kLockedKey, ek0 = 0;\n"
     "    const uint64_t look_pre = S == 8 ? static_cast<uint64_t>(match16(pc0, d4)) |\n"
     "                                           (static_cast<uint64_t>(match16(pc1, d4)) << 16) : 0ull;\n"
     "    const bool early = S == 8 && claim_now && vs.x != kVsumNone && (vs.w & kVsumNext) != 0;\n"),
    ("    const bool vs_ok = S == 5 ? vs16_scan(",
     "    const bool vs_ok = S == 8 ? vs.x != kVsumNone && vsum_scan_early(tile, t, base, d4, vs, look_pre, early, sc,\n"
     "                                                                      vs_left, nxt, guess, e_old, ek0, ej0)\n"
     "                     : S == 5 ? vs16_scan("),
    ("    const bool exact = big || m.tie;\n",
     "    const bool exact = big || m.tie;\n"
     "    // S = 8: the claim made with the scan is kept when the least is the guess and the digests did not change\n"
     "    const bool fast = S == 8 && early && vs_ok && !refuse && !exact && m.idx == guess &&\n"
     "                      tile.all(sc.look == look_pre);\n"
     "    if (S == 8 && early && !fast && lead && e_old != kLockedKey) publish_key(t.keys, base + guess, e_old);\n"
     "    if (S == 8 && fast && lead) T30_ADD(4);\n"),
    ("      k0 = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + base + look_slot(tile, j0));\n",
     "      k0 = (S == 8 && fast) ? ek0\n"
     "                            : __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + base + look_slot(tile, j0));\n"),
    ("    if (spec && lead) old = lock_victim(t.keys, victim);\n",
     "    if (spec && lead) old = (S == 8 && fast) ? e_old : lock_victim(t.keys, victim);\n"),
    # lab 13: L6 (S = 4) with the flagged buckets listed and the list refreshed (self_summary.cuh)
    ("      vsum_mark_stale(bucket, vs);\n",
     "      vsum_mark_stale(bucket, vs);\n      if (g_vlist_on) vlist_append(t, bucket);\n      T30_ADD(2);\n"),
    ("  else if ((p_op.mode >> kUpsertModeLabShift) == 6 || (p_op.mode >> kUpsertModeLabShift) == 7)\n",
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 6 || (p_op.mode >> kUpsertModeLabShift) == 7 ||\n"
     "           (p_op.mode >> kUpsertModeLabShift) == 13)\n"),
    ("  if ((p_op.mode >> kUpsertModeLabShift) == 8) {  // the flagged 16-entry summaries rebuilt\n",
     "  if ((p_op.mode >> kUpsertModeLabShift) == 13) {  // the listed buckets' summaries rebuilt\n"
     "    vsum_refresh_list_launch(p.t, s);\n"
     "    check_launch(\"vsum_refresh_list\");\n"
     "    DYNAMICEMB_TABLE_PHASE_HOOK(s);\n"
     "  }\n"
     "  if ((p_op.mode >> kUpsertModeLabShift) == 8) {  // the flagged 16-entry summaries rebuilt\n"),
])
# labs 14-17: lab 13 with the cheaper rebuild (vsum_build_fast; 16: flagged at the last entry, 17: 3 buckets
# prefetched ahead in the refresh); 15 (S = 9) adds lab 12's early claim to 14
# (no self scan: the fallback is main's scan, the flags as S = 4; the next guess kept in w beside the stale bit)
patch("dynamicemb/csrc/table/table_kernels.cuh", [
    ("  if (S == 8) {\n    pc0 = load_digests", "  if (s_early(S)) {\n    pc0 = load_digests"),
    ("    const uint64_t look_pre = S == 8 ?", "    const uint64_t look_pre = s_early(S) ?"),
    ("    const bool early = S == 8 && claim_now && vs.x != kVsumNone && (vs.w & kVsumNext) != 0;\n",
     "    const bool early = s_early(S) && claim_now && vs.x != kVsumNone && (S == 9 || (vs.w & kVsumNext) != 0);\n"),
    ("    const bool vs_ok = S == 8 ? vs.x", "    const bool vs_ok = s_early(S) ? vs.x"),
    ("    if (S >= 6 && !vs_ok) {  // the full scan", "    if (s_self(S) && !vs_ok) {  // the full scan"),
    ("    if (S < 6 && !vs_ok) sc = scan_bucket(", "    if (!s_self(S) && !vs_ok) sc = scan_bucket("),
    ("    if (S == 4 && lead && (!vs_ok || vs_left <= kVsumRefreshAt)",
     "    if (s_flag(S) && lead && (!vs_ok || vs_left <= (g_vlist_on ? g_vsum_refresh_at : kVsumRefreshAt))"),
    ("      vs.w |= kVsumStale;\n    }\n",
     "      vs.w |= kVsumStale;\n    }\n"
     "    if (S == 9 && lead && vs_ok && nxt >= 0)  // the next guess (the stale flag kept)\n"
     "      reinterpret_cast<uint32_t*>(g_vsum + bucket)[3] = (vs.w & kVsumStale) | kVsumNext | static_cast<uint32_t>(nxt);\n"),
    ("    const bool fast = S == 8 && early", "    const bool fast = s_early(S) && early"),
    ("    if (S == 8 && early && !fast && lead", "    if (s_early(S) && early && !fast && lead"),
    ("    if (S == 8 && fast && lead) T30_ADD(4);", "    if (s_early(S) && fast && lead) T30_ADD(4);"),
    ("      k0 = (S == 8 && fast) ? ek0", "      k0 = (s_early(S) && fast) ? ek0"),
    ("old = (S == 8 && fast) ? e_old : lock_victim", "old = (s_early(S) && fast) ? e_old : lock_victim"),
    ("           (p_op.mode >> kUpsertModeLabShift) == 13)\n",
     "           ((p_op.mode >> kUpsertModeLabShift) >= 13 && (p_op.mode >> kUpsertModeLabShift) <= 17 &&\n"
     "            (p_op.mode >> kUpsertModeLabShift) != 15))\n"),
    ("  if ((p_op.mode >> kUpsertModeLabShift) == 12)\n",
     "  if ((p_op.mode >> kUpsertModeLabShift) == 15)\n"
     "    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic, 9>, grid, kBlock, s, p);\n"
     "  else if ((p_op.mode >> kUpsertModeLabShift) == 12)\n"),
    ("  if ((p_op.mode >> kUpsertModeLabShift) == 13) {  // the listed buckets' summaries rebuilt\n"
     "    vsum_refresh_list_launch(p.t, s);\n",
     "  if ((p_op.mode >> kUpsertModeLabShift) >= 13 && (p_op.mode >> kUpsertModeLabShift) <= 17) {  // the listed\n"
     "    const int lab = p_op.mode >> kUpsertModeLabShift;  // buckets' summaries rebuilt\n"
     "    vsum_refresh_list_launch(p.t, s, lab == 13 ? 0 : lab == 17 ? 2 : 1);\n"),
])
patch("tools/dynamicemb_dev/evict_bench.cu", [
    ("        lab_prepare(labs[li], t, s);\n",
     "        t30_report();\n        lab_prepare(labs[li], t, s);\n        t30_list_prepare(labs[li], t, s);\n"),
    ("        p.mode = kFindOrInsert | (warm_lab << kUpsertModeLabShift);\n",
     "        p.mode = kFindOrInsert | ((warm_lab >= 13 && (w == 0 || warm_lab == 13 || warm_lab == 15) ? 6 : warm_lab)\n"
     "                                  << kUpsertModeLabShift);  // 13, 15: L6's; 14, 16, 17: L6's first, then their own\n"
     "        t30_list_prepare(p.mode >> kUpsertModeLabShift, t, s);\n"),
])
patch("tools/dynamicemb_dev/table29_run/victim_summary.cuh", [
    ("  if (lab == 6 || lab == 7) {", "  if (lab == 6 || lab == 7 || (lab >= 10 && lab <= 17)) {"),
])
print("lab tree 30:", dst)
