/* options.c -- run's command line (options.h): the usage text, the
 * flags' parsers with their ranges, and the defaults. */
#define _POSIX_C_SOURCE 200809L
#include "options.h"
#include "model.h"
#include "tokenizer.h"
#include "platform.h"   /* die, parse_wait */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static void usage(FILE *out) {
    fprintf(out,
        "Usage:   run <checkpoint> [options]\n"
        "Example: run stories260K.bin -z tok512.bin -n 256 -i \"Once upon a time\"\n"
        "Options:\n"
        "  -t <float>   temperature in [0,inf), default 1.0 (0 = greedy argmax)\n"
        "  -p <float>   top-p (nucleus) in [0,1], default 0.9 (0 or 1 = off)\n"
        "  -k <int>     top-k, applied before top-p, default 0 (off)\n"
        "  --min-p P    keep tokens at least P times as probable as the most probable,\n"
        "               judged before temperature (llama.cpp's), P in [0,1], default 0 (off)\n"
        "  --repeat-penalty R  divide positive logits of tokens among the last N (the\n"
        "               prompt included), multiply negative ones, R in [0.01,100], default 1 (off)\n"
        "  --repeat-last-n N   the penalty's window in tokens, default 64 (-1 = the context)\n"
        "  -s <int>     random seed, default time(NULL)\n"
        "  -n <int>     steps in total, prompt included, default 256 (0 = context length)\n"
        "  -i <string>  input prompt\n"
        "  -z <string>  tokenizer file, default a GGUF checkpoint's own, else tokenizer.bin\n"
        "  -m <string>  mode: generate|chat|eval|tokenize, default generate\n"
        "  -y <string>  system prompt in chat mode (default: the tokenizer's, if any)\n"
        "  -f <file>    text file to score in eval mode\n"
        "  --threads N  threads (OpenMP), default: all cores\n"
        "  --wait auto|spin|sleep  how idle threads wait between steps, default auto:\n"
        "               spin when every thread has an idle core at start, else sleep\n"
        "  --ctx N      context length (KV cache positions), default the model's seq_len\n"
        "  --kv f32|f16|q8  KV cache storage (q8: int8 with a scale per head), default f32\n"
        "  --norm rms|layer        norm type (default: the checkpoint's)\n"
        "  --norm-pos pre|post|peri|out  norm placement (default: the checkpoint's):\n"
        "               pre  h = x + attn(N(x))           post h = N(x + attn(x))\n"
        "               peri h = x + N(attn(N(x)))        out  h = x + N(attn(x))\n"
        "               (the same around the FFN; a norm the checkpoint lacks has weight 1)\n"
        "  --final-norm on|off     norm before the LM head (default: off for post, else on)\n"
        "  --norm-eps E            norm epsilon (default: the checkpoint's, 1e-5 for llama2.c files)\n"
        "  --qk-norm on|off        RMSNorm of each head's q and k before RoPE (Qwen3); on only\n"
        "               where the checkpoint has the weights (default: on where it has them)\n"
        "  --max-memory SIZE       most RAM the state, tokenizer, repacked weights and the\n"
        "               weights' copy (--mmap) may take, as bytes or with K, M, G or T\n"
        "               (powers of 1024), default half the machine's RAM\n"
        "  --repack on|off  copy the GGUF-type matrices (q4_0, q4_K, q6_K, q8_0) at load\n"
        "               into the layouts this build's kernels read fastest (AVX-512 VNNI\n"
        "               and AVX2 builds; --info shows the RAM), default on\n"
        "  --mmap auto|on|off  on: read the weights in place from the mapped file; off:\n"
        "               copy them into RAM at load, on huge pages where Linux has them\n"
        "               (counted in --max-memory); auto (default): off for files of\n"
        "               16 MiB and more where the OS has transparent huge pages, the\n"
        "               copy takes at most a quarter of --max-memory and no GGUF matrix\n"
        "               is repacked, else on\n"
        "  --template NAME  chat template: llama2, llama3, llama3.1, chatml or gemma (default: the\n"
        "               tokenizer's; llama2 for llama2.c's tokenizer.bin)\n"
        "  --date D     llama3.1 template's \"Today Date\", default " TOK_CHAT_DEFAULT_DATE " (its own);\n"
        "               today: the current date\n"
        "  --special    special tokens (<|eot_id|>, <|im_start|>, ...) in -i/-f text are\n"
        "               matched as those tokens; default: encoded as plain text\n"
        "  --verbose-prompt  print the prompt's ids and pieces, as the model is fed them, to\n"
        "               stderr (generate: the prompt; chat: each turn in its template)\n"
        "  --host H, --port N   serve mode: the address (default 127.0.0.1:8080; port 0: any free one)\n"
        "  --parallel K slots decoded together, each with its own KV cache (default 4)\n"
        "  --queue Q    requests waiting for a slot, more get 503 (default 64)\n"
        "  --api-key KEY  requests must send Authorization: Bearer KEY (default: none)\n"
        "  --timeout S  seconds for each read and write and for a request to arrive (default 30)\n"
        "  --max-body SIZE  largest request body, as --max-memory (default 1M; 413 above)\n"
        "  --info       print the model's configuration and memory plan, then exit\n"
        "               (the tokenizer's share with -z or a GGUF's own; nothing is allocated)\n"
        "  --help       this text\n"
        "Modes:\n"
        "  generate  continue the prompt; text to stdout, statistics to stderr\n"
        "  chat      a conversation in the chat template: -i (or the first line of stdin) is\n"
        "            the first user turn, then one turn per stdin line; a reply ends at the\n"
        "            model's end-of-turn token; each turn is appended to the KV cache, and the\n"
        "            chat ends when the context (-n, --ctx) is full\n"
        "  eval      mean negative log-likelihood and perplexity of the text in -f FILE\n"
        "  tokenize  print the prompt's token ids (BOS first when the tokenizer adds one);\n"
        "            needs only -z and -i (or a GGUF checkpoint and -i)\n"
        "  serve     an OpenAI-compatible HTTP server (README, \"Serving\"): /v1/chat/completions,\n"
        "            /v1/completions, /v1/models, /health; -t, -p, -k, ... are its defaults\n");
}

