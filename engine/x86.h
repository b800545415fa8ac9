/* engine/x86.h -- the x86 kernels: AVX-512 and AVX2 behind simd.h's mapping
 * macros, and the kernels that have no portable shape (activation max and
 * rounding, e^x, the attention dot product, the q8_0 VNNI tiles). GGUF's
 * block tiles are in x86_gguf.h, the attention kernels in x86_attend.h.
 * Each has its scalar twin in ref.h. */
#if !defined(MODEL_NO_SIMD) && defined(__AVX2__)
#include <immintrin.h>
#endif

#if !defined(MODEL_NO_SIMD) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LLM__SIMD "avx512"
#define LLM__VL 16
#define LLM__NC 4                      /* tokens per tile; rows per tile is 4 */
/* f32/f16: 4 x 6 accumulators, six token vectors and one weight vector fill
 * 31 of the 32 registers; ten loads per 24 multiply-adds */
#define LLM__NC_FP 6
/* f32/f16 rows longer than this go in column chunks (simd.h): six tokens'
 * 1024 columns are 24 KB of L1. Measured on Zen 5 (one thread, in L2, best
 * of 5): chunks of 1024 against 512 took 768 x 768 from 74-78% of the FMA
 * peak to 84-85%, 768 x 2048 from 55% to 67-69%, f16 alike; 2048 lost
 * (six tokens' rows fill L1) */
#ifndef LLM__KC_FP
#define LLM__KC_FP 1024
#endif
/* f32/f16 decode a row at a time: one stream of W, which the hardware
 * prefetcher follows, where four rows side by side were four short ones.
 * Measured on Zen 5 (one thread, CPU time): 42M f16 211-231 -> 235-259
 * tok/s, 110M f16 76 -> 83-91, 42M f32 114-127 -> 133-150. A row's one
 * accumulator (16 lanes, 4 cycles a step) still reads 50 GB/s. */
#define LLM__NR_DECODE 1
typedef __m512 llm__vf;
#define llm__vzero() _mm512_setzero_ps()
#define llm__vload(p) _mm512_loadu_ps(p)
#define llm__vload_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define llm__vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define llm__vsum(v) _mm512_reduce_add_ps(v)
/* the first len (< 16) elements, the rest zero */
#define llm__vload_part(p, len) _mm512_maskz_loadu_ps((__mmask16)((1u << (len)) - 1), p)
#define llm__vload_f16_part(p, len) \
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << (len)) - 1), (const void *)(p)))
#define LLM__HAVE_VSUM4 1
/* out[0..3] = llm__vsum of a, b, c, d, in _mm512_reduce_add_ps's tree (high
 * half + low half, then quarters, then pairs), four rows at once */
LLM__INLINE void llm__vsum4(float *out, __m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0xEE), _mm512_shuffle_f32x4(a, b, 0x44));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0xEE), _mm512_shuffle_f32x4(c, d, 0x44));
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0xDD), _mm512_shuffle_f32x4(ab, cd, 0x88));
    q = _mm512_add_ps(q, _mm512_shuffle_ps(q, q, 0x4E));    /* lanes 0,1 of each quarter: + two along */
    q = _mm512_add_ps(q, _mm512_shuffle_ps(q, q, 0xB1));    /* lane 0 of each quarter: + neighbour */
    _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), q)));
}
#define llm__vstore(p, v) _mm512_storeu_ps(p, v)
#elif !defined(MODEL_NO_SIMD) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLM__SIMD "avx2"
#define LLM__VL 8
#define LLM__NC 2
#define LLM__NC_FP 3                   /* f32/f16: 4 x 3 accumulators, 3 tokens and 1 row in 16 ymm */
#ifndef LLM__KC_FP
#define LLM__KC_FP 1024                /* three tokens' 1024 columns: 12 KB (AVX2 on Zen 5: 768 x 2048 +36%) */
#endif
/* f32/f16 decode a row at a time here too (see above). Measured on Zen 4
 * (AVX2 build, one thread, medians of 3 interleaved, 128 decoded tokens):
 * 15M f32 216 -> 461 tok/s, 42M f32 73 -> 161, 42M f16 131 -> 194, 15M f16
 * 430 -> 519; four rows side by side left llama.cpp's AVX2 build 2x ahead */
