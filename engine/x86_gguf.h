/* engine/x86_gguf.h -- the x86 tiles of GGUF's block types: group sums by
 * VNNI or madd, eight rows per tile; and for q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K the rows
 * in the lanes from repack.h's panels, sixteen (AVX-512 VNNI) or eight
 * (AVX2) at a time. Each gives ref.h's twin's bits (tests/test_kernels.c). */

#if defined(LLM__Q8_SIMD) && defined(__AVX2__)
/* GGUF's block types: the integer sums of groups of 32 (ref.h's llm__gsum_*)
 * eight lanes at a time by llm__dot32_i8 (VNNI's dpbusd where the CPU has
 * it), four groups' lanes reduced together, each group's weights unpacked
 * once for all of a tile's tokens. Integer sums are exact, so these give the
 * twin's values whatever the lane order; the float steps along the row stay
 * the twin's (simd.h's LLM__BLK_TILE, or LLM__BLK_TILE8 below). */
#define LLM__HAVE_BLK_SUMS 1
/* the totals of four vectors of eight int32 lanes */
LLM__INLINE __m128i llm__hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
/* A group's weights unpacked once for every token of a tile: the 32 codes
 * as int16 (lo the first 16, hi the last 16; q6_K's already times their
 * scale, |product| <= 4096) */
typedef struct llm__gw { __m256i lo, hi; } llm__gw;
LLM__INLINE llm__gw llm__gw_i8(__m256i q) {   /* 32 int8 codes as int16 */
    llm__gw w;
    w.lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
    w.hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
    return w;
}
LLM__INLINE llm__gw llm__gw_q8_0(const unsigned char *row, int g) {
    return llm__gw_i8(llm__i8x32_load((const int8_t *)(const void *)(row + (size_t)g * LLM__Q8_0_BYTES + 2)));
}
LLM__INLINE llm__gw llm__gw_q4_0(const unsigned char *row, int g) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(row + (size_t)g * LLM__Q4_0_BYTES + 2));
    const __m128i low = _mm_set1_epi8(15);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low), _mm_and_si128(b, low));
    return llm__gw_i8(_mm256_sub_epi8(q, _mm256_set1_epi8(8)));
}
/* q4_K: codes 0..15 */
LLM__INLINE llm__gw llm__gw_q4_K(const unsigned char *row, int g) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(row + (size_t)(g / 8) * LLM__Q4_K_BYTES + 16 + 32 * ((g % 8) / 2)));
    return llm__gw_i8(_mm256_and_si256(g & 1 ? _mm256_srli_epi16(b, 4) : b, _mm256_set1_epi8(15)));
}
/* q6_K: (codes - 32) times their scale, the first 16 with sc[2k], the last 16 with sc[2k + 1] */
LLM__INLINE llm__gw llm__gw_q6_K(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q6_K_BYTES;
    int k = g % 8, h = k >> 2, c = k & 3;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(b + h * 64 + (c & 1) * 32));
    __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(b + 128 + h * 32));
    lo = _mm256_and_si256(c < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(15));
    hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * c)), _mm256_set1_epi8(3));
    llm__gw w = llm__gw_i8(_mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32)));
    w.lo = _mm256_mullo_epi16(w.lo, _mm256_set1_epi16((int8_t)b[192 + 2 * k]));
    w.hi = _mm256_mullo_epi16(w.hi, _mm256_set1_epi16((int8_t)b[192 + 2 * k + 1]));
    return w;
}
/* acc + the eight lane sums of 16 int16 products w*x, pairs per lane
 * (VNNI's dpwssd where the CPU has it; no pair here reaches 2^31) */
LLM__INLINE __m256i llm__dot16_i16(__m256i acc, __m256i w, __m256i x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, w, x);
#elif defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, w, x);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
#endif
}
/* a group's lane sums: its weights w times the group's activation codes x */
LLM__INLINE __m256i llm__gw_lanes_i16(llm__gw w, const int16_t *x) {
    __m256i s = llm__dot16_i16(_mm256_setzero_si256(), w.lo, _mm256_loadu_si256((const __m256i *)(const void *)x));
    return llm__dot16_i16(s, w.hi, _mm256_loadu_si256((const __m256i *)(const void *)(x + 16)));
}
/* isum[b * istride + g]: a row's sums of groups g < G with nc tokens (token
 * b's codes at xq + b * xstride), four groups' lanes reduced together, each
 * group's weights unpacked once for all the tokens */
#define LLM__BLK_SUMS_NC(name, act_t, lanes)                                                                   \
    static inline void llm__blk_sums_nc_##name(int32_t *isum, size_t istride, const unsigned char *row,      \
                                              const act_t *xq, size_t xstride, int nc, int G) {              \
        int g = 0;                                                                                           \
        for (; g + 4 <= G; g += 4) {                                                                         \
            llm__gw w0 = llm__gw_##name(row, g), w1 = llm__gw_##name(row, g + 1);                            \
            llm__gw w2 = llm__gw_##name(row, g + 2), w3 = llm__gw_##name(row, g + 3);                        \
            for (int b = 0; b < nc; b++) {                                                                   \
                const act_t *x = xq + (size_t)b * xstride + (size_t)g * LLM__GQ;                             \
                _mm_storeu_si128((__m128i *)(void *)(isum + (size_t)b * istride + g),                        \
                                 llm__hsum4_i32(lanes(w0, x), lanes(w1, x + LLM__GQ), lanes(w2, x + 2 * LLM__GQ), \
                                                lanes(w3, x + 3 * LLM__GQ)));                                \
            }                                                                                                \
        }                                                                                                    \
        for (; g < G; g++) {                                                                                 \
            llm__gw w = llm__gw_##name(row, g);                                                              \
            __m256i z = _mm256_setzero_si256();                                                              \
            for (int b = 0; b < nc; b++) {                                                                   \
                int32_t t4[4];                                                                               \
                _mm_storeu_si128((__m128i *)(void *)t4,                                                      \
                                 llm__hsum4_i32(lanes(w, xq + (size_t)b * xstride + (size_t)g * LLM__GQ), z, z, z)); \
                isum[(size_t)b * istride + g] = t4[0];                                                       \
            }                                                                                                \
        }                                                                                                    \
    }
LLM__BLK_SUMS_NC(q8_0, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q4_0, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q4_K, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q6_K, int16_t, llm__gw_lanes_i16)
/* The types added after q6_K, with tiles here: their codes as ref.h's twins
 * define them, so the sums are the twin's isum (q5_K's before its
 * sub-block scale, as q4_K's; q3_K's and iq4_xs's with their scales folded
 * into the codes, as q6_K's: the same integers) */
/* 16 bytes of 4-bit codes: elements 0..15 (low nibbles) in the low lane, 16..31 (high) in the high lane */
LLM__INLINE __m256i llm__nibbles32(const unsigned char *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i low = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low), _mm_and_si128(b, low));
}
/* a little-endian u32 at h as 32 bytes, byte j = 16 where bit j is set (the 5th bit) */
LLM__INLINE __m256i llm__bit5_32(const unsigned char *h) {
    __m256i v = _mm256_set1_epi32((int)llm__le32(h));
    const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_and_si256(_mm256_shuffle_epi8(v, which), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}
LLM__INLINE llm__gw llm__gw_q4_1(const unsigned char *row, int g) {   /* codes 0..15 */
    return llm__gw_i8(llm__nibbles32(row + (size_t)g * LLM__Q4_1_BYTES + 4));
}
LLM__INLINE llm__gw llm__gw_q5_0(const unsigned char *row, int g) {   /* codes - 16 */
    const unsigned char *b = row + (size_t)g * LLM__Q5_0_BYTES;
    __m256i q = _mm256_or_si256(llm__nibbles32(b + 6), llm__bit5_32(b + 2));
    return llm__gw_i8(_mm256_sub_epi8(q, _mm256_set1_epi8(16)));
}
LLM__INLINE llm__gw llm__gw_q5_1(const unsigned char *row, int g) {   /* codes 0..31 */
    const unsigned char *b = row + (size_t)g * LLM__Q5_1_BYTES;
    return llm__gw_i8(_mm256_or_si256(llm__nibbles32(b + 8), llm__bit5_32(b + 4)));
}
LLM__INLINE llm__gw llm__gw_iq4_nl(const unsigned char *row, int g) {   /* the table's values */
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)llm__iq4_values));
    return llm__gw_i8(_mm256_shuffle_epi8(kv, llm__nibbles32(row + (size_t)g * LLM__IQ4_NL_BYTES + 2)));
}
/* q5_K: codes 0..31, before the sub-block's scale */
LLM__INLINE llm__gw llm__gw_q5_K(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q5_K_BYTES;
    int j = g % 8;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(b + 48 + 32 * (j / 2)));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 16));
    lo = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(lo, 4) : lo, _mm256_set1_epi8(15));
    hb = _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    return llm__gw_i8(_mm256_or_si256(lo, _mm256_slli_epi16(hb, 4)));
}
/* q3_K: codes -4..3 times their scales, the first 16 with scale 2k, the last 16 with 2k + 1 */
LLM__INLINE llm__gw llm__gw_q3_K(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q3_K_BYTES;
    int k = g % 8, h = k >> 2, j = k & 3;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32 + 32 * h));
    __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b);
    lo = _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(2 * j)), _mm256_set1_epi8(3));
    hm = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * h + j)), _mm256_set1_epi8(1));
    llm__gw w = llm__gw_i8(_mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hm, 2)), _mm256_set1_epi8(4)));
    w.lo = _mm256_mullo_epi16(w.lo, _mm256_set1_epi16((int16_t)llm__q3_K_scale(b + 96, 2 * k)));
    w.hi = _mm256_mullo_epi16(w.hi, _mm256_set1_epi16((int16_t)llm__q3_K_scale(b + 96, 2 * k + 1)));
    return w;
}
/* iq4_xs: the table's values times the sub-block's scale (|product| <= 4064) */
LLM__INLINE llm__gw llm__gw_iq4_xs(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__IQ4_XS_BYTES;
    int k = g % 8;
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)llm__iq4_values));
    llm__gw w = llm__gw_i8(_mm256_shuffle_epi8(kv, llm__nibbles32(b + 8 + 16 * k)));
    __m256i ls = _mm256_set1_epi16((int16_t)llm__iq4xs_scale(b, k));
    w.lo = _mm256_mullo_epi16(w.lo, ls);
    w.hi = _mm256_mullo_epi16(w.hi, ls);
    return w;
}
/* q2_K: codes 0..3 times their 4-bit scales (the first 16 with scale 2k,
 * the last 16 with 2k + 1); and its mins as weights (m 2k for the first 16,
 * m 2k + 1 for the last), whose sum with the activations is the twin's msum */
