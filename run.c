/* run.c -- the command-line program: the engine in model.h set up from the
 * options (options.c), and the generate / chat / eval / tokenize / serve
 * modes with their output. The operating system's part (errors, memory,
 * file mapping, the wait policy) is platform.c's; the server is server/'s.
 *
 * Contract: text goes to stdout as it is generated; statistics, the
 * configuration in effect and errors go to stderr. Every error is one line
 * "error: ..." and a non-zero exit status (1: bad input or file, 2: bad usage).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   /* MAP_POPULATE */
#define _FILE_OFFSET_BITS 64   /* 32-bit hosts: stat files of 2 GiB and more */
#include "model.h"   /* the engine: engine/part_*.c, linked (Makefile) */
#include "tokenizer.h"
#include "sampler.h"
#include "platform.h"   /* die, xmalloc, file mapping, the wait policy */
#include "options.h"    /* the command line */
#include "server/serve.h"   /* -m serve */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ===================================================================== */
/* Engine setup                                                           */
/* ===================================================================== */

typedef struct engine {
    file_bytes ckpt_file, tok_file;
    llm_model model;
    llm_state_options plan;   /* what the state is (or would be) planned for */
    llm_state state;
    void *arena;
    size_t arena_size;
    void *model_arena;        /* the model's layer table and RoPE frequencies */
    size_t model_arena_size;
    void *repack_arena;       /* the block-type matrices in panels (llm_repack), or NULL */
    size_t repack_size;       /* its bytes (with --info: what a run would take) */
    tok_tokenizer tok;
    void *tok_image;          /* a tokenizer.bin or LTOK image built from a GGUF's arrays, or NULL */
    char *tok_system;         /* room for the GGUF chat template's default system prompt (tok_gguf_apply), or NULL */
    void *tok_arena;
    size_t tok_arena_size;
    llm_sampler *sampler;     /* prefill feeds its repeat-penalty window */
} engine;

static void load_tokenizer(engine *e, const char *path, int vocab_size) {
    e->tok_file = map_file(path, "tokenizer", 0);
    e->tok_arena_size = tok_arena_size(e->tok_file.data, e->tok_file.size, vocab_size);
    e->tok_arena = xmalloc(e->tok_arena_size, "the tokenizer");
    if (tok_init(&e->tok, e->tok_file.data, e->tok_file.size, vocab_size, e->tok_arena, e->tok_arena_size) != 0)
        die(1, "tokenizer %s: %s", path, tok_error(&e->tok));
}

/* A GGUF's own tokenizer (no -z): the library's conversion of the file's
 * tokenizer keys (tokenizer.h, "a GGUF file's tokenizer"); the image and the
 * default system prompt then belong to the engine. */
static void load_gguf_tokenizer(engine *e, const char *path) {
    llm_gguf_value v[TOK_GGUF_KEY_COUNT];
    tok_gguf g;
    size_t size;
    memset(&g, 0, sizeof g);
    g.vocab_size = e->model.cfg.vocab_size;
    for (int k = 0; k < TOK_GGUF_KEY_COUNT; k++)
        if (llm_gguf_find(e->ckpt_file.data, e->ckpt_file.size, tok_gguf_key_name(k), &v[k]) == 1) g.key[k] = &v[k];
    if (tok_gguf_size(&g) != 0) die(1, "checkpoint %s: %s", path, g.error);
    unsigned char *img = (unsigned char *)xmalloc(g.image_size, "the GGUF tokenizer");
    void *scratch = xmalloc(g.scratch_size, "the GGUF tokenizer's index");
    if (tok_gguf_image(&g, img, g.image_size, scratch, g.scratch_size, &size) != 0)
        die(1, "checkpoint %s: %s", path, g.error);
    free(scratch);
    e->tok_image = img;
    e->tok_file.data = img;
    e->tok_file.size = size;
    e->tok_arena_size = tok_arena_size(img, size, g.vocab_size);
    e->tok_arena = xmalloc(e->tok_arena_size ? e->tok_arena_size : 1, "the tokenizer");
    if (tok_init(&e->tok, img, size, g.vocab_size, e->tok_arena, e->tok_arena_size) != 0)
        die(1, "checkpoint %s: its GGUF tokenizer: %s", path, tok_error(&e->tok));
    e->tok_system = (char *)xmalloc(g.system_size, "the default system prompt");
    if (tok_gguf_apply(&g, &e->tok, e->tok_system, g.system_size) != 0) die(1, "checkpoint %s: %s", path, g.error);
}

/* Encode text with BOS; the ids go to a malloc'd array. */
static int *encode_text(engine *e, const char *text, int bos, int eos, int *n_out) {
    size_t len = strlen(text);
    size_t scratch_size = tok_encode_scratch_size(len);
    void *scratch = xmalloc(scratch_size, "the tokenizer's scratch");
    size_t most = tok_max_tokens(len);
    if (most == 0 || most > (size_t)INT32_MAX) die(1, "the text is too long to encode (%zu bytes)", len);
    int max_tokens = (int)most;
    int *ids = (int *)xmalloc((size_t)max_tokens * sizeof(int), "token ids");
    int n = tok_encode(&e->tok, text, bos, eos, ids, max_tokens, scratch, scratch_size);
    free(scratch);
    if (n < 0) die(1, "cannot encode the text: %s", tok_error(&e->tok));
    *n_out = n;
    return ids;
}

