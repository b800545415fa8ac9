/* model.h -- a small Llama-style transformer engine in one header.
 *
 * Contract: loads a checkpoint from bytes the caller owns (a mapped file, a
 * buffer, or const data in flash) and reads the weights in place; all working
 * memory comes from one caller-provided arena whose size llm_state_size()
 * tells up front. No I/O, no exit, no malloc, no globals: every function
 * returns a status and leaves a message in the struct it was given.
 *
 *   #define MODEL_IMPLEMENTATION
 *   #include "model.h"
 *
 *   llm_model m;
 *   if (llm_load(&m, bytes, n_bytes) != LLM_OK) puts(m.error);
 *   llm_state_options o = { ctx_len, max_batch, 0, LLM_KV_F32 };
 *   size_t need = llm_state_size(&m.cfg, &o);
 *   llm_state s;
 *   llm_state_init(&s, &m, &o, arena, need);   // arena: 64-byte aligned
 *   llm_forward(&m, &s, prompt, n_prompt, 0, LLM_LOGITS_LAST);  // batched prefill
 *   llm_forward(&m, &s, &next, 1, n_prompt, LLM_LOGITS_LAST);    // one decode step
 *   // logits of the last token: s.logits (vocab_size floats)
 *
 * The block (norm position and type come from the checkpoint or the caller):
 *   pre-norm:  h = x + attn(norm(x));  y = h + ffn(norm(h))
 *   post-norm: h = norm(x + attn(x));  y = norm(h + ffn(h))
 * then an optional final norm and the LM head. Attention: RoPE, grouped-query
 * heads, a KV cache. FFN: SwiGLU.
 *
 * Compile-time hooks: MODEL_ASSERT(x) (default: none), MODEL_NO_OPENMP.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Format and config                                                      */
/* ===================================================================== */

typedef enum llm_status {
    LLM_OK = 0,
    LLM_ERR_FORMAT = -1,    /* not a checkpoint we know, or inconsistent    */
    LLM_ERR_SIZE = -2,      /* file size differs from what the header says  */
    LLM_ERR_CONFIG = -3,    /* a field out of range                         */
    LLM_ERR_VERSION = -4,   /* a newer format version than this reader      */
    LLM_ERR_ARENA = -5,     /* arena too small or misaligned                */
    LLM_ERR_ARG = -6        /* bad argument to forward (token, position...) */
} llm_status;

enum llm_norm_type { LLM_NORM_RMS = 0, LLM_NORM_LAYER = 1 };
enum llm_norm_pos { LLM_NORM_PRE = 0, LLM_NORM_POST = 1 };
enum llm_dtype { LLM_F32 = 0, LLM_F16 = 1, LLM_Q8_0 = 2 };
enum llm_rope_layout { LLM_ROPE_INTERLEAVED = 0, LLM_ROPE_HALF = 1 };
enum llm_format { LLM_FORMAT_LEGACY = 0, LLM_FORMAT_LLMW = 1, LLM_FORMAT_AK42_V1 = 2, LLM_FORMAT_AK42_V2 = 3 };
enum llm_logits { LLM_LOGITS_LAST = 0, LLM_LOGITS_ALL = 1 };
enum llm_kv_type { LLM_KV_F32 = 0, LLM_KV_F16 = 1, LLM_KV_Q8 = 2 };

#define LLM_MAGIC "LLMW"
#define LLM_VERSION 1
#define LLM_HEADER_SIZE 256
#define LLM_ALIGN 64
#define LLM_MAX_DIM (1 << 16)       /* limits that reject hostile headers */
#define LLM_MAX_HIDDEN (8 << 16)
#define LLM_MAX_LAYERS 1024
#define LLM_MAX_VOCAB (1 << 22)
#define LLM_MAX_SEQ (1 << 20)
#define LLM_MAX_BATCH 8192          /* tokens in one forward call */
#ifndef LLM_MAX_HEAD_SIZE
#define LLM_MAX_HEAD_SIZE 256       /* attention keeps one head's row on the stack */
#endif

typedef struct llm_config {
    int dim;            /* residual stream width                       */
    int hidden_dim;     /* FFN inner width                             */
    int n_layers;
    int n_heads;        /* query heads                                 */
    int n_kv_heads;     /* key/value heads (grouped-query attention)   */
    int vocab_size;
    int seq_len;        /* the model's context length                  */
    int head_size;      /* dim / n_heads                               */
    int norm_type;      /* llm_norm_type                               */
    int norm_pos;       /* llm_norm_pos                                */
    int final_norm;     /* 1: norm before the LM head                  */
    float norm_eps;
    float rope_theta;
    int rope_layout;    /* llm_rope_layout                             */
    int shared_classifier;
    int weight_type;    /* llm_dtype of the matrices                   */
    int group_size;     /* q8_0 group length                           */
    int norm_bias;      /* 1: LayerNorm biases are stored              */
    int format;         /* llm_format the file came in                 */
} llm_config;

/* A weight matrix (rows, cols) read in place: W[r][c] in its dtype. */
typedef struct llm_matrix {
    const void *data;       /* f32, f16 (uint16) or int8 values, row-major */
    const float *scale;     /* q8_0: (rows, ceil(cols/group)) scales        */
    int type, rows, cols, group;
} llm_matrix;

/* One tensor of every layer: layer l lives at base + l * stride bytes. */
typedef struct llm_tensor {
    const unsigned char *base;
    size_t stride;          /* bytes from one layer's tensor to the next  */
    size_t scale_offset;    /* q8_0: bytes from the values to the scales  */
    int rows, cols;
} llm_tensor;

typedef struct llm_weights {
    llm_matrix tok_embeddings;      /* (vocab, dim)                       */
    llm_tensor attn_norm, attn_norm_bias;   /* (dim,) f32 per layer       */
    llm_tensor wq;                  /* (n_heads*head_size, dim)           */
    llm_tensor wk, wv;              /* (n_kv_heads*head_size, dim)        */
    llm_tensor wo;                  /* (dim, n_heads*head_size)           */
    llm_tensor ffn_norm, ffn_norm_bias;     /* (dim,)                     */
    llm_tensor w1, w3;              /* (hidden_dim, dim) gate, up         */
    llm_tensor w2;                  /* (dim, hidden_dim) down             */
    const float *final_norm;        /* (dim,)                             */
    const float *final_norm_bias;   /* (dim,) or NULL                     */
    llm_matrix classifier;          /* (vocab, dim)                       */
} llm_weights;

typedef struct llm_model {
    llm_config cfg;
    llm_weights w;
    char error[200];
} llm_model;

/* What a state is planned for. Zeros mean the defaults. */
typedef struct llm_state_options {
    int ctx_len;            /* KV-cache positions, <= seq_len (0: seq_len)       */
    int max_batch;          /* tokens one forward call may take (0: 1)          */
    int all_logits;         /* 1: forward may return every token's logits        */
    int kv_type;            /* llm_kv_type: f32, f16, or int8 with per-head scales */
} llm_state_options;

/* Byte sizes of everything the state carves from the arena. They are
 * computed in 64 bits on every host; a part that exceeds this host's
 * address space reads SIZE_MAX, and total_bytes keeps the exact need. */
typedef struct llm_plan {
    size_t x, xb, xb2, q, kv_new, hb, hb2, rope, logits, act_q, key_cache, value_cache, kv_scales;
    size_t total;           /* sum, each part rounded up to LLM_ALIGN     */
    uint64_t total_bytes;   /* the same sum in 64 bits                    */
} llm_plan;

/* Activations and KV cache for one sequence. */
typedef struct llm_state {
    int ctx_len;            /* positions the KV cache holds               */
    int max_batch;          /* tokens one forward call may take           */
    int all_logits;         /* 1: logits has room for every token's row    */
    int kv_type;            /* llm_kv_type of the cache                   */
    int n_threads;          /* OpenMP threads (1 = serial)                */
    long parallel_min_work; /* a step runs on threads only above this many
                               multiply-adds (LLM_PARALLEL_MIN_WORK at init) */
    float *x;               /* (B, dim) residual stream                   */
    float *xb;              /* (B, dim) normed input / attention output   */
    float *xb2;             /* (B, dim) projection output                 */
    float *q;               /* (B, n_heads*head_size) queries             */
    float *k_new, *v_new;   /* (B, n_kv_heads*head_size) this batch's k, v */
    float *hb, *hb2;        /* (B, hidden_dim) FFN gate and up            */
    float *rope;            /* (B, head_size) cos,sin pairs per position  */
    float *logits;          /* (B, vocab) with LLM_LOGITS_ALL, else (vocab,) */
    int8_t *act_q;          /* (B, max(dim,hidden)) q8_0 activations      */
    float *act_scale;       /* their group scales                         */
    void *key_cache;        /* (layer, ctx, n_kv_heads*head_size) of kv_type */
    void *value_cache;
    uint16_t *key_scale;    /* int8 cache: (layer, ctx, n_kv_heads) f16 scales */
    uint16_t *value_scale;
    llm_config cfg;         /* the config the state was planned for: forward
                               refuses a model of another shape */
    char error[200];
} llm_state;

/* Parse and validate a checkpoint (llama2.c legacy or LLMW) in place. */
int llm_load(llm_model *m, const void *bytes, size_t n_bytes);
/* Check the config after the caller changed norm settings. */
int llm_check_config(llm_model *m);
/* The arena plan for these options: every buffer's size, and the total. */
llm_plan llm_state_plan(const llm_config *c, const llm_state_options *o);
size_t llm_state_size(const llm_config *c, const llm_state_options *o);
/* Carve the state from a 64-byte-aligned arena of at least llm_state_size()
 * (SIZE_MAX when the plan exceeds this host's address space). The
 * activations are zeroed; the KV cache is not touched until it is written,
 * so a large cache costs memory only as far as the context fills. */
int llm_state_init(llm_state *s, const llm_model *m, const llm_state_options *o,
                   void *arena, size_t arena_size);
/* Run n tokens at positions pos..pos+n-1 as one batch; logits in s->logits. */
int llm_forward(const llm_model *m, llm_state *s, const int *tokens, int n, int pos,
                int which_logits);
const char *llm_status_text(int status);
/* Parse "rms"/"layer", "pre"/"post", "on"/"off": the value, or -1. */
int llm_parse_norm_type(const char *s);
int llm_parse_norm_pos(const char *s);
int llm_parse_on_off(const char *s);
const char *llm_norm_type_name(int t);
const char *llm_norm_pos_name(int p);
const char *llm_dtype_name(int t);
const char *llm_kv_type_name(int t);
int llm_parse_kv_type(const char *s);   /* "f32", "f16", "q8", or -1 */
const char *llm_simd_name(void);        /* the kernels this build runs: "avx512", "neon", ... */

/* Scalar kernels, public so tests can check them against their formulas. */
void llm_rmsnorm(float *out, const float *x, const float *g, int n, float eps);
void llm_layernorm(float *out, const float *x, const float *g, const float *b, int n,
                   float eps);
void llm_matvec(float *out, const llm_matrix *w, const float *x, int8_t *xq, float *xs);
void llm_softmax(float *x, int n);
float llm_f16_to_f32(uint16_t h);
uint16_t llm_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
#endif /* MODEL_H */

/* ===================================================================== */
/* Implementation                                                         */
/* ===================================================================== */
#ifdef MODEL_IMPLEMENTATION
#ifndef MODEL_IMPLEMENTATION_DONE
#define MODEL_IMPLEMENTATION_DONE

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
#include <immintrin.h>   /* x86 vector paths: quantization, exp, max, attention, tiles */
#endif

#ifndef MODEL_ASSERT
#define MODEL_ASSERT(x) ((void)0)
#endif

#if defined(_OPENMP) && !defined(MODEL_NO_OPENMP)
#define LLM__OMP 1
#define LLM__PRAGMA(x) _Pragma(#x)
#else
#define LLM__OMP 0
#define LLM__PRAGMA(x)
#endif
/* Threads pay only above this many multiply-adds: below it, waking a
 * sleeping thread costs more than the work (all of stories260K's products,
 * and a 15M model's per-layer ones in decode, stay on one thread). The
 * state's parallel_min_work starts here; with threads that spin while idle
 * (answering in a microsecond or so), 1 << 16 pays. */
#ifndef LLM_PARALLEL_MIN_WORK
#define LLM_PARALLEL_MIN_WORK (1L << 19)
#endif
/* The for statement (the last argument) over independent iterations, across
 * threads when `cond` holds, else plainly: a parallel region costs even when
 * its if clause is false (libgomp sets up a team of one and signals through a
 * futex, a system call per region), so small steps never enter one. */
#if LLM__OMP
#define LLM__PARALLEL_FOR(nthreads, cond, ...)                                          \
    do {                                                                                 \
        if ((nthreads) > 1 && (cond)) {                                                  \
            LLM__PRAGMA(omp parallel for schedule(static) num_threads(nthreads))         \
            __VA_ARGS__                                                                  \
        } else {                                                                         \
            __VA_ARGS__                                                                  \
        }                                                                                \
    } while (0)
#else
#define LLM__PARALLEL_FOR(nthreads, cond, ...) do { (void)(nthreads); (void)(cond); __VA_ARGS__ } while (0)
#endif

/* A tiny snprintf for error messages (%d %u %zu %llu %s %g %p %%), so the
 * engine needs no stdio on a device: always NUL-terminates, truncates. */
typedef struct llm__out { char *buf; size_t cap, len; } llm__out;
static void llm__putc(llm__out *o, char c) { if (o->len + 1 < o->cap) o->buf[o->len] = c; o->len++; }
static void llm__puts(llm__out *o, const char *s) { while (*s) llm__putc(o, *s++); }
static void llm__putu(llm__out *o, unsigned long long v, int base) {
    char tmp[24];
    int n = 0;
    do { tmp[n++] = "0123456789abcdef"[v % (unsigned)base]; v /= (unsigned)base; } while (v);
    while (n) llm__putc(o, tmp[--n]);
}
static void llm__putg(llm__out *o, double v) { /* %g with 6 significant digits */
    if (v != v) { llm__puts(o, "nan"); return; }
    if (v < 0) { llm__putc(o, '-'); v = -v; }
    if (v > 1.7976931348623157e308) { llm__puts(o, "inf"); return; }
    int e = 0;
    if (v != 0.0) {
        while (v >= 10.0) { v /= 10.0; e++; }
        while (v < 1.0) { v *= 10.0; e--; }
    }
    unsigned long long digits = (unsigned long long)(v * 100000.0 + 0.5); /* d.ddddd */
    if (digits >= 1000000ull) { digits /= 10; e++; }
    char d[6];
    for (int i = 5; i >= 0; i--) { d[i] = (char)('0' + digits % 10); digits /= 10; }
    int last = 5;
    while (last > 0 && d[last] == '0') last--;
    if (e < -4 || e >= 6) { /* d.ddde+XX */
        llm__putc(o, d[0]);
        if (last > 0) { llm__putc(o, '.'); for (int i = 1; i <= last; i++) llm__putc(o, d[i]); }
        llm__putc(o, 'e'); llm__putc(o, e < 0 ? '-' : '+');
        if (e < 0) e = -e;
        if (e < 10) llm__putc(o, '0');
        llm__putu(o, (unsigned long long)e, 10);
    } else if (e >= 0) {
        for (int i = 0; i <= e; i++) llm__putc(o, d[i]);
        if (last > e) { llm__putc(o, '.'); for (int i = e + 1; i <= last; i++) llm__putc(o, d[i]); }
    } else {
        llm__puts(o, "0.");
        for (int i = 0; i < -e - 1; i++) llm__putc(o, '0');
        for (int i = 0; i <= last; i++) llm__putc(o, d[i]);
    }
}
static void llm__fmt(char *buf, size_t cap, const char *fmt, ...) {
    llm__out o;
    va_list ap;
    o.buf = buf; o.cap = cap; o.len = 0;
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') { llm__putc(&o, *f); continue; }
        f++;
        if (*f == 'd') { long long v = va_arg(ap, int); if (v < 0) { llm__putc(&o, '-'); v = -v; } llm__putu(&o, (unsigned long long)v, 10); }
        else if (*f == 'u') llm__putu(&o, va_arg(ap, unsigned), 10);
        else if (*f == 'z' && f[1] == 'u') { f++; llm__putu(&o, va_arg(ap, size_t), 10); }
        else if (*f == 'l' && f[1] == 'l' && f[2] == 'u') { f += 2; llm__putu(&o, va_arg(ap, unsigned long long), 10); }
        else if (*f == 's') llm__puts(&o, va_arg(ap, const char *));
        else if (*f == 'g') llm__putg(&o, va_arg(ap, double));
        else if (*f == 'p') { llm__puts(&o, "0x"); llm__putu(&o, (unsigned long long)(uintptr_t)va_arg(ap, void *), 16); }
        else if (*f == '%') llm__putc(&o, '%');
        else { llm__putc(&o, '%'); if (!*f) break; llm__putc(&o, *f); }
    }
    va_end(ap);
    if (cap) buf[o.len < cap ? o.len : cap - 1] = '\0';
}

