/* engine/load_llmw.h -- LLMW (FORMAT.md), read in place: version 1, whose
 * tensors follow the header in an order its config implies, and version 2,
 * whose tensor directory is checked entry by entry before any view is made. */

/* Bytes a (rows, cols) matrix takes in the LLMW file, and where its scales start. */
static uint64_t llm__matrix_bytes(const llm_config *c, uint64_t rows, uint64_t cols, uint64_t *scale_offset) {
    const llm__type_traits *tr = &llm__traits[c->weight_type];
    *scale_offset = 0;
    if (tr->qblock)   /* q4_0, q4_K: each row whole blocks, the last zero-padded */
        return llm__mul(llm__mul(rows, (cols + (uint64_t)tr->qblock - 1) / (uint64_t)tr->qblock), (uint64_t)tr->qblock_bytes);
    uint64_t values = llm__mul(llm__mul(rows, cols), (uint64_t)tr->value_bytes);
    if (!tr->scale_bytes) return values;
    uint64_t G = (uint64_t)(tr->block ? tr->block : c->group_size), groups = (cols + G - 1) / G;
    *scale_offset = llm__align(values);
    return llm__add(*scale_offset, llm__mul(llm__mul(rows, groups), (uint64_t)tr->scale_bytes));
}

/* ---- LLMW version 2: the header, a tensor directory, the tensors ---- */

/* The tensor kinds of a directory entry, numbered in their order in a
 * layer (and in the file); shapes in terms of the config. */
enum { LLM__K_TOK_EMBEDDINGS, LLM__K_ATTN_NORM, LLM__K_ATTN_NORM_BIAS, LLM__K_WQ, LLM__K_WK, LLM__K_WV,
       LLM__K_Q_BIAS, LLM__K_K_BIAS, LLM__K_V_BIAS, LLM__K_Q_NORM, LLM__K_K_NORM, LLM__K_WO, LLM__K_FFN_NORM,
       LLM__K_FFN_NORM_BIAS, LLM__K_W1, LLM__K_W2, LLM__K_W3, LLM__K_FINAL_NORM, LLM__K_FINAL_NORM_BIAS,
       LLM__K_CLASSIFIER, LLM__K_ATTN_OUT_NORM, LLM__K_ATTN_OUT_NORM_BIAS, LLM__K_FFN_OUT_NORM,
       LLM__K_FFN_OUT_NORM_BIAS, LLM__K_COUNT };
enum { LLM__S_1, LLM__S_DIM, LLM__S_HIDDEN, LLM__S_VOCAB, LLM__S_Q, LLM__S_KV, LLM__S_QN, LLM__S_KN };   /* sizes */
enum { LLM__IF_ALWAYS, LLM__IF_NORM_BIAS, LLM__IF_UNSHARED, LLM__IF_QKV_BIAS, LLM__IF_QK_NORM,   /* presence */
       LLM__IF_OUT_NORM, LLM__IF_OUT_NORM_BIAS };