static void apply_norm_options(llm_model *m, const options *o) {
    llm_config *c = &m->cfg;
    int pos_changed = o->norm_pos >= 0 && o->norm_pos != c->norm_pos;
    if (o->norm_type >= 0) c->norm_type = o->norm_type;
    if (o->norm_pos >= 0) c->norm_pos = o->norm_pos;
    if (o->final_norm >= 0) c->final_norm = o->final_norm;
    else if (pos_changed) c->final_norm = c->norm_pos != LLM_NORM_POST; /* off for post, else on */
    if (o->norm_eps > 0.0f) c->norm_eps = o->norm_eps;
    if (o->qk_norm == 1 && !m->w.layers[0].q_norm.data)
        die(2, "--qk-norm on: this checkpoint has no q/k norm weights (q_norm, k_norm)");
    if (o->qk_norm >= 0) c->qk_norm = o->qk_norm;
    if (llm_check_config(m) != LLM_OK) die(2, "%s", m->error);
}

static void print_config(const engine *e, const options *o, FILE *out) {
    const llm_state_options *so = &e->plan;
    const llm_config *c = &e->model.cfg;
    fprintf(out,
            "model: dim %d, hidden %d, layers %d, heads %d (kv %d, head size %d), vocab %d, seq_len %d, %s weights%s%s\n",
            c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size, c->vocab_size,
            c->seq_len, llm_type_name(c->weight_type), c->shared_classifier ? ", shared classifier" : "",
            c->format == LLM_FORMAT_LEGACY ? " (llama2.c format)" : "");
    /* the placement, and for peri and out whether the output norms are the checkpoint's */
    int outs = c->norm_pos == LLM_NORM_PERI || c->norm_pos == LLM_NORM_OUT;
    int stored = e->model.w.out_norms != NULL;
    fprintf(out, "norm: %s, %s-norm%s, final norm %s, eps %g%s | context %d, %s KV cache, threads %d%s, %s kernels\n",
            llm_norm_type_name(c->norm_type), llm_norm_pos_name(c->norm_pos),
            !outs ? "" : stored ? " (output norms stored)" : " (output norms: weight 1, not in the checkpoint)",
            c->final_norm ? "on" : "off", (double)c->norm_eps, c->norm_bias ? ", with biases" : "", so->ctx_len,
            llm_kv_type_name(so->kv_type), o->threads,
#ifdef _OPENMP
            o->threads == 1 ? "" : o->wait == WAIT_SPIN ? " (idle threads spin)" : " (idle threads sleep)",
#else
            " (built without OpenMP)",
#endif
            llm_simd_name());
    /* the attention's extras: RoPE base and scaling, q/k/v biases, q/k norm */
    fprintf(out, "attention: rope theta %g", (double)c->rope_theta);
    if (c->rope_scaling == LLM_ROPE_SCALING_LINEAR) fprintf(out, ", linear rope scaling x%g", (double)c->rope_factor);
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3)
        fprintf(out, ", llama3 rope scaling x%g (low %g, high %g, original context %d)", (double)c->rope_factor,
                (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor, c->rope_orig_ctx);
    fprintf(out, ", q/k/v biases %s, q/k norm %s%s%s\n", c->qkv_bias ? "yes" : "no", c->qk_norm ? "on" : "off",
            c->qk_norm_whole ? " (over the whole q and k)" : "",
            !c->qk_norm && e->model.w.layers && e->model.w.layers[0].q_norm.data ? " (weights stored)" : "");
    /* Gemma's fields, only when a checkpoint sets one */
    if (c->ffn_act || c->embed_scale > 0.0f || c->query_scalar > 0.0f || c->sliding_window) {
        fprintf(out, "gemma: ffn %s, embed scale %s%g, scores / sqrt(%g)", c->ffn_act == LLM_FFN_GELU_TANH ? "gelu_tanh" : "silu",
                c->embed_scale > 0.0f ? "" : "none ", (double)c->embed_scale,
                (double)(c->query_scalar > 0.0f ? c->query_scalar : (float)c->head_size));
        int n_local = 0;   /* a local layer keeps a ring: fewer rows than an unbounded context */
        for (int l = 0; l < c->n_layers; l++) n_local += llm_kv_layer_rows(c, INT_MAX, l) < (size_t)INT_MAX;
        if (c->sliding_window) fprintf(out, ", sliding window %d on %d of %d layers (local rope theta %g; global:",
                                       c->sliding_window, n_local, c->n_layers, (double)c->rope_local_theta);
        for (int l = 0; l < c->n_layers && c->sliding_window; l++)
            if (llm_kv_layer_rows(c, INT_MAX, l) == (size_t)INT_MAX) fprintf(out, " %d", l);
        fprintf(out, c->sliding_window ? ")\n" : "\n");
    }
}

/* The tokenizer in effect: its kind, ids and chat template, for --info. */
static void print_tokenizer(const tok_tokenizer *t) {
    if (t->kind == TOK_KIND_BYTE_LEVEL)
        printf("  tokenizer is byte-level BPE (%s pre-tokenizer%s%s),", tok_pre_tokenizer_name(t->pre_tokenizer),
               t->normalizer == TOK_NORM_NFC ? ", NFC" : "", t->ignore_merges ? ", ignore_merges" : "");
    else if (t->kind == TOK_KIND_SPM_BPE)
        printf("  tokenizer is sentencepiece-style BPE by merge rank (byte fallback, no dummy prefix),");
    else
        printf("  tokenizer is sentencepiece BPE,");
    printf(" vocab %d, bos %d, eos %d, eot %d, add_bos %d, %s chat template, default system prompt \"",
           t->vocab_size, t->bos_id, t->eos_id, t->eot_id, t->add_bos, tok_chat_template_name(t->chat_template));
    for (size_t i = 0; i < t->default_system_len; i++)   /* on one line */
        if (t->default_system[i] == '\n') fputs("\\n", stdout);
        else putchar(t->default_system[i]);
    printf("\"\n");
}

/* 1 when the mode asks forward for every token's logits (eval scores them
 * all): the state's plan and the repacking both follow it */
static int wants_all_logits(const options *o) {
    return !strcmp(o->mode, "eval");
}