/* --------------------------------------------------------------------- */
/* Small helpers                                                          */
/* --------------------------------------------------------------------- */

/* Size arithmetic. Every size that comes from a file field or an option is
 * computed in 64 bits on every host (the Cortex-M targets and i386 have a
 * 32-bit size_t), saturating at UINT64_MAX, and only converted to size_t
 * after it has been checked against the file size or SIZE_MAX. */
static uint64_t llm__mul(uint64_t a, uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}
static uint64_t llm__add(uint64_t a, uint64_t b) { return (b > UINT64_MAX - a) ? UINT64_MAX : a + b; }
static uint64_t llm__clamp_u64(int v, int lo, int hi) { return (uint64_t)(v < lo ? lo : v > hi ? hi : v); }
/* n rounded up to LLM_ALIGN; a saturated size stays saturated */
static uint64_t llm__align(uint64_t n) {
    return n > UINT64_MAX - (LLM_ALIGN - 1) ? UINT64_MAX : (n + (LLM_ALIGN - 1)) & ~(uint64_t)(LLM_ALIGN - 1);
}

static int32_t llm__i32(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, 4);
    return r;
}
static uint32_t llm__u32(const unsigned char *p) { return (uint32_t)llm__i32(p); }
static float llm__f32(const unsigned char *p) {
    uint32_t v = llm__u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static uint64_t llm__u64(const unsigned char *p) {
    return (uint64_t)llm__u32(p) | (uint64_t)llm__u32(p + 4) << 32;
}

const char *llm_status_text(int status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_ERR_FORMAT: return "bad checkpoint format";
    case LLM_ERR_SIZE: return "checkpoint size mismatch";
    case LLM_ERR_CONFIG: return "bad model configuration";
    case LLM_ERR_VERSION: return "unsupported format version";
    case LLM_ERR_ARENA: return "arena too small";
    case LLM_ERR_ARG: return "bad argument";
    }
    return "unknown status";
}

int llm_parse_norm_type(const char *s) {
    if (!strcmp(s, "rms")) return LLM_NORM_RMS;
    if (!strcmp(s, "layer")) return LLM_NORM_LAYER;
    return -1;
}
int llm_parse_norm_pos(const char *s) {
    if (!strcmp(s, "pre")) return LLM_NORM_PRE;
    if (!strcmp(s, "post")) return LLM_NORM_POST;
    return -1;
}
int llm_parse_on_off(const char *s) {
    if (!strcmp(s, "on")) return 1;
    if (!strcmp(s, "off")) return 0;
    return -1;
}
const char *llm_norm_type_name(int t) { return t == LLM_NORM_LAYER ? "layer" : "rms"; }
const char *llm_norm_pos_name(int p) { return p == LLM_NORM_POST ? "post" : "pre"; }
const char *llm_dtype_name(int t) {
    return t == LLM_F16 ? "f16" : t == LLM_Q8_0 ? "q8_0" : "f32";
}
const char *llm_kv_type_name(int t) { return t == LLM_KV_F16 ? "f16" : t == LLM_KV_Q8 ? "q8" : "f32"; }
int llm_parse_kv_type(const char *s) {
    if (!strcmp(s, "f32")) return LLM_KV_F32;
    if (!strcmp(s, "f16")) return LLM_KV_F16;
    if (!strcmp(s, "q8")) return LLM_KV_Q8;
    return -1;
}

/* IEEE binary16 <-> binary32, exact, portable. */
float llm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t llm_f32_to_f16(float f) { /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (ax < 0x38800000u) { /* subnormal or zero in f16 */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, man = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((ax - 0x38000000u) >> 13), rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

/* ===================================================================== */
/* Loading: llama2.c legacy (headerless) and LLMW                         */
/* ===================================================================== */

static int llm__fail(llm_model *m, int status, const char *msg) {
    llm__fmt(m->error, sizeof m->error, "%s", msg);
    return status;
}


/* Range checks shared by every format; the message (in e, E bytes) names the
 * field. llm_state_init and llm_forward run it too, so no forward pass ever
 * runs on a config it would refuse: the stack rows of attention
 * (LLM_MAX_HEAD_SIZE) and every size in the plan rest on these limits. */
static int llm__check_config(const llm_config *c, char *e, size_t E) {
#define LLM__CHECK(cond, ...) do { if (!(cond)) { llm__fmt(e, E, __VA_ARGS__); return LLM_ERR_CONFIG; } } while (0)
    LLM__CHECK(c->dim > 0 && c->dim <= LLM_MAX_DIM, "dim %d out of range (1..%d)", c->dim, LLM_MAX_DIM);
    LLM__CHECK(c->hidden_dim > 0 && c->hidden_dim <= LLM_MAX_HIDDEN, "hidden_dim %d out of range (1..%d)", c->hidden_dim, LLM_MAX_HIDDEN);
    LLM__CHECK(c->n_layers > 0 && c->n_layers <= LLM_MAX_LAYERS, "n_layers %d out of range (1..%d)", c->n_layers, LLM_MAX_LAYERS);
    LLM__CHECK(c->n_heads > 0 && c->n_heads <= c->dim, "n_heads %d out of range", c->n_heads);
    LLM__CHECK(c->n_kv_heads > 0 && c->n_kv_heads <= c->n_heads, "n_kv_heads %d out of range (1..n_heads=%d)", c->n_kv_heads, c->n_heads);
    LLM__CHECK(c->vocab_size > 0 && c->vocab_size <= LLM_MAX_VOCAB, "vocab_size %d out of range", c->vocab_size);
    LLM__CHECK(c->seq_len > 0 && c->seq_len <= LLM_MAX_SEQ, "seq_len %d out of range", c->seq_len);
    LLM__CHECK(c->dim % c->n_heads == 0, "dim %d is not a multiple of n_heads %d", c->dim, c->n_heads);
    LLM__CHECK(c->n_heads % c->n_kv_heads == 0, "n_heads %d is not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
    LLM__CHECK(c->head_size > 0 && c->head_size % 2 == 0, "head size %d must be even", c->head_size);
    LLM__CHECK(c->head_size <= LLM_MAX_HEAD_SIZE, "head size %d above this build's LLM_MAX_HEAD_SIZE %d", c->head_size, LLM_MAX_HEAD_SIZE);
    LLM__CHECK(c->norm_type == LLM_NORM_RMS || c->norm_type == LLM_NORM_LAYER, "norm_type %d unknown", c->norm_type);
    LLM__CHECK(c->norm_pos == LLM_NORM_PRE || c->norm_pos == LLM_NORM_POST, "norm_pos %d unknown", c->norm_pos);
    LLM__CHECK(c->final_norm == 0 || c->final_norm == 1, "final_norm %d must be 0 or 1", c->final_norm);
    LLM__CHECK(c->norm_eps > 0.0f && c->norm_eps < 1.0f, "norm eps %g out of range (0, 1)", (double)c->norm_eps);
    LLM__CHECK(c->rope_theta > 0.0f && c->rope_theta <= FLT_MAX, "rope_theta %g must be positive and finite", (double)c->rope_theta);
    LLM__CHECK(c->rope_layout == LLM_ROPE_INTERLEAVED || c->rope_layout == LLM_ROPE_HALF, "rope_layout %d unknown", c->rope_layout);
    LLM__CHECK(c->weight_type >= LLM_F32 && c->weight_type <= LLM_Q8_0, "weight type %d unknown", c->weight_type);
    LLM__CHECK(c->weight_type != LLM_Q8_0 || (c->group_size > 0 && c->group_size <= 4096), "q8_0 group size %d out of range (1..4096)", c->group_size);
#undef LLM__CHECK
    return LLM_OK;
}
int llm_check_config(llm_model *m) { return llm__check_config(&m->cfg, m->error, sizeof m->error); }

/* A layer tensor view at `base` with `rows` x `cols`; stride set by the layout. */
static llm_tensor llm__tensor(const unsigned char *base, size_t stride, int rows, int cols) {
    llm_tensor t;
    t.base = base; t.stride = stride; t.scale_offset = 0; t.rows = rows; t.cols = cols;
    return t;
}

static llm_matrix llm__matrix(const void *data, const float *scale, int type, int rows, int cols, int group) {
    llm_matrix w;
    w.data = data; w.scale = scale; w.type = type; w.rows = rows; w.cols = cols; w.group = group;
    return w;
}

/* Layer l of a matrix tensor, in the model's weight type. */
static llm_matrix llm__layer_matrix(const llm_model *m, const llm_tensor *t, int l) {
    const unsigned char *p = t->base + (size_t)l * t->stride;
    const float *scale = t->scale_offset ? (const float *)(const void *)(p + t->scale_offset) : NULL;
    return llm__matrix(p, scale, m->cfg.weight_type, t->rows, t->cols, m->cfg.group_size);
}
static const float *llm__layer_vector(const llm_tensor *t, int l) {
    return t->base ? (const float *)(const void *)(t->base + (size_t)l * t->stride) : NULL;
}

/* The seven int32 of every llama2.c header, and the settings llama2.c implies:
 * pre-RMSNorm with a final norm, eps 1e-5, RoPE theta 10000 on interleaved pairs. */
static int llm__llama2c_config(llm_model *m, const unsigned char *h, int format) {
    llm_config *c = &m->cfg;
    c->dim = llm__i32(h); c->hidden_dim = llm__i32(h + 4); c->n_layers = llm__i32(h + 8);
    c->n_heads = llm__i32(h + 12); c->n_kv_heads = llm__i32(h + 16);
    int vocab = llm__i32(h + 20);
    c->seq_len = llm__i32(h + 24);
    c->shared_classifier = vocab > 0;   /* ak42 files overwrite this from their flag */
    c->vocab_size = vocab == INT32_MIN ? 0 : (vocab < 0 ? -vocab : vocab);
    c->head_size = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->norm_type = LLM_NORM_RMS; c->norm_pos = LLM_NORM_PRE; c->final_norm = 1;
    c->norm_eps = 1e-5f; c->rope_theta = 10000.0f; c->rope_layout = LLM_ROPE_INTERLEAVED;
    c->weight_type = LLM_F32; c->group_size = 0; c->norm_bias = 0; c->format = format;
    return llm_check_config(m);
}

/* llama2.c legacy: 7 int32, then f32 tensors each stacked over layers. */
static int llm__load_legacy(llm_model *m, const unsigned char *b, size_t n) {
    llm_config *c = &m->cfg;
    if (n < 28) return llm__fail(m, LLM_ERR_SIZE, "file too short for a llama2.c header (28 bytes)");
    int st = llm__llama2c_config(m, b, LLM_FORMAT_LEGACY);
    if (st != LLM_OK) return st;

    /* float counts, in file order, in 64 bits: the limits llm_check_config
     * enforces keep every product below 2^48, on every host */
    uint64_t L = (uint64_t)c->n_layers, D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t counts[13] = { V * D, L * D, L * qd * D, L * kvd * D, L * kvd * D, L * D * qd, L * D,
                            L * H * D, L * D * H, L * H * D, D,
                            (uint64_t)c->seq_len * (uint64_t)c->head_size, /* freq_cis_real + imag (unused) */
                            c->shared_classifier ? 0 : V * D };
    uint64_t want = 28;
    for (int i = 0; i < 13; i++) want = llm__add(want, llm__mul(counts[i], 4));
    if (want != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint is %zu bytes but its header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq_len %d) implies %llu: truncated or not a llama2.c file",
                 n, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len,
                 (unsigned long long)want);
        return LLM_ERR_SIZE;
    }
    /* from here every size below is part of the n bytes, so it fits a size_t */
    const float *f = (const float *)(const void *)(b + 28);
    llm_weights *w = &m->w;
    memset(w, 0, sizeof *w);
    w->tok_embeddings = llm__matrix(f, NULL, LLM_F32, (int)V, (int)D, 0); f += counts[0];
    w->attn_norm = llm__tensor((const unsigned char *)f, (size_t)(D * 4), 1, (int)D); f += counts[1];
    w->wq = llm__tensor((const unsigned char *)f, (size_t)(qd * D * 4), (int)qd, (int)D); f += counts[2];
    w->wk = llm__tensor((const unsigned char *)f, (size_t)(kvd * D * 4), (int)kvd, (int)D); f += counts[3];
    w->wv = llm__tensor((const unsigned char *)f, (size_t)(kvd * D * 4), (int)kvd, (int)D); f += counts[4];
    w->wo = llm__tensor((const unsigned char *)f, (size_t)(D * qd * 4), (int)D, (int)qd); f += counts[5];
    w->ffn_norm = llm__tensor((const unsigned char *)f, (size_t)(D * 4), 1, (int)D); f += counts[6];
    w->w1 = llm__tensor((const unsigned char *)f, (size_t)(H * D * 4), (int)H, (int)D); f += counts[7];
    w->w2 = llm__tensor((const unsigned char *)f, (size_t)(D * H * 4), (int)D, (int)H); f += counts[8];
    w->w3 = llm__tensor((const unsigned char *)f, (size_t)(H * D * 4), (int)H, (int)D); f += counts[9];
    w->final_norm = f; f += counts[10];
    f += counts[11];
    w->classifier = c->shared_classifier ? w->tok_embeddings : llm__matrix(f, NULL, LLM_F32, (int)V, (int)D, 0);
    return LLM_OK;
}

/* Bytes a (rows, cols) matrix takes in the LLMW file, and where its scales start. */
static uint64_t llm__matrix_bytes(const llm_config *c, uint64_t rows, uint64_t cols, uint64_t *scale_offset) {
    *scale_offset = 0;
    if (c->weight_type == LLM_F32) return llm__mul(llm__mul(rows, cols), 4);
    if (c->weight_type == LLM_F16) return llm__mul(llm__mul(rows, cols), 2);
    uint64_t groups = (cols + (uint64_t)c->group_size - 1) / (uint64_t)c->group_size;
    *scale_offset = llm__align(llm__mul(rows, cols));
    return llm__add(*scale_offset, llm__mul(llm__mul(rows, groups), 4));
}

/* LLMW: 256-byte header, then 64-byte-aligned tensors, layer by layer. */
static int llm__load_llmw(llm_model *m, const unsigned char *b, size_t n) {
    llm_config *c = &m->cfg;
    if (n < LLM_HEADER_SIZE) return llm__fail(m, LLM_ERR_SIZE, "file shorter than the 256-byte LLMW header: truncated");
    uint32_t version = llm__u32(b + 4);
    if (version > LLM_VERSION) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint format version %u is newer than this engine reads (%d): update the engine",
                 (unsigned)version, LLM_VERSION);
        return LLM_ERR_VERSION;
    }
    if (version == 0) return llm__fail(m, LLM_ERR_FORMAT, "LLMW version 0 is invalid");
    if (llm__u32(b + 8) != LLM_HEADER_SIZE || llm__u32(b + 12) != LLM_ALIGN)
        return llm__fail(m, LLM_ERR_FORMAT, "LLMW header size or alignment field is not 256/64: corrupt header");
    c->dim = llm__i32(b + 16); c->hidden_dim = llm__i32(b + 20); c->n_layers = llm__i32(b + 24);
    c->n_heads = llm__i32(b + 28); c->n_kv_heads = llm__i32(b + 32); c->vocab_size = llm__i32(b + 36);
    c->seq_len = llm__i32(b + 40); c->head_size = llm__i32(b + 44);
    c->norm_type = (int)llm__u32(b + 48); c->norm_pos = (int)llm__u32(b + 52);
    c->final_norm = (int)llm__u32(b + 56); c->norm_eps = llm__f32(b + 60);
    c->rope_theta = llm__f32(b + 64); c->rope_layout = (int)llm__u32(b + 68);
    c->shared_classifier = (int)llm__u32(b + 72); c->weight_type = (int)llm__u32(b + 76);
    c->group_size = (int)llm__u32(b + 80); c->norm_bias = (int)llm__u32(b + 84);
    c->format = LLM_FORMAT_LLMW;
    uint64_t file_size = llm__u64(b + 88);
    int st = llm_check_config(m);
    if (st != LLM_OK) return st;
    if (c->head_size * c->n_heads != c->dim) return llm__fail(m, LLM_ERR_CONFIG, "head_size * n_heads != dim");
    if (c->shared_classifier > 1 || c->norm_bias > 1 || c->shared_classifier < 0 || c->norm_bias < 0)
        return llm__fail(m, LLM_ERR_FORMAT, "shared_classifier/norm_bias flags must be 0 or 1");

    /* every offset in 64 bits; once the end matches the file's n bytes, each fits a size_t */
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t vec = llm__align(D * 4), so_emb, so_q, so_k, so_o, so_1, so_2;
    uint64_t emb = llm__align(llm__matrix_bytes(c, V, D, &so_emb));
    uint64_t mq = llm__align(llm__matrix_bytes(c, qd, D, &so_q));
    uint64_t mk = llm__align(llm__matrix_bytes(c, kvd, D, &so_k));
    uint64_t mo = llm__align(llm__matrix_bytes(c, D, qd, &so_o));
    uint64_t m1 = llm__align(llm__matrix_bytes(c, H, D, &so_1));
    uint64_t m2 = llm__align(llm__matrix_bytes(c, D, H, &so_2));
    uint64_t nb = c->norm_bias ? 2 : 1;
    uint64_t layer = llm__add(llm__add(llm__mul(vec, 2 * nb), llm__add(mq, llm__mul(mk, 2))),
                              llm__add(mo, llm__add(llm__mul(m1, 2), m2)));
    uint64_t off = LLM_HEADER_SIZE;
    uint64_t o_emb = off; off = llm__add(off, emb);
    uint64_t o_layers = off; off = llm__add(off, llm__mul(layer, (uint64_t)c->n_layers));
    uint64_t o_final = off;
    uint64_t o_cls = llm__add(off, llm__mul(vec, nb)), cls_so = so_emb;
    /* the file ends right after its last tensor: the last norm vector or the classifier */
    uint64_t end = c->shared_classifier ? llm__add(o_final, (nb - 1) * vec + D * 4)
                                        : llm__add(o_cls, llm__matrix_bytes(c, V, D, &cls_so));
    if (end != file_size || file_size != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error,
                 "checkpoint is %zu bytes, its header records %llu and its shape implies %llu: truncated or corrupt; re-export with export.py",
                 n, (unsigned long long)file_size, (unsigned long long)end);
        return LLM_ERR_SIZE;
    }
    llm_weights *w = &m->w;
    memset(w, 0, sizeof *w);
    const unsigned char *p = b + o_emb;
    w->tok_embeddings = llm__matrix(p, so_emb ? (const float *)(const void *)(p + so_emb) : NULL,
                                    c->weight_type, (int)V, (int)D, c->group_size);
    p = b + o_layers;
