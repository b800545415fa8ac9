/* test_tokenizer_unit.c -- unit tests of tokenizer.c through its C API.
 *
 *   build/test_tokenizer_unit MODELS_DIR [CORPUS_FILE]
 *
 * MODELS_DIR holds tokenizer.bin (Llama 2, 32000 entries) and tok512.bin;
 * CORPUS_FILE defaults to tests/data/tokenizer_corpus.txt. Prints one line per
 * test, "ok NAME" or "FAIL NAME" (details indented below it), then a summary;
 * exits 1 if anything failed. Every buffer handed to the tokenizer is
 * malloc'ed at its exact size, so an AddressSanitizer build catches any read or
 * write outside it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tokenizer.h"
#include "expect.h"

static const char *models = ".";
static const char *corpus_path = "tests/data/tokenizer_corpus.txt";



/* ---- helpers ---- */

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long sz;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (unsigned char *)malloc(sz > 0 ? (size_t)sz : 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        fclose(f);
        free(b);
        return NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static unsigned char *model_file(const char *name, size_t *n) {
    char path[4096];
    unsigned char *b;
    snprintf(path, sizeof path, "%s/%s", models, name);
    b = slurp(path, n);
    if (!b) {
        printf("cannot read %s\n", path);
        exit(2);
    }
    return b;
}

typedef struct {
    unsigned char *bytes;
    size_t n;
    void *arena;
    tok_tokenizer t;
    int rc;
} loaded;

/* Parse a copy of (bytes, n) held in an exact-size allocation. */
static void load_mem(loaded *L, const unsigned char *bytes, size_t n, int vocab_size) {
    size_t need;
    L->bytes = (unsigned char *)calloc(n ? n : 1, 1);
    if (n) memcpy(L->bytes, bytes, n);
    L->n = n;
    need = tok_arena_size(L->bytes, n, vocab_size);
    L->arena = need ? malloc(need) : NULL;
    L->rc = tok_init(&L->t, L->bytes, n, vocab_size, L->arena, need);
}

static void unload(loaded *L) {
    free(L->bytes);
    free(L->arena);
    L->bytes = NULL;
    L->arena = NULL;
}

static void load_model(loaded *L, const char *name, int vocab_size) {
    size_t n;
    unsigned char *b = model_file(name, &n);
    load_mem(L, b, n, vocab_size);
    free(b);
    if (L->rc) {
        printf("cannot load %s: %s\n", name, tok_error(&L->t));
        exit(2);
    }
}

/* Encode with an exact-size, deliberately misaligned scratch buffer. */
static int encode(tok_tokenizer *t, const char *s, int bos, int eos, int *out, int cap) {
    size_t ss = tok_encode_scratch_size(strlen(s));
    unsigned char *buf = (unsigned char *)malloc(ss + 1);
    int k = tok_encode(t, s, bos, eos, out, cap, buf + 1, ss);
    free(buf);
    return k;
}

/* Encode s (with BOS) into a fresh array; *n gets the count (negative: error). */
static int *encode_alloc(tok_tokenizer *t, const char *s, int *n) {
    int cap = 3 * (int)strlen(s) + 3;
    int *ids = (int *)malloc(sizeof(int) * (size_t)cap);
    *n = encode(t, s, 1, 0, ids, cap);
    return ids;
}

/* Decode ids[1..n) (ids[0] is BOS) into a fresh NUL-terminated string. */
static char *decode_all(const tok_tokenizer *t, const int *ids, int n) {
    size_t cap = 16, len = 0;
    char *s = (char *)malloc(cap);
    int i;
    for (i = 1; i < n; i++) {
        size_t l;
        const char *p = tok_decode(t, ids[i - 1], ids[i], &l);
        if (len + l + 1 > cap) {
            while (len + l + 1 > cap) cap *= 2;
            s = (char *)realloc(s, cap);
        }
        memcpy(s + len, p, l);
        len += l;
    }
    s[len] = '\0';
    return s;
}

/* decode(encode(s)) == s, and every id below the vocabulary size. */
static int roundtrip(tok_tokenizer *t, const char *s, int verbose) {
    int n, i, ok = 1;
    int *ids = encode_alloc(t, s, &n);
    char *back;
    if (n < 1 || ids[0] != TOK_BOS) {
        if (verbose) printf("    encode failed for \"%s\": %s\n", s, tok_error(t));
        free(ids);
        return 0;
    }
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size) ok = 0;
    back = decode_all(t, ids, n);
    if (strcmp(back, s) != 0) ok = 0;
    if (!ok && verbose) printf("    round trip failed: \"%s\" -> \"%s\"\n", s, back);
    free(back);
    free(ids);
    return ok;
}

static int contains(const char *hay, const char *needle) {
    return strstr(hay, needle) != NULL;
}

static int one_line(const char *s) {
    return s[0] != '\0' && strchr(s, '\n') == NULL;
}

static int find_piece(const tok_tokenizer *t, const char *s) {
    int i;
    size_t n = strlen(s);
    for (i = 0; i < t->vocab_size; i++)
        if ((size_t)t->piece_len[i] == n && memcmp(t->bytes + t->piece_offset[i], s, n) == 0) return i;
    return -1;
}

