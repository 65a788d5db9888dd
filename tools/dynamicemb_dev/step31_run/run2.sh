#!/bin/bash
# step31 run 2 (issue 35): the branch's wheel (Adam's step counter in the update by default, now with only the
# step's load before the block's barrier). GPU tests (one process): Adam's kernels against the CPU path (pooling
# none / sum / mean, 4-wide and scalar rows), the dedup variants bitwise (rows and Adam state over four steps), the
# step counter in the update against the add. The byte-bound probe with Adam's fused update in unique order and in
# row-address order. steady_ab.py, Adam, "-" against "-@b0". Last, ncu of one Adam step's update with the access
# metrics (sectors per request, L2 misses from the SMs).
B=48
RUN=step31
. .carry/step31/setup.sh
timeout 14 $PT $T -k "(kernels_match_cpu_path and adam and not adamw) or (gpu_matches_cpu and adam) or dedup_insert_variants_agree or step_counter_in_update" > $OUT/t_adam.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_adam: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/t_adam.txt | tail -1)"
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout 9 $C/bin/step_bound_probe 6 > $OUT/probe.txt 2>&1
grep "Adam\|copy\|uniques with" $OUT/probe.txt
timeout 14 python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam --timeline \
  --variants=-,-@b0 --rounds 2 --reps 12 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | grep -v "Memset\|side \|cub::" | head -40
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__registers_per_thread
MET=$MET,dram__throughput.avg.pct_of_peak_sustained_elapsed
MET=$MET,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
MET=$MET,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
MET=$MET,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
MET=$MET,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum
timeout $(left) ncu --profile-from-start off --print-units base --csv --page raw -k regex:"seg_apply|sequence_kernel" \
  --metrics $MET python3 -P $C/tree/tools/dynamicemb_dev/step_ncu.py --bench benchmarks --opt adam > $OUT/ncu.csv 2> $OUT/ncu_err.txt
echo "ncu rc $?"; tail -3 $OUT/ncu_err.txt
python3 $C/tree/tools/dynamicemb_dev/step_ncu.py --table $OUT/ncu.csv --tbs 4.27
echo "total: $(( $(date +%s) - t0 )) s"
