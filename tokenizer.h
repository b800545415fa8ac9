/* tokenizer.h -- BPE encoder/decoder: sentencepiece BPE over llama2.c's
 * tokenizer.bin; byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM2) and
 * sentencepiece-style BPE merged by rank with byte fallback (Gemma 3's
 * tokenizer.json) over the LTOK file export.py writes (FORMAT.md, "The
 * tokenizer file"). tok_init tells them apart by the magic "LTOK".
 *
 * Contract: the tokenizer reads the file's bytes in place (they may live in
 * flash); everything it needs besides them lives in a caller-provided arena
 * whose size tok_arena_size() tells in advance. No malloc, no I/O, no exit,
 * no globals. Errors return a negative tok_status (tok_status_text() names
 * it) and leave a message that tok_error() returns, as model.h does.
 *
 *   size_t need = tok_arena_size(bytes, n, 0);      (0: malformed, tok_init says why)
 *   tok_tokenizer t; if (tok_init(&t, bytes, n, 0, malloc(need), need)) puts(tok_error(&t));
 *   size_t ss = tok_encode_scratch_size(strlen(text));
 *   int ids[64]; int n_ids = tok_encode(&t, text, 1, 0, ids, 64, malloc(ss), ss);
 *   const char *piece = tok_decode(&t, prev, ids[i], &len);
 *
 * The arena and the scratch may be at any address: the sizes include the
 * padding needed to align a misaligned buffer.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tok_status {
    TOK_OK = 0,
    TOK_ERR_FORMAT = -1,    /* not a tokenizer file, or not the model's vocabulary */
    TOK_ERR_ARENA = -2,     /* arena too small                                  */
    TOK_ERR_ARG = -3,       /* bad argument (no tokenizer, uninitialised)       */
    TOK_ERR_SPACE = -4      /* text too long, scratch or output too small        */
} tok_status;

/* The control ids llama2.c's tokenizer.bin implies (the file stores none):
 * <unk> 0, <s> 1, </s> 2. tok_init copies them into the tokenizer's bos_id and
 * eos_id; callers read those, so a format that stores its own ids needs no
 * change outside its reader (tokenizer/ltok.c for LTOK files). */
enum { TOK_BOS = 1, TOK_EOS = 2 };

/* The longest U+2581-run added token (TOK_FLAG_U2581) an LTOK file may have,
 * in U+2581s (Gemma 3's longest is 31). */
#define TOK_U2581_MAX_RUN 32

typedef struct tok_tokenizer {
    int vocab_size;
    int max_token_length;
    int bos_id, eos_id;           /* beginning / end of sequence                 */
    int eot_id;                   /* end of turn, or -1 when the format has none */
    int chat_template;            /* tok_chat_template the file names (llama2 for tokenizer.bin) */
    int add_bos;                  /* 1: a prompt starts with bos_id (tokenizer.bin: 1) */
    const char *default_system;   /* the template's system prompt when the user gives
                                     none (in the file's bytes, not NUL-terminated), or NULL */
    size_t default_system_len;
    const unsigned char *bytes;   /* the tokenizer.bin image, read in place */
    size_t n_bytes;
    /* carved from the arena by tok_init */
    unsigned int *piece_offset;   /* (vocab,) offset of each piece's bytes in `bytes` */
    int *piece_len;               /* (vocab,) */
    float *score;                 /* (vocab,) merge scores (copied: unaligned in the file) */
    int *sorted;                  /* (vocab,) ids sorted by piece bytes, for lookup */
    int *first_byte;              /* (257,) sorted[first_byte[c] .. first_byte[c+1]) start with byte c */
    int byte_token[256];          /* id of <0xNN>, or -1 */
    unsigned char byte_value[256];/* byte_value[i] == i: what tok_decode returns for <0xNN> */
    int word_split;               /* no normal piece has a space after a non-space byte:
                                     tok_encode merges word by word (same result, faster) */
    int parse_special;            /* 1: tok_encode matches special tokens (<|eot_id|>, ...)
                                     in the text as whole tokens; 0 (tok_init's default):
                                     never, their text is encoded as text. Added tokens
                                     that are not special always match. */
    /* LTOK files only (TOK_KIND_BYTE_LEVEL, TOK_KIND_SPM_BPE); tokenizer.bin leaves them 0/NULL */
    int kind;                     /* tok_kind */
    int pre_tokenizer;            /* tok_pre_tokenizer */
    int normalizer;               /* tok_normalizer */
    int ignore_merges;            /* 1: a pre-token that is a piece is that piece (Llama 3) */
    const unsigned char *token_flags; /* (vocab,) TOK_FLAG_* bits, in the file */
    const unsigned char *merges;  /* (n_merges, 4) u32 left, right, rank, result, sorted by
                                     (left, right), in the file */
    int n_merges;
    int *added;                   /* (n_added,) special and added ids, sorted by bytes */
    int n_added;
    int *added_first;             /* (257,) added[added_first[c] .. added_first[c+1]) start with byte c */
    int *u2581_run;               /* (TOK_U2581_MAX_RUN + 1,) LTOK files, from the arena: the
                                     TOK_FLAG_U2581 token of k spaces, or -1; NULL otherwise */
    char error[160];
} tok_tokenizer;

