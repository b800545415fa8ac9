/* engine/neon.h -- the AArch64 NEON kernels behind simd.h's mapping macros:
 * f32/f16 vectors of four, and decode's f32/f16 rows eight side by side;
 * q8_0's integer sums by sdot (or widening multiplies), its 4 x 4 prefill
 * tile by smmla where the CPU has i8mm; GGUF's block types (q8_0, q4_0,
 * q4_K, q6_K, q5_0, q5_1, q5_K, iq4_nl) in tiles of rows side by side, a
 * group's sums for four rows in one vector and one vector step per group,
 * the twins' bits; the other GGUF types run simd.h's generic tile. */
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
#endif


#if defined(LLM__VL) && defined(__ARM_NEON) && defined(__aarch64__)
/* GGUF's block types, tiles of rows side by side (LLMW q8_0's way), four
 * rows a vector: per group, four rows' integer sums in the lanes of one vector
 * (sdot, exact), then one vector step for the four rows,
 *   acc = fma((float)isum, d * xs, acc)
 * lane by lane: ref.h's twin's step, group after group, so the twin's bits.
 * The int16 activations (|x| <= LLM__Q16_MAX) go
 * to sdot as two int8 halves, x = 128 hi + lo (hi = x >> 7 in -128..127,
 * lo = x & 127), split once per token for all the rows:
 * w . x = 128 (w . hi) + (w . lo), exact. A tile of fewer than four rows
 * repeats its last row in the spare lanes and stores only its own. */
#define LLM__HAVE_BLK_TILE_Q8_0 1
#define LLM__HAVE_BLK_TILE_Q4_0 1
#define LLM__HAVE_BLK_TILE_Q4_K 1
#define LLM__HAVE_BLK_TILE_Q6_K 1
#define LLM__HAVE_BLK_TILE_Q5_0 1
#define LLM__HAVE_BLK_TILE_Q5_1 1
#define LLM__HAVE_BLK_TILE_Q5_K 1
#define LLM__HAVE_BLK_TILE_IQ4_NL 1
#define LLM__HAVE_BLK_TILE_Q4_1 1
#define LLM__HAVE_BLK_TILE_IQ4_XS 1
#define LLM__HAVE_BLK_TILE_Q3_K 1
#define LLM__HAVE_BLK_TILE_Q2_K 1
#define LLM__BLK_CHUNK 64   /* groups of 32 per chunk of a row (whole 256-blocks) */

/* the f16 scales at p[0..3] (2-byte aligned) as four f32 lanes, exactly */
LLM__INLINE float32x4_t llm__half4(const unsigned char *const *p, size_t off) {
    uint16x4_t h = vld1_dup_u16((const uint16_t *)(const void *)(p[0] + off));
    h = vld1_lane_u16((const uint16_t *)(const void *)(p[1] + off), h, 1);
    h = vld1_lane_u16((const uint16_t *)(const void *)(p[2] + off), h, 2);
    h = vld1_lane_u16((const uint16_t *)(const void *)(p[3] + off), h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}
/* q4_1's and q5_1's d and m of four rows (f16 pairs at p[i] + off) as two f32 vectors, exactly */
LLM__INLINE void llm__half4_pairs(float32x4_t *d, float32x4_t *m, const unsigned char *const *p, size_t off) {
    uint32x4_t v = vld1q_dup_u32((const uint32_t *)(const void *)(p[0] + off));   /* 4-aligned: 20- and 24-byte blocks in a tensor GGUF aligns to 8 */
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[1] + off), v, 1);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[2] + off), v, 2);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[3] + off), v, 3);
    float16x8_t h = vreinterpretq_f16_u32(v);
    float32x4_t lo = vcvt_f32_f16(vget_low_f16(h)), hi = vcvt_high_f32_f16(h);   /* d0 m0 d1 m1, d2 m2 d3 m3 */
    *d = vuzp1q_f32(lo, hi);
    *m = vuzp2q_f32(lo, hi);
}
/* the lane totals of four rows' accumulators, a row a lane */
LLM__INLINE int32x4_t llm__total4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}
/* 16 codes . (128 hi + lo) as two lane accumulators, the hi one and the lo one */
#define LLM__DOT16_SPLIT(acc_hi, acc_lo, codes, hi, lo) \
    do { acc_hi = llm__dot16_i8(acc_hi, codes, hi); acc_lo = llm__dot16_i8(acc_lo, codes, lo); } while (0)
/* acc + fma step of four rows: isum (lanes), d * xs */
LLM__INLINE float32x4_t llm__blk_step4(float32x4_t acc, int32x4_t isum, float32x4_t d, float xs) {
    return vfmaq_f32(acc, vcvtq_f32_s32(isum), vmulq_n_f32(d, xs));
}

/* One token's int16 codes x (32 cg) split into hi and lo (above), each
 * group's 32 hi then its 32 lo, 64 bytes a group at hl (one pointer for
 * the tiles' loads of both), each group's code sum times mul, xsum[g],
 * and each 16's code sum, xh[2 g] and xh[2 g + 1] (q2_K's mins) */
static void llm__split_q16(int8_t *hl, int32_t *xsum, int32_t *xh, int mul, const int16_t *x, int cg) {
    const int16x8_t low7 = vdupq_n_s16(127);
    for (int g = 0; g < cg; g++) {
        for (int j = 32 * g; j < 32 * g + 32; j += 16) {
            int16x8_t a = vld1q_s16(x + j), b = vld1q_s16(x + j + 8);
            vst1q_s8(hl + 32 * g + j, vcombine_s8(vmovn_s16(vshrq_n_s16(a, 7)), vmovn_s16(vshrq_n_s16(b, 7))));
            vst1q_s8(hl + 32 * g + j + 32, vcombine_s8(vmovn_s16(vandq_s16(a, low7)), vmovn_s16(vandq_s16(b, low7))));
            xh[j / 16] = vaddvq_s32(vpadalq_s16(vpaddlq_s16(a), b));
        }
        xsum[g] = mul * (xh[2 * g] + xh[2 * g + 1]);
    }
}

