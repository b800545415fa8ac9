/* engine/neon.h -- the AArch64 NEON kernels behind simd.h's mapping macros:
 * f32/f16 vectors of four, q8_0's integer sums by sdot (or widening
 * multiplies), and the int16-coded types' group sums (q4_0, q4_K, q6_K) by
 * widening int16 multiply-adds. */
#if !defined(MODEL_NO_SIMD) && defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define LLM__SIMD "neon"
#define LLM__VL 4
#define LLM__NC 4
typedef float32x4_t llm__vf;
#define llm__vzero() vdupq_n_f32(0.0f)
#define llm__vload(p) vld1q_f32(p)
#define llm__vload_f16(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(p))))
#define llm__vfma(a, b, c) vfmaq_f32(c, a, b)
#define llm__vsum(v) vaddvq_f32(v)
#define llm__vstore(p, v) vst1q_f32(p, v)
#endif

#if defined(LLM__VL) && defined(__ARM_NEON) && defined(__aarch64__)
/* q8_0 (simd.h's llm__tile_q8_pairs): four int32 lanes of each (row, token)
 * pair's integer sum, eight pairs' totals at a time by pairwise adds */
#define LLM__Q8_SIMD 1
typedef int8x16x2_t llm__i8x32;
typedef int32x4_t llm__i32x8;       /* one pair's lanes (four here)      */
typedef float32x4x2_t llm__f32x8;   /* eight pairs' float accumulators   */
#define llm__i32x8_zero() vdupq_n_s32(0)
LLM__INLINE llm__f32x8 llm__f32x8_zero(void) { llm__f32x8 z; z.val[0] = z.val[1] = vdupq_n_f32(0.0f); return z; }
LLM__INLINE void llm__f32x8_store(float *p, llm__f32x8 v) { vst1q_f32(p, v.val[0]); vst1q_f32(p + 4, v.val[1]); }
LLM__INLINE llm__i8x32 llm__i8x32_load(const int8_t *p) { llm__i8x32 v; v.val[0] = vld1q_s8(p); v.val[1] = vld1q_s8(p + 16); return v; }
/* four products per int32 lane: sdot where the CPU has it, else widening multiplies */
LLM__INLINE int32x4_t llm__dot16_i8(int32x4_t acc, int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, x);
#else
    int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));    /* p0+p1, p2+p3, ... */
    int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(w), vget_high_s8(x)));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));                                  /* words 0..3 */
#endif
}
LLM__INLINE llm__i32x8 llm__dot32_i8(llm__i32x8 acc, llm__i8x32 w, llm__i8x32 x) {
    return llm__dot16_i8(llm__dot16_i8(acc, w.val[0], x.val[0]), w.val[1], x.val[1]);
}
/* acc[p] = fma(total of lanes v[p], scale[p], acc[p]) for eight pairs p */
LLM__INLINE llm__f32x8 llm__q8_steps8(llm__f32x8 acc, const int32x4_t *v, const float *scale) {
    int32x4_t t0 = vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
    int32x4_t t1 = vpaddq_s32(vpaddq_s32(v[4], v[5]), vpaddq_s32(v[6], v[7]));
    acc.val[0] = vfmaq_f32(acc.val[0], vcvtq_f32_s32(t0), vld1q_f32(scale));
    acc.val[1] = vfmaq_f32(acc.val[1], vcvtq_f32_s32(t1), vld1q_f32(scale + 4));
    return acc;
}
/* GGUF's q8_0 blocks (ref.h): one group's integer sum by sdot, exact, so
 * the twin's */
#define LLM__HAVE_GG_ISUM 1
LLM__INLINE int32_t llm__gg_isum_q8_0(const unsigned char *b, const int8_t *x) {
    const int8_t *q = (const int8_t *)(const void *)(b + 2);
    return vaddvq_s32(llm__dot32_i8(vdupq_n_s32(0), llm__i8x32_load(q), llm__i8x32_load(x)));
}
#endif

#if defined(LLM__VL) && defined(__ARM_NEON) && defined(__aarch64__)
/* GGUF's K-quants: each group's integer sum (ref.h's llm__gsum_*) with
 * widening int16 multiply-adds, four int32 lanes added at the end; integer
 * sums are exact, so these give the twin's values, and simd.h's tile keeps
 * the twin's float steps along the row. */