/* The bytes the repacked matrices will take (--repack; 0 in tokenize mode
 * and in builds whose kernels read the file's layouts) */
static size_t planned_repack_size(const engine *e, const options *o) {
    return o->repack && strcmp(o->mode, "tokenize") ? llm_repack_size(&e->model, wants_all_logits(o)) : 0;
}
/* 1 when the run copies the weights into RAM (--mmap off, or auto where it
 * pays): one decode step streams every weight once, and read through a
 * mapping of the page cache's 4 KiB pages it misses the TLB every few KB.
 * Zen 5, one thread, decode mapped -> copied onto 2 MiB pages: 110M f32
 * 51-56 -> 65-72 tok/s, f16 99-109 -> 121-124, q8_0 154-160 -> 179-181;
 * 42M f32 +3%; the whole run's time the same (reading the file into the
 * copy costs what mapping and touching its pages did). Zen 4, one thread,
 * five runs each: 15M f32 (58 MiB) decode 210-222 -> 357-385 tok/s, f16
 * (29 MiB) 514-652 -> 661-786, prefill alike (4860-5179 -> 4754-5542), -n 1
 * 10 ms longer. Below COPY_WEIGHTS_MIN the mapping's pages fit the L2 TLB
 * (Zen 4: 3072 entries, 12 MiB of 4 KiB pages), so auto maps those; and
 * files whose matrices are repacked (GGUF block types, LLMW q8_0: the
 * products read the copies in RAM), and copies
 * above a quarter of the memory limit. */
#define COPY_WEIGHTS_MIN ((size_t)16 << 20)
static int copies_weights(const engine *e, const options *o) {
    if (o->mmap != MMAP_AUTO) return o->mmap == MMAP_OFF;
    size_t size = e->ckpt_file.size;
    return planned_repack_size(e, o) == 0 && size >= COPY_WEIGHTS_MIN && size <= o->max_memory / 4 && have_huge_pages();
}

static void print_plan(const engine *e, const options *o) {
    typedef unsigned long long ull;   /* the plan is 64-bit on every host */
    const llm_config *c = &e->model.cfg;
    llm_state_options so = e->plan;
    llm_plan p = llm_state_plan(c, &so);
    double MB = 1024.0 * 1024.0;
    printf("memory plan (context %d, batch %d, %s KV cache):\n", so.ctx_len, so.max_batch, llm_kv_type_name(so.kv_type));
    size_t copied = copies_weights(e, o) ? e->ckpt_file.size : 0;
    printf("  weights      %12zu bytes  %8.2f MiB  (%s)\n", e->ckpt_file.size, e->ckpt_file.size / MB,
           copied ? "copied into RAM at load, on huge pages where Linux has them; --mmap on: read in place"
                  : "read in place from the file");
    if (e->repack_size)
        printf("  repacked     %12zu bytes  %8.2f MiB  (block-type matrices again, in the layouts the %s kernels read fastest; --repack off: none)\n",
               e->repack_size, e->repack_size / MB, llm_simd_name());
    ull kv = p.key_cache + p.value_cache + 2 * p.kv_scales;
    printf("  kv cache     %12llu bytes  %8.2f MiB  (keys %llu, values %llu, scales 2 x %llu)\n", kv, kv / MB,
           (ull)p.key_cache, (ull)p.value_cache, (ull)p.kv_scales);
    if (e->model.cfg.sliding_window) {   /* the local layers' rings against full rows on every layer */
        llm_config full = e->model.cfg;
        full.local_layers = 0;
        llm_plan pf = llm_state_plan(&full, &so);
        ull kf = pf.key_cache + pf.value_cache + 2 * pf.kv_scales;
        printf("  kv cache without the local layers' rings (of 2 x sliding window %d positions): %llu bytes, %.2f MiB (saved %.2f MiB)\n",
               e->model.cfg.sliding_window, kf, kf / MB, (kf - kv) / MB);
    }
    ull act = p.total - kv;
    printf("  activations  %12llu bytes  %8.2f MiB  (x %llu, xb %llu, xb2 %llu, q %llu, k/v 2 x %llu, hb %llu, hb2 %llu, rope %llu, logits %llu, act codes %llu; each part 64-aligned)\n",
           act, act / MB, (ull)p.x, (ull)p.xb, (ull)p.xb2, (ull)p.q, (ull)p.kv_new, (ull)p.hb, (ull)p.hb2, (ull)p.rope,
           (ull)p.logits, (ull)p.act_q);
    size_t tok_image = e->tok_image ? e->tok_file.size : 0;   /* built from a GGUF's arrays */
    if (e->tok_image)
        printf("  tokenizer    %12zu bytes  %8.2f MiB  (its %zu-byte %s image built from the GGUF, and tables)\n",
               e->tok_arena_size + tok_image, (e->tok_arena_size + tok_image) / MB, tok_image,
               e->tok.kind != TOK_KIND_SENTENCEPIECE ? "LTOK" : "tokenizer.bin");
    else if (e->tok_file.data)
        printf("  tokenizer    %12zu bytes  %8.2f MiB  (+ %zu bytes of file read in place)\n", e->tok_arena_size,
               e->tok_arena_size / MB, e->tok_file.size);
    else
        printf("  tokenizer    (none given: add -z FILE to include it)\n");
    if (e->tok_file.data) print_tokenizer(&e->tok);
    ull total = p.total + e->tok_arena_size + tok_image + e->repack_size + copied, need = total + e->model_arena_size;
    printf("  total RAM    %12llu bytes  %8.2f MiB  (state arena %llu + tokenizer%s%s)\n", total, total / MB, (ull)p.total,
           e->repack_size ? " + repacked" : "", copied ? " + weights" : "");
    printf("  limit        %12llu bytes  %8.2f MiB  (--max-memory)%s\n", o->max_memory, o->max_memory / MB,
           need > o->max_memory ? ": this plan is above it, and a run would refuse it" : "");
}

