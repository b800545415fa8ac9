/* run.c -- the command-line program: options, file access, sampler, and the
 * generate / chat / eval / tokenize loops around the engine in model.h.
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
#include "server/serve.h"   /* -m serve */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ===================================================================== */
/* Errors and time                                                        */
/* ===================================================================== */

static void die(int status, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n, const char *what) {
    void *p = NULL;
    if (n == 0) n = 1;
    if (posix_memalign(&p, LLM_ALIGN, n) != 0 || !p) die(1, "out of memory allocating %zu bytes for %s", n, what);
    return p;
}

/* xmalloc for the large arenas (the state, the repacked weights), on
 * transparent huge pages where Linux offers them: under this project's VMs
 * the first touch of each 4 KiB page traps, about 5 us (0.3 s for 62 MiB of
 * repacked weights; 90 us per decoded token of a 110M model's KV cache), and
 * of a 2 MiB page once. Memory still grows only as far as it is touched. */
#define HUGE_PAGE ((size_t)2 << 20)
static void *xmalloc_big(size_t n, const char *what) {
#ifdef MADV_HUGEPAGE
    void *p = NULL;
    if (n >= HUGE_PAGE && posix_memalign(&p, HUGE_PAGE, n) == 0 && p) {
        (void)madvise(p, n, MADV_HUGEPAGE);   /* advice: refused, the pages are small ones */
        return p;
    }
#endif
    return xmalloc(n, what);
}

/* ===================================================================== */
/* File access: a read-only mapping of the whole file                     */
/* ===================================================================== */

typedef struct file_bytes {
    const void *data;
    size_t size;
    int copied;         /* 1: read into memory of ours (free), 0: mapped */
} file_bytes;