#define LLM__NEXT(field, bytes, so, rows, cols) \
    do { w->field = llm__tensor(p, (size_t)layer, (int)(rows), (int)(cols)); w->field.scale_offset = (size_t)(so); p += (bytes); } while (0)
    LLM__NEXT(attn_norm, vec, 0, 1, D);
    if (c->norm_bias) LLM__NEXT(attn_norm_bias, vec, 0, 1, D);
    LLM__NEXT(wq, mq, so_q, qd, D);
    LLM__NEXT(wk, mk, so_k, kvd, D);
    LLM__NEXT(wv, mk, so_k, kvd, D);
    LLM__NEXT(wo, mo, so_o, D, qd);
    LLM__NEXT(ffn_norm, vec, 0, 1, D);
    if (c->norm_bias) LLM__NEXT(ffn_norm_bias, vec, 0, 1, D);
    LLM__NEXT(w1, m1, so_1, H, D);
    LLM__NEXT(w2, m2, so_2, D, H);
    LLM__NEXT(w3, m1, so_1, H, D);
#undef LLM__NEXT
    w->final_norm = (const float *)(const void *)(b + o_final);
    w->final_norm_bias = c->norm_bias ? (const float *)(const void *)(b + o_final + vec) : NULL;
    if (c->shared_classifier) {
        w->classifier = w->tok_embeddings;
    } else {
        p = b + o_cls;
        w->classifier = llm__matrix(p, cls_so ? (const float *)(const void *)(p + cls_so) : NULL,
                                    c->weight_type, (int)V, (int)D, c->group_size);
    }
    return LLM_OK;
}

/* llama2.c's versioned files: "ak42", version, the 7 int32, a shared-classifier
 * byte (version 2: then an int32 group size), padding to 256 bytes. Then the
 * f32 norms (all attention norms, all FFN norms, the final norm) and the
 * matrices, each stacked over layers: tok_embeddings, wq, wk, wv, wo, w1, w2,
 * w3, the classifier if not shared. Version 1 stores them as f32; version 2
 * as int8 values followed by f32 scales, one per group of the flattened
 * tensor, tensor by tensor and layer by layer. */
static int llm__load_ak42(llm_model *m, const unsigned char *b, size_t n) {
    llm_config *c = &m->cfg;
    if (n < LLM_HEADER_SIZE) return llm__fail(m, LLM_ERR_SIZE, "file shorter than llama2.c's 256-byte ak42 header: truncated");
    int version = llm__i32(b + 4);
    if (version != 1 && version != 2) {
        llm__fmt(m->error, sizeof m->error, "llama2.c ak42 version %d is not read (versions 1 and 2 are): convert it with export.py", version);
        return LLM_ERR_VERSION;
    }
    int st = llm__llama2c_config(m, b + 8, version == 1 ? LLM_FORMAT_AK42_V1 : LLM_FORMAT_AK42_V2);
    if (st != LLM_OK) return st;
    if (b[36] > 1) return llm__fail(m, LLM_ERR_FORMAT, "ak42 shared_classifier byte is not 0 or 1: corrupt header");
    c->shared_classifier = b[36];
    /* every offset in 64 bits; once the end matches the file's n bytes, each fits a size_t */
    uint64_t L = (uint64_t)c->n_layers, D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, V = (uint64_t)c->vocab_size;
    uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_size, kvd = (uint64_t)c->n_kv_heads * (uint64_t)c->head_size;
    uint64_t G = 0;
    if (version == 2) {
        c->weight_type = LLM_Q8_0;
        c->group_size = llm__i32(b + 37);
        G = (uint64_t)c->group_size;
        if (c->group_size <= 0 || c->group_size > 4096 || c->group_size % 4)
            return llm__fail(m, LLM_ERR_CONFIG, "ak42 int8 group size must be a positive multiple of 4 (at most 4096)");
        if (D % G || H % G || qd % G) {
            llm__fmt(m->error, sizeof m->error,
                     "ak42 int8 groups of %d span matrix rows (dim %d, hidden %d): convert it with export.py",
                     c->group_size, c->dim, c->hidden_dim);
            return LLM_ERR_FORMAT;
        }
    }
    /* bytes of one (rows, cols) matrix, and where its scales start */
#define LLM__AK_BYTES(rows, cols) (version == 1 ? llm__mul(llm__mul(rows, cols), 4) \
                                                : llm__add(llm__mul(rows, cols), llm__mul(llm__mul(rows, cols) / G, 4)))
#define LLM__AK_SCALES(rows, cols) (version == 1 ? 0 : llm__mul(rows, cols))
    uint64_t off = LLM_HEADER_SIZE;
    uint64_t o_attn = off, o_ffn = o_attn + L * D * 4, o_final = o_ffn + L * D * 4;
    off = o_final + D * 4;
    uint64_t sizes[9] = { LLM__AK_BYTES(V, D), LLM__AK_BYTES(qd, D), LLM__AK_BYTES(kvd, D), LLM__AK_BYTES(kvd, D),
                        LLM__AK_BYTES(D, qd), LLM__AK_BYTES(H, D), LLM__AK_BYTES(D, H), LLM__AK_BYTES(H, D),
                        c->shared_classifier ? 0 : LLM__AK_BYTES(V, D) };
    uint64_t starts[9];
    for (int i = 0; i < 9; i++) {
        starts[i] = off;
        off = llm__add(off, (i == 0 || i == 8) ? sizes[i] : llm__mul(sizes[i], L));
    }
    if (off != (uint64_t)n) {
        llm__fmt(m->error, sizeof m->error, "checkpoint is %zu bytes but its ak42 version %d header implies %llu: truncated or corrupt",
                 n, version, (unsigned long long)off);
        return LLM_ERR_SIZE;
    }
    llm_weights *w = &m->w;
    memset(w, 0, sizeof *w);
    w->attn_norm = llm__tensor(b + o_attn, (size_t)(D * 4), 1, (int)D);
    w->ffn_norm = llm__tensor(b + o_ffn, (size_t)(D * 4), 1, (int)D);
    w->final_norm = (const float *)(const void *)(b + o_final);
    uint64_t so_emb = LLM__AK_SCALES(V, D);
    w->tok_embeddings = llm__matrix(b + starts[0], version == 2 ? (const float *)(const void *)(b + starts[0] + so_emb) : NULL,
                                    c->weight_type, (int)V, (int)D, c->group_size);
    llm_tensor *mats[7] = { &w->wq, &w->wk, &w->wv, &w->wo, &w->w1, &w->w2, &w->w3 };
    uint64_t rows[7] = { qd, kvd, kvd, D, H, D, H }, cols[7] = { D, D, D, qd, D, H, D };
    for (int i = 0; i < 7; i++) {
        *mats[i] = llm__tensor(b + starts[i + 1], (size_t)sizes[i + 1], (int)rows[i], (int)cols[i]);
        mats[i]->scale_offset = (size_t)LLM__AK_SCALES(rows[i], cols[i]);
    }
    w->classifier = c->shared_classifier ? w->tok_embeddings
        : llm__matrix(b + starts[8], version == 2 ? (const float *)(const void *)(b + starts[8] + so_emb) : NULL,
                      c->weight_type, (int)V, (int)D, c->group_size);
#undef LLM__AK_BYTES
#undef LLM__AK_SCALES
    return LLM_OK;
}

int llm_load(llm_model *m, const void *bytes, size_t n_bytes) {
    const unsigned char *b = (const unsigned char *)bytes;
    memset(m, 0, sizeof *m);
    if (!b) return llm__fail(m, LLM_ERR_ARG, "no checkpoint bytes given");
    if ((uintptr_t)b % 4 != 0) return llm__fail(m, LLM_ERR_ARG, "checkpoint bytes must be 4-byte aligned in memory");
    if (n_bytes >= 4 && memcmp(b, LLM_MAGIC, 4) == 0) return llm__load_llmw(m, b, n_bytes);
    if (n_bytes >= 4 && llm__u32(b) == 0x616b3432u) return llm__load_ak42(m, b, n_bytes);
    return llm__load_legacy(m, b, n_bytes);
}

/* ===================================================================== */
/* Size plan                                                              */
/* ===================================================================== */

/* The options with their defaults filled in. */
static llm_state_options llm__options(const llm_config *c, const llm_state_options *o) {
    llm_state_options r;
    memset(&r, 0, sizeof r);
    if (o) r = *o;
    if (r.ctx_len == 0) r.ctx_len = c->seq_len;
    if (r.max_batch == 0) r.max_batch = 1;
    return r;
}

static size_t llm__kv_elem_bytes(int kv_type) { return kv_type == LLM_KV_F32 ? 4 : kv_type == LLM_KV_F16 ? 2 : 1; }

static size_t llm__size(uint64_t n) { return n > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)n; }

llm_plan llm_state_plan(const llm_config *c, const llm_state_options *opt) {
    llm_state_options o = llm__options(c, opt);
    /* every field clamped to its limit first, so even the plan of an
     * unchecked config is a number below 2^60, never a wrapped one */
    uint64_t B = llm__clamp_u64(o.max_batch, 1, LLM_MAX_BATCH), D = llm__clamp_u64(c->dim, 0, LLM_MAX_DIM);
    uint64_t H = llm__clamp_u64(c->hidden_dim, 0, LLM_MAX_HIDDEN), ctx = llm__clamp_u64(o.ctx_len, 0, LLM_MAX_SEQ);
    uint64_t L = llm__clamp_u64(c->n_layers, 0, LLM_MAX_LAYERS), V = llm__clamp_u64(c->vocab_size, 0, LLM_MAX_VOCAB);
    uint64_t hs = llm__clamp_u64(c->head_size, 0, LLM_MAX_HEAD_SIZE), G = llm__clamp_u64(c->group_size, 0, 4096);
    uint64_t n_kv = llm__clamp_u64(c->n_kv_heads, 0, LLM_MAX_DIM);
    uint64_t qd = llm__clamp_u64(c->n_heads, 0, LLM_MAX_DIM) * hs, kvd = n_kv * hs;
    uint64_t widest = D > H ? D : H, groups = G > 0 ? (widest + G - 1) / G : 0;
    uint64_t x = B * D * 4, xb = B * (D > qd ? D : qd) * 4, q = B * qd * 4, kv_new = B * kvd * 4, hb = B * H * 4;
    uint64_t rope = B * hs * 4, logits = (o.all_logits ? B : 1) * V * 4;
    uint64_t act_q = c->weight_type == LLM_Q8_0 ? llm__align(B * widest) + B * groups * 4 : 0;
    uint64_t cache = L * ctx * kvd * llm__kv_elem_bytes(o.kv_type);
    /* int8 cache: one f16 scale per (layer, position, kv head), keys and values */
    uint64_t kv_scales = o.kv_type == LLM_KV_Q8 ? L * ctx * n_kv * 2 : 0;
    /* in carving order: x, xb, xb2, q, k_new, v_new, hb, hb2, rope, logits, act_q, caches, scales */
    uint64_t parts[15] = { x, xb, x, q, kv_new, kv_new, hb, hb, rope, logits, act_q, cache, cache, kv_scales, kv_scales };
    llm_plan p;
    p.total_bytes = 0;
    for (int i = 0; i < 15; i++) p.total_bytes += llm__align(parts[i]);
    p.x = llm__size(x); p.xb = llm__size(xb); p.xb2 = p.x; p.q = llm__size(q); p.kv_new = llm__size(kv_new);
    p.hb = llm__size(hb); p.hb2 = p.hb; p.rope = llm__size(rope); p.logits = llm__size(logits);
    p.act_q = llm__size(act_q); p.key_cache = llm__size(cache); p.value_cache = p.key_cache;
    p.kv_scales = llm__size(kv_scales); p.total = llm__size(p.total_bytes);
    return p;
}

size_t llm_state_size(const llm_config *c, const llm_state_options *o) {
    return llm_state_plan(c, o).total;
}

/* Carve `bytes` from the arena at *at, aligned (the plan's total fits the arena). */
static void *llm__carve(unsigned char *arena, size_t *at, size_t bytes) {
    void *p = arena + *at;
    *at += (size_t)llm__align(bytes);
    return p;
}