LLM__INLINE llm__gw llm__gw_q2_K(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q2_K_BYTES;
    int k = g % 8, h = k >> 2, j = k & 3;
    __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 16 + 32 * h));
    q = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), _mm256_set1_epi8(3));
    llm__gw w = llm__gw_i8(q);
    w.lo = _mm256_mullo_epi16(w.lo, _mm256_set1_epi16((int16_t)(b[2 * k] & 15)));
    w.hi = _mm256_mullo_epi16(w.hi, _mm256_set1_epi16((int16_t)(b[2 * k + 1] & 15)));
    return w;
}
LLM__INLINE llm__gw llm__gw_q2_K_min(const unsigned char *row, int g) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q2_K_BYTES;
    int k = g % 8;
    llm__gw w;
    w.lo = _mm256_set1_epi16((int16_t)(b[2 * k] >> 4));
    w.hi = _mm256_set1_epi16((int16_t)(b[2 * k + 1] >> 4));
    return w;
}
LLM__BLK_SUMS_NC(q2_K, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q2_K_min, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q3_K, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(iq4_xs, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q4_1, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q5_0, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q5_1, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(iq4_nl, int16_t, llm__gw_lanes_i16)
LLM__BLK_SUMS_NC(q5_K, int16_t, llm__gw_lanes_i16)
#undef LLM__BLK_SUMS_NC
/* one token's: simd.h's llm__blk_sums_<type> */
#define llm__blk_sums_q8_0(isum, row, xq, G) llm__blk_sums_nc_q8_0(isum, 0, row, xq, 0, 1, G)
#define llm__blk_sums_q4_0(isum, row, xq, G) llm__blk_sums_nc_q4_0(isum, 0, row, xq, 0, 1, G)
#define llm__blk_sums_q4_K(isum, row, xq, G) llm__blk_sums_nc_q4_K(isum, 0, row, xq, 0, 1, G)
#define llm__blk_sums_q6_K(isum, row, xq, G) llm__blk_sums_nc_q6_K(isum, 0, row, xq, 0, 1, G)
#endif

#if defined(LLM__HAVE_BLK_SUMS) && defined(__F16C__) && defined(__FMA__)
/* The GGUF tiles with the float steps across eight rows at once: lane i of
 * each vector is row a0 + i, and each lane does exactly the twin's steps
 * (fma(isum, d * xs, acc), q4_K's two), group after group, so every row's
 * bits are the twin's. */
#define LLM__HAVE_BLK_TILES 1
#define LLM__HAVE_BLK_TILE_Q8_0 1
#define LLM__HAVE_BLK_TILE_Q4_0 1
#define LLM__HAVE_BLK_TILE_Q4_K 1
#define LLM__HAVE_BLK_TILE_Q6_K 1
LLM__INLINE __m256 llm__blk_d8(const unsigned char *const *rc, size_t off) {   /* eight rows' f16 at off */
    uint16_t h[8];
    for (int i = 0; i < 8; i++) memcpy(&h[i], rc[i] + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
}
/* an 8-row block's sums for all the tile's tokens at once, each group's
 * weights unpacked once (isum[b][i][g]: token b, row i, group g) */
#define LLM__BLK_TILE8(fn, name, with_xsum, d_off, act_t)                                                       \
    LLM__KERNEL void fn(float *out, int ldo, const llm_tensor *w, int r, const float *x,                      \
                        const int8_t *xq, const float *xs, int t, int nr, int nc) {                           \
        int n = w->cols, G = n / LLM__GQ;                                                                      \
        size_t chunk_bytes = (size_t)(64 * LLM__GQ / llm__traits[w->type].qblock) *                            \
                             (size_t)llm__traits[w->type].qblock_bytes;                                        \
        int32_t isum[LLM__NC][8][64], xsum[LLM__NC][64];                                                       \
        const act_t *xb = (const act_t *)(const void *)xq + (size_t)t * n;                                     \
        const float *sb = xs + (size_t)t * G;                                                                  \
        (void)x; (void)xsum;                                                                                   \
        for (int b0 = 0; b0 < nc; b0 += LLM__NC) {                                                             \
            int nb = nc - b0 < LLM__NC ? nc - b0 : LLM__NC;                                                    \
            for (int a0 = 0; a0 < nr; a0 += 8) {                                                               \
                int na = nr - a0 < 8 ? nr - a0 : 8;                                                            \
                const unsigned char *rows[8], *rc[8];                                                          \
                for (int i = 0; i < 8; i++) rows[i] = llm__block_row(w, r + a0 + (i < na ? i : 0));            \
                __m256 acc[LLM__NC];                                                                           \
                for (int b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();                                     \
                for (int c0 = 0; c0 < G; c0 += 64) {                                                           \
                    int cg = G - c0 < 64 ? G - c0 : 64;                                                        \
                    for (int b = 0; b < nb; b++)                                                               \
                        for (int g = 0; g < cg; g++)                                                           \
                            xsum[b][g] = with_xsum ? llm__sum_i16((const int16_t *)(const void *)(xb + (size_t)(b0 + b) * n + (size_t)(c0 + g) * LLM__GQ), LLM__GQ) : 0; \
                    for (int i = 0; i < 8; i++) rc[i] = rows[i] + (size_t)(c0 / 64) * chunk_bytes;             \
                    for (int i = 0; i < na; i++)                                                               \
                        llm__blk_sums_nc_##name(&isum[0][i][0], 8 * 64, rc[i], xb + (size_t)b0 * n + (size_t)c0 * LLM__GQ, (size_t)n, nb, cg); \
                    for (int b = 0; b < nb; b++) /* the spare lanes' sums: zeros (not stored; no 8 KB memset a call) */ \
                        for (int i = na; i < 8; i++) memset(isum[b][i], 0, (size_t)cg * sizeof(int32_t));    \
                    for (int b = 0; b < nb; b++)                                                               \
                        for (int g = 0; g < cg; g++) {                                                         \
                            const int32_t (*is)[64] = isum[b];                                                 \
                            __m256i iv = _mm256_setr_epi32(is[0][g], is[1][g], is[2][g], is[3][g], is[4][g],   \
                                                           is[5][g], is[6][g], is[7][g]);                      \
                            __m256 xsv = _mm256_set1_ps(sb[(size_t)(b0 + b) * G + c0 + g]);                    \
                            LLM__BLK_STEP8_##name(acc[b], rc, g, iv, xsum[b][g], xsv, d_off);                   \
                        }                                                                                      \
                }                                                                                              \
                for (int b = 0; b < nb; b++) {                                                                 \
                    float lane[8];                                                                             \
                    _mm256_storeu_ps(lane, acc[b]);                                                            \
                    for (int i = 0; i < na; i++) out[(size_t)(b0 + b) * ldo + a0 + i] = lane[i];               \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
/* acc = fma(isum, d * xs, acc), d the f16 at d_off(g) */
#define LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off) \
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_mul_ps(llm__blk_d8(rc, d_off(g)), xsv), acc)
#define LLM__BLK_STEP8_q8_0(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__BLK_STEP8_q4_0(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__BLK_STEP8_q6_K(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
/* q4_K: fma(sc isum, d xs, acc), then fma(m xsum, -(dmin xs), acc) */
#define LLM__BLK_STEP8_q4_K(acc, rc, g, iv, xs1, xsv, d_off)                                                    \
    do {                                                                                                      \
        int32_t sc_[8], m_[8];                                                                                \
        for (int i_ = 0; i_ < 8; i_++) llm__q4_K_scale_min(rc[i_] + (size_t)((g) / 8) * LLM__Q4_K_BYTES + 4, (g) % 8, &sc_[i_], &m_[i_]); \
        __m256i scv_ = _mm256_loadu_si256((const __m256i *)(const void *)sc_);                                \
        __m256i mv_ = _mm256_loadu_si256((const __m256i *)(const void *)m_);                                  \
        size_t o_ = (size_t)((g) / 8) * LLM__Q4_K_BYTES;                                                                  \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(scv_, iv)), _mm256_mul_ps(llm__blk_d8(rc, o_), xsv), acc); \
        __m256 dm_ = _mm256_mul_ps(llm__blk_d8(rc, o_ + 2), xsv);                                              \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mv_, _mm256_set1_epi32(xs1))),           \
                              _mm256_xor_ps(dm_, _mm256_set1_ps(-0.0f)), acc);                                \
    } while (0)
#define LLM__BLK_DOFF_q8_0(g) ((size_t)(g) * LLM__Q8_0_BYTES)
#define LLM__BLK_DOFF_q4_0(g) ((size_t)(g) * LLM__Q4_0_BYTES)
#define LLM__BLK_DOFF_q6_K(g) ((size_t)((g) / 8) * LLM__Q6_K_BYTES + 208)
#define LLM__BLK_DOFF_q4_K(g) ((size_t)((g) / 8) * LLM__Q4_K_BYTES)
/* the types added after q6_K, eight rows at a time on AVX2 and AVX-512
 * alike (no panels): the twin's steps, ref.h's llm__gstep2_* */
#define LLM__BLK_STEP8_q5_0(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__BLK_STEP8_iq4_nl(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__BLK_STEP8_q3_K(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
#define LLM__BLK_STEP8_iq4_xs(acc, rc, g, iv, xs1, xsv, d_off) LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off)
/* q4_1, q5_1: fma(isum, d xs, acc), then fma(sum(x), m xs, acc), m the f16 after d */
#define LLM__BLK_STEP8_MIN(acc, rc, g, iv, xs1, xsv, d_off)                                                     \
    do {                                                                                                      \
        LLM__BLK_STEP8_D(acc, rc, g, iv, xsv, d_off);                                                          \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set1_epi32(xs1)),                                     \
                              _mm256_mul_ps(llm__blk_d8(rc, d_off(g) + 2), xsv), acc);                         \
    } while (0)
#define LLM__BLK_STEP8_q4_1 LLM__BLK_STEP8_MIN
#define LLM__BLK_STEP8_q5_1 LLM__BLK_STEP8_MIN
/* q5_K: q4_K's two steps with q5_K's blocks */
#define LLM__BLK_STEP8_q5_K(acc, rc, g, iv, xs1, xsv, d_off)                                                    \
    do {                                                                                                      \
        int32_t sc_[8], m_[8];                                                                                \
        for (int i_ = 0; i_ < 8; i_++) llm__q4_K_scale_min(rc[i_] + d_off(g) + 4, (g) % 8, &sc_[i_], &m_[i_]); \
        __m256i scv_ = _mm256_loadu_si256((const __m256i *)(const void *)sc_);                                \
        __m256i mv_ = _mm256_loadu_si256((const __m256i *)(const void *)m_);                                  \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(scv_, iv)), _mm256_mul_ps(llm__blk_d8(rc, d_off(g)), xsv), acc); \
        __m256 dm_ = _mm256_mul_ps(llm__blk_d8(rc, d_off(g) + 2), xsv);                                       \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mv_, _mm256_set1_epi32(xs1))),           \
                              _mm256_xor_ps(dm_, _mm256_set1_ps(-0.0f)), acc);                                \
    } while (0)
#define LLM__BLK_DOFF_q4_1(g) ((size_t)(g) * LLM__Q4_1_BYTES)
#define LLM__BLK_DOFF_q5_0(g) ((size_t)(g) * LLM__Q5_0_BYTES)
#define LLM__BLK_DOFF_q5_1(g) ((size_t)(g) * LLM__Q5_1_BYTES)
#define LLM__BLK_DOFF_iq4_nl(g) ((size_t)(g) * LLM__IQ4_NL_BYTES)
#define LLM__BLK_DOFF_q5_K(g) ((size_t)((g) / 8) * LLM__Q5_K_BYTES)
#define LLM__BLK_DOFF_q3_K(g) ((size_t)((g) / 8) * LLM__Q3_K_BYTES + 108)
#define LLM__BLK_DOFF_iq4_xs(g) ((size_t)((g) / 8) * LLM__IQ4_XS_BYTES)
#define LLM__HAVE_BLK_TILE_Q3_K 1
#define LLM__HAVE_BLK_TILE_IQ4_XS 1
#define LLM__HAVE_BLK_TILE_Q4_1 1
#define LLM__HAVE_BLK_TILE_Q5_0 1
#define LLM__HAVE_BLK_TILE_Q5_1 1
#define LLM__HAVE_BLK_TILE_IQ4_NL 1
#define LLM__HAVE_BLK_TILE_Q5_K 1
LLM__BLK_TILE8(llm__tile_blk_q4_1, q4_1, 1, LLM__BLK_DOFF_q4_1, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q3_K, q3_K, 0, LLM__BLK_DOFF_q3_K, int16_t)
/* q2_K: LLM__BLK_TILE8 with a second sum per (row, group), the mins' msum,
 * and the twin's two steps: fma(isum, d xs, acc), fma(msum, -(dmin xs), acc) */
#define LLM__HAVE_BLK_TILE_Q2_K 1
LLM__KERNEL void llm__tile_blk_q2_K(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                 const float *xs, int t, int nr, int nc) {
    int n = w->cols, G = n / LLM__GQ;
    size_t chunk_bytes = (size_t)(64 * LLM__GQ / LLM__QK) * LLM__Q2_K_BYTES;
    int32_t isum[LLM__NC][8][64], msum[LLM__NC][8][64];
    const int16_t *xb = (const int16_t *)(const void *)xq + (size_t)t * n;
    const float *sb = xs + (size_t)t * G;
    (void)x;
    memset(isum, 0, sizeof isum);
    memset(msum, 0, sizeof msum);
    for (int b0 = 0; b0 < nc; b0 += LLM__NC) {
        int nb = nc - b0 < LLM__NC ? nc - b0 : LLM__NC;
        for (int a0 = 0; a0 < nr; a0 += 8) {
            int na = nr - a0 < 8 ? nr - a0 : 8;
            const unsigned char *rows[8], *rc[8];
            for (int i = 0; i < 8; i++) rows[i] = llm__block_row(w, r + a0 + (i < na ? i : 0));
            __m256 acc[LLM__NC];
            for (int b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();
            for (int c0 = 0; c0 < G; c0 += 64) {
                int cg = G - c0 < 64 ? G - c0 : 64;
                for (int i = 0; i < 8; i++) rc[i] = rows[i] + (size_t)(c0 / 64) * chunk_bytes;
                for (int i = 0; i < na; i++) {
                    const int16_t *xc = xb + (size_t)b0 * n + (size_t)c0 * LLM__GQ;
                    llm__blk_sums_nc_q2_K(&isum[0][i][0], 8 * 64, rc[i], xc, (size_t)n, nb, cg);
                    llm__blk_sums_nc_q2_K_min(&msum[0][i][0], 8 * 64, rc[i], xc, (size_t)n, nb, cg);
                }
                for (int b = 0; b < nb; b++)
                    for (int g = 0; g < cg; g++) {
                        const int32_t (*is)[64] = isum[b], (*ms)[64] = msum[b];
                        __m256i iv = _mm256_setr_epi32(is[0][g], is[1][g], is[2][g], is[3][g], is[4][g], is[5][g],
                                                       is[6][g], is[7][g]);
                        __m256i mv = _mm256_setr_epi32(ms[0][g], ms[1][g], ms[2][g], ms[3][g], ms[4][g], ms[5][g],
                                                       ms[6][g], ms[7][g]);
                        __m256 xsv = _mm256_set1_ps(sb[(size_t)(b0 + b) * G + c0 + g]);
                        size_t o = (size_t)(g / 8) * LLM__Q2_K_BYTES;
                        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_mul_ps(llm__blk_d8(rc, o + 80), xsv), acc[b]);
                        __m256 dm = _mm256_mul_ps(llm__blk_d8(rc, o + 82), xsv);
                        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mv), _mm256_xor_ps(dm, _mm256_set1_ps(-0.0f)), acc[b]);
                    }
            }
            for (int b = 0; b < nb; b++) {
                float lane[8];
                _mm256_storeu_ps(lane, acc[b]);
                for (int i = 0; i < na; i++) out[(size_t)(b0 + b) * ldo + a0 + i] = lane[i];
            }
        }
    }
}
LLM__BLK_TILE8(llm__tile_blk_iq4_xs, iq4_xs, 0, LLM__BLK_DOFF_iq4_xs, int16_t)
/* the builds with panels (repack.h) of P = LLM__PANEL_ROWS rows, one per
 * lane: AVX-512 VNNI's sixteen, AVX2's eight */
#if LLM__VL == 16 && defined(__AVX512VNNI__) || LLM__VL == 8
#define LLM__PANEL_ROWS LLM__VL
#endif
#ifdef LLM__PANEL_ROWS   /* rows not from a panel for the tiles below */
LLM__BLK_TILE8(llm__tile8_blk_q8_0, q8_0, 0, LLM__BLK_DOFF_q8_0, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q5_0, q5_0, 0, LLM__BLK_DOFF_q5_0, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q5_1, q5_1, 1, LLM__BLK_DOFF_q5_1, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q4_0, q4_0, 0, LLM__BLK_DOFF_q4_0, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q4_K, q4_K, 1, LLM__BLK_DOFF_q4_K, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q6_K, q6_K, 0, LLM__BLK_DOFF_q6_K, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_q5_K, q5_K, 1, LLM__BLK_DOFF_q5_K, int16_t)
LLM__BLK_TILE8(llm__tile8_blk_iq4_nl, iq4_nl, 0, LLM__BLK_DOFF_iq4_nl, int16_t)
#else
LLM__BLK_TILE8(llm__tile_blk_q8_0, q8_0, 0, LLM__BLK_DOFF_q8_0, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q5_0, q5_0, 0, LLM__BLK_DOFF_q5_0, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q5_1, q5_1, 1, LLM__BLK_DOFF_q5_1, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q4_0, q4_0, 0, LLM__BLK_DOFF_q4_0, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q4_K, q4_K, 1, LLM__BLK_DOFF_q4_K, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q6_K, q6_K, 0, LLM__BLK_DOFF_q6_K, int16_t)
LLM__BLK_TILE8(llm__tile_blk_q5_K, q5_K, 1, LLM__BLK_DOFF_q5_K, int16_t)
LLM__BLK_TILE8(llm__tile_blk_iq4_nl, iq4_nl, 0, LLM__BLK_DOFF_iq4_nl, int16_t)
#endif
#endif