static long long parse_int(const char *flag, const char *v, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end) die(2, "%s expects an integer, got '%s'", flag, v);
    if (x < lo || x > hi) die(2, "%s %lld out of range (%lld..%lld)", flag, x, lo, hi);
    return x;
}

/* "123", "64K", "512M", "8G", "1T" (powers of 1024) as bytes */
static unsigned long long parse_size(const char *flag, const char *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10), unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1ull << 10;
    else if (*end == 'M' || *end == 'm') unit = 1ull << 20;
    else if (*end == 'G' || *end == 'g') unit = 1ull << 30;
    else if (*end == 'T' || *end == 't') unit = 1ull << 40;
    if (unit > 1) end++;
    if (errno || end == v || *end || v[0] == '-' || x == 0 || x > ULLONG_MAX / unit)
        die(2, "%s expects a positive size such as 512M or 8G, got '%s'", flag, v);
    return x * unit;
}

/* The default memory limit: half the machine's RAM (where it can tell). */
static unsigned long long default_max_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 1ull << 32;
    return (unsigned long long)pages * (unsigned long long)page / 2;
}

static float parse_float(const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) die(2, "%s expects a number, got '%s'", flag, v);
    if (x < lo || x > hi) die(2, "%s %g out of range [%g, %g]", flag, x, lo, hi);
    return (float)x;
}

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