int llm_state_init(llm_state *s, const llm_model *m, const llm_state_options *opt,
                   void *arena, size_t arena_size) {
    const llm_config *c = &m->cfg;
    llm_state_options o = llm__options(c, opt);
    memset(s, 0, sizeof *s);
    s->n_threads = 1;
    s->parallel_min_work = LLM_PARALLEL_MIN_WORK;
    if (llm__check_config(c, s->error, sizeof s->error) != LLM_OK) return LLM_ERR_CONFIG;
    if (o.ctx_len < 1 || o.ctx_len > c->seq_len) {
        llm__fmt(s->error, sizeof s->error, "context length %d out of range (1..%d, the model's seq_len)", o.ctx_len, c->seq_len);
        return LLM_ERR_ARG;
    }
    int batch_max = o.ctx_len < LLM_MAX_BATCH ? o.ctx_len : LLM_MAX_BATCH;
    if (o.max_batch < 1 || o.max_batch > batch_max) {
        llm__fmt(s->error, sizeof s->error, "batch size %d out of range (1..%d)", o.max_batch, batch_max);
        return LLM_ERR_ARG;
    }
    if (o.kv_type < LLM_KV_F32 || o.kv_type > LLM_KV_Q8) {
        llm__fmt(s->error, sizeof s->error, "KV cache type %d unknown (f32, f16 or q8)", o.kv_type);
        return LLM_ERR_ARG;
    }
    llm_plan p = llm_state_plan(c, &o);
    if (p.total_bytes > (uint64_t)SIZE_MAX - LLM_ALIGN) {
        llm__fmt(s->error, sizeof s->error, "the state needs %llu bytes, more than this host can address: lower the context",
                 (unsigned long long)p.total_bytes);
        return LLM_ERR_ARENA;
    }
    if (arena_size < p.total || !arena || (uintptr_t)arena % LLM_ALIGN) {
        llm__fmt(s->error, sizeof s->error, "arena of %zu bytes at %p is too small or not %d-aligned: need %zu",
                 arena_size, arena, LLM_ALIGN, p.total);
        return LLM_ERR_ARENA;
    }
    unsigned char *a = (unsigned char *)arena;
    size_t at = 0;
    s->ctx_len = o.ctx_len;
    s->max_batch = o.max_batch;
    s->all_logits = o.all_logits ? 1 : 0;
    s->kv_type = o.kv_type;
    s->cfg = *c;
    s->x = (float *)llm__carve(a, &at, p.x);
    s->xb = (float *)llm__carve(a, &at, p.xb);
    s->xb2 = (float *)llm__carve(a, &at, p.xb2);
    s->q = (float *)llm__carve(a, &at, p.q);
    s->k_new = (float *)llm__carve(a, &at, p.kv_new);
    s->v_new = (float *)llm__carve(a, &at, p.kv_new);
    s->hb = (float *)llm__carve(a, &at, p.hb);
    s->hb2 = (float *)llm__carve(a, &at, p.hb2);
    s->rope = (float *)llm__carve(a, &at, p.rope);
    s->logits = (float *)llm__carve(a, &at, p.logits);
    s->act_q = (int8_t *)llm__carve(a, &at, p.act_q);
    if (p.act_q) {
        size_t D = (size_t)c->dim, H = (size_t)c->hidden_dim, widest = D > H ? D : H;
        s->act_scale = (float *)(void *)((unsigned char *)s->act_q + (size_t)llm__align((uint64_t)o.max_batch * widest));
    }
    memset(arena, 0, at);
    s->key_cache = llm__carve(a, &at, p.key_cache);
    s->value_cache = llm__carve(a, &at, p.value_cache);
    s->key_scale = (uint16_t *)llm__carve(a, &at, p.kv_scales);
    s->value_scale = (uint16_t *)llm__carve(a, &at, p.kv_scales);
    MODEL_ASSERT(at == p.total);
    return LLM_OK;
}

/* ===================================================================== */
/* Scalar kernels (the reference twins)                                   */
/* ===================================================================== */

/* y = g * x / sqrt(mean(x^2) + eps)          x (n,) -> out (n,) */
void llm_rmsnorm(float *out, const float *x, const float *g, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = g[i] * (x[i] * inv);
}

/* y = g * (x - mean) / sqrt(var + eps) + b, biased var   x (n,) -> out (n,) */
void llm_layernorm(float *out, const float *x, const float *g, const float *b, int n, float eps) {
    float mean = 0.0f, var = 0.0f;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= (float)n;
    for (int i = 0; i < n; i++) { float d = x[i] - mean; var += d * d; }
    var /= (float)n;
    float inv = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < n; i++) out[i] = g[i] * ((x[i] - mean) * inv) + (b ? b[i] : 0.0f);
}

/* e^x in float, the engine's own so that every platform (and its vector
 * twin below) computes the same bits: x = n ln2 + r with |r| <= ln2/2,
 * e^r = 1 + r + r^2 P(r) in fused multiply-adds, times 2^n. Within 2 ulp
 * of the true value; flushes results below 2^-126 to zero. */
#define LLM__EXP_LOG2E 1.44269504088896341f
#define LLM__EXP_LN2_HI 0.693145751953125f
#define LLM__EXP_LN2_LO 1.42860682030941723212e-6f
#define LLM__EXP_MIN -87.33654475f
#define LLM__EXP_MAX 88.72283905f
/* e^r = 1 + r + r^2 P(r) with Cephes' minimax coefficients for P */
static const float llm__exp_c[6] = { 5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f, 8.3334519073e-3f,
                                     1.3981999507e-3f, 1.9875691500e-4f };
static inline float llm__expf(float x) {
    if (!(x >= LLM__EXP_MIN && x <= LLM__EXP_MAX)) /* out of range, or NaN */
        return x < LLM__EXP_MIN ? 0.0f : x > LLM__EXP_MAX ? INFINITY : x;
    float t = x * LLM__EXP_LOG2E + 0.5f;
    float n = (float)(int32_t)t;              /* floor(t), without a libm call */
    if (n > t) n -= 1.0f;
    float r = fmaf(n, -LLM__EXP_LN2_HI, x);
    r = fmaf(n, -LLM__EXP_LN2_LO, r);
    float p = llm__exp_c[5];
    for (int i = 4; i >= 0; i--) p = fmaf(p, r, llm__exp_c[i]);
    p = fmaf(p, r * r, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}


/* w_row (n,) . x (n,), f32 */
static float llm__dot_f32(const float *w, const float *x, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc += w[j] * x[j];
    return acc;
}

/* w_row (n,) f16 . x (n,) */
static float llm__dot_f16(const uint16_t *w, const float *x, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc += llm_f16_to_f32(w[j]) * x[j];
    return acc;
}

/* max of x (absolute = 0) or of |x| (absolute = 1) over n >= 1 values, NaNs
 * skipped; eight at a time where a vector unit has them */
static float llm__max(const float *x, int n, int absolute) {
    float max = absolute ? 0.0f : x[0];
    int i = 0;
#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
    if (n >= 8) {
        const __m256 sign = _mm256_set1_ps(absolute ? -0.0f : 0.0f);   /* the bit andnot clears */
        __m256 m = _mm256_set1_ps(max);
        for (; i + 8 <= n; i += 8) /* max_ps(v, m) keeps m when v is NaN */
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
        float lane[8];
        _mm256_storeu_ps(lane, m);
        for (int l = 0; l < 8; l++) if (lane[l] > max) max = lane[l];
    }
#endif
    for (; i < n; i++) {
        float v = absolute ? fabsf(x[i]) : x[i];
        if (v > max) max = v;
    }
    return max;
}

/* x (n,) -> int8 groups xq (n,) with scales xs (ceil(n/G),): x ~ xq * xs */
/* 1 when no x[i] is NaN or infinite */
static int llm__all_finite(const float *x, int n) {
    for (int i = 0; i < n; i++) if (!(fabsf(x[i]) <= FLT_MAX)) return 0;
    return 1;
}

static void llm__quantize_q8(int8_t *xq, float *xs, const float *x, int n, int G) {
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int len = n - g0 < G ? n - g0 : G, j = 0;
        if (!llm__all_finite(x + g0, len)) {
            /* NaN or inf: a NaN scale and zero values, so every product the
             * group enters is NaN, as in the float path (no NaN is cast) */
            xs[gi] = NAN;
            memset(xq + g0, 0, (size_t)len);
            continue;
        }
        float amax = llm__max(x + g0, len, 1);
        float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        xs[gi] = scale;
#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
        /* lroundf eight at a time: truncate, then step away from zero when
         * the dropped fraction (exact) is at least one half */
        const __m256 half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f), vinv = _mm256_set1_ps(inv);
        for (; j + 8 <= len; j += 8) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + g0 + j), vinv);
            __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
            __m256 step = _mm256_and_ps(away, _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)));
            __m256i q = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
            __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64((__m128i *)(void *)(xq + g0 + j), _mm_packs_epi16(q16, q16));
        }
#endif
        for (; j < len; j++) xq[g0 + j] = (int8_t)lroundf(x[g0 + j] * inv);
    }
}

/* int8 row (n,) in groups of G with scales ws . int8 xq with scales xs: integer sums per group */
static float llm__dot_q8(const int8_t *w, const float *ws, const int8_t *xq, const float *xs, int n, int G) {
    float acc = 0.0f;
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int len = n - g0 < G ? n - g0 : G;
        int32_t isum = 0;
        for (int j = 0; j < len; j++) isum += (int32_t)w[g0 + j] * (int32_t)xq[g0 + j];
        acc += (float)isum * ws[gi] * xs[gi];
    }
    return acc;
}

/* The q8_0 dot product as every fast path computes it, so that x86, ARM and
 * a microcontroller print the same text: in each group, chunks of 32 values,
 * eight lanes of four consecutive products summed in integers (what VNNI's
 * dpbusd and ARM's sdot/SMLAD pairs give); each lane accumulates
 * fma(lane_sum, w_scale * x_scale, lane) group after group; the eight lanes
 * are added in a fixed tree at the end. */
#define LLM__Q8_LANES 8
static inline int32_t llm__lane_sum_i8(const int8_t *w, const int8_t *x, int len) { /* len <= 4 */
    int32_t s = 0;
    for (int i = 0; i < len; i++) s += (int32_t)w[i] * (int32_t)x[i];
    return s;
}
#if defined(__ARM_FEATURE_DSP) && !defined(MODEL_NO_SIMD) && !defined(__aarch64__)
#include <arm_acle.h>
/* the four products of one 32-bit word: two SMLADs (Cortex-M4/M7 DSP) */
static inline int32_t llm__word_sum_i8(const int8_t *w, const int8_t *x) {
    uint32_t a, b;
    memcpy(&a, w, 4);
    memcpy(&b, x, 4);
    uint32_t a8 = (a >> 8) | (a << 24), b8 = (b >> 8) | (b << 24);   /* rotate: bytes 1, 3 into 0, 2 */
    return __smlad(__sxtb16(a8), __sxtb16(b8), __smlad(__sxtb16(a), __sxtb16(b), 0));
}
#else
static inline int32_t llm__word_sum_i8(const int8_t *w, const int8_t *x) { return llm__lane_sum_i8(w, x, 4); }
#endif
static inline float llm__lanes_total(const float *lane) {
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}
static inline float llm__dot_q8_lanes(const int8_t *w, const float *ws, const int8_t *xq, const float *xs, int n, int G) {
    /* zeroed by statements: a zeroing loop becomes a memset call on a microcontroller */
    float lane[LLM__Q8_LANES];
    lane[0] = lane[1] = lane[2] = lane[3] = lane[4] = lane[5] = lane[6] = lane[7] = 0.0f;
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int glen = n - g0 < G ? n - g0 : G;
        int32_t isum[LLM__Q8_LANES];
        isum[0] = isum[1] = isum[2] = isum[3] = isum[4] = isum[5] = isum[6] = isum[7] = 0;
        for (int c0 = 0; c0 < glen; c0 += 32) {
            for (int l = 0; l < LLM__Q8_LANES; l++) {
                int at = c0 + 4 * l, len = glen - at;
                if (len >= 4) isum[l] += llm__word_sum_i8(w + g0 + at, xq + g0 + at);
                else if (len > 0) isum[l] += llm__lane_sum_i8(w + g0 + at, xq + g0 + at, len);
            }
        }
        float scale = ws[gi] * xs[gi];
        for (int l = 0; l < LLM__Q8_LANES; l++) lane[l] = fmaf((float)isum[l], scale, lane[l]);
    }
    return llm__lanes_total(lane);
}

/* Row r of W times one activation vector (x, or its q8 form xq/xs). */
static float llm__row_dot(const llm_matrix *w, int r, const float *x, const int8_t *xq, const float *xs) {
    size_t n = (size_t)w->cols;
    switch (w->type) {
    case LLM_F16: return llm__dot_f16((const uint16_t *)w->data + (size_t)r * n, x, (int)n);
    case LLM_Q8_0: {
        size_t groups = (n + (size_t)w->group - 1) / (size_t)w->group;
        return llm__dot_q8((const int8_t *)w->data + (size_t)r * n, w->scale + (size_t)r * groups, xq, xs, (int)n, w->group);
    }
    default: return llm__dot_f32((const float *)w->data + (size_t)r * n, x, (int)n);
    }
}

/* W (d,n) @ x (n,) -> out (d,); xq/xs: scratch for q8_0 activations. */
void llm_matvec(float *out, const llm_matrix *w, const float *x, int8_t *xq, float *xs) {
    if (w->type == LLM_Q8_0) llm__quantize_q8(xq, xs, x, w->cols, w->group);
    for (int r = 0; r < w->rows; r++) out[r] = llm__row_dot(w, r, x, xq, xs);
}

/* Row r of an embedding-like matrix as f32: out (cols,) */
static void llm__dequant_row(float *out, const llm_matrix *w, int r) {
    size_t n = (size_t)w->cols;
    if (w->type == LLM_F32) {
        memcpy(out, (const float *)w->data + (size_t)r * n, n * 4);
    } else if (w->type == LLM_F16) {
        const uint16_t *p = (const uint16_t *)w->data + (size_t)r * n;
        for (size_t j = 0; j < n; j++) out[j] = llm_f16_to_f32(p[j]);
    } else {
        size_t groups = (n + (size_t)w->group - 1) / (size_t)w->group;
        const int8_t *p = (const int8_t *)w->data + (size_t)r * n;
        const float *sc = w->scale + (size_t)r * groups;
        for (size_t j = 0; j < n; j++) out[j] = (float)p[j] * sc[j / (size_t)w->group];
    }
}

/* ===================================================================== */
/* Fast kernels: SIMD tiles of rows x tokens, each beside its scalar twin  */
/* ===================================================================== */
/* One vector type per ISA behind a few mapping macros (ggml's way). Every
 * product below computes each (row, token) dot product the same way whatever
 * the tile around it, so a batch of T tokens gives bit for bit what T single
 * tokens give. Leftover columns (n not a multiple of the vector width) fill
 * one last zero-padded vector; the scalar twins above are the reference. */

/* unroll the tiles' short loops fully, so the accumulators stay in registers at -O2 too */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__UNROLL _Pragma("GCC unroll 8")
#else
#define LLM__UNROLL
#endif
#if defined(__GNUC__)
#define LLM__INLINE static inline __attribute__((always_inline))
#else
#define LLM__INLINE static inline
#endif
/* Decode reads each weight once, a stream the hardware prefetcher starts over
 * at every page: the tiles ask for the next tile's rows while on this one
 * (a hint: never faults, even past the end). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#define LLM__PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define LLM__PREFETCH(p) ((void)0)
#endif

#if !defined(MODEL_NO_SIMD) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LLM__SIMD "avx512"
#define LLM__VL 16
#define LLM__NC 4                      /* tokens per tile; rows per tile is 4 */
typedef __m512 llm__vf;
#define llm__vzero() _mm512_setzero_ps()
#define llm__vload(p) _mm512_loadu_ps(p)
#define llm__vload_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define llm__vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define llm__vsum(v) _mm512_reduce_add_ps(v)
/* the first len (< 16) elements, the rest zero */
#define llm__vload_part(p, len) _mm512_maskz_loadu_ps((__mmask16)((1u << (len)) - 1), p)
#define llm__vload_f16_part(p, len) \
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << (len)) - 1), (const void *)(p)))
#define LLM__HAVE_VSUM4 1
/* out[0..3] = llm__vsum of a, b, c, d, in _mm512_reduce_add_ps's tree (high
 * half + low half, then quarters, then pairs), four rows at once */
LLM__INLINE void llm__vsum4(float *out, __m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0xEE), _mm512_shuffle_f32x4(a, b, 0x44));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0xEE), _mm512_shuffle_f32x4(c, d, 0x44));
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0xDD), _mm512_shuffle_f32x4(ab, cd, 0x88));
    q = _mm512_add_ps(q, _mm512_shuffle_ps(q, q, 0x4E));    /* lanes 0,1 of each quarter: + two along */
    q = _mm512_add_ps(q, _mm512_shuffle_ps(q, q, 0xB1));    /* lane 0 of each quarter: + neighbour */
    _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), q)));
}
#elif !defined(MODEL_NO_SIMD) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define LLM__SIMD "avx2"
#define LLM__VL 8
#define LLM__NC 2
typedef __m256 llm__vf;
#define llm__vzero() _mm256_setzero_ps()
#define llm__vload(p) _mm256_loadu_ps(p)
#define llm__vload_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define llm__vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
LLM__INLINE float llm__vsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define llm__vload_part(p, len) \
    _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define LLM__HAVE_VSUM4 1