#define LLM__NR_DECODE 1
/* LLMW q8_0 decode (where it has no panels: --repack off, groups other than
 * 32; else llm__tile_q8_panels below) two rows side by side, not eight. Zen 4, AVX2 build, one
 * thread, three interleaved runs, decode tok/s with 8 / 4 / 2 / 1 rows:
 * 15M 825 / 1075 / 1047 / 787, 42M 183 / 210 / 227 / 279 */
#define LLM__Q8_DECODE_ROWS 2
/* f16: two ymm per (row, token), AVX-512's sixteen lanes and its sum
 * (simd.h), so the same bits as the AVX-512 build, and two chains a row in
 * decode. Zen 4, one thread, bench.py (medians of 3, a quiet run each),
 * decode tok/s: 15M 555 -> 729 (llama.cpp's AVX2 build 760 / 794), 42M 200
 * -> 290 (273 / 271); prefill alike (5579 / 5411, 1451 / 1415). f32 keeps
 * eight lanes (LLM__F32_HALVES 1): two ymm there took decode up (15M 224 ->
 * 256, 42M 135 -> 146) but prefill down, its half-at-a-time passes over
 * twice f16's bytes (15M 5152 -> 4816, 42M 1407 -> 1269; passes of 256 or
 * 1024 columns alike; Zen 4, runs in ABBA order, load 2.6) */
#define LLM__F16_HALVES 2
#define llm__vadd(a, b) _mm256_add_ps(a, b)
typedef __m256 llm__vf;
#define llm__vzero() _mm256_setzero_ps()
#define llm__vload(p) _mm256_loadu_ps(p)
#define llm__vload_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define llm__vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
LLM__INLINE float llm__vsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define llm__vload_part(p, len) \
    _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define LLM__HAVE_VSUM4 1
/* out[0..3] = llm__vsum of a, b, c, d in its tree, four rows at once */
LLM__INLINE void llm__vsum4(float *out, __m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
    __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
    u = _mm256_add_ps(u, _mm256_shuffle_ps(u, u, 0xB1));    /* a a c c | b b d d */
    __m128 lo = _mm256_castps256_ps128(u), hi = _mm256_extractf128_ps(u, 1);
    _mm_storeu_ps(out, _mm_unpacklo_ps(_mm_shuffle_ps(lo, lo, 0x08), _mm_shuffle_ps(hi, hi, 0x08)));
}
#define llm__vstore(p, v) _mm256_storeu_ps(p, v)
#endif

#ifdef LLM__VL   /* both x86 builds */
/* f16 decode prefetches into L2 (prefetcht2), not read-once into L1: with
 * prefetchnta its loop's speed hung on where it landed in the code (Zen 4,
 * one thread, 110M f16 decode 68 or 100-114 tok/s as unrelated code moved;
 * prefetcht2: 100-113 either way). AVX2 alike (15M 514-526 ->
 * 690-704, 42M 235-250 -> 272-274, 110M 77-85 -> 95-108; three
 * interleaved runs each) */
#define LLM__PF_F16_L2 1
#endif

#if defined(LLM__VL) && defined(__GNUC__)
/* an empty asm that takes and gives v in a vector register: GCC would
 * otherwise fold a token vector's load into each of the four rows'
 * multiply-adds, four loads where one serves (the loads, not the FMAs,
 * then set the pace) */
#define llm__vkeep(v) __asm__("" : "+v"(v))
#endif

#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
#define LLM__HAVE_MAX 1
/* llm__max_ref eight at a time */
static float llm__max(const float *x, int n, int absolute) {
    float max = absolute ? 0.0f : x[0];
    int i = 0;
    if (n >= 8) {
        const __m256 sign = _mm256_set1_ps(absolute ? -0.0f : 0.0f);   /* the bit andnot clears */
        __m256 m = _mm256_set1_ps(max);
        for (; i + 8 <= n; i += 8) /* max_ps(v, m) keeps m when v is NaN */
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
        float lane[8];
        _mm256_storeu_ps(lane, m);
        for (int l = 0; l < 8; l++) if (lane[l] > max) max = lane[l];
    }
    return llm__max_from(x + i, n - i, absolute, max);
}

/* lroundf(x[0..7] * inv) as int16: truncate, then step away from zero
 * when the dropped fraction (exact) is at least one half */
