/* engine/batch.h -- llm_forward_batch: one forward pass over the tokens of
 * several sequences, each with its own KV cache and positions (a server's
 * slots: one next token per conversation in decode, a chunk of a new prompt
 * in prefill). The products read each weight once for the whole batch; what
 * is per sequence (RoPE angles, the cache rows written, attention) runs on
 * that sequence's state with llm_forward's own per-token code: attention of
 * a one-token item is decode's path, of a longer one prefill's. The
 * products and norms give each row the bits it gets in any batch (the
 * engine's promise: batched prefill == decode), so every sequence's logits
 * are bit for bit those of llm_forward on it alone.
 *
 * The work state supplies the activations (its max_batch bounds the tokens
 * of all items together, all_logits must be set: row i of its logits is item
 * i's last token); its KV cache is not used. Each item's state supplies only
 * its KV cache: it is planned like the work state's model, any max_batch. */

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

/* Attention of layer l for every item: a (T,dim) of the whole batch ->
 * w->xb2 (T,dim); llm__attention's steps, item by item on its own cache. */
static void llm__attention_batch(const llm_model *m, llm_state *w, int l, const float *a, int T,
                                 const llm_batch_item *items, int n_items) {
    const llm_config *c = &m->cfg;
    int hs = c->head_size, kvd = c->n_kv_heads * hs, qd = c->n_heads * hs, group = c->n_heads / c->n_kv_heads;
    int nt = w->n_threads;
    const llm_layer *L = &m->w.layers[l];

    /* q, k, v = Wq a, Wk a, Wv a for the whole batch */
    llm__matmul(w->q, &L->wq, a, T, w);
    llm__matmul_after(w->k_new, &L->wk, a, T, w, &L->wq);
    llm__matmul_after(w->v_new, &L->wv, a, T, w, &L->wk);

    int bias = c->qkv_bias && L->q_bias.data, qk_norm = c->qk_norm && L->q_norm.data;
    for (int i = 0, o = 0; i < n_items; o += items[i].n, i++) {
        llm_state *s = items[i].state;
        int n = items[i].n, pos = items[i].pos;
        llm__kv_view kv = llm__kv_view_of(c, s, l);
        size_t layer_scales = (size_t)s->ctx_len * c->n_kv_heads;
        float *q = w->q + (size_t)o * qd, *k_new = w->k_new + (size_t)o * kvd, *v_new = w->v_new + (size_t)o * kvd;
        float *xb = w->xb + (size_t)o * qd;
        const float *rope = w->rope + (size_t)o * hs;
        /* per token as in llm__attention: biases, q/k norms, RoPE, the cache rows */
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
            llm__kv_store((void *)(uintptr_t)kv.k, s->key_scale ? s->key_scale + l * layer_scales : NULL, s->kv_type,
                          (size_t)(pos + t), k_new + (size_t)t * kvd, c->n_kv_heads, hs);
            llm__kv_store((void *)(uintptr_t)kv.v, s->value_scale ? s->value_scale + l * layer_scales : NULL, s->kv_type,
                          (size_t)(pos + t), v_new + (size_t)t * kvd, c->n_kv_heads, hs);
        }
        if (n == 1) {   /* decode's path: the kv heads in nt shares */
            kv.prefetch = 1;
            int parts = (int64_t)qd * (pos + 1) * 2 >= w->parallel_min_work && nt > 1 ? nt : 1;
            if (parts > c->n_kv_heads) parts = c->n_kv_heads;
            LLM__PARALLEL_FOR(nt, parts > 1,
            for (int p = 0; p < parts; p++)
                llm__attend_heads(xb, q, &kv, c->n_kv_heads * p / parts, c->n_kv_heads * (p + 1) / parts, group, pos););
        } else {        /* prefill's path, as llm__attention runs a batch */
            int per = group > 1 ? 1 : 2, n_it = (n + per - 1) / per;
            LLM__PARALLEL_FOR(nt, (int64_t)n * qd * (pos + n) * 2 >= w->parallel_min_work,
            for (int it = 0; it < n_it * c->n_kv_heads; it++) {
                int k = it % n_it, j = k % 2 ? n_it - 1 - k / 2 : k / 2, kvh = it / n_it, t = j * per;
                size_t at = (size_t)t * qd + (size_t)kvh * group * hs;
                if (per == 1) llm__attend_rows(xb + at, q + at, (size_t)hs, &kv, kvh, group, pos + t, 0);
                else llm__attend_rows(xb + at, q + at, (size_t)qd, &kv, kvh, n - t < 2 ? 1 : 2, pos + t, 1);
            });
        }
    }
    /* out = Wo concat(heads) */
    llm__matmul(w->xb2, &L->wo, w->xb, T, w);
}

