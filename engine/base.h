/* engine/base.h -- what every part of the engine uses: the C library
 * headers, the OpenMP switch, a tiny formatter for error messages, size
 * arithmetic that saturates instead of wrapping, little-endian reads, the
 * status and name tables, and IEEE f16 conversion. Included by model.h under
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
/* a compile-time check, in C99 */
#define LLM__STATIC_ASSERT(cond, name) typedef char llm__assert_##name[(cond) ? 1 : -1]

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