/* the four rows' accumulators from out (a later chunk) or zero, and back */
LLM__INLINE float32x4_t llm__acc4_load(const float *o, int na, int first) {
    float t[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    if (first) return vdupq_n_f32(0.0f);
    if (na == 4) return vld1q_f32(o);   /* a whole tile: no copy (no call) */
    memcpy(t, o, (size_t)na * sizeof(float));
    return vld1q_f32(t);
}
LLM__INLINE void llm__acc4_store(float *o, int na, float32x4_t acc) {
    float t[4];
    if (na == 4) { vst1q_f32(o, acc); return; }
    vst1q_f32(t, acc);
    memcpy(o, t, (size_t)na * sizeof(float));
}

/* q8_0 and q4_0 take eight rows at a time (two vectors of four), sharing
 * each load of the activations. Their lane accumulators are never reset:
 * a group's sums are the running totals' difference from the last group's
 * (int32 wraps, so the difference is exact), which saves zeroing eight
 * accumulators per group. */
#define LLM__BLK_ROWS8 8
/* the eight rows' accumulators from out (a later chunk) or zero, and back */
LLM__INLINE void llm__acc8_load(float32x4_t *acc, const float *o, int na, int first) {
    float t[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    if (first) { acc[0] = acc[1] = vdupq_n_f32(0.0f); return; }
    if (na == 8) { acc[0] = vld1q_f32(o); acc[1] = vld1q_f32(o + 4); return; }
    memcpy(t, o, (size_t)na * sizeof(float));
    acc[0] = vld1q_f32(t); acc[1] = vld1q_f32(t + 4);
}
LLM__INLINE void llm__acc8_store(float *o, int na, const float32x4_t *acc) {
    float t[8];
    if (na == 8) { vst1q_f32(o, acc[0]); vst1q_f32(o + 4, acc[1]); return; }
    vst1q_f32(t, acc[0]); vst1q_f32(t + 4, acc[1]);
    memcpy(o, t, (size_t)na * sizeof(float));
}
/* q8_0 (34-byte blocks: f16 d, int8 q[32]): eight rows rc of cg groups .
 * the int16 codes x = 128 hi + lo */
static void llm__blk8_q8_0(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const float *xs, int cg, int first) {
    float32x4_t acc[2];
    int32x4_t sh[8], sl[8], prev[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
    llm__acc8_load(acc, o, na, first);
    LLM__UNROLL for (int i = 0; i < 8; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int g = 0; g < cg; g++) {
        int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
        int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
        LLM__UNROLL for (int i = 0; i < 8; i++) {
            const int8_t *q = (const int8_t *)(const void *)(rc[i] + LLM__Q8_0_BYTES * g + 2);
            LLM__DOT16_SPLIT(sh[i], sl[i], vld1q_s8(q), h0, l0);
            LLM__DOT16_SPLIT(sh[i], sl[i], vld1q_s8(q + 16), h1, l1);
        }
        LLM__UNROLL for (int v = 0; v < 2; v++) {
            int32x4_t total = vmlaq_n_s32(llm__total4(sl[4 * v], sl[4 * v + 1], sl[4 * v + 2], sl[4 * v + 3]),
                                          llm__total4(sh[4 * v], sh[4 * v + 1], sh[4 * v + 2], sh[4 * v + 3]), 128);
            acc[v] = llm__blk_step4(acc[v], vsubq_s32(total, prev[v]), llm__half4(rc + 4 * v, (size_t)LLM__Q8_0_BYTES * g), xs[g]);
            prev[v] = total;
        }
    }
    llm__acc8_store(o, na, acc);
}
/* eight rows' nibble products for one group of 32: row i's 16 code bytes
 * at rc[i] + at (low nibbles elements 0..15, high 16..31, codes 0..15)
 * against the group's split activations (hl: 32 hi bytes, then 32 lo),
 * into sh[i] and sl[i] */
LLM__INLINE void llm__nib8_dots(int32x4_t *sh, int32x4_t *sl, const unsigned char *const *rc, size_t at, const int8_t *hl) {
    const uint8x16_t m15 = vdupq_n_u8(15);
    int8x16_t h0 = vld1q_s8(hl), h1 = vld1q_s8(hl + 16), l0 = vld1q_s8(hl + 32), l1 = vld1q_s8(hl + 48);
    LLM__UNROLL for (int i = 0; i < 8; i++) {
        uint8x16_t b = vld1q_u8(rc[i] + at);
        int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(b, m15)), q1 = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
        LLM__DOT16_SPLIT(sh[i], sl[i], q0, h0, l0);
        LLM__DOT16_SPLIT(sh[i], sl[i], q1, h1, l1);
    }
}
/* q4_0 (18-byte blocks: f16 d, 16 bytes of nibbles, code - 8): isum = codes .
 * x - 8 xsum, the codes 0..15 as they are; corr[g] = -8 xsum[g] */
static void llm__blk8_q4_0(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *corr, const float *xs, int cg, int first) {
    float32x4_t acc[2];
    int32x4_t sh[8], sl[8], prev[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
    llm__acc8_load(acc, o, na, first);
    LLM__UNROLL for (int i = 0; i < 8; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int g = 0; g < cg; g++) {
        llm__nib8_dots(sh, sl, rc, (size_t)LLM__Q4_0_BYTES * g + 2, hl + 64 * g);
        int32x4_t c = vld1q_dup_s32(corr + g);
        LLM__UNROLL for (int v = 0; v < 2; v++) {
            int32x4_t total = vmlaq_n_s32(llm__total4(sl[4 * v], sl[4 * v + 1], sl[4 * v + 2], sl[4 * v + 3]),
                                          llm__total4(sh[4 * v], sh[4 * v + 1], sh[4 * v + 2], sh[4 * v + 3]), 128);
            acc[v] = llm__blk_step4(acc[v], vaddq_s32(vsubq_s32(total, prev[v]), c), llm__half4(rc + 4 * v, (size_t)LLM__Q4_0_BYTES * g), xs[g]);
            prev[v] = total;
        }
    }
    llm__acc8_store(o, na, acc);
}
/* q4_1 (20-byte blocks: f16 d, f16 m, 16 bytes of nibbles, codes 0..15 as
 * q4_0's): isum = codes . x, then the twin's two steps, fma(isum, d xs,
 * acc) and fma(sum(x), m xs, acc); xsum[g] = sum(x) */
static void llm__blk8_q4_1(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xsum, const float *xs, int cg, int first) {
    float32x4_t acc[2];
    int32x4_t sh[8], sl[8], prev[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
    llm__acc8_load(acc, o, na, first);
    LLM__UNROLL for (int i = 0; i < 8; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int g = 0; g < cg; g++) {
        llm__nib8_dots(sh, sl, rc, (size_t)LLM__Q4_1_BYTES * g + 4, hl + 64 * g);
        float32x4_t sx = vdupq_n_f32((float)xsum[g]);
        LLM__UNROLL for (int v = 0; v < 2; v++) {
            int32x4_t total = vmlaq_n_s32(llm__total4(sl[4 * v], sl[4 * v + 1], sl[4 * v + 2], sl[4 * v + 3]),
                                          llm__total4(sh[4 * v], sh[4 * v + 1], sh[4 * v + 2], sh[4 * v + 3]), 128);
            float32x4_t d, m;
            llm__half4_pairs(&d, &m, rc + 4 * v, (size_t)LLM__Q4_1_BYTES * g);
            acc[v] = llm__blk_step4(acc[v], vsubq_s32(total, prev[v]), d, xs[g]);
            acc[v] = vfmaq_f32(acc[v], vmulq_n_f32(m, xs[g]), sx);
            prev[v] = total;
        }
    }
    llm__acc8_store(o, na, acc);
}
/* q4_K (144-byte blocks of 8 groups: f16 d, f16 dmin, 12 bytes of 6-bit
 * scales and mins, 128 bytes of nibbles): per group the twin's two steps,
 * fma((float)(sc isum), d xs, acc) then fma((float)(m xsum), -(dmin xs), acc) */
/* q4_K's eight 6-bit scales and mins of four rows' blocks (12 bytes at
 * rc[i] + off), sc[j][i] and mn[j][i] as ref.h's llm__q4_K_scale_min gives
 * them: j < 4: s[j] & 63, s[j + 4] & 63; else (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,
 * (s[j + 4] >> 4) | (s[j] >> 6) << 4; byte lookups per row, then the rows
 * interleaved so that each j is one vector of four */
LLM__INLINE uint8x8_t llm__q4_K_six(uint8x16_t s, const uint8_t *lo_at, const int8_t *lo_shift, const uint8_t *lo_mask,
                                   const uint8_t *hi_at) {
    uint8x8_t lo = vand_u8(vshl_u8(vqtbl1_u8(s, vld1_u8(lo_at)), vld1_s8(lo_shift)), vld1_u8(lo_mask));
    return vorr_u8(lo, vshl_n_u8(vshr_n_u8(vqtbl1_u8(s, vld1_u8(hi_at)), 6), 4));   /* index 255: zero */
}
LLM__INLINE void llm__q4_K_store_rows(int32_t (*out)[4], const uint8x8_t *v) {
    uint8x8_t a = vzip1_u8(v[0], v[1]), b = vzip2_u8(v[0], v[1]), c = vzip1_u8(v[2], v[3]), d = vzip2_u8(v[2], v[3]);
    uint8x8_t t[4];
    t[0] = vreinterpret_u8_u16(vzip1_u16(vreinterpret_u16_u8(a), vreinterpret_u16_u8(c)));   /* j 0, 1 */
    t[1] = vreinterpret_u8_u16(vzip2_u16(vreinterpret_u16_u8(a), vreinterpret_u16_u8(c)));   /* j 2, 3 */
    t[2] = vreinterpret_u8_u16(vzip1_u16(vreinterpret_u16_u8(b), vreinterpret_u16_u8(d)));
    t[3] = vreinterpret_u8_u16(vzip2_u16(vreinterpret_u16_u8(b), vreinterpret_u16_u8(d)));
    for (int k = 0; k < 4; k++) {
        uint16x8_t w = vmovl_u8(t[k]);
        vst1q_s32(out[2 * k], vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))));
        vst1q_s32(out[2 * k + 1], vreinterpretq_s32_u32(vmovl_high_u16(w)));
    }
}
static void llm__q4_K_scales4(int32_t (*sc)[4], int32_t (*mn)[4], const unsigned char *const *rc, size_t off) {
    static const uint8_t sc_at[8] = { 0, 1, 2, 3, 8, 9, 10, 11 }, sc_hi[8] = { 255, 255, 255, 255, 0, 1, 2, 3 };
    static const uint8_t mn_at[8] = { 4, 5, 6, 7, 8, 9, 10, 11 }, mn_hi[8] = { 255, 255, 255, 255, 4, 5, 6, 7 };
    static const uint8_t sc_mask[8] = { 63, 63, 63, 63, 15, 15, 15, 15 }, mn_mask[8] = { 63, 63, 63, 63, 15, 15, 15, 15 };
    static const int8_t no_shift[8] = { 0 }, mn_shift[8] = { 0, 0, 0, 0, -4, -4, -4, -4 };
    uint8x8_t s6[4], m6[4];
    for (int i = 0; i < 4; i++) {
        uint8x16_t s = vld1q_u8(rc[i] + off);   /* 16 bytes, 12 used: inside the block */
        s6[i] = llm__q4_K_six(s, sc_at, no_shift, sc_mask, sc_hi);
        m6[i] = llm__q4_K_six(s, mn_at, mn_shift, mn_mask, mn_hi);
    }
    llm__q4_K_store_rows(sc, s6);
    llm__q4_K_store_rows(mn, m6);
}
static void llm__blk4_q4_K(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xsum, const float *xs, int cg, int first) {
    float32x4_t acc = llm__acc4_load(o, na, first);
    const uint8x16_t m15 = vdupq_n_u8(15);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__Q4_K_BYTES;
        int32_t sc[8][4], mn[8][4];
        llm__q4_K_scales4(sc, mn, rc, at + 4);
        float32x4_t d = llm__half4(rc, at), dmin = llm__half4(rc, at + 2);
        for (int p = 0; p < 4; p++) {   /* groups k0 + 2p (low nibbles) and k0 + 2p + 1 (high) */
            int32x4_t sh[2][4], sl[2][4];
            const int8_t *xg = hl + 64 * (k0 + 2 * p);   /* the two groups' hi and lo */
            int8x16_t h0 = vld1q_s8(xg), h1 = vld1q_s8(xg + 16), h2 = vld1q_s8(xg + 64), h3 = vld1q_s8(xg + 80);
            int8x16_t l0 = vld1q_s8(xg + 32), l1 = vld1q_s8(xg + 48), l2 = vld1q_s8(xg + 96), l3 = vld1q_s8(xg + 112);
            LLM__UNROLL for (int i = 0; i < 4; i++) {
                const unsigned char *q = rc[i] + at + 16 + 32 * p;
                uint8x16_t b0 = vld1q_u8(q), b1 = vld1q_u8(q + 16);
                sh[0][i] = sl[0][i] = sh[1][i] = sl[1][i] = vdupq_n_s32(0);
                LLM__DOT16_SPLIT(sh[0][i], sl[0][i], vreinterpretq_s8_u8(vandq_u8(b0, m15)), h0, l0);
                LLM__DOT16_SPLIT(sh[0][i], sl[0][i], vreinterpretq_s8_u8(vandq_u8(b1, m15)), h1, l1);
                LLM__DOT16_SPLIT(sh[1][i], sl[1][i], vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), h2, l2);
                LLM__DOT16_SPLIT(sh[1][i], sl[1][i], vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), h3, l3);
            }
            for (int e = 0; e < 2; e++) {
                int g = k0 + 2 * p + e, j = 2 * p + e;
                int32x4_t isum = vmlaq_n_s32(llm__total4(sl[e][0], sl[e][1], sl[e][2], sl[e][3]),
                                             llm__total4(sh[e][0], sh[e][1], sh[e][2], sh[e][3]), 128);
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vmulq_s32(vld1q_s32(sc[j]), isum)), vmulq_n_f32(d, xs[g]));
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vmulq_n_s32(vld1q_s32(mn[j]), xsum[g])), vnegq_f32(vmulq_n_f32(dmin, xs[g])));
            }
        }
    }
    llm__acc4_store(o, na, acc);
}
/* q6_K (210-byte blocks of 8 groups: ql[128], qh[64], int8 sc[16], f16 d):
 * group k = 4h + c takes, for l < 32, ql[64h + 32(c & 1) + l]'s low (c < 2)
 * or high nibble and bits 2c, 2c + 1 of qh[32h + l], less 32; its isum is
 * sc[2k] (first 16 . x) + sc[2k + 1] (last 16 . x) */
