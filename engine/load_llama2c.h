/* engine/load_llama2c.h -- llama2.c's checkpoints, read in place: the legacy
 * file (7 int32, then f32 tensors) and the versioned ak42 files (version 1
 * f32, version 2 int8 in groups). The config from the header, its size
 * against the file's, then the views. */

/* The seven int32 of every llama2.c header, and the settings llama2.c implies:
 * pre-RMSNorm with a final norm, eps 1e-5, RoPE theta 10000 on interleaved pairs. */
static int llm__llama2c_config(llm_model *m, const unsigned char *h, int format) {
    llm_config *c = &m->cfg;
    c->dim = llm__i32(h); c->hidden_dim = llm__i32(h + 4); c->n_layers = llm__i32(h + 8);
    c->n_heads = llm__i32(h + 12); c->n_kv_heads = llm__i32(h + 16);
    int vocab = llm__i32(h + 20);
    c->seq_len = llm__i32(h + 24);
    c->shared_classifier = vocab > 0;   /* ak42 files overwrite this from their flag */
    c->vocab_size = vocab == INT32_MIN ? 0 : (vocab < 0 ? -vocab : vocab);
    c->head_size = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->norm_type = LLM_NORM_RMS; c->norm_pos = LLM_NORM_PRE; c->final_norm = 1;
    c->norm_eps = 1e-5f; c->rope_theta = 10000.0f; c->rope_layout = LLM_ROPE_INTERLEAVED;
    c->weight_type = LLM_TYPE_F32; c->group_size = 0; c->norm_bias = 0; c->format = format;
    int st = llm_check_config(m);
    if (st == LLM_OK && c->dim % c->n_heads) {   /* the head size is dim / n_heads here */
        llm__fmt(m->error, sizeof m->error, "dim %d is not a multiple of n_heads %d", c->dim, c->n_heads);
        return LLM_ERR_CONFIG;
    }
    return st;
}

/* llama2.c legacy: 7 int32, then f32 tensors each stacked over layers. */
static int llm__load_legacy(llm_model *m, const unsigned char *b, size_t n, void *arena, size_t arena_size) {
    llm_config *c = &m->cfg;
    if (n < 28) return llm__fail(m, LLM_ERR_SIZE, "file too short for a llama2.c header (28 bytes)");
    int st = llm__llama2c_config(m, b, LLM_FORMAT_LEGACY);
    if (st != LLM_OK) return st;

    /* float counts, in file order, in 64 bits: the limits llm_check_config
     * enforces keep every product below 2^48, on every host */
    uint64_t L = (uint64_t)c->n_layers, D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t counts[13] = { V * D, L * D, L * qd * D, L * kvd * D, L * kvd * D, L * D * qd, L * D,
                            L * H * D, L * D * H, L * H * D, D,
                            (uint64_t)c->seq_len * (uint64_t)c->head_size, /* freq_cis_real + imag (unused) */
                            c->shared_classifier ? 0 : V * D };
    uint64_t want = 28;
    for (int i = 0; i < 13; i++) want = llm__add(want, llm__mul(counts[i], 4));
    if (want != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint is %zu bytes but its header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq_len %d) implies %llu: truncated or not a llama2.c file",
                 n, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len,
                 (unsigned long long)want);
        return LLM_ERR_SIZE;
    }
    /* from here every size below is part of the n bytes, so it fits a size_t */
    if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    const unsigned char *f = b + 28;
    llm_weights *w = &m->w;
    const int F32 = LLM_TYPE_F32;
    w->tok_embeddings = llm__tensor(f, NULL, F32, (int)V, (int)D, 0); f += counts[0] * 4;
    LLM__STACK(attn_norm, f, D * 4, 0, F32, 1, D); f += counts[1] * 4;
    LLM__STACK(wq, f, qd * D * 4, 0, F32, qd, D); f += counts[2] * 4;
    LLM__STACK(wk, f, kvd * D * 4, 0, F32, kvd, D); f += counts[3] * 4;
    LLM__STACK(wv, f, kvd * D * 4, 0, F32, kvd, D); f += counts[4] * 4;
    LLM__STACK(wo, f, D * qd * 4, 0, F32, D, qd); f += counts[5] * 4;
    LLM__STACK(ffn_norm, f, D * 4, 0, F32, 1, D); f += counts[6] * 4;
    LLM__STACK(w1, f, H * D * 4, 0, F32, H, D); f += counts[7] * 4;
    LLM__STACK(w2, f, D * H * 4, 0, F32, D, H); f += counts[8] * 4;
    LLM__STACK(w3, f, H * D * 4, 0, F32, H, D); f += counts[9] * 4;
    w->final_norm = llm__vector_at(f, D); f += counts[10] * 4;
    f += counts[11] * 4;
    w->classifier = c->shared_classifier ? w->tok_embeddings : llm__tensor(f, NULL, F32, (int)V, (int)D, 0);
    return LLM_OK;
}

