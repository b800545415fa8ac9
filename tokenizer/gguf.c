/* tokenizer/gguf.c -- a GGUF file's tokenizer arrays as a tokenizer image
 * (tokenizer.h, "A GGUF's tokenizer"), and the byte-level pre-tokenizers'
 * names (llama.cpp's tokenizer.ggml.pre and --info's).
 *
 * tokenizer.ggml.model "llama" (sentencepiece pieces with U+2581 for spaces,
 * scores, token types) becomes a llama2.c tokenizer.bin image (spaces back
 * as ' ', as llama2.c's export writes them); "gpt2" (byte-level BPE: pieces
 * in GPT-2's byte alphabet, "a b" merges, a named pre-tokenizer) becomes an
 * LTOK image (FORMAT.md). A "llama" one without the dummy-prefix space
 * (tokenizer.ggml.add_space_prefix false: Gemma's) becomes an LTOK kind-2
 * image whose merges come from the scores (below, "Sentencepiece by score
 * as merges"). tok_init reads each as if it were a file; the
 * ids, add_bos and the chat template the GGUF names are applied after it
 * (tok_gguf_apply), the same way for both.
 *
 * Contract: as the rest of the library: no malloc, no I/O, no exit, no
 * globals. The caller finds the keys (model.h's llm_gguf_find) and gives
 * the memory, sized first (tok_gguf_size); every check of the values
 * happens here, in the order a reader meets them, and a failure returns a
 * negative tok_status with one line in g->error. The values' elements are
 * read here as GGUF lays them out (little-endian, strings as a u64 length
 * and bytes), not through model.h's readers: the library links without the
 * engine (the boards, the unit tests).
 */
#include "../tokenizer.h"
#include "../model.h"        /* llm_gguf_value */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>   /* qsort */
#include <string.h>

#define GGUF_MAX_PIECE 65536   /* LTOK's longest piece (tokenizer.bin's is smaller still) */
#define GGUF_MAX_MERGES (1u << 26)

#define FAIL(g, status, ...) return (tok__fmt((g)->error, sizeof (g)->error, __VA_ARGS__), (status))

/* ===================================================================== */
/* The keys, and the values' elements                                     */
/* ===================================================================== */

static const char *const key_names[TOK_GGUF_KEY_COUNT] = {
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.chat_template", "tokenizer.ggml.add_space_prefix",
};

const char *tok_gguf_key_name(int key) {
    return key >= 0 && key < TOK_GGUF_KEY_COUNT ? key_names[key] : "";
}

/* GGUF's value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 * 8 string, 9 array, 10 u64, 11 i64, 12 f64; the fixed ones' sizes */
enum { GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_U64 = 10, GV_I64 = 11, GV_F64 = 12, GV_COUNT = 13 };
static const unsigned char gv_size[GV_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* Element i of an integer (or bool) value: 1, or 0 when it has none. */
static int gv_int(const llm_gguf_value *v, uint64_t i, int64_t *out) {
    if (v->type < 0 || v->type >= GV_COUNT || !gv_size[v->type]) return 0;
    uint64_t size = gv_size[v->type];
    if (i >= v->count || i >= v->bytes / size) return 0;
    const unsigned char *p = v->data + i * size;
    uint32_t u;
    uint64_t w;
    int32_t s32;
    switch (v->type) {
    case 0: case GV_BOOL: *out = p[0]; return 1;
    case 1: *out = (int8_t)p[0]; return 1;
    case 2: *out = (uint16_t)(p[0] | p[1] << 8); return 1;
    case 3: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return 1;
    case 4: *out = get_u32(p); return 1;
    case 5: u = get_u32(p); memcpy(&s32, &u, 4); *out = s32; return 1;
    case GV_U64: w = get_u64(p); *out = w > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)w; return 1;
    case GV_I64: w = get_u64(p); memcpy(out, &w, 8); return 1;
    }
    return 0;
}

/* Element i of an f32 or f64 value: 1, or 0. */
static int gv_float(const llm_gguf_value *v, uint64_t i, float *out) {
    if (v->type != GV_F32 && v->type != GV_F64) return 0;
    uint64_t size = gv_size[v->type];
    if (i >= v->count || i >= v->bytes / size) return 0;
    const unsigned char *p = v->data + i * size;
    if (v->type == GV_F32) {
        uint32_t u = get_u32(p);
        memcpy(out, &u, 4);
        return 1;
    }
    uint64_t w = get_u64(p);
    double d;
    memcpy(&d, &w, 8);
    *out = (float)d;
    return 1;
}

/* The string at byte *pos of a string value (start at 0), advancing *pos: 1, or 0. */
static int gv_string(const llm_gguf_value *v, uint64_t *pos, const char **s, uint64_t *len) {
    if (v->type != GV_STRING || *pos > v->bytes || v->bytes - *pos < 8) return 0;
    uint64_t l = get_u64(v->data + *pos);
    if (l > v->bytes - *pos - 8) return 0;
    *s = (const char *)(v->data + *pos + 8);
    *len = l;
    *pos += 8 + l;
    return 1;
}

/* At most 40 bytes of a name from the file, for a message (printf's "%.*s"). */
static const char *clip40(char out[41], const char *s, uint64_t len) {
    size_t k = 0;
    while (k < len && k < 40 && s[k]) { out[k] = s[k]; k++; }
    out[k] = '\0';
    return out;
}