/* out[0..3] = llm__vsum of a, b, c, d in its tree, four rows at once */
LLM__INLINE void llm__vsum4(float *out, __m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
    __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
    u = _mm256_add_ps(u, _mm256_shuffle_ps(u, u, 0xB1));    /* a a c c | b b d d */
    __m128 lo = _mm256_castps256_ps128(u), hi = _mm256_extractf128_ps(u, 1);
    _mm_storeu_ps(out, _mm_unpacklo_ps(_mm_shuffle_ps(lo, lo, 0x08), _mm_shuffle_ps(hi, hi, 0x08)));
}
#elif !defined(MODEL_NO_SIMD) && defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define LLM__SIMD "neon"
#define LLM__VL 4
#define LLM__NC 4
typedef float32x4_t llm__vf;
#define llm__vzero() vdupq_n_f32(0.0f)
#define llm__vload(p) vld1q_f32(p)
#define llm__vload_f16(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(p))))
#define llm__vfma(a, b, c) vfmaq_f32(c, a, b)
#define llm__vsum(v) vaddvq_f32(v)
#elif !defined(MODEL_NO_SIMD) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
/* Helium (Cortex-M55): eight vector registers, so tiles of 4 rows x 1 token */
#include <arm_mve.h>
#define LLM__SIMD "helium"
#define LLM__HELIUM 1
#define LLM__VL 4
#define LLM__NC 1
typedef float32x4_t llm__vf;
#define llm__vzero() vdupq_n_f32(0.0f)
#define llm__vload(p) vld1q_f32(p)
#define llm__vfma(a, b, c) vfmaq_f32(c, a, b)
LLM__INLINE float32x4_t llm__vload_f16(const uint16_t *p) {
    float t[4];
    t[0] = llm_f16_to_f32(p[0]); t[1] = llm_f16_to_f32(p[1]); t[2] = llm_f16_to_f32(p[2]); t[3] = llm_f16_to_f32(p[3]);
    return vld1q_f32(t);
}
LLM__INLINE float llm__vsum(float32x4_t v) {
    return (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 2)) + (vgetq_lane_f32(v, 1) + vgetq_lane_f32(v, 3));
}
#else
#define LLM__SIMD "scalar"
#endif
#ifdef LLM__VL
/* the first len (< VL) elements through a zero-padded copy, where the ISA
 * has no masked load */
#define LLM__DEFINE_LOAD_PART(name, type, load)                  \
    LLM__INLINE llm__vf name(const type *p, int len) {           \
        type t[LLM__VL] = { 0 };                                 \
        memcpy(t, p, (size_t)len * sizeof(type));                \
        return load(t);                                          \
    }
#ifndef llm__vload_part
LLM__DEFINE_LOAD_PART(llm__vload_part, float, llm__vload)
#endif
#ifndef llm__vload_f16_part
LLM__DEFINE_LOAD_PART(llm__vload_f16_part, uint16_t, llm__vload_f16)
#endif
#ifndef LLM__HAVE_VSUM4
LLM__INLINE void llm__vsum4(float *out, llm__vf a, llm__vf b, llm__vf c, llm__vf d) {
    out[0] = llm__vsum(a); out[1] = llm__vsum(b); out[2] = llm__vsum(c); out[3] = llm__vsum(d);
}
#endif
#endif

/* x[i] = e^(x[i] - shift), eight at a time where a vector unit has them;
 * the same operations as llm__expf, so the same bits. */
static void llm__exp_shifted(float *x, int n, float shift) {
    int i = 0;
#if defined(__AVX2__) && defined(__FMA__) && !defined(MODEL_NO_SIMD)
    const __m256 lo = _mm256_set1_ps(LLM__EXP_MIN), hi = _mm256_set1_ps(LLM__EXP_MAX), sh = _mm256_set1_ps(shift);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), sh);
        __m256 nn = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(LLM__EXP_LOG2E)), _mm256_set1_ps(0.5f)));
        __m256 under = _mm256_cmp_ps(v, lo, _CMP_LT_OQ), over = _mm256_cmp_ps(v, hi, _CMP_GT_OQ);
        __m256 inrange = _mm256_andnot_ps(_mm256_or_ps(under, over), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        nn = _mm256_and_ps(nn, inrange);                      /* keep the exponent sane outside */
        __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LLM__EXP_LN2_HI), v);
        r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LLM__EXP_LN2_LO), r);
        __m256 p = _mm256_set1_ps(llm__exp_c[5]);
        for (int k = 4; k >= 0; k--) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(llm__exp_c[k]));
        p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23);
        __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
        y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
        y = _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(x + i, y);
    }
#endif
    for (; i < n; i++) x[i] = llm__expf(x[i] - shift);
}

void llm_softmax(float *x, int n) {
    float max = llm__max(x, n, 0), sum = 0.0f;
    llm__exp_shifted(x, n, max);
    for (int i = 0; i < n; i++) sum += x[i];
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* SwiGLU in place: g (n,) = silu(g) * u = g * 1/(1 + e^-g) * u */
static void llm__swiglu(float *g, const float *u, int n) {
    int i = 0;
    float e[64];
    for (; i < n; i += 64) {
        int len = n - i < 64 ? n - i : 64;
        for (int j = 0; j < len; j++) e[j] = -g[i + j];
        llm__exp_shifted(e, len, 0.0f);
        for (int j = 0; j < len; j++) g[i + j] = g[i + j] * (1.0f / (1.0f + e[j])) * u[i + j];
    }
}

/* a (n,) . b (n,) in f32 for attention scores, in one order on every
 * platform: eight lanes (lane l takes j = l mod 8, by fused multiply-add; a
 * short tail is zero-padded), added in the same tree as the q8_0 lanes. */
static float llm__dot8(const float *a, const float *b, int n) {
    int n8 = n - n % 8;
#if defined(__AVX2__) && defined(__FMA__) && !defined(MODEL_NO_SIMD)
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n8; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
    if (n8 == n) { /* the lanes_total tree in registers */
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
#elif defined(LLM__VL) && LLM__VL == 4
    llm__vf lo = llm__vzero(), hi = llm__vzero();
    for (int j = 0; j < n8; j += 8) {
        lo = llm__vfma(llm__vload(a + j), llm__vload(b + j), lo);
        hi = llm__vfma(llm__vload(a + j + 4), llm__vload(b + j + 4), hi);
    }
    float lane[8];
    vst1q_f32(lane, lo);
    vst1q_f32(lane + 4, hi);
#else
    float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f, l4 = 0.0f, l5 = 0.0f, l6 = 0.0f, l7 = 0.0f;
    for (int j = 0; j < n8; j += 8) {
        l0 = fmaf(a[j], b[j], l0); l1 = fmaf(a[j + 1], b[j + 1], l1);
        l2 = fmaf(a[j + 2], b[j + 2], l2); l3 = fmaf(a[j + 3], b[j + 3], l3);
        l4 = fmaf(a[j + 4], b[j + 4], l4); l5 = fmaf(a[j + 5], b[j + 5], l5);
        l6 = fmaf(a[j + 6], b[j + 6], l6); l7 = fmaf(a[j + 7], b[j + 7], l7);
    }
    if (n8 == n) return ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
    float lane[8];
    lane[0] = l0; lane[1] = l1; lane[2] = l2; lane[3] = l3; lane[4] = l4; lane[5] = l5; lane[6] = l6; lane[7] = l7;
#endif
    for (int j = n8; j < n; j++) lane[j - n8] = fmaf(a[j], b[j], lane[j - n8]);
    return llm__lanes_total(lane);
}

#define LLM__NR 4                      /* rows per tile */
#ifdef LLM__NC
#define LLM__NC_OR_1 LLM__NC
#else
#define LLM__NC_OR_1 1
#endif

#ifdef LLM__VL
/* Out[t][r] = W[r] . X[t] for nr rows (W rows of n, f32 or f16) and nc tokens.
 * nr, nc are constants at every call, so the accumulators live in registers. */
#define LLM__DEFINE_TILE(name, wtype, wload, wload_part)                                       \
    LLM__INLINE void name(float *out, int ldo, const wtype *w, const float *x, int n, int nr,  \
                          int nc) {                                                            \
        llm__vf acc[LLM__NR][LLM__NC];                                                         \
        for (int a = 0; a < nr; a++)                                                           \
            for (int b = 0; b < nc; b++) acc[a][b] = llm__vzero();                             \
        int nv = n - n % LLM__VL;                                                              \
        for (int j = 0; j < nv; j += LLM__VL) {                                                \
            llm__vf xv[LLM__NC];                                                               \
            LLM__UNROLL for (int b = 0; b < nc; b++) xv[b] = llm__vload(x + (size_t)b * n + j); \
            LLM__UNROLL for (int a = 0; a < nr; a++) {                                         \
                llm__vf wv = wload(w + (size_t)a * n + j);                                     \
                LLM__UNROLL for (int b = 0; b < nc; b++) acc[a][b] = llm__vfma(wv, xv[b], acc[a][b]); \
            }                                                                                  \
        }                                                                                      \
        if (nv < n) { /* the last columns, zero-padded to a whole vector */                   \
            llm__vf xv[LLM__NC];                                                               \
            LLM__UNROLL for (int b = 0; b < nc; b++) xv[b] = llm__vload_part(x + (size_t)b * n + nv, n - nv); \
            LLM__UNROLL for (int a = 0; a < nr; a++) {                                         \
                llm__vf wv = wload_part(w + (size_t)a * n + nv, n - nv);                       \
                LLM__UNROLL for (int b = 0; b < nc; b++) acc[a][b] = llm__vfma(wv, xv[b], acc[a][b]); \
            }                                                                                  \
        }                                                                                      \
        for (int b = 0; b < nc; b++) {                                                         \
            if (nr == 4)                                                                       \
                llm__vsum4(out + (size_t)b * ldo, acc[0][b], acc[1][b], acc[2][b], acc[3][b]);  \
            else                                                                               \
                for (int a = 0; a < nr; a++) out[(size_t)b * ldo + a] = llm__vsum(acc[a][b]);   \
        }                                                                                      \
    }
LLM__DEFINE_TILE(llm__tile_f32, float, llm__vload, llm__vload_part)
LLM__DEFINE_TILE(llm__tile_f16, uint16_t, llm__vload_f16, llm__vload_f16_part)

/* Dispatch a tile of any size to the fully unrolled kernels: the full 4 x NC
 * tile in the hot loop, smaller ones at the edges. */
#define LLM__DEFINE_TILE_ANY(name, tile, wtype)                                                \
    static void name(float *out, int ldo, const wtype *w, const float *x, int n, int nr, int nc) { \
        if (nr == LLM__NR && nc == LLM__NC) { tile(out, ldo, w, x, n, LLM__NR, LLM__NC); return; } \
        for (int b = 0; b < nc; b++) {                                                         \
            int a = 0;                                                                         \
            for (; a + 4 <= nr; a += 4) tile(out + (size_t)b * ldo + a, ldo, w + (size_t)a * n, x + (size_t)b * n, n, 4, 1); \
            for (; a < nr; a++) tile(out + (size_t)b * ldo + a, ldo, w + (size_t)a * n, x + (size_t)b * n, n, 1, 1); \
        }                                                                                      \
    }
LLM__DEFINE_TILE_ANY(llm__tile_any_f32, llm__tile_f32, float)
LLM__DEFINE_TILE_ANY(llm__tile_any_f16, llm__tile_f16, uint16_t)
#endif /* LLM__VL */

#if defined(__AVX2__) && !defined(MODEL_NO_SIMD)
/* The totals of eight lane vectors, each added in llm__lanes_total's tree
 * (llm__dot8's), reduced together: the total of slot s comes out at element
 * (s >> 1) + 4 (s & 1). */
LLM__INLINE __m256 llm__lane_totals8(const __m256 *v) {
    __m256 t[4], u0, u1;
    for (int i = 0; i < 4; i++) /* low + high half: slots 2i and 2i+1 side by side */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    u0 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], 0x44), _mm256_shuffle_ps(t[0], t[1], 0xEE)); /* + two along */
    u1 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], 0x44), _mm256_shuffle_ps(t[2], t[3], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(u0, u1, 0x88), _mm256_shuffle_ps(u0, u1, 0xDD));        /* + neighbour */
}
#endif

/* q8_0 tiles on a vector unit, in the lane order llm__dot_q8_lanes defines:
 * a 32-byte chunk of int8 gives eight int32 lanes (four products each), and
 * each lane accumulates fma(lane sum, w_scale * x_scale) per group. */
#if defined(LLM__VL) && defined(__AVX2__)
#define LLM__Q8_SIMD 1
typedef __m256i llm__i8x32;     /* 32 int8                   */
typedef __m256i llm__i32x8;     /* eight int32 lane sums     */
typedef __m256 llm__f32x8;      /* eight float lanes         */
#define llm__i32x8_zero() _mm256_setzero_si256()
#define llm__f32x8_zero() _mm256_setzero_ps()
/* fma(lane sums, scale, acc) */
#define llm__f32x8_fma_scaled(acc, isum, scale) _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(scale), acc)
LLM__INLINE llm__i8x32 llm__i8x32_load(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
/* acc + the eight lane sums of w*x: |w| as unsigned times x with w's sign (the
 * maddubs/VNNI trick; |-128| reads as 128) */
LLM__INLINE llm__i32x8 llm__dot32_i8(llm__i32x8 acc, llm__i8x32 w, llm__i8x32 x) {
    __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, aw, sx);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, aw, sx);
#else
    __m256i p16 = _mm256_maddubs_epi16(aw, sx);   /* |w|*x pairs fit in int16: 2*128*127 */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}
/* the eight lanes added in llm__lanes_total's tree */
LLM__INLINE float llm__f32x8_total(llm__f32x8 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#elif defined(LLM__VL) && defined(__ARM_NEON) && defined(__aarch64__)
#define LLM__Q8_SIMD 1
typedef int8x16x2_t llm__i8x32;
typedef int32x4x2_t llm__i32x8;
typedef float32x4x2_t llm__f32x8;
LLM__INLINE llm__i32x8 llm__i32x8_zero(void) { llm__i32x8 z; z.val[0] = z.val[1] = vdupq_n_s32(0); return z; }
LLM__INLINE llm__f32x8 llm__f32x8_zero(void) { llm__f32x8 z; z.val[0] = z.val[1] = vdupq_n_f32(0.0f); return z; }
LLM__INLINE llm__f32x8 llm__f32x8_fma_scaled(llm__f32x8 acc, llm__i32x8 isum, float scale) {
    acc.val[0] = vfmaq_n_f32(acc.val[0], vcvtq_f32_s32(isum.val[0]), scale);
    acc.val[1] = vfmaq_n_f32(acc.val[1], vcvtq_f32_s32(isum.val[1]), scale);
    return acc;
}
LLM__INLINE llm__i8x32 llm__i8x32_load(const int8_t *p) { llm__i8x32 v; v.val[0] = vld1q_s8(p); v.val[1] = vld1q_s8(p + 16); return v; }
/* four products per int32 lane: sdot where the CPU has it, else widening multiplies */
LLM__INLINE int32x4_t llm__dot16_i8(int32x4_t acc, int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, x);
#else
    int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));    /* p0+p1, p2+p3, ... */
    int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(w), vget_high_s8(x)));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));                                  /* words 0..3 */
#endif
}
LLM__INLINE llm__i32x8 llm__dot32_i8(llm__i32x8 acc, llm__i8x32 w, llm__i8x32 x) {
    acc.val[0] = llm__dot16_i8(acc.val[0], w.val[0], x.val[0]);
    acc.val[1] = llm__dot16_i8(acc.val[1], w.val[1], x.val[1]);
    return acc;
}
LLM__INLINE float llm__f32x8_total(llm__f32x8 v) {
    float lane[8];
    vst1q_f32(lane, v.val[0]);
    vst1q_f32(lane + 4, v.val[1]);
    return llm__lanes_total(lane);
}
#endif

#ifdef LLM__Q8_SIMD
/* 32 int8 from p, zero-padded past len */
LLM__INLINE llm__i8x32 llm__load32_i8(const int8_t *p, int len) {
    if (len == 32) return llm__i8x32_load(p);
    int8_t buf[32] = { 0 };
    memcpy(buf, p, (size_t)len);
    return llm__i8x32_load(buf);
}