LLM__INLINE int8x16_t llm__q6_K_codes16(const unsigned char *b, int h, int c, int l0) {
    uint8x16_t ql = vld1q_u8(b + 64 * h + 32 * (c & 1) + l0), qh = vld1q_u8(b + 128 + 32 * h + l0);
    uint8x16_t q;
    switch (c) {
    case 0: q = vandq_u8(vsliq_n_u8(ql, qh, 4), vdupq_n_u8(63)); break;
    case 1: q = vandq_u8(vsliq_n_u8(ql, vshrq_n_u8(qh, 2), 4), vdupq_n_u8(63)); break;
    case 2: q = vandq_u8(vsliq_n_u8(vshrq_n_u8(ql, 4), vshrq_n_u8(qh, 4), 4), vdupq_n_u8(63)); break;
    default: q = vsliq_n_u8(vshrq_n_u8(ql, 4), vshrq_n_u8(qh, 6), 4); break;
    }
    return vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(32));
}
static void llm__blk4_q6_K(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const float *xs, int cg, int first) {
    float32x4_t acc = llm__acc4_load(o, na, first);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__Q6_K_BYTES;
        int32_t sc[16][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 16; j++) sc[j][i] = (int8_t)rc[i][at + 192 + j];
        float32x4_t d = llm__half4(rc, at + 208);
        for (int k = 0; k < 8; k++) {
            int h = k >> 2, c = k & 3, g = k0 + k;
            int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
            int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
            int32x4_t sh[2][4], sl[2][4];
            LLM__UNROLL for (int i = 0; i < 4; i++) {
                sh[0][i] = sl[0][i] = sh[1][i] = sl[1][i] = vdupq_n_s32(0);
                LLM__DOT16_SPLIT(sh[0][i], sl[0][i], llm__q6_K_codes16(rc[i] + at, h, c, 0), h0, l0);
                LLM__DOT16_SPLIT(sh[1][i], sl[1][i], llm__q6_K_codes16(rc[i] + at, h, c, 16), h1, l1);
            }
            int32x4_t s0 = vmlaq_n_s32(llm__total4(sl[0][0], sl[0][1], sl[0][2], sl[0][3]),
                                       llm__total4(sh[0][0], sh[0][1], sh[0][2], sh[0][3]), 128);
            int32x4_t s1 = vmlaq_n_s32(llm__total4(sl[1][0], sl[1][1], sl[1][2], sl[1][3]),
                                       llm__total4(sh[1][0], sh[1][1], sh[1][2], sh[1][3]), 128);
            int32x4_t isum = vmlaq_s32(vmulq_s32(vld1q_s32(sc[2 * k]), s0), vld1q_s32(sc[2 * k + 1]), s1);
            acc = llm__blk_step4(acc, isum, d, xs[g]);
        }
    }
    llm__acc4_store(o, na, acc);
}

/* q5_0, q5_1 and iq4_nl (32-element blocks, q4_0's nibble order: element j
 * < 16 the low nibble of qs[j], j + 16 its high one), four rows at a time
 * (eight spill the lane totals to the stack), the lane totals running on
 * as q4_0's. Each block's 32 codes as int8, two vectors (elements 0..15
 * and 16..31):
 *   q5_0 (22 bytes: f16 d, qh[4], qs[16]) and q5_1 (24 bytes: f16 d, f16 m,
 *        qh[4], qs[16]): the code less 16, nibble + 16 (bit j of qh) - 16,
 *        is the nibble where bit j is set and the nibble | 0xF0 (as int8,
 *        the nibble - 16) where it is clear: the nibble's four bits under
 *        the high four of a mask all ones where the bit is clear
 *        (llm__q5_low and _high, one instruction each). The mask: the
 *        inverted qh spread a byte over eight lanes (tbl), each lane testing
 *        its own bit (cmtst). q5_0's isum is that sum; q5_1's codes are 16
 *        more, so its isum adds 16 sum(x), exact;
 *   iq4_nl (18 bytes: f16 d, qs[16]): the table's value for the nibble
 *        (-127..113) by one tbl.
 * The steps are the twin's: acc = fma(isum, d xs, acc), and for q5_1 then
 * acc = fma(sum(x), m xs, acc), four rows a vector. */
enum { LLM__B32_Q5_0, LLM__B32_Q5_1, LLM__B32_IQ4_NL };
/* the code less 16 from the low (high) nibble of b and a mask all ones where
 * the 5th bit is clear: the nibble in the low four bits, the mask's in the
 * high four (one bit-select; for the high nibble one shift-right-and-insert) */
LLM__INLINE uint8x16_t llm__q5_low(uint8x16_t b, uint8x16_t clear) { return vbslq_u8(vdupq_n_u8(15), b, clear); }
LLM__INLINE uint8x16_t llm__q5_high(uint8x16_t b, uint8x16_t clear) { return vsriq_n_u8(clear, b, 4); }
/* a q5_0/q5_1 block's codes less 16 (-16..15): qh's 4 bytes at hb (16
 * loaded, inside the block), qs at qs */
LLM__INLINE void llm__q5_codes(int8x16_t *q0, int8x16_t *q1, const unsigned char *hb, const unsigned char *qs,
                               uint8x16_t idx0, uint8x16_t idx1, uint8x16_t bit) {
    uint8x16_t clear = vmvnq_u8(vld1q_u8(hb)), b = vld1q_u8(qs);
    *q0 = vreinterpretq_s8_u8(llm__q5_low(b, vtstq_u8(vqtbl1q_u8(clear, idx0), bit)));
    *q1 = vreinterpretq_s8_u8(llm__q5_high(b, vtstq_u8(vqtbl1q_u8(clear, idx1), bit)));
}
/* four rows rc of cg groups . x (hi, lo), the lane totals running on */
LLM__INLINE void llm__blk4_b32(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                              const int32_t *xsum, const float *xs, int cg, int first, int kind) {
    static const uint8_t idx[32] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3 };
    static const uint8_t bits[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const size_t bytes = kind == LLM__B32_Q5_0 ? LLM__Q5_0_BYTES : kind == LLM__B32_Q5_1 ? LLM__Q5_1_BYTES : LLM__IQ4_NL_BYTES;
    const size_t qs_at = kind == LLM__B32_Q5_0 ? 6 : kind == LLM__B32_Q5_1 ? 8 : 2, qh_at = qs_at - 4;
    const uint8x16_t m15 = vdupq_n_u8(15), idx0 = vld1q_u8(idx), idx1 = vld1q_u8(idx + 16), bit = vld1q_u8(bits);
    const int8x16_t kv = vld1q_s8(llm__iq4_values);
    float32x4_t acc = llm__acc4_load(o, na, first);
    int32x4_t sh[4], sl[4], prev = vdupq_n_s32(0);
    LLM__UNROLL for (int i = 0; i < 4; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int g = 0; g < cg; g++) {
        int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
        int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
        LLM__UNROLL for (int i = 0; i < 4; i++) {
            const unsigned char *b = rc[i] + bytes * g;
            int8x16_t q0, q1;
            if (kind == LLM__B32_IQ4_NL) {
                uint8x16_t qs = vld1q_u8(b + qs_at);
                q0 = vqtbl1q_s8(kv, vandq_u8(qs, m15));
                q1 = vqtbl1q_s8(kv, vshrq_n_u8(qs, 4));
            } else {
                llm__q5_codes(&q0, &q1, b + qh_at, b + qs_at, idx0, idx1, bit);
            }
            LLM__DOT16_SPLIT(sh[i], sl[i], q0, h0, l0);
            LLM__DOT16_SPLIT(sh[i], sl[i], q1, h1, l1);
        }
        int32x4_t total = vmlaq_n_s32(llm__total4(sl[0], sl[1], sl[2], sl[3]), llm__total4(sh[0], sh[1], sh[2], sh[3]), 128);
        int32x4_t isum = vsubq_s32(total, prev);
        prev = total;
        if (kind == LLM__B32_Q5_1) {
            float32x4_t d, m;
            llm__half4_pairs(&d, &m, rc, bytes * g);
            acc = llm__blk_step4(acc, vaddq_s32(isum, vdupq_n_s32(16 * xsum[g])), d, xs[g]);
            acc = vfmaq_f32(acc, vmulq_n_f32(m, xs[g]), vdupq_n_f32((float)xsum[g]));
        } else {
            acc = llm__blk_step4(acc, isum, llm__half4(rc, bytes * g), xs[g]);
        }
    }
    llm__acc4_store(o, na, acc);
}
static void llm__blk4_q5_0(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xsum, const float *xs, int cg, int first) {
    llm__blk4_b32(o, na, rc, hl, xsum, xs, cg, first, LLM__B32_Q5_0);
}
static void llm__blk4_q5_1(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xsum, const float *xs, int cg, int first) {
    llm__blk4_b32(o, na, rc, hl, xsum, xs, cg, first, LLM__B32_Q5_1);
}
static void llm__blk4_iq4_nl(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                            const int32_t *xsum, const float *xs, int cg, int first) {
    llm__blk4_b32(o, na, rc, hl, xsum, xs, cg, first, LLM__B32_IQ4_NL);
}
/* q5_K (176-byte blocks of 8 groups: f16 d, f16 dmin, 12 bytes of scales
 * and mins as q4_K's, qh[32], qs[128]): group j's element l is q4_K's
 * nibble (qs[32 (j / 2) + l], low for even j) + 16 (bit j of qh[l]) (0..31).
 * As q5_0's, the code less 16 is the nibble joined to a mask all ones
 * where the bit is clear (the inverted qh, once per block, cmtst with bit
 * j), so a group's sum s = (codes - 16) . x + 16 sum(x), exact; the lane
 * totals run on as q5_0's. Then per group q4_K's two steps,
 * fma((float)(sc s), d xs, acc) then fma((float)(m sum(x)), -(dmin xs),
 * acc): the twin's */
