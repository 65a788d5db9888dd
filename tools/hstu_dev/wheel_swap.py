"""Lab: a copy of a built hstu_attn wheel with _C.so and _ops.py replaced and RECORD recomputed (the helpers' quick
wheels: main's objects relinked with a branch's changed units, see the *_run/mkwheel.sh scripts).
Usage: python3 tools/hstu_dev/wheel_swap.py SRC.whl _C.so _ops.py DST.whl"""
import base64, hashlib, sys, zipfile
src, so, ops, dst = sys.argv[1:5]
zin = zipfile.ZipFile(src)
repl = {"hstu_attn/_C.so": open(so, "rb").read(), "hstu_attn/_ops.py": open(ops, "rb").read()}
rec_name = [n for n in zin.namelist() if n.endswith("RECORD")][0]
out = zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED)
rows = []
for info in zin.infolist():
    if info.filename == rec_name:
        continue
    data = repl.get(info.filename, zin.read(info.filename))
    out.writestr(info, data)
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rows.append(f"{info.filename},sha256={h},{len(data)}")
rows.append(f"{rec_name},,")
out.writestr(zin.getinfo(rec_name), "\n".join(rows) + "\n")
out.close()
print("wrote", dst)
