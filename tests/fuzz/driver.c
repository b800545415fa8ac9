/* driver.c -- run input files through a harness without libFuzzer.
 *
 *   build/fuzz/fuzz_NAME-asan FILE...
 *
 * Prints "FILE: <what the harness did>" per file and exits 0 when every file
 * ran; a sanitizer report or a broken invariant aborts with non-zero status.
 * An unreadable file is an error (exit 2), never skipped.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file in a malloc'd buffer of exactly its size (1 byte if empty). */
static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    if (!f) return NULL;
    do {
        if (len == cap) {
            uint8_t *bigger = (uint8_t *)realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!bigger) { free(buf); fclose(f); return NULL; }
            buf = bigger;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    *size = len;
    return (uint8_t *)realloc(buf, len ? len : 1);   /* exact: asan sees overreads */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        size_t size = 0;
        uint8_t *data = read_file(argv[i], &size);
        if (!data) {
            fprintf(stderr, "error: cannot read %s\n", argv[i]);
            return 2;
        }
        fuzz_outcome[0] = '\0';
        LLVMFuzzerTestOneInput(data, size);
        printf("%s: %s\n", argv[i], fuzz_outcome);
        fflush(stdout);
        free(data);
    }
    return 0;
}
