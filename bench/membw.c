/* membw.c -- memory read bandwidth: sum a large float array with the widest
 * vectors the build targets (isa.h: AVX-512, AVX2, NEON or plain C).
 *
 *   membw MIB THREADS REPS
 *
 * Allocates MIB MiB (64-byte aligned), first-touches it from the threads that
 * will read it, then times REPS full passes; each pass every thread sums its
 * contiguous share with 8 independent vector accumulators. The sums are combined
 * and printed, so the reads cannot be elided. Prints one line:
 *   isa=.. lanes=.. mib=.. threads=.. reps=.. best_gbs=.. median_gbs=.. checksum=..
 * GB/s = bytes read / seconds / 1e9.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "isa.h"
#include "timing.h"


static float sum_range(const float *p, size_t n) { /* n is a multiple of 128 */
    vf a0 = vf_set1(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 8 * BENCH_LANES) {
        a0 = vf_add(a0, vf_load(p + i));
        a1 = vf_add(a1, vf_load(p + i + BENCH_LANES));
        a2 = vf_add(a2, vf_load(p + i + 2 * BENCH_LANES));
        a3 = vf_add(a3, vf_load(p + i + 3 * BENCH_LANES));
        a4 = vf_add(a4, vf_load(p + i + 4 * BENCH_LANES));
        a5 = vf_add(a5, vf_load(p + i + 5 * BENCH_LANES));
        a6 = vf_add(a6, vf_load(p + i + 6 * BENCH_LANES));
        a7 = vf_add(a7, vf_load(p + i + 7 * BENCH_LANES));
    }
    a0 = vf_add(vf_add(a0, a1), vf_add(a2, a3));
    a4 = vf_add(vf_add(a4, a5), vf_add(a6, a7));
    return vf_total(vf_add(a0, a4));
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
    printf("isa=%s lanes=%d mib=%zu threads=%d reps=%d best_gbs=%.3f median_gbs=%.3f checksum=%.6g\n",
           BENCH_ISA, BENCH_LANES, mib, threads, reps, best, median, checksum);
    free(gbs);
    free(buf);
    return 0;
}
