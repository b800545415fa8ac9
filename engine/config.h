/* engine/config.h -- the config every reader fills, and the model arena every
 * reader ends with: the range checks shared by all formats (llm_check_config;
 * llm_state_init and llm_forward run them too), the arena's size and its
 * carving (the layer table, the output norms' table, the RoPE frequencies),
 * and the views the llama2.c and LLMW readers bind into it. */

static int llm__fail(llm_model *m, int status, const char *msg) {
    llm__fmt(m->error, sizeof m->error, "%s", msg);
    return status;
}


/* Range checks shared by every format; the message (in e, E bytes) names the
 * field. llm_state_init and llm_forward run it too, so no forward pass ever
 * runs on a config it would refuse: the stack rows of attention
 * (LLM_MAX_HEAD_SIZE) and every size in the plan rest on these limits. */
static int llm__check_config(const llm_config *c, char *e, size_t E) {
#define LLM__CHECK(cond, ...) do { if (!(cond)) { llm__fmt(e, E, __VA_ARGS__); return LLM_ERR_CONFIG; } } while (0)
    LLM__CHECK(c->dim > 0 && c->dim <= LLM_MAX_DIM, "dim %d out of range (1..%d)", c->dim, LLM_MAX_DIM);
    LLM__CHECK(c->hidden_dim > 0 && c->hidden_dim <= LLM_MAX_HIDDEN, "hidden_dim %d out of range (1..%d)", c->hidden_dim, LLM_MAX_HIDDEN);
    LLM__CHECK(c->n_layers > 0 && c->n_layers <= LLM_MAX_LAYERS, "n_layers %d out of range (1..%d)", c->n_layers, LLM_MAX_LAYERS);
    LLM__CHECK(c->n_heads > 0 && c->n_heads <= c->dim, "n_heads %d out of range", c->n_heads);
    LLM__CHECK(c->n_kv_heads > 0 && c->n_kv_heads <= c->n_heads, "n_kv_heads %d out of range (1..n_heads=%d)", c->n_kv_heads, c->n_heads);
    LLM__CHECK(c->vocab_size > 0 && c->vocab_size <= LLM_MAX_VOCAB, "vocab_size %d out of range", c->vocab_size);
    LLM__CHECK(c->seq_len > 0 && c->seq_len <= LLM_MAX_SEQ, "seq_len %d out of range", c->seq_len);
    LLM__CHECK(c->n_heads % c->n_kv_heads == 0, "n_heads %d is not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
    LLM__CHECK(c->head_size > 0 && c->head_size % 2 == 0, "head size %d must be even", c->head_size);
    LLM__CHECK(c->head_size <= LLM_MAX_HEAD_SIZE, "head size %d above this build's LLM_MAX_HEAD_SIZE %d", c->head_size, LLM_MAX_HEAD_SIZE);
    LLM__CHECK(c->norm_type == LLM_NORM_RMS || c->norm_type == LLM_NORM_LAYER, "norm_type %d unknown", c->norm_type);
    LLM__CHECK(c->norm_pos >= LLM_NORM_PRE && c->norm_pos <= LLM_NORM_OUT, "norm_pos %d unknown (0 pre, 1 post, 2 peri, 3 out)", c->norm_pos);
    LLM__CHECK(c->final_norm == 0 || c->final_norm == 1, "final_norm %d must be 0 or 1", c->final_norm);
    LLM__CHECK(c->norm_eps > 0.0f && c->norm_eps < 1.0f, "norm eps %g out of range (0, 1)", (double)c->norm_eps);
    LLM__CHECK(c->rope_theta > 0.0f && c->rope_theta <= FLT_MAX, "rope_theta %g must be positive and finite", (double)c->rope_theta);
    LLM__CHECK(c->rope_layout == LLM_ROPE_INTERLEAVED || c->rope_layout == LLM_ROPE_HALF, "rope_layout %d unknown", c->rope_layout);
    LLM__CHECK(c->weight_type >= 0 && c->weight_type < LLM_TYPE_COUNT, "weight type %d unknown", c->weight_type);
    LLM__CHECK(llm__traits[c->weight_type].block || (c->group_size > 0 && c->group_size <= 4096), "q8_0 group size %d out of range (1..4096)", c->group_size);
    LLM__CHECK(c->rope_scaling >= LLM_ROPE_SCALING_NONE && c->rope_scaling <= LLM_ROPE_SCALING_LLAMA3, "rope_scaling %d unknown", c->rope_scaling);
    if (c->rope_scaling != LLM_ROPE_SCALING_NONE)
        LLM__CHECK(c->rope_factor > 0.0f && c->rope_factor <= FLT_MAX, "rope scaling factor %g must be positive and finite", (double)c->rope_factor);
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
        LLM__CHECK(c->rope_low_freq_factor > 0.0f && c->rope_low_freq_factor <= FLT_MAX, "rope low_freq_factor %g must be positive and finite", (double)c->rope_low_freq_factor);
        LLM__CHECK(c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_high_freq_factor <= FLT_MAX,
                   "rope high_freq_factor %g must be finite and above low_freq_factor %g", (double)c->rope_high_freq_factor, (double)c->rope_low_freq_factor);
        LLM__CHECK(c->rope_orig_ctx > 0, "rope original context %d must be positive", c->rope_orig_ctx);
    }
    LLM__CHECK(c->qkv_bias == 0 || c->qkv_bias == 1, "qkv_bias %d must be 0 or 1", c->qkv_bias);
    LLM__CHECK(c->qk_norm == 0 || c->qk_norm == 1, "qk_norm %d must be 0 or 1", c->qk_norm);
    LLM__CHECK(c->out_norm == 0 || c->out_norm == 1, "out_norm %d must be 0 or 1", c->out_norm);
    LLM__CHECK(c->qk_norm_whole == 0 || c->qk_norm_whole == 1, "qk_norm_whole %d must be 0 or 1", c->qk_norm_whole);
    LLM__CHECK(c->ffn_act == LLM_FFN_SILU || c->ffn_act == LLM_FFN_GELU_TANH, "ffn_act %d unknown (0 silu, 1 gelu_tanh)", c->ffn_act);
    LLM__CHECK(c->embed_scale >= 0.0f && c->embed_scale <= FLT_MAX, "embed_scale %g must be 0 (none) or positive and finite", (double)c->embed_scale);
    LLM__CHECK(c->query_scalar >= 0.0f && c->query_scalar <= FLT_MAX, "query_scalar %g must be 0 (head_size) or positive and finite", (double)c->query_scalar);
    LLM__CHECK(c->sliding_window >= 0, "sliding_window %d must be 0 (none) or positive", c->sliding_window);
    if (c->sliding_window) {
        LLM__CHECK(c->rope_local_theta > 0.0f && c->rope_local_theta <= FLT_MAX, "rope_local_theta %g must be positive and finite", (double)c->rope_local_theta);
        LLM__CHECK(c->n_layers <= 64 || c->local_layers >> 63 == 0, "sliding_window: the local-layer mask covers layers 0..63 only");
    }
    LLM__CHECK(c->sliding_window || c->local_layers == 0, "local layers set without a sliding_window");
    LLM__CHECK(c->n_layers >= 64 || c->local_layers >> c->n_layers == 0, "local-layer mask names layers past n_layers %d", c->n_layers);
#undef LLM__CHECK
    return LLM_OK;
}
/* The config, and the tensors its switches need: q/k/v biases and q/k
 * norms apply only where the checkpoint stores them. */
