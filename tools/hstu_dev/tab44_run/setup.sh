# tab44's run scripts' common part (issue 39, session 41), sourced from the root of the tree on the device: main's
# wheel unpacked from its xz (bwd41_run/xzwheel.py), then runlib's common.sh (OUT, R, C, the wheel in /tmp/site_i39,
# GPU, left), T39 (bwdfa39_run's timer with runlib's bwdtime.py), BENCH (the benchmark of main 037e70d6 carried
# beside them, so that the timed harness is the wheel's commit's whatever tree the device gets), PEER (NVIDIA's Ampere
# HSTU module, rebuilt for this run by tools/peer/build_nvidia_ampere_hstu.sh; absent: the table without the peer).
NAME=i39 BASE= LIM=${LIM:-125}
_d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$_d/common.sh" > /tmp/i39_setup.log 2>&1
grep -iE "error|warn" /tmp/i39_setup.log | grep -v "$C/whl" | head -3
T39=$C/t39.py
BENCH=$C/bench
PEER=$C/peer
PEER_ARG=--peer
ls $PEER/hstu_attn_2_cuda*.so > /dev/null 2>&1 || { PEER=/nonexistent; PEER_ARG=; echo "(no peer module carried)"; }