static void llm__blk4_q5_K(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xsum, const float *xs, int cg, int first) {
    float32x4_t acc = llm__acc4_load(o, na, first);
    int32x4_t sh[4], sl[4], prev = vdupq_n_s32(0);
    LLM__UNROLL for (int i = 0; i < 4; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__Q5_K_BYTES;
        int32_t sc[8][4], mn[8][4];
        llm__q4_K_scales4(sc, mn, rc, at + 4);
        float32x4_t d = llm__half4(rc, at), dmin = llm__half4(rc, at + 2);
        uint8x16_t clear[4][2];   /* each row's qh inverted: all ones where a bit is clear */
        LLM__UNROLL for (int i = 0; i < 4; i++) {
            clear[i][0] = vmvnq_u8(vld1q_u8(rc[i] + at + 16));
            clear[i][1] = vmvnq_u8(vld1q_u8(rc[i] + at + 32));
        }
        for (int p = 0; p < 4; p++) {   /* groups k0 + 2p (low nibbles, bit 2p) and k0 + 2p + 1 (high, bit 2p + 1) */
            LLM__UNROLL for (int e = 0; e < 2; e++) {
                int j = 2 * p + e, g = k0 + j;
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j));
                int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
                int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
                LLM__UNROLL for (int i = 0; i < 4; i++) {
                    const unsigned char *q = rc[i] + at + 48 + 32 * p;
                    uint8x16_t b0 = vld1q_u8(q), b1 = vld1q_u8(q + 16), c0, c1;
                    if (e) {
                        c0 = llm__q5_high(b0, vtstq_u8(clear[i][0], bit));
                        c1 = llm__q5_high(b1, vtstq_u8(clear[i][1], bit));
                    } else {
                        c0 = llm__q5_low(b0, vtstq_u8(clear[i][0], bit));
                        c1 = llm__q5_low(b1, vtstq_u8(clear[i][1], bit));
                    }
                    LLM__DOT16_SPLIT(sh[i], sl[i], vreinterpretq_s8_u8(c0), h0, l0);
                    LLM__DOT16_SPLIT(sh[i], sl[i], vreinterpretq_s8_u8(c1), h1, l1);
                }
                int32x4_t total = vmlaq_n_s32(llm__total4(sl[0], sl[1], sl[2], sl[3]), llm__total4(sh[0], sh[1], sh[2], sh[3]), 128);
                int32x4_t s = vaddq_s32(vsubq_s32(total, prev), vdupq_n_s32(16 * xsum[g]));
                prev = total;
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vmulq_s32(vld1q_s32(sc[j]), s)), vmulq_n_f32(d, xs[g]));
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vmulq_n_s32(vld1q_s32(mn[j]), xsum[g])), vnegq_f32(vmulq_n_f32(dmin, xs[g])));
            }
        }
    }
    llm__acc4_store(o, na, acc);
}

/* iq4_xs (136-byte blocks of 8 groups: f16 d, u16 scales_h, scales_l[4],
 * qs[128]): group j's codes are iq4_nl's (one tbl from the nibbles at
 * qs + 16 j), its scale ls - 32 with ls = (scales_l[j / 2] >> 4 (j & 1)) & 15
 * | ((scales_h >> 2 j) & 3) << 4; the lane totals run on as iq4_nl's; per
 * group the twin's step fma((float)((ls - 32) s), d xs, acc) */
/* the eight ls of four rows' blocks at rc[i] + off, sc[j][i] (byte lookups
 * and per-lane shifts on the block's first 8 bytes) */
static void llm__iq4_xs_scales4(int32_t (*sc)[4], const unsigned char *const *rc, size_t off) {
    static const uint8_t lo_at[8] = { 4, 4, 5, 5, 6, 6, 7, 7 }, hi_at[8] = { 2, 2, 2, 2, 3, 3, 3, 3 };
    static const int8_t lo_shift[8] = { 0, -4, 0, -4, 0, -4, 0, -4 }, hi_shift[8] = { 0, -2, -4, -6, 0, -2, -4, -6 };
    uint8x8_t ls[4];
    for (int i = 0; i < 4; i++) {
        uint8x8_t b = vld1_u8(rc[i] + off);
        uint8x8_t l = vand_u8(vshl_u8(vtbl1_u8(b, vld1_u8(lo_at)), vld1_s8(lo_shift)), vdup_n_u8(15));
        uint8x8_t h = vand_u8(vshl_u8(vtbl1_u8(b, vld1_u8(hi_at)), vld1_s8(hi_shift)), vdup_n_u8(3));
        ls[i] = vorr_u8(l, vshl_n_u8(h, 4));
    }
    llm__q4_K_store_rows(sc, ls);
}
static void llm__blk4_iq4_xs(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                            const float *xs, int cg, int first) {
    const uint8x16_t m15 = vdupq_n_u8(15);
    const int8x16_t kv = vld1q_s8(llm__iq4_values);
    float32x4_t acc = llm__acc4_load(o, na, first);
    int32x4_t sh[4], sl[4], prev = vdupq_n_s32(0);
    LLM__UNROLL for (int i = 0; i < 4; i++) sh[i] = sl[i] = vdupq_n_s32(0);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__IQ4_XS_BYTES;
        int32_t sc[8][4];
        llm__iq4_xs_scales4(sc, rc, at);
        float32x4_t d = llm__half4(rc, at);
        for (int j = 0; j < 8; j++) {
            int g = k0 + j;
            int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
            int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
            LLM__UNROLL for (int i = 0; i < 4; i++) {
                uint8x16_t qs = vld1q_u8(rc[i] + at + 8 + 16 * j);
                LLM__DOT16_SPLIT(sh[i], sl[i], vqtbl1q_s8(kv, vandq_u8(qs, m15)), h0, l0);
                LLM__DOT16_SPLIT(sh[i], sl[i], vqtbl1q_s8(kv, vshrq_n_u8(qs, 4)), h1, l1);
            }
            int32x4_t total = vmlaq_n_s32(llm__total4(sl[0], sl[1], sl[2], sl[3]), llm__total4(sh[0], sh[1], sh[2], sh[3]), 128);
            int32x4_t s = vsubq_s32(total, prev);
            prev = total;
            acc = llm__blk_step4(acc, vmulq_s32(vsubq_s32(vld1q_s32(sc[j]), vdupq_n_s32(32)), s), d, xs[g]);
        }
    }
    llm__acc4_store(o, na, acc);
}

/* q3_K (110-byte blocks of 8 groups: hmask[32], qs[64], 12 bytes of
 * sixteen 6-bit scales, f16 d) and q2_K (84 bytes: sc[16], qs[64], f16 d,
 * f16 dmin): group k = 4h + j takes, for l < 32, the two bits (qs[32h + l]
 * >> 2j) & 3; q3_K's code is that less 4 where bit 4h + j of hmask[l] is
 * clear: the two bits under a mask all ones where the bit is clear (one
 * bit-select, as q5_0's); q2_K's is the two bits, 0..3. Each 16 of a group
 * has its own scale, so four rows' sums of each half run on in their own
 * lane accumulators (the running totals as q5_0's), and per group
 *   q3_K: isum = (sc[2k] - 32) s0 + (sc[2k + 1] - 32) s1, fma(isum, d xs, acc)
 *   q2_K: isum = (sc[2k] & 15) s0 + (sc[2k + 1] & 15) s1, fma(isum, d xs, acc),
 *         msum = (sc[2k] >> 4) sum0(x) + (sc[2k + 1] >> 4) sum1(x),
 *         fma(msum, -(dmin xs), acc)
 * the twin's steps, four rows a vector; a half's sum(x) from the token's
 * split (llm__split_q16's xh, once for all the rows) */
/* q3_K's sixteen 6-bit scales (before the - 32) of four rows, sc[i][row]:
 * lookups in the 16 bytes at off + 94 (the block's last 16: scale byte
 * s[k] is lane k + 2) */