LLM__INLINE __m128i llm__round8_i16(const float *x, __m256 vinv) {
    const __m256 half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), vinv);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
    __m256 step = _mm256_and_ps(away, _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)));
    __m256i q = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
    return _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}
#define LLM__HAVE_ROUND_Q8 1
/* llm__round_q8_ref eight at a time */
static void llm__round_q8(int8_t *xq, const float *x, int n, float inv) {
    int j = 0;
    const __m256 vinv = _mm256_set1_ps(inv);
    for (; j + 8 <= n; j += 8) {
        __m128i q16 = llm__round8_i16(x + j, vinv);
        _mm_storel_epi64((__m128i *)(void *)(xq + j), _mm_packs_epi16(q16, q16));
    }
    llm__round_q8_ref(xq + j, x + j, n - j, inv);
}
#define LLM__HAVE_ROUND_Q16 1
/* llm__round_q16_ref eight at a time */
static void llm__round_q16(int16_t *xq, const float *x, int n, float inv) {
    int j = 0;
    const __m256 vinv = _mm256_set1_ps(inv);
    for (; j + 8 <= n; j += 8) _mm_storeu_si128((__m128i *)(void *)(xq + j), llm__round8_i16(x + j, vinv));
    llm__round_q16_ref(xq + j, x + j, n - j, inv);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(MODEL_NO_SIMD)
#define LLM__HAVE_EXP_SHIFTED 1
/* llm__expf's steps from n = floor(x log2(e) + 1/2) on, a vector at a
 * time: r = x - n ln2 in two parts, e^r by the polynomial, times 2^n. P is
 * the intrinsics' prefix (_mm256, _mm512), VF and VI its float and integer
 * vectors, CAST its integer-to-float bit cast. */
#define LLM__EXP_STEPS(P, VF, VI, CAST, v, nn, y)                                                  \
    do {                                                                                            \
        VF r_ = P##_fmadd_ps(nn, P##_set1_ps(-LLM__EXP_LN2_HI), v);                                 \
        r_ = P##_fmadd_ps(nn, P##_set1_ps(-LLM__EXP_LN2_LO), r_);                                   \
        VF p_ = P##_set1_ps(llm__exp_c[5]);                                                         \
        for (int k_ = 4; k_ >= 0; k_--) p_ = P##_fmadd_ps(p_, r_, P##_set1_ps(llm__exp_c[k_]));     \
        p_ = P##_add_ps(P##_fmadd_ps(p_, P##_mul_ps(r_, r_), r_), P##_set1_ps(1.0f));               \
        VI e_ = P##_slli_epi32(P##_add_epi32(P##_cvtps_epi32(nn), P##_set1_epi32(127)), 23);         \
        (y) = P##_mul_ps(p_, CAST(e_));                                                             \
    } while (0)
#if defined(__AVX512F__)
/* llm__exp_shifted_ref sixteen at a time (the last ones masked): the same
 * operations as llm__expf, so the same bits */
static void llm__exp_shifted(float *x, int n, float shift) {
    const __m512 lo = _mm512_set1_ps(LLM__EXP_MIN), hi = _mm512_set1_ps(LLM__EXP_MAX), sh = _mm512_set1_ps(shift);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
        __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh);
        __m512 t = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(LLM__EXP_LOG2E)), _mm512_set1_ps(0.5f));
        __mmask16 under = _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), over = _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        /* floor(t) where in range, 0 outside (the exponent stays sane) */
        __m512 nn = _mm512_maskz_roundscale_ps((__mmask16)~(under | over | nan), t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 y;
        LLM__EXP_STEPS(_mm512, __m512, __m512i, _mm512_castsi512_ps, v, nn, y);
        y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
        y = _mm512_mask_mov_ps(y, over, _mm512_set1_ps(INFINITY));
        y = _mm512_mask_mov_ps(y, nan, v);
        _mm512_mask_storeu_ps(x + i, m, y);
    }
}
#else
/* llm__exp_shifted_ref eight at a time: the same operations as llm__expf,
 * so the same bits */