/* The string under key k: 1, 0 when the key is absent, or a negative status. */
static int key_string(tok_gguf *g, int k, const char **s, uint64_t *len) {
    const llm_gguf_value *v = g->key[k];
    uint64_t pos = 0;
    if (!v) return 0;
    if (v->is_array || v->type != GV_STRING || !gv_string(v, &pos, s, len))
        FAIL(g, TOK_ERR_FORMAT, "GGUF %s is not a string", key_names[k]);
    return 1;
}

/* The token id under key k (0..vocab-1) in *id, -1 when the key is absent: 0 or a negative status. */
static int key_token_id(tok_gguf *g, int k, int vocab, int *id) {
    const llm_gguf_value *v = g->key[k];
    int64_t x;
    *id = -1;
    if (!v) return 0;
    if (v->is_array || !gv_int(v, 0, &x) || x < 0 || x >= vocab)
        FAIL(g, TOK_ERR_FORMAT, "GGUF %s is not a token id (0..%d)", key_names[k], vocab - 1);
    *id = (int)x;
    return 0;
}

/* Bytes of the first count strings of a string array in *total (each
 * checked to be there and at most most_len bytes), so an image is sized to
 * them, not to the rest of the file: 0 or a negative status. */
static int strings_bytes(tok_gguf *g, const llm_gguf_value *a, uint64_t count, uint64_t most_len, const char *what,
                         uint64_t *total) {
    uint64_t pos = 0, len;
    const char *s;
    *total = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (!gv_string(a, &pos, &s, &len))
            FAIL(g, TOK_ERR_FORMAT, "GGUF %s %llu is corrupt", what, (unsigned long long)i);
        if (len > most_len)
            FAIL(g, TOK_ERR_FORMAT, "GGUF %s %llu is %llu bytes long (at most %llu can be a token)", what,
                 (unsigned long long)i, (unsigned long long)len, (unsigned long long)most_len);
        *total += len;
    }
    return 0;
}

/* An image's byte count, computed in 64 bits, as a size_t: 0, or an error
 * where it cannot be one (a 32-bit host) */
static int fits_size(tok_gguf *g, uint64_t n, size_t *out) {
    if (n > SIZE_MAX)
        FAIL(g, TOK_ERR_FORMAT, "its GGUF tokenizer would take %llu bytes, more than this machine can address",
             (unsigned long long)n);
    *out = (size_t)n;
    return 0;
}

/* ===================================================================== */
/* Pre-tokenizers: one table                                              */
/* ===================================================================== */

/* llama.cpp's tokenizer.ggml.pre names of the pre-tokenizers this build has
 * (FORMAT.md, "Encoding"); Qwen2's vocabularies are NFC-normalized and Llama
 * 3's take a pre-token that is a piece whole (ignore_merges), as their
 * tokenizer.json say. A file without the key is llama.cpp's "default". The
 * row marked shown names its pre-tokenizer in --info. */
static const struct { const char *name; int pre, normalizer, ignore_merges, shown; } pre_tokenizers[] = {
    { "default", TOK_PRE_GPT2, TOK_NORM_NONE, 0, 0 },    { "gpt-2", TOK_PRE_GPT2, TOK_NORM_NONE, 0, 0 },
    { "gpt2", TOK_PRE_GPT2, TOK_NORM_NONE, 0, 1 },       { "llama-bpe", TOK_PRE_LLAMA3, TOK_NORM_NONE, 1, 0 },
    { "llama3", TOK_PRE_LLAMA3, TOK_NORM_NONE, 1, 1 },   { "qwen2", TOK_PRE_QWEN2, TOK_NORM_NFC, 0, 1 },
    { "smollm", TOK_PRE_SMOLLM, TOK_NORM_NONE, 0, 1 },
};
#define N_PRE_TOKENIZERS (int)(sizeof pre_tokenizers / sizeof pre_tokenizers[0])

/* the table's row of a GGUF name, or -1 */
static int pre_row(const char *name, size_t len) {
    for (int k = 0; k < N_PRE_TOKENIZERS; k++)
        if (strlen(pre_tokenizers[k].name) == len && !memcmp(name, pre_tokenizers[k].name, len)) return k;
    return -1;
}

int tok_pre_tokenizer_of(const char *gguf_name, size_t len, int *pre, int *normalizer, int *ignore_merges) {
    int k = gguf_name ? pre_row(gguf_name, len) : -1;
    if (k < 0) return -1;
    *pre = pre_tokenizers[k].pre;
    *normalizer = pre_tokenizers[k].normalizer;
    *ignore_merges = pre_tokenizers[k].ignore_merges;
    return 0;
}

const char *tok_pre_tokenizer_name(int pre) {
    for (int k = 0; k < N_PRE_TOKENIZERS; k++)
        if (pre_tokenizers[k].shown && pre_tokenizers[k].pre == pre) return pre_tokenizers[k].name;
    return "";
}

/* ===================================================================== */
/* GPT-2's byte alphabet, and the pieces' index                           */
/* ===================================================================== */

/* GPT-2's byte alphabet undone: the byte code point c stands for in a
 * byte-level piece (printable bytes stand for themselves; the 68 others were
 * moved to U+0100.. in byte order), or -1. */
static int byte_of_char(uint32_t c) {
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return (int)c;
    if (c < 256 || c >= 256 + 68) return -1;
    c -= 256;   /* the c-th byte that is not printable: 0..32, 127..160, 173 */
    return c < 33 ? (int)c : c < 67 ? (int)(127 + c - 33) : 173;
}

/* A byte-level piece's text (UTF-8 of U+0021..U+0143) as the bytes it stands
 * for, written to out (at most len bytes): the count, or -1 when a character
 * is not in the alphabet. */
