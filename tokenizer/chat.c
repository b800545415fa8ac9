/* tokenizer/chat.c -- chat templates: a turn rendered as text (the format
 * strings below), checked against a vocabulary, encoded with the template's
 * special tokens by id; a Jinja template recognised by its text. */
#include "../tokenizer.h"

#include <stdint.h>
#include <string.h>

#include "internal.h"

/* A template is three format strings that read like the published Jinja
 * templates: "{system}", "{user}" and "{date}" stand for those texts, "{bos}"
 * for the tokenizer's bos_id, and "<|...|>" or "<name>" (lower-case letters
 * and '_': Gemma's "<start_of_turn>") is a special token, emitted by id. Only
 * the format is scanned for these: the texts go in verbatim. */
typedef struct {
    const char *name;
    const char *first_system;   /* the first turn, with a system prompt */
    const char *first;          /* the first turn without one (NULL: first_system, system "") */
    const char *later;          /* a later turn, after the model's end-of-turn token */
    const char *end;            /* the token that ends a reply (NULL: the tokenizer's eos_id) */
    int trim;                   /* 1: system and user texts stripped of whitespace (Jinja's |trim);
                                   2: the user text only */
    int empty_system_is_none;   /* a system prompt "" renders `first` (llama2.c) */
    const char *bos_text;       /* what "{bos}" renders as (NULL: nothing, as llama2.c) */
} tok_chat_format;

#define TOK_LLAMA3_USER "<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>" \
                        "<|start_header_id|>assistant<|end_header_id|>\n\n"
#define TOK_CHATML_USER "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
#define TOK_GEMMA_USER "<start_of_turn>user\n"
#define TOK_GEMMA_MODEL "<end_of_turn>\n<start_of_turn>model\n"

static const tok_chat_format chat_formats[TOK_CHAT_COUNT] = {
    /* llama2.c: every turn is encoded with a BOS (HF's Llama 2 template: bos_token + '[INST] ') */
    [TOK_CHAT_LLAMA2] = { "llama2", "{bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]",
                          "{bos}[INST] {user} [/INST]", "{bos}[INST] {user} [/INST]", NULL, 0, 1, NULL },
    /* Meta-Llama-3-8B-Instruct: bos_token before the first message, contents |trim */
    [TOK_CHAT_LLAMA3] = { "llama3",
                          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
                          TOK_LLAMA3_USER,
                          "<|begin_of_text|>" TOK_LLAMA3_USER, TOK_LLAMA3_USER, "<|eot_id|>", 1, 0, NULL },
    /* SmolLM2, Qwen2.5, Qwen3: no BOS; each message ends "<|im_end|>\n" */
    [TOK_CHAT_CHATML] = { "chatml", "<|im_start|>system\n{system}<|im_end|>\n" TOK_CHATML_USER, TOK_CHATML_USER,
                          "\n" TOK_CHATML_USER, "<|im_end|>", 0, 0, NULL },
    /* Llama-3.1-8B-Instruct, Llama-3.2-1B/3B-Instruct: the system block is always there */
    [TOK_CHAT_LLAMA31] = { "llama3.1",
                           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                           "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n{system}<|eot_id|>"
                           TOK_LLAMA3_USER,
                           NULL, TOK_LLAMA3_USER, "<|eot_id|>", 1, 0, NULL },
    /* Gemma 3: bos_token, then the system text + "\n\n" (untrimmed) opens the
     * first user message, whose text is |trim'd; each message ends "<end_of_turn>\n" */
    [TOK_CHAT_GEMMA] = { "gemma", "{bos}" TOK_GEMMA_USER "{system}\n\n{user}" TOK_GEMMA_MODEL,
                         "{bos}" TOK_GEMMA_USER "{user}" TOK_GEMMA_MODEL,
                         "\n" TOK_GEMMA_USER "{user}" TOK_GEMMA_MODEL, "<end_of_turn>", 2, 0, "<bos>" },
};

/* Length of the special token that starts f ("<|...|>" or "<" [a-z_]+ ">"), or 0. */
static size_t special_len(const char *f) {
    const char *e;
    if (f[0] != '<') return 0;
    if (f[1] == '|') return (e = strstr(f + 2, "|>")) != NULL ? (size_t)(e + 2 - f) : 0;
    for (e = f + 1; (*e >= 'a' && *e <= 'z') || *e == '_'; e++) {}
    return e > f + 1 && *e == '>' ? (size_t)(e + 1 - f) : 0;
}

