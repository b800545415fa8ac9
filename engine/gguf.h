/* engine/gguf.h -- GGUF versions 2 and 3 (llama.cpp's format), parsed in
 * place: the header, the metadata (any key, typed; the architecture: llama,
 * qwen2 or qwen3), the tensor infos and the data section's start, and, for
 * callers (the tokenizer's GGUF reader, run.c's --info), a lookup of any key. load_gguf.h builds the
 * model from what this reads.
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
 *   padding to general.alignment (default 32), the data section. */

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
typedef struct llm__gguf_cursor {
    const unsigned char *b;
    uint64_t n, at;
    int bad;
    char *e;
    size_t E;
} llm__gguf_cursor;

static int llm__gguf_fail(llm__gguf_cursor *g, const char *what) {
    if (!g->bad) llm__fmt(g->e, g->E, "GGUF truncated or corrupt: %s at byte %llu runs past the end (%llu bytes)", what,
                          (unsigned long long)g->at, (unsigned long long)g->n);
    g->bad = 1;
    return 0;
}
/* the next k bytes, or NULL (and the message) */
static const unsigned char *llm__gguf_take(llm__gguf_cursor *g, uint64_t k, const char *what) {
    if (g->bad) return NULL;
    if (k > g->n - g->at) { llm__gguf_fail(g, what); return NULL; }
    const unsigned char *p = g->b + g->at;
    g->at += k;
    return p;
}
static uint32_t llm__gguf_u32(llm__gguf_cursor *g, const char *what) {
    const unsigned char *p = llm__gguf_take(g, 4, what);
    return p ? llm__u32(p) : 0;
}
static uint64_t llm__gguf_u64(llm__gguf_cursor *g, const char *what) {
    const unsigned char *p = llm__gguf_take(g, 8, what);
    return p ? llm__u64(p) : 0;
}
/* a string: its bytes (not NUL-terminated) and length */
static const unsigned char *llm__gguf_str(llm__gguf_cursor *g, uint64_t *len, const char *what) {
    *len = llm__gguf_u64(g, what);
    return llm__gguf_take(g, *len, what);
}

/* a name from the file as a printable C string (at most 63 bytes; bytes
 * outside printable ASCII shown as '?') */
static void llm__gguf_printable(char *out, size_t size, const unsigned char *p, uint64_t len) {
    size_t k = 0;
    for (; k + 1 < size && k < len; k++) out[k] = p[k] >= 32 && p[k] < 127 ? (char)p[k] : '?';
    out[k] = 0;
}

/* Skip one value of type t (an array: of fixed-size values or strings; an
 * array of arrays is refused, as llama.cpp refuses it) */
static int llm__gguf_skip_value(llm__gguf_cursor *g, uint32_t t, const char *key) {
    uint64_t len;
    if (t >= LLM__GV_COUNT) {
        if (!g->bad) llm__fmt(g->e, g->E, "GGUF metadata %s has unknown value type %u", key, (unsigned)t);
        g->bad = 1;
        return 0;
    }
    if (t == LLM__GV_STRING) return llm__gguf_str(g, &len, key) != NULL;
    if (t != LLM__GV_ARRAY) return llm__gguf_take(g, llm__gv_size[t], key) != NULL;
    uint32_t et = llm__gguf_u32(g, key);
    uint64_t count = llm__gguf_u64(g, key);
    if (g->bad) return 0;
    if (et >= LLM__GV_COUNT || et == LLM__GV_ARRAY) {
        llm__fmt(g->e, g->E, "GGUF metadata %s is an array of %s type %u: not read", key,
                 et == LLM__GV_ARRAY ? "nested array" : "unknown", (unsigned)et);
        g->bad = 1;
        return 0;
    }
    if (et != LLM__GV_STRING) return llm__gguf_take(g, llm__mul(count, llm__gv_size[et]), key) != NULL;
    /* strings: at least 8 bytes each, so the count is bounded before the loop */
    if (count > (g->n - g->at) / 8) return llm__gguf_fail(g, key);
    for (uint64_t i = 0; i < count; i++)
        if (!llm__gguf_str(g, &len, key)) return 0;
    return 1;
}

/* The header's counts, checked against what the file could hold; g is left
 * at the first metadata pair */
