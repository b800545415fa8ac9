/* fuzz_tokenizer.c -- the tokenizer file (tok_arena_size, tok_init), the
 * encoder on arbitrary bytes (tok_encode) and tok_decode of every id.
 *
 * Input: a little-endian uint32 k, then min(k, rest) bytes of tokenizer.bin,
 * then the text (up to its first NUL). Every buffer the tokenizer gets is
 * malloc'd at exactly its size, at a misalignment of (input size % 4) bytes,
 * so AddressSanitizer sees any access outside it.
 *
 * Invariants: tok_arena_size is 0 exactly when tok_init refuses the file, and
 * a refusal says why; a loaded tokenizer decodes every id to at most
 * max_token_length bytes inside the file (or one byte); encoding with BOS and
 * EOS never needs more than 3 * strlen + 3 ids, gives ids in range, BOS first
 * and EOS last, and refuses a buffer one id short; word-by-word merging gives
 * the same ids as merging the whole text; the ids decode back to the text as
 * sentencepiece normalizes it (dummy-prefix space, each byte outside
 * well-formed UTF-8 as U+FFFD, U+2581 as a space) unless <unk> stood in for
 * a missing byte token. LTOK files: BOS/EOS only where the file has them,
 * and the ids decode to the text with each maximal invalid UTF-8 subpart as
 * U+FFFD (unless the file asks for NFC, which may change it), sentencepiece-
 * style ones (kind 2) with U+2581 as a space and no dummy prefix; a model of
 * one row fewer takes the file exactly when its last id is special and not BOS.
 */
#include "tokenizer.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

/* n bytes of fresh memory at the given misalignment (free with free_shifted). */
static void *malloc_shifted(size_t n, size_t shift) {
    unsigned char *p = (unsigned char *)malloc(n + shift ? n + shift : 1);
    if (!p) fuzz_fail("out of memory for %zu bytes", n);
    return p + shift;
}

static void free_shifted(void *p, size_t shift) {
    if (p) free((unsigned char *)p - shift);
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0: the
 * harness's own reading of RFC 3629, independent of tokenizer.c's. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    unsigned long cp;
    if (k == 0 || k > n) return 0;
    if (k == 1) return 1;
    cp = s[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000)) return 0;  /* overlong */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
    return k;
}

/* The text as sentencepiece sees it, with the dummy-prefix space; out has
 * room for 1 + 3 * n bytes. Returns its length. */
static size_t normalize(unsigned char *out, const unsigned char *s, size_t n) {
    size_t len = 0;
    if (n == 0) return 0;
    out[len++] = ' ';
    for (size_t i = 0; i < n;) {
        size_t k = utf8_sequence(s + i, n - i);
        if (k == 0) {
            memcpy(out + len, "\xEF\xBF\xBD", 3);
            len += 3;
            i += 1;
        } else if (k == 3 && !memcmp(s + i, "\xE2\x96\x81", 3)) {
            out[len++] = ' ';
            i += 3;
        } else {
            memcpy(out + len, s + i, k);
            len += k;
            i += k;
        }
    }
    return len;
}

/* Is p[0..m) (m >= 2) the start of some well-formed sequence? Completed
 * with continuation bytes, it must become one. */
static int utf8_prefix(const unsigned char *p, size_t m) {
    unsigned char buf[4];
    for (size_t k = m + 1; k <= 4; k++) {
        memcpy(buf, p, m);
        memset(buf + m, 0x80, k - m);
        if (utf8_sequence(buf, k) == k) return 1;
    }
    return 0;
}

/* The text as TextDecoder reads it: each maximal invalid subpart (the longest
 * start of a well-formed sequence, or one byte) as U+FFFD; out has 3n bytes. */
static size_t replace_invalid(unsigned char *out, const unsigned char *s, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_sequence(s + i, n - i), m = 1;
        if (k) {
            memcpy(out + len, s + i, k);
            len += k;
            i += k;
            continue;
        }
        while (m < 3 && i + m < n && utf8_prefix(s + i, m + 1)) m++;
        memcpy(out + len, "\xEF\xBF\xBD", 3);
        len += 3;
        i += m;
    }
    return len;
}

