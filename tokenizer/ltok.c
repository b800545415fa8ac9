/* tokenizer/ltok.c -- LTOK files, the rank-merged BPE tokenizers' format
 * (FORMAT.md, "The tokenizer file"): byte-level BPE (kind 1) and
 * sentencepiece-style BPE with byte fallback (kind 2, Gemma 3's
 * tokenizer.json). The whole file checked (tok__ltok_parse) and tok_init's
 * LTOK half (tok__ltok_init).
 *
 * An LTOK file: a 64-byte header, then
 * u8 token_flags[V] (padded to 4), u32 piece_end[V], u32 sorted[V],
 * n_merges x {u32 left, right, rank, result}, the default system prompt,
 * the piece bytes. Everything is read in place; tok_init copies offsets,
 * lengths and the sorted index into the arena. */
#include "../tokenizer.h"

#include <stdint.h>
#include <string.h>

#include "internal.h"

#define LTOK_HEADER 64
#define LTOK_MAX_VOCAB (1L << 22)
#define LTOK_MAX_MERGES (1L << 26)

int tok__is_ltok(const unsigned char *b, size_t n) {
    return b && n >= 4 && b[0] == 'L' && b[1] == 'T' && b[2] == 'O' && b[3] == 'K';
}

static uint32_t ltok_start(const unsigned char *b, const ltok_info *h, long i) {
    return i ? rd_u32(b + h->off_ends + 4 * (uint64_t)(i - 1)) : 0;
}

static uint32_t ltok_end(const unsigned char *b, const ltok_info *h, long i) {
    return rd_u32(b + h->off_ends + 4 * (uint64_t)i);
}

/* bytes of piece i compared with piece j: <0, 0, >0 */
static int ltok_cmp(const unsigned char *b, const ltok_info *h, long i, long j) {
    const unsigned char *p = b + h->off_pieces + ltok_start(b, h, i);
    const unsigned char *q = b + h->off_pieces + ltok_start(b, h, j);
    uint32_t pl = ltok_end(b, h, i) - ltok_start(b, h, i), ql = ltok_end(b, h, j) - ltok_start(b, h, j);
    uint32_t m = pl < ql ? pl : ql, k;
    for (k = 0; k < m; k++)
        if (p[k] != q[k]) return p[k] < q[k] ? -1 : 1;
    return pl < ql ? -1 : pl > ql;
}

/* The header's version, size and kind: the ones this build reads. */
static int ltok_check_version(const unsigned char *b, size_t n, char *err, size_t cap) {
    uint32_t version, hsize, kind;

    if (n < LTOK_HEADER) {
        tok__fmt(err, cap, "LTOK tokenizer truncated: %lu bytes, the header alone is %d",
                 (unsigned long)n, LTOK_HEADER);
        return -1;
    }
    version = rd_u32(b + 4);
    hsize = rd_u32(b + 8);
    kind = rd_u32(b + 12);
    if (version != 1) {
        tok__fmt(err, cap, "LTOK tokenizer version %lu: this build reads version 1%s",
                 (unsigned long)version, version > 1 ? " (update the engine)" : "");
        return -1;
    }
    if (hsize != LTOK_HEADER) {
        tok__fmt(err, cap, "bad LTOK header: header_size %lu, expected %d", (unsigned long)hsize, LTOK_HEADER);
        return -1;
    }
    if (kind != TOK_KIND_BYTE_LEVEL && kind != TOK_KIND_SPM_BPE) {
        tok__fmt(err, cap, "LTOK tokenizer kind %lu not supported (1: byte-level BPE, 2: "
                 "sentencepiece-style BPE; scored sentencepiece uses llama2.c's tokenizer.bin)",
                 (unsigned long)kind);
        return -1;
    }
    return 0;
}

