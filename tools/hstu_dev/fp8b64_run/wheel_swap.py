"""fp8b64: a copy of a built hstu_attn wheel with files replaced (ARCNAME=PATH ...) and RECORD recomputed.
Usage: python3 wheel_swap.py SRC.whl DST.whl ARCNAME=PATH ..."""
import base64, hashlib, sys, zipfile
src, dst = sys.argv[1:3]
repl = {a: open(p, "rb").read() for a, p in (x.split("=", 1) for x in sys.argv[3:])}
zin = zipfile.ZipFile(src)
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
