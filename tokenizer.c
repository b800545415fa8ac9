/* tokenizer.c -- BPE encoders/decoders: sentencepiece BPE over llama2.c's
 * tokenizer.bin (here), byte-level BPE over LTOK files (the section
 * "byte-level BPE" below; FORMAT.md, "The tokenizer file"). tok_init tells
 * them apart by the magic "LTOK".
 *
 * tokenizer.bin format (little-endian): int32 max_token_length, then per entry a float32
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
#include "tokenizer_unicode.h"   /* \p{L}, \p{N} and NFC tables (tools/gen_unicode_tables.py) */

/* Alignment of the 4-byte types carved out of the arena and the scratch. */
struct tok_align_probe { char c; union { int i; unsigned u; float f; } x; };
#define TOK_ALIGN (offsetof(struct tok_align_probe, x))

/* arena: per vocabulary entry an offset, a length, a score and a sorted index;
 * then 257 ints of first-byte ranges into the sorted index */
#define TOK_PER_ENTRY (sizeof(unsigned int) + sizeof(int) + sizeof(float) + sizeof(int))
#define TOK_ARENA_FIXED (257 * sizeof(int))

/* An LTOK file's header fields and section offsets (byte-level BPE, below). */
typedef struct {
    long vocab, merges, n_added;
    uint32_t pre, norm, flags, tmpl, max_len, sys_len, pieces_size;
    long bos, eos, eot;
    uint64_t off_flags, off_ends, off_sorted, off_merges, off_sys, off_pieces;
} ltok_info;

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

static size_t ltok_arena_need(const ltok_info *h);
static int ltok_parse(const unsigned char *b, size_t n, int vocab_size, ltok_info *h, char *err, size_t cap);
static int is_ltok(const unsigned char *b, size_t n);

