/* engine/forward.h -- the transformer: batched norms and residuals, RoPE,
 * the KV cache, attention, the SwiGLU FFN, and llm_forward, which reads
 * like the block equations. */

/* out (T,n) = norm(x (T,n)) token by token, with weight g (NULL: 1) and bias b (NULL: 0) */
static void llm__norm_batch(float *out, const float *x, const float *g, const float *b, int T, int n,
                            const llm_config *c, const llm_state *s) {
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * n * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        if (c->norm_type == LLM_NORM_LAYER)
            llm_layernorm(out + (size_t)t * n, x + (size_t)t * n, g, b, n, c->norm_eps);
        else
            llm_rmsnorm(out + (size_t)t * n, x + (size_t)t * n, g, n, c->norm_eps);
    });
}

/* x (T,n) += y (T,n) */
static void llm__residual_add(float *x, const float *y, int T, int n, const llm_state *s) {
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * n * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) x[(size_t)t * n + i] += y[(size_t)t * n + i];);
}

/* cos/sin of every frequency for T positions: rope (T, head_size) as (cos, sin) pairs.
 * The angle in float as llama2.c computes it, pos * freq (the model's table,
 * made at load); cosine and sine in double, then rounded: float libms differ
 * between glibc and a microcontroller's newlib, double ones agree to the float bit. */
static void llm__rope_table(float *rope, int pos, int T, const llm_model *m) {
    int hs = m->cfg.head_size;
    for (int i = 0; i < hs; i += 2) {
        float freq = m->rope_freq[i / 2];
        for (int t = 0; t < T; t++) {
            float val = (float)(pos + t) * freq;
            rope[(size_t)t * hs + i] = (float)cos((double)val);
            rope[(size_t)t * hs + i + 1] = (float)sin((double)val);
        }
    }
}

/* GCC's vectorizer turns the rotation below into a fused complex multiply
 * (vfmaddsub) even with contraction off, which rounds differently from the
 * scalar code other targets run: keep it scalar so every build agrees. */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define LLM__NO_VECTORIZE
#endif

/* Rotate each head of v (n_heads*hs,) by the angles in rope (hs,). */
LLM__NO_VECTORIZE static void llm__rope(float *v, int n_heads, const float *rope, const llm_config *c) {
    int hs = c->head_size, half = hs / 2;
    for (int h = 0; h < n_heads; h++) {
        float *vh = v + (size_t)h * hs;
        for (int i = 0; i < hs; i += 2) {
            float fcr = rope[i], fci = rope[i + 1];
            /* the pair (i, i+1) in llama2.c's layout, (i/2, i/2 + hs/2) in the half layout */
            int a = c->rope_layout == LLM_ROPE_HALF ? i / 2 : i;
            int b = c->rope_layout == LLM_ROPE_HALF ? i / 2 + half : i + 1;
            float v0 = vh[a], v1 = vh[b];
            vh[a] = v0 * fcr - v1 * fci;
            vh[b] = v0 * fci + v1 * fcr;
        }
    }
}

/* x (n,) += b (n,) */
static void llm__add_bias(float *x, const float *b, int n) {
    for (int i = 0; i < n; i++) x[i] += b[i];
}

/* SwiGLU in place: g (n,) = silu(g) * u = g * 1/(1 + e^-g) * u */
static void llm__swiglu(float *g, const float *u, int n) {
    int i = 0;
    float e[64];
    for (; i < n; i += 64) {
        int len = n - i < 64 ? n - i : 64;
        for (int j = 0; j < len; j++) e[j] = -g[i + j];
        llm__exp_shifted(e, len, 0.0f);
        for (int j = 0; j < len; j++) g[i + j] = g[i + j] * (1.0f / (1.0f + e[j])) * u[i + j];
    }
}

/* ---- the KV cache: rows of n_kv_heads*head_size in f32, f16, or int8 with
 * one f16 scale per head (max |v| / 127) ---- */