#if defined(LLM__HAVE_BLK_TILES) && defined(LLM__PANEL_ROWS) && LLM__PANEL_ROWS == 16
#define LLM__HAVE_PANELS 1   /* q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K read from repack.h's panels too */
/* q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K sixteen rows at a time with the rows in the lanes, so no
 * group sum needs a horizontal add: the sixteen rows' code bytes are
 * transposed (32-bit words: word m of every row in one vector), each word's
 * nibbles become four vectors of int16 code pairs, and dpwssd multiplies
 * each by the matching pair of activation codes, broadcast. Lane i then
 * holds row i's exact group sums and takes the twin's steps along the row:
 * every row's bits are the twin's. A prefill tile runs each group's
 * transposed words against four tokens. */

/* 16 bytes of each of sixteen rows (at w, rb bytes apart) as four vectors:
 * t[m] lane i is row i's word m. rb 0: w is in a panel (repack.h), where
 * the words are so already, 64 bytes a word: the bytes o.. of a row are at
 * 16 o from the panel's start (LLM__AT) */
#define LLM__AT(blk, rb, o) ((blk) + (size_t)(o) * ((rb) ? 1 : 16))
LLM__INLINE void llm__words16(__m512i *t, const unsigned char *w, size_t rb) {
    if (!rb) {
        for (int m = 0; m < 4; m++) t[m] = _mm512_load_si512((const void *)(w + 64 * m));
        return;
    }
    __m512i z[4];
    for (int r = 0; r < 4; r++) { /* rows r, r + 4, r + 8, r + 12 in the four 128-bit lanes */
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)(w + (size_t)r * rb)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(w + (size_t)(r + 4) * rb)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(w + (size_t)(r + 8) * rb)), 2);
        z[r] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(w + (size_t)(r + 12) * rb)), 3);
    }
    /* 4 x 4 transposes of words in each lane: t[m] word 4L + r is row 4L + r's word m */
    __m512i a = _mm512_unpacklo_epi32(z[0], z[1]), b = _mm512_unpackhi_epi32(z[0], z[1]);
    __m512i c = _mm512_unpacklo_epi32(z[2], z[3]), d = _mm512_unpackhi_epi32(z[2], z[3]);
    t[0] = _mm512_unpacklo_epi64(a, c); t[1] = _mm512_unpackhi_epi64(a, c);
    t[2] = _mm512_unpacklo_epi64(b, d); t[3] = _mm512_unpackhi_epi64(b, d);
}
/* the sixteen rows' f16 at blk (rows rb apart) as f32, through memory:
 * faster here than a gather; rb 0: the low halves of a panel's word */
LLM__INLINE __m512 llm__f16_rows16(const unsigned char *blk, size_t rb) {
    if (!rb) return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_load_si512((const void *)blk)));
    uint16_t dh[16];
    for (int i = 0; i < 16; i++) memcpy(&dh[i], blk + (size_t)i * rb, 2);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)dh));
}
/* A word of code bytes b0..b3 as int16 pairs, each nibble masked in place
 * (1, 16, 256 times the code: at most 3840, so even eight words' dpwssd
 * stay below 2^31) or, the top one, shifted down (a mask would leave it
 * negative): (b0, b2) low nibbles, high nibbles, (b1, b3) low, high */
#define LLM__NIB0(t) _mm512_and_si512(t, _mm512_set1_epi16(0x000F))
#define LLM__NIB1(t) _mm512_and_si512(t, _mm512_set1_epi16(0x00F0))
#define LLM__NIB2(t) _mm512_and_si512(t, _mm512_set1_epi16(0x0F00))
#define LLM__NIB3(t) _mm512_srli_epi16(t, 12)
#define LLM__PAIR(xw, i) _mm512_set1_epi32((xw)[i])

/* The activation pairs of a group (32 int16 codes) in the order the code
 * pairs come out, pair p = (x[at_p], x[at_p + 2]). q4_0: word m holds codes
 * 4m..4m+3 (low nibbles) and 4m+16.. (high), at = 4m + 0, 16, 1, 17 for
 * pairs 4m..4m+3. q4_K: word m holds codes 4m..4m+3 of two sub-blocks (low,
 * high nibbles), at = 4m + 0, 1 for pairs 2m, 2m+1. */
LLM__INLINE __m512i llm__pair_order(int q4_K) {
    int16_t idx[32];
    static const int o[4] = { 0, 16, 1, 17 };
    for (int p = 0; p < 32; p++)
        idx[p] = (int16_t)(q4_K ? 4 * (p / 4) + (p / 2) % 2 + 2 * (p % 2) : 4 * (p / 8) + o[(p / 2) % 4] + 2 * (p % 2));
    return _mm512_loadu_si512((const void *)idx);
}

/* The kernels below run a group's weights, unpacked once, against nb
 * tokens (1 to decode, LLM__TB in a prefill tile): xp, xsum and xs are the
 * first token's activation pairs, pair sums and scales at this group, the
 * next tokens' LLM__XP_STRIDE, 64 and 64 further on, and acc[b] is token
 * b's sixteen rows. */
#define LLM__TB 4                          /* tokens a 16-row tile runs at once */
#define LLM__XP_STRIDE (64 * LLM__GQ)      /* a token's chunk of 64 groups' pairs */

/* q4_0 group: acc[b] = fma(isum, d * xs[b], acc[b]) for sixteen rows from
 * their code words t (word m: codes 4m..4m+3 and 4m+16..) and scales d */
LLM__INLINE void llm__q4_0_codes16(__m512 *acc, int nb, const __m512i *t, __m512 d, const int16_t *xp,
                                   const int32_t *xsum, const float *xs) {
    __m512i s[LLM__TB][4];
    LLM__UNROLL for (int b = 0; b < nb; b++)
        for (int e = 0; e < 4; e++) s[b][e] = _mm512_setzero_si512();
    for (int m = 0; m < 4; m++) {   /* one accumulator per nibble position: four short chains */
        __m512i nib[4] = { LLM__NIB0(t[m]), LLM__NIB1(t[m]), LLM__NIB2(t[m]), LLM__NIB3(t[m]) };
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            for (int e = 0; e < 4; e++) s[b][e] = _mm512_dpwssd_epi32(s[b][e], nib[e], LLM__PAIR(xw, 4 * m + e));
        }
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        /* sum code * x (s[1], s[2] exact multiples of 16, 256), less 8 sum(x): the codes' offset */
        __m512i isum = _mm512_add_epi32(_mm512_add_epi32(s[b][0], _mm512_srai_epi32(s[b][1], 4)),
                                        _mm512_add_epi32(_mm512_srai_epi32(s[b][2], 8), s[b][3]));
        isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(8 * xsum[64 * b]));
        acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(xs[64 * b])), acc[b]);
    }
}
/* iq4_nl group (q4_0's layout, each nibble indexing llm__iq4_values):
 * acc[b] = fma(isum, d * xs[b], acc[b]) for sixteen rows, each code pair
 * the table's values looked up by vpermw, whose index is the low five bits
 * of each int16 (the table twice over: the fifth bit, the next nibble's,
 * picks the same value), from the word shifted down by 0, 4, 8 or 12 */
LLM__INLINE void llm__iq4_nl_codes16(__m512 *acc, int nb, const __m512i *t, __m512 d, const int16_t *xp, const float *xs) {
    const __m512i kv = _mm512_cvtepi8_epi16(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)llm__iq4_values)));
    __m512i s[LLM__TB][2];
    LLM__UNROLL for (int b = 0; b < nb; b++) s[b][0] = s[b][1] = _mm512_setzero_si512();
    for (int m = 0; m < 4; m++) {
        __m512i c[4] = { _mm512_permutexvar_epi16(t[m], kv), _mm512_permutexvar_epi16(_mm512_srli_epi16(t[m], 4), kv),
                         _mm512_permutexvar_epi16(_mm512_srli_epi16(t[m], 8), kv),
                         _mm512_permutexvar_epi16(_mm512_srli_epi16(t[m], 12), kv) };
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            for (int e = 0; e < 4; e++) s[b][e & 1] = _mm512_dpwssd_epi32(s[b][e & 1], c[e], LLM__PAIR(xw, 4 * m + e));
        }
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m512i isum = _mm512_add_epi32(s[b][0], s[b][1]);
        acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(xs[64 * b])), acc[b]);
    }
}
/* one group, blk its block in the first row (nl: iq4_nl's, else q4_0's) */
LLM__INLINE void llm__q4_0_group16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const int32_t *xsum, const float *xs, int nl) {
    __m512i t[4];
    llm__words16(t, blk + 2, rb);
    if (nl) llm__iq4_nl_codes16(acc, nb, t, llm__f16_rows16(blk, rb), xp, xs);
    else llm__q4_0_codes16(acc, nb, t, llm__f16_rows16(blk, rb), xp, xsum, xs);
}
/* (a >> 16) | (b << 16) in each 32-bit lane: the word two bytes on */
LLM__INLINE __m512i llm__word_at2(__m512i a, __m512i b) {
#ifdef __AVX512VBMI2__
    return _mm512_shrdi_epi32(a, b, 16);
#else
    return _mm512_or_si512(_mm512_srli_epi32(a, 16), _mm512_slli_epi32(b, 16));
#endif
}
/* Eight groups (144 bytes a row, nine runs of 16) at once: the runs
 * transposed give every group's scale and code words with no gather of
 * scales. Group g's block starts at byte 18 g: for even g a word boundary,
 * so d is the low half of word 9g/2 and each code word straddles two words;
 * for odd g two bytes past one, so d is the high half of the word before
 * and the code words are whole. */
LLM__INLINE void llm__q4_0_octet16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const int32_t *xsum, const float *xs, int ng, int nl) {
    __m512i wd[36];   /* wd[k]: lane i is row i's bytes 4k..4k+3 */
    for (int k = 0; k < 9; k++) llm__words16(wd + 4 * k, LLM__AT(blk, rb, 16 * k), rb);
    LLM__UNROLL for (int g = 0; g < 8; g++) {   /* unrolled: wd's indices constants, wd in registers */
        if (g == ng) break;                     /* the first ng (fewer: a panel's padded last run) */
        __m512i t[4], dw;
        if (g % 2 == 0) {
            int w0 = 9 * g / 2;
            for (int m = 0; m < 4; m++) t[m] = llm__word_at2(wd[w0 + m], wd[w0 + m + 1]);
            dw = wd[w0];
        } else {
            int w0 = (LLM__Q4_0_BYTES * g + 2) / 4;
            for (int m = 0; m < 4; m++) t[m] = wd[w0 + m];
            dw = _mm512_srli_epi32(wd[w0 - 1], 16);
        }
        __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw));
        if (nl) llm__iq4_nl_codes16(acc, nb, t, d, xp + g * LLM__GQ, xs + g);
        else llm__q4_0_codes16(acc, nb, t, d, xp + g * LLM__GQ, xsum + g, xs + g);
    }
}

/* q8_0 group for sixteen rows: its eight code words t[m] (codes 4m..4m+3,
 * int8) as int16 pairs sign-extended in place, (4m, 4m+2) by a shift up
 * and back, (4m+1, 4m+3) by one down, against the pairs of
 * llm__pair_order(1); then the twin's step fma(isum, d * xs, acc). In the
 * file, blk is the block (d, then the codes from byte 2); in a panel, the
 * block's nine words (its 34 bytes in 36), each code word two bytes on. */
LLM__INLINE void llm__q8_0_group16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const float *xs) {
    __m512i t[8];
    __m512 d;
    if (rb) {
        llm__words16(t, blk + 2, rb);
        llm__words16(t + 4, blk + 18, rb);
        d = llm__f16_rows16(blk, rb);
    } else {
        __m512i a = _mm512_load_si512((const void *)blk);
        d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(a));
        for (int m = 0; m < 8; m++) {
            __m512i b = _mm512_load_si512((const void *)(blk + 64 * (m + 1)));
            t[m] = llm__word_at2(a, b);
            a = b;
        }
    }
    __m512i s[LLM__TB][2];
    LLM__UNROLL for (int b = 0; b < nb; b++) s[b][0] = s[b][1] = _mm512_setzero_si512();
    for (int m = 0; m < 8; m++) {
        __m512i c0 = _mm512_srai_epi16(_mm512_slli_epi16(t[m], 8), 8), c1 = _mm512_srai_epi16(t[m], 8);
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            s[b][0] = _mm512_dpwssd_epi32(s[b][0], c0, LLM__PAIR(xw, 2 * m));
            s[b][1] = _mm512_dpwssd_epi32(s[b][1], c1, LLM__PAIR(xw, 2 * m + 1));
        }
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m512i isum = _mm512_add_epi32(s[b][0], s[b][1]);
        acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(xs[64 * b])), acc[b]);
    }
}
/* the first ng of eight groups, gb a group's bytes a row (34 in the file,
 * 36 in a panel) */
LLM__INLINE void llm__q8_0_octet16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, size_t gb,
                                   const int16_t *xp, const float *xs, int ng) {
    for (int g = 0; g < ng; g++) llm__q8_0_group16(acc, nb, LLM__AT(blk, rb, (size_t)g * gb), rb, xp + g * LLM__GQ, xs + g);
}

