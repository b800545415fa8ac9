/* engine/batch.h -- llm_forward_batch: one forward pass over the tokens of
 * several sequences, each with its own KV cache and positions (a server's
 * slots: one next token per conversation in decode, a chunk of a new prompt
 * in prefill). The products read each weight once for the whole batch; what
 * is per sequence (RoPE angles, the cache rows written, attention) runs on
 * that sequence's state: llm_forward is this pass with one item, its own
 * state (forward.h's llm__blocks), so attention of a one-token item is
 * decode's path, of a longer one prefill's. The
 * products and norms give each row the bits it gets in any batch (the
 * engine's promise: batched prefill == decode), so every sequence's logits
 * are bit for bit those of llm_forward on it alone.
 *
 * The work state supplies the activations (its max_batch bounds the tokens
 * of all items together, all_logits must be set: row i of its logits is item
 * i's last token); its KV cache is not used. Each item's state supplies only
 * its KV cache: it is planned like the work state's model, any max_batch. */

int llm_forward_batch(const llm_model *m, llm_state *w, const llm_batch_item *items, int n_items) {
    const llm_config *c = &m->cfg;
    int D = c->dim, T = 0;
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

    /* x = embedding[token]; the blocks, each item's attention on its own cache */
    llm__blocks(m, w, T, items, n_items);

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
