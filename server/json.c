/* server/json.c -- the strict JSON reader and the writer (json.h). */
#include "json.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json__parser {
    json_doc *d;
    const unsigned char *s;
    size_t len, at;
} json__parser;

static size_t json__align8(size_t n) { return (n + 7) & ~(size_t)7; }

size_t json_arena_size(size_t len, int max_values) {
    if (max_values < 1 || len > SIZE_MAX / 4) return 0;
    size_t nodes = (size_t)max_values * sizeof(json_value);
    if (nodes / sizeof(json_value) != (size_t)max_values) return 0;
    /* decoded strings never grow: a string's bytes plus its NUL fit in its quotes */
    return json__align8(nodes) + json__align8(len + 1) + 16;
}

static int json__fail(json__parser *p, const char *what) {
    snprintf(p->d->error, sizeof p->d->error, "invalid JSON at byte %zu: %s", p->at, what);
    return -1;
}

static void json__space(json__parser *p) {
    while (p->at < p->len) {
        unsigned char c = p->s[p->at];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->at++;
    }
}

/* The length of the UTF-8 character at s (n bytes left), or 0 when it is not well-formed. */
static size_t json__utf8_char(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { need = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < need) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return need;
}

int json_utf8_valid(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = json__utf8_char(u + i, len - i);
        if (!n) return 0;
        i += n;
    }
    return 1;
}