/* A tokenizer.bin image: <unk>, <s>, </s>, <0x00>..<0xFF>, then
 * the given pieces with their scores (NULL: -index). Returns its size. */
static size_t build_vocab(unsigned char *out, const char **pieces, const float *scores, int n) {
    size_t off = 4;
    int i, maxlen = 6;
    char tmp[16];
    for (i = 0; i < 259 + n; i++) {
        const char *p;
        float sc = 0.0f;
        int len;
        if (i == 0) p = "<unk>";
        else if (i == 1) p = "<s>";
        else if (i == 2) p = "</s>";
        else if (i < 259) {
            snprintf(tmp, sizeof tmp, "<0x%02X>", i - 3);
            p = tmp;
        } else {
            p = pieces[i - 259];
            sc = scores ? scores[i - 259] : (float)-(i - 259);
        }
        len = (int)strlen(p);
        if (len > maxlen) maxlen = len;
        memcpy(out + off, &sc, 4);
        memcpy(out + off + 4, &len, 4);
        memcpy(out + off + 8, p, (size_t)len);
        off += 8 + (size_t)len;
    }
    memcpy(out, &maxlen, 4);
    return off;
}

static loaded big, small;   /* tokenizer.bin, tok512.bin */

/* ---- tests ---- */

static void test_load(void) {
    int b;
    EXPECT(big.t.vocab_size == 32000, "%d", big.t.vocab_size);
    EXPECT(big.t.max_token_length == 27, "%d", big.t.max_token_length);
    EXPECT(small.t.vocab_size == 512, "%d", small.t.vocab_size);
    EXPECT(small.t.max_token_length == 7, "%d", small.t.max_token_length);
    EXPECT(tok_error(&big.t)[0] == '\0', "%s", tok_error(&big.t));
    for (b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        EXPECT(big.t.byte_token[b] >= 0 && find_piece(&big.t, want) == big.t.byte_token[b],
               "byte %d -> %d", b, big.t.byte_token[b]);
        EXPECT(small.t.byte_token[b] == big.t.byte_token[b], "byte %d", b);
    }
    EXPECT(big.t.word_split == 1 && small.t.word_split == 1, "%d %d", big.t.word_split,
           small.t.word_split);
}

static void test_vocab_size_given(void) {
    loaded L;
    size_t n;
    unsigned char *b = model_file("tok512.bin", &n);
    load_mem(&L, b, n, 512);
    EXPECT(L.rc == 0 && L.t.vocab_size == 512, "rc %d: %s", L.rc, tok_error(&L.t));
    unload(&L);
    EXPECT(tok_arena_size(b, n, 512) == tok_arena_size(b, n, 0), "sizes differ");
    EXPECT(tok_arena_size(b, n, 511) == 0, "511 accepted");
    EXPECT(tok_arena_size(b, n, 513) == 0, "513 accepted");
    free(b);
}

static void test_wrong_vocab_size(void) {
    loaded L;
    size_t n;
    unsigned char *b = model_file("tokenizer.bin", &n);
    load_mem(&L, b, n, 512);
    EXPECT(L.rc < 0, "rc %d", L.rc);
    EXPECT(contains(tok_error(&L.t), "32000 entries") && contains(tok_error(&L.t), "expects 512") &&
           contains(tok_error(&L.t), "wrong tokenizer"), "%s", tok_error(&L.t));
    EXPECT(tok_arena_size(b, n, 512) == 0, "arena size for a wrong vocab");
    unload(&L);
    free(b);

    b = model_file("tok512.bin", &n);
    load_mem(&L, b, n, 32000);
    EXPECT(L.rc < 0, "rc %d", L.rc);
    EXPECT(contains(tok_error(&L.t), "512 entries") && contains(tok_error(&L.t), "expects 32000"),
           "%s", tok_error(&L.t));
    unload(&L);
    free(b);
}

static void test_arena_size_exact(void) {
    size_t n, need, tables = 512 * 16 + 257 * sizeof(int);
    unsigned char *b = model_file("tok512.bin", &n);
    tok_tokenizer t;
    int off;
    need = tok_arena_size(b, n, 0);
    EXPECT(need >= tables && need < tables + 16, "need %lu, tables %lu", (unsigned long)need,
           (unsigned long)tables);
    /* enough at any alignment (the allocation ends exactly at the arena's end) */
    for (off = 0; off < 8; off++) {
        unsigned char *buf = (unsigned char *)malloc(need + (size_t)off);
        int rc = tok_init(&t, b, n, 0, buf + off, need);
        EXPECT(rc == 0, "offset %d: %s", off, tok_error(&t));
        if (rc == 0) EXPECT(roundtrip(&t, "Hello, arena.", 1), "offset %d", off);
        free(buf);
    }
    /* an aligned arena needs exactly the tables; one byte less is refused */
    {
        unsigned char *buf = (unsigned char *)malloc(tables);
        EXPECT(tok_init(&t, b, n, 0, buf, tables) == 0, "%s", tok_error(&t));
        EXPECT(tok_init(&t, b, n, 0, buf, tables - 1) < 0, "one byte short accepted");
        EXPECT(contains(tok_error(&t), "arena too small"), "%s", tok_error(&t));
        free(buf);
    }
    EXPECT(tok_init(&t, b, n, 0, NULL, 0) < 0 && contains(tok_error(&t), "arena"), "%s", tok_error(&t));
    free(b);
}

