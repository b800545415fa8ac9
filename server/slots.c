/* server/slots.c -- the server's engine thread (serve.h, serve_impl.h): its
 * K slots, each a KV cache and a sampler, and the plan of the arena that
 * holds them. Each step gives every decoding slot its next token and the
 * prefilling slots a chunk of their prompts, all in one llm_forward_batch
 * call, and samples each finished row with that slot's own sampler, so a
 * slot's text is bit for bit llm_forward's on the same tokens: the CLI's. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve_impl.h"

serve_plan_t serve_plan(const llm_config *c, const serve_config *sc) {
    serve_plan_t p;
    int batch = sc->parallel + SERVE_PREFILL_CHUNK;
    if (batch > c->seq_len) batch = c->seq_len;
    if (batch > LLM_MAX_BATCH) batch = LLM_MAX_BATCH;
    llm_state_options w = { batch, batch, 1, sc->kv_type };   /* its cache unused: the least init takes */
    llm_state_options s = { sc->ctx, 1, 0, sc->kv_type };
    p.work = w;
    p.slot = s;
    p.work_bytes = llm_state_plan(c, &w).total;
    p.slot_bytes = llm_state_plan(c, &s).total;
    p.total = p.work_bytes + (uint64_t)sc->parallel * p.slot_bytes;
    return p;
}

void serve_print_plan(const llm_config *c, const serve_config *sc, FILE *out) {
    serve_plan_t p = serve_plan(c, sc);
    double MB = 1024.0 * 1024.0;
    llm_plan sp = llm_state_plan(c, &p.slot);
    fprintf(out, "server plan (--parallel %d, context %d a slot, %s KV cache, batch of %d tokens a step):\n", sc->parallel,
            sc->ctx, llm_kv_type_name(sc->kv_type), p.work.max_batch);
    fprintf(out, "  work state   %12llu bytes  %8.2f MiB  (the batch's activations and %d rows of logits)\n",
            (unsigned long long)p.work_bytes, p.work_bytes / MB, p.work.max_batch);
    fprintf(out, "  slots        %12llu bytes  %8.2f MiB  (%d x %llu: kv cache %llu + one token's activations)\n",
            (unsigned long long)(p.total - p.work_bytes), (p.total - p.work_bytes) / MB, sc->parallel,
            (unsigned long long)p.slot_bytes, (unsigned long long)(sp.key_cache + sp.value_cache + 2 * sp.kv_scales));
    fprintf(out, "  server arena %12llu bytes  %8.2f MiB  (one allocation)\n", (unsigned long long)p.total, p.total / MB);
    fprintf(out, "  per request  at most %zu bytes of body (--max-body), %d JSON values, %d messages, queue of %d\n",
            sc->max_body, SERVE_MAX_VALUES, SERVE_MAX_MESSAGES, sc->queue);
}

/* ---- the engine thread ---- */

static void serve__append(serve_request *r, const char *s, size_t n) {
    if (r->text_cap - r->text_len < n + 1) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap - r->text_len < n + 1) cap *= 2;
        char *p = (char *)realloc(r->text, cap);
        if (!p) { r->failed = 1; return; }
        r->text = p;
        r->text_cap = cap;
    }
    memcpy(r->text + r->text_len, s, n);
    r->text_len += n;
    r->text[r->text_len] = '\0';
}

/* After text was appended: cut at the first stop string (1: one was found),
 * and move `ready` to the end less what might begin a stop string or a
 * UTF-8 character. */
static int serve__check_stops(serve_request *r, size_t before) {
    size_t cut = (size_t)-1;
    for (int i = 0; i < r->n_stops; i++) {
        size_t sl = strlen(r->stops[i]);
        size_t from = before >= sl ? before - sl + 1 : 0;
        for (size_t at = from; at + sl <= r->text_len; at++)
            if (!memcmp(r->text + at, r->stops[i], sl)) { if (at < cut) cut = at; break; }
    }
    if (cut != (size_t)-1) {
        r->text_len = cut;
        r->text[cut] = '\0';
        r->ready = cut;
        return 1;
    }
    size_t ready = r->text_len;
    for (int i = 0; i < r->n_stops; i++) {
        size_t sl = strlen(r->stops[i]);
        for (size_t k = sl - 1; k > 0; k--)
            if (k <= r->text_len && !memcmp(r->text + r->text_len - k, r->stops[i], k)) {
                if (r->text_len - k < ready) ready = r->text_len - k;
                break;
            }
    }
    r->ready = json_utf8_complete(r->text, ready);
    return 0;
}

static void serve__finish(serve_server *sv, serve_slot *s, const char *why) {
    serve_request *r = s->req;
    r->finish = why;
    r->done = 1;
    r->ready = r->text_len;
    pthread_cond_signal(&r->cond);
    s->req = NULL;
    (void)sv;
}

