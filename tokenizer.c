/* tokenizer.c -- sentencepiece-BPE encoder/decoder over llama2.c's tokenizer.bin.
 *
 * File format (little-endian): int32 max_token_length, then per entry a float32
 * score, an int32 byte length and that many bytes (sentencepiece's U+2581 '▁'
 * already replaced by a space). The entry count is not stored.
 *
 * Encoding reproduces sentencepiece's BPE model with an identity normalizer
 * (what the Llama 2 tokenizer.model uses), checked against python3-sentencepiece:
 *   - empty text gives no pieces; otherwise a dummy-prefix space is prepended;
 *     spaces are kept as they are (no collapsing, no stripping);
 *   - U+2581 '▁' in the text is taken for a space (sentencepiece writes spaces
 *     as '▁' and cannot tell them apart);
 *   - the text is split into UTF-8 code points; a byte that does not start a
 *     well-formed UTF-8 sequence (stray continuation byte, overlong form,
 *     surrogate, > U+10FFFF, truncated sequence) becomes U+FFFD on its own,
 *     one per byte, exactly like sentencepiece's normalizer;
 *   - a code point is its piece if it is a normal piece, else its UTF-8 bytes
 *     as <0xNN> byte-fallback tokens (<unk> if the vocabulary has no such token);
 *   - merges: repeatedly the adjacent pair whose concatenation is a normal piece
 *     with the highest score, ties to the leftmost pair. Ids 0,1,2 (<unk>, <s>,
 *     </s>) and the <0xNN> byte tokens are never produced by lookup or merge.
 * The merge loop keeps the symbols in a doubly-linked list and candidate pairs
 * in a binary max-heap with lazy invalidation: O(n log n).
 */
#include "tokenizer.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "engine/fmt.h"   /* llm__fmt: model.h's message formatter */

/* Alignment of the 4-byte types carved out of the arena and the scratch. */
struct tok_align_probe { char c; union { int i; unsigned u; float f; } x; };
#define TOK_ALIGN (offsetof(struct tok_align_probe, x))

/* arena: per vocabulary entry an offset, a length, a score and a sorted index;
 * then 257 ints of first-byte ranges into the sorted index */
#define TOK_PER_ENTRY (sizeof(unsigned int) + sizeof(int) + sizeof(float) + sizeof(int))
#define TOK_ARENA_FIXED (257 * sizeof(int))

typedef struct {      /* one symbol of the text being encoded */
    int start;        /* offset in the normalized text */
    int len;          /* bytes; 0 = merged into its left neighbour */
    int prev, next;   /* neighbours, -1 at the ends */
    int id;           /* normal piece id, or -1 (byte fallback) */
} tok_symbol;

typedef struct {      /* candidate merge of symbol `left` with its right neighbour */
    float score;
    int left;
    int id;           /* the merged piece */
} tok_pair;

static uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static long rd_i32(const unsigned char *p)
{
    uint32_t v = rd_u32(p);
    return (v & 0x80000000u) ? -(long)(~v) - 1 : (long)v;
}