static long byte_level_bytes(const char *s, uint64_t len, unsigned char *out) {
    long k = 0;
    for (uint64_t i = 0; i < len; k++) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        if (c >= 0x80) {   /* the alphabet's characters take two bytes at most */
            unsigned char d = i + 1 < len ? (unsigned char)s[i + 1] : 0;
            if ((c & 0xE0) != 0xC0 || (d & 0xC0) != 0x80) return -1;
            cp = (uint32_t)(c & 0x1F) << 6 | (d & 0x3F);
            if (cp < 0x80) return -1;   /* overlong */
            i++;
        }
        i++;
        int byte = byte_of_char(cp);
        if (byte < 0) return -1;
        out[k] = (unsigned char)byte;
    }
    return k;
}

/* A piece's bytes and id. */
typedef struct piece_ref {
    const unsigned char *p;
    uint32_t len;
    int id;
} piece_ref;

/* unsigned bytewise, the shorter first (LTOK's order) */
static int compare_bytes(const unsigned char *a, uint32_t al, const unsigned char *b, uint32_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int compare_piece_refs(const void *a, const void *b) {
    const piece_ref *x = (const piece_ref *)a, *y = (const piece_ref *)b;
    return compare_bytes(x->p, x->len, y->p, y->len);
}

/* The pieces by their bytes, for the merges' lookups (a few per merge: a
 * hash beats a binary search over 128k pieces): open addressing, each slot
 * an id + 1 (0: empty), at least twice as many slots as pieces. */
typedef struct piece_table {
    uint32_t *slot;
    uint32_t mask;
    const piece_ref *by_id;
} piece_table;

static uint32_t table_slots(int n) {
    uint32_t size = 1024;
    while (size < 2 * (uint32_t)n) size *= 2;
    return size;
}

static uint32_t hash_bytes(const unsigned char *p, uint32_t len) {   /* FNV-1a */
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* slot: table_slots(n) entries */
static piece_table piece_table_of(const piece_ref *by_id, int n, uint32_t *slot) {
    piece_table t;
    uint32_t size = table_slots(n);
    t.slot = slot;
    memset(t.slot, 0, (size_t)size * 4);
    t.mask = size - 1;
    t.by_id = by_id;
    for (int i = 0; i < n; i++) {
        uint32_t k = hash_bytes(by_id[i].p, by_id[i].len) & t.mask;
        while (t.slot[k]) k = (k + 1) & t.mask;
        t.slot[k] = (uint32_t)i + 1;
    }
    return t;
}

/* The id of the piece with these bytes, or -1 */
static int find_piece(const piece_table *t, const unsigned char *p, uint32_t len) {
    for (uint32_t k = hash_bytes(p, len) & t->mask; t->slot[k]; k = (k + 1) & t->mask) {
        const piece_ref *r = &t->by_id[t->slot[k] - 1];
        if (r->len == len && !memcmp(r->p, p, len)) return r->id;
    }
    return -1;
}

/* An LTOK merge: left, right, rank, result (FORMAT.md) */
typedef struct merge_rec { uint32_t left, right, rank, result; } merge_rec;

static int compare_merges(const void *a, const void *b) {
    const merge_rec *x = (const merge_rec *)a, *y = (const merge_rec *)b;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    if (x->right != y->right) return x->right < y->right ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* ===================================================================== */
/* Sizes                                                                  */
/* ===================================================================== */

/* The LTOK images' scratch, carved in this order, each part 8-aligned:
 * flags (vocab), pieces (text), ends (used u32), by_id and refs (used
 * piece_ref each), merges (n_merges merge_rec), a merge's join (4 *
 * GGUF_MAX_PIECE), scored and rank (used each: kind 2's merges by score),
 * the table's slots. */
typedef struct scored_id { float score; uint32_t id; } scored_id;

typedef struct scratch_parts {
    unsigned char *flags, *pieces, *join;
    uint32_t *ends, *slot, *rank;
    piece_ref *by_id, *refs;
    merge_rec *merges;
    scored_id *scored;
} scratch_parts;

static uint64_t round8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static uint64_t scratch_bytes(int vocab, uint64_t text, int used, uint64_t n_merges) {
    return 8 + round8((uint64_t)vocab) + round8(text) + round8(4 * (uint64_t)used) +
           2 * round8((uint64_t)used * sizeof(piece_ref)) + round8(n_merges * sizeof(merge_rec)) +
           round8(4 * (uint64_t)GGUF_MAX_PIECE) + round8((uint64_t)used * sizeof(scored_id)) +
           round8(4 * (uint64_t)used) + 4 * (uint64_t)table_slots(used);
}

static scratch_parts carve(void *scratch, int vocab, uint64_t text, int used, uint64_t n_merges) {
    scratch_parts s;
    unsigned char *p = (unsigned char *)scratch;
    p += (8 - (uintptr_t)p % 8) % 8;
    s.flags = p;                     p += round8((uint64_t)vocab);
    s.pieces = p;                    p += round8(text);
    s.ends = (uint32_t *)(void *)p;  p += round8(4 * (uint64_t)used);
    s.by_id = (piece_ref *)(void *)p; p += round8((uint64_t)used * sizeof(piece_ref));
    s.refs = (piece_ref *)(void *)p;  p += round8((uint64_t)used * sizeof(piece_ref));
    s.merges = (merge_rec *)(void *)p; p += round8(n_merges * sizeof(merge_rec));
    s.join = p;                      p += round8(4 * (uint64_t)GGUF_MAX_PIECE);
    s.scored = (scored_id *)(void *)p; p += round8((uint64_t)used * sizeof(scored_id));
    s.rank = (uint32_t *)(void *)p;  p += round8(4 * (uint64_t)used);
    s.slot = (uint32_t *)(void *)p;
    return s;
}

/* The merges array, when it is one this build can read (else the fill says why) */
static const llm_gguf_value *merges_of(const tok_gguf *g) {
    const llm_gguf_value *m = g->key[TOK_GGUF_MERGES];
    return m && m->is_array && m->type == GV_STRING && m->count <= GGUF_MAX_MERGES ? m : NULL;
}

/* How many tokens an LTOK image holds (g->used: unused ids at the end are
 * left out), each type checked, and their text's bytes (g->text) */
static int count_used(tok_gguf *g) {
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS], *types = g->key[TOK_GGUF_TOKEN_TYPE];
    int vocab = g->vocab_size;
    g->used = 0;
    for (int i = 0; i < vocab; i++) {
        int64_t type = 1;
        if (types && !gv_int(types, (uint64_t)i, &type))
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
        if (type < 1 || type > 6)
            FAIL(g, TOK_ERR_FORMAT, "GGUF token %d has type %s%llu (llama.cpp's are 1..6)", i, type < 0 ? "-" : "",
                 type < 0 ? 0ull - (unsigned long long)type : (unsigned long long)type);
        if (type != 5) g->used = i + 1;
    }
    /* a piece's stored text is at least as long as its bytes (GPT-2's
     * alphabet and U+2581 take more bytes than what they stand for) */
    uint64_t text;
    int st = strings_bytes(g, tokens, (uint64_t)g->used, 2 * GGUF_MAX_PIECE, "token", &text);
    if (st) return st;
    g->text = text;
    if (g->text > UINT32_MAX)
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokens hold %llu bytes, more than 4 GiB", (unsigned long long)g->text);
    return TOK_OK;
}

/* The type of token i (1 when the file has no types; checked by count_used) */
static int64_t token_type(const tok_gguf *g, int i) {
    int64_t type = 1;
    if (g->key[TOK_GGUF_TOKEN_TYPE]) gv_int(g->key[TOK_GGUF_TOKEN_TYPE], (uint64_t)i, &type);
    return type;
}

/* "llama" without the dummy prefix: the LTOK kind-2 image at most, its
 * merges at most one per character boundary inside a normal piece */
static int size_spm_bpe(tok_gguf *g) {
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS], *scores = g->key[TOK_GGUF_SCORES];
    int st = count_used(g);
    if (st) return st;
    uint64_t pos = 0, len, n_merges = 0;
    const char *s;
    for (int i = 0; i < g->used; i++) {
        float score = 0.0f;
        if (scores && gv_float(scores, (uint64_t)i, &score) && score != score)
            FAIL(g, TOK_ERR_FORMAT, "GGUF token %d's score is NaN", i);
        if (!gv_string(tokens, &pos, &s, &len)) FAIL(g, TOK_ERR_FORMAT, "GGUF token %d is corrupt", i);
        if (token_type(g, i) != 1) continue;
        for (uint64_t k = 1; k < len; k++) n_merges += ((unsigned char)s[k] & 0xC0) != 0x80;
    }
    g->ltok_kind = TOK_KIND_SPM_BPE;
    g->default_add_bos = 1;   /* sentencepiece adds a BOS */
    uint64_t off_merges = 64 + (((uint64_t)g->used + 3) & ~(uint64_t)3) + 8 * (uint64_t)g->used;
    st = fits_size(g, off_merges + 16 * n_merges + g->text, &g->image_size);
    return st ? st : fits_size(g, scratch_bytes(g->vocab_size, g->text, g->used, n_merges), &g->scratch_size);
}

/* "llama": scores, the pieces' bytes, the image's size */
static int size_sentencepiece(tok_gguf *g) {
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS], *scores = g->key[TOK_GGUF_SCORES];
    if (scores && (!scores->is_array || scores->count != tokens->count || scores->type != GV_F32))
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.scores is not %d f32 values", g->vocab_size);
    /* tokenizer.bin's encoder always adds sentencepiece's dummy-prefix space;
     * without it (Gemma's), the kind-2 image */
    const llm_gguf_value *space = g->key[TOK_GGUF_ADD_SPACE_PREFIX];
    int64_t flag = 1;
    if (space && (space->is_array || !gv_int(space, 0, &flag)))
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.add_space_prefix is not a bool");
    if (!flag) return size_spm_bpe(g);
    uint64_t text;
    int st = strings_bytes(g, tokens, tokens->count, INT32_MAX, "token", &text);
    if (st) return st;
    g->default_add_bos = 1;   /* llama2.c's tokenizer.bin adds a BOS */
    return fits_size(g, 4 + (uint64_t)g->vocab_size * 8 + text, &g->image_size);
}