int llm_forward_batch(const llm_model *m, llm_state *w, const llm_batch_item *items, int n_items) {
    const llm_config *c = &m->cfg;
    int D = c->dim, hs = c->head_size, T = 0;
    if (llm__check_config(c, w->error, sizeof w->error) != LLM_OK) return LLM_ERR_CONFIG;
    if (!w->x || !m->w.layers || !llm__same_shape(c, &w->cfg) || !w->all_logits) {
        llm__fmt(w->error, sizeof w->error, "the work state was not initialised for this model's shape with all_logits");
        return LLM_ERR_ARG;
    }
    if (n_items < 1 || n_items > w->max_batch) {
        llm__fmt(w->error, sizeof w->error, "batch of %d sequences out of range (1..%d)", n_items, w->max_batch);
        return LLM_ERR_ARG;
    }
    for (int i = 0; i < n_items; i++) {
        const llm_batch_item *it = &items[i];
        const llm_state *s = it->state;
        if (!s || !s->key_cache || !llm__same_shape(c, &s->cfg)) {
            llm__fmt(w->error, sizeof w->error, "item %d: its state was not initialised for this model's shape", i);
            return LLM_ERR_ARG;
        }
        if (it->n < 1 || it->n > w->max_batch - T) {
            llm__fmt(w->error, sizeof w->error, "item %d: %d tokens, more than the batch's %d left", i, it->n, w->max_batch - T);
            return LLM_ERR_ARG;
        }
        if (it->pos < 0 || it->pos > s->ctx_len - it->n) {
            llm__fmt(w->error, sizeof w->error, "item %d: positions %d..%d exceed the context of %d", i, it->pos,
                     it->pos + it->n - 1, s->ctx_len);
            return LLM_ERR_ARG;
        }
        for (int t = 0; t < it->n; t++)
            if (it->tokens[t] < 0 || it->tokens[t] >= c->vocab_size) {
                llm__fmt(w->error, sizeof w->error, "item %d: token id %d out of range (0..%d)", i, it->tokens[t],
                         c->vocab_size - 1);
                return LLM_ERR_ARG;
            }
        T += it->n;
    }
    if (w->n_threads < 1) w->n_threads = 1;

    /* x = embedding[token]; each item's RoPE angles at its own positions */
    const llm_tensor *emb = &m->w.tok_embeddings;
    for (int i = 0, o = 0; i < n_items; o += items[i].n, i++) {
        for (int t = 0; t < items[i].n; t++)
            llm__traits[emb->type].dequant_row(w->x + (size_t)(o + t) * D, emb, items[i].tokens[t]);
        llm__rope_table(w->rope + (size_t)o * hs, items[i].pos, items[i].n, m);
    }

    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->w.layers[l];
        if (c->norm_pos == LLM_NORM_PRE) {
            llm__layer_norm_batch(w->xb, w->x, &L->attn_norm, &L->attn_norm_bias, T, m, w);
            llm__attention_batch(m, w, l, w->xb, T, items, n_items);
            llm__residual_add(w->x, w->xb2, T, D, w);
            llm__layer_norm_batch(w->xb, w->x, &L->ffn_norm, &L->ffn_norm_bias, T, m, w);
            llm__ffn(m, w, l, w->xb, T);
            llm__residual_add(w->x, w->xb2, T, D, w);
        } else {
            llm__attention_batch(m, w, l, w->x, T, items, n_items);
            llm__residual_add(w->x, w->xb2, T, D, w);
            llm__layer_norm_batch(w->x, w->x, &L->attn_norm, &L->attn_norm_bias, T, m, w);
            llm__ffn(m, w, l, w->x, T);
            llm__residual_add(w->x, w->xb2, T, D, w);
            llm__layer_norm_batch(w->x, w->x, &L->ffn_norm, &L->ffn_norm_bias, T, m, w);
        }
    }

    /* each item's last token, gathered into xb2's rows, then as llm_forward:
     * logits row i = classifier @ final_norm(x of item i's last token) */
    for (int i = 0, o = 0; i < n_items; o += items[i].n, i++)
        memcpy(w->xb2 + (size_t)i * D, w->x + (size_t)(o + items[i].n - 1) * D, (size_t)D * sizeof(float));
    const float *xf = w->xb2;
    if (c->final_norm) {
        llm__norm_batch(w->xb, xf, (const float *)m->w.final_norm.data, (const float *)m->w.final_norm_bias.data, n_items, D, c, w);
        xf = w->xb;
    }
    llm__matmul(w->logits, &m->w.classifier, xf, n_items, w);
    return LLM_OK;
}
