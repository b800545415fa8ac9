/* fmapeak.c -- fp32 FMA peak: independent vector FMA chains per thread, on
 * the widest vectors the build targets (isa.h: AVX-512, AVX2, NEON or plain C).
 *
 *   fmapeak THREADS ITERS REPS
 *
 * Each thread runs ITERS iterations of 16 independent FMA chains on vector
 * registers (16 accumulators hide the FMA latency on two FMA ports); the
 * accumulators depend on argv and are summed and printed, so nothing can be
 * folded away (no -ffast-math, so the compiler must keep every FMA).
 * GFLOP/s = threads * ITERS * 16 chains * lanes * 2 flops / seconds / 1e9.
 * Prints: isa=.. lanes=.. threads=.. best_gflops=.. median_gflops=.. checksum=..
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "isa.h"
#include "timing.h"


#define CHAINS 16

static float fma_chains(long iters, float seed) {
    vf m = vf_set1(0.9999999f), c = vf_set1(seed * 1e-7f);
    vf acc[CHAINS];
    for (int j = 0; j < CHAINS; j++) acc[j] = vf_set1(seed + (float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < CHAINS; j++) acc[j] = vf_fma(acc[j], m, c);
    }
    vf s = acc[0];
    for (int j = 1; j < CHAINS; j++) s = vf_add(s, acc[j]);
    return vf_total(s);
}

struct chains_job { long iters; float seed; };
static float chains_work(int t, void *ctx) {
    const struct chains_job *j = (const struct chains_job *)ctx;
    return fma_chains(j->iters, j->seed + (float)t);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: fmapeak THREADS ITERS REPS\n"); return 2; }
    int threads = atoi(argv[1]), reps = atoi(argv[3]);
    long iters = atol(argv[2]);
    if (threads < 1 || iters < 1 || reps < 1) { fprintf(stderr, "fmapeak: bad arguments\n"); return 2; }
    float seed = (float)argc * 0.5f;
    omp_set_num_threads(threads);
    omp_set_dynamic(0);
    double *g = malloc(sizeof(double) * reps), checksum = 0.0, best, median;
    struct chains_job job = { iters, seed };
    for (int r = 0; r < reps; r++)
        g[r] = (double)threads * iters * CHAINS * BENCH_LANES * 2 / timed_parallel(chains_work, &job, threads, &checksum) / 1e9;
    best_and_median(g, reps, &best, &median);
    printf("isa=%s lanes=%d threads=%d best_gflops=%.2f median_gflops=%.2f checksum=%.6g\n", BENCH_ISA, BENCH_LANES, threads, best, median, checksum);
    free(g);
    return 0;
}
