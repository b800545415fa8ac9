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
/* GGUF's q8_0 blocks (ref.h): one group's integer sum, exact, so the twin's */
#define LLM__HAVE_GG_ISUM 1
static inline int32_t llm__gg_isum_q8_0(const unsigned char *b, const int8_t *x) {
    const int8_t *q = (const int8_t *)(const void *)(b + 2);
    return vmladavaq_s8(vmladavq_s8(vld1q_s8(q), vld1q_s8(x)), vld1q_s8(q + 16), vld1q_s8(x + 16));
}
/* q4_0 against int16 activation codes: the codes less 8 as int8, their even
 * and odd lanes widened (VMOVLB, VMOVLT) against x's even and odd halves
 * (VLD2); integer sums are exact, so the twin's */
static inline int32_t llm__gg_isum16_q4_0(const unsigned char *b, const int16_t *x) {
    uint8x16_t qs = vld1q_u8(b + 2);
    int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qs, vdupq_n_u8(15))), vdupq_n_s8(8));   /* q[0..15]  */
    int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qs, 4)), vdupq_n_s8(8));              /* q[16..31] */
    int16x8x2_t xl = vld2q_s16(x), xh = vld2q_s16(x + 16);
    int32_t s = vmladavq_s16(vmovlbq_s8(lo), xl.val[0]);
    s = vmladavaq_s16(s, vmovltq_s8(lo), xl.val[1]);
    s = vmladavaq_s16(s, vmovlbq_s8(hi), xh.val[0]);
    return vmladavaq_s16(s, vmovltq_s8(hi), xh.val[1]);
}
#define llm__gg_sums_q4_0(isum, row, xq, G) \
    LLM__GG_SUMS_EACH(isum, G, llm__gg_isum16_q4_0((row) + (size_t)g_ * 18, (xq) + (size_t)g_ * LLM__GQ))
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
/* q8_0's exact integer sums, four rows at a time sharing each word of x */
#define LLM__HAVE_ISUM4_I8 1
static inline void llm__isum4_i8(int32_t *isum, const int8_t *w, size_t ldw, const int8_t *x, int len) {
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const int8_t *w1 = w + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    int j = 0;
    for (; j + 4 <= len; j += 4) {
        uint32_t b;
        memcpy(&b, x + j, 4);
        uint32_t xe = __sxtb16(b), xo = llm__sxtb16_ror8(b);
        s0 = llm__smlad_word(w + j, xe, xo, s0);
        s1 = llm__smlad_word(w1 + j, xe, xo, s1);
        s2 = llm__smlad_word(w2 + j, xe, xo, s2);
        s3 = llm__smlad_word(w3 + j, xe, xo, s3);
    }
    isum[0] = s0 + llm__isum_i8(w + j, x + j, len - j);
    isum[1] = s1 + llm__isum_i8(w1 + j, x + j, len - j);
    isum[2] = s2 + llm__isum_i8(w2 + j, x + j, len - j);
    isum[3] = s3 + llm__isum_i8(w3 + j, x + j, len - j);
}
/* GGUF's q8_0 blocks (ref.h): one group's integer sum, exact, so the twin's */
#define LLM__HAVE_GG_ISUM 1
static inline int32_t llm__gg_isum_q8_0(const unsigned char *b, const int8_t *x) {
    const int8_t *q = (const int8_t *)(const void *)(b + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; j += 4) {
        uint32_t xw;
        memcpy(&xw, x + j, 4);
        s = llm__smlad_word(q + j, __sxtb16(xw), llm__sxtb16_ror8(xw), s);
    }
    return s;
}
/* q4_0 against int16 activation codes (ref.h): a word of four code bytes
 * holds codes j..j+3 in its low nibbles and j+16..j+19 in its high ones;
 * less 8 (SSUB8, no borrow between bytes) they are int8, and SXTB16 makes
 * the pairs (j, j+2) and (j+1, j+3), so x's pairs are packed to match
 * (PKHBT/PKHTB): le = (x[j], x[j+2]), lo = (x[j+1], x[j+3]), he/ho the same
 * of x[j+16..j+19] */
typedef struct llm__x16q { uint32_t le, lo, he, ho; } llm__x16q;
static inline llm__x16q llm__x16_pairs(const int16_t *x) {   /* x[j..j+3], x[j+16..j+19] */
    uint32_t a, b, c, d;
    memcpy(&a, x, 4); memcpy(&b, x + 2, 4); memcpy(&c, x + 16, 4); memcpy(&d, x + 18, 4);
    llm__x16q p;
    p.le = (a & 0xFFFFu) | (b << 16); p.lo = (b & 0xFFFF0000u) | (a >> 16);   /* PKHBT, PKHTB */
    p.he = (c & 0xFFFFu) | (d << 16); p.ho = (d & 0xFFFF0000u) | (c >> 16);
    return p;
}
static inline int32_t llm__smlad_q4_x16(const unsigned char *q, llm__x16q p, int32_t acc) {
    uint32_t w;
    memcpy(&w, q, 4);
    uint32_t lo = (uint32_t)__ssub8((int8x4_t)(w & 0x0F0F0F0Fu), 0x08080808);
    uint32_t hi = (uint32_t)__ssub8((int8x4_t)((w >> 4) & 0x0F0F0F0Fu), 0x08080808);
    acc = __smlad(__sxtb16(lo), p.le, __smlad(llm__sxtb16_ror8(lo), p.lo, acc));
    return __smlad(__sxtb16(hi), p.he, __smlad(llm__sxtb16_ror8(hi), p.ho, acc));
}
/* na <= 4 rows' q4_0 group sums at once, each word of x packed once for all */
static inline void llm__gg_sums4_q4_0_dsp(int32_t (*isum)[64], const unsigned char *const *rc, int na,
                                          const int16_t *xq, int G) {
    for (int g = 0; g < G; g++) {
        const int16_t *x = xq + (size_t)g * 32;
        int32_t s[4] = { 0, 0, 0, 0 };
        for (int j = 0; j < 16; j += 4) {
            llm__x16q p = llm__x16_pairs(x + j);
            for (int i = 0; i < na; i++) s[i] = llm__smlad_q4_x16(rc[i] + (size_t)g * 18 + 2 + j, p, s[i]);
        }
        for (int i = 0; i < na; i++) isum[i][g] = s[i];
    }
}
#define llm__gg_sums4_q4_0(isum, rc, na, xq, G) llm__gg_sums4_q4_0_dsp(isum, rc, na, xq, G)
#endif

#if !defined(MODEL_NO_SIMD) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP)
#define LLM__HAVE_ROUND_Q8 1
/* llm__round_q8_ref without lroundf's library call: truncate (one VCVT),
 * then step away from zero when the dropped fraction (exact) is at least
 * one half -- x86.h's way, one value at a time */
static void llm__round_q8(int8_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j++) {
        float v = x[j] * inv;
        int32_t q = (int32_t)v;
        float f = v - (float)q;
        xq[j] = (int8_t)(q + (f >= 0.5f) - (f <= -0.5f));
    }
}
#endif