int llm_check_config(llm_model *m) {
    int st = llm__check_config(&m->cfg, m->error, sizeof m->error);
    if (st != LLM_OK || !m->w.layers) return st;
    if (m->cfg.qk_norm && !m->w.layers[0].q_norm.data)
        return llm__fail(m, LLM_ERR_CONFIG, "q/k norm is on, but the checkpoint has no q_norm/k_norm weights");
    if (m->cfg.qkv_bias && !m->w.layers[0].q_bias.data)
        return llm__fail(m, LLM_ERR_CONFIG, "q/k/v biases are on, but the checkpoint has none");
    return LLM_OK;
}

/* Bytes of the model arena: the layer table and the RoPE frequencies, each
 * aligned, and room to align the arena itself. */
static uint64_t llm__out_norms_bytes(const llm_config *c) {
    return c->out_norm ? llm__align(llm__mul((uint64_t)c->n_layers * 4, sizeof(const float *))) : 0;
}
static uint64_t llm__model_bytes(const llm_config *c) {
    return LLM_ALIGN + llm__align(llm__mul((uint64_t)c->n_layers, sizeof(llm_layer))) + llm__out_norms_bytes(c) +
           llm__align(llm__mul((uint64_t)(c->head_size / 2) * (c->sliding_window ? 2u : 1u), sizeof(float)));
}

/* One RoPE frequency rescaled for long contexts, as Hugging Face's
 * transformers (modeling_rope_utils) does: linear divides it by the factor;
 * llama3 divides the low frequencies (wavelength above orig_ctx /
 * low_freq_factor) by the factor, keeps the high ones (wavelength below
 * orig_ctx / high_freq_factor), and blends the two in between. In double,
 * then rounded: plain arithmetic, so every target gets the same float. */