static void llm__exp_shifted(float *x, int n, float shift) {
    int i = 0;
    const __m256 lo = _mm256_set1_ps(LLM__EXP_MIN), hi = _mm256_set1_ps(LLM__EXP_MAX), sh = _mm256_set1_ps(shift);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), sh);
        __m256 nn = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(LLM__EXP_LOG2E)), _mm256_set1_ps(0.5f)));
        __m256 under = _mm256_cmp_ps(v, lo, _CMP_LT_OQ), over = _mm256_cmp_ps(v, hi, _CMP_GT_OQ);
        __m256 inrange = _mm256_andnot_ps(_mm256_or_ps(under, over), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        nn = _mm256_and_ps(nn, inrange);                      /* keep the exponent sane outside */
        __m256 y;
        LLM__EXP_STEPS(_mm256, __m256, __m256i, _mm256_castsi256_ps, v, nn, y);
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
        y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
        y = _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(x + i, y);
    }
    llm__exp_shifted_ref(x + i, n - i, shift);
}
#endif

#define LLM__HAVE_DOT8 1
/* llm__dot8_ref with the eight lanes in one register */
static float llm__dot8(const float *a, const float *b, int n) {
    int n8 = n - n % 8;
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n8; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
    if (n8 == n) { /* the lanes_total tree in registers */
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    return llm__dot8_tail(lane, a, b, n8, n);
}
#endif

#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
/* The totals of eight lane vectors, each added in llm__lanes_total's tree
 * (llm__dot8's), reduced together: the total of slot s comes out at element
 * (s >> 1) + 4 (s & 1). */
LLM__INLINE __m256 llm__lane_totals8(const __m256 *v) {
    __m256 t[4], u0, u1;
    for (int i = 0; i < 4; i++) /* low + high half: slots 2i and 2i+1 side by side */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    u0 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], 0x44), _mm256_shuffle_ps(t[0], t[1], 0xEE)); /* + two along */
    u1 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], 0x44), _mm256_shuffle_ps(t[2], t[3], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(u0, u1, 0x88), _mm256_shuffle_ps(u0, u1, 0xDD));        /* + neighbour */
}
#endif

/* q8_0 on a vector unit (simd.h's llm__tile_q8_pairs): a 32-byte chunk of
 * int8 gives eight int32 lanes of one (row, token) pair's integer sum, and
 * eight pairs' lanes reduce to their totals together for one vector step of
 * ref.h's order, a lane per pair. */
#if defined(LLM__VL) && defined(__AVX2__)
#define LLM__Q8_SIMD 1
typedef __m256i llm__i8x32;     /* 32 int8                          */
typedef __m256i llm__i32x8;     /* eight int32 lanes of one sum     */
typedef __m256 llm__f32x8;      /* eight pairs' float accumulators  */
#define llm__i32x8_zero() _mm256_setzero_si256()
#define llm__f32x8_zero() _mm256_setzero_ps()
#define llm__f32x8_store(p, v) _mm256_storeu_ps(p, v)
LLM__INLINE llm__i8x32 llm__i8x32_load(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
/* acc + the eight lane sums of w*x: |w| as unsigned times x with w's sign (the
 * maddubs/VNNI trick; |-128| reads as 128) */
LLM__INLINE llm__i32x8 llm__dot32_i8(llm__i32x8 acc, llm__i8x32 w, llm__i8x32 x) {
    __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, aw, sx);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, aw, sx);
#else
    __m256i p16 = _mm256_maddubs_epi16(aw, sx);   /* |w|*x pairs fit in int16: 2*128*127 */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
/* (w + 128) unsigned times x, less 128 x, is w x exactly: one XOR per weight
 * chunk (shared by the tile's tokens) and one subtraction per token's chunk
 * instead of two sign ops per row and token */
#define LLM__HAVE_Q8_PREP 1
#define llm__q8_wprep(w) _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80))
#define llm__q8_xcorr(x) _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), x))
#define llm__q8_addcorr(isum, c) _mm256_add_epi32(isum, c)
#define llm__q8_dot32(acc, wu, x) _mm256_dpbusd_epi32(acc, wu, x)
#endif
#if defined(__AVX512VNNI__) && LLM__VL == 16
/* The full 4 x 4 q8_0 tile for whole 32-byte chunks on 512-bit vectors:
 * each zmm holds two tokens' eight lanes side by side (pairs (a, b) and
 * (a, b + 1)), so one dpbusd serves two pairs, and the sixteen pairs' totals
 * come out in one zmm by three rounds of unpack (or block shuffle) and add:
 * lane L holds row 2 (L >> 3) + ((L >> 1) & 1), token 2 (L & 1) + ((L >> 2) & 1).
 * Then one step of ref.h's order for all sixteen. */