/* The header's fields into h, each in its range (vocab_size > 0: the model's). */
static int ltok_read_header(const unsigned char *b, int vocab_size, ltok_info *h, char *err, size_t cap) {
    h->kind = rd_u32(b + 12);
    h->model_vocab = vocab_size;
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
    if (h->kind == TOK_KIND_SPM_BPE ? h->pre != TOK_PRE_NONE : (h->pre < TOK_PRE_GPT2 || h->pre > TOK_PRE_SMOLLM)) {
        tok__fmt(err, cap, "bad LTOK header: pre_tokenizer %lu unknown for kind %lu", (unsigned long)h->pre,
                 (unsigned long)h->kind);
        return -1;
    }
    if (h->norm > TOK_NORM_NFC) {
        tok__fmt(err, cap, "bad LTOK header: unknown normalizer %lu", (unsigned long)h->norm);
        return -1;
    }
    if (h->flags & ~3u) {
        tok__fmt(err, cap, "bad LTOK header: flags %lu has unknown bits (0..3)", (unsigned long)h->flags);
        return -1;
    }
    if (h->tmpl >= TOK_CHAT_COUNT) {
        tok__fmt(err, cap, "bad LTOK header: unknown chat_template %lu", (unsigned long)h->tmpl);
        return -1;
    }
    if (h->vocab < 256 || h->vocab > LTOK_MAX_VOCAB) {
        tok__fmt(err, cap, "bad LTOK header: vocab_size %ld outside 256..%ld", h->vocab, LTOK_MAX_VOCAB);
        return -1;
    }
    /* more entries than the model: allowed when each extra one is a special
     * token (ltok_check_tokens), which a model never sees unless typed with --special */
    if (vocab_size > 0 && h->bos >= vocab_size) {
        tok__fmt(err, cap, "tokenizer's bos id %ld is not below the model's vocab_size %d: wrong tokenizer file?",
                 h->bos, vocab_size);
        return -1;
    }
    if (h->merges < 0 || h->merges > LTOK_MAX_MERGES) {
        tok__fmt(err, cap, "bad LTOK header: n_merges %ld outside 0..%ld", h->merges, LTOK_MAX_MERGES);
        return -1;
    }
    if (h->bos < -1 || h->bos >= h->vocab || h->eos < -1 || h->eos >= h->vocab ||
        h->eot < -1 || h->eot >= h->vocab) {
        tok__fmt(err, cap, "bad LTOK header: bos %ld / eos %ld / eot %ld not -1 or an id below %ld",
                 h->bos, h->eos, h->eot, h->vocab);
        return -1;
    }
    if ((h->flags & 1) && h->bos < 0) {
        tok__fmt(err, cap, "bad LTOK header: add_bos is set but bos_id is -1");
        return -1;
    }
    if (h->max_len < 1 || h->max_len > 65536) {
        tok__fmt(err, cap, "bad LTOK header: max_token_length %lu outside 1..65536", (unsigned long)h->max_len);
        return -1;
    }
    return 0;
}

/* The sections' offsets (every one in 64 bits); the file ends where the pieces do. */
static int ltok_locate_sections(size_t n, ltok_info *h, char *err, size_t cap) {
    uint64_t end;

    h->off_flags = LTOK_HEADER;
    h->off_ends = h->off_flags + (((uint64_t)h->vocab + 3) & ~(uint64_t)3);
    h->off_sorted = h->off_ends + 4 * (uint64_t)h->vocab;
    h->off_merges = h->off_sorted + 4 * (uint64_t)h->vocab;
    h->off_sys = h->off_merges + 16 * (uint64_t)h->merges;
    h->off_pieces = h->off_sys + h->sys_len;
    end = h->off_pieces + h->pieces_size;
    if (end != (uint64_t)n) {
        tok__fmt(err, cap, "LTOK tokenizer %s: the header implies %llu bytes, the file has %lu",
                 end > (uint64_t)n ? "truncated" : "has trailing bytes", (unsigned long long)end,
                 (unsigned long)n);
        return -1;
    }
    return 0;
}

