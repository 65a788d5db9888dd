# The device step of the FP8 backward helpers' run scripts (fp8b23_run/runs.sh, fp8b24_run/runs.sh), sourced after
# carry_setup.sh with N, NAME, T (the driver's seconds) and BENCH (benchmarks/hstu_fp8_bwd.py's arguments) set: one
# process (fp8b21's drive.py) runs the whole tests/hstu/test_fp8_bwd.py, then the random-order benchmark
# (--no-dequant); prints pytest's summary, the tables and the GPU's clock after.
echo "GPU: $GPU, run $N ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $T python3 -P tools/drive.py --tests-first --no-dequant $BENCH \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-460
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
