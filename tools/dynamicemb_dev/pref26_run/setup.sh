# Sourced by pref26's run scripts (copied with them into .carry/pref26/, run from the root of main's tree on the
# device): main26's dynamicemb wheel + rocksdict (cp312, carried) in /tmp/site_pref26, this branch's Python files
# laid over it (pref26 changes no C++), the pytest command, `left` (seconds left of the budget $B from $t0).
t0=$(date +%s)
C=.carry/pref26
S=/tmp/site_pref26
OUT=${OUT:-/tmp/out_pref26}
mkdir -p "$OUT"
rm -rf $S
python3 -m pip install -q --no-deps --no-index --no-compile --target $S .carry/main26/whl/dynamicemb-*.whl \
    $C/whl/rocksdict-*.whl
cp $C/tree/dynamicemb/*.py $S/dynamicemb/
export PYTHONPATH=$S
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfE"
TD=$C/tree/tests/dynamicemb
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -1)
echo "GPU: $GPU; rocksdict: $(python3 -c 'import rocksdict; print("importable")' 2>&1 | tail -1);" \
     "setup $(( $(date +%s) - t0 )) s"
digest() {
  for f in "$@"; do
    echo "$(basename $f): $(grep -E '[0-9]+ (passed|failed|error)|no tests ran' $f | tail -1)"
  done
}
