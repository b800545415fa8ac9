/* fmapeak.c -- fp32 FMA peak: independent _mm512_fmadd_ps chains per thread.
 *
 *   fmapeak THREADS ITERS REPS
 *
 * Each thread runs ITERS iterations of 16 independent FMA chains on zmm
 * registers (16 accumulators hide the FMA latency on two FMA ports); the
 * accumulators depend on argv and are summed and printed, so nothing can be
 * folded away (no -ffast-math, so the compiler must keep every FMA).
 * GFLOP/s = threads * ITERS * 16 chains * 16 lanes * 2 flops / seconds / 1e9.
 * Prints: threads=.. best_gflops=.. median_gflops=.. checksum=..
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CHAINS 16

static float fma_chains(long iters, float seed) {
    __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(seed * 1e-7f);
    __m512 acc[CHAINS];
    for (int j = 0; j < CHAINS; j++) acc[j] = _mm512_set1_ps(seed + (float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < CHAINS; j++) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
    }
    __m512 s = acc[0];
    for (int j = 1; j < CHAINS; j++) s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: fmapeak THREADS ITERS REPS\n"); return 2; }
    int threads = atoi(argv[1]), reps = atoi(argv[3]);
    long iters = atol(argv[2]);
    if (threads < 1 || iters < 1 || reps < 1) { fprintf(stderr, "fmapeak: bad arguments\n"); return 2; }
    float seed = (float)argc * 0.5f;
    omp_set_num_threads(threads);
    omp_set_dynamic(0);
    double *g = malloc(sizeof(double) * reps), checksum = 0.0;
    float partial[256];
    for (int r = 0; r < reps; r++) {
        double t0 = 0, t1 = 0;
#pragma omp parallel
        {
            int t = omp_get_thread_num();
#pragma omp barrier
#pragma omp master
            t0 = omp_get_wtime();
            partial[t & 255] = fma_chains(iters, seed + (float)t);
#pragma omp barrier
#pragma omp master
            t1 = omp_get_wtime();
        }
        for (int t = 0; t < threads && t < 256; t++) checksum += partial[t];
        g[r] = (double)threads * iters * CHAINS * 16 * 2 / (t1 - t0) / 1e9;
    }
    double best = 0;
    for (int r = 0; r < reps; r++) if (g[r] > best) best = g[r];
    qsort(g, reps, sizeof(double), cmp_d);
    printf("threads=%d best_gflops=%.2f median_gflops=%.2f checksum=%.6g\n", threads, best, g[reps / 2], checksum);
    free(g);
    return 0;
}
