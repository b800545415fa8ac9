/* server/serve.c -- `run MODEL -m serve`: an OpenAI-compatible HTTP server
 * (serve.h): the requests, the connections and the listening loop; the
 * engine thread and its slots are in slots.c.
 *
 * Contract: the CLI loads the model and tokenizer and hands them in;
 * serve_run listens, serves until SIGINT or SIGTERM, and returns 0. libc,
 * POSIX sockets and pthreads only.
 *
 * Threads: the main thread accepts connections; each connection has its
 * own thread, which reads and checks the request (http.h, json.h), encodes
 * the prompt, queues the request and writes the answer as the text comes;
 * one engine thread runs the K slots: each step it gives every decoding slot
 * its next token and the prefilling slots a chunk of their prompts, all in
 * one llm_forward_batch call, and samples each finished row with that slot's
 * own sampler. A slot's text is therefore bit for bit llm_forward's on the
 * same tokens, which is the CLI's.
 *
 * Memory: one arena holds the work state (the batch's activations) and the
 * K slot states (each a KV cache of the context), planned up front
 * (serve_plan); --info prints the plan. Per request: the body (at most
 * max_body), its JSON tree, its token ids and its text.
 *
 * Limits (hostile input): request line, headers and body sizes (http.h;
 * body max_body, default 1 MiB, 413 above), JSON values and depth, messages
 * (SERVE_MAX_MESSAGES), stop strings, max_tokens against the context, a
 * timeout for each read and write and for a whole request, connections
 * (503 beyond), the queue (503 when full). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include "serve_impl.h"

static volatile sig_atomic_t serve__signalled;
static void serve__on_signal(int sig) { (void)sig; serve__signalled = 1; }

double serve__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- responses ---- */

static int serve__send(int fd, int status, const char *type, const char *body, size_t len, int keep_alive) {
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n\r\n", status,
                     http_reason(status), type, len, keep_alive ? "keep-alive" : "close");
    if (http_write_all(fd, head, (size_t)n)) return -1;
    return http_write_all(fd, body, len);
}

/* An OpenAI-style error: {"error":{"message","type","code"}} */
static int serve__error(int fd, int status, const char *message, int keep_alive) {
    json_buf b = { 0 };
    const char *type = status == 401 ? "authentication_error" : status == 404 ? "not_found_error"
                     : status == 503 ? "server_busy" : status >= 500 ? "server_error" : "invalid_request_error";
    jb_cstr(&b, "{\"error\":{\"message\":");
    jb_string(&b, message, strlen(message));
    jb_cstr(&b, ",\"type\":");
    jb_string(&b, type, strlen(type));
    jb_cstr(&b, ",\"code\":");
    jb_int(&b, status);
    jb_cstr(&b, "}}");
    int rc = b.failed ? -1 : serve__send(fd, status, "application/json", b.data, b.len, keep_alive);
    jb_free(&b);
    return rc;
}

/* ---- reading a request's fields ---- */

typedef struct serve__parsed {
    int status;             /* 0: fine; else the error to answer */
    char message[200];
} serve__parsed;

static int serve__bad(serve__parsed *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof p->message, fmt, ap);
    va_end(ap);
    p->status = 400;
    return -1;
}

/* a number field in [lo, hi] (absent or null: *out unchanged) */
static int serve__number(serve__parsed *p, const json_doc *d, const json_value *o, const char *key, double lo, double hi,
                         int integer, double *out) {
    const json_value *v = json_get(d, o, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) return serve__bad(p, "'%s' must be a number", key);
    if (integer && v->number != floor(v->number)) return serve__bad(p, "'%s' must be an integer", key);
    if (!(v->number >= lo && v->number <= hi)) return serve__bad(p, "'%s' must be in [%g, %g]", key, lo, hi);
    *out = v->number;
    return 0;
}