/* Store row v (kvd,) at position pos of one layer's cache. */
static void llm__kv_store(void *cache, uint16_t *scales, int kv_type, size_t pos, const float *v, int n_heads, int hs) {
    size_t kvd = (size_t)n_heads * hs;
    if (kv_type == LLM_KV_F32) {
        memcpy((float *)cache + pos * kvd, v, kvd * 4);
    } else if (kv_type == LLM_KV_F16) {
        uint16_t *dst = (uint16_t *)cache + pos * kvd;
        for (size_t i = 0; i < kvd; i++) dst[i] = llm_f32_to_f16(v[i]);
    } else {
        int8_t *dst = (int8_t *)cache + pos * kvd;
        for (int h = 0; h < n_heads; h++) {
            const float *vh = v + (size_t)h * hs;
            if (!llm__all_finite(vh, hs)) {   /* as llm__quantize_q8: NaN scale, zero values */
                scales[pos * (size_t)n_heads + (size_t)h] = 0x7e00;   /* f16 NaN */
                memset(dst + (size_t)h * hs, 0, (size_t)hs);
                continue;
            }
            float amax = 0.0f;
            for (int i = 0; i < hs; i++) amax = fmaxf(amax, fabsf(vh[i]));
            uint16_t sc = llm_f32_to_f16(amax / 127.0f);
            float scale = llm_f16_to_f32(sc), inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            scales[pos * (size_t)n_heads + (size_t)h] = sc;
            for (int i = 0; i < hs; i++) {
                long q = lroundf(vh[i] * inv);
                dst[(size_t)h * hs + (size_t)i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
            }
        }
    }
}

/* Head kvh's row at position j as f32: a pointer into an f32 cache, or
 * converted into tmp (hs,). */
LLM__INLINE const float *llm__kv_row(const void *cache, const uint16_t *scales, int kv_type, size_t j, int kvh,
                                int n_heads, int hs, float *tmp) {
    size_t at = (j * (size_t)n_heads + (size_t)kvh) * (size_t)hs;
    if (kv_type == LLM_KV_F32) return (const float *)cache + at;
    if (kv_type == LLM_KV_F16) {
        const uint16_t *src = (const uint16_t *)cache + at;
        for (int i = 0; i < hs; i++) tmp[i] = llm_f16_to_f32(src[i]);
    } else {
        const int8_t *src = (const int8_t *)cache + at;
        float scale = llm_f16_to_f32(scales[j * (size_t)n_heads + (size_t)kvh]);
        for (int i = 0; i < hs; i++) tmp[i] = (float)src[i] * scale;
    }
    return tmp;
}

/* One block of an online softmax: when the block raises the running max,
 * rescale what was summed so far (out (hs,) and the denominator) to it; then
 * p[j] = e^(p[j] - running max). */
LLM__INLINE void llm__softmax_block(float *p, int len, float block_max, float *run_max, float *run_sum, float *out, int hs) {
    if (block_max > *run_max) {
        float r = llm__expf(*run_max - block_max);
        *run_sum *= r;
        for (int i = 0; i < hs; i++) out[i] *= r;
        *run_max = block_max;
    }
    llm__exp_shifted(p, len, *run_max);
}

/* One query head over cache positions 0..last: out (hs,) = softmax(q.K/sqrt(hs)) V.
 * Keys in blocks with a running max (online softmax): no score row in memory. */
static void llm__attend_head(float *out, const float *q, const llm__kv_view *kv, int kvh, int last) {
    float scores[LLM__KEY_BLOCK], row[LLM_MAX_HEAD_SIZE];
    int hs = kv->hs;
    float run_max = -INFINITY, run_sum = 0.0f, sqrt_hs = sqrtf((float)hs);
    for (int i = 0; i < hs; i++) out[i] = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += LLM__KEY_BLOCK) {
        int len = last + 1 - j0 < LLM__KEY_BLOCK ? last + 1 - j0 : LLM__KEY_BLOCK;
        float block_max = -INFINITY;
#if !defined(LLM__VL) || defined(LLM__HELIUM)   /* scalar FPU paths */
        if (kv->type == LLM_KV_F32 && hs == 8) {
            /* no vector unit, eight-wide heads (a microcontroller's model): the
             * query stays in registers; llm__dot8's lanes and tree exactly */
            const float *k = (const float *)kv->k + ((size_t)j0 * kv->n_heads + (size_t)kvh) * 8;
            size_t stride = (size_t)kv->n_heads * 8;
            float q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3], q4 = q[4], q5 = q[5], q6 = q[6], q7 = q[7];
            for (int j = 0; j < len; j++, k += stride) {
                float l0 = fmaf(q0, k[0], 0.0f), l1 = fmaf(q1, k[1], 0.0f), l2 = fmaf(q2, k[2], 0.0f), l3 = fmaf(q3, k[3], 0.0f);
                float l4 = fmaf(q4, k[4], 0.0f), l5 = fmaf(q5, k[5], 0.0f), l6 = fmaf(q6, k[6], 0.0f), l7 = fmaf(q7, k[7], 0.0f);
                scores[j] = (((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))) / sqrt_hs;
                if (scores[j] > block_max) block_max = scores[j];
            }
        } else
#endif
        for (int j = 0; j < len; j++) {
            const float *k = llm__kv_row(kv->k, kv->k_scale, kv->type, (size_t)(j0 + j), kvh, kv->n_heads, hs, row);
            scores[j] = llm__dot8(q, k, hs) / sqrt_hs;
            if (scores[j] > block_max) block_max = scores[j];
        }
        llm__softmax_block(scores, len, block_max, &run_max, &run_sum, out, hs);
#if !defined(LLM__VL) || defined(LLM__HELIUM)   /* scalar FPU paths */
        if (kv->type == LLM_KV_F32) {
            /* no vector unit: one output element at a time in a register, the
             * keys in the same order, so the same sums */
            const float *v0 = (const float *)kv->v + ((size_t)j0 * kv->n_heads + (size_t)kvh) * (size_t)hs;
            size_t stride = (size_t)kv->n_heads * (size_t)hs;
            for (int j = 0; j < len; j++) run_sum += scores[j];
            for (int i = 0; i < hs; i++) {
                float acc = out[i];
                const float *v = v0 + i;
                for (int j = 0; j < len; j++, v += stride) acc = fmaf(scores[j], *v, acc);
                out[i] = acc;
            }
            continue;
        }
#endif
        for (int j = 0; j < len; j++) {
            float p = scores[j];
            const float *v = llm__kv_row(kv->v, kv->v_scale, kv->type, (size_t)(j0 + j), kvh, kv->n_heads, hs, row);
            run_sum += p;
            for (int i = 0; i < hs; i++) out[i] = fmaf(p, v[i], out[i]);   /* fused on every target */
        }
    }
    float inv = 1.0f / run_sum;
    for (int i = 0; i < hs; i++) out[i] *= inv;
}

