/* tokenizer.c -- the tokenizer's core: tok_init tells the file kinds
 * apart (the magic "LTOK": byte-level or sentencepiece-style BPE merged by
 * rank, tokenizer/ltok.c and bpe.c; else
 * llama2.c's tokenizer.bin: sentencepiece BPE, tokenizer/spm.c) and hands the
 * file to its part; tok_encode checks its arguments and dispatches the same
 * way; decoding, piece lookup, scratch sizes, errors and status texts are
 * here. Chat templates: tokenizer/chat.c; NFC: tokenizer/nfc.c; what the
 * parts share: tokenizer/internal.h. */
#include "tokenizer.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "engine/fmt.h"   /* llm__vfmt: model.h's message formatter */
#include "tokenizer/internal.h"

/* The tokenizer's one copy of the formatter (tokenizer/internal.h). */
void tok__fmt(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    llm__vfmt(buf, cap, fmt, ap);
    va_end(ap);
}

size_t tok_arena_size(const void *bytes, size_t n_bytes, int vocab_size) {
    long count;
    if (tok__is_ltok((const unsigned char *)bytes, n_bytes)) {
        ltok_info h;
        if (tok__ltok_parse((const unsigned char *)bytes, n_bytes, vocab_size, &h, NULL, 0)) return 0;
        return tok__ltok_arena_need(&h) + (TOK_ALIGN - 1);
    }
    count = tok__spm_parse_file((const unsigned char *)bytes, n_bytes, vocab_size, NULL, 0);
    if (count < 0) return 0;
    return (size_t)count * TOK_PER_ENTRY + TOK_ARENA_FIXED + (TOK_ALIGN - 1);
}

/* The aligned start of an arena holding `need` bytes past its alignment
 * padding, or NULL with the error set. */
unsigned char *tok__claim_arena(tok_tokenizer *t, void *arena, size_t arena_size, size_t need) {
    size_t pad = arena ? align_pad(arena) : 0;
    if (!arena || arena_size < pad + need) {
        tok__fmt(t->error, sizeof t->error, "tokenizer arena too small: %lu bytes given, %lu needed",
                 (unsigned long)(arena ? arena_size : 0), (unsigned long)(pad + need));
        return NULL;
    }
    return (unsigned char *)arena + pad;
}