/* Bytes of arena tok_init needs for this file. vocab_size <= 0: read it from the
 * file (entries until the end). Returns 0 when the file is malformed or has not
 * vocab_size entries: call tok_init (arena may be NULL) for the message. */
size_t tok_arena_size(const void *bytes, size_t n_bytes, int vocab_size);

/* Parse and validate; vocab_size > 0 is the model's: tokenizer.bin must
 * have exactly that many entries, an LTOK file at most that many plus
 * special tokens past them (Gemma 3's <image_soft_token>: 262145 ids for
 * 262144 embedding rows; such an id reaches the model only when typed with
 * parse_special, and the model refuses it). Returns 0 or negative. */
int tok_init(tok_tokenizer *t, const void *bytes, size_t n_bytes, int vocab_size,
             void *arena, size_t arena_size);

/* Scratch bytes tok_encode needs for a text of text_len bytes (about 47 per
 * byte; 0 if the text is too long to encode). */
size_t tok_encode_scratch_size(size_t text_len);

/* LTOK files: the text is read as UTF-8, each maximal invalid
 * subpart becoming U+FFFD as TextDecoder and @huggingface/tokenizers see it;
 * special and added tokens are cut out first, the pieces between them are
 * normalized, pre-tokenized and merged by rank (lowest first, ties to the
 * left). bos adds bos_id only when the file has one. Byte-level BPE starts
 * from one symbol per byte; sentencepiece-style BPE (TOK_KIND_SPM_BPE) from
 * one per character of the whole piece between added tokens (U+2581 read as
 * a space, the pieces storing spaces), a character no piece holds becoming
 * its bytes' <0xNN> tokens after the merges.
 *
 * tokenizer.bin: encode the NUL-terminated text like sentencepiece (dummy-prefix space, code
 * points, byte fallback, merges by score, O(n log n)). Writes at most
 * max_tokens ids; returns the count, or negative (too many tokens, scratch too
 * small) with tok_error set. At most 3*strlen(text) + 1 + bos + eos ids.
 * As in sentencepiece, each byte that is not part of well-formed UTF-8 counts
 * as U+FFFD, and U+2581 '▁' counts as a space. Never produces ids 0..2 or a
 * <0xNN> token by merging: those come only from BOS/EOS and byte fallback. */
int tok_encode(tok_tokenizer *t, const char *text, int bos, int eos,
               int *tokens, int max_tokens, void *scratch, size_t scratch_size);