size_t tok_arena_size(const void *bytes, size_t n_bytes, int vocab_size)
{
    long count;
    if (is_ltok((const unsigned char *)bytes, n_bytes)) {
        ltok_info h;
        if (ltok_parse((const unsigned char *)bytes, n_bytes, vocab_size, &h, NULL, 0)) return 0;
        return ltok_arena_need(&h) + (TOK_ALIGN - 1);
    }
    count = parse_file((const unsigned char *)bytes, n_bytes, vocab_size, NULL, 0);
    if (count < 0) return 0;
    return (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED + (TOK_ALIGN - 1);
}

static size_t align_pad(const void *p)
{
    size_t mis = (size_t)((uintptr_t)p % TOK_ALIGN);
    return mis ? TOK_ALIGN - mis : 0;
}

/* The aligned start of an arena holding `need` bytes past its alignment
 * padding, or NULL with the error set. */
static unsigned char *claim_arena(tok_tokenizer *t, void *arena, size_t arena_size, size_t need)
{
    size_t pad = arena ? align_pad(arena) : 0;
    if (!arena || arena_size < pad + need) {
        llm__fmt(t->error, sizeof t->error, "tokenizer arena too small: %lu bytes given, %lu needed",
                 (unsigned long)(arena ? arena_size : 0), (unsigned long)(pad + need));
        return NULL;
    }
    return (unsigned char *)arena + pad;
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
    if (t->kind == TOK_KIND_BYTE_LEVEL || t->piece_len[id] != 6) return -1;
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
    if (t->kind == TOK_KIND_BYTE_LEVEL) return t->token_flags[id] == 0;
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

/* a[lo..mid) and a[mid..hi), each in order, merged into out[lo..hi) */
static void merge_ids(const tok_tokenizer *t, const int *a, int lo, int mid, int hi, int *out)
{
    int i = lo, j = mid, k = lo;
    while (i < mid && j < hi) out[k++] = cmp_ids(t, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < mid) out[k++] = a[i++];
    while (j < hi) out[k++] = a[j++];
}

/* Sort ids by cmp_ids: runs of 8 by insertion, then merged pairwise, back
 * and forth between a and scratch (n ints). cmp_ids is a total order (ties
 * go by id), so any sort gives this order; a merge sort reads the pieces in
 * runs, where the heapsort before it jumped across the vocabulary. */
static void sort_ids(const tok_tokenizer *t, int *a, int *scratch, int n)
{
    int *from = a, *to = scratch, lo, width;
    for (lo = 0; lo < n; lo += 8) {
        int hi = lo + 8 < n ? lo + 8 : n, i;
        for (i = lo + 1; i < hi; i++) {
            int id = a[i], j = i;
            for (; j > lo && cmp_ids(t, id, a[j - 1]) < 0; j--) a[j] = a[j - 1];
            a[j] = id;
        }
    }
    for (width = 8; width < n; width *= 2) {
        int *tmp;
        for (lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            merge_ids(t, from, lo, mid, hi, to);
        }
        tmp = from; from = to; to = tmp;
    }
    if (from != a)
        for (lo = 0; lo < n; lo++) a[lo] = from[lo];
}

static int ltok_init(tok_tokenizer *t, const unsigned char *b, size_t n, int vocab_size,
                     void *arena, size_t arena_size);

int tok_init(tok_tokenizer *t, const void *bytes, size_t n_bytes, int vocab_size,
             void *arena, size_t arena_size)
{
    const unsigned char *b = (const unsigned char *)bytes;
    unsigned char *a;
    size_t off;
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
    t->parse_special = 0;
    t->kind = TOK_KIND_SENTENCEPIECE;
    t->pre_tokenizer = 0;
    t->normalizer = TOK_NORM_NONE;
    t->ignore_merges = 0;
    t->token_flags = NULL;
    t->merges = NULL;
    t->n_merges = 0;
    t->added = NULL;
    t->n_added = 0;
    t->added_first = NULL;
    for (i = 0; i < 256; i++) {
        t->byte_token[i] = -1;
        t->byte_value[i] = (unsigned char)i;
    }
    t->error[0] = '\0';
    if (is_ltok(b, n_bytes)) return ltok_init(t, b, n_bytes, vocab_size, arena, arena_size);

    count = parse_file(b, n_bytes, vocab_size, t->error, sizeof t->error);
    if (count < 0) return TOK_ERR_FORMAT;

    a = claim_arena(t, arena, arena_size, (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED);
    if (!a) return TOK_ERR_ARENA;
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
    sort_ids(t, t->sorted, (int *)(void *)t->score, (int)count);   /* the scores' room as scratch */
    for (i = 0; i < count; i++) t->score[i] = rd_f32(b + t->piece_offset[i] - 8);
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
/* Scratch bytes per byte of text of the byte-level path (bl_scratch_need): 3
 * bytes of normalized text, each with a symbol (3 ints) and a heap entry (2
 * ints), and at most one byte of merge cache; its constant part is below 64. */
#define BL_PER_BYTE (3 * (1 + 5 * sizeof(int)) + 1)

static int text_len_ok(size_t n)
{
    size_t sp = sizeof(tok_symbol) + 2 * sizeof(tok_pair) + 3;
    size_t per = sp > BL_PER_BYTE ? sp : BL_PER_BYTE;
    return n <= TOK_MAX_TEXT && n <= (SIZE_MAX - 64 - sizeof(tok_symbol)) / per;
}

static size_t bl_scratch_need(size_t n, size_t pad);

size_t tok_encode_scratch_size(size_t text_len)
{
    size_t sp, bl;
    if (!text_len_ok(text_len)) return 0;
    sp = scratch_need(text_len, TOK_ALIGN - 1);
    bl = bl_scratch_need(text_len, TOK_ALIGN - 1);
    return sp > bl ? sp : bl;   /* either kind of file */
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

/* ---- byte-level BPE (LTOK files) ---- */

/* LTOK file (FORMAT.md, "The tokenizer file"): a 64-byte header, then
 * u8 token_flags[V] (padded to 4), u32 piece_end[V], u32 sorted[V],
 * n_merges x {u32 left, right, rank, result}, the default system prompt,
 * the piece bytes. Everything is read in place; tok_init copies offsets,
 * lengths and the sorted index into the arena.
 *
 * Encoding, as @huggingface/tokenizers (JavaScript) does it: added tokens (and
 * special ones when asked) are cut out of the raw text; each piece between them
 * gets U+FFFD for its invalid UTF-8, NFC when the file asks, and the family's
 * pre-tokenizer regex, written out as a matcher per pattern; each pre-token's
 * bytes are then merged by rank with a min-heap of candidate pairs checked
 * when popped. O(n log n) in the text's length. */
#define LTOK_HEADER 64
#define LTOK_MAX_VOCAB (1L << 22)
#define LTOK_MAX_MERGES (1L << 26)


static int is_ltok(const unsigned char *b, size_t n)
{
    return b && n >= 4 && b[0] == 'L' && b[1] == 'T' && b[2] == 'O' && b[3] == 'K';
}

static uint32_t ltok_start(const unsigned char *b, const ltok_info *h, long i)
{
    return i ? rd_u32(b + h->off_ends + 4 * (uint64_t)(i - 1)) : 0;
}

static uint32_t ltok_end(const unsigned char *b, const ltok_info *h, long i)
{
    return rd_u32(b + h->off_ends + 4 * (uint64_t)i);
}

/* bytes of piece i compared with piece j: <0, 0, >0 */
static int ltok_cmp(const unsigned char *b, const ltok_info *h, long i, long j)
{
    const unsigned char *p = b + h->off_pieces + ltok_start(b, h, i);
    const unsigned char *q = b + h->off_pieces + ltok_start(b, h, j);
    uint32_t pl = ltok_end(b, h, i) - ltok_start(b, h, i), ql = ltok_end(b, h, j) - ltok_start(b, h, j);
    uint32_t m = pl < ql ? pl : ql, k;
    for (k = 0; k < m; k++)
        if (p[k] != q[k]) return p[k] < q[k] ? -1 : 1;
    return pl < ql ? -1 : pl > ql;
}

/* Validate the whole LTOK file (every offset in 64 bits). 0 or -1 with a message. */
static int ltok_parse(const unsigned char *b, size_t n, int vocab_size, ltok_info *h, char *err, size_t cap)
{
    uint32_t version, hsize, kind;
    uint64_t end;
    long i;
    int seen[256];

    if (n < LTOK_HEADER) {
        llm__fmt(err, cap, "LTOK tokenizer truncated: %lu bytes, the header alone is %d",
                 (unsigned long)n, LTOK_HEADER);
        return -1;
    }
    version = rd_u32(b + 4);
    hsize = rd_u32(b + 8);
    kind = rd_u32(b + 12);
    if (version != 1) {
        llm__fmt(err, cap, "LTOK tokenizer version %lu: this build reads version 1%s",
                 (unsigned long)version, version > 1 ? " (update the engine)" : "");
        return -1;
    }
    if (hsize != LTOK_HEADER) {
        llm__fmt(err, cap, "bad LTOK header: header_size %lu, expected %d", (unsigned long)hsize, LTOK_HEADER);
        return -1;
    }
    if (kind != TOK_KIND_BYTE_LEVEL) {
        llm__fmt(err, cap, "LTOK tokenizer kind %lu not supported (1: byte-level BPE; "
                 "sentencepiece vocabularies use llama2.c's tokenizer.bin)", (unsigned long)kind);
        return -1;
    }
    h->pre = rd_u32(b + 16);
    h->norm = rd_u32(b + 20);
    h->flags = rd_u32(b + 24);
    h->vocab = rd_i32(b + 28);
    h->merges = rd_i32(b + 32);
    h->bos = rd_i32(b + 36);
    h->eos = rd_i32(b + 40);
    h->eot = rd_i32(b + 44);
    h->tmpl = rd_u32(b + 48);
    h->max_len = rd_u32(b + 52);
    h->sys_len = rd_u32(b + 56);
    h->pieces_size = rd_u32(b + 60);
    if (h->pre < TOK_PRE_GPT2 || h->pre > TOK_PRE_SMOLLM) {
        llm__fmt(err, cap, "bad LTOK header: unknown pre_tokenizer %lu", (unsigned long)h->pre);
        return -1;
    }
    if (h->norm > TOK_NORM_NFC) {
        llm__fmt(err, cap, "bad LTOK header: unknown normalizer %lu", (unsigned long)h->norm);
        return -1;
    }
    if (h->flags & ~3u) {
        llm__fmt(err, cap, "bad LTOK header: flags %lu has unknown bits (0..3)", (unsigned long)h->flags);
        return -1;
    }
    if (h->tmpl >= TOK_CHAT_COUNT) {
        llm__fmt(err, cap, "bad LTOK header: unknown chat_template %lu", (unsigned long)h->tmpl);
        return -1;
    }
    if (h->vocab < 256 || h->vocab > LTOK_MAX_VOCAB) {
        llm__fmt(err, cap, "bad LTOK header: vocab_size %ld outside 256..%ld", h->vocab, LTOK_MAX_VOCAB);
        return -1;
    }
    if (vocab_size > 0 && h->vocab > vocab_size) {
        llm__fmt(err, cap, "tokenizer has %ld entries, the model only %d: wrong tokenizer file?",
                 h->vocab, vocab_size);
        return -1;
    }
    if (h->merges < 0 || h->merges > LTOK_MAX_MERGES) {
        llm__fmt(err, cap, "bad LTOK header: n_merges %ld outside 0..%ld", h->merges, LTOK_MAX_MERGES);
        return -1;
    }
    if (h->bos < -1 || h->bos >= h->vocab || h->eos < -1 || h->eos >= h->vocab ||
        h->eot < -1 || h->eot >= h->vocab) {
        llm__fmt(err, cap, "bad LTOK header: bos %ld / eos %ld / eot %ld not -1 or an id below %ld",
                 h->bos, h->eos, h->eot, h->vocab);
        return -1;
    }
    if ((h->flags & 1) && h->bos < 0) {
        llm__fmt(err, cap, "bad LTOK header: add_bos is set but bos_id is -1");
        return -1;
    }
    if (h->max_len < 1 || h->max_len > 65536) {
        llm__fmt(err, cap, "bad LTOK header: max_token_length %lu outside 1..65536", (unsigned long)h->max_len);
        return -1;
    }
    h->off_flags = LTOK_HEADER;
    h->off_ends = h->off_flags + (((uint64_t)h->vocab + 3) & ~(uint64_t)3);
    h->off_sorted = h->off_ends + 4 * (uint64_t)h->vocab;
    h->off_merges = h->off_sorted + 4 * (uint64_t)h->vocab;
    h->off_sys = h->off_merges + 16 * (uint64_t)h->merges;
    h->off_pieces = h->off_sys + h->sys_len;
    end = h->off_pieces + h->pieces_size;
    if (end != (uint64_t)n) {
        llm__fmt(err, cap, "LTOK tokenizer %s: the header implies %llu bytes, the file has %lu",
                 end > (uint64_t)n ? "truncated" : "has trailing bytes", (unsigned long long)end,
                 (unsigned long)n);
        return -1;
    }
    h->n_added = 0;
    for (i = 0; i < h->vocab; i++) {
        unsigned f = b[h->off_flags + i];
        if (f & ~3u) {
            llm__fmt(err, cap, "bad LTOK token %ld: flags %u has unknown bits (0..3)", i, f);
            return -1;
        }
        if (f) h->n_added++;
    }
    for (i = 0; i < 256; i++) seen[i] = 0;
    for (i = 0; i < h->vocab; i++) {
        uint32_t s = ltok_start(b, h, i), e = ltok_end(b, h, i);
        if (e < s || e > h->pieces_size || e - s == 0 || e - s > h->max_len) {
            llm__fmt(err, cap, "bad LTOK token %ld: piece bytes %lu..%lu (pieces hold %lu, "
                     "max_token_length %lu; pieces are not empty)", i, (unsigned long)s,
                     (unsigned long)e, (unsigned long)h->pieces_size, (unsigned long)h->max_len);
            return -1;
        }
        if (e - s == 1 && !b[h->off_flags + i]) seen[b[h->off_pieces + s]] = 1;
    }
    for (i = 0; i < 256; i++)
        if (!seen[i]) {
            llm__fmt(err, cap, "bad LTOK vocabulary: no piece for the byte %lu "
                     "(a byte-level vocabulary has all 256)", (unsigned long)i);
            return -1;
        }
    for (i = 0; i < h->vocab; i++) {
        uint32_t id = rd_u32(b + h->off_sorted + 4 * (uint64_t)i);
        if (id >= (uint32_t)h->vocab) {
            llm__fmt(err, cap, "bad LTOK sorted index: entry %ld is %lu, not an id", i, (unsigned long)id);
            return -1;
        }
        if (i > 0 && ltok_cmp(b, h, (long)rd_u32(b + h->off_sorted + 4 * (uint64_t)(i - 1)), (long)id) >= 0) {
            llm__fmt(err, cap, "bad LTOK sorted index: entries %ld and %ld out of order or "
                     "equal pieces", i - 1, i);
            return -1;
        }
    }
    for (i = 0; i < h->merges; i++) {
        const unsigned char *m = b + h->off_merges + 16 * (uint64_t)i;
        uint32_t l = rd_u32(m), r = rd_u32(m + 4), res = rd_u32(m + 12), ls, rs, os;
        if (l >= (uint32_t)h->vocab || r >= (uint32_t)h->vocab || res >= (uint32_t)h->vocab) {
            llm__fmt(err, cap, "bad LTOK merge %ld: ids %lu %lu -> %lu not below %ld", i,
                     (unsigned long)l, (unsigned long)r, (unsigned long)res, h->vocab);
            return -1;
        }
        if (i > 0) {
            uint32_t pl = rd_u32(m - 16), pr = rd_u32(m - 12);
            if (pl > l || (pl == l && pr >= r)) {
                llm__fmt(err, cap, "bad LTOK merge %ld: not sorted by (left, right) ids", i);
                return -1;
            }
        }
        if (rd_u32(m + 8) > (uint32_t)INT_MAX) {
            llm__fmt(err, cap, "bad LTOK merge %ld: rank %lu above 2^31 - 1", i, (unsigned long)rd_u32(m + 8));
            return -1;
        }
        if (b[h->off_flags + l] || b[h->off_flags + r] || b[h->off_flags + res]) {
            llm__fmt(err, cap, "bad LTOK merge %ld: involves a special or added token", i);
            return -1;
        }
        ls = ltok_end(b, h, l) - ltok_start(b, h, l);
        rs = ltok_end(b, h, r) - ltok_start(b, h, r);
        os = ltok_start(b, h, res);
        if (ltok_end(b, h, res) - os != ls + rs ||
            memcmp(b + h->off_pieces + os, b + h->off_pieces + ltok_start(b, h, l), ls) ||
            memcmp(b + h->off_pieces + os + ls, b + h->off_pieces + ltok_start(b, h, r), rs)) {
            llm__fmt(err, cap, "bad LTOK merge %ld: token %lu is not tokens %lu and %lu joined", i,
                     (unsigned long)res, (unsigned long)l, (unsigned long)r);
            return -1;
        }
    }
    return 0;
}

static size_t ltok_arena_need(const ltok_info *h)
{
    return (size_t)h->vocab * 3 * sizeof(int) + (size_t)h->n_added * sizeof(int) + 2 * TOK_ARENA_FIXED;
}

static int ltok_init(tok_tokenizer *t, const unsigned char *b, size_t n, int vocab_size,
                     void *arena, size_t arena_size)
{
    ltok_info h;
    unsigned char *a;
    long i;
    int c, k;

    if (ltok_parse(b, n, vocab_size, &h, t->error, sizeof t->error)) return TOK_ERR_FORMAT;
    a = claim_arena(t, arena, arena_size, ltok_arena_need(&h));
    if (!a) return TOK_ERR_ARENA;
    t->piece_offset = (unsigned int *)(void *)a;
    a += (size_t)h.vocab * sizeof(unsigned int);
    t->piece_len = (int *)(void *)a;
    a += (size_t)h.vocab * sizeof(int);
    t->sorted = (int *)(void *)a;
    a += (size_t)h.vocab * sizeof(int);
    t->first_byte = (int *)(void *)a;
    a += TOK_ARENA_FIXED;
    t->added_first = (int *)(void *)a;
    a += TOK_ARENA_FIXED;
    t->added = (int *)(void *)a;

    t->kind = TOK_KIND_BYTE_LEVEL;
    t->pre_tokenizer = (int)h.pre;
    t->normalizer = (int)h.norm;
    t->ignore_merges = (h.flags & 2) != 0;
    t->add_bos = (h.flags & 1) != 0;
    t->bos_id = (int)h.bos;
    t->eos_id = (int)h.eos;
    t->eot_id = (int)h.eot;
    t->chat_template = (int)h.tmpl;
    t->max_token_length = (int)h.max_len;
    t->default_system = h.sys_len ? (const char *)(b + h.off_sys) : NULL;
    t->default_system_len = h.sys_len;
    t->token_flags = b + h.off_flags;
    t->merges = b + h.off_merges;
    t->n_merges = (int)h.merges;
    t->vocab_size = (int)h.vocab;
    for (i = 0; i < h.vocab; i++) {
        uint32_t s = ltok_start(b, &h, i);
        t->piece_offset[i] = (unsigned int)(h.off_pieces + s);
        t->piece_len[i] = (int)(ltok_end(b, &h, i) - s);
        t->sorted[i] = (int)rd_u32(b + h.off_sorted + 4 * (uint64_t)i);
    }
    for (i = 0; i < h.vocab; i++)
        if (t->piece_len[i] == 1 && !t->token_flags[i]) t->byte_token[b[t->piece_offset[i]]] = (int)i;
    /* first-byte ranges of the sorted index, and the special/added ids in sorted order */
    t->n_added = 0;
    for (c = 0, k = 0; k < t->vocab_size; k++) {
        int id = t->sorted[k];
        while (c <= b[t->piece_offset[id]]) t->first_byte[c++] = k;
        if (t->token_flags[id]) t->added[t->n_added++] = id;
    }
    while (c <= 256) t->first_byte[c++] = t->vocab_size;
    for (c = 0, k = 0; k < t->n_added; k++) {
        int id = t->added[k];
        while (c <= b[t->piece_offset[id]]) t->added_first[c++] = k;
    }
    while (c <= 256) t->added_first[c++] = t->n_added;
    return 0;
}

/* Rank and result of merging pieces l and r, or -1 when no merge joins them. */
static long merge_rank(const tok_tokenizer *t, int l, int r, int *result)
{
    long lo = 0, hi = t->n_merges;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        const unsigned char *m = t->merges + 16 * (size_t)mid;
        uint32_t ml = rd_u32(m), mr = rd_u32(m + 4);
        if (ml < (uint32_t)l || (ml == (uint32_t)l && mr < (uint32_t)r)) lo = mid + 1;
        else if (ml == (uint32_t)l && mr == (uint32_t)r) {
            *result = (int)rd_u32(m + 12);
            return (long)rd_u32(m + 8);
        } else hi = mid;
    }
    return -1;
}

/* ---- Unicode classes (tables: tokenizer_unicode.h) ---- */

enum { CL_OTHER, CL_L, CL_N, CL_WS };

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid][0]) hi = mid;
        else if (c > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* Whitespace: the White_Space property (PropList.txt, unchanged since Unicode
 * 6.3) as the tokenizers' rewritten Split patterns use it; js: JavaScript's \s
 * (White_Space without U+0085, with U+FEFF) as their built-in ByteLevel
 * pattern has it. */
static int is_space(uint32_t c, int js)
{
    if (c == 0x85) return !js;
    if (c == 0xFEFF) return js;
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int char_class(uint32_t c, int js)
{
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CL_L;
        if (c >= '0' && c <= '9') return CL_N;
        return (c >= 9 && c <= 13) || c == ' ' ? CL_WS : CL_OTHER;
    }
    if (is_space(c, js)) return CL_WS;
    if (in_ranges(tok__letters, sizeof tok__letters / sizeof tok__letters[0], c)) return CL_L;
    if (in_ranges(tok__numbers, sizeof tok__numbers / sizeof tok__numbers[0], c)) return CL_N;
    return CL_OTHER;
}

/* The code point at s[i] (well-formed UTF-8, i < e) and its length. */
static uint32_t cp_at(const unsigned char *s, size_t i, size_t e, size_t *len)
{
    unsigned char c = s[i];
    (void)e;
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
           ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
}

/* End of the run of class `cl` characters starting at i. */
static size_t run_of(const unsigned char *s, size_t i, size_t e, int cl, int js)
{
    while (i < e) {
        size_t l;
        uint32_t c = cp_at(s, i, e, &l);
        if (char_class(c, js) != cl) break;
        i += l;
    }
    return i;
}

/* The whitespace alternatives shared by the patterns, at a whitespace char:
 * \s+(?!\S) (the run but its last char when a non-space follows), else \s+
 * (one char). Llama 3 and Qwen2 try \s*[\r\n]+ first (up to the run's last
 * \r or \n). */
static size_t match_space(const unsigned char *s, size_t i, size_t e, int js, int newlines)
{
    size_t j = i, last = i, nl_end = 0;
    while (j < e) {
        size_t l;
        uint32_t c = cp_at(s, j, e, &l);
        if (char_class(c, js) != CL_WS) break;
        if (newlines && (c == '\r' || c == '\n')) nl_end = j + l;
        last = j;
        j += l;
    }
    if (nl_end) return nl_end - i;
    if (j == e || last == i) return j - i;   /* \s+(?!\S) to the end; \s+ of one char */
    return last - i;                          /* \s+(?!\S): all but the last */
}

/* Length of GPT-2's pattern match at i (JavaScript's \s). */
static size_t match_gpt2(const unsigned char *s, size_t i, size_t e)
{
    size_t l0, l1;
    uint32_t c0 = cp_at(s, i, e, &l0);
    int cl;
    if (c0 == '\'' && i + 1 < e) {
        unsigned char a = s[i + 1], b2 = i + 2 < e ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b2 == 'e') || (a == 'v' && b2 == 'e') || (a == 'l' && b2 == 'l')) return 3;
    }
    if (c0 == ' ' && i + 1 < e) {
        cl = char_class(cp_at(s, i + 1, e, &l1), 1);
        if (cl != CL_WS) return run_of(s, i + 1, e, cl, 1) - i;
    }
    cl = char_class(c0, 1);
    if (cl != CL_WS) return run_of(s, i, e, cl, 1) - i;
    return match_space(s, i, e, 1, 0);
}

/* Length of Llama 3's (max_digits 3) or Qwen2's (1) pattern match at i (White_Space). */
static size_t match_llama3(const unsigned char *s, size_t i, size_t e, int max_digits)
{
    size_t l0, l1, j;
    uint32_t c0 = cp_at(s, i, e, &l0);
    int cl0 = char_class(c0, 0), k;
    if (c0 == '\'' && i + 1 < e) {   /* (?i:'s|'t|'re|'ve|'m|'ll|'d), ASCII case folding */
        unsigned char a = s[i + 1] | 0x20, b2 = i + 2 < e ? s[i + 2] | 0x20 : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b2 == 'e') || (a == 'v' && b2 == 'e') || (a == 'l' && b2 == 'l')) return 3;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cl0 == CL_L) return run_of(s, i, e, CL_L, 0) - i;
    if (c0 != '\r' && c0 != '\n' && cl0 != CL_N && i + l0 < e &&
        char_class(cp_at(s, i + l0, e, &l1), 0) == CL_L)
        return run_of(s, i + l0, e, CL_L, 0) - i;
    /* \p{N}{1,3} */
    if (cl0 == CL_N) {
        for (j = i, k = 0; j < e && k < max_digits; k++) {
            size_t l;
            if (char_class(cp_at(s, j, e, &l), 0) != CL_N) break;
            j += l;
        }
        return j - i;
    }
    /* ' '?[^\s\p{L}\p{N}]+[\r\n]* */
    j = (size_t)-1;
    if (cl0 == CL_OTHER) j = run_of(s, i, e, CL_OTHER, 0);
    else if (c0 == ' ' && i + 1 < e && char_class(cp_at(s, i + 1, e, &l1), 0) == CL_OTHER)
        j = run_of(s, i + 1, e, CL_OTHER, 0);
    if (j != (size_t)-1) {
        while (j < e && (s[j] == '\r' || s[j] == '\n')) j++;
        return j - i;
    }
    /* \s*[\r\n]+ | \s+(?!\S) | \s+ */
    return match_space(s, i, e, 0, 1);
}

