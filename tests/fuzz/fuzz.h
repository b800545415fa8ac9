/* fuzz.h -- what every harness in tests/fuzz/ provides.
 *
 * A harness is one LLVMFuzzerTestOneInput. It is linked either with
 * libFuzzer (clang -fsanitize=fuzzer: `make fuzz`) or with driver.c, a plain
 * main that runs input files through it (the asan build the test suite uses,
 * no clang needed). A broken invariant calls fuzz_fail(), which aborts: a
 * crash to both.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One line saying what the last input did ("loaded ...", "refused: ..."),
 * set by the harness; driver.c prints it. */
extern char fuzz_outcome[256];

/* Report a broken invariant on stderr and abort. */
void fuzz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* Print into fuzz_outcome. */
void fuzz_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