/* The most ids tok_encode can write for a text of text_len bytes, BOS and EOS
 * included (0 if the text is too long to encode). */
size_t tok_max_tokens(size_t text_len);

/* Bytes of `token` when it follows `prev`: the leading space of a piece after
 * BOS is dropped; <0xNN> gives the single raw byte. Byte-level files: the
 * piece's raw bytes (a special token's text), whatever prev is.
 * Sentencepiece-style LTOK files: the piece with its spaces (U+2581 in the
 * tokenizer.json), <0xNN> the raw byte, nothing dropped. Not NUL-terminated.
 * An out-of-range id gives "" with *len 0. */
const char *tok_decode(const tok_tokenizer *t, int prev, int token, size_t *len);

const char *tok_error(const tok_tokenizer *t);

/* The byte-level normalizer's NFC (Unicode TOK_UNICODE_VERSION, tables from
 * its data: tools/gen_unicode_tables.py) of text[0..n), each maximal invalid
 * UTF-8 subpart first becoming U+FFFD as tok_encode reads it. out has room
 * for 3n bytes, scratch tok_nfc_scratch_size(n) bytes (0: too long) aligned
 * for uint32_t. Returns the length written (not NUL-terminated). */
size_t tok_nfc_scratch_size(size_t n);
size_t tok_nfc(char *out, const char *text, size_t n, void *scratch);
const char *tok_status_text(int status);

/* What a tokenizer file holds (tok_tokenizer.kind). */
enum tok_kind {
    TOK_KIND_SENTENCEPIECE = 0,   /* llama2.c's tokenizer.bin (LTOK reserves this kind) */
    TOK_KIND_BYTE_LEVEL = 1,      /* byte-level BPE: pieces are raw bytes, merges by rank */
    TOK_KIND_SPM_BPE = 2          /* sentencepiece-style BPE (Gemma 3's tokenizer.json): pieces
                                     are UTF-8 with ' ' where the json has U+2581, the text's
                                     spaces and U+2581 both read as ' ', no pre-tokenizer, merges
                                     by rank over characters, byte fallback to <0xNN>, no
                                     dummy-prefix space */
};

/* Pre-tokenizers of byte-level BPE (the split before merging), as
 * @huggingface/tokenizers runs them. */
enum tok_pre_tokenizer {
    TOK_PRE_NONE = 0,     /* TOK_KIND_SPM_BPE: the whole text between added tokens is one word */
    TOK_PRE_GPT2 = 1,     /* ByteLevel(use_regex): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
                             ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ (JavaScript's \s) */
    TOK_PRE_LLAMA3 = 2,   /* Split: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
                             \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
                             (\s: White_Space) */
    TOK_PRE_QWEN2 = 3,    /* Llama 3's with \p{N} one at a time */
    TOK_PRE_SMOLLM = 4    /* Digits(individual_digits): each 0-9 alone, then GPT-2's */
};

/* Normalizers (applied to the text between special tokens). */
enum tok_normalizer { TOK_NORM_NONE = 0, TOK_NORM_NFC = 1 };

/* token_flags bits */
enum {
    TOK_FLAG_SPECIAL = 1, /* matched in text only with parse_special; never merged into */
    TOK_FLAG_ADDED = 2,   /* an added token that is not special: always matched whole */
    TOK_FLAG_U2581 = 4    /* TOK_KIND_SPM_BPE, with TOK_FLAG_ADDED: a piece of spaces that the
                             tokenizer.json writes as U+2581s (Gemma's "▁▁".."▁"x31); it
                             matches that many U+2581 in the raw text, never spaces */
};

/* 1 when a generated `token` ends the text outside a chat: BOS (llama2.c's
 * rule, which tokenizer.bin keeps: its EOS does not stop), and for LTOK
 * files (byte-level and sentencepiece-style BPE) their end of text and end
 * of turn as well. */
int tok_ends_text(const tok_tokenizer *t, int token);