/* q8_0 tile: nr weight rows (int8 in groups of G, scales ws) times nc
 * quantized tokens (xq, xs). Any G and any n (short last groups) work. */
LLM__INLINE void llm__tile_q8(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                              const float *xs, int n, int G, int nr, int nc) {
    int groups = (n + G - 1) / G;
    llm__f32x8 acc[LLM__NR][LLM__NC];
    for (int a = 0; a < nr; a++)
        for (int b = 0; b < nc; b++) acc[a][b] = llm__f32x8_zero();
    for (int g = 0; g < groups; g++) {
        int g0 = g * G, glen = n - g0 < G ? n - g0 : G;
        llm__i32x8 isum[LLM__NR][LLM__NC];
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nc; b++) isum[a][b] = llm__i32x8_zero();
        for (int c0 = 0; c0 < glen; c0 += 32) {
            int len = glen - c0 < 32 ? glen - c0 : 32;
            llm__i8x32 xv[LLM__NC];
            for (int b = 0; b < nc; b++) xv[b] = llm__load32_i8(xq + (size_t)b * n + g0 + c0, len);
            for (int a = 0; a < nr; a++) {
                llm__i8x32 wv = llm__load32_i8(w + (size_t)a * n + g0 + c0, len);
                for (int b = 0; b < nc; b++) isum[a][b] = llm__dot32_i8(isum[a][b], wv, xv[b]);
            }
        }
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nc; b++)
                acc[a][b] = llm__f32x8_fma_scaled(acc[a][b], isum[a][b], ws[(size_t)a * groups + g] * xs[(size_t)b * groups + g]);
    }
    for (int a = 0; a < nr; a++)
        for (int b = 0; b < nc; b++) out[(size_t)b * ldo + a] = llm__f32x8_total(acc[a][b]);
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define LLM__Q8_VNNI 1
/* The q8_0 tile for groups of whole 32-byte chunks (G and n multiples of 32)
 * with VNNI: (w + 128) unsigned times x, less 128 x, gives llm__dot32_i8's
 * integer lane sums exactly, for one XOR per weight chunk (shared by the
 * tile's tokens) instead of two sign ops per row and token. */
LLM__INLINE void llm__tile_q8_vnni(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                                   const float *xs, int n, int G, int nr, int nc) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    int groups = (n + G - 1) / G;
    __m256 acc[LLM__NR][LLM__NC];
    LLM__UNROLL for (int a = 0; a < nr; a++)
        LLM__UNROLL for (int b = 0; b < nc; b++) acc[a][b] = _mm256_setzero_ps();
    for (int g = 0; g < groups; g++) {
        int g0 = g * G, glen = n - g0 < G ? n - g0 : G;
        __m256i neg[LLM__NC];     /* -128 x, in lanes */
        __m256 xsv[LLM__NC];
        LLM__UNROLL for (int b = 0; b < nc; b++) {
            __m256i cx = _mm256_setzero_si256();
            for (int c0 = 0; c0 < glen; c0 += 32) cx = _mm256_dpbusd_epi32(cx, bias, llm__i8x32_load(xq + (size_t)b * n + g0 + c0));
            neg[b] = _mm256_sub_epi32(_mm256_setzero_si256(), cx);
            xsv[b] = _mm256_set1_ps(xs[(size_t)b * groups + g]);
        }
        LLM__UNROLL for (int a = 0; a < nr; a++) {
            __m256 wsv = _mm256_set1_ps(ws[(size_t)a * groups + g]);
            if (nc == 1) LLM__PREFETCH(w + (size_t)(a + LLM__NR) * n + g0);   /* decode: the next rows */
            if (G == 32) { /* one chunk: each sum goes straight into its accumulator */
                __m256i wu = _mm256_xor_si256(llm__i8x32_load(w + (size_t)a * n + g0), bias);
                LLM__UNROLL for (int b = 0; b < nc; b++) {
                    __m256i isum = _mm256_dpbusd_epi32(neg[b], wu, llm__i8x32_load(xq + (size_t)b * n + g0));
                    acc[a][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(wsv, xsv[b]), acc[a][b]);
                }
                continue;
            }
            __m256i isum[LLM__NC];
            LLM__UNROLL for (int b = 0; b < nc; b++) isum[b] = neg[b];
            for (int c0 = 0; c0 < glen; c0 += 32) {
                __m256i wu = _mm256_xor_si256(llm__i8x32_load(w + (size_t)a * n + g0 + c0), bias);
                LLM__UNROLL for (int b = 0; b < nc; b++)
                    isum[b] = _mm256_dpbusd_epi32(isum[b], wu, llm__i8x32_load(xq + (size_t)b * n + g0 + c0));
            }
            LLM__UNROLL for (int b = 0; b < nc; b++) /* wsv * xsv is the broadcast of ws * xs */
                acc[a][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[b]), _mm256_mul_ps(wsv, xsv[b]), acc[a][b]);
        }
    }
    if (nr == LLM__NR) { /* eight sums at a time: rows 0..3 of tokens b and b + 1 */
        for (int b = 0; b < nc; b += 2) {
            __m256 slot[8];
            LLM__UNROLL for (int s = 0; s < 8; s++)
                slot[s] = b + (s & 1) < nc ? acc[s >> 1][b + (s & 1)] : _mm256_setzero_ps();
            __m256 t = llm__lane_totals8(slot);
            _mm_storeu_ps(out + (size_t)b * ldo, _mm256_castps256_ps128(t));
            if (b + 1 < nc) _mm_storeu_ps(out + (size_t)(b + 1) * ldo, _mm256_extractf128_ps(t, 1));
        }
    } else {
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nc; b++) out[(size_t)b * ldo + a] = llm__f32x8_total(acc[a][b]);
    }
}
#endif

#if defined(LLM__Q8_VNNI) && LLM__VL == 16
/* The full 4 x 4 tile of llm__tile_q8_vnni for G == 32 on 512-bit vectors:
 * each zmm holds two tokens' eight lanes side by side, so one instruction
 * does each step for two (row, token) pairs, the same lanes in the same
 * order, and the tile's values fit in registers. */
static void llm__tile_q8_vnni_4x4(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                                  const float *xs, int n) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    int groups = n / 32;
    __m512 acc[4][2];   /* [row][token pair] */
    for (int a = 0; a < 4; a++) acc[a][0] = acc[a][1] = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        int g0 = g * 32;
        __m512i x[2], neg[2];
        __m512 xsv[2];
        for (int p = 0; p < 2; p++) {
            int b = 2 * p;
            x[p] = _mm512_inserti64x4(_mm512_castsi256_si512(llm__i8x32_load(xq + (size_t)b * n + g0)),
                                      llm__i8x32_load(xq + (size_t)(b + 1) * n + g0), 1);
            neg[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, x[p]));
            xsv[p] = _mm512_insertf32x8(_mm512_set1_ps(xs[(size_t)b * groups + g]),
                                        _mm256_set1_ps(xs[(size_t)(b + 1) * groups + g]), 1);
        }
        for (int a = 0; a < 4; a++) {
            __m512i wu = _mm512_xor_si512(_mm512_broadcast_i64x4(llm__i8x32_load(w + (size_t)a * n + g0)), bias);
            __m512 wsv = _mm512_set1_ps(ws[(size_t)a * groups + g]);
            for (int p = 0; p < 2; p++) {
                __m512i isum = _mm512_dpbusd_epi32(neg[p], wu, x[p]);
                acc[a][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(wsv, xsv[p]), acc[a][p]);
            }
        }
    }
    for (int p = 0; p < 2; p++) { /* rows 0..3 of tokens 2p and 2p + 1 */
        __m256 slot[8];
        for (int s = 0; s < 8; s++) {
            __m512 v = acc[s >> 1][p];
            slot[s] = s & 1 ? _mm512_extractf32x8_ps(v, 1) : _mm512_castps512_ps256(v);
        }
        __m256 t = llm__lane_totals8(slot);
        _mm_storeu_ps(out + (size_t)(2 * p) * ldo, _mm256_castps256_ps128(t));
        _mm_storeu_ps(out + (size_t)(2 * p + 1) * ldo, _mm256_extractf128_ps(t, 1));
    }
}
#endif

#if defined(LLM__Q8_VNNI) && LLM__VL == 16
/* One token (decode), G == 32, n a multiple of 64: two groups per 512-bit
 * step (the low half group g, the high half g + 1), then each half's scale
 * step in turn, group g first, as llm__tile_q8_vnni does them. */
LLM__INLINE void llm__tile_q8_vnni_1tok(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                                        const float *xs, int n, int G, int nr, int nc) {
    const __m512i bias = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    int groups = n / 32;
    __m256 acc[LLM__NR];
    (void)ldo; (void)G; (void)nc;
    LLM__UNROLL for (int a = 0; a < nr; a++) acc[a] = _mm256_setzero_ps();
    for (int g = 0; g < groups; g += 2) {
        __m512i x = _mm512_loadu_si512((const void *)(xq + (size_t)g * 32));
        __m512i neg = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, x));
        __m512 xsv = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_castsi128_ps(
                         _mm_loadl_epi64((const __m128i *)(const void *)(xs + g)))));
        LLM__UNROLL for (int a = 0; a < nr; a++) {
            const int8_t *wa = w + (size_t)a * n + (size_t)g * 32;
            LLM__PREFETCH(wa + (size_t)LLM__NR * n);   /* the next tile's rows */
            __m512i wu = _mm512_xor_si512(_mm512_loadu_si512((const void *)wa), bias);
            __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg, wu, x));
            __m512 wsv = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_castsi128_ps(
                             _mm_loadl_epi64((const __m128i *)(const void *)(ws + (size_t)a * groups + g)))));
            __m512 s = _mm512_mul_ps(wsv, xsv);
            acc[a] = _mm256_fmadd_ps(_mm512_castps512_ps256(f), _mm512_castps512_ps256(s), acc[a]);
            acc[a] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(f, 1), _mm512_extractf32x8_ps(s, 1), acc[a]);
        }
    }
    if (nr == LLM__NR) {
        __m256 slot[8];
        LLM__UNROLL for (int s = 0; s < 8; s++) slot[s] = s & 1 ? _mm256_setzero_ps() : acc[s >> 1];
        _mm_storeu_ps(out, _mm256_castps256_ps128(llm__lane_totals8(slot)));
    } else {
        for (int a = 0; a < nr; a++) out[a] = llm__f32x8_total(acc[a]);
    }
}
#endif

/* Any nr x nc tile of a q8_0 product from the fully unrolled full tile and
 * 4 x 1 and 1 x 1 edge tiles of kernel `tile` */
#define LLM__Q8_TILES(tile, G)                                                                           \
    do {                                                                                                 \
        if (nr == LLM__NR && nc == LLM__NC) { tile(out, ldo, w, ws, xq, xs, n, G, LLM__NR, LLM__NC); break; } \
        for (int b = 0; b < nc; b++) {                                                                   \
            int a = 0;                                                                                   \
            for (; a + 4 <= nr; a += 4)                                                                  \
                tile(out + (size_t)b * ldo + a, ldo, w + (size_t)a * n, ws + (size_t)a * groups,         \
                     xq + (size_t)b * n, xs + (size_t)b * groups, n, G, 4, 1);                           \
            for (; a < nr; a++)                                                                          \
                tile(out + (size_t)b * ldo + a, ldo, w + (size_t)a * n, ws + (size_t)a * groups,         \
                     xq + (size_t)b * n, xs + (size_t)b * groups, n, G, 1, 1);                           \
        }                                                                                                \
    } while (0)

static void llm__tile_any_q8(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                             const float *xs, int n, int G, int nr, int nc) {
    int groups = (n + G - 1) / G;
#ifdef LLM__Q8_VNNI
#if LLM__VL == 16
    if (G == 32 && n % 32 == 0 && nr == 4 && nc == 4) { llm__tile_q8_vnni_4x4(out, ldo, w, ws, xq, xs, n); return; }
    if (G == 32 && n % 64 == 0 && nc == 1) { LLM__Q8_TILES(llm__tile_q8_vnni_1tok, 32); return; }
#endif
    if (G == 32 && n % 32 == 0) { LLM__Q8_TILES(llm__tile_q8_vnni, 32); return; }   /* G a constant inside */
    if (G % 32 == 0 && n % 32 == 0) { LLM__Q8_TILES(llm__tile_q8_vnni, G); return; }
#endif
    LLM__Q8_TILES(llm__tile_q8, G);
}
#endif /* q8 SIMD */

#ifndef LLM__VL
/* a + b * c: one fused instruction where the FPU has it (a microcontroller's
 * VFMA), else the plain expression (fmaf would be a slow library call) */
#if defined(__ARM_FEATURE_FMA) || defined(__FMA__)
#define LLM__MADD(a, b, c) fmaf(b, c, a)
#else
#define LLM__MADD(a, b, c) ((a) + (b) * (c))
#endif
/* No vector unit: W rows r..r+7 (f32) . x (n,) with one load of x per column
 * for eight rows; each sum runs over j in order, as the scalar twin's does. */
static void llm__rows8_f32(float *out, const float *w, const float *x, int n) {
    const float *w0 = w, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n, *w4 = w3 + n, *w5 = w4 + n, *w6 = w5 + n, *w7 = w6 + n;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
    for (int j = 0; j < n; j++) {
        float xj = x[j];
        a0 = LLM__MADD(a0, w0[j], xj); a1 = LLM__MADD(a1, w1[j], xj);
        a2 = LLM__MADD(a2, w2[j], xj); a3 = LLM__MADD(a3, w3[j], xj);
        a4 = LLM__MADD(a4, w4[j], xj); a5 = LLM__MADD(a5, w5[j], xj);
        a6 = LLM__MADD(a6, w6[j], xj); a7 = LLM__MADD(a7, w7[j], xj);
    }
    out[0] = a0; out[1] = a1; out[2] = a2; out[3] = a3; out[4] = a4; out[5] = a5; out[6] = a6; out[7] = a7;
}
/* one row the same way */
static float llm__row1_f32(const float *w, const float *x, int n) {
    float a = 0.0f;
    for (int j = 0; j < n; j++) a = LLM__MADD(a, w[j], x[j]);
    return a;
}

#endif /* !LLM__VL */

const char *llm_simd_name(void) {
#if defined(__AVX512VNNI__) && defined(LLM__Q8_SIMD)
    return LLM__SIMD "+vnni";
#elif defined(__ARM_FEATURE_DOTPROD) && defined(LLM__Q8_SIMD)
    return LLM__SIMD "+dotprod";
#elif defined(__ARM_FEATURE_DSP) && !defined(LLM__VL) && !defined(MODEL_NO_SIMD)
    return "scalar+dsp";
#else
    return LLM__SIMD;
#endif
}

