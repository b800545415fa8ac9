/* engine/mcu.h -- the microcontrollers' kernels: Helium (Cortex-M55) behind
 * simd.h's mapping macros, and q8_0's integer sums by Helium's VMLADAV or
 * the DSP extension's SMLAD (Cortex-M4/M7). */
#if !defined(MODEL_NO_SIMD) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
/* Helium (Cortex-M55): eight vector registers, so tiles of 4 rows x 1 token */
#include <arm_mve.h>
#define LLM__SIMD "helium"
#define LLM__HELIUM 1
#define LLM__VL 4
#define LLM__NC 1
typedef float32x4_t llm__vf;
#define llm__vzero() vdupq_n_f32(0.0f)
#define llm__vload(p) vld1q_f32(p)
#define llm__vfma(a, b, c) vfmaq_f32(c, a, b)
LLM__INLINE float32x4_t llm__vload_f16(const uint16_t *p) {
    float t[4];
    t[0] = llm_f16_to_f32(p[0]); t[1] = llm_f16_to_f32(p[1]); t[2] = llm_f16_to_f32(p[2]); t[3] = llm_f16_to_f32(p[3]);
    return vld1q_f32(t);
}
LLM__INLINE float llm__vsum(float32x4_t v) {
    return (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 2)) + (vgetq_lane_f32(v, 1) + vgetq_lane_f32(v, 3));
}
#define llm__vstore(p, v) vst1q_f32(p, v)
#endif

#if !defined(MODEL_NO_SIMD) && defined(__ARM_FEATURE_MVE)
/* q8_0's exact integer sums, four rows at a time: VMLADAV adds sixteen
 * int8 products into a scalar, the tail under a predicate */
#include <arm_mve.h>
#define LLM__HAVE_ISUM4_I8 1
static inline void llm__isum4_i8(int32_t *isum, const int8_t *w, size_t ldw, const int8_t *x, int len) {
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const int8_t *w1 = w + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    if (len == 32) {   /* the usual group: two whole vectors, no loop, no predicate */
        int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
        isum[0] = vmladavaq_s8(vmladavq_s8(vld1q_s8(w), x0), vld1q_s8(w + 16), x1);
        isum[1] = vmladavaq_s8(vmladavq_s8(vld1q_s8(w1), x0), vld1q_s8(w1 + 16), x1);
        isum[2] = vmladavaq_s8(vmladavq_s8(vld1q_s8(w2), x0), vld1q_s8(w2 + 16), x1);
        isum[3] = vmladavaq_s8(vmladavq_s8(vld1q_s8(w3), x0), vld1q_s8(w3 + 16), x1);
        return;
    }
    for (int j = 0; j < len; j += 16) {
        mve_pred16_t p = vctp8q((uint32_t)(len - j));
        int8x16_t xv = vldrbq_z_s8(x + j, p);
        s0 = vmladavaq_p_s8(s0, vldrbq_z_s8(w + j, p), xv, p);
        s1 = vmladavaq_p_s8(s1, vldrbq_z_s8(w1 + j, p), xv, p);
        s2 = vmladavaq_p_s8(s2, vldrbq_z_s8(w2 + j, p), xv, p);
        s3 = vmladavaq_p_s8(s3, vldrbq_z_s8(w3 + j, p), xv, p);
    }
    isum[0] = s0; isum[1] = s1; isum[2] = s2; isum[3] = s3;
}
/* GGUF's q8_0 blocks (ref.h) against int16 activation codes: one group's
 * integer sum, the codes widened by VLDRB.S16, exact, so the twin's */
