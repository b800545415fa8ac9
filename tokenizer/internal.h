/* tokenizer/internal.h -- what the tokenizer's parts share; not public
 * (tokenizer.h is the API). The arena's and the scratch's layout constants, an
 * LTOK file's header fields, the sentencepiece encoder's symbol and pair (their
 * sizes bound the text length), the little-endian readers, and the functions
 * one part calls in another: tokenizer.c (core: init dispatch, encode dispatch,
 * decode, errors), spm.c, ltok.c, bpe.c, nfc.c. */
#ifndef TOK__INTERNAL_H
#define TOK__INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../tokenizer.h"

/* Alignment of the 4-byte types carved out of the arena and the scratch. */
struct tok_align_probe { char c; union { int i; unsigned u; float f; } x; };
#define TOK_ALIGN (offsetof(struct tok_align_probe, x))

/* arena: per vocabulary entry an offset, a length, a score and a sorted index;
 * then 257 ints of first-byte ranges into the sorted index */
#define TOK_PER_ENTRY (sizeof(unsigned int) + sizeof(int) + sizeof(float) + sizeof(int))
#define TOK_ARENA_FIXED (257 * sizeof(int))

/* An error message into a caller's buffer (engine/fmt.h's formatter, one
 * copy in tokenizer.c): no stdio, always NUL-terminated, truncated. */
#if defined(__GNUC__)
void tok__fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#else
void tok__fmt(char *buf, size_t cap, const char *fmt, ...);
#endif

/* An LTOK file's header fields and section offsets (ltok.c). */
typedef struct {
    long vocab, merges, n_added;
    long model_vocab;   /* the model's vocab_size tok_init was given, or <= 0 */
    uint32_t kind, pre, norm, flags, tmpl, max_len, sys_len, pieces_size;
    long bos, eos, eot;
    uint64_t off_flags, off_ends, off_sorted, off_merges, off_sys, off_pieces;
} ltok_info;

/* The sentencepiece encoder's (spm.c) symbols and candidate pairs. */
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

/* Largest text length tok_encode accepts (int offsets, 3 bytes per bad byte). */
#define TOK_MAX_TEXT ((size_t)(INT_MAX / 4))

static inline uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline long rd_i32(const unsigned char *p)
{
    uint32_t v = rd_u32(p);
    return (v & 0x80000000u) ? -(long)(~v) - 1 : (long)v;
}

static inline float rd_f32(const unsigned char *p)
{
    uint32_t v = rd_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

static inline size_t align_pad(const void *p)
{
    size_t mis = (size_t)((uintptr_t)p % TOK_ALIGN);
    return mis ? TOK_ALIGN - mis : 0;
}

static inline void emit(int *tokens, int max_tokens, int *count, int id)
{
    if (*count < max_tokens) tokens[*count] = id;
    if (*count < INT_MAX) (*count)++;
}

/* core (tokenizer.c) */
unsigned char *tok__claim_arena(tok_tokenizer *t, void *arena, size_t arena_size, size_t need);
int tok__hexval(unsigned char c);
int tok__is_normal(const tok_tokenizer *t, int id);
int tok__cmp_piece(const tok_tokenizer *t, int id, const unsigned char *s, int len);
int tok__lookup(const tok_tokenizer *t, const unsigned char *s, int len);
int tok__text_len_ok(size_t n);

/* sentencepiece over tokenizer.bin (spm.c) */
long tok__spm_parse_file(const unsigned char *b, size_t n, int vocab_size, char *err, size_t cap);
int tok__spm_init(tok_tokenizer *t, const unsigned char *b, size_t n_bytes, int vocab_size,
                  void *arena, size_t arena_size);
size_t tok__spm_scratch_need(size_t n, size_t pad);
int tok__spm_encode(tok_tokenizer *t, const char *text, size_t n, int bos, int eos,
                    int *tokens, int max_tokens, void *scratch, size_t scratch_size);

/* LTOK files (ltok.c) */
int tok__is_ltok(const unsigned char *b, size_t n);
int tok__ltok_parse(const unsigned char *b, size_t n, int vocab_size, ltok_info *h, char *err, size_t cap);
size_t tok__ltok_arena_need(const ltok_info *h);
int tok__ltok_init(tok_tokenizer *t, const unsigned char *b, size_t n, int vocab_size,
                   void *arena, size_t arena_size);

/* byte-level BPE (bpe.c) */
uint32_t tok__cp_at(const unsigned char *s, size_t i, size_t e, size_t *len);
int tok__in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c);
size_t tok__utf8_replace(unsigned char *out, const unsigned char *s, size_t n);
size_t tok__bl_scratch_need(size_t n, size_t pad);
int tok__bl_encode(tok_tokenizer *t, const unsigned char *text, size_t n, int bos, int eos,
                   int *tokens, int max_tokens, void *scratch, size_t scratch_size);

/* NFC (nfc.c) */
size_t tok__nfc_inplace(unsigned char *s, size_t len, uint32_t *work);

#endif /* TOK__INTERNAL_H */
