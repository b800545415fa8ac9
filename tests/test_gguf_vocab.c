/* test_gguf_vocab.c -- the GGUF tokenizer conversion (tokenizer/gguf.c)
 * through its C API, without ./run and without a file: each key's value is
 * built in memory as GGUF lays it out (an llm_gguf_value over exact-size
 * malloc'd bytes, so an AddressSanitizer build catches any read outside it).
 *
 *   build/test_gguf_vocab
 *
 * A small sentencepiece vocabulary and a small byte-level one are converted,
 * read by tok_init and encoded / decoded; the ids, image sizes and settings
 * expected are worked out by hand from the formats (FORMAT.md) and the BPE
 * rules (sentencepiece: best score first; byte-level: lowest rank first).
 * Hostile values (wrong element types, counts beyond the bytes, missing
 * scores, merges of unknown pieces, over-long strings, an empty vocabulary,
 * ids out of range, buffers too small) each give a specific status and
 * message. Prints "ok NAME" or "FAIL NAME" per test, then "N passed, N failed".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model.h"       /* llm_gguf_value (declarations only) */
#include "../tokenizer.h"
#include "expect.h"




/* ---- GGUF values in memory ---------------------------------------------- */

enum { GV_U8 = 0, GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_U64 = 10, GV_F64 = 12 };

#define MAX_BLOCKS 4096
static void *blocks[MAX_BLOCKS];
static int n_blocks;

static unsigned char *block(size_t n) {
    unsigned char *p = (unsigned char *)malloc(n ? n : 1);
    if (!p || n_blocks == MAX_BLOCKS) { printf("out of memory\n"); exit(2); }
    blocks[n_blocks++] = p;
    return p;
}

static void free_blocks(void) {
    while (n_blocks) free(blocks[--n_blocks]);
}

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static llm_gguf_value value(int type, int is_array, uint64_t count, const unsigned char *data, uint64_t bytes) {
    llm_gguf_value v;
    v.type = type; v.is_array = is_array; v.count = count; v.data = data; v.bytes = bytes;
    return v;
}

/* n strings (lens[i] bytes each, or strlen when lens is NULL), each a u64 length and its bytes */
static llm_gguf_value strings_n(const char *const *s, const size_t *lens, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += 8 + (lens ? lens[i] : strlen(s[i]));
    unsigned char *p = block(total), *q = p;
    for (int i = 0; i < n; i++) {
        size_t l = lens ? lens[i] : strlen(s[i]);
        put_le(q, l, 8);
        memcpy(q + 8, s[i], l);
        q += 8 + l;
    }
    return value(GV_STRING, 1, (uint64_t)n, p, total);
}

static llm_gguf_value strings(const char *const *s, int n) { return strings_n(s, NULL, n); }

static llm_gguf_value string(const char *s) {
    llm_gguf_value v = strings(&s, 1);
    v.is_array = 0;
    return v;
}

static llm_gguf_value ints(int type, const long long *x, int n) {
    int size = type == GV_U8 || type == GV_BOOL ? 1 : type == GV_U64 ? 8 : 4;
    unsigned char *p = block((size_t)n * size);
    for (int i = 0; i < n; i++) put_le(p + (size_t)i * size, (uint64_t)x[i], size);
    return value(type, 1, (uint64_t)n, p, (uint64_t)n * size);
}

static llm_gguf_value scalar(int type, long long x) {
    llm_gguf_value v = ints(type, &x, 1);
    v.is_array = 0;
    return v;
}

static llm_gguf_value floats(const float *x, int n) {
    unsigned char *p = block((size_t)n * 4);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        put_le(p + 4 * i, u, 4);
    }
    return value(GV_F32, 1, (uint64_t)n, p, (uint64_t)n * 4);
}

/* ---- the conversion, each buffer at its exact size ----------------------- */

typedef struct conv {
    llm_gguf_value v[TOK_GGUF_KEY_COUNT];
    tok_gguf g;
    unsigned char *image;
    void *scratch, *arena;
    char *system;
    size_t len;
    tok_tokenizer t;
    int stage;   /* the step that failed: 1 size, 2 image, 3 tok_init, 4 apply; 0: none */
} conv;

static void set(conv *c, int key, llm_gguf_value v) {
    c->v[key] = v;
    c->g.key[key] = &c->v[key];
}

static void unset(conv *c, int key) { c->g.key[key] = NULL; }

/* size, image, tok_init, apply: 0 or the first failure's status (c->stage says where) */
static int convert(conv *c) {
    int st;
    c->stage = 1;
    if ((st = tok_gguf_size(&c->g))) return st;
    c->image = block(c->g.image_size);
    c->scratch = c->g.scratch_size ? block(c->g.scratch_size) : NULL;
    c->stage = 2;
    if ((st = tok_gguf_image(&c->g, c->image, c->g.image_size, c->scratch, c->g.scratch_size, &c->len))) return st;
    size_t need = tok_arena_size(c->image, c->len, c->g.vocab_size);
    c->arena = block(need);
    c->stage = 3;
    if ((st = tok_init(&c->t, c->image, c->len, c->g.vocab_size, c->arena, need))) return st;
    c->system = c->g.system_size ? (char *)block(c->g.system_size) : NULL;
    c->stage = 4;
    if ((st = tok_gguf_apply(&c->g, &c->t, c->system, c->g.system_size))) return st;
    c->stage = 0;
    return 0;
}

