# fwd25 run scripts' setup, sourced by run.sh from the root of main's tree: fwd24's (carried as fwd24_setup.sh) for
# the branch fwd25 against main22b's wheel, with its own digest_time.
NAME=fwd25 BASE=main22b
for f in "$(dirname "${BASH_SOURCE[0]}")"/fwd24_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../fwd24_run/setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
digest_time() {
  echo "#### time (main22b = main 37b3e7d's wheel; fwd25 = the branch's; own processes main, fwd25, main, fwd25;"
  echo "#### sm90=False; cfg 0 = the default (fwd25: tile 0's helpers), cfg 5 = fwd25's candidate 5 (main's default)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