#ifdef LLM__ATTEND_AVX2
/* Ask for kv head kvh's key and value rows of positions j..min(j + block
 * - 1, last) while the block before them is worked on. In decode they come
 * from DRAM (the weights' stream has evicted them): one head's slice of each
 * position's row, rows apart, a stride the hardware prefetcher does not
 * follow (42M q8_0, decode at positions 512-576, one thread: 320-340 tok/s
 * without, 395-455 with). */
LLM__INLINE void llm__kv_prefetch(const llm__kv_view *kv, int kvh, int j, int last) {
    size_t bytes = (size_t)kv->hs * llm__kv_elem_bytes(kv->type);
    const unsigned char *k = (const unsigned char *)kv->k, *v = (const unsigned char *)kv->v;
    int end = j + LLM__KEY_BLOCK - 1 < last ? j + LLM__KEY_BLOCK - 1 : last;
    for (; j <= end; j++) {
        size_t at = ((size_t)j * (size_t)kv->n_heads + (size_t)kvh) * bytes;
        for (size_t b = 0; b < bytes; b += 64) {
            LLM__PREFETCH(k + at + b);
            LLM__PREFETCH(v + at + b);
        }
    }
}

/* A pass of nq <= LLM__GROUP_MAX query rows (of q and out, ld apart) over
 * kv head kvh's keys, row g over positions 0..last + g dlast, a block of
 * keys at a time: each block's key and value rows are read once for all of
 * them, and each row gets llm__attend_head's operations in its order, so its
 * bits. The rows are a group's query heads (ld = hs, dlast = 0) or one head
 * of consecutive tokens (ld = the query width, dlast = 1). */
