/* engine/mcu.h -- the microcontrollers' kernels: Helium (Cortex-M55) behind
 * simd.h's mapping macros, and the DSP extension's SMLAD for the q8_0 lanes
 * (Cortex-M4/M7/M55). */
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

#if defined(__ARM_FEATURE_DSP) && !defined(MODEL_NO_SIMD) && !defined(__aarch64__)
#include <arm_acle.h>
/* the four products of one 32-bit word: two SMLADs (Cortex-M4/M7 DSP) */
static inline int32_t llm__word_sum_i8(const int8_t *w, const int8_t *x) {
    uint32_t a, b;
    memcpy(&a, w, 4);
    memcpy(&b, x, 4);
    uint32_t a8 = (a >> 8) | (a << 24), b8 = (b >> 8) | (b << 24);   /* rotate: bytes 1, 3 into 0, 2 */
    return __smlad(__sxtb16(a8), __sxtb16(b8), __smlad(__sxtb16(a), __sxtb16(b), 0));
}
#define LLM__HAVE_WORD_SUM_I8 1
#endif
