/* engine/base.h -- what every part of the engine uses: the C library
 * headers, the OpenMP switch, a tiny formatter for error messages, size
 * arithmetic that saturates instead of wrapping, little-endian reads, the
 * status and name tables, IEEE f16 conversion, and which layers are local
 * (sliding window) and their KV rows. Included by model.h under
 * MODEL_IMPLEMENTATION; not a header to include alone. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

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

#include "fmt.h"   /* llm__fmt: the error messages' formatter, shared with tokenizer.c */
#include "compiler.h"   /* unroll, inline, prefetch, static assert */

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

#ifndef LLM__PART_KERNELS   /* the split build's model part defines the API (engine/parts.h) */
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
    if (!strcmp(s, "peri")) return LLM_NORM_PERI;
    if (!strcmp(s, "out")) return LLM_NORM_OUT;
    return -1;
}
int llm_parse_on_off(const char *s) {
    if (!strcmp(s, "on")) return 1;
    if (!strcmp(s, "off")) return 0;
    return -1;
}
const char *llm_norm_type_name(int t) { return t == LLM_NORM_LAYER ? "layer" : "rms"; }
const char *llm_norm_pos_name(int p) {
    return p == LLM_NORM_POST ? "post" : p == LLM_NORM_PERI ? "peri" : p == LLM_NORM_OUT ? "out" : "pre";
}
const char *llm_kv_type_name(int t) { return t == LLM_KV_F16 ? "f16" : t == LLM_KV_Q8 ? "q8" : "f32"; }
int llm_parse_kv_type(const char *s) {
    if (!strcmp(s, "f32")) return LLM_KV_F32;
    if (!strcmp(s, "f16")) return LLM_KV_F16;
    if (!strcmp(s, "q8")) return LLM_KV_Q8;
    return -1;
}
#endif

/* IEEE binary16 <-> binary32, exact, portable. The split build's kernels
 * part has its own static copies (its kernels inline them, as in one
 * translation unit); the model part defines the API's. */
#ifdef LLM__PART_KERNELS
#define llm_f16_to_f32 llm__f16_to_f32
#define llm_f32_to_f16 llm__f32_to_f16
#define LLM__F16_API static
#else
#define LLM__F16_API
#endif
LLM__F16_API float llm_f16_to_f32(uint16_t h) {
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

LLM__F16_API uint16_t llm_f32_to_f16(float f) { /* round to nearest even */
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

/* 1: layer l is local (sliding window, its own RoPE base) */
static int llm__layer_local(const llm_config *c, int l) {
    return c->sliding_window > 0 && l < 64 && ((c->local_layers >> l) & 1u);
}

/* The KV cache rows (positions) layer l keeps with a context of ctx: a local
 * layer whose window fits twice in the context a ring of 2 * sliding_window
 * rows (position p at rows p % W and p % W + W, so any window's keys lie in
 * consecutive rows), every other layer ctx rows. */
static uint64_t llm__kv_layer_rows(const llm_config *c, uint64_t ctx, int l) {
    uint64_t ring = 2 * (uint64_t)(c->sliding_window > 0 ? c->sliding_window : 0);
    return llm__layer_local(c, l) && ring < ctx ? ring : ctx;
}
/* the rows of the layers before l: where layer l's rows start */
static uint64_t llm__kv_rows_before(const llm_config *c, uint64_t ctx, int l) {
    uint64_t rows = 0;
    for (int k = 0; k < l; k++) rows += llm__kv_layer_rows(c, ctx, k);
    return rows;
}
