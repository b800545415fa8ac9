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

/* A template's fixed text around the turn: with a system prompt,
 * system_open + system + system_to_user + user + user_close; without one,
 * user_open + user + user_close. */
typedef struct {
    const char *system_open, *system_to_user, *user_open, *user_close;
} tok_chat_format;

static const tok_chat_format chat_formats[] = {
    /* TOK_CHAT_LLAMA2 */ { "[INST] <<SYS>>\n", "\n<</SYS>>\n\n", "[INST] ", " [/INST]" },
};

/* Output of tok_render_chat: the bytes that fit (cap counts the NUL) and the full length. */
typedef struct {
    char *out;
    size_t cap, len;
} tok_sink;

static void sink_put(tok_sink *s, const char *str)
{
    size_t n = strlen(str);
    size_t room = s->len + 1 < s->cap ? s->cap - 1 - s->len : 0;
    if (room) memcpy(s->out + s->len, str, n < room ? n : room);
    s->len = n > SIZE_MAX - s->len ? SIZE_MAX : s->len + n;
}

size_t tok_render_chat(char *out, size_t cap, int chat_template, const char *system, const char *user)
{
    const tok_chat_format *f;
    tok_sink s;
    s.out = out;
    s.cap = cap;
    s.len = 0;
    if (chat_template < 0 || (size_t)chat_template >= sizeof chat_formats / sizeof chat_formats[0]) {
        if (cap) out[0] = '\0';
        return 0;
    }
    f = &chat_formats[chat_template];
    if (system && system[0]) {
        sink_put(&s, f->system_open);
        sink_put(&s, system);
        sink_put(&s, f->system_to_user);
    } else {
        sink_put(&s, f->user_open);
    }
    sink_put(&s, user ? user : "");
    sink_put(&s, f->user_close);
    if (cap) out[s.len < cap ? s.len : cap - 1] = '\0';
    return s.len;
}
