# Sourced by hash38's runK.sh (hash37_run's common.sh + ncu's all-source L2 requests and tag lookups; copied with them
# into .carry/hash38/; run from main's tree root on the device): the
# run's clock against its budget B, the GPU line, and the helpers
#   eb NAME TIMEOUT ARGS...     one evict_bench process (ARGS as evict_bench's), output in $OUT/NAME.txt
#   ncu_raw TAG LABS COUNT      ncu of the first COUNT insert-pass kernels (2^26 slots, 1M uniform keys, one rep per op,
#                               lab values LABS interleaved): time, instructions, DRAM / L2 / L1 requests and sectors,
#                               occupancy and issue activity; a table in stdout, the csv in $OUT/ncu_TAG.csv.gz
#   ncu_units TAG LABS COUNT    the same kernels: every unit's throughput in % of its peak (ncu's breakdown of
#                               gpu__compute_memory_throughput) and the warp stall reasons (WarpStateStats); the 14
#                               busiest units and the 8 largest stalls per kernel
#   digest NAME...              each op's insert pass per lab value and its ratio to the first lab value listed
C=.carry/hash38
mkdir -p "$OUT"
t0=$(date +%s); B=${B:-50}
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
# eb_lab travels gzipped (the carry's share of 64 MiB); unpacked into /tmp
EB=/tmp/hash38_eb_lab
[ -f $C/eb_lab.gz ] && gunzip -c $C/eb_lab.gz > $EB && chmod +x $EB
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
eb() {
  local name=$1 to=$2
  shift 2
  echo "## $name ($(( $(date +%s) - t0 )) s)"
  timeout $to $EB "$@" > $OUT/$name.txt 2>&1
  grep "^filled" $OUT/$name.txt | head -3
}
ncu_table() {  # ncu_table CSV MODE: the raw page's rows, MODE raw (chosen columns) or units (top pct columns)
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
else:
    for r in rows[2:]:
        pct = [(num(r[i]), h[i]) for i in range(len(h)) if "pct_of_peak" in h[i] and num(r[i]) is not None]
        pct.sort(reverse=True)
        print(kname(r) + ": " + ", ".join("%s %.1f" % (n.replace(".avg.pct_of_peak_sustained_elapsed", "")
                                                     .replace(".sum.pct_of_peak_sustained_elapsed", ""), v)
                                            for v, n in pct[:14]))
        st = [(num(r[i]), h[i]) for i in range(len(h)) if "issue_stalled" in h[i] and h[i].endswith(".ratio")
              and num(r[i]) is not None]
        st.sort(reverse=True)
        print("  stalls: " + ", ".join("%s %.2f" % (n.replace("smsp__average_warps_issue_stalled_", "")
                                                  .replace("_per_issue_active.ratio", ""), v) for v, n in st[:8]))
PY
}
ncu_raw() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_raw $1 skipped ($l s left, ncu '$NCU')"; return 0; }
  local M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
  M=$M,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_atom.sum
  M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
  M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
  M=$M,lts__t_requests.sum,lts__t_tag_requests.sum,lts__t_sectors.sum
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert" -c $3 \
    --metrics $M --csv --page raw $EB ${NCU_CAP:-26} 20 1 ncu uniform 1 - $2 > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_raw $1 rc $? ($(( $(date +%s) - t0 )) s)"
  ncu_table $OUT/ncu_$1.csv raw
  gzip -f $OUT/ncu_$1.csv
}
ncu_units() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_units $1 skipped ($l s left)"; return 0; }
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert" -c $3 \
    --section WarpStateStats --metrics breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed \
    --csv --page raw $EB ${NCU_CAP:-26} 20 1 ncu uniform 1 - $2 > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_units $1 rc $? ($(( $(date +%s) - t0 )) s)"
  ncu_table $OUT/ncu_$1.csv units
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
  echo "total: $(( $(date +%s) - t0 )) s"
}