/* The sampling fields, stop and stream into r (defaults from the config). */
static int serve__read_fields(serve_server *sv, serve__parsed *p, const json_doc *d, const json_value *o, serve_request *r,
                              int *max_tokens) {
    const serve_config *c = &sv->cfg;
    double t = c->temperature, tp = c->topp, tk = c->topk, mp = c->min_p, rp = c->repeat_penalty, rn = c->repeat_last_n;
    double mt = -1, mct = -1, seed = -1, n = 1;
    if (serve__number(p, d, o, "temperature", 0, 1e6, 0, &t) || serve__number(p, d, o, "top_p", 0, 1, 0, &tp) ||
        serve__number(p, d, o, "top_k", 0, LLM_MAX_VOCAB, 1, &tk) || serve__number(p, d, o, "min_p", 0, 1, 0, &mp) ||
        serve__number(p, d, o, "repeat_penalty", 0.01, 100, 0, &rp) ||
        serve__number(p, d, o, "repeat_last_n", -1, LLM_MAX_SEQ, 1, &rn) ||
        serve__number(p, d, o, "max_tokens", 1, LLM_MAX_SEQ, 1, &mt) ||
        serve__number(p, d, o, "max_completion_tokens", 1, LLM_MAX_SEQ, 1, &mct) ||
        serve__number(p, d, o, "seed", -9007199254740991.0, 9007199254740991.0, 1, &seed) ||
        serve__number(p, d, o, "n", 1, 1, 1, &n))
        return -1;
    r->temperature = (float)t; r->topp = (float)tp; r->topk = (int)tk; r->min_p = (float)mp;
    r->repeat_penalty = (float)rp; r->repeat_last_n = (int)rn;
    /* a seed as the CLI's -s: positive ones as given, else one from the clock */
    if (seed > 0) r->seed = (uint64_t)(long long)seed;
    else {
        pthread_mutex_lock(&sv->lock);
        r->seed = (uint64_t)time(NULL) * 1000003u + ++sv->next_id;
        pthread_mutex_unlock(&sv->lock);
    }
    *max_tokens = mct > 0 ? (int)mct : mt > 0 ? (int)mt : -1;
    const json_value *st = json_get(d, o, "stream");
    if (st && st->type != JSON_NULL && st->type != JSON_TRUE && st->type != JSON_FALSE)
        return serve__bad(p, "'stream' must be true or false");
    r->stream = st && st->type == JSON_TRUE;
    const json_value *stop = json_get(d, o, "stop");
    if (stop && stop->type != JSON_NULL) {
        const json_value *one = stop->type == JSON_STRING ? stop : NULL;
        if (!one && stop->type != JSON_ARRAY) return serve__bad(p, "'stop' must be a string or a list of strings");
        if (!one && stop->count > SERVE_MAX_STOPS) return serve__bad(p, "'stop' holds at most %d strings", SERVE_MAX_STOPS);
        for (const json_value *v = one ? one : json_child(d, stop); v; v = one ? NULL : json_next(d, v)) {
            if (v->type != JSON_STRING) return serve__bad(p, "'stop' must be a string or a list of strings");
            if (v->len == 0) continue;
            if (v->len > SERVE_MAX_STOP_LEN) return serve__bad(p, "a stop string is longer than %d bytes", SERVE_MAX_STOP_LEN);
            memcpy(r->stops[r->n_stops], v->str, v->len + 1);
            r->n_stops++;
        }
    }
    return 0;
}

/* text of a message's content: a string, or a list of {"type":"text","text":...} parts (joined) */
static int serve__content(serve__parsed *p, const json_doc *d, const json_value *m, json_buf *out) {
    const json_value *c = json_get(d, m, "content");
    if (!c || c->type == JSON_NULL) return 0;
    if (c->type == JSON_STRING) { jb_raw(out, c->str, c->len); return 0; }
    if (c->type != JSON_ARRAY) return serve__bad(p, "a message's 'content' must be a string or a list of text parts");
    for (const json_value *part = json_child(d, c); part; part = json_next(d, part)) {
        const json_value *ty = json_get(d, part, "type"), *tx = json_get(d, part, "text");
        if (!ty || ty->type != JSON_STRING || strcmp(ty->str, "text") || !tx || tx->type != JSON_STRING)
            return serve__bad(p, "only text content parts are supported");
        jb_raw(out, tx->str, tx->len);
    }
    return 0;
}

