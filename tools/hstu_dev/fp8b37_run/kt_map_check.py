"""fp8b37: a host model of kFp8BwdKtSmem's K^T transpose (hstu_bwd_fp8_sm90_kernel.cuh fp8_bwd_kt_from_k): the 96 threads'
unit map over a random 128 x 128 K tile in the TMA's 128-byte swizzle; every byte of sKt written once and equal to the
pre-pass's K^T (slot s of a 16-slot group holds key hstu_fp8_pair_perm(s), keys >= keys_used 0). Usage: python3
kt_map_check.py (no GPU)."""
import random
def pair_perm(s): return ((s & 15) >> 1) + 8 * (s & 1) + (s & ~15)
def bp(x, y, sel):
    b = [(x >> (8*i)) & 255 for i in range(4)] + [(y >> (8*i)) & 255 for i in range(4)]
    return sum(b[(sel >> (4*n)) & 7] << (8*n) for n in range(4))
K = [[random.randrange(256) for d in range(128)] for k in range(128)]
smK = bytearray(16384)
for r in range(128):
    for c in range(128):
        smK[r*128 + (((c//16) ^ (r % 8)) * 16) + c % 16] = K[r][c]
for used in (128, 77, 0, 1, 200, -3):
    smKt = bytearray([0xAB]) * 16384
    written = [0]*16384
    for t in range(96):
        lane = t % 32
        for wu in range(t//32, 32, 3):
            dq = 4*(wu % 8) + (lane & 3); sqd = 8*(wu//8) + (lane >> 2); s0 = 4*sqd
            w = []
            for i in range(4):
                key = pair_perm(s0 + i)
                if key < used:
                    a = key*128 + ((((dq >> 2) ^ (key & 7))) << 4) + 4*(dq & 3)
                    w.append(int.from_bytes(smK[a:a+4], 'little'))
                else: w.append(0)
            t0 = bp(w[0], w[1], 0x5140); t1 = bp(w[0], w[1], 0x7362)
            t2 = bp(w[2], w[3], 0x5140); t3 = bp(w[2], w[3], 0x7362)
            o = [bp(t0, t2, 0x5410), bp(t0, t2, 0x7632), bp(t1, t3, 0x5410), bp(t1, t3, 0x7632)]
            for j in range(4):
                d = 4*dq + j
                a = d*128 + (((s0 >> 4) ^ (d & 7)) << 4) + (s0 & 15)
                smKt[a:a+4] = o[j].to_bytes(4, 'little')
                for x in range(4): written[a+x] += 1
    assert all(x == 1 for x in written)
    for d in range(128):
        for s in range(128):
            key = pair_perm(s)
            exp = K[key][d] if key < used else 0
            assert smKt[d*128 + (((s//16) ^ (d % 8)) * 16) + s % 16] == exp, (d, s)
print("kt_map_check ok")


# kFp8BwdDoSmem: fp8_bwd_do_from_dot, a tile's dO rows (64 x 128, 128-byte swizzle) from its dO^T (128 d rows x 64
# query slots, 64-byte swizzle; slot s of a 32-group holds query hstu_fp8_key_perm(s))
def key_perm(s):
    hi, t, i = s & 16, (s & 15) >> 2, s & 3
    return hi + 2 * t + (i & 1) + 8 * (i >> 1)


DO = [[random.randrange(256) for d in range(128)] for q in range(64)]  # DO[q][d]
smDot = bytearray(8192)
for d in range(128):
    for s in range(64):
        q = (s & ~31) + key_perm(s & 31)
        smDot[d * 64 + (((s // 16) ^ ((d >> 1) & 3)) * 16) + s % 16] = DO[q][d]
smDo = bytearray([0xAB]) * 8192
written = [0] * 8192
for t in range(96):
    lane = t % 32
    for wu in range(t // 32, 16, 3):
        dq = 4 * (wu % 8) + (lane & 3); s0 = 4 * (8 * (wu // 8) + (lane >> 2))
        w = []
        for i in range(4):
            d = 4 * dq + i
            a = d * 64 + (((s0 >> 4) ^ ((d >> 1) & 3)) << 4) + (s0 & 15)
            w.append(int.from_bytes(smDot[a:a + 4], 'little'))
        t0 = bp(w[0], w[1], 0x5140); t1 = bp(w[0], w[1], 0x7362)
        t2 = bp(w[2], w[3], 0x5140); t3 = bp(w[2], w[3], 0x7362)
        o = [bp(t0, t2, 0x5410), bp(t0, t2, 0x7632), bp(t1, t3, 0x5410), bp(t1, t3, 0x7632)]
        for j in range(4):
            r = ((s0 + j) & ~31) + key_perm((s0 + j) & 31)
            a = r * 128 + (((dq >> 2) ^ (r & 7)) << 4) + 4 * (dq & 3)
            smDo[a:a + 4] = o[j].to_bytes(4, 'little')
            for x in range(4): written[a + x] += 1
assert all(x == 1 for x in written)
for q in range(64):
    for d in range(128):
        assert smDo[q * 128 + (((d // 16) ^ (q % 8)) * 16) + d % 16] == DO[q][d], (q, d)
print("do_map_check ok")
