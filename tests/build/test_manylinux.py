"""The wheels earn their manylinux_2_28 tag: symbol versions, NEEDED entries, auditwheel's policy check.

How the link gets there: tools/manylinux/glibc.bzl. A failure here names the symbol (or library) that broke it.
"""

import glob
import io
import os
import zipfile

import pytest
from elftools.elf.elffile import ELFFile

TAG = "manylinux_2_28_x86_64"
# Highest version allowed per prefix. GLIBC: the tag. GLIBCXX / CXXABI: what torch's own manylinux_2_28 wheels need
# (libtorch_cpu.so of torch 2.13, measured); ours link libstdc++ statically, so they need none today.
LIMITS = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 22), "CXXABI": (1, 3, 11), "GCC": (7, 0, 0)}
# The manylinux policy's libraries, the dynamic loader (part of glibc) and torch's library (present wherever torch is).
ALLOWED_NEEDED = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1", "libstdc++.so.6",
    "ld-linux-x86-64.so.2", "libtorch_cpu.so",
}
WHEELS = ("dynamicemb", "hstu_attn")


def _wheel(dist):
    hits = [p for p in glob.glob("**/*.whl", recursive=True) if os.path.basename(p).startswith(dist + "-")]
    assert hits, f"no {dist} wheel among the test's data files"
    return hits[0]


def _libraries(path):
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.endswith(".so")}


def _needs(data):
    """(NEEDED entries, {undefined symbol: version name}) of an ELF shared library."""
    elf = ELFFile(io.BytesIO(data))
    needed = [t.needed for t in elf.get_section_by_name(".dynamic").iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    names = {}  # version index -> name
    verneed = elf.get_section_by_name(".gnu.version_r")
    if verneed is not None:
        for _, auxes in verneed.iter_versions():
            for aux in auxes:
                names[aux.entry["vna_other"]] = aux.name
    versym = elf.get_section_by_name(".gnu.version")
    symbols = {}
    for i, sym in enumerate(elf.get_section_by_name(".dynsym").iter_symbols()):
        ndx = versym.get_symbol(i)["ndx"] if versym is not None else None
        if i and sym["st_shndx"] == "SHN_UNDEF" and ndx in names:
            symbols[sym.name] = names[ndx]
    return needed, symbols


def _split(version_name):
    prefix, _, number = version_name.partition("_")
    try:
        return prefix, tuple(int(x) for x in number.split("."))
    except ValueError:
        return prefix, None  # e.g. GLIBC_PRIVATE


@pytest.mark.parametrize("dist", WHEELS)
def test_tag(dist):
    path = _wheel(dist)
    assert os.path.basename(path).endswith(f"-py3-none-{TAG}.whl"), path


@pytest.mark.parametrize("dist", WHEELS)
def test_symbol_versions(dist):
    """Lists the highest GLIBC_ / GLIBCXX_ / CXXABI_ / GCC_ version each library needs; fails above LIMITS."""
    for name, data in _libraries(_wheel(dist)).items():
        _, symbols = _needs(data)
        highest, over = {}, []
        for sym, v in sorted(symbols.items()):
            prefix, number = _split(v)
            assert number is not None, f"{name} needs the private version {sym}@{v}"
            if prefix in LIMITS:
                highest[prefix] = max(highest.get(prefix, ()), number)
                if number > LIMITS[prefix]:
                    over.append(f"{sym}@{v}")
        print(f"{name}: " + ", ".join(f"{p}_{'.'.join(map(str, n))}" for p, n in sorted(highest.items())))
        assert not over, f"{name} needs versions above {TAG}: {over} (pin them in tools/manylinux/glibc.bzl)"


@pytest.mark.parametrize("dist", WHEELS)
def test_needed_libraries(dist):
    for name, data in _libraries(_wheel(dist)).items():
        needed, _ = _needs(data)
        assert "libtorch_cpu.so" in needed, needed
        assert set(needed) <= ALLOWED_NEEDED, f"{name}: NEEDED outside the policy: {set(needed) - ALLOWED_NEEDED}"
        assert "libstdc++.so.6" not in needed, "libstdc++ is linked statically (tools/manylinux/glibc.bzl)"


@pytest.mark.parametrize("dist", WHEELS)
def test_auditwheel_policy(dist):
    """auditwheel's own analysis (libtorch_cpu.so excluded: torch provides it) allows the tag we write."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.wheel_abi import analyze_wheel_abi
    from pathlib import Path

    info = analyze_wheel_abi(Libc.GLIBC, Architecture.x86_64, Path(_wheel(dist)), frozenset({"libtorch_cpu.so"}),
                             disable_isa_ext_check=False, allow_graft=False)
    want = info.policies.get_policy_by_name(TAG)
    print(f"{dist}: auditwheel's most compatible tag: {info.overall_policy.name}")
    assert info.overall_policy.priority >= want.priority, (
        f"auditwheel allows {info.overall_policy.name} only (symbols: {info.sym_policy.name}, "
        f"libraries: {info.ref_policy.name}, blacklist: {info.blacklist_policy.name})"
    )
