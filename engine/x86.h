/* engine/x86.h -- the x86 kernels: AVX-512 and AVX2 behind simd.h's mapping
 * macros, and the kernels that have no portable shape (activation max and
 * rounding, e^x, the attention dot product, the q8_0 VNNI tiles, grouped
 * attention over the cache). Each has its scalar twin in ref.h. */
#if !defined(MODEL_NO_SIMD) && defined(__AVX2__)
#include <immintrin.h>
#endif

#if !defined(MODEL_NO_SIMD) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LLM__SIMD "avx512"
#define LLM__VL 16
#define LLM__NC 4                      /* tokens per tile; rows per tile is 4 */
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

#define LLM__HAVE_ROUND_Q8 1
/* llm__round_q8_ref eight at a time */
static void llm__round_q8(int8_t *xq, const float *x, int n, float inv) {
    int j = 0;
    /* lroundf eight at a time: truncate, then step away from zero when
     * the dropped fraction (exact) is at least one half */
    const __m256 half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f), vinv = _mm256_set1_ps(inv);
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), vinv);
        __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
        __m256 step = _mm256_and_ps(away, _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)));
        __m256i q = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
        __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(void *)(xq + j), _mm_packs_epi16(q16, q16));
    }
    llm__round_q8_ref(xq + j, x + j, n - j, inv);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(MODEL_NO_SIMD)
#define LLM__HAVE_EXP_SHIFTED 1
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
        __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LLM__EXP_LN2_HI), v);
        r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LLM__EXP_LN2_LO), r);
        __m256 p = _mm256_set1_ps(llm__exp_c[5]);
        for (int k = 4; k >= 0; k--) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(llm__exp_c[k]));
        p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23);
        __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
        y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
        y = _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(x + i, y);
    }
    llm__exp_shifted_ref(x + i, n - i, shift);
}

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
    int groups = n / G;
    __m512 acc = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        int g0 = g * G;
        __m512i z[8];     /* z[2a + p]: row a, tokens 2p and 2p + 1 */
        for (int k = 0; k < 8; k++) z[k] = _mm512_setzero_si512();
        for (int c0 = 0; c0 < G; c0 += 32) {
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
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(MODEL_NO_SIMD)
#define LLM__ATTEND_AVX2 1
#define LLM__GROUP_MAX 4   /* query heads sharing one pass over the keys */

/* Cache row (position j, head kvh) of a view: its first element's index,
 * and its int8 scale as f32 (1 for f32 and f16 caches), converted once per row */
typedef struct llm__kv_at { size_t at; float scale; } llm__kv_at;
LLM__INLINE llm__kv_at llm__kv_locate(const llm__kv_view *kv, const uint16_t *scales, int type, size_t j, int kvh) {
    size_t row = j * (size_t)kv->n_heads + (size_t)kvh;
    llm__kv_at r;
    r.at = row * (size_t)kv->hs;
    r.scale = type == LLM_KV_Q8 ? llm_f16_to_f32(scales[row]) : 1.0f;
    return r;
}

/* Elements c..c+7 of a located cache row as f32, converted as llm__kv_row
 * converts them (f16 exactly, int8 times the row's scale). */
LLM__INLINE __m256 llm__kv_load8(const void *cache, int type, llm__kv_at r, int c) {
    size_t at = r.at + (size_t)c;
    if (type == LLM_KV_F32) return _mm256_loadu_ps((const float *)cache + at);
    if (type == LLM_KV_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)cache + at)));
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)((const int8_t *)cache + at));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(r.scale));
}

/* scores[j] = q . k(j0 + j) / sqrt_hs for j < len: eight keys at a time,
 * eight lane accumulators each, as llm__dot8 computes one (hs % 8 == 0).
 * Returns the largest score. */
