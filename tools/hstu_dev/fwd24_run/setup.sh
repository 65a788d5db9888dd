# fwd24 run scripts' setup, sourced by run.sh / run2.sh from the root of main's tree: fwd21's
# (tools/hstu_dev/fwd21_run/setup.sh, carried as fwd21_setup.sh) for the branch fwd24 against main22's wheel;
# J = fwd24_bench.py (carried in jag/ beside fwd17_jag.py and fwd21_bench.py).
NAME=${NAME:-fwd24} BASE=${BASE:-main22}  # (fwd25's setup.sh sets them first)
T=tests/hstu/test_sm80_forward_gpu.py  # (the tests' file)
for f in "$(dirname "${BASH_SOURCE[0]}")"/fwd21_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../fwd21_run/setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/jag/fwd24_bench.py
digest_time() {
  echo "#### time (main22 = main 708f92a's wheel, own process first; fwd24 = the branch's; sm90=False; cfg n ="
  echo "#### fwd_sm80_cfg; peer = NVIDIA's Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