typedef struct {
    float *out;
    const float *q;
    size_t ld;
    int kvh, nq, last, dlast;
    float sqrt_hs;
    float p[LLM__GROUP_MAX][LLM__KEY_BLOCK], run_max[LLM__GROUP_MAX], run_sum[LLM__GROUP_MAX];
} llm__pass;
LLM__INLINE void llm__pass_start(llm__pass *ps, float *out, const float *q, size_t ld, int hs, int kvh, int nq, int last,
                                 int dlast) {
    ps->out = out; ps->q = q; ps->ld = ld; ps->kvh = kvh; ps->nq = nq; ps->last = last; ps->dlast = dlast;
    ps->sqrt_hs = sqrtf((float)hs);
    for (int g = 0; g < nq; g++) {
        ps->run_max[g] = -INFINITY;
        ps->run_sum[g] = 0.0f;
        for (int i = 0; i < hs; i++) out[g * ld + i] = 0.0f;
    }
}
/* the pass's last position */
LLM__INLINE int llm__pass_top(const llm__pass *ps) { return ps->last + (ps->nq - 1) * ps->dlast; }
/* keys j0 .. j0 + LLM__KEY_BLOCK - 1 (those each row has) */
LLM__INLINE void llm__pass_block(llm__pass *ps, const llm__kv_view *kv, int type, int j0) {
    int hs = kv->hs, nq = ps->nq, kvh = ps->kvh, len[LLM__GROUP_MAX];
    size_t ld = ps->ld;
    float *out = ps->out;
    if (kv->prefetch) llm__kv_prefetch(kv, kvh, j0 + LLM__KEY_BLOCK, llm__pass_top(ps));
    for (int g = 0; g < nq; g++) {
        int n = ps->last + g * ps->dlast + 1 - j0;
        len[g] = n < LLM__KEY_BLOCK ? n : LLM__KEY_BLOCK;
        if (len[g] <= 0) continue;   /* this row's keys ended with the block before */
        float block_max = llm__scores8(ps->p[g], ps->q + g * ld, kv, type, kvh, j0, len[g], ps->sqrt_hs);
        llm__softmax_block(ps->p[g], len[g], block_max, &ps->run_max[g], &ps->run_sum[g], out + g * ld, hs);
    }
    /* the values (and the sums) for two rows at a time over the keys both
     * have, then the rest of the second's (len grows with g) */
    for (int g = 0; g < nq; g += 2) {
        if (nq - g < 2) {
            if (len[g] > 0) llm__accumulate_head(out + g * ld, ld, ps->p + g, ps->run_sum + g, 1, kv, type, kvh, j0, 0, len[g]);
            continue;
        }
        int both = len[g] > 0 ? len[g] : 0;
        if (both > 0) llm__accumulate_head(out + g * ld, ld, ps->p + g, ps->run_sum + g, 2, kv, type, kvh, j0, 0, both);
        if (len[g + 1] > both)
            llm__accumulate_head(out + (g + 1) * ld, ld, ps->p + g + 1, ps->run_sum + g + 1, 1, kv, type, kvh, j0, both, len[g + 1]);
    }
}
LLM__INLINE void llm__pass_finish(llm__pass *ps, int hs) {
    for (int g = 0; g < ps->nq; g++) {
        float inv = 1.0f / ps->run_sum[g];
        for (int i = 0; i < hs; i++) ps->out[g * ps->ld + i] *= inv;
    }
}
/* llm__attend_head for the rows of one pass */
LLM__INLINE void llm__attend_rows8(float *out, const float *q, size_t ld, const llm__kv_view *kv, int type, int kvh,
                                   int nq, int last, int dlast) {
    llm__pass ps;
    llm__pass_start(&ps, out, q, ld, kv->hs, kvh, nq, last, dlast);
    for (int j0 = 0; j0 <= llm__pass_top(&ps); j0 += LLM__KEY_BLOCK) llm__pass_block(&ps, kv, type, j0);
    llm__pass_finish(&ps, kv->hs);
}

/* Decode: one token's query heads of kv heads h0..h1-1 over positions
 * 0..last, in passes of at most LLM__GROUP_MAX heads of one group, and up
 * to LLM__DECODE_PASSES passes block by block together: a block of keys
 * then reads the kv heads' slices of each position's row side by side (one
 * stream, where a head at a time read its slice, a row apart). Every pass
 * gets llm__attend_rows8's operations in its order, so the same bits. */
#define LLM__DECODE_PASSES 8
/* passes ps[0..np-1] over positions 0..last, block by block together */
LLM__INLINE void llm__passes_run(llm__pass *ps, int np, const llm__kv_view *kv, int type, int last) {
    for (int j0 = 0; j0 <= last; j0 += LLM__KEY_BLOCK)
        for (int i = 0; i < np; i++) llm__pass_block(&ps[i], kv, type, j0);
    for (int i = 0; i < np; i++) llm__pass_finish(&ps[i], kv->hs);
}
LLM__INLINE void llm__attend_heads8(float *out, const float *q, const llm__kv_view *kv, int type, int h0, int h1,
                                    int group, int last) {
    llm__pass ps[LLM__DECODE_PASSES];
    int hs = kv->hs, np = 0;
    for (int h = h0; h < h1; h++)
        for (int g = 0; g < group; g += LLM__GROUP_MAX) {
            size_t at = ((size_t)h * group + (size_t)g) * (size_t)hs;
            int n = group - g < LLM__GROUP_MAX ? group - g : LLM__GROUP_MAX;
            llm__pass_start(&ps[np++], out + at, q + at, (size_t)hs, hs, h, n, last, 0);
            if (np == LLM__DECODE_PASSES) {
                llm__passes_run(ps, np, kv, type, last);
                np = 0;
            }
        }
    if (np) llm__passes_run(ps, np, kv, type, last);
}
#endif