/* The bytes-to-symbols BPE of one pre-token s[0..L): byte pieces merged by
 * rank, lowest first, ties to the leftmost pair. Symbol k starts at byte k;
 * a merged-away symbol has id -1. The heap holds (rank, left symbol) pairs
 * checked when popped; when full (L entries) it drops its stale entries
 * (at most L - 1 are live). */
typedef struct { int prev, next, id; } bl_symbol;
typedef struct { int rank, left; } bl_pair;   /* ranks are below 2^31 (ltok_parse) */
/* BL_PER_BYTE counts on these sizes */
typedef char bl_sizes_checked[sizeof(bl_symbol) == 3 * sizeof(int) && sizeof(bl_pair) == 2 * sizeof(int) ? 1 : -1];

/* A direct-mapped cache of merge lookups (a word repeats its pairs: 1 MB of
 * one letter asks for the same few thousand times over). */
#define BL_CACHE 4096
typedef struct { int left, right, rank, result; } bl_cached;

typedef struct {      /* tok_encode's byte-level path: output and scratch */
    const tok_tokenizer *t;
    int *tokens;
    int max_tokens, count;
    bl_symbol *sym;
    bl_pair *heap;
    bl_cached *cache; /* (cache_mask + 1,) */
    size_t cache_mask;
} bl_out;