/* the ids of text (no BOS unless bos), in ids; the count or negative */
static int encode(tok_tokenizer *t, const char *text, int bos, int *ids, int max) {
    size_t ss = tok_encode_scratch_size(strlen(text));
    void *scratch = malloc(ss);
    int n = tok_encode(t, text, bos, 0, ids, max, scratch, ss);
    free(scratch);
    return n;
}

static int same_ids(const int *got, int n, const int *want, int n_want) {
    return n == n_want && !memcmp(got, want, (size_t)n * sizeof *got);
}

static int decodes_to(const tok_tokenizer *t, int prev, int id, const char *want) {
    size_t len;
    const char *p = tok_decode(t, prev, id, &len);
    return len == strlen(want) && !memcmp(p, want, len);
}

/* ---- a sentencepiece vocabulary ("llama") -------------------------------- */

#define SP "\xe2\x96\x81"   /* U+2581, sentencepiece's space */
static const char *const sp_tokens[] = { "<unk>", "<s>", "</s>", SP, "a", "b", SP "a", "ab", SP "ab" };
static const long long sp_types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1 };
static const float sp_scores[] = { 0, 0, 0, -1.0f, -2.0f, -3.0f, -0.5f, -0.7f, -0.2f };

static void sentencepiece(conv *c) {
    memset(c, 0, sizeof *c);
    c->g.vocab_size = 9;
    set(c, TOK_GGUF_MODEL, string("llama"));
    set(c, TOK_GGUF_TOKENS, strings(sp_tokens, 9));
    set(c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, sp_types, 9));
    set(c, TOK_GGUF_SCORES, floats(sp_scores, 9));
    set(c, TOK_GGUF_BOS, scalar(GV_U32, 1));
    set(c, TOK_GGUF_EOS, scalar(GV_U32, 2));
}

static void test_sentencepiece(void) {
    conv c;
    int ids[16], n;
    sentencepiece(&c);
    int st = convert(&c);
    EXPECT(st == 0, "status %d at stage %d: %s / %s", st, c.stage, c.g.error, tok_error(&c.t));
    if (st) return;
    /* the image: i32 max length, then per token f32 score, i32 length, bytes;
     * U+2581 (3 bytes) becomes ' ': the file's 28 piece bytes become 22 */
    EXPECT(c.g.image_size == 4 + 9 * 8 + 28, "image_size %zu", c.g.image_size);
    EXPECT(c.len == 4 + 9 * 8 + 22, "image length %zu", c.len);
    EXPECT(c.g.scratch_size == 0, "scratch %zu", c.g.scratch_size);
    EXPECT(c.t.kind == TOK_KIND_SENTENCEPIECE && c.t.vocab_size == 9, "kind %d vocab %d", c.t.kind, c.t.vocab_size);
    /* generate mode ends at BOS only, as llama2.c's (its EOS does not stop) */
    EXPECT(tok_ends_text(&c.t, 1) && !tok_ends_text(&c.t, 2) && !tok_ends_text(&c.t, 3), "tok_ends_text, sentencepiece");
    EXPECT(c.t.max_token_length == 5, "max_token_length %d (<unk>)", c.t.max_token_length);
    EXPECT(c.t.bos_id == 1 && c.t.eos_id == 2 && c.t.add_bos == 1, "bos %d eos %d add_bos %d", c.t.bos_id, c.t.eos_id,
           c.t.add_bos);
    EXPECT(c.t.chat_template == TOK_CHAT_LLAMA2 && !c.t.default_system, "template %d", c.t.chat_template);
    EXPECT(c.t.score[6] == -0.5f && c.t.score[8] == -0.2f, "scores %g %g", (double)c.t.score[6], (double)c.t.score[8]);
    /* " ab": (' ', a) scores -0.5 above (a, b)'s -0.7, then (' a', b) -0.2 */
    static const int want_ab[] = { 1, 8 };
    n = encode(&c.t, "ab", 1, ids, 16);
    EXPECT(same_ids(ids, n, want_ab, 2), "'ab': %d ids, %d %d", n, ids[0], ids[1]);
    /* " abab": ' a', then ' ab', then (a, b) -> ab */
    static const int want_abab[] = { 1, 8, 7 };
    n = encode(&c.t, "abab", 1, ids, 16);
    EXPECT(same_ids(ids, n, want_abab, 3), "'abab': %d ids, %d %d %d", n, ids[0], ids[1], ids[2]);
    /* " ba": no pair is a piece */
    static const int want_ba[] = { 3, 5, 4 };
    n = encode(&c.t, "ba", 0, ids, 16);
    EXPECT(same_ids(ids, n, want_ba, 3), "'ba': %d ids, %d %d %d", n, ids[0], ids[1], ids[2]);
    EXPECT(decodes_to(&c.t, 1, 8, "ab"), "decode after BOS drops the space");
    EXPECT(decodes_to(&c.t, 8, 8, " ab"), "decode");
    EXPECT(decodes_to(&c.t, 8, 7, "ab"), "decode");
}

