/* tests/expect.h -- the checks the C unit tests share (test_tokenizer_unit.c,
 * test_gguf_vocab.c): EXPECT(cond, printf arguments) counts a failed check
 * and prints the first eight of a test; run() runs one test and prints
 * "ok NAME" or "FAIL NAME (N failed checks)". Each program ends with
 * printf("%d passed, %d failed\n", n_passed, n_failed). */
#ifndef TESTS_EXPECT_H
#define TESTS_EXPECT_H
#include <stdio.h>

static int test_failed, n_failed, n_passed;

#define EXPECT(cond, ...)                                                \
    do {                                                                 \
        if (!(cond)) {                                                   \
            if (test_failed < 8) {                                       \
                printf("    line %d: %s: ", __LINE__, #cond);            \
                printf(__VA_ARGS__);                                     \
                printf("\n");                                            \
            }                                                            \
            test_failed++;                                               \
        }                                                                \
    } while (0)

static void run(const char *name, void (*fn)(void)) {
    test_failed = 0;
    fn();
    if (test_failed) {
        printf("FAIL %s (%d failed checks)\n", name, test_failed);
        n_failed++;
    } else {
        printf("ok %s\n", name);
        n_passed++;
    }
    fflush(stdout);
}
#endif