/* merge_rank through the cache */
static int bl_rank(bl_out *o, int l, int r, int *result)
{
    bl_cached *c = &o->cache[((unsigned)l * 2654435761u ^ (unsigned)r * 40503u) & o->cache_mask];
    if (c->left != l || c->right != r) {
        c->rank = (int)merge_rank(o->t, l, r, &c->result);
        c->left = l;
        c->right = r;
    }
    *result = c->result;
    return c->rank;
}

static int bl_better(const bl_pair *a, const bl_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void bl_sift_down(bl_pair *h, int n, int i)
{
    bl_pair x = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bl_better(&h[c + 1], &h[c])) c++;
        if (!bl_better(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* Is the heap entry p still the merge of its symbol with the next one? */
static int bl_live(bl_out *o, bl_pair p, int *result)
{
    const bl_symbol *sym = o->sym;
    int nx;
    if (sym[p.left].id < 0 || (nx = sym[p.left].next) < 0) return 0;
    return bl_rank(o, sym[p.left].id, sym[nx].id, result) == p.rank;
}

static void bl_push(bl_out *o, int *hn, int cap, int left)
{
    bl_symbol *sym = o->sym;
    bl_pair p, *h = o->heap;
    int res, i;
    if (left < 0 || sym[left].next < 0) return;
    p.rank = bl_rank(o, sym[left].id, sym[sym[left].next].id, &res);
    if (p.rank < 0) return;
    p.left = left;
    if (*hn == cap) {   /* compact: keep the live entries, heapify */
        int k, m = 0;
        for (k = 0; k < *hn; k++)
            if (bl_live(o, h[k], &res)) h[m++] = h[k];
        *hn = m;
        for (k = m / 2 - 1; k >= 0; k--) bl_sift_down(h, m, k);
    }
    i = (*hn)++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!bl_better(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static void bl_word(const tok_tokenizer *t, const unsigned char *s, size_t L, bl_out *o)
{
    int k, n = (int)L, hn = 0, res;
    bl_symbol *sym = o->sym;
    if (L == 0) return;
    if (L == 1) {
        emit(o->tokens, o->max_tokens, &o->count, t->byte_token[s[0]]);
        return;
    }
    if (t->ignore_merges && L <= (size_t)t->max_token_length) {
        int id = lookup(t, s, n);
        if (id >= 0) {
            emit(o->tokens, o->max_tokens, &o->count, id);
            return;
        }
    }
    for (k = 0; k < n; k++) {
        sym[k].prev = k - 1;
        sym[k].next = k + 1 < n ? k + 1 : -1;
        sym[k].id = t->byte_token[s[k]];
    }
    for (k = 0; k + 1 < n; k++) bl_push(o, &hn, n, k);
    while (hn > 0) {
        bl_pair top = o->heap[0];
        int left = top.left, right, next;
        o->heap[0] = o->heap[--hn];
        if (hn > 0) bl_sift_down(o->heap, hn, 0);
        if (!bl_live(o, top, &res)) continue;
        right = sym[left].next;
        next = sym[right].next;
        sym[left].id = res;
        sym[left].next = next;
        if (next >= 0) sym[next].prev = left;
        sym[right].id = -1;
        bl_push(o, &hn, n, sym[left].prev);
        bl_push(o, &hn, n, left);
    }
    for (k = 0; k >= 0; k = sym[k].next) emit(o->tokens, o->max_tokens, &o->count, sym[k].id);
}

/* Pre-tokenize s[a..e) (text between special tokens) and merge each pre-token. */
static void bl_segment(const tok_tokenizer *t, const unsigned char *s, size_t a, size_t e, bl_out *o)
{
    size_t i = a, len;
    while (i < e) {
        if (t->pre_tokenizer == TOK_PRE_SMOLLM) {
            /* Digits(individual_digits): each ASCII digit alone (the JavaScript
             * tokenizers' \d), the runs between them through GPT-2's pattern */
            size_t j = i;
            if (s[i] >= '0' && s[i] <= '9') {
                bl_word(t, s + i, 1, o);
                i++;
                continue;
            }
            while (j < e && !(s[j] >= '0' && s[j] <= '9')) j++;
            while (i < j) {
                len = match_gpt2(s, i, j);
                bl_word(t, s + i, len, o);
                i += len;
            }
            continue;
        }
        if (t->pre_tokenizer == TOK_PRE_GPT2) len = match_gpt2(s, i, e);
        else len = match_llama3(s, i, e, t->pre_tokenizer == TOK_PRE_LLAMA3 ? 3 : 1);
        bl_word(t, s + i, len, o);
        i += len;
    }
}

/* The longest special (when t->parse_special) or added token at s[0..n), or 0. */
static size_t match_added(const tok_tokenizer *t, const unsigned char *s, size_t n, int *id)
{
    int lo = t->added_first[s[0]], hi = t->added_first[s[0] + 1];
    size_t k = 1, best = 0;
    for (;;) {
        while (lo < hi && (size_t)t->piece_len[t->added[lo]] == k) {
            int a = t->added[lo++];
            if (t->parse_special || !(t->token_flags[a] & TOK_FLAG_SPECIAL)) {
                best = k;
                *id = a;
            }
        }
        if (lo >= hi || k >= n) break;
        {   /* narrow to the pieces whose byte k is s[k] */
            unsigned char c = s[k];
            int x = lo, y = hi;
            while (x < y) {
                int mid = x + (y - x) / 2;
                if (t->bytes[t->piece_offset[t->added[mid]] + k] < c) x = mid + 1;
                else y = mid;
            }
            lo = x;
            y = hi;
            while (x < y) {
                int mid = x + (y - x) / 2;
                if (t->bytes[t->piece_offset[t->added[mid]] + k] <= c) x = mid + 1;
                else y = mid;
            }
            hi = x;
        }
        k++;
    }
    return best;
}

/* Bytes of the next well-formed character at s (*valid 1), or of the maximal
 * invalid subpart there (*valid 0): the lead byte and the continuation bytes
 * that could still have completed it, or one byte (the WHATWG decoder's rule). */
static size_t utf8_step(const unsigned char *s, size_t n, int *valid)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need, k, j;
    *valid = 1;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *valid = 0;
        return 1;
    }
    for (j = 1, k = 0; k < need && j < n && s[j] >= lo && s[j] <= hi; k++, j++) {
        lo = 0x80;
        hi = 0xBF;
    }
    *valid = k == need;
    return j;
}

/* s[0..n) with each maximal invalid subpart replaced by U+FFFD; out has room
 * for 3n bytes. Returns the length. */
static size_t utf8_replace(unsigned char *out, const unsigned char *s, size_t n)
{
    size_t i = 0, p = 0;
    while (i < n) {
        int valid;
        size_t l = utf8_step(s + i, n - i, &valid);
        if (valid) {
            memcpy(out + p, s + i, l);
            p += l;
        } else {
            out[p] = 0xEF; out[p + 1] = 0xBF; out[p + 2] = 0xBD;
            p += 3;
        }
        i += l;
    }
    return p;
}

/* ---- NFC (tables: tokenizer_unicode.h) ---- */

#define NFC_CP(w) ((w) & 0x1FFFFFu)
#define NFC_CCC(w) ((w) >> 24)
/* Hangul syllables by arithmetic (UAX #15), on the ranges the tables give */
#define NFC_V_COUNT (TOK_HANGUL_V_LAST - TOK_HANGUL_V_FIRST + 1)
#define NFC_LV_STEP (TOK_HANGUL_T_LAST - TOK_HANGUL_T_FIRST + 2)   /* the T jamo and none */

static unsigned nfc_ccc(uint32_t c)
{
    size_t lo = 0, hi = sizeof tok__ccc / sizeof tok__ccc[0];
    if (c < 0x300) return 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < tok__ccc[mid][0]) hi = mid;
        else if (c > (tok__ccc[mid][1] & 0xFFFFFFu)) lo = mid + 1;
        else return tok__ccc[mid][1] >> 24;
    }
    return 0;
}

/* The primary composite of a and b, or 0 (Hangul by its formula). */
static uint32_t nfc_compose(uint32_t a, uint32_t b)
{
    size_t lo = 0, hi = sizeof tok__comp / sizeof tok__comp[0];
    if (a >= TOK_HANGUL_L_FIRST && a <= TOK_HANGUL_L_LAST && b >= TOK_HANGUL_V_FIRST && b <= TOK_HANGUL_V_LAST)
        return TOK_HANGUL_S_FIRST + ((a - TOK_HANGUL_L_FIRST) * NFC_V_COUNT + (b - TOK_HANGUL_V_FIRST)) * NFC_LV_STEP;
    if (a >= TOK_HANGUL_S_FIRST && a <= TOK_HANGUL_S_LAST && (a - TOK_HANGUL_S_FIRST) % NFC_LV_STEP == 0 &&
        b >= TOK_HANGUL_T_FIRST && b <= TOK_HANGUL_T_LAST)
        return a + (b - TOK_HANGUL_T_FIRST + 1);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tok__comp[mid][0] < a || (tok__comp[mid][0] == a && tok__comp[mid][1] < b)) lo = mid + 1;
        else if (tok__comp[mid][0] == a && tok__comp[mid][1] == b) return tok__comp[mid][2];
        else hi = mid;
    }
    return 0;
}