/* append ids[0..n) to the growing prompt */
static int serve__push_ids(serve__parsed *p, int **ids, int *n, int *cap, const int *add, int k) {
    if (*n + k > *cap) {
        int c = *cap ? *cap : 256;
        while (c < *n + k) c *= 2;
        int *q = (int *)realloc(*ids, (size_t)c * sizeof(int));
        if (!q) { p->status = 500; snprintf(p->message, sizeof p->message, "out of memory"); return -1; }
        *ids = q;
        *cap = c;
    }
    memcpy(*ids + *n, add, (size_t)k * sizeof(int));
    *n += k;
    return 0;
}

/* encode text (no BOS) or a chat turn, under the tokenizer's lock */
static int serve__encode(serve_server *sv, serve__parsed *p, const char *text, const tok_chat_turn *turn, int bos,
                         int **ids, int *n, int *cap) {
    size_t len = text ? strlen(text) : 0;
    size_t scratch_size = turn ? tok_chat_scratch_size(sv->tok, turn) : tok_encode_scratch_size(len);
    size_t most = turn ? tok_chat_max_ids(sv->tok, turn) : tok_max_tokens(len);
    if (!scratch_size || !most || most > (size_t)(LLM_MAX_SEQ * 4)) return serve__bad(p, "the text is too long to encode");
    /* one encoding at a time, its scratch (about 47 bytes a byte of text)
     * allocated inside the lock: a crowd of large prompts costs one scratch */
    pthread_mutex_lock(&sv->tok_lock);
    void *scratch = malloc(scratch_size);
    int *tmp = (int *)malloc(most * sizeof(int));
    int k = -1;
    if (scratch && tmp) {
        k = turn ? tok_chat_encode(sv->tok, turn, tmp, (int)most, scratch, scratch_size)
                 : tok_encode(sv->tok, text, bos, 0, tmp, (int)most, scratch, scratch_size);
        if (k < 0) serve__bad(p, "cannot encode the text: %s", tok_error(sv->tok));
        for (int i = 0; i < k; i++)   /* a tokenizer's special ids past the model's (Gemma 3's image token) */
            if (tmp[i] >= sv->model->cfg.vocab_size) {
                k = -1;
                serve__bad(p, "the text has token %d, past the model's vocabulary of %d", tmp[i],
                           sv->model->cfg.vocab_size);
                break;
            }
    } else {
        p->status = 500;
        snprintf(p->message, sizeof p->message, "out of memory");
    }
    free(scratch);
    scratch = NULL;
    pthread_mutex_unlock(&sv->tok_lock);
    int rc = k >= 0 ? serve__push_ids(p, ids, n, cap, tmp, k) : -1;
    free(scratch);
    free(tmp);
    return rc;
}

/* The chat's token ids: the template's turns as -m chat renders them, each
 * earlier assistant message's text and the template's end of turn after it. */
static int serve__chat_prompt(serve_server *sv, serve__parsed *p, const json_doc *d, const json_value *o, serve_request *r) {
    const json_value *msgs = json_get(d, o, "messages");
    if (!msgs || msgs->type != JSON_ARRAY || msgs->count == 0) return serve__bad(p, "'messages' must be a non-empty list");
    if (msgs->count > SERVE_MAX_MESSAGES) return serve__bad(p, "more than %d messages", SERVE_MAX_MESSAGES);
    if (!sv->chat_ok) return serve__bad(p, "this model's tokenizer has no chat template the engine knows: use /v1/completions");
    json_buf system = { 0 }, text = { 0 };
    int have_system = 0, first = 1, expect_user = 1, cap = 0, rc = -1;
    const json_value *m = json_child(d, msgs);
    for (; m; m = json_next(d, m)) {
        const json_value *role = json_get(d, m, "role");
        if (!role || role->type != JSON_STRING) { serve__bad(p, "each message needs a 'role'"); goto out; }
        if (strcmp(role->str, "system") && strcmp(role->str, "developer")) break;
        if (!first) { serve__bad(p, "system messages come before the first user message"); goto out; }
        if (have_system) jb_raw(&system, "\n\n", 2);
        if (serve__content(p, d, m, &system)) goto out;
        have_system = 1;
    }
    jb_raw(&system, "", 0);
    for (; m; m = json_next(d, m)) {
        const json_value *role = json_get(d, m, "role");
        if (!role || role->type != JSON_STRING) { serve__bad(p, "each message needs a 'role'"); goto out; }
        int user = !strcmp(role->str, "user");
        if (!user && strcmp(role->str, "assistant")) {
            serve__bad(p, !strcmp(role->str, "system") ? "system messages come before the first user message"
                                                       : "unknown role '%.40s' (system, user, assistant)", role->str);
            goto out;
        }
        if (user != expect_user) {
            serve__bad(p, user ? "two user messages in a row: an assistant message goes between" : "an assistant message must follow a user message");
            goto out;
        }
        text.len = 0;
        jb_raw(&text, "", 0);
        if (serve__content(p, d, m, &text)) goto out;
        if (system.failed || text.failed || strlen(text.data) != text.len) { serve__bad(p, "message text unusable"); goto out; }
        if (user) {
            tok_chat_turn turn = { sv->chat_template, first, first ? (have_system ? system.data : sv->cfg.system_prompt) : NULL,
                                   text.data, sv->cfg.chat_date, 0 };
            if (serve__encode(sv, p, NULL, &turn, 0, &r->prompt, &r->n_prompt, &cap)) goto out;
            first = 0;
        } else {
            if (serve__encode(sv, p, text.data, NULL, 0, &r->prompt, &r->n_prompt, &cap)) goto out;
            if (serve__push_ids(p, &r->prompt, &r->n_prompt, &cap, &sv->end_id, 1)) goto out;
        }
        expect_user = !user;
    }
    if (expect_user) { serve__bad(p, "the last message must be the user's"); goto out; }
    r->chat = 1;
    r->end_id = sv->end_id;
    rc = 0;
out:
    jb_free(&system);
    jb_free(&text);
    return rc;
}