typedef struct llm__kind {
    const char *name;
    unsigned char per_layer, matrix, rows, cols, when;
    unsigned short field;   /* offsetof in llm_layer (per layer) or llm_weights */
    unsigned char bare;     /* 1: an entry of w.out_norms (kind - LLM__K_ATTN_OUT_NORM), not a field */
} llm__kind;
#define LLM__L(f) (unsigned short)offsetof(llm_layer, f)
#define LLM__W(f) (unsigned short)offsetof(llm_weights, f)
static const llm__kind llm__kinds[LLM__K_COUNT] = {
    { "tok_embeddings", 0, 1, LLM__S_VOCAB, LLM__S_DIM, LLM__IF_ALWAYS, LLM__W(tok_embeddings), 0 },
    { "attn_norm", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(attn_norm), 0 },
    { "attn_norm_bias", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_NORM_BIAS, LLM__L(attn_norm_bias), 0 },
    { "wq", 1, 1, LLM__S_Q, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(wq), 0 },
    { "wk", 1, 1, LLM__S_KV, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(wk), 0 },
    { "wv", 1, 1, LLM__S_KV, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(wv), 0 },
    { "q_bias", 1, 0, LLM__S_1, LLM__S_Q, LLM__IF_QKV_BIAS, LLM__L(q_bias), 0 },
    { "k_bias", 1, 0, LLM__S_1, LLM__S_KV, LLM__IF_QKV_BIAS, LLM__L(k_bias), 0 },
    { "v_bias", 1, 0, LLM__S_1, LLM__S_KV, LLM__IF_QKV_BIAS, LLM__L(v_bias), 0 },
    { "q_norm", 1, 0, LLM__S_1, LLM__S_QN, LLM__IF_QK_NORM, LLM__L(q_norm), 0 },
    { "k_norm", 1, 0, LLM__S_1, LLM__S_KN, LLM__IF_QK_NORM, LLM__L(k_norm), 0 },
    { "wo", 1, 1, LLM__S_DIM, LLM__S_Q, LLM__IF_ALWAYS, LLM__L(wo), 0 },
    { "ffn_norm", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(ffn_norm), 0 },
    { "ffn_norm_bias", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_NORM_BIAS, LLM__L(ffn_norm_bias), 0 },
    { "w1", 1, 1, LLM__S_HIDDEN, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(w1), 0 },
    { "w2", 1, 1, LLM__S_DIM, LLM__S_HIDDEN, LLM__IF_ALWAYS, LLM__L(w2), 0 },
    { "w3", 1, 1, LLM__S_HIDDEN, LLM__S_DIM, LLM__IF_ALWAYS, LLM__L(w3), 0 },
    { "final_norm", 0, 0, LLM__S_1, LLM__S_DIM, LLM__IF_ALWAYS, LLM__W(final_norm), 0 },
    { "final_norm_bias", 0, 0, LLM__S_1, LLM__S_DIM, LLM__IF_NORM_BIAS, LLM__W(final_norm_bias), 0 },
    { "classifier", 0, 1, LLM__S_VOCAB, LLM__S_DIM, LLM__IF_UNSHARED, LLM__W(classifier), 0 },
    /* added later, so numbered after the model's last tensors; in a layer they come after w3 */
    { "attn_out_norm", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_OUT_NORM, 0, 1 },
    { "attn_out_norm_bias", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_OUT_NORM_BIAS, 0, 1 },
    { "ffn_out_norm", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_OUT_NORM, 0, 1 },
    { "ffn_out_norm_bias", 1, 0, LLM__S_1, LLM__S_DIM, LLM__IF_OUT_NORM_BIAS, 0, 1 },
};
#undef LLM__L
#undef LLM__W
#define LLM__ENTRY_SIZE 40
#define LLM__NO_LAYER 0xffffffffu

