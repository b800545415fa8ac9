/* fuzz_checkpoint.c -- every checkpoint format llm_load reads: llama2.c's
 * headerless legacy file, LLMW, and llama2.c's "ak42" versions 1 and 2
 * (llm_load dispatches on the magic, so one harness serves them all; the
 * seeds from make_seeds.py cover each format and weight type).
 *
 * The input is the file (or, starting with "SHPE", a shape the harness
 * writes as an LLMW file: see shape mode below). If it loads, a small state (context at most 8,
 * batches of 2, the KV-cache type chosen by the last byte) runs three tokens
 * (chosen by the 3 bytes before it) twice: as a batch of 2 then 1 token, and
 * one token at a time. The byte before those may flip the norm settings, as
 * run.c's --norm, --norm-pos and --final-norm do. Invariants: a refused file says why; a loaded model
 * with a planned arena gets a state, and one byte less is refused; every
 * forward step succeeds; batched logits equal one-by-one logits bit for bit
 * (any NaN matching any NaN).
 */
#define _POSIX_C_SOURCE 200112L
#define MODEL_IMPLEMENTATION
#include "model.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

enum { FUZZ_CTX = 8, FUZZ_BATCH = 2, FUZZ_TOKENS = 3 };
/* Bound on one state's arena, so a hostile header cannot make the harness
 * allocate gigabytes (there are two states). */
#define FUZZ_STATE_MAX ((size_t)32 << 20)

static const char *format_name(int format) {
    switch (format) {
    case LLM_FORMAT_LEGACY: return "legacy";
    case LLM_FORMAT_LLMW: return "LLMW";
    case LLM_FORMAT_AK42_V1: return "ak42v1";
    case LLM_FORMAT_AK42_V2: return "ak42v2";
    default: return "?";
    }
}

/* A copy of the bytes in a 64-byte-aligned buffer of exactly n bytes, so
 * AddressSanitizer sees any read past the end. */
static unsigned char *aligned_copy(const uint8_t *data, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, LLM_ALIGN, n ? n : 1)) return NULL;
    if (n) memcpy(p, data, n);
    return (unsigned char *)p;
}

/* A state carved from a fresh arena, or NULL when the arena is above the
 * bound (outcome says so). A refused arena of the planned size is a bug. */
static void *open_state(llm_state *s, const llm_model *m, const llm_state_options *o) {
    size_t need = llm_state_size(&m->cfg, o);
    void *arena = NULL;
    if (llm_state_plan(&m->cfg, o).total != need) fuzz_fail("llm_state_plan and llm_state_size disagree");
    if (need > FUZZ_STATE_MAX) {
        fuzz_note("loaded, but skipped: state of %zu bytes above the harness's bound", need);
        return NULL;
    }
    if (posix_memalign(&arena, LLM_ALIGN, need ? need : 1)) fuzz_fail("out of memory for %zu bytes", need);
    if (llm_state_init(s, m, o, arena, need - 1) != LLM_ERR_ARENA)
        fuzz_fail("an arena one byte short of the plan (%zu) was not refused", need);
    if (llm_state_init(s, m, o, arena, need) != LLM_OK)
        fuzz_fail("the planned arena of %zu bytes was refused: %s", need, s->error);
    return arena;
}

static void forward(const llm_model *m, llm_state *s, const int *tokens, int n, int pos, int which) {
    if (llm_forward(m, s, tokens, n, pos, which) != LLM_OK)
        fuzz_fail("forward of %d tokens at %d failed: %s", n, pos, s->error);
}

/* Bit-for-bit equal, any NaN matching any NaN. */
static void expect_same_logits(const float *batched, const float *single, int n, int pos) {
    for (int i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &batched[i], 4);
        memcpy(&b, &single[i], 4);
        if (a != b && !(batched[i] != batched[i] && single[i] != single[i]))
            fuzz_fail("position %d, logit %d: batched %08x, one by one %08x", pos, i, (unsigned)a, (unsigned)b);
    }
}