/* Query rows 0..nq-1 (of q and out, ld apart) over kv head kvh, row g over
 * cache positions 0..last + g dlast: llm__attend_head for each. The rows are
 * a group's query heads (ld = hs, dlast = 0) or one head of consecutive
 * tokens (ld = the query width, dlast = 1). */
static void llm__attend_rows(float *out, const float *q, size_t ld, const llm__kv_view *kv, int kvh, int nq, int last,
                             int dlast) {
    int g = 0;
#ifdef LLM__ATTEND_AVX2
    if (kv->hs % 8 == 0) {
        for (; g < nq; g += LLM__GROUP_MAX) {
            int n = nq - g < LLM__GROUP_MAX ? nq - g : LLM__GROUP_MAX, lg = last + g * dlast;
            /* one instance per cache type, so the loads inside are branch-free */
            if (kv->type == LLM_KV_F32) llm__attend_rows8(out + g * ld, q + g * ld, ld, kv, LLM_KV_F32, kvh, n, lg, dlast);
            else if (kv->type == LLM_KV_F16) llm__attend_rows8(out + g * ld, q + g * ld, ld, kv, LLM_KV_F16, kvh, n, lg, dlast);
            else llm__attend_rows8(out + g * ld, q + g * ld, ld, kv, LLM_KV_Q8, kvh, n, lg, dlast);
        }
    }
#endif
    for (; g < nq; g++) llm__attend_head(out + g * ld, q + g * ld, kv, kvh, last + g * dlast);
}

/* Decode: the query heads (group per kv head) of kv heads h0..h1-1 over
 * positions 0..last; llm__attend_rows for each kv head's group */
static void llm__attend_heads(float *out, const float *q, const llm__kv_view *kv, int h0, int h1, int group, int last) {
    size_t hs = (size_t)kv->hs;
#ifdef LLM__ATTEND_AVX2
    if (kv->hs % 8 == 0) {
        if (kv->type == LLM_KV_F32) llm__attend_heads8(out, q, kv, LLM_KV_F32, h0, h1, group, last);
        else if (kv->type == LLM_KV_F16) llm__attend_heads8(out, q, kv, LLM_KV_F16, h0, h1, group, last);
        else llm__attend_heads8(out, q, kv, LLM_KV_Q8, h0, h1, group, last);
        return;
    }
#endif
    for (int h = h0; h < h1; h++) llm__attend_rows(out + h * group * hs, q + h * group * hs, hs, kv, h, group, last, 0);
}

/* ===================================================================== */
/* Forward                                                                */
/* ===================================================================== */

/* norm(x) with one of layer l's norms (weights 1 and bias 0 where the checkpoint has none) */
static void llm__layer_norm_batch(float *out, const float *x, const llm_tensor *g, const llm_tensor *b,
                                  int T, const llm_model *m, const llm_state *s) {
    llm__norm_batch(out, x, (const float *)g->data, (const float *)b->data, T, m->cfg.dim, &m->cfg, s);
}
/* the same with an output norm's f32 weights (w.out_norms, model.h) */
static void llm__out_norm_batch(float *out, const float *x, const float *g, const float *b, int T,
                                const llm_model *m, const llm_state *s) {
    llm__norm_batch(out, x, g, b, T, m->cfg.dim, &m->cfg, s);
}

/* The kv view of layer l of state s's cache */
static llm__kv_view llm__kv_view_of(const llm_config *c, const llm_state *s, int l) {
    size_t kvd = (size_t)c->n_kv_heads * (size_t)c->head_size;
    size_t layer_elems = (size_t)s->ctx_len * kvd, layer_scales = (size_t)s->ctx_len * (size_t)c->n_kv_heads;
    size_t eb = llm__kv_elem_bytes(s->kv_type);
    llm__kv_view kv;
    kv.k = (const unsigned char *)s->key_cache + (size_t)l * layer_elems * eb;
    kv.v = (const unsigned char *)s->value_cache + (size_t)l * layer_elems * eb;
    kv.k_scale = s->key_scale ? s->key_scale + (size_t)l * layer_scales : NULL;
    kv.v_scale = s->value_scale ? s->value_scale + (size_t)l * layer_scales : NULL;
    kv.type = s->kv_type; kv.n_heads = c->n_kv_heads; kv.hs = c->head_size;
    kv.prefetch = 0;
    return kv;
}