/* The id of the piece with exactly these bytes (a special token such as
 * "<|im_start|>" included), or -1 when the vocabulary has none. */
int tok_piece_id(const tok_tokenizer *t, const char *piece, size_t len);

/* ---- chat templates ----
 *
 * A chat is one token sequence in the KV cache: the first user turn (with
 * the BOS and the system block), the model's reply and the end-of-turn token
 * it generated, the next user turn, and so on. Each user turn is rendered up
 * to and including the assistant's header, so the model's reply follows.
 * Special tokens of a template ("<|im_start|>", ...) are emitted by id
 * (tok_piece_id), never by encoding their text; the system and user texts
 * and the template's plain text between special tokens are encoded with
 * tok_encode (no BOS), so a user typing "<|im_end|>" gets ordinary text.
 * The texts follow the models' published Jinja templates (README, "Chat"). */
enum tok_chat_template {
    /* llama2.c's Llama 2 text, a BOS before every turn:
     *   "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]" or "[INST] {user} [/INST]";
     *   an empty system prompt counts as none */
    TOK_CHAT_LLAMA2 = 0,
    /* Llama 3: "<|begin_of_text|>" once, then
     *   "<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>" (when there is one),
     *   "<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>"
     *   "<|start_header_id|>assistant<|end_header_id|>\n\n"; texts trimmed */
    TOK_CHAT_LLAMA3 = 1,
    /* ChatML (SmolLM2, Qwen2.5, Qwen3): "<|im_start|>system\n{system}<|im_end|>\n" (when
     *   there is one), "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n";
     *   a later turn starts with the "\n" that follows the model's <|im_end|> */
    TOK_CHAT_CHATML = 2,
    /* Llama 3.1 / 3.2: as llama3, with a system block always, opening with
     *   "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n" */
    TOK_CHAT_LLAMA31 = 3,
    /* Gemma 3: "<bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n"
     *   "<start_of_turn>model\n" (the system text opens the first user message,
     *   "{system}\n\n" only when there is one); the user text trimmed, the
     *   system text kept; a later turn starts with the "\n" after <end_of_turn> */
    TOK_CHAT_GEMMA = 4,
    TOK_CHAT_COUNT = 5
};

/* Llama 3.1's "Today Date" when the caller names none: its template's own default. */
#define TOK_CHAT_DEFAULT_DATE "26 Jul 2024"

/* The template's name ("llama2", "llama3", "chatml", "llama3.1", "gemma") and back
 * (-1: unknown); tok_chat_template_names() lists them all, for messages. */
const char *tok_chat_template_name(int chat_template);
int tok_chat_template_id(const char *name);
const char *tok_chat_template_names(void);

/* One user turn of a chat in a template. */
typedef struct tok_chat_turn {
    int chat_template;    /* tok_chat_template */
    int first;            /* 1: the first turn (BOS, system block); 0: a later turn,
                             which follows the end-of-turn token the model generated */
    const char *system;   /* first turn: the system prompt; NULL: the tokenizer's
                             default_system, else none; "" is an empty system
                             prompt (none for llama2, as in llama2.c) */
    const char *user;     /* the user's text; NULL counts as "" */
    const char *date;     /* llama3.1's Today Date; NULL: TOK_CHAT_DEFAULT_DATE */
    int close_reply;      /* later turn: 1 when the previous reply ended at another
                             token than tok_chat_end_id (eos_id, say): the turn then
                             starts with the template's end-of-turn token, which
                             closes every assistant message in the template */
} tok_chat_turn;

/* The turn as text, special tokens written as their text, like snprintf:
 * writes at most cap bytes including the NUL (nothing when cap is 0, so out
 * may then be NULL) and returns the full length (cut short iff >= cap). t
 * (may be NULL) gives the default system prompt. Returns 0 for an unknown
 * template (every known one renders at least one byte). A BOS is not text:
 * a llama2 turn renders as the text llama2.c encodes after its BOS; gemma's
 * renders as "<bos>", as its Jinja template writes bos_token. */