static uint64_t llm__size_of(const llm_config *c, int code) {
    switch (code) {
    case LLM__S_DIM: return (uint64_t)c->dim;
    case LLM__S_HIDDEN: return (uint64_t)c->hidden_dim;
    case LLM__S_VOCAB: return (uint64_t)c->vocab_size;
    case LLM__S_Q: return (uint64_t)c->n_heads * (uint64_t)c->head_size;
    case LLM__S_KV: return (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    /* the q/k norm weights: one head's, or (qk_norm_whole) the whole q's and k's */
    case LLM__S_QN: return (uint64_t)c->head_size * (uint64_t)(c->qk_norm_whole ? c->n_heads : 1);
    case LLM__S_KN: return (uint64_t)c->head_size * (uint64_t)(c->qk_norm_whole ? c->n_kv_heads : 1);
    }
    return 1;
}
static int llm__kind_present(const llm_config *c, int kind) {
    switch (llm__kinds[kind].when) {
    case LLM__IF_NORM_BIAS: return c->norm_bias;
    case LLM__IF_UNSHARED: return !c->shared_classifier;
    case LLM__IF_QKV_BIAS: return c->qkv_bias;
    case LLM__IF_QK_NORM: return c->qk_norm;
    case LLM__IF_OUT_NORM: return c->out_norm;
    case LLM__IF_OUT_NORM_BIAS: return c->out_norm && c->norm_bias;
    }
    return 1;
}
/* An entry's place in the canonical order: tok_embeddings, then layer by
 * layer each kind in enum order, then the model's last tensors. */
static uint64_t llm__entry_key(const llm_config *c, int kind, uint32_t layer) {
    if (kind == LLM__K_TOK_EMBEDDINGS) return 0;
    if (!llm__kinds[kind].per_layer) return ((uint64_t)c->n_layers + 1) * LLM__K_COUNT + (uint64_t)kind;
    return ((uint64_t)layer + 1) * LLM__K_COUNT + (uint64_t)kind;
}

/* A matrix's type in a version 2 file: the header's weight type, except
 * that a q4_K file stores a matrix whose rows are not whole superblocks of
 * 256 as q4_0 (FORMAT.md: padding them to 256 would cost more bytes than
 * q4_0's coarser scales lose; stories260K's 64 and 172, stories15M's 288). */
static int llm__llmw2_matrix_type(const llm_config *c, uint64_t cols) {
    return c->weight_type == LLM_TYPE_GGUF_Q4_K && cols % 256 ? LLM_TYPE_GGUF_Q4_0 : c->weight_type;
}

/* Directory entry i at e (40 bytes: u32 kind, layer, type, group, rows,
 * cols; u64 values offset, scales offset), checked against the config: a
 * known kind the header's flags call for, its layer, the shape the config
 * implies, the header's weight type for matrices and f32 for vectors,
 * 64-aligned offsets inside the file's n bytes. Its place in the canonical
 * order must follow *key, its bytes *end (both then advanced to it). */
static int llm__llmw2_check_entry(llm_model *m, const unsigned char *e, size_t n, uint32_t i, uint64_t *key,
                                  uint64_t *end) {
    const llm_config *c = &m->cfg;
    uint32_t kind = llm__u32(e), layer = llm__u32(e + 4), type = llm__u32(e + 8), group = llm__u32(e + 12);
    uint64_t rows = llm__u32(e + 16), cols = llm__u32(e + 20), off = llm__u64(e + 24), so = llm__u64(e + 32);
    if (kind >= LLM__K_COUNT) {
        llm__fmt(m->error, sizeof m->error, "tensor directory entry %u: kind %u unknown", (unsigned)i, (unsigned)kind);
        return LLM_ERR_FORMAT;
    }
    const llm__kind *k = &llm__kinds[kind];
    const char *name = k->name;
    char why[160];
#define LLM__BAD(...) do { llm__fmt(why, sizeof why, __VA_ARGS__); \
                           llm__fmt(m->error, sizeof m->error, "tensor %s (directory entry %u): %s", name, (unsigned)i, why); \
                           return LLM_ERR_FORMAT; } while (0)
    if (!llm__kind_present(c, (int)kind)) LLM__BAD("not expected with the header's flags (norm_bias, shared_classifier, qkv_bias, qk_norm, out_norm)");
    if (k->per_layer ? layer >= (uint32_t)c->n_layers : layer != LLM__NO_LAYER)
        LLM__BAD("layer %u out of range", (unsigned)layer);
    uint64_t at = llm__entry_key(c, (int)kind, layer);
    if (i > 0 && at <= *key) LLM__BAD("out of order or repeated");
    *key = at;
    if (rows != llm__size_of(c, k->rows) || cols != llm__size_of(c, k->cols))
        LLM__BAD("shape (%u, %u), but the header's dims (dim, hidden_dim, heads, head_size, vocab_size) imply (%u, %u)", (unsigned)rows, (unsigned)cols,
                 (unsigned)llm__size_of(c, k->rows), (unsigned)llm__size_of(c, k->cols));
    int want_type = k->matrix ? llm__llmw2_matrix_type(c, cols) : LLM_TYPE_F32;
    uint32_t want_group = llm__traits[want_type].block ? 0u : (uint32_t)c->group_size;
    if (type != (uint32_t)want_type || group != want_group)
        LLM__BAD("type %u group %u, but this engine reads type %d group %u here (the header's weight type for matrices, q4_0 for a q4_K file's rows not a multiple of 256; f32 for vectors)",
                 (unsigned)type, (unsigned)group, want_type, (unsigned)want_group);
    uint64_t scale_at;
    llm_config tc = *c;   /* the bytes of a tensor of this entry's type */
    tc.weight_type = want_type;
    uint64_t bytes = llm__matrix_bytes(&tc, rows, cols, &scale_at);
    uint64_t values = scale_at ? scale_at : bytes;          /* the values' bytes, padded when scales follow */
    uint64_t scales = scale_at ? bytes - scale_at : 0;
    typedef unsigned long long ull;
    if (off % LLM_ALIGN) LLM__BAD("offset %llu is not a multiple of 64", (ull)off);
    if (off < *end) LLM__BAD("its bytes at %llu overlap what comes before (up to %llu)", (ull)off, (ull)*end);
    if (!scales && so) LLM__BAD("scales offset %llu given, but type %s has no scales", (ull)so, llm_type_name(want_type));
    if (scales && !so) LLM__BAD("type %s needs scales, but the scales offset is 0", llm_type_name(want_type));
    if (scales && so % LLM_ALIGN) LLM__BAD("scales offset %llu is not a multiple of 64", (ull)so);
    if (scales && so < llm__add(off, values))
        LLM__BAD("scales at %llu overlap its values (%llu..%llu)", (ull)so, (ull)off, (ull)llm__add(off, values));
    *end = scales ? llm__add(so, scales) : llm__add(off, values);
    if (*end > (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error, "tensor %s (directory entry %u) ends at byte %llu, past the file's %zu: truncated",
                 name, (unsigned)i, (unsigned long long)*end, n);
        return LLM_ERR_SIZE;
    }
#undef LLM__BAD
    return LLM_OK;
}