#define LLM__HAVE_Q8_TILE_4X4 1
LLM__INLINE __m512 llm__q8_steps16(__m512 acc, const __m512i *z, const float *ws, const float *xs, size_t gstride) {
    __m512i u[4], v[2], t;
    for (int k = 0; k < 4; k++)   /* lanes 0+2, 1+3 of each 128-bit block, two vectors interleaved */
        u[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2 * k], z[2 * k + 1]), _mm512_unpackhi_epi32(z[2 * k], z[2 * k + 1]));
    for (int k = 0; k < 2; k++)   /* each block's total, four vectors side by side */
        v[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm512_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
    t = _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
    const __m512i row = _mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3);
    const __m512i tok = _mm512_setr_epi32(0, 2, 0, 2, 1, 3, 1, 3, 0, 2, 0, 2, 1, 3, 1, 3);
    __m128 w4 = _mm_setr_ps(ws[0], ws[gstride], ws[2 * gstride], ws[3 * gstride]);
    __m128 x4 = _mm_setr_ps(xs[0], xs[gstride], xs[2 * gstride], xs[3 * gstride]);
    __m512 scale = _mm512_mul_ps(_mm512_permutexvar_ps(row, _mm512_castps128_ps512(w4)),
                                 _mm512_permutexvar_ps(tok, _mm512_castps128_ps512(x4)));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), scale, acc);
}
static void llm__tile_q8_4x4(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq, const float *xs,
                             int n, int G) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    int groups = (n + G - 1) / G;   /* the last one short where G does not divide n (n a multiple of 32) */
    __m512 acc = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        int g0 = g * G, glen = n - g0 < G ? n - g0 : G;
        __m512i z[8];     /* z[2a + p]: row a, tokens 2p and 2p + 1 */
        for (int k = 0; k < 8; k++) z[k] = _mm512_setzero_si512();
        for (int c0 = 0; c0 < glen; c0 += 32) {
            __m512i x[2], neg[2];
            for (int p = 0; p < 2; p++) {
                x[p] = _mm512_inserti64x4(_mm512_castsi256_si512(llm__i8x32_load(xq + (size_t)(2 * p) * n + g0 + c0)),
                                          llm__i8x32_load(xq + (size_t)(2 * p + 1) * n + g0 + c0), 1);
                neg[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, x[p]));
            }
            for (int a = 0; a < 4; a++) {
                __m512i wu = _mm512_xor_si512(_mm512_broadcast_i64x4(llm__i8x32_load(w + (size_t)a * n + g0 + c0)), bias);
                for (int p = 0; p < 2; p++) z[2 * a + p] = _mm512_dpbusd_epi32(_mm512_add_epi32(z[2 * a + p], neg[p]), wu, x[p]);
            }
        }
        acc = llm__q8_steps16(acc, z, ws + g, xs + g, (size_t)groups);
    }
    float total[16];
    _mm512_storeu_ps(total, acc);
    for (int L = 0; L < 16; L++) out[(size_t)(2 * (L & 1) + ((L >> 2) & 1)) * ldo + 2 * (L >> 3) + ((L >> 1) & 1)] = total[L];
}
/* Decode of q8_0 with groups of 32: 16 rows x 1 token, a row per lane of
 * one accumulator. Each row's 64 bytes (two groups) are one load and one
 * dpbusd; the sixteen rows' integer lanes reduce to two vectors of totals
 * (group g, then g + 1, rows in order) in four rounds of unpack or block
 * shuffle and add (exact integers, so any tree does); the scales ws * xs of
 * 16 groups come in as one vector per row, multiplied, then transposed to
 * one vector per group. Each group is then one step of ref.h's order for
 * all 16 rows, acc = fma(isum, ws * xs, acc), where the 8-row tile spends
 * most of its time putting scales and sums in place. */
