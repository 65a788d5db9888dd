# The device setup of the step-path runs (step36_run, step38_run: the lookup step's lab values against main's tests),
# sourced by the folder's setup.sh after it set NAME, BASE (the lead's folder of main's wheels), MSITE (main's site)
# and TESTS (the test tree's folder); runK.sh runs from main's tree root and sources .carry/NAME/setup.sh. Installs
# main's dynamicemb wheel (.carry/$BASE/whl) in $MSITE and, when packed, the branch's (.carry/NAME/whl) in
# /tmp/site_$NAME; main's tests with the branch's test files over them in $TESTS. Sets C, SM (the site a run uses:
# the branch's where its wheel is there, else main's), TOOLS (the branch's tools), PT, left (seconds left of the
# budget $B, from t0) and prints the GPU line.
t0=$(date +%s)
set -u
export PYTHONUNBUFFERED=1
C=.carry/$NAME
M=$MSITE S=/tmp/site_$NAME
mkdir -p "$OUT"
rm -rf $M $S $TESTS
python3 -m pip install -q --no-deps --no-index --no-compile --target $M .carry/$BASE/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
SM=$M
if ls $C/whl/dynamicemb-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
  SM=$S
fi
mkdir -p $TESTS && cp -r tests $TESTS/ && cp -r $C/tree/tests/dynamicemb/*.py $TESTS/tests/dynamicemb/ 2>/dev/null
TOOLS=$C/tree/tools/dynamicemb_dev
PT="python3 -P -m pytest -q -p no:cacheprovider --tb=short --maxfail=4 -rfE"
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