/* One sequence's n tokens at pos..pos+n-1, rows o.. of the work state w's
 * q, k_new, v_new (its rope rows the same): per token, q, k, v += their
 * biases (Qwen2); q, k = rmsnorm of each head (Qwen3); RoPE on q and k at
 * the token's position; k and v into the cache rows of state s. The same
 * code for every batch size, so prefill and decode agree bit for bit. */
static void llm__qkv_into_cache(const llm_model *m, llm_state *w, llm_state *s, int l, int o, int n, int pos) {
    const llm_config *c = &m->cfg;
    const llm_layer *L = &m->w.layers[l];
    int hs = c->head_size, kvd = c->n_kv_heads * hs, qd = c->n_heads * hs;
    size_t layer_elems = (size_t)s->ctx_len * kvd, layer_scales = (size_t)s->ctx_len * c->n_kv_heads;
    size_t eb = llm__kv_elem_bytes(s->kv_type);
    float *q = w->q + (size_t)o * qd, *k_new = w->k_new + (size_t)o * kvd, *v_new = w->v_new + (size_t)o * kvd;
    const float *rope = w->rope + (size_t)o * hs;
    int bias = c->qkv_bias && L->q_bias.data, qk_norm = c->qk_norm && L->q_norm.data;
    LLM__PARALLEL_FOR(w->n_threads, (int64_t)n * qd * 8 >= w->parallel_min_work,
    for (int t = 0; t < n; t++) {
        if (bias) {
            llm__add_bias(q + (size_t)t * qd, (const float *)L->q_bias.data, qd);
            llm__add_bias(k_new + (size_t)t * kvd, (const float *)L->k_bias.data, kvd);
            llm__add_bias(v_new + (size_t)t * kvd, (const float *)L->v_bias.data, kvd);
        }
        if (qk_norm) {
            for (int h = 0; h < c->n_heads; h++) {
                float *qh = q + (size_t)t * qd + (size_t)h * hs;
                llm_rmsnorm(qh, qh, (const float *)L->q_norm.data, hs, c->norm_eps);
            }
            for (int h = 0; h < c->n_kv_heads; h++) {
                float *kh = k_new + (size_t)t * kvd + (size_t)h * hs;
                llm_rmsnorm(kh, kh, (const float *)L->k_norm.data, hs, c->norm_eps);
            }
        }
        llm__rope(q + (size_t)t * qd, c->n_heads, rope + (size_t)t * hs, c);
        llm__rope(k_new + (size_t)t * kvd, c->n_kv_heads, rope + (size_t)t * hs, c);
        llm__kv_store((unsigned char *)s->key_cache + l * layer_elems * eb, s->key_scale ? s->key_scale + l * layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), k_new + (size_t)t * kvd, c->n_kv_heads, hs);
        llm__kv_store((unsigned char *)s->value_cache + l * layer_elems * eb, s->value_scale ? s->value_scale + l * layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), v_new + (size_t)t * kvd, c->n_kv_heads, hs);
    });
}

/* per (token, head) of one sequence: softmax(q K^T / sqrt(hs)) V over
 * positions 0..pos+t of state s's cache, q from rows o.. of w->q, out to
 * rows o.. of w->xb. A group of query heads shares each pass over its kv
 * head's keys; where each kv head has one query head, two consecutive
 * tokens share it. */
static void llm__attend_sequence(const llm_model *m, llm_state *w, const llm_state *s, int l, int o, int n, int pos) {
    const llm_config *c = &m->cfg;
    int hs = c->head_size, qd = c->n_heads * hs, group = c->n_heads / c->n_kv_heads, nt = w->n_threads;
    float *q = w->q + (size_t)o * qd, *xb = w->xb + (size_t)o * qd;
    llm__kv_view kv = llm__kv_view_of(c, s, l);
    int per = group > 1 ? 1 : 2, items = (n + per - 1) / per;
    if (n == 1) { /* decode: the kv heads in nt shares, each share's heads side by side */
        kv.prefetch = 1;   /* a batch takes one head's tokens in turn, its rows already in cache */
        int parts = (int64_t)qd * (pos + 1) * 2 >= w->parallel_min_work && nt > 1 ? nt : 1;
        if (parts > c->n_kv_heads) parts = c->n_kv_heads;
        LLM__PARALLEL_FOR(nt, parts > 1,
        for (int i = 0; i < parts; i++)
            llm__attend_heads(xb, q, &kv, c->n_kv_heads * i / parts, c->n_kv_heads * (i + 1) / parts, group, pos););
    } else {
        LLM__PARALLEL_FOR(nt, (int64_t)n * qd * (pos + n) * 2 >= w->parallel_min_work,
        for (int it = 0; it < items * c->n_kv_heads; it++) {
            /* one kv head's tokens after another, so the head's keys and values
             * stay in cache for all of them; the items in the order 0, last, 1,
             * last-1, ...: each thread's share holds short and long rows of the
             * causal triangle alike */
            int k = it % items, i = k % 2 ? items - 1 - k / 2 : k / 2, kvh = it / items, t = i * per;
            size_t at = (size_t)t * qd + (size_t)kvh * group * hs;   /* the group's first query head */
            if (per == 1) llm__attend_rows(xb + at, q + at, (size_t)hs, &kv, kvh, group, pos + t, 0);
            else llm__attend_rows(xb + at, q + at, (size_t)qd, &kv, kvh, n - t < 2 ? 1 : 2, pos + t, 1);
        });
    }
}

