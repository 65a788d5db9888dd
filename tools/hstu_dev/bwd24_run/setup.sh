# bwd24's run scripts' common part, sourced from the root of main's tree on the device: bwd15's setup (setup15.sh in
# the carry folder: strict mode, OUT, C, left(), the branch's wheel in /tmp/site_bwd24 (main22's where the carry
# folder has none) and main22's in /tmp/site_bwd24_main, GPU, TF, TK, gpu_tests), bwd22's digest, then PP / PM (those
# sites + the NVIDIA Ampere peer's module, .carry/peer), B21 (bwd21.py's timer) and P24 (prof24.py, kernel times).
NAME=bwd24 MAIN=main22
S15="$(dirname "${BASH_SOURCE[0]}")/setup15.sh"
[ -f "$S15" ] || S15="$(dirname "${BASH_SOURCE[0]}")/../bwd15_run/setup.sh"
source "$S15"
[ -d /tmp/site_$NAME/hstu_attn ] || { rm -rf /tmp/site_$NAME; cp -r /tmp/site_${NAME}_main /tmp/site_$NAME; }
PP=/tmp/site_$NAME:$R/.carry/peer
PM=/tmp/site_${NAME}_main:$R/.carry/peer
B21=$R/tools/hstu_dev/bwd21_run/bwd21.py
P24=$C/prof24.py
digest() {
  echo
  echo "################ DIGEST ($GPU; done at $SECONDS s)"
  echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | cut -c1-160 | tail -12
  echo "#### kernels (us a backward)"
  grep -E "^\||rror" $OUT/prof.log | cut -c1-200
  echo "#### time (ms; $1)"
  cut -c1-250 $OUT/time.log
}
# time_vs_main SECS MAIN_SECS SHAPE...: bwd21.py's timer, the branch's default / FA2 / the peer in interleaved rounds
# (SECS), then $MAIN's wheel in its own process (at most MAIN_SECS), into $OUT/time.log.
time_vs_main() {
  local secs=$1 msecs=$2
  shift 2
  PYTHONPATH=$PP timeout $secs python3 -P $B21 time --label $NAME --cfgs 0 --reps 5 --impls ours fa2 peer \
      --shapes "$@" > $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
  PYTHONPATH=$PM timeout $(( $(left) > msecs ? msecs : $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time \
      --label $MAIN --cfgs 0 --reps 5 --impls ours --shapes "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