/* Run the tokens batched (a batch, then single steps) and one by one, comparing. */
static void run_both_ways(const llm_model *m, llm_state *batched, llm_state *single, const int *tokens, int n) {
    int V = m->cfg.vocab_size, first = n < batched->max_batch ? n : batched->max_batch;
    forward(m, batched, tokens, first, 0, LLM_LOGITS_ALL);
    for (int pos = 0; pos < first; pos++) {
        forward(m, single, &tokens[pos], 1, pos, LLM_LOGITS_LAST);
        expect_same_logits(batched->logits + (size_t)pos * V, single->logits, V, pos);
    }
    for (int pos = first; pos < n; pos++) {
        forward(m, batched, &tokens[pos], 1, pos, LLM_LOGITS_LAST);
        forward(m, single, &tokens[pos], 1, pos, LLM_LOGITS_LAST);
        expect_same_logits(batched->logits, single->logits, V, pos);
    }
}

/* If bit 7 of b is set: bits 0-2 flip the norm type, position and final norm. */
static void override_norms(llm_model *m, uint8_t b) {
    if (!(b & 0x80)) return;
    if (b & 1) m->cfg.norm_type = !m->cfg.norm_type;
    if (b & 2) m->cfg.norm_pos = !m->cfg.norm_pos;
    if (b & 4) m->cfg.final_norm = !m->cfg.final_norm;
    if (llm_check_config(m) != LLM_OK) fuzz_fail("valid norm settings refused: %s", m->error);
}

static void run_model(const llm_model *m, const uint8_t *data, size_t size) {
    const llm_config *c = &m->cfg;
    int ctx = c->seq_len < FUZZ_CTX ? c->seq_len : FUZZ_CTX;
    int kv_type = data[size - 1] % 3, n = ctx < FUZZ_TOKENS ? ctx : FUZZ_TOKENS, tokens[FUZZ_TOKENS];
    for (int i = 0; i < n; i++) tokens[i] = data[size - 2 - i] % c->vocab_size;   /* loaded: size >= 28 */
    llm_state_options ob = { ctx, ctx < FUZZ_BATCH ? ctx : FUZZ_BATCH, 1, kv_type };
    llm_state_options os = { ctx, 1, 0, kv_type };
    llm_state batched, single;
    void *arena_b = open_state(&batched, m, &ob);
    void *arena_s = arena_b ? open_state(&single, m, &os) : NULL;
    if (arena_s) {
        run_both_ways(m, &batched, &single, tokens, n);
        fuzz_note("loaded %s %s, dim %d, layers %d, vocab %d: %d tokens with the %s cache, %s %s-norm, batched == one by one",
                  format_name(c->format), llm_type_name(c->weight_type), c->dim, c->n_layers, c->vocab_size, n,
                  llm_kv_type_name(kv_type), llm_norm_type_name(c->norm_type), llm_norm_pos_name(c->norm_pos));
    }
    free(arena_s);
    free(arena_b);
}

/* ---- shape mode: "SHPE", 10 shape bytes, weight bytes ----
 * Mutating a real file rarely keeps its size consistent with its header, so
 * few new shapes load. An input starting with "SHPE" (no checkpoint format)
 * instead describes a shape; the harness writes a valid LLMW file of that
 * shape, its weights taken from the rest of the input, and runs it: the
 * kernels meet head sizes, widths, groups and norms no seed has. The writer
 * follows the LLMW layout (export.py's, restated here); a file it writes
 * that does not load is a bug in one of them. */

#define SHAPE_MAGIC "SHPE"
enum { SHAPE_BYTES = 10 };

typedef struct {
    llm_config c;
    const uint8_t *values;   /* weight bytes, cycled */
    size_t n_values, next;
    unsigned char *out;      /* NULL: only count */
    size_t at;
} llmw_writer;

/* A small finite weight from the next value byte. */
static float next_value(llmw_writer *w, float scale) {
    int b = w->n_values ? w->values[w->next++ % w->n_values] : (int)(w->next++ * 37 % 256);
    return (float)(b - 128) / 128.0f * scale;
}

static void put_bytes(llmw_writer *w, const void *p, size_t n) {
    if (w->out) memcpy(w->out + w->at, p, n);
    w->at += n;
}