/* 1 when the token ends the text: in a chat the end of turn (the
 * template's, eos, eot); elsewhere what ends the CLI's generate mode
 * (tok_ends_text) */
static int serve__is_end(const serve_server *sv, const serve_request *r, int token) {
    const tok_tokenizer *t = sv->tok;
    if (r->chat) return token == t->eos_id || token == t->eot_id || token == r->end_id;
    return tok_ends_text(t, token);
}

/* Sample slot s's next token from logits and deliver its text (lock held). */
static void serve__next_token(serve_server *sv, serve_slot *s, float *logits) {
    serve_request *r = s->req;
    int next = llm_sample(&s->smp, logits);
    if (serve__is_end(sv, r, next)) { serve__finish(sv, s, "stop"); return; }
    size_t len, before = r->text_len;
    const char *piece = tok_decode(sv->tok, s->token, next, &len);
    /* as the CLI prints it: a lone control byte is skipped */
    if (len == 1 && (unsigned char)piece[0] < 0x80 && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0])))
        len = 0;
    if (len) serve__append(r, piece, len);
    r->n_completion++;
    s->token = next;
    if (r->failed) { serve__finish(sv, s, "length"); return; }
    if (serve__check_stops(r, before)) { serve__finish(sv, s, "stop"); return; }
    if (r->n_completion >= r->max_tokens || s->pos >= s->state.ctx_len) { serve__finish(sv, s, "length"); return; }
    if (r->ready > before) pthread_cond_signal(&r->cond);
}

/* A queued request into a free slot: its sampler seeded, the prompt's tokens in its penalty window. */
static void serve__start(serve_server *sv, serve_slot *s, serve_request *r) {
    s->req = r;
    s->fed = 0;
    s->pos = 0;
    s->token = -1;
    llm_sampler *m = &s->smp;
    int *cand = m->candidates;
    memset(m, 0, sizeof *m);
    m->candidates = cand;
    m->vocab_size = sv->model->cfg.vocab_size;
    m->temperature = r->temperature;
    m->topp = r->topp;
    m->topk = r->topk;
    m->rng_state = r->seed;
    m->min_p = r->min_p > 0.0f && r->temperature > 0.0f ? powf(r->min_p, 1.0f / r->temperature) : r->min_p;
    if (r->repeat_penalty != 1.0f && r->repeat_last_n != 0) {
        m->repeat_penalty = r->repeat_penalty;
        m->repeat_last_n = r->repeat_last_n < 0 || r->repeat_last_n > s->state.ctx_len ? s->state.ctx_len : r->repeat_last_n;
        m->recent = s->recent;
        for (int i = 0; i < r->n_prompt; i++) llm_sampler_accept(m, r->prompt[i]);
    }
}

void *serve__engine(void *arg) {
    serve_server *sv = (serve_server *)arg;
    int K = sv->cfg.parallel, B = sv->work.max_batch;
    llm_batch_item *items = (llm_batch_item *)calloc((size_t)K, sizeof *items);
    int *which = (int *)calloc((size_t)K, sizeof *which);
    if (!items || !which) { fprintf(stderr, "serve: out of memory\n"); exit(1); }
    pthread_mutex_lock(&sv->lock);
    for (;;) {
        /* the cancelled leave their slots; queued requests take the free ones */
        int active = 0;
        for (int i = 0; i < K; i++) {
            serve_slot *s = &sv->slots[i];
            if (s->req && (s->req->cancelled || sv->stopping)) serve__finish(sv, s, "stop");
            if (!s->req && sv->q_len > 0 && !sv->stopping) {
                serve_request *r = sv->queue[sv->q_head];
                sv->q_head = (sv->q_head + 1) % sv->cfg.queue;
                sv->q_len--;
                serve__start(sv, s, r);
            }
            if (s->req) active++;
        }
        if (sv->stopping && !active) break;
        if (!active) { pthread_cond_wait(&sv->wake, &sv->lock); continue; }
        /* the batch: one token of each decoding slot, then prompt chunks in what is left */
        int n = 0, budget = B;
        for (int i = 0; i < K; i++) {
            serve_slot *s = &sv->slots[i];
            if (!s->req || s->fed < s->req->n_prompt) continue;
            items[n].state = &s->state; items[n].tokens = &s->token; items[n].n = 1; items[n].pos = s->pos;
            which[n++] = i;
            budget--;
        }
        for (int i = 0; i < K && budget > 0; i++) {
            serve_slot *s = &sv->slots[i];
            if (!s->req || s->fed >= s->req->n_prompt) continue;
            int chunk = s->req->n_prompt - s->fed < budget ? s->req->n_prompt - s->fed : budget;
            items[n].state = &s->state; items[n].tokens = s->req->prompt + s->fed; items[n].n = chunk; items[n].pos = s->fed;
            which[n++] = i;
            budget -= chunk;
        }
        pthread_mutex_unlock(&sv->lock);
        int rc = llm_forward_batch(sv->model, &sv->work, items, n);
        pthread_mutex_lock(&sv->lock);
        if (rc != LLM_OK) {   /* never expected: the requests were checked; fail them, keep serving */
            fprintf(stderr, "serve: %s\n", sv->work.error);
            for (int j = 0; j < n; j++) {
                serve_slot *s = &sv->slots[which[j]];
                if (s->req) { s->req->failed = 1; serve__finish(sv, s, "stop"); }
            }
            continue;
        }
        for (int j = 0; j < n; j++) {
            serve_slot *s = &sv->slots[which[j]];
            serve_request *r = s->req;
            float *logits = sv->work.logits + (size_t)j * (size_t)sv->model->cfg.vocab_size;
            if (s->fed < r->n_prompt) {   /* a prompt chunk */
                s->fed += items[j].n;
                s->pos = s->fed;
                if (s->fed < r->n_prompt) continue;
                s->token = r->prompt[r->n_prompt - 1];
            } else s->pos++;
            if (r->cancelled) { serve__finish(sv, s, "stop"); continue; }
            serve__next_token(sv, s, logits);
        }
    }
    pthread_mutex_unlock(&sv->lock);
    free(items);
    free(which);
    return NULL;
}