/* llama2.c's versioned files: "ak42", version, the 7 int32, a shared-classifier
 * byte (version 2: then an int32 group size), padding to 256 bytes. Then the
 * f32 norms (all attention norms, all FFN norms, the final norm) and the
 * matrices, each stacked over layers: tok_embeddings, wq, wk, wv, wo, w1, w2,
 * w3, the classifier if not shared. Version 1 stores them as f32; version 2
 * as int8 values followed by f32 scales, one per group of the flattened
 * tensor, tensor by tensor and layer by layer. */
static int llm__load_ak42(llm_model *m, const unsigned char *b, size_t n, void *arena, size_t arena_size) {
    llm_config *c = &m->cfg;
    if (n < LLM_HEADER_SIZE) return llm__fail(m, LLM_ERR_SIZE, "file shorter than llama2.c's 256-byte ak42 header: truncated");
    int version = llm__i32(b + 4);
    if (version != 1 && version != 2) {
        llm__fmt(m->error, sizeof m->error, "llama2.c ak42 version %d is not read (versions 1 and 2 are): convert it with export.py", version);
        return LLM_ERR_VERSION;
    }
    int st = llm__llama2c_config(m, b + 8, version == 1 ? LLM_FORMAT_AK42_V1 : LLM_FORMAT_AK42_V2);
    if (st != LLM_OK) return st;
    if (b[36] > 1) return llm__fail(m, LLM_ERR_FORMAT, "ak42 shared_classifier byte is not 0 or 1: corrupt header");
    c->shared_classifier = b[36];
    /* every offset in 64 bits; once the end matches the file's n bytes, each fits a size_t */
    uint64_t L = (uint64_t)c->n_layers, D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t G = 0;
    if (version == 2) {
        c->weight_type = LLM_TYPE_Q8_0;
        c->group_size = llm__i32(b + 37);
        G = (uint64_t)c->group_size;
        if (c->group_size <= 0 || c->group_size > 4096 || c->group_size % 4)
            return llm__fail(m, LLM_ERR_CONFIG, "ak42 int8 group size must be a positive multiple of 4 (at most 4096)");
        if (D % G || H % G || qd % G) {
            llm__fmt(m->error, sizeof m->error,
                     "ak42 int8 groups of %d span matrix rows (dim %d, hidden %d): convert it with export.py",
                     c->group_size, c->dim, c->hidden_dim);
            return LLM_ERR_FORMAT;
        }
    }
    /* bytes of one (rows, cols) matrix, and where its scales start */
#define LLM__AK_BYTES(rows, cols) (version == 1 ? llm__mul(llm__mul(rows, cols), 4) \
                                                : llm__add(llm__mul(rows, cols), llm__mul(llm__mul(rows, cols) / G, 4)))
#define LLM__AK_SCALES(rows, cols) (version == 1 ? 0 : llm__mul(rows, cols))
    uint64_t off = LLM_HEADER_SIZE;
    uint64_t o_attn = off, o_ffn = o_attn + L * D * 4, o_final = o_ffn + L * D * 4;
    off = o_final + D * 4;
    uint64_t sizes[9] = { LLM__AK_BYTES(V, D), LLM__AK_BYTES(qd, D), LLM__AK_BYTES(kvd, D), LLM__AK_BYTES(kvd, D),
                        LLM__AK_BYTES(D, qd), LLM__AK_BYTES(H, D), LLM__AK_BYTES(D, H), LLM__AK_BYTES(H, D),
                        c->shared_classifier ? 0 : LLM__AK_BYTES(V, D) };
    uint64_t starts[9];
    for (int i = 0; i < 9; i++) {
        starts[i] = off;
        off = llm__add(off, (i == 0 || i == 8) ? sizes[i] : llm__mul(sizes[i], L));
    }
    if (off != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error, "checkpoint is %zu bytes but its ak42 version %d header implies %llu: truncated or corrupt",
                 n, version, (unsigned long long)off);
        return LLM_ERR_SIZE;
    }
    if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    llm_weights *w = &m->w;
    LLM__STACK(attn_norm, b + o_attn, D * 4, 0, LLM_TYPE_F32, 1, D);
    LLM__STACK(ffn_norm, b + o_ffn, D * 4, 0, LLM_TYPE_F32, 1, D);
    w->final_norm = llm__vector_at(b + o_final, D);
    w->tok_embeddings = llm__matrix_at(m, b + starts[0], LLM__AK_SCALES(V, D), V, D);
    size_t fields[7] = { offsetof(llm_layer, wq), offsetof(llm_layer, wk), offsetof(llm_layer, wv), offsetof(llm_layer, wo),
                         offsetof(llm_layer, w1), offsetof(llm_layer, w2), offsetof(llm_layer, w3) };
    uint64_t rows[7] = { qd, kvd, kvd, D, H, D, H }, cols[7] = { D, D, D, qd, D, H, D };
    for (int i = 0; i < 7; i++)
        llm__stack(m, fields[i], b + starts[i + 1], sizes[i + 1], LLM__AK_SCALES(rows[i], cols[i]), c->weight_type, rows[i], cols[i]);
    w->classifier = c->shared_classifier ? w->tok_embeddings : llm__matrix_at(m, b + starts[8], LLM__AK_SCALES(V, D), V, D);
#undef LLM__AK_BYTES
#undef LLM__AK_SCALES
    return LLM_OK;
}
