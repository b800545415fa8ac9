/* tokenizer/bpe.c -- BPE merged by rank (LTOK files, read by ltok.c):
 * tok_encode's LTOK half, byte-level with its pre-tokenizers, and
 * sentencepiece-style (TOK_KIND_SPM_BPE: characters, byte fallback).
 *
 * Encoding, as @huggingface/tokenizers (JavaScript) does it: added tokens (and
 * special ones when asked) are cut out of the raw text; each piece between them
 * gets U+FFFD for its invalid UTF-8, NFC when the file asks, and the family's
 * pre-tokenizer regex, written out as a matcher per pattern; each pre-token's
 * bytes are then merged by rank with a min-heap of candidate pairs checked
 * when popped. O(n log n) in the text's length. The sentencepiece-style kind
 * reads U+2581 as a space (its pieces store spaces where the tokenizer.json has
 * U+2581), has no pre-tokenizer, starts the merges from the characters (a
 * character no piece holds never merges and comes out as its bytes' <0xNN>
 * tokens, as @huggingface/tokenizers' byte_fallback does), and matches its
 * U+2581-run added tokens ("▁▁", ...) against U+2581s in the raw text. */
#include "../tokenizer.h"

#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "../tokenizer_unicode.h"   /* \p{L}, \p{N} tables (tools/gen_unicode_tables.py) */

/* Rank and result of merging pieces l and r, or -1 when no merge joins them. */
static long merge_rank(const tok_tokenizer *t, int l, int r, int *result) {
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

int tok__in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c) {
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
static int is_space(uint32_t c, int js) {
    if (c == 0x85) return !js;
    if (c == 0xFEFF) return js;
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int char_class(uint32_t c, int js) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CL_L;
        if (c >= '0' && c <= '9') return CL_N;
        return (c >= 9 && c <= 13) || c == ' ' ? CL_WS : CL_OTHER;
    }
    if (is_space(c, js)) return CL_WS;
    if (tok__in_ranges(tok__letters, sizeof tok__letters / sizeof tok__letters[0], c)) return CL_L;
    if (tok__in_ranges(tok__numbers, sizeof tok__numbers / sizeof tok__numbers[0], c)) return CL_N;
    return CL_OTHER;
}

/* The code point at s[i] (well-formed UTF-8, i < e) and its length. */
uint32_t tok__cp_at(const unsigned char *s, size_t i, size_t e, size_t *len) {
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
static size_t run_of(const unsigned char *s, size_t i, size_t e, int cl, int js) {
    while (i < e) {
        size_t l;
        uint32_t c = tok__cp_at(s, i, e, &l);
        if (char_class(c, js) != cl) break;
        i += l;
    }
    return i;
}

/* The whitespace alternatives shared by the patterns, at a whitespace char:
 * \s+(?!\S) (the run but its last char when a non-space follows), else \s+
 * (one char). Llama 3 and Qwen2 try \s*[\r\n]+ first (up to the run's last
 * \r or \n). */
static size_t match_space(const unsigned char *s, size_t i, size_t e, int js, int newlines) {
    size_t j = i, last = i, nl_end = 0;
    while (j < e) {
        size_t l;
        uint32_t c = tok__cp_at(s, j, e, &l);
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
static size_t match_gpt2(const unsigned char *s, size_t i, size_t e) {
    size_t l0, l1;
    uint32_t c0 = tok__cp_at(s, i, e, &l0);
    int cl;
    if (c0 == '\'' && i + 1 < e) {
        unsigned char a = s[i + 1], b2 = i + 2 < e ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b2 == 'e') || (a == 'v' && b2 == 'e') || (a == 'l' && b2 == 'l')) return 3;
    }
    if (c0 == ' ' && i + 1 < e) {
        cl = char_class(tok__cp_at(s, i + 1, e, &l1), 1);
        if (cl != CL_WS) return run_of(s, i + 1, e, cl, 1) - i;
    }
    cl = char_class(c0, 1);
    if (cl != CL_WS) return run_of(s, i, e, cl, 1) - i;
    return match_space(s, i, e, 1, 0);
}

/* Length of Llama 3's (max_digits 3) or Qwen2's (1) pattern match at i (White_Space). */
static size_t match_llama3(const unsigned char *s, size_t i, size_t e, int max_digits) {
    size_t l0, l1, j;
    uint32_t c0 = tok__cp_at(s, i, e, &l0);
    int cl0 = char_class(c0, 0), k;
    if (c0 == '\'' && i + 1 < e) {   /* (?i:'s|'t|'re|'ve|'m|'ll|'d), ASCII case folding */
        unsigned char a = s[i + 1] | 0x20, b2 = i + 2 < e ? s[i + 2] | 0x20 : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b2 == 'e') || (a == 'v' && b2 == 'e') || (a == 'l' && b2 == 'l')) return 3;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cl0 == CL_L) return run_of(s, i, e, CL_L, 0) - i;
    if (c0 != '\r' && c0 != '\n' && cl0 != CL_N && i + l0 < e &&
        char_class(tok__cp_at(s, i + l0, e, &l1), 0) == CL_L)
        return run_of(s, i + l0, e, CL_L, 0) - i;
    /* \p{N}{1,3} */
    if (cl0 == CL_N) {
        for (j = i, k = 0; j < e && k < max_digits; k++) {
            size_t l;
            if (char_class(tok__cp_at(s, j, e, &l), 0) != CL_N) break;
            j += l;
        }
        return j - i;
    }
    /* ' '?[^\s\p{L}\p{N}]+[\r\n]* */
    j = (size_t)-1;
    if (cl0 == CL_OTHER) j = run_of(s, i, e, CL_OTHER, 0);
    else if (c0 == ' ' && i + 1 < e && char_class(tok__cp_at(s, i + 1, e, &l1), 0) == CL_OTHER)
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
static int bl_rank(bl_out *o, int l, int r, int *result) {
    bl_cached *c = &o->cache[((unsigned)l * 2654435761u ^ (unsigned)r * 40503u) & o->cache_mask];
    if (c->left != l || c->right != r) {
        c->rank = (int)merge_rank(o->t, l, r, &c->result);
        c->left = l;
        c->right = r;
    }
    *result = c->result;
    return c->rank;
}