/* U+2581 as a space, in place (kind 2 reads the text so); returns the length. */
static size_t u2581_as_space(unsigned char *s, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
            s[len++] = ' ';
            i += 3;
        } else {
            s[len++] = s[i++];
        }
    }
    return len;
}

/* Decode every id (after BOS and after another id): each piece lies in the
 * file or is one byte, and is no longer than max_token_length. */
static void check_decode_all(const tok_tokenizer *t, const unsigned char *file, size_t file_size) {
    unsigned sum = 0;
    for (int id = -1; id <= t->vocab_size; id++) {
        for (int prev = 0; prev < 2; prev++) {
            size_t len = 99;
            const unsigned char *p = (const unsigned char *)tok_decode(t, prev ? TOK_BOS : -1, id, &len);
            int in_file = p >= file && p + len <= file + file_size;
            if (id < 0 || id == t->vocab_size) {
                if (len != 0) fuzz_fail("decode of out-of-range id %d gave %zu bytes", id, len);
                continue;
            }
            if (!(in_file || len == 1) || len > (size_t)t->max_token_length)
                fuzz_fail("decode of id %d gave %zu bytes outside the file", id, len);
            for (size_t i = 0; i < len; i++) sum += p[i];   /* read them: asan checks */
        }
    }
    (void)sum;
}

/* Encode text (strlen n) with BOS and EOS; returns the ids (count in *count). */
static int *encode(tok_tokenizer *t, const char *text, size_t n, size_t shift, int *count) {
    size_t scratch_size = tok_encode_scratch_size(n);
    int max = (int)(3 * n + 3);
    void *scratch = malloc_shifted(scratch_size, shift);
    int *ids = (int *)malloc_shifted((size_t)max * sizeof(int), 0);
    if (scratch_size == 0) fuzz_fail("no scratch size for a text of %zu bytes", n);
    *count = tok_encode(t, text, 1, 1, ids, max, scratch, scratch_size);
    if (*count < 0) fuzz_fail("encoding %zu bytes within the documented %d ids failed: %s", n, max, tok_error(t));
    if (*count > 0) {   /* one id short must be refused, writing nothing past the end */
        int *fewer = (int *)malloc_shifted((size_t)(*count - 1) * sizeof(int), 0);
        if (tok_encode(t, text, 1, 1, fewer, *count - 1, scratch, scratch_size) >= 0)
            fuzz_fail("a buffer of %d ids for %d was not refused", *count - 1, *count);
        free(fewer);
    }
    free_shifted(scratch, shift);
    return ids;
}

/* The ids decode back to the normalized text. Returns 0 (nothing checked)
 * when <unk> replaced a byte, else 1. */
static int check_round_trip(const tok_tokenizer *t, const int *ids, int count, const char *text, size_t n) {
    unsigned char *want, *got;
    size_t want_len, got_len = 0;
    int first = 1, last = count - 1;   /* the ids between BOS and EOS */
    if (t->kind != TOK_KIND_SENTENCEPIECE) {   /* LTOK */
        if (t->normalizer != TOK_NORM_NONE) return 0;
        first = t->bos_id >= 0;
        last = t->eos_id >= 0 ? count - 1 : count;
    } else {
        for (int i = 1; i + 1 < count; i++)
            if (ids[i] == 0) return 0;
    }
    want = (unsigned char *)malloc_shifted(3 * n + 1, 0);
    got = (unsigned char *)malloc_shifted(3 * n + 1, 0);
    want_len = t->kind != TOK_KIND_SENTENCEPIECE ? replace_invalid(want, (const unsigned char *)text, n)
                                                 : normalize(want, (const unsigned char *)text, n);
    if (t->kind == TOK_KIND_SPM_BPE) want_len = u2581_as_space(want, want_len);
    for (int i = first; i < last; i++) {
        size_t len;
        const char *piece = tok_decode(t, -1, ids[i], &len);
        if (got_len + len > want_len) fuzz_fail("the ids decode to more than the %zu bytes of the normalized text", want_len);
        memcpy(got + got_len, piece, len);
        got_len += len;
    }
    if (got_len != want_len || memcmp(got, want, want_len))
        fuzz_fail("the ids decode to %zu bytes, not the %zu bytes of the normalized text", got_len, want_len);
    free(got);
    free(want);
    return 1;
}