/* Attention for the T tokens of the batch's sequences (llm_forward: one,
 * its cache the work state's own), input a (T,dim) -> w->xb2 (T,dim).
 * Writes this layer's keys and values into each sequence's cache first, so
 * token t sees the cache up to its own position: causal within the batch
 * and over the past. */
static void llm__attention(const llm_model *m, llm_state *w, int l, const float *a, int T,
                           const llm_batch_item *items, int n_items) {
    const llm_layer *L = &m->w.layers[l];
    /* q, k, v = Wq a, Wk a, Wv a (a quantized once where the three take it alike) */
    llm__matmul(w->q, &L->wq, a, T, w);
    llm__matmul_after(w->k_new, &L->wk, a, T, w, &L->wq);
    llm__matmul_after(w->v_new, &L->wv, a, T, w, &L->wk);
    for (int i = 0, o = 0; i < n_items; o += items[i].n, i++) {
        llm__qkv_into_cache(m, w, items[i].state, l, o, items[i].n, items[i].pos);
        llm__attend_sequence(m, w, items[i].state, l, o, items[i].n, items[i].pos);
    }
    /* out = Wo concat(heads) */
    llm__matmul(w->xb2, &L->wo, w->xb, T, w);
}

/* SwiGLU FFN for T tokens: a (T,dim) -> s->xb2 (T,dim) = W2 (silu(W1 a) * W3 a) */
static void llm__ffn(const llm_model *m, llm_state *s, int l, const float *a, int T) {
    const llm_config *c = &m->cfg;
    int H = c->hidden_dim;
    const llm_layer *L = &m->w.layers[l];
    llm__matmul(s->hb, &L->w1, a, T, s);
    llm__matmul_after(s->hb2, &L->w3, a, T, s, &L->w1);
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * H * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        float *g = s->hb + (size_t)t * H, *u = s->hb2 + (size_t)t * H;
        llm__swiglu(g, u, H);
    });
    llm__matmul(s->xb2, &L->w2, s->hb, T, s);
}

/* The blocks over the T tokens of the items' sequences, in the work state
 * s's activations: x (T,dim) = the embeddings, then each layer's block. */
