/* fuzz_gguf.c -- GGUF files (engine/gguf.h, engine/load_gguf.h): the model
 * reader through llm_model_size and llm_load, and the metadata API run.c reads the
 * tokenizer with (llm_gguf_find, llm_gguf_next_string, llm_gguf_int,
 * llm_gguf_float) on every key the engine or run.c asks for.
 *
 * Invariants: a refused file says why; llm_model_size is nonzero exactly when
 * llm_load accepts the file with that arena, and one byte less is refused; a
 * loaded model runs two tokens as a batch and one by one with the same bits;
 * the metadata API never reads outside the file (ASan), each string it gives
 * lies inside the file, and each of a string array's count strings is there.
 */
#define _POSIX_C_SOURCE 200112L
#define MODEL_IMPLEMENTATION
#include "model.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_STATE_MAX ((size_t)32 << 20)

static const char *const keys[] = {
    "general.architecture", "general.alignment", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template", "llama.block_count",
    "tokenizer.ggml.merges", "tokenizer.ggml.pre", "tokenizer.ggml.eot_token_id",
};

static void walk_metadata(const unsigned char *b, size_t n) {
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        llm_gguf_value v;
        int r = llm_gguf_find(b, n, keys[k], &v);
        if (r < -1 || r > 1) fuzz_fail("llm_gguf_find returned %d", r);
        if (r != 1) continue;
        if (v.data < b || v.data > b + n || v.bytes > (uint64_t)(b + n - v.data)) fuzz_fail("value of %s outside the file", keys[k]);
        uint64_t pos = 0, len, i = 0;
        const char *s;
        volatile unsigned sum = 0;
        /* llm_gguf_find walked every pair: all count strings are there */
        for (; v.type == 8 && i < v.count; i++) {
            if (!llm_gguf_next_string(&v, &pos, &s, &len))
                fuzz_fail("string %llu of %llu of %s unreadable", (unsigned long long)i, (unsigned long long)v.count, keys[k]);
            if ((const unsigned char *)s < b || len > (uint64_t)(b + n - (const unsigned char *)s))
                fuzz_fail("string %llu of %s outside the file", (unsigned long long)i, keys[k]);
            if (len) sum += (unsigned char)s[len - 1];
        }
        for (uint64_t j = 0; j < v.count && j < 4096; j++) {
            int64_t iv;
            float fv;
            if (llm_gguf_int(&v, j, &iv)) sum += (unsigned)iv;
            if (llm_gguf_float(&v, j, &fv)) sum += (unsigned)(fv == fv);
        }
        (void)sum;
    }
}

static void *open_state(llm_state *s, const llm_model *m, const llm_state_options *o) {
    size_t need = llm_state_size(&m->cfg, o);
    if (need > FUZZ_STATE_MAX) return NULL;
    void *arena = NULL;
    if (posix_memalign(&arena, LLM_ALIGN, need ? need : 1)) fuzz_fail("out of memory for %zu bytes", need);
    if (llm_state_init(s, m, o, arena, need) != LLM_OK) fuzz_fail("the planned arena was refused: %s", s->error);
    return arena;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, LLM_ALIGN, size ? size : 1)) return 0;
    if (size) memcpy(p, data, size);
    const unsigned char *b = (const unsigned char *)p;
    walk_metadata(b, size);
    llm_model m;
    size_t need = llm_model_size(b, size);
    if (!need) {
        int st = llm_load(&m, b, size, NULL, 0);
        if (st == LLM_OK || !m.error[0]) fuzz_fail("llm_model_size 0 but llm_load says %d (%s)", st, m.error);
        fuzz_note("refused: %s", m.error);
        free(p);
        return 0;
    }
    void *arena = malloc(need);
    if (!arena) fuzz_fail("out of memory");
    if (llm_load(&m, b, size, arena, need - 1) != LLM_ERR_ARENA) fuzz_fail("an arena one byte short was not refused");
    if (llm_load(&m, b, size, arena, need) != LLM_OK) fuzz_fail("llm_model_size %zu but llm_load refused: %s", need, m.error);
    const llm_config *c = &m.cfg;
    int ctx = c->seq_len < 4 ? c->seq_len : 4, n = ctx < 2 ? ctx : 2, tokens[2];
    for (int i = 0; i < n; i++) tokens[i] = (int)(size > (size_t)i ? data[size - 1 - i] : 0) % c->vocab_size;
    llm_state_options ob = { ctx, n, 1, LLM_KV_F32 }, os = { ctx, 1, 0, LLM_KV_F32 };
    llm_state sb, ss;
    void *ab = open_state(&sb, &m, &ob), *as = ab ? open_state(&ss, &m, &os) : NULL;
    if (as) {
        if (llm_forward(&m, &sb, tokens, n, 0, LLM_LOGITS_ALL) != LLM_OK) fuzz_fail("batch: %s", sb.error);
        for (int t = 0; t < n; t++) {
            if (llm_forward(&m, &ss, tokens + t, 1, t, LLM_LOGITS_LAST) != LLM_OK) fuzz_fail("single: %s", ss.error);
            for (int i = 0; i < c->vocab_size; i++) {
                uint32_t x, y;
                float fx = sb.logits[(size_t)t * c->vocab_size + i], fy = ss.logits[i];
                memcpy(&x, &fx, 4); memcpy(&y, &fy, 4);
                if (x != y && !(fx != fx && fy != fy)) fuzz_fail("position %d logit %d: batched %08x, single %08x", t, i, x, y);
            }
        }
        fuzz_note("loaded gguf %s, dim %d, layers %d, vocab %d: %d tokens, batched == one by one",
                  llm_type_name(c->weight_type), c->dim, c->n_layers, c->vocab_size, n);
    } else {
        fuzz_note("loaded gguf, state above the harness's bound");
    }
    free(as); free(ab); free(arena); free(p);
    return 0;
}