/* no scores: every score 0 (ties go to the leftmost pair) */
static void test_sentencepiece_without_scores(void) {
    conv c;
    int ids[16], n;
    sentencepiece(&c);
    unset(&c, TOK_GGUF_SCORES);
    int st = convert(&c);
    EXPECT(st == 0, "status %d at stage %d: %s", st, c.stage, c.g.error);
    if (st) return;
    EXPECT(c.t.score[6] == 0.0f && c.t.score[8] == 0.0f, "scores %g %g", (double)c.t.score[6], (double)c.t.score[8]);
    static const int want[] = { 1, 8 };   /* (' ', a) leftmost, then (' a', b) */
    n = encode(&c.t, "ab", 1, ids, 16);
    EXPECT(same_ids(ids, n, want, 2), "'ab': %d ids, %d %d", n, ids[0], ids[1]);
}

/* ---- a sentencepiece vocabulary without the dummy prefix (Gemma's) -------- */

/* ids 0..255 <0xNN> (type 6), 256 <unk>, 257 <s>, 258 </s>, then the normal
 * pieces "▁" a b c ab bc "▁a" abc é aé, 269 "  " user-defined (the converter
 * writes Gemma's "▁▁" so), 270 <ctl> control, 271 [PAD0] unused (left out).
 * Scores: the one-character pieces -1, ▁a -2, abc -3, bc -4, ab -5, aé -6. */
#define NS_VOCAB 272
enum { NS_BOS = 257, NS_SP = 259, NS_A, NS_B, NS_C, NS_AB, NS_BC, NS_SA, NS_ABC, NS_E, NS_AE, NS_2SP, NS_CTL, NS_PAD };
static const char *ns_tokens[NS_VOCAB];
static long long ns_types[NS_VOCAB];
static float ns_scores[NS_VOCAB];
static char ns_bytes[256][7];

static void no_space_prefix(conv *c) {
    static const char *const named[] = { "<unk>", "<s>", "</s>", SP, "a", "b", "c", "ab", "bc", SP "a", "abc",
                                         "\xc3\xa9", "a\xc3\xa9", "  ", "<ctl>", "[PAD0]" };
    static const long long named_types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 3, 5 };
    static const float named_scores[] = { 0, 0, 0, -1, -1, -1, -1, -5, -4, -2, -3, -1, -6, -1000, -1000, -1000 };
    for (int i = 0; i < 256; i++) {
        snprintf(ns_bytes[i], sizeof ns_bytes[i], "<0x%02X>", i);
        ns_tokens[i] = ns_bytes[i]; ns_types[i] = 6; ns_scores[i] = 0;
    }
    for (int k = 0; k < 16; k++) {
        ns_tokens[256 + k] = named[k]; ns_types[256 + k] = named_types[k]; ns_scores[256 + k] = named_scores[k];
    }
    memset(c, 0, sizeof *c);
    c->g.vocab_size = NS_VOCAB;
    set(c, TOK_GGUF_MODEL, string("llama"));
    set(c, TOK_GGUF_TOKENS, strings(ns_tokens, NS_VOCAB));
    set(c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, ns_types, NS_VOCAB));
    set(c, TOK_GGUF_SCORES, floats(ns_scores, NS_VOCAB));
    set(c, TOK_GGUF_BOS, scalar(GV_U32, NS_BOS));
    set(c, TOK_GGUF_EOS, scalar(GV_U32, NS_BOS + 1));
    set(c, TOK_GGUF_ADD_SPACE_PREFIX, scalar(GV_BOOL, 0));
}

static void expect_ids(tok_tokenizer *t, const char *text, const int *want, int n_want, int line) {
    int ids[32], n = encode(t, text, 0, ids, 32);
    if (!same_ids(ids, n, want, n_want)) {
        if (test_failed < 8) {
            printf("    line %d: '%s': %d ids:", line, text, n);
            for (int k = 0; k < n && k < 32; k++) printf(" %d", ids[k]);
            printf("\n");
        }
        test_failed++;
    }
}
#define IDS(t, text, ...) do { static const int w_[] = { __VA_ARGS__ }; \
    expect_ids(t, text, w_, (int)(sizeof w_ / sizeof w_[0]), __LINE__); } while (0)