static float llm__scaled_freq(const llm_config *c, float freq) {
    double f = (double)freq, factor = (double)c->rope_factor;
    if (c->rope_scaling == LLM_ROPE_SCALING_LINEAR) return (float)(f / factor);
    if (c->rope_scaling != LLM_ROPE_SCALING_LLAMA3) return freq;
    double lo = (double)c->rope_low_freq_factor, hi = (double)c->rope_high_freq_factor, ctx = (double)c->rope_orig_ctx;
    double wavelen = 2.0 * 3.14159265358979323846 / f;
    if (wavelen < ctx / hi) return freq;                   /* high frequency: kept   */
    if (wavelen > ctx / lo) return (float)(f / factor);    /* low frequency: scaled  */
    double smooth = (ctx / wavelen - lo) / (hi - lo);
    return (float)((1.0 - smooth) * f / factor + smooth * f);
}

/* Once the file is validated: carve the layer table (zeroed: a tensor the
 * file lacks stays NULL), the output norms' table when the file has them,
 * and the RoPE frequencies from the arena. The
 * frequencies in float as llama2.c computes them, 1 / theta^(i/hs), the
 * power in double, then rounded: float libms differ between glibc and a
 * microcontroller's newlib, double ones agree to the float bit. */
static int llm__model_arena(llm_model *m, void *arena, size_t arena_size) {
    const llm_config *c = &m->cfg;
    uint64_t need = llm__model_bytes(c);
    if (!arena || (uint64_t)arena_size < need) {
        llm__fmt(m->error, sizeof m->error, "model arena of %zu bytes at %p is too small: llm_model_size() says %llu",
                 arena_size, arena, (unsigned long long)need);
        return LLM_ERR_ARENA;
    }
    unsigned char *a = (unsigned char *)arena;
    a += (LLM_ALIGN - (uintptr_t)a % LLM_ALIGN) % LLM_ALIGN;
    size_t layers = (size_t)llm__align((uint64_t)c->n_layers * sizeof(llm_layer));
    size_t outs = (size_t)llm__out_norms_bytes(c);
    memset(a, 0, layers + outs);
    m->w.layers = (llm_layer *)(void *)a;
    m->w.out_norms = outs ? (const float **)(void *)(a + layers) : NULL;
    m->rope_freq = (float *)(void *)(a + layers + outs);
    int hs = c->head_size;
    for (int i = 0; i < hs; i += 2)
        m->rope_freq[i / 2] = llm__scaled_freq(c, 1.0f / (float)pow((double)c->rope_theta, (double)((float)i / (float)hs)));
    /* the local layers' (sliding_window): their own base, no scaling */
    for (int i = 0; c->sliding_window && i < hs; i += 2)
        m->rope_freq[hs / 2 + i / 2] = 1.0f / (float)pow((double)c->rope_local_theta, (double)((float)i / (float)hs));
    return LLM_OK;
}

/* Tensor `field` (an offsetof in llm_layer) of every layer: layer l's values
 * at base + l * stride, its scales (if any) so bytes after them. */
static void llm__stack(llm_model *m, size_t field, const unsigned char *base, uint64_t stride, uint64_t so,
                       int type, uint64_t rows, uint64_t cols) {
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const unsigned char *p = base + (size_t)l * (size_t)stride;
        llm_tensor *t = (llm_tensor *)(void *)((unsigned char *)&m->w.layers[l] + field);
        *t = llm__tensor(p, so ? (const float *)(const void *)(p + so) : NULL, type, (int)rows, (int)cols, m->cfg.group_size);
    }
}
#define LLM__STACK(field, base, stride, so, type, rows, cols) \
    llm__stack(m, offsetof(llm_layer, field), base, stride, so, type, rows, cols)

/* a (rows, cols) matrix of the model's weight type at p, its scales so bytes after it */
static llm_tensor llm__matrix_at(const llm_model *m, const unsigned char *p, uint64_t so, uint64_t rows, uint64_t cols) {
    return llm__tensor(p, so ? (const float *)(const void *)(p + so) : NULL, m->cfg.weight_type, (int)rows, (int)cols,
                       m->cfg.group_size);
}
/* an f32 vector (n,) at p */
static llm_tensor llm__vector_at(const unsigned char *p, uint64_t n) {
    return llm__tensor(p, NULL, LLM_TYPE_F32, 1, (int)n, 0);
}
