/* engine/gguf.h -- GGUF versions 2 and 3 (llama.cpp's format), read in
 * place: the metadata (architecture llama, qwen2 or qwen3), the tensor
 * table, and, for callers (run.c's tokenizer), a lookup of any key.
 *
 * The file is hostile until checked: every count, string length, array
 * length, dimension, type and offset is checked against the file's size in
 * 64-bit saturating arithmetic before it is used; a walk never reads a byte
 * it has not bounded. Layout (all little-endian):
 *   "GGUF", u32 version, u64 tensor count, u64 metadata count,
 *   metadata: string key, u32 value type, value (a string is u64 length +
 *     bytes; an array is u32 element type, u64 count, elements),
 *   tensor infos: string name, u32 n_dims, u64 dims[n_dims] (dims[0] the
 *     fastest), u32 ggml type, u64 offset (from the data section, aligned),
 *   padding to general.alignment (default 32), the data section.
 * Tensors named as llama.cpp names them (token_embd, blk.N.attn_q, ...). For
 * llama, llama.cpp's converter permutes q and k rows to interleaved pairs
 * (the engine's LLM_ROPE_INTERLEAVED); for qwen2 and qwen3 it does not and
 * llama.cpp rotates halves (NEOX: LLM_ROPE_HALF). */

/* GGUF's value types */
enum {
    LLM__GV_U8 = 0, LLM__GV_I8 = 1, LLM__GV_U16 = 2, LLM__GV_I16 = 3, LLM__GV_U32 = 4, LLM__GV_I32 = 5,
    LLM__GV_F32 = 6, LLM__GV_BOOL = 7, LLM__GV_STRING = 8, LLM__GV_ARRAY = 9, LLM__GV_U64 = 10,
    LLM__GV_I64 = 11, LLM__GV_F64 = 12, LLM__GV_COUNT = 13
};
/* bytes of a fixed-size value of each type (0: string or array) */
static const unsigned char llm__gv_size[LLM__GV_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

#define LLM__GGUF_MAX_DIMS 4
#define LLM__GGUF_MAX_KEY 65535     /* the spec's limit on a key's length */

/* A bounded cursor over the file: every read checks, and the first failure
 * leaves a message naming what was being read and where. */
typedef struct llm__gg {
    const unsigned char *b;
    uint64_t n, at;
    int bad;
    char *e;
    size_t E;
} llm__gg;

static int llm__gg_fail(llm__gg *g, const char *what) {
    if (!g->bad) llm__fmt(g->e, g->E, "GGUF truncated or corrupt: %s at byte %llu runs past the end (%llu bytes)", what,
                          (unsigned long long)g->at, (unsigned long long)g->n);
    g->bad = 1;
    return 0;
}
/* the next k bytes, or NULL (and the message) */
static const unsigned char *llm__gg_take(llm__gg *g, uint64_t k, const char *what) {
    if (g->bad) return NULL;
    if (k > g->n - g->at) { llm__gg_fail(g, what); return NULL; }
    const unsigned char *p = g->b + g->at;
    g->at += k;
    return p;
}
static uint32_t llm__gg_u32(llm__gg *g, const char *what) {
    const unsigned char *p = llm__gg_take(g, 4, what);
    return p ? llm__u32(p) : 0;
}
static uint64_t llm__gg_u64(llm__gg *g, const char *what) {
    const unsigned char *p = llm__gg_take(g, 8, what);
    return p ? llm__u64(p) : 0;
}
/* a string: its bytes (not NUL-terminated) and length */
static const unsigned char *llm__gg_str(llm__gg *g, uint64_t *len, const char *what) {
    *len = llm__gg_u64(g, what);
    return llm__gg_take(g, *len, what);
}

/* a name from the file as a printable C string (at most 63 bytes; bytes
 * outside printable ASCII shown as '?') */
static void llm__gg_printable(char *out, size_t size, const unsigned char *p, uint64_t len) {
    size_t k = 0;
    for (; k + 1 < size && k < len; k++) out[k] = p[k] >= 32 && p[k] < 127 ? (char)p[k] : '?';
    out[k] = 0;
}

/* Skip one value of type t (an array: of fixed-size values or strings; an
 * array of arrays is refused, as llama.cpp refuses it) */
static int llm__gg_skip_value(llm__gg *g, uint32_t t, const char *key) {
    uint64_t len;
    if (t >= LLM__GV_COUNT) {
        if (!g->bad) llm__fmt(g->e, g->E, "GGUF metadata %s has unknown value type %u", key, (unsigned)t);
        g->bad = 1;
        return 0;
    }
    if (t == LLM__GV_STRING) return llm__gg_str(g, &len, key) != NULL;
    if (t != LLM__GV_ARRAY) return llm__gg_take(g, llm__gv_size[t], key) != NULL;
    uint32_t et = llm__gg_u32(g, key);
    uint64_t count = llm__gg_u64(g, key);
    if (g->bad) return 0;
    if (et >= LLM__GV_COUNT || et == LLM__GV_ARRAY) {
        llm__fmt(g->e, g->E, "GGUF metadata %s is an array of %s type %u: not read", key,
                 et == LLM__GV_ARRAY ? "nested array" : "unknown", (unsigned)et);
        g->bad = 1;
        return 0;
    }
    if (et != LLM__GV_STRING) return llm__gg_take(g, llm__mul(count, llm__gv_size[et]), key) != NULL;
    /* strings: at least 8 bytes each, so the count is bounded before the loop */
    if (count > (g->n - g->at) / 8) return llm__gg_fail(g, key);
    for (uint64_t i = 0; i < count; i++)
        if (!llm__gg_str(g, &len, key)) return 0;
    return 1;
}

/* The header's counts, checked against what the file could hold; g is left
 * at the first metadata pair */
static int llm__gg_header(llm__gg *g, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv) {
    if (g->n < 24) {
        llm__fmt(g->e, g->E, "GGUF file of %llu bytes is shorter than its 24-byte header: truncated", (unsigned long long)g->n);
        return LLM_ERR_SIZE;
    }
    g->at = 4;
    *version = llm__gg_u32(g, "version");
    if (*version < 2 || *version > 3) {
        llm__fmt(g->e, g->E, "GGUF version %u is not read (versions 2 and 3 are)%s", (unsigned)*version,
                 *version == 1 ? ": convert it again with llama.cpp" : "");
        return LLM_ERR_VERSION;
    }
    *n_tensors = llm__gg_u64(g, "tensor count");
    *n_kv = llm__gg_u64(g, "metadata count");
    /* a pair takes at least 13 bytes (key length, type, one byte), a tensor info 32 */
    if (*n_kv > (g->n - g->at) / 13 || *n_tensors > (g->n - g->at) / 32) {
        llm__fmt(g->e, g->E, "GGUF header claims %llu metadata pairs and %llu tensors, more than its %llu bytes can hold: corrupt",
                 (unsigned long long)*n_kv, (unsigned long long)*n_tensors, (unsigned long long)g->n);
        return LLM_ERR_FORMAT;
    }
    return LLM_OK;
}

/* One metadata value found by key: its type (an array's element type, with
 * count elements) and where its bytes start (a string: its u64 length). */
typedef struct llm__gv {
    uint32_t type;
    int is_array;
    uint64_t count;
    uint64_t at;
} llm__gv;

/* Walk all metadata from the cursor: with key, find it (1: found, into v);
 * the walk validates every pair. Returns 0 when absent, -1 when corrupt. */
static int llm__gg_find(llm__gg *g, uint64_t n_kv, const char *key, llm__gv *v) {
    size_t klen = key ? strlen(key) : 0;
    int found = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t len;
        const unsigned char *k = llm__gg_str(g, &len, "a metadata key");
        if (!k) return -1;
        if (len > LLM__GGUF_MAX_KEY) {
            llm__fmt(g->e, g->E, "GGUF metadata key %llu is %llu bytes long (the limit is 65535): corrupt",
                     (unsigned long long)i, (unsigned long long)len);
            g->bad = 1;
            return -1;
        }
        uint32_t t = llm__gg_u32(g, "a metadata type");
        if (g->bad) return -1;
        if (!found && key && len == klen && memcmp(k, key, klen) == 0) {
            found = 1;
            v->type = t; v->is_array = 0; v->count = 1; v->at = g->at;
            if (t == LLM__GV_ARRAY && g->n - g->at >= 12) {
                v->type = llm__u32(g->b + g->at); v->is_array = 1; v->count = llm__u64(g->b + g->at + 4); v->at = g->at + 12;
            }
        }
        char name[64];
        llm__fmt(name, sizeof name, "value %llu", (unsigned long long)i);
        if (!llm__gg_skip_value(g, t, name)) return -1;
    }
    return found;
}