/* Rows r0..r1 of W times tokens t0..t1 of X into Out (T,d), tile by tile. */
#ifndef LLM__L2_BLOCK_BYTES
#define LLM__L2_BLOCK_BYTES (256 * 1024)
#endif
static void llm__gemm_block(float *out, const llm_matrix *w, const float *x, const int8_t *xq,
                            const float *xs, int r0, int r1, int t0, int t1) {
    int d = w->rows, n = w->cols;
    int groups = w->type == LLM_Q8_0 ? (n + w->group - 1) / w->group : 0;
#ifdef LLM__VL
    /* a block of rows of W (a few hundred KB) stays in L2 while every token
     * tile passes over it; inside, a 4-row panel meets a tile of tokens */
    size_t row_bytes = (size_t)n * (w->type == LLM_F32 ? 4 : w->type == LLM_F16 ? 2 : 1);
    int block = (int)(LLM__L2_BLOCK_BYTES / row_bytes) / LLM__NR * LLM__NR;
    if (block < LLM__NR) block = LLM__NR;
    int step = t1 - t0 == 1 ? block : LLM__NR;   /* one token: a whole block of rows per call */
    for (int rb = r0; rb < r1; rb += block) {
      int rb1 = r1 - rb < block ? r1 : rb + block;
      for (int t = t0; t < t1; t += LLM__NC) {
        int nc = t1 - t < LLM__NC ? t1 - t : LLM__NC;
        for (int r = rb; r < rb1; r += step) {
            int nr = rb1 - r < step ? rb1 - r : step;
            float *o = out + (size_t)t * d + r;
            switch (w->type) {
            case LLM_F32:
                llm__tile_any_f32(o, d, (const float *)w->data + (size_t)r * n, x + (size_t)t * n, n, nr, nc);
                break;
            case LLM_F16:
                llm__tile_any_f16(o, d, (const uint16_t *)w->data + (size_t)r * n, x + (size_t)t * n, n, nr, nc);
                break;
            default:
#ifdef LLM__Q8_SIMD
                llm__tile_any_q8(o, d, (const int8_t *)w->data + (size_t)r * n, w->scale + (size_t)r * groups,
                                 xq + (size_t)t * n, xs + (size_t)t * groups, n, w->group, nr, nc);
#else
                for (int b = 0; b < nc; b++)
                    for (int a = 0; a < nr; a++)
                        o[(size_t)b * d + a] = llm__dot_q8_lanes((const int8_t *)w->data + (size_t)(r + a) * n,
                                                                 w->scale + (size_t)(r + a) * groups,
                                                                 xq + (size_t)(t + b) * n, xs + (size_t)(t + b) * groups, n, w->group);
#endif
                break;
            }
        }
      }
    }
#else
    for (int t = t0; t < t1; t++) {
        int r = r0;
        if (w->type == LLM_F32) { /* eight rows share each load of x */
            for (; r + 8 <= r1; r += 8)
                llm__rows8_f32(out + (size_t)t * d + r, (const float *)w->data + (size_t)r * n, x + (size_t)t * n, n);
            for (; r < r1; r++)
                out[(size_t)t * d + r] = llm__row1_f32((const float *)w->data + (size_t)r * n, x + (size_t)t * n, n);
        }
        if (w->type == LLM_Q8_0) {
            for (; r < r1; r++)
                out[(size_t)t * d + r] = llm__dot_q8_lanes((const int8_t *)w->data + (size_t)r * n, w->scale + (size_t)r * groups,
                                                          xq + (size_t)t * n, xs + (size_t)t * groups, n, w->group);
        }
        for (; r < r1; r++)
            out[(size_t)t * d + r] = llm__row_dot(w, r, x + (size_t)t * n, NULL, NULL);
    }
#endif
}


/* W (d,n) @ X (T,n) -> Out (T,d). A prefill batch is split across threads by
 * tokens (each thread runs its tokens through all of W); a single token by
 * row blocks. q8_0 first quantizes X per group, as W is. */
static void llm__matmul(float *out, const llm_matrix *w, const float *x, int T, llm_state *s) {
    int d = w->rows, n = w->cols, nt = s->n_threads;
    int8_t *xq = s->act_q;
    float *xs = s->act_scale;
    int64_t work = (int64_t)d * n * T;
    int parallel = nt > 1 && work >= s->parallel_min_work;
    if (w->type == LLM_Q8_0) {
        int groups = (n + w->group - 1) / w->group;
        LLM__PARALLEL_FOR(nt, parallel && T > 1,
        for (int t = 0; t < T; t++)
            llm__quantize_q8(xq + (size_t)t * n, xs + (size_t)t * groups, x + (size_t)t * n, n, w->group););
    }
    if (!parallel) {
        llm__gemm_block(out, w, x, xq, xs, 0, d, 0, T);
        return;
    }
    if (T >= 2 * nt) { /* across tokens, in whole tiles */
        int tiles = (T + LLM__NC_OR_1 - 1) / LLM__NC_OR_1;
        LLM__PARALLEL_FOR(nt, 1,
        for (int i = 0; i < nt; i++) {
            int t0 = (int)((int64_t)tiles * i / nt) * LLM__NC_OR_1, t1 = (int)((int64_t)tiles * (i + 1) / nt) * LLM__NC_OR_1;
            if (t1 > T) t1 = T;
            if (t0 < t1) llm__gemm_block(out, w, x, xq, xs, 0, d, t0, t1);
        });
    } else { /* across rows, in whole tiles */
        int tiles = (d + LLM__NR - 1) / LLM__NR;
        LLM__PARALLEL_FOR(nt, 1,
        for (int i = 0; i < nt; i++) {
            int r0 = (int)((int64_t)tiles * i / nt) * LLM__NR, r1 = (int)((int64_t)tiles * (i + 1) / nt) * LLM__NR;
            if (r1 > d) r1 = d;
            if (r0 < r1) llm__gemm_block(out, w, x, xq, xs, r0, r1, 0, T);
        });
    }
}

/* ===================================================================== */
/* Batched kernels: T tokens at once, parallel across tokens or rows      */
/* ===================================================================== */

/* out (T,n) = norm(x (T,n)) token by token, with weight g and optional bias b */
static void llm__norm_batch(float *out, const float *x, const float *g, const float *b, int T, int n,
                            const llm_config *c, const llm_state *s) {
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * n * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        if (c->norm_type == LLM_NORM_LAYER)
            llm_layernorm(out + (size_t)t * n, x + (size_t)t * n, g, b, n, c->norm_eps);
        else
            llm_rmsnorm(out + (size_t)t * n, x + (size_t)t * n, g, n, c->norm_eps);
    });
}

/* x (T,n) += y (T,n) */
static void llm__residual_add(float *x, const float *y, int T, int n, const llm_state *s) {
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * n * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) x[(size_t)t * n + i] += y[(size_t)t * n + i];);
}

/* cos/sin of every frequency for T positions: rope (T, head_size) as (cos, sin) pairs.
 * The angle in float as llama2.c computes it, pos * (1 / theta^(i/hs)); the
 * power, cosine and sine in double, then rounded: float libms differ between
 * glibc and a microcontroller's newlib, double ones agree to the float bit. */
static void llm__rope_table(float *rope, int pos, int T, const llm_config *c) {
    int hs = c->head_size;
    for (int i = 0; i < hs; i += 2) {
        float freq = 1.0f / (float)pow((double)c->rope_theta, (double)((float)i / (float)hs));
        for (int t = 0; t < T; t++) {
            float val = (float)(pos + t) * freq;
            rope[(size_t)t * hs + i] = (float)cos((double)val);
            rope[(size_t)t * hs + i + 1] = (float)sin((double)val);
        }
    }
}

/* GCC's vectorizer turns the rotation below into a fused complex multiply
 * (vfmaddsub) even with contraction off, which rounds differently from the
 * scalar code other targets run: keep it scalar so every build agrees. */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define LLM__NO_VECTORIZE
#endif

/* Rotate each head of v (n_heads*hs,) by the angles in rope (hs,). */
LLM__NO_VECTORIZE static void llm__rope(float *v, int n_heads, const float *rope, const llm_config *c) {
    int hs = c->head_size, half = hs / 2;
    for (int h = 0; h < n_heads; h++) {
        float *vh = v + (size_t)h * hs;
        for (int i = 0; i < hs; i += 2) {
            float fcr = rope[i], fci = rope[i + 1];
            /* the pair (i, i+1) in llama2.c's layout, (i/2, i/2 + hs/2) in the half layout */
            int a = c->rope_layout == LLM_ROPE_HALF ? i / 2 : i;
            int b = c->rope_layout == LLM_ROPE_HALF ? i / 2 + half : i + 1;
            float v0 = vh[a], v1 = vh[b];
            vh[a] = v0 * fcr - v1 * fci;
            vh[b] = v0 * fci + v1 * fcr;
        }
    }
}

/* ---- the KV cache: rows of n_kv_heads*head_size in f32, f16, or int8 with
 * one f16 scale per head (max |v| / 127) ---- */

/* Store row v (kvd,) at position pos of one layer's cache. */
static void llm__kv_store(void *cache, uint16_t *scales, int kv_type, size_t pos, const float *v, int n_heads, int hs) {
    size_t kvd = (size_t)n_heads * hs;
    if (kv_type == LLM_KV_F32) {
        memcpy((float *)cache + pos * kvd, v, kvd * 4);
    } else if (kv_type == LLM_KV_F16) {
        uint16_t *dst = (uint16_t *)cache + pos * kvd;
        for (size_t i = 0; i < kvd; i++) dst[i] = llm_f32_to_f16(v[i]);
    } else {
        int8_t *dst = (int8_t *)cache + pos * kvd;
        for (int h = 0; h < n_heads; h++) {
            const float *vh = v + (size_t)h * hs;
            if (!llm__all_finite(vh, hs)) {   /* as llm__quantize_q8: NaN scale, zero values */
                scales[pos * (size_t)n_heads + (size_t)h] = 0x7e00;   /* f16 NaN */
                memset(dst + (size_t)h * hs, 0, (size_t)hs);
                continue;
            }
            float amax = 0.0f;
            for (int i = 0; i < hs; i++) amax = fmaxf(amax, fabsf(vh[i]));
            uint16_t sc = llm_f32_to_f16(amax / 127.0f);
            float scale = llm_f16_to_f32(sc), inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            scales[pos * (size_t)n_heads + (size_t)h] = sc;
            for (int i = 0; i < hs; i++) {
                long q = lroundf(vh[i] * inv);
                dst[(size_t)h * hs + (size_t)i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
            }
        }
    }
}

/* Head kvh's row at position j as f32: a pointer into an f32 cache, or
 * converted into tmp (hs,). */
LLM__INLINE const float *llm__kv_row(const void *cache, const uint16_t *scales, int kv_type, size_t j, int kvh,
                                int n_heads, int hs, float *tmp) {
    size_t at = (j * (size_t)n_heads + (size_t)kvh) * (size_t)hs;
    if (kv_type == LLM_KV_F32) return (const float *)cache + at;
    if (kv_type == LLM_KV_F16) {
        const uint16_t *src = (const uint16_t *)cache + at;
        for (int i = 0; i < hs; i++) tmp[i] = llm_f16_to_f32(src[i]);
    } else {
        const int8_t *src = (const int8_t *)cache + at;
        float scale = llm_f16_to_f32(scales[j * (size_t)n_heads + (size_t)kvh]);
        for (int i = 0; i < hs; i++) tmp[i] = (float)src[i] * scale;
    }
    return tmp;
}

/* One layer's cache for the attention of one head. */
typedef struct llm__kv_view {
    const void *k, *v;
    const uint16_t *k_scale, *v_scale;
    int type, n_heads, hs;
} llm__kv_view;

#define LLM__KEY_BLOCK 32


/* One block of an online softmax: when the block raises the running max,
 * rescale what was summed so far (out (hs,) and the denominator) to it; then
 * p[j] = e^(p[j] - running max). */
LLM__INLINE void llm__softmax_block(float *p, int len, float block_max, float *run_max, float *run_sum, float *out, int hs) {
    if (block_max > *run_max) {
        float r = llm__expf(*run_max - block_max);
        *run_sum *= r;
        for (int i = 0; i < hs; i++) out[i] *= r;
        *run_max = block_max;
    }
    llm__exp_shifted(p, len, *run_max);
}

/* One query head over cache positions 0..last: out (hs,) = softmax(q.K/sqrt(hs)) V.
 * Keys in blocks with a running max (online softmax): no score row in memory. */
static void llm__attend_head(float *out, const float *q, const llm__kv_view *kv, int kvh, int last) {
    float scores[LLM__KEY_BLOCK], row[LLM_MAX_HEAD_SIZE];
    int hs = kv->hs;
    float run_max = -INFINITY, run_sum = 0.0f, sqrt_hs = sqrtf((float)hs);
    for (int i = 0; i < hs; i++) out[i] = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += LLM__KEY_BLOCK) {
        int len = last + 1 - j0 < LLM__KEY_BLOCK ? last + 1 - j0 : LLM__KEY_BLOCK;
        float block_max = -INFINITY;
#if !defined(LLM__VL) || defined(LLM__HELIUM)   /* scalar FPU paths */
        if (kv->type == LLM_KV_F32 && hs == 8) {
            /* no vector unit, eight-wide heads (a microcontroller's model): the
             * query stays in registers; llm__dot8's lanes and tree exactly */
            const float *k = (const float *)kv->k + ((size_t)j0 * kv->n_heads + (size_t)kvh) * 8;
            size_t stride = (size_t)kv->n_heads * 8;
            float q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3], q4 = q[4], q5 = q[5], q6 = q[6], q7 = q[7];
            for (int j = 0; j < len; j++, k += stride) {
                float l0 = fmaf(q0, k[0], 0.0f), l1 = fmaf(q1, k[1], 0.0f), l2 = fmaf(q2, k[2], 0.0f), l3 = fmaf(q3, k[3], 0.0f);
                float l4 = fmaf(q4, k[4], 0.0f), l5 = fmaf(q5, k[5], 0.0f), l6 = fmaf(q6, k[6], 0.0f), l7 = fmaf(q7, k[7], 0.0f);
                scores[j] = (((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))) / sqrt_hs;
                if (scores[j] > block_max) block_max = scores[j];
            }
        } else
#endif
        for (int j = 0; j < len; j++) {
            const float *k = llm__kv_row(kv->k, kv->k_scale, kv->type, (size_t)(j0 + j), kvh, kv->n_heads, hs, row);
            scores[j] = llm__dot8(q, k, hs) / sqrt_hs;
            if (scores[j] > block_max) block_max = scores[j];
        }
        llm__softmax_block(scores, len, block_max, &run_max, &run_sum, out, hs);
#if !defined(LLM__VL) || defined(LLM__HELIUM)   /* scalar FPU paths */
        if (kv->type == LLM_KV_F32) {
            /* no vector unit: one output element at a time in a register, the
             * keys in the same order, so the same sums */
            const float *v0 = (const float *)kv->v + ((size_t)j0 * kv->n_heads + (size_t)kvh) * (size_t)hs;
            size_t stride = (size_t)kv->n_heads * (size_t)hs;
            for (int j = 0; j < len; j++) run_sum += scores[j];
            for (int i = 0; i < hs; i++) {
                float acc = out[i];
                const float *v = v0 + i;
                for (int j = 0; j < len; j++, v += stride) acc = fmaf(scores[j], *v, acc);
                out[i] = acc;
            }
            continue;
        }
#endif
        for (int j = 0; j < len; j++) {
            float p = scores[j];
            const float *v = llm__kv_row(kv->v, kv->v_scale, kv->type, (size_t)(j0 + j), kvh, kv->n_heads, hs, row);
            run_sum += p;
            for (int i = 0; i < hs; i++) out[i] = fmaf(p, v[i], out[i]);   /* fused on every target */
        }
    }
    float inv = 1.0f / run_sum;
    for (int i = 0; i < hs; i++) out[i] *= inv;
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(MODEL_NO_SIMD)
#define LLM__ATTEND_AVX2 1
#define LLM__GROUP_MAX 4   /* query heads sharing one pass over the keys */

/* Cache row (position j, head kvh) of a view: its first element's index,
 * and its int8 scale as f32 (1 for f32 and f16 caches), converted once per row */
typedef struct llm__kv_at { size_t at; float scale; } llm__kv_at;
LLM__INLINE llm__kv_at llm__kv_locate(const llm__kv_view *kv, const uint16_t *scales, int type, size_t j, int kvh) {
    size_t row = j * (size_t)kv->n_heads + (size_t)kvh;
    llm__kv_at r;
    r.at = row * (size_t)kv->hs;
    r.scale = type == LLM_KV_Q8 ? llm_f16_to_f32(scales[row]) : 1.0f;
    return r;
}

/* Elements c..c+7 of a located cache row as f32, converted as llm__kv_row
 * converts them (f16 exactly, int8 times the row's scale). */
LLM__INLINE __m256 llm__kv_load8(const void *cache, int type, llm__kv_at r, int c) {
    size_t at = r.at + (size_t)c;
    if (type == LLM_KV_F32) return _mm256_loadu_ps((const float *)cache + at);
    if (type == LLM_KV_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)cache + at)));
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)((const int8_t *)cache + at));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(r.scale));
}

/* scores[j] = q . k(j0 + j) / sqrt_hs for j < len: eight keys at a time,
 * eight lane accumulators each, as llm__dot8 computes one (hs % 8 == 0).
 * Returns the largest score. */