/* Version 2's directory, before the arena is asked for: the header's
 * reserved bytes zero, as many entries as the config implies (so none is
 * missing) inside the file, each passing llm__llmw2_check_entry in the
 * canonical order (so none repeats), their tensors in the same order
 * without overlap; the file ends with the last. */
static int llm__llmw2_check_directory(llm_model *m, const unsigned char *b, size_t n, uint64_t file_size) {
    const llm_config *c = &m->cfg;
    uint32_t count = llm__u32(b + 96);
    uint64_t dir = llm__u64(b + 104), want = 0;
    for (int i = 172; i < LLM_HEADER_SIZE; i++)
        if (b[i]) return llm__fail(m, LLM_ERR_FORMAT, "LLMW version 2 header: reserved bytes 172..255 are not zero");
    for (int k = 0; k < LLM__K_COUNT; k++)
        if (llm__kind_present(c, k)) want += llm__kinds[k].per_layer ? (uint64_t)c->n_layers : 1;
    if ((uint64_t)count != want) {
        llm__fmt(m->error, sizeof m->error, "tensor_count %u in the header, but the config implies %llu tensors: corrupt header",
                 (unsigned)count, (unsigned long long)want);
        return LLM_ERR_FORMAT;
    }
    uint64_t dir_end = llm__add(dir, llm__mul(count, LLM__ENTRY_SIZE));
    if (dir < LLM_HEADER_SIZE || dir % 8 || dir_end > (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error, "tensor directory at %llu (%u entries) is not inside the %zu-byte file after the header: truncated or corrupt",
                 (unsigned long long)dir, (unsigned)count, n);
        return LLM_ERR_SIZE;
    }
    uint64_t end = dir_end, key = 0;
    for (uint32_t i = 0; i < count; i++) {
        int st = llm__llmw2_check_entry(m, b + (size_t)dir + (size_t)i * LLM__ENTRY_SIZE, n, i, &key, &end);
        if (st != LLM_OK) return st;
    }
    if (end != file_size || file_size != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint is %zu bytes, its header records %llu and its last tensor ends at %llu: truncated or corrupt; re-export with export.py",
                 n, (unsigned long long)file_size, (unsigned long long)end);
        return LLM_ERR_SIZE;
    }
    return LLM_OK;
}

