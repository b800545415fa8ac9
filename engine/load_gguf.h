/* engine/load_gguf.h -- a GGUF file's model: the config from gguf.h's
 * metadata, then every tensor info matched to the engine's tensors by name
 * and checked, then the views. Tensors named as llama.cpp names them
 * (token_embd, blk.N.attn_q, ...). For llama, llama.cpp's converter permutes
 * q and k rows to interleaved pairs (the engine's LLM_ROPE_INTERLEAVED); for
 * qwen2, qwen3, gemma3 and olmo2 it does not and llama.cpp rotates halves
 * (NEOX: LLM_ROPE_HALF).
 *
 * gemma3 and olmo2 as llama.cpp's loader and graph read them (its
 * src/models/gemma3.cpp, olmo2.cpp):
 *   gemma3: the peri placement (attn_norm, post_attention_norm, ffn_norm,
 *     post_ffw_norm), per-head q/k norms, GELU-tanh gate; every norm weight
 *     stored as 1 + w (its converter adds the 1); embeddings times
 *     sqrtf(embedding_length) in f32; scores times 1/sqrt(key_length)
 *     (1/sqrt(embedding_length / head_count) for the 62-layer 27B); with
 *     attention.sliding_window > 0, layer l is local unless l % p == p - 1,
 *     p = attention.sliding_window_pattern (a u32, default 6), local layers
 *     with RoPE base rope.freq_base_swa (default 10000) and no scaling;
 *     output.weight optional (tied). Soft-capping is refused.
 *   olmo2: the out placement (post_attention_norm, post_ffw_norm; no input
 *     norms), q/k norms over the whole projections (n_head * head_dim and
 *     n_head_kv * head_dim), SiLU; output.weight required. */

/* The tensors the engine reads: a global one, or one per layer (slot
 * layer * LLM__GT_PER_LAYER + kind). Required ones are refused when absent. */
enum { LLM__GT_EMBD, LLM__GT_OUT_NORM, LLM__GT_OUTPUT, LLM__GT_ROPE_FREQS, LLM__GT_GLOBALS };
enum {
    LLM__GT_ATTN_NORM, LLM__GT_Q, LLM__GT_K, LLM__GT_V, LLM__GT_O, LLM__GT_FFN_NORM, LLM__GT_GATE, LLM__GT_UP,
    LLM__GT_DOWN, LLM__GT_QB, LLM__GT_KB, LLM__GT_VB, LLM__GT_QN, LLM__GT_KN, LLM__GT_ATTN_POST, LLM__GT_FFN_POST,
    LLM__GT_PER_LAYER
};
static const char *const llm__gt_global_names[LLM__GT_GLOBALS] = { "token_embd.weight", "output_norm.weight",
                                                                     "output.weight", "rope_freqs.weight" };
static const char *const llm__gt_layer_names[LLM__GT_PER_LAYER] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
    "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
    "attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight", "post_ffw_norm.weight"
};
static const size_t llm__gt_fields[LLM__GT_PER_LAYER] = {
    offsetof(llm_layer, attn_norm), offsetof(llm_layer, wq), offsetof(llm_layer, wk), offsetof(llm_layer, wv),
    offsetof(llm_layer, wo), offsetof(llm_layer, ffn_norm), offsetof(llm_layer, w1), offsetof(llm_layer, w3),
    offsetof(llm_layer, w2), offsetof(llm_layer, q_bias), offsetof(llm_layer, k_bias), offsetof(llm_layer, v_bias),
    offsetof(llm_layer, q_norm), offsetof(llm_layer, k_norm), 0, 0   /* the post norms: w.out_norms */
};
#define LLM__GT_SLOTS (LLM__GT_GLOBALS + LLM_MAX_LAYERS * LLM__GT_PER_LAYER)

