"""Writes wgmma_sm90.cuh: inline-PTX wrappers for the wgmma shapes the sm90 HSTU kernels use.

    python3 tools/codegen/gen_wgmma.py > hstu/csrc/sm90/wgmma_sm90.cuh
    python3 tools/codegen/gen_wgmma.py --fp8 > hstu/csrc/sm90/wgmma_fp8_sm90.cuh

m64nNk16, f32 accumulators, A and B f16 or bf16. SS: A and B from shared-memory descriptors (both K-major).
RS: A from registers (4 x b32 per thread, the mma.sync m16n8k16 A-fragment layout per warp), B from a
descriptor, TRANS_B = 1 for an MN-major B (e.g. V stored keys x D with D contiguous).
SST (backward, N = 64 and 128): SS with compile-time TRANS_A / TRANS_B (1 = MN-major operand), e.g. dQ = dS K with
dS^T stored keys x queries (MN-major A) and K stored keys x D (MN-major B).

--fp8: m64nNk32 with e4m3 A and B (the FP8 forward, hstu_fwd_fp8_sm90_kernel.cuh): SS and RS only (8-bit operands
are K-major only: no transpose operands), functions wgmma_m64n<N>k32_{ss,rs}_e4m3, their own macro names.

The header writes each form once, as a macro over (N, dtype), and each shape's accumulator operand list once; the
wrappers are one line each. The asm strings are the same, character for character, as one written-out function
per wrapper would hold.
"""

SHAPES = (64, 128, 256)
SST_SHAPES = (64, 128)
DTYPES = ("bf16", "f16")


def regs(first, n):
    return ", ".join(f"%{first + i}" for i in range(n))


def macro(name, params, body):
    """A #define whose lines end in aligned backslashes."""
    lines = [f"#define {name}({', '.join(params)})"] + body
    width = max(len(line) for line in lines) + 1
    return "\n".join(line.ljust(width) + "\\" for line in lines[:-1]) + "\n" + lines[-1]


def shape_lists(n, prev, k=16):
    """The accumulator operand string and constraint list of m64nNk16, each extending the previous shape's."""
    nacc = n // 2
    first = prev // 2 if prev else 0
    parts = [regs(j, min(16, nacc - j)) for j in range(first, nacc, 16)]
    acc = ['  "' + part + ("," if k + 1 < len(parts) else "") + '"' for k, part in enumerate(parts)]
    outs = [", ".join(f'"+f"(d[{i}])' for i in range(j, min(j + 8, nacc))) for j in range(first, nacc, 8)]
    d = ["  " + o + ("," if k + 1 < len(outs) else "") for k, o in enumerate(outs)]
    if prev:
        acc = [f'  HSTU_WGMMA_ACC_{prev} ","'] + acc
        d = [f"  HSTU_WGMMA_D_{prev},"] + d
    return (f"// m64n{n}k{k}: {nacc} fp32 accumulator registers per thread, operands %0 .. %{nacc - 1}.\n" +
            macro(f"HSTU_WGMMA_ACC_{n}", [], acc).replace(f"HSTU_WGMMA_ACC_{n}()", f"HSTU_WGMMA_ACC_{n}") + "\n" +
            macro(f"HSTU_WGMMA_D_{n}", [], d).replace(f"HSTU_WGMMA_D_{n}()", f"HSTU_WGMMA_D_{n}"))


def form_macros():
    asm_head = macro("HSTU_WGMMA_ASM_HEAD", ["N", "TY", "SC"], [
        '  "{\\n.reg .pred p;\\n"',
        '  "setp.ne.b32 p, " SC ", 0;\\n"',
        '  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " "',
        '  "{" HSTU_WGMMA_ACC_##N "}, "'])
    head = ['  asm volatile(', '      HSTU_WGMMA_ASM_HEAD(N, TY, SC)']
    ss = macro("HSTU_WGMMA_SS", ["N", "TY", "SC", "AB"], [
        "__device__ __forceinline__ void wgmma_m64n##N##k16_ss_##TY(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,",
        "                                                            int scale_d) {"] + head + [
        '      AB ", p, 1, 1, 0, 0;\\n}\\n"',
        '      : HSTU_WGMMA_D_##N',
        '      : "l"(desc_a), "l"(desc_b), "r"(scale_d));',
        "}"])
    rs = macro("HSTU_WGMMA_RS", ["N", "TY", "SC", "AB", "TB"], [
        "template <int TRANS_B>",
        "__device__ __forceinline__ void wgmma_m64n##N##k16_rs_##TY(float (&d)[N / 2], const uint32_t (&a)[4],",
        "                                                            uint64_t desc_b, int scale_d) {"] + head + [
        '      AB ", p, 1, 1, " TB ";\\n}\\n"',
        '      : HSTU_WGMMA_D_##N',
        '      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));',
        "}"])
    sst = macro("HSTU_WGMMA_SST", ["N", "TY", "SC", "AB", "TAB"], [
        "template <int TRANS_A, int TRANS_B>",
        "__device__ __forceinline__ void wgmma_m64n##N##k16_sst_##TY(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,",
        "                                                             int scale_d) {"] + head + [
        '      AB ", p, 1, 1, " TAB ";\\n}\\n"',
        '      : HSTU_WGMMA_D_##N',
        '      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B));',
        "}"])
    return ["// The asm strings' common head: scale-d predicate from operand SC, the instruction, the accumulators.",
            asm_head, "",
            "// SS: A and B from descriptors (operands AB).", ss, "",
            "// RS: A from registers; TB: the operand of TRANS_B.", rs, "",
            "// SST: SS with compile-time transposes (operands TAB).", sst]