static float rd_f32(const unsigned char *p)
{
    uint32_t v = rd_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

/* Walk and validate the whole file. Returns the number of entries, or -1 with
 * a message in err. vocab_size > 0: the count the model expects. */
static long parse_file(const unsigned char *b, size_t n, int vocab_size, char *err, size_t cap)
{
    long max_len, count = 0;
    size_t off = 4;

    if (!b && n > 0) {
        llm__fmt(err, cap, "no tokenizer data (null pointer)");
        return -1;
    }
    if (n == 0) {
        llm__fmt(err, cap, "tokenizer file is empty");
        return -1;
    }
    if (n < 4) {
        llm__fmt(err, cap, "tokenizer file too short: %lu bytes, the header alone is 4",
                 (unsigned long)n);
        return -1;
    }
    if (n > (size_t)UINT_MAX || n / 8 > (size_t)INT_MAX) {
        llm__fmt(err, cap, "tokenizer file too large");
        return -1;
    }
    max_len = rd_i32(b);
    if (max_len <= 0) {
        llm__fmt(err, cap, "bad tokenizer header: max_token_length %ld (must be positive)", max_len);
        return -1;
    }
    while (off < n) {
        size_t left = n - off;
        long len;
        float score;
        if (vocab_size > 0 && count == vocab_size) {
            /* The model's entries are all read but bytes remain: either a
             * bigger vocabulary (say so) or trailing garbage. */
            {
                size_t o = off;
                long extra = 0;
                int ok = 1;
                while (o < n) {
                    long l;
                    if (n - o < 8) { ok = 0; break; }
                    l = rd_i32(b + o + 4);
                    if (l < 0 || l > max_len || (size_t)l > n - o - 8) { ok = 0; break; }
                    o += 8 + (size_t)l;
                    extra++;
                }
                if (ok)
                    llm__fmt(err, cap, "tokenizer has %ld entries, the model expects %d: "
                         "wrong tokenizer file?", count + extra, vocab_size);
                else
                    llm__fmt(err, cap, "%lu bytes of trailing garbage after the %d entries "
                         "the model expects (byte offset %lu)", (unsigned long)left, vocab_size,
                         (unsigned long)off);
            }
            return -1;
        }
        if (left < 8) {
            llm__fmt(err, cap, "tokenizer truncated: entry %ld at byte offset %lu needs 8 "
                     "header bytes, %lu left", count, (unsigned long)off, (unsigned long)left);
            return -1;
        }
        score = rd_f32(b + off);
        len = rd_i32(b + off + 4);
        if (score != score) {
            llm__fmt(err, cap, "bad tokenizer entry %ld at byte offset %lu: score is NaN",
                     count, (unsigned long)off);
            return -1;
        }
        if (len < 0 || len > max_len) {
            llm__fmt(err, cap, "bad tokenizer entry %ld at byte offset %lu: length %ld "
                     "outside 0..%ld (max_token_length)", count, (unsigned long)off, len, max_len);
            return -1;
        }
        if ((size_t)len > left - 8) {
            llm__fmt(err, cap, "tokenizer truncated: entry %ld at byte offset %lu has length "
                     "%ld, only %lu bytes left", count, (unsigned long)off, len,
                     (unsigned long)(left - 8));
            return -1;
        }
        off += 8 + (size_t)len;
        count++;
    }
    if (vocab_size > 0 && count != vocab_size) {
        llm__fmt(err, cap, "tokenizer has %ld entries, the model expects %d: wrong tokenizer file?",
                 count, vocab_size);
        return -1;
    }
    if (count < 3) {
        llm__fmt(err, cap, "tokenizer has %ld entries, needs at least 3 (<unk>, <s>, </s>)", count);
        return -1;
    }
    return count;
}

size_t tok_arena_size(const void *bytes, size_t n_bytes, int vocab_size)
{
    long count = parse_file((const unsigned char *)bytes, n_bytes, vocab_size, NULL, 0);
    if (count < 0) return 0;
    return (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED + (TOK_ALIGN - 1);
}

static size_t align_pad(const void *p)
{
    size_t mis = (size_t)((uintptr_t)p % TOK_ALIGN);
    return mis ? TOK_ALIGN - mis : 0;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte value if `id` is the vocabulary's byte-fallback token <0xNN>, else -1. */
static int byte_of(const tok_tokenizer *t, int id)
{
    const unsigned char *p;
    int hi, lo;
    if (t->piece_len[id] != 6) return -1;
    p = t->bytes + t->piece_offset[id];
    if (p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    hi = hexval(p[3]);
    lo = hexval(p[4]);
    if (hi < 0 || lo < 0) return -1;
    return t->byte_token[hi * 16 + lo] == id ? hi * 16 + lo : -1;
}

/* Pieces that lookup and merges may produce: not <unk>/<s>/</s>, not <0xNN>. */
static int is_normal(const tok_tokenizer *t, int id)
{
    return id > TOK_EOS && byte_of(t, id) < 0;   /* the file's control ids are 0..2 */
}

static int cmp_piece(const tok_tokenizer *t, int id, const unsigned char *s, int len)
{
    const unsigned char *p = t->bytes + t->piece_offset[id];
    int plen = t->piece_len[id];
    int m = plen < len ? plen : len, i;
    for (i = 0; i < m; i++)   /* pieces are short: a loop beats a memcmp call */
        if (p[i] != s[i]) return p[i] < s[i] ? -1 : 1;
    return plen < len ? -1 : plen > len;
}

/* Sort order: piece bytes, then normal pieces first, then id. */
static int cmp_ids(const tok_tokenizer *t, int a, int b)
{
    int c = cmp_piece(t, a, t->bytes + t->piece_offset[b], t->piece_len[b]);
    int na, nb;
    if (c) return c;
    na = is_normal(t, a);
    nb = is_normal(t, b);
    if (na != nb) return na ? -1 : 1;
    return a < b ? -1 : a > b;
}

static void sift_down_ids(const tok_tokenizer *t, int *a, int root, int n)
{
    for (;;) {
        int child = 2 * root + 1, tmp;
        if (child >= n) return;
        if (child + 1 < n && cmp_ids(t, a[child], a[child + 1]) < 0) child++;
        if (cmp_ids(t, a[root], a[child]) >= 0) return;
        tmp = a[root]; a[root] = a[child]; a[child] = tmp;
        root = child;
    }
}

/* Heapsort (qsort has no context argument, and there are no globals). */
static void sort_ids(const tok_tokenizer *t, int *a, int n)
{
    int i;
    for (i = n / 2 - 1; i >= 0; i--) sift_down_ids(t, a, i, n);
    for (i = n - 1; i > 0; i--) {
        int tmp = a[0]; a[0] = a[i]; a[i] = tmp;
        sift_down_ids(t, a, 0, i);
    }
}

int tok_init(tok_tokenizer *t, const void *bytes, size_t n_bytes, int vocab_size,
             void *arena, size_t arena_size)
{
    const unsigned char *b = (const unsigned char *)bytes;
    unsigned char *a;
    size_t pad, need, off;
    long count;
    int i;

    if (!t) return TOK_ERR_ARG;
    t->vocab_size = 0;
    t->max_token_length = 0;
    t->bos_id = TOK_BOS;
    t->eos_id = TOK_EOS;
    t->eot_id = -1;
    t->chat_template = TOK_CHAT_LLAMA2;
    t->add_bos = 1;
    t->default_system = NULL;
    t->default_system_len = 0;
    t->bytes = b;
    t->n_bytes = n_bytes;
    t->piece_offset = NULL;
    t->piece_len = NULL;
    t->score = NULL;
    t->sorted = NULL;
    t->first_byte = NULL;
    t->word_split = 0;
    for (i = 0; i < 256; i++) {
        t->byte_token[i] = -1;
        t->byte_value[i] = (unsigned char)i;
    }
    t->error[0] = '\0';

    count = parse_file(b, n_bytes, vocab_size, t->error, sizeof t->error);
    if (count < 0) return TOK_ERR_FORMAT;

    pad = arena ? align_pad(arena) : 0;
    need = pad + (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED;
    if (!arena || arena_size < need) {
        llm__fmt(t->error, sizeof t->error, "tokenizer arena too small: %lu bytes given, %lu needed",
                 (unsigned long)(arena ? arena_size : 0), (unsigned long)need);
        return TOK_ERR_ARENA;
    }
    a = (unsigned char *)arena + pad;
    t->piece_offset = (unsigned int *)(void *)a;
    a += (size_t)count * sizeof(unsigned int);
    t->piece_len = (int *)(void *)a;
    a += (size_t)count * sizeof(int);
    t->score = (float *)(void *)a;
    a += (size_t)count * sizeof(float);
    t->sorted = (int *)(void *)a;
    a += (size_t)count * sizeof(int);
    t->first_byte = (int *)(void *)a;

    t->max_token_length = (int)rd_i32(b);
    off = 4;
    for (i = 0; i < count; i++) {
        int len = (int)rd_i32(b + off + 4);
        t->score[i] = rd_f32(b + off);
        t->piece_len[i] = len;
        t->piece_offset[i] = (unsigned int)(off + 8);
        off += 8 + (size_t)len;
    }
    t->vocab_size = (int)count;

    /* byte-fallback tokens, found by their text; the first <0xNN> wins */
    for (i = 0; i < count; i++) {
        const unsigned char *p = b + t->piece_offset[i];
        int hi, lo;
        if (t->piece_len[i] != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>')
            continue;
        hi = hexval(p[3]);
        lo = hexval(p[4]);
        if (hi >= 0 && lo >= 0 && t->byte_token[hi * 16 + lo] < 0) t->byte_token[hi * 16 + lo] = i;
    }

    /* Can encoding go word by word? Only if no normal piece has a space
     * after a non-space byte (true of sentencepiece vocabularies trained with
     * split_by_whitespace, the default: Llama 2's and tok512). */
    t->word_split = 1;
    for (i = 0; i < count && t->word_split; i++) {
        const unsigned char *p = b + t->piece_offset[i];
        int j;
        if (!is_normal(t, i)) continue;
        for (j = 1; j < t->piece_len[i]; j++)
            if (p[j] == ' ' && p[j - 1] != ' ') {
                t->word_split = 0;
                break;
            }
    }

    for (i = 0; i < count; i++) t->sorted[i] = i;
    sort_ids(t, t->sorted, (int)count);
    /* first_byte[c]: first sorted position of a piece starting with a byte >= c
     * (empty pieces sort before all others) */
    {
        int c = 0, k;
        for (k = 0; k < count; k++) {
            int id = t->sorted[k];
            if (t->piece_len[id] == 0) continue;
            while (c <= b[t->piece_offset[id]]) t->first_byte[c++] = k;
        }
        while (c <= 256) t->first_byte[c++] = (int)count;
    }
    return 0;
}

/* Id of the normal piece with exactly these bytes (len >= 1), or -1. */
static int lookup(const tok_tokenizer *t, const unsigned char *s, int len)
{
    int lo = t->first_byte[s[0]], hi = t->first_byte[s[0] + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_piece(t, t->sorted[mid], s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    /* normal pieces sort before special ones with the same bytes */
    if (lo < t->first_byte[s[0] + 1] && cmp_piece(t, t->sorted[lo], s, len) == 0 &&
        is_normal(t, t->sorted[lo]))
        return t->sorted[lo];
    return -1;
}

int tok_piece_id(const tok_tokenizer *t, const char *piece, size_t len)
{
    const unsigned char *s = (const unsigned char *)piece;
    if (!t || !t->sorted || !piece || len == 0 || len > (size_t)t->max_token_length) return -1;
    int lo = t->first_byte[s[0]], hi = t->first_byte[s[0] + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_piece(t, t->sorted[mid], s, (int)len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->first_byte[s[0] + 1] && cmp_piece(t, t->sorted[lo], s, (int)len) == 0) return t->sorted[lo];
    return -1;
}

/* Length of the well-formed UTF-8 sequence at s (n bytes available), or 0. */
static int utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    int k, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;          /* overlong */
        if (c == 0xED) hi = 0x9F;          /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;          /* overlong */
        if (c == 0xF4) hi = 0x8F;          /* > U+10FFFF */
    } else return 0;
    if (n < (size_t)k) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return k;
}

/* Largest text length tok_encode accepts (int offsets, 3 bytes per bad byte). */
#define TOK_MAX_TEXT ((size_t)(INT_MAX / 4))

static size_t scratch_need(size_t n, size_t pad)
{
    /* n + 1 symbols (dummy prefix + at most one per byte); at most 2n pairs in
     * the heap at once (n - 1 initial, each merge pops one and pushes at most
     * two, at most n merges); the normalized text: 1 + 3n bytes. */
    return pad + (n + 1) * sizeof(tok_symbol) + 2 * n * sizeof(tok_pair) + 3 * n + 1;
}

/* Short enough for int offsets and for scratch_need not to overflow size_t? */
static int text_len_ok(size_t n)
{
    size_t per = sizeof(tok_symbol) + 2 * sizeof(tok_pair) + 3;
    return n <= TOK_MAX_TEXT && n <= (SIZE_MAX - 64 - sizeof(tok_symbol)) / per;
}

size_t tok_encode_scratch_size(size_t text_len)
{
    return text_len_ok(text_len) ? scratch_need(text_len, TOK_ALIGN - 1) : 0;
}

size_t tok_max_tokens(size_t text_len)
{
    /* a dummy-prefix space, 3 byte-fallback ids per byte (a bad byte is
     * U+FFFD, three bytes), BOS and EOS */
    return text_len_ok(text_len) ? 3 * text_len + 3 : 0;
}

static int pair_better(const tok_pair *a, const tok_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(tok_pair *h, int *hn, tok_pair p)
{
    int i = (*hn)++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!pair_better(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static tok_pair heap_pop(tok_pair *h, int *hn)
{
    tok_pair top = h[0], last = h[--(*hn)];
    int i = 0, n = *hn;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_better(&h[c + 1], &h[c])) c++;
        if (!pair_better(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0) h[i] = last;
    return top;
}

static void try_pair(const tok_tokenizer *t, const unsigned char *norm, const tok_symbol *sym,
                     int left, tok_pair *h, int *hn)
{
    int right, len, id;
    tok_pair p;
    if (left < 0) return;
    right = sym[left].next;
    if (right < 0) return;
    len = sym[left].len + sym[right].len;
    if (len > t->max_token_length) return;
    id = lookup(t, norm + sym[left].start, len);
    if (id < 0) return;
    p.score = t->score[id];
    p.left = left;
    p.id = id;
    heap_push(h, hn, p);
}

static void emit(int *tokens, int max_tokens, int *count, int id)
{
    if (*count < max_tokens) tokens[*count] = id;
    if (*count < INT_MAX) (*count)++;
}

int tok_encode(tok_tokenizer *t, const char *text, int bos, int eos,
               int *tokens, int max_tokens, void *scratch, size_t scratch_size)
{
    size_t n;
    int count = 0;

    if (!t) return TOK_ERR_ARG;
    if (t->vocab_size <= 0) {
        llm__fmt(t->error, sizeof t->error, "tokenizer not initialized");
        return TOK_ERR_ARG;
    }
    t->error[0] = '\0';
    if (!text) text = "";
    if (!tokens || max_tokens < 0) max_tokens = 0;
    n = strlen(text);

    if (bos) emit(tokens, max_tokens, &count, t->bos_id);
    if (n > 0) {
        const unsigned char *s = (const unsigned char *)text;
        size_t pad, need, i, p;
        tok_symbol *sym;
        tok_pair *heap;
        unsigned char *norm;
        int m, hn = 0, k, a, e;

        if (!text_len_ok(n)) {
            llm__fmt(t->error, sizeof t->error, "text too long to encode: %lu bytes", (unsigned long)n);
            return TOK_ERR_SPACE;
        }
        pad = scratch ? align_pad(scratch) : 0;
        need = scratch_need(n, pad);
        if (!scratch || scratch_size < need) {
            llm__fmt(t->error, sizeof t->error, "encode scratch too small: %lu bytes given, %lu needed",
                     (unsigned long)(scratch ? scratch_size : 0), (unsigned long)need);
            return TOK_ERR_SPACE;
        }
        sym = (tok_symbol *)(void *)((unsigned char *)scratch + pad);
        heap = (tok_pair *)(void *)(sym + (n + 1));
        norm = (unsigned char *)(heap + 2 * n);

        /* normalize (dummy prefix, bad bytes -> U+FFFD) and split into code points */
        norm[0] = ' ';
        sym[0].start = 0;
        sym[0].len = 1;
        sym[0].prev = -1;
        sym[0].next = -1;
        m = 1;
        p = 1;
        for (i = 0; i < n;) {
            int len = utf8_len(s + i, n - i);
            if (len == 0) {
                norm[p] = 0xEF; norm[p + 1] = 0xBF; norm[p + 2] = 0xBD;
                len = 3;
                i += 1;
            } else if (len == 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
                norm[p] = ' ';   /* U+2581 '▁' in the text is a space to sentencepiece */
                len = 1;
                i += 3;
            } else {
                memcpy(norm + p, s + i, (size_t)len);
                i += (size_t)len;
            }
            sym[m].start = (int)p;
            sym[m].len = len;
            sym[m].prev = m - 1;
            sym[m].next = -1;
            sym[m - 1].next = m;
            p += (size_t)len;
            m++;
        }
        for (k = 0; k < m; k++) sym[k].id = lookup(t, norm + sym[k].start, sym[k].len);
        /* With word_split, no merge can join a non-space byte to a following
         * space, so each "word" (a run of spaces and what follows up to the
         * next space after a non-space) is merged on its own: the same result,
         * and a small heap that stays in cache. */
        for (a = 0; a < m; a = e) {
            e = a + 1;
            if (t->word_split) {
                while (e < m && !(norm[sym[e].start] == ' ' && norm[sym[e].start - 1] != ' ')) e++;
            } else {
                e = m;
            }
            for (k = a; k + 1 < e; k++) try_pair(t, norm, sym, k, heap, &hn);
            while (hn > 0) {
                tok_pair top = heap_pop(heap, &hn);
                int left = top.left, right = sym[left].next, next;
                /* Lazy invalidation: symbols only grow, so a pair is stale iff
                 * its left symbol died, or the two lengths no longer add up to
                 * the merged piece's length. */
                if (sym[left].len == 0 || right < 0 ||
                    sym[left].len + sym[right].len != t->piece_len[top.id])
                    continue;
                sym[left].len += sym[right].len;
                sym[left].id = top.id;
                next = sym[right].next;
                sym[left].next = next;
                if (next >= 0) sym[next].prev = left;
                sym[right].len = 0;
                if (left > a) try_pair(t, norm, sym, sym[left].prev, heap, &hn);
                if (next >= 0 && next < e) try_pair(t, norm, sym, left, heap, &hn);
            }
        }

        for (k = 0; k >= 0; k = sym[k].next) {
            if (sym[k].id >= 0) {
                emit(tokens, max_tokens, &count, sym[k].id);
            } else {
                int j;
                for (j = 0; j < sym[k].len; j++) {
                    int bt = t->byte_token[norm[sym[k].start + j]];
                    emit(tokens, max_tokens, &count, bt >= 0 ? bt : 0);
                }
            }
        }
    }
    if (eos) emit(tokens, max_tokens, &count, t->eos_id);

    if (count > max_tokens) {
        llm__fmt(t->error, sizeof t->error, "too many tokens: the text needs %d, room for %d", count, max_tokens);
        return TOK_ERR_SPACE;
    }
    return count;
}

const char *tok_decode(const tok_tokenizer *t, int prev, int token, size_t *len)
{
    size_t dummy;
    const unsigned char *p;
    size_t l;
    int b;
    if (!len) len = &dummy;
    *len = 0;
    if (!t || token < 0 || token >= t->vocab_size) return "";
    b = byte_of(t, token);
    if (b >= 0) {
        *len = 1;
        return (const char *)&t->byte_value[b];
    }
    p = t->bytes + t->piece_offset[token];
    l = (size_t)t->piece_len[token];
    if (prev == t->bos_id && l > 0 && p[0] == ' ') {
        p++;
        l--;
    }
    *len = l;
    return (const char *)p;
}

const char *tok_error(const tok_tokenizer *t)
{
    return t ? t->error : "no tokenizer";
}

const char *tok_status_text(int status)
{
    switch (status) {
    case TOK_OK: return "ok";
    case TOK_ERR_FORMAT: return "bad tokenizer file";
    case TOK_ERR_ARENA: return "tokenizer arena too small";
    case TOK_ERR_ARG: return "bad argument";
    case TOK_ERR_SPACE: return "text, scratch or output too large for its buffer";
    }
    return "unknown status";
}

/* ---- chat templates ---- */

/* A template is three format strings that read like the published Jinja
 * templates: "{system}", "{user}" and "{date}" stand for those texts, "{bos}"
 * for the tokenizer's bos_id, and "<|...|>" is a special token, emitted by
 * id. Only the format is scanned for these: the texts go in verbatim. */
typedef struct {
    const char *name;
    const char *first_system;   /* the first turn, with a system prompt */
    const char *first;          /* the first turn without one (NULL: first_system, system "") */
    const char *later;          /* a later turn, after the model's end-of-turn token */
    const char *end;            /* the token that ends a reply (NULL: the tokenizer's eos_id) */
    int trim;                   /* system and user texts stripped of whitespace (Jinja's |trim) */
    int empty_system_is_none;   /* a system prompt "" renders `first` (llama2.c) */
} tok_chat_format;

#define TOK_LLAMA3_USER "<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>" \
                        "<|start_header_id|>assistant<|end_header_id|>\n\n"
#define TOK_CHATML_USER "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"

static const tok_chat_format chat_formats[TOK_CHAT_COUNT] = {
    /* llama2.c: every turn is encoded with a BOS (HF's Llama 2 template: bos_token + '[INST] ') */
    [TOK_CHAT_LLAMA2] = { "llama2", "{bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]",
                          "{bos}[INST] {user} [/INST]", "{bos}[INST] {user} [/INST]", NULL, 0, 1 },
    /* Meta-Llama-3-8B-Instruct: bos_token before the first message, contents |trim */
    [TOK_CHAT_LLAMA3] = { "llama3",
                          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
                          TOK_LLAMA3_USER,
                          "<|begin_of_text|>" TOK_LLAMA3_USER, TOK_LLAMA3_USER, "<|eot_id|>", 1, 0 },
    /* SmolLM2, Qwen2.5, Qwen3: no BOS; each message ends "<|im_end|>\n" */
    [TOK_CHAT_CHATML] = { "chatml", "<|im_start|>system\n{system}<|im_end|>\n" TOK_CHATML_USER, TOK_CHATML_USER,
                          "\n" TOK_CHATML_USER, "<|im_end|>", 0, 0 },
    /* Llama-3.1-8B-Instruct, Llama-3.2-1B/3B-Instruct: the system block is always there */
    [TOK_CHAT_LLAMA31] = { "llama3.1",
                           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                           "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n{system}<|eot_id|>"
                           TOK_LLAMA3_USER,
                           NULL, TOK_LLAMA3_USER, "<|eot_id|>", 1, 0 },
};

const char *tok_chat_template_name(int chat_template)
{
    return chat_template >= 0 && chat_template < TOK_CHAT_COUNT ? chat_formats[chat_template].name : NULL;
}

int tok_chat_template_id(const char *name)
{
    int i;
    for (i = 0; name && i < TOK_CHAT_COUNT; i++)
        if (!strcmp(name, chat_formats[i].name)) return i;
    return -1;
}

const char *tok_chat_template_names(void)
{
    return "llama2, llama3, llama3.1, chatml";
}

/* Output of the renderers: the bytes that fit (cap counts the NUL) and the full length. */
typedef struct {
    char *out;
    size_t cap, len;
} tok_sink;

static void sink_put(tok_sink *s, const char *str, size_t n)
{
    size_t room = s->len + 1 < s->cap ? s->cap - 1 - s->len : 0;
    if (room) memcpy(s->out + s->len, str, n < room ? n : room);
    s->len = n > SIZE_MAX - s->len ? SIZE_MAX : s->len + n;
}

/* Length of the whitespace character (Python's str.isspace, which Jinja's
 * trim strips) that starts (at_end 0) or ends (at_end 1) s[0..n), or 0. */
static size_t space_len(const unsigned char *s, size_t n, int at_end)
{
    static const char *const wide[] = { "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
        "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86", "\xe2\x80\x87",
        "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
        "\xe2\x81\x9f", "\xe3\x80\x80" };
    size_t i, k;
    unsigned char c;
    if (n == 0) return 0;
    c = at_end ? s[n - 1] : s[0];
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)) return 1;
    for (i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        k = strlen(wide[i]);
        if (k <= n && !memcmp(at_end ? s + n - k : s, wide[i], k)) return k;
    }
    return 0;
}

static void trim(const char **s, size_t *n)
{
    size_t k;
    while ((k = space_len((const unsigned char *)*s, *n, 0)) > 0) { *s += k; *n -= k; }
    while ((k = space_len((const unsigned char *)*s, *n, 1)) > 0) *n -= k;
}

/* One turn being walked part by part. */
typedef struct {
    const tok_chat_format *f;
    int close;                  /* the turn starts with the end-of-turn token */
    const char *fmt;            /* the rest of the format */
    const char *system, *user, *date;
    size_t system_len, user_len, date_len;
} tok_chat_walk;

enum { PART_END, PART_TEXT, PART_SPECIAL, PART_BOS, PART_CLOSE };

typedef struct {
    int kind;
    const char *s;              /* text, or the special token's bytes */
    size_t len;
} tok_chat_part;

/* Resolve the turn's format and texts; 0 for an unknown template. */
static int chat_setup(tok_chat_walk *w, const tok_tokenizer *t, const tok_chat_turn *turn)
{
    const tok_chat_format *f;
    if (!turn || turn->chat_template < 0 || turn->chat_template >= TOK_CHAT_COUNT) return 0;
    f = &chat_formats[turn->chat_template];
    w->f = f;
    w->close = !turn->first && turn->close_reply;
    w->system = turn->system;
    w->system_len = w->system ? strlen(w->system) : 0;
    if (!w->system && t && t->default_system) {
        w->system = t->default_system;
        w->system_len = t->default_system_len;
    }
    if (w->system && f->trim) trim(&w->system, &w->system_len);
    if (w->system && w->system_len == 0 && f->empty_system_is_none) w->system = NULL;
    w->user = turn->user ? turn->user : "";
    w->user_len = strlen(w->user);
    if (f->trim) trim(&w->user, &w->user_len);
    w->date = turn->date ? turn->date : TOK_CHAT_DEFAULT_DATE;
    w->date_len = strlen(w->date);
    w->fmt = !turn->first ? f->later : (w->system || !f->first) ? f->first_system : f->first;
    if (!w->system) w->system = "";
    return 1;
}

static tok_chat_part chat_next(tok_chat_walk *w)
{
    tok_chat_part p = { PART_END, NULL, 0 };
    const char *f = w->fmt, *close;
    if (w->close) {   /* the end-of-turn token: its text, or (llama2) eos_id */
        w->close = 0;
        p.kind = PART_CLOSE;
        p.s = w->f->end ? w->f->end : "";
        p.len = strlen(p.s);
        return p;
    }
    if (!*f) return p;
    if (f[0] == '{' && (close = strchr(f, '}')) != NULL) {
        size_t n = (size_t)(close - f) + 1;
        w->fmt = close + 1;
        p.kind = PART_TEXT;
        if (n == 8 && !memcmp(f, "{system}", n)) { p.s = w->system; p.len = w->system_len; }
        else if (n == 6 && !memcmp(f, "{user}", n)) { p.s = w->user; p.len = w->user_len; }
        else if (n == 6 && !memcmp(f, "{date}", n)) { p.s = w->date; p.len = w->date_len; }
        else p.kind = PART_BOS;   /* "{bos}", the one other placeholder */
        return p;
    }
    if (f[0] == '<' && f[1] == '|' && (close = strstr(f + 2, "|>")) != NULL) {
        p.kind = PART_SPECIAL;
        p.s = f;
        p.len = (size_t)(close + 2 - f);
        w->fmt = close + 2;
        return p;
    }
    p.kind = PART_TEXT;
    p.s = f;
    for (f++; *f && *f != '{' && !(f[0] == '<' && f[1] == '|'); f++) {}
    p.len = (size_t)(f - p.s);
    w->fmt = f;
    return p;
}

size_t tok_chat_render(char *out, size_t cap, const tok_tokenizer *t, const tok_chat_turn *turn)
{
    tok_sink s;
    tok_chat_walk w;
    tok_chat_part p;
    s.out = out;
    s.cap = cap;
    s.len = 0;
    if (chat_setup(&w, t, turn))
        while ((p = chat_next(&w)).kind != PART_END)
            if (p.kind != PART_BOS) sink_put(&s, p.s, p.len);   /* llama2's closing eos has no text either */
    if (cap) out[s.len < cap ? s.len : cap - 1] = '\0';
    return s.len;
}

size_t tok_render_chat(char *out, size_t cap, int chat_template, const char *system, const char *user)
{
    tok_chat_turn turn;
    turn.chat_template = chat_template;
    turn.first = 1;
    turn.system = system && system[0] ? system : NULL;
    turn.user = user;
    turn.date = NULL;
    turn.close_reply = 0;
    return tok_chat_render(out, cap, NULL, &turn);
}

/* The error for a special token the vocabulary lacks. */
static int chat_missing(tok_tokenizer *t, const tok_chat_format *f, const char *token, size_t len)
{
    char name[48];
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, token, len);
    name[len] = '\0';
    llm__fmt(t->error, sizeof t->error, "the %s chat template needs the token %s, which this vocabulary lacks",
             f->name, name);
    return TOK_ERR_FORMAT;
}

int tok_chat_check(tok_tokenizer *t, int chat_template)
{
    const tok_chat_format *f;
    const char *fmts[3], *s, *close;
    int i;
    if (!t) return TOK_ERR_ARG;
    if (chat_template < 0 || chat_template >= TOK_CHAT_COUNT) {
        llm__fmt(t->error, sizeof t->error, "unknown chat template %d", chat_template);
        return TOK_ERR_ARG;
    }
    f = &chat_formats[chat_template];
    fmts[0] = f->first_system;
    fmts[1] = f->first ? f->first : "";
    fmts[2] = f->later;
    for (i = 0; i < 3; i++)
        for (s = fmts[i]; (s = strstr(s, "<|")) != NULL && (close = strstr(s + 2, "|>")) != NULL; s = close + 2)
            if (tok_piece_id(t, s, (size_t)(close + 2 - s)) < 0) return chat_missing(t, f, s, (size_t)(close + 2 - s));
    return TOK_OK;
}

/* The text buffer (the rendered turn bounds every run of text), then tok_encode's scratch. */
static size_t chat_scratch(size_t text_len)
{
    size_t enc = text_len < SIZE_MAX ? tok_encode_scratch_size(text_len) : 0;
    return enc && text_len + 1 <= SIZE_MAX - enc ? text_len + 1 + enc : 0;
}

size_t tok_chat_scratch_size(const tok_tokenizer *t, const tok_chat_turn *turn)
{
    size_t len = tok_chat_render(NULL, 0, t, turn);
    return len ? chat_scratch(len) : 0;
}

size_t tok_chat_max_ids(const tok_tokenizer *t, const tok_chat_turn *turn)
{
    /* tok_encode gives at most 3 ids a byte and a dummy-prefix space per run of
     * text; one id per special token or BOS */
    tok_chat_walk w;
    tok_chat_part p;
    size_t len = tok_chat_render(NULL, 0, t, turn), most = 0;
    if (!len || !tok_max_tokens(len) || !chat_setup(&w, t, turn)) return 0;
    while ((p = chat_next(&w)).kind != PART_END) most += p.kind == PART_TEXT ? 3 * p.len + 1 : 1;
    return most;
}

int tok_chat_encode(tok_tokenizer *t, const tok_chat_turn *turn, int *ids, int max_ids,
                    void *scratch, size_t scratch_size)
{
    tok_chat_walk w;
    tok_chat_part p;
    size_t len, need, text_len = 0;
    char *text = (char *)scratch;
    int n = 0, k, id;
    if (!t || !t->sorted) return TOK_ERR_ARG;
    len = tok_chat_render(NULL, 0, t, turn);
    if (!len) {
        llm__fmt(t->error, sizeof t->error, "unknown chat template %d", turn ? turn->chat_template : -1);
        return TOK_ERR_ARG;
    }
    need = chat_scratch(len);
    if (!need || !scratch || scratch_size < need) {
        llm__fmt(t->error, sizeof t->error, "chat scratch too small: %lu bytes given, %lu needed%s",
                 (unsigned long)(scratch ? scratch_size : 0), (unsigned long)need, need ? "" : " (the turn is too long)");
        return TOK_ERR_SPACE;
    }
    chat_setup(&w, t, turn);
    for (;;) {
        p = chat_next(&w);
        if (p.kind == PART_TEXT) {   /* plain text runs up to the next token given by id */
            memcpy(text + text_len, p.s, p.len);
            text_len += p.len;
            continue;
        }
        if (text_len) {
            text[text_len] = '\0';
            k = tok_encode(t, text, 0, 0, ids + n, max_ids - n, text + len + 1, scratch_size - (len + 1));
            if (k < 0) return k;
            n += k;
            text_len = 0;
        }
        if (p.kind == PART_END) return n;
        id = p.kind == PART_BOS ? t->bos_id : p.kind == PART_CLOSE ? tok_chat_end_id(t, turn->chat_template)
                                                                  : tok_piece_id(t, p.s, p.len);
        if (id < 0) return chat_missing(t, &chat_formats[turn->chat_template], p.s, p.len);
        if (n >= max_ids) {
            llm__fmt(t->error, sizeof t->error, "the chat turn has more than %d ids", max_ids);
            return TOK_ERR_SPACE;
        }
        ids[n++] = id;
    }
}

int tok_chat_end_id(const tok_tokenizer *t, int chat_template)
{
    const char *end;
    if (!t || chat_template < 0 || chat_template >= TOK_CHAT_COUNT) return -1;
    end = chat_formats[chat_template].end;
    return end ? tok_piece_id(t, end, strlen(end)) : t->eos_id;
}