size_t tok_chat_render(char *out, size_t cap, const tok_tokenizer *t, const tok_chat_turn *turn);

/* The same for the first turn without a tokenizer: tok_chat_render with
 * first = 1, NULL or "" for no system prompt, the default date. */
size_t tok_render_chat(char *out, size_t cap, int chat_template, const char *system, const char *user);

/* 0 when the vocabulary has every special token the template uses, else
 * TOK_ERR_FORMAT with tok_error naming the missing token (TOK_ERR_ARG for an
 * unknown template). */
int tok_chat_check(tok_tokenizer *t, int chat_template);

/* Scratch bytes and the most ids tok_chat_encode needs for the turn
 * (0: the turn is too long to encode, or the template unknown). */
size_t tok_chat_scratch_size(const tok_tokenizer *t, const tok_chat_turn *turn);
size_t tok_chat_max_ids(const tok_tokenizer *t, const tok_chat_turn *turn);

/* The turn's ids: writes at most max_ids, returns the count or a negative
 * tok_status (a special token missing, output or scratch too small) with
 * tok_error set. */
int tok_chat_encode(tok_tokenizer *t, const tok_chat_turn *turn, int *ids, int max_ids,
                    void *scratch, size_t scratch_size);

/* The end-of-turn token the template closes a reply with: eos_id for llama2,
 * <|eot_id|> for the Llama 3 templates, <|im_end|> for ChatML, <end_of_turn>
 * for Gemma; -1 when the
 * vocabulary lacks it. A chat stops a reply at it, and at eos_id and eot_id. */
int tok_chat_end_id(const tok_tokenizer *t, int chat_template);

/* Which template a model's Jinja chat template is, by the markers it uses (as
 * export.py's chat_template_of reads tokenizer_config.json): "<|start_header_id|>"
 * llama3 (llama3.1 when it also holds "Cutting Knowledge Date"), else
 * "<|im_start|>" chatml, else "<start_of_turn>" gemma, else "[INST]" llama2;
 * -1 when none is there. For
 * ChatML, the literal system turn the template falls back on
 * ('<|im_start|>system\n...<|im_end|>' with no quote, brace or + inside) is the
 * default system prompt: written to `system` (cap >= len always suffices;
 * NULL: not wanted) with Jinja's "\n" escapes undone, its length in
 * *system_len (0: none). */
int tok_chat_template_of(const char *jinja, size_t len, char *system, size_t cap, size_t *system_len);

/* ---- a GGUF file's tokenizer (tokenizer/gguf.c) ----
 *
 * A GGUF carries its tokenizer as metadata: tokenizer.ggml.model "llama"
 * (sentencepiece pieces, scores, token types) becomes a tokenizer.bin image
 * (with tokenizer.ggml.add_space_prefix false, Gemma's, an LTOK kind-2 image
 * whose merges rank each split of a normal piece by the piece's score, as
 * llama.cpp merges by score: tokenizer.bin always adds the dummy prefix),
 * "gpt2" (byte-level pieces in GPT-2's alphabet, merges, a named
 * pre-tokenizer) an LTOK image (FORMAT.md); tok_init reads the image as a
 * file, then tok_gguf_apply sets the ids, add_bos and the chat template the
 * file names. The caller finds the keys (model.h's llm_gguf_find of each
 * tok_gguf_key_name) and gives the memory, sizes first:
 *
 *   tok_gguf g = {0}; llm_gguf_value v[TOK_GGUF_KEY_COUNT];
 *   g.vocab_size = model's vocab_size;
 *   for each key k: if (llm_gguf_find(file, n, tok_gguf_key_name(k), &v[k]) == 1) g.key[k] = &v[k];
 *   if (tok_gguf_size(&g)) puts(g.error);
 *   tok_gguf_image(&g, malloc(g.image_size), g.image_size, malloc(g.scratch_size), g.scratch_size, &len);
 *   tok_init(&t, image, len, g.vocab_size, arena, tok_arena_size(image, len, g.vocab_size));
 *   tok_gguf_apply(&g, &t, malloc(g.system_size), g.system_size);   (the image and system live on with t)
 *
 * Each returns 0 or a negative tok_status with one line in g.error (the
 * values are the file's: every count, type and length is checked). */
