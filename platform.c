/* platform.c -- the CLI's operating-system services (platform.h): errors,
 * time, memory, file mapping and the OpenMP wait policy. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   /* MAP_POPULATE */
#define _FILE_OFFSET_BITS 64   /* 32-bit hosts: stat files of 2 GiB and more */
#include "platform.h"
#include "model.h"   /* LLM_ALIGN */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ===================================================================== */
/* Errors and time                                                        */
/* ===================================================================== */

void die(int status, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *xmalloc(size_t n, const char *what) {
    void *p = NULL;
    if (n == 0) n = 1;
    if (posix_memalign(&p, LLM_ALIGN, n) != 0 || !p) die(1, "out of memory allocating %zu bytes for %s", n, what);
    return p;
}

/* xmalloc for the large arenas (the state, the repacked weights), on
 * transparent huge pages where Linux offers them: under this project's VMs
 * the first touch of each 4 KiB page traps, about 5 us (0.3 s for 62 MiB of
 * repacked weights; 90 us per decoded token of a 110M model's KV cache), and
 * of a 2 MiB page once. Memory still grows only as far as it is touched. */
#define HUGE_PAGE ((size_t)2 << 20)
void *xmalloc_big(size_t n, const char *what) {
#ifdef MADV_HUGEPAGE
    void *p = NULL;
    if (n >= HUGE_PAGE && posix_memalign(&p, HUGE_PAGE, n) == 0 && p) {
        (void)madvise(p, n, MADV_HUGEPAGE);   /* advice: refused, the pages are small ones */
        return p;
    }
#endif
    return xmalloc(n, what);
}

/* 1 when Linux offers transparent huge pages (always, or on madvise) */
int have_huge_pages(void) {
    char line[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    int ok = fgets(line, sizeof line, f) && (strstr(line, "[always]") || strstr(line, "[madvise]"));
    fclose(f);
    return ok;
}

/* ===================================================================== */
/* File access: a read-only mapping of the whole file                     */
/* ===================================================================== */

/* populate: map every page now (Linux), for a file read through at once */
file_bytes map_file(const char *path, const char *what, int populate) {
    file_bytes f = { NULL, 0, 0 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(1, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) die(1, "cannot stat %s %s: %s", what, path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die(1, "%s %s is not a regular file", what, path);
    if (st.st_size == 0) die(1, "%s %s is empty", what, path);
    if ((unsigned long long)st.st_size > (unsigned long long)SIZE_MAX)
        die(1, "%s %s is %lld bytes, more than this machine can map", what, path, (long long)st.st_size);
    f.size = (size_t)st.st_size;
    int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
    if (populate) flags |= MAP_POPULATE;
#endif
    (void)populate;
    void *p = mmap(NULL, f.size, PROT_READ, flags, fd, 0);
    if (p == MAP_FAILED) die(1, "cannot map %s %s: %s", what, path, strerror(errno));
    close(fd);
    f.data = p;
    return f;
}

/* Read one byte of every page of a mapping. MAP_POPULATE fills the page
 * tables, but under some hypervisors (this project's VMs: about 0.25 us per
 * KB, 40 ms for a 166 MB checkpoint) each page's first access in a process
 * still traps once; touching them here puts that cost in the load, where a
 * reader of the prefill and time-to-first-token figures expects it. */
void touch_pages(const file_bytes *f) {
    const volatile unsigned char *p = (const volatile unsigned char *)f->data;
    unsigned char sink = 0;
    for (size_t at = 0; at < f->size; at += 4096) sink ^= p[at];
    (void)sink;
}

/* The file of `size` bytes (as mapped before) read into memory of ours, on
 * transparent huge pages where Linux offers them (xmalloc_big). */
file_bytes read_file_copy(const char *path, const char *what, size_t size) {
    file_bytes f = { xmalloc_big(size, what), size, 1 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(1, "cannot open %s %s: %s", what, path, strerror(errno));
    size_t got = 0;
    while (got < size) {
        size_t want = size - got < ((size_t)1 << 30) ? size - got : (size_t)1 << 30;
        ssize_t r = pread(fd, (char *)f.data + got, want, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die(1, "cannot read %s %s: %s", what, path, strerror(errno));
        if (r == 0) die(1, "%s %s shrank to %zu bytes while loading (it had %zu)", what, path, got, size);
        got += (size_t)r;
    }
    close(fd);
    return f;
}

void unmap_file(file_bytes *f) {
    if (f->data && f->copied) free((void *)f->data);
    else if (f->data) munmap((void *)f->data, f->size);
    f->data = NULL;
}

int parse_wait(const char *v) {
    return !strcmp(v, "auto") ? WAIT_AUTO : !strcmp(v, "spin") ? WAIT_SPIN : !strcmp(v, "sleep") ? WAIT_SLEEP : -1;
}

#ifdef _OPENMP
/* Cores left idle by everything else over a short look at /proc/stat
 * (this process sleeps meanwhile); -1 where it cannot tell. */
static double idle_cores(void) {
    unsigned long long a[2][8];
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen("/proc/stat", "r");
        if (!f) return -1.0;
        int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &a[k][0], &a[k][1], &a[k][2], &a[k][3],
                         &a[k][4], &a[k][5], &a[k][6], &a[k][7]);
        fclose(f);
        if (got != 8) return -1.0;
        if (k == 0) {
            struct timespec ts = { 0, 30 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    unsigned long long total = 0, idle = (a[1][3] - a[0][3]) + (a[1][4] - a[0][4]);   /* idle + iowait */
    for (int i = 0; i < 8; i++) total += a[1][i] - a[0][i];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return total > 0 && cpus > 0 ? (double)cpus * (double)idle / (double)total : -1.0;
}
#endif

/* Resolve o->wait and put it into libgomp's environment: spin, unless told to
 * sleep or OMP_WAIT_POLICY=passive is set, when every thread finds an idle
 * core; spinning threads are bound one to a core (OMP_PROC_BIND=true) unless
 * the user placed them. libgomp reads its environment before main, so the program starts
 * itself again when it changes it (once: the second start finds it set; if
 * the restart fails it goes on with the runtime's defaults). */
int apply_wait(int wait, int threads, int never_waits, char **argv) {
#if defined(_OPENMP)
    const char *policy = getenv("OMP_WAIT_POLICY");
    int passive = policy && (!strcmp(policy, "passive") || !strcmp(policy, "PASSIVE"));
    if (threads == 1 || never_waits) return WAIT_SLEEP;   /* no thread ever waits */
    if (wait == WAIT_AUTO) {
        if (policy || getenv("GOMP_SPINCOUNT")) wait = passive ? WAIT_SLEEP : WAIT_SPIN;   /* the user's */
        else wait = idle_cores() >= threads - 0.5 ? WAIT_SPIN : WAIT_SLEEP;
    }
    int restart = 0;
    if (wait == WAIT_SPIN && passive) { unsetenv("OMP_WAIT_POLICY"); restart = 1; }
    if (wait == WAIT_SPIN && !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
        setenv("GOMP_SPINCOUNT", WAIT_SPIN_COUNT, 1);
        restart = 1;
    }
    /* spinning threads must not share a core: unbound, two of them sometimes
     * landed on one CPU, and stories260K's 2-thread prefill ran 5x slower */
    if (wait == WAIT_SPIN && !getenv("OMP_PROC_BIND") && !getenv("OMP_PLACES") && !getenv("GOMP_CPU_AFFINITY")) {
        setenv("OMP_PROC_BIND", "true", 1);
        restart = 1;
    }
    if (wait == WAIT_SLEEP && !passive) { setenv("OMP_WAIT_POLICY", "passive", 1); restart = 1; }
#if defined(__linux__)
    if (restart) execv("/proc/self/exe", argv);
#endif
    (void)restart;
    return wait;
#else
    (void)wait; (void)threads; (void)never_waits; (void)argv;
    return WAIT_SLEEP;
#endif
}