/* value v as an integer / float (scalars of a numeric type only) */
static int llm__gv_int(const llm__gg *g, const llm__gv *v, uint64_t i, int64_t *out) {
    if (i >= v->count || v->type >= LLM__GV_COUNT || !llm__gv_size[v->type]) return 0;
    const unsigned char *p = g->b + v->at + i * llm__gv_size[v->type];
    switch (v->type) {
    case LLM__GV_U8: case LLM__GV_BOOL: *out = p[0]; return 1;
    case LLM__GV_I8: *out = (int8_t)p[0]; return 1;
    case LLM__GV_U16: *out = (uint16_t)(p[0] | p[1] << 8); return 1;
    case LLM__GV_I16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return 1;
    case LLM__GV_U32: *out = llm__u32(p); return 1;
    case LLM__GV_I32: *out = llm__i32(p); return 1;
    case LLM__GV_U64: { uint64_t u = llm__u64(p); *out = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u; return 1; }
    case LLM__GV_I64: { uint64_t u = llm__u64(p); memcpy(out, &u, 8); return 1; }
    }
    return 0;
}
static int llm__gv_float(const llm__gg *g, const llm__gv *v, double *out) {
    const unsigned char *p = g->b + v->at;
    if (v->is_array) return 0;
    if (v->type == LLM__GV_F32) { *out = llm__f32(p); return 1; }
    if (v->type == LLM__GV_F64) { uint64_t u = llm__u64(p); memcpy(out, &u, 8); return 1; }
    int64_t i;
    if (llm__gv_int(g, v, 0, &i)) { *out = (double)i; return 1; }
    return 0;
}