const char *tok_chat_template_name(int chat_template) {
    return chat_template >= 0 && chat_template < TOK_CHAT_COUNT ? chat_formats[chat_template].name : NULL;
}

int tok_chat_template_id(const char *name) {
    int i;
    for (i = 0; name && i < TOK_CHAT_COUNT; i++)
        if (!strcmp(name, chat_formats[i].name)) return i;
    return -1;
}

const char *tok_chat_template_names(void) {
    return "llama2, llama3, llama3.1, chatml, gemma";
}

/* Output of the renderers: the bytes that fit (cap counts the NUL) and the full length. */
typedef struct {
    char *out;
    size_t cap, len;
} tok_sink;

static void sink_put(tok_sink *s, const char *str, size_t n) {
    size_t room = s->len + 1 < s->cap ? s->cap - 1 - s->len : 0;
    if (room) memcpy(s->out + s->len, str, n < room ? n : room);
    s->len = n > SIZE_MAX - s->len ? SIZE_MAX : s->len + n;
}

/* Length of the whitespace character (Python's str.isspace, which Jinja's
 * trim strips) that starts (at_end 0) or ends (at_end 1) s[0..n), or 0. */
static size_t space_len(const unsigned char *s, size_t n, int at_end) {
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

static void trim(const char **s, size_t *n) {
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
static int chat_setup(tok_chat_walk *w, const tok_tokenizer *t, const tok_chat_turn *turn) {
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
    if (w->system && f->trim == 1) trim(&w->system, &w->system_len);
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

static tok_chat_part chat_next(tok_chat_walk *w) {
    tok_chat_part p = { PART_END, NULL, 0 };
    const char *f = w->fmt, *close;
    size_t n;
    if (w->close) {   /* the end-of-turn token: its text, or (llama2) eos_id */
        w->close = 0;
        p.kind = PART_CLOSE;
        p.s = w->f->end ? w->f->end : "";
        p.len = strlen(p.s);
        return p;
    }
    if (!*f) return p;
    if (f[0] == '{' && (close = strchr(f, '}')) != NULL) {
        n = (size_t)(close - f) + 1;
        w->fmt = close + 1;
        p.kind = PART_TEXT;
        if (n == 8 && !memcmp(f, "{system}", n)) { p.s = w->system; p.len = w->system_len; }
        else if (n == 6 && !memcmp(f, "{user}", n)) { p.s = w->user; p.len = w->user_len; }
        else if (n == 6 && !memcmp(f, "{date}", n)) { p.s = w->date; p.len = w->date_len; }
        else p.kind = PART_BOS;   /* "{bos}", the one other placeholder */
        return p;
    }
    if ((n = special_len(f)) > 0) {
        p.kind = PART_SPECIAL;
        p.s = f;
        p.len = n;
        w->fmt = f + n;
        return p;
    }
    p.kind = PART_TEXT;
    p.s = f;
    for (f++; *f && *f != '{' && !special_len(f); f++) {}
    p.len = (size_t)(f - p.s);
    w->fmt = f;
    return p;
}

size_t tok_chat_render(char *out, size_t cap, const tok_tokenizer *t, const tok_chat_turn *turn) {
    tok_sink s;
    tok_chat_walk w;
    tok_chat_part p;
    s.out = out;
    s.cap = cap;
    s.len = 0;
    if (chat_setup(&w, t, turn)) {
        while ((p = chat_next(&w)).kind != PART_END) {
            if (p.kind != PART_BOS) sink_put(&s, p.s, p.len);   /* llama2's closing eos has no text either */
            else if (w.f->bos_text) sink_put(&s, w.f->bos_text, strlen(w.f->bos_text));
        }
    }
    if (cap) out[s.len < cap ? s.len : cap - 1] = '\0';
    return s.len;
}

size_t tok_render_chat(char *out, size_t cap, int chat_template, const char *system, const char *user) {
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
static int chat_missing(tok_tokenizer *t, const tok_chat_format *f, const char *token, size_t len) {
    char name[48];
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, token, len);
    name[len] = '\0';
    tok__fmt(t->error, sizeof t->error, "the %s chat template needs the token %s, which this vocabulary lacks",
             f->name, name);
    return TOK_ERR_FORMAT;
}

int tok_chat_check(tok_tokenizer *t, int chat_template) {
    const tok_chat_format *f;
    const char *fmts[3], *s;
    size_t n;
    int i;
    if (!t) return TOK_ERR_ARG;
    if (chat_template < 0 || chat_template >= TOK_CHAT_COUNT) {
        tok__fmt(t->error, sizeof t->error, "unknown chat template %d", chat_template);
        return TOK_ERR_ARG;
    }
    f = &chat_formats[chat_template];
    fmts[0] = f->first_system;
    fmts[1] = f->first ? f->first : "";
    fmts[2] = f->later;
    for (i = 0; i < 3; i++)
        for (s = fmts[i]; *s; s += n ? n : 1)
            if ((n = special_len(s)) > 0 && tok_piece_id(t, s, n) < 0) return chat_missing(t, f, s, n);
    return TOK_OK;
}

/* The text buffer (the rendered turn bounds every run of text), then tok_encode's scratch. */
static size_t chat_scratch(size_t text_len) {
    size_t enc = text_len < SIZE_MAX ? tok_encode_scratch_size(text_len) : 0;
    return enc && text_len + 1 <= SIZE_MAX - enc ? text_len + 1 + enc : 0;
}

size_t tok_chat_scratch_size(const tok_tokenizer *t, const tok_chat_turn *turn) {
    size_t len = tok_chat_render(NULL, 0, t, turn);
    return len ? chat_scratch(len) : 0;
}

size_t tok_chat_max_ids(const tok_tokenizer *t, const tok_chat_turn *turn) {
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
                    void *scratch, size_t scratch_size) {
    tok_chat_walk w;
    tok_chat_part p;
    size_t len, need, text_len = 0;
    char *text = (char *)scratch;
    int n = 0, k, id;
    if (!t || !t->sorted) return TOK_ERR_ARG;
    len = tok_chat_render(NULL, 0, t, turn);
    if (!len) {
        tok__fmt(t->error, sizeof t->error, "unknown chat template %d", turn ? turn->chat_template : -1);
        return TOK_ERR_ARG;
    }
    need = chat_scratch(len);
    if (!need || !scratch || scratch_size < need) {
        tok__fmt(t->error, sizeof t->error, "chat scratch too small: %lu bytes given, %lu needed%s",
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
            tok__fmt(t->error, sizeof t->error, "the chat turn has more than %d ids", max_ids);
            return TOK_ERR_SPACE;
        }
        ids[n++] = id;
    }
}

int tok_chat_end_id(const tok_tokenizer *t, int chat_template) {
    const char *end;
    if (!t || chat_template < 0 || chat_template >= TOK_CHAT_COUNT) return -1;
    end = chat_formats[chat_template].end;
    return end ? tok_piece_id(t, end, strlen(end)) : t->eos_id;
}

/* s[i..n) starts with the NUL-terminated lit */
static int starts_with(const char *s, size_t n, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return n - i >= k && !memcmp(s + i, lit, k);
}

static int contains(const char *s, size_t n, const char *lit) {
    size_t i;
    for (i = 0; i < n; i++)
        if (starts_with(s, n, i, lit)) return 1;
    return 0;
}

/* The ChatML default system turn: the first "<|im_start|>system" followed by a
 * newline (or Jinja's "\n") whose text runs to "<|im_end|>" with none of '"{}+
 * before it, as the regex <\|im_start\|>system(?:\\n|\n)([^'"{}+]*?)<\|im_end\|>
 * finds it. Returns 1 with the text's bounds. */
static int chatml_system(const char *s, size_t n, size_t *at, size_t *end) {
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

int tok_chat_template_of(const char *jinja, size_t len, char *system, size_t cap, size_t *system_len) {
    size_t at, end, k = 0;
    int kind;
    if (system_len) *system_len = 0;
    if (!jinja) return -1;
    if (contains(jinja, len, "<|start_header_id|>"))
        /* Llama 3.1 and 3.2 open every conversation with a dated system block */
        kind = contains(jinja, len, "Cutting Knowledge Date") ? TOK_CHAT_LLAMA31 : TOK_CHAT_LLAMA3;
    else if (contains(jinja, len, "<|im_start|>")) kind = TOK_CHAT_CHATML;
    else if (contains(jinja, len, "<start_of_turn>")) kind = TOK_CHAT_GEMMA;
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