/* The block-type matrices copied into the panels this build's kernels read
 * fastest (llm_repack; nothing in other builds); --info only sizes them. */
static void repack_weights(engine *e, const options *o) {
    e->repack_size = planned_repack_size(e, o);
    if (!e->repack_size || o->info) return;
    if (e->repack_size == SIZE_MAX) die(1, "repacking the block-type matrices needs more memory than this machine can address: use --repack off");
    e->repack_arena = xmalloc_big(e->repack_size, "the repacked block-type matrices");
    if (llm_repack(&e->model, e->repack_arena, e->repack_size, wants_all_logits(o)) != LLM_OK) die(1, "%s", e->model.error);
}

/* Map and validate the checkpoint (read in place from here on, or from its
 * copy), with the norm flags applied, the block-type matrices repacked. */
static void load_checkpoint(engine *e, const options *o) {
    /* the header is validated before any weight is read: a bad file costs
     * one page, not its size */
    e->ckpt_file = map_file(o->checkpoint, "checkpoint", 0);
    size_t model_need = llm_model_size(e->ckpt_file.data, e->ckpt_file.size);
    if (model_need) e->model_arena = xmalloc(model_need, "the model's tensor table");
    e->model_arena_size = model_need;
    if (llm_load(&e->model, e->ckpt_file.data, e->ckpt_file.size, e->model_arena, model_need) != LLM_OK)
        die(1, "checkpoint %s: %s", o->checkpoint, e->model.error);
    if (!o->info && strcmp(o->mode, "tokenize")) {
        /* weights that will run are then copied, or mapped again, populated,
         * so the first forward pass takes no page faults (and validated
         * again: the file may have changed in between) */
        size_t size = e->ckpt_file.size;
        int copy = copies_weights(e, o);
        if (copy && size > o->max_memory)
            die(1, "--mmap off: the weights take %zu bytes, above the memory limit of %llu bytes: raise --max-memory or use --mmap on",
                size, o->max_memory);
        unmap_file(&e->ckpt_file);
        if (copy) e->ckpt_file = read_file_copy(o->checkpoint, "checkpoint", size);
        else {
            e->ckpt_file = map_file(o->checkpoint, "checkpoint", 1);
            touch_pages(&e->ckpt_file);
        }
        if (llm_load(&e->model, e->ckpt_file.data, e->ckpt_file.size, e->model_arena, model_need) != LLM_OK)
            die(1, "checkpoint %s: %s", o->checkpoint, e->model.error);
    }
    apply_norm_options(&e->model, o);
    repack_weights(e, o);
}

/* Does the file start with GGUF's magic? (an unreadable file: no, and its
 * opening fails later with the reason) */
static int is_gguf(const char *path) {
    char magic[4];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    return yes;
}

/* The state's options for batches of max_batch tokens (nothing allocated). */
static void plan_state(engine *e, const options *o, int max_batch) {
    llm_config *c = &e->model.cfg;
    int ctx = o->ctx ? o->ctx : c->seq_len;
    /* A GGUF's context_length is the length the model was trained for, not a
     * limit of the file (llama.cpp's llama2.c converter writes 128 for any
     * model): as llama.cpp does, run past it when -n or --ctx asks, and say so.
     * Every other format's seq_len bounds the context, as in llama2.c. */
    if (c->format == LLM_FORMAT_GGUF && !o->ctx && !strcmp(o->mode, "generate") && o->steps > ctx) ctx = o->steps;
    if (c->format == LLM_FORMAT_GGUF && ctx > c->seq_len) {
        fprintf(stderr, "note: a context of %d runs past the %d positions this GGUF was trained for "
                "(its context_length)\n", ctx, c->seq_len);
        c->seq_len = ctx;
    }
    if (ctx > c->seq_len) die(2, "--ctx %d exceeds the model's seq_len %d", ctx, c->seq_len);
    if (max_batch > ctx) max_batch = ctx;
    llm_state_options so = { ctx, max_batch, wants_all_logits(o), o->kv_type };
    e->plan = so;
}

/* The longest context whose state fits `limit` bytes beside `other`, or 0. */
static int ctx_that_fits(const llm_config *c, llm_state_options so, unsigned long long limit, unsigned long long other) {
    int lo = 0, hi = so.ctx_len;
    while (lo < hi) {   /* the plan grows with the context */
        so.ctx_len = lo + (hi - lo + 1) / 2;
        if (so.max_batch > so.ctx_len) so.max_batch = so.ctx_len;
        if (llm_state_plan(c, &so).total + other <= limit) lo = so.ctx_len;
        else hi = so.ctx_len - 1;
    }
    return lo;
}

/* Carve the planned state, once its bytes are known to fit the memory limit. */
static void open_state(engine *e, const options *o) {
    const llm_config *c = &e->model.cfg;
    llm_state_options so = e->plan;
    unsigned long long need = llm_state_plan(c, &so).total;
    unsigned long long other = e->tok_arena_size + e->model_arena_size + e->repack_size +
                               (e->ckpt_file.copied ? e->ckpt_file.size : 0);
    if (need + other > o->max_memory) {
        int fits = ctx_that_fits(c, so, o->max_memory, other);
        char what_fits[64];
        if (fits > 0) snprintf(what_fits, sizeof what_fits, ": use --ctx %d or less, or", fits);
        else snprintf(what_fits, sizeof what_fits, ", which no context fits:");
        die(1, "the state needs %llu bytes (%.1f MiB) for a context of %d, above the memory limit of %llu bytes%s raise --max-memory",
            need, need / 1048576.0, so.ctx_len, o->max_memory, what_fits);
    }
    e->arena_size = llm_state_size(c, &so);
    if (e->arena_size == SIZE_MAX) die(1, "the state needs %llu bytes, more than this machine can address: lower --ctx", need);
    e->arena = xmalloc_big(e->arena_size, "the state");
    if (llm_state_init(&e->state, &e->model, &so, e->arena, e->arena_size) != LLM_OK)
        die(1, "%s", e->state.error);
    e->state.n_threads = o->threads;
    if (o->wait == WAIT_SPIN) e->state.parallel_min_work = WAIT_SPIN_MIN_WORK;
#ifdef _OPENMP
    /* start the worker threads now, with the loading, not in the first forward pass */
#pragma omp parallel num_threads(o->threads)
    { (void)0; }
#endif
}