LLM__INLINE float llm__scores8(float *scores, const float *q, const llm__kv_view *kv, int type, int kvh, int j0,
                               int len, float sqrt_hs) {
    int hs = kv->hs;
    __m256 max = _mm256_set1_ps(-INFINITY);
    for (int b = 0; b < len; b += 8) {
        __m256 lane[8];
        llm__kv_at key[8];
        LLM__UNROLL for (int s = 0; s < 8; s++) {
            int j = b + (s >> 1) + 4 * (s & 1);   /* keys in order out of llm__lane_totals8 */
            if (j >= len) j = len - 1;            /* a short block repeats its last key */
            key[s] = llm__kv_locate(kv, kv->k_scale, type, (size_t)(j0 + j), kvh);
            lane[s] = _mm256_setzero_ps();
        }
        for (int c = 0; c < hs; c += 8) {
            __m256 qc = _mm256_loadu_ps(q + c);
            LLM__UNROLL for (int s = 0; s < 8; s++) lane[s] = _mm256_fmadd_ps(qc, llm__kv_load8(kv->k, type, key[s], c), lane[s]);
        }
        __m256 sc = _mm256_div_ps(llm__lane_totals8(lane), _mm256_set1_ps(sqrt_hs));
        max = _mm256_max_ps(max, sc);   /* a short block's repeated key changes no maximum */
        if (b + 8 <= len) {
            _mm256_storeu_ps(scores + b, sc);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, sc);
            memcpy(scores + b, tmp, (size_t)(len - b) * sizeof(float));
        }
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps(max, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* For nq (1 or 2) heads: out[g][c0 .. c0 + 8 nch) += sum_j p[g][j] v(j0 + j),
 * keys in order, fused, every accumulator in a register and one load of each
 * value chunk for both heads; with sum, also sum[g] += p[g][j] in order (a
 * chain beside the others, not after them). */
LLM__INLINE void llm__accumulate8(float *out, int ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq, int nch,
                                  const llm__kv_view *kv, int type, int kvh, int j0, int len, int c0) {
    __m256 a[2][8];
    float s0 = sum ? sum[0] : 0.0f, s1 = sum && nq > 1 ? sum[1] : 0.0f;
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) a[g][ch] = _mm256_loadu_ps(out + (size_t)g * ldo + c0 + 8 * ch);
    for (int j = 0; j < len; j++) {
        __m256 p0 = _mm256_set1_ps(p[0][j]), p1 = _mm256_set1_ps(p[nq - 1][j]);
        llm__kv_at row = llm__kv_locate(kv, kv->v_scale, type, (size_t)(j0 + j), kvh);
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) {
            __m256 v = llm__kv_load8(kv->v, type, row, c0 + 8 * ch);
            a[0][ch] = _mm256_fmadd_ps(p0, v, a[0][ch]);
            if (nq > 1) a[1][ch] = _mm256_fmadd_ps(p1, v, a[1][ch]);
        }
        if (sum) {
            s0 += p[0][j];
            if (nq > 1) s1 += p[1][j];
        }
    }
    LLM__UNROLL for (int g = 0; g < nq; g++)
        LLM__UNROLL for (int ch = 0; ch < nch; ch++) _mm256_storeu_ps(out + (size_t)g * ldo + c0 + 8 * ch, a[g][ch]);
    if (sum) {
        sum[0] = s0;
        if (nq > 1) sum[1] = s1;
    }
}

/* llm__accumulate8 over a whole head (hs % 8 == 0) in passes of at most
 * eight accumulators, each pass's chunk count a constant inside */
LLM__INLINE void llm__accumulate_head(float *out, int ldo, float (*p)[LLM__KEY_BLOCK], float *sum, int nq,
                                      const llm__kv_view *kv, int type, int kvh, int j0, int len) {
    int per_pass = 8 / nq;
    for (int c0 = 0; c0 < kv->hs; c0 += 8 * per_pass) {
        int nch = (kv->hs - c0) / 8 < per_pass ? (kv->hs - c0) / 8 : per_pass;
        float *s = c0 == 0 ? sum : NULL;
        switch (nch) {
#define LLM__ACC(k) case k: llm__accumulate8(out, ldo, p, s, nq, k, kv, type, kvh, j0, len, c0); break;
        LLM__ACC(1) LLM__ACC(2) LLM__ACC(3) LLM__ACC(4) LLM__ACC(5) LLM__ACC(6) LLM__ACC(7) default: LLM__ACC(8)
#undef LLM__ACC
        }
    }
}

/* llm__attend_head for nq <= LLM__GROUP_MAX query heads (rows of q and out,
 * hs apart) sharing kv head kvh, bit for bit: each key and value row is
 * read once for all of them. */
LLM__INLINE void llm__attend_heads8(float *out, const float *q, const llm__kv_view *kv, int type, int kvh, int nq,
                                    int last) {
    float p[LLM__GROUP_MAX][LLM__KEY_BLOCK], run_max[LLM__GROUP_MAX], run_sum[LLM__GROUP_MAX];
    int hs = kv->hs;
    float sqrt_hs = sqrtf((float)hs);
    for (int g = 0; g < nq; g++) {
        run_max[g] = -INFINITY;
        run_sum[g] = 0.0f;
        for (int i = 0; i < hs; i++) out[(size_t)g * hs + i] = 0.0f;
    }
    for (int j0 = 0; j0 <= last; j0 += LLM__KEY_BLOCK) {
        int len = last + 1 - j0 < LLM__KEY_BLOCK ? last + 1 - j0 : LLM__KEY_BLOCK;
        for (int g = 0; g < nq; g++) {
            float block_max = llm__scores8(p[g], q + (size_t)g * hs, kv, type, kvh, j0, len, sqrt_hs);
            llm__softmax_block(p[g], len, block_max, &run_max[g], &run_sum[g], out + (size_t)g * hs, hs);
        }
        for (int g = 0; g < nq; g += 2) { /* the values (and the sums) for two heads at a time */
            if (nq - g >= 2) llm__accumulate_head(out + (size_t)g * hs, hs, p + g, run_sum + g, 2, kv, type, kvh, j0, len);
            else llm__accumulate_head(out + (size_t)g * hs, hs, p + g, run_sum + g, 1, kv, type, kvh, j0, len);
        }
    }
    for (int g = 0; g < nq; g++) {
        float inv = 1.0f / run_sum[g];
        for (int i = 0; i < hs; i++) out[(size_t)g * hs + i] *= inv;
    }
}
#endif

/* Query heads h..h+nq-1 (rows of q and out, hs apart), which share kv head
 * kvh, over cache positions 0..last: llm__attend_head for each. */
static void llm__attend_group(float *out, const float *q, const llm__kv_view *kv, int kvh, int nq, int last) {
    int hs = kv->hs, g = 0;
#ifdef LLM__ATTEND_AVX2
    if (hs % 8 == 0) {
        for (; g < nq; g += LLM__GROUP_MAX) {
            int n = nq - g < LLM__GROUP_MAX ? nq - g : LLM__GROUP_MAX;
            float *o = out + (size_t)g * hs;
            const float *qg = q + (size_t)g * hs;
            /* one instance per cache type, so the loads inside are branch-free */
            if (kv->type == LLM_KV_F32) llm__attend_heads8(o, qg, kv, LLM_KV_F32, kvh, n, last);
            else if (kv->type == LLM_KV_F16) llm__attend_heads8(o, qg, kv, LLM_KV_F16, kvh, n, last);
            else llm__attend_heads8(o, qg, kv, LLM_KV_Q8, kvh, n, last);
        }
    }
#endif
    for (; g < nq; g++) llm__attend_head(out + (size_t)g * hs, q + (size_t)g * hs, kv, kvh, last);
}

/* ===================================================================== */
/* Forward                                                                */
/* ===================================================================== */

/* norm(x) with layer l's attention or FFN norm weights */
static void llm__layer_norm_batch(float *out, const float *x, const llm_tensor *g, const llm_tensor *b,
                                  int l, int T, const llm_model *m, const llm_state *s) {
    llm__norm_batch(out, x, llm__layer_vector(g, l), llm__layer_vector(b, l), T, m->cfg.dim, &m->cfg, s);
}

/* Attention for T tokens at pos..pos+T-1, input a (T,dim) -> s->xb2 (T,dim).
 * Writes this layer's keys and values into the cache first, so token t sees
 * the cache up to its own position: causal within the batch and over the past. */
static void llm__attention(const llm_model *m, llm_state *s, int l, const float *a, int T, int pos) {
    const llm_config *c = &m->cfg;
    int hs = c->head_size, kvd = c->n_kv_heads * hs, qd = c->n_heads * hs, group = c->n_heads / c->n_kv_heads;
    int nt = s->n_threads;
    size_t layer_elems = (size_t)s->ctx_len * kvd, layer_scales = (size_t)s->ctx_len * c->n_kv_heads;
    size_t eb = llm__kv_elem_bytes(s->kv_type);
    llm__kv_view kv;
    kv.k = (const unsigned char *)s->key_cache + l * layer_elems * eb;
    kv.v = (const unsigned char *)s->value_cache + l * layer_elems * eb;
    kv.k_scale = s->key_scale ? s->key_scale + l * layer_scales : NULL;
    kv.v_scale = s->value_scale ? s->value_scale + l * layer_scales : NULL;
    kv.type = s->kv_type; kv.n_heads = c->n_kv_heads; kv.hs = hs;
    llm_matrix wq = llm__layer_matrix(m, &m->w.wq, l), wk = llm__layer_matrix(m, &m->w.wk, l);
    llm_matrix wv = llm__layer_matrix(m, &m->w.wv, l), wo = llm__layer_matrix(m, &m->w.wo, l);

    /* q, k, v = Wq a, Wk a, Wv a */
    llm__matmul(s->q, &wq, a, T, s);
    llm__matmul(s->k_new, &wk, a, T, s);
    llm__matmul(s->v_new, &wv, a, T, s);

    /* RoPE on q and k at each token's position; k and v into the cache rows pos..pos+T-1 */
    LLM__PARALLEL_FOR(nt, (int64_t)T * qd * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        llm__rope(s->q + (size_t)t * qd, c->n_heads, s->rope + (size_t)t * hs, c);
        llm__rope(s->k_new + (size_t)t * kvd, c->n_kv_heads, s->rope + (size_t)t * hs, c);
        llm__kv_store((unsigned char *)s->key_cache + l * layer_elems * eb, s->key_scale ? s->key_scale + l * layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), s->k_new + (size_t)t * kvd, c->n_kv_heads, hs);
        llm__kv_store((unsigned char *)s->value_cache + l * layer_elems * eb, s->value_scale ? s->value_scale + l * layer_scales : NULL,
                      s->kv_type, (size_t)(pos + t), s->v_new + (size_t)t * kvd, c->n_kv_heads, hs);
    });

    /* per (token, head): softmax(q K^T / sqrt(hs)) V over positions 0..pos+t,
     * the query heads of one kv head together */
    LLM__PARALLEL_FOR(nt, (int64_t)T * qd * (pos + T) * 2 >= s->parallel_min_work,
    for (int tk = 0; tk < T * c->n_kv_heads; tk++) {
        /* tokens in the order 0, T-1, 1, T-2, ...: each thread's share of
         * items holds short and long rows of the causal triangle alike */
        int k = tk / c->n_kv_heads, t = k % 2 ? T - 1 - k / 2 : k / 2, kvh = tk % c->n_kv_heads;
        size_t at = (size_t)t * qd + (size_t)kvh * group * hs;   /* the group's first query head */
        llm__attend_group(s->xb + at, s->q + at, &kv, kvh, group, pos + t);
    });

    /* out = Wo concat(heads) */
    llm__matmul(s->xb2, &wo, s->xb, T, s);
}

/* SwiGLU FFN for T tokens: a (T,dim) -> s->xb2 (T,dim) = W2 (silu(W1 a) * W3 a) */
static void llm__ffn(const llm_model *m, llm_state *s, int l, const float *a, int T) {
    const llm_config *c = &m->cfg;
    int H = c->hidden_dim;
    llm_matrix w1 = llm__layer_matrix(m, &m->w.w1, l), w2 = llm__layer_matrix(m, &m->w.w2, l);
    llm_matrix w3 = llm__layer_matrix(m, &m->w.w3, l);
    llm__matmul(s->hb, &w1, a, T, s);
    llm__matmul(s->hb2, &w3, a, T, s);
    LLM__PARALLEL_FOR(s->n_threads, (int64_t)T * H * 8 >= s->parallel_min_work,
    for (int t = 0; t < T; t++) {
        float *g = s->hb + (size_t)t * H, *u = s->hb2 + (size_t)t * H;
        llm__swiglu(g, u, H);
    });
    llm__matmul(s->xb2, &w2, s->hb, T, s);
}

/* The fields that sized the state's buffers. */
static int llm__same_shape(const llm_config *a, const llm_config *b) {
    return a->dim == b->dim && a->hidden_dim == b->hidden_dim && a->n_layers == b->n_layers &&
           a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->head_size == b->head_size &&
           a->vocab_size == b->vocab_size && a->weight_type == b->weight_type && a->group_size == b->group_size;
}

int llm_forward(const llm_model *m, llm_state *s, const int *tokens, int T, int pos, int which_logits) {
    const llm_config *c = &m->cfg;
    int D = c->dim, nt = s->n_threads > 0 ? s->n_threads : 1;
    /* by construction, never a forward pass on a config the checks refuse
     * or one the state was not planned for (a few compares per call) */
    if (llm__check_config(c, s->error, sizeof s->error) != LLM_OK) return LLM_ERR_CONFIG;
    if (!s->x || !llm__same_shape(c, &s->cfg)) {
        llm__fmt(s->error, sizeof s->error, "the state was not initialised for this model's shape: call llm_state_init");
        return LLM_ERR_ARG;
    }
    if (T < 1 || T > s->max_batch) {
        llm__fmt(s->error, sizeof s->error, "batch of %d tokens out of range (1..%d)", T, s->max_batch);
        return LLM_ERR_ARG;
    }
    if (pos < 0 || pos > s->ctx_len - T) {
        llm__fmt(s->error, sizeof s->error, "positions %d..%d exceed the context of %d", pos, pos + T - 1, s->ctx_len);
        return LLM_ERR_ARG;
    }
    for (int t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size) {
            llm__fmt(s->error, sizeof s->error, "token id %d out of range (0..%d)", tokens[t], c->vocab_size - 1);
            return LLM_ERR_ARG;
        }
    }
    if (which_logits == LLM_LOGITS_ALL && !s->all_logits) {
        llm__fmt(s->error, sizeof s->error, "logits of every token asked for, but the state was planned for the last only");
        return LLM_ERR_ARG;
    }
    s->n_threads = nt;

    /* x = embedding[token] */
    for (int t = 0; t < T; t++) llm__dequant_row(s->x + (size_t)t * D, &m->w.tok_embeddings, tokens[t]);
    llm__rope_table(s->rope, pos, T, c);

    for (int l = 0; l < c->n_layers; l++) {
        if (c->norm_pos == LLM_NORM_PRE) {
            /* h = x + attn(norm_att(x)) */
            llm__layer_norm_batch(s->xb, s->x, &m->w.attn_norm, &m->w.attn_norm_bias, l, T, m, s);
            llm__attention(m, s, l, s->xb, T, pos);
            llm__residual_add(s->x, s->xb2, T, D, s);
            /* y = h + ffn(norm_ffn(h)) */
            llm__layer_norm_batch(s->xb, s->x, &m->w.ffn_norm, &m->w.ffn_norm_bias, l, T, m, s);
            llm__ffn(m, s, l, s->xb, T);
            llm__residual_add(s->x, s->xb2, T, D, s);
        } else {
            /* h = norm_att(x + attn(x)) */
            llm__attention(m, s, l, s->x, T, pos);
            llm__residual_add(s->x, s->xb2, T, D, s);
            llm__layer_norm_batch(s->x, s->x, &m->w.attn_norm, &m->w.attn_norm_bias, l, T, m, s);
            /* y = norm_ffn(h + ffn(h)) */
            llm__ffn(m, s, l, s->x, T);
            llm__residual_add(s->x, s->xb2, T, D, s);
            llm__layer_norm_batch(s->x, s->x, &m->w.ffn_norm, &m->w.ffn_norm_bias, l, T, m, s);
        }
    }

    /* logits = classifier @ final_norm(x), for every token or just the last */
    int first = which_logits == LLM_LOGITS_ALL ? 0 : T - 1, n_out = T - first;
    const float *xf = s->x + (size_t)first * D;
    if (c->final_norm) {
        llm__norm_batch(s->xb, xf, m->w.final_norm, m->w.final_norm_bias, n_out, D, c, s);
        xf = s->xb;
    }
    llm__matmul(s->logits, &m->w.classifier, xf, n_out, s);
    return LLM_OK;
}

#endif /* MODEL_IMPLEMENTATION_DONE */
#endif /* MODEL_IMPLEMENTATION */