/* "gpt2": the pre-tokenizer, the token types, the pieces' bytes; the image
 * at most (the merges a pair repeats and the pieces' alphabet shrink it) */
static int size_byte_level(tok_gguf *g) {
    const char *pre_name = "default";
    uint64_t pre_len = 7;
    char clip[41];
    int st = key_string(g, TOK_GGUF_PRE, &pre_name, &pre_len);
    if (st < 0) return st;
    if ((g->pre = pre_row(pre_name, (size_t)pre_len)) < 0)
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.pre '%s' is not a pre-tokenizer this build has (llama-bpe, "
             "llama3, qwen2, smollm, gpt-2, default): give a tokenizer with -z", clip40(clip, pre_name, pre_len));
    g->default_add_bos = pre_tokenizers[g->pre].pre == TOK_PRE_LLAMA3;
    if ((st = count_used(g))) return st;
    const llm_gguf_value *merges = merges_of(g);
    uint64_t n_merges = merges ? merges->count : 0;
    uint64_t off_merges = 64 + (((uint64_t)g->used + 3) & ~(uint64_t)3) + 8 * (uint64_t)g->used;
    st = fits_size(g, off_merges + 16 * n_merges + g->text, &g->image_size);
    return st ? st : fits_size(g, scratch_bytes(g->vocab_size, g->text, g->used, n_merges), &g->scratch_size);
}

