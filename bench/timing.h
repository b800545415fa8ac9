/* bench/timing.h -- what bench/membw.c and bench/fmapeak.c share: one timed
 * pass of per-thread work started and stopped together, and best/median of
 * the repetitions. */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H
#include <omp.h>
#include <stdlib.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds for every thread to run work(t, ctx) once, from a barrier to a
 * barrier; each thread's result is added to *checksum so none is elided. */
static double timed_parallel(float (*work)(int t, void *ctx), void *ctx, int threads, double *checksum) {
    float partial[256];
    double t0 = 0, t1 = 0;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
#pragma omp barrier
#pragma omp master
        t0 = omp_get_wtime();
        partial[t & 255] = work(t, ctx);
#pragma omp barrier
#pragma omp master
        t1 = omp_get_wtime();
    }
    for (int t = 0; t < threads && t < 256; t++) *checksum += partial[t];
    return t1 - t0;
}

/* The best (largest) and the median of v (reps,); sorts v. */
static void best_and_median(double *v, int reps, double *best, double *median) {
    qsort(v, reps, sizeof(double), cmp_d);
    *best = v[reps - 1];
    *median = v[reps / 2];
}
#endif