static void pad_to_alignment(llmw_writer *w) {
    static const unsigned char zeros[LLM_ALIGN];
    put_bytes(w, zeros, (LLM_ALIGN - w->at % LLM_ALIGN) % LLM_ALIGN);
}

/* An f32 vector of n values around `center`. */
static void put_vector(llmw_writer *w, int n, float center) {
    for (int i = 0; i < n; i++) {
        float v = center + next_value(w, 0.25f);
        put_bytes(w, &v, 4);
    }
}

/* A (rows, cols) matrix in the weight type: f32, f16, or q8_0 (int8 values,
 * zero padding to 64, then one f32 scale per row group). */
static void put_matrix(llmw_writer *w, int rows, int cols) {
    const llm_config *c = &w->c;
    size_t n = (size_t)rows * cols;
    for (size_t i = 0; i < n; i++) {
        float v = next_value(w, 0.5f);
        if (c->weight_type == LLM_TYPE_F32) put_bytes(w, &v, 4);
        else if (c->weight_type == LLM_TYPE_F16) { uint16_t h = llm_f32_to_f16(v); put_bytes(w, &h, 2); }
        else { int8_t q = (int8_t)(v * 254.0f); put_bytes(w, &q, 1); }
    }
    if (c->weight_type == LLM_TYPE_Q8_0) {
        size_t groups = (size_t)rows * ((cols + c->group_size - 1) / c->group_size);
        pad_to_alignment(w);
        for (size_t g = 0; g < groups; g++) {
            float scale = (1.0f + next_value(w, 1.0f)) / 64.0f;
            put_bytes(w, &scale, 4);
        }
    }
}

static void put_u32(unsigned char *h, int off, uint32_t v) { memcpy(h + off, &v, 4); }

/* The 256-byte LLMW header of the writer's config and file size. */
static void put_header(llmw_writer *w, uint64_t file_size) {
    const llm_config *c = &w->c;
    unsigned char h[LLM_HEADER_SIZE];
    int32_t fields[8] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len, c->head_size };
    uint32_t flags[2] = { (uint32_t)c->shared_classifier, (uint32_t)c->weight_type };
    memset(h, 0, sizeof h);
    memcpy(h, LLM_MAGIC, 4);
    put_u32(h, 4, 1 /* the version 1 layout written below */); put_u32(h, 8, LLM_HEADER_SIZE); put_u32(h, 12, LLM_ALIGN);
    memcpy(h + 16, fields, sizeof fields);
    put_u32(h, 48, (uint32_t)c->norm_type); put_u32(h, 52, (uint32_t)c->norm_pos); put_u32(h, 56, (uint32_t)c->final_norm);
    memcpy(h + 60, &c->norm_eps, 4); memcpy(h + 64, &c->rope_theta, 4);
    put_u32(h, 68, (uint32_t)c->rope_layout);
    memcpy(h + 72, flags, sizeof flags);
    put_u32(h, 80, (uint32_t)c->group_size); put_u32(h, 84, (uint32_t)c->norm_bias);
    memcpy(h + 88, &file_size, 8);
    put_bytes(w, h, sizeof h);
}

/* Header, embedding, the layers, final norm, classifier; every tensor but the last padded to 64. */
static void write_llmw(llmw_writer *w, uint64_t file_size) {
    const llm_config *c = &w->c;
    int D = c->dim, qd = c->n_heads * c->head_size, kvd = c->n_kv_heads * c->head_size, H = c->hidden_dim;
    w->at = 0;
    w->next = 0;
    put_header(w, file_size);
    put_matrix(w, c->vocab_size, D); pad_to_alignment(w);
    for (int l = 0; l < c->n_layers; l++) {
        put_vector(w, D, 1.0f); pad_to_alignment(w);
        if (c->norm_bias) { put_vector(w, D, 0.0f); pad_to_alignment(w); }
        put_matrix(w, qd, D); pad_to_alignment(w);
        put_matrix(w, kvd, D); pad_to_alignment(w);
        put_matrix(w, kvd, D); pad_to_alignment(w);
        put_matrix(w, D, qd); pad_to_alignment(w);
        put_vector(w, D, 1.0f); pad_to_alignment(w);
        if (c->norm_bias) { put_vector(w, D, 0.0f); pad_to_alignment(w); }
        put_matrix(w, H, D); pad_to_alignment(w);
        put_matrix(w, D, H); pad_to_alignment(w);
        put_matrix(w, H, D); pad_to_alignment(w);
    }
    put_vector(w, D, 1.0f);
    if (c->norm_bias) { pad_to_alignment(w); put_vector(w, D, 0.0f); }
    if (!c->shared_classifier) { pad_to_alignment(w); put_matrix(w, c->vocab_size, D); }
}

