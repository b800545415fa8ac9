/* server/http.c -- the request head parser and socket helpers (http.h). */
#define _POSIX_C_SOURCE 200809L
#include "http.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int http__fail(http_request *r, int status, const char *why) {
    r->error = why;
    return -status;
}

static int http__lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* case-insensitive equality of n bytes with the lowercase word */
static int http__is(const char *s, size_t n, const char *word) {
    if (strlen(word) != n) return 0;
    for (size_t i = 0; i < n; i++) if (http__lower((unsigned char)s[i]) != word[i]) return 0;
    return 1;
}

/* a token character (RFC 9110): header names and methods */
static int http__tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* does the comma-separated list v (n) hold the token word? */
static int http__list_has(const char *v, size_t n, const char *word) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e > s && http__is(v + s, e - s, word)) return 1;
    }
    return 0;
}

int http_parse_head(const char *buf, size_t len, http_request *r, size_t max_body) {
    memset(r, 0, sizeof *r);
    /* the end of the head: CRLF CRLF (bare LFs are refused below) */
    size_t end = 0;
    for (size_t i = 0; i + 1 < len && !end; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n') return http__fail(r, 400, "lines must end in CRLF");
        if (i + 3 < len && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') end = i + 4;
    }
    const char *eol = memchr(buf, '\n', len < HTTP_MAX_LINE + 1 ? len : HTTP_MAX_LINE + 1);
    if (!eol && len > HTTP_MAX_LINE) return http__fail(r, 414, "request line too long");
    if (!end) {
        if (len >= HTTP_MAX_HEAD) return http__fail(r, 431, "request headers too long");
        return 0;
    }
    if (end > HTTP_MAX_HEAD) return http__fail(r, 431, "request headers too long");
    r->head_len = end;

    /* request line: METHOD SP target SP HTTP/1.x CRLF */
    size_t line_end = (size_t)(eol - buf);
    if (line_end == 0 || buf[line_end - 1] != '\r') return http__fail(r, 400, "request line must end in CRLF");
    const char *line = buf;
    size_t n = line_end - 1, i = 0;
    while (i < n && http__tchar((unsigned char)line[i])) i++;
    if (i == 0 || i >= sizeof r->method || i >= n || line[i] != ' ') return http__fail(r, 400, "malformed request line");
    memcpy(r->method, line, i);
    r->method[i] = '\0';
    size_t t0 = ++i;
    while (i < n && line[i] != ' ') {
        unsigned char c = (unsigned char)line[i];
        if (c <= 0x20 || c >= 0x7F) return http__fail(r, 400, "malformed request target");
        i++;
    }
    size_t t1 = i;
    if (t1 == t0 || i >= n || line[t0] != '/') return http__fail(r, 400, "malformed request target");
    size_t plen = t1 - t0;
    const char *q = memchr(line + t0, '?', plen);
    if (q) plen = (size_t)(q - (line + t0));
    if (plen >= sizeof r->path) return http__fail(r, 414, "request target too long");
    memcpy(r->path, line + t0, plen);
    r->path[plen] = '\0';
    i++;
    if (n - i != 8 || memcmp(line + i, "HTTP/1.", 7)) return http__fail(r, 400, "malformed HTTP version");
    if (line[i + 7] == '1') r->keep_alive = 1;
    else if (line[i + 7] != '0') return http__fail(r, 505, "HTTP version not supported");

    /* headers: name ":" OWS value OWS CRLF */
    int n_headers = 0;
    size_t at = line_end + 1;
    while (at < end - 2) {
        const char *h = buf + at;
        const char *nl = memchr(h, '\n', end - at);
        size_t hn = (size_t)(nl - h);
        if (hn == 0 || h[hn - 1] != '\r') return http__fail(r, 400, "header line must end in CRLF");
        hn--;
        if (++n_headers > HTTP_MAX_HEADERS) return http__fail(r, 431, "too many headers");
        size_t k = 0;
        while (k < hn && http__tchar((unsigned char)h[k])) k++;
        if (k == 0 || k >= hn || h[k] != ':') return http__fail(r, 400, "malformed header");
        size_t vs = k + 1, ve = hn;
        while (vs < ve && (h[vs] == ' ' || h[vs] == '\t')) vs++;
        while (ve > vs && (h[ve - 1] == ' ' || h[ve - 1] == '\t')) ve--;
        for (size_t j = vs; j < ve; j++) {
            unsigned char c = (unsigned char)h[j];
            if ((c < 0x20 && c != '\t') || c == 0x7F) return http__fail(r, 400, "control character in a header");
        }
        const char *v = h + vs;
        size_t vn = ve - vs;
        if (http__is(h, k, "content-length")) {
            if (r->has_length) return http__fail(r, 400, "more than one Content-Length");
            if (vn == 0 || vn > 18) return http__fail(r, vn ? 413 : 400, vn ? "request body too large" : "bad Content-Length");
            size_t cl = 0;
            for (size_t j = 0; j < vn; j++) {
                if (v[j] < '0' || v[j] > '9') return http__fail(r, 400, "bad Content-Length");
                cl = cl * 10 + (size_t)(v[j] - '0');
            }
            r->content_length = cl;
            r->has_length = 1;
        } else if (http__is(h, k, "transfer-encoding")) {
            return http__fail(r, 501, "transfer codings (chunked bodies) are not supported: send Content-Length");
        } else if (http__is(h, k, "connection")) {
            if (http__list_has(v, vn, "close")) r->keep_alive = 0;
            else if (http__list_has(v, vn, "keep-alive")) r->keep_alive = 1;
        } else if (http__is(h, k, "expect")) {
            if (!http__is(v, vn, "100-continue")) return http__fail(r, 417, "only Expect: 100-continue is supported");
            r->expect_continue = 1;
        } else if (http__is(h, k, "authorization")) {
            if (vn >= sizeof r->authorization) r->auth_too_long = 1;
            else { memcpy(r->authorization, v, vn); r->authorization[vn] = '\0'; }
        }
        at += hn + 2;
    }
    if (r->has_length && r->content_length > max_body) return http__fail(r, 413, "request body too large");
    return (int)end;
}

const char *http_reason(int s) {
    switch (s) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

int http_equal_ct(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = (unsigned char)(na != nb);
    /* every byte of b read whatever a holds: the time tells b's length only */
    for (size_t i = 0; i < nb; i++) diff |= (unsigned char)((i < na ? (unsigned char)a[i] : 0) ^ (unsigned char)b[i]);
    return diff == 0;
}

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

int http_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

long http_read_some(int fd, char *buf, size_t cap) {
    for (;;) {
        ssize_t r = recv(fd, buf, cap, 0);
        if (r < 0 && errno == EINTR) continue;
        return (long)r;
    }
}

void http_set_timeouts(int fd, int ms) {
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}
