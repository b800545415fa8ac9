/* engine/attention.h -- attention over the KV cache in one place: the
 * cache's views, the scalar attention (every target), and the passes that
 * run an ISA's attention kernels where it has them.
 *
 * The kernels' contract (x86_attend.h; an ISA without them runs the scalar
 * llm__attend_head): LLM__ATTEND_AVX2 defined, LLM__GROUP_MAX query rows a
 * pass at most, and for cache type `type` (a constant in each instance)
 *   llm__scores8: a block of scores q.k / sqrt(hs) and their max,
 *   llm__accumulate_head: out += p v over a block (and each row's sum of p),
 * each with llm__attend_head's operations in its order, so its bits. */

/* One layer's cache for the attention of one head. */
typedef struct llm__kv_view {
    const void *k, *v;
    const uint16_t *k_scale, *v_scale;
    int type, n_heads, hs;
    float sqrt_hs;  /* the scores' divisor: sqrt(head_size), or sqrt(query_scalar) (Gemma) */
    int prefetch;   /* 1: each block of keys asks for the next block's rows (decode) */
} llm__kv_view;

#define LLM__KEY_BLOCK 32

#include "x86_attend.h"   /* the ISA's attention kernels (x86 only today) */

/* ---- the KV cache: rows of n_kv_heads*head_size in f32, f16, or int8 with
 * one f16 scale per head (max |v| / 127) ---- */

