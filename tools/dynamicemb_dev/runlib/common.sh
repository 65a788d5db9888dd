# The shared device-run library of the tools/dynamicemb_dev/*_run folders (runlib/pack.sh copies it into the carry
# folder .carry/NAME/ beside the folder's run.conf and runK.sh; runK.sh runs from the root of main's tree on the
# device and sources it: `. .carry/NAME/common.sh`). Sets C (the carry folder, absolute), NAME (its name), R (main's
# tree), OUT, t0 / B / left (the run's clock against its budget of B seconds, default 50), prints the GPU line, unpacks
# the carried lab binaries (eb_lab.gz = evict_bench.cu, ab_lab.gz = assign_bench.cu) into /tmp/NAME_bin (EB, AB) and
# defines
#   eb NAME TIMEOUT ARGS...     one evict_bench process (ARGS as evict_bench's), output in $OUT/NAME.txt
#   ab NAME TIMEOUT ARGS...     one assign_bench process (ARGS as assign_bench's), output in $OUT/NAME.txt, echoed
#   ncu_raw TAG LABS COUNT      ncu of evict_bench's first COUNT insert-pass kernels (2^NCU_CAP slots, default 26,
#                               1M uniform keys, one rep per op, lab values LABS interleaved): time, instructions,
#                               DRAM / L2 / L1 requests and sectors, occupancy, issue (NCU_RAW_MORE=1: + all-source
#                               L2 requests, tag lookups and sectors); csv in $OUT/ncu_TAG.csv.gz
#   ncu_units TAG LABS COUNT    the same kernels: every unit's throughput in % of its peak (ncu's breakdown of
#                               gpu__compute_memory_throughput) and the warp stall reasons; the 14 busiest units and
#                               the 8 largest stalls per kernel
#   ncu_ab TAG VARIANTS [KEYS]  ncu of assign_bench's assign kernels (main's first pass and/or assign_lru_kernel) at
#                               load 1.0, 2^24 slots: time, DRAM bytes, occupancy, issue, L2 atomics, stall reasons
#   digest NAME...              each op's insert pass per lab value (evict_bench output) and its ratio to the first
#                               lab value listed
# run.conf (the folder's, sourced first) may set B, BASE / SITES for setup.sh and NCU_RAW_MORE.
C=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=$(basename "$C")
R=$PWD
OUT=${OUT:-/tmp/o_$NAME}
[ -f "$C/run.conf" ] && . "$C/run.conf"
mkdir -p "$OUT"
t0=$(date +%s); B=${B:-50}
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
elapsed() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
# Lab binaries travel gzipped (the carry's share of 64 MiB).
BIN=/tmp/${NAME}_bin
mkdir -p $BIN
for z in "$C"/*.gz; do
  [ -f "$z" ] || continue
  gunzip -c "$z" > "$BIN/$(basename "$z" .gz)" && chmod +x "$BIN/$(basename "$z" .gz)"
done
EB=$BIN/eb_lab AB=$BIN/ab_lab
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
eb() {
  local name=$1 to=$2
  shift 2
  echo "## $name ($(elapsed) s)"
  timeout $to $EB "$@" > $OUT/$name.txt 2>&1
  grep "^filled" $OUT/$name.txt | head -3
}
ab() {
  local name=$1 to=$2
  shift 2
  echo "## $name ($(elapsed) s)"
  timeout $to $AB "$@" > $OUT/$name.txt 2>&1
  echo "rc $?"
  cut -c1-170 $OUT/$name.txt
}
# ncu_table CSV MODE: ncu's raw page as a table; MODE raw (chosen columns), units (top pct columns and stalls) or ab
ncu_table() {
  python3 - "$1" "$2" <<'PY' || true
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
rows = list(csv.reader(lines[start[0]:])) if start else []
if len(rows) < 3:
    print("no ncu rows"); sys.exit(0)
h = rows[0]
ki = h.index("Kernel Name")
def kname(r):  # row number and the kernel's template arguments (lab values 1 and 9 share a kernel: the order tells)
    n = r[ki]
    return "%d %s" % (rows.index(r) - 2, n[n.find("<"):n.find(">") + 1] if "<" in n else n[:30])
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return None
def stalls(r, top):
    st = [(num(r[i]), h[i]) for i in range(len(h)) if "issue_stalled" in h[i] and h[i].endswith(".ratio")
          and num(r[i]) is not None]
    st.sort(reverse=True)
    return "  stalls: " + ", ".join("%s %.2f" % (n.replace("smsp__average_warps_issue_stalled_", "")
                                              .replace("_per_issue_active.ratio", ""), v) for v, n in st[:top])
if sys.argv[2] == "raw":
    short = {"gpu__time_duration.sum": "us", "smsp__inst_executed.sum": "winst", "dram__bytes_read.sum": "dram_rd",
             "dram__bytes_write.sum": "dram_wr", "lts__t_requests_srcunit_tex_op_read.sum": "l2_rd_req",
             "lts__t_sectors_srcunit_tex_op_read.sum": "l2_rd_sec", "lts__t_sectors_op_atom.sum": "l2_atom_sec",
             "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "l1_ld_req",
             "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "l1_ld_sec",
             "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
             "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
             "lts__t_requests.sum": "l2_req_all", "lts__t_tag_requests.sum": "l2_tag_req",
             "lts__t_sectors.sum": "l2_sec_all"}
    cols = [(h.index(k), v) for k, v in short.items() if k in h]
    print("| kernel | " + " | ".join(v for _, v in cols) + " |")
    for r in rows[2:]:
        print("| " + kname(r) + " | " + " | ".join(r[i][:12] for i, _ in cols) + " |")
elif sys.argv[2] == "units":
    for r in rows[2:]:
        pct = [(num(r[i]), h[i]) for i in range(len(h)) if "pct_of_peak" in h[i] and num(r[i]) is not None]
        pct.sort(reverse=True)
        print(kname(r) + ": " + ", ".join("%s %.1f" % (n.replace(".avg.pct_of_peak_sustained_elapsed", "")
                                                     .replace(".sum.pct_of_peak_sustained_elapsed", ""), v)
                                            for v, n in pct[:14]))
        print(stalls(r, 8))
else:
    short = {"gpu__time_duration.sum": "us", "smsp__inst_executed.sum": "winst", "dram__bytes_read.sum": "dram_rd",
             "dram__bytes_write.sum": "dram_wr", "lts__t_sectors_op_atom.sum": "atom_sec",
             "lts__t_sectors_op_red.sum": "red_sec", "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
             "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%", "launch__registers_per_thread": "regs",
             "launch__occupancy_limit_registers": "blk/SM(regs)"}
    for r in rows[2:]:
        n = r[ki]
        print("# " + n[:n.find("(")][-60:] + ": " + ", ".join("%s %s" % (v, r[h.index(k)][:10])
                                                              for k, v in short.items() if k in h))
        print(stalls(r, 9))
PY
}
ncu_raw() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_raw $1 skipped ($l s left, ncu '$NCU')"; return 0; }
  local M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
  M=$M,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_atom.sum
  M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
  M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
  [ "${NCU_RAW_MORE:-0}" = 1 ] && M=$M,lts__t_requests.sum,lts__t_tag_requests.sum,lts__t_sectors.sum
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert" -c $3 \
    --metrics $M --csv --page raw $EB ${NCU_CAP:-26} 20 1 ncu uniform 1 - $2 > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_raw $1 rc $? ($(elapsed) s)"
  ncu_table $OUT/ncu_$1.csv raw
  gzip -f $OUT/ncu_$1.csv
}
ncu_units() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_units $1 skipped ($l s left)"; return 0; }
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert" -c $3 \
    --section WarpStateStats --metrics breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed \
    --csv --page raw $EB ${NCU_CAP:-26} 20 1 ncu uniform 1 - $2 > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_units $1 rc $? ($(elapsed) s)"
  ncu_table $OUT/ncu_$1.csv units
  gzip -f $OUT/ncu_$1.csv
}
ncu_ab() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_ab $1 skipped ($l s left, ncu '$NCU')"; return 0; }
  local M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
  M=$M,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main|assign_lru" -c 4 \
    --section WarpStateStats --metrics $M --csv --page raw $AB 24 1 ncu ${3:-uniform} 1 32 $2 \
    > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_ab $1 rc $? ($(elapsed) s)"
  ncu_table $OUT/ncu_$1.csv ab
  gzip -f $OUT/ncu_$1.csv
}
digest() {
  echo "## digest (insert pass us, ratio to the first lab value; total us; checksums)"
  local f
  for f in "$@"; do
    echo "# $f"
    awk '/^(find_or_insert|insert_or_assign|insert_and_evict) / {
           ins = ""; for (i = 1; i < NF; ++i) if ($i == "insert") ins = $(i + 1)
           for (i = 1; i < NF; ++i) { if ($i == "table") tb = substr($(i + 1), 1, 8); if ($i == "evicted") ev = substr($(i + 1), 1, 8) }
           if (!($1 in base)) base[$1] = ins
           printf "%s %s ins %s (%.3f) tot %s %s/%s\n", substr($1, 1, 16), $2, ins, (base[$1] > 0 ? ins / base[$1] : 0), $4, tb, ev }
         /^filled/ { delete base; print }' $OUT/$f.txt
  done
  echo "total: $(elapsed) s"
}
RUNLIB_COMMON=1
