/* options.h -- the command line of run: every flag's value, checked
 * (options.c). A bad flag is one line "error: ..." and exit status 2;
 * --help prints the usage and exits 0. */
#ifndef OPTIONS_H
#define OPTIONS_H

#include "server/serve.h"   /* serve_config: -m serve's flags */

enum { MMAP_AUTO = -1, MMAP_OFF = 0, MMAP_ON = 1 };

typedef struct options {
    const char *checkpoint, *tokenizer, *prompt, *system_prompt, *mode, *eval_file;
    float temperature, topp;
    float min_p, repeat_penalty;           /* 0, 1: off */
    int repeat_last_n;                     /* -1: the context length */
    int topk, steps, threads, ctx, info, kv_type;
    int wait;                              /* WAIT_*: how idle threads wait */
    int tokenizer_given;                   /* -z was on the command line */
    int special;                           /* --special: text may produce special tokens */
    int verbose_prompt;                    /* --verbose-prompt: the prompt's ids and pieces to stderr */
    long long seed;
    int norm_type, norm_pos, final_norm;   /* -1: the checkpoint's */
    int qk_norm;                           /* -1: the checkpoint's */
    int repack;                            /* 1: 4-bit matrices into the tiles' panels at load */
    int mmap;                              /* MMAP_AUTO, MMAP_ON (weights read in place), MMAP_OFF (copied) */
    float norm_eps;                        /* 0: the checkpoint's  */
    unsigned long long max_memory;         /* bytes the state, tokenizer, repacked and copied weights may take */
    int chat_template;                     /* --template: a tok_chat_template, -1: the tokenizer's */
    const char *chat_date;                 /* --date: llama3.1's Today Date, NULL: its default */
    serve_config serve;                    /* -m serve: --host, --port, --parallel, ... */
} options;

/* The options argv gives, defaults filled in (the threads, the seed and the
 * memory limit from the machine where not given). */
options parse_options(int argc, char **argv);

#endif