int tok_gguf_size(tok_gguf *g) {
    const char *s;
    uint64_t len;
    char clip[41];
    if (!g) return TOK_ERR_ARG;
    g->error[0] = '\0';
    g->image_size = g->scratch_size = g->system_size = 0;
    g->ltok_kind = 0; g->pre = -1; g->used = 0; g->text = 0; g->default_add_bos = 0;
    if (g->vocab_size <= 0) FAIL(g, TOK_ERR_ARG, "GGUF tokenizer: the model's vocabulary size %d is not positive", g->vocab_size);
    int st = key_string(g, TOK_GGUF_MODEL, &s, &len);
    if (st < 0) return st;
    if (st == 0) FAIL(g, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.model string: give a tokenizer with -z");
    int byte_level = len == 4 && !memcmp(s, "gpt2", 4);
    if (!byte_level && (len != 5 || memcmp(s, "llama", 5)))
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer model '%s' is not supported (llama and gpt2 are): give a tokenizer with -z",
             clip40(clip, s, len));
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS], *types = g->key[TOK_GGUF_TOKEN_TYPE];
    if (!tokens || !tokens->is_array || tokens->type != GV_STRING)
        FAIL(g, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.tokens string array");
    if (tokens->count != (uint64_t)g->vocab_size)
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer has %llu tokens, the model's vocabulary %d",
             (unsigned long long)tokens->count, g->vocab_size);
    if (types && (!types->is_array || types->count != tokens->count))
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not %d values", g->vocab_size);
    if (byte_level) g->ltok_kind = TOK_KIND_BYTE_LEVEL;
    st = byte_level ? size_byte_level(g) : size_sentencepiece(g);
    if (st) return st;
    /* the default system prompt is shorter than the template it is in */
    const llm_gguf_value *tmpl = g->key[TOK_GGUF_CHAT_TEMPLATE];
    uint64_t pos = 0;
    if (tmpl && !tmpl->is_array && gv_string(tmpl, &pos, &s, &len) && len <= SIZE_MAX) g->system_size = (size_t)len;
    return TOK_OK;
}

/* ===================================================================== */
/* The images                                                             */
/* ===================================================================== */

/* A sentencepiece piece's text with each U+2581 a space, written to out: its length */
static long spaces_for_u2581(const char *s, uint64_t len, unsigned char *out) {
    long k = 0;
    for (uint64_t j = 0; j < len; j++) {
        if (j + 2 < len && (unsigned char)s[j] == 0xE2 && (unsigned char)s[j + 1] == 0x96 && (unsigned char)s[j + 2] == 0x81) {
            out[k++] = ' ';
            j += 2;
        } else {
            out[k++] = (unsigned char)s[j];
        }
    }
    return k;
}

/* "llama": the tokenizer.bin image, int32 max length, then per token f32
 * score, int32 length, bytes (a piece shrinks or keeps its size: U+2581's
 * three bytes become one) */
static int fill_sentencepiece(tok_gguf *g, unsigned char *img, size_t *image_len) {
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS], *types = g->key[TOK_GGUF_TOKEN_TYPE];
    const llm_gguf_value *scores = g->key[TOK_GGUF_SCORES];
    int vocab = g->vocab_size;
    size_t at = 4;
    int max_len = 0;
    uint64_t pos = 0, len = 0;
    const char *s = NULL;
    for (int i = 0; i < vocab; i++) {
        if (!gv_string(tokens, &pos, &s, &len))   /* checked by tok_gguf_size */
            FAIL(g, TOK_ERR_FORMAT, "GGUF token %d is corrupt", i);
        float score = 0.0f;
        int64_t type = 1;
        if (scores) gv_float(scores, (uint64_t)i, &score);
        if (types && !gv_int(types, (uint64_t)i, &type))
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
        size_t start = at + 8, k = start;
        if (type == 1) k += (size_t)spaces_for_u2581(s, len, img + start);
        else { memcpy(img + start, s, (size_t)len); k += (size_t)len; }
        int32_t l = (int32_t)(k - start);
        memcpy(img + at, &score, 4);
        memcpy(img + at + 4, &l, 4);
        if (l > max_len) max_len = l;
        at = k;
    }
    memcpy(img, &max_len, 4);
    *image_len = at;
    return TOK_OK;
}

/* The scratch's mark on a normal (type 1) piece, beside the flags: the
 * pieces kind 2's merges join (the image keeps the low three bits) */
#define SCRATCH_NORMAL 0x80

/* The token flags (FORMAT.md) from llama.cpp's token types: 1 normal and 6
 * byte are pieces in GPT-2's alphabet (kind 1) or sentencepiece's (kind 2);
 * 3 control, 2 unknown and 5 unused (the converter's [PADn] fillers) are
 * special, 4 user-defined is added. */
