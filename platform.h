/* platform.h -- what the CLI (run.c) needs from the operating system:
 * errors that end the process, a clock, aligned memory (on transparent huge
 * pages for the large arenas), a checkpoint's bytes mapped or copied, and
 * how idle OpenMP threads wait. POSIX (Linux's huge pages and MAP_POPULATE
 * where it has them); the engine and the tokenizer use none of it.
 *
 * Contract: every failure here is the CLI's: one line "error: ..." on
 * stderr and exit (die). */
#ifndef PLATFORM_H
#define PLATFORM_H

#include <stddef.h>

/* "error: " and the message on stderr, stdout flushed first, then exit(status) */
void die(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 2, 3)))
#endif
    ;
double now_seconds(void);   /* a monotonic clock */

/* n bytes aligned for the engine (LLM_ALIGN), or die naming `what` */
void *xmalloc(size_t n, const char *what);
/* the same on 2 MiB pages where Linux offers them (for the large arenas) */
void *xmalloc_big(size_t n, const char *what);
/* 1 when Linux offers transparent huge pages (always, or on madvise) */
int have_huge_pages(void);

/* A file's bytes, read-only: mapped, or copied into memory of ours. */
typedef struct file_bytes {
    const void *data;
    size_t size;
    int copied;         /* 1: read into memory of ours (free), 0: mapped */
} file_bytes;

/* The whole file mapped (populate: every page mapped now); errors name it
 * "what path" ("checkpoint models/x.bin") */
file_bytes map_file(const char *path, const char *what, int populate);
/* one byte of every page read, so the first touches' traps fall in the load */
void touch_pages(const file_bytes *f);
/* the file of `size` bytes read into memory of ours (xmalloc_big) */
file_bytes read_file_copy(const char *path, const char *what, size_t size);
void unmap_file(file_bytes *f);

/* How idle OpenMP threads wait for the next parallel step. Spinning answers
 * in about a microsecond, so even a 15M model's per-layer products pay to
 * split in decode; but a spinner holds a core, and on a machine whose cores
 * are busy with other work it takes the core the work needs (2-thread runs
 * were up to 20x slower than 1-thread ones). Sleeping threads cost a wake-up
 * (tens of microseconds in a VM), so then only large steps go parallel. */
enum { WAIT_AUTO, WAIT_SPIN, WAIT_SLEEP };
#define WAIT_SPIN_COUNT "10000"          /* libgomp's spins before it sleeps: well under a millisecond */
#define WAIT_SPIN_MIN_WORK (1L << 16)    /* the state's parallel_min_work when threads spin */

/* "auto", "spin", "sleep" -> WAIT_*, or -1 */
int parse_wait(const char *v);
/* The policy in effect for `wait` with `threads` threads (never_waits: the
 * run has no parallel step), put into libgomp's environment; the process
 * may start itself again (argv) to apply it. Returns WAIT_SPIN or WAIT_SLEEP. */
int apply_wait(int wait, int threads, int never_waits, char **argv);

#endif