LLM__INLINE float llm__scores8(float *scores, const float *q, const llm__kv_view *kv, int type, int kvh, int j0,
                               int len, float sqrt_hs) {
    int hs = kv->hs;
    __m256 max = _mm256_set1_ps(-INFINITY);
    for (int b = 0; b < len; b += 8) {
        __m256 lane[8];
        llm__kv_at key[8];
        LLM__UNROLL for (int s = 0; s < 8; s++) {
            int j = b + (s >> 1) + 4 * (s & 1);   /* keys in order out of llm__lane_totals8 */
            if (j >= len) j = len - 1;            /* a short block repeats its last key */
            key[s] = llm__kv_locate(kv, kv->k_scale, type, (size_t)(j0 + j), kvh);
            lane[s] = _mm256_setzero_ps();
        }
        for (int c = 0; c < hs; c += 8) {
            __m256 qc = _mm256_loadu_ps(q + c);
            LLM__UNROLL for (int s = 0; s < 8; s++) lane[s] = _mm256_fmadd_ps(qc, llm__kv_load8(kv->k, type, key[s], c), lane[s]);
        }
        __m256 sc = _mm256_div_ps(llm__lane_totals8(lane), _mm256_set1_ps(sqrt_hs));
        max = _mm256_max_ps(max, sc);   /* a short block's repeated key changes no maximum */
        if (b + 8 <= len) {
            _mm256_storeu_ps(scores + b, sc);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, sc);
            memcpy(scores + b, tmp, (size_t)(len - b) * sizeof(float));
        }
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps(max, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* For nq (1 or 2) heads: out[g][c0 .. c0 + 8 nch) += sum_j p[g][j] v(j0 + j),
 * keys in order, fused, every accumulator in a register and one load of each
 * value chunk for both heads; with sum, also sum[g] += p[g][j] in order (a
 * chain beside the others, not after them). */
LLM__INLINE void llm__accumulate8(float *out, int ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq, int nch,
                                  const llm__kv_view *kv, int type, int kvh, int j0, int len, int c0) {
    __m256 a[2][8];
    float s0 = sum ? sum[0] : 0.0f, s1 = sum && nq > 1 ? sum[1] : 0.0f;
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) a[g][ch] = _mm256_loadu_ps(out + (size_t)g * ldo + c0 + 8 * ch);
    for (int j = 0; j < len; j++) {
        __m256 p0 = _mm256_set1_ps(p[0][j]), p1 = _mm256_set1_ps(p[nq - 1][j]);
        llm__kv_at row = llm__kv_locate(kv, kv->v_scale, type, (size_t)(j0 + j), kvh);
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) {
            __m256 v = llm__kv_load8(kv->v, type, row, c0 + 8 * ch);
            a[0][ch] = _mm256_fmadd_ps(p0, v, a[0][ch]);
            if (nq > 1) a[1][ch] = _mm256_fmadd_ps(p1, v, a[1][ch]);
        }
        if (sum) {
            s0 += p[0][j];
            if (nq > 1) s1 += p[1][j];
        }
    }
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) _mm256_storeu_ps(out + (size_t)g * ldo + c0 + 8 * ch, a[g][ch]);
    if (sum) {
        sum[0] = s0;
        if (nq > 1) sum[1] = s1;
    }
}

/* llm__accumulate8 over a whole head (hs % 8 == 0) in passes of at most
 * eight accumulators, each pass's chunk count a constant inside */
LLM__INLINE void llm__accumulate_head(float *out, int ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq,
                                      const llm__kv_view *kv, int type, int kvh, int j0, int len) {
    int per_pass = 8 / nq;
    for (int c0 = 0; c0 < kv->hs; c0 += 8 * per_pass) {
        int nch = (kv->hs - c0) / 8 < per_pass ? (kv->hs - c0) / 8 : per_pass;
        float *s = c0 == 0 ? sum : NULL;
        switch (nch) {
#define LLM__ACC(k) case k: llm__accumulate8(out, ldo, p, s, nq, k, kv, type, kvh, j0, len, c0); break;
        LLM__ACC(1) LLM__ACC(2) LLM__ACC(3) LLM__ACC(4) LLM__ACC(5) LLM__ACC(6) LLM__ACC(7) default: LLM__ACC(8)
#undef LLM__ACC
        }
    }
}

#endif

#if defined(LLM__Q8_SIMD) && defined(__AVX2__)
/* GGUF's block types: the integer sums of groups of 32 (ref.h's llm__gsum_*)
 * eight lanes at a time by llm__dot32_i8 (VNNI's dpbusd where the CPU has
 * it), four groups' lanes reduced together. Integer sums are exact, so these
 * give the twin's values whatever the lane order; the float steps along the
 * row stay the twin's (simd.h's LLM__GG_TILE). */
#define LLM__HAVE_GG_SUMS 1
/* the totals of four vectors of eight int32 lanes */
LLM__INLINE __m128i llm__hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
/* isum[g] for g < G from vectors of lane sums v(g), four at a time */
#define LLM__GG_SUMS_BY4(isum, G, lanes_of_g)                                                            \
    do {                                                                                                \
        int g_ = 0;                                                                                     \
        for (; g_ + 4 <= (G); g_ += 4) {                                                                \
            __m256i v0_, v1_, v2_, v3_;                                                                 \
            { int g = g_; v0_ = lanes_of_g; }                                                           \
            { int g = g_ + 1; v1_ = lanes_of_g; }                                                       \
            { int g = g_ + 2; v2_ = lanes_of_g; }                                                       \
            { int g = g_ + 3; v3_ = lanes_of_g; }                                                       \
            _mm_storeu_si128((__m128i *)(void *)((isum) + g_), llm__hsum4_i32(v0_, v1_, v2_, v3_));      \
        }                                                                                               \
        for (; g_ < (G); g_++) {                                                                        \
            int g = g_;                                                                                 \
            __m256i z_ = _mm256_setzero_si256();                                                        \
            int32_t t_[4];                                                                              \
            _mm_storeu_si128((__m128i *)(void *)t_, llm__hsum4_i32(lanes_of_g, z_, z_, z_));            \
            (isum)[g_] = t_[0];                                                                         \
        }                                                                                               \
    } while (0)

