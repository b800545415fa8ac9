/* server/serve_impl.h -- what the server's two parts share: its limits,
 * the request, slot and server records, and the functions one part calls
 * in the other (serve.c: requests and connections; slots.c: the engine
 * thread). Internal: the CLI includes serve.h. */
#ifndef SERVE_IMPL_H
#define SERVE_IMPL_H

#include <pthread.h>
#include "serve.h"
#include "http.h"
#include "json.h"
#include "../sampler.h"

#define SERVE_MAX_MESSAGES 256
#define SERVE_MAX_STOPS 8
#define SERVE_MAX_STOP_LEN 256
#define SERVE_MAX_VALUES 65536          /* JSON values in one request */
#define SERVE_PREFILL_CHUNK 128         /* prompt tokens a step may take beside the decoding slots */
#define SERVE_MAX_REQUESTS_PER_CONN 1000

/* ---- requests and slots ---- */

typedef struct serve_request {
    /* set by the connection thread before queueing, read-only after */
    int *prompt;
    int n_prompt, max_tokens, chat, stream;
    float temperature, topp, min_p, repeat_penalty;
    int topk, repeat_last_n;
    uint64_t seed;
    char stops[SERVE_MAX_STOPS][SERVE_MAX_STOP_LEN + 1];
    int n_stops, end_id;
    /* the engine thread's output, under the server's lock */
    char *text;
    size_t text_len, text_cap;
    size_t ready;           /* text[0..ready) may be sent: no stop string can start in it */
    int n_completion, done, failed;
    const char *finish;     /* "stop" or "length" */
    int cancelled;          /* the client left: the engine frees the slot */
    pthread_cond_t cond;
} serve_request;

typedef struct serve_slot {
    llm_state state;
    llm_sampler smp;
    int *recent;            /* the penalty window's buffer (the context's length) */
    serve_request *req;     /* NULL: free */
    int fed;                /* prompt tokens in the cache */
    int pos;                /* the next position */
    int token;              /* decode: the token to run next; also the previous token for decoding pieces */
} serve_slot;

struct serve_server {
    const llm_model *model;
    tok_tokenizer *tok;
    serve_config cfg;
    llm_state work;
    serve_slot *slots;
    int chat_template, end_id, chat_ok;
    pthread_mutex_t lock;   /* queue, slots' requests, request outputs, counters */
    pthread_mutex_t tok_lock;
    pthread_cond_t wake;    /* the engine thread: a request queued, or stopping */
    serve_request **queue;
    int q_head, q_len;
    int stopping;
    int n_conn, max_conn;
    int *conn_fds;          /* open connections (shut down at exit) */
    unsigned long long next_id;
    int listen_fd;
    int threads_left;       /* connections still open at exit: nothing may be freed */
};

double serve__now(void);
/* the engine thread: runs the slots until the server stops (arg: the server) */
void *serve__engine(void *arg);

#endif