/* ggml's tensor types the engine reads, and their blocks */
typedef struct llm__ggml_type { uint32_t id; int type; const char *name; } llm__ggml_type;
static const llm__ggml_type llm__ggml_types[] = {
    { 0, LLM_TYPE_F32, "F32" }, { 1, LLM_TYPE_F16, "F16" }, { 30, LLM_TYPE_BF16, "BF16" },
    { 8, LLM_TYPE_GGUF_Q8_0, "Q8_0" }, { 2, LLM_TYPE_GGUF_Q4_0, "Q4_0" },
    { 12, LLM_TYPE_GGUF_Q4_K, "Q4_K" }, { 14, LLM_TYPE_GGUF_Q6_K, "Q6_K" },
    { 3, LLM_TYPE_GGUF_Q4_1, "Q4_1" }, { 6, LLM_TYPE_GGUF_Q5_0, "Q5_0" }, { 7, LLM_TYPE_GGUF_Q5_1, "Q5_1" },
    { 20, LLM_TYPE_GGUF_IQ4_NL, "IQ4_NL" }, { 10, LLM_TYPE_GGUF_Q2_K, "Q2_K" }, { 11, LLM_TYPE_GGUF_Q3_K, "Q3_K" },
    { 13, LLM_TYPE_GGUF_Q5_K, "Q5_K" }, { 23, LLM_TYPE_GGUF_IQ4_XS, "IQ4_XS" },
};
/* names of the ones it does not, for the message */
static const char *llm__ggml_type_name(uint32_t id) {
    static const char *const names[] = { "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                         "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                         "IQ1_M", "BF16" };
    return id < sizeof names / sizeof names[0] ? names[id] : "unknown";
}

/* The tensors the engine reads: a global one, or one per layer (slot
 * layer * LLM__GT_PER_LAYER + kind). Required ones are refused when absent. */
enum { LLM__GT_EMBD, LLM__GT_OUT_NORM, LLM__GT_OUTPUT, LLM__GT_ROPE_FREQS, LLM__GT_GLOBALS };
enum {
    LLM__GT_ATTN_NORM, LLM__GT_Q, LLM__GT_K, LLM__GT_V, LLM__GT_O, LLM__GT_FFN_NORM, LLM__GT_GATE, LLM__GT_UP,
    LLM__GT_DOWN, LLM__GT_QB, LLM__GT_KB, LLM__GT_VB, LLM__GT_QN, LLM__GT_KN, LLM__GT_PER_LAYER
};
static const char *const llm__gt_global_names[LLM__GT_GLOBALS] = { "token_embd.weight", "output_norm.weight",
                                                                     "output.weight", "rope_freqs.weight" };
