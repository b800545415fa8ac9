/* fuzz_checkpoint.c -- every checkpoint format llm_load reads: llama2.c's
 * headerless legacy file, LLMW, and llama2.c's "ak42" versions 1 and 2
 * (llm_load dispatches on the magic, so one harness serves them all; the
 * seeds from make_seeds.py cover each format and weight type).
 *
 * The input is the file. If it loads, a small state (context at most 8,
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

static const char *format_name(int format)
{
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
static unsigned char *aligned_copy(const uint8_t *data, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, LLM_ALIGN, n ? n : 1)) return NULL;
    if (n) memcpy(p, data, n);
    return (unsigned char *)p;
}

/* A state carved from a fresh arena, or NULL when the arena is above the
 * bound (outcome says so). A refused arena of the planned size is a bug. */
static void *open_state(llm_state *s, const llm_model *m, const llm_state_options *o)
{
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

static void forward(const llm_model *m, llm_state *s, const int *tokens, int n, int pos, int which)
{
    if (llm_forward(m, s, tokens, n, pos, which) != LLM_OK)
        fuzz_fail("forward of %d tokens at %d failed: %s", n, pos, s->error);
}

/* Bit-for-bit equal, any NaN matching any NaN. */
static void expect_same_logits(const float *batched, const float *single, int n, int pos)
{
    for (int i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &batched[i], 4);
        memcpy(&b, &single[i], 4);
        if (a != b && !(batched[i] != batched[i] && single[i] != single[i]))
            fuzz_fail("position %d, logit %d: batched %08x, one by one %08x", pos, i, (unsigned)a, (unsigned)b);
    }
}

/* Run the tokens batched (a batch, then single steps) and one by one, comparing. */
static void run_both_ways(const llm_model *m, llm_state *batched, llm_state *single, const int *tokens, int n)
{
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
static void override_norms(llm_model *m, uint8_t b)
{
    if (!(b & 0x80)) return;
    if (b & 1) m->cfg.norm_type = !m->cfg.norm_type;
    if (b & 2) m->cfg.norm_pos = !m->cfg.norm_pos;
    if (b & 4) m->cfg.final_norm = !m->cfg.final_norm;
    if (llm_check_config(m) != LLM_OK) fuzz_fail("valid norm settings refused: %s", m->error);
}

static void run_model(const llm_model *m, const uint8_t *data, size_t size)
{
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
                  format_name(c->format), llm_dtype_name(c->weight_type), c->dim, c->n_layers, c->vocab_size, n,
                  llm_kv_type_name(kv_type), llm_norm_type_name(c->norm_type), llm_norm_pos_name(c->norm_pos));
    }
    free(arena_s);
    free(arena_b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *bytes = aligned_copy(data, size);
    llm_model m;
    if (!bytes) fuzz_fail("out of memory for %zu bytes", size);
    if (llm_load(&m, bytes, size) != LLM_OK) {
        if (!m.error[0]) fuzz_fail("llm_load refused the file without a message");
        fuzz_note("refused: %s", m.error);
    } else {
        override_norms(&m, data[size - 5]);   /* loaded: size >= 28 */
        run_model(&m, data, size);
    }
    free(bytes);
    return 0;
}
