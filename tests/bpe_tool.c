/* bpe_tool.c -- what tests/test_bpe.py asks of the tokenizer API beyond
 * `run -m tokenize`, and the 1 MB encoding benchmark (make bench-bpe).
 *
 *   bpe_tool info TOKFILE            bos/eos/eot ids, add_bos, template, default system prompt
 *   bpe_tool piece TOKFILE TEXT      tok_piece_id(TEXT), and the bytes tok_decode gives for it
 *   bpe_tool bench TOKFILE [MB]      encode 1 MB (or MB) of several texts, print ids and CPU time
 *   bpe_tool nfc < IN > OUT          tok_nfc of each line of IN (lines end in '\n', a starter
 *                                    NFC never joins to anything), one output line each
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long len;
    if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    b = (unsigned char *)malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void print_escaped(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);   /* CPU time: the machine is shared */
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* stdin's lines through tok_nfc to stdout, one call per line */
static int nfc_lines(void) {
    size_t cap = 1 << 20, n = 0, got, i, start, longest = 0;
    unsigned char *in = (unsigned char *)malloc(cap);
    char *out;
    void *scratch;
    while (in && (got = fread(in + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) in = (unsigned char *)realloc(in, cap *= 2);
    }
    if (!in) return 1;
    for (i = start = 0; i < n; i++)
        if (in[i] == '\n') { if (i - start > longest) longest = i - start; start = i + 1; }
    if (n - start > longest) longest = n - start;
    out = (char *)malloc(3 * longest + 1);
    scratch = malloc(tok_nfc_scratch_size(longest) + 1);
    if (!out || !scratch) return 1;
    for (i = start = 0; i <= n; i++) {
        if (i < n && in[i] != '\n') continue;
        fwrite(out, 1, tok_nfc(out, (const char *)in + start, i - start, scratch), stdout);
        if (i < n) putchar('\n');
        start = i + 1;
    }
    return fflush(stdout) != 0;
}

int main(int argc, char **argv) {
    tok_tokenizer t;
    size_t n, need;
    unsigned char *file;
    void *arena;
    if (argc == 2 && !strcmp(argv[1], "nfc")) return nfc_lines();
    if (argc < 3) {
        fprintf(stderr, "usage: bpe_tool info|piece|bench TOKFILE [ARG] | bpe_tool nfc\n");
        return 2;
    }
    file = slurp(argv[2], &n);
    need = tok_arena_size(file, n, 0);
    arena = malloc(need ? need : 1);
    if (tok_init(&t, file, n, 0, arena, need) != 0) {
        fprintf(stderr, "%s: %s\n", argv[2], tok_error(&t));
        return 1;
    }
    if (!strcmp(argv[1], "info")) {
        printf("vocab %d bos %d eos %d eot %d add_bos %d template %d system ", t.vocab_size, t.bos_id,
               t.eos_id, t.eot_id, t.add_bos, t.chat_template);
        if (t.default_system) print_escaped(t.default_system, t.default_system_len);
        printf("\n");
    } else if (!strcmp(argv[1], "piece") && argc > 3) {
        int id = tok_piece_id(&t, argv[3], strlen(argv[3]));
        size_t len = 0;
        const char *p = id >= 0 ? tok_decode(&t, 0, id, &len) : "";
        printf("%d ", id);
        print_escaped(p, len);
        printf("\n");
    } else if (!strcmp(argv[1], "bench")) {
        static const char *units[] = {"a", " ", "7", "\n", "<", "é", "Hello world, it's 12345 text. ",
                                      "你好世界", "\xff", "e\xcc\x81", "\xcc\x81\xcc\xa3"};
        size_t mb = argc > 3 ? (size_t)atol(argv[3]) : 1, u;
        size_t len = mb << 20;
        char *text = (char *)malloc(len + 1);
        size_t ss = tok_encode_scratch_size(len), mt = tok_max_tokens(len);
        void *scratch = malloc(ss);
        int *ids = (int *)malloc(mt * sizeof(int));
        if (!text || !scratch || !ids) return 1;
        for (u = 0; u < sizeof units / sizeof units[0]; u++) {
            size_t k = strlen(units[u]), i;
            double t0;
            int got;
            for (i = 0; i + k <= len; i += k) memcpy(text + i, units[u], k);
            text[i] = '\0';
            t0 = now();
            got = tok_encode(&t, text, 0, 0, ids, (int)mt, scratch, ss);
            printf("%-34s %8lu bytes  %8d ids  %7.3f s\n", u == 6 ? "\"Hello world, it's 12345 text. \"" :
                   u == 8 ? "byte 0xff (U+FFFD each)" : u == 9 ? "e U+0301 (NFC: é)" : u == 10 ? "U+0301 U+0323 (NFC reorders)" : units[u][0] == '\n' ? "\"\\n\"" : units[u],
                   (unsigned long)i, got, now() - t0);
            if (got < 0) printf("  error: %s\n", tok_error(&t));
        }
    } else {
        fprintf(stderr, "unknown command %s\n", argv[1]);
        return 2;
    }
    return 0;
}