/* q5_0's and q5_1's fifth bits: h (bit j: code j's) in the two forms whose int16
 * halves a shift brings under the pairs of llm__pair_order(0): ha's low
 * half bits 0..15 of h, its high half bits 2..17 (codes 4m + o and
 * 4m + o + 2 at bit 4m + o, o = 0, 1); hb's bits 16..31 and 18..31 (codes
 * 4m + 16 + o and + 18 + o). llm__q5_bit: that bit at bit 4 of each int16,
 * 16 where it is set. */
LLM__INLINE __m512i llm__q5_bit16(__m512i v, int at) {
    v = at >= 4 ? _mm512_srli_epi16(v, (unsigned)(at - 4)) : _mm512_slli_epi16(v, (unsigned)(4 - at));
    return _mm512_and_si512(v, _mm512_set1_epi16(16));
}
/* q5_0 (q5_1 0) or q5_1 (1) group for sixteen rows from their code words
 * t (word m: nibbles of codes 4m..4m+3 low, 4m+16.. high, as q4_0's),
 * fifth bits h, scales d (and q5_1's mins mn): each word's four pairs of
 * codes 0..31, (4m, 4m+2), (4m+16, 4m+18), (4m+1, 4m+3), (4m+17, 4m+19),
 * the nibble joined to its bit, against the pairs of llm__pair_order(0);
 * q5_0: isum = sum code * x less 16 sum(x) (the codes' offset), then the
 * twin's step fma(isum, d * xs, acc); q5_1: isum = sum code * x, then the
 * twin's two steps fma(isum, d * xs, acc), fma(sum(x), m * xs, acc) */
LLM__INLINE void llm__q5_codes16(__m512 *acc, int nb, const __m512i *t, __m512i h, __m512 d, __m512 mn, const int16_t *xp,
                                 const int32_t *xsum, const float *xs, int q5_1) {
    const __m512i low = _mm512_set1_epi32(0xFFFF);
    __m512i ha = _mm512_or_si512(_mm512_and_si512(h, low), _mm512_andnot_si512(low, _mm512_slli_epi32(h, 14)));
    __m512i hb = _mm512_or_si512(_mm512_srli_epi32(h, 16), _mm512_andnot_si512(low, _mm512_srli_epi32(h, 2)));
    const __m512i m15 = _mm512_set1_epi16(15);
    __m512i s[LLM__TB][2];
    LLM__UNROLL for (int b = 0; b < nb; b++) s[b][0] = s[b][1] = _mm512_setzero_si512();
    for (int m = 0; m < 4; m++) {
        __m512i c[4] = { _mm512_or_si512(_mm512_and_si512(t[m], m15), llm__q5_bit16(ha, 4 * m)),
                         _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(t[m], 4), m15), llm__q5_bit16(hb, 4 * m)),
                         _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(t[m], 8), m15), llm__q5_bit16(ha, 4 * m + 1)),
                         _mm512_or_si512(_mm512_srli_epi16(t[m], 12), llm__q5_bit16(hb, 4 * m + 1)) };
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            for (int e = 0; e < 4; e++) s[b][e & 1] = _mm512_dpwssd_epi32(s[b][e & 1], c[e], LLM__PAIR(xw, 4 * m + e));
        }
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m512i isum = _mm512_add_epi32(s[b][0], s[b][1]);
        __m512 xsb = _mm512_set1_ps(xs[64 * b]);
        if (!q5_1) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(16 * xsum[64 * b]));
        acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, xsb), acc[b]);
        if (q5_1) acc[b] = _mm512_fmadd_ps(_mm512_set1_ps((float)xsum[64 * b]), _mm512_mul_ps(mn, xsb), acc[b]);
    }
}
/* one q5_0 group, blk its block in the first row: in the file d, then h
 * from byte 2, the nibbles from byte 6; in a panel the block's six words
 * (its 22 bytes in 24), h and each code word two bytes on. q5_1's (24
 * bytes, six whole words): d, m, then h from byte 4, the nibbles from 8. */
LLM__INLINE void llm__q5_group16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                 const int32_t *xsum, const float *xs, int q5_1) {
    __m512i t[4], h;
    __m512 d, mn = _mm512_setzero_ps();
    if (q5_1 && rb) {
        __m512i hw[4];
        llm__words16(hw, blk + 4, rb);
        h = hw[0];
        llm__words16(t, blk + 8, rb);
        d = llm__f16_rows16(blk, rb);
        mn = llm__f16_rows16(blk + 2, rb);
    } else if (q5_1) {
        __m512i a = _mm512_load_si512((const void *)blk);
        d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(a));
        mn = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(a, 16)));
        h = _mm512_load_si512((const void *)(blk + 64));
        for (int m = 0; m < 4; m++) t[m] = _mm512_load_si512((const void *)(blk + 64 * (m + 2)));
    } else if (rb) {
        __m512i hw[4];
        llm__words16(hw, blk + 2, rb);
        h = hw[0];
        llm__words16(t, blk + 6, rb);
        d = llm__f16_rows16(blk, rb);
    } else {
        __m512i a = _mm512_load_si512((const void *)blk);
        d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(a));
        __m512i b = _mm512_load_si512((const void *)(blk + 64));
        h = llm__word_at2(a, b);
        for (int m = 0; m < 4; m++) {
            __m512i nx = _mm512_load_si512((const void *)(blk + 64 * (m + 2)));
            t[m] = llm__word_at2(b, nx);
            b = nx;
        }
    }
    llm__q5_codes16(acc, nb, t, h, d, mn, xp, xsum, xs, q5_1);
}
/* the first ng of eight groups, gb a group's bytes a row (q5_0: 22 in the
 * file, 24 in a panel; q5_1: 24) */
LLM__INLINE void llm__q5_octet16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, size_t gb,
                                 const int16_t *xp, const int32_t *xsum, const float *xs, int ng, int q5_1) {
    for (int g = 0; g < ng; g++)
        llm__q5_group16(acc, nb, LLM__AT(blk, rb, (size_t)g * gb), rb, xp + g * LLM__GQ, xsum + g, xs + g, q5_1);
}

/* q4_K sub-block j's 6-bit scales and mins of sixteen rows from the scale
 * words h1..h3 (bytes 0..3, 4..7, 8..11), as llm__q4_K_scale_min */
LLM__INLINE void llm__q4_K_scale_min16(const __m512i *h, int j, __m512i *sc, __m512i *m) {
    const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(15), two = _mm512_set1_epi32(3);
    if (j < 4) {
        *sc = _mm512_and_si512(_mm512_srli_epi32(h[1], 8 * j), six);
        *m = _mm512_and_si512(_mm512_srli_epi32(h[2], 8 * j), six);
    } else {
        int q = 8 * (j - 4);
        *sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], q), four),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[1], q + 6), two), 4));
        *m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], q + 4), four),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[2], q + 6), two), 4));
    }
}
/* q4_K's and q5_K's products and steps for sixteen rows: one code word's
 * four int16 pairs c (sub-block 2p's codes in c[0] and c[2], 2p + 1's in
 * c[1] and c[3], as 1, 256 or 16 times the code, or shifted down) against
 * word m of sub-blocks 2p and 2p + 1's activations, into s[b][0..3] */
LLM__INLINE void llm__k_quads16(__m512i s[][4], int nb, const __m512i *c, const int16_t *xp, int p, int m) {
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        const int *x0 = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE + 64 * p), *x1 = x0 + 16;
        s[b][0] = _mm512_dpwssd_epi32(s[b][0], c[0], LLM__PAIR(x0, 2 * m));
        s[b][2] = _mm512_dpwssd_epi32(s[b][2], c[2], LLM__PAIR(x0, 2 * m + 1));
        s[b][1] = _mm512_dpwssd_epi32(s[b][1], c[1], LLM__PAIR(x1, 2 * m));
        s[b][3] = _mm512_dpwssd_epi32(s[b][3], c[3], LLM__PAIR(x1, 2 * m + 1));
    }
}
/* then sub-blocks 2p and 2p + 1's two steps each, the twin's:
 * fma(sc * isum, d xs) and fma(m * sum(x), -dmin xs) */
LLM__INLINE void llm__k_steps16(__m512 *acc, int nb, __m512i s[][4], const __m512i *h, __m512 d, __m512 dmin, int p,
                                const int32_t *xsum, const float *xs) {
    for (int k = 0; k < 2; k++) {
        int j = 2 * p + k;
        __m512i sc, m;
        llm__q4_K_scale_min16(h, j, &sc, &m);
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            __m512i isum = k ? _mm512_add_epi32(_mm512_srai_epi32(s[b][1], 4), s[b][3])
                             : _mm512_add_epi32(s[b][0], _mm512_srai_epi32(s[b][2], 8));
            __m512 xsv = _mm512_set1_ps(xs[64 * b + j]);
            acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(sc, isum)), _mm512_mul_ps(d, xsv), acc[b]);
            acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(m, _mm512_set1_epi32(xsum[64 * b + j]))),
                                     _mm512_xor_ps(_mm512_mul_ps(dmin, xsv), _mm512_set1_ps(-0.0f)), acc[b]);
        }
    }
}
/* q4_K block of 256 (eight groups) for sixteen rows: per group the twin's
 * two steps, fma(sc isum, d xs, acc), then fma(m xsum, -(dmin xs), acc) */
LLM__INLINE void llm__q4_K_block16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const int32_t *xsum, const float *xs) {
    __m512i h[4], t[4];
    llm__words16(h, blk, rb);          /* d | dmin << 16, then the 12 scale bytes */
    __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    for (int p = 0; p < 4; p++) {   /* sub-blocks 2p and 2p + 1: low and high nibbles of 32 bytes */
        __m512i s[LLM__TB][4];
        LLM__UNROLL for (int b = 0; b < nb; b++)
            for (int e = 0; e < 4; e++) s[b][e] = _mm512_setzero_si512();
        for (int half = 0; half < 2; half++) {
            llm__words16(t, LLM__AT(blk, rb, 16 + 32 * p + 16 * half), rb);
            for (int mm = 0; mm < 4; mm++) {
                int m = 4 * half + mm;
                __m512i nib[4] = { LLM__NIB0(t[mm]), LLM__NIB1(t[mm]), LLM__NIB2(t[mm]), LLM__NIB3(t[mm]) };
                llm__k_quads16(s, nb, nib, xp, p, m);
            }
        }
        llm__k_steps16(acc, nb, s, h, d, dmin, p, xsum, xs);
    }
}

/* q5_K block of 256 (eight groups) for sixteen rows: q4_K's, each code
 * joined to its fifth bit. Sub-blocks 2p and 2p + 1 are the low and high
 * nibbles of qs words 12 + 8p .. 19 + 8p, their fifth bits bits 2p and
 * 2p + 1 of qh word m (4 .. 11: its bytes are elements 4m .. 4m + 3, as
 * the qs word's). Each code pair is made where q4_K's nibble sits (1, 16,
 * 256 times the code, or shifted down), its bit moved to bit 4 of the
 * code: 256 times a code of up to 31 against sixteen activations of at
 * most LLM__Q16_MAX is below 2^31, so the sums are exact; then the twin's
 * two steps per sub-block, as q4_K's. */
LLM__INLINE __m512i llm__shift16(__m512i v, int by) {   /* v << by, or >> -by, per int16 */
    return by >= 0 ? _mm512_slli_epi16(v, (unsigned)by) : _mm512_srli_epi16(v, (unsigned)-by);
}
LLM__INLINE void llm__q5_K_block16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const int32_t *xsum, const float *xs) {
    __m512i h[4], qh[8], t[4];
    llm__words16(h, blk, rb);          /* d | dmin << 16, then the 12 scale bytes */
    llm__words16(qh, LLM__AT(blk, rb, 16), rb);
    llm__words16(qh + 4, LLM__AT(blk, rb, 32), rb);
    __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    for (int p = 0; p < 4; p++) {
        __m512i s[LLM__TB][4];
        LLM__UNROLL for (int b = 0; b < nb; b++)
            for (int e = 0; e < 4; e++) s[b][e] = _mm512_setzero_si512();
        for (int half = 0; half < 2; half++) {
            llm__words16(t, LLM__AT(blk, rb, 48 + 32 * p + 16 * half), rb);
            for (int mm = 0; mm < 4; mm++) {
                int m = 4 * half + mm;
                /* the fifth bits: element 4m's (and 4m + 2's) bit j at bit j of an int16, 4m + 1's at 8 + j */
                __m512i e0 = llm__shift16(qh[m], 4 - 2 * p);   /* bit 2p to 4 and 12 */
                __m512i c[4] = {
                    _mm512_or_si512(LLM__NIB0(t[mm]), _mm512_and_si512(e0, _mm512_set1_epi16(0x0010))),
                    _mm512_or_si512(LLM__NIB1(t[mm]), _mm512_and_si512(_mm512_slli_epi16(qh[m], (unsigned)(7 - 2 * p)),
                                                                         _mm512_set1_epi16(0x0100))),
                    _mm512_or_si512(LLM__NIB2(t[mm]), _mm512_and_si512(e0, _mm512_set1_epi16(0x1000))),
                    _mm512_or_si512(LLM__NIB3(t[mm]), _mm512_and_si512(_mm512_srli_epi16(qh[m], (unsigned)(5 + 2 * p)),
                                                                         _mm512_set1_epi16(0x0010))) };
                llm__k_quads16(s, nb, c, xp, p, m);
            }
        }
        llm__k_steps16(acc, nb, s, h, d, dmin, p, xsum, xs);
    }
}

/* q6_K block of 256 (eight groups) for sixteen rows. Group k = 4h + c takes
 * the low (c < 2) or high nibbles of ql[64h + 32(c & 1) + l] and bits 2c,
 * 2c + 1 of qh[32h + l]; per 16 values (a quarter q, one scale) the three
 * byte runs are transposed, each word's even and odd bytes become int16
 * code pairs (nibble | high bits << 4, less 32), against the pairs of
 * llm__pair_order(1). isum = sc[2k] (first 16) + sc[2k + 1] (last 16), then
 * the twin's step fma(isum, d * xs, acc). */