#define LLM__HAVE_BLK_ISUM 1
static inline int32_t llm__blk_isum_q8_0(const unsigned char *b, const int16_t *x) {
    const int8_t *q = (const int8_t *)(const void *)(b + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; j += 8) s = vmladavaq_s16(s, vldrbq_s16(q + j), vld1q_s16(x + j));
    return s;
}
#if __ARM_FEATURE_MVE & 2   /* the float vectors too (else simd.h's generic q4_0 tile) */
/* q4_0 against int16 activation codes, Helium's own tile, four rows at a
 * time in the four lanes of one float vector. A block's 16 code bytes in
 * two halves of 8, each widened by a VLDRB.U16: half h holds codes 8h..8h+7
 * in its low nibbles and 8h+16..8h+23 in its high ones, so one VBIC or VSHR
 * each gives eight codes, unsigned, in x's own order; sum (q - 8) x =
 * sum q x - 8 sum x. Exact, so the twin's integer sum. s + half h's sum
 * against x's codes xlo = x[8h..], xhi = x[8h + 16..]: */
LLM__INLINE int32_t llm__half_q4_0_mve(const unsigned char *q, int16x8_t xlo, int16x8_t xhi, int32_t s) {
    uint16x8_t v = vldrbq_u16(q);   /* (VBIC #0xF0: the low nibbles, no mask register) */
    s = vmladavaq_s16(s, vreinterpretq_s16_u16(vshrq_n_u16(v, 4)), xhi);
    return vmladavaq_s16(s, vreinterpretq_s16_u16(vbicq_n_u16(v, 0xF0)), xlo);
}
/* the same from 0 (VMLADAV, no register to clear) */
LLM__INLINE int32_t llm__half0_q4_0_mve(const unsigned char *q, int16x8_t xlo, int16x8_t xhi) {
    uint16x8_t v = vldrbq_u16(q);
    int32_t s = vmladavq_s16(vreinterpretq_s16_u16(vshrq_n_u16(v, 4)), xhi);
    return vmladavaq_s16(s, vreinterpretq_s16_u16(vbicq_n_u16(v, 0xF0)), xlo);
}
/* the f16 in each lane's low half as f32, exactly: VCVTB, in q0 itself
 * (binutils 2.40 encodes vcvtb.f32.f16's source register as a D register's
 * number, right only for q0) */
LLM__INLINE float32x4_t llm__vcvtb_f32_f16(uint32x4_t h) {
    register uint32x4_t in __asm__("q0") = h;
    register float32x4_t out __asm__("q0");
    __asm__("vcvtb.f32.f16 q0, q0" : "=w"(out) : "w"(in));
    return out;
}
/* GCC 12's pre-allocation scheduler hoists the loads of a loop body ahead
 * of the integer sums that free their registers, and its auto-increment
 * pass copies the row pointers: with eight vector registers both spill.
 * The q4_0 loop asks for the order it is written in. */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__MVE_IN_ORDER __attribute__((optimize("no-schedule-insns", "no-auto-inc-dec")))
#else
#define LLM__MVE_IN_ORDER
#endif
/* {a, b, c, d} from four core registers in two VMOVs of two lanes each
 * (GCC 12 builds the vector through the stack) */
LLM__INLINE int32x4_t llm__vec4_s32(int32_t a, int32_t b, int32_t c, int32_t d) {
    int32x4_t v;
    __asm__("vmov %q0[2], %q0[0], %1, %3\n\tvmov %q0[3], %q0[1], %2, %4" : "=w"(v) : "r"(a), "r"(b), "r"(c), "r"(d));
    return v;
}
/* rows r0 and r0 + k1, k2, k3 (bytes) . x over G groups, row i in lane i:
 * each lane steps along its row's groups as the twin does,
 * acc = fma(isum, d * xs, acc), the same single-rounding operations in the
 * same order (VCVTB reads the four blocks' f16 d exactly, gathered at
 * r0 + {0, k1, k2, k3}), so the twin's bits. Half by half, the four rows' sums in
 * four registers: one half of x (two vectors) and a row's codes are all the
 * vectors live beside acc (Helium has eight). */