/* Encode the text and check the result; returns check_round_trip's answer. */
static int check_encode(tok_tokenizer *t, const char *text, size_t shift) {
    size_t n = strlen(text);
    int count, count_whole, round_trip;
    int *ids = encode(t, text, n, shift, &count);
    if (t->kind != TOK_KIND_SENTENCEPIECE) {
        int want = (t->bos_id >= 0) + (t->eos_id >= 0);
        if (count < want || (t->bos_id >= 0 && ids[0] != t->bos_id) ||
            (t->eos_id >= 0 && ids[count - 1] != t->eos_id))
            fuzz_fail("encoded text does not start with the file's BOS and end with its EOS");
    } else if (count < 2 || ids[0] != TOK_BOS || ids[count - 1] != TOK_EOS)
        fuzz_fail("encoded text does not start with BOS and end with EOS");
    for (int i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size) fuzz_fail("id %d out of range", ids[i]);
    if (t->word_split) {   /* the shortcut must not change the result */
        tok_tokenizer whole = *t;
        whole.word_split = 0;
        int *ids_whole = encode(&whole, text, n, shift, &count_whole);
        if (count_whole != count || memcmp(ids, ids_whole, (size_t)count * sizeof(int)))
            fuzz_fail("word-by-word merging gives other ids than merging the whole text");
        free(ids_whole);
    }
    round_trip = check_round_trip(t, ids, count, text, n);
    free(ids);
    return round_trip;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t k = size >= 4 ? (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24 : 0;
    size_t file_size = size >= 4 ? (k < size - 4 ? k : size - 4) : size;
    const uint8_t *file_start = size >= 4 ? data + 4 : data;
    size_t text_len = size - (size_t)(file_start - data) - file_size, shift = size % 4;
    unsigned char *file = (unsigned char *)malloc_shifted(file_size, 0);
    char *text = (char *)malloc_shifted(text_len + 1, 0);
    tok_tokenizer t;
    memcpy(file, file_start, file_size);
    memcpy(text, file_start + file_size, text_len);
    text[text_len] = '\0';

    size_t need = tok_arena_size(file, file_size, 0);
    if (need == 0) {
        if (tok_init(&t, file, file_size, 0, NULL, 0) == 0) fuzz_fail("tok_init took a file tok_arena_size refused");
        if (!tok_error(&t)[0]) fuzz_fail("tok_init refused the file without a message");
        fuzz_note("refused: %s", tok_error(&t));
    } else {
        void *arena = malloc_shifted(need, shift);
        if (tok_init(&t, file, file_size, 0, arena, need) != 0)
            fuzz_fail("tok_init refused the arena tok_arena_size asked for: %s", tok_error(&t));
        if (tok_arena_size(file, file_size, t.vocab_size) != need)
            fuzz_fail("the arena size differs when the vocabulary size %d is given", t.vocab_size);
        if (t.kind != TOK_KIND_SENTENCEPIECE) {   /* LTOK: the model may have more ids, fewer only past special ones */
            int last = t.vocab_size - 1;
            int fits = (t.token_flags[last] & TOK_FLAG_SPECIAL) && t.bos_id != last;
            if ((tok_arena_size(file, file_size, last) != 0) != fits)
                fuzz_fail("a vocabulary of %d entries %s for %d", t.vocab_size, fits ? "refused" : "passed", last);
        } else if (t.vocab_size < 0x7fffffff && tok_arena_size(file, file_size, t.vocab_size + 1) != 0)
            fuzz_fail("a vocabulary of %d entries passed for %d", t.vocab_size, t.vocab_size + 1);
        check_decode_all(&t, file, file_size);
        int round_trip = check_encode(&t, text, shift);
        fuzz_note("loaded %d entries, encoded %zu bytes%s, %s", t.vocab_size, strlen(text),
                  t.word_split ? " (word by word == whole text)" : "",
                  round_trip ? "decoded back to the text" :
                  t.kind != TOK_KIND_SENTENCEPIECE ? "NFC: the decoded text not compared" : "<unk> stood in for a byte");
        free_shifted(arena, shift);
    }
    free(text);
    free(file);
    return 0;
}