static void test_no_space_prefix(void) {
    conv c;
    no_space_prefix(&c);
    int st = convert(&c);
    EXPECT(st == 0, "status %d at stage %d: %s / %s", st, c.stage, c.g.error, tok_error(&c.t));
    if (st) return;
    /* an LTOK kind 2 of 271 tokens (the [PAD0] at the end left out), 6 merges:
     * a|b, b|c, ▁|a, a|bc, ab|c, a|é (no split inside é) */
    EXPECT(c.t.kind == TOK_KIND_SPM_BPE && c.t.vocab_size == 271 && c.g.used == 271, "kind %d vocab %d used %d",
           c.t.kind, c.t.vocab_size, c.g.used);
    EXPECT(c.t.n_merges == 6, "%d merges", c.t.n_merges);
    /* an LTOK file's end of text (and end of turn) ends generate mode, as BOS does */
    EXPECT(tok_ends_text(&c.t, c.t.bos_id) && tok_ends_text(&c.t, c.t.eos_id), "tok_ends_text: bos %d eos %d",
           c.t.bos_id, c.t.eos_id);
    EXPECT(c.t.eot_id < 0 || tok_ends_text(&c.t, c.t.eot_id), "tok_ends_text: eot %d", c.t.eot_id);
    EXPECT(!tok_ends_text(&c.t, NS_A) && !tok_ends_text(&c.t, 0), "tok_ends_text: a plain piece");
    /* the merges (left, right, rank, result) sorted by ids; ranks by score: -1 rank 0,
     * ▁a 1, abc 2, bc 3, ab 4, aé 5 */
    static const uint32_t want[6][4] = { { NS_SP, NS_A, 1, NS_SA }, { NS_A, NS_B, 4, NS_AB }, { NS_A, NS_BC, 2, NS_ABC },
                                         { NS_A, NS_E, 5, NS_AE }, { NS_B, NS_C, 3, NS_BC }, { NS_AB, NS_C, 2, NS_ABC } };
    for (int m = 0; m < 6 && c.t.n_merges == 6; m++)
        for (int k = 0; k < 4; k++) {
            const unsigned char *p = c.t.merges + 16 * m + 4 * k;
            uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            EXPECT(v == want[m][k], "merge %d field %d: %u, want %u", m, k, (unsigned)v, (unsigned)want[m][k]);
        }
    /* the image: header, flags (271, padded to 272), ends and sorted (4 + 4 per token),
     * merges, the file's text (<0xNN> 6 bytes each; <unk> <s> </s> ▁ a b c ab bc ▁a abc é aé
     * "  " <ctl>); U+2581 a space in the two normal pieces that have it: 4 bytes fewer */
    EXPECT(c.g.image_size == 64 + 272 + 8 * 271 + 16 * 6 + (256 * 6 + 5 + 3 + 4 + 3 + 1 + 1 + 1 + 2 + 2 + 4 + 3 + 2 +
                                                             3 + 2 + 5),
           "image_size %zu", c.g.image_size);
    EXPECT(c.len == c.g.image_size - 4, "image length %zu of %zu", c.len, c.g.image_size);
    EXPECT(c.t.bos_id == NS_BOS && c.t.eos_id == NS_BOS + 1 && c.t.add_bos == 1, "bos %d eos %d add_bos %d",
           c.t.bos_id, c.t.eos_id, c.t.add_bos);
    /* by score, no dummy prefix: "abc": bc (-4) before ab (-5), then a|bc; " abc": ▁a (-2)
     * first, then bc; ties of one rank go to the leftmost pair (none here) */
    IDS(&c.t, "abc", NS_ABC);
    IDS(&c.t, " abc", NS_SA, NS_BC);
    IDS(&c.t, "a\xc3\xa9", NS_AE);
    IDS(&c.t, "\xc3\xa9" "a", NS_E, NS_A);
    IDS(&c.t, "\xe2\x96\x81" "abc", NS_SA, NS_BC);   /* a typed U+2581 is a space */
    IDS(&c.t, "a  b", NS_A, NS_2SP, NS_B);          /* the user-defined token, whole */
    IDS(&c.t, "x", 'x');                            /* byte fallback */
    IDS(&c.t, "<ctl>", '<', NS_C, 't', 'l', '>');   /* control: text without parse_special */
    c.t.parse_special = 1;
    IDS(&c.t, "<ctl>", NS_CTL);
    EXPECT(decodes_to(&c.t, NS_BOS, NS_SA, " a"), "decode keeps the space after BOS (no dummy prefix)");
    EXPECT(decodes_to(&c.t, NS_SA, NS_2SP, "  "), "decode of the user-defined token");
}

/* ---- a byte-level vocabulary ("gpt2") ------------------------------------ */

/* The 256 bytes in GPT-2's alphabet (LTOK needs them all), id = byte:
 * printable bytes stand for themselves, the 68 others are U+0100.. in byte
 * order (' ' is U+0120 'Ġ'); then 256 "ab", 257 "Ġa", 258 "Ġab", two
 * control tokens and an unused [PAD] at the end. */
#define G "\xc4\xa0"   /* U+0120, GPT-2's alphabet's space */
#define BL_VOCAB 262
enum { A = 97, B = 98, C = 99, SPACE = 32, AB = 256, SA = 257, SAB = 258, IM_START = 259, IM_END = 260, PAD = 261 };
static char byte_chars[256][3];
static const char *bl_tokens[BL_VOCAB];
static long long bl_types[BL_VOCAB];

static void byte_level_vocab(void) {
    int other = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)other++;
        if (cp < 0x80) byte_chars[b][0] = (char)cp;
        else { byte_chars[b][0] = (char)(0xC0 | cp >> 6); byte_chars[b][1] = (char)(0x80 | (cp & 0x3F)); }
        bl_tokens[b] = byte_chars[b];
        bl_types[b] = 1;
    }
    const char *rest[] = { "ab", G "a", G "ab", "<|im_start|>", "<|im_end|>", "[PAD261]" };
    const long long rest_types[] = { 1, 1, 1, 3, 3, 5 };
    for (int i = 0; i < 6; i++) { bl_tokens[256 + i] = rest[i]; bl_types[256 + i] = rest_types[i]; }
}
static const char *const bl_merges[] = { G " a", "a b", G "a b" };
static const char *const bl_template =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are X.<|im_end|>\\n' }}{%- endif %}";

static void byte_level(conv *c) {
    memset(c, 0, sizeof *c);
    c->g.vocab_size = BL_VOCAB;
    set(c, TOK_GGUF_MODEL, string("gpt2"));
    set(c, TOK_GGUF_PRE, string("gpt-2"));
    set(c, TOK_GGUF_TOKENS, strings(bl_tokens, BL_VOCAB));
    set(c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, bl_types, BL_VOCAB));
    set(c, TOK_GGUF_MERGES, strings(bl_merges, 3));
    set(c, TOK_GGUF_EOS, scalar(GV_U32, IM_END));
    set(c, TOK_GGUF_CHAT_TEMPLATE, string(bl_template));
}