static void expect_bad(const unsigned char *bytes, size_t n, int vocab, const char *what,
                       const char *needle, int line) {
    loaded L;
    load_mem(&L, bytes, n, vocab);
    if (L.rc >= 0 || !one_line(tok_error(&L.t)) || (needle && !contains(tok_error(&L.t), needle))) {
        if (test_failed < 8)
            printf("    line %d: %s (vocab %d): rc %d, error \"%s\", wanted \"%s\"\n", line, what,
                   vocab, L.rc, tok_error(&L.t), needle ? needle : "");
        test_failed++;
    }
    if (L.rc >= 0) {  /* must still be harmless */
        int ids[8];
        encode(&L.t, "x", 1, 0, ids, 8);
    }
    unload(&L);
}
#define BAD(b, n, v, what, needle) expect_bad(b, n, v, what, needle, __LINE__)

static void put_i32(unsigned char *p, long v) {
    unsigned long u = (unsigned long)v;
    p[0] = (unsigned char)(u & 0xff);
    p[1] = (unsigned char)((u >> 8) & 0xff);
    p[2] = (unsigned char)((u >> 16) & 0xff);
    p[3] = (unsigned char)((u >> 24) & 0xff);
}

/* byte offset of entry i of a valid image */
static size_t entry_offset(const unsigned char *b, int i) {
    size_t off = 4;
    while (i-- > 0) {
        int len;
        memcpy(&len, b + off + 4, 4);
        off += 8 + (size_t)len;
    }
    return off;
}

static void test_malformed_files(void) {
    size_t n, e10, last;
    unsigned char *orig = model_file("tok512.bin", &n);
    unsigned char *b = (unsigned char *)malloc(n + 64);
    float nan_val;
    unsigned nan_bits = 0x7fc00000u;

    BAD(orig, 0, 0, "empty file", "empty");
    BAD(NULL, 0, 0, "NULL, 0", "empty");
    BAD(orig, 3, 0, "3 bytes", "too short");
    BAD(orig, 4, 0, "header only", "at least 3");
    BAD(orig, 4, 512, "header only", "0 entries");
    BAD(orig, 5, 0, "header + 1 byte", "truncated");

    e10 = entry_offset(orig, 10);
    memcpy(b, orig, n);
    put_i32(b + e10 + 4, -1);
    BAD(b, n, 0, "negative length", "length -1");
    put_i32(b + e10 + 4, -2147483647L - 1);
    BAD(b, n, 0, "INT_MIN length", "length");
    put_i32(b + e10 + 4, 0x7fffffffL);
    BAD(b, n, 0, "huge length", "length");
    put_i32(b + e10 + 4, 8);   /* max_token_length is 7 */
    BAD(b, n, 0, "length > max_token_length", "max_token_length");

    /* a length past the end of the file, within max_token_length */
    memcpy(b, orig, n);
    last = entry_offset(orig, 511);
    put_i32(b, 1000);
    put_i32(b + last + 4, 999);
    BAD(b, n, 0, "length past the end", "truncated");

    memcpy(b, orig, n);
    put_i32(b, 0);
    BAD(b, n, 0, "max_token_length 0", "max_token_length");
    put_i32(b, -5);
    BAD(b, n, 0, "negative max_token_length", "max_token_length");

    memcpy(b, orig, n);
    memcpy(&nan_val, &nan_bits, 4);
    memcpy(b + e10, &nan_val, 4);
    BAD(b, n, 0, "NaN score", "NaN");

    /* trailing garbage */
    {
        size_t k;
        memcpy(b, orig, n);
        memcpy(b + n, "GARBAGE!GARBAGE!", 16);
        for (k = 1; k <= 16; k++) {
            BAD(b, n + k, 0, "trailing garbage", NULL);
            BAD(b, n + k, 512, "trailing garbage", "trailing garbage");
        }
    }
    /* 8 zero bytes look like one more (empty) entry: with the count known it is an error */
    memcpy(b, orig, n);
    memset(b + n, 0, 8);
    BAD(b, n + 8, 512, "an extra empty entry", "513 entries");

    /* every truncation: an error, unless it falls on an entry boundary and
     * the count is not known (then it is a smaller, valid vocabulary) */
    {
        size_t cut, next_boundary = 4;
        int entries = 0, wrong = 0;
        for (cut = 1; cut < n; cut++) {
            loaded L;
            int boundary;
            while (next_boundary < cut) {
                int len;
                memcpy(&len, orig + next_boundary + 4, 4);
                next_boundary += 8 + (size_t)len;
                entries++;
            }
            boundary = cut == next_boundary && cut > 4;
            load_mem(&L, orig, cut, 0);
            if ((L.rc == 0) != (boundary && entries >= 3) || (L.rc && !one_line(tok_error(&L.t)))) {
                if (wrong++ < 3)
                    printf("    truncated at %lu: rc %d \"%s\"\n", (unsigned long)cut, L.rc,
                           tok_error(&L.t));
            }
            unload(&L);
            load_mem(&L, orig, cut, 512);
            if (L.rc == 0 || !one_line(tok_error(&L.t))) {
                if (wrong++ < 3)
                    printf("    truncated at %lu accepted with vocab 512\n", (unsigned long)cut);
            }
            unload(&L);
        }
        EXPECT(wrong == 0, "%d truncations misjudged", wrong);
    }
    free(b);
    free(orig);
}