static const char *const llm__gt_layer_names[LLM__GT_PER_LAYER] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
    "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
    "attn_q_norm.weight", "attn_k_norm.weight"
};
static const size_t llm__gt_fields[LLM__GT_PER_LAYER] = {
    offsetof(llm_layer, attn_norm), offsetof(llm_layer, wq), offsetof(llm_layer, wk), offsetof(llm_layer, wv),
    offsetof(llm_layer, wo), offsetof(llm_layer, ffn_norm), offsetof(llm_layer, w1), offsetof(llm_layer, w3),
    offsetof(llm_layer, w2), offsetof(llm_layer, q_bias), offsetof(llm_layer, k_bias), offsetof(llm_layer, v_bias),
    offsetof(llm_layer, q_norm), offsetof(llm_layer, k_norm)
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

/* The config from the metadata; arch is the architecture's index in
 * llm__gg_archs. */
static const char *const llm__gg_archs[3] = { "llama", "qwen2", "qwen3" };

typedef struct llm__gguf {
    llm__gg g;
    uint32_t version;
    uint64_t n_tensors, n_kv, kv_at, ti_at, data_at;
    uint32_t alignment;
    int arch;
} llm__gguf;

/* find key (with "%s" replaced by the architecture) */
static int llm__gguf_key(llm__gguf *f, const char *key, llm__gv *v) {
    char k[96];
    llm__fmt(k, sizeof k, key, f->arch >= 0 ? llm__gg_archs[f->arch] : "");
    f->g.at = f->kv_at;
    return llm__gg_find(&f->g, f->n_kv, k, v);
}
/* an integer key into *out (absent: *out unchanged, unless required) */
static int llm__gguf_int(llm__gguf *f, llm_model *m, const char *key, int required, int lo, int hi, int *out) {
    llm__gv v;
    int64_t x;
    int r = llm__gguf_key(f, key, &v);
    char k[96];
    llm__fmt(k, sizeof k, key, f->arch >= 0 ? llm__gg_archs[f->arch] : "");
    if (r < 0) return LLM_ERR_FORMAT;
    if (r == 0) {
        if (!required) return LLM_OK;
        llm__fmt(m->error, sizeof m->error, "GGUF metadata %s is missing", k);
        return LLM_ERR_FORMAT;
    }
    if (v.is_array || !llm__gv_int(&f->g, &v, 0, &x)) {
        llm__fmt(m->error, sizeof m->error, "GGUF metadata %s is not an integer (type %u)", k, (unsigned)v.type);
        return LLM_ERR_FORMAT;
    }
    if (x < lo || x > hi) {
        llm__fmt(m->error, sizeof m->error, "GGUF metadata %s = %s%llu out of range (%d..%d)", k, x < 0 ? "-" : "",
                 (unsigned long long)(x < 0 ? -(x + 1) + 1ull : (uint64_t)x), lo, hi);
        return LLM_ERR_CONFIG;
    }
    *out = (int)x;
    return LLM_OK;
}
static int llm__gguf_float(llm__gguf *f, llm_model *m, const char *key, float *out) {
    llm__gv v;
    double x;
    int r = llm__gguf_key(f, key, &v);
    if (r < 0) return LLM_ERR_FORMAT;
    if (r == 0) return LLM_OK;
    if (!llm__gv_float(&f->g, &v, &x) || !(x >= -FLT_MAX && x <= FLT_MAX)) {
        char k[96];
        llm__fmt(k, sizeof k, key, llm__gg_archs[f->arch]);
        llm__fmt(m->error, sizeof m->error, "GGUF metadata %s is not a finite number", k);
        return LLM_ERR_FORMAT;
    }
    *out = (float)x;
    return LLM_OK;
}
/* a string key equal to s? 1 yes, 0 no or absent (present: *present = 1), -1 corrupt */
static int llm__gguf_str_is(llm__gguf *f, const char *key, const char *s, int *present, char *got, size_t got_size) {
    llm__gv v;
    int r = llm__gguf_key(f, key, &v);
    *present = r == 1;
    if (got_size) got[0] = 0;
    if (r != 1) return r;
    if (v.is_array || v.type != LLM__GV_STRING) { *present = 2; return 0; }
    uint64_t len = llm__u64(f->g.b + v.at);
    const unsigned char *p = f->g.b + v.at + 8;
    if (got_size) llm__gg_printable(got, got_size, p, len);
    return len == strlen(s) && !memcmp(p, s, len);
}

/* Parse the header, walk all metadata (validating it) and the tensor infos'
 * extent; find the architecture and alignment. */
static int llm__gguf_open(llm__gguf *f, const unsigned char *b, size_t n, char *e, size_t E) {
    memset(f, 0, sizeof *f);
    f->g.b = b; f->g.n = n; f->g.e = e; f->g.E = E;
    f->arch = -1;
    int st = llm__gg_header(&f->g, &f->version, &f->n_tensors, &f->n_kv);
    if (st != LLM_OK) return st;
    f->kv_at = f->g.at;
    if (llm__gg_find(&f->g, f->n_kv, NULL, NULL) < 0) return LLM_ERR_FORMAT;
    f->ti_at = f->g.at;
    /* the tensor infos' extent */
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t len;
        if (!llm__gg_str(&f->g, &len, "a tensor name")) return LLM_ERR_FORMAT;
        uint32_t nd = llm__gg_u32(&f->g, "a tensor's dimension count");
        if (f->g.bad) return LLM_ERR_FORMAT;
        if (nd < 1 || nd > LLM__GGUF_MAX_DIMS) {
            llm__fmt(e, E, "GGUF tensor %llu has %u dimensions (1..%d are allowed): corrupt", (unsigned long long)i,
                     (unsigned)nd, LLM__GGUF_MAX_DIMS);
            return LLM_ERR_FORMAT;
        }
        if (!llm__gg_take(&f->g, 8 * (uint64_t)nd + 12, "a tensor info")) return LLM_ERR_FORMAT;
    }
    f->alignment = 32;
    llm__gv v;
    int r = llm__gguf_key(f, "general.alignment", &v);
    if (r < 0) return LLM_ERR_FORMAT;
    if (r == 1) {
        int64_t a = 0;
        if (v.is_array || v.type != LLM__GV_U32 || !llm__gv_int(&f->g, &v, 0, &a) || a < 8 || a > (1 << 30) || (a & (a - 1))) {
            llm__fmt(e, E, "GGUF general.alignment must be a u32 power of two of at least 8 (got type %u, value %llu)",
                     (unsigned)v.type, (unsigned long long)(a < 0 ? 0 : a));
            return LLM_ERR_FORMAT;
        }
        f->alignment = (uint32_t)a;
    }
    f->g.at = f->ti_at;
    for (uint64_t i = 0; i < f->n_tensors; i++) { /* again, to its end: already bounded */
        uint64_t len;
        llm__gg_str(&f->g, &len, "a tensor name");
        f->g.at += 8 * (uint64_t)llm__gg_u32(&f->g, "a tensor info") + 12;
    }
    uint64_t end = f->g.at, A = f->alignment;
    f->data_at = end % A ? llm__add(end, A - end % A) : end;
    if (f->data_at > n) {
        llm__fmt(e, E, "GGUF file ends at byte %zu, before its data section starts (%llu): truncated", n,
                 (unsigned long long)f->data_at);
        return LLM_ERR_SIZE;
    }
    int present = 0;
    char got[48];
    for (int a = 0; a < 3; a++) {
        int is = llm__gguf_str_is(f, "general.architecture", llm__gg_archs[a], &present, got, sizeof got);
        if (is < 0) return LLM_ERR_FORMAT;
        if (is == 1) { f->arch = a; break; }
    }
    if (f->arch < 0) {
        if (!present) llm__fmt(e, E, "GGUF metadata general.architecture is missing");
        else if (present == 2) llm__fmt(e, E, "GGUF metadata general.architecture is not a string");
        else llm__fmt(e, E, "GGUF architecture '%s' is not supported (llama, qwen2 and qwen3 are)", got);
        return LLM_ERR_FORMAT;
    }
    return LLM_OK;
}

