/* engine/fmt.h -- a tiny snprintf for error messages (%d %u %ld %lu %zu %llu
 * %s %g %p %%), so neither the engine nor the tokenizer needs stdio on a
 * device: always NUL-terminates, truncates. Included by base.h and by
 * tokenizer.c, whose tok__fmt (tokenizer/internal.h) every tokenizer file
 * calls, so the library holds one copy (everything here is static). */
#ifndef LLM__FMT_H
#define LLM__FMT_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

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
static void llm__vfmt(char *buf, size_t cap, const char *fmt, va_list ap) {
    llm__out o;
    o.buf = buf; o.cap = cap; o.len = 0;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') { llm__putc(&o, *f); continue; }
        f++;
        if (*f == 'd') { long long v = va_arg(ap, int); if (v < 0) { llm__putc(&o, '-'); v = -v; } llm__putu(&o, (unsigned long long)v, 10); }
        else if (*f == 'u') llm__putu(&o, va_arg(ap, unsigned), 10);
        else if (*f == 'l' && f[1] == 'd') {
            long v = va_arg(ap, long);
            f++;
            if (v < 0) llm__putc(&o, '-');
            llm__putu(&o, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, 10);
        }
        else if (*f == 'l' && f[1] == 'u') { f++; llm__putu(&o, va_arg(ap, unsigned long), 10); }
        else if (*f == 'z' && f[1] == 'u') { f++; llm__putu(&o, va_arg(ap, size_t), 10); }
        else if (*f == 'l' && f[1] == 'l' && f[2] == 'u') { f += 2; llm__putu(&o, va_arg(ap, unsigned long long), 10); }
        else if (*f == 's') llm__puts(&o, va_arg(ap, const char *));
        else if (*f == 'g') llm__putg(&o, va_arg(ap, double));
        else if (*f == 'p') { llm__puts(&o, "0x"); llm__putu(&o, (unsigned long long)(uintptr_t)va_arg(ap, void *), 16); }
        else if (*f == '%') llm__putc(&o, '%');
        else { llm__putc(&o, '%'); if (!*f) break; llm__putc(&o, *f); }
    }
    if (cap) buf[o.len < cap ? o.len : cap - 1] = '\0';
}
#if defined(__GNUC__)
static inline void llm__fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
static inline void llm__fmt(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    llm__vfmt(buf, cap, fmt, ap);
    va_end(ap);
}
#endif /* LLM__FMT_H */