#define LLM__HAVE_Q8_TILE_16X1 1
/* v[k] becomes lane k of the 16 vectors v[0..15] (a 16 x 16 transpose) */
LLM__INLINE void llm__transpose16(__m512 *v) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {          /* pairs of rows interleaved */
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)            /* quads: four rows' lane 4b + k in block b of v[i + k] */
        for (int k = 0; k < 2; k++) {
            __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + k + 2]);
            v[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            v[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    for (int i = 0; i < 16; i += 8)            /* 128-bit blocks of rows i..i+7 */
        for (int k = 0; k < 4; k++) {
            t[i + k] = _mm512_shuffle_f32x4(v[i + k], v[i + k + 4], 0x88);
            t[i + k + 4] = _mm512_shuffle_f32x4(v[i + k], v[i + k + 4], 0xDD);
        }
    for (int k = 0; k < 8; k++) {              /* and of all 16 rows */
        v[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
        v[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD);
    }
}
static void llm__tile_q8_16x1(float *out, const int8_t *w, const float *ws, const int8_t *xq, const float *xs, int n) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    int groups = n / 32;
    size_t pf = llm__pf_ahead(16 * (size_t)n);   /* bytes of W whole tiles ahead (simd.h) */
    __m512 acc = _mm512_setzero_ps();
    for (int g0 = 0; g0 < groups; g0 += 16) {
        int ng = groups - g0 < 16 ? groups - g0 : 16;
        __mmask16 gm = (__mmask16)((1u << ng) - 1);
        __m512 sc[16];   /* row a's ws * xs of groups g0.., then (transposed) group g0 + k's of the rows */
        __m512 xsv = _mm512_maskz_loadu_ps(gm, xs + g0);
        for (int a = 0; a < 16; a++) {
            LLM__PREFETCH_AHEAD(ws + (size_t)a * groups + g0 + pf / 32, pf);   /* the scales of the rows prefetched below */
            sc[a] = _mm512_mul_ps(_mm512_maskz_loadu_ps(gm, ws + (size_t)a * groups + g0), xsv);
        }
        llm__transpose16(sc);
        for (int k = 0; k < ng; k += 2) {
            /* groups g0 + k and, when there is one, g0 + k + 1 */
            __mmask64 bm = k + 1 < ng ? ~(__mmask64)0 : (__mmask64)0xFFFFFFFFu;
            size_t at = (size_t)(g0 + k) * 32;
            __m512i x = _mm512_maskz_loadu_epi8(bm, xq + at);
            __m512i neg = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, x));
            __m512i z[16], u[8], v[4];
            for (int a = 0; a < 16; a++) {
                const int8_t *wa = w + (size_t)a * n + at;
                LLM__PREFETCH_AHEAD(wa + pf, pf);
                z[a] = _mm512_dpbusd_epi32(neg, _mm512_xor_si512(_mm512_maskz_loadu_epi8(bm, wa), bias), x);
            }
            /* each 128-bit block: lanes 0+2 and 1+3, two rows interleaved */
            for (int i = 0; i < 8; i++)
                u[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]), _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]));
            /* each block's total, four rows side by side (blocks 0, 1: group g; 2, 3: g + 1) */
            for (int i = 0; i < 4; i++)
                v[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * i], u[2 * i + 1]), _mm512_unpackhi_epi64(u[2 * i], u[2 * i + 1]));
            /* the halves of each group added: rows 0-3 g, 0-3 g+1, 4-7 g, 4-7 g+1 (and 8-15) */
            __m512i lo = _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
            __m512i hi = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2], v[3], 0x88), _mm512_shuffle_i32x4(v[2], v[3], 0xDD));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_shuffle_i32x4(lo, hi, 0x88)), sc[k], acc);
            if (k + 1 < ng) acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_shuffle_i32x4(lo, hi, 0xDD)), sc[k + 1], acc);
        }
    }
    _mm512_storeu_ps(out, acc);
}
#endif
/* acc[p] = fma(total of lanes v[p], scale[p], acc[p]) for eight pairs p */
LLM__INLINE __m256 llm__q8_steps8(__m256 acc, const __m256i *v, const float *scale) {
    __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    /* u0: pairs 0..3's low-half totals | their high halves' (u1: 4..7) */
    __m256i t = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
    __m256 s = _mm256_setr_ps(scale[0], scale[1], scale[2], scale[3], scale[4], scale[5], scale[6], scale[7]);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), s, acc);
}

/* LLMW q8_0 decode and prefill from panels (repack.h): P = LLM__VL rows (sixteen with
 * AVX-512 VNNI, eight with AVX2; the GGUF panels' count), groups of 32.
 * A panel holds, group by group, the P rows' f32 scales (one vector), then
 * the group's eight code words, word k of the P rows in vector k (row i in
 * lane i), all in one stream in address order. A group's P integer sums come
 * out in the lanes (no horizontal add), and its step is one vector step of
 * ref.h's order, acc = fma(isum, ws * xs, acc), a row per lane: the twin's
 * bits. Where the file's rows came as many short streams (the 16 x 1 tile:
 * sixteen, the two-row one on AVX2: two, each beside its scales' stream),
 * the panel is one, which the hardware prefetcher follows. */