/* Random byte mutations of a valid file: whatever tok_init decides, nothing
 * may read or write out of bounds (run under ASan), and encode/decode of an
 * accepted file must stay within its vocabulary. */
static void test_mutations(void) {
    size_t n, i;
    unsigned char *orig = model_file("tok512.bin", &n);
    unsigned char *b = (unsigned char *)malloc(n);
    unsigned long long rng = 12345;
    int iter, accepted = 0, bad = 0;
    for (iter = 0; iter < 2000; iter++) {
        loaded L;
        int flips, f;
        size_t len = n;
        memcpy(b, orig, n);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        flips = 1 + (int)((rng >> 33) % 4);
        for (f = 0; f < flips; f++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            i = (size_t)((rng >> 33) % (iter % 3 ? 64 : n));   /* often the header and first entries */
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (unsigned char)(rng >> 40);
        }
        if (iter % 5 == 0) len = (size_t)((rng >> 20) % n);
        load_mem(&L, b, len, 0);
        if (L.rc == 0) {
            int ids[64], k, j;
            accepted++;
            k = encode(&L.t, "Hello <s> wörld 😀 \xff", 1, 1, ids, 64);
            for (j = 0; j < k; j++) {
                size_t l;
                if (ids[j] < 0 || ids[j] >= L.t.vocab_size) bad++;
                tok_decode(&L.t, j ? ids[j - 1] : -1, ids[j], &l);
            }
        } else if (!one_line(tok_error(&L.t))) {
            bad++;
        }
        unload(&L);
    }
    EXPECT(bad == 0, "%d bad outcomes (%d accepted)", bad, accepted);
    free(b);
    free(orig);
}

static void expect_ids(tok_tokenizer *t, const char *s, int bos, int eos, const int *want, int n_want,
                       int line) {
    int got[64], k, i, same;
    k = encode(t, s, bos, eos, got, 64);
    same = k == n_want;
    for (i = 0; same && i < k; i++) same = got[i] == want[i];
    if (!same) {
        if (test_failed < 8) {
            printf("    line %d: \"%s\": got", line, s);
            for (i = 0; i < k; i++) printf(" %d", got[i]);
            printf(" (%d), want", k);
            for (i = 0; i < n_want; i++) printf(" %d", want[i]);
            printf("\n");
        }
        test_failed++;
    }
}
#define IDS(t, s, bos, eos, ...)                                                   \
    do {                                                                           \
        static const int want_[] = {__VA_ARGS__};                                  \
        expect_ids(t, s, bos, eos, want_, (int)(sizeof want_ / sizeof want_[0]), __LINE__); \
    } while (0)

static void test_encode_known(void) {
    /* ids from python3-sentencepiece with tokenizer.model */
    IDS(&big.t, "Hello world", 1, 0, 1, 15043, 3186);
    IDS(&big.t, "Hello world", 0, 1, 15043, 3186, 2);
    IDS(&big.t, "", 1, 1, 1, 2);
    IDS(&big.t, "", 1, 0, 1);
    IDS(&big.t, " ", 1, 0, 1, 259);
    IDS(&big.t, "  lead", 1, 0, 1, 259, 3275);
    IDS(&big.t, "a\tb", 1, 0, 1, 263, 12, 29890);
    IDS(&big.t, "<s>", 1, 0, 1, 529, 29879, 29958);
    IDS(&big.t, "</s>", 1, 0, 1, 1533, 29879, 29958);
    IDS(&big.t, "<0x41>", 1, 0, 1, 529, 29900, 29916, 29946, 29896, 29958);
    IDS(&big.t, "\xf0\x9f\x98\x80", 1, 0, 1, 29871, 243, 162, 155, 131);
    IDS(&big.t, "x\xc0\x80", 1, 0, 1, 921, 26308);      /* overlong: two U+FFFD */
    IDS(&big.t, "x\xed\xa0\x80", 1, 0, 1, 921, 26308, 30140); /* surrogate: three */
    {
        int none[1];
        EXPECT(encode(&big.t, "", 0, 0, none, 0) == 0, "%s", tok_error(&big.t));
    }
}

/* Control tokens never come out of an encoding, and a byte token only for a
 * character that is not a piece itself. */
static void check_no_specials(tok_tokenizer *t, const char *text, int line) {
    int ids[128], k = encode(t, text, 0, 0, ids, 128), j, bad = 0;
    if (k <= 0) bad = 1;
    for (j = 0; j < k; j++) {
        int v = -1, c;
        if (ids[j] <= 2) bad = 1;
        for (c = 0; c < 256; c++)
            if (t->byte_token[c] == ids[j]) v = c;
        if (v > 0) {
            char ch[2];
            int piece;
            ch[0] = (char)v;
            ch[1] = '\0';
            piece = find_piece(t, ch);
            if (piece >= 0 && piece != ids[j]) bad = 1;
        }
    }
    if (!roundtrip(t, text, 1)) bad = 1;
    if (bad) {
        if (test_failed < 8) {
            printf("    line %d: \"%s\" ->", line, text);
            for (j = 0; j < k; j++) printf(" %d", ids[j]);
            printf("\n");
        }
        test_failed++;
    }
}