/* Every directory entry, all checked, as a view of its bytes in its field
 * (the output norms: a pointer in w.out_norms); a tied classifier is the
 * embedding. */
static void llm__llmw2_bind(llm_model *m, const unsigned char *b) {
    const llm_config *c = &m->cfg;
    uint32_t count = llm__u32(b + 96);
    uint64_t dir = llm__u64(b + 104);
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *e = b + (size_t)dir + (size_t)i * LLM__ENTRY_SIZE;
        const llm__kind *k = &llm__kinds[llm__u32(e)];
        uint64_t so = llm__u64(e + 32);
        unsigned char *base = k->per_layer ? (unsigned char *)&m->w.layers[llm__u32(e + 4)] : (unsigned char *)&m->w;
        if (k->bare)
            m->w.out_norms[(size_t)llm__u32(e + 4) * 4 + (size_t)(llm__u32(e) - LLM__K_ATTN_OUT_NORM)] =
                (const float *)(const void *)(b + (size_t)llm__u64(e + 24));
        else
            *(llm_tensor *)(void *)(base + k->field) =
                llm__tensor(b + (size_t)llm__u64(e + 24), so ? (const float *)(const void *)(b + (size_t)so) : NULL,
                            (int)llm__u32(e + 8), (int)llm__u32(e + 16), (int)llm__u32(e + 20), c->group_size);
    }
    if (c->shared_classifier) m->w.classifier = m->w.tok_embeddings;
}

/* Version 2: the header, a tensor directory, the tensors; the directory
 * checked whole, then the arena, then the views. */
static int llm__load_llmw2(llm_model *m, const unsigned char *b, size_t n, uint64_t file_size, void *arena,
                           size_t arena_size) {
    int st = llm__llmw2_check_directory(m, b, n, file_size);
    if (st != LLM_OK) return st;
    if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    llm__llmw2_bind(m, b);
    return LLM_OK;
}

/* The 256-byte header of either version: its version, the config (checked)
 * and the file size it records. */
