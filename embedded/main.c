/* main.c -- the engine on a bare-metal Cortex-M: generate text from a
 * checkpoint and a tokenizer linked in as const data, read in place from
 * flash, with every byte of working memory reserved statically.
 *
 * Contract: does what `./run CKPT -z TOK -t T -p P -k K -s SEED -n STEPS -i
 * PROMPT --ctx CTX --kv KV` does and prints the same bytes on stdout: the
 * prompt's text and its continuation, then one "\n" (run.c's generate():
 * BOS + prompt, batched prefill, then sample / print / forward until BOS or
 * STEPS positions). stderr gets the model line, the memory plan exactly as
 * `./run ... --info` prints it, and a closing line with the generated count
 * and the stack's high-water mark. Exit status 0; 1 for a bad checkpoint or
 * tokenizer; 3 if the engine's plan differs from the one reserved at build
 * time (build/embedded/CONFIG/plan.h, made by plan.c on the host).
 *
 * Build-time parameters (-D): EMB_TEMPERATURE, EMB_TOPP, EMB_TOPK, EMB_SEED,
 * EMB_STEPS; the prompt, context and KV type come with plan.h (EMB_PLAN_*).
 */
#include <stdint.h>
#define MODEL_IMPLEMENTATION
#include "model.h"
#include "tokenizer.h"
#include "sampler.h"
#include "board.h"
#include "plan.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#ifndef EMB_TEMPERATURE
#define EMB_TEMPERATURE 1.0
#endif
#ifndef EMB_TOPP
#define EMB_TOPP 0.9
#endif
#ifndef EMB_TOPK
#define EMB_TOPK 0
#endif
#ifndef EMB_SEED
#define EMB_SEED 42
#endif
#ifndef EMB_STEPS
#define EMB_STEPS 256
#endif
#if EMB_SEED <= 0
#error "EMB_SEED must be positive (there is no clock to seed from)"
#endif

/* The checkpoint and the tokenizer, 64-byte aligned in flash (model.S). */
extern const unsigned char emb_ckpt[], emb_ckpt_end[], emb_tok[], emb_tok_end[];

/* All working memory, sized on the host from the engine's own plan. Not
 * zeroed at reset (.noinit): llm_state_init and tok_init initialise it. */
#define EMB_NOINIT(align) __attribute__((section(".noinit"), aligned(align)))
static unsigned char state_arena[EMB_PLAN_STATE_BYTES] EMB_NOINIT(LLM_ALIGN);
static unsigned char model_arena[EMB_PLAN_MODEL_BYTES] EMB_NOINIT(LLM_ALIGN);
static unsigned char tok_arena[EMB_PLAN_TOK_ARENA_BYTES] EMB_NOINIT(8);
static unsigned char encode_scratch[EMB_PLAN_SCRATCH_BYTES] EMB_NOINIT(8);
static int prompt_ids[EMB_PLAN_PROMPT_MAX_TOKENS] EMB_NOINIT(8);
static int candidates[EMB_PLAN_CANDIDATES] EMB_NOINIT(8);
static llm_model model;
static llm_state state;
static tok_tokenizer tok;

/* --------------------------------------------------------------------- */
/* Output: stdout buffered (flushed at the end and when full), stderr by line */
/* --------------------------------------------------------------------- */

static char out_buf[128];
static size_t out_len;

static void out_flush(void) {
    emb_write(EMB_STDOUT, out_buf, out_len);
    out_len = 0;
}

static void out_bytes(const char *p, size_t n) {
    while (n > 0) {
        size_t k = sizeof out_buf - out_len < n ? sizeof out_buf - out_len : n;
        memcpy(out_buf + out_len, p, k);
        out_len += k; p += k; n -= k;
        if (out_len == sizeof out_buf) out_flush();
    }
}

/* A line for stderr in a fixed buffer: %s %d %zu, a width before d/zu
 * (right-aligned), and %M: size_t bytes as MiB, "%8.2f" of bytes / 2^20
 * rounded as glibc's printf rounds (to nearest, ties to even). */
typedef struct line { char buf[256]; size_t len; } line;

static void line_putc(line *l, char c) { if (l->len < sizeof l->buf) l->buf[l->len++] = c; }

