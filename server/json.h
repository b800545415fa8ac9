/* server/json.h -- a strict JSON reader (RFC 8259) and a small writer, for
 * the HTTP server's request and response bodies.
 *
 * Contract: libc only, no globals. The reader parses a whole text into a
 * flat tree of values carved from a caller's arena (json_arena_size() tells
 * its bytes for a text's length and a node limit); strings are decoded
 * (escapes, \u surrogate pairs) into the same arena, NUL-terminated. It
 * refuses what RFC 8259 refuses -- trailing commas, leading zeros, single
 * quotes, comments, control characters in strings, lone surrogates, text
 * after the value -- and anything not UTF-8 (overlong forms, surrogates,
 * code points above U+10FFFF), plus what this reader does not take: nesting
 * deeper than JSON_MAX_DEPTH, more values than the node limit, "\u0000",
 * numbers outside double's range. An error leaves one line in doc->error
 * naming the problem and its byte offset.
 *
 *   size_t need = json_arena_size(len, 4096);
 *   json_doc d;
 *   if (json_parse(&d, text, len, malloc(need), need, 4096) != 0) puts(d.error);
 *   const json_value *t = json_get(&d, json_root(&d), "temperature");
 *
 * The writer appends to a growable buffer (json_buf, malloc'd): strings are
 * escaped, and bytes that are not UTF-8 are written as U+FFFD.
 */
#ifndef SERVER_JSON_H
#define SERVER_JSON_H
#include <stddef.h>

#define JSON_MAX_DEPTH 64

enum json_type { JSON_NULL = 0, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct json_value {
    int type;               /* json_type                                      */
    int count;              /* array or object: its elements or members       */
    int first, next;        /* indices of the first child and of the next
                               sibling in the doc's values, -1: none         */
    double number;          /* JSON_NUMBER                                    */
    const char *str;        /* JSON_STRING: the decoded bytes, NUL-terminated */
    size_t len;
    const char *key;        /* a member of an object: its decoded key          */
    size_t key_len;
} json_value;

typedef struct json_doc {
    json_value *values;     /* values[0] is the root                           */
    int n_values, max_values;
    char *strings;          /* decoded strings and keys                         */
    size_t strings_used, strings_cap;
    char error[160];
} json_doc;

/* Arena bytes json_parse needs for a text of len bytes with at most
 * max_values values (0: the sizes overflow). */
size_t json_arena_size(size_t len, int max_values);
/* 0 on success; -1 with doc->error set. */
int json_parse(json_doc *doc, const char *text, size_t len, void *arena, size_t arena_size, int max_values);
const json_value *json_root(const json_doc *doc);
/* The member named key of an object (the last one when repeated), or NULL. */
const json_value *json_get(const json_doc *doc, const json_value *object, const char *key);
/* The element or member after v, or the first of a container: NULL at the end. */
const json_value *json_child(const json_doc *doc, const json_value *container);
const json_value *json_next(const json_doc *doc, const json_value *v);
/* 1 when the len bytes are well-formed UTF-8 (RFC 3629). */
int json_utf8_valid(const char *s, size_t len);
/* Bytes of s (len) that form whole UTF-8 characters from the start, stopping
 * before a sequence cut short at the end (to stream text a piece at a time). */
size_t json_utf8_complete(const char *s, size_t len);

/* ---- the writer ---- */
typedef struct json_buf {
    char *data;
    size_t len, cap;
    int failed;             /* 1: an allocation failed; the text is incomplete */
} json_buf;
void jb_raw(json_buf *b, const char *s, size_t len);
void jb_cstr(json_buf *b, const char *s);            /* raw, NUL-terminated */
void jb_string(json_buf *b, const char *s, size_t len); /* a JSON string, quoted */
void jb_int(json_buf *b, long long v);
void jb_free(json_buf *b);
#endif