static void test_byte_level(void) {
    conv c;
    int ids[16], n;
    int pre, norm, ignore;
    byte_level(&c);
    int st = convert(&c);
    EXPECT(st == 0, "status %d at stage %d: %s / %s", st, c.stage, c.g.error, tok_error(&c.t));
    if (st) return;
    /* LTOK: 64-byte header, 261 flags padded to 264 (the [PAD261] at the end
     * is left out), 261 ends, 261 sorted ids, 3 merges of 16 bytes, then the
     * pieces: 94 one-byte and 162 two-byte characters for the bytes, and 31
     * bytes more in the file's alphabet (the bound: 449); 256 + 29 as bytes */
    EXPECT(c.g.used == 261, "used %d", c.g.used);
    EXPECT(c.g.image_size == 64 + 264 + 4 * 261 * 2 + 48 + 449, "image_size %zu", c.g.image_size);
    EXPECT(c.len == 64 + 264 + 4 * 261 * 2 + 48 + 285, "image length %zu", c.len);
    EXPECT(!memcmp(c.image, "LTOK", 4), "magic");
    EXPECT(c.t.kind == TOK_KIND_BYTE_LEVEL && c.t.pre_tokenizer == TOK_PRE_GPT2 && c.t.normalizer == TOK_NORM_NONE &&
           !c.t.ignore_merges, "kind %d pre %d norm %d ignore %d", c.t.kind, c.t.pre_tokenizer, c.t.normalizer,
           c.t.ignore_merges);
    EXPECT(c.t.eos_id < 0 || tok_ends_text(&c.t, c.t.eos_id), "tok_ends_text, byte-level: eos %d", c.t.eos_id);
    EXPECT(!strcmp(tok_pre_tokenizer_name(c.t.pre_tokenizer), "gpt2"), "name %s", tok_pre_tokenizer_name(c.t.pre_tokenizer));
    EXPECT(c.t.n_merges == 3, "merges %d", c.t.n_merges);
    /* gpt2's pre-tokenizer adds no BOS and names none; the template's markers are ChatML's */
    EXPECT(c.t.add_bos == 0 && c.t.eos_id == IM_END, "add_bos %d eos %d", c.t.add_bos, c.t.eos_id);
    EXPECT(c.t.chat_template == TOK_CHAT_CHATML, "template %d", c.t.chat_template);
    EXPECT(c.t.eot_id == IM_END, "eot %d (<|im_end|>)", c.t.eot_id);
    EXPECT(c.t.default_system_len == 10 && !memcmp(c.t.default_system, "You are X.", 10), "system '%.*s'",
           (int)c.t.default_system_len, c.t.default_system ? c.t.default_system : "");
    EXPECT(c.g.system_size == strlen(bl_template), "system_size %zu", c.g.system_size);
    /* "ab" | " ab": a b (rank 1) -> ab; Ġ a (rank 0) first, then Ġa b (rank 2) */
    static const int want1[] = { AB, SAB };
    n = encode(&c.t, "ab ab", 0, ids, 16);
    EXPECT(same_ids(ids, n, want1, 2), "'ab ab': %d ids, %d %d", n, ids[0], ids[1]);
    static const int want2[] = { C, AB };   /* "cab": (c, a) is no merge */
    n = encode(&c.t, "cab", 0, ids, 16);
    EXPECT(same_ids(ids, n, want2, 2), "'cab': %d ids, %d %d", n, ids[0], ids[1]);
    c.t.parse_special = 1;
    static const int want3[] = { IM_START, AB, IM_END };
    n = encode(&c.t, "<|im_start|>ab<|im_end|>", 0, ids, 16);
    EXPECT(same_ids(ids, n, want3, 3), "specials: %d ids, %d %d %d", n, ids[0], ids[1], ids[2]);
    EXPECT(decodes_to(&c.t, AB, SAB, " ab") && decodes_to(&c.t, 0, SPACE, " ") && decodes_to(&c.t, 0, 10, "\n") &&
           decodes_to(&c.t, 0, 255, "\xff") && decodes_to(&c.t, 0, IM_START, "<|im_start|>"), "decode");
    EXPECT(decodes_to(&c.t, 0, PAD, ""), "the unused id decodes to nothing");
    /* the pre-tokenizer table */
    EXPECT(tok_pre_tokenizer_of("llama-bpe", 9, &pre, &norm, &ignore) == 0 && pre == TOK_PRE_LLAMA3 &&
           norm == TOK_NORM_NONE && ignore == 1, "llama-bpe");
    EXPECT(tok_pre_tokenizer_of("qwen2", 5, &pre, &norm, &ignore) == 0 && pre == TOK_PRE_QWEN2 && norm == TOK_NORM_NFC &&
           ignore == 0, "qwen2");
    EXPECT(tok_pre_tokenizer_of("qwen", 4, &pre, &norm, &ignore) == -1, "a prefix is no name");
    EXPECT(!strcmp(tok_pre_tokenizer_name(TOK_PRE_LLAMA3), "llama3") && !strcmp(tok_pre_tokenizer_name(0), ""),
           "names");
}