size_t json_utf8_complete(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    /* a lead byte among the last three whose sequence runs past the end */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = u[len - back];
        if ((c & 0xC0) == 0x80) continue;   /* a continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? len - back : len;
    }
    return len;
}

static int json__new_value(json__parser *p, int type) {
    json_doc *d = p->d;
    if (d->n_values >= d->max_values) return json__fail(p, "more values than this server reads"), -1;
    json_value *v = &d->values[d->n_values];
    memset(v, 0, sizeof *v);
    v->type = type;
    v->first = v->next = -1;
    return d->n_values++;
}

static int json__hex4(json__parser *p, uint32_t *out) {
    if (p->len - p->at < 4) return json__fail(p, "\\u needs four hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[p->at + i];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return json__fail(p, "\\u needs four hex digits");
        v = v * 16 + (uint32_t)h;
    }
    p->at += 4;
    *out = v;
    return 0;
}

static void json__put_utf8(char *out, size_t *n, uint32_t cp) {
    if (cp < 0x80) out[(*n)++] = (char)cp;
    else if (cp < 0x800) { out[(*n)++] = (char)(0xC0 | cp >> 6); out[(*n)++] = (char)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | cp >> 12); out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | cp >> 18); out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A string at p->at (its opening quote): decoded into the doc's strings. */
static int json__string(json__parser *p, const char **str, size_t *len) {
    json_doc *d = p->d;
    p->at++;   /* the quote */
    char *out = d->strings + d->strings_used;
    size_t n = 0;
    for (;;) {
        if (p->at >= p->len) return json__fail(p, "unterminated string");
        unsigned char c = p->s[p->at];
        if (c == '"') { p->at++; break; }
        if (c < 0x20) return json__fail(p, "control character in a string (escape it)");
        if (c == '\\') {
            if (++p->at >= p->len) return json__fail(p, "unterminated escape");
            unsigned char e = p->s[p->at++];
            switch (e) {
            case '"': out[n++] = '"'; break;
            case '\\': out[n++] = '\\'; break;
            case '/': out[n++] = '/'; break;
            case 'b': out[n++] = '\b'; break;
            case 'f': out[n++] = '\f'; break;
            case 'n': out[n++] = '\n'; break;
            case 'r': out[n++] = '\r'; break;
            case 't': out[n++] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (json__hex4(p, &cp)) return -1;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return json__fail(p, "lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (p->len - p->at < 2 || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u')
                        return json__fail(p, "high surrogate not followed by a low one");
                    p->at += 2;
                    if (json__hex4(p, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return json__fail(p, "high surrogate not followed by a low one");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return json__fail(p, "\\u0000 is not accepted");
                json__put_utf8(out, &n, cp);
                break;
            }
            default: p->at--; return json__fail(p, "unknown escape");
            }
            continue;
        }
        size_t k = json__utf8_char(p->s + p->at, p->len - p->at);
        if (!k) return json__fail(p, "string is not valid UTF-8");
        memcpy(out + n, p->s + p->at, k);
        n += k;
        p->at += k;
    }
    out[n] = '\0';
    d->strings_used += n + 1;
    *str = out;
    *len = n;
    return 0;
}

static int json__number(json__parser *p, double *out) {
    size_t start = p->at;
    const unsigned char *s = p->s;
    if (p->at < p->len && s[p->at] == '-') p->at++;
    if (p->at >= p->len) return json__fail(p, "number expected");
    if (s[p->at] == '0') p->at++;
    else if (s[p->at] >= '1' && s[p->at] <= '9') while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
    else return json__fail(p, "number expected");
    if (p->at < p->len && s[p->at] == '.') {
        p->at++;
        if (p->at >= p->len || s[p->at] < '0' || s[p->at] > '9') return json__fail(p, "digit expected after '.'");
        while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
    }
    if (p->at < p->len && (s[p->at] == 'e' || s[p->at] == 'E')) {
        p->at++;
        if (p->at < p->len && (s[p->at] == '+' || s[p->at] == '-')) p->at++;
        if (p->at >= p->len || s[p->at] < '0' || s[p->at] > '9') return json__fail(p, "digit expected in exponent");
        while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
    }
    char tmp[64];
    size_t n = p->at - start;
    if (n >= sizeof tmp) return json__fail(p, "number too long");
    memcpy(tmp, s + start, n);
    tmp[n] = '\0';
    double v = strtod(tmp, NULL);
    if (!isfinite(v)) return json__fail(p, "number out of range");
    *out = v;
    return 0;
}

static int json__literal(json__parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->at < n || memcmp(p->s + p->at, word, n)) return json__fail(p, "unexpected character");
    p->at += n;
    return 0;
}

static int json__value(json__parser *p, int depth);

/* An array or object at p->at (its bracket): the children linked in order. */
static int json__container(json__parser *p, int depth, int type) {
    int self = json__new_value(p, type);
    if (self < 0) return -1;
    char close = type == JSON_ARRAY ? ']' : '}';
    p->at++;
    json__space(p);
    if (p->at < p->len && p->s[p->at] == close) { p->at++; return self; }
    int prev = -1;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (type == JSON_OBJECT) {
            if (p->at >= p->len || p->s[p->at] != '"') return json__fail(p, "member name (a string) expected");
            if (json__string(p, &key, &key_len)) return -1;
            json__space(p);
            if (p->at >= p->len || p->s[p->at] != ':') return json__fail(p, "':' expected");
            p->at++;
        }
        int child = json__value(p, depth + 1);
        if (child < 0) return -1;
        json_value *cv = &p->d->values[child];
        cv->key = key;
        cv->key_len = key_len;
        if (prev < 0) p->d->values[self].first = child;
        else p->d->values[prev].next = child;
        prev = child;
        p->d->values[self].count++;
        json__space(p);
        if (p->at >= p->len) return json__fail(p, "unterminated array or object");
        if (p->s[p->at] == ',') { p->at++; json__space(p); continue; }
        if (p->s[p->at] == close) { p->at++; return self; }
        return json__fail(p, type == JSON_ARRAY ? "',' or ']' expected" : "',' or '}' expected");
    }
}

static int json__value(json__parser *p, int depth) {
    if (depth > JSON_MAX_DEPTH) return json__fail(p, "nested too deeply");
    json__space(p);
    if (p->at >= p->len) return json__fail(p, "value expected");
    unsigned char c = p->s[p->at];
    int v;
    switch (c) {
    case '{': return json__container(p, depth, JSON_OBJECT);
    case '[': return json__container(p, depth, JSON_ARRAY);
    case '"': {
        if ((v = json__new_value(p, JSON_STRING)) < 0) return -1;
        const char *s;
        size_t n;
        if (json__string(p, &s, &n)) return -1;
        p->d->values[v].str = s;
        p->d->values[v].len = n;
        return v;
    }
    case 't': if ((v = json__new_value(p, JSON_TRUE)) < 0 || json__literal(p, "true")) return -1; return v;
    case 'f': if ((v = json__new_value(p, JSON_FALSE)) < 0 || json__literal(p, "false")) return -1; return v;
    case 'n': if ((v = json__new_value(p, JSON_NULL)) < 0 || json__literal(p, "null")) return -1; return v;
    default: {
        if (c != '-' && (c < '0' || c > '9')) return json__fail(p, "unexpected character");
        double num;
        if ((v = json__new_value(p, JSON_NUMBER)) < 0 || json__number(p, &num)) return -1;
        p->d->values[v].number = num;
        return v;
    }
    }
}

int json_parse(json_doc *d, const char *text, size_t len, void *arena, size_t arena_size, int max_values) {
    memset(d, 0, sizeof *d);
    size_t need = json_arena_size(len, max_values);
    if (!need || !arena || arena_size < need) {
        snprintf(d->error, sizeof d->error, "JSON arena of %zu bytes too small (need %zu)", arena_size, need);
        return -1;
    }
    unsigned char *a = (unsigned char *)arena;
    size_t off = (8 - (uintptr_t)a % 8) % 8;
    d->values = (json_value *)(void *)(a + off);
    d->max_values = max_values;
    d->strings = (char *)(a + off + json__align8((size_t)max_values * sizeof(json_value)));
    d->strings_cap = len + 1;
    json__parser p = { d, (const unsigned char *)text, len, 0 };
    if (json__value(&p, 0) < 0) return -1;
    json__space(&p);
    if (p.at != len) return json__fail(&p, "text after the value");
    return 0;
}

const json_value *json_root(const json_doc *d) { return d->n_values ? &d->values[0] : NULL; }

const json_value *json_child(const json_doc *d, const json_value *c) {
    return c && (c->type == JSON_ARRAY || c->type == JSON_OBJECT) && c->first >= 0 ? &d->values[c->first] : NULL;
}
const json_value *json_next(const json_doc *d, const json_value *v) { return v && v->next >= 0 ? &d->values[v->next] : NULL; }

const json_value *json_get(const json_doc *d, const json_value *o, const char *key) {
    if (!o || o->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    const json_value *found = NULL;
    for (const json_value *v = json_child(d, o); v; v = json_next(d, v))
        if (v->key_len == n && !memcmp(v->key, key, n)) found = v;
    return found;
}

/* ---- the writer ---- */

void jb_raw(json_buf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->cap - b->len < len + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < len + 1) {
            if (cap > SIZE_MAX / 2) { b->failed = 1; return; }
            cap *= 2;
        }
        char *p = (char *)realloc(b->data, cap);
        if (!p) { b->failed = 1; return; }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void jb_cstr(json_buf *b, const char *s) { jb_raw(b, s, strlen(s)); }

void jb_string(json_buf *b, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    jb_raw(b, "\"", 1);
    size_t run = 0;   /* bytes copied as they are, in one call */
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        const char *esc = NULL;
        char tmp[8];
        size_t k = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7F) { snprintf(tmp, sizeof tmp, "\\u%04x", c); esc = tmp; }
        else if (c >= 0x80) {
            k = json__utf8_char(u + i, len - i);
            if (!k) { esc = "\xEF\xBF\xBD"; k = 1; }   /* U+FFFD for a byte that is not UTF-8 */
        }
        if (esc) {
            jb_raw(b, s + i - run, run);
            run = 0;
            jb_cstr(b, esc);
            i += k;
        } else {
            run += k;
            i += k;
        }
    }
    jb_raw(b, s + len - run, run);
    jb_raw(b, "\"", 1);
}

void jb_int(json_buf *b, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    jb_raw(b, tmp, (size_t)n);
}

void jb_free(json_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
