# fp8d256's run scripts' common part (issue 36, session 38: the FP8 backward at D = 256), sourced from the root of
# main's tree on the device: runlib's common.sh (main43's wheel in /tmp/site_main, run_tests over the carry's tree/,
# left). The branch's site: main43's installed files with the branch's _C.so (carried xz-compressed: main43's wheel
# with it is 13 MB, the xz 6 MB) and its Python files; B36: benchmarks/hstu_fp8_bwd.py with bench_util.py beside it.
NAME=fp8d256 BASE=main43 LIM=${LIM:-53}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" > /tmp/fp8d256_setup.log 2>&1  # (no wheel in the carry: its
                                                                                   # pip line fails, replaced below)
rm -rf /tmp/site_$NAME && cp -r ${BASE_SITE:-/tmp/site_main} /tmp/site_$NAME
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
  $C/_C.so.xz /tmp/site_$NAME/hstu_attn/_C.so
cp $C/py/*.py /tmp/site_$NAME/hstu_attn/
md5sum /tmp/site_$NAME/hstu_attn/_C.so | cut -c1-12
B36=$C/hstu_fp8_bwd.py
# pack_out: the logs as one tar (8 files come back from a device call); unpack_clean: the rest removed (after the digest)
pack_out() { tar czf $OUT/fp8d256.tgz -C $OUT $(cd $OUT && ls | grep -v fp8d256.tgz); }
unpack_clean() { (cd $OUT && ls | grep -v fp8d256.tgz | xargs rm -f); }