/* The shape the 10 bytes after the magic describe (small: at most dim 192). */
static llm_config shape_config(const uint8_t *b) {
    llm_config c;
    memset(&c, 0, sizeof c);
    c.head_size = 2 * (1 + b[0] % 16);
    c.n_kv_heads = 1 + b[1] % 4;
    c.n_heads = c.n_kv_heads * (1 + b[2] % 3);
    c.dim = c.n_heads * c.head_size;
    c.hidden_dim = 1 + b[3] % 96;
    c.vocab_size = 1 + b[4] % 64;
    c.n_layers = 1 + b[5] % 2;
    c.seq_len = 1 + b[6] % 8;
    c.weight_type = b[7] % 3;
    c.group_size = c.weight_type == LLM_TYPE_Q8_0 ? 1 + b[8] % 64 : 0;
    c.shared_classifier = b[9] & 1;
    c.norm_bias = (b[9] >> 1) & 1;
    c.norm_type = (b[9] >> 2) & 1;
    c.norm_pos = (b[9] >> 3) & 1;
    c.final_norm = (b[9] >> 4) & 1;
    c.rope_layout = (b[9] >> 5) & 1;
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    return c;
}

/* Write the input's shape as an LLMW file, load it (it must load) and run it. */
static void run_shape(const uint8_t *data, size_t size) {
    llmw_writer w;
    llm_model m;
    memset(&w, 0, sizeof w);
    w.c = shape_config(data + 4);
    w.values = data + 4 + SHAPE_BYTES;
    w.n_values = size - 4 - SHAPE_BYTES;
    write_llmw(&w, 0);                              /* count the bytes */
    size_t file_size = w.at;
    if (posix_memalign((void **)&w.out, LLM_ALIGN, file_size)) fuzz_fail("out of memory for %zu bytes", file_size);
    write_llmw(&w, file_size);
    size_t model_bytes = llm_model_size(w.out, file_size);
    void *model_arena = malloc(model_bytes ? model_bytes : 1);
    if (!model_arena) fuzz_fail("out of memory for %zu bytes", model_bytes);
    if (llm_load(&m, w.out, file_size, model_arena, model_bytes) != LLM_OK)
        fuzz_fail("the harness's LLMW file (dim %d, hidden %d, heads %d/%d, head size %d, vocab %d, %s, group %d) did not load: %s",
                  w.c.dim, w.c.hidden_dim, w.c.n_heads, w.c.n_kv_heads, w.c.head_size, w.c.vocab_size,
                  llm_type_name(w.c.weight_type), w.c.group_size, m.error);
    run_model(&m, data, size);
    free(model_arena);
    free(w.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *bytes;
    llm_model m;
    if (size >= 4 + SHAPE_BYTES + 4 && !memcmp(data, SHAPE_MAGIC, 4)) {
        run_shape(data, size);
        return 0;
    }
    bytes = aligned_copy(data, size);
    if (!bytes) fuzz_fail("out of memory for %zu bytes", size);
    size_t model_bytes = llm_model_size(bytes, size);   /* 0: llm_load refuses the file and says why */
    void *model_arena = model_bytes ? malloc(model_bytes) : NULL;
    if (model_bytes && !model_arena) fuzz_fail("out of memory for %zu bytes", model_bytes);
    if (llm_load(&m, bytes, size, model_arena, model_bytes) != LLM_OK) {
        if (!m.error[0]) fuzz_fail("llm_load refused the file without a message");
        fuzz_note("refused: %s", m.error);
    } else {
        override_norms(&m, data[size - 5]);   /* loaded: size >= 28 */
        run_model(&m, data, size);
    }
    free(model_arena);
    free(bytes);
    return 0;
}