/* A tensor name's slot, or -1 (unknown to the engine) */
static int llm__gt_slot(const unsigned char *s, uint64_t len, int n_layers) {
    for (int i = 0; i < LLM__GT_GLOBALS; i++)
        if (len == strlen(llm__gt_global_names[i]) && !memcmp(s, llm__gt_global_names[i], len)) return i;
    if (len < 6 || memcmp(s, "blk.", 4) != 0) return -1;
    uint64_t at = 4;
    int layer = 0;
    if (s[at] == '0' && at + 1 < len && s[at + 1] != '.') return -1;   /* no leading zeros */
    for (; at < len && s[at] >= '0' && s[at] <= '9'; at++) {
        layer = layer * 10 + (s[at] - '0');
        if (layer >= n_layers) return -1;
    }
    if (at == 4 || at >= len || s[at] != '.') return -1;
    at++;
    for (int k = 0; k < LLM__GT_PER_LAYER; k++)
        if (len - at == strlen(llm__gt_layer_names[k]) && !memcmp(s + at, llm__gt_layer_names[k], len - at))
            return LLM__GT_GLOBALS + layer * LLM__GT_PER_LAYER + k;
    return -1;
}

/* The RoPE scaling keys: none (or absent) or linear, with its factor and
 * original context */
static int llm__gguf_rope_scaling(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    int st;
    int present = 0;
    char got[48];
    int none = llm__gguf_str_is(f, "%s.rope.scaling.type", "none", &present, got, sizeof got);
    if (none < 0) return LLM_ERR_FORMAT;
    if (present && !none) {
        if (llm__gguf_str_is(f, "%s.rope.scaling.type", "linear", &present, got, sizeof got) != 1) {
            llm__fmt(m->error, sizeof m->error, "GGUF rope scaling '%s' is not supported (none and linear are)", got);
            return LLM_ERR_CONFIG;
        }
        c->rope_scaling = LLM_ROPE_SCALING_LINEAR;
        c->rope_factor = 1.0f;
        if ((st = llm__gguf_float(f, m, "%s.rope.scaling.factor", &c->rope_factor)) != LLM_OK) return st;
        if (!(c->rope_factor > 0.0f)) return llm__fail(m, LLM_ERR_CONFIG, "GGUF rope.scaling.factor must be positive");
        if ((st = llm__gguf_int(f, m, "%s.rope.scaling.original_context_length", 0, 1, INT32_MAX, &c->rope_orig_ctx)) != LLM_OK)
            return st;
    }
    return LLM_OK;
}

/* The vocabulary: token_embd's rows (0 when the file has no token_embd) */
static int llm__gguf_vocab_size(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    f->g.at = f->ti_at;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        llm__gti t;
        llm__gguf_tensor_info(f, &t);
        if (llm__gt_slot(t.name, t.name_len, 0) == LLM__GT_EMBD) {
            if (t.nd != 2 || t.ne[1] < 1 || t.ne[1] > LLM_MAX_VOCAB) {
                llm__fmt(m->error, sizeof m->error, "GGUF token_embd.weight has %d dimensions, %llu rows: not a (vocab, dim) matrix",
                         t.nd, (unsigned long long)t.ne[1]);
                return LLM_ERR_FORMAT;
            }
            c->vocab_size = (int)t.ne[1];
            break;
        }
    }
    return LLM_OK;
}

/* 1: the key is in the file, 0: not, -1: corrupt */
static int llm__gguf_has(llm__gguf *f, const char *key) {
    llm__gv v;
    return llm__gguf_key(f, key, &v);
}

/* gemma3's soft-capping keys: absent or 0, else refused (as the Hugging Face
 * path refuses them) */
static int llm__gguf_no_softcap(llm__gguf *f, llm_model *m) {
    static const char *const keys[2] = { "%s.final_logit_softcapping", "%s.attn_logit_softcapping" };
    for (int i = 0; i < 2; i++) {
        float cap = 0.0f;
        int st = llm__gguf_float(f, m, keys[i], &cap);
        if (st != LLM_OK) return st;
        if (cap != 0.0f) {
            llm__fmt(m->error, sizeof m->error, "GGUF %s.%s = %g: logit soft-capping is not supported",
                     llm__gguf_archs[f->arch], keys[i] + 3, (double)cap);
            return LLM_ERR_CONFIG;
        }
    }
    return LLM_OK;
}

