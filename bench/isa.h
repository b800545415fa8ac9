/* bench/isa.h -- the vector ISA membw.c and fmapeak.c are built for, chosen
 * at build time from the compiler's target macros (`-march=native` picks the
 * machine's): AVX-512 (16 float lanes), AVX2 with FMA (8), NEON (4), else
 * plain C (1). Each program prints it (isa=.. lanes=..), so a table names
 * the ISA its peak was measured with. */
#ifndef BENCH_ISA_H
#define BENCH_ISA_H
#if defined(__AVX512F__)
#include <immintrin.h>
#define BENCH_ISA "avx512"
#define BENCH_LANES 16
typedef __m512 vf;
#define vf_set1(x) _mm512_set1_ps(x)
#define vf_load(p) _mm512_load_ps(p)
#define vf_add(a, b) _mm512_add_ps(a, b)
#define vf_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vf_total(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BENCH_ISA "avx2"
#define BENCH_LANES 8
typedef __m256 vf;
#define vf_set1(x) _mm256_set1_ps(x)
#define vf_load(p) _mm256_load_ps(p)
#define vf_add(a, b) _mm256_add_ps(a, b)
#define vf_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
static inline float vf_total(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define BENCH_ISA "neon"
#define BENCH_LANES 4
typedef float32x4_t vf;
#define vf_set1(x) vdupq_n_f32(x)
#define vf_load(p) vld1q_f32(p)
#define vf_add(a, b) vaddq_f32(a, b)
#define vf_fma(a, b, c) vfmaq_f32(c, a, b)
#define vf_total(v) vaddvq_f32(v)
#else
#define BENCH_ISA "c"
#define BENCH_LANES 1
typedef float vf;
#define vf_set1(x) (x)
#define vf_load(p) (*(p))
#define vf_add(a, b) ((a) + (b))
#define vf_fma(a, b, c) ((a) * (b) + (c))   /* fused where the compiler contracts it */
#define vf_total(v) (v)
#endif
#endif