/* ---- setup ---- */

const char *serve_init(serve_server **out, const llm_model *m, tok_tokenizer *tok, const serve_config *cfg, void *arena) {
    serve_server *sv = (serve_server *)calloc(1, sizeof *sv);
    *out = sv;
    if (!sv) return "out of memory";
    sv->model = m;
    sv->tok = tok;
    sv->cfg = *cfg;
    serve_plan_t p = serve_plan(&m->cfg, cfg);
    unsigned char *a = (unsigned char *)arena;
    if (llm_state_init(&sv->work, m, &p.work, a, (size_t)p.work_bytes) != LLM_OK) return sv->work.error;
    sv->work.n_threads = cfg->threads;
    sv->work.parallel_min_work = cfg->parallel_min_work;
    sv->slots = (serve_slot *)calloc((size_t)cfg->parallel, sizeof *sv->slots);
    sv->queue = (serve_request **)calloc((size_t)cfg->queue, sizeof *sv->queue);
    sv->max_conn = cfg->parallel + cfg->queue + 32;
    sv->conn_fds = (int *)malloc((size_t)sv->max_conn * sizeof(int));
    if (!sv->slots || !sv->queue || !sv->conn_fds) return "out of memory";
    for (int i = 0; i < sv->max_conn; i++) sv->conn_fds[i] = -1;
    int V = m->cfg.vocab_size;
    for (int i = 0; i < cfg->parallel; i++) {
        serve_slot *s = &sv->slots[i];
        unsigned char *at = a + p.work_bytes + (size_t)i * p.slot_bytes;
        if (llm_state_init(&s->state, m, &p.slot, at, (size_t)p.slot_bytes) != LLM_OK) return s->state.error;
        /* the caches written once now, as llama.cpp clears its cache at
         * start: a slot's first request would otherwise pay their first-touch
         * page faults (110M q8_0, 4 slots, first request of each: 1.1 s to
         * the first token, 0.09 s once touched) */
        llm_plan sp = llm_state_plan(&m->cfg, &p.slot);
        memset(s->state.key_cache, 0, (size_t)sp.key_cache);
        memset(s->state.value_cache, 0, (size_t)sp.value_cache);
        if (sp.kv_scales) {
            memset(s->state.key_scale, 0, (size_t)sp.kv_scales);
            memset(s->state.value_scale, 0, (size_t)sp.kv_scales);
        }
        s->smp.candidates = (int *)malloc(LLM_SAMPLER_CANDIDATES(V) * sizeof(int));
        s->recent = (int *)malloc((size_t)cfg->ctx * sizeof(int));
        if (!s->smp.candidates || !s->recent) return "out of memory";
    }
    sv->chat_template = cfg->chat_template >= 0 ? cfg->chat_template : tok->chat_template;
    sv->chat_ok = tok_chat_check(tok, sv->chat_template) == TOK_OK;
    sv->end_id = sv->chat_ok ? tok_chat_end_id(tok, sv->chat_template) : -1;
    if (sv->end_id < 0) sv->chat_ok = 0;
    pthread_mutex_init(&sv->lock, NULL);
    pthread_mutex_init(&sv->tok_lock, NULL);
    pthread_cond_init(&sv->wake, NULL);
    return NULL;
}

int serve_threads_left(const serve_server *sv) { return sv->threads_left; }

void serve_free(serve_server *sv) {
    if (!sv) return;
    for (int i = 0; sv->slots && i < sv->cfg.parallel; i++) {
        free(sv->slots[i].smp.candidates);
        free(sv->slots[i].recent);
    }
    free(sv->slots);
    free(sv->queue);
    free(sv->conn_fds);
    free(sv);
}