/* Run n tokens from position pos in batches of the state's max_batch;
 * leaves the logits of the last token in state.logits. */
static void prefill(engine *e, const int *tokens, int n, int pos) {
    if (e->sampler)   /* as llama.cpp: the prompt's tokens count for the repeat penalty */
        for (int i = 0; i < n; i++) llm_sampler_accept(e->sampler, tokens[i]);
    for (int done = 0; done < n;) {
        int chunk = n - done < e->state.max_batch ? n - done : e->state.max_batch;
        if (llm_forward(&e->model, &e->state, tokens + done, chunk, pos + done, LLM_LOGITS_LAST) != LLM_OK)
            die(1, "%s", e->state.error);
        done += chunk;
    }
}

/* Print a piece, skipping lone control bytes (as llama2.c does). */
static void print_piece(const char *piece, size_t len) {
    if (len == 0) return;
    if (len == 1) {
        unsigned char b = (unsigned char)piece[0];
        if (b < 0x80 && !(isprint(b) || isspace(b))) return;
    }
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
}

static void print_token(engine *e, int prev, int token) {
    size_t len;
    const char *piece = tok_decode(&e->tok, prev, token, &len);
    print_piece(piece, len);
}

/* --verbose-prompt: what the model is fed, one id and its piece (the raw
 * bytes, \xNN for a byte that is not printable ASCII, \\ and \') a line. */
static void print_prompt_ids(const engine *e, const char *what, const int *ids, int n) {
    fprintf(stderr, "verbose prompt, %s: %d tokens\n", what, n);
    for (int i = 0; i < n; i++) {
        size_t len;
        const unsigned char *p = (const unsigned char *)tok_decode(&e->tok, -1, ids[i], &len);
        fprintf(stderr, "%6d -> '", ids[i]);
        for (size_t k = 0; k < len; k++) {
            if (p[k] == '\\' || p[k] == '\'') fprintf(stderr, "\\%c", p[k]);
            else if (p[k] < 0x20 || p[k] >= 0x7f) fprintf(stderr, "\\x%02x", p[k]);
            else fputc(p[k], stderr);
        }
        fputs("'\n", stderr);
    }
}

/* ===================================================================== */
/* Modes                                                                  */
/* ===================================================================== */

#define PREFILL_BATCH_MAX 512

/* Write a byte of every page of the KV cache that positions 0..n-1 use,
 * before the clock starts: under this project's VMs the first touch of a
 * page traps (about 5 us a 4 KiB page: 90 us per token of a 110M model's
 * cache), which prefill and decode would pay (llama.cpp clears its whole
 * cache at start). Nothing reads a position before it is written. */
static void touch_kv(engine *e, int n) {
    const llm_state *s = &e->state;
    const llm_config *c = &e->model.cfg;
    size_t rows = 0;
    for (int l = 0; l < c->n_layers; l++) rows += llm_kv_layer_rows(c, s->ctx_len, l);
    size_t row = (size_t)(llm_state_plan(c, &e->plan).key_cache / (uint64_t)rows), start = 0;   /* a position's row */
    for (int l = 0; l < c->n_layers && n > 0; l++) {
        size_t lr = llm_kv_layer_rows(c, s->ctx_len, l), used = row * ((size_t)n < lr ? (size_t)n : lr);
        volatile unsigned char *k = (unsigned char *)s->key_cache + start, *v = (unsigned char *)s->value_cache + start;
        for (size_t at = 0; at < used; at += 4096) k[at] = v[at] = 0;
        k[used - 1] = v[used - 1] = 0;
        start += row * lr;
    }
}

static void generate(engine *e, const options *o, int *prompt, int n_prompt, llm_sampler *smp) {
    int steps = o->steps;
    int ctx = e->state.ctx_len;
    if (steps == 0 || steps > ctx) {
        if (steps > ctx) fprintf(stderr, "note: -n %d exceeds the context length, clamped to %d\n", steps, ctx);
        steps = ctx;
    }
    if (n_prompt > ctx) die(1, "the prompt is %d tokens, longer than the context of %d (see --ctx)", n_prompt, ctx);
    if (n_prompt > steps) die(2, "the prompt is %d tokens but -n is %d steps in total: raise -n", n_prompt, steps);

    touch_kv(e, steps);
    double t0 = now_seconds();
    prefill(e, prompt, n_prompt, 0);
    double t_prefill = now_seconds() - t0;
    if (prompt[0] != e->tok.bos_id) print_token(e, -1, prompt[0]);   /* a tokenizer that adds no BOS */
    for (int i = 1; i < n_prompt; i++) print_token(e, prompt[i - 1], prompt[i]);

    /* as llama2.c: the forward at position pos yields the next token, up to position steps-1 */
    int token = prompt[n_prompt - 1], pos = n_prompt - 1, generated = 0, decoded = 0;
    double t_first = 0.0, t_decode0 = 0.0, t_sample = 0.0;   /* the sampler's share of the decode time */
    for (;;) {
        double ts = generated ? now_seconds() : 0.0;
        int next = llm_sample(smp, e->state.logits);
        if (generated++ == 0) t_first = (t_decode0 = now_seconds()) - t0;
        else t_sample += now_seconds() - ts;
        if (tok_ends_text(&e->tok, next)) break;
        print_token(e, token, next);
        token = next;
        if (++pos >= steps) break;
        if (llm_forward(&e->model, &e->state, &token, 1, pos, LLM_LOGITS_LAST) != LLM_OK)
            die(1, "%s", e->state.error);
        decoded++;
    }
    printf("\n");
    fflush(stdout);
    double t_decode = now_seconds() - t_decode0;
    fprintf(stderr, "prompt: %d tokens, prefill %.1f tok/s | generated: %d tokens, decode %.1f tok/s | time to first token %.2f ms"
            " | sampling %.1f us a token (%.1f%% of decode)\n",
            n_prompt, t_prefill > 0 ? n_prompt / t_prefill : 0.0, generated,
            t_decode > 0 && decoded ? decoded / t_decode : 0.0, t_first * 1e3,
            generated > 1 ? t_sample / (generated - 1) * 1e6 : 0.0, t_decode > 0 ? 100.0 * t_sample / t_decode : 0.0);
}

