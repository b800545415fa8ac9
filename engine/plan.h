/* engine/plan.h -- options with their defaults, the arena plan (every
 * buffer's size in 64 bits), and llm_state_init, which carves the plan. */

/* The options with their defaults filled in. */
static llm_state_options llm__options(const llm_config *c, const llm_state_options *o) {
    llm_state_options r;
    memset(&r, 0, sizeof r);
    if (o) r = *o;
    if (r.ctx_len == 0) r.ctx_len = c->seq_len;
    if (r.max_batch == 0) r.max_batch = 1;
    return r;
}


/* The longest row a product reads: dim, hidden_dim, or the attention's
 * n_heads*head_size (wider than dim when a model sets its head size apart),
 * padded to the weight type's blocks. */
static uint64_t llm__widest(const llm_config *c) {
    uint64_t D = llm__clamp_u64(c->dim, 0, LLM_MAX_DIM), H = llm__clamp_u64(c->hidden_dim, 0, LLM_MAX_HIDDEN);
    uint64_t qd = llm__clamp_u64(c->n_heads, 0, LLM_MAX_DIM) * llm__clamp_u64(c->head_size, 0, LLM_MAX_HEAD_SIZE);
    uint64_t w = D > H ? D : H;
    w = w > qd ? w : qd;
    /* a block type's products read rows padded to whole blocks (types.h) */
    int qb = c->weight_type >= 0 && c->weight_type < LLM_TYPE_COUNT ? llm__traits[c->weight_type].qblock : 0;
    return qb ? (w + (uint64_t)qb - 1) / (uint64_t)qb * (uint64_t)qb : w;
}

size_t llm_kv_layer_rows(const llm_config *c, int ctx_len, int l) {
    return (size_t)llm__kv_layer_rows(c, ctx_len > 0 ? (uint64_t)ctx_len : 0, l);
}

llm_plan llm_state_plan(const llm_config *c, const llm_state_options *opt) {
    llm_state_options o = llm__options(c, opt);
    /* every field clamped to its limit first, so even the plan of an
     * unchecked config is a number below 2^60, never a wrapped one */
    uint64_t B = llm__clamp_u64(o.max_batch, 1, LLM_MAX_BATCH), D = llm__clamp_u64(c->dim, 0, LLM_MAX_DIM);
    uint64_t H = llm__clamp_u64(c->hidden_dim, 0, LLM_MAX_HIDDEN), ctx = llm__clamp_u64(o.ctx_len, 0, LLM_MAX_SEQ);
    uint64_t L = llm__clamp_u64(c->n_layers, 0, LLM_MAX_LAYERS), V = llm__clamp_u64(c->vocab_size, 0, LLM_MAX_VOCAB);
    uint64_t hs = llm__clamp_u64(c->head_size, 0, LLM_MAX_HEAD_SIZE), G = llm__clamp_u64(c->group_size, 0, 4096);
    uint64_t n_kv = llm__clamp_u64(c->n_kv_heads, 0, LLM_MAX_DIM);
    uint64_t qd = llm__clamp_u64(c->n_heads, 0, LLM_MAX_DIM) * hs, kvd = n_kv * hs;
    uint64_t widest = llm__widest(c), groups = G > 0 ? (widest + G - 1) / G : 0;
    uint64_t x = B * D * 4, xb = B * (D > qd ? D : qd) * 4, q = B * qd * 4, kv_new = B * kvd * 4, hb = B * H * 4;
    uint64_t rope = B * hs * 4, logits = (o.all_logits ? B : 1) * V * 4;
    /* activations quantized per group, where the weights' type multiplies
     * them so: int8 or int16 codes (weight_type: the model's widest) */
    uint64_t code_bytes = (uint64_t)llm__act_bytes(c->weight_type);
    uint64_t act_q = code_bytes ? llm__align(B * widest * code_bytes) + B * groups * 4 : 0;
    /* every layer's rows: ctx, or a local layer's ring (base.h) */
    uint64_t rows = llm__kv_rows_before(c, ctx, (int)L);
    uint64_t cache = rows * kvd * llm__kv_elem_bytes(o.kv_type);
    /* int8 cache: one f16 scale per (layer, position, kv head), keys and values */
    uint64_t kv_scales = o.kv_type == LLM_KV_Q8 ? rows * n_kv * 2 : 0;
    /* in carving order: x, xb, xb2, q, k_new, v_new, hb, hb2, rope, logits, act_q, caches, scales */
    uint64_t parts[15] = { x, xb, x, q, kv_new, kv_new, hb, hb, rope, logits, act_q, cache, cache, kv_scales, kv_scales };
    llm_plan p;
    p.total = 0;
    for (int i = 0; i < 15; i++) p.total += llm__align(parts[i]);
    p.x = x; p.xb = xb; p.xb2 = x; p.q = q; p.kv_new = kv_new; p.hb = hb; p.hb2 = hb; p.rope = rope;
    p.logits = logits; p.act_q = act_q; p.key_cache = cache; p.value_cache = cache; p.kv_scales = kv_scales;
    return p;
}