static int llm__llmw_header(llm_model *m, const unsigned char *b, size_t n, uint32_t *version_out, uint64_t *file_size) {
    llm_config *c = &m->cfg;
    if (n < LLM_HEADER_SIZE) return llm__fail(m, LLM_ERR_SIZE, "file shorter than the 256-byte LLMW header: truncated");
    uint32_t version = llm__u32(b + 4);
    if (version > LLM_VERSION) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint format version %u is newer than this engine reads (%d): update the engine",
                 (unsigned)version, LLM_VERSION);
        return LLM_ERR_VERSION;
    }
    if (version == 0) return llm__fail(m, LLM_ERR_FORMAT, "LLMW version 0 is invalid");
    if (llm__u32(b + 8) != LLM_HEADER_SIZE || llm__u32(b + 12) != LLM_ALIGN)
        return llm__fail(m, LLM_ERR_FORMAT, "LLMW header size or alignment field is not 256/64: corrupt header");
    c->dim = llm__i32(b + 16); c->hidden_dim = llm__i32(b + 20); c->n_layers = llm__i32(b + 24);
    c->n_heads = llm__i32(b + 28); c->n_kv_heads = llm__i32(b + 32); c->vocab_size = llm__i32(b + 36);
    c->seq_len = llm__i32(b + 40); c->head_size = llm__i32(b + 44);
    c->norm_type = (int)llm__u32(b + 48); c->norm_pos = (int)llm__u32(b + 52);
    c->final_norm = (int)llm__u32(b + 56); c->norm_eps = llm__f32(b + 60);
    c->rope_theta = llm__f32(b + 64); c->rope_layout = (int)llm__u32(b + 68);
    c->shared_classifier = (int)llm__u32(b + 72); c->weight_type = (int)llm__u32(b + 76);
    c->group_size = (int)llm__u32(b + 80); c->norm_bias = (int)llm__u32(b + 84);
    c->format = LLM_FORMAT_LLMW;
    *file_size = llm__u64(b + 88);
    *version_out = version;
    if (version == 2) {
        c->rope_scaling = (int)llm__u32(b + 100);
        c->rope_factor = llm__f32(b + 112); c->rope_low_freq_factor = llm__f32(b + 116);
        c->rope_high_freq_factor = llm__f32(b + 120); c->rope_orig_ctx = llm__i32(b + 124);
        c->qkv_bias = (int)llm__u32(b + 128); c->qk_norm = (int)llm__u32(b + 132);
        c->out_norm = (int)llm__u32(b + 136);
        c->qk_norm_whole = (int)llm__u32(b + 140);
        c->ffn_act = (int)llm__u32(b + 144); c->embed_scale = llm__f32(b + 148);
        c->query_scalar = llm__f32(b + 152); c->sliding_window = llm__i32(b + 156);
        c->local_layers = llm__u64(b + 160); c->rope_local_theta = llm__f32(b + 168);
    }
    /* f32, f16, q8_0, and two of GGUF's block layouts: q4_0 and q4_K */
    int wt = c->weight_type;
    if (wt != LLM_TYPE_F32 && wt != LLM_TYPE_F16 && wt != LLM_TYPE_Q8_0 && wt != LLM_TYPE_GGUF_Q4_0 && wt != LLM_TYPE_GGUF_Q4_K) {
        llm__fmt(m->error, sizeof m->error, "weight type %d unknown to LLMW version %d (0 f32, 1 f16, 2 q8_0, 5 q4_0, 6 q4_K)",
                 wt, LLM_VERSION);
        return LLM_ERR_CONFIG;
    }
    if (llm__traits[wt].qblock) {   /* the activations go in GGUF's groups of 32, as for a GGUF file */
        if (c->group_size != 0)
            return llm__fail(m, LLM_ERR_CONFIG, "LLMW q4_0/q4_K file with a group size: the field must be 0 (blocks are fixed)");
        c->group_size = LLM__GQ;
    }
    int st = llm_check_config(m);
    if (st != LLM_OK) return st;
    if (c->shared_classifier > 1 || c->norm_bias > 1 || c->shared_classifier < 0 || c->norm_bias < 0)
        return llm__fail(m, LLM_ERR_FORMAT, "shared_classifier/norm_bias flags must be 0 or 1");
    if (c->qk_norm_whole && !c->qk_norm)
        return llm__fail(m, LLM_ERR_FORMAT, "qk_norm_whole is 1 but qk_norm is 0: no q/k norm weights to span the projections");
    return LLM_OK;
}

/* Version 1: the tensors follow the header, 64-byte aligned, layer by
 * layer, in the order and shapes the config implies. */