LLM__INLINE __m256i llm__gg_lanes_q8_0(const unsigned char *row, int g, const int8_t *xq) {
    return llm__dot32_i8(_mm256_setzero_si256(), llm__i8x32_load((const int8_t *)(const void *)(row + (size_t)g * 34 + 2)),
                         llm__i8x32_load(xq + (size_t)g * 32));
}
LLM__INLINE __m256i llm__gg_lanes_q4_0(const unsigned char *row, int g, const int8_t *xq) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(row + (size_t)g * 18 + 2));
    const __m128i low = _mm_set1_epi8(15);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low), _mm_and_si128(b, low));
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    return llm__dot32_i8(_mm256_setzero_si256(), q, llm__i8x32_load(xq + (size_t)g * 32));
}
/* q4_K's codes are 0..15: unsigned times signed directly (pairs fit int16) */
LLM__INLINE __m256i llm__gg_lanes_q4_k(const unsigned char *row, int g, const int8_t *xq) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(row + (size_t)(g / 8) * 144 + 16 + 32 * ((g % 8) / 2)));
    __m256i q = _mm256_and_si256(g & 1 ? _mm256_srli_epi16(b, 4) : b, _mm256_set1_epi8(15));
    __m256i p = _mm256_maddubs_epi16(q, llm__i8x32_load(xq + (size_t)g * 32));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
/* q6_K: codes - 32, lanes 0..3 the first 16 (scale 2k), 4..7 the last (2k + 1) */
LLM__INLINE __m256i llm__gg_lanes_q6_k(const unsigned char *row, int g, const int8_t *xq) {
    const unsigned char *b = row + (size_t)(g / 8) * 210;
    int k = g % 8, h = k >> 2, c = k & 3;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(b + h * 64 + (c & 1) * 32));
    __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(b + 128 + h * 32));
    lo = _mm256_and_si256(c < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(15));
    hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * c)), _mm256_set1_epi8(3));
    __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    __m256i s = llm__dot32_i8(_mm256_setzero_si256(), q, llm__i8x32_load(xq + (size_t)g * 32));
    __m256i sc = _mm256_set_m128i(_mm_set1_epi32((int8_t)b[192 + 2 * k + 1]), _mm_set1_epi32((int8_t)b[192 + 2 * k]));
    return _mm256_mullo_epi32(s, sc);
}
#define llm__gg_sums_q8_0(isum, row, xq, G) LLM__GG_SUMS_BY4(isum, G, llm__gg_lanes_q8_0(row, g, xq))
#define llm__gg_sums_q4_0(isum, row, xq, G) LLM__GG_SUMS_BY4(isum, G, llm__gg_lanes_q4_0(row, g, xq))
#define llm__gg_sums_q4_k(isum, row, xq, G) LLM__GG_SUMS_BY4(isum, G, llm__gg_lanes_q4_k(row, g, xq))
#define llm__gg_sums_q6_k(isum, row, xq, G) LLM__GG_SUMS_BY4(isum, G, llm__gg_lanes_q6_k(row, g, xq))
#endif

#if defined(LLM__HAVE_GG_SUMS) && defined(__F16C__) && defined(__FMA__)
/* The GGUF tiles with the float steps across eight rows at once: lane i of
 * each vector is row a0 + i, and each lane does exactly the twin's steps
 * (fma(isum, d * xs, acc), q4_K's two), group after group, so every row's
 * bits are the twin's. */