/* gemma3's sliding window, as llama.cpp decides it: none unless
 * attention.sliding_window > 0; then layer l is local unless
 * l % p == p - 1 (p = attention.sliding_window_pattern, a u32, default 6;
 * 0: all local), local layers on rope.freq_base_swa (default 10000). */
static int llm__gguf_gemma3_window(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    int st, period = 6;
    llm__gv v;
    if ((st = llm__gguf_int(f, m, "%s.attention.sliding_window", 0, 0, INT32_MAX, &c->sliding_window)) != LLM_OK) return st;
    if (!c->sliding_window) return LLM_OK;
    int r = llm__gguf_key(f, "%s.attention.sliding_window_pattern", &v);
    if (r < 0) return LLM_ERR_FORMAT;
    if (r == 1 && v.is_array)
        return llm__fail(m, LLM_ERR_CONFIG, "GGUF gemma3.attention.sliding_window_pattern is an array: llama.cpp's "
                                            "gemma3 reads a period (a u32) only");
    if ((st = llm__gguf_int(f, m, "%s.attention.sliding_window_pattern", 0, 0, INT32_MAX, &period)) != LLM_OK) return st;
    for (int l = 0; l < c->n_layers; l++) {
        if (!(period == 0 || l % period < period - 1)) continue;
        if (l >= 64)
            return llm__fail(m, LLM_ERR_CONFIG, "GGUF gemma3: a local (sliding-window) layer at 64 or above: the "
                                                "local-layer mask covers layers 0..63");
        c->local_layers |= (uint64_t)1 << l;
    }
    if (!c->local_layers) c->sliding_window = 0;   /* every layer global */
    c->rope_local_theta = 10000.0f;
    return c->local_layers ? llm__gguf_float(f, m, "%s.rope.freq_base_swa", &c->rope_local_theta) : LLM_OK;
}