static int llm__gguf_header(llm__gguf_cursor *g, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv) {
    if (g->n < 24) {
        llm__fmt(g->e, g->E, "GGUF file of %llu bytes is shorter than its 24-byte header: truncated", (unsigned long long)g->n);
        return LLM_ERR_SIZE;
    }
    g->at = 4;
    *version = llm__gguf_u32(g, "version");
    if (*version < 2 || *version > 3) {
        llm__fmt(g->e, g->E, "GGUF version %u is not read (versions 2 and 3 are)%s", (unsigned)*version,
                 *version == 1 ? ": convert it again with llama.cpp" : "");
        return LLM_ERR_VERSION;
    }
    *n_tensors = llm__gguf_u64(g, "tensor count");
    *n_kv = llm__gguf_u64(g, "metadata count");
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
static int llm__gguf_find(llm__gguf_cursor *g, uint64_t n_kv, const char *key, llm__gv *v) {
    size_t klen = key ? strlen(key) : 0;
    int found = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t len;
        const unsigned char *k = llm__gguf_str(g, &len, "a metadata key");
        if (!k) return -1;
        if (len > LLM__GGUF_MAX_KEY) {
            llm__fmt(g->e, g->E, "GGUF metadata key %llu is %llu bytes long (the limit is 65535): corrupt",
                     (unsigned long long)i, (unsigned long long)len);
            g->bad = 1;
            return -1;
        }
        uint32_t t = llm__gguf_u32(g, "a metadata type");
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
        if (!llm__gguf_skip_value(g, t, name)) return -1;
    }
    return found;
}

