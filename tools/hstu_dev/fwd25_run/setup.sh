# fwd25 run scripts' setup, sourced by run.sh from the root of main's tree: fwd21's (tools/hstu_dev/fwd21_run/
# setup.sh, carried as fwd21_setup.sh) for the branch fwd25 against main22b's wheel; J = fwd24_bench.py (in jag/).
NAME=fwd25 BASE=main22b
T=tests/hstu/test_sm80_forward_gpu.py  # (the tests' file)
for f in "$(dirname "${BASH_SOURCE[0]}")"/fwd21_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../fwd21_run/setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/jag/fwd24_bench.py
digest_time() {
  echo "#### time (main22b = main 37b3e7d's wheel; fwd25 = the branch's; own processes main, fwd25, main, fwd25;"
  echo "#### sm90=False; cfg 0 = the default (fwd25: tile 0's helpers), cfg 5 = fwd25's candidate 5 (main's default)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
