/* server/serve.h -- `run MODEL -m serve`: an OpenAI-compatible HTTP server
 * (server/serve.c: requests and connections; server/slots.c: the engine
 * thread and its slots). What the CLI calls.
 *
 * The CLI loads the model and tokenizer and hands them in; serve_run
 * listens, serves until SIGINT or SIGTERM, and returns 0. libc, POSIX
 * sockets and pthreads only. The design, memory and limits: serve.c's head. */
#ifndef SERVE_H
#define SERVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "../model.h"
#include "../tokenizer.h"

#define SERVE_MAX_PARALLEL 64   /* --parallel at most */

typedef struct serve_config {
    const char *host;
    int port;
    int parallel;           /* slots */
    int queue;              /* requests waiting beyond the slots; more get 503 */
    int timeout_ms;         /* each read and write, and a whole request's arrival */
    size_t max_body;
    const char *api_key;    /* NULL: none asked for */
    const char *model_id;   /* the checkpoint's base name */
    int ctx;                /* positions of each slot's KV cache */
    int kv_type;
    int threads;
    long parallel_min_work;
    /* the sampler's defaults (the CLI's flags); a request's fields override them */
    float temperature, topp, min_p, repeat_penalty;
    int topk, repeat_last_n;
    int chat_template;      /* -1: the tokenizer's */
    const char *chat_date;
    const char *system_prompt;  /* -y: the system prompt when a chat has none (NULL: the tokenizer's) */
} serve_config;

/* What the server's arena holds: the work state and K slot states. */
typedef struct serve_plan_t {
    llm_state_options work, slot;
    uint64_t work_bytes, slot_bytes, total;
} serve_plan_t;

/* The arena's plan for a model and configuration, and its --info lines. */
serve_plan_t serve_plan(const llm_config *c, const serve_config *sc);
void serve_print_plan(const llm_config *c, const serve_config *sc, FILE *out);

typedef struct serve_server serve_server;   /* the running server (server/serve_impl.h) */

/* Carve the work state and the slots from one arena of serve_plan's total
 * (64-byte aligned) into *out (allocated here); NULL, or the reason it failed. */
const char *serve_init(serve_server **out, const llm_model *m, tok_tokenizer *tok, const serve_config *cfg, void *arena);
/* Serve until SIGINT or SIGTERM: 0, or 1 when the socket cannot be opened. */
int serve_run(serve_server *sv);
/* Connections still open after serve_run: then nothing may be freed (their memory ends with the process). */
int serve_threads_left(const serve_server *sv);
void serve_free(serve_server *sv);

#endif