static void test_no_special_tokens(void) {
    static const char *texts[] = {"<s>", "</s>", "<unk>", "<0x41>", "<0x0A>", "\n<s>\n", "\n</s>\n",
                                  "<s>Hello</s>", "x<0x41>y", "<0xFF><0x00>", "<<s>>"};
    int i;
    for (i = 0; i < (int)(sizeof texts / sizeof texts[0]); i++) {
        check_no_specials(&big.t, texts[i], __LINE__);
        check_no_specials(&small.t, texts[i], __LINE__);
    }
    /* a vocabulary whose normal pieces chain up to "<s>", "</s>" and "<0x41>":
     * those are control / byte tokens, so the last merge must not happen */
    {
        static const char *pieces[] = {"<", "0", "x", "4", "1", ">", "<0", "<0x", "<0x4", "<0x41",
                                       "s", "/", "<s", "</", "</s", "\n", "A", "u", "n", "k", "<u",
                                       "<un", "<unk", " "};
        unsigned char buf[8192];
        size_t n = build_vocab(buf, pieces, NULL, (int)(sizeof pieces / sizeof pieces[0]));
        loaded L;
        load_mem(&L, buf, n, 0);
        EXPECT(L.rc == 0, "%s", tok_error(&L.t));
        if (L.rc == 0) {
            static const char *tx[] = {"<s>", "\n<s>\n", "</s>", "<0x41>", "<unk>", "A<0x41>A"};
            for (i = 0; i < 6; i++) check_no_specials(&L.t, tx[i], __LINE__);
            IDS(&L.t, "<s>", 0, 0, 259 + 23, 259 + 12, 259 + 5);
            IDS(&L.t, "<0x41>", 0, 0, 259 + 23, 259 + 9, 259 + 5);
            IDS(&L.t, "<unk>", 0, 0, 259 + 23, 259 + 22, 259 + 5);
        }
        unload(&L);
    }
}

/* Synthetic vocabularies: merge order, ties, and a piece with an inner space
 * (which turns off the word-by-word shortcut). */
static void test_merge_rules(void) {
    unsigned char buf[8192];
    loaded L;
    size_t n;
    {
        /* " x y": "x " (-1) merges first, then "x y" (0); " x" (-10) loses */
        static const char *pieces[] = {" ", "x", "y", "x ", "x y", " x"};
        static const float scores[] = {-5, -5, -5, -1, 0, -10};
        n = build_vocab(buf, pieces, scores, 6);
        load_mem(&L, buf, n, 0);
        EXPECT(L.rc == 0, "%s", tok_error(&L.t));
        EXPECT(L.t.word_split == 0, "word_split %d", L.t.word_split);
        IDS(&L.t, "x y", 0, 0, 259, 263);
        IDS(&L.t, "x yx y", 0, 0, 259, 263, 263);
        unload(&L);
    }
    {
        /* ties go to the leftmost pair */
        static const char *pieces[] = {" ", "a", "aa", " a"};
        static const float scores[] = {-9, -9, -1, -1};
        n = build_vocab(buf, pieces, scores, 4);
        load_mem(&L, buf, n, 0);
        EXPECT(L.rc == 0 && L.t.word_split == 1, "%s", tok_error(&L.t));
        IDS(&L.t, "aaa", 0, 0, 262, 261);          /* " a" first (leftmost), then "aa" */
        IDS(&L.t, "aaaa", 0, 0, 262, 261, 260);
        IDS(&L.t, "b", 0, 0, 259, 3 + 'b');        /* "b" is not a piece: byte fallback */
        unload(&L);
    }
    {
        /* the highest score wins wherever it is */
        static const char *pieces[] = {" ", "a", "b", "c", "ab", "bc", " a"};
        static const float scores[] = {-9, -9, -9, -9, -2, -1, -3};
        n = build_vocab(buf, pieces, scores, 7);
        load_mem(&L, buf, n, 0);
        IDS(&L.t, "abc", 0, 0, 265, 264);   /* " a" then "bc" */
        IDS(&L.t, "xabc", 0, 0, 259, 3 + 'x', 260, 264);   /* "bc" beats "ab" */
        unload(&L);
    }
}

static void test_max_tokens(void) {
    int ids[8];
    EXPECT(encode(&big.t, "Hello world", 1, 0, ids, 3) == 3, "%s", tok_error(&big.t));
    EXPECT(encode(&big.t, "Hello world", 1, 0, ids, 2) < 0, "fit in 2");
    EXPECT(contains(tok_error(&big.t), "needs 3") && contains(tok_error(&big.t), "room for 2"), "%s",
           tok_error(&big.t));
    EXPECT(encode(&big.t, "Hello world", 1, 1, ids, 3) < 0, "EOS fit in 3");
    EXPECT(encode(&big.t, "Hello world", 0, 0, NULL, 0) < 0, "NULL output accepted");
    EXPECT(encode(&big.t, "Hello world", 1, 0, ids, 3) == 3 && tok_error(&big.t)[0] == '\0',
           "error not cleared: %s", tok_error(&big.t));
}

