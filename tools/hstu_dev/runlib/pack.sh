# The packing side of tools/hstu_dev/runlib, sourced by a run folder's pack.sh (run from anywhere):
#   source "$(dirname "$0")/../runlib/pack.sh"
#   pack_begin NAME [DEST]     stage a fresh carry folder for DEST (default $CARRY_DIR/NAME, CARRY_DIR default
#                              /work/main/.carry: another CARRY_DIR is a dry run), with carry_setup.sh and runlib's common.sh, labtime.py
#                              and ncu_csv.py
#   pack_add [-d SUB] FILE...  files into the carry folder (or its SUB/); relative paths are the worktree's
#   pack_as FILE NEWNAME       one file under another name
#   pack_wheel WHEEL           a wheel file, or the one hstu_attn-*.whl of a folder, into whl/
#   pack_tree PATH...          the worktree's files under tree/ at their own paths (tests/conftest.py and the test
#                              files of the branch: the device's run_tests runs them from there)
#   pack_end                   moves the staged folder into place (the lead may copy the carry at any time: it is
#                              never left half written), prints the wheel's md5 and the size (the helpers share
#                              64 MiB; a warning over 12 MB)
# Sets R (the worktree root) and HD (its tools/hstu_dev).
set -eu
HD=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=$(cd "$HD/../.." && pwd)
pack_begin() {
  PACK_NAME=$1
  PACK_DEST=${2:-${CARRY_DIR:-/work/main/.carry}/$1}
  PACK_DIR=/tmp/${1}_pack
  rm -rf $PACK_DIR && mkdir -p $PACK_DIR
  cp $HD/carry_setup.sh $HD/runlib/{common.sh,labtime.py,ncu_csv.py} $PACK_DIR/
}
pack_add() {
  local sub= f
  if [ "$1" = -d ]; then sub=/$2; shift 2; fi
  mkdir -p $PACK_DIR$sub
  for f in "$@"; do  # (unquoted: a pattern the caller's shell left unexpanded is expanded under R)
    case $f in /*) cp $f $PACK_DIR$sub/ ;; *) (cd $R && cp $f $PACK_DIR$sub/) ;; esac
  done
}
pack_as() {
  case $1 in /*) cp "$1" $PACK_DIR/$2 ;; *) cp "$R/$1" $PACK_DIR/$2 ;; esac
}
pack_wheel() {
  local w=$1
  [ -d "$w" ] && w=$(ls "$w"/hstu_attn-*.whl)
  mkdir -p $PACK_DIR/whl
  cp "$w" $PACK_DIR/whl/
}
pack_tree() {
  local f g
  for f in $(cd "$R" && for g in "$@"; do ls -d $g; done); do  # (patterns expanded under R)
    mkdir -p "$PACK_DIR/tree/$(dirname "$f")"
    cp "$R/$f" "$PACK_DIR/tree/$f"
  done
}
pack_end() {
  chmod +x $PACK_DIR/*.sh
  mkdir -p "$(dirname "$PACK_DEST")"
  rm -rf $PACK_DEST.new && cp -r $PACK_DIR $PACK_DEST.new && rm -rf $PACK_DEST && mv $PACK_DEST.new $PACK_DEST
  rm -rf $PACK_DIR
  ls $PACK_DEST/whl/*.whl > /dev/null 2>&1 && md5sum $PACK_DEST/whl/*.whl
  local kb
  kb=$(du -sk $PACK_DEST | cut -f1)
  echo "carry $PACK_DEST: $kb KB"
  [ $kb -le 12288 ] || echo "pack: WARNING: over 12 MB (the helpers share 64 MiB)" >&2
}