int tok__hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte value if `id` is the vocabulary's byte-fallback token <0xNN>, else -1. */
static int byte_of(const tok_tokenizer *t, int id) {
    const unsigned char *p;
    int hi, lo;
    if (t->kind == TOK_KIND_BYTE_LEVEL || t->piece_len[id] != 6) return -1;
    p = t->bytes + t->piece_offset[id];
    if (p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    hi = tok__hexval(p[3]);
    lo = tok__hexval(p[4]);
    if (hi < 0 || lo < 0) return -1;
    return t->byte_token[hi * 16 + lo] == id ? hi * 16 + lo : -1;
}

/* Pieces that lookup and merges may produce: not <unk>/<s>/</s>, not <0xNN>
 * (byte-level: no special or added token; sentencepiece-style LTOK: no
 * special one, the added ones being merge results there). */
int tok__is_normal(const tok_tokenizer *t, int id) {
    if (t->kind == TOK_KIND_BYTE_LEVEL) return t->token_flags[id] == 0;
    if (t->kind == TOK_KIND_SPM_BPE) return !(t->token_flags[id] & TOK_FLAG_SPECIAL);
    return id > TOK_EOS && byte_of(t, id) < 0;   /* the file's control ids are 0..2 */
}

int tok__cmp_piece(const tok_tokenizer *t, int id, const unsigned char *s, int len) {
    const unsigned char *p = t->bytes + t->piece_offset[id];
    int plen = t->piece_len[id];
    int m = plen < len ? plen : len, i;
    for (i = 0; i < m; i++)   /* pieces are short: a loop beats a memcmp call */
        if (p[i] != s[i]) return p[i] < s[i] ? -1 : 1;
    return plen < len ? -1 : plen > len;
}

int tok_init(tok_tokenizer *t, const void *bytes, size_t n_bytes, int vocab_size,
             void *arena, size_t arena_size) {
    const unsigned char *b = (const unsigned char *)bytes;
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
    t->u2581_run = NULL;
    for (i = 0; i < 256; i++) {
        t->byte_token[i] = -1;
        t->byte_value[i] = (unsigned char)i;
    }
    t->error[0] = '\0';
    if (tok__is_ltok(b, n_bytes)) return tok__ltok_init(t, b, n_bytes, vocab_size, arena, arena_size);
    return tok__spm_init(t, b, n_bytes, vocab_size, arena, arena_size);
}

/* Id of the normal piece with exactly these bytes (len >= 1), or -1. */
int tok__lookup(const tok_tokenizer *t, const unsigned char *s, int len) {
    int lo = t->first_byte[s[0]], hi = t->first_byte[s[0] + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (tok__cmp_piece(t, t->sorted[mid], s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    /* normal pieces sort before special ones with the same bytes */
    if (lo < t->first_byte[s[0] + 1] && tok__cmp_piece(t, t->sorted[lo], s, len) == 0 &&
        tok__is_normal(t, t->sorted[lo]))
        return t->sorted[lo];
    return -1;
}

int tok_ends_text(const tok_tokenizer *t, int token) {
    if (token == t->bos_id) return 1;
    return t->kind != TOK_KIND_SENTENCEPIECE && (token == t->eos_id || token == t->eot_id);
}

int tok_piece_id(const tok_tokenizer *t, const char *piece, size_t len) {
    const unsigned char *s = (const unsigned char *)piece;
    if (!t || !t->sorted || !piece || len == 0 || len > (size_t)t->max_token_length) return -1;
    int lo = t->first_byte[s[0]], hi = t->first_byte[s[0] + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (tok__cmp_piece(t, t->sorted[mid], s, (int)len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->first_byte[s[0] + 1] && tok__cmp_piece(t, t->sorted[lo], s, (int)len) == 0) return t->sorted[lo];
    return -1;
}

/* Short enough for int offsets and for scratch_need not to overflow size_t? */
/* Scratch bytes per byte of text of the byte-level path (bl_scratch_need): 3
 * bytes of normalized text, each with a symbol (3 ints) and a heap entry (2
 * ints), and at most one byte of merge cache; its constant part is below 64. */
#define BL_PER_BYTE (3 * (1 + 5 * sizeof(int)) + 1)

int tok__text_len_ok(size_t n) {
    size_t sp = sizeof(tok_symbol) + 2 * sizeof(tok_pair) + 3;
    size_t per = sp > BL_PER_BYTE ? sp : BL_PER_BYTE;
    return n <= TOK_MAX_TEXT && n <= (SIZE_MAX - 64 - sizeof(tok_symbol)) / per;
}

size_t tok_encode_scratch_size(size_t text_len) {
    size_t sp, bl;
    if (!tok__text_len_ok(text_len)) return 0;
    sp = tok__spm_scratch_need(text_len, TOK_ALIGN - 1);
    bl = tok__bl_scratch_need(text_len, TOK_ALIGN - 1);
    return sp > bl ? sp : bl;   /* either kind of file */
}

size_t tok_max_tokens(size_t text_len) {
    /* a dummy-prefix space, 3 byte-fallback ids per byte (a bad byte is
     * U+FFFD, three bytes), BOS and EOS */
    return tok__text_len_ok(text_len) ? 3 * text_len + 3 : 0;
}

int tok_encode(tok_tokenizer *t, const char *text, int bos, int eos,
               int *tokens, int max_tokens, void *scratch, size_t scratch_size) {
    size_t n;

    if (!t) return TOK_ERR_ARG;
    if (t->vocab_size <= 0) {
        tok__fmt(t->error, sizeof t->error, "tokenizer not initialized");
        return TOK_ERR_ARG;
    }
    t->error[0] = '\0';
    if (!text) text = "";
    if (!tokens || max_tokens < 0) max_tokens = 0;
    n = strlen(text);
    if (t->kind != TOK_KIND_SENTENCEPIECE) {   /* LTOK */
        if (!tok__text_len_ok(n)) {
            tok__fmt(t->error, sizeof t->error, "text too long to encode: %lu bytes", (unsigned long)n);
            return TOK_ERR_SPACE;
        }
        return tok__bl_encode(t, (const unsigned char *)text, n, bos, eos, tokens, max_tokens, scratch, scratch_size);
    }
    return tok__spm_encode(t, text, n, bos, eos, tokens, max_tokens, scratch, scratch_size);
}

const char *tok_decode(const tok_tokenizer *t, int prev, int token, size_t *len) {
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
    if (t->kind == TOK_KIND_SENTENCEPIECE && prev == t->bos_id && l > 0 && p[0] == ' ') {
        p++;
        l--;
    }
    *len = l;
    return (const char *)p;
}

const char *tok_error(const tok_tokenizer *t) {
    return t ? t->error : "no tokenizer";
}

const char *tok_status_text(int status) {
    switch (status) {
    case TOK_OK: return "ok";
    case TOK_ERR_FORMAT: return "bad tokenizer file";
    case TOK_ERR_ARENA: return "tokenizer arena too small";
    case TOK_ERR_ARG: return "bad argument";
    case TOK_ERR_SPACE: return "text, scratch or output too large for its buffer";
    }
    return "unknown status";
}
