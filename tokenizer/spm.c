/* tokenizer/spm.c -- sentencepiece BPE over llama2.c's tokenizer.bin: the
 * file checked, the arena filled (tok_init's sentencepiece half) and the encoder
 * (tok_encode's sentencepiece half).
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
#include "../tokenizer.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* Walk and validate the whole file. Returns the number of entries, or -1 with
 * a message in err. vocab_size > 0: the count the model expects. */
long tok__spm_parse_file(const unsigned char *b, size_t n, int vocab_size, char *err, size_t cap) {
    long max_len, count = 0;
    size_t off = 4;

    if (!b && n > 0) {
        tok__fmt(err, cap, "no tokenizer data (null pointer)");
        return -1;
    }
    if (n == 0) {
        tok__fmt(err, cap, "tokenizer file is empty");
        return -1;
    }
    if (n < 4) {
        tok__fmt(err, cap, "tokenizer file too short: %lu bytes, the header alone is 4",
                 (unsigned long)n);
        return -1;
    }
    if (n > (size_t)UINT_MAX || n / 8 > (size_t)INT_MAX) {
        tok__fmt(err, cap, "tokenizer file too large");
        return -1;
    }
    max_len = rd_i32(b);
    if (max_len <= 0) {
        tok__fmt(err, cap, "bad tokenizer header: max_token_length %ld (must be positive)", max_len);
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
                    tok__fmt(err, cap, "tokenizer has %ld entries, the model expects %d: "
                         "wrong tokenizer file?", count + extra, vocab_size);
                else
                    tok__fmt(err, cap, "%lu bytes of trailing garbage after the %d entries "
                         "the model expects (byte offset %lu)", (unsigned long)left, vocab_size,
                         (unsigned long)off);
            }
            return -1;
        }
        if (left < 8) {
            tok__fmt(err, cap, "tokenizer truncated: entry %ld at byte offset %lu needs 8 "
                     "header bytes, %lu left", count, (unsigned long)off, (unsigned long)left);
            return -1;
        }
        score = rd_f32(b + off);
        len = rd_i32(b + off + 4);
        if (score != score) {
            tok__fmt(err, cap, "bad tokenizer entry %ld at byte offset %lu: score is NaN",
                     count, (unsigned long)off);
            return -1;
        }
        if (len < 0 || len > max_len) {
            tok__fmt(err, cap, "bad tokenizer entry %ld at byte offset %lu: length %ld "
                     "outside 0..%ld (max_token_length)", count, (unsigned long)off, len, max_len);
            return -1;
        }
        if ((size_t)len > left - 8) {
            tok__fmt(err, cap, "tokenizer truncated: entry %ld at byte offset %lu has length "
                     "%ld, only %lu bytes left", count, (unsigned long)off, len,
                     (unsigned long)(left - 8));
            return -1;
        }
        off += 8 + (size_t)len;
        count++;
    }
    if (vocab_size > 0 && count != vocab_size) {
        tok__fmt(err, cap, "tokenizer has %ld entries, the model expects %d: wrong tokenizer file?",
                 count, vocab_size);
        return -1;
    }
    if (count < 3) {
        tok__fmt(err, cap, "tokenizer has %ld entries, needs at least 3 (<unk>, <s>, </s>)", count);
        return -1;
    }
    return count;
}