#if LLM__VL == 16 && defined(__AVX512VNNI__) || LLM__VL == 8
#define LLM__HAVE_Q8_PANELS 1
#define LLM__Q8_PANEL_SLOT 36          /* a group in a panel row: its scale, then its 32 codes */
#if LLM__VL == 16
/* codes stored plus 128 (unsigned, dpbusd's first operand): (w + 128) x less
 * 128 x is w x exactly, the 128 x a group's one correction for all rows */
#define LLM__Q8_PANEL_BIAS 0x80
#else
#define LLM__Q8_PANEL_BIAS 0
#endif
/* the four bytes at p in lane 0 (a broadcast folds the load into itself) */
LLM__INLINE __m128i llm__word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(v);
}
/* tokens a prefill tile of these panels takes at once */
#define LLM__Q8_PANEL_TB 4
/* One panel's products with nb tokens (1, or LLM__Q8_PANEL_TB: prefill)
 * over ng groups: token b's codes x[b], scales xs[b] and (AVX-512)
 * corrections neg[b] (-128 times the sum of each group's codes); lanes
 * lo..hi-1 into o[b][0..hi-lo) for b < nst (the tokens from nst on copy
 * the last, their sums dropped); cont: each lane's accumulator starts from
 * o (the groups before, whose steps came first), else from zero. One token
 * takes two chains of integer sums a group, several one each. */
LLM__INLINE void llm__q8_panel_dot(float *const *o, const unsigned char *p, int lo, int hi, const int8_t *const *x,
                                   const float *const *xs, const int32_t *const *neg, int ng, int nb, int nst, int cont) {
    float lane[LLM__Q8_PANEL_TB][LLM__VL];
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < LLM__VL; i++) lane[b][i] = cont && b < nst && i >= lo && i < hi ? o[b][i - lo] : 0.0f;
#if LLM__VL == 16
    __m512 acc[LLM__Q8_PANEL_TB];
    LLM__UNROLL for (int b = 0; b < nb; b++) acc[b] = _mm512_loadu_ps(lane[b]);
    for (int g = 0; g < ng; g++, p += 16 * LLM__Q8_PANEL_SLOT) {
        __m512i s[LLM__Q8_PANEL_TB], s1 = _mm512_setzero_si512();   /* exact integers; s1: one token's second chain */
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm512_set1_epi32(neg[b][g]);
        LLM__UNROLL for (int k = 0; k < 8; k++) {
            __m512i wk = _mm512_loadu_si512((const void *)(p + 64 * (k + 1)));
            if (nb == 1 && k % 2) s1 = _mm512_dpbusd_epi32(s1, wk, _mm512_broadcastd_epi32(llm__word(x[0] + 32 * g + 4 * k)));
            else
                LLM__UNROLL for (int b = 0; b < nb; b++)
                    s[b] = _mm512_dpbusd_epi32(s[b], wk, _mm512_broadcastd_epi32(llm__word(x[b] + 32 * g + 4 * k)));
        }
        if (nb == 1) s[0] = _mm512_add_epi32(s[0], s1);
        __m512 ws = _mm512_loadu_ps((const float *)(const void *)p);
        LLM__UNROLL for (int b = 0; b < nb; b++)
            acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[b]), _mm512_mul_ps(ws, _mm512_set1_ps(xs[b][g])), acc[b]);
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) _mm512_storeu_ps(lane[b], acc[b]);
#else
    __m256 acc[LLM__Q8_PANEL_TB];
    const __m256i ones = _mm256_set1_epi16(1);
    LLM__UNROLL for (int b = 0; b < nb; b++) acc[b] = _mm256_loadu_ps(lane[b]);
    for (int g = 0; g < ng; g++, p += 8 * LLM__Q8_PANEL_SLOT) {
        __m256i s[LLM__Q8_PANEL_TB], s1 = _mm256_setzero_si256();
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
        LLM__UNROLL for (int k = 0; k < 8; k++) {   /* |w| times x with w's sign: pairs fit in int16 */
            __m256i wk = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * (k + 1))), aw = _mm256_sign_epi8(wk, wk);
            LLM__UNROLL for (int b = 0; b < nb; b++) {
                __m256i xk = _mm256_sign_epi8(_mm256_broadcastd_epi32(llm__word(x[b] + 32 * g + 4 * k)), wk);
                __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xk), ones);
                if (nb == 1 && k % 2) s1 = _mm256_add_epi32(s1, d);
                else s[b] = _mm256_add_epi32(s[b], d);
            }
        }
        if (nb == 1) s[0] = _mm256_add_epi32(s[0], s1);
        __m256 ws = _mm256_loadu_ps((const float *)(const void *)p);
        LLM__UNROLL for (int b = 0; b < nb; b++)
            acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[b]), _mm256_mul_ps(ws, _mm256_set1_ps(xs[b][g])), acc[b]);
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) _mm256_storeu_ps(lane[b], acc[b]);
    (void)neg;
