# peer35's device setup (sourced by its run scripts, from the root of main's tree on the device): main's hstu_attn
# wheel only (peer35 changes no kernel: no wheel of its own, so not carry_setup.sh, which installs one) into
# $SITE; the peer module (NVIDIA's Ampere HSTU, tools/peer/build_nvidia_ampere_hstu.sh) is carried in $C/peer.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_peer35}
mkdir -p "$OUT"
C=$R/.carry/peer35
SITE=/tmp/site_peer35_main
rm -rf $SITE && python3 -m pip install -q --no-deps --no-index --no-compile --target $SITE \
  $R/.carry/main35/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
# bench PEER TIMEOUT LABEL [ARGS...]: issue 39's portable sweep, ours (main's wheel, --kernels portable) against PEER
# interleaved in one process, from the carried tree (the branch's benchmark: eight shapes, --case), to $OUT/LABEL.log
bench() {
  local peer=$1 t=$2 label=$3
  shift 3
  (cd $C/tree && PYTHONPATH=$SITE:$C/peer timeout $t python3 -P benchmarks/hstu_attention.py --kernels portable \
    --sweep portable --no-ref --peer $peer --reps 10 --cooldown 0.3 "$@") > $OUT/$label.log 2>&1
  echo "$label rc $? ($SECONDS s)"
}
# digest LABEL [diff]: the case lines (ours, the peer, ours/peer fwd bwd); with diff the table's last column (the
# nvidia-ampere peer's max |ours - peer| / max |ours|; FA2's table has none)
digest() {
  grep -E "^portable|Error|error" $OUT/$1.log | cut -c1-200 | sed 's/  */ /g'
  [ "${2:-}" = diff ] && grep -E "^\| portable" $OUT/$1.log | awk -F'|' '{print "  diff", $3, $(NF-1)}' | head -8
  return 0
}