static void llm__q3_K_scales4(int32_t (*sc)[4], const unsigned char *const *rc, size_t off) {
    static const uint8_t lo_at[16] = { 2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9 };
    static const uint8_t hi_at[16] = { 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13 };
    static const int8_t lo_shift[16] = { 0, 0, 0, 0, 0, 0, 0, 0, -4, -4, -4, -4, -4, -4, -4, -4 };
    static const int8_t hi_shift[16] = { 0, 0, 0, 0, -2, -2, -2, -2, -4, -4, -4, -4, -6, -6, -6, -6 };
    uint8x8_t a[4], b[4];
    for (int i = 0; i < 4; i++) {
        uint8x16_t v = vld1q_u8(rc[i] + off + 94);
        uint8x16_t l = vandq_u8(vshlq_u8(vqtbl1q_u8(v, vld1q_u8(lo_at)), vld1q_s8(lo_shift)), vdupq_n_u8(15));
        uint8x16_t h = vandq_u8(vshlq_u8(vqtbl1q_u8(v, vld1q_u8(hi_at)), vld1q_s8(hi_shift)), vdupq_n_u8(3));
        uint8x16_t s6 = vorrq_u8(l, vshlq_n_u8(h, 4));
        a[i] = vget_low_u8(s6);
        b[i] = vget_high_u8(s6);
    }
    llm__q4_K_store_rows(sc, a);
    llm__q4_K_store_rows(sc + 8, b);
}
/* the two halves' running totals of four rows, less the last group's */
LLM__INLINE int32x4_t llm__half_sums(const int32x4_t *sh, const int32x4_t *sl, int32x4_t *prev) {
    int32x4_t total = vmlaq_n_s32(llm__total4(sl[0], sl[1], sl[2], sl[3]), llm__total4(sh[0], sh[1], sh[2], sh[3]), 128);
    int32x4_t s = vsubq_s32(total, *prev);
    *prev = total;
    return s;
}
static void llm__blk4_q3_K(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const float *xs, int cg, int first) {
    const uint8x16_t low2 = vdupq_n_u8(3);
    float32x4_t acc = llm__acc4_load(o, na, first);
    int32x4_t sh[2][4], sl[2][4], prev[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
    LLM__UNROLL for (int i = 0; i < 4; i++) sh[0][i] = sl[0][i] = sh[1][i] = sl[1][i] = vdupq_n_s32(0);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__Q3_K_BYTES;
        int32_t sc[16][4];
        llm__q3_K_scales4(sc, rc, at);
        float32x4_t d = llm__half4(rc, at + 108);
        const int32x4_t off32 = vdupq_n_s32(32);
        for (int k = 0; k < 8; k++) {
            int h = k >> 2, j = k & 3, g = k0 + k;
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j)));
            const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
            int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
            int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
            LLM__UNROLL for (int i = 0; i < 4; i++) {
                const unsigned char *b = rc[i] + at;
                uint8x16_t q0 = vshlq_u8(vld1q_u8(b + 32 + 32 * h), shift), q1 = vshlq_u8(vld1q_u8(b + 48 + 32 * h), shift);
                uint8x16_t c0 = vbslq_u8(low2, q0, vtstq_u8(vmvnq_u8(vld1q_u8(b)), bit));
                uint8x16_t c1 = vbslq_u8(low2, q1, vtstq_u8(vmvnq_u8(vld1q_u8(b + 16)), bit));
                LLM__DOT16_SPLIT(sh[0][i], sl[0][i], vreinterpretq_s8_u8(c0), h0, l0);
                LLM__DOT16_SPLIT(sh[1][i], sl[1][i], vreinterpretq_s8_u8(c1), h1, l1);
            }
            int32x4_t s0 = llm__half_sums(sh[0], sl[0], &prev[0]), s1 = llm__half_sums(sh[1], sl[1], &prev[1]);
            int32x4_t isum = vmlaq_s32(vmulq_s32(vsubq_s32(vld1q_s32(sc[2 * k]), off32), s0),
                                       vsubq_s32(vld1q_s32(sc[2 * k + 1]), off32), s1);
            acc = llm__blk_step4(acc, isum, d, xs[g]);
        }
    }
    llm__acc4_store(o, na, acc);
}
static void llm__blk4_q2_K(float *o, int na, const unsigned char *const *rc, const int8_t *hl,
                          const int32_t *xh, const float *xs, int cg, int first) {
    const uint8x16_t low2 = vdupq_n_u8(3), m15 = vdupq_n_u8(15);
    float32x4_t acc = llm__acc4_load(o, na, first);
    int32x4_t sh[2][4], sl[2][4], prev[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
    LLM__UNROLL for (int i = 0; i < 4; i++) sh[0][i] = sl[0][i] = sh[1][i] = sl[1][i] = vdupq_n_s32(0);
    for (int k0 = 0; k0 < cg; k0 += 8) {
        size_t at = (size_t)(k0 / 8) * LLM__Q2_K_BYTES;
        int32_t sc[16][4], mn[16][4];
        uint8x8_t a[4], b[4], am[4], bm[4];
        for (int i = 0; i < 4; i++) {
            uint8x16_t v = vld1q_u8(rc[i] + at), s4 = vandq_u8(v, m15), m4 = vshrq_n_u8(v, 4);
            a[i] = vget_low_u8(s4); b[i] = vget_high_u8(s4); am[i] = vget_low_u8(m4); bm[i] = vget_high_u8(m4);
        }
        llm__q4_K_store_rows(sc, a); llm__q4_K_store_rows(sc + 8, b);
        llm__q4_K_store_rows(mn, am); llm__q4_K_store_rows(mn + 8, bm);
        float32x4_t d = llm__half4(rc, at + 80), dmin = llm__half4(rc, at + 82);
        for (int k = 0; k < 8; k++) {
            int h = k >> 2, j = k & 3, g = k0 + k;
            const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
            int8x16_t h0 = vld1q_s8(hl + 64 * g), h1 = vld1q_s8(hl + 64 * g + 16);
            int8x16_t l0 = vld1q_s8(hl + 64 * g + 32), l1 = vld1q_s8(hl + 64 * g + 48);
            int32_t sx0 = xh[2 * g], sx1 = xh[2 * g + 1];   /* the halves' code sums */
            LLM__UNROLL for (int i = 0; i < 4; i++) {
                const unsigned char *q = rc[i] + at + 16 + 32 * h;
                uint8x16_t c0 = vandq_u8(vshlq_u8(vld1q_u8(q), shift), low2), c1 = vandq_u8(vshlq_u8(vld1q_u8(q + 16), shift), low2);
                LLM__DOT16_SPLIT(sh[0][i], sl[0][i], vreinterpretq_s8_u8(c0), h0, l0);
                LLM__DOT16_SPLIT(sh[1][i], sl[1][i], vreinterpretq_s8_u8(c1), h1, l1);
            }
            int32x4_t s0 = llm__half_sums(sh[0], sl[0], &prev[0]), s1 = llm__half_sums(sh[1], sl[1], &prev[1]);
            int32x4_t isum = vmlaq_s32(vmulq_s32(vld1q_s32(sc[2 * k]), s0), vld1q_s32(sc[2 * k + 1]), s1);
            int32x4_t msum = vmlaq_n_s32(vmulq_n_s32(vld1q_s32(mn[2 * k]), sx0), vld1q_s32(mn[2 * k + 1]), sx1);
            acc = llm__blk_step4(acc, isum, d, xs[g]);
            acc = vfmsq_f32(acc, vcvtq_f32_s32(msum), vmulq_n_f32(dmin, xs[g]));   /* fma(msum, -(dmin xs), acc) */
        }
    }
    llm__acc4_store(o, na, acc);
}

/* The traits' tiles: token by token, a chunk of up to 64 groups of the
 * token's activations (split once for int16) against every eight (q8_0,
 * q4_0) or four rows (the others, whose codes and sums need more
 * registers);
 * out holds each row's accumulator between chunks. */
#define LLM__NEON_BLK_TILE(name, act_t, q16, xsum_mul, rows, call)                                                                \
    LLM__KERNEL void llm__tile_blk_##name(float *out, int ldo, const llm_tensor *w, int r, const float *x,               \
                                       const int8_t *xq, const float *xs, int t, int nr, int nc) {               \
        int n = w->cols, G = n / LLM__GQ;                                                                        \
        size_t chunk_bytes = (size_t)(LLM__BLK_CHUNK * LLM__GQ / llm__traits[w->type].qblock) *                  \
                             (size_t)llm__traits[w->type].qblock_bytes;                                          \
        int8_t hl[q16 ? 2 * LLM__BLK_CHUNK * LLM__GQ : 1];                                                    \
        int32_t xsum[LLM__BLK_CHUNK], xh[2 * LLM__BLK_CHUNK];                                                      \
        (void)x; (void)hl; (void)xsum; (void)xh;                                                                  \
        for (int b = 0; b < nc; b++) {                                                                           \
            const act_t *xb = (const act_t *)(const void *)xq + (size_t)(t + b) * n;                             \
            const float *sb = xs + (size_t)(t + b) * G;                                                          \
            float *o = out + (size_t)b * ldo;                                                                    \
            for (int c0 = 0; c0 < G; c0 += LLM__BLK_CHUNK) {                                                      \
                int cg = G - c0 < LLM__BLK_CHUNK ? G - c0 : LLM__BLK_CHUNK;                                        \
                const act_t *xc = xb + (size_t)c0 * LLM__GQ;                                                     \
                if (q16) llm__split_q16(hl, xsum, xh, xsum_mul, (const int16_t *)(const void *)xc, cg);                \
                for (int a0 = 0; a0 < nr; a0 += rows) {                                                          \
                    int na = nr - a0 < rows ? nr - a0 : rows;                                                    \
                    const unsigned char *rc[rows];                                                               \
                    for (int i = 0; i < rows; i++)                                                               \
                        rc[i] = llm__block_row(w, r + a0 + (i < na ? i : na - 1)) + (size_t)(c0 / LLM__BLK_CHUNK) * chunk_bytes; \
                    call;                                                                                        \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }
LLM__NEON_BLK_TILE(q8_0, int16_t, 1, 0, 8, llm__blk8_q8_0(o + a0, na, rc, hl, sb + c0, cg, c0 == 0))
#if defined(__ARM_FEATURE_DOTPROD)   /* q4_0's, iq4_nl's and q4_K's tiles read panels too (below), else these */
LLM__NEON_BLK_TILE(q4_0_file, int16_t, 1, -8, 8, llm__blk8_q4_0(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(iq4_nl_file, int16_t, 1, 0, 4, llm__blk4_iq4_nl(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q4_K_file, int16_t, 1, 1, 4, llm__blk4_q4_K(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
#else
LLM__NEON_BLK_TILE(q4_K, int16_t, 1, 1, 4, llm__blk4_q4_K(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q4_0, int16_t, 1, -8, 8, llm__blk8_q4_0(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(iq4_nl, int16_t, 1, 0, 4, llm__blk4_iq4_nl(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
#endif
LLM__NEON_BLK_TILE(q6_K, int16_t, 1, 0, 4, llm__blk4_q6_K(o + a0, na, rc, hl, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q5_0, int16_t, 1, 0, 4, llm__blk4_q5_0(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q5_1, int16_t, 1, 1, 4, llm__blk4_q5_1(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q4_1, int16_t, 1, 1, 8, llm__blk8_q4_1(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q5_K, int16_t, 1, 1, 4, llm__blk4_q5_K(o + a0, na, rc, hl, xsum, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(iq4_xs, int16_t, 1, 0, 4, llm__blk4_iq4_xs(o + a0, na, rc, hl, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q3_K, int16_t, 1, 0, 4, llm__blk4_q3_K(o + a0, na, rc, hl, sb + c0, cg, c0 == 0))
LLM__NEON_BLK_TILE(q2_K, int16_t, 1, 0, 4, llm__blk4_q2_K(o + a0, na, rc, hl, xh, sb + c0, cg, c0 == 0))
#undef LLM__NEON_BLK_TILE

#if defined(__ARM_FEATURE_DOTPROD)
/* q4_0 and iq4_nl from panels of four rows, repacked at load (llm_repack;
 * NEON's own layout, not x86's: repack.h asks llm__neon_repacks and the
 * two functions after it). A panel holds rows 4p .. 4p + 3, block after
 * block, 80 bytes a block: the four rows' d as f32 (16 bytes, row i's at
 * 4 i; f16 to f32 is exact), then their 16 bytes of nibbles as four
 * vectors, vector k holding bytes 4k .. 4k + 3 of each row (row i in bytes
 * 4 i .. 4 i + 3); q4_0's bytes stored ^ 0x88, each nibble its code - 8 in
 * two's complement. With vector k's low nibbles (elements 4k .. 4k + 3 of
 * each row) against the activations' 4k .. 4k + 3, broadcast from lane k
 * of the hi or lo vector (sdot by element), the four rows' sums land in
 * the four lanes, with no lane totals; the high nibbles (elements 16 + 4k
 * ..) likewise against the second vectors. iq4_nl's codes: the table's
 * values by tbl; q4_0's: 16 (code - 8) as int8, the low nibble shifted up
 * four and the high one masked in place (no -8 sum(x) correction), the
 * sum's factor 16 taken off exactly by the conversion to float (scvtf with
 * four fraction bits: |isum| < 2^22). Then the twin's step, four rows at
 * once, as the tiles above: acc = fma((float)isum, d xs, acc). */
#define LLM__NEON_PANELS 1
#define LLM__PANEL_ROWS 4          /* rows a panel holds (tests: a panel's offset) */
#define LLM__NEON_PAN_BLOCK 80     /* bytes of a block of four rows in a panel */
/* q4_K's panels, 672 bytes a superblock of four rows: d and dmin as f32
 * (16 bytes each, row i's at 4 i), the eight groups' 6-bit scales and
 * mins as int16 (64 bytes each, group j's four rows at 8 j), then qs as
 * q4_0's nibbles are, 128 bytes a pair of groups (qs[32 p .. 32 p + 31]:
 * group 2p's low nibbles, 2p + 1's high), vector k holding bytes 32 p +
 * 4k .. 32 p + 4k + 3 of each row */
#define LLM__NEON_PAN_Q4_K 672
LLM__STATIC_ASSERT(LLM__NEON_PAN_Q4_K == 32 + 2 * 64 + 4 * 128, neon_q4_K_panel);
static int llm__neon_repacks(int type) {
    return type == LLM_TYPE_GGUF_Q4_0 || type == LLM_TYPE_GGUF_IQ4_NL || type == LLM_TYPE_GGUF_Q4_K;
}
/* a type's four rows' bytes in a panel for each block of the file */
static size_t llm__neon_pan_bytes(int type) { return type == LLM_TYPE_GGUF_Q4_K ? LLM__NEON_PAN_Q4_K : LLM__NEON_PAN_BLOCK; }
/* bytes of w's panels (a type llm__neon_repacks): whole panels of four rows */
static uint64_t llm__neon_panels_size(const llm_tensor *w) {
    uint64_t blocks = llm__block_row_bytes(w) / (size_t)llm__traits[w->type].qblock_bytes;
    return llm__mul(llm__mul(((uint64_t)w->rows + 3) / 4, blocks), llm__neon_pan_bytes(w->type));
}
LLM__INLINE void llm__put_f32(unsigned char *to, const unsigned char *f16) {
    float d = llm_f16_to_f32((uint16_t)(f16[0] | f16[1] << 8));
    memcpy(to, &d, 4);
}
/* w's rows into panels at dst (llm__neon_panels_size bytes) */
static void llm__neon_repack(unsigned char *dst, const llm_tensor *w) {
    size_t fb = (size_t)llm__traits[w->type].qblock_bytes, nb = llm__block_row_bytes(w) / fb, pb = llm__neon_pan_bytes(w->type);
    unsigned char flip = w->type == LLM_TYPE_GGUF_Q4_0 ? 0x88 : 0;
    memset(dst, 0, (size_t)llm__neon_panels_size(w));   /* the rows past the end: zeros */
    for (int r = 0; r < w->rows; r++) {
        const unsigned char *row = llm__block_row(w, r);
        unsigned char *pan = dst + (size_t)(r / 4) * nb * pb;
        int i = r % 4;
        for (size_t u = 0; u < nb; u++) {
            const unsigned char *blk = row + u * fb;
            unsigned char *to = pan + u * pb;
            llm__put_f32(to + 4 * i, blk);
            if (w->type != LLM_TYPE_GGUF_Q4_K) {
                for (int k = 0; k < 16; k++) to[16 + 16 * (k / 4) + 4 * i + k % 4] = blk[2 + k] ^ flip;
                continue;
            }
            llm__put_f32(to + 16 + 4 * i, blk + 2);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                llm__q4_K_scale_min(blk + 4, j, &sc, &m);
                int16_t s16 = (int16_t)sc, m16 = (int16_t)m;
                memcpy(to + 32 + 8 * j + 2 * i, &s16, 2);
                memcpy(to + 96 + 8 * j + 2 * i, &m16, 2);
            }
            for (int k = 0; k < 128; k++) to[160 + 16 * (k / 4) + 4 * i + k % 4] = blk[16 + k];
        }
    }
}
/* vector k of a panel block: its low (elements 4k .. 4k + 3 of each row)
 * and high nibbles (16 + 4k ..) as codes, each . x's hi and lo */
#define LLM__PAN_K(k)                                                                                     \
    do {                                                                                                  \
        uint8x16_t v_ = c.val[k];                                                                         \
        int8x16_t q0_, q1_;                                                                               \
        if (iq) {                                                                                         \
            q0_ = vqtbl1q_s8(kv, vandq_u8(v_, m15));                                                      \
            q1_ = vqtbl1q_s8(kv, vshrq_n_u8(v_, 4));                                                      \
        } else {                                                                                          \
            q0_ = vreinterpretq_s8_u8(vshlq_n_u8(v_, 4));                                                 \
            q1_ = vreinterpretq_s8_u8(vandq_u8(v_, m240));                                                \
        }                                                                                                 \
        sh = vdotq_laneq_s32(sh, q0_, x.val[0], k); sl = vdotq_laneq_s32(sl, q0_, x.val[2], k);           \
        sh = vdotq_laneq_s32(sh, q1_, x.val[1], k); sl = vdotq_laneq_s32(sl, q1_, x.val[3], k);           \
    } while (0)
/* np (1 or 2) panels at p, next bytes apart, of cg groups . x (hi, lo);
 * na of their 4 np rows stored */
LLM__INLINE void llm__pan_b16(float *o, int na, const unsigned char *p, size_t next, const int8_t *hl,
                             const float *xs, int cg, int first, int np, int iq) {
    const uint8x16_t m15 = vdupq_n_u8(15), m240 = vdupq_n_u8(240);
    const int8x16_t kv = vld1q_s8(llm__iq4_values);
    float32x4_t acc[2];
    LLM__UNROLL for (int v = 0; v < np; v++) acc[v] = llm__acc4_load(o + 4 * v, na - 4 * v < 4 ? na - 4 * v : 4, first);
    for (int g = 0; g < cg; g++) {
        int8x16x4_t x = vld1q_s8_x4(hl + 64 * g);   /* hi 0..15, hi 16..31, lo 0..15, lo 16..31 */
        float xg = xs[g];
        LLM__UNROLL for (int v = 0; v < np; v++) {
            const unsigned char *b = p + v * next + (size_t)LLM__NEON_PAN_BLOCK * g;
            uint8x16x4_t c = vld1q_u8_x4(b + 16);
            int32x4_t sh = vdupq_n_s32(0), sl = vdupq_n_s32(0);
            LLM__PAN_K(0); LLM__PAN_K(1); LLM__PAN_K(2); LLM__PAN_K(3);
            int32x4_t isum = vmlaq_n_s32(sl, sh, 128);   /* q4_0: 16 isum */
            float32x4_t fsum = iq ? vcvtq_f32_s32(isum) : vcvtq_n_f32_s32(isum, 4);
            acc[v] = vfmaq_f32(acc[v], fsum, vmulq_n_f32(vld1q_f32((const float *)(const void *)b), xg));
        }
    }
    LLM__UNROLL for (int v = 0; v < np; v++) llm__acc4_store(o + 4 * v, na - 4 * v < 4 ? na - 4 * v : 4, acc[v]);
}
#undef LLM__PAN_K
/* q4_K: one panel at p of cg groups (whole superblocks) . x (hi, lo), the
 * twin's two steps per group, the scale's and the min's:
 * fma((float)(sc isum), d xs, acc), then fma((float)(m xsum), -(dmin xs),
 * acc) (fms: the same bits) */
#define LLM__PAN4_K(v, xi, lane)                                                                          \
    do {                                                                                                  \
        int8x16_t lo_ = vreinterpretq_s8_u8(vandq_u8(v, m15)), hi_ = vreinterpretq_s8_u8(vshrq_n_u8(v, 4)); \
        sh[0] = vdotq_laneq_s32(sh[0], lo_, xa.val[xi], lane); sl[0] = vdotq_laneq_s32(sl[0], lo_, xa.val[2 + xi], lane); \
        sh[1] = vdotq_laneq_s32(sh[1], hi_, xb.val[xi], lane); sl[1] = vdotq_laneq_s32(sl[1], hi_, xb.val[2 + xi], lane); \
    } while (0)
LLM__INLINE void llm__pan4_q4_K(float *o, int na, const unsigned char *p, const int8_t *hl, const int32_t *xsum,
                                const float *xs, int cg, int first) {
    const uint8x16_t m15 = vdupq_n_u8(15);
    float32x4_t acc = llm__acc4_load(o, na, first);
    for (int k0 = 0; k0 < cg; k0 += 8, p += LLM__NEON_PAN_Q4_K) {
        float32x4_t d = vld1q_f32((const float *)(const void *)p), dmin = vld1q_f32((const float *)(const void *)(p + 16));
        for (int q = 0; q < 4; q++) {   /* groups k0 + 2q (low nibbles) and k0 + 2q + 1 (high) */
            int g = k0 + 2 * q;
            int8x16x4_t xa = vld1q_s8_x4(hl + 64 * g), xb = vld1q_s8_x4(hl + 64 * g + 64);
            uint8x16x4_t c0 = vld1q_u8_x4(p + 160 + 128 * q), c1 = vld1q_u8_x4(p + 160 + 128 * q + 64);
            int32x4_t sh[2], sl[2];
            sh[0] = sl[0] = sh[1] = sl[1] = vdupq_n_s32(0);
            LLM__PAN4_K(c0.val[0], 0, 0); LLM__PAN4_K(c0.val[1], 0, 1); LLM__PAN4_K(c0.val[2], 0, 2); LLM__PAN4_K(c0.val[3], 0, 3);
            LLM__PAN4_K(c1.val[0], 1, 0); LLM__PAN4_K(c1.val[1], 1, 1); LLM__PAN4_K(c1.val[2], 1, 2); LLM__PAN4_K(c1.val[3], 1, 3);
            LLM__UNROLL for (int e = 0; e < 2; e++) {
                int32x4_t isum = vmlaq_n_s32(sl[e], sh[e], 128);
                int32x4_t sc = vmovl_s16(vld1_s16((const int16_t *)(const void *)(p + 32 + 8 * (2 * q + e))));
                int32x4_t mn = vmovl_s16(vld1_s16((const int16_t *)(const void *)(p + 96 + 8 * (2 * q + e))));
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vmulq_s32(sc, isum)), vmulq_n_f32(d, xs[g + e]));
                acc = vfmsq_f32(acc, vcvtq_f32_s32(vmulq_n_s32(mn, xsum[g + e])), vmulq_n_f32(dmin, xs[g + e]));
            }
        }
    }
    llm__acc4_store(o, na, acc);
}
#undef LLM__PAN4_K
/* a panel tile (r a multiple of 4, any nr): token by token, a chunk of up
 * to 64 groups split once, then eight rows (two panels) at a time, q4_K's
 * four; kind 0 q4_0, 1 iq4_nl, 2 q4_K */
LLM__INLINE void llm__tile_pan(float *out, int ldo, const llm_tensor *w, int r, const int8_t *xq, const float *xs,
                              int t, int nr, int nc, int kind) {
    int n = w->cols, G = n / LLM__GQ, iq = kind == 1;
    size_t gb = kind == 2 ? LLM__NEON_PAN_Q4_K / 8 : LLM__NEON_PAN_BLOCK;   /* a group's bytes in a panel */
    size_t next = (size_t)G * gb;   /* a panel's bytes */
    const unsigned char *p0 = (const unsigned char *)w->panels + (size_t)(r / 4) * next;
    int8_t hl[2 * LLM__BLK_CHUNK * LLM__GQ];
    int32_t xsum[LLM__BLK_CHUNK], xh[2 * LLM__BLK_CHUNK];   /* q4_K's min steps (q4_0 and iq4_nl: unused) */
    for (int b = 0; b < nc; b++) {
        const int16_t *xb = (const int16_t *)(const void *)xq + (size_t)(t + b) * n;
        const float *sb = xs + (size_t)(t + b) * G;
        float *o = out + (size_t)b * ldo;
        for (int c0 = 0; c0 < G; c0 += LLM__BLK_CHUNK) {
            int cg = G - c0 < LLM__BLK_CHUNK ? G - c0 : LLM__BLK_CHUNK;
            llm__split_q16(hl, xsum, xh, kind == 2, xb + (size_t)c0 * LLM__GQ, cg);
            for (int a0 = 0; a0 < nr; a0 += kind == 2 ? 4 : 8) {
                int na = nr - a0 < 8 ? nr - a0 : 8;
                const unsigned char *p = p0 + (size_t)(a0 / 4) * next + (size_t)c0 * gb;
                if (kind == 2) llm__pan4_q4_K(o + a0, na < 4 ? na : 4, p, hl, xsum, sb + c0, cg, c0 == 0);
                else if (na > 4) llm__pan_b16(o + a0, na, p, next, hl, sb + c0, cg, c0 == 0, 2, iq);
                else llm__pan_b16(o + a0, na, p, next, hl, sb + c0, cg, c0 == 0, 1, iq);
            }
        }
    }
}
LLM__KERNEL void llm__tile_blk_q4_0(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                    const float *xs, int t, int nr, int nc) {
    if (w->panels && r % 4 == 0) llm__tile_pan(out, ldo, w, r, xq, xs, t, nr, nc, 0);
    else llm__tile_blk_q4_0_file(out, ldo, w, r, x, xq, xs, t, nr, nc);
}
LLM__KERNEL void llm__tile_blk_iq4_nl(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                      const float *xs, int t, int nr, int nc) {
    if (w->panels && r % 4 == 0) llm__tile_pan(out, ldo, w, r, xq, xs, t, nr, nc, 1);
    else llm__tile_blk_iq4_nl_file(out, ldo, w, r, x, xq, xs, t, nr, nc);
}
LLM__KERNEL void llm__tile_blk_q4_K(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                    const float *xs, int t, int nr, int nc) {
    if (w->panels && r % 4 == 0) llm__tile_pan(out, ldo, w, r, xq, xs, t, nr, nc, 2);
    else llm__tile_blk_q4_K_file(out, ldo, w, r, x, xq, xs, t, nr, nc);
}
#endif
#endif

#if defined(LLM__VL) && defined(__ARM_NEON) && defined(__aarch64__)
/* f32 and f16 rows of one token (decode; simd.h's llm__tiles_fp hands them
 * here, LLM__HAVE_FP_DECODE), eight rows side by side sharing each load of
 * x, sixteen columns a step (then eight, four and a part). The order is simd.h's llm__tile_fp's, so prefill
 * (its tiles) and decode give the same bits: per row four lanes (lane l
 * takes the columns j = l mod 4, one fma each, in order), a zero-padded last
 * vector, then vaddvq. f16 widens in registers (exact), no FP16 arithmetic:
 * that would round x to f16, not only reorder. No software prefetch: a few
 * sequential row streams are what the cores' prefetchers follow. */
#define LLM__HAVE_FP_DECODE 1
/* two vectors (32 bytes) from p, p advanced past them: one ldp with post-
 * index, where the compiler's intrinsics would keep an index register and
 * spend an add per row on each address; volatile keeps the rows' loads in
 * order, so GCC does not hoist all eight ahead of the conversions and spill
 * an accumulator */
#if defined(__GNUC__)
#define LLM__LDP_POST(v0, v1, p) \
    __asm__ volatile("ldp %q0, %q1, [%2], #32" : "=w"(v0), "=w"(v1), "+r"(p) : "m"(*(const unsigned char (*)[32])(const void *)(p)))
#else
#define LLM__LDP_POST(v0, v1, p) do { v0 = vld1q_u16(p); v1 = vld1q_u16((p) + 8); (p) += 16; } while (0)
#endif
/* the first len (< 4) values of a row from p (f32 or f16), zero-padded */
LLM__INLINE float32x4_t llm__fp_part(const void *p, int f16, int len) {
    float t[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    uint16_t h[4] = { 0, 0, 0, 0 };
    if (!f16) { memcpy(t, p, (size_t)len * 4); return vld1q_f32(t); }
    memcpy(h, p, (size_t)len * 2);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}
/* out[a] = W row a . x for rows a < R (R = 8, 4 or 1 at compile time) */
LLM__INLINE void llm__fp_rows(float *out, const unsigned char *W, int f16, const float *x, int n, int R) {
    const float *w32 = (const float *)(const void *)W;
    const uint16_t *w16 = (const uint16_t *)(const void *)W;
    float32x4_t acc[8];
    LLM__UNROLL for (int a = 0; a < R; a++) acc[a] = vdupq_n_f32(0.0f);
    int j = 0;
    if (f16) {   /* sixteen columns a step: one multi-register load a row */
        const uint16_t *p[8];
        LLM__UNROLL for (int a = 0; a < R; a++) p[a] = w16 + (size_t)a * n;
        for (; j + 16 <= n; j += 16) {
            float32x4x4_t xv = vld1q_f32_x4(x + j);
            LLM__UNROLL for (int a = 0; a < R; a++) {
                uint16x8_t u0, u1;
                LLM__LDP_POST(u0, u1, p[a]);
                float16x8_t h0 = vreinterpretq_f16_u16(u0), h1 = vreinterpretq_f16_u16(u1);
                acc[a] = vfmaq_f32(acc[a], vcvt_f32_f16(vget_low_f16(h0)), xv.val[0]);
                acc[a] = vfmaq_f32(acc[a], vcvt_high_f32_f16(h0), xv.val[1]);
                acc[a] = vfmaq_f32(acc[a], vcvt_f32_f16(vget_low_f16(h1)), xv.val[2]);
                acc[a] = vfmaq_f32(acc[a], vcvt_high_f32_f16(h1), xv.val[3]);
            }
        }
    } else {
        const float *p[8];
        LLM__UNROLL for (int a = 0; a < R; a++) p[a] = w32 + (size_t)a * n;
        for (; j + 16 <= n; j += 16) {
            float32x4x4_t xv = vld1q_f32_x4(x + j);
            LLM__UNROLL for (int a = 0; a < R; a++) {
                float32x4x4_t wv = vld1q_f32_x4(p[a]);
                p[a] += 16;
                acc[a] = vfmaq_f32(acc[a], wv.val[0], xv.val[0]);
                acc[a] = vfmaq_f32(acc[a], wv.val[1], xv.val[1]);
                acc[a] = vfmaq_f32(acc[a], wv.val[2], xv.val[2]);
                acc[a] = vfmaq_f32(acc[a], wv.val[3], xv.val[3]);
            }
        }
    }
    for (; j + 8 <= n; j += 8) {
        float32x4_t x0 = vld1q_f32(x + j), x1 = vld1q_f32(x + j + 4);
        LLM__UNROLL for (int a = 0; a < R; a++) {
            float32x4_t w0, w1;
            if (f16) {
                float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(w16 + (size_t)a * n + j));
                w0 = vcvt_f32_f16(vget_low_f16(h));
                w1 = vcvt_high_f32_f16(h);
            } else {
                w0 = vld1q_f32(w32 + (size_t)a * n + j);
                w1 = vld1q_f32(w32 + (size_t)a * n + j + 4);
            }
            acc[a] = vfmaq_f32(vfmaq_f32(acc[a], w0, x0), w1, x1);
        }
    }
    if (j + 4 <= n) {
        float32x4_t x0 = vld1q_f32(x + j);
        LLM__UNROLL for (int a = 0; a < R; a++)
            acc[a] = vfmaq_f32(acc[a], f16 ? vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w16 + (size_t)a * n + j)))
                                           : vld1q_f32(w32 + (size_t)a * n + j), x0);
        j += 4;
    }
    if (j < n) {
        float32x4_t x0 = llm__fp_part(x + j, 0, n - j);
        LLM__UNROLL for (int a = 0; a < R; a++)
            acc[a] = vfmaq_f32(acc[a], llm__fp_part(f16 ? (const void *)(w16 + (size_t)a * n + j)
                                                        : (const void *)(w32 + (size_t)a * n + j), f16, n - j), x0);
    }
    LLM__UNROLL for (int a = 0; a < R; a++) out[a] = vaddvq_f32(acc[a]);
}
/* nr rows of W (n values each, f32 or f16) . x (n,) -> out (nr,); one
 * instance per type (f16 a constant inside) */
LLM__INLINE void llm__fp_decode_type(float *out, const unsigned char *W, int f16, const float *x, int n, int nr) {
    size_t row = (size_t)n * (f16 ? 2 : 4);
    int a = 0;
    for (; a + 8 <= nr; a += 8) llm__fp_rows(out + a, W + a * row, f16, x, n, 8);
    for (; a + 4 <= nr; a += 4) llm__fp_rows(out + a, W + a * row, f16, x, n, 4);
    for (; a < nr; a++) llm__fp_rows(out + a, W + a * row, f16, x, n, 1);
}
static void llm__fp_decode(float *out, const unsigned char *W, int f16, const float *x, int n, int nr) {
    if (f16) llm__fp_decode_type(out, W, 1, x, n, nr);
    else llm__fp_decode_type(out, W, 0, x, n, nr);
}
#endif

#if defined(LLM__Q8_SIMD) && defined(__ARM_NEON) && defined(__aarch64__) && defined(__ARM_FEATURE_MATMUL_INT8)
/* q8_0's 4 x 4 prefill tile (simd.h's llm__tiles_q8) by smmla, where the CPU
 * has i8mm: each smmla multiplies two rows' 8 codes by two tokens' 8 codes,
 * a 2 x 2 block of pairs in its four lanes (row 2p or 2p + 1, token 2q or
 * 2q + 1), so no lane totals are needed; two rows' (or tokens') 16 bytes
 * become two such operands by 64-bit zips. The lane sums run on across
 * groups, a group's being the difference from the last (exact, int32
 * wraps); then the twin's step per pair, acc = fma(isum, ws * xs, acc), four
 * pairs a vector: the same bits as every q8_0 product. */
#define LLM__HAVE_Q8_TILE_4X4 1
/* rows (or tokens) p0 and p1 at column j: the 8-byte runs k = 0..3 of both,
 * interleaved as smmla's operands op[k] = (p0 run k, p1 run k) */
LLM__INLINE void llm__mm_operands(int8x16_t *op, const int8_t *p0, const int8_t *p1) {
    int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(p0)), a1 = vreinterpretq_s64_s8(vld1q_s8(p0 + 16));
    int64x2_t b0 = vreinterpretq_s64_s8(vld1q_s8(p1)), b1 = vreinterpretq_s64_s8(vld1q_s8(p1 + 16));
    op[0] = vreinterpretq_s8_s64(vzip1q_s64(a0, b0)); op[1] = vreinterpretq_s8_s64(vzip2q_s64(a0, b0));
    op[2] = vreinterpretq_s8_s64(vzip1q_s64(a1, b1)); op[3] = vreinterpretq_s8_s64(vzip2q_s64(a1, b1));
}
static void llm__tile_q8_4x4(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq, const float *xs,
                             int n, int G) {
    int groups = (n + G - 1) / G;   /* the last one short where G does not divide n (n a multiple of 32) */
    float32x4_t acc[4];             /* acc[2p + q]: rows 2p, 2p + 1 by tokens 2q, 2q + 1 */
    int32x4_t z[4], prev[4];
    for (int k = 0; k < 4; k++) { acc[k] = vdupq_n_f32(0.0f); z[k] = prev[k] = vdupq_n_s32(0); }
    for (int g = 0; g < groups; g++) {
        int g0 = g * G, glen = n - g0 < G ? n - g0 : G;
        for (int c0 = 0; c0 < glen; c0 += 32) {
            int8x16_t A[2][4], B[2][4];
            for (int p = 0; p < 2; p++) {
                llm__mm_operands(A[p], w + (size_t)(2 * p) * n + g0 + c0, w + (size_t)(2 * p + 1) * n + g0 + c0);
                llm__mm_operands(B[p], xq + (size_t)(2 * p) * n + g0 + c0, xq + (size_t)(2 * p + 1) * n + g0 + c0);
            }
            LLM__UNROLL for (int p = 0; p < 2; p++)
                LLM__UNROLL for (int q = 0; q < 2; q++)
                    LLM__UNROLL for (int k = 0; k < 4; k++) z[2 * p + q] = vmmlaq_s32(z[2 * p + q], A[p][k], B[q][k]);
        }
        float wsv[4], xsv[4];
        for (int a = 0; a < 4; a++) { wsv[a] = ws[(size_t)a * groups + g]; xsv[a] = xs[(size_t)a * groups + g]; }
        for (int p = 0; p < 2; p++)
            for (int q = 0; q < 2; q++) {
                float32x4_t wv = { wsv[2 * p], wsv[2 * p], wsv[2 * p + 1], wsv[2 * p + 1] };
                float32x4_t xv = { xsv[2 * q], xsv[2 * q + 1], xsv[2 * q], xsv[2 * q + 1] };
                int32x4_t isum = vsubq_s32(z[2 * p + q], prev[2 * p + q]);
                prev[2 * p + q] = z[2 * p + q];
                acc[2 * p + q] = vfmaq_f32(acc[2 * p + q], vcvtq_f32_s32(isum), vmulq_f32(wv, xv));
            }
    }
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 2; q++) {
            float t[4];
            vst1q_f32(t, acc[2 * p + q]);
            out[(size_t)(2 * q) * ldo + 2 * p] = t[0];
            out[(size_t)(2 * q + 1) * ldo + 2 * p] = t[1];
            out[(size_t)(2 * q) * ldo + 2 * p + 1] = t[2];
            out[(size_t)(2 * q + 1) * ldo + 2 * p + 1] = t[3];
        }
}
#endif