/* Sort order: piece bytes, then normal pieces first, then id. */
static int cmp_ids(const tok_tokenizer *t, int a, int b) {
    int c = tok__cmp_piece(t, a, t->bytes + t->piece_offset[b], t->piece_len[b]);
    int na, nb;
    if (c) return c;
    na = tok__is_normal(t, a);
    nb = tok__is_normal(t, b);
    if (na != nb) return na ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* a[lo..mid) and a[mid..hi), each in order, merged into out[lo..hi) */
static void merge_ids(const tok_tokenizer *t, const int *a, int lo, int mid, int hi, int *out) {
    int i = lo, j = mid, k = lo;
    while (i < mid && j < hi) out[k++] = cmp_ids(t, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < mid) out[k++] = a[i++];
    while (j < hi) out[k++] = a[j++];
}

/* Sort ids by cmp_ids: runs of 8 by insertion, then merged pairwise, back
 * and forth between a and scratch (n ints). cmp_ids is a total order (ties
 * go by id), so any sort gives this order; a merge sort reads the pieces in
 * runs, where the heapsort before it jumped across the vocabulary. */
static void sort_ids(const tok_tokenizer *t, int *a, int *scratch, int n) {
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

/* tok_init's sentencepiece half: the file checked, its offsets, lengths,
 * scores and sorted index in the arena. */
int tok__spm_init(tok_tokenizer *t, const unsigned char *b, size_t n_bytes, int vocab_size,
                  void *arena, size_t arena_size) {
    unsigned char *a;
    size_t off;
    long count;
    int i;

    count = tok__spm_parse_file(b, n_bytes, vocab_size, t->error, sizeof t->error);
    if (count < 0) return TOK_ERR_FORMAT;

    a = tok__claim_arena(t, arena, arena_size, (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED);
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
        hi = tok__hexval(p[3]);
        lo = tok__hexval(p[4]);
        if (hi >= 0 && lo >= 0 && t->byte_token[hi * 16 + lo] < 0) t->byte_token[hi * 16 + lo] = i;
    }

    /* Can encoding go word by word? Only if no normal piece has a space
     * after a non-space byte (true of sentencepiece vocabularies trained with
     * split_by_whitespace, the default: Llama 2's and tok512). */
    t->word_split = 1;
    for (i = 0; i < count && t->word_split; i++) {
        const unsigned char *p = b + t->piece_offset[i];
        int j;
        if (!tok__is_normal(t, i)) continue;
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

/* Length of the well-formed UTF-8 sequence at s (n bytes available), or 0. */
static int utf8_len(const unsigned char *s, size_t n) {
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

size_t tok__spm_scratch_need(size_t n, size_t pad) {
    /* n + 1 symbols (dummy prefix + at most one per byte); at most 2n pairs in
     * the heap at once (n - 1 initial, each merge pops one and pushes at most
     * two, at most n merges); the normalized text: 1 + 3n bytes. */
    return pad + (n + 1) * sizeof(tok_symbol) + 2 * n * sizeof(tok_pair) + 3 * n + 1;
}

static int pair_better(const tok_pair *a, const tok_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(tok_pair *h, int *hn, tok_pair p) {
    int i = (*hn)++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!pair_better(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static tok_pair heap_pop(tok_pair *h, int *hn) {
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
                     int left, tok_pair *h, int *hn) {
    int right, len, id;
    tok_pair p;
    if (left < 0) return;
    right = sym[left].next;
    if (right < 0) return;
    len = sym[left].len + sym[right].len;
    if (len > t->max_token_length) return;
    id = tok__lookup(t, norm + sym[left].start, len);
    if (id < 0) return;
    p.score = t->score[id];
    p.left = left;
    p.id = id;
    heap_push(h, hn, p);
}

/* tok_encode's sentencepiece half (t initialized, text n bytes long). */
int tok__spm_encode(tok_tokenizer *t, const char *text, size_t n, int bos, int eos,
                    int *tokens, int max_tokens, void *scratch, size_t scratch_size) {
    int count = 0;


    if (bos) emit(tokens, max_tokens, &count, t->bos_id);
    if (n > 0) {
        const unsigned char *s = (const unsigned char *)text;
        size_t pad, need, i, p;
        tok_symbol *sym;
        tok_pair *heap;
        unsigned char *norm;
        int m, hn = 0, k, a, e;

        if (!tok__text_len_ok(n)) {
            tok__fmt(t->error, sizeof t->error, "text too long to encode: %lu bytes", (unsigned long)n);
            return TOK_ERR_SPACE;
        }
        pad = scratch ? align_pad(scratch) : 0;
        need = tok__spm_scratch_need(n, pad);
        if (!scratch || scratch_size < need) {
            tok__fmt(t->error, sizeof t->error, "encode scratch too small: %lu bytes given, %lu needed",
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
        for (k = 0; k < m; k++) sym[k].id = tok__lookup(t, norm + sym[k].start, sym[k].len);
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
        tok__fmt(t->error, sizeof t->error, "too many tokens: the text needs %d, room for %d", count, max_tokens);
        return TOK_ERR_SPACE;
    }
    return count;
}