/* ---- hostile values -------------------------------------------------------- */

/* the conversion fails at stage with status and exactly this message */
static void expect_failure(conv *c, int stage, int status, const char *message, int line) {
    int st = convert(c);
    if (st != status || c->stage != stage || strcmp(c->g.error, message)) {
        if (test_failed < 8)
            printf("    line %d: status %d at stage %d (want %d at %d): '%s'\n      want '%s'\n", line, st, c->stage,
                   status, stage, c->g.error, message);
        test_failed++;
    }
}
#define REFUSED(c, stage, status, message) expect_failure(c, stage, status, message, __LINE__)

static void test_hostile_keys(void) {
    conv c;
    byte_level(&c); unset(&c, TOK_GGUF_MODEL);
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.model string: give a tokenizer with -z");
    byte_level(&c); set(&c, TOK_GGUF_MODEL, scalar(GV_U32, 2));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.model is not a string");
    byte_level(&c); set(&c, TOK_GGUF_MODEL, string("bert"));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer model 'bert' is not supported (llama and gpt2 are): give a tokenizer with -z");
    byte_level(&c); set(&c, TOK_GGUF_MODEL, strings(bl_tokens, 1));   /* an array */
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.model is not a string");
    byte_level(&c); set(&c, TOK_GGUF_PRE, string("falcon"));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.pre 'falcon' is not a pre-tokenizer this build has (llama-bpe, "
            "llama3, qwen2, smollm, gpt-2, default): give a tokenizer with -z");
    byte_level(&c); set(&c, TOK_GGUF_PRE, scalar(GV_U32, 3));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.pre is not a string");
}

static void test_hostile_tokens(void) {
    conv c;
    /* wrong element type */
    byte_level(&c); set(&c, TOK_GGUF_TOKENS, ints(GV_I32, bl_types, BL_VOCAB));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.tokens string array");
    byte_level(&c); unset(&c, TOK_GGUF_TOKENS);
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.tokens string array");
    /* a count the vocabulary does not have, and one beyond the bytes */
    byte_level(&c); c.g.vocab_size = 263;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer has 262 tokens, the model's vocabulary 263");
    byte_level(&c); c.v[TOK_GGUF_TOKENS].count = (uint64_t)1 << 62;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer has 4611686018427387904 tokens, the model's vocabulary 262");
    byte_level(&c); c.v[TOK_GGUF_TOKENS].bytes -= 22;   /* [PAD261] cut; token 260 (<|im_end|>) too */
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 260 is corrupt");
    /* a string length that overflows the value */
    byte_level(&c);
    {
        unsigned char *p = block(c.v[TOK_GGUF_TOKENS].bytes);
        memcpy(p, c.v[TOK_GGUF_TOKENS].data, c.v[TOK_GGUF_TOKENS].bytes);
        put_le(p, UINT64_MAX - 4, 8);
        c.v[TOK_GGUF_TOKENS].data = p;
    }
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 0 is corrupt");
    /* an empty vocabulary */
    byte_level(&c); c.g.vocab_size = 0; c.v[TOK_GGUF_TOKENS].count = 0;
    REFUSED(&c, 1, TOK_ERR_ARG, "GGUF tokenizer: the model's vocabulary size 0 is not positive");
    byte_level(&c); c.v[TOK_GGUF_TOKENS].count = 0;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer has 0 tokens, the model's vocabulary 262");
    /* over-long strings: past what a byte-level text can be, and past LTOK's longest piece */
    {
        static char long_piece[131073];
        memset(long_piece, 'c', sizeof long_piece);
        const char *t[BL_VOCAB];
        size_t lens[BL_VOCAB];
        for (int i = 0; i < BL_VOCAB; i++) { t[i] = bl_tokens[i]; lens[i] = strlen(bl_tokens[i]); }
        t[C] = long_piece; lens[C] = 131073;
        byte_level(&c); set(&c, TOK_GGUF_TOKENS, strings_n(t, lens, BL_VOCAB));
        REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 99 is 131073 bytes long (at most 131072 can be a token)");
        lens[C] = 70000;
        byte_level(&c); set(&c, TOK_GGUF_TOKENS, strings_n(t, lens, BL_VOCAB));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF token 99 is 70000 bytes (at most 65536)");
    }
    /* not in GPT-2's byte alphabet (U+20AC), and two pieces of the same bytes */
    {
        const char *t[BL_VOCAB];
        for (int i = 0; i < BL_VOCAB; i++) t[i] = bl_tokens[i];
        t[C] = "\xe2\x82\xac";
        byte_level(&c); set(&c, TOK_GGUF_TOKENS, strings(t, BL_VOCAB));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF token 99 '\xe2\x82\xac' is not in GPT-2's byte alphabet (a normal token of a gpt2 tokenizer)");
        t[C] = "a";
        byte_level(&c); set(&c, TOK_GGUF_TOKENS, strings(t, BL_VOCAB));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokens 97 and 99 are the same bytes");
    }
}