LLM__INLINE __m512i llm__q6_K_pair(__m512i nib, __m512i hb, int s_nib, int s_hb) {
    /* the nibble at bit s_nib and the two bits at s_hb of each int16's low byte, as a code - 32 */
    __m512i lo = _mm512_and_si512(_mm512_srli_epi16(nib, (unsigned)s_nib), _mm512_set1_epi16(0x000F));
    __m512i hi = s_hb >= 4 ? _mm512_srli_epi16(hb, (unsigned)(s_hb - 4)) : _mm512_slli_epi16(hb, (unsigned)(4 - s_hb));
    hi = _mm512_and_si512(hi, _mm512_set1_epi16(0x0030));
    return _mm512_sub_epi16(_mm512_or_si512(lo, hi), _mm512_set1_epi16(32));
}
LLM__INLINE void llm__q6_K_block16(__m512 *acc, int nb, const unsigned char *blk, size_t rb, const int16_t *xp,
                                   const float *xs) {
    __m512i sw[4];
    llm__words16(sw, LLM__AT(blk, rb, 192), rb);   /* the 16 int8 scales: sw[w] holds sc[4w .. 4w + 3] */
    __m512 d = llm__f16_rows16(LLM__AT(blk, rb, 208), rb);
    for (int h = 0; h < 2; h++) {
        __m512i a[2][4], bb[2][4], qh[2][4];   /* the quarters' byte runs, transposed once for the four groups */
        for (int q = 0; q < 2; q++) {
            llm__words16(a[q], LLM__AT(blk, rb, 64 * h + 16 * q), rb);
            llm__words16(bb[q], LLM__AT(blk, rb, 64 * h + 32 + 16 * q), rb);
            llm__words16(qh[q], LLM__AT(blk, rb, 128 + 32 * h + 16 * q), rb);
        }
        for (int c = 0; c < 4; c++) {
            int k = 4 * h + c, sn = c < 2 ? 0 : 4;
            __m512i sum[LLM__TB][2];
            for (int q = 0; q < 2; q++) {
                const __m512i *nbv = c & 1 ? bb[q] : a[q];
                LLM__UNROLL for (int b = 0; b < nb; b++) sum[b][q] = _mm512_setzero_si512();
                for (int m = 0; m < 4; m++) {
                    int wm = 4 * q + m;   /* the word's pairs: values 4 wm + (0, 2) and + (1, 3) */
                    __m512i p0 = llm__q6_K_pair(nbv[m], qh[q][m], sn, 2 * c), p1 = llm__q6_K_pair(nbv[m], qh[q][m], sn + 8, 2 * c + 8);
                    LLM__UNROLL for (int b = 0; b < nb; b++) {
                        const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE + 32 * k);
                        sum[b][q] = _mm512_dpwssd_epi32(sum[b][q], p0, LLM__PAIR(xw, 2 * wm));
                        sum[b][q] = _mm512_dpwssd_epi32(sum[b][q], p1, LLM__PAIR(xw, 2 * wm + 1));
                    }
                }
            }
            int j0 = 2 * k, j1 = 2 * k + 1;   /* the scales' bytes: word j / 4, byte j % 4, signed */
            __m512i sc0 = _mm512_srai_epi32(_mm512_slli_epi32(sw[j0 / 4], (unsigned)(24 - 8 * (j0 % 4))), 24);
            __m512i sc1 = _mm512_srai_epi32(_mm512_slli_epi32(sw[j1 / 4], (unsigned)(24 - 8 * (j1 % 4))), 24);
            LLM__UNROLL for (int b = 0; b < nb; b++) {
                __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(sc0, sum[b][0]), _mm512_mullo_epi32(sc1, sum[b][1]));
                acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(xs[64 * b + k])), acc[b]);
            }
        }
    }
}

/* A chunk of up to 64 groups of nb tokens' activations (xb, token stride
 * n; scales sb, stride G) as the kernels read them: each group's pairs in
 * the type's order (xp), their sum (xsum) and scale (xsc); the tokens from
 * nc on copy the last (a tile of 2 or 3 tokens runs as LLM__TB, the copies'
 * results dropped) */
LLM__INLINE void llm__pairs16(int16_t *xp, int32_t *xsum, float *xsc, const int16_t *xb, const float *sb, int n, int G,
                              int c0, int cg, int nb, int nc, __m512i order) {
    for (int b = 0; b < nb; b++) {
        int bs = b < nc ? b : nc - 1;
        for (int g = 0; g < cg; g++) {
            __m512i v = _mm512_loadu_si512((const void *)(xb + (size_t)bs * n + (size_t)(c0 + g) * LLM__GQ));
            _mm512_storeu_si512((void *)(xp + (size_t)b * LLM__XP_STRIDE + g * LLM__GQ), _mm512_permutexvar_epi16(order, v));
            xsum[64 * b + g] = _mm512_reduce_add_epi32(_mm512_madd_epi16(v, _mm512_set1_epi16(1)));
            xsc[64 * b + g] = sb[(size_t)bs * G + c0 + g];
        }
    }
}

/* Decode's prefetch of a panel: the run LLM__PANEL_AHEAD runs on, into L2
 * (LLM__PREFETCH_L2). Measured on Zen 4 (AVX-512 build, one thread, three
 * interleaved runs each, decode tok/s): prefetcht0 two runs ahead ->
 * prefetcht2 four runs ahead, 110M q4_0 158-172 -> 243-264, 42M q4_0 563-575
 * -> 650-695, 42M q4_K 540-647 -> 674-726; prefetcht0 moved with where its
 * loop fell in a 64-byte line, prefetcht2 does not. Prefill (several tokens
 * over each run) fetches nothing: 110M q4_0 582-627 -> 717-733 tok/s */
#ifndef LLM__PANEL_AHEAD
#define LLM__PANEL_AHEAD 4
#endif
/* The tile of q4_0 (kind 0), q4_K (1), q6_K (2), q8_0 (3), q5_0 (4), q5_1 (5), q5_K (6) or iq4_nl (7) for nr >= 16
 * rows and nb (1 or LLM__TB) of the nc tokens at a time: a chunk of up to
 * 64 groups' activation pairs at a time, sixteen rows over it; gb8 bytes a
 * row for eight groups (a q4_0 or q8_0 block is one group, a K-quant block
 * eight).
 * pan: the rows come from w's panels (repack.h; r a multiple of 16, any nr),
 * one stream in address order, each vector loaded as it is; else from the
 * file's rows, sixteen streams transposed as they come. */
LLM__INLINE void llm__tile16_nb(float *out, int ldo, const llm_tensor *w, int r, const int16_t *xb, const float *sb,
                                int nr, int nc, int nb, int kind, int pan) {
    int n = w->cols, G = n / LLM__GQ;
    /* eight groups' bytes: a q6_K block is 210 bytes in the file, 212
     * (whole words, the traits' panel_slot) in a panel; a q8_0 block 34, 36 */
    const llm__type_traits *tr = &llm__traits[w->type];
    size_t rb = pan ? 0 : llm__block_row_bytes(w);
    size_t blocks8 = (size_t)(8 * LLM__GQ / tr->qblock);
    size_t gb8 = blocks8 * (size_t)(pan && tr->panel_unit ? tr->panel_slot : tr->qblock_bytes);
    size_t panel_bytes = 16 * llm__panel_row_bytes(w);
    const __m512i order = llm__pair_order(kind == 1 || kind == 2 || kind == 3 || kind == 6);
    int16_t xp[LLM__TB * LLM__XP_STRIDE];   /* each token's chunk of up to 64 groups' pairs */
    int32_t xsum[LLM__TB * 64];             /* their sums */
    float xsc[LLM__TB * 64];                /* and scales */
    for (int c0 = 0; c0 < G; c0 += 64) {
        int cg = G - c0 < 64 ? G - c0 : 64;
        llm__pairs16(xp, xsum, xsc, xb, sb, n, G, c0, cg, nb, nc, order);
        for (int done = 0; done < nr; done += 16) {
            /* from the file, a last short block overlaps the one before: its
             * rows are computed again (the same bits) but only the new ones
             * stored; a panel's rows past the matrix are zeros, not stored */
            int a0 = pan || done + 16 <= nr ? done : nr - 16;
            __mmask16 fresh = (__mmask16)(0xFFFFu << (done - a0));
            if (nr - done < 16 && pan) fresh = (__mmask16)((1u << (nr - done)) - 1);
            const unsigned char *rows = pan ? (const unsigned char *)w->panels + (size_t)(r + a0) / 16 * panel_bytes
                                            : llm__block_row(w, r + a0);
            rows = LLM__AT(rows, rb, (size_t)c0 / 8 * gb8);
            int ahead = w->rows - (r + a0 + 16);   /* rows after these, in this call or the next */
            __m512 acc[LLM__TB];
            LLM__UNROLL for (int b = 0; b < nb; b++)
                acc[b] = c0 && b < nc ? _mm512_maskz_loadu_ps(fresh, out + (size_t)b * ldo + a0) : _mm512_setzero_ps();
            for (int g = 0, span; g < cg; g += span) {   /* eight groups at a time, q4_0's last few one by one */
                const unsigned char *blk = LLM__AT(rows, rb, (size_t)g * gb8 / 8);
                span = (kind && kind != 7) || pan || cg - g >= 8 ? 8 : 1;
                /* sixteen row streams defeat the hardware prefetcher: fetch the
                 * next sixteen rows meanwhile, in address order where one
                 * chunk is the whole row (their 16 gb8 / 8 bytes a group),
                 * else their same blocks, half the rows per group (q4_0:
                 * 36 bytes a row every two groups, every line). A panel is
                 * one stream, which the prefetcher follows. */
                if (pan) {   /* decode: the run LLM__PANEL_AHEAD runs on, in this panel or the next */
                    /* q8_0: as many bytes on as q4_0's (one run of 288 bytes a
                     * row, not two; 42M q8_0 decode on Zen 4, loaded: 370 ->
                     * 405 and 309 -> 349 tok/s, medians of 5) */
                    size_t ahead_bytes = (size_t)LLM__PANEL_AHEAD * 16 * (kind == 3 ? (size_t)LLM__PANEL_RUN : gb8);
                    const unsigned char *next = blk + ahead_bytes;
                    if (nb == 1) for (size_t k = 0; k < 16 * gb8; k += 64) LLM__PREFETCH_L2(next + k);
                } else if (G <= 64) {
                    size_t at = (size_t)16 * rb + (size_t)g * 2 * gb8, end = (size_t)(16 + (ahead < 16 ? ahead : 16)) * rb;
                    for (size_t k = 0; k < 2 * gb8 * (size_t)span && at + k < end; k += 64) LLM__PREFETCH(rows + at + k);
                } else if ((!kind || kind >= 3) && span == 8) {   /* q4_0's, q8_0's, q5_0's, q5_K's eight groups: gb8 bytes of each row */
                    for (int i = 0; i < 16 && i < ahead; i++)
                        for (size_t k = 0; k < gb8; k += 64) LLM__PREFETCH(blk + (size_t)(16 + i) * rb + k);
                } else {
                    for (int i = g & 1; i < 16 && i < ahead; i += kind ? 1 : 2) LLM__PREFETCH(blk + (size_t)(16 + i) * rb);
                }
                const int16_t *xg = xp + g * LLM__GQ;
                if (kind == 4 || kind == 5) llm__q5_octet16(acc, nb, blk, rb, gb8 / 8, xg, xsum + g, xsc + g, cg - g < 8 ? cg - g : 8, kind == 5);
                else if (kind == 3) llm__q8_0_octet16(acc, nb, blk, rb, gb8 / 8, xg, xsc + g, cg - g < 8 ? cg - g : 8);
                else if (kind == 2) llm__q6_K_block16(acc, nb, blk, rb, xg, xsc + g);
                else if (kind == 1) llm__q4_K_block16(acc, nb, blk, rb, xg, xsum + g, xsc + g);
                else if (kind == 6) llm__q5_K_block16(acc, nb, blk, rb, xg, xsum + g, xsc + g);
                else if (span == 8) llm__q4_0_octet16(acc, nb, blk, rb, xg, xsum + g, xsc + g, cg - g < 8 ? cg - g : 8, kind == 7);
                else llm__q4_0_group16(acc, nb, blk, rb, xg, xsum + g, xsc + g, kind == 7);
            }
            LLM__UNROLL for (int b = 0; b < nb && b < nc; b++) _mm512_mask_storeu_ps(out + (size_t)b * ldo + a0, fresh, acc[b]);
        }
    }
}
/* nc tokens: LLM__TB at a time, a single one (decode) alone */
LLM__INLINE void llm__tile16(float *out, int ldo, const llm_tensor *w, int r, const int8_t *xq, const float *xs,
                             int t, int nr, int nc, int kind, int pan) {
    int n = w->cols, G = n / LLM__GQ;
    for (int b = 0; b < nc; b += LLM__TB) {
        const int16_t *xb = (const int16_t *)(const void *)xq + (size_t)(t + b) * n;
        const float *sb = xs + (size_t)(t + b) * G;
        float *o = out + (size_t)b * ldo;
        if (nc - b == 1) llm__tile16_nb(o, ldo, w, r, xb, sb, nr, 1, 1, kind, pan);
        else llm__tile16_nb(o, ldo, w, r, xb, sb, nr, nc - b < LLM__TB ? nc - b : LLM__TB, LLM__TB, kind, pan);
    }
}
/* The tiles' entry points start on a 64-byte boundary: their loops are
 * long, and where the linker happened to place them moved 110M q4_K decode
 * by a quarter (measured on Zen 5, the same code at another address) */
#if defined(__GNUC__)
#define LLM__CODE_ALIGN __attribute__((aligned(64)))
#else
#define LLM__CODE_ALIGN
#endif
/* A type's tile: its panels (kind k of llm__tile16), else sixteen rows read
 * from the file, else the eight-row tile */
#define LLM__TILE16_OF(type, k) \
    LLM__CODE_ALIGN \
    LLM__KERNEL void llm__tile_blk_##type(float *out, int ldo, const llm_tensor *w, int r, const float *x, \
                                         const int8_t *xq, const float *xs, int t, int nr, int nc) { \
        if (w->panels && r % 16 == 0) llm__tile16(out, ldo, w, r, xq, xs, t, nr, nc, k, 1); \
        else if (nr >= 16) llm__tile16(out, ldo, w, r, xq, xs, t, nr, nc, k, 0); \
        else llm__tile8_blk_##type(out, ldo, w, r, x, xq, xs, t, nr, nc); \
    }