LLM__MVE_IN_ORDER static float32x4_t llm__rows4_q4_0_mve(const unsigned char *r0, int32_t k1, int32_t k2, int32_t k3,
                                                         const int16_t *x, const float *xs, int G) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    const unsigned char *r1 = r0 + k1, *r2 = r0 + k2, *r3 = r0 + k3;
    uint32x4_t off = vreinterpretq_u32_s32(llm__vec4_s32(0, k1, k2, k3));
    for (int g = 0; g < G; g++, x += LLM__GQ, r0 += LLM__Q4_0_BYTES, r1 += LLM__Q4_0_BYTES, r2 += LLM__Q4_0_BYTES, r3 += LLM__Q4_0_BYTES) {
        int16x8_t xlo = vld1q_s16(x), xhi = vld1q_s16(x + 16);
        int32_t xsum = vaddvaq_s16(vaddvq_s16(xlo), xhi);
        int32_t s0 = llm__half0_q4_0_mve(r0 + 2, xlo, xhi), s1 = llm__half0_q4_0_mve(r1 + 2, xlo, xhi);
        int32_t s2 = llm__half0_q4_0_mve(r2 + 2, xlo, xhi), s3 = llm__half0_q4_0_mve(r3 + 2, xlo, xhi);
        xlo = vld1q_s16(x + 8);
        xhi = vld1q_s16(x + 24);
        xsum = vaddvaq_s16(vaddvaq_s16(xsum, xlo), xhi);
        s0 = llm__half_q4_0_mve(r0 + 10, xlo, xhi, s0);
        s1 = llm__half_q4_0_mve(r1 + 10, xlo, xhi, s1);
        s2 = llm__half_q4_0_mve(r2 + 10, xlo, xhi, s2);
        s3 = llm__half_q4_0_mve(r3 + 10, xlo, xhi, s3);
        int32x4_t isum = llm__vec4_s32(s0, s1, s2, s3);
        float32x4_t d = llm__vcvtb_f32_f16(vldrhq_gather_offset_u32((const uint16_t *)(const void *)r0, off));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(vsubq_n_s32(isum, 8 * xsum)), vmulq_n_f32(d, xs[g]));
    }
    return acc;
}
/* one token's products by nr rows (rb bytes apart) of q4_0 blocks, four
 * rows a call, a short last four repeating its last row in the spare lanes
 * (their sums discarded: the store's predicate). The loaders keep tensors
 * at least 4-byte aligned, so the gather reads whole f16 d's. */
static void llm__token_q4_0(float *o, const unsigned char *rows, size_t rb, int nr, const int16_t *x, const float *xs,
                            int G) {
    int32_t k = (int32_t)rb;   /* (a tensor's bytes are far below 2^31) */
    for (int a = 0; a < nr; a += 4) {
        int na = nr - a < 4 ? nr - a : 4;
        int32_t k1 = na > 1 ? k : 0, k2 = na > 2 ? 2 * k : k1, k3 = na > 3 ? 3 * k : k2;
        float32x4_t acc = llm__rows4_q4_0_mve(rows + (size_t)a * rb, k1, k2, k3, x, xs, G);
        vstrwq_p_f32(o + a, acc, vctp32q((uint32_t)na));
    }
}
#define LLM__HAVE_BLK_TILE_Q4_0 1
#define LLM__MCU_TILE_Q4_0 1
#endif
#elif defined(__ARM_FEATURE_DSP) && !defined(MODEL_NO_SIMD) && !defined(__aarch64__)
#include <arm_acle.h>
/* bytes 1 and 3 of a, sign-extended to two int16: SXTB16's own rotation
 * (GCC 12 emits a separate ROR for __sxtb16 of a rotated value) */
static inline uint32_t llm__sxtb16_ror8(uint32_t a) {
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(a));
    return r;
}
/* acc + the four products of one 32-bit word of w with x's bytes 0, 2 (xe)
 * and 1, 3 (xo) as int16 pairs: two SMLADs (Cortex-M4/M7 DSP) */