static int token_flags(tok_gguf *g, unsigned char *flags) {
    const llm_gguf_value *types = g->key[TOK_GGUF_TOKEN_TYPE];
    for (int i = 0; i < g->vocab_size; i++) {
        int64_t type = 1;
        if (types && !gv_int(types, (uint64_t)i, &type)) FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
        flags[i] = type == 4 ? TOK_FLAG_ADDED : type == 1 || type == 6 ? 0 : TOK_FLAG_SPECIAL;
        if (type == 1 && g->ltok_kind == TOK_KIND_SPM_BPE) flags[i] |= SCRATCH_NORMAL;
    }
    return TOK_OK;
}

/* The pieces' bytes per id (ends[i]: where piece i ends), and the ids sorted
 * by them; *text_out: their bytes, *max_len: the longest. A normal piece's
 * text: GPT-2's alphabet undone (kind 1), U+2581 as a space (kind 2); the
 * others' as the file has it. */
static int byte_level_pieces(tok_gguf *g, scratch_parts *sp, uint32_t *text_out, uint32_t *max_len_out) {
    const llm_gguf_value *tokens = g->key[TOK_GGUF_TOKENS];
    int used = g->used;
    uint64_t pos = 0, len = 0;
    const char *s = NULL;
    char clip[41];
    uint32_t at = 0, max_len = 1;
    for (int i = 0; i < used; i++) {
        if (!gv_string(tokens, &pos, &s, &len) || len > g->text - at)   /* checked by tok_gguf_size */
            FAIL(g, TOK_ERR_FORMAT, "GGUF token %d is corrupt", i);
        long l = (long)len;
        if (g->ltok_kind == TOK_KIND_SPM_BPE && (sp->flags[i] & SCRATCH_NORMAL))
            l = spaces_for_u2581(s, len, sp->pieces + at);
        else if (g->ltok_kind == TOK_KIND_SPM_BPE || sp->flags[i]) memcpy(sp->pieces + at, s, (size_t)len);
        else if ((l = byte_level_bytes(s, len, sp->pieces + at)) < 0)
            FAIL(g, TOK_ERR_FORMAT, "GGUF token %d '%s' is not in GPT-2's byte alphabet (a normal token of a gpt2 "
                 "tokenizer)", i, clip40(clip, s, len));
        if (l > GGUF_MAX_PIECE) FAIL(g, TOK_ERR_FORMAT, "GGUF token %d is %ld bytes (at most %d)", i, l, GGUF_MAX_PIECE);
        sp->by_id[i].p = sp->pieces + at;
        sp->by_id[i].len = (uint32_t)l;
        sp->by_id[i].id = i;
        at += (uint32_t)l;
        sp->ends[i] = at;
        if ((uint32_t)l > max_len) max_len = (uint32_t)l;
    }
    memcpy(sp->refs, sp->by_id, (size_t)used * sizeof *sp->refs);
    qsort(sp->refs, (size_t)used, sizeof *sp->refs, compare_piece_refs);
    for (int k = 1; k < used; k++) {
        const piece_ref *a = &sp->refs[k - 1], *b = &sp->refs[k];
        if (!compare_piece_refs(a, b))
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokens %d and %d are the same bytes", a->id < b->id ? a->id : b->id,
                 a->id < b->id ? b->id : a->id);
    }
    *text_out = at;
    *max_len_out = max_len;
    return TOK_OK;
}

/* merges: "left right", both and their join pieces; rank = position. Sorted
 * by (left, right); a pair merged twice keeps its last rank, as Hugging
 * Face's tokenizers (and export.py) do. *kept: how many remain. */
static int byte_level_merges(tok_gguf *g, scratch_parts *sp, int *kept_out) {
    const llm_gguf_value *merges = g->key[TOK_GGUF_MERGES];
    if (!merges || !merges->is_array || merges->type != GV_STRING)
        FAIL(g, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.merges string array (a gpt2 tokenizer needs it)");
    if (merges->count > GGUF_MAX_MERGES)
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer has %llu merges (at most 2^26)", (unsigned long long)merges->count);
    int n_merges = (int)merges->count;
    merge_rec *m = sp->merges;
    unsigned char *join = sp->join;
    piece_table table = piece_table_of(sp->by_id, g->used, sp->slot);
    uint64_t pos = 0, len = 0;
    const char *s = NULL;
    char clip[41];
    for (int i = 0; i < n_merges; i++) {
        if (!gv_string(merges, &pos, &s, &len)) FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer merge %d is corrupt", i);
        const char *space = len > 1 ? (const char *)memchr(s + 1, ' ', (size_t)len - 1) : NULL;
        long l = -1, r = -1;
        if (space && len <= 4 * GGUF_MAX_PIECE) {
            l = byte_level_bytes(s, (uint64_t)(space - s), join);
            if (l >= 0) r = byte_level_bytes(space + 1, len - (uint64_t)(space - s) - 1, join + l);
        }
        int left = l > 0 && r > 0 ? find_piece(&table, join, (uint32_t)l) : -1;
        int right = left >= 0 ? find_piece(&table, join + l, (uint32_t)r) : -1;
        int result = right >= 0 ? find_piece(&table, join, (uint32_t)(l + r)) : -1;
        if (result < 0)
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer merge %d '%s' is not two tokens whose join is a token", i,
                 clip40(clip, s, len));
        if (sp->flags[left] | sp->flags[right] | sp->flags[result])
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer merge %d '%s' involves a special or added token", i,
                 clip40(clip, s, len));
        m[i] = (merge_rec){ (uint32_t)left, (uint32_t)right, (uint32_t)i, (uint32_t)result };
    }
    qsort(m, (size_t)n_merges, sizeof *m, compare_merges);
    int kept = 0;
    for (int i = 0; i < n_merges; i++) {
        if (kept && m[kept - 1].left == m[i].left && m[kept - 1].right == m[i].right) kept--;
        m[kept++] = m[i];
    }
    *kept_out = kept;
    return TOK_OK;
}