LLM__TILE16_OF(q8_0, 3)
LLM__TILE16_OF(q5_0, 4)
LLM__TILE16_OF(q5_1, 5)
LLM__TILE16_OF(q4_0, 0)
LLM__TILE16_OF(q4_K, 1)
LLM__TILE16_OF(q6_K, 2)
LLM__TILE16_OF(q5_K, 6)
LLM__TILE16_OF(iq4_nl, 7)
#undef LLM__TILE16_OF
#endif

#if defined(LLM__HAVE_BLK_TILES) && defined(LLM__PANEL_ROWS) && LLM__PANEL_ROWS == 8
#define LLM__HAVE_PANELS 1   /* q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K read from repack.h's panels too */
/* AVX2's form of the panel tiles above: q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K, q6_K eight rows at a
 * time from repack.h's eight-row panels, row i in lane i, so no group sum
 * needs a horizontal add. Each panel vector is word m of the eight rows;
 * its nibbles (q6_K's with their high bits) become vectors of int16 code
 * pairs, shifted down to the codes themselves, and madd (VNNI's dpwssd
 * where the CPU has it: llm__dot16_i16) multiplies each by the matching
 * pair of activation codes, broadcast, into one int32 sum per token: lane
 * i holds row i's exact group sum (q6_K's codes times their scales before
 * the sum: the same integer as the twin's two halves, and no partial sum
 * of at most 32 products of 4096 * 16383 reaches 2^31). Then each lane
 * takes the twin's float steps along the row: every row's bits are the
 * twin's. A prefill tile runs each group's words against four tokens. Only
 * panels come here (a matrix not repacked, or rows not starting a panel,
 * take LLM__BLK_TILE8's eight rows above). */
#define LLM__TB 4                          /* tokens a panel tile runs at once */
#define LLM__XP_STRIDE (64 * LLM__GQ)      /* a token's chunk of 64 groups' pairs */
#define LLM__PANEL_TOKENS LLM__TB         /* tokens simd.h's driver gives a panel tile (LLM__NC: 2) */
/* word k of a panel's run at p (eight rows, 32 bytes a word) */
#define LLM__PW8(p, k) _mm256_load_si256((const __m256i *)(const void *)((p) + 32 * (size_t)(k)))
#define LLM__C16(v) _mm256_set1_epi16(v)
/* the low halves of eight words as f32 (the rows' f16) */
LLM__INLINE __m256 llm__f16_lo8(__m256i w) {
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(w, pick), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
}
/* s[b] += the eight lanes' products of code pairs c with token b's activation pair i */
#define LLM__PAIR8(xw, i) _mm256_set1_epi32((xw)[i])

/* q4_0 group from its code words t (word m: codes 4m..4m+3 low nibbles,
 * 4m+16.. high) and the rows' d: acc[b] = fma(isum, d * xs[b], acc[b]),
 * isum = sum code * x less 8 sum(x) (the codes' offset) */
LLM__INLINE void llm__q4_0_codes8(__m256 *acc, int nb, const __m256i *t, __m256 d, const int16_t *xp,
                                  const int32_t *xsum, const float *xs) {
    __m256i s[LLM__TB];
    LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
    if (nb == 1) {   /* one token: the nibbles masked in place (1, 16, 256 times the code), four sums shifted down at the end */
        const int *xw = (const int *)(const void *)xp;
        __m256i e[4] = { s[0], s[0], s[0], s[0] };
        for (int m = 0; m < 4; m++) {
            e[0] = llm__dot16_i16(e[0], _mm256_and_si256(t[m], LLM__C16(0x000F)), LLM__PAIR8(xw, 4 * m));
            e[1] = llm__dot16_i16(e[1], _mm256_and_si256(t[m], LLM__C16(0x00F0)), LLM__PAIR8(xw, 4 * m + 1));
            e[2] = llm__dot16_i16(e[2], _mm256_and_si256(t[m], LLM__C16(0x0F00)), LLM__PAIR8(xw, 4 * m + 2));
            e[3] = llm__dot16_i16(e[3], _mm256_srli_epi16(t[m], 12), LLM__PAIR8(xw, 4 * m + 3));
        }
        s[0] = _mm256_add_epi32(_mm256_add_epi32(e[0], _mm256_srai_epi32(e[1], 4)), _mm256_add_epi32(_mm256_srai_epi32(e[2], 8), e[3]));
    }
    for (int m = 0; m < 4 && nb > 1; m++) {   /* pairs (4m, 4m+2), (4m+16, 4m+18), (4m+1, 4m+3), (4m+17, 4m+19) */
        __m256i nib[4] = { _mm256_and_si256(t[m], LLM__C16(15)), _mm256_and_si256(_mm256_srli_epi16(t[m], 4), LLM__C16(15)),
                           _mm256_and_si256(_mm256_srli_epi16(t[m], 8), LLM__C16(15)), _mm256_srli_epi16(t[m], 12) };
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            for (int e = 0; e < 4; e++) s[b] = llm__dot16_i16(s[b], nib[e], LLM__PAIR8(xw, 4 * m + e));
        }
    }
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m256i isum = _mm256_sub_epi32(s[b], _mm256_set1_epi32(8 * xsum[64 * b]));
        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(xs[64 * b])), acc[b]);
    }
}
/* The first ng of a run's eight groups (144 bytes a row). Group g's block
 * starts at byte 18 g: for even g a word boundary, so d is the low half of
 * word 9g/2 and each code word straddles two words; for odd g two bytes
 * past one, so d is the high half of the word before and the code words
 * are whole. */
/* iq4_nl group (q4_0's layout, each nibble indexing llm__iq4_values) from
 * its code words t and the rows' d: each word's bytes' low and high
 * nibbles looked up by pshufb in the table plus 128 (1..241, a byte), each
 * int16's low and high byte then the pairs (4m, 4m+2), (4m+16, 4m+18),
 * (4m+1, 4m+3), (4m+17, 4m+19) of q4_0's order; isum = sum code * x less
 * 128 sum(x) (the offset), then the twin's step fma(isum, d * xs, acc) */
LLM__INLINE void llm__iq4_nl_codes8(__m256 *acc, int nb, const __m256i *t, __m256 d, const int16_t *xp,
                                    const int32_t *xsum, const float *xs) {
    const __m256i kv = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)llm__iq4_values)),
                                       _mm256_set1_epi8(-128));
    __m256i s[LLM__TB], s1 = _mm256_setzero_si256();   /* s1: one token's second chain */
    LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
    for (int m = 0; m < 4; m++) {
        __m256i lo = _mm256_shuffle_epi8(kv, _mm256_and_si256(t[m], _mm256_set1_epi8(15)));
        __m256i hi = _mm256_shuffle_epi8(kv, _mm256_and_si256(_mm256_srli_epi16(t[m], 4), _mm256_set1_epi8(15)));
        __m256i c[4] = { _mm256_and_si256(lo, LLM__C16(0x00FF)), _mm256_and_si256(hi, LLM__C16(0x00FF)),
                         _mm256_srli_epi16(lo, 8), _mm256_srli_epi16(hi, 8) };
        if (nb == 1) {
            const int *xw = (const int *)(const void *)xp;
            s[0] = llm__dot16_i16(s[0], c[0], LLM__PAIR8(xw, 4 * m));
            s1 = llm__dot16_i16(s1, c[1], LLM__PAIR8(xw, 4 * m + 1));
            s[0] = llm__dot16_i16(s[0], c[2], LLM__PAIR8(xw, 4 * m + 2));
            s1 = llm__dot16_i16(s1, c[3], LLM__PAIR8(xw, 4 * m + 3));
            continue;
        }
        LLM__UNROLL for (int b = 0; b < nb; b++) {
            const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE);
            for (int e = 0; e < 4; e++) s[b] = llm__dot16_i16(s[b], c[e], LLM__PAIR8(xw, 4 * m + e));
        }
    }
    if (nb == 1) s[0] = _mm256_add_epi32(s[0], s1);
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m256i isum = _mm256_sub_epi32(s[b], _mm256_set1_epi32(128 * xsum[64 * b]));
        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(xs[64 * b])), acc[b]);
    }
}
/* (nl: iq4_nl's groups, else q4_0's) */
LLM__INLINE void llm__q4_0_run8(__m256 *acc, int nb, const unsigned char *run, const int16_t *xp, const int32_t *xsum,
                                const float *xs, int ng, int nl) {
    LLM__UNROLL for (int g = 0; g < 8; g++) {   /* unrolled: the words' indices constants */
        if (g == ng) break;
        __m256i t[4];
        __m256 d;
        if (g % 2 == 0) {
            int w0 = 9 * g / 2;
            __m256i a = LLM__PW8(run, w0);
            d = llm__f16_lo8(a);
            for (int m = 0; m < 4; m++) {
                __m256i b = LLM__PW8(run, w0 + m + 1);
                t[m] = _mm256_or_si256(_mm256_srli_epi32(a, 16), _mm256_slli_epi32(b, 16));
                a = b;
            }
        } else {
            int w0 = (LLM__Q4_0_BYTES * g + 2) / 4;
            d = llm__f16_lo8(_mm256_srli_epi32(LLM__PW8(run, w0 - 1), 16));
            for (int m = 0; m < 4; m++) t[m] = LLM__PW8(run, w0 + m);
        }
        if (nl) llm__iq4_nl_codes8(acc, nb, t, d, xp + g * LLM__GQ, xsum + g, xs + g);
        else llm__q4_0_codes8(acc, nb, t, d, xp + g * LLM__GQ, xsum + g, xs + g);
    }
}

/* The first ng of a run's eight q5_0 groups (24 bytes a row each, the
 * block's 22 in six words): d is the low half of the group's first word,
 * h (the fifth bits) and code word m (as q4_0's) two bytes on, each
 * straddling two words. Each word's four pairs of codes 0..31, (4m, 4m+2),
 * (4m+16, 4m+18), (4m+1, 4m+3), (4m+17, 4m+19), are the nibbles joined to
 * their bits, as llm__q5_codes16's, against llm__pairs8's q4_0 order;
 * isum = sum code * x less 16 sum(x), then the twin's step fma(isum,
 * d * xs, acc). q5_1 (the flag; 24 bytes, six whole words): d, m in the
 * first word, h the second, the code words whole; isum = sum code * x,
 * then the twin's fma(isum, d * xs, acc), fma(sum(x), m * xs, acc). */
LLM__INLINE __m256i llm__q5_bit8(__m256i v, int at) {
    v = at >= 4 ? _mm256_srli_epi16(v, at - 4) : _mm256_slli_epi16(v, 4 - at);
    return _mm256_and_si256(v, LLM__C16(16));
}
LLM__INLINE void llm__q5_run8(__m256 *acc, int nb, const unsigned char *run, const int16_t *xp, const int32_t *xsum,
                              const float *xs, int ng, int q5_1) {
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    for (int g = 0; g < ng; g++) {
        int w0 = LLM__Q5_0_SLOT / 4 * g;
        __m256i a = LLM__PW8(run, w0), b = LLM__PW8(run, w0 + 1), t[4], h;
        __m256 d = llm__f16_lo8(a), mn = _mm256_setzero_ps();
        if (q5_1) {
            mn = llm__f16_lo8(_mm256_srli_epi32(a, 16));
            h = b;
            for (int m = 0; m < 4; m++) t[m] = LLM__PW8(run, w0 + m + 2);
        } else {
            h = _mm256_or_si256(_mm256_srli_epi32(a, 16), _mm256_slli_epi32(b, 16));
            for (int m = 0; m < 4; m++) {
                __m256i nx = LLM__PW8(run, w0 + m + 2);
                t[m] = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_slli_epi32(nx, 16));
                b = nx;
            }
        }
        __m256i ha = _mm256_or_si256(_mm256_and_si256(h, low), _mm256_andnot_si256(low, _mm256_slli_epi32(h, 14)));
        __m256i hb = _mm256_or_si256(_mm256_srli_epi32(h, 16), _mm256_andnot_si256(low, _mm256_srli_epi32(h, 2)));
        __m256i s[LLM__TB], s1 = _mm256_setzero_si256();   /* s1: one token's second chain */
        LLM__UNROLL for (int k = 0; k < nb; k++) s[k] = _mm256_setzero_si256();
        for (int m = 0; m < 4; m++) {
            __m256i c[4] = { _mm256_or_si256(_mm256_and_si256(t[m], LLM__C16(15)), llm__q5_bit8(ha, 4 * m)),
                             _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t[m], 4), LLM__C16(15)), llm__q5_bit8(hb, 4 * m)),
                             _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t[m], 8), LLM__C16(15)), llm__q5_bit8(ha, 4 * m + 1)),
                             _mm256_or_si256(_mm256_srli_epi16(t[m], 12), llm__q5_bit8(hb, 4 * m + 1)) };
            if (nb == 1) {
                const int *xw = (const int *)(const void *)(xp + LLM__GQ * g);
                s[0] = llm__dot16_i16(s[0], c[0], LLM__PAIR8(xw, 4 * m));
                s1 = llm__dot16_i16(s1, c[1], LLM__PAIR8(xw, 4 * m + 1));
                s[0] = llm__dot16_i16(s[0], c[2], LLM__PAIR8(xw, 4 * m + 2));
                s1 = llm__dot16_i16(s1, c[3], LLM__PAIR8(xw, 4 * m + 3));
                continue;
            }
            LLM__UNROLL for (int k = 0; k < nb; k++) {
                const int *xw = (const int *)(const void *)(xp + (size_t)k * LLM__XP_STRIDE + LLM__GQ * g);
                for (int e = 0; e < 4; e++) s[k] = llm__dot16_i16(s[k], c[e], LLM__PAIR8(xw, 4 * m + e));
            }
        }
        if (nb == 1) s[0] = _mm256_add_epi32(s[0], s1);
        LLM__UNROLL for (int k = 0; k < nb; k++) {
            __m256 xsk = _mm256_set1_ps(xs[64 * k + g]);
            __m256i isum = q5_1 ? s[k] : _mm256_sub_epi32(s[k], _mm256_set1_epi32(16 * xsum[64 * k + g]));
            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, xsk), acc[k]);
            if (q5_1) acc[k] = _mm256_fmadd_ps(_mm256_set1_ps((float)xsum[64 * k + g]), _mm256_mul_ps(mn, xsk), acc[k]);
        }
    }
}

