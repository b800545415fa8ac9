/* engine/forward.h -- the transformer: batched norms and residuals, RoPE,
 * the attention block (q, k, v into the cache; attention.h over it), the
 * SwiGLU FFN, and llm_forward, which reads like the block equations. No ISA
 * branches: the kernels' choice is made in simd.h and attention.h. */

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
static void llm__rope_table(float *rope, int pos, int T, const llm_model *m, int local) {
    int hs = m->cfg.head_size;
    for (int i = 0; i < hs; i += 2) {
        float freq = m->rope_freq[(local ? hs / 2 : 0) + i / 2];   /* a local layer's own table (sliding_window) */
        for (int t = 0; t < T; t++) {
            float val = (float)(pos + t) * freq;
            rope[(size_t)t * hs + i] = (float)cos((double)val);
            rope[(size_t)t * hs + i + 1] = (float)sin((double)val);
        }
    }
}

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

/* GELU-gated in place: g (n,) = gelu(g) * u with GELU's tanh form,
 * gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gemma). In
 * double, then rounded: float libms differ between targets, double ones
 * agree to the float bit. One scalar loop on every target and batch size. */
static void llm__geglu_tanh(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) {
        double x = (double)g[i];
        double y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        g[i] = (float)y * u[i];
    }
}

/* x (n,) += b (n,) */
static void llm__add_bias(float *x, const float *b, int n) {
    for (int i = 0; i < n; i++) x[i] += b[i];
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

/* One sequence's n tokens at pos..pos+n-1, rows o.. of the work state w's
 * q, k_new, v_new (its rope rows the same): per token, q, k, v += their
 * biases (Qwen2); q, k = rmsnorm of each head (Qwen3), or of the whole q
 * and the whole k (qk_norm_whole, OLMo 2); RoPE on q and k at
 * the token's position; k and v into the cache rows of state s. The same
 * code for every batch size, so prefill and decode agree bit for bit. */
static void llm__qkv_into_cache(const llm_model *m, llm_state *w, llm_state *s, int l, int o, int n, int pos) {
    const llm_config *c = &m->cfg;
    const llm_layer *L = &m->w.layers[l];
    int hs = c->head_size, kvd = c->n_kv_heads * hs, qd = c->n_heads * hs;
    size_t before = (size_t)llm__kv_rows_before(c, (uint64_t)s->ctx_len, l);
    size_t layer_elems = before * kvd, layer_scales = before * c->n_kv_heads;
    int local = llm__layer_local(c, l);   /* a local layer stores its rows in llm__attend_window */
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
        if (qk_norm && c->qk_norm_whole) {
            llm_rmsnorm(q + (size_t)t * qd, q + (size_t)t * qd, (const float *)L->q_norm.data, qd, c->norm_eps);
            llm_rmsnorm(k_new + (size_t)t * kvd, k_new + (size_t)t * kvd, (const float *)L->k_norm.data, kvd, c->norm_eps);
        } else if (qk_norm) {
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
        if (local) continue;
        llm__kv_store((unsigned char *)s->key_cache + layer_elems * eb, s->key_scale ? s->key_scale + layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), k_new + (size_t)t * kvd, c->n_kv_heads, hs);
        llm__kv_store((unsigned char *)s->value_cache + layer_elems * eb, s->value_scale ? s->value_scale + layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), v_new + (size_t)t * kvd, c->n_kv_heads, hs);
    });
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

/* Gated FFN for T tokens: a (T,dim) -> s->xb2 (T,dim) = W2 (act(W1 a) * W3 a), act silu (SwiGLU) or GELU-tanh */
static void llm__ffn(const llm_model *m, llm_state *s, int l, const float *a, int T) {
    const llm_config *c = &m->cfg;
    int H = c->hidden_dim;
    const llm_layer *L = &m->w.layers[l];
    llm__matmul(s->hb, &L->w1, a, T, s);
    llm__matmul_after(s->hb2, &L->w3, a, T, s, &L->w1);
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * H * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        float *g = s->hb + (size_t)t * H, *u = s->hb2 + (size_t)t * H;
        if (c->ffn_act == LLM_FFN_GELU_TANH) llm__geglu_tanh(g, u, H);
        else llm__swiglu(g, u, H);
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
        llm__rope_table(s->rope + (size_t)o * c->head_size, items[i].pos, items[i].n, m, 0);
    }
    /* Gemma: x *= embed_scale (sqrt(dim) in the checkpoint's dtype) */
    if (c->embed_scale > 0.0f)
        for (size_t i = 0; i < (size_t)T * (size_t)D; i++) s->x[i] *= c->embed_scale;

    int rope_local = 0;   /* the table in s->rope: the global layers' (0) or the local ones' (1) */
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->w.layers[l];
        if (llm__layer_local(c, l) != rope_local) {   /* sliding_window: each kind of layer its own RoPE base */
            rope_local = !rope_local;
            for (int i = 0, o = 0; i < n_items; o += items[i].n, i++)
                llm__rope_table(s->rope + (size_t)o * c->head_size, items[i].pos, items[i].n, m, rope_local);
        }
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