static int llm__load_llmw1(llm_model *m, const unsigned char *b, size_t n, uint64_t file_size, void *arena,
                           size_t arena_size) {
    llm_config *c = &m->cfg;
    int st;
    if (c->head_size * c->n_heads != c->dim) return llm__fail(m, LLM_ERR_CONFIG, "head_size * n_heads != dim");

    /* every offset in 64 bits; once the end matches the file's n bytes, each fits a size_t */
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t vec = llm__align(D * 4), so_emb, so_q, so_k, so_o, so_1, so_2;
    uint64_t emb = llm__align(llm__matrix_bytes(c, V, D, &so_emb));
    uint64_t mq = llm__align(llm__matrix_bytes(c, qd, D, &so_q));
    uint64_t mk = llm__align(llm__matrix_bytes(c, kvd, D, &so_k));
    uint64_t mo = llm__align(llm__matrix_bytes(c, D, qd, &so_o));
    uint64_t m1 = llm__align(llm__matrix_bytes(c, H, D, &so_1));
    uint64_t m2 = llm__align(llm__matrix_bytes(c, D, H, &so_2));
    uint64_t nb = c->norm_bias ? 2 : 1;
    uint64_t layer = llm__add(llm__add(llm__mul(vec, 2 * nb), llm__add(mq, llm__mul(mk, 2))),
                              llm__add(mo, llm__add(llm__mul(m1, 2), m2)));
    uint64_t off = LLM_HEADER_SIZE;
    uint64_t o_emb = off; off = llm__add(off, emb);
    uint64_t o_layers = off; off = llm__add(off, llm__mul(layer, (uint64_t)c->n_layers));
    uint64_t o_final = off;
    uint64_t o_cls = llm__add(off, llm__mul(vec, nb)), cls_so = so_emb;
    /* the file ends right after its last tensor: the last norm vector or the classifier */
    uint64_t end = c->shared_classifier ? llm__add(o_final, (nb - 1) * vec + D * 4)
                                        : llm__add(o_cls, llm__matrix_bytes(c, V, D, &cls_so));
    if (end != file_size || file_size != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint is %zu bytes, its header records %llu and its shape implies %llu: truncated or corrupt; re-export with export.py",
                 n, (unsigned long long)file_size, (unsigned long long)end);
        return LLM_ERR_SIZE;
    }
    if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    llm_weights *w = &m->w;
    int T = c->weight_type, F32 = LLM_TYPE_F32;
    w->tok_embeddings = llm__matrix_at(m, b + o_emb, so_emb, V, D);
    /* each layer's tensors in file order; layer l + 1 starts `layer` bytes on */
    const unsigned char *p = b + o_layers;
#define LLM__NEXT(field, bytes, so, type, rows, cols) do { LLM__STACK(field, p, layer, so, type, rows, cols); p += (bytes); } while (0)
    LLM__NEXT(attn_norm, vec, 0, F32, 1, D);
    if (c->norm_bias) LLM__NEXT(attn_norm_bias, vec, 0, F32, 1, D);
    LLM__NEXT(wq, mq, so_q, T, qd, D);
    LLM__NEXT(wk, mk, so_k, T, kvd, D);
    LLM__NEXT(wv, mk, so_k, T, kvd, D);
    LLM__NEXT(wo, mo, so_o, T, D, qd);
    LLM__NEXT(ffn_norm, vec, 0, F32, 1, D);
    if (c->norm_bias) LLM__NEXT(ffn_norm_bias, vec, 0, F32, 1, D);
    LLM__NEXT(w1, m1, so_1, T, H, D);
    LLM__NEXT(w2, m2, so_2, T, D, H);
    LLM__NEXT(w3, m1, so_1, T, H, D);
#undef LLM__NEXT
    w->final_norm = llm__vector_at(b + o_final, D);
    if (c->norm_bias) w->final_norm_bias = llm__vector_at(b + o_final + vec, D);
    w->classifier = c->shared_classifier ? w->tok_embeddings : llm__matrix_at(m, b + o_cls, cls_so, V, D);
    return LLM_OK;
}

/* LLMW: the 256-byte header, then the tensors: in the config's order
 * (version 1) or as its directory lists them (version 2). */
static int llm__load_llmw(llm_model *m, const unsigned char *b, size_t n, void *arena, size_t arena_size) {
    uint32_t version;
    uint64_t file_size;
    int st = llm__llmw_header(m, b, n, &version, &file_size);
    if (st != LLM_OK) return st;
    if (version == 2) return llm__load_llmw2(m, b, n, file_size, arena, arena_size);
    return llm__load_llmw1(m, b, n, file_size, arena, arena_size);
}