/* The first ng of a run's eight q8_0 groups (36 bytes a row each, the
 * block's 34 in nine words): d is the low half of the group's first word,
 * code word m (codes 4m..4m+3, int8) two bytes on, straddling words m and
 * m + 1. Its int16 pairs are sign-extended in place, (4m, 4m+2) by a shift
 * up and back, (4m+1, 4m+3) by one down, against llm__pairs8's q4_K order;
 * then the twin's step fma(isum, d * xs, acc). */
LLM__INLINE void llm__q8_0_run8(__m256 *acc, int nb, const unsigned char *run, const int16_t *xp, const float *xs, int ng) {
    for (int g = 0; g < ng; g++) {
        int w0 = LLM__Q8_0_SLOT / 4 * g;
        __m256i a = LLM__PW8(run, w0), s[LLM__TB], s1 = _mm256_setzero_si256();   /* s1: one token's second chain */
        __m256 d = llm__f16_lo8(a);
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
        for (int m = 0; m < 8; m++) {
            __m256i nx = LLM__PW8(run, w0 + m + 1);
            __m256i t = _mm256_or_si256(_mm256_srli_epi32(a, 16), _mm256_slli_epi32(nx, 16));
            a = nx;
            __m256i c0 = _mm256_srai_epi16(_mm256_slli_epi16(t, 8), 8), c1 = _mm256_srai_epi16(t, 8);
            if (nb == 1) {
                const int *xw = (const int *)(const void *)(xp + LLM__GQ * g);
                s[0] = llm__dot16_i16(s[0], c0, LLM__PAIR8(xw, 2 * m));
                s1 = llm__dot16_i16(s1, c1, LLM__PAIR8(xw, 2 * m + 1));
                continue;
            }
            LLM__UNROLL for (int b = 0; b < nb; b++) {
                const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE + LLM__GQ * g);
                s[b] = llm__dot16_i16(s[b], c0, LLM__PAIR8(xw, 2 * m));
                s[b] = llm__dot16_i16(s[b], c1, LLM__PAIR8(xw, 2 * m + 1));
            }
        }
        if (nb == 1) s[0] = _mm256_add_epi32(s[0], s1);
        LLM__UNROLL for (int b = 0; b < nb; b++)
            acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[b]), _mm256_mul_ps(d, _mm256_set1_ps(xs[64 * b + g])), acc[b]);
    }
}

/* q4_K sub-block j's 6-bit scales and mins of eight rows from the scale
 * words h[1..3] (bytes 0..3, 4..7, 8..11), as llm__q4_K_scale_min */
LLM__INLINE void llm__q4_K_scale_min8(const __m256i *h, int j, __m256i *sc, __m256i *m) {
    const __m256i six = _mm256_set1_epi32(63), four = _mm256_set1_epi32(15), two = _mm256_set1_epi32(3);
    if (j < 4) {
        *sc = _mm256_and_si256(_mm256_srli_epi32(h[1], 8 * j), six);
        *m = _mm256_and_si256(_mm256_srli_epi32(h[2], 8 * j), six);
    } else {
        int q = 8 * (j - 4);
        *sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h[3], q), four),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h[1], q + 6), two), 4));
        *m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h[3], q + 4), four),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h[2], q + 6), two), 4));
    }
}
/* q4_K block of 256 (eight groups) for eight rows: sub-block j = 2p + k is
 * the low (k 0) or high nibbles of words 4 + 8p .. 11 + 8p; per sub-block
 * the twin's two steps, fma(sc isum, d xs, acc), then fma(m xsum, -(dmin
 * xs), acc). Several tokens take a sub-block at a time, the codes shifted
 * down (one sum per token); one token (decode) both of a word's
 * sub-blocks, its nibbles masked in place (1, 16, 256 times the code: at
 * most 3840, so eight words' sums stay below 2^31), four sums shifted down
 * at the end. */
LLM__INLINE void llm__q4_K_step8(__m256 *acc, int nb, const __m256i *h, __m256 d, __m256 dmin, int j, const __m256i *s,
                                 const int32_t *xsum, const float *xs) {
    __m256i sc, m;
    llm__q4_K_scale_min8(h, j, &sc, &m);
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        __m256 xsv = _mm256_set1_ps(xs[64 * b + j]);
        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(sc, s[b])), _mm256_mul_ps(d, xsv), acc[b]);
        acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(m, _mm256_set1_epi32(xsum[64 * b + j]))),
                                 _mm256_xor_ps(_mm256_mul_ps(dmin, xsv), _mm256_set1_ps(-0.0f)), acc[b]);
    }
}
/* q4_K's and q5_K's sums for eight rows, one token: word mm's code pairs
 * c (sub-block 2p's in c[0] and c[2], 2p + 1's in c[1] and c[3]; 1, 16 or
 * 256 times the code) against the sub-blocks' activations x0 and x1 */
LLM__INLINE void llm__k_quads8(__m256i *e, const __m256i *c, const int *x0, const int *x1, int mm) {
    e[0] = llm__dot16_i16(e[0], c[0], LLM__PAIR8(x0, 2 * mm));
    e[2] = llm__dot16_i16(e[2], c[2], LLM__PAIR8(x0, 2 * mm + 1));
    e[1] = llm__dot16_i16(e[1], c[1], LLM__PAIR8(x1, 2 * mm));
    e[3] = llm__dot16_i16(e[3], c[3], LLM__PAIR8(x1, 2 * mm + 1));
}
/* then sub-blocks 2p and 2p + 1's steps (the sums shifted down to the codes') */
LLM__INLINE void llm__k_pair_steps8(__m256 *acc, const __m256i *h, __m256 d, __m256 dmin, int p, const __m256i *e,
                                    const int32_t *xsum, const float *xs) {
    __m256i s0 = _mm256_add_epi32(e[0], _mm256_srai_epi32(e[2], 8)), s1 = _mm256_add_epi32(_mm256_srai_epi32(e[1], 4), e[3]);
    llm__q4_K_step8(acc, 1, h, d, dmin, 2 * p, &s0, xsum, xs);
    llm__q4_K_step8(acc, 1, h, d, dmin, 2 * p + 1, &s1, xsum, xs);
}
/* several tokens: sub-block j's codes c0 (4mm, 4mm + 2) and c1 (4mm + 1,
 * 4mm + 3) against each token's pairs */
LLM__INLINE void llm__k_pairs8(__m256i *s, int nb, __m256i c0, __m256i c1, const int16_t *xp, int j, int mm) {
    LLM__UNROLL for (int b = 0; b < nb; b++) {
        const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE + LLM__GQ * j);
        s[b] = llm__dot16_i16(s[b], c0, LLM__PAIR8(xw, 2 * mm));
        s[b] = llm__dot16_i16(s[b], c1, LLM__PAIR8(xw, 2 * mm + 1));
    }
}
LLM__INLINE void llm__q4_K_block8(__m256 *acc, int nb, const unsigned char *blk, const int16_t *xp,
                                  const int32_t *xsum, const float *xs) {
    __m256i h[4];
    for (int k = 0; k < 4; k++) h[k] = LLM__PW8(blk, k);   /* d | dmin << 16, then the 12 scale bytes */
    __m256 d = llm__f16_lo8(h[0]), dmin = llm__f16_lo8(_mm256_srli_epi32(h[0], 16));
    if (nb == 1) {
        for (int p = 0; p < 4; p++) {
            const int *x0 = (const int *)(const void *)(xp + LLM__GQ * 2 * p), *x1 = x0 + LLM__GQ / 2;
            __m256i e[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
            for (int mm = 0; mm < 8; mm++) {   /* pairs (4mm, 4mm+2), (4mm+1, 4mm+3) of sub-blocks 2p and 2p + 1 */
                __m256i t = LLM__PW8(blk, 4 + 8 * p + mm);
                __m256i c[4] = { _mm256_and_si256(t, LLM__C16(0x000F)), _mm256_and_si256(t, LLM__C16(0x00F0)),
                                 _mm256_and_si256(t, LLM__C16(0x0F00)), _mm256_srli_epi16(t, 12) };
                llm__k_quads8(e, c, x0, x1, mm);
            }
            llm__k_pair_steps8(acc, h, d, dmin, p, e, xsum, xs);
        }
        return;
    }
    for (int j = 0; j < 8; j++) {   /* not unrolled: unrolled, 42M prefill ran 1759 -> 1406 tok/s (Zen 4) */
        int sh = 4 * (j & 1);   /* (b0, b2) at bit sh of each int16, (b1, b3) at 8 + sh */
        __m256i s[LLM__TB];
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
        for (int mm = 0; mm < 8; mm++) {   /* pairs (4mm, 4mm+2), (4mm+1, 4mm+3) */
            __m256i t = LLM__PW8(blk, 4 + 8 * (j / 2) + mm);
            __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(t, sh), LLM__C16(15));
            __m256i c1 = sh ? _mm256_srli_epi16(t, 12) : _mm256_and_si256(_mm256_srli_epi16(t, 8), LLM__C16(15));
            llm__k_pairs8(s, nb, c0, c1, xp, j, mm);
        }
        llm__q4_K_step8(acc, nb, h, d, dmin, j, s, xsum, xs);
    }
}

/* q5_K block of 256 (eight groups; 176 bytes a row, 44 words) for eight
 * rows: q4_K_block8's, each code joined to its fifth bit. Sub-block
 * j = 2p + k is the low (k 0) or high nibbles of words 12 + 8p .. 19 + 8p,
 * its fifth bits bit j of each byte of words 4 .. 11 (word 4 + mm: the
 * elements of qs word mm). One token (decode): q4_K's codes in place (1,
 * 16, 256 times the code), each with its bit moved to bit 4 of the code
 * (256 times a code of up to 31 against sixteen activations of at most
 * LLM__Q16_MAX stays below 2^31: the sums are exact). Several: a
 * sub-block at a time, the codes shifted down. Then q4_K's steps, the
 * twin's. */
LLM__INLINE __m256i llm__shift16x8(__m256i v, int by) {   /* v << by, or >> -by, per int16 */
    return by >= 0 ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(by)) : _mm256_srl_epi16(v, _mm_cvtsi32_si128(-by));
}
LLM__INLINE void llm__q5_K_block8(__m256 *acc, int nb, const unsigned char *blk, const int16_t *xp,
                                  const int32_t *xsum, const float *xs) {
    __m256i h[4];
    for (int k = 0; k < 4; k++) h[k] = LLM__PW8(blk, k);   /* d | dmin << 16, then the 12 scale bytes */
    __m256 d = llm__f16_lo8(h[0]), dmin = llm__f16_lo8(_mm256_srli_epi32(h[0], 16));
    if (nb == 1) {
        for (int p = 0; p < 4; p++) {
            const int *x0 = (const int *)(const void *)(xp + LLM__GQ * 2 * p), *x1 = x0 + LLM__GQ / 2;
            __m256i e[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
            for (int mm = 0; mm < 8; mm++) {   /* pairs (4mm, 4mm+2), (4mm+1, 4mm+3) of sub-blocks 2p and 2p + 1 */
                __m256i t = LLM__PW8(blk, 12 + 8 * p + mm), hq = LLM__PW8(blk, 4 + mm);
                __m256i e0 = llm__shift16x8(hq, 4 - 2 * p);   /* bit 2p to 4 and 12 */
                __m256i c[4] = {
                    _mm256_or_si256(_mm256_and_si256(t, LLM__C16(0x000F)), _mm256_and_si256(e0, LLM__C16(0x0010))),
                    _mm256_or_si256(_mm256_and_si256(t, LLM__C16(0x00F0)),
                                    _mm256_and_si256(llm__shift16x8(hq, 7 - 2 * p), LLM__C16(0x0100))),
                    _mm256_or_si256(_mm256_and_si256(t, LLM__C16(0x0F00)), _mm256_and_si256(e0, LLM__C16(0x1000))),
                    _mm256_or_si256(_mm256_srli_epi16(t, 12),
                                    _mm256_and_si256(llm__shift16x8(hq, -(5 + 2 * p)), LLM__C16(0x0010))) };
                llm__k_quads8(e, c, x0, x1, mm);
            }
            llm__k_pair_steps8(acc, h, d, dmin, p, e, xsum, xs);
        }
        return;
    }
    for (int j = 0; j < 8; j++) {
        int sh = 4 * (j & 1);   /* (b0, b2) at bit sh of each int16, (b1, b3) at 8 + sh; their bits at j, 8 + j */
        __m256i s[LLM__TB];
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
        for (int mm = 0; mm < 8; mm++) {   /* pairs (4mm, 4mm+2), (4mm+1, 4mm+3) */
            __m256i t = LLM__PW8(blk, 12 + 8 * (j / 2) + mm), hq = LLM__PW8(blk, 4 + mm);
            __m256i c0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t, sh), LLM__C16(15)),
                                         _mm256_and_si256(llm__shift16x8(hq, 4 - j), LLM__C16(16)));
            __m256i c1 = sh ? _mm256_srli_epi16(t, 12) : _mm256_and_si256(_mm256_srli_epi16(t, 8), LLM__C16(15));
            c1 = _mm256_or_si256(c1, _mm256_and_si256(llm__shift16x8(hq, -(4 + j)), LLM__C16(16)));
            llm__k_pairs8(s, nb, c0, c1, xp, j, mm);
        }
        llm__q4_K_step8(acc, nb, h, d, dmin, j, s, xsum, xs);
    }
}