enum tok_gguf_key {
    TOK_GGUF_MODEL, TOK_GGUF_PRE, TOK_GGUF_TOKENS, TOK_GGUF_TOKEN_TYPE, TOK_GGUF_SCORES, TOK_GGUF_MERGES,
    TOK_GGUF_BOS, TOK_GGUF_EOS, TOK_GGUF_EOT, TOK_GGUF_ADD_BOS, TOK_GGUF_CHAT_TEMPLATE, TOK_GGUF_ADD_SPACE_PREFIX,
    TOK_GGUF_KEY_COUNT
};
/* "tokenizer.ggml.model", ... ("" for an unknown key) */
const char *tok_gguf_key_name(int key);

struct llm_gguf_value;   /* model.h's: a GGUF value read in place */
typedef struct tok_gguf {
    const struct llm_gguf_value *key[TOK_GGUF_KEY_COUNT];   /* the caller's; NULL: the file has no such key */
    int vocab_size;         /* the model's: the tokens must be this many */
    /* what tok_gguf_size found */
    size_t image_size;      /* bytes of image tok_gguf_image needs (the image may come out shorter) */
    size_t scratch_size;    /* bytes of scratch it needs (0: none) */
    size_t system_size;     /* bytes tok_gguf_apply needs for the default system prompt */
    int ltok_kind;          /* the image: TOK_KIND_BYTE_LEVEL ("gpt2"), TOK_KIND_SPM_BPE ("llama" without the
                               dummy prefix), 0 ("llama": tokenizer.bin) */
    int pre;                /* byte-level: the pre-tokenizer's row (tok_pre_tokenizer_of's table) */
    int used;               /* LTOK: the tokens the image holds (unused ones at the end left out) */
    unsigned long long text;/* LTOK: the pieces' text bytes */
    int default_add_bos;    /* add_bos when the file does not say */
    char error[256];
} tok_gguf;

/* Check the keys and size the image, its scratch and the system prompt. */
int tok_gguf_size(tok_gguf *g);
/* Write the image from the keys tok_gguf_size checked, unchanged since
 * (image_cap >= g->image_size, scratch_cap >= g->scratch_size, any
 * alignment); *image_len: its bytes, for tok_init. */
int tok_gguf_image(tok_gguf *g, void *image, size_t image_cap, void *scratch, size_t scratch_cap,
                   size_t *image_len);
/* After tok_init over the image: BOS / EOS ids, add_bos, the chat template
 * by its markers (tok_chat_template_of) with its default system prompt
 * (written to system, cap >= g->system_size; t points into it), and the end
 * of turn: the file's eot_token_id, else the template's end-of-turn token. */
int tok_gguf_apply(tok_gguf *g, tok_tokenizer *t, char *system, size_t cap);

/* The byte-level pre-tokenizers by llama.cpp's tokenizer.ggml.pre name
 * ("llama-bpe", "qwen2", ...; "default" when a file names none): 0 and the
 * pre-tokenizer with its normalizer and ignore_merges, or -1 when this
 * build has none of that name. */
int tok_pre_tokenizer_of(const char *gguf_name, size_t len, int *pre, int *normalizer, int *ignore_merges);
/* A tok_pre_tokenizer's name as --info prints it ("gpt2", "llama3", "qwen2", "smollm"; "" for none). */
const char *tok_pre_tokenizer_name(int pre);

#ifdef __cplusplus
}
#endif
#endif