static inline int32_t llm__smlad_word(const int8_t *w, uint32_t xe, uint32_t xo, int32_t acc) {
    uint32_t a;
    memcpy(&a, w, 4);
    return __smlad(llm__sxtb16_ror8(a), xo, __smlad(__sxtb16(a), xe, acc));
}
/* GGUF's q8_0 blocks (ref.h) against int16 activation codes: one group's
 * integer sum, exact, so the twin's. A word of four codes gives the pairs
 * (j, j+2) and (j+1, j+3) (SXTB16), so x's pairs are packed to match
 * (PKHBT/PKHTB) */
#define LLM__HAVE_BLK_ISUM 1
static inline int32_t llm__blk_isum_q8_0(const unsigned char *b, const int16_t *x) {
    const int8_t *q = (const int8_t *)(const void *)(b + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; j += 4) {
        uint32_t a, c;
        memcpy(&a, x + j, 4); memcpy(&c, x + j + 2, 4);
        s = llm__smlad_word(q + j, (a & 0xFFFFu) | (c << 16), (c & 0xFFFF0000u) | (a >> 16), s);
    }
    return s;
}
/* q4_0 against int16 activation codes (ref.h): a word of four code bytes
 * holds codes j..j+3 in its low nibbles and j+16..j+19 in its high ones,
 * which come out as the pairs (j, j+2) and (j+1, j+3) (below), so x's
 * pairs are packed to match (PKHBT/PKHTB): le = (x[j], x[j+2]),
 * lo = (x[j+1], x[j+3]), he/ho the same of x[j+16..j+19] */
typedef struct llm__x16q { uint32_t le, lo, he, ho; } llm__x16q;
static inline llm__x16q llm__x16_pairs(const int16_t *x) {   /* x[j..j+3], x[j+16..j+19] */
    uint32_t a, b, c, d;
    memcpy(&a, x, 4); memcpy(&b, x + 2, 4); memcpy(&c, x + 16, 4); memcpy(&d, x + 18, 4);
    llm__x16q p;
    p.le = (a & 0xFFFFu) | (b << 16); p.lo = (b & 0xFFFF0000u) | (a >> 16);   /* PKHBT, PKHTB */
    p.he = (c & 0xFFFFu) | (d << 16); p.ho = (d & 0xFFFF0000u) | (c >> 16);
    return p;
}

/* The DSP's own tiles for q8_0 (LLMW's int8 rows) and q4_0 blocks, one
 * token (nc) at a time and two rows at a time sharing each load of the
 * token's codes, each row stepping along its groups as the twin does, so
 * the same bits. A token's codes are first rearranged for SMLAD once, a
 * chunk of up to LLM__DSP_CHUNK codes on the stack, and every row then
 * loads them ready: on the Cortex-M4 the sign extensions, the pairing and
 * the per-group bookkeeping of a tile cost as much as the multiplies. */
#define LLM__DSP_CHUNK 256
/* q8_0: x's word k as SXTB16's pairs, xp[2k] = bytes 0, 2 and xp[2k + 1] = 1, 3 */
static void llm__q8_pairs_dsp(uint32_t *xp, const int8_t *x, int words) {
    for (int k = 0; k < words; k++) {
        uint32_t b;
        memcpy(&b, x + 4 * k, 4);
        xp[2 * k] = __sxtb16(b);
        xp[2 * k + 1] = llm__sxtb16_ror8(b);
    }
}
/* one group's exact sums of rows w0 and w1 (words int8 words) against their pairs xp */
LLM__INLINE void llm__isum2_q8_dsp(int32_t *s, const int8_t *w0, const int8_t *w1, const uint32_t *xp, int words) {
    int32_t s0 = 0, s1 = 0;
    LLM__UNROLL for (int k = 0; k < words; k++) {
        uint32_t xe = xp[2 * k], xo = xp[2 * k + 1];
        s0 = llm__smlad_word(w0 + 4 * k, xe, xo, s0);
        s1 = llm__smlad_word(w1 + 4 * k, xe, xo, s1);
    }
    s[0] = s0; s[1] = s1;
}
/* rows w and w + n's steps over groups g0..g1 of G (whole words; the
 * chunk's pairs xp from group g0), accumulating into acc[0..1] */