static int serve__completion_prompt(serve_server *sv, serve__parsed *p, const json_doc *d, const json_value *o,
                                    serve_request *r) {
    const json_value *pr = json_get(d, o, "prompt");
    if (pr && pr->type == JSON_ARRAY && pr->count == 1) pr = json_child(d, pr);
    if (!pr || pr->type != JSON_STRING) return serve__bad(p, "'prompt' must be a string");
    int cap = 0;
    if (serve__encode(sv, p, pr->str, NULL, sv->tok->add_bos, &r->prompt, &r->n_prompt, &cap)) return -1;
    if (r->n_prompt == 0) return serve__bad(p, "the prompt is empty and this tokenizer adds no BOS");
    return 0;
}

/* ---- one connection ---- */

typedef struct serve__conn {
    serve_server *sv;
    int fd, index;
} serve__conn;

static void serve__json_head(json_buf *b, const char *id, const char *object, long long created, const char *model) {
    jb_cstr(b, "{\"id\":");
    jb_string(b, id, strlen(id));
    jb_cstr(b, ",\"object\":\"");
    jb_cstr(b, object);
    jb_cstr(b, "\",\"created\":");
    jb_int(b, created);
    jb_cstr(b, ",\"model\":");
    jb_string(b, model, strlen(model));
}

static void serve__usage(json_buf *b, const serve_request *r) {
    jb_cstr(b, "\"usage\":{\"prompt_tokens\":");
    jb_int(b, r->n_prompt);
    jb_cstr(b, ",\"completion_tokens\":");
    jb_int(b, r->n_completion);
    jb_cstr(b, ",\"total_tokens\":");
    jb_int(b, (long long)r->n_prompt + r->n_completion);
    jb_cstr(b, "}");
}

/* one choice's text (a chunk's delta, or the whole message) */
static void serve__choice(json_buf *b, const serve_request *r, const char *text, size_t len, const char *finish,
                          int stream, int first) {
    jb_cstr(b, ",\"choices\":[{\"index\":0,");
    if (r->chat) {
        jb_cstr(b, stream ? "\"delta\":{" : "\"message\":{");
        if (!stream || first) jb_cstr(b, "\"role\":\"assistant\"");
        if (len || !stream) {
            if (!stream || first) jb_cstr(b, ",");
            jb_cstr(b, "\"content\":");
            jb_string(b, text, len);
        }
        jb_cstr(b, "},");
    } else {
        jb_cstr(b, "\"text\":");
        jb_string(b, text, len);
        jb_cstr(b, ",");
    }
    jb_cstr(b, "\"logprobs\":null,\"finish_reason\":");
    if (finish) jb_string(b, finish, strlen(finish));
    else jb_cstr(b, "null");
    jb_cstr(b, "}]");
}