/* populate: map every page now (Linux), for a file read through at once */
static file_bytes map_file(const char *path, const char *what, int populate) {
    file_bytes f = { NULL, 0, 0 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(1, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) die(1, "cannot stat %s %s: %s", what, path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die(1, "%s %s is not a regular file", what, path);
    if (st.st_size == 0) die(1, "%s %s is empty", what, path);
    if ((unsigned long long)st.st_size > (unsigned long long)SIZE_MAX)
        die(1, "%s %s is %lld bytes, more than this machine can map", what, path, (long long)st.st_size);
    f.size = (size_t)st.st_size;
    int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
    if (populate) flags |= MAP_POPULATE;
#endif
    (void)populate;
    void *p = mmap(NULL, f.size, PROT_READ, flags, fd, 0);
    if (p == MAP_FAILED) die(1, "cannot map %s %s: %s", what, path, strerror(errno));
    close(fd);
    f.data = p;
    return f;
}

/* Read one byte of every page of a mapping. MAP_POPULATE fills the page
 * tables, but under some hypervisors (this project's VMs: about 0.25 us per
 * KB, 40 ms for a 166 MB checkpoint) each page's first access in a process
 * still traps once; touching them here puts that cost in the load, where a
 * reader of the prefill and time-to-first-token figures expects it. */
static void touch_pages(const file_bytes *f) {
    const volatile unsigned char *p = (const volatile unsigned char *)f->data;
    unsigned char sink = 0;
    for (size_t at = 0; at < f->size; at += 4096) sink ^= p[at];
    (void)sink;
}

/* The file of `size` bytes (as mapped before) read into memory of ours, on
 * transparent huge pages where Linux offers them (xmalloc_big). */
static file_bytes read_file_copy(const char *path, const char *what, size_t size) {
    file_bytes f = { xmalloc_big(size, what), size, 1 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(1, "cannot open %s %s: %s", what, path, strerror(errno));
    size_t got = 0;
    while (got < size) {
        size_t want = size - got < ((size_t)1 << 30) ? size - got : (size_t)1 << 30;
        ssize_t r = pread(fd, (char *)f.data + got, want, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die(1, "cannot read %s %s: %s", what, path, strerror(errno));
        if (r == 0) die(1, "%s %s shrank to %zu bytes while loading (it had %zu)", what, path, got, size);
        got += (size_t)r;
    }
    close(fd);
    return f;
}

static void unmap_file(file_bytes *f) {
    if (f->data && f->copied) free((void *)f->data);
    else if (f->data) munmap((void *)f->data, f->size);
    f->data = NULL;
}

/* ===================================================================== */
/* Options                                                                */
/* ===================================================================== */

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
        "               builds; --info shows the RAM), default on\n"
        "  --mmap auto|on|off  on: read the weights in place from the mapped file; off:\n"
        "               copy them into RAM at load, on huge pages where Linux has them\n"
        "               (counted in --max-memory); auto (default): off for files of\n"
        "               64 MiB and more where the OS has transparent huge pages, the\n"
        "               copy takes at most a quarter of --max-memory and no GGUF matrix\n"
        "               is repacked, else on\n"
        "  --template NAME  chat template: llama2, llama3, llama3.1 or chatml (default: the\n"
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

/* How idle OpenMP threads wait for the next parallel step. Spinning answers
 * in about a microsecond, so even a 15M model's per-layer products pay to
 * split in decode; but a spinner holds a core, and on a machine whose cores
 * are busy with other work it takes the core the work needs (2-thread runs
 * were up to 20x slower than 1-thread ones). Sleeping threads cost a wake-up
 * (tens of microseconds in a VM), so then only large steps go parallel. */
enum { WAIT_AUTO, WAIT_SPIN, WAIT_SLEEP };
#define WAIT_SPIN_COUNT "10000"          /* libgomp's spins before it sleeps: well under a millisecond */
#define WAIT_SPIN_MIN_WORK (1L << 16)    /* the state's parallel_min_work when threads spin */

static int parse_wait(const char *v) {
    return !strcmp(v, "auto") ? WAIT_AUTO : !strcmp(v, "spin") ? WAIT_SPIN : !strcmp(v, "sleep") ? WAIT_SLEEP : -1;
}

#ifdef _OPENMP
/* Cores left idle by everything else over a short look at /proc/stat
 * (this process sleeps meanwhile); -1 where it cannot tell. */
static double idle_cores(void) {
    unsigned long long a[2][8];
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen("/proc/stat", "r");
        if (!f) return -1.0;
        int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &a[k][0], &a[k][1], &a[k][2], &a[k][3],
                         &a[k][4], &a[k][5], &a[k][6], &a[k][7]);
        fclose(f);
        if (got != 8) return -1.0;
        if (k == 0) {
            struct timespec ts = { 0, 30 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    unsigned long long total = 0, idle = (a[1][3] - a[0][3]) + (a[1][4] - a[0][4]);   /* idle + iowait */
    for (int i = 0; i < 8; i++) total += a[1][i] - a[0][i];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return total > 0 && cpus > 0 ? (double)cpus * (double)idle / (double)total : -1.0;
}
#endif

/* Resolve o->wait and put it into libgomp's environment: spin, unless told to
 * sleep or OMP_WAIT_POLICY=passive is set, when every thread finds an idle
 * core; spinning threads are bound one to a core (OMP_PROC_BIND=true) unless
 * the user placed them. libgomp reads its environment before main, so the program starts
 * itself again when it changes it (once: the second start finds it set; if
 * the restart fails it goes on with the runtime's defaults). */
static void apply_wait(options *o, char **argv) {
#if defined(_OPENMP)
    const char *policy = getenv("OMP_WAIT_POLICY");
    int passive = policy && (!strcmp(policy, "passive") || !strcmp(policy, "PASSIVE"));
    if (o->threads == 1 || !strcmp(o->mode, "tokenize")) { o->wait = WAIT_SLEEP; return; }   /* no thread ever waits */
    if (o->wait == WAIT_AUTO) {
        if (policy || getenv("GOMP_SPINCOUNT")) o->wait = passive ? WAIT_SLEEP : WAIT_SPIN;   /* the user's */
        else o->wait = idle_cores() >= o->threads - 0.5 ? WAIT_SPIN : WAIT_SLEEP;
    }
    int restart = 0;
    if (o->wait == WAIT_SPIN && passive) { unsetenv("OMP_WAIT_POLICY"); restart = 1; }
    if (o->wait == WAIT_SPIN && !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
        setenv("GOMP_SPINCOUNT", WAIT_SPIN_COUNT, 1);
        restart = 1;
    }
    /* spinning threads must not share a core: unbound, two of them sometimes
     * landed on one CPU, and stories260K's 2-thread prefill ran 5x slower */
    if (o->wait == WAIT_SPIN && !getenv("OMP_PROC_BIND") && !getenv("OMP_PLACES") && !getenv("GOMP_CPU_AFFINITY")) {
        setenv("OMP_PROC_BIND", "true", 1);
        restart = 1;
    }
    if (o->wait == WAIT_SLEEP && !passive) { setenv("OMP_WAIT_POLICY", "passive", 1); restart = 1; }
#if defined(__linux__)
    if (restart) execv("/proc/self/exe", argv);
#endif
    (void)restart;
#else
    (void)argv;
    o->wait = WAIT_SLEEP;
#endif
}

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static options parse_options(int argc, char **argv) {
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
    void *repack_arena;       /* the 4-bit matrices in panels (llm_repack), or NULL */
    size_t repack_size;       /* its bytes (with --info: what a run would take) */
    tok_tokenizer tok;
    void *tok_image;          /* a tokenizer.bin or LTOK image built from a GGUF's arrays, or NULL */
    char *tok_system;         /* the GGUF chat template's default system prompt, or NULL */
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

/* ---- a GGUF's own tokenizer (no -z) ------------------------------------
 * tokenizer.ggml.model "llama" (sentencepiece pieces with U+2581 for spaces,
 * scores, token types) becomes a llama2.c tokenizer.bin image in memory
 * (spaces back as ' ', as llama2.c's export writes them); "gpt2" (byte-level
 * BPE: pieces in GPT-2's byte alphabet, "a b" merges, a named pre-tokenizer)
 * becomes an LTOK image (FORMAT.md). tok_init reads either as if it were a
 * file; the ids, add_bos and the chat template the GGUF names are applied
 * after it, the same way for both. */

#define GGUF_STRING 8       /* GGUF value type of a string */
#define GGUF_MAX_PIECE 65536  /* LTOK's longest piece (tokenizer.bin's is smaller still) */

/* The GGUF string under key: 1, or 0 when the key is absent. */
static int gguf_string(const void *b, size_t n, const char *path, const char *key, const char **s, uint64_t *len) {
    llm_gguf_value v;
    uint64_t pos = 0;
    if (llm_gguf_find(b, n, key, &v) != 1) return 0;
    if (v.is_array || v.type != GGUF_STRING || !llm_gguf_next_string(&v, &pos, s, len))
        die(1, "checkpoint %s: GGUF %s is not a string", path, key);
    return 1;
}

/* The token id under key, or -1 when the key is absent. */
static int gguf_token_id(const void *b, size_t n, const char *path, const char *key, int vocab) {
    llm_gguf_value v;
    int64_t id;
    if (llm_gguf_find(b, n, key, &v) != 1) return -1;
    if (v.is_array || !llm_gguf_int(&v, 0, &id) || id < 0 || id >= vocab)
        die(1, "checkpoint %s: GGUF %s is not a token id (0..%d)", path, key, vocab - 1);
    return (int)id;
}

/* Bytes of the first count strings of a string array (each checked to be
 * there and at most most_len bytes), so an image is sized to them, not to
 * the rest of the file. */
static uint64_t gguf_strings_bytes(const llm_gguf_value *a, uint64_t count, uint64_t most_len, const char *path,
                                   const char *what) {
    uint64_t pos = 0, len, total = 0;
    const char *s;
    for (uint64_t i = 0; i < count; i++) {
        if (!llm_gguf_next_string(a, &pos, &s, &len))
            die(1, "checkpoint %s: GGUF %s %llu is corrupt", path, what, (unsigned long long)i);
        if (len > most_len)
            die(1, "checkpoint %s: GGUF %s %llu is %llu bytes long (at most %llu can be a token)", path, what,
                (unsigned long long)i, (unsigned long long)len, (unsigned long long)most_len);
        total += len;
    }
    return total;
}

/* What a GGUF says about its tokenizer besides the pieces, applied to the
 * tokenizer tok_init made of them: BOS / EOS ids, add_bos (default_add_bos
 * when the file does not say), the chat template by its markers
 * (tok_chat_template_of, as export.py reads tokenizer_config.json) with
 * ChatML's default system prompt, and the end of turn: the file's
 * eot_token_id, else the template's end-of-turn token. */
static void apply_gguf_tokenizer_keys(engine *e, const char *path, int default_add_bos) {
    const void *b = e->ckpt_file.data;
    size_t n = e->ckpt_file.size;
    tok_tokenizer *t = &e->tok;
    llm_gguf_value v;
    int64_t flag;
    int bos = gguf_token_id(b, n, path, "tokenizer.ggml.bos_token_id", t->vocab_size);
    int eos = gguf_token_id(b, n, path, "tokenizer.ggml.eos_token_id", t->vocab_size);
    if (bos >= 0) t->bos_id = bos;
    if (eos >= 0) t->eos_id = eos;
    t->add_bos = default_add_bos;
    if (llm_gguf_find(b, n, "tokenizer.ggml.add_bos_token", &v) == 1) {
        if (v.is_array || !llm_gguf_int(&v, 0, &flag))
            die(1, "checkpoint %s: GGUF tokenizer.ggml.add_bos_token is not a bool", path);
        t->add_bos = flag != 0;
    }
    if (t->add_bos && (t->bos_id < 0 || t->bos_id >= t->vocab_size))
        die(1, "checkpoint %s: GGUF tokenizer adds a BOS but names none (tokenizer.ggml.bos_token_id)", path);
    const char *s;
    uint64_t len;
    if (gguf_string(b, n, path, "tokenizer.chat_template", &s, &len)) {
        /* the default system prompt is shorter than the template it is in */
        e->tok_system = (char *)xmalloc((size_t)len, "the default system prompt");
        size_t sys_len;
        int tmpl = tok_chat_template_of(s, (size_t)len, e->tok_system, (size_t)len, &sys_len);
        if (tmpl >= 0) t->chat_template = tmpl;   /* else Llama 2's, as with no template (see --template) */
        t->default_system = sys_len ? e->tok_system : NULL;
        t->default_system_len = sys_len;
    }
    int eot = gguf_token_id(b, n, path, "tokenizer.ggml.eot_token_id", t->vocab_size);
    if (eot < 0 && t->chat_template != TOK_CHAT_LLAMA2) eot = tok_chat_end_id(t, t->chat_template);
    if (eot >= 0) t->eot_id = eot;
}

/* An image's byte count, computed in 64 bits: as a size_t, or an error where
 * it cannot be one (a 32-bit host) */
static size_t image_size(uint64_t n, const char *path) {
    if (n > SIZE_MAX) die(1, "checkpoint %s: its GGUF tokenizer would take %llu bytes, more than this machine can address",
                          path, (unsigned long long)n);
    return (size_t)n;
}

/* tok_init over the image built from checkpoint path's arrays (which the engine then owns) */
static void init_gguf_tokenizer(engine *e, const char *path, unsigned char *img, size_t size) {
    int vocab = e->model.cfg.vocab_size;
    e->tok_image = img;
    e->tok_file.data = img;
    e->tok_file.size = size;
    e->tok_arena_size = tok_arena_size(img, size, vocab);
    e->tok_arena = xmalloc(e->tok_arena_size ? e->tok_arena_size : 1, "the tokenizer");
    if (tok_init(&e->tok, img, size, vocab, e->tok_arena, e->tok_arena_size) != 0)
        die(1, "checkpoint %s: its GGUF tokenizer: %s", path, tok_error(&e->tok));
}

/* "llama": the tokenizer.bin image, int32 max length, then per token f32
 * score, int32 length, bytes (a piece shrinks or keeps its size: U+2581's
 * three bytes become one) */
static void load_gguf_sentencepiece(engine *e, const char *path, const llm_gguf_value *tokens,
                                    const llm_gguf_value *types) {
    const void *b = e->ckpt_file.data;
    size_t n = e->ckpt_file.size;
    llm_gguf_value scores;
    int vocab = (int)tokens->count;
    int have_scores = llm_gguf_find(b, n, "tokenizer.ggml.scores", &scores) == 1;
    if (have_scores && (!scores.is_array || scores.count != tokens->count || scores.type != 6))
        die(1, "checkpoint %s: GGUF tokenizer.ggml.scores is not %d f32 values", path, vocab);
    size_t size = image_size(4 + (uint64_t)vocab * 8 + gguf_strings_bytes(tokens, tokens->count, INT32_MAX, path, "token"),
                             path);
    unsigned char *img = (unsigned char *)xmalloc(size, "the GGUF tokenizer");
    size_t at = 4;
    int max_len = 0;
    uint64_t pos = 0, len = 0;
    const char *s = NULL;
    for (int i = 0; i < vocab; i++) {
        llm_gguf_next_string(tokens, &pos, &s, &len);   /* checked by gguf_strings_bytes */
        float score = 0.0f;
        int64_t type = 1;
        if (have_scores) llm_gguf_float(&scores, (uint64_t)i, &score);
        if (types && !llm_gguf_int(types, (uint64_t)i, &type))
            die(1, "checkpoint %s: GGUF tokenizer.ggml.token_type is not integers", path);
        size_t start = at + 8, k = start;
        for (uint64_t j = 0; j < len; j++) {
            if (type == 1 && j + 2 < len && (unsigned char)s[j] == 0xE2 && (unsigned char)s[j + 1] == 0x96 &&
                (unsigned char)s[j + 2] == 0x81) { img[k++] = ' '; j += 2; }
            else img[k++] = (unsigned char)s[j];
        }
        int32_t l = (int32_t)(k - start);
        memcpy(img + at, &score, 4);
        memcpy(img + at + 4, &l, 4);
        if (l > max_len) max_len = l;
        at = k;
    }
    memcpy(img, &max_len, 4);
    init_gguf_tokenizer(e, path, img, at);
    apply_gguf_tokenizer_keys(e, path, 1);   /* llama2.c's tokenizer.bin adds a BOS */
}

/* GPT-2's byte alphabet undone: the byte code point c stands for in a
 * byte-level piece (printable bytes stand for themselves; the 68 others were
 * moved to U+0100.. in byte order), or -1. */
static int byte_of_char(uint32_t c) {
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return (int)c;
    if (c < 256 || c >= 256 + 68) return -1;
    c -= 256;   /* the c-th byte that is not printable: 0..32, 127..160, 173 */
    return c < 33 ? (int)c : c < 67 ? (int)(127 + c - 33) : 173;
}

/* A byte-level piece's text (UTF-8 of U+0021..U+0143) as the bytes it stands
 * for, written to out (at most len bytes): the count, or -1 when a character
 * is not in the alphabet. */
static long byte_level_bytes(const char *s, uint64_t len, unsigned char *out) {
    long k = 0;
    for (uint64_t i = 0; i < len; k++) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        if (c >= 0x80) {   /* the alphabet's characters take two bytes at most */
            unsigned char d = i + 1 < len ? (unsigned char)s[i + 1] : 0;
            if ((c & 0xE0) != 0xC0 || (d & 0xC0) != 0x80) return -1;
            cp = (uint32_t)(c & 0x1F) << 6 | (d & 0x3F);
            if (cp < 0x80) return -1;   /* overlong */
            i++;
        }
        i++;
        int byte = byte_of_char(cp);
        if (byte < 0) return -1;
        out[k] = (unsigned char)byte;
    }
    return k;
}

/* A piece's bytes and id. */
typedef struct piece_ref {
    const unsigned char *p;
    uint32_t len;
    int id;
} piece_ref;

/* unsigned bytewise, the shorter first (LTOK's order) */
static int compare_bytes(const unsigned char *a, uint32_t al, const unsigned char *b, uint32_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int compare_piece_refs(const void *a, const void *b) {
    const piece_ref *x = (const piece_ref *)a, *y = (const piece_ref *)b;
    return compare_bytes(x->p, x->len, y->p, y->len);
}

/* The pieces by their bytes, for the merges' lookups (a few per merge: a
 * hash beats a binary search over 128k pieces): open addressing, each slot
 * an id + 1 (0: empty), at least twice as many slots as pieces. */
typedef struct piece_table {
    uint32_t *slot;
    uint32_t mask;
    const piece_ref *by_id;
} piece_table;

static uint32_t hash_bytes(const unsigned char *p, uint32_t len) {   /* FNV-1a */
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static piece_table piece_table_of(const piece_ref *by_id, int n) {
    piece_table t;
    uint32_t size = 1024;
    while (size < 2 * (uint32_t)n) size *= 2;
    t.slot = (uint32_t *)xmalloc((size_t)size * 4, "the GGUF tokenizer's index");
    memset(t.slot, 0, (size_t)size * 4);
    t.mask = size - 1;
    t.by_id = by_id;
    for (int i = 0; i < n; i++) {
        uint32_t k = hash_bytes(by_id[i].p, by_id[i].len) & t.mask;
        while (t.slot[k]) k = (k + 1) & t.mask;
        t.slot[k] = (uint32_t)i + 1;
    }
    return t;
}

/* The id of the piece with these bytes, or -1 */
static int find_piece(const piece_table *t, const unsigned char *p, uint32_t len) {
    for (uint32_t k = hash_bytes(p, len) & t->mask; t->slot[k]; k = (k + 1) & t->mask) {
        const piece_ref *r = &t->by_id[t->slot[k] - 1];
        if (r->len == len && !memcmp(r->p, p, len)) return r->id;
    }
    return -1;
}

/* An LTOK merge: left, right, rank, result (FORMAT.md) */
typedef struct merge_rec { uint32_t left, right, rank, result; } merge_rec;

static int compare_merges(const void *a, const void *b) {
    const merge_rec *x = (const merge_rec *)a, *y = (const merge_rec *)b;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    if (x->right != y->right) return x->right < y->right ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* llama.cpp's tokenizer.ggml.pre names of the pre-tokenizers this build has
 * (FORMAT.md, "Encoding"); Qwen2's vocabularies are NFC-normalized and Llama
 * 3's take a pre-token that is a piece whole (ignore_merges), as their
 * tokenizer.json say. A file without the key is llama.cpp's "default". */
static const struct { const char *name; int pre, normalizer, ignore_merges; } gguf_pre_tokenizers[] = {
    { "default", TOK_PRE_GPT2, TOK_NORM_NONE, 0 }, { "gpt-2", TOK_PRE_GPT2, TOK_NORM_NONE, 0 },
    { "gpt2", TOK_PRE_GPT2, TOK_NORM_NONE, 0 }, { "llama-bpe", TOK_PRE_LLAMA3, TOK_NORM_NONE, 1 },
    { "llama3", TOK_PRE_LLAMA3, TOK_NORM_NONE, 1 }, { "qwen2", TOK_PRE_QWEN2, TOK_NORM_NFC, 0 },
    { "smollm", TOK_PRE_SMOLLM, TOK_NORM_NONE, 0 },
};

/* "gpt2": the LTOK image. Token types (llama.cpp's): 1 normal and 6 byte are
 * pieces in GPT-2's alphabet; 3 control, 2 unknown and 5 unused (the
 * converter's [PADn] fillers) are special, 4 user-defined is added (FORMAT.md's
 * flags); unused ids at the end are left out (the model's extra rows, which
 * decode to nothing). tok_init validates the result as it does a file. */
static void load_gguf_byte_level(engine *e, const char *path, const llm_gguf_value *tokens,
                                 const llm_gguf_value *types) {
    const void *b = e->ckpt_file.data;
    size_t n = e->ckpt_file.size;
    const char *s = NULL;
    uint64_t len = 0, pos = 0;

    const char *pre_name = "default";
    uint64_t pre_len = 7;
    gguf_string(b, n, path, "tokenizer.ggml.pre", &pre_name, &pre_len);
    int pre = -1;
    for (size_t k = 0; k < sizeof gguf_pre_tokenizers / sizeof gguf_pre_tokenizers[0]; k++)
        if (strlen(gguf_pre_tokenizers[k].name) == pre_len && !memcmp(pre_name, gguf_pre_tokenizers[k].name, pre_len))
            pre = (int)k;
    if (pre < 0)
        die(1, "checkpoint %s: GGUF tokenizer.ggml.pre '%.*s' is not a pre-tokenizer this build has (llama-bpe, "
            "llama3, qwen2, smollm, gpt-2, default): give a tokenizer with -z", path,
            (int)(pre_len < 40 ? pre_len : 40), pre_name);

    /* flags per token, and how many tokens the LTOK holds */
    int vocab = (int)tokens->count, used = 0;
    unsigned char *flags = (unsigned char *)xmalloc((size_t)vocab, "the GGUF tokenizer's flags");
    for (int i = 0; i < vocab; i++) {
        int64_t type = 1;
        if (types && !llm_gguf_int(types, (uint64_t)i, &type))
            die(1, "checkpoint %s: GGUF tokenizer.ggml.token_type is not integers", path);
        if (type < 1 || type > 6)
            die(1, "checkpoint %s: GGUF token %d has type %lld (llama.cpp's are 1..6)", path, i, (long long)type);
        flags[i] = type == 4 ? TOK_FLAG_ADDED : type == 1 || type == 6 ? 0 : TOK_FLAG_SPECIAL;
        if (type != 5) used = i + 1;
    }

    /* the pieces' bytes, per id, and the ids sorted by them (a byte-level
     * text is at least as long as its bytes) */
    uint64_t text = gguf_strings_bytes(tokens, (uint64_t)used, 2 * GGUF_MAX_PIECE, path, "token");
    if (text > UINT32_MAX) die(1, "checkpoint %s: GGUF tokens hold %llu bytes, more than 4 GiB", path, (unsigned long long)text);
    unsigned char *pieces = (unsigned char *)xmalloc((size_t)text, "the GGUF tokenizer's pieces");
    uint32_t *ends = (uint32_t *)xmalloc((size_t)used * 4, "the GGUF tokenizer's pieces");
    piece_ref *by_id = (piece_ref *)xmalloc((size_t)used * sizeof *by_id, "the GGUF tokenizer's index");
    piece_ref *refs = (piece_ref *)xmalloc((size_t)used * sizeof *refs, "the GGUF tokenizer's index");
    uint32_t at = 0, max_len = 1;
    for (int i = 0; i < used; i++) {
        llm_gguf_next_string(tokens, &pos, &s, &len);   /* checked by gguf_strings_bytes */
        long l = (long)len;
        if (flags[i]) memcpy(pieces + at, s, (size_t)len);
        else if ((l = byte_level_bytes(s, len, pieces + at)) < 0)
            die(1, "checkpoint %s: GGUF token %d '%.*s' is not in GPT-2's byte alphabet (a normal token of a gpt2 "
                "tokenizer)", path, i, (int)(len < 40 ? len : 40), s);
        if (l > GGUF_MAX_PIECE)
            die(1, "checkpoint %s: GGUF token %d is %ld bytes (at most %d)", path, i, l, GGUF_MAX_PIECE);
        by_id[i].p = pieces + at;
        by_id[i].len = (uint32_t)l;
        by_id[i].id = i;
        at += (uint32_t)l;
        ends[i] = at;
        if ((uint32_t)l > max_len) max_len = (uint32_t)l;
    }
    memcpy(refs, by_id, (size_t)used * sizeof *refs);
    qsort(refs, (size_t)used, sizeof *refs, compare_piece_refs);
    for (int k = 1; k < used; k++)
        if (!compare_piece_refs(&refs[k - 1], &refs[k]))
            die(1, "checkpoint %s: GGUF tokens %d and %d are the same bytes", path,
                refs[k - 1].id < refs[k].id ? refs[k - 1].id : refs[k].id,
                refs[k - 1].id < refs[k].id ? refs[k].id : refs[k - 1].id);

    /* merges: "left right", both and their join pieces; rank = position */
    llm_gguf_value merges;
    if (llm_gguf_find(b, n, "tokenizer.ggml.merges", &merges) != 1 || !merges.is_array || merges.type != GGUF_STRING)
        die(1, "checkpoint %s: GGUF has no tokenizer.ggml.merges string array (a gpt2 tokenizer needs it)", path);
    if (merges.count > (1u << 26))
        die(1, "checkpoint %s: GGUF tokenizer has %llu merges (at most 2^26)", path, (unsigned long long)merges.count);
    int n_merges = (int)merges.count;
    merge_rec *m = (merge_rec *)xmalloc((size_t)n_merges * sizeof *m, "the GGUF tokenizer's merges");
    unsigned char *join = (unsigned char *)xmalloc(4 * GGUF_MAX_PIECE, "a merge");
    piece_table table = piece_table_of(by_id, used);
    pos = 0;
    for (int i = 0; i < n_merges; i++) {
        if (!llm_gguf_next_string(&merges, &pos, &s, &len))
            die(1, "checkpoint %s: GGUF tokenizer merge %d is corrupt", path, i);
        const char *space = len > 1 ? memchr(s + 1, ' ', (size_t)len - 1) : NULL;
        long l = -1, r = -1;
        if (space && len <= 4 * GGUF_MAX_PIECE) {
            l = byte_level_bytes(s, (uint64_t)(space - s), join);
            if (l >= 0) r = byte_level_bytes(space + 1, len - (uint64_t)(space - s) - 1, join + l);
        }
        int left = l > 0 && r > 0 ? find_piece(&table, join, (uint32_t)l) : -1;
        int right = left >= 0 ? find_piece(&table, join + l, (uint32_t)r) : -1;
        int result = right >= 0 ? find_piece(&table, join, (uint32_t)(l + r)) : -1;
        if (result < 0)
            die(1, "checkpoint %s: GGUF tokenizer merge %d '%.*s' is not two tokens whose join is a token", path, i,
                (int)(len < 40 ? len : 40), s);
        if (flags[left] | flags[right] | flags[result])
            die(1, "checkpoint %s: GGUF tokenizer merge %d '%.*s' involves a special or added token", path, i,
                (int)(len < 40 ? len : 40), s);
        m[i] = (merge_rec){ (uint32_t)left, (uint32_t)right, (uint32_t)i, (uint32_t)result };
    }
    free(join);
    free(table.slot);
    /* sorted by (left, right); a pair merged twice keeps its last rank, as
     * Hugging Face's tokenizers (and export.py) do */
    qsort(m, (size_t)n_merges, sizeof *m, compare_merges);
    int kept = 0;
    for (int i = 0; i < n_merges; i++) {
        if (kept && m[kept - 1].left == m[i].left && m[kept - 1].right == m[i].right) kept--;
        m[kept++] = m[i];
    }

    /* the image, section by section (FORMAT.md, "LTOK, version 1"); ids,
     * add_bos and the template come after tok_init */
    size_t off_ends = 64 + (((size_t)used + 3) & ~(size_t)3), off_sorted = off_ends + 4 * (size_t)used;
    size_t off_merges = off_sorted + 4 * (size_t)used;   /* below 2^26: used <= LLM_MAX_VOCAB */
    size_t off_pieces = image_size(off_merges + 16 * (uint64_t)kept, path);
    size_t size = image_size((uint64_t)off_pieces + at, path);
    unsigned char *img = (unsigned char *)xmalloc(size, "the GGUF tokenizer");
    memset(img, 0, off_ends);
    uint32_t header[15] = { 1, 64, TOK_KIND_BYTE_LEVEL, (uint32_t)gguf_pre_tokenizers[pre].pre,
                            (uint32_t)gguf_pre_tokenizers[pre].normalizer,
                            gguf_pre_tokenizers[pre].ignore_merges ? 2u : 0u, (uint32_t)used, (uint32_t)kept,
                            UINT32_MAX, UINT32_MAX, UINT32_MAX, TOK_CHAT_LLAMA2, max_len, 0, at };
    memcpy(img, "LTOK", 4);
    for (int k = 0; k < 15; k++) put_u32(img + 4 + 4 * k, header[k]);
    memcpy(img + 64, flags, (size_t)used);
    for (int i = 0; i < used; i++) {
        put_u32(img + off_ends + 4 * (size_t)i, ends[i]);
        put_u32(img + off_sorted + 4 * (size_t)i, (uint32_t)refs[i].id);
    }
    for (int i = 0; i < kept; i++) {
        unsigned char *p = img + off_merges + 16 * (size_t)i;
        put_u32(p, m[i].left); put_u32(p + 4, m[i].right); put_u32(p + 8, m[i].rank); put_u32(p + 12, m[i].result);
    }
    memcpy(img + off_pieces, pieces, at);
    free(flags); free(pieces); free(ends); free(by_id); free(refs); free(m);
    init_gguf_tokenizer(e, path, img, size);
    apply_gguf_tokenizer_keys(e, path, gguf_pre_tokenizers[pre].pre == TOK_PRE_LLAMA3);
}

static void load_gguf_tokenizer(engine *e, const char *path) {
    const void *b = e->ckpt_file.data;
    size_t n = e->ckpt_file.size;
    llm_gguf_value tokens, types;
    const char *s;
    uint64_t len;
    if (!gguf_string(b, n, path, "tokenizer.ggml.model", &s, &len))
        die(1, "checkpoint %s: GGUF has no tokenizer.ggml.model string: give a tokenizer with -z", path);
    int byte_level = len == 4 && !memcmp(s, "gpt2", 4);
    if (!byte_level && (len != 5 || memcmp(s, "llama", 5)))
        die(1, "checkpoint %s: GGUF tokenizer model '%.*s' is not supported (llama and gpt2 are): give a tokenizer with -z",
            path, (int)(len < 40 ? len : 40), s);
    if (llm_gguf_find(b, n, "tokenizer.ggml.tokens", &tokens) != 1 || !tokens.is_array || tokens.type != GGUF_STRING)
        die(1, "checkpoint %s: GGUF has no tokenizer.ggml.tokens string array", path);
    int vocab = e->model.cfg.vocab_size;
    if (tokens.count != (uint64_t)vocab)
        die(1, "checkpoint %s: GGUF tokenizer has %llu tokens, the model's vocabulary %d", path,
            (unsigned long long)tokens.count, vocab);
    int have_types = llm_gguf_find(b, n, "tokenizer.ggml.token_type", &types) == 1;
    if (have_types && (!types.is_array || types.count != tokens.count))
        die(1, "checkpoint %s: GGUF tokenizer.ggml.token_type is not %d values", path, vocab);
    if (byte_level) load_gguf_byte_level(e, path, &tokens, have_types ? &types : NULL);
    else load_gguf_sentencepiece(e, path, &tokens, have_types ? &types : NULL);
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
    fprintf(out, ", q/k/v biases %s, q/k norm %s%s\n", c->qkv_bias ? "yes" : "no", c->qk_norm ? "on" : "off",
            !c->qk_norm && e->model.w.layers && e->model.w.layers[0].q_norm.data ? " (weights stored)" : "");
}

/* The tokenizer in effect: its kind, ids and chat template, for --info. */
static void print_tokenizer(const tok_tokenizer *t) {
    static const char *pre[] = { "", "gpt2", "llama3", "qwen2", "smollm" };
    if (t->kind == TOK_KIND_BYTE_LEVEL)
        printf("  tokenizer is byte-level BPE (%s pre-tokenizer%s%s),", pre[t->pre_tokenizer],
               t->normalizer == TOK_NORM_NFC ? ", NFC" : "", t->ignore_merges ? ", ignore_merges" : "");
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

/* 1 when Linux offers transparent huge pages (always, or on madvise) */
static int have_huge_pages(void) {
    char line[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    int ok = fgets(line, sizeof line, f) && (strstr(line, "[always]") || strstr(line, "[madvise]"));
    fclose(f);
    return ok;
}

/* 1 when the run copies the weights into RAM (--mmap off, or auto where it
 * pays): one decode step streams every weight once, and read through a
 * mapping of the page cache's 4 KiB pages it misses the TLB every few KB.
 * Zen 5, one thread, decode mapped -> copied onto 2 MiB pages: 110M f32
 * 51-56 -> 65-72 tok/s, f16 99-109 -> 121-124, q8_0 154-160 -> 179-181;
 * 42M f32 +3%; the whole run's time the same (reading the file into the
 * copy costs what mapping and touching its pages did). Below
 * COPY_WEIGHTS_MIN the decode gains nothing sure, while the first prefill
 * pays for the fresh pages (15M f32: 9000 -> 7400 tok/s), so auto maps
 * those; and GGUFs whose matrices are repacked (those are in RAM already),
 * and copies above a quarter of the memory limit. */
#define COPY_WEIGHTS_MIN ((size_t)64 << 20)
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
        printf("  repacked     %12zu bytes  %8.2f MiB  (the q4_0/q4_K/q6_K/q8_0 matrices again, in the layouts the %s kernels read fastest; --repack off: none)\n",
               e->repack_size, e->repack_size / MB, llm_simd_name());
    ull kv = p.key_cache + p.value_cache + 2 * p.kv_scales;
    printf("  kv cache     %12llu bytes  %8.2f MiB  (keys %llu, values %llu, scales 2 x %llu)\n", kv, kv / MB,
           (ull)p.key_cache, (ull)p.value_cache, (ull)p.kv_scales);
    ull act = p.total - kv;
    printf("  activations  %12llu bytes  %8.2f MiB  (x %llu, xb %llu, xb2 %llu, q %llu, k/v 2 x %llu, hb %llu, hb2 %llu, rope %llu, logits %llu, act codes %llu; each part 64-aligned)\n",
           act, act / MB, (ull)p.x, (ull)p.xb, (ull)p.xb2, (ull)p.q, (ull)p.kv_new, (ull)p.hb, (ull)p.hb2, (ull)p.rope,
           (ull)p.logits, (ull)p.act_q);
    size_t tok_image = e->tok_image ? e->tok_file.size : 0;   /* built from a GGUF's arrays */
    if (e->tok_image)
        printf("  tokenizer    %12zu bytes  %8.2f MiB  (its %zu-byte %s image built from the GGUF, and tables)\n",
               e->tok_arena_size + tok_image, (e->tok_arena_size + tok_image) / MB, tok_image,
               e->tok.kind == TOK_KIND_BYTE_LEVEL ? "LTOK" : "tokenizer.bin");
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

/* The 4-bit matrices copied into the panels this build's kernels read
 * fastest (llm_repack; nothing in other builds); --info only sizes them. */
static void repack_weights(engine *e, const options *o) {
    e->repack_size = planned_repack_size(e, o);
    if (!e->repack_size || o->info) return;
    if (e->repack_size == SIZE_MAX) die(1, "repacking the 4-bit matrices needs more memory than this machine can address: use --repack off");
    e->repack_arena = xmalloc_big(e->repack_size, "the repacked 4-bit matrices");
    if (llm_repack(&e->model, e->repack_arena, e->repack_size, wants_all_logits(o)) != LLM_OK) die(1, "%s", e->model.error);
}

/* Map and validate the checkpoint (read in place from here on, or from its
 * copy), with the norm flags applied, the 4-bit matrices repacked. */
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

/* The tokens that end a generated text: BOS, as in llama2.c (whose tokenizer.bin
 * models end a story with it); for a byte-level vocabulary also its end of text
 * and end of turn, which such models emit instead. */
static int stops_generation(const tok_tokenizer *t, int token) {
    if (token == t->bos_id) return 1;
    return t->kind == TOK_KIND_BYTE_LEVEL && (token == t->eos_id || token == t->eot_id);
}

/* Write a byte of every page of the KV cache that positions 0..n-1 use,
 * before the clock starts: under this project's VMs the first touch of a
 * page traps (about 5 us a 4 KiB page: 90 us per token of a 110M model's
 * cache), which prefill and decode would pay (llama.cpp clears its whole
 * cache at start). Nothing reads a position before it is written. */
static void touch_kv(engine *e, int n) {
    const llm_state *s = &e->state;
    size_t layer = (size_t)(llm_state_plan(&e->model.cfg, &e->plan).key_cache / (uint64_t)e->model.cfg.n_layers);
    size_t used = layer / (size_t)s->ctx_len * (size_t)n;   /* a position's row, n times */
    for (int l = 0; l < e->model.cfg.n_layers && used; l++) {
        volatile unsigned char *k = (unsigned char *)s->key_cache + l * layer, *v = (unsigned char *)s->value_cache + l * layer;
        for (size_t at = 0; at < used; at += 4096) k[at] = v[at] = 0;
        k[used - 1] = v[used - 1] = 0;
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
        if (stops_generation(&e->tok, next)) break;
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

/* One chat turn's ids (malloc'd) in the template. */
static int *encode_turn(engine *e, const tok_chat_turn *turn, int *n_out) {
    size_t scratch_size = tok_chat_scratch_size(&e->tok, turn), most = tok_chat_max_ids(&e->tok, turn);
    if (!scratch_size || !most || most > (size_t)INT32_MAX) die(1, "the chat turn is too long to encode");
    void *scratch = xmalloc(scratch_size, "the tokenizer's scratch");
    int *ids = (int *)xmalloc(most * sizeof(int), "token ids");
    int n = tok_chat_encode(&e->tok, turn, ids, (int)most, scratch, scratch_size);
    free(scratch);
    if (n < 1) die(1, "cannot encode the chat turn: %s", tok_error(&e->tok));
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
    serve_server sv;
    const char *err = serve_init(&sv, &e->model, &e->tok, &sc, arena);
    if (err) die(1, "%s", err);
    int rc = serve_run(&sv);
    if (sv.threads_left) return rc;   /* their memory ends with the process */
    serve_free(&sv);
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
    apply_wait(&o, argv);
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