static void test_hostile_types_and_scores(void) {
    conv c;
    byte_level(&c); set(&c, TOK_GGUF_TOKEN_TYPE, strings(bl_tokens, BL_VOCAB));   /* strings, not integers */
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
    byte_level(&c); c.v[TOK_GGUF_TOKEN_TYPE].count = 261;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not 262 values");
    byte_level(&c); c.v[TOK_GGUF_TOKEN_TYPE].bytes = 12;   /* 3 of its 262 i32 */
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
    {
        long long t[BL_VOCAB];
        for (int i = 0; i < BL_VOCAB; i++) t[i] = bl_types[i];
        t[C] = 7;
        byte_level(&c); set(&c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, t, BL_VOCAB));
        REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 99 has type 7 (llama.cpp's are 1..6)");
        t[C] = -3;
        byte_level(&c); set(&c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, t, BL_VOCAB));
        REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 99 has type -3 (llama.cpp's are 1..6)");
    }
    sentencepiece(&c); set(&c, TOK_GGUF_TOKEN_TYPE, ints(GV_F32, sp_types, 9));   /* f32 is no integer */
    REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.token_type is not integers");
    /* scores of the wrong type, count or shape */
    {
        double d[9] = { 0 };
        sentencepiece(&c); set(&c, TOK_GGUF_SCORES, value(GV_F64, 1, 9, block(72), 72));
        memcpy((void *)c.v[TOK_GGUF_SCORES].data, d, 72);
        REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.scores is not 9 f32 values");
    }
    sentencepiece(&c); c.v[TOK_GGUF_SCORES].count = (uint64_t)1 << 40;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.scores is not 9 f32 values");
    sentencepiece(&c); c.v[TOK_GGUF_SCORES].is_array = 0;
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.scores is not 9 f32 values");
    /* a sentencepiece vocabulary tok_init refuses: fewer than <unk>, <s>, </s> */
    sentencepiece(&c); c.g.vocab_size = 2; set(&c, TOK_GGUF_TOKENS, strings(sp_tokens, 2));
    unset(&c, TOK_GGUF_TOKEN_TYPE); unset(&c, TOK_GGUF_SCORES);
    REFUSED(&c, 3, TOK_ERR_FORMAT, "");
    EXPECT(strstr(tok_error(&c.t), "needs at least 3") != NULL, "tok_init: %s", tok_error(&c.t));
}

static void test_hostile_merges(void) {
    conv c;
    byte_level(&c); unset(&c, TOK_GGUF_MERGES);
    REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.merges string array (a gpt2 tokenizer needs it)");
    byte_level(&c); set(&c, TOK_GGUF_MERGES, ints(GV_I32, bl_types, 3));
    REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF has no tokenizer.ggml.merges string array (a gpt2 tokenizer needs it)");
    byte_level(&c); c.v[TOK_GGUF_MERGES].count = ((uint64_t)1 << 26) + 1;
    REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer has 67108865 merges (at most 2^26)");
    byte_level(&c); c.v[TOK_GGUF_MERGES].count = 4;   /* one more than its bytes hold */
    REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer merge 3 is corrupt");
    {
        const char *m[3] = { G " a", "a z", "ab" };
        byte_level(&c); set(&c, TOK_GGUF_MERGES, strings(m, 2));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer merge 1 'a z' is not two tokens whose join is a token");
        m[1] = "b c";   /* both pieces, but "bc" is none */
        byte_level(&c); set(&c, TOK_GGUF_MERGES, strings(m, 2));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer merge 1 'b c' is not two tokens whose join is a token");
        byte_level(&c); set(&c, TOK_GGUF_MERGES, strings(m + 2, 1));   /* no space */
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer merge 0 'ab' is not two tokens whose join is a token");
    }
    {
        /* a merge into a special token: "ab" is a control token (3) here */
        long long t[BL_VOCAB];
        for (int i = 0; i < BL_VOCAB; i++) t[i] = bl_types[i];
        t[AB] = 3;
        byte_level(&c); set(&c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, t, BL_VOCAB));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokenizer merge 1 'a b' involves a special or added token");
    }
    /* a pair merged twice keeps its last rank */
    {
        const char *m[4] = { "a b", G " a", G "a b", "a b" };
        int ids[8];
        byte_level(&c); set(&c, TOK_GGUF_MERGES, strings(m, 4));
        int st = convert(&c);
        EXPECT(st == 0 && c.t.n_merges == 3, "status %d: %s, merges %d", st, c.g.error, c.t.n_merges);
        /* " ab": Ġ a (rank 1) before a b (now rank 3), then Ġa b (rank 2) */
        static const int want[] = { SAB };
        int n = st ? 0 : encode(&c.t, " ab", 0, ids, 8);
        EXPECT(same_ids(ids, n, want, 1), "' ab': %d ids, %d", n, ids[0]);
    }
}

