"""rab40's CPU check of D = 128's rab pairs by ldmatrix (hstu_fwd_block's RABL) against the LDS per pair (RABI):
every lane's register m of the ldmatrix.x4 at (stage, warp, sub-tile, q, m16 tile) holds the bytes of the LDS that
RABI issues for n8 tile 2 q + m / 2, row half m % 2 (PTX ldmatrix: lane 8 m + i gives row i of matrix m; lane l gets
the 4 bytes at row l / 4 of matrix m, offset 4 (l % 4)). The buffer: BM = 128 rows x BN = 64 keys of bf16, chunk c of
row r at (c ^ (r & 7)) 16 bytes, two stages of kRabBytes in Q's buffer (128-byte aligned). Also the bytes each lane
reads cover the sub-tile's rab exactly once per (row, key pair). Run: python3 ldsm_model.py (prints ok)."""
BM, BN, BNS, MT, NTILES = 128, 64, 32, 2, 4
RAB_BYTES = BM * BN * 2


def lds_word(base, warp_row0, c0, nt, mt, hf, lane):  # RABI: the LDS address (hstu_fwd_sm80_kernel.cuh)
    tr = base + (warp_row0 + lane // 4) * (BN * 2) + (lane % 4) * 4
    tc = tr + (((c0 + nt) ^ (lane // 4)) * 16)
    return tc + (mt * 16 + hf * 8) * (BN * 2)


def ldsm_words(base, warp_row0, c0, q, mt):  # RABL: the ldmatrix.x4's rows per lane, then each lane's 4 words
    rows = []
    for lane in range(32):
        ta = base + (warp_row0 + lane % 16) * (BN * 2) + (((lane // 16) ^ (lane % 8)) * 16)
        rows.append((ta ^ ((c0 + 2 * q) * 16)) + mt * 16 * (BN * 2))
    return [[rows[8 * m + lane // 4] + 4 * (lane % 4) for m in range(4)] for lane in range(32)]


def logical(addr, base):  # (row, key) of the 4-byte word at addr
    off = addr - base
    r, b = off // (BN * 2), off % (BN * 2)
    c = (b // 16) ^ (r & 7)
    return r, c * 8 + (b % 16) // 2


def main():
    checked = 0
    for stage in (0, 1):
        base = 0x400 + stage * RAB_BYTES  # (Q's buffer at a 1 KB-aligned smem offset)
        for warp_row0 in (0, 32, 64, 96):
            for sub in (0, 1):
                c0 = sub * BNS // 8
                seen = set()
                for q in range(NTILES // 2):
                    for mt in range(MT):
                        got = ldsm_words(base, warp_row0, c0, q, mt)
                        for lane in range(32):
                            for m in range(4):
                                want = lds_word(base, warp_row0, c0, 2 * q + m // 2, mt, m % 2, lane)
                                assert got[lane][m] == want, (stage, warp_row0, sub, q, mt, lane, m)
                                r, k = logical(want, base)
                                assert r == warp_row0 + mt * 16 + (m % 2) * 8 + lane // 4
                                assert k == sub * BNS + (2 * q + m // 2) * 8 + (lane % 4) * 2
                                seen.add((r, k))
                                checked += 1
                assert len(seen) == 32 * BNS // 2, len(seen)  # (the warp's 32 rows x 16 key pairs, once each)
    print(f"ok: {checked} lane words equal")


if __name__ == "__main__":
    main()
