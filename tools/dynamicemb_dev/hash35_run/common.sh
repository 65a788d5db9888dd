# Sourced by hash35's runK.sh (copied with them into .carry/hash35/; run from main's tree root on the device):
# the run's clock against its budget B, the GPU line, and the helpers
#   eb NAME TIMEOUT ARGS...       one evict_bench process ($EB, default eb_lab; ARGS as evict_bench's), output in
#                                 $OUT/NAME.txt
#   ncu_mem KERNELS COUNT LABS    ncu of the first COUNT kernels matching KERNELS (one rep per op at 2^24 slots, 256K
#                                 keys, lab values LABS): time, instructions and the DRAM / L2 traffic by kind, then
#                                 a table of them (bytes per key are computed in the notes)
#   digest NAME...                the op lines of $OUT/NAME.txt, shortened, and the run's total time
C=.carry/hash35
mkdir -p "$OUT"
t0=$(date +%s); B=50
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
chmod +x $C/eb_* 2>/dev/null
eb() {
  local name=$1 to=$2
  shift 2
  echo "## $name"
  timeout $to $C/${EB:-eb_lab} "$@" 2>&1 | tee $OUT/$name.txt | grep -v "^keys"
}
ncu_mem() {
  echo "timing: $(( $(date +%s) - t0 )) s"
  local l=$(left)
  [ $l -ge 8 ] || return 0
  local NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  local M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
  M=$M,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum
  M=$M,lts__t_sector_op_read_hit_rate.pct,lts__t_sector_op_write_hit_rate.pct
  M=$M,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:$1" -c $2 \
    --metrics $M --csv --page raw $C/${NCU_BIN:-eb_lab} 24 18 1 ncu ${NCU_DIST:-uniform} 1 - $3 \
    > $OUT/ncu${NCU_TAG:-}.csv 2> $OUT/ncu${NCU_TAG:-}.err
  echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
  python3 - "$OUT/ncu${NCU_TAG:-}.csv" <<'PY' || true
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
rows = list(csv.reader(lines[start[0]:])) if start else []
if len(rows) > 2:
    h = rows[0]
    short = {"gpu__time_duration.sum": "us", "smsp__inst_executed.sum": "winst", "dram__bytes_read.sum": "dram_rd",
             "dram__bytes_write.sum": "dram_wr", "lts__t_sectors_op_read.sum": "l2_rd_sec",
             "lts__t_sectors_op_write.sum": "l2_wr_sec", "lts__t_sectors_op_atom.sum": "l2_atom_sec",
             "lts__t_sectors_op_red.sum": "l2_red_sec", "lts__t_sector_op_read_hit_rate.pct": "l2_rd_hit%",
             "lts__t_sector_op_write_hit_rate.pct": "l2_wr_hit%",
             "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local_ld",
             "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local_st"}
    ki = h.index("Kernel Name")
    cols = [(h.index(k), v) for k, v in short.items() if k in h]
    print("| kernel | " + " | ".join(v for _, v in cols) + " |")
    for r in rows[2:]:
        print("| " + r[ki][:40] + " | " + " | ".join(r[i][:14] for i, _ in cols) + " |")
PY
  gzip -f $OUT/ncu${NCU_TAG:-}.csv 2>/dev/null
}
digest() {
  echo "## digest"
  local f files=()
  for f in "$@"; do files+=("$OUT/$f.txt"); done
  grep -h "^find_or_insert\|^insert_or_assign\|^insert_and_evict\|^assign\|^filled" \
    "${files[@]}" | awk '/^filled/ {print; next}
      {o = $1 " " $2 " total " $4 " " $6 ")"
       for (i = 7; i < NF; ++i) if ($i ~ /^(first|insert|pending|table|evicted)$/) o = o " " $i " " $(i + 1)
       print o}'
  echo "total: $(( $(date +%s) - t0 )) s"
}
