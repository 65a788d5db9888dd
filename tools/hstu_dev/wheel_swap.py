"""Lab: a copy of a built hstu_attn wheel with files replaced and RECORD recomputed (the helpers' quick wheels: main's
objects relinked with a branch's changed units, see the *_run/mkwheel.sh scripts).
Usage: python3 tools/hstu_dev/wheel_swap.py SRC.whl _C.so _ops.py DST.whl     (the op library and _ops.py)
       python3 tools/hstu_dev/wheel_swap.py SRC.whl DST.whl ARCNAME=PATH ...  (any files of the wheel)"""
import base64, hashlib, sys, zipfile
if len(sys.argv) == 5 and "=" not in sys.argv[3]:  # (SRC _C.so _ops.py DST: no ARCNAME=PATH)
    src, so, ops, dst = sys.argv[1:5]
    pairs = [("hstu_attn/_C.so", so), ("hstu_attn/_ops.py", ops)]
else:
    src, dst = sys.argv[1:3]
    pairs = [x.split("=", 1) for x in sys.argv[3:]]
zin = zipfile.ZipFile(src)
repl = {a: open(p, "rb").read() for a, p in pairs}
assert set(repl) <= set(zin.namelist()), set(repl) - set(zin.namelist())
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