LLM__INLINE void llm__rows2_q8_dsp(float *acc, const int8_t *w, const float *ws, int groups, const float *xs,
                                   const uint32_t *xp, int G, int n, int g0, int g1) {
    int gf = g1 * G > n ? g1 - 1 : g1;   /* whole groups; a short last one after */
    float a0 = acc[0], a1 = acc[1];
    for (int g = g0; g < gf; g++, xp += G / 2) {
        int32_t s[2];
        llm__isum2_q8_dsp(s, w + (size_t)g * G, w + (size_t)n + (size_t)g * G, xp, G / 4);
        a0 = llm__q8_step(s[0], ws[g], xs[g], a0);
        a1 = llm__q8_step(s[1], ws[groups + g], xs[g], a1);
    }
    if (gf < g1) {
        int32_t s[2];
        llm__isum2_q8_dsp(s, w + (size_t)gf * G, w + (size_t)n + (size_t)gf * G, xp, (n - gf * G) / 4);
        a0 = llm__q8_step(s[0], ws[gf], xs[gf], a0);
        a1 = llm__q8_step(s[1], ws[groups + gf], xs[gf], a1);
    }
    acc[0] = a0; acc[1] = a1;
}
/* one token's products by nr rows of q8_0 (n columns, groups scales each;
 * simd.h's llm__tile_q8 calls it token by token) */
#define LLM__HAVE_TOKEN_Q8 1
static void llm__token_q8(float *o, const int8_t *w, const float *ws, const int8_t *x, const float *xs, int n, int G,
                          int groups, int nr) {
    uint32_t xp[LLM__DSP_CHUNK / 2];
    int a = 0;
    if (G % 4 == 0 && n % 4 == 0 && G <= LLM__DSP_CHUNK) {   /* groups of whole words */
        int cg = LLM__DSP_CHUNK / G;   /* groups per chunk */
        for (int g0 = 0; g0 < groups; g0 += cg) {
            int g1 = groups - g0 < cg ? groups : g0 + cg, c1 = g1 * G < n ? g1 * G : n;
            llm__q8_pairs_dsp(xp, x + (size_t)g0 * G, (c1 - g0 * G) / 4);
            for (a = 0; a + 2 <= nr; a += 2) {
                float acc[2] = { g0 ? o[a] : 0.0f, g0 ? o[a + 1] : 0.0f };
                const int8_t *wa = w + (size_t)a * n;
                const float *wsa = ws + (size_t)a * groups;
                if (G == 32) llm__rows2_q8_dsp(acc, wa, wsa, groups, xs, xp, 32, n, g0, g1);
                else llm__rows2_q8_dsp(acc, wa, wsa, groups, xs, xp, G, n, g0, g1);
                o[a] = acc[0]; o[a + 1] = acc[1];
            }
        }
    }
    for (; a < nr; a++) o[a] = llm__dot_q8(w + (size_t)a * n, ws + (size_t)a * groups, x, xs, n, G);
}

/* q4_0 against int16 codes: each group's codes as the pairs llm__x16_pairs
 * makes, and 8 times their sum: the weights' nibbles are taken unsigned,
 * straight into SMLAD's halves by one AND each (w & 0x000F000F holds codes
 * j and j + 2; shifted 8, 4 and 12, codes j + 1 and j + 3, j + 16 and
 * j + 18, j + 17 and j + 19), and sum (q - 8) x = sum q x - 8 sum x, exact */
