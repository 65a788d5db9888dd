#!/bin/bash
# hash38 run 3 (issue 35; the lead's question of 15:25: at load 0.5 / 0.75 the inserting ops are at parity with HKV,
# the widest gap to 2x). A count, no variant: ncu of main's path (lab 3) at load 0.5, every upsert kernel of the three
# inserting ops (begin_op, the first pass upsert_main_kernel, the insert pass): time, warp instructions, L2 requests /
# tag lookups / sectors, DRAM bytes, occupancy, issue; then the units and stalls of the first passes. Per key: / 2^20.
B=24
. .carry/hash38/common.sh
M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_atom.sum
M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
M=$M,lts__t_requests.sum,lts__t_tag_requests.sum,lts__t_sectors.sum
l=$(left)
timeout $(( l - 12 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_(main|insert)" -c 6 \
  --metrics $M --csv --page raw $EB 26 20 1 ncu uniform 0.5 - 3 > $OUT/ncu_half.csv 2> $OUT/ncu_half.err
echo "## ncu raw load 0.5 rc $? ($(( $(date +%s) - t0 )) s)"
ncu_table $OUT/ncu_half.csv raw
l=$(left)
timeout $(( l - 1 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main" -c 3 \
  --section WarpStateStats --metrics breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed \
  --csv --page raw $EB 26 20 1 ncu uniform 0.5 - 3 > $OUT/ncu_half_units.csv 2> $OUT/ncu_half_units.err
echo "## ncu units load 0.5 rc $? ($(( $(date +%s) - t0 )) s)"
ncu_table $OUT/ncu_half_units.csv units
gzip -f $OUT/ncu_half*.csv
echo "total: $(( $(date +%s) - t0 )) s"