size_t llm_state_size(const llm_config *c, const llm_state_options *o) {
    uint64_t total = llm_state_plan(c, o).total;
    return total > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)total;
}

/* Carve `bytes` from the arena at *at, aligned (the plan's total fits the arena). */
static void *llm__carve(unsigned char *arena, size_t *at, uint64_t bytes) {
    void *p = arena + *at;
    *at += (size_t)llm__align(bytes);
    return p;
}

int llm_state_init(llm_state *s, const llm_model *m, const llm_state_options *opt,
                   void *arena, size_t arena_size) {
    const llm_config *c = &m->cfg;
    llm_state_options o = llm__options(c, opt);
    memset(s, 0, sizeof *s);
    s->n_threads = 1;
    s->parallel_min_work = LLM_PARALLEL_MIN_WORK;
    if (llm__check_config(c, s->error, sizeof s->error) != LLM_OK) return LLM_ERR_CONFIG;
    if (o.ctx_len < 1 || o.ctx_len > c->seq_len) {
        llm__fmt(s->error, sizeof s->error, "context length %d out of range (1..%d, the model's seq_len)", o.ctx_len, c->seq_len);
        return LLM_ERR_ARG;
    }
    int batch_max = o.ctx_len < LLM_MAX_BATCH ? o.ctx_len : LLM_MAX_BATCH;
    if (o.max_batch < 1 || o.max_batch > batch_max) {
        llm__fmt(s->error, sizeof s->error, "batch size %d out of range (1..%d)", o.max_batch, batch_max);
        return LLM_ERR_ARG;
    }
    if (o.kv_type < LLM_KV_F32 || o.kv_type > LLM_KV_Q8) {
        llm__fmt(s->error, sizeof s->error, "KV cache type %d unknown (f32, f16 or q8)", o.kv_type);
        return LLM_ERR_ARG;
    }
    llm_plan p = llm_state_plan(c, &o);
    if (p.total > (uint64_t)SIZE_MAX - LLM_ALIGN) {
        llm__fmt(s->error, sizeof s->error, "the state needs %llu bytes, more than this host can address: lower the context",
                 (unsigned long long)p.total);
        return LLM_ERR_ARENA;
    }
    if ((uint64_t)arena_size < p.total || !arena || (uintptr_t)arena % LLM_ALIGN) {
        llm__fmt(s->error, sizeof s->error, "arena of %zu bytes at %p is too small or not %d-aligned: need %llu",
                 arena_size, arena, LLM_ALIGN, (unsigned long long)p.total);
        return LLM_ERR_ARENA;
    }
    unsigned char *a = (unsigned char *)arena;
    size_t at = 0;
    s->ctx_len = o.ctx_len;
    s->max_batch = o.max_batch;
    s->all_logits = o.all_logits ? 1 : 0;
    s->kv_type = o.kv_type;
    s->cfg = *c;
    s->x = (float *)llm__carve(a, &at, p.x);
    s->xb = (float *)llm__carve(a, &at, p.xb);
    s->xb2 = (float *)llm__carve(a, &at, p.xb2);
    s->q = (float *)llm__carve(a, &at, p.q);
    s->k_new = (float *)llm__carve(a, &at, p.kv_new);
    s->v_new = (float *)llm__carve(a, &at, p.kv_new);
    s->hb = (float *)llm__carve(a, &at, p.hb);
    s->hb2 = (float *)llm__carve(a, &at, p.hb2);
    s->rope = (float *)llm__carve(a, &at, p.rope);
    s->logits = (float *)llm__carve(a, &at, p.logits);
    s->act_q = (int8_t *)llm__carve(a, &at, p.act_q);
    if (p.act_q) {
        uint64_t codes = (uint64_t)o.max_batch * llm__widest(c) * (uint64_t)llm__act_bytes(c->weight_type);
        s->act_scale = (float *)(void *)((unsigned char *)s->act_q + (size_t)llm__align(codes));
    }
    memset(arena, 0, at);
    s->key_cache = llm__carve(a, &at, p.key_cache);
    s->value_cache = llm__carve(a, &at, p.value_cache);
    s->key_scale = (uint16_t *)llm__carve(a, &at, p.kv_scales);
    s->value_scale = (uint16_t *)llm__carve(a, &at, p.kv_scales);
    MODEL_ASSERT(at == p.total);
    return LLM_OK;
}
