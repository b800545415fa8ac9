/* server/http.h -- the HTTP/1.1 request parser and socket helpers of the
 * server.
 *
 * Contract: http_parse_head is pure (no I/O, no allocation, no globals): it
 * reads a request's head (request line and headers) from a buffer and
 * refuses what it does not take with the status to answer -- 400 malformed,
 * 414 request line too long, 431 headers too long or too many, 413 body
 * above the limit, 411 a body without Content-Length, 501 a transfer coding,
 * 505 another HTTP version. The rest reads and writes sockets with
 * timeouts (libc and POSIX sockets only).
 */
#ifndef SERVER_HTTP_H
#define SERVER_HTTP_H
#include <stddef.h>

#define HTTP_MAX_LINE 8192          /* request line */
#define HTTP_MAX_HEAD 16384         /* request line and headers together */
#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_PATH 1024
#define HTTP_MAX_AUTH 512

typedef struct http_request {
    char method[16];
    char path[HTTP_MAX_PATH];       /* the target without its query string */
    size_t head_len;                /* bytes of the head, its blank line included */
    size_t content_length;
    int has_length;                 /* a Content-Length header came */
    int keep_alive;                 /* HTTP/1.1 without "Connection: close" */
    int expect_continue;            /* "Expect: 100-continue" */
    char authorization[HTTP_MAX_AUTH];  /* the header's value, "" if none */
    int auth_too_long;              /* the header did not fit (it cannot match) */
    const char *error;              /* a negative return: why */
} http_request;

/* Parse the head at buf (len bytes received so far). Returns the head's
 * length when the head is complete (req filled), 0 when more bytes are
 * needed, or minus the HTTP status to answer (req->error says why).
 * max_body: the largest Content-Length taken. */
int http_parse_head(const char *buf, size_t len, http_request *req, size_t max_body);

/* The reason phrase of a status ("Not Found"). */
const char *http_reason(int status);

/* 1 when the NUL-terminated a and b are equal, in time that depends on
 * their lengths only, not on where they differ. */
int http_equal_ct(const char *a, const char *b);

/* Socket I/O with a deadline: write all of buf (0, or -1 when the peer is
 * gone or the send timeout passed), read up to cap bytes (the count, 0 at
 * EOF, -1 on error or timeout). SIGPIPE must be ignored by the caller
 * (MSG_NOSIGNAL is used where it exists). */
int http_write_all(int fd, const char *buf, size_t len);
long http_read_some(int fd, char *buf, size_t cap);
/* Send and receive timeouts of a socket, in milliseconds. */
void http_set_timeouts(int fd, int ms);
#endif
