/* engine/x86_attend.h -- the AVX2/AVX-512 attention kernels (attention.h's
 * contract): a block of scores against the cache's keys and the values'
 * weighted sums, for several query rows per pass. */
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

/* The value accumulators' vectors: a zmm of 16 elements where the CPU has
 * AVX-512 (the last chunk of a head masked to its 8 when hs % 16 == 8), else
 * a ymm of 8. Each element is its own sum over the keys, so the width
 * changes no value. */
#if LLM__VL == 16
#define LLM__AW 16
typedef __m512 llm__av;
typedef __mmask16 llm__am;
#define llm__am_lanes(n) ((__mmask16)((1u << (n)) - 1))
#define llm__av_set1(x) _mm512_set1_ps(x)
#define llm__av_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define llm__av_load(p, m) _mm512_maskz_loadu_ps(m, p)
#define llm__av_store(p, v, m) _mm512_mask_storeu_ps(p, m, v)
/* llm__kv_load8's conversions, for the lanes of m */
LLM__INLINE __m512 llm__kv_load_av(const void *cache, int type, llm__kv_at r, int c, __mmask16 m) {
    size_t at = r.at + (size_t)c;
    if (type == LLM_KV_F32) return _mm512_maskz_loadu_ps(m, (const float *)cache + at);
    if (type == LLM_KV_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)cache + at));
    __m128i b = _mm_maskz_loadu_epi8(m, (const int8_t *)cache + at);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), _mm512_set1_ps(r.scale));
}
#else
#define LLM__AW 8
typedef __m256 llm__av;
typedef int llm__am;   /* a ymm chunk is always whole (hs % 8 == 0) */
#define llm__am_lanes(n) ((void)(n), 0)
#define llm__av_set1(x) _mm256_set1_ps(x)
#define llm__av_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define llm__av_load(p, m) ((void)(m), _mm256_loadu_ps(p))
#define llm__av_store(p, v, m) ((void)(m), _mm256_storeu_ps(p, v))
#define llm__kv_load_av(cache, type, r, c, m) ((void)(m), llm__kv_load8(cache, type, r, c))
#endif

/* For nq (1 or 2) rows: out[g][c0 .. c0 + LLM__AW nch) += sum_j p[g][j]
 * v(j0 + j) for jb <= j < len, the last chunk's lanes those of `last`; keys
 * in order, fused, every accumulator in a register and one load of each
 * value chunk for both rows; with sum, also sum[g] += p[g][j] in order (a
 * chain beside the others, not after them). */
LLM__INLINE void llm__accumulate(float *out, size_t ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq, int nch,
                                 llm__am last, const llm__kv_view *kv, int type, int kvh, int j0, int jb, int len, int c0) {
    llm__av a[2][8];
    llm__am m[8];
    float s0 = sum ? sum[0] : 0.0f, s1 = sum && nq > 1 ? sum[1] : 0.0f;
    LLM__UNROLL for (int ch = 0; ch < nch; ch++) m[ch] = ch == nch - 1 ? last : llm__am_lanes(LLM__AW);
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) a[g][ch] = llm__av_load(out + g * ldo + c0 + LLM__AW * ch, m[ch]);
    for (int j = jb; j < len; j++) {
        llm__av p0 = llm__av_set1(p[0][j]), p1 = llm__av_set1(p[nq - 1][j]);
        llm__kv_at row = llm__kv_locate(kv, kv->v_scale, type, (size_t)(j0 + j), kvh);
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) {
            llm__av v = llm__kv_load_av(kv->v, type, row, c0 + LLM__AW * ch, m[ch]);
            a[0][ch] = llm__av_fma(p0, v, a[0][ch]);
            if (nq > 1) a[1][ch] = llm__av_fma(p1, v, a[1][ch]);
        }
        if (sum) {
            s0 += p[0][j];
            if (nq > 1) s1 += p[1][j];
        }
    }
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) llm__av_store(out + g * ldo + c0 + LLM__AW * ch, a[g][ch], m[ch]);
    if (sum) {
        sum[0] = s0;
        if (nq > 1) sum[1] = s1;
    }
}

/* llm__accumulate over a whole head (hs % 8 == 0) in passes of at most
 * eight accumulators, each pass's chunk count a constant inside */
LLM__INLINE void llm__accumulate_head(float *out, size_t ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq,
                                      const llm__kv_view *kv, int type, int kvh, int j0, int jb, int len) {
    int per_pass = 8 / nq, hs = kv->hs;
    for (int c0 = 0; c0 < hs; c0 += LLM__AW * per_pass) {
        int chunks = (hs - c0 + LLM__AW - 1) / LLM__AW, nch = chunks < per_pass ? chunks : per_pass;
        int end = c0 + LLM__AW * nch < hs ? c0 + LLM__AW * nch : hs;
        llm__am last = llm__am_lanes(end - (c0 + LLM__AW * (nch - 1)));
        float *s = c0 == 0 ? sum : NULL;
        switch (nch) {
#define LLM__ACC(k) case k: llm__accumulate(out, ldo, p, s, nq, k, last, kv, type, kvh, j0, jb, len, c0); break;
        LLM__ACC(1) LLM__ACC(2) LLM__ACC(3) LLM__ACC(4) LLM__ACC(5) LLM__ACC(6) LLM__ACC(7) default: LLM__ACC(8)
#undef LLM__ACC
        }
    }
}

#endif