#define LLM__HAVE_GG_TILES 1
LLM__INLINE __m256 llm__gg_d8(const unsigned char *const *rc, size_t off) {   /* eight rows' f16 at off */
    uint16_t h[8];
    for (int i = 0; i < 8; i++) memcpy(&h[i], rc[i] + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
}
#define LLM__GG_TILE8(name, with_xsum, d_off)                                                                  \
    static void llm__tile_g##name(float *out, int ldo, const llm_tensor *w, int r, const float *x,              \
                                  const int8_t *xq, const float *xs, int t, int nr, int nc) {                   \
        int n = w->cols, G = n / LLM__GQ;                                                                      \
        size_t chunk_bytes = (size_t)(64 * LLM__GQ / llm__traits[w->type].qblock) *                            \
                             (size_t)llm__traits[w->type].qblock_bytes;                                        \
        int32_t isum[8][64], xsum[64];                                                                         \
        (void)x; (void)xsum;                                                                                   \
        memset(isum, 0, sizeof isum);                                                                          \
        for (int b = 0; b < nc; b++) {                                                                         \
            const int8_t *xb = xq + (size_t)(t + b) * n;                                                       \
            const float *sb = xs + (size_t)(t + b) * G;                                                        \
            float *o = out + (size_t)b * ldo;                                                                  \
            for (int a0 = 0; a0 < nr; a0 += 8) {                                                               \
                int na = nr - a0 < 8 ? nr - a0 : 8;                                                            \
                const unsigned char *rows[8], *rc[8];                                                          \
                for (int i = 0; i < 8; i++) rows[i] = llm__block_row(w, r + a0 + (i < na ? i : 0));            \
                __m256 acc = _mm256_setzero_ps();                                                              \
                for (int c0 = 0; c0 < G; c0 += 64) {                                                           \
                    int cg = G - c0 < 64 ? G - c0 : 64;                                                        \
                    for (int g = 0; g < cg; g++)                                                               \
                        xsum[g] = with_xsum ? llm__sum_i8(xb + (size_t)(c0 + g) * LLM__GQ, LLM__GQ) : 0;       \
                    for (int i = 0; i < 8; i++) rc[i] = rows[i] + (size_t)(c0 / 64) * chunk_bytes;             \
                    for (int i = 0; i < na; i++) llm__gg_sums_##name(isum[i], rc[i], xb + (size_t)c0 * LLM__GQ, cg); \
                    for (int g = 0; g < cg; g++) {                                                             \
                        __m256i iv = _mm256_setr_epi32(isum[0][g], isum[1][g], isum[2][g], isum[3][g], isum[4][g], \
                                                       isum[5][g], isum[6][g], isum[7][g]);                   \
                        __m256 xsv = _mm256_set1_ps(sb[c0 + g]);                                               \
                        LLM__GG_STEP8_##name(acc, rc, g, iv, xsum[g], xsv, d_off);                             \
                    }                                                                                          \
                }                                                                                              \
                float lane[8];                                                                                 \
                _mm256_storeu_ps(lane, acc);                                                                   \
                for (int i = 0; i < na; i++) o[a0 + i] = lane[i];                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
/* acc = fma(isum, d * xs, acc), d the f16 at d_off(g) */
#define LLM__GG_STEP8_D(acc, rc, g, iv, xsv, d_off) \
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_mul_ps(llm__gg_d8(rc, d_off(g)), xsv), acc)
#define LLM__GG_STEP8_q8_0(acc, rc, g, iv, xs1, xsv, d_off) LLM__GG_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__GG_STEP8_q4_0(acc, rc, g, iv, xs1, xsv, d_off) LLM__GG_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__GG_STEP8_q6_k(acc, rc, g, iv, xs1, xsv, d_off) LLM__GG_STEP8_D(acc, rc, g, iv, xsv, d_off)
/* q4_K: fma(sc isum, d xs, acc), then fma(m xsum, -(dmin xs), acc) */
#define LLM__GG_STEP8_q4_k(acc, rc, g, iv, xs1, xsv, d_off)                                                    \
    do {                                                                                                      \
        int32_t sc_[8], m_[8];                                                                                \
        for (int i_ = 0; i_ < 8; i_++) llm__q4k_scale_min(rc[i_] + (size_t)((g) / 8) * 144 + 4, (g) % 8, &sc_[i_], &m_[i_]); \
        __m256i scv_ = _mm256_loadu_si256((const __m256i *)(const void *)sc_);                                \
        __m256i mv_ = _mm256_loadu_si256((const __m256i *)(const void *)m_);                                  \
        size_t o_ = (size_t)((g) / 8) * 144;                                                                  \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(scv_, iv)), _mm256_mul_ps(llm__gg_d8(rc, o_), xsv), acc); \
        __m256 dm_ = _mm256_mul_ps(llm__gg_d8(rc, o_ + 2), xsv);                                              \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mv_, _mm256_set1_epi32(xs1))),           \
                              _mm256_xor_ps(dm_, _mm256_set1_ps(-0.0f)), acc);                                \
    } while (0)
#define LLM__GG_DOFF_q8_0(g) ((size_t)(g) * 34)
#define LLM__GG_DOFF_q4_0(g) ((size_t)(g) * 18)
#define LLM__GG_DOFF_q6_k(g) ((size_t)((g) / 8) * 210 + 208)
#define LLM__GG_DOFF_q4_k(g) ((size_t)((g) / 8) * 144)
LLM__GG_TILE8(q8_0, 0, LLM__GG_DOFF_q8_0)
LLM__GG_TILE8(q4_0, 0, LLM__GG_DOFF_q4_0)
LLM__GG_TILE8(q4_k, 1, LLM__GG_DOFF_q4_k)
LLM__GG_TILE8(q6_k, 0, LLM__GG_DOFF_q6_k)
#endif
