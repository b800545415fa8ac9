/* engine/compiler.h -- the compiler macros the kernels use: loop unrolling,
 * forced inlining, prefetch hints, no vectorizing where it would change the
 * float order, a C99 compile-time check, and the storage class of what the
 * engine's two parts share. No code. */
#ifndef LLM__COMPILER_H
#define LLM__COMPILER_H

/* unroll the tiles' short loops fully, so the accumulators stay in registers at -O2 too */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__UNROLL _Pragma("GCC unroll 8")
#else
#define LLM__UNROLL
#endif
#if defined(__GNUC__)
#define LLM__INLINE static inline __attribute__((always_inline))
#else
#define LLM__INLINE static inline
#endif
/* a function kept whole, called from several places rather than copied into each */
#if defined(__GNUC__)
#define LLM__NOINLINE __attribute__((noinline))
#else
#define LLM__NOINLINE
#endif
/* Decode reads each weight once, a stream the hardware prefetcher starts over
 * at every page: the tiles ask for the next tile's rows while on this one
 * (a hint: never faults, even past the end). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#define LLM__PREFETCH(p) __builtin_prefetch((const void *)(p))
/* the same for a line read once (decode's weights): x86's prefetchnta,
 * aarch64's PLDL1STRM, which leave L2 and L3 to what is read again */
#define LLM__PREFETCH_ONCE(p) __builtin_prefetch((const void *)(p), 0, 0)
/* the same into L2, not L1 (x86's prefetcht2): a run of lines far enough
 * ahead to hide DRAM's latency, without holding L1's few miss buffers */
#define LLM__PREFETCH_L2(p) __builtin_prefetch((const void *)(p), 0, 1)
#else
#define LLM__PREFETCH(p) ((void)0)
#define LLM__PREFETCH_ONCE(p) ((void)0)
#define LLM__PREFETCH_L2(p) ((void)0)
#endif
/* a compile-time check, in C99 */
#define LLM__STATIC_ASSERT(cond, name) typedef char llm__assert_##name[(cond) ? 1 : -1]

/* GCC's vectorizer turns the rotation below into a fused complex multiply
 * (vfmaddsub) even with contraction off, which rounds differently from the
 * scalar code other targets run: keep it scalar so every build agrees. */
#if defined(__GNUC__) && !defined(__clang__)
#define LLM__NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define LLM__NO_VECTORIZE
#endif
/* The storage class of what the engine's two parts share (engine/parts.h):
 * static in the one-translation-unit build (MODEL_IMPLEMENTATION); extern
 * in the host's split build (LLM__PART_KERNELS, LLM__PART_MODEL), hidden
 * from a shared object's exports. */
#if defined(LLM__PART_KERNELS) || defined(LLM__PART_MODEL)
#if defined(__GNUC__)
#define LLM__KERNEL __attribute__((visibility("hidden")))
#else
#define LLM__KERNEL
#endif
#else
#define LLM__KERNEL static
#endif
#endif /* LLM__COMPILER_H */