/* Read one line from stdin (without its newline) into *buf, grown as needed; 0 at EOF. */
static int read_line(const char *prompt, char **buf, size_t *cap) {
    fputs(prompt, stdout);
    fflush(stdout);
    ssize_t len = getline(buf, cap, stdin);
    if (len < 0) return 0;
    if (len && (*buf)[len - 1] == '\n') (*buf)[len - 1] = '\0';
    return 1;
}

/* Every id the model is fed must have an embedding row: a tokenizer may have
 * special tokens past the model's vocabulary (Gemma 3's <image_soft_token>),
 * which reach here only when typed with --special. */
static void check_ids_in_model(const engine *e, const int *ids, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->model.cfg.vocab_size) {
            size_t len;
            const char *piece = tok_decode(&e->tok, -1, ids[i], &len);
            die(1, "%s has token %d (%.*s), past the model's vocabulary of %d", what, ids[i], (int)(len > 60 ? 60 : len),
                piece, e->model.cfg.vocab_size);
        }
}

/* One chat turn's ids (malloc'd) in the template. */
static int *encode_turn(engine *e, const tok_chat_turn *turn, int *n_out) {
    size_t scratch_size = tok_chat_scratch_size(&e->tok, turn), most = tok_chat_max_ids(&e->tok, turn);
    if (!scratch_size || !most || most > (size_t)INT32_MAX) die(1, "the chat turn is too long to encode");
    void *scratch = xmalloc(scratch_size, "the tokenizer's scratch");
    int *ids = (int *)xmalloc(most * sizeof(int), "token ids");
    int n = tok_chat_encode(&e->tok, turn, ids, (int)most, scratch, scratch_size);
    free(scratch);
    if (n < 1) die(1, "cannot encode the chat turn: %s", tok_error(&e->tok));
    check_ids_in_model(e, ids, n, "the chat turn");
    *n_out = n;
    return ids;
}

/* --date: as given, or "today" as the current date in today (cap bytes) */
static const char *chat_date(const options *o, char *today, size_t cap) {
    const char *date = o->chat_date;
    if (date && !strcmp(date, "today")) {
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(today, cap, "%d %b %Y", &tm)) die(1, "cannot tell today's date");
        date = today;
    }
    return date;
}

/* A conversation in the chat template (the tokenizer's, or --template). The
 * positions 0, 1, 2, ... hold the first turn, the reply, the end-of-turn
 * token that ended it, the next turn, ...: each turn is appended to the KV
 * cache as one batch and nothing is prefilled again. When the context
 * (-n, --ctx) is full the chat ends: a reply that reaches it is cut short (a
 * note on stderr), a turn that does not fit is an error. */
static void chat(engine *e, const options *o, llm_sampler *smp) {
    int ctx = e->state.ctx_len, steps = o->steps == 0 || o->steps > ctx ? ctx : o->steps;
    int tmpl = o->chat_template >= 0 ? o->chat_template : e->tok.chat_template;
    if (tok_chat_check(&e->tok, tmpl) != TOK_OK) {
        if (e->tok_image) die(1, "checkpoint %s: its GGUF tokenizer: %s (see --template)", o->checkpoint, tok_error(&e->tok));
        die(1, "tokenizer %s: %s (see --template)", o->tokenizer, tok_error(&e->tok));
    }
    int end_id = tok_chat_end_id(&e->tok, tmpl);
    fprintf(stderr, "chat: %s template (%s)\n", tok_chat_template_name(tmpl),
            o->chat_template >= 0 ? "--template" : "the tokenizer's");
    char today[64];
    const char *date = chat_date(o, today, sizeof today);
    char *line = NULL;
    size_t line_cap = 0;
    int pos = 0, first = 1, cut = 0, stop = end_id, n_turns = 0;
    const char *given = o->prompt && o->prompt[0] ? o->prompt : NULL;
    while (pos < steps) {
        if (!given && !read_line("User: ", &line, &line_cap)) break;
        /* a reply that ended at another stop token (eos_id) is closed as the template closes it */
        tok_chat_turn turn = { tmpl, first, first ? o->system_prompt : NULL, given ? given : line, date, stop != end_id };
        given = NULL;
        int n;
        int *ids = encode_turn(e, &turn, &n);
        if (o->verbose_prompt) {
            char what[48];
            snprintf(what, sizeof what, "turn %d in its template", ++n_turns);
            print_prompt_ids(e, what, ids, n);
        }
        if (pos + n >= steps) {
            free(ids);
            free(line);
            die(1, "the context is full: this turn needs %d positions and %d of the %d are left (see -n, --ctx); the chat ends",
                n + 1, steps - pos, steps);
        }
        prefill(e, ids, n, pos);
        pos += n;
        int token = ids[n - 1];
        free(ids);
        first = 0;
        fputs("Assistant: ", stdout);
        /* each sampled token is forwarded at pos, the end-of-turn token that
         * ends the reply too: the next turn follows it in the cache */
        cut = 1;
        while (pos < steps) {
            int next = llm_sample(smp, e->state.logits);
            int end = next == e->tok.eos_id || next == e->tok.eot_id || next == end_id;
            if (!end) print_token(e, token, next);
            token = next;
            if (llm_forward(&e->model, &e->state, &token, 1, pos, LLM_LOGITS_LAST) != LLM_OK)
                die(1, "%s", e->state.error);
            pos++;
            if (end) { cut = 0; stop = next; break; }
        }
        printf("\n");
    }
    fflush(stdout);
    if (pos >= steps)
        fprintf(stderr, "note: the context is full (%d positions)%s: the chat ends\n", steps,
                cut ? " and the last reply is cut short" : "");
    free(line);
}

