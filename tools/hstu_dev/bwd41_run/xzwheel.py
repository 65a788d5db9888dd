"""A wheel carried as xz (the carry's 12 MB: the hstu wheel's deflated _C.so is 12.6 MB, stored and xz'd ~6 MB).

  python3 xzwheel.py pack WHEEL OUT.whl.xz     the wheel's entries re-stored uncompressed (same bytes, same RECORD),
                                               then xz
  python3 xzwheel.py unpack IN.whl.xz OUT.whl  (device side: python's lzma, no xz binary needed)
"""
import lzma
import os
import shutil
import sys
import zipfile


def main():
    mode, src, dst = sys.argv[1:4]
    if mode == "unpack":
        with lzma.open(src) as fi, open(dst, "wb") as fo:
            shutil.copyfileobj(fi, fo)
        return
    stored = dst + ".tmp"
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            out = zipfile.ZipInfo(info.filename, info.date_time)
            out.external_attr = info.external_attr
            zo.writestr(out, zi.read(info))
    with open(stored, "rb") as fi, lzma.open(dst, "wb", preset=6) as fo:
        shutil.copyfileobj(fi, fo)
    os.remove(stored)


if __name__ == "__main__":
    main()
