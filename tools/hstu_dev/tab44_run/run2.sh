#!/bin/bash
# tab44 (issue 39, session 41), run 2 (<= 80 s), from the tree's root:
#   OUT=/tmp/out_tab44 timeout 85 bash .carry/i39/run2.sh
# (carry: pack.sh DEST WHEEL PEER_SO OLD_WHEEL: OLD_WHEEL = main 9ce5c6b3's, the wheel of session 36's table)
# 1. t44.py prof at the table's weakest cells (B256 S256 D256: forward 1.04-1.05x FA2, backward 1.08x the peer;
#    B128 S1K D128: backward 1.06x FA2, 1.11-1.13x the peer): ours (main, claim = fwd_sm80_cfg=13) / FA2 / the peer
#    interleaved in one process, then every call's kernels (torch.profiler, one call)
# 2. Is the D = 256 backward slower than session 36's (run 1: ours +4-11 % in ms at the short D = 256 shapes, the
#    peer +1-4 %)? t39.py `table` with main 037e70d6's wheel and with 9ce5c6b3's, alternating processes (new, old,
#    new, old), FA2 and the peer in each as the anchors.
LIM=${LIM:-80}
source "$(dirname "$0")/setup.sh"
for _x in $C/whl_old/*.whl.xz; do [ -f "$_x" ] || continue; python3 $C/xzwheel.py unpack $_x ${_x%.xz} && rm -f $_x; done
OLD=
if ls $C/whl_old/hstu_attn-*.whl > /dev/null 2>&1; then
  rm -rf /tmp/site_old && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_old \
      $C/whl_old/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
  [ -d /tmp/site_old/hstu_attn ] && OLD=/tmp/site_old
fi
echo "== 1. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME:$PEER timeout 32 python3 -P $C/t44.py prof --bench $BENCH --variants main claim $PEER_ARG \
    --reps 10 --shapes B256:S256:D256 B128:S1024:D128 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. new / old ($SECONDS s)"
AB="B256:S256:D256 B128:S1024:D256 B16:S4096:D256 B16:S4096:D128"
for r in 1 2; do
  for w in new old; do
    site=/tmp/site_$NAME
    if [ $w = old ]; then site=$OLD; fi
    [ -n "$site" ] || continue
    t=$(( $(left) - 3 < 14 ? $(left) - 3 : 14 ))
    [ $t -gt 6 ] || { echo "no time left for $w $r"; continue; }
    PYTHONPATH=$site:$PEER timeout $t python3 -P $T39 table --bench $BENCH --variants main $PEER_ARG --reps 10 \
        --shapes $AB > $OUT/ab_${w}$r.log 2>&1
    echo "rc $? ($w $r, $SECONDS s)"
  done
done
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### 1. prof: ms, claim / main, FA2 / main and peer / main (> 1: ours faster)"
grep -hE "^(FWD|BWD)" $OUT/prof.log | sed 's/ | at .*//' | cut -c1-220
grep -E "^####|^ " $OUT/prof.log | grep -v "^#### prof (" | awk '/^####/{n=0} {n++; if (n <= 6) print}' | cut -c1-150
grep -hE "peer n/a|no peer|Error|Traceback" $OUT/prof.log | head -3
echo "#### 2. ours ms (new = main 037e70d6, old = 9ce5c6b3), FA2 and peer ms; bwd"
for f in $OUT/ab_*.log; do
  [ -f $f ] || continue
  echo "-- $(basename $f .log)"
  grep "^TABLE" $f | sed -E 's/^TABLE +//; s/ \| fa2\/ours.*//' | cut -c1-160
  grep -hE "Error|Traceback" $f | head -2
done