#endif
    for (int b = 0; b < nst; b++)
        for (int i = lo; i < hi; i++) o[b][i - lo] = lane[b][i];
}
/* groups whose corrections a call holds at once (longer rows: in runs of
 * these, each row's accumulator carried through out between runs) */
#define LLM__Q8_PANEL_GRUN 256
/* rows r..r+nr-1 of w (from its panels; any r and nr) times nc tokens'
 * codes xq and scales xs (groups of 32; token b's at xq + b n, xs + b
 * groups) into out (token b's at out + b ldo): a single token alone
 * (decode), several LLM__Q8_PANEL_TB at a time, each panel read once for
 * them */
static void llm__tile_q8_panels(float *out, int ldo, const llm_tensor *w, int r, int nr, int nc, const int8_t *xq,
                                const float *xs) {
    const int P = LLM__VL, TB = LLM__Q8_PANEL_TB;
    int n = w->cols, groups = n / 32;
    size_t group_bytes = (size_t)P * LLM__Q8_PANEL_SLOT, panel_bytes = (size_t)groups * group_bytes;
    int32_t neg[LLM__Q8_PANEL_TB][LLM__Q8_PANEL_GRUN];
    for (int t0 = 0; t0 < nc; t0 += TB) {
        int nst = nc - t0 < TB ? nc - t0 : TB, nb = nst == 1 ? 1 : TB, bt[LLM__Q8_PANEL_TB];
        for (int b = 0; b < nb; b++) bt[b] = t0 + (b < nst ? b : nst - 1);   /* the tile's tokens */
        for (int g0 = 0; g0 < groups; g0 += LLM__Q8_PANEL_GRUN) {
            int ng = groups - g0 < LLM__Q8_PANEL_GRUN ? groups - g0 : LLM__Q8_PANEL_GRUN;
            const int8_t *x[LLM__Q8_PANEL_TB];
            const float *s[LLM__Q8_PANEL_TB];
            const int32_t *ng_of[LLM__Q8_PANEL_TB];
            for (int b = 0; b < nb; b++) {
                x[b] = xq + (size_t)bt[b] * n + (size_t)g0 * 32;
                s[b] = xs + (size_t)bt[b] * groups + g0;
                ng_of[b] = neg[b];
                for (int g = 0; LLM__Q8_PANEL_BIAS && g < ng; g++) {
                    int32_t sum = 0;
                    for (int j = 0; j < 32; j++) sum += x[b][32 * g + j];
                    neg[b][g] = -LLM__Q8_PANEL_BIAS * sum;
                }
            }
            for (int a = r - r % P; a < r + nr; a += P) {
                int lo = a < r ? r - a : 0, hi = r + nr - a < P ? r + nr - a : P;
                const unsigned char *p = (const unsigned char *)w->panels + (size_t)(a / P) * panel_bytes + (size_t)g0 * group_bytes;
                float *o[LLM__Q8_PANEL_TB];
                for (int b = 0; b < nb; b++) o[b] = out + (size_t)bt[b] * ldo + (a + lo - r);
                if (nb == 1) llm__q8_panel_dot(o, p, lo, hi, x, s, ng_of, ng, 1, 1, g0 > 0);
                else llm__q8_panel_dot(o, p, lo, hi, x, s, ng_of, ng, LLM__Q8_PANEL_TB, nst, g0 > 0);
            }
        }
    }
}
#endif
#endif