def instances():
    out = []
    for n in SHAPES:
        nacc = n // 2
        for ty in DTYPES:
            out.append(f'HSTU_WGMMA_SS({n}, {ty}, "%{nacc + 2}", "%{nacc}, %{nacc + 1}")')
        for ty in DTYPES:
            out.append(f'HSTU_WGMMA_RS({n}, {ty}, "%{nacc + 5}", "{{{regs(nacc, 4)}}}, %{nacc + 4}", "%{nacc + 6}")')
    for n in SST_SHAPES:
        nacc = n // 2
        for ty in DTYPES:
            out.append(f'HSTU_WGMMA_SST({n}, {ty}, "%{nacc + 2}", "%{nacc}, %{nacc + 1}", "%{nacc + 3}, %{nacc + 4}")')
    return out


FP8_SHAPES = (32, 64, 96, 128, 192, 256)  # (32: the FP8 backward's dQ at D = 64)


def fp8_main():
    """wgmma_fp8_sm90.cuh: m64nNk32 e4m3 x e4m3 -> f32, SS and RS forms (no transposes: 8-bit operands are
    K-major only)."""
    asm_head = macro("HSTU_WGMMA8_ASM_HEAD", ["N", "SC"], [
        '  "{\\n.reg .pred p;\\n"',
        '  "setp.ne.b32 p, " SC ", 0;\\n"',
        '  "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 "',
        '  "{" HSTU_WGMMA8_ACC_##N "}, "'])
    head = ['  asm volatile(', '      HSTU_WGMMA8_ASM_HEAD(N, SC)']
    ss = macro("HSTU_WGMMA8_SS", ["N", "SC", "AB"], [
        "__device__ __forceinline__ void wgmma_m64n##N##k32_ss_e4m3(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,",
        "                                                            int scale_d) {"] + head + [
        '      AB ", p, 1, 1;\\n}\\n"',
        '      : HSTU_WGMMA8_D_##N',
        '      : "l"(desc_a), "l"(desc_b), "r"(scale_d));',
        "}"])
    rs = macro("HSTU_WGMMA8_RS", ["N", "SC", "AB"], [
        "__device__ __forceinline__ void wgmma_m64n##N##k32_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4],",
        "                                                            uint64_t desc_b, int scale_d) {"] + head + [
        '      AB ", p, 1, 1;\\n}\\n"',
        '      : HSTU_WGMMA8_D_##N',
        '      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));',
        "}"])
    out = []
    for i, n in enumerate(FP8_SHAPES):
        out += [shape_lists(n, FP8_SHAPES[i - 1] if i else 0, 32).replace("HSTU_WGMMA_", "HSTU_WGMMA8_"), ""]
    out += ["// The asm strings' common head: scale-d predicate from operand SC, the instruction, the accumulators.",
            asm_head, "", "// SS: A and B from descriptors (operands AB).", ss, "",
            "// RS: A from registers.", rs, ""]
    for n in FP8_SHAPES:
        nacc = n // 2
        out.append(f'HSTU_WGMMA8_SS({n}, "%{nacc + 2}", "%{nacc}, %{nacc + 1}")')
        out.append(f'HSTU_WGMMA8_RS({n}, "%{nacc + 5}", "{{{regs(nacc, 4)}}}, %{nacc + 4}")')
    out += [""] + [f"#undef HSTU_WGMMA8_{m}" for m in ["SS", "RS", "ASM_HEAD"] + [f"ACC_{n}" for n in FP8_SHAPES] +
                   [f"D_{n}" for n in FP8_SHAPES]]
    emit(["// GENERATED by tools/codegen/gen_wgmma.py --fp8 -- do not edit by hand.",
          "// wgmma.mma_async wrappers (sm_90a): m64nNk32, f32 accumulate, e4m3 A and B (K-major); SS and RS forms.",
          "// RS: A from registers, 4 x b32 per thread, 4 bytes each (k = 4 (lane % 4) + byte, + 16 for a2 / a3; rows",
          "// lane / 4 (+ 8 for a1 / a3) of the warp's 16)."], out)


def emit(comments, body):
    """Prints one generated header: the comment lines, the includes, body inside namespace hstu::sm90."""
    out = comments + ["#pragma once", "", "#include <cstdint>", "", "namespace hstu {", "namespace sm90 {", ""]
    out += body + ["", "}  // namespace sm90", "}  // namespace hstu", ""]
    print("\n".join(out), end="")


def main():
    out = []
    for i, n in enumerate(SHAPES):
        out += [shape_lists(n, SHAPES[i - 1] if i else 0), ""]
    out += form_macros() + [""] + instances() + [""]
    out += [f"#undef HSTU_WGMMA_{m}" for m in ["SS", "RS", "SST", "ASM_HEAD"] + [f"ACC_{n}" for n in SHAPES] +
            [f"D_{n}" for n in SHAPES]]
    emit(["// GENERATED by tools/codegen/gen_wgmma.py -- do not edit by hand.",
          "// wgmma.mma_async wrappers (sm_90a): m64nNk16, f32 accumulate, f16/bf16 inputs; SS, RS and SST forms."], out)


if __name__ == "__main__":
    import sys
    fp8_main() if sys.argv[1:] == ["--fp8"] else main()
