"""Writes phases.sh for run K's sass_phases.py calls: PH_FIRST, the first pass's phases as --phase arguments with the
line numbers of this tree's table_kernels.cuh (found by anchors, so that they follow edits); PH_INSERT empty (the
insert pass by its innermost source lines)."""
import sys

src = open(sys.argv[1]).read().splitlines()


def find(text, start=0):
    for j in range(start, len(src)):
        if text in src[j]:
            return j + 1  # 1-based
    raise SystemExit("anchor not found: " + text)


k = find("    upsert_main_kernel(UpsertParams p) {")
ph = [
    ("prologue", k, find("Tile tile = cg::tiled_partition<kTile>", k) - 1),
    ("home", find("const KeyHome h = home_of(t, key);", k), find("const KeyHome h = home_of(t, key);", k)),
    ("probe", find("slot = kCopier", k), find(": probe_concurrent<false, kRounds>", k)),
    ("meet", find("if (kMeet) __syncwarp(probe_lanes);", k), find("if (kMeet) __syncwarp(probe_lanes);", k)),
    ("hit_prefetch", find("if (hit && mode == kFindOrInsert && p.values_out && !deferred(slot))", k),
     find("if (hit && mode == kFindOrInsert && p.values_out && !deferred(slot))", k) + 1),
    ("claim", find("if (locking || inserting) {", k), find("full = inserting && target < 0;", k)),
    ("fill", find("if (owner) {", k), find("stat = hit ? kStatAssigned : kStatInserted;", k)),
    ("hit_copy", find("} else if (hit && reads_only) {", k),
     find("stat = kStatAssigned;", find("} else if (hit && reads_only) {", k))),
    ("outputs", find("if (!defer) {", k), find("p.host.ops[i] = host_rw >= 0", k) + 1),
    ("queue", find("// Queue the deferred keys", k), find("flush_stats(p, s_stats);", k) - 1),
    ("flush", find("flush_stats(p, s_stats);", k), find("flush_stats(p, s_stats);", k)),
]
args = " ".join("--phase %s=table_kernels.cuh:%d-%d" % p for p in ph)
print('PH_FIRST="%s"' % args)
print('PH_INSERT=""')