static void test_scratch(void) {
    const char *s = "Scratch space, please.";
    size_t ss = tok_encode_scratch_size(strlen(s));
    int ids[32], off;
    for (off = 0; off < 8; off++) {
        unsigned char *buf = (unsigned char *)malloc(ss + (size_t)off);
        EXPECT(tok_encode(&big.t, s, 1, 0, ids, 32, buf + off, ss) > 0, "offset %d: %s", off,
               tok_error(&big.t));
        free(buf);
    }
    {
        unsigned char *buf = (unsigned char *)malloc(ss);
        EXPECT(tok_encode(&big.t, s, 1, 0, ids, 32, buf, ss / 2) < 0, "half the scratch accepted");
        EXPECT(contains(tok_error(&big.t), "scratch"), "%s", tok_error(&big.t));
        free(buf);
    }
    EXPECT(tok_encode(&big.t, s, 1, 0, ids, 32, NULL, 0) < 0, "no scratch accepted");
    EXPECT(tok_encode(&big.t, "", 1, 0, ids, 32, NULL, 0) == 1, "empty text needs no scratch");
    EXPECT(tok_encode_scratch_size((size_t)-1) == 0, "huge text");
    EXPECT(tok_encode_scratch_size(0) > 0 && tok_encode_scratch_size(100) < 100 * 64, "%lu",
           (unsigned long)tok_encode_scratch_size(100));
}

static void test_decode(void) {
    size_t len;
    const char *p;
    int hello = find_piece(&big.t, " Hello"), b;
    EXPECT(hello == 15043, "%d", hello);
    p = tok_decode(&big.t, TOK_BOS, hello, &len);
    EXPECT(len == 5 && memcmp(p, "Hello", 5) == 0, "after BOS: %.*s", (int)len, p);
    p = tok_decode(&big.t, 3186, hello, &len);
    EXPECT(len == 6 && memcmp(p, " Hello", 6) == 0, "%.*s", (int)len, p);
    p = tok_decode(&big.t, TOK_BOS, 259, &len);   /* "  " after BOS loses one space */
    EXPECT(len == 1 && p[0] == ' ', "%lu", (unsigned long)len);
    for (b = 0; b < 256; b++) {
        int id = big.t.byte_token[b];
        p = tok_decode(&big.t, 100, id, &len);
        EXPECT(len == 1 && (unsigned char)p[0] == b, "byte %d", b);
        p = tok_decode(&big.t, TOK_BOS, id, &len);   /* byte tokens keep a space after BOS */
        EXPECT(len == 1 && (unsigned char)p[0] == b, "byte %d after BOS", b);
        p = tok_decode(&small.t, TOK_BOS, small.t.byte_token[b], &len);
        EXPECT(len == 1 && (unsigned char)p[0] == b, "tok512 byte %d", b);
    }
    {
        static const int bad_ids[] = {-1, 32000, 32001, INT_MAX, INT_MIN};
        int i;
        for (i = 0; i < 5; i++) {
            len = 99;
            p = tok_decode(&big.t, TOK_BOS, bad_ids[i], &len);
            EXPECT(p != NULL && len == 0, "id %d", bad_ids[i]);
        }
        p = tok_decode(&small.t, 0, 512, &len);
        EXPECT(p != NULL && len == 0, "tok512 id 512");
    }
    p = tok_decode(&big.t, 0, TOK_BOS, &len);   /* control tokens: their stored text */
    EXPECT(len == 5 && memcmp(p, "\n<s>\n", 5) == 0, "%lu", (unsigned long)len);
    EXPECT(tok_decode(&big.t, 0, hello, NULL) != NULL, "NULL len");
}