/* The id whose piece is <0xNN> in kind 2 (the byte-fallback tokens), else -1. */
static int ltok_fallback_byte(const unsigned char *p, uint32_t len) {
    int hi, lo;
    if (len != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    hi = tok__hexval(p[3]);
    lo = tok__hexval(p[4]);
    return hi < 0 || lo < 0 || p[3] > 'F' || p[4] > 'F' ? -1 : hi * 16 + lo;   /* upper-case hex */
}

/* Token flags (n_added counted) and pieces: each inside the piece bytes, not
 * empty, at most max_token_length; a piece for every byte (kind 1: the byte
 * itself, kind 2: its <0xNN>); entries past the model's vocabulary special. */
static int ltok_check_tokens(const unsigned char *b, ltok_info *h, char *err, size_t cap) {
    long i;
    int seen[256];
    unsigned known = h->kind == TOK_KIND_SPM_BPE ? 7u : 3u;

    h->n_added = 0;
    for (i = 0; i < h->vocab; i++) {
        unsigned f = b[h->off_flags + i];
        if (f & ~known) {
            tok__fmt(err, cap, "bad LTOK token %ld: flags %u has unknown bits (0..%u)", i, f, known);
            return -1;
        }
        if ((f & TOK_FLAG_U2581) && f != (TOK_FLAG_U2581 | TOK_FLAG_ADDED)) {
            tok__fmt(err, cap, "bad LTOK token %ld: flag 4 (U+2581 run) without flag 2 (added) alone", i);
            return -1;
        }
        if (f) h->n_added++;
        if (h->model_vocab > 0 && i >= h->model_vocab && !(f & TOK_FLAG_SPECIAL)) {
            tok__fmt(err, cap, "tokenizer has %ld entries, the model only %ld, and token %ld past it is "
                     "not special: wrong tokenizer file?", h->vocab, h->model_vocab, i);
            return -1;
        }
    }
    for (i = 0; i < 256; i++) seen[i] = 0;
    for (i = 0; i < h->vocab; i++) {
        uint32_t s = ltok_start(b, h, i), e = ltok_end(b, h, i);
        if (e < s || e > h->pieces_size || e - s == 0 || e - s > h->max_len) {
            tok__fmt(err, cap, "bad LTOK token %ld: piece bytes %lu..%lu (pieces hold %lu, "
                     "max_token_length %lu; pieces are not empty)", i, (unsigned long)s,
                     (unsigned long)e, (unsigned long)h->pieces_size, (unsigned long)h->max_len);
            return -1;
        }
        if (b[h->off_flags + i] & TOK_FLAG_U2581) {
            uint32_t k;
            for (k = s; k < e && b[h->off_pieces + k] == ' '; k++) {}
            if (k != e || e - s > TOK_U2581_MAX_RUN) {
                tok__fmt(err, cap, "bad LTOK token %ld: a U+2581 run (flag 4) that is not 1..%d spaces", i,
                         TOK_U2581_MAX_RUN);
                return -1;
            }
        }
        if (b[h->off_flags + i]) continue;
        if (h->kind == TOK_KIND_SPM_BPE) {
            int v = ltok_fallback_byte(b + h->off_pieces + s, e - s);
            if (v >= 0) seen[v] = 1;
        } else if (e - s == 1) {
            seen[b[h->off_pieces + s]] = 1;
        }
    }
    for (i = 0; i < 256; i++)
        if (!seen[i]) {
            tok__fmt(err, cap, "bad LTOK vocabulary: no piece for the byte %lu (%s)", (unsigned long)i,
                     h->kind == TOK_KIND_SPM_BPE ? "byte fallback needs all 256 <0xNN>" :
                     "a byte-level vocabulary has all 256");
            return -1;
        }
    return 0;
}

/* The sorted index: ids, in strictly increasing piece order. */
static int ltok_check_sorted(const unsigned char *b, const ltok_info *h, char *err, size_t cap) {
    long i;

    for (i = 0; i < h->vocab; i++) {
        uint32_t id = rd_u32(b + h->off_sorted + 4 * (uint64_t)i);
        if (id >= (uint32_t)h->vocab) {
            tok__fmt(err, cap, "bad LTOK sorted index: entry %ld is %lu, not an id", i, (unsigned long)id);
            return -1;
        }
        if (i > 0 && ltok_cmp(b, h, (long)rd_u32(b + h->off_sorted + 4 * (uint64_t)(i - 1)), (long)id) >= 0) {
            tok__fmt(err, cap, "bad LTOK sorted index: entries %ld and %ld out of order or "
                     "equal pieces", i - 1, i);
            return -1;
        }
    }
    return 0;
}

/* The merges: ids, sorted by (left, right), ranks below 2^31, no special
 * token (kind 1: no added one either), each result the two pieces joined. */
static int ltok_check_merges(const unsigned char *b, const ltok_info *h, char *err, size_t cap) {
    long i;

    for (i = 0; i < h->merges; i++) {
        const unsigned char *m = b + h->off_merges + 16 * (uint64_t)i;
        uint32_t l = rd_u32(m), r = rd_u32(m + 4), res = rd_u32(m + 12), ls, rs, os;
        if (l >= (uint32_t)h->vocab || r >= (uint32_t)h->vocab || res >= (uint32_t)h->vocab) {
            tok__fmt(err, cap, "bad LTOK merge %ld: ids %lu %lu -> %lu not below %ld", i,
                     (unsigned long)l, (unsigned long)r, (unsigned long)res, h->vocab);
            return -1;
        }
        if (i > 0) {
            uint32_t pl = rd_u32(m - 16), pr = rd_u32(m - 12);
            if (pl > l || (pl == l && pr >= r)) {
                tok__fmt(err, cap, "bad LTOK merge %ld: not sorted by (left, right) ids", i);
                return -1;
            }
        }
        if (rd_u32(m + 8) > (uint32_t)INT_MAX) {
            tok__fmt(err, cap, "bad LTOK merge %ld: rank %lu above 2^31 - 1", i, (unsigned long)rd_u32(m + 8));
            return -1;
        }
        {
            unsigned bad = h->kind == TOK_KIND_SPM_BPE ? TOK_FLAG_SPECIAL : 3u;
            if ((b[h->off_flags + l] | b[h->off_flags + r] | b[h->off_flags + res]) & bad) {
                tok__fmt(err, cap, "bad LTOK merge %ld: involves a special%s token", i,
                         h->kind == TOK_KIND_SPM_BPE ? "" : " or added");
                return -1;
            }
        }
        ls = ltok_end(b, h, l) - ltok_start(b, h, l);
        rs = ltok_end(b, h, r) - ltok_start(b, h, r);
        os = ltok_start(b, h, res);
        if (ltok_end(b, h, res) - os != ls + rs ||
            memcmp(b + h->off_pieces + os, b + h->off_pieces + ltok_start(b, h, l), ls) ||
            memcmp(b + h->off_pieces + os + ls, b + h->off_pieces + ltok_start(b, h, r), rs)) {
            tok__fmt(err, cap, "bad LTOK merge %ld: token %lu is not tokens %lu and %lu joined", i,
                     (unsigned long)res, (unsigned long)l, (unsigned long)r);
            return -1;
        }
    }
    return 0;
}

/* Validate the whole LTOK file (every offset in 64 bits). 0 or -1 with a message. */
int tok__ltok_parse(const unsigned char *b, size_t n, int vocab_size, ltok_info *h, char *err, size_t cap) {
    if (ltok_check_version(b, n, err, cap) || ltok_read_header(b, vocab_size, h, err, cap) ||
        ltok_locate_sections(n, h, err, cap) || ltok_check_tokens(b, h, err, cap) ||
        ltok_check_sorted(b, h, err, cap) || ltok_check_merges(b, h, err, cap))
        return -1;
    return 0;
}

size_t tok__ltok_arena_need(const ltok_info *h) {
    return (size_t)h->vocab * 3 * sizeof(int) + (size_t)h->n_added * sizeof(int) + 2 * TOK_ARENA_FIXED +
           (TOK_U2581_MAX_RUN + 1) * sizeof(int);
}

int tok__ltok_init(tok_tokenizer *t, const unsigned char *b, size_t n, int vocab_size,
                     void *arena, size_t arena_size) {
    ltok_info h;
    unsigned char *a;
    long i;
    int c, k;

    if (tok__ltok_parse(b, n, vocab_size, &h, t->error, sizeof t->error)) return TOK_ERR_FORMAT;
    a = tok__claim_arena(t, arena, arena_size, tok__ltok_arena_need(&h));
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
    t->u2581_run = (int *)(void *)a;
    a += (TOK_U2581_MAX_RUN + 1) * sizeof(int);
    for (k = 0; k <= TOK_U2581_MAX_RUN; k++) t->u2581_run[k] = -1;
    t->added = (int *)(void *)a;

    t->kind = (int)h.kind;
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
    for (i = 0; i < h.vocab; i++) {
        if (t->token_flags[i] & TOK_FLAG_U2581) t->u2581_run[t->piece_len[i]] = (int)i;
        if (t->token_flags[i]) continue;
        if (t->kind == TOK_KIND_SPM_BPE) {   /* byte fallback: <0xNN> */
            int v = ltok_fallback_byte(b + t->piece_offset[i], (uint32_t)t->piece_len[i]);
            if (v >= 0) t->byte_token[v] = (int)i;
        } else if (t->piece_len[i] == 1) {
            t->byte_token[b[t->piece_offset[i]]] = (int)i;
        }
    }
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

