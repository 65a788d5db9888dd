# fwd20 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree: main19's wheel against
# the branch's (tools/hstu_dev/carry_setup.sh, carried beside this file), J = fwd20_bench.py (carried with
# fwd17_jag.py in jag/).
NAME=fwd20 BASE=main19
for f in "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../carry_setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/jag/fwd20_bench.py