/* ===================================================================== */
/* Sentencepiece by score as merges                                       */
/* ===================================================================== */

/* llama.cpp's sentencepiece encoder (llama-vocab.cpp, SPM) merges, among
 * the adjacent symbols of a text, the pair whose join is a piece with the
 * highest score, ties to the leftmost pair, from the characters up. Kind 2
 * merges the pair of lowest rank, ties to the leftmost. So these merges are
 * every split of a normal piece at a character boundary into two normal
 * pieces, each ranked by the joined piece's score: rank 0 for the highest,
 * equal scores one rank. (llama.cpp would also join into a control or byte
 * piece whose text the symbols spell, and from a character no piece holds:
 * kind 2 joins normal pieces only.) */
static int compare_scored(const void *a, const void *b) {
    const scored_id *x = (const scored_id *)a, *y = (const scored_id *)b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* each normal piece's rank (sp->rank[id]) by its score, highest first */
static void rank_by_score(tok_gguf *g, scratch_parts *sp) {
    const llm_gguf_value *scores = g->key[TOK_GGUF_SCORES];
    int n = 0;
    for (int i = 0; i < g->used; i++) {
        if (!(sp->flags[i] & SCRATCH_NORMAL)) continue;
        float score = 0.0f;
        if (scores) gv_float(scores, (uint64_t)i, &score);   /* not NaN: tok_gguf_size */
        sp->scored[n++] = (scored_id){ score, (uint32_t)i };
    }
    qsort(sp->scored, (size_t)n, sizeof *sp->scored, compare_scored);
    for (int k = 0, rank = -1; k < n; k++) {
        if (!k || sp->scored[k].score != sp->scored[k - 1].score) rank++;
        sp->rank[sp->scored[k].id] = (uint32_t)rank;
    }
}

/* The merges (sorted by left, right: each pair joins one piece) */
static int score_merges(tok_gguf *g, scratch_parts *sp, int *kept_out) {
    piece_table table = piece_table_of(sp->by_id, g->used, sp->slot);
    size_t n = 0;
    rank_by_score(g, sp);
    for (int i = 0; i < g->used; i++) {
        const unsigned char *p = sp->by_id[i].p;
        uint32_t len = sp->by_id[i].len;
        if (!(sp->flags[i] & SCRATCH_NORMAL)) continue;
        for (uint32_t k = 1; k < len; k++) {
            if ((p[k] & 0xC0) == 0x80) continue;   /* inside a character */
            int left = find_piece(&table, p, k), right = left >= 0 ? find_piece(&table, p + k, len - k) : -1;
            if (right < 0 || !(sp->flags[left] & sp->flags[right] & SCRATCH_NORMAL)) continue;
            if (n >= GGUF_MAX_MERGES)
                FAIL(g, TOK_ERR_FORMAT, "GGUF sentencepiece tokenizer makes more than 2^26 merges");
            sp->merges[n++] = (merge_rec){ (uint32_t)left, (uint32_t)right, sp->rank[i], (uint32_t)i };
        }
    }
    qsort(sp->merges, n, sizeof *sp->merges, compare_merges);
    *kept_out = (int)n;
    return TOK_OK;
}

/* ===================================================================== */
/* The LTOK images                                                        */
/* ===================================================================== */

/* The LTOK image, section by section (FORMAT.md, "LTOK, version 1"), from
 * the scratch's flags, pieces and kept merges; ids, add_bos and the
 * template come after tok_init, which validates the result as a file. */
static void write_ltok(unsigned char *img, const scratch_parts *sp, const uint32_t kind_pre_norm_flags[4], int used,
                       int kept, uint32_t max_len, uint32_t at, size_t *image_len) {
    size_t off_ends = 64 + (((size_t)used + 3) & ~(size_t)3), off_sorted = off_ends + 4 * (size_t)used;
    size_t off_merges = off_sorted + 4 * (size_t)used;   /* below 2^26: used <= LLM_MAX_VOCAB */
    size_t off_pieces = off_merges + 16 * (size_t)kept;  /* within image_size: kept <= the merges, at <= text */
    memset(img, 0, off_ends);
    uint32_t header[15] = { 1, 64, kind_pre_norm_flags[0], kind_pre_norm_flags[1], kind_pre_norm_flags[2],
                            kind_pre_norm_flags[3], (uint32_t)used, (uint32_t)kept,
                            UINT32_MAX, UINT32_MAX, UINT32_MAX, TOK_CHAT_LLAMA2, max_len, 0, at };
    memcpy(img, "LTOK", 4);
    for (int k = 0; k < 15; k++) put_u32(img + 4 + 4 * k, header[k]);
    for (int i = 0; i < used; i++) img[64 + i] = sp->flags[i] & (TOK_FLAG_SPECIAL | TOK_FLAG_ADDED | TOK_FLAG_U2581);
    for (int i = 0; i < used; i++) {
        put_u32(img + off_ends + 4 * (size_t)i, sp->ends[i]);
        put_u32(img + off_sorted + 4 * (size_t)i, (uint32_t)sp->refs[i].id);
    }
    for (int i = 0; i < kept; i++) {
        unsigned char *p = img + off_merges + 16 * (size_t)i;
        put_u32(p, sp->merges[i].left); put_u32(p + 4, sp->merges[i].right);
        put_u32(p + 8, sp->merges[i].rank); put_u32(p + 12, sp->merges[i].result);
    }
    memcpy(img + off_pieces, sp->pieces, at);
    *image_len = off_pieces + at;
}

/* "gpt2": kind 1, its merges from the file */
static int fill_byte_level(tok_gguf *g, unsigned char *img, void *scratch, size_t *image_len) {
    const llm_gguf_value *merges = merges_of(g);
    scratch_parts sp = carve(scratch, g->vocab_size, g->text, g->used, merges ? merges->count : 0);
    uint32_t at, max_len;
    int kept, st;
    if ((st = token_flags(g, sp.flags)) || (st = byte_level_pieces(g, &sp, &at, &max_len)) ||
        (st = byte_level_merges(g, &sp, &kept)))
        return st;
    const uint32_t head[4] = { TOK_KIND_BYTE_LEVEL, (uint32_t)pre_tokenizers[g->pre].pre,
                               (uint32_t)pre_tokenizers[g->pre].normalizer, pre_tokenizers[g->pre].ignore_merges ? 2u : 0u };
    write_ltok(img, &sp, head, g->used, kept, max_len, at, image_len);
    return TOK_OK;
}

/* "llama" without the dummy prefix: kind 2, its merges from the scores */
static int fill_spm_bpe(tok_gguf *g, unsigned char *img, void *scratch, size_t *image_len) {
    /* the merges' room: what tok_gguf_size counted (size_spm_bpe) */
    uint64_t off_merges = 64 + (((uint64_t)g->used + 3) & ~(uint64_t)3) + 8 * (uint64_t)g->used;
    scratch_parts sp = carve(scratch, g->vocab_size, g->text, g->used, (g->image_size - off_merges - g->text) / 16);
    uint32_t at, max_len;
    int kept, st;
    if ((st = token_flags(g, sp.flags)) || (st = byte_level_pieces(g, &sp, &at, &max_len)) ||
        (st = score_merges(g, &sp, &kept)))
        return st;
    const uint32_t head[4] = { TOK_KIND_SPM_BPE, TOK_PRE_NONE, TOK_NORM_NONE, 0 };
    write_ltok(img, &sp, head, g->used, kept, max_len, at, image_len);
    return TOK_OK;
}

int tok_gguf_image(tok_gguf *g, void *image, size_t image_cap, void *scratch, size_t scratch_cap, size_t *image_len) {
    if (!g || !image_len) return TOK_ERR_ARG;
    *image_len = 0;
    if (!g->image_size) FAIL(g, TOK_ERR_ARG, "GGUF tokenizer: tok_gguf_size has not sized it");
    if (!image || image_cap < g->image_size || (g->scratch_size && (!scratch || scratch_cap < g->scratch_size)))
        FAIL(g, TOK_ERR_SPACE, "GGUF tokenizer: %zu image and %zu scratch bytes given, %zu and %zu needed", image_cap,
             scratch ? scratch_cap : 0, g->image_size, g->scratch_size);
    return g->ltok_kind == TOK_KIND_BYTE_LEVEL ? fill_byte_level(g, (unsigned char *)image, scratch, image_len)
         : g->ltok_kind == TOK_KIND_SPM_BPE    ? fill_spm_bpe(g, (unsigned char *)image, scratch, image_len)
                                               : fill_sentencepiece(g, (unsigned char *)image, image_len);
}

/* ===================================================================== */
/* The keys beside the pieces                                             */
/* ===================================================================== */

int tok_gguf_apply(tok_gguf *g, tok_tokenizer *t, char *system, size_t cap) {
    const llm_gguf_value *v;
    int64_t flag;
    int bos, eos, eot, st;
    if (!g || !t || t->vocab_size <= 0) return TOK_ERR_ARG;
    if ((st = key_token_id(g, TOK_GGUF_BOS, t->vocab_size, &bos)) ||
        (st = key_token_id(g, TOK_GGUF_EOS, t->vocab_size, &eos)))
        return st;
    if (bos >= 0) t->bos_id = bos;
    if (eos >= 0) t->eos_id = eos;
    t->add_bos = g->default_add_bos;
    if ((v = g->key[TOK_GGUF_ADD_BOS]) != NULL) {
        if (v->is_array || !gv_int(v, 0, &flag))
            FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.add_bos_token is not a bool");
        t->add_bos = flag != 0;
    }
    if (t->add_bos && (t->bos_id < 0 || t->bos_id >= t->vocab_size))
        FAIL(g, TOK_ERR_FORMAT, "GGUF tokenizer adds a BOS but names none (tokenizer.ggml.bos_token_id)");
    const char *s;
    uint64_t len;
    if ((st = key_string(g, TOK_GGUF_CHAT_TEMPLATE, &s, &len)) < 0) return st;
    if (st == 1) {
        size_t sys_len;
        if (!system || cap < len)
            FAIL(g, TOK_ERR_SPACE, "GGUF tokenizer: %zu bytes given for the default system prompt, %llu needed",
                 system ? cap : 0, (unsigned long long)len);
        int tmpl = tok_chat_template_of(s, (size_t)len, system, (size_t)len, &sys_len);
        if (tmpl >= 0) t->chat_template = tmpl;   /* else Llama 2's, as with no template */
        t->default_system = sys_len ? system : NULL;
        t->default_system_len = sys_len;
    }
    if ((st = key_token_id(g, TOK_GGUF_EOT, t->vocab_size, &eot))) return st;
    if (eot < 0 && t->chat_template != TOK_CHAT_LLAMA2) eot = tok_chat_end_id(t, t->chat_template);
    if (eot >= 0) t->eot_id = eot;
    return TOK_OK;
}