#define LLM__HAVE_GG_SUMS 1
/* acc + codes (16, int8 or uint8 widened by the caller) . 16 int16 activations */
LLM__INLINE int32x4_t llm__dot16_i16(int32x4_t acc, int16x8_t lo, int16x8_t hi, const int16_t *x) {
    int16x8_t x0 = vld1q_s16(x), x1 = vld1q_s16(x + 8);
    acc = vmlal_s16(acc, vget_low_s16(lo), vget_low_s16(x0));
    acc = vmlal_high_s16(acc, lo, x0);
    acc = vmlal_s16(acc, vget_low_s16(hi), vget_low_s16(x1));
    return vmlal_high_s16(acc, hi, x1);
}
/* q4_0 group g: its 32 codes less 8 (-8..7) . xq (32) */
LLM__INLINE int32_t llm__gg_sum_q4_0(const unsigned char *row, int g, const int16_t *xq) {
    uint8x16_t b = vld1q_u8(row + (size_t)g * 18 + 2);
    int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), vdupq_n_s8(8));   /* q[0..15]  */
    int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), vdupq_n_s8(8));              /* q[16..31] */
    int32x4_t acc = llm__dot16_i16(vdupq_n_s32(0), vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), xq);
    return vaddvq_s32(llm__dot16_i16(acc, vmovl_s8(vget_low_s8(hi)), vmovl_high_s8(hi), xq + 16));
}
/* q4_K group g: its 32 codes (0..15) . xq (32) */
LLM__INLINE int32_t llm__gg_sum_q4_k(const unsigned char *row, int g, const int16_t *xq) {
    const unsigned char *qs = row + (size_t)(g / 8) * 144 + 16 + 32 * ((g % 8) / 2);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        uint8x16_t b = vld1q_u8(qs + 16 * h);
        uint8x16_t q = g & 1 ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(15));
        acc = llm__dot16_i16(acc, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(q))),
                             vreinterpretq_s16_u16(vmovl_high_u8(q)), xq + 16 * h);
    }
    return vaddvq_s32(acc);
}
/* q6_K group g: sc[2k] (first 16 codes . xq) + sc[2k + 1] (last 16), codes -32..31 */
LLM__INLINE int32_t llm__gg_sum_q6_k(const unsigned char *row, int g, const int16_t *xq) {
    const unsigned char *b = row + (size_t)(g / 8) * 210;
    int k = g % 8, h = k >> 2, c = k & 3;
    int32_t s[2];
    for (int half = 0; half < 2; half++) {
        uint8x16_t lo = vld1q_u8(b + h * 64 + (c & 1) * 32 + 16 * half);
        uint8x16_t hi = vld1q_u8(b + 128 + h * 32 + 16 * half);
        lo = c < 2 ? vandq_u8(lo, vdupq_n_u8(15)) : vshrq_n_u8(lo, 4);
        hi = vandq_u8(vshlq_u8(hi, vdupq_n_s8((int8_t)(-2 * c))), vdupq_n_u8(3));   /* >> 2c */
        int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
        int32x4_t acc = llm__dot16_i16(vdupq_n_s32(0), vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q), xq + 16 * half);
        s[half] = vaddvq_s32(acc);
    }
    return (int32_t)(int8_t)b[192 + 2 * k] * s[0] + (int32_t)(int8_t)b[192 + 2 * k + 1] * s[1];
}
#define llm__gg_sums_q4_0(isum, row, xq, G) for (int g_ = 0; g_ < (G); g_++) (isum)[g_] = llm__gg_sum_q4_0(row, g_, (xq) + (size_t)g_ * LLM__GQ)
#define llm__gg_sums_q4_k(isum, row, xq, G) for (int g_ = 0; g_ < (G); g_++) (isum)[g_] = llm__gg_sum_q4_k(row, g_, (xq) + (size_t)g_ * LLM__GQ)
#define llm__gg_sums_q6_k(isum, row, xq, G) for (int g_ = 0; g_ < (G); g_++) (isum)[g_] = llm__gg_sum_q6_k(row, g_, (xq) + (size_t)g_ * LLM__GQ)
#endif