/* Store row v (kvd,) at position pos of one layer's cache. */
LLM__KERNEL void llm__kv_store(void *cache, uint16_t *scales, int kv_type, size_t pos, const float *v, int n_heads, int hs) {
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
    float run_max = -INFINITY, run_sum = 0.0f, sqrt_hs = kv->sqrt_hs;
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
                                 int dlast, float sqrt_hs) {
    ps->out = out; ps->q = q; ps->ld = ld; ps->kvh = kvh; ps->nq = nq; ps->last = last; ps->dlast = dlast;
    ps->sqrt_hs = sqrt_hs;
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
/* Decode: one token's query heads of kv heads h0..h1-1 over positions
 * 0..last, in passes of at most LLM__GROUP_MAX heads of one group, and up
 * to LLM__DECODE_PASSES passes block by block together: a block of keys
 * then reads the kv heads' slices of each position's row side by side (one
 * stream, where a head at a time read its slice, a row apart). Every pass
 * gets the operations of a pass alone in its order, so the same bits. */
#define LLM__DECODE_PASSES 8
/* passes ps[0..np-1] over positions 0..last, block by block together */
LLM__INLINE void llm__passes_run_typed(llm__pass *ps, int np, const llm__kv_view *kv, int type, int last) {
    for (int j0 = 0; j0 <= last; j0 += LLM__KEY_BLOCK)
        for (int i = 0; i < np; i++) llm__pass_block(&ps[i], kv, type, j0);
    for (int i = 0; i < np; i++) llm__pass_finish(&ps[i], kv->hs);
}
/* the same, one out-of-line instance per cache type, which decode and
 * prefill both call: the kernels inlined in a block of keys (the scores,
 * and the values' eight chunk counts for one and for two rows) are compiled
 * three times, not at each call site (twice per type and per caller before:
 * the attention code went from 150 to ~50 KB, and with it most of the
 * engine's compile time) */
static LLM__NOINLINE void llm__passes_run_f32(llm__pass *ps, int np, const llm__kv_view *kv, int last) {
    llm__passes_run_typed(ps, np, kv, LLM_KV_F32, last);
}
static LLM__NOINLINE void llm__passes_run_f16(llm__pass *ps, int np, const llm__kv_view *kv, int last) {
    llm__passes_run_typed(ps, np, kv, LLM_KV_F16, last);
}
static LLM__NOINLINE void llm__passes_run_q8(llm__pass *ps, int np, const llm__kv_view *kv, int last) {
    llm__passes_run_typed(ps, np, kv, LLM_KV_Q8, last);
}
LLM__INLINE void llm__passes_run(llm__pass *ps, int np, const llm__kv_view *kv, int type, int last) {
    if (type == LLM_KV_F32) llm__passes_run_f32(ps, np, kv, last);
    else if (type == LLM_KV_F16) llm__passes_run_f16(ps, np, kv, last);
    else llm__passes_run_q8(ps, np, kv, last);
}
/* llm__attend_head for the rows of one pass: a run of that pass alone
 * over the keys up to its last row's */
LLM__INLINE void llm__attend_rows8(float *out, const float *q, size_t ld, const llm__kv_view *kv, int type, int kvh,
                                   int nq, int last, int dlast) {
    llm__pass ps;
    llm__pass_start(&ps, out, q, ld, kv->hs, kvh, nq, last, dlast, kv->sqrt_hs);
    llm__passes_run(&ps, 1, kv, type, llm__pass_top(&ps));
}
LLM__INLINE void llm__attend_heads8(float *out, const float *q, const llm__kv_view *kv, int type, int h0, int h1,
                                    int group, int last) {
    llm__pass ps[LLM__DECODE_PASSES];
    int hs = kv->hs, np = 0;
    for (int h = h0; h < h1; h++)
        for (int g = 0; g < group; g += LLM__GROUP_MAX) {
            size_t at = ((size_t)h * group + (size_t)g) * (size_t)hs;
            int n = group - g < LLM__GROUP_MAX ? group - g : LLM__GROUP_MAX;
            llm__pass_start(&ps[np++], out + at, q + at, (size_t)hs, hs, h, n, last, 0, kv->sqrt_hs);
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

/* The kv view of layer l of state s's cache */
static llm__kv_view llm__kv_view_of(const llm_config *c, const llm_state *s, int l) {
    size_t kvd = (size_t)c->n_kv_heads * (size_t)c->head_size;
    size_t before = (size_t)llm__kv_rows_before(c, (uint64_t)s->ctx_len, l);
    size_t layer_elems = before * kvd, layer_scales = before * (size_t)c->n_kv_heads;
    size_t eb = llm__kv_elem_bytes(s->kv_type);
    llm__kv_view kv;
    kv.k = (const unsigned char *)s->key_cache + layer_elems * eb;
    kv.v = (const unsigned char *)s->value_cache + layer_elems * eb;
    kv.k_scale = s->key_scale ? s->key_scale + layer_scales : NULL;
    kv.v_scale = s->value_scale ? s->value_scale + layer_scales : NULL;
    kv.type = s->kv_type; kv.n_heads = c->n_kv_heads; kv.hs = c->head_size;
    kv.sqrt_hs = sqrtf(c->query_scalar > 0.0f ? c->query_scalar : (float)c->head_size);
    kv.prefetch = 0;
    return kv;
}

/* The view from position `first` on: its position 0 is the cache's `first`
 * (a local layer's window, keys first..last read as 0..last-first) */
static llm__kv_view llm__kv_view_from(llm__kv_view kv, int first) {
    size_t rows = (size_t)first * (size_t)kv.n_heads, eb = llm__kv_elem_bytes(kv.type);
    kv.k = (const unsigned char *)kv.k + rows * (size_t)kv.hs * eb;
    kv.v = (const unsigned char *)kv.v + rows * (size_t)kv.hs * eb;
    if (kv.k_scale) kv.k_scale += rows;
    if (kv.v_scale) kv.v_scale += rows;
    return kv;
}

/* Store row v (kvd,) at row r of the view's cache (keys: key 1, values: 0). */
static void llm__kv_store_row(const llm__kv_view *kv, int key, size_t r, const float *v) {
    llm__kv_store((void *)(uintptr_t)(key ? kv->k : kv->v), (uint16_t *)(uintptr_t)(key ? kv->k_scale : kv->v_scale), kv->type, r, v,
                  kv->n_heads, kv->hs);
}

/* A local layer's (sliding_window W) attention: query i over keys j with
 * i - W < j <= i, token by token: store token i's key and value (at row i,
 * or in the ring of 2W rows at i % W and i % W + W: base.h), then decode's
 * own path (llm__attend_heads) over the view from the window's first key's
 * row, in which the window's keys are consecutive. Prefill is decode token
 * after token, so the two agree bit for bit; the ring and the full rows hold
 * the same keys in the same order, so the same bits too. */
static void llm__attend_window(const llm_model *m, llm_state *w, const llm_state *s, const llm__kv_view *kv, float *xb,
                               const float *q, int o, int n, int pos) {
    const llm_config *c = &m->cfg;
    int qd = c->n_heads * c->head_size, kvd = c->n_kv_heads * c->head_size, group = c->n_heads / c->n_kv_heads;
    int W = c->sliding_window, ring = 2 * (int64_t)W < (int64_t)s->ctx_len;
    for (int t = 0; t < n; t++) {
        int i = pos + t, first = i - W + 1 > 0 ? i - W + 1 : 0;
        const float *kn = w->k_new + (size_t)(o + t) * kvd, *vn = w->v_new + (size_t)(o + t) * kvd;
        size_t r = ring ? (size_t)(i % W) : (size_t)i;
        llm__kv_store_row(kv, 1, r, kn);
        llm__kv_store_row(kv, 0, r, vn);
        if (ring) { llm__kv_store_row(kv, 1, r + (size_t)W, kn); llm__kv_store_row(kv, 0, r + (size_t)W, vn); }
        llm__kv_view kt = llm__kv_view_from(*kv, ring ? first % W : first);
        kt.prefetch = n == 1;
        llm__attend_heads(xb + (size_t)t * qd, q + (size_t)t * qd, &kt, 0, c->n_kv_heads, group, i - first);
    }
}

/* per (token, head) of one sequence: softmax(q K^T / sqrt(hs)) V over
 * positions 0..pos+t of state s's cache, q from rows o.. of w->q, out to
 * rows o.. of w->xb. A group of query heads shares each pass over its kv
 * head's keys; where each kv head has one query head, two consecutive
 * tokens share it. */
LLM__KERNEL void llm__attend_sequence(const llm_model *m, llm_state *w, const llm_state *s, int l, int o, int n, int pos) {
    const llm_config *c = &m->cfg;
    int hs = c->head_size, qd = c->n_heads * hs, group = c->n_heads / c->n_kv_heads, nt = w->n_threads;
    float *q = w->q + (size_t)o * qd, *xb = w->xb + (size_t)o * qd;
    llm__kv_view kv = llm__kv_view_of(c, s, l);
    if (llm__layer_local(c, l)) {
        llm__attend_window(m, w, s, &kv, xb, q, o, n, pos);
        return;
    }
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