options parse_options(int argc, char **argv) {
    options o;
    memset(&o, 0, sizeof o);
    o.tokenizer = "tokenizer.bin";
    o.prompt = "";
    o.mode = "generate";
    o.temperature = 1.0f;
    o.topp = 0.9f;
    o.repeat_penalty = 1.0f;
    o.repeat_last_n = 64;
    o.steps = 256;
    o.threads = -1;
    o.norm_type = o.norm_pos = o.final_norm = o.qk_norm = -1;
    o.repack = 1;
    o.mmap = MMAP_AUTO;
    o.chat_template = -1;
    o.serve.host = "127.0.0.1";
    o.serve.port = 8080;
    o.serve.parallel = 4;
    o.serve.queue = 64;
    o.serve.timeout_ms = 30000;
    o.serve.max_body = 1 << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        if (!strcmp(a, "--info")) { o.info = 1; continue; }
        if (!strcmp(a, "--special")) { o.special = 1; continue; }
        if (!strcmp(a, "--verbose-prompt")) { o.verbose_prompt = 1; continue; }
        if (a[0] != '-' || a[1] == '\0') {
            if (o.checkpoint) die(2, "unexpected argument '%s' (one checkpoint only; see --help)", a);
            o.checkpoint = a;
            continue;
        }
        if (i + 1 >= argc) die(2, "option %s needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-t")) o.temperature = parse_float(a, v, 0.0, 1e6);
        else if (!strcmp(a, "-p")) o.topp = parse_float(a, v, 0.0, 1.0);
        else if (!strcmp(a, "-k")) o.topk = (int)parse_int(a, v, 0, LLM_MAX_VOCAB);
        else if (!strcmp(a, "--min-p")) o.min_p = parse_float(a, v, 0.0, 1.0);
        else if (!strcmp(a, "--repeat-penalty")) o.repeat_penalty = parse_float(a, v, 0.01, 100.0);
        else if (!strcmp(a, "--repeat-last-n")) o.repeat_last_n = (int)parse_int(a, v, -1, LLM_MAX_SEQ);
        else if (!strcmp(a, "-s")) o.seed = parse_int(a, v, LLONG_MIN, LLONG_MAX);
        else if (!strcmp(a, "-n")) o.steps = (int)parse_int(a, v, 0, INT32_MAX);
        else if (!strcmp(a, "-i")) o.prompt = v;
        else if (!strcmp(a, "-z")) { o.tokenizer = v; o.tokenizer_given = 1; }
        else if (!strcmp(a, "-m")) o.mode = v;
        else if (!strcmp(a, "-y")) o.system_prompt = v;
        else if (!strcmp(a, "-f")) o.eval_file = v;
        else if (!strcmp(a, "--threads")) o.threads = (int)parse_int(a, v, 1, 1024);
        else if (!strcmp(a, "--wait")) {
            if ((o.wait = parse_wait(v)) < 0) die(2, "--wait expects auto, spin or sleep, got '%s'", v);
        }
        else if (!strcmp(a, "--ctx")) o.ctx = (int)parse_int(a, v, 1, LLM_MAX_SEQ);
        else if (!strcmp(a, "--max-memory")) o.max_memory = parse_size(a, v);
        else if (!strcmp(a, "--kv")) {
            if ((o.kv_type = llm_parse_kv_type(v)) < 0) die(2, "--kv expects f32, f16 or q8, got '%s'", v);
        }
        else if (!strcmp(a, "--norm")) {
            if ((o.norm_type = llm_parse_norm_type(v)) < 0) die(2, "--norm expects rms or layer, got '%s'", v);
        } else if (!strcmp(a, "--norm-pos")) {
            if ((o.norm_pos = llm_parse_norm_pos(v)) < 0) die(2, "--norm-pos expects pre, post, peri or out, got '%s'", v);
        } else if (!strcmp(a, "--final-norm")) {
            if ((o.final_norm = llm_parse_on_off(v)) < 0) die(2, "--final-norm expects on or off, got '%s'", v);
        } else if (!strcmp(a, "--qk-norm")) {
            if ((o.qk_norm = llm_parse_on_off(v)) < 0) die(2, "--qk-norm expects on or off, got '%s'", v);
        } else if (!strcmp(a, "--mmap")) {
            /* MMAP_ON and MMAP_OFF are llm_parse_on_off's 1 and 0 */
            if (!strcmp(v, "auto")) o.mmap = MMAP_AUTO;
            else if ((o.mmap = llm_parse_on_off(v)) < 0) die(2, "--mmap expects auto, on or off, got '%s'", v);
        } else if (!strcmp(a, "--repack")) {
            if ((o.repack = llm_parse_on_off(v)) < 0) die(2, "--repack expects on or off, got '%s'", v);
        } else if (!strcmp(a, "--norm-eps")) o.norm_eps = parse_float(a, v, 1e-12, 0.5);
        else if (!strcmp(a, "--template")) {
            if ((o.chat_template = tok_chat_template_id(v)) < 0)
                die(2, "unknown chat template '%s': use %s", v, tok_chat_template_names());
        } else if (!strcmp(a, "--date")) o.chat_date = v;
        else if (!strcmp(a, "--host")) o.serve.host = v;
        else if (!strcmp(a, "--port")) o.serve.port = (int)parse_int(a, v, 0, 65535);
        else if (!strcmp(a, "--parallel")) o.serve.parallel = (int)parse_int(a, v, 1, SERVE_MAX_PARALLEL);
        else if (!strcmp(a, "--queue")) o.serve.queue = (int)parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--api-key")) o.serve.api_key = v;
        else if (!strcmp(a, "--timeout")) o.serve.timeout_ms = (int)parse_int(a, v, 1, 3600) * 1000;
        else if (!strcmp(a, "--max-body")) o.serve.max_body = (size_t)parse_size(a, v);
        else die(2, "unknown option %s (see --help)", a);
    }
    if (strcmp(o.mode, "generate") && strcmp(o.mode, "chat") && strcmp(o.mode, "eval") && strcmp(o.mode, "tokenize") &&
        strcmp(o.mode, "serve"))
        die(2, "unknown mode '%s': use generate, chat, eval, tokenize or serve", o.mode);
    if (o.serve.max_body < 1 || o.serve.max_body > ((size_t)1 << 30)) die(2, "--max-body must be 1 byte to 1G");
    if (o.serve.api_key && !o.serve.api_key[0]) die(2, "--api-key must not be empty");
    if (strcmp(o.mode, "tokenize") && !o.checkpoint) die(2, "no checkpoint given (see --help)");
    if (!strcmp(o.mode, "eval") && !o.eval_file) die(2, "eval mode needs -f FILE");
    if (strcmp(o.mode, "chat") && strcmp(o.mode, "serve") && (o.chat_template >= 0 || o.chat_date))
        die(2, "%s applies to the chat and serve modes only (-m chat, -m serve)", o.chat_template >= 0 ? "--template" : "--date");
    if (o.chat_date && (!o.chat_date[0] || strlen(o.chat_date) > 64))
        die(2, "--date expects a date such as '26 Jul 2024' (1 to 64 bytes) or 'today'");
    if (o.threads < 0) o.threads = default_threads();
#ifndef _OPENMP
    o.threads = 1;
#endif
    if (o.seed <= 0) o.seed = (long long)time(NULL);
    if (o.max_memory == 0) o.max_memory = default_max_memory();
    return o;
}