/* q6_K block of 256 (eight groups; 212 bytes a row, 53 words) for eight
 * rows. Group k = 4h + c takes the low (c < 2) or high nibbles of ql words
 * 16h + 8(c & 1) + wm and bits 2c, 2c + 1 of qh words 32 + 8h + wm (wm
 * 0..7): each byte's code (nibble | high bits << 4) is made in place, then
 * each word's even and odd bytes become int16 code pairs, less 32. Scales:
 * sc[2k] for wm < 4, sc[2k + 1] after. One token (decode) multiplies its
 * two halves' sums by them; several fold them into the pairs once for all
 * (code * sc fits int16). Then the twin's step fma(isum, d * xs, acc). */
LLM__INLINE void llm__q6_K_pairs8(__m256i ql, __m256i qh, int sn, int c, int off, __m256i *p0, __m256i *p1) {
    /* off: less 32 (else the codes 0..63, the offset taken off the sums) */
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, sn), _mm256_set1_epi8(0x0F));
    __m256i hi = 2 * c >= 4 ? _mm256_srli_epi16(qh, 2 * c - 4) : _mm256_slli_epi16(qh, 4 - 2 * c);
    __m256i code = _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));   /* 0..63 in each byte */
    *p0 = _mm256_and_si256(code, LLM__C16(0x00FF));
    *p1 = _mm256_srli_epi16(code, 8);
    if (off) {
        *p0 = _mm256_sub_epi16(*p0, LLM__C16(32));
        *p1 = _mm256_sub_epi16(*p1, LLM__C16(32));
    }
}
/* scale byte j of the eight rows' scale words sw (int8) as an int32 in each lane */
LLM__INLINE __m256i llm__q6_K_scale8(const __m256i *sw, int j) {
    return _mm256_srai_epi32(_mm256_slli_epi32(sw[j / 4], 24 - 8 * (j % 4)), 24);
}
LLM__INLINE void llm__q6_K_block8(__m256 *acc, int nb, const unsigned char *blk, const int16_t *xp, const int32_t *xsum,
                                  const float *xs) {
    __m256i sw[4];
    for (int k = 0; k < 4; k++) sw[k] = LLM__PW8(blk, 48 + k);   /* sw[w] holds sc[4w .. 4w + 3] */
    __m256 d = llm__f16_lo8(LLM__PW8(blk, 52));
    LLM__UNROLL for (int k = 0; k < 8; k++) {   /* unrolled: the shifts' counts constants */
        int h = k / 4, c = k % 4, sn = c < 2 ? 0 : 4;
        __m256i s[LLM__TB], s1 = _mm256_setzero_si256();   /* s1: one token's second half */
        LLM__UNROLL for (int b = 0; b < nb; b++) s[b] = _mm256_setzero_si256();
        for (int q = 0; q < 2; q++) {
            __m256i sc = llm__q6_K_scale8(sw, 2 * k + q);
            sc = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));   /* both halves */
            for (int m = 0; m < 4; m++) {
                int wm = 4 * q + m;   /* the word's pairs: values 4 wm + (0, 2) and + (1, 3) */
                __m256i p0, p1;
                llm__q6_K_pairs8(LLM__PW8(blk, 16 * h + 8 * (c & 1) + wm), LLM__PW8(blk, 32 + 8 * h + wm), sn, c, nb > 1, &p0, &p1);
                if (nb == 1) {
                    const int *xw = (const int *)(const void *)(xp + LLM__GQ * k);
                    __m256i *sq = q ? &s1 : &s[0];
                    *sq = llm__dot16_i16(*sq, p0, LLM__PAIR8(xw, 2 * wm));
                    *sq = llm__dot16_i16(*sq, p1, LLM__PAIR8(xw, 2 * wm + 1));
                    continue;
                }
                p0 = _mm256_mullo_epi16(p0, sc);
                p1 = _mm256_mullo_epi16(p1, sc);
                LLM__UNROLL for (int b = 0; b < nb; b++) {
                    const int *xw = (const int *)(const void *)(xp + (size_t)b * LLM__XP_STRIDE + LLM__GQ * k);
                    s[b] = llm__dot16_i16(s[b], p0, LLM__PAIR8(xw, 2 * wm));
                    s[b] = llm__dot16_i16(s[b], p1, LLM__PAIR8(xw, 2 * wm + 1));
                }
            }
        }
        if (nb == 1) {   /* the codes' offset: 32 times each half's sum of activations (llm__pairs8) */
            __m256i x0 = _mm256_set1_epi32(32 * xsum[k]), x1 = _mm256_set1_epi32(32 * xsum[k + 64]);
            s[0] = _mm256_add_epi32(_mm256_mullo_epi32(llm__q6_K_scale8(sw, 2 * k), _mm256_sub_epi32(s[0], x0)),
                                    _mm256_mullo_epi32(llm__q6_K_scale8(sw, 2 * k + 1), _mm256_sub_epi32(s1, x1)));
        }
        LLM__UNROLL for (int b = 0; b < nb; b++)
            acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[b]), _mm256_mul_ps(d, _mm256_set1_ps(xs[64 * b + k])), acc[b]);
    }
}

/* A chunk of up to 64 groups of nb tokens' activations (xb, token stride
 * n; scales sb, stride G) as the kernels read them: each group's codes in
 * the order the code pairs come out (pair p = (x[at_p], x[at_p + 2]); q4_0:
 * at = 4m + 0, 16, 1, 17 for pairs 4m..4m+3; q4_K, q6_K: at = 4m + 0, 1
 * for pairs 2m, 2m+1), their sum (xsum) and scale (xsc); the tokens from
 * nc on copy the last (a tile of 2 or 3 tokens runs as LLM__TB, the
 * copies' results dropped) */
/* the total of eight int32 lanes */
LLM__INLINE int32_t llm__hsum_i32(__m256i v) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1)));
}
LLM__INLINE void llm__pairs8(int16_t *xp, int32_t *xsum, float *xsc, const int16_t *xb, const float *sb, int n, int G,
                             int c0, int cg, int nb, int nc, int q4_K, int q6_K) {
    /* q4_K's order: within each four codes 0, 2, 1, 3 (bytes 0 1 4 5 2 3 6 7) */
    const __m256i k_order = _mm256_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15,
                                             0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
    /* q4_0's: eight codes 4m..4m+3, 4m+16..4m+19 to 4m, 4m+2, 4m+16, 4m+18, 4m+1, 4m+3, 4m+17, 4m+19 */
    const __m256i o_order = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                             0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (int b = 0; b < nb; b++) {
        int bs = b < nc ? b : nc - 1;
        for (int g = 0; g < cg; g++) {
            const int16_t *x = xb + (size_t)bs * n + (size_t)(c0 + g) * LLM__GQ;
            int16_t *o = xp + (size_t)b * LLM__XP_STRIDE + (size_t)g * LLM__GQ;
            __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)x);
            __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(x + 16));
            __m256i sl = _mm256_madd_epi16(lo, LLM__C16(1)), sh = _mm256_madd_epi16(hi, LLM__C16(1));
            if (q6_K) {   /* only one token reads them: its halves' sums, the second 64 on */
                if (nb == 1) {
                    xsum[g] = llm__hsum_i32(sl);
                    xsum[64 + g] = llm__hsum_i32(sh);
                }
            } else {
                xsum[64 * b + g] = llm__hsum_i32(_mm256_add_epi32(sl, sh));
            }
            xsc[64 * b + g] = sb[(size_t)bs * G + c0 + g];
            if (q4_K) {
                lo = _mm256_shuffle_epi8(lo, k_order);
                hi = _mm256_shuffle_epi8(hi, k_order);
            } else {
                /* per 128-bit lane: codes 4m..4m+3 of lo, then of hi (m, m + 2 in the low, high lane) */
                __m256i a = _mm256_shuffle_epi8(_mm256_unpacklo_epi64(lo, hi), o_order);   /* m = 0, 2 */
                __m256i c = _mm256_shuffle_epi8(_mm256_unpackhi_epi64(lo, hi), o_order);   /* m = 1, 3 */
                lo = _mm256_permute2x128_si256(a, c, 0x20);
                hi = _mm256_permute2x128_si256(a, c, 0x31);
            }
            _mm256_storeu_si256((__m256i *)(void *)o, lo);
            _mm256_storeu_si256((__m256i *)(void *)(o + 16), hi);
        }
    }
}

/* the lanes below na of a mask for maskload/maskstore */
LLM__INLINE __m256i llm__lanes_below(int na) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(na), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* The tile of q4_0 (kind 0), q4_K (1), q6_K (2), q8_0 (3), q5_0 (4), q5_1 (5), q5_K (6) or iq4_nl (7) for nr rows
 * from w's panels (r a multiple of 8, any nr) and nb (1 or LLM__TB) of the
 * nc tokens at a time: a chunk of up to 64 groups' activation pairs at a
 * time, eight rows over it, one stream in address order. gb8: a panel
 * run's bytes a row (eight q4_0 blocks, a q4_K block; a q6_K block in its
 * 212, eight q8_0 blocks in 36 each). */
LLM__INLINE void llm__tile8p_nb(float *out, int ldo, const llm_tensor *w, int r, const int16_t *xb, const float *sb,
                                int nr, int nc, int nb, int kind) {
    int n = w->cols, G = n / LLM__GQ;
    const llm__type_traits *tr = &llm__traits[w->type];
    size_t gb8 = (size_t)(8 * LLM__GQ / tr->qblock) * (size_t)(tr->panel_unit ? tr->panel_slot : tr->qblock_bytes);
    size_t panel_bytes = 8 * llm__panel_row_bytes(w);
    int16_t xp[LLM__TB * LLM__XP_STRIDE];   /* each token's chunk of up to 64 groups' pairs */
    int32_t xsum[LLM__TB * 64];             /* their sums */
    float xsc[LLM__TB * 64];                /* and scales */
    for (int c0 = 0; c0 < G; c0 += 64) {
        int cg = G - c0 < 64 ? G - c0 : 64;
        llm__pairs8(xp, xsum, xsc, xb, sb, n, G, c0, cg, nb, nc, kind == 1 || kind == 2 || kind == 3 || kind == 6, kind == 2);
        for (int a0 = 0; a0 < nr; a0 += 8) {
            __m256i fresh = llm__lanes_below(nr - a0);   /* a panel's rows past the matrix are zeros, not stored */
            const unsigned char *rows = (const unsigned char *)w->panels + (size_t)(r + a0) / 8 * panel_bytes + (size_t)c0 * gb8;
            __m256 acc[LLM__TB];
            LLM__UNROLL for (int b = 0; b < nb; b++)
                acc[b] = c0 && b < nc ? _mm256_maskload_ps(out + (size_t)b * ldo + a0, fresh) : _mm256_setzero_ps();
            for (int g = 0; g < cg; g += 8) {   /* a run of eight groups at a time */
                /* no software prefetch: the panel is one stream, which the
                 * hardware prefetcher follows. Zen 4, AVX2 build, one
                 * thread, three interleaved runs, decode tok/s, prefetcht0
                 * two runs ahead -> none: 15M q4_0 922-990 -> 1499-1529,
                 * 110M q4_0 185-189 -> 202-213, 15M q4_K 1213-1369 ->
                 * 1380-1540, 42M q4_0 and q4_K alike (prefetcht2 at two to
                 * eight runs ahead: no better) */
                const unsigned char *run = rows + (size_t)g * gb8;
                const int16_t *xg = xp + g * LLM__GQ;
                if (kind == 4 || kind == 5) llm__q5_run8(acc, nb, run, xg, xsum + g, xsc + g, cg - g < 8 ? cg - g : 8, kind == 5);
                else if (kind == 6) llm__q5_K_block8(acc, nb, run, xg, xsum + g, xsc + g);
                else if (kind == 3) llm__q8_0_run8(acc, nb, run, xg, xsc + g, cg - g < 8 ? cg - g : 8);
                else if (kind == 2) llm__q6_K_block8(acc, nb, run, xg, xsum + g, xsc + g);
                else if (kind == 1) llm__q4_K_block8(acc, nb, run, xg, xsum + g, xsc + g);
                else llm__q4_0_run8(acc, nb, run, xg, xsum + g, xsc + g, cg - g < 8 ? cg - g : 8, kind == 7);
            }
            LLM__UNROLL for (int b = 0; b < nb && b < nc; b++) _mm256_maskstore_ps(out + (size_t)b * ldo + a0, fresh, acc[b]);
        }
    }
}
/* nc tokens: LLM__TB at a time, a single one (decode) alone */
LLM__INLINE void llm__tile8p(float *out, int ldo, const llm_tensor *w, int r, const int8_t *xq, const float *xs,
                             int t, int nr, int nc, int kind) {
    int n = w->cols, G = n / LLM__GQ;
    for (int b = 0; b < nc; b += LLM__TB) {
        const int16_t *xb = (const int16_t *)(const void *)xq + (size_t)(t + b) * n;
        const float *sb = xs + (size_t)(t + b) * G;
        float *o = out + (size_t)b * ldo;
        if (nc - b == 1) llm__tile8p_nb(o, ldo, w, r, xb, sb, nr, 1, 1, kind);
        else llm__tile8p_nb(o, ldo, w, r, xb, sb, nr, nc - b < LLM__TB ? nc - b : LLM__TB, LLM__TB, kind);
    }
}
/* A type's tile: its panels (kind k of llm__tile8p), else the eight-row tile */
#define LLM__TILE8P_OF(type, k) \
    LLM__KERNEL void llm__tile_blk_##type(float *out, int ldo, const llm_tensor *w, int r, const float *x, \
                                         const int8_t *xq, const float *xs, int t, int nr, int nc) { \
        if (w->panels && r % 8 == 0) llm__tile8p(out, ldo, w, r, xq, xs, t, nr, nc, k); \
        else llm__tile8_blk_##type(out, ldo, w, r, x, xq, xs, t, nr, nc); \
    }
LLM__TILE8P_OF(q8_0, 3)
LLM__TILE8P_OF(q5_0, 4)
LLM__TILE8P_OF(q5_1, 5)
LLM__TILE8P_OF(q4_0, 0)
LLM__TILE8P_OF(q4_K, 1)
LLM__TILE8P_OF(q6_K, 2)
LLM__TILE8P_OF(q5_K, 6)
LLM__TILE8P_OF(iq4_nl, 7)
#undef LLM__TILE8P_OF
#endif