static int bl_better(const bl_pair *a, const bl_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void bl_sift_down(bl_pair *h, int n, int i) {
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
static int bl_live(bl_out *o, bl_pair p, int *result) {
    const bl_symbol *sym = o->sym;
    int nx;
    if (sym[p.left].id < 0 || (nx = sym[p.left].next) < 0 || sym[nx].id < 0) return 0;
    return bl_rank(o, sym[p.left].id, sym[nx].id, result) == p.rank;
}

static void bl_push(bl_out *o, int *hn, int cap, int left) {
    bl_symbol *sym = o->sym;
    bl_pair p, *h = o->heap;
    int res, i;
    if (left < 0 || sym[left].next < 0 || sym[left].id < 0 || sym[sym[left].next].id < 0) return;
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

/* Sentencepiece-style start: a symbol per character (at its first byte),
 * the piece holding it or BL_FALLBACK. */
#define BL_FALLBACK (-2)
static void bl_chars(const tok_tokenizer *t, const unsigned char *s, int n, bl_symbol *sym) {
    int k = 0, prev = -1;
    while (k < n) {
        size_t l;
        int id;
        (void)tok__cp_at(s, (size_t)k, (size_t)n, &l);
        id = tok__lookup(t, s + k, (int)l);
        sym[k].prev = prev;
        sym[k].next = k + (int)l < n ? k + (int)l : -1;
        sym[k].id = id >= 0 ? id : BL_FALLBACK;
        prev = k;
        k += (int)l;
    }
}

/* The symbols left after the merges, a fallback character as its bytes' <0xNN>. */
static void bl_emit_symbols(const tok_tokenizer *t, const unsigned char *s, int n, bl_out *o) {
    const bl_symbol *sym = o->sym;
    int k, j;
    for (k = 0; k >= 0; k = sym[k].next) {
        if (sym[k].id != BL_FALLBACK) {
            emit(o->tokens, o->max_tokens, &o->count, sym[k].id);
            continue;
        }
        for (j = k; j < (sym[k].next >= 0 ? sym[k].next : n); j++)
            emit(o->tokens, o->max_tokens, &o->count, t->byte_token[s[j]]);
    }
}

static void bl_word(const tok_tokenizer *t, const unsigned char *s, size_t L, bl_out *o) {
    int k, n = (int)L, hn = 0, res;
    bl_symbol *sym = o->sym;
    if (L == 0) return;
    if (L == 1 && t->kind == TOK_KIND_BYTE_LEVEL) {
        emit(o->tokens, o->max_tokens, &o->count, t->byte_token[s[0]]);
        return;
    }
    if (t->ignore_merges && L <= (size_t)t->max_token_length) {
        int id = tok__lookup(t, s, n);
        if (id >= 0) {
            emit(o->tokens, o->max_tokens, &o->count, id);
            return;
        }
    }
    if (t->kind == TOK_KIND_SPM_BPE) {
        bl_chars(t, s, n, sym);
    } else {
        for (k = 0; k < n; k++) {
            sym[k].prev = k - 1;
            sym[k].next = k + 1 < n ? k + 1 : -1;
            sym[k].id = t->byte_token[s[k]];
        }
    }
    for (k = 0; k >= 0; k = sym[k].next) bl_push(o, &hn, n, k);
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
    bl_emit_symbols(t, s, n, o);
}

/* Pre-tokenize s[a..e) (text between special tokens) and merge each pre-token. */
static void bl_segment(const tok_tokenizer *t, const unsigned char *s, size_t a, size_t e, bl_out *o) {
    size_t i = a, len;
    if (t->pre_tokenizer == TOK_PRE_NONE) {   /* sentencepiece-style: one word */
        bl_word(t, s + a, e - a, o);
        return;
    }
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
static size_t match_added(const tok_tokenizer *t, const unsigned char *s, size_t n, int *id) {
    int lo = t->added_first[s[0]], hi = t->added_first[s[0] + 1];
    size_t k = 1, best = 0;
    for (;;) {
        while (lo < hi && (size_t)t->piece_len[t->added[lo]] == k) {
            int a = t->added[lo++];
            if (t->token_flags[a] & TOK_FLAG_U2581) continue;   /* matched by match_u2581 */
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

/* The longest U+2581-run added token (TOK_FLAG_U2581: its piece is k spaces)
 * at s[0..n), matching k U+2581s: its bytes (3k), or 0. */
static size_t match_u2581(const tok_tokenizer *t, const unsigned char *s, size_t n, int *id) {
    size_t run = 0;
    while (run < TOK_U2581_MAX_RUN && 3 * run + 2 < n && s[3 * run] == 0xE2 && s[3 * run + 1] == 0x96 &&
           s[3 * run + 2] == 0x81)
        run++;
    for (; run > 0; run--)
        if (t->u2581_run[run] >= 0) {
            *id = t->u2581_run[run];
            return 3 * run;
        }
    return 0;
}

/* Bytes of the next well-formed character at s (*valid 1), or of the maximal
 * invalid subpart there (*valid 0): the lead byte and the continuation bytes
 * that could still have completed it, or one byte (the WHATWG decoder's rule). */
static size_t utf8_step(const unsigned char *s, size_t n, int *valid) {
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
size_t tok__utf8_replace(unsigned char *out, const unsigned char *s, size_t n) {
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

/* Entries of the merge cache for a text of n bytes: a power of two, at most
 * BL_CACHE, about one byte of scratch per byte of text. */
static size_t bl_cache_size(size_t n) {
    size_t c = 1;
    while (c < BL_CACHE && c * 2 * sizeof(bl_cached) <= n) c *= 2;
    return c;
}

/* s[0..n) with each U+2581 made a space, in place; returns the new length.
 * Sentencepiece-style: the tokenizer.json's normalizer writes every space as
 * U+2581, the pieces store the spaces instead; the same equivalence. */
static size_t u2581_to_space(unsigned char *s, size_t n) {
    size_t i = 0, p = 0;
    while (i < n) {
        if (i + 2 < n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
            s[p++] = ' ';
            i += 3;
        } else {
            s[p++] = s[i++];
        }
    }
    return p;
}

/* The text between two special tokens, text[a..e): invalid UTF-8 replaced,
 * normalized, written at norm + *p, pre-tokenized and merged. Each raw byte
 * becomes at most 3 bytes, so norm needs 3n bytes in all. */
static void bl_flush(const tok_tokenizer *t, const unsigned char *text, size_t a, size_t e,
                     unsigned char *norm, size_t *p, bl_out *o) {
    size_t q = *p, len;
    if (a == e) return;
    len = tok__utf8_replace(norm + q, text + a, e - a);
    if (t->kind == TOK_KIND_SPM_BPE) len = u2581_to_space(norm + q, len);
    if (t->normalizer == TOK_NORM_NFC)   /* the symbols' room is free until bl_segment */
        len = tok__nfc_inplace(norm + q, len, (uint32_t *)(void *)o->sym);
    bl_segment(t, norm, q, q + len, o);
    *p = q + len;
}

/* Scratch of the byte-level path: the normalized text (3n bytes), the merge
 * cache, then per byte of text a symbol and a heap entry (NFC's code points,
 * 24 bytes per byte of text at most, use their room first). */
size_t tok__bl_scratch_need(size_t n, size_t pad) {
    return pad + 3 * n + TOK_ALIGN + bl_cache_size(n) * sizeof(bl_cached) + 3 * n * (sizeof(bl_symbol) + sizeof(bl_pair));
}

int tok__bl_encode(tok_tokenizer *t, const unsigned char *text, size_t n, int bos, int eos,
                     int *tokens, int max_tokens, void *scratch, size_t scratch_size) {
    bl_out o;
    o.t = t;
    o.tokens = tokens;
    o.max_tokens = max_tokens;
    o.count = 0;
    if (bos && t->bos_id >= 0) emit(tokens, max_tokens, &o.count, t->bos_id);
    if (n > 0) {
        size_t pad = scratch ? align_pad(scratch) : 0, need = tok__bl_scratch_need(n, pad), p = 0, i, seg;
        unsigned char *norm;
        if (!scratch || scratch_size < need) {
            tok__fmt(t->error, sizeof t->error, "encode scratch too small: %lu bytes given, %lu needed",
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
            if (t->kind == TOK_KIND_SPM_BPE && text[i] == 0xE2) {
                int rid = -1;
                size_t r = match_u2581(t, text + i, n - i, &rid);
                if (r > m) {
                    m = r;
                    id = rid;
                }
            }
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
        tok__fmt(t->error, sizeof t->error, "too many tokens: the text needs %d, room for %d", o.count, max_tokens);
        return TOK_ERR_SPACE;
    }
    return o.count;
}

