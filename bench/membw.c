/* membw.c -- memory read bandwidth: sum a large float array with AVX-512.
 *
 *   membw MIB THREADS REPS
 *
 * Allocates MIB MiB (64-byte aligned), first-touches it from the threads that
 * will read it, then times REPS full passes; each pass every thread sums its
 * contiguous share with 8 independent zmm accumulators. The sums are combined
 * and printed, so the reads cannot be elided. Prints one line:
 *   mib=.. threads=.. reps=.. best_gbs=.. median_gbs=.. checksum=..
 * GB/s = bytes read / seconds / 1e9.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "timing.h"


static float sum_range(const float *p, size_t n) { /* n is a multiple of 128 */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 128) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
        a4 = _mm512_add_ps(a4, _mm512_load_ps(p + i + 64));
        a5 = _mm512_add_ps(a5, _mm512_load_ps(p + i + 80));
        a6 = _mm512_add_ps(a6, _mm512_load_ps(p + i + 96));
        a7 = _mm512_add_ps(a7, _mm512_load_ps(p + i + 112));
    }
    a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    a4 = _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7));
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a4));
}

struct sum_job { const float *buf; size_t chunk; };
static float sum_work(int t, void *ctx) {
    const struct sum_job *j = (const struct sum_job *)ctx;
    return sum_range(j->buf + (size_t)t * j->chunk, j->chunk);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: membw MIB THREADS REPS\n"); return 2; }
    size_t mib = strtoull(argv[1], NULL, 10);
    int threads = atoi(argv[2]), reps = atoi(argv[3]);
    if (mib < 1 || threads < 1 || reps < 1) { fprintf(stderr, "membw: bad arguments\n"); return 2; }
    size_t bytes = mib << 20, n = bytes / sizeof(float);
    size_t chunk = (n / threads) / 128 * 128; /* per thread, a multiple of 128 floats */
    float *buf = aligned_alloc(4096, bytes);
    if (!buf) { fprintf(stderr, "membw: out of memory\n"); return 1; }
    omp_set_num_threads(threads);
    omp_set_dynamic(0);
#pragma omp parallel
    { /* first touch by the reading thread; small values so the sums stay finite */
        int t = omp_get_thread_num();
        float *p = buf + (size_t)t * chunk;
        for (size_t i = 0; i < chunk; i++) p[i] = (float)((i + t) & 7) * 0.125f;
    }
    double *gbs = malloc(sizeof(double) * reps), checksum = 0.0, best, median;
    struct sum_job job = { buf, chunk };
    for (int r = 0; r < reps; r++)
        gbs[r] = (double)chunk * threads * sizeof(float) / timed_parallel(sum_work, &job, threads, &checksum) / 1e9;
    best_and_median(gbs, reps, &best, &median);
    printf("mib=%zu threads=%d reps=%d best_gbs=%.3f median_gbs=%.3f checksum=%.6g\n",
           mib, threads, reps, best, median, checksum);
    free(gbs);
    free(buf);
    return 0;
}
