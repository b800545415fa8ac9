/* fuzz_serve.c -- the server's request parser (server/http.c) and JSON
 * reader (server/json.c), the parts a network client reaches.
 *
 * Input: bytes as they arrive on a connection. The head parser runs on the
 * whole input and on every prefix up to the head's end; JSON runs on the
 * body after a complete head, else on the whole input. Invariants:
 * - the parser's answer is complete (the head's length), more-needed (0) or
 *   a refusal with an HTTP status and a reason; a complete head ends in
 *   CRLF CRLF within HTTP_MAX_HEAD, with a token method and a path that
 *   starts with '/'; a prefix of a complete head is never complete, and the
 *   head's own bytes give the same answer as the whole input;
 * - a parsed JSON document's strings are UTF-8 without NUL, each
 *   container's count is its children's; the writer's text of the document
 *   parses again to the same text (strings escaped, numbers at %.17g);
 * - json_utf8_complete keeps a prefix that is valid UTF-8 when the input is.
 */
#include "server/http.h"
#include "server/json.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VALUES 4096

static void write_value(json_buf *b, const json_doc *d, const json_value *v) {
    char num[40];
    switch (v->type) {
    case JSON_NULL: jb_cstr(b, "null"); break;
    case JSON_TRUE: jb_cstr(b, "true"); break;
    case JSON_FALSE: jb_cstr(b, "false"); break;
    case JSON_NUMBER: snprintf(num, sizeof num, "%.17g", v->number); jb_cstr(b, num); break;
    case JSON_STRING: jb_string(b, v->str, v->len); break;
    default: {
        int n = 0;
        jb_cstr(b, v->type == JSON_ARRAY ? "[" : "{");
        for (const json_value *c = json_child(d, v); c; c = json_next(d, c), n++) {
            if (n) jb_cstr(b, ",");
            if (v->type == JSON_OBJECT) { jb_string(b, c->key, c->key_len); jb_cstr(b, ":"); }
            write_value(b, d, c);
        }
        if (n != v->count) fuzz_fail("a container counts %d children and links %d", v->count, n);
        jb_cstr(b, v->type == JSON_ARRAY ? "]" : "}");
    }
    }
}

static void check_strings(const json_doc *d) {
    for (int i = 0; i < d->n_values; i++) {
        const json_value *v = &d->values[i];
        if (v->type == JSON_STRING && (strlen(v->str) != v->len || !json_utf8_valid(v->str, v->len)))
            fuzz_fail("value %d: a string with a NUL or not UTF-8", i);
        if (v->key && (strlen(v->key) != v->key_len || !json_utf8_valid(v->key, v->key_len)))
            fuzz_fail("value %d: a key with a NUL or not UTF-8", i);
    }
}

/* parse, check, write; the text written (malloc'd) or NULL when refused */
static char *roundtrip(const char *text, size_t len, size_t *out_len, int *values) {
    size_t need = json_arena_size(len, MAX_VALUES);
    void *arena = malloc(need);
    if (!arena) fuzz_fail("out of memory");
    json_doc d;
    char *out = NULL;
    if (json_parse(&d, text, len, arena, need, MAX_VALUES) == 0) {
        check_strings(&d);
        json_buf b = { 0 };
        write_value(&b, &d, json_root(&d));
        if (b.failed) fuzz_fail("the writer ran out of memory");
        out = b.data;
        *out_len = b.len;
        *values = d.n_values;
    } else if (!d.error[0]) fuzz_fail("refused without a message");
    free(arena);
    return out;
}

static void check_json(const char *text, size_t len) {
    size_t n1 = 0, n2 = 0;
    int v1 = 0, v2 = 0;
    char *once = roundtrip(text, len, &n1, &v1);
    if (!once) { fuzz_note("JSON refused"); return; }
    char *twice = roundtrip(once, n1, &n2, &v2);
    if (!twice) fuzz_fail("the writer's text does not parse: %.200s", once);
    if (n1 != n2 || memcmp(once, twice, n1) || v1 != v2) fuzz_fail("written twice, two texts: %.200s / %.200s", once, twice);
    size_t keep = json_utf8_complete(text, len);
    if (keep > len || (json_utf8_valid(text, len) && !json_utf8_valid(text, keep))) fuzz_fail("utf8_complete broke a character");
    fuzz_note("JSON ok, %d values", v1);
    free(once);
    free(twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    http_request q;
    int r = http_parse_head(buf, size, &q, 1 << 20);
    if (r < 0) {
        int st = -r;
        if (!q.error || !(st == 400 || st == 411 || st == 413 || st == 414 || st == 417 || st == 431 || st == 501 || st == 505))
            fuzz_fail("refused with status %d and reason %s", st, q.error ? q.error : "(none)");
        check_json(buf, size);
        char json_note[256];
        memcpy(json_note, fuzz_outcome, sizeof json_note);
        fuzz_note("refused %d: %.150s; %.90s", st, q.error, json_note);
        return 0;
    }
    if (r == 0) {
        if (size >= HTTP_MAX_HEAD) fuzz_fail("more bytes asked for beyond the head's limit (%zu)", size);
        fuzz_note("head incomplete");
        check_json(buf, size);
        return 0;
    }
    size_t h = (size_t)r;
    if (h > size || h > HTTP_MAX_HEAD || h < 4 || memcmp(buf + h - 4, "\r\n\r\n", 4))
        fuzz_fail("a head of %zu bytes that does not end in CRLF CRLF within the input and the limit", h);
    if (!q.method[0] || q.path[0] != '/' || strlen(q.path) >= sizeof q.path) fuzz_fail("method or path malformed");
    http_request q2;
    if (http_parse_head(buf, h, &q2, 1 << 20) != r || strcmp(q2.path, q.path) || q2.content_length != q.content_length)
        fuzz_fail("the head alone parses differently");
    for (size_t n = h > 64 ? h - 64 : 0; n < h; n++)
        if (http_parse_head(buf, n, &q2, 1 << 20) > 0) fuzz_fail("a prefix of %zu bytes is a complete head", n);
    char note[256];
    snprintf(note, sizeof note, "%.15s %.100s, body %zu", q.method, q.path, q.content_length);
    check_json(buf + h, size - h);
    char json_note[256];
    memcpy(json_note, fuzz_outcome, sizeof json_note);
    fuzz_note("%s; %s", note, json_note);
    return 0;
}
