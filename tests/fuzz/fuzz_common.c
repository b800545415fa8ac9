/* fuzz_common.c -- fuzz.h's helpers, linked into every harness. */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

char fuzz_outcome[256];

void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz invariant broken: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fuzz_outcome, sizeof fuzz_outcome, fmt, ap);
    va_end(ap);
}