/* 1 when the peer has closed its end (a read would give EOF) */
static int serve__peer_gone(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Queue the request, then answer: the whole text, or SSE chunks as it comes.
 * Returns 0 when the connection may serve another request. */
static int serve__complete(serve__conn *cn, serve_request *r, int include_usage, int keep_alive) {
    serve_server *sv = cn->sv;
    int fd = cn->fd;
    pthread_mutex_lock(&sv->lock);
    if (sv->stopping || sv->q_len >= sv->cfg.queue) {
        pthread_mutex_unlock(&sv->lock);
        serve__error(fd, 503, sv->stopping ? "the server is stopping" : "the server is busy: every slot and the queue are full", 0);
        return -1;
    }
    unsigned long long id_num = ++sv->next_id;
    sv->queue[(sv->q_head + sv->q_len) % sv->cfg.queue] = r;
    sv->q_len++;
    pthread_cond_signal(&sv->wake);
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", r->chat ? "chatcmpl" : "cmpl", id_num);
    const char *object = r->chat ? (r->stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    long long created = (long long)time(NULL);
    int ok = 0, first = 1;
    size_t sent = 0;
    if (r->stream) {
        pthread_mutex_unlock(&sv->lock);
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
        ok = http_write_all(fd, head, strlen(head)) == 0;
        pthread_mutex_lock(&sv->lock);
    }
    while (ok || !r->stream) {
        /* a stream wakes for new text, a whole answer for the end */
        while (!r->done && (!r->stream || r->ready <= sent) && !sv->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&r->cond, &sv->lock, &ts);
            if (!r->done && serve__peer_gone(fd)) break;
        }
        if (!r->done && (sv->stopping || serve__peer_gone(fd))) { ok = 0; break; }
        if (!r->stream) { if (r->done) { ok = 1; break; } continue; }
        /* a chunk of what is ready (the final one with the finish reason) */
        size_t upto = r->ready;
        int done = r->done;
        json_buf b = { 0 };
        if (upto > sent || first) {
            jb_cstr(&b, "data: ");
            serve__json_head(&b, id, object, created, sv->cfg.model_id);
            serve__choice(&b, r, r->text + sent, upto - sent, NULL, 1, first);
            jb_cstr(&b, "}\n\n");
            first = 0;
            sent = upto;
        }
        if (done) {
            jb_cstr(&b, "data: ");
            serve__json_head(&b, id, object, created, sv->cfg.model_id);
            serve__choice(&b, r, "", 0, r->finish, 1, 0);
            if (include_usage) { jb_cstr(&b, ","); serve__usage(&b, r); }
            jb_cstr(&b, "}\n\ndata: [DONE]\n\n");
        }
        pthread_mutex_unlock(&sv->lock);
        ok = !b.failed && http_write_all(fd, b.data, b.len) == 0;
        jb_free(&b);
        pthread_mutex_lock(&sv->lock);
        if (done) break;
    }
    int left = !r->done;
    if (!r->done) {   /* the client left, a write failed, or the server stops: free the slot */
        r->cancelled = 1;
        pthread_cond_signal(&sv->wake);
        while (!r->done) {
            /* still queued: take it out */
            int found = 0;
            for (int i = 0; i < sv->q_len; i++) {
                int at = (sv->q_head + i) % sv->cfg.queue;
                if (sv->queue[at] == r) found = 1;
                if (found && i + 1 < sv->q_len) sv->queue[at] = sv->queue[(at + 1) % sv->cfg.queue];
            }
            if (found) { sv->q_len--; r->done = 1; break; }
            pthread_cond_wait(&r->cond, &sv->lock);
        }
    }
    pthread_mutex_unlock(&sv->lock);
    /* one line a request: what the tests and the load run read */
    fprintf(stderr, "serve: %s %s: prompt %d + completion %d tokens, %s\n", id, r->stream ? "stream" : "whole",
            r->n_prompt, r->n_completion, left ? "cancelled (the client left or the server stops)" : r->finish);
    if (left) return -1;
    if (r->stream) return -1;   /* the stream ended with the connection */
    if (r->failed) return serve__error(fd, 500, "the engine failed on this request", keep_alive) ? -1 : 0;
    json_buf b = { 0 };
    serve__json_head(&b, id, object, created, sv->cfg.model_id);
    serve__choice(&b, r, r->text ? r->text : "", r->text_len, r->finish, 0, 1);
    jb_cstr(&b, ",");
    serve__usage(&b, r);
    jb_cstr(&b, "}");
    int rc = b.failed ? -1 : serve__send(fd, 200, "application/json", b.data, b.len, keep_alive);
    jb_free(&b);
    return rc;
}

/* POST /v1/chat/completions and /v1/completions */
static int serve__post(serve__conn *cn, const char *body, size_t len, int chat, int keep_alive) {
    serve_server *sv = cn->sv;
    serve__parsed p = { 0, "" };
    /* a value takes a byte at least: a small body plans a small tree */
    int max_values = len + 1 < (size_t)SERVE_MAX_VALUES ? (int)len + 1 : SERVE_MAX_VALUES;
    size_t need = json_arena_size(len, max_values);
    void *arena = need ? malloc(need) : NULL;
    if (!arena) return serve__error(cn->fd, 500, "out of memory", 0), -1;
    json_doc d;
    serve_request *r = (serve_request *)calloc(1, sizeof *r);
    int rc = -1, max_tokens = -1;
    if (!r) { free(arena); return serve__error(cn->fd, 500, "out of memory", 0), -1; }
    pthread_cond_init(&r->cond, NULL);
    if (json_parse(&d, body, len, arena, need, max_values)) {
        p.status = 400;
        snprintf(p.message, sizeof p.message, "%s", d.error);
    } else if (json_root(&d)->type != JSON_OBJECT) {
        serve__bad(&p, "the body must be a JSON object");
    } else if (!serve__read_fields(sv, &p, &d, json_root(&d), r, &max_tokens)) {
        if (!(chat ? serve__chat_prompt(sv, &p, &d, json_root(&d), r) : serve__completion_prompt(sv, &p, &d, json_root(&d), r))) {
            int ctx = sv->cfg.ctx;
            if (r->n_prompt >= ctx)
                serve__bad(&p, "the prompt is %d tokens: it leaves no room in the context of %d", r->n_prompt, ctx);
            else if (max_tokens > ctx - r->n_prompt)
                serve__bad(&p, "max_tokens %d exceeds the %d positions the context of %d leaves after a prompt of %d tokens",
                           max_tokens, ctx - r->n_prompt, ctx, r->n_prompt);
            else r->max_tokens = max_tokens > 0 ? max_tokens : ctx - r->n_prompt;
        }
    }
    int include_usage = 0;
    if (!p.status) {
        const json_value *so = json_get(&d, json_root(&d), "stream_options");
        const json_value *iu = so ? json_get(&d, so, "include_usage") : NULL;
        include_usage = iu && iu->type == JSON_TRUE;
    }
    free(arena);
    if (p.status) rc = serve__error(cn->fd, p.status, p.message, keep_alive) ? -1 : 0;
    else rc = serve__complete(cn, r, include_usage, keep_alive);
    pthread_cond_destroy(&r->cond);
    free(r->prompt);
    free(r->text);
    free(r);
    return rc;
}

/* Route one request; 0: the connection may serve another. */
static int serve__route(serve__conn *cn, const http_request *q, const char *body, size_t len) {
    serve_server *sv = cn->sv;
    int fd = cn->fd, ka = q->keep_alive;
    int is_get = !strcmp(q->method, "GET"), is_post = !strcmp(q->method, "POST");
    if (!strcmp(q->path, "/health")) {
        if (!is_get) return serve__error(fd, 405, "use GET", ka);
        const char *ok = "{\"status\":\"ok\"}";
        return serve__send(fd, 200, "application/json", ok, strlen(ok), ka);
    }
    /* /v1/models/ID: the one model by its id */
    int model_path = !strncmp(q->path, "/v1/models/", 11) && !strcmp(q->path + 11, sv->cfg.model_id);
    int known = !strcmp(q->path, "/v1/models") || model_path || !strcmp(q->path, "/v1/chat/completions") ||
                !strcmp(q->path, "/v1/completions");
    if (!known) return serve__error(fd, 404, "unknown path", ka);
    if (sv->cfg.api_key) {
        const char *a = q->authorization;
        int bearer = !q->auth_too_long && !strncmp(a, "Bearer ", 7);
        /* compared in time that depends on the key's length only */
        if (!http_equal_ct(bearer ? a + 7 : "", sv->cfg.api_key) || !bearer)
            return serve__error(fd, 401, "invalid or missing API key (Authorization: Bearer KEY)", ka);
    }
    if (!strcmp(q->path, "/v1/models") || model_path) {
        if (!is_get) return serve__error(fd, 405, "use GET", ka);
        json_buf b = { 0 };
        if (!model_path) jb_cstr(&b, "{\"object\":\"list\",\"data\":[");
        jb_cstr(&b, "{\"id\":");
        jb_string(&b, sv->cfg.model_id, strlen(sv->cfg.model_id));
        jb_cstr(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"run\"}");
        if (!model_path) jb_cstr(&b, "]}");
        int rc = b.failed ? -1 : serve__send(fd, 200, "application/json", b.data, b.len, ka);
        jb_free(&b);
        return rc;
    }
    if (!is_post) return serve__error(fd, 405, "use POST", ka);
    return serve__post(cn, body, len, !strcmp(q->path, "/v1/chat/completions"), ka);
}

static void *serve__connection(void *arg) {
    serve__conn *cn = (serve__conn *)arg;
    serve_server *sv = cn->sv;
    int fd = cn->fd, timeout = sv->cfg.timeout_ms;
    size_t cap = HTTP_MAX_HEAD;
    char *buf = (char *)malloc(cap);
    size_t have = 0;
    http_set_timeouts(fd, timeout);
    for (int served = 0; buf && served < SERVE_MAX_REQUESTS_PER_CONN && !sv->stopping; served++) {
        /* the head, then the body, each within the timeout from the first byte */
        http_request q;
        double deadline = serve__now() + timeout / 1000.0;
        int head = 0;
        while ((head = http_parse_head(buf, have, &q, sv->cfg.max_body)) == 0) {
            if (serve__now() > deadline || have >= cap) { head = have ? -408 : -1; break; }
            long n = http_read_some(fd, buf + have, cap - have);
            if (n <= 0) { head = have ? -408 : -1; break; }
            have += (size_t)n;
        }
        if (head == -1) break;   /* closed, or idle past the timeout between requests */
        if (head < 0) {
            serve__error(fd, -head, head == -408 ? "the request did not arrive in time" : q.error, 0);
            break;
        }
        size_t len = q.content_length, total = (size_t)head + len;
        if (total > cap) {
            char *bigger = (char *)realloc(buf, total);
            if (!bigger) { serve__error(fd, 500, "out of memory", 0); break; }
            buf = bigger;
            cap = total;
        }
        if (q.expect_continue && have < total) http_write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        int late = 0;
        while (have < total) {
            long n = serve__now() > deadline ? -1 : http_read_some(fd, buf + have, cap - have);
            if (n <= 0) { late = 1; break; }
            have += (size_t)n;
        }
        if (late) { serve__error(fd, 408, "the request body did not arrive in time", 0); break; }
        if (serve__route(cn, &q, buf + head, len) || !q.keep_alive) break;
        memmove(buf, buf + total, have - total);   /* a pipelined next request */
        have -= total;
        if (cap > HTTP_MAX_HEAD && have <= HTTP_MAX_HEAD) {
            char *smaller = (char *)realloc(buf, HTTP_MAX_HEAD);
            if (smaller) { buf = smaller; cap = HTTP_MAX_HEAD; }
        }
    }
    free(buf);
    /* a lingering close: what the client still sends (a body refused
     * unread) is read and dropped for a moment, so the close does not reset
     * the connection before the client has read the answer */
    shutdown(fd, SHUT_WR);
    http_set_timeouts(fd, 100);
    char drop[4096];
    double until = serve__now() + 0.5;
    while (serve__now() < until && http_read_some(fd, drop, sizeof drop) > 0) {}
    pthread_mutex_lock(&sv->lock);
    sv->conn_fds[cn->index] = -1;
    sv->n_conn--;
    pthread_mutex_unlock(&sv->lock);
    close(fd);
    free(cn);
    return NULL;
}

/* Listen on host:port (a numeric IPv4 or IPv6 address, or localhost: no
 * name lookups); -1 with a message on stderr. */
static int serve__listen(const serve_config *c) {
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const char *host = !strcmp(c->host, "localhost") ? "127.0.0.1" : c->host;
    struct sockaddr *sa;
    socklen_t len;
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)c->port);
        sa = (struct sockaddr *)&a4;
        len = sizeof a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)c->port);
        sa = (struct sockaddr *)&a6;
        len = sizeof a6;
    } else {
        fprintf(stderr, "error: --host '%s' is not a numeric IPv4 or IPv6 address (or localhost)\n", c->host);
        return -1;
    }
    int fd = socket(sa->sa_family, SOCK_STREAM, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, sa, len) || listen(fd, 64)) {
        fprintf(stderr, "error: cannot listen on %s port %d: %s\n", c->host, c->port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Serve until SIGINT or SIGTERM: 0, or 1 when the socket cannot be opened. */
int serve_run(serve_server *sv) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);   /* a client gone mid-write is an error return, not a signal */
    sa.sa_handler = serve__on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int fd = serve__listen(&sv->cfg);
    if (fd < 0) return 1;
    sv->listen_fd = fd;
    /* the other threads leave the signals to this one */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pthread_t engine;
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&engine, NULL, serve__engine, sv)) { fprintf(stderr, "error: cannot start a thread\n"); return 1; }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    int port = sv->cfg.port;
    if (!getsockname(fd, (struct sockaddr *)&bound, &blen))
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    int v6 = strchr(sv->cfg.host, ':') != NULL;
    fprintf(stderr, "serve: %s, %d slots, context %d, queue %d: listening on http://%s%s%s:%d\n", sv->cfg.model_id,
            sv->cfg.parallel, sv->cfg.ctx, sv->cfg.queue, v6 ? "[" : "", sv->cfg.host, v6 ? "]" : "", port);
    fflush(stderr);

    while (!serve__signalled) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 100) <= 0) continue;
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&sv->lock);
        int slot = -1;
        for (int i = 0; i < sv->max_conn && slot < 0; i++) if (sv->conn_fds[i] < 0) slot = i;
        serve__conn *cn = slot >= 0 ? (serve__conn *)malloc(sizeof *cn) : NULL;
        if (cn) { sv->conn_fds[slot] = c; sv->n_conn++; }
        pthread_mutex_unlock(&sv->lock);
        if (!cn) {   /* too many connections: say so briefly and close */
            http_set_timeouts(c, 200);
            serve__error(c, 503, "too many connections", 0);
            close(c);
            continue;
        }
        cn->sv = sv; cn->fd = c; cn->index = slot;
        pthread_t t;
        pthread_sigmask(SIG_BLOCK, &block, &old);
        int failed = pthread_create(&t, &detached, serve__connection, cn);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (failed) {
            pthread_mutex_lock(&sv->lock);
            sv->conn_fds[slot] = -1;
            sv->n_conn--;
            pthread_mutex_unlock(&sv->lock);
            close(c);
            free(cn);
        }
    }
    /* stop: no new connections; streams in flight are cancelled, the
     * connections shut down, and whatever is left after 1.5 s ends with the process */
    close(fd);
    fprintf(stderr, "serve: stopping\n");
    pthread_mutex_lock(&sv->lock);
    sv->stopping = 1;
    pthread_cond_broadcast(&sv->wake);
    for (int i = 0; i < sv->cfg.parallel; i++) if (sv->slots[i].req) pthread_cond_broadcast(&sv->slots[i].req->cond);
    for (int i = 0; i < sv->max_conn; i++) if (sv->conn_fds[i] >= 0) shutdown(sv->conn_fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&sv->lock);
    double until = serve__now() + 1.5;
    int left = 1;
    while (serve__now() < until) {
        pthread_mutex_lock(&sv->lock);
        left = sv->n_conn;
        pthread_mutex_unlock(&sv->lock);
        if (!left) break;
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep(&ts, NULL);
    }
    /* the engine thread ends after its step in flight (every slot is finished) */
    pthread_join(engine, NULL);
    pthread_attr_destroy(&detached);
    sv->threads_left = left;
    return 0;
}