static void test_hostile_ids(void) {
    conv c;
    /* ids within the tokenizer's 261 (the unused [PAD261] at the end is left out) */
    byte_level(&c); set(&c, TOK_GGUF_BOS, scalar(GV_U32, PAD));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.bos_token_id is not a token id (0..260)");
    byte_level(&c); set(&c, TOK_GGUF_EOS, scalar(GV_I32, -1));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.eos_token_id is not a token id (0..260)");
    byte_level(&c); set(&c, TOK_GGUF_EOT, scalar(GV_U64, (long long)((uint64_t)1 << 40)));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.eot_token_id is not a token id (0..260)");
    byte_level(&c); set(&c, TOK_GGUF_EOS, string("8"));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.eos_token_id is not a token id (0..260)");
    byte_level(&c); set(&c, TOK_GGUF_ADD_BOS, scalar(GV_BOOL, 1));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer adds a BOS but names none (tokenizer.ggml.bos_token_id)");
    byte_level(&c); set(&c, TOK_GGUF_ADD_BOS, string("yes"));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.add_bos_token is not a bool");
    byte_level(&c); set(&c, TOK_GGUF_CHAT_TEMPLATE, scalar(GV_U32, 1));
    REFUSED(&c, 4, TOK_ERR_FORMAT, "GGUF tokenizer.chat_template is not a string");
    /* add_bos with a BOS named, the sentencepiece way round: add_bos false */
    sentencepiece(&c); set(&c, TOK_GGUF_ADD_BOS, scalar(GV_BOOL, 0));
    int st = convert(&c);
    EXPECT(st == 0 && c.t.add_bos == 0 && c.t.bos_id == 1, "status %d add_bos %d", st, c.t.add_bos);
}

/* buffers too small, steps out of order, NULLs: a status, never a write */
static void test_misuse(void) {
    conv c;
    size_t len = 0;
    byte_level(&c);
    EXPECT(tok_gguf_image(&c.g, NULL, 0, NULL, 0, &len) == TOK_ERR_ARG, "image before size");
    EXPECT(tok_gguf_size(NULL) == TOK_ERR_ARG, "NULL");
    EXPECT(tok_gguf_size(&c.g) == 0, "%s", c.g.error);
    unsigned char *img = block(c.g.image_size - 1);
    void *scratch = block(c.g.scratch_size);
    EXPECT(tok_gguf_image(&c.g, img, c.g.image_size - 1, scratch, c.g.scratch_size, &len) == TOK_ERR_SPACE, "image");
    char want[160];
    snprintf(want, sizeof want, "GGUF tokenizer: 2912 image and %zu scratch bytes given, 2913 and %zu needed",
             c.g.scratch_size, c.g.scratch_size);
    EXPECT(!strcmp(c.g.error, want), "'%s'", c.g.error);
    EXPECT(tok_gguf_image(&c.g, block(c.g.image_size), c.g.image_size, scratch, c.g.scratch_size - 1, &len) ==
           TOK_ERR_SPACE, "scratch");
    EXPECT(tok_gguf_apply(&c.g, NULL, NULL, 0) == TOK_ERR_ARG, "no tokenizer");
    EXPECT(!strcmp(tok_gguf_key_name(TOK_GGUF_MERGES), "tokenizer.ggml.merges") && !strcmp(tok_gguf_key_name(-1), ""),
           "key names");
    /* the default system prompt needs its room */
    byte_level(&c);
    EXPECT(convert(&c) == 0, "%s", c.g.error);
    char small[4];
    EXPECT(tok_gguf_apply(&c.g, &c.t, small, sizeof small) == TOK_ERR_SPACE, "system room: %s", c.g.error);
}

static void test_no_space_prefix_hostile(void) {
    conv c;
    float scores[NS_VOCAB];
    no_space_prefix(&c); set(&c, TOK_GGUF_ADD_SPACE_PREFIX, string("no"));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF tokenizer.ggml.add_space_prefix is not a bool");
    memcpy(scores, ns_scores, sizeof scores);
    {
        uint32_t quiet_nan = 0x7fc00000u;
        memcpy(&scores[NS_AB], &quiet_nan, 4);
    }
    no_space_prefix(&c); set(&c, TOK_GGUF_SCORES, floats(scores, NS_VOCAB));
    REFUSED(&c, 1, TOK_ERR_FORMAT, "GGUF token 263's score is NaN");
    /* <0x41> made control: byte fallback has no piece for 'A' (tok_init refuses the image) */
    {
        long long types[NS_VOCAB];
        memcpy(types, ns_types, sizeof types);
        types[0x41] = 3;
        no_space_prefix(&c); set(&c, TOK_GGUF_TOKEN_TYPE, ints(GV_I32, types, NS_VOCAB));
        REFUSED(&c, 3, TOK_ERR_FORMAT, "");
        EXPECT(strstr(tok_error(&c.t), "no piece for the byte 65") != NULL, "tok_init: %s", tok_error(&c.t));
    }
    /* two pieces of the same bytes once U+2581 is a space: "▁a" and a user-defined " a" */
    {
        const char *t[NS_VOCAB];
        memcpy(t, ns_tokens, sizeof t);
        t[NS_2SP] = " a";
        no_space_prefix(&c); set(&c, TOK_GGUF_TOKENS, strings(t, NS_VOCAB));
        REFUSED(&c, 2, TOK_ERR_FORMAT, "GGUF tokens 265 and 269 are the same bytes");
    }
}

int main(void) {
    byte_level_vocab();
    run("sentencepiece", test_sentencepiece);
    run("sentencepiece_without_scores", test_sentencepiece_without_scores);
    run("no_space_prefix", test_no_space_prefix);
    run("no_space_prefix_hostile", test_no_space_prefix_hostile);
    run("byte_level", test_byte_level);
    run("hostile_keys", test_hostile_keys);
    run("hostile_tokens", test_hostile_tokens);
    run("hostile_types_and_scores", test_hostile_types_and_scores);
    run("hostile_merges", test_hostile_merges);
    run("hostile_ids", test_hostile_ids);
    run("misuse", test_misuse);
    free_blocks();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