static void llm__blocks(const llm_model *m, llm_state *s, int T, const llm_batch_item *items, int n_items) {
    const llm_config *c = &m->cfg;
    int D = c->dim;
    /* x = embedding[token]; each sequence's RoPE angles at its own positions */
    const llm_tensor *emb = &m->w.tok_embeddings;
    for (int i = 0, o = 0; i < n_items; o += items[i].n, i++) {
        for (int t = 0; t < items[i].n; t++)
            llm__traits[emb->type].dequant_row(s->x + (size_t)(o + t) * D, emb, items[i].tokens[t]);
        llm__rope_table(s->rope + (size_t)o * c->head_size, items[i].pos, items[i].n, m);
    }

    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->w.layers[l];
        /* the placements (model.h):  pre  h = x + attn(N1(x))      post h = N1(x + attn(x))
         *                            peri h = x + N2(attn(N1(x)))  out  h = x + N2(attn(x)) */
        int in = c->norm_pos == LLM_NORM_PRE || c->norm_pos == LLM_NORM_PERI;    /* N1, N3 */
        int out = c->norm_pos == LLM_NORM_PERI || c->norm_pos == LLM_NORM_OUT;   /* N2, N4 */
        int post = c->norm_pos == LLM_NORM_POST;
        /* pre, peri: a = N1(x); post, out: a = x */
        const float *a = s->x;
        if (in) { llm__layer_norm_batch(s->xb, s->x, &L->attn_norm, &L->attn_norm_bias, T, m, s); a = s->xb; }
        llm__attention(m, s, l, a, T, items, n_items);
        /* peri, out: h = x + N2(attn(a)); pre: h = x + attn(a); post: h = N1(x + attn(x)) */
        const float *const *on = m->w.out_norms ? m->w.out_norms + (size_t)l * 4 : NULL;   /* N2, N4 or none (1) */
        if (out) llm__out_norm_batch(s->xb2, s->xb2, on ? on[LLM_OUT_ATTN] : NULL, on ? on[LLM_OUT_ATTN_BIAS] : NULL, T, m, s);
        llm__residual_add(s->x, s->xb2, T, D, s);
        if (post) llm__layer_norm_batch(s->x, s->x, &L->attn_norm, &L->attn_norm_bias, T, m, s);
        /* the same around the FFN with N3, N4: y = h + N4(ffn(N3(h))) and its parts */
        a = s->x;
        if (in) { llm__layer_norm_batch(s->xb, s->x, &L->ffn_norm, &L->ffn_norm_bias, T, m, s); a = s->xb; }
        llm__ffn(m, s, l, a, T);
        if (out) llm__out_norm_batch(s->xb2, s->xb2, on ? on[LLM_OUT_FFN] : NULL, on ? on[LLM_OUT_FFN_BIAS] : NULL, T, m, s);
        llm__residual_add(s->x, s->xb2, T, D, s);
        if (post) llm__layer_norm_batch(s->x, s->x, &L->ffn_norm, &L->ffn_norm_bias, T, m, s);
    }
}

/* The fields that sized the state's buffers. */
static int llm__same_shape(const llm_config *a, const llm_config *b) {
    return a->dim == b->dim && a->hidden_dim == b->hidden_dim && a->n_layers == b->n_layers &&
           a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->head_size == b->head_size &&
           a->vocab_size == b->vocab_size && a->weight_type == b->weight_type && a->group_size == b->group_size;
}

int llm_forward(const llm_model *m, llm_state *s, const int *tokens, int T, int pos, int which_logits) {
    const llm_config *c = &m->cfg;
    int D = c->dim, nt = s->n_threads > 0 ? s->n_threads : 1;
    /* by construction, never a forward pass on a config the checks refuse
     * or one the state was not planned for (a few compares per call) */
    if (llm__check_config(c, s->error, sizeof s->error) != LLM_OK) return LLM_ERR_CONFIG;
    if (!s->x || !m->w.layers || !llm__same_shape(c, &s->cfg)) {
        llm__fmt(s->error, sizeof s->error, "the state was not initialised for this model's shape: call llm_state_init");
        return LLM_ERR_ARG;
    }
    if (T < 1 || T > s->max_batch) {
        llm__fmt(s->error, sizeof s->error, "batch of %d tokens out of range (1..%d)", T, s->max_batch);
        return LLM_ERR_ARG;
    }
    if (pos < 0 || pos > s->ctx_len - T) {
        llm__fmt(s->error, sizeof s->error, "positions %d..%d exceed the context of %d", pos, pos + T - 1, s->ctx_len);
        return LLM_ERR_ARG;
    }
    for (int t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size) {
            llm__fmt(s->error, sizeof s->error, "token id %d out of range (0..%d)", tokens[t], c->vocab_size - 1);
            return LLM_ERR_ARG;
        }
    }
    if (which_logits == LLM_LOGITS_ALL && !s->all_logits) {
        llm__fmt(s->error, sizeof s->error, "logits of every token asked for, but the state was planned for the last only");
        return LLM_ERR_ARG;
    }
    s->n_threads = nt;

    /* x = embedding[token]; the blocks */
    llm_batch_item one;
    one.state = s; one.tokens = tokens; one.n = T; one.pos = pos;
    llm__blocks(m, s, T, &one, 1);

    /* logits = classifier @ final_norm(x), for every token or just the last */
    int first = which_logits == LLM_LOGITS_ALL ? 0 : T - 1, n_out = T - first;
    const float *xf = s->x + (size_t)first * D;
    if (c->final_norm) {
        llm__norm_batch(s->xb, xf, (const float *)m->w.final_norm.data, (const float *)m->w.final_norm_bias.data, n_out, D, c, s);
        xf = s->xb;
    }
    llm__matmul(s->logits, &m->w.classifier, xf, n_out, s);
    return LLM_OK;
}