/* One tensor info, read at the cursor: name, dims (padded with 1), type, offset */
typedef struct llm__gti {
    const unsigned char *name;
    uint64_t name_len, ne[LLM__GGUF_MAX_DIMS], offset;
    uint32_t ggml_type;
    int nd;
} llm__gti;
static void llm__gguf_tensor_info(llm__gguf *f, llm__gti *t) {
    t->name = llm__gg_str(&f->g, &t->name_len, "a tensor name");
    t->nd = (int)llm__gg_u32(&f->g, "a tensor info");
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) t->ne[d] = d < t->nd ? llm__gg_u64(&f->g, "a tensor info") : 1;
    t->ggml_type = llm__gg_u32(&f->g, "a tensor info");
    t->offset = llm__gg_u64(&f->g, "a tensor info");
}

/* The config from the metadata and token_embd's shape */
static int llm__gguf_config(llm__gguf *f, llm_model *m) {
    llm_config *c = &m->cfg;
    int st;
    memset(c, 0, sizeof *c);
    c->norm_type = LLM_NORM_RMS; c->norm_pos = LLM_NORM_PRE; c->final_norm = 1;
    c->norm_eps = 1e-5f; c->rope_theta = 10000.0f; c->format = LLM_FORMAT_GGUF;
    c->rope_layout = f->arch == 0 ? LLM_ROPE_INTERLEAVED : LLM_ROPE_HALF;
    c->qkv_bias = f->arch == 1;
    c->qk_norm = f->arch == 2;
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
    /* the vocabulary: token_embd's rows */
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
    case LLM__GT_ATTN_NORM: case LLM__GT_FFN_NORM: *cols = D; break;
    case LLM__GT_Q: *rows = qd; *cols = D; break;
    case LLM__GT_K: case LLM__GT_V: *rows = kvd; *cols = D; break;
    case LLM__GT_O: *rows = D; *cols = qd; break;
    case LLM__GT_GATE: case LLM__GT_UP: *rows = H; *cols = D; break;
    case LLM__GT_DOWN: *rows = D; *cols = H; break;
    case LLM__GT_QB: *cols = qd; break;
    case LLM__GT_KB: case LLM__GT_VB: *cols = kvd; break;
    default: *cols = hs; break;   /* q and k norms */
    }
}
/* whether slot s is a matrix (any supported type) or a vector (f32 only) */
static int llm__gt_is_matrix(int s) {
    if (s < LLM__GT_GLOBALS) return s == LLM__GT_EMBD || s == LLM__GT_OUTPUT;
    int k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
    return k == LLM__GT_Q || k == LLM__GT_K || k == LLM__GT_V || k == LLM__GT_O || k == LLM__GT_GATE || k == LLM__GT_UP ||
           k == LLM__GT_DOWN;
}
/* whether slot s must be present in this config */
static int llm__gt_required(const llm_config *c, int s) {
    if (s < LLM__GT_GLOBALS) return s == LLM__GT_EMBD || s == LLM__GT_OUT_NORM;
    int k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
    if (k >= LLM__GT_QB && k <= LLM__GT_VB) return c->qkv_bias;
    if (k >= LLM__GT_QN) return c->qk_norm;
    return 1;
}
static void llm__gt_name(char *out, size_t size, int s) {
    if (s < LLM__GT_GLOBALS) llm__fmt(out, size, "%s", llm__gt_global_names[s]);
    else llm__fmt(out, size, "blk.%d.%s", (s - LLM__GT_GLOBALS) / LLM__GT_PER_LAYER,
                  llm__gt_layer_names[(s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER]);
}

static int llm__load_gguf(llm_model *m, const unsigned char *b, size_t n, void *arena, size_t arena_size) {
    llm__gguf f;
    llm_config *c = &m->cfg;
    int st = llm__gguf_open(&f, b, n, m->error, sizeof m->error);
    if (st != LLM_OK) return st;
    if ((st = llm__gguf_config(&f, m)) != LLM_OK) return st;

    /* Every tensor info: a known name, not seen before, a supported type, the
     * slot's shape, an aligned offset, data inside the file. */
    uint32_t seen[(LLM__GT_SLOTS + 31) / 32];
    memset(seen, 0, sizeof seen);
    int weight_type = -1;
    for (int pass = 0; pass < 2; pass++) {
        f.g.at = f.ti_at;
        for (uint64_t i = 0; i < f.n_tensors; i++) {
            llm__gti t;
            llm__gguf_tensor_info(&f, &t);
            int s = llm__gt_slot(t.name, t.name_len, c->n_layers);
            char tn[64];
            llm__gg_printable(tn, sizeof tn, t.name, t.name_len);
            if (pass == 1) { /* all checked: the views */
                int type = 0;
                for (size_t k = 0; k < sizeof llm__ggml_types / sizeof llm__ggml_types[0]; k++)
                    if (llm__ggml_types[k].id == t.ggml_type) type = llm__ggml_types[k].type;
                llm_tensor view = llm__tensor(b + f.data_at + t.offset, NULL, type, (int)t.ne[1], (int)t.ne[0], 0);
                if (s < LLM__GT_GLOBALS) {
                    if (s == LLM__GT_EMBD) m->w.tok_embeddings = view;
                    else if (s == LLM__GT_OUT_NORM) m->w.final_norm = view;
                    else if (s == LLM__GT_OUTPUT) m->w.classifier = view;
                    else { /* Llama 3's per-frequency divisors, as llama.cpp applies them */
                        const float *ff = (const float *)view.data;
                        for (int k = 0; k < c->head_size / 2; k++) m->rope_freq[k] /= ff[k];
                    }
                } else {
                    int layer = (s - LLM__GT_GLOBALS) / LLM__GT_PER_LAYER, k = (s - LLM__GT_GLOBALS) % LLM__GT_PER_LAYER;
                    *(llm_tensor *)(void *)((unsigned char *)&m->w.layers[layer] + llm__gt_fields[k]) = view;
                }
                continue;
            }
            if (s < 0) {
                llm__fmt(m->error, sizeof m->error, "GGUF tensor '%s' is not one a %s model has (or its layer is past block_count %d)",
                         tn, llm__gg_archs[f.arch], c->n_layers);
                return LLM_ERR_FORMAT;
            }
            if (seen[s / 32] >> (s % 32) & 1) {
                llm__fmt(m->error, sizeof m->error, "GGUF tensor %s appears twice", tn);
                return LLM_ERR_FORMAT;
            }
            seen[s / 32] |= 1u << (s % 32);
            int type = -1;
            for (size_t k = 0; k < sizeof llm__ggml_types / sizeof llm__ggml_types[0]; k++)
                if (llm__ggml_types[k].id == t.ggml_type) type = llm__ggml_types[k].type;
            int matrix = llm__gt_is_matrix(s);
            if (type < 0 || (!matrix && type != LLM_TYPE_F32)) {
                llm__fmt(m->error, sizeof m->error, "GGUF tensor %s has type %s (%u), which this engine does not read%s", tn,
                         llm__ggml_type_name(t.ggml_type), (unsigned)t.ggml_type,
                         type >= 0 ? " for a vector (F32 only)" : " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)");
                return LLM_ERR_FORMAT;
            }
            uint64_t rows, cols;
            llm__gt_shape(c, s, &rows, &cols);
            int want_nd = rows == 1 && !matrix ? 1 : 2;
            int ok = t.nd == want_nd && t.ne[0] == cols && t.ne[1] == rows;
            if (!ok) {
                llm__fmt(m->error, sizeof m->error,
                         "GGUF tensor %s has %d dims (%llu, %llu, ...), the config says (%llu, %llu): inconsistent", tn,
                         t.nd, (unsigned long long)t.ne[0], (unsigned long long)t.ne[1],
                         (unsigned long long)cols, (unsigned long long)rows);
                return LLM_ERR_FORMAT;
            }
            const llm__type_traits *tr = &llm__traits[type];
            uint64_t bytes;
            if (tr->qblock) {
                if (cols % (uint64_t)tr->qblock) {
                    llm__fmt(m->error, sizeof m->error, "GGUF tensor %s: %llu columns are not whole %s blocks of %d", tn,
                             (unsigned long long)cols, llm__ggml_type_name(t.ggml_type), tr->qblock);
                    return LLM_ERR_FORMAT;
                }
                bytes = llm__mul(llm__mul(rows, cols / (uint64_t)tr->qblock), (uint64_t)tr->qblock_bytes);
            } else {
                bytes = llm__mul(llm__mul(rows, cols), (uint64_t)tr->value_bytes);
            }
            if (t.offset % f.alignment || llm__add(llm__add(f.data_at, t.offset), bytes) > (uint64_t)n) {
                llm__fmt(m->error, sizeof m->error,
                         "GGUF tensor %s at data offset %llu (%llu bytes) is %s: truncated or corrupt", tn,
                         (unsigned long long)t.offset, (unsigned long long)bytes,
                         t.offset % f.alignment ? "not aligned to general.alignment" : "past the end of the file");
                return LLM_ERR_SIZE;
            }
            /* a matrix a product reads (the embedding too: it may be the
             * classifier); the one with the widest activation codes plans them */
            if (matrix && (weight_type < 0 || llm__act_bytes(type) > llm__act_bytes(weight_type))) weight_type = type;
        }
        if (pass == 1) break;
        for (int s = 0; s < LLM__GT_GLOBALS + c->n_layers * LLM__GT_PER_LAYER; s++) {
            if (llm__gt_required(c, s) && !(seen[s / 32] >> (s % 32) & 1)) {
                char name[64];
                llm__gt_name(name, sizeof name, s);
                llm__fmt(m->error, sizeof m->error, "GGUF tensor %s is missing", name);
                return LLM_ERR_FORMAT;
            }
        }
        /* the activations' plan: int8 or int16 codes in groups of 32 when any matrix takes them */
        c->shared_classifier = !(seen[LLM__GT_OUTPUT / 32] >> LLM__GT_OUTPUT & 1);
        c->weight_type = weight_type < 0 ? LLM_TYPE_F32 : weight_type;
        c->group_size = llm__act_bytes(c->weight_type) ? LLM__GQ : 0;
        if ((st = llm_check_config(m)) != LLM_OK) return st;
        if ((st = llm__model_arena(m, arena, arena_size)) != LLM_OK) return st;
    }
    if (c->shared_classifier) m->w.classifier = m->w.tok_embeddings;
    return LLM_OK;
}

/* ===================================================================== */
/* Metadata for callers: run.c reads the tokenizer's arrays through these */
/* ===================================================================== */

int llm_gguf_find(const void *bytes, size_t n_bytes, const char *key, llm_gguf_value *out) {
    llm__gguf f;
    char e[8];
    memset(out, 0, sizeof *out);
    if (!bytes || n_bytes < 4 || memcmp(bytes, "GGUF", 4) != 0) return -1;
    memset(&f, 0, sizeof f);
    f.g.b = (const unsigned char *)bytes; f.g.n = n_bytes; f.g.e = e; f.g.E = sizeof e;
    uint32_t version;
    if (llm__gg_header(&f.g, &version, &f.n_tensors, &f.n_kv) != LLM_OK) return -1;
    llm__gv v;
    int r = llm__gg_find(&f.g, f.n_kv, key, &v);
    if (r != 1) return r;
    out->type = (int)v.type; out->is_array = v.is_array; out->count = v.count;
    out->data = f.g.b + v.at;
    out->bytes = (uint64_t)n_bytes - v.at;
    return 1;
}

int llm_gguf_int(const llm_gguf_value *v, uint64_t i, int64_t *out) {
    llm__gg g;
    llm__gv gv;
    memset(&g, 0, sizeof g);
    if (v->type < 0 || v->type >= LLM__GV_COUNT || !llm__gv_size[v->type]) return 0;
    if (i >= v->count || llm__mul(i + 1, llm__gv_size[v->type]) > v->bytes) return 0;
    g.b = v->data; g.n = v->bytes;
    gv.type = (uint32_t)v->type; gv.is_array = v->is_array; gv.count = v->count; gv.at = 0;
    return llm__gv_int(&g, &gv, i, out);
}

int llm_gguf_float(const llm_gguf_value *v, uint64_t i, float *out) {
    if (v->type != LLM__GV_F32 && v->type != LLM__GV_F64) return 0;
    uint64_t size = llm__gv_size[v->type];
    if (i >= v->count || llm__mul(i + 1, size) > v->bytes) return 0;
    if (v->type == LLM__GV_F32) { *out = llm__f32(v->data + i * 4); return 1; }
    double d;
    uint64_t u = llm__u64(v->data + i * 8);
    memcpy(&d, &u, 8);
    *out = (float)d;
    return 1;
}

int llm_gguf_next_string(const llm_gguf_value *v, uint64_t *pos, const char **s, uint64_t *len) {
    if (v->type != LLM__GV_STRING || *pos > v->bytes || v->bytes - *pos < 8) return 0;
    uint64_t l = llm__u64(v->data + *pos);
    if (l > v->bytes - *pos - 8) return 0;
    *s = (const char *)(v->data + *pos + 8);
    *len = l;
    *pos += 8 + l;
    return 1;
}