/* Append c's full canonical decomposition to w (code point | ccc << 24). */
static size_t nfc_decompose(uint32_t c, uint32_t *w)
{
    size_t lo = 0, hi = sizeof tok__decomp / sizeof tok__decomp[0], k, n;
    if (c >= TOK_HANGUL_S_FIRST && c <= TOK_HANGUL_S_LAST) {
        uint32_t s = c - TOK_HANGUL_S_FIRST;
        w[0] = TOK_HANGUL_L_FIRST + s / (NFC_V_COUNT * NFC_LV_STEP);
        w[1] = TOK_HANGUL_V_FIRST + (s % (NFC_V_COUNT * NFC_LV_STEP)) / NFC_LV_STEP;
        if (s % NFC_LV_STEP == 0) return 2;
        w[2] = TOK_HANGUL_T_FIRST + s % NFC_LV_STEP - 1;
        return 3;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < tok__decomp[mid][0]) hi = mid;
        else if (c > tok__decomp[mid][0]) lo = mid + 1;
        else {
            const uint32_t *p = tok__decomp_pool + (tok__decomp[mid][1] >> 3);
            n = tok__decomp[mid][1] & 7;
            for (k = 0; k < n; k++) w[k] = p[k] | (uint32_t)nfc_ccc(p[k]) << 24;
            return n;
        }
    }
    w[0] = c | (uint32_t)nfc_ccc(c) << 24;
    return 1;
}