typedef struct llm__q4_pairs { llm__x16q p[4]; int32_t xsum8; } llm__q4_pairs;
static void llm__q4_pairs_dsp(llm__q4_pairs *xp, const int16_t *x, int groups) {
    for (int g = 0; g < groups; g++, x += 32) {
        for (int k = 0; k < 4; k++) xp[g].p[k] = llm__x16_pairs(x + 4 * k);
        xp[g].xsum8 = 8 * llm__sum_i16(x, 32);
    }
}
/* m & (w >> k) in one instruction (GCC makes two of it with m an immediate) */
#define LLM__AND_LSR(k) \
    static inline uint32_t llm__and_lsr##k(uint32_t w, uint32_t m) { \
        uint32_t r; __asm__("and %0, %1, %2, lsr #" #k : "=r"(r) : "r"(m), "r"(w)); return r; }
LLM__AND_LSR(4)
LLM__AND_LSR(8)
LLM__AND_LSR(12)
#undef LLM__AND_LSR
LLM__INLINE int32_t llm__smlad_q4u(uint32_t w, const llm__x16q *p, uint32_t m, int32_t s) {
    s = __smlad(w & m, p->le, s);
    s = __smlad(llm__and_lsr8(w, m), p->lo, s);
    s = __smlad(llm__and_lsr4(w, m), p->he, s);
    return __smlad(llm__and_lsr12(w, m), p->ho, s);
}
/* one group's sums of the blocks' codes q0 and q1 (16 bytes each) */
LLM__INLINE void llm__isum2_q4_0_dsp(int32_t *s, const unsigned char *q0, const unsigned char *q1,
                                     const llm__q4_pairs *xp, uint32_t m) {
    int32_t s0 = 0, s1 = 0;
    LLM__UNROLL for (int k = 0; k < 4; k++) {
        uint32_t w0, w1;
        memcpy(&w0, q0 + 4 * k, 4);
        memcpy(&w1, q1 + 4 * k, 4);
        s0 = llm__smlad_q4u(w0, &xp->p[k], m, s0);
        s1 = llm__smlad_q4u(w1, &xp->p[k], m, s1);
    }
    s[0] = s0 - xp->xsum8; s[1] = s1 - xp->xsum8;
}
/* one token's products by nr rows (rb bytes apart) of q4_0 blocks, G groups */
static void llm__token_q4_0(float *o, const unsigned char *rows, size_t rb, int nr, const int16_t *x, const float *xs,
                            int G) {
    int cg = LLM__DSP_CHUNK / LLM__GQ;
    uint32_t m = 0x000F000Fu;
    llm__q4_pairs xp[LLM__DSP_CHUNK / LLM__GQ];
    for (int g0 = 0; g0 < G; g0 += cg) {
        int g1 = G - g0 < cg ? G : g0 + cg;
        llm__q4_pairs_dsp(xp, x + (size_t)g0 * LLM__GQ, g1 - g0);
        for (int a = 0; a < nr; a += 2) {   /* an odd last row: twice, its twin's sums discarded */
            const unsigned char *r0 = rows + (size_t)a * rb, *r1 = a + 1 < nr ? r0 + rb : r0;
            float a0 = g0 ? o[a] : 0.0f, a1 = g0 && a + 1 < nr ? o[a + 1] : 0.0f;
            for (int g = g0; g < g1; g++) {
                int32_t s[2];
                llm__isum2_q4_0_dsp(s, r0 + (size_t)g * LLM__Q4_0_BYTES + 2, r1 + (size_t)g * LLM__Q4_0_BYTES + 2, xp + (g - g0), m);
                a0 = llm__gstep_q4_0(r0, g, s[0], 0, xs[g], a0);
                a1 = llm__gstep_q4_0(r1, g, s[1], 0, xs[g], a1);
            }
            o[a] = a0;
            if (a + 1 < nr) o[a + 1] = a1;
        }
    }
}
#define LLM__HAVE_BLK_TILE_Q4_0 1
#define LLM__MCU_TILE_Q4_0 1
#endif

#ifdef LLM__MCU_TILE_Q4_0   /* (x86_gguf.h's q4_0 tile is its own) */
/* The q4_0 tile of Helium and of the DSP: token by token, each by the ISA's
 * llm__token_q4_0 over the tile's rows */
LLM__KERNEL void llm__tile_blk_q4_0(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                 const float *xs, int t, int nr, int nc) {
    int n = w->cols, G = n / LLM__GQ;
    const unsigned char *rows = llm__block_row(w, r);
    size_t rb = llm__block_row_bytes(w);
    (void)x;
    for (int b = 0; b < nc; b++)
        llm__token_q4_0(out + (size_t)b * ldo, rows, rb, nr, (const int16_t *)(const void *)xq + (size_t)(t + b) * n,
                        xs + (size_t)(t + b) * G, G);
}
#endif

#if !defined(MODEL_NO_SIMD) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP)
#define LLM__HAVE_ROUND_Q8 1
#define LLM__HAVE_ROUND_Q16 1
/* lroundf(v) for |v| < 2^30 without the library call: t = trunc(2v) by one
 * VCVT to fixed point with one fraction bit (2v is exact, the conversion
 * truncates), then round(v) = (t + (t >= 0)) >> 1 (arithmetic): t = 2k or
 * 2k + 1 for v >= 0 (k + 1 exactly when the dropped fraction is at least
 * one half), and for v < 0 the shift's floor steps away from zero the same
 * way. Exact, so llm__round_q8_ref's and llm__round_q16_ref's codes. */
static inline int32_t llm__lround_m(float v) {
    int32_t t;
    __asm__("vcvt.s32.f32 %0, %0, #1" : "+t"(v));
    memcpy(&t, &v, 4);
    return (t + 1 + (t >> 31)) >> 1;
}
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
/* Helium: the same steps four lanes at a time (its VCVT to fixed point
 * truncates too), the last vector under a predicate */
LLM__INLINE int32x4_t llm__lround4_mve(float32x4_t v) {
    int32x4_t t = vcvtq_n_s32_f32(v, 1);
    return vshrq_n_s32(vaddq_s32(vaddq_n_s32(t, 1), vshrq_n_s32(t, 31)), 1);
}
static void llm__round_q8(int8_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j += 4) {
        mve_pred16_t p = vctp32q((uint32_t)(n - j));
        vstrbq_p_s32(xq + j, llm__lround4_mve(vmulq_n_f32(vldrwq_z_f32(x + j, p), inv)), p);
    }
}
static void llm__round_q16(int16_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j += 4) {
        mve_pred16_t p = vctp32q((uint32_t)(n - j));
        vstrhq_p_s32(xq + j, llm__lround4_mve(vmulq_n_f32(vldrwq_z_f32(x + j, p), inv)), p);
    }
}
#else
static void llm__round_q8(int8_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j++) xq[j] = (int8_t)llm__lround_m(x[j] * inv);
}
static void llm__round_q16(int16_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j++) xq[j] = (int16_t)llm__lround_m(x[j] * inv);
}
#endif
/* simd.h's llm__group_amax in one integer pass, not two float passes (a
 * VCMP and a VMRS a value each): without their sign, finite floats' bits
 * order as their values, and infinity and NaN lie above them all
 * (0x7F800000 and up), so the bits' maximum is both max |x| and whether
 * every x is finite (Helium: four lanes at a time, VMAXV) */
static inline uint32_t llm__amax_bits(const float *x, int n) {
    uint32_t m = 0;
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
    for (int j = 0; j < n; j += 4) {
        uint32x4_t b = vreinterpretq_u32_f32(vldrwq_z_f32(x + j, vctp32q((uint32_t)(n - j))));   /* past n: 0 */
        m = vmaxvq_u32(m, vbicq_n_u32(b, 0x80000000u));
    }
#else
    for (int j = 0; j < n; j++) {
        uint32_t b;
        memcpy(&b, x + j, 4);
        b &= 0x7FFFFFFFu;
        m = b > m ? b : m;
    }
#endif
    return m;
}
#define LLM__HAVE_GROUP_AMAX 1
static inline float llm__group_amax(const float *x, int n) {
    uint32_t m = llm__amax_bits(x, n);
    float amax;
    memcpy(&amax, &m, 4);
    return m < 0x7F800000u ? amax : -1.0f;
}
#endif