static void test_invalid_utf8(void) {
    int a[32], b[32], ka, kb, i, same;
    int fffd = find_piece(&big.t, "\xef\xbf\xbd");
    ka = encode(&big.t, "a\xff" "b\x80\xc3", 1, 0, a, 32);
    kb = encode(&big.t, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd", 1, 0, b, 32);
    same = ka == kb && ka > 0;
    for (i = 0; same && i < ka; i++) same = a[i] == b[i];
    EXPECT(same, "invalid bytes are not U+FFFD (%d vs %d tokens)", ka, kb);
    EXPECT(fffd > 258, "U+FFFD piece %d", fffd);
    /* tok512 has no U+FFFD piece: byte fallback of EF BF BD */
    ka = encode(&small.t, "\xff", 0, 0, a, 32);
    EXPECT(ka == 4 && a[1] == small.t.byte_token[0xEF] && a[2] == small.t.byte_token[0xBF] &&
           a[3] == small.t.byte_token[0xBD], "%d tokens", ka);
}

static void test_byte_fallback(void) {
    int ids[32], k;
    /* tok512 has "é" but no "ü": its two bytes */
    k = encode(&small.t, "\xc3\xbc", 1, 0, ids, 32);
    EXPECT(k == 4 && ids[2] == small.t.byte_token[0xC3] && ids[3] == small.t.byte_token[0xBC], "%d", k);
    k = encode(&small.t, "\xc3\xa9", 1, 0, ids, 32);
    EXPECT(k == 3 && ids[2] == find_piece(&small.t, "\xc3\xa9"), "%d", k);
    EXPECT(roundtrip(&small.t, "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80!", 1), "tok512");
    EXPECT(roundtrip(&big.t, "\xf0\x9f\x98\x80\xe2\x80\x8d\xf0\x9f\x91\xa9 \x01\x02\x1f\x7f", 1), "big");
    /* every byte value that can stand alone in UTF-8 */
    {
        char s[4];
        int c, bad = 0;
        for (c = 1; c < 128; c++) {
            s[0] = (char)c;
            s[1] = '\0';
            if (!roundtrip(&small.t, s, 0) || !roundtrip(&big.t, s, 0)) bad++;
        }
        EXPECT(bad == 0, "%d ASCII bytes", bad);
    }
}

static size_t put_utf8(char *out, unsigned long cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Code points from all of Unicode, 40 to a string: decode(encode(s)) == s. */
static void test_roundtrip_unicode(void) {
    char s[256];
    unsigned long cp = 1;
    int bad = 0, strings = 0;
    while (cp < 0x110000) {
        size_t len = 0;
        int k;
        for (k = 0; k < 40 && cp < 0x110000; k++, cp += 331) {
            if (cp >= 0xD800 && cp < 0xE000) continue;
            len += put_utf8(s + len, cp);
            if (k % 7 == 3) s[len++] = ' ';
        }
        s[len] = '\0';
        strings++;
        if (!roundtrip(&big.t, s, bad < 2)) bad++;
        if (!roundtrip(&small.t, s, bad < 2)) bad++;
    }
    EXPECT(bad == 0, "%d of %d strings", bad, strings);
}

static void test_roundtrip_corpus(void) {
    size_t n, i, start = 0;
    unsigned char *c = slurp(corpus_path, &n);
    int lines = 0, bad = 0;
    char *joined;
    EXPECT(c != NULL, "cannot read %s", corpus_path);
    if (!c) return;
    for (i = 0; i < n; i++) {
        if (c[i] != '\n') continue;
        c[i] = '\0';
        lines++;
        if (!roundtrip(&big.t, (char *)c + start, bad < 2)) bad++;
        if (!roundtrip(&small.t, (char *)c + start, bad < 2)) bad++;
        c[i] = '\n';
        start = i + 1;
    }
    EXPECT(lines >= 220, "only %d lines", lines);
    /* the whole corpus as one multi-line text */
    joined = (char *)malloc(n + 1);
    memcpy(joined, c, n);
    joined[n] = '\0';
    if (!roundtrip(&big.t, joined, 1)) bad++;
    if (!roundtrip(&small.t, joined, 1)) bad++;
    EXPECT(bad == 0, "%d failures over %d lines", bad, lines);
    free(joined);
    free(c);
}

static double encode_seconds(tok_tokenizer *t, const char *s, int *n_tokens) {
    size_t len = strlen(s), ss = tok_encode_scratch_size(len);
    void *scratch = malloc(ss);
    int cap = 3 * (int)len + 3;
    int *ids = (int *)malloc(sizeof(int) * (size_t)cap);
    clock_t t0 = clock();
    *n_tokens = tok_encode(t, s, 1, 0, ids, cap, scratch, ss);
    t0 = clock() - t0;
    free(ids);
    free(scratch);
    return (double)t0 / CLOCKS_PER_SEC;
}

/* O(n log n): a megabyte in well under the time a quadratic merge would need. */
static void test_speed(void) {
    static const char *words[] = {"Once ", "upon ", "a ", "time, ", "there ", "was ", "a ", "little ",
                                  "girl ", "named ", "Lily. ", "She ", "liked ", "the ", "park.\n",
                                  "Stra\303\237e ", "\xe4\xb8\xad\xe6\x96\x87 ", "  ", "12345 "};
    size_t sizes[2] = {100000, 1000000};
    int k;
    for (k = 0; k < 2; k++) {
        size_t len = 0, target = sizes[k];
        char *s = (char *)malloc(target + 16);
        unsigned long long rng = 7;
        int n_tokens;
        double sec;
        while (len < target) {
            const char *w;
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            w = words[(rng >> 33) % (sizeof words / sizeof words[0])];
            memcpy(s + len, w, strlen(w));
            len += strlen(w);
        }
        s[len] = '\0';
        sec = encode_seconds(&big.t, s, &n_tokens);
        printf("    info: %lu bytes -> %d tokens in %.3f s\n", (unsigned long)len, n_tokens, sec);
        EXPECT(n_tokens > 0 && sec < 10.0, "%.3f s", sec);
        memset(s, ' ', target);   /* one long run of spaces: no word boundaries */
        s[target] = '\0';
        sec = encode_seconds(&big.t, s, &n_tokens);
        printf("    info: %lu spaces -> %d tokens in %.3f s\n", (unsigned long)target, n_tokens, sec);
        EXPECT(n_tokens > 0 && sec < 10.0, "%.3f s", sec);
        free(s);
    }
}

/* The order tok_init's sorted index must follow, written out here: piece
 * bytes (a prefix first), then normal pieces before control and <0xNN> byte
 * tokens, then id. */
static int is_byte_token(const tok_tokenizer *t, int id) {
    int b;
    for (b = 0; b < 256; b++)
        if (t->byte_token[b] == id) return 1;
    return 0;
}

static int before(const tok_tokenizer *t, int a, int b) {
    const unsigned char *pa = t->bytes + t->piece_offset[a], *pb = t->bytes + t->piece_offset[b];
    int la = t->piece_len[a], lb = t->piece_len[b], m = la < lb ? la : lb;
    int c = m ? memcmp(pa, pb, (size_t)m) : 0, na, nb;
    if (c) return c < 0;
    if (la != lb) return la < lb;
    na = a > TOK_EOS && !is_byte_token(t, a);
    nb = b > TOK_EOS && !is_byte_token(t, b);
    if (na != nb) return na;
    return a < b;
}

/* sorted is a permutation of the ids, each entry before the next */
static void expect_sorted(const tok_tokenizer *t, const char *what) {
    int n = t->vocab_size, i, bad = 0;
    char *seen = (char *)calloc((size_t)n, 1);
    for (i = 0; i < n; i++) {
        int id = t->sorted[i];
        if (id < 0 || id >= n || seen[id]) { bad++; continue; }
        seen[id] = 1;
        if (i > 0 && !before(t, t->sorted[i - 1], id)) bad++;
    }
    EXPECT(bad == 0, "%s: %d entries out of order or repeated", what, bad);
    free(seen);
}

/* A tokenizer.bin of n pieces drawn from a small alphabet (so many share
 * prefixes, and some repeat), with byte tokens among them. */
static unsigned char *synthetic_vocab(int n, unsigned long long seed, size_t *size) {
    unsigned char *b = (unsigned char *)malloc(4 + (size_t)n * (8 + 8)), *p = b + 4;
    int i, max_len = 0;
    for (i = 0; i < n; i++) {
        int len, j;
        float score = (float)-i;
        char piece[9];
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        if (i >= 3 && (seed >> 60) == 0) {
            len = snprintf(piece, sizeof piece, "<0x%02X>", (unsigned)(seed >> 40) & 0xff);
        } else {
            len = (int)((seed >> 33) % 9);
            for (j = 0; j < len; j++) piece[j] = "ab\xe2z "[(seed >> (3 * j + 5)) % 5];
        }
        if (len > max_len) max_len = len;
        memcpy(p, &score, 4);
        memcpy(p + 4, &len, 4);
        memcpy(p + 8, piece, (size_t)len);
        p += 8 + len;
    }
    if (max_len == 0) max_len = 1;
    memcpy(b, &max_len, 4);
    *size = (size_t)(p - b);
    return b;
}

static void test_sorted_index(void) {
    static const int sizes[] = {3, 7, 8, 9, 63, 64, 65, 1000, 4097};
    size_t k;
    expect_sorted(&big.t, "tokenizer.bin");
    expect_sorted(&small.t, "tok512.bin");
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n;
        char what[32];
        unsigned char *b = synthetic_vocab(sizes[k], 1000 + k, &n);
        loaded L;
        load_mem(&L, b, n, 0);
        snprintf(what, sizeof what, "%d pieces", sizes[k]);
        EXPECT(L.rc == 0, "%s: %s", what, tok_error(&L.t));
        if (L.rc == 0) {
            EXPECT(L.t.vocab_size == sizes[k], "%s: vocab %d", what, L.t.vocab_size);
            expect_sorted(&L.t, what);
        }
        unload(&L);
        free(b);
    }
}

static void test_uninitialized(void) {
    loaded L;
    int ids[4];
    size_t len = 7;
    load_mem(&L, (const unsigned char *)"", 0, 0);
    EXPECT(L.rc < 0, "empty accepted");
    EXPECT(encode(&L.t, "abc", 1, 0, ids, 4) < 0 && contains(tok_error(&L.t), "not initialized"), "%s",
           tok_error(&L.t));
    EXPECT(tok_decode(&L.t, 1, 5, &len) != NULL && len == 0, "%lu", (unsigned long)len);
    unload(&L);
}

int main(int argc, char **argv) {
    if (argc > 1) models = argv[1];
    if (argc > 2) corpus_path = argv[2];
    load_model(&big, "tokenizer.bin", 0);
    load_model(&small, "tok512.bin", 0);

    run("load", test_load);
    run("vocab_size_given", test_vocab_size_given);
    run("wrong_vocab_size", test_wrong_vocab_size);
    run("arena_size_exact", test_arena_size_exact);
    run("malformed_files", test_malformed_files);
    run("mutations", test_mutations);
    run("encode_known", test_encode_known);
    run("no_special_tokens", test_no_special_tokens);
    run("merge_rules", test_merge_rules);
    run("max_tokens", test_max_tokens);
    run("scratch", test_scratch);
    run("decode", test_decode);
    run("invalid_utf8", test_invalid_utf8);
    run("byte_fallback", test_byte_fallback);
    run("roundtrip_unicode", test_roundtrip_unicode);
    run("roundtrip_corpus", test_roundtrip_corpus);
    run("speed", test_speed);
    run("sorted_index", test_sorted_index);
    run("uninitialized", test_uninitialized);

    unload(&big);
    unload(&small);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