/* What gemma3 and olmo2 add to the shared keys (load_gguf.h's header) */
static int llm__gguf_gemma3_olmo2(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    int st;
    char k[96];
    llm__fmt(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", llm__gguf_archs[f->arch]);
    if ((st = llm__gguf_has(f, "%s.attention.layer_norm_rms_epsilon")) != 1) {
        if (st == 0) llm__fmt(m->error, sizeof m->error, "GGUF metadata %s is missing", k);
        return LLM_ERR_FORMAT;
    }
    if (f->arch == LLM__ARCH_OLMO2) {
        int sw = 0;
        if ((st = llm__gguf_int(f, m, "%s.attention.sliding_window", 0, 0, INT32_MAX, &sw)) != LLM_OK) return st;
        if (sw) {
            llm__fmt(m->error, sizeof m->error, "GGUF olmo2.attention.sliding_window = %d: OLMo 3's sliding-window "
                     "layers are not supported", sw);
            return LLM_ERR_CONFIG;
        }
        if (c->head_size * c->n_heads != c->dim) {
            llm__fmt(m->error, sizeof m->error, "GGUF olmo2.attention.key_length %d is not embedding_length / head_count "
                     "= %d, as llama.cpp's olmo2 requires", c->head_size, c->dim / c->n_heads);
            return LLM_ERR_CONFIG;
        }
        return LLM_OK;
    }
    if ((st = llm__gguf_no_softcap(f, m)) != LLM_OK) return st;
    c->embed_scale = (float)sqrt((double)c->dim);   /* sqrtf(n_embd): correctly rounded either way */
    c->query_scalar = (float)(c->n_layers == 62 ? c->dim / c->n_heads : c->head_size);
    return llm__gguf_gemma3_window(f, m);
}

/* The config from the metadata and token_embd's shape */
static int llm__gguf_config(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    int st;
    int gemma3 = f->arch == LLM__ARCH_GEMMA3, olmo2 = f->arch == LLM__ARCH_OLMO2;
    memset(c, 0, sizeof *c);
    c->norm_type = LLM_NORM_RMS; c->final_norm = 1;
    c->norm_pos = gemma3 ? LLM_NORM_PERI : olmo2 ? LLM_NORM_OUT : LLM_NORM_PRE;
    c->out_norm = gemma3 || olmo2;
    c->norm_eps = 1e-5f; c->rope_theta = 10000.0f; c->format = LLM_FORMAT_GGUF;
    c->rope_layout = f->arch == LLM__ARCH_LLAMA ? LLM_ROPE_INTERLEAVED : LLM_ROPE_HALF;
    c->qkv_bias = f->arch == LLM__ARCH_QWEN2;
    c->qk_norm = f->arch == LLM__ARCH_QWEN3 || gemma3 || olmo2;
    c->qk_norm_whole = olmo2;
    c->ffn_act = gemma3 ? LLM_FFN_GELU_TANH : LLM_FFN_SILU;
#define LLM__GI(key, req, lo, hi, field) do { if ((st = llm__gguf_int(f, m, key, req, lo, hi, &c->field)) != LLM_OK) return st; } while (0)
    LLM__GI("%s.embedding_length", 1, 1, LLM_MAX_DIM, dim);
    LLM__GI("%s.feed_forward_length", 1, 1, LLM_MAX_HIDDEN, hidden_dim);
    LLM__GI("%s.block_count", 1, 1, LLM_MAX_LAYERS, n_layers);
    LLM__GI("%s.context_length", 1, 1, INT32_MAX, seq_len);
    if (c->seq_len > LLM_MAX_SEQ) c->seq_len = LLM_MAX_SEQ;   /* the engine's longest context */
    LLM__GI("%s.attention.head_count", 1, 1, LLM_MAX_DIM, n_heads);
    c->n_kv_heads = c->n_heads;
    LLM__GI("%s.attention.head_count_kv", 0, 1, LLM_MAX_DIM, n_kv_heads);
    c->head_size = c->dim / c->n_heads;
    LLM__GI("%s.attention.key_length", 0, 1, LLM_MAX_DIM, head_size);
    int vlen = c->head_size, rope_dims = c->head_size;
    if ((st = llm__gguf_int(f, m, "%s.attention.value_length", 0, 1, LLM_MAX_DIM, &vlen)) != LLM_OK) return st;
    if ((st = llm__gguf_int(f, m, "%s.rope.dimension_count", 0, 1, LLM_MAX_DIM, &rope_dims)) != LLM_OK) return st;
    if (vlen != c->head_size || rope_dims != c->head_size) {
        llm__fmt(m->error, sizeof m->error, "GGUF key_length %d, value_length %d and rope.dimension_count %d differ: not supported",
                 c->head_size, vlen, rope_dims);
        return LLM_ERR_CONFIG;
    }
#undef LLM__GI
    if ((st = llm__gguf_float(f, m, "%s.rope.freq_base", &c->rope_theta)) != LLM_OK) return st;
    if ((st = llm__gguf_float(f, m, "%s.attention.layer_norm_rms_epsilon", &c->norm_eps)) != LLM_OK) return st;
    if ((st = llm__gguf_rope_scaling(f, m)) != LLM_OK) return st;
    if ((gemma3 || olmo2) && (st = llm__gguf_gemma3_olmo2(f, m)) != LLM_OK) return st;
    if ((st = llm__gguf_vocab_size(f, m)) != LLM_OK) return st;
    if (!c->vocab_size) return llm__fail(m, LLM_ERR_FORMAT, "GGUF tensor token_embd.weight is missing");
    c->weight_type = LLM_TYPE_F32;   /* set from the matrices once read */
    return llm_check_config(m);
}

/* The shape slot s must have: (rows, cols), vectors rows 1 */
static void llm__gt_shape(const llm_config *c, int s, uint64_t *rows, uint64_t *cols) {
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size, hs = (uint64_t)c->head_size;
    uint64_t qd = (uint64_t)c->n_heads * hs, kvd = (uint64_t)c->n_kv_heads * hs;
    *rows = 1;
    if (s < LLM__GT_GLOBALS) {
        *cols = s == LLM__GT_OUT_NORM ? D : s == LLM__GT_ROPE_FREQS ? hs / 2 : D;
        if (s == LLM__GT_EMBD || s == LLM__GT_OUTPUT) *rows = V;
        return;
    }
    switch ((s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER) {
    case LLM__GT_ATTN_NORM: case LLM__GT_FFN_NORM: case LLM__GT_ATTN_POST: case LLM__GT_FFN_POST: *cols = D; break;
    case LLM__GT_Q: *rows = qd; *cols = D; break;
    case LLM__GT_K: case LLM__GT_V: *rows = kvd; *cols = D; break;
    case LLM__GT_O: *rows = D; *cols = qd; break;
    case LLM__GT_GATE: case LLM__GT_UP: *rows = H; *cols = D; break;
    case LLM__GT_DOWN: *rows = D; *cols = H; break;
    case LLM__GT_QB: *cols = qd; break;
    case LLM__GT_KB: case LLM__GT_VB: *cols = kvd; break;
    case LLM__GT_QN: *cols = c->qk_norm_whole ? qd : hs; break;   /* a head's, or the whole q's (OLMo 2) */
    default: *cols = c->qk_norm_whole ? kvd : hs; break;           /* k's */
    }
}
/* whether slot s is a matrix (any supported type) or a vector (f32 only) */
static int llm__gt_is_matrix(int s) {
    if (s < LLM__GT_GLOBALS) return s == LLM__GT_EMBD || s == LLM__GT_OUTPUT;
    int k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
    return k == LLM__GT_Q || k == LLM__GT_K || k == LLM__GT_V || k == LLM__GT_O || k == LLM__GT_GATE || k == LLM__GT_UP ||
           k == LLM__GT_DOWN;
}
/* whether an arch's model has slot s: llama, qwen2, qwen3 no post norms;
 * gemma3 no biases nor rope_freqs; olmo2 neither, nor input norms */
static int llm__gt_allowed(int arch, int s) {
    int gemma3 = arch == LLM__ARCH_GEMMA3, olmo2 = arch == LLM__ARCH_OLMO2;
    if (s < LLM__GT_GLOBALS) return s != LLM__GT_ROPE_FREQS || !(gemma3 || olmo2);
    int k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
    if (k == LLM__GT_ATTN_POST || k == LLM__GT_FFN_POST) return gemma3 || olmo2;
    if (k >= LLM__GT_QB && k <= LLM__GT_VB) return !(gemma3 || olmo2);
    if (k == LLM__GT_ATTN_NORM || k == LLM__GT_FFN_NORM) return !olmo2;
    return 1;
}
/* whether slot s must be present in this config (olmo2's output too, as llama.cpp requires it) */
static int llm__gt_required(const llm_config *c, int arch, int s) {
    if (!llm__gt_allowed(arch, s)) return 0;
    if (s < LLM__GT_GLOBALS) return s == LLM__GT_EMBD || s == LLM__GT_OUT_NORM || (s == LLM__GT_OUTPUT && arch == LLM__ARCH_OLMO2);
    int k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
    if (k >= LLM__GT_QB && k <= LLM__GT_VB) return c->qkv_bias;
    if (k == LLM__GT_QN || k == LLM__GT_KN) return c->qk_norm;
    if (k == LLM__GT_ATTN_POST || k == LLM__GT_FFN_POST) return c->out_norm;
    return 1;
}
static void llm__gt_name(char *out, size_t size, int s) {
    if (s < LLM__GT_GLOBALS) llm__fmt(out, size, "%s", llm__gt_global_names[s]);
    else llm__fmt(out, size, "blk.%d.%s", (s - LLM__GT_GLOBALS) / LLM__GT_PER_LAYER,
                  llm__gt_layer_names[(s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER]);
}

/* ---- check: the whole tensor table, before the arena is asked for ---- */

/* Bytes of a (rows, cols) tensor of this type as GGUF stores it: rows of
 * whole blocks (the caller has checked that cols is a multiple of one) */
static uint64_t llm__gguf_tensor_bytes(int type, uint64_t rows, uint64_t cols) {
    const llm__type_traits *tr = &llm__traits[type];
    if (tr->qblock) return llm__mul(llm__mul(rows, cols / (uint64_t)tr->qblock), (uint64_t)tr->qblock_bytes);
    return llm__mul(llm__mul(rows, cols), (uint64_t)tr->value_bytes);
}

/* One tensor info, named tn, that fills slot s: a type the engine reads
 * (vectors f32 only), the slot's shape, whole blocks per row, an aligned
 * offset and its bytes inside the file. Its engine type into *type. */
static int llm__gguf_check_tensor(const llm__gguf *f, llm_model *m, const llm__gti *t, int s, const char *tn, int *type) {
    const llm_config *c = &m->cfg;
    *type = llm__ggml_type_of(t->ggml_type);
    int matrix = llm__gt_is_matrix(s);
    if (*type < 0 || (!matrix && *type != LLM_TYPE_F32)) {
        llm__fmt(m->error, sizeof m->error, "GGUF tensor %s has type %s (%u), which this engine does not read%s", tn,
                 llm__ggml_type_name(t->ggml_type), (unsigned)t->ggml_type,
                 *type >= 0 ? " for a vector (F32 only)" : " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)");
        return LLM_ERR_FORMAT;
    }
    uint64_t rows, cols;
    llm__gt_shape(c, s, &rows, &cols);
    int want_nd = rows == 1 && !matrix ? 1 : 2;
    if (t->nd != want_nd || t->ne[0] != cols || t->ne[1] != rows) {
        llm__fmt(m->error, sizeof m->error,
                 "GGUF tensor %s has %d dims (%llu, %llu, ...), the config says (%llu, %llu): inconsistent", tn,
                 t->nd, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                 (unsigned long long)cols, (unsigned long long)rows);
        return LLM_ERR_FORMAT;
    }
    const llm__type_traits *tr = &llm__traits[*type];
    if (tr->qblock && cols % (uint64_t)tr->qblock) {
        llm__fmt(m->error, sizeof m->error, "GGUF tensor %s: %llu columns are not whole %s blocks of %d", tn,
                 (unsigned long long)cols, llm__ggml_type_name(t->ggml_type), tr->qblock);
        return LLM_ERR_FORMAT;
    }
    uint64_t bytes = llm__gguf_tensor_bytes(*type, rows, cols);
    if (t->offset % f->alignment || llm__add(llm__add(f->data_at, t->offset), bytes) > f->g.n) {
        llm__fmt(m->error, sizeof m->error,
                 "GGUF tensor %s at data offset %llu (%llu bytes) is %s: truncated or corrupt", tn,
                 (unsigned long long)t->offset, (unsigned long long)bytes,
                 t->offset % f->alignment ? "not aligned to general.alignment" : "past the end of the file");
        return LLM_ERR_SIZE;
    }
    return LLM_OK;
}

/* seen: one bit per slot */
static int llm__gt_seen(const uint32_t *seen, int s) { return seen[s / 32] >> (s % 32) & 1; }

/* Every slot this config requires is in seen */
static int llm__gguf_check_required(const llm__gguf *f, llm_model *m, const uint32_t *seen) {
    const llm_config *c = &m->cfg;
    for (int s = 0; s < LLM__GT_GLOBALS + c->n_layers * LLM__GT_PER_LAYER; s++) {
        if (llm__gt_required(c, f->arch, s) && !llm__gt_seen(seen, s)) {
            char name[64];
            llm__gt_name(name, sizeof name, s);
            llm__fmt(m->error, sizeof m->error, "GGUF tensor %s is missing", name);
            return LLM_ERR_FORMAT;
        }
    }
    return LLM_OK;
}

/* The whole tensor table: each info names a slot of this model, once, and
 * passes llm__gguf_check_tensor; every required slot is filled. Then what
 * the table tells the config: whether the classifier is the embedding, and
 * the activations' plan (int8 or int16 codes in groups of 32 when a matrix
 * takes them: the matrix, the embedding included since it may be the
 * classifier, with the widest codes plans them). */
static int llm__gguf_check_tensors(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    uint32_t seen[(LLM__GT_SLOTS + 31) / 32];
    memset(seen, 0, sizeof seen);
    int weight_type = -1;
    f->g.at = f->ti_at;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        llm__gti t;
        llm__gguf_tensor_info(f, &t);
        int s = llm__gt_slot(t.name, t.name_len, c->n_layers), type, st;
        char tn[64];
        llm__gguf_printable(tn, sizeof tn, t.name, t.name_len);
        if (s < 0 || !llm__gt_allowed(f->arch, s)) {
            llm__fmt(m->error, sizeof m->error, "GGUF tensor '%s' is not one a %s model has (or its layer is past block_count %d)",
                     tn, llm__gguf_archs[f->arch], c->n_layers);
            return LLM_ERR_FORMAT;
        }
        if (llm__gt_seen(seen, s)) {
            llm__fmt(m->error, sizeof m->error, "GGUF tensor %s appears twice", tn);
            return LLM_ERR_FORMAT;
        }
        seen[s / 32] |= 1u << (s % 32);
        if ((st = llm__gguf_check_tensor(f, m, &t, s, tn, &type)) != LLM_OK) return st;
        if (llm__gt_is_matrix(s) && (weight_type < 0 || llm__act_bytes(type) > llm__act_bytes(weight_type))) weight_type = type;
    }
    int st = llm__gguf_check_required(f, m, seen);
    if (st != LLM_OK) return st;
    c->shared_classifier = !llm__gt_seen(seen, LLM__GT_OUTPUT);
    c->weight_type = weight_type < 0 ? LLM_TYPE_F32 : weight_type;
    c->group_size = llm__act_bytes(c->weight_type) ? LLM__GQ : 0;
    return LLM_OK;
}

/* ---- bind: the checked tensors into the model ---- */

/* Slot s's field becomes view (a post norm: its entry of w.out_norms);
 * rope_freqs instead divides the RoPE frequencies (Llama 3's per-frequency
 * divisors, as llama.cpp applies them). */
static void llm__gguf_bind_slot(llm_model *m, int s, llm_tensor view) {
    if (s >= LLM__GT_GLOBALS) {
        int layer = (s - LLM__GT_GLOBALS) / LLM__GT_PER_LAYER, k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
        if (k == LLM__GT_ATTN_POST || k == LLM__GT_FFN_POST)
            m->w.out_norms[(size_t)layer * 4 + (k == LLM__GT_ATTN_POST ? LLM_OUT_ATTN : LLM_OUT_FFN)] = (const float *)view.data;
        else
            *(llm_tensor *)(void *)((unsigned char *)&m->w.layers[layer] + llm__gt_fields[k]) = view;
    } else if (s == LLM__GT_EMBD) {
        m->w.tok_embeddings = view;
    } else if (s == LLM__GT_OUT_NORM) {
        m->w.final_norm = view;
    } else if (s == LLM__GT_OUTPUT) {
        m->w.classifier = view;
    } else {
        const float *ff = (const float *)view.data;
        for (int k = 0; k < m->cfg.head_size / 2; k++) m->rope_freq[k] /= ff[k];
    }
}

/* Every tensor info, all checked by llm__gguf_check_tensors, as a view
 * into the data section, in the field of its slot (the model arena carved
 * first). A tied classifier is the embedding. */
static void llm__gguf_bind_tensors(llm__gguf *f, llm_model *m) {
    f->g.at = f->ti_at;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        llm__gti t;
        llm__gguf_tensor_info(f, &t);
        int s = llm__gt_slot(t.name, t.name_len, m->cfg.n_layers);
        int type = llm__ggml_type_of(t.ggml_type);
        llm__gguf_bind_slot(m, s, llm__tensor(f->g.b + f->data_at + t.offset, NULL, type, (int)t.ne[1], (int)t.ne[0], 0));
    }
    if (m->cfg.shared_classifier) m->w.classifier = m->w.tok_embeddings;
}

/* A GGUF file: the metadata's config, the tensor table checked, the config
 * checked again with the weight type the table gave it, the arena, the views. */
static int llm__load_gguf(llm_model *m, const unsigned char *b, size_t n, void *arena, size_t arena_size) {
    llm__gguf f;
    int st = llm__gguf_open(&f, b, n, m->error, sizeof m->error);
    if (st != LLM_OK) return st;
    if ((st = llm__gguf_config(&f, m)) != LLM_OK) return st;
    if ((st = llm__gguf_check_tensors(&f, m)) != LLM_OK) return st;
    if ((st = llm_check_config(m)) != LLM_OK) return st;
    if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    llm__gguf_bind_tensors(&f, m);
    return LLM_OK;
}