/* The eval file's text as token ids (BOS first); errors before any output. */
static int *read_eval_tokens(engine *e, const char *path, int *n_out) {
    FILE *f = fopen(path, "rb");
    if (!f) die(1, "cannot open eval file %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = (char *)xmalloc(cap + 1, "the eval text");
    for (size_t r; (r = fread(text + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) {
            char *bigger = (char *)xmalloc(cap * 2 + 1, "the eval text");
            memcpy(bigger, text, len);
            free(text);
            text = bigger;
            cap *= 2;
        }
    }
    if (ferror(f)) die(1, "cannot read eval file %s", path);
    fclose(f);
    text[len] = '\0';
    if (strlen(text) != len) die(1, "eval file %s contains a NUL byte: not a text file", path);
    int *ids = encode_text(e, text, e->tok.add_bos, 0, n_out);
    free(text);
    check_ids_in_model(e, ids, *n_out, "the eval text");
    if (*n_out < 2) die(1, "eval file %s has no text to score", path);
    return ids;
}

/* Mean negative log-likelihood of a token sequence: windows of the context
 * length overlapping by one token (so every token after the first is scored
 * once), each run in batches; token i+1 is scored by the logits at token i. */
static void eval(engine *e, const int *ids, int n) {
    int ctx = e->state.ctx_len, B = e->state.max_batch, V = e->model.cfg.vocab_size;
    if (ctx < 2) die(2, "eval needs a context of at least 2 (--ctx)");
    double nll = 0.0;
    long scored = 0;
    double t0 = now_seconds(), shown = 0.0;
    int showing = 0;
    /* progress on a terminal, after the first second (RUN_PROGRESS_AFTER=SECONDS
     * sets another delay), a few times a second; elsewhere only the summary below */
    const int tty = isatty(STDERR_FILENO);
    const char *after_env = getenv("RUN_PROGRESS_AFTER");
    const double after = after_env && *after_env ? atof(after_env) : 1.0;
    for (int start = 0; start + 1 < n; start += ctx - 1) {
        int wlen = n - start < ctx ? n - start : ctx;
        for (int done = 0; done + 1 < wlen; done += B) {
            int chunk = wlen - 1 - done < B ? wlen - 1 - done : B;
            if (llm_forward(&e->model, &e->state, ids + start + done, chunk, done, LLM_LOGITS_ALL) != LLM_OK)
                die(1, "%s", e->state.error);
            for (int t = 0; t < chunk; t++) {
                const float *lg = e->state.logits + (size_t)t * V;
                int target = ids[start + done + t + 1];
                float max = lg[0];
                for (int i = 1; i < V; i++) if (lg[i] > max) max = lg[i];
                double sum = 0.0;
                for (int i = 0; i < V; i++) sum += exp((double)lg[i] - max);
                nll += log(sum) + max - lg[target];   /* -log softmax(lg)[target] */
                scored++;
            }
            double t = tty ? now_seconds() - t0 : 0.0;
            if (tty && t >= after && (!showing || t - shown >= 0.25)) {
                shown = t;
                showing = 1;
                fprintf(stderr, "\reval: %ld of %d tokens, %.1f tok/s, perplexity so far %.4f\033[K",
                        scored, n - 1, scored / t, exp(nll / (double)scored));
                fflush(stderr);
            }
        }
    }
    if (showing) fprintf(stderr, "\r\033[K");   /* the summary takes its place */
    double dt = now_seconds() - t0;
    double mean = nll / (double)scored;
    printf("tokens %ld  nll %.6f  ppl %.4f  tok/s %.1f\n", scored, mean, exp(mean), dt > 0 ? scored / dt : 0.0);
}

static void tokenize(engine *e, const options *o) {
    int n;
    int *ids = encode_text(e, o->prompt, e->tok.add_bos, 0, &n);
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
}

static void close_engine(engine *e);

/* -m serve: the server's plan (--info), its one arena, then serve until SIGINT or SIGTERM */
static int serve_mode(engine *e, const options *o) {
    plan_state(e, o, 1);   /* the context, checked as every mode's */
    serve_config sc = o->serve;
    sc.ctx = e->plan.ctx_len;
    sc.kv_type = o->kv_type;
    sc.threads = o->threads;
    sc.parallel_min_work = o->wait == WAIT_SPIN ? WAIT_SPIN_MIN_WORK : LLM_PARALLEL_MIN_WORK;
    sc.temperature = o->temperature; sc.topp = o->topp; sc.topk = o->topk; sc.min_p = o->min_p;
    sc.repeat_penalty = o->repeat_penalty; sc.repeat_last_n = o->repeat_last_n;
    char today[64];
    sc.chat_template = o->chat_template; sc.chat_date = chat_date(o, today, sizeof today); sc.system_prompt = o->system_prompt;
    const char *base = strrchr(o->checkpoint, '/');
    sc.model_id = base ? base + 1 : o->checkpoint;
    serve_plan_t p = serve_plan(&e->model.cfg, &sc);
    print_config(e, o, stderr);
    if (o->info) {
        serve_print_plan(&e->model.cfg, &sc, stdout);
        close_engine(e);
        return 0;
    }
    unsigned long long other = e->tok_arena_size + e->model_arena_size + e->repack_size +
                               (e->ckpt_file.copied ? e->ckpt_file.size : 0);
    if (p.total + other > o->max_memory || p.total > (uint64_t)SIZE_MAX / 2)
        die(1, "the server needs %llu bytes (%.1f MiB) for %d slots of context %d, above the memory limit of %llu bytes: "
            "lower --parallel or --ctx, or raise --max-memory", (unsigned long long)p.total, p.total / 1048576.0,
            sc.parallel, sc.ctx, o->max_memory);
    void *arena = xmalloc_big((size_t)p.total, "the server's slots");
    serve_server *sv;
    const char *err = serve_init(&sv, &e->model, &e->tok, &sc, arena);
    if (err) die(1, "%s", err);
    int rc = serve_run(sv);
    if (serve_threads_left(sv)) return rc;   /* their memory ends with the process */
    serve_free(sv);
    free(arena);
    close_engine(e);
    return rc;
}

static void close_engine(engine *e) {
    free(e->arena);
    free(e->tok_arena);
    free(e->model_arena);
    free(e->repack_arena);
    unmap_file(&e->ckpt_file);
    if (e->tok_image) { free(e->tok_image); e->tok_file.data = NULL; }
    free(e->tok_system);
    unmap_file(&e->tok_file);
}

int main(int argc, char **argv) {
    options o = parse_options(argc, argv);
    o.wait = apply_wait(o.wait, o.threads, !strcmp(o.mode, "tokenize"), argv);
    engine e;
    memset(&e, 0, sizeof e);

    if (!strcmp(o.mode, "tokenize")) {
        /* a GGUF carries its tokenizer: without -z, that one */
        if (!o.tokenizer_given && o.checkpoint && is_gguf(o.checkpoint)) {
            load_checkpoint(&e, &o);
            load_gguf_tokenizer(&e, o.checkpoint);
        } else load_tokenizer(&e, o.tokenizer, 0);
        e.tok.parse_special = o.special;
        tokenize(&e, &o);
        close_engine(&e);
        return 0;
    }

    int is_eval = !strcmp(o.mode, "eval");
    /* the state's batch is the prompt's length, known only after encoding */
    load_checkpoint(&e, &o);
    if (!o.tokenizer_given && e.model.cfg.format == LLM_FORMAT_GGUF) load_gguf_tokenizer(&e, o.checkpoint);
    else if (!o.info || o.tokenizer_given) load_tokenizer(&e, o.tokenizer, e.model.cfg.vocab_size);
    e.tok.parse_special = o.special;
    if (!strcmp(o.mode, "serve")) return serve_mode(&e, &o);

    int n_prompt = 0, *prompt = NULL;
    if (!strcmp(o.mode, "generate") && e.tok_file.data) {
        prompt = encode_text(&e, o.prompt, e.tok.add_bos, 0, &n_prompt);
        check_ids_in_model(&e, prompt, n_prompt, "the prompt");
        if (n_prompt == 0 && !o.info) die(2, "the prompt is empty and this tokenizer adds no BOS: give a prompt with -i");
        if (o.verbose_prompt) print_prompt_ids(&e, "the prompt", prompt, n_prompt);
    }
    if (is_eval && e.tok_file.data) prompt = read_eval_tokens(&e, o.eval_file, &n_prompt);
    int max_batch = is_eval ? 64 : !strcmp(o.mode, "chat") ? 256 : n_prompt;
    if (max_batch > PREFILL_BATCH_MAX) max_batch = PREFILL_BATCH_MAX;
    if (max_batch < 1) max_batch = 1;
    plan_state(&e, &o, max_batch);
    if (o.info) {   /* the plan, with nothing allocated */
        print_config(&e, &o, stderr);
        print_plan(&e, &o);
        free(prompt);
        close_engine(&e);
        return 0;
    }
    open_state(&e, &o);
    print_config(&e, &o, stderr);

    llm_sampler smp;
    memset(&smp, 0, sizeof smp);
    smp.vocab_size = e.model.cfg.vocab_size;
    smp.temperature = o.temperature;
    smp.topp = o.topp;
    smp.topk = o.topk;
    smp.rng_state = (uint64_t)o.seed;
    smp.candidates = (int *)xmalloc(LLM_SAMPLER_CANDIDATES(smp.vocab_size) * sizeof(int), "the sampler");
    /* the sampler judges min-p after temperature: P^(1/T) there is P before it */
    smp.min_p = o.min_p > 0.0f && o.temperature > 0.0f ? powf(o.min_p, 1.0f / o.temperature) : o.min_p;
    if (o.repeat_penalty != 1.0f && o.repeat_last_n != 0) {
        smp.repeat_penalty = o.repeat_penalty;
        smp.repeat_last_n = o.repeat_last_n < 0 ? e.state.ctx_len : o.repeat_last_n;
        smp.recent = (int *)xmalloc((size_t)smp.repeat_last_n * sizeof(int), "the repeat penalty's window");
    }
    e.sampler = &smp;

    if (!strcmp(o.mode, "generate")) generate(&e, &o, prompt, n_prompt, &smp);
    else if (!strcmp(o.mode, "chat")) chat(&e, &o, &smp);
    else eval(&e, prompt, n_prompt);

    free(prompt);
    free(smp.candidates);
    free(smp.recent);
    close_engine(&e);
    return 0;
}