/* Stable sort of w[0..n) by combining class (bottom-up merge sort through tmp). */
static void nfc_sort(uint32_t *w, size_t n, uint32_t *tmp)
{
    size_t width, i;
    for (width = 1; width < n; width *= 2) {
        for (i = 0; i < n; i += 2 * width) {
            size_t a = i, m = i + width < n ? i + width : n, e = i + 2 * width < n ? i + 2 * width : n;
            size_t x = a, y = m, k = a;
            while (x < m && y < e) tmp[k++] = NFC_CCC(w[y]) < NFC_CCC(w[x]) ? w[y++] : w[x++];
            while (x < m) tmp[k++] = w[x++];
            while (y < e) tmp[k++] = w[y++];
        }
        memcpy(w, tmp, n * sizeof *w);
    }
}

static size_t put_utf8(unsigned char *o, uint32_t c)
{
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* NFC of the well-formed UTF-8 s[0..len), in place; returns the new length.
 * The result is at most 3 times as long as the raw text it came from (the
 * table generator checks it), which the caller leaves room for. work holds
 * 2 * 3 * len code points. Canonical decomposition, canonical ordering, then
 * the composition algorithm of UAX #15. */
static size_t nfc_inplace(unsigned char *s, size_t len, uint32_t *work)
{
    size_t i, m = 0, k, out;
    int unstable = 0;
    for (i = 0; i < len && !unstable;) {
        size_t l;
        uint32_t c = cp_at(s, i, len, &l);
        unstable = c >= 0x300 &&
                   in_ranges(tok__nfc_unstable, sizeof tok__nfc_unstable / sizeof tok__nfc_unstable[0], c);
        i += l;
    }
    if (!unstable) return len;   /* already NFC */
    for (i = 0; i < len;) {
        size_t l;
        uint32_t c = cp_at(s, i, len, &l);
        m += nfc_decompose(c, work + m);
        i += l;
    }
    for (i = 0; i < m;) {   /* each run of non-starters in canonical order */
        size_t e;
        if (NFC_CCC(work[i]) == 0) { i++; continue; }
        for (e = i + 1; e < m && NFC_CCC(work[e]) != 0; e++) {}
        for (k = i + 1; k < e && NFC_CCC(work[k - 1]) <= NFC_CCC(work[k]); k++) {}
        if (k < e) nfc_sort(work + i, e - i, work + m);
        i = e;
    }
    {   /* compose */
        size_t starter = 0, w = 1;
        unsigned last = NFC_CCC(work[0]) ? 256 : 0;
        int have_starter = NFC_CCC(work[0]) == 0;
        for (i = 1; i < m; i++) {
            uint32_t c = work[i], comp = 0;
            unsigned cc = NFC_CCC(c);
            if (have_starter && (last < cc || last == 0))
                comp = nfc_compose(NFC_CP(work[starter]), NFC_CP(c));
            if (comp) {
                work[starter] = comp;   /* a composite is a starter (class 0) */
                continue;
            }
            if (cc == 0) {
                starter = w;
                have_starter = 1;
            }
            last = cc;
            work[w++] = c;
        }
        m = w;
    }
    for (i = 0, out = 0; i < m; i++) out += put_utf8(s + out, NFC_CP(work[i]));
    return out;
}

size_t tok_nfc_scratch_size(size_t n)
{
    return n <= TOK_MAX_TEXT ? 72 * n + 4 : 0;   /* 2 * 3 * (3n) code points */
}

size_t tok_nfc(char *out, const char *text, size_t n, void *scratch)
{
    size_t len = utf8_replace((unsigned char *)out, (const unsigned char *)text, n);
    return len ? nfc_inplace((unsigned char *)out, len, (uint32_t *)scratch) : 0;
}

/* Entries of the merge cache for a text of n bytes: a power of two, at most
 * BL_CACHE, about one byte of scratch per byte of text. */
static size_t bl_cache_size(size_t n)
{
    size_t c = 1;
    while (c < BL_CACHE && c * 2 * sizeof(bl_cached) <= n) c *= 2;
    return c;
}

/* The text between two special tokens, text[a..e): invalid UTF-8 replaced,
 * normalized, written at norm + *p, pre-tokenized and merged. Each raw byte
 * becomes at most 3 bytes, so norm needs 3n bytes in all. */
static void bl_flush(const tok_tokenizer *t, const unsigned char *text, size_t a, size_t e,
                     unsigned char *norm, size_t *p, bl_out *o)
{
    size_t q = *p, len;
    if (a == e) return;
    len = utf8_replace(norm + q, text + a, e - a);
    if (t->normalizer == TOK_NORM_NFC)   /* the symbols' room is free until bl_segment */
        len = nfc_inplace(norm + q, len, (uint32_t *)(void *)o->sym);
    bl_segment(t, norm, q, q + len, o);
    *p = q + len;
}

/* Scratch of the byte-level path: the normalized text (3n bytes), the merge
 * cache, then per byte of text a symbol and a heap entry (NFC's code points,
 * 24 bytes per byte of text at most, use their room first). */
static size_t bl_scratch_need(size_t n, size_t pad)
{
    return pad + 3 * n + TOK_ALIGN + bl_cache_size(n) * sizeof(bl_cached) + 3 * n * (sizeof(bl_symbol) + sizeof(bl_pair));
}

static int bl_encode(tok_tokenizer *t, const unsigned char *text, size_t n, int bos, int eos,
                     int *tokens, int max_tokens, void *scratch, size_t scratch_size)
{
    bl_out o;
    o.t = t;
    o.tokens = tokens;
    o.max_tokens = max_tokens;
    o.count = 0;
    if (bos && t->bos_id >= 0) emit(tokens, max_tokens, &o.count, t->bos_id);
    if (n > 0) {
        size_t pad = scratch ? align_pad(scratch) : 0, need = bl_scratch_need(n, pad), p = 0, i, seg;
        unsigned char *norm;
        if (!scratch || scratch_size < need) {
            llm__fmt(t->error, sizeof t->error, "encode scratch too small: %lu bytes given, %lu needed",
                     (unsigned long)(scratch ? scratch_size : 0), (unsigned long)need);
            return TOK_ERR_SPACE;
        }
        norm = (unsigned char *)scratch + pad;
        o.cache = (bl_cached *)(void *)(norm + 3 * n + align_pad(norm + 3 * n));
        o.cache_mask = bl_cache_size(n) - 1;
        o.sym = (bl_symbol *)(void *)(o.cache + o.cache_mask + 1);
        o.heap = (bl_pair *)(void *)(o.sym + 3 * n);
        for (i = 0; i <= o.cache_mask; i++) o.cache[i].left = -1;
        /* special and added tokens are found in the raw text, at character
         * boundaries (their text is well-formed UTF-8) */
        for (i = 0, seg = 0; i < n;) {
            int id, valid;
            size_t m = t->n_added ? match_added(t, text + i, n - i, &id) : 0;
            if (m) {
                bl_flush(t, text, seg, i, norm, &p, &o);
                emit(tokens, max_tokens, &o.count, id);
                i += m;
                seg = i;
            } else {
                i += utf8_step(text + i, n - i, &valid);
            }
        }
        bl_flush(t, text, seg, n, norm, &p, &o);
    }
    if (eos && t->eos_id >= 0) emit(tokens, max_tokens, &o.count, t->eos_id);
    if (o.count > max_tokens) {
        llm__fmt(t->error, sizeof t->error, "too many tokens: the text needs %d, room for %d", o.count, max_tokens);
        return TOK_ERR_SPACE;
    }
    return o.count;
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
    if (t->kind == TOK_KIND_BYTE_LEVEL) {
        if (!text_len_ok(n)) {
            llm__fmt(t->error, sizeof t->error, "text too long to encode: %lu bytes", (unsigned long)n);
            return TOK_ERR_SPACE;
        }
        return bl_encode(t, (const unsigned char *)text, n, bos, eos, tokens, max_tokens, scratch, scratch_size);
    }

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
    if (t->kind == TOK_KIND_BYTE_LEVEL) {
        *len = (size_t)t->piece_len[token];
        return (const char *)(t->bytes + t->piece_offset[token]);
    }
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

/* s[i..n) starts with the NUL-terminated lit */
static int starts_with(const char *s, size_t n, size_t i, const char *lit)
{
    size_t k = strlen(lit);
    return n - i >= k && !memcmp(s + i, lit, k);
}

static int contains(const char *s, size_t n, const char *lit)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (starts_with(s, n, i, lit)) return 1;
    return 0;
}

/* The ChatML default system turn: the first "<|im_start|>system" followed by a
 * newline (or Jinja's "\n") whose text runs to "<|im_end|>" with none of '"{}+
 * before it, as the regex <\|im_start\|>system(?:\\n|\n)([^'"{}+]*?)<\|im_end\|>
 * finds it. Returns 1 with the text's bounds. */
static int chatml_system(const char *s, size_t n, size_t *at, size_t *end)
{
    size_t i, k, m;
    for (i = 0; i < n; i++) {
        if (!starts_with(s, n, i, "<|im_start|>system")) continue;
        k = i + 18;
        if (starts_with(s, n, k, "\\n")) k += 2;
        else if (k < n && s[k] == '\n') k += 1;
        else continue;
        for (m = k; m < n; m++) {
            if (starts_with(s, n, m, "<|im_end|>")) {
                *at = k;
                *end = m;
                return 1;
            }
            if (s[m] && strchr("'\"{}+", s[m])) break;
        }
    }
    return 0;
}

int tok_chat_template_of(const char *jinja, size_t len, char *system, size_t cap, size_t *system_len)
{
    size_t at, end, k = 0;
    int kind;
    if (system_len) *system_len = 0;
    if (!jinja) return -1;
    if (contains(jinja, len, "<|start_header_id|>"))
        /* Llama 3.1 and 3.2 open every conversation with a dated system block */
        kind = contains(jinja, len, "Cutting Knowledge Date") ? TOK_CHAT_LLAMA31 : TOK_CHAT_LLAMA3;
    else if (contains(jinja, len, "<|im_start|>")) kind = TOK_CHAT_CHATML;
    else if (contains(jinja, len, "[INST]")) kind = TOK_CHAT_LLAMA2;
    else return -1;
    if (kind != TOK_CHAT_CHATML || !system || !chatml_system(jinja, len, &at, &end)) return kind;
    /* Jinja's escapes undone: a quote cannot be in the text, so only "\n" */
    while (at < end && k < cap) {
        if (starts_with(jinja, end, at, "\\n")) { system[k++] = '\n'; at += 2; }
        else system[k++] = jinja[at++];
    }
    if (system_len) *system_len = k;
    return kind;
}