/* value v as an integer / float (scalars of a numeric type only) */
static int llm__gv_int(const llm__gguf_cursor *g, const llm__gv *v, uint64_t i, int64_t *out) {
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
static int llm__gv_float(const llm__gguf_cursor *g, const llm__gv *v, double *out) {
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
/* the engine's type for ggml type id, or -1 when it does not read it */
static int llm__ggml_type_of(uint32_t id) {
    for (size_t k = 0; k < sizeof llm__ggml_types / sizeof llm__ggml_types[0]; k++)
        if (llm__ggml_types[k].id == id) return llm__ggml_types[k].type;
    return -1;
}
/* names of the ones it does not, for the message */
static const char *llm__ggml_type_name(uint32_t id) {
    static const char *const names[] = { "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                         "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                         "IQ1_M", "BF16" };
    return id < sizeof names / sizeof names[0] ? names[id] : "unknown";
}

/* The architectures read; llm__gguf.arch is an index here (-1: not yet known). */
enum { LLM__ARCH_LLAMA, LLM__ARCH_QWEN2, LLM__ARCH_QWEN3, LLM__ARCH_GEMMA3, LLM__ARCH_OLMO2, LLM__ARCH_COUNT };
static const char *const llm__gguf_archs[LLM__ARCH_COUNT] = { "llama", "qwen2", "qwen3", "gemma3", "olmo2" };

typedef struct llm__gguf {
    llm__gguf_cursor g;
    uint32_t version;
    uint64_t n_tensors, n_kv, kv_at, ti_at, data_at;
    uint32_t alignment;
    int arch;
} llm__gguf;

/* find key (with "%s" replaced by the architecture) */
static int llm__gguf_key(llm__gguf *f, const char *key, llm__gv *v) {
    char k[96];
    llm__fmt(k, sizeof k, key, f->arch >= 0 ? llm__gguf_archs[f->arch] : "");
    f->g.at = f->kv_at;
    return llm__gguf_find(&f->g, f->n_kv, k, v);
}
/* an integer key into *out (absent: *out unchanged, unless required) */
static int llm__gguf_int(llm__gguf *f, llm_model *m, const char *key, int required, int lo, int hi, int *out) {
    llm__gv v;
    int64_t x;
    int r = llm__gguf_key(f, key, &v);
    char k[96];
    llm__fmt(k, sizeof k, key, f->arch >= 0 ? llm__gguf_archs[f->arch] : "");
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
        llm__fmt(k, sizeof k, key, llm__gguf_archs[f->arch]);
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
    if (got_size) llm__gguf_printable(got, got_size, p, len);
    return len == strlen(s) && !memcmp(p, s, len);
}

/* Parse the header, walk all metadata (validating it) and the tensor infos'
 * extent; find the architecture and alignment. */
static int llm__gguf_open(llm__gguf *f, const unsigned char *b, size_t n, char *e, size_t E) {
    memset(f, 0, sizeof *f);
    f->g.b = b; f->g.n = n; f->g.e = e; f->g.E = E;
    f->arch = -1;
    int st = llm__gguf_header(&f->g, &f->version, &f->n_tensors, &f->n_kv);
    if (st != LLM_OK) return st;
    f->kv_at = f->g.at;
    if (llm__gguf_find(&f->g, f->n_kv, NULL, NULL) < 0) return LLM_ERR_FORMAT;
    f->ti_at = f->g.at;
    /* the tensor infos' extent */
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t len;
        if (!llm__gguf_str(&f->g, &len, "a tensor name")) return LLM_ERR_FORMAT;
        uint32_t nd = llm__gguf_u32(&f->g, "a tensor's dimension count");
        if (f->g.bad) return LLM_ERR_FORMAT;
        if (nd < 1 || nd > LLM__GGUF_MAX_DIMS) {
            llm__fmt(e, E, "GGUF tensor %llu has %u dimensions (1..%d are allowed): corrupt", (unsigned long long)i,
                     (unsigned)nd, LLM__GGUF_MAX_DIMS);
            return LLM_ERR_FORMAT;
        }
        if (!llm__gguf_take(&f->g, 8 * (uint64_t)nd + 12, "a tensor info")) return LLM_ERR_FORMAT;
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
        llm__gguf_str(&f->g, &len, "a tensor name");
        f->g.at += 8 * (uint64_t)llm__gguf_u32(&f->g, "a tensor info") + 12;
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
    for (int a = 0; a < LLM__ARCH_COUNT; a++) {
        int is = llm__gguf_str_is(f, "general.architecture", llm__gguf_archs[a], &present, got, sizeof got);
        if (is < 0) return LLM_ERR_FORMAT;
        if (is == 1) { f->arch = a; break; }
    }
    if (f->arch < 0) {
        if (!present) llm__fmt(e, E, "GGUF metadata general.architecture is missing");
        else if (present == 2) llm__fmt(e, E, "GGUF metadata general.architecture is not a string");
        else llm__fmt(e, E, "GGUF architecture '%s' is not supported (llama, qwen2, qwen3, gemma3 and olmo2 are)", got);
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
    t->name = llm__gguf_str(&f->g, &t->name_len, "a tensor name");
    t->nd = (int)llm__gguf_u32(&f->g, "a tensor info");
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) t->ne[d] = d < t->nd ? llm__gguf_u64(&f->g, "a tensor info") : 1;
    t->ggml_type = llm__gguf_u32(&f->g, "a tensor info");
    t->offset = llm__gguf_u64(&f->g, "a tensor info");
}

/* ===================================================================== */
/* Metadata for callers: the CLI finds the tokenizer's arrays through these */
/* ===================================================================== */

int llm_gguf_find(const void *bytes, size_t n_bytes, const char *key, llm_gguf_value *out) {
    llm__gguf f;
    char e[8];
    memset(out, 0, sizeof *out);
    if (!bytes || n_bytes < 4 || memcmp(bytes, "GGUF", 4) != 0) return -1;
    memset(&f, 0, sizeof f);
    f.g.b = (const unsigned char *)bytes; f.g.n = n_bytes; f.g.e = e; f.g.E = sizeof e;
    uint32_t version;
    if (llm__gguf_header(&f.g, &version, &f.n_tensors, &f.n_kv) != LLM_OK) return -1;
    llm__gv v;
    int r = llm__gguf_find(&f.g, f.n_kv, key, &v);
    if (r != 1) return r;
    out->type = (int)v.type; out->is_array = v.is_array; out->count = v.count;
    out->data = f.g.b + v.at;
    out->bytes = (uint64_t)n_bytes - v.at;
    return 1;
}

int llm_gguf_int(const llm_gguf_value *v, uint64_t i, int64_t *out) {
    llm__gguf_cursor g;
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