static void line_putu(line *l, unsigned long long v, int width, int neg) {
    char d[24];
    int n = 0;
    do { d[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    if (neg) d[n++] = '-';
    for (int i = n; i < width; i++) line_putc(l, ' ');
    while (n) line_putc(l, d[--n]);
}

static void line_mib(line *l, size_t bytes) {
    unsigned long long hundredths = (unsigned long long)bytes * 100 >> 20;
    unsigned long long rem = (unsigned long long)bytes * 100 & ((1ull << 20) - 1), half = 1ull << 19;
    if (rem > half || (rem == half && (hundredths & 1))) hundredths++;
    line l2 = { { 0 }, 0 };
    line_putu(&l2, hundredths / 100, 0, 0);
    line_putc(&l2, '.');
    line_putc(&l2, (char)('0' + hundredths / 10 % 10));
    line_putc(&l2, (char)('0' + hundredths % 10));
    for (size_t i = l2.len; i < 8; i++) line_putc(l, ' ');
    for (size_t i = 0; i < l2.len; i++) line_putc(l, l2.buf[i]);
}

static void err_printf(const char *fmt, ...) {
    line l;
    va_list ap;
    l.len = 0;
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') { line_putc(&l, *f); continue; }
        int width = 0;
        while (f[1] >= '0' && f[1] <= '9') width = width * 10 + (*++f - '0');
        f++;
        if (*f == 'd') { int v = va_arg(ap, int); line_putu(&l, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, width, v < 0); }
        else if (*f == 'z') { f++; line_putu(&l, va_arg(ap, size_t), width, 0); }
        else if (*f == 'l' && f[1] == 'l') { f += 2; line_putu(&l, va_arg(ap, unsigned long long), width, 0); }
        else if (*f == 'M') line_mib(&l, va_arg(ap, size_t));
        else if (*f == 's') { for (const char *s = va_arg(ap, const char *); *s; s++) line_putc(&l, *s); }
        else line_putc(&l, *f);
    }
    va_end(ap);
    emb_write(EMB_STDERR, l.buf, l.len);
}

static void fail(int status, const char *what, const char *msg) {
    out_flush();
    err_printf("error: %s: %s\n", what, msg);
    emb_exit(status);
}

/* --------------------------------------------------------------------- */
/* What run.c prints                                                      */
/* --------------------------------------------------------------------- */

/* run.c's print_piece: skip a lone byte that is neither printable nor space
 * (C locale: the ASCII classes). */
static void print_piece(const char *piece, size_t len) {
    if (len == 0) return;
    if (len == 1) {
        unsigned char b = (unsigned char)piece[0];
        int printable = b >= 0x20 && b < 0x7f, space = b == ' ' || (b >= '\t' && b <= '\r');
        if (b < 0x80 && !(printable || space)) return;
    }
    out_bytes(piece, len);
}

static void print_token(int prev, int token) {
    size_t len;
    const char *piece = tok_decode(&tok, prev, token, &len);
    print_piece(piece, len);
}

/* run.c's print_config (first line) and print_plan, on stderr. */
static void print_plan(const llm_state_options *so, size_t ckpt_bytes, size_t tok_bytes) {
    const llm_config *c = &model.cfg;
    llm_plan p = llm_state_plan(c, so);   /* uint64_t fields: unsigned long long on these targets */
    err_printf("model: dim %d, hidden %d, layers %d, heads %d (kv %d, head size %d), vocab %d, seq_len %d, %s weights%s%s\n",
               c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size, c->vocab_size,
               c->seq_len, llm_type_name(c->weight_type), c->shared_classifier ? ", shared classifier" : "",
               c->format == LLM_FORMAT_LEGACY ? " (llama2.c format)" : "");
    err_printf("memory plan (context %d, batch %d, %s KV cache):\n", so->ctx_len, so->max_batch, llm_kv_type_name(so->kv_type));
    err_printf("  weights      %12zu bytes  %M MiB  (read in place from the file)\n", ckpt_bytes, ckpt_bytes);
    /* the device's plan fits its address space (llm_state_init took it) */
    size_t kv = (size_t)(p.key_cache + p.value_cache + 2 * p.kv_scales), total = (size_t)p.total;
    err_printf("  kv cache     %12zu bytes  %M MiB  (keys %llu, values %llu, scales 2 x %llu)\n", kv, kv,
               p.key_cache, p.value_cache, p.kv_scales);
    size_t act = total - kv;
    err_printf("  activations  %12zu bytes  %M MiB  (x %llu, xb %llu, xb2 %llu, q %llu, k/v 2 x %llu, hb %llu, hb2 %llu, rope %llu, logits %llu, act codes %llu; each part 64-aligned)\n",
               act, act, p.x, p.xb, p.xb2, p.q, p.kv_new, p.hb, p.hb2, p.rope, p.logits, p.act_q);
    err_printf("  tokenizer    %12zu bytes  %M MiB  (+ %zu bytes of file read in place)\n", sizeof tok_arena,
               sizeof tok_arena, tok_bytes);
    err_printf("  total RAM    %12zu bytes  %M MiB  (state arena %zu + tokenizer)\n", total + sizeof tok_arena,
               total + sizeof tok_arena, total);
}

/* --------------------------------------------------------------------- */
/* Generation: run.c's generate()                                         */
/* --------------------------------------------------------------------- */

int main(void) {
    size_t ckpt_bytes = (size_t)(emb_ckpt_end - emb_ckpt), tok_bytes = (size_t)(emb_tok_end - emb_tok);
    if (llm_load(&model, emb_ckpt, ckpt_bytes, model_arena, sizeof model_arena) != LLM_OK) fail(1, "checkpoint", model.error);
    const llm_config *c = &model.cfg;
    size_t tok_need = tok_arena_size(emb_tok, tok_bytes, c->vocab_size);
    if (tok_need != 0 && tok_need != sizeof tok_arena)
        fail(3, "tokenizer", "its arena differs from the one the build reserved (plan.h): rebuild");
    if (tok_init(&tok, emb_tok, tok_bytes, c->vocab_size, tok_arena, sizeof tok_arena) != 0)
        fail(1, "tokenizer", tok_error(&tok));
    int n_prompt = tok_encode(&tok, EMB_PLAN_PROMPT, 1, 0, prompt_ids, EMB_PLAN_PROMPT_MAX_TOKENS,
                              encode_scratch, sizeof encode_scratch);
    if (n_prompt < 0) fail(1, "cannot encode the prompt", tok_error(&tok));

    /* run.c's rules: context CTX (0: seq_len), prefill batch = the prompt, at most 512 and the context */
    int ctx = EMB_PLAN_CTX ? EMB_PLAN_CTX : c->seq_len;
    int batch = n_prompt < 512 ? n_prompt : 512;
    if (batch > ctx) batch = ctx;
    if (batch < 1) batch = 1;
    llm_state_options so = { ctx, batch, 0, EMB_PLAN_KV };
    size_t need = llm_state_size(c, &so);
    print_plan(&so, ckpt_bytes, tok_bytes);
    if (need != sizeof state_arena) {
        err_printf("error: the engine plans %zu bytes of state but the build reserved %zu (plan.h): rebuild\n",
                   need, sizeof state_arena);
        emb_exit(3);
    }
    if (llm_state_init(&state, &model, &so, state_arena, sizeof state_arena) != LLM_OK) fail(1, "state", state.error);

    llm_sampler smp;
    memset(&smp, 0, sizeof smp);   /* min-p and the repeat penalty off */
    smp.vocab_size = c->vocab_size;
    smp.temperature = (float)(EMB_TEMPERATURE);
    smp.topp = (float)(EMB_TOPP);
    smp.topk = EMB_TOPK;
    smp.rng_state = (uint64_t)(EMB_SEED);
    smp.candidates = candidates;
    if (sizeof candidates / sizeof candidates[0] < LLM_SAMPLER_CANDIDATES(c->vocab_size) && smp.temperature != 0.0f &&
        ((smp.topp > 0.0f && smp.topp < 1.0f) || (smp.topk > 0 && smp.topk < c->vocab_size)))
        fail(3, "sampler", "top-p/top-k needs a candidates buffer of twice the vocabulary: rebuild (plan.h)");

    int steps = EMB_STEPS;
    if (steps == 0 || steps > ctx) {
        if (steps > ctx) err_printf("note: -n %d exceeds the context length, clamped to %d\n", steps, ctx);
        steps = ctx;
    }
    if (n_prompt > ctx) fail(1, "prompt", "longer than the context");
    if (n_prompt > steps) fail(2, "prompt", "more tokens than EMB_STEPS: raise it");

    for (int done = 0; done < n_prompt;) {   /* batched prefill */
        int chunk = n_prompt - done < batch ? n_prompt - done : batch;
        if (llm_forward(&model, &state, prompt_ids + done, chunk, done, LLM_LOGITS_LAST) != LLM_OK)
            fail(1, "forward", state.error);
        done += chunk;
    }
    for (int i = 1; i < n_prompt; i++) print_token(prompt_ids[i - 1], prompt_ids[i]);

    /* as llama2.c: the forward at position pos yields the next token, up to position steps-1 */
    int token = prompt_ids[n_prompt - 1], pos = n_prompt - 1, generated = 0;
    for (;;) {
        int next = llm_sample(&smp, state.logits);
        generated++;
        if (next == tok.bos_id) break;
        print_token(token, next);
        token = next;
        if (++pos >= steps) break;
        if (llm_forward(&model, &state, &token, 1, pos, LLM_LOGITS_LAST) != LLM_OK) fail(1, "forward", state.error);
    }
    out_bytes("\n", 1);
    out_flush();
    err_printf("prompt: %d tokens | generated: %d tokens | board %s | stack used %zu of %zu bytes\n", n_prompt,
               generated, emb_board_name, emb_stack_used(), emb_stack_size());
    return 0;
}
