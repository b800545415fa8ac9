/* engine/simd.h -- the fast kernels: one vector type per ISA behind a few
 * mapping macros (ggml's way), which each ISA file defines:
 *   LLM__SIMD (name), LLM__VL (floats per vector), LLM__NC (tokens per tile),
 *   llm__vf, llm__vzero(), llm__vload(p), llm__vload_f16(p), llm__vfma(a, b, c)
 *   (a * b + c), llm__vsum(v), llm__vstore(p, v), and optionally
 *   llm__vload_part / llm__vload_f16_part (a zero-padded partial load) and
 *   llm__vsum4 (four sums at once, LLM__HAVE_VSUM4).
 * For q8_0 (LLM__Q8_SIMD): llm__i8x32 (32 int8), llm__i32x8 (one pair's
 * integer lanes), llm__f32x8 (eight pairs' accumulators) and their zero,
 * load, store, dot32_i8 and q8_steps8 operations, optionally the weight /
 * token preparation llm__q8_wprep, _xcorr, _addcorr, _dot32 (LLM__HAVE_Q8_PREP)
 * and a whole 4 x 4 tile llm__tile_q8_4x4 (LLM__HAVE_Q8_TILE_4X4); without
 * them, optionally llm__isum4_i8 (four rows' exact sums, LLM__HAVE_ISUM4_I8)
 * or a token's products by a tile's rows, llm__token_q8 (LLM__HAVE_TOKEN_Q8).
 * An ISA file may also give LLM__NC_FP (tokens per f32/f16 tile, where
 * its registers hold more accumulators than the q8_0 tile's LLM__NC) and
 * llm__vkeep(v) (v pinned in a register: the compiler then cannot fold its
 * load into every multiply-add that reads it, one load per use), and
 * LLM__KC_FP (f32/f16 rows longer than this many columns go in chunks of
 * it, llm__gemm_fp_chunked).
 * An ISA file may also give a fast kernel its ref.h name without _ref
 * (llm__max, llm__round_q8, llm__exp_shifted, llm__dot8, announced by
 * LLM__HAVE_*), and GGUF's group sums llm__blk_sums_<type>; what it leaves
 * out maps to the twin below.
 *
 * Every product here computes each (row, token) dot product the same way
 * whatever the tile around it, so a batch of T tokens gives bit for bit what
 * T single tokens give. Leftover columns (n not a multiple of the vector
 * width) fill one last zero-padded vector; the scalar twins in ref.h are the
 * reference. */
#define LLM__NR 4                      /* rows per tile */
/* Decode (one token) streams W from DRAM once, a tile of rows side by side:
 * rows of a few KB are too short for the hardware prefetcher to get ahead
 * of them (on Zen 5 one thread's f16 decode then read well under half of
 * the bandwidth a plain sum reaches). So each row fetches the line at its
 * column of the same row whole tiles ahead (a block's rows are contiguous):
 * read as many tiles later, and at least LLM__PF_DECODE bytes ahead. A
 * fixed distance shorter than a tile would fetch lines of this tile's other
 * rows, read at about the same time. Lines come in as read-once (they leave
 * L2 and L3 alone) while they stay well inside L1 (48 KB on Zen 5 and on
 * Intel's recent cores) until read. Tuned on Zen 5: 4-8 KB alike for f32
 * and f16, a whole 16-row tile (8-32 KB) best for q8_0. */
#ifndef LLM__PF_DECODE
#define LLM__PF_DECODE 6144
#endif
#ifndef LLM__PF_ONCE_MAX
#define LLM__PF_ONCE_MAX (32 * 1024)
#endif
/* f32 decode fetches this many tiles ahead, not LLM__PF_DECODE's bytes
 * (the shorter distance: a row of 288 to 768 floats, 1.1-3 KB). Zen 4, one
 * thread, three interleaved runs, decode tok/s, 6 KB -> one row: 110M f32
 * AVX-512 build 54-57 -> 63-65, AVX2 build 49 -> 58-64; 42M 119-146 ->
 * 166-173 and 128-138 -> 138-168; 15M 343-388 -> 394-421 and 304-318 ->
 * 338-410. f16 lost (15M 547-714 -> 508-605), so it keeps LLM__PF_DECODE. */
#ifndef LLM__PF_F32_TILES
#define LLM__PF_F32_TILES 1
#endif
/* the prefetch distance for tiles of tile_bytes */
static inline size_t llm__pf_ahead(size_t tile_bytes) {
    return (LLM__PF_DECODE + tile_bytes - 1) / tile_bytes * tile_bytes;
}
#define LLM__PREFETCH_AHEAD(p, ahead) \
    do { if ((ahead) <= LLM__PF_ONCE_MAX) LLM__PREFETCH_ONCE(p); else LLM__PREFETCH(p); } while (0)

#include "x86.h"
#include "x86_gguf.h"
#include "neon.h"
#include "mcu.h"

#ifndef LLM__SIMD
#define LLM__SIMD "scalar"
#endif
#ifndef LLM__HAVE_MAX
#define llm__max llm__max_ref
#endif
#ifndef LLM__HAVE_ROUND_Q8
#define llm__round_q8 llm__round_q8_ref
#endif
#ifndef LLM__HAVE_ROUND_Q16
#define llm__round_q16 llm__round_q16_ref
#endif
#ifndef LLM__HAVE_EXP_SHIFTED
#define llm__exp_shifted llm__exp_shifted_ref
#endif
#ifndef LLM__HAVE_ISUM4_I8
/* isum[k] = w row k (rows ldw apart) . x over len int8 values, k < 4 */
static inline void llm__isum4_i8(int32_t *isum, const int8_t *w, size_t ldw, const int8_t *x, int len) {
    for (int k = 0; k < 4; k++) isum[k] = llm__isum_i8(w + (size_t)k * ldw, x, len);
}
#endif

/* softmax in place, x (n,): the max and e^(x - max) by the kernels above
 * (the same bits as their ref.h twins), then the sum in index order */
void llm_softmax(float *x, int n) {
    float max = llm__max(x, n, 0), sum = 0.0f;
    llm__exp_shifted(x, n, max);
    for (int i = 0; i < n; i++) sum += x[i];
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* the sampler's hooks (model.h) */
float llm_max(const float *x, int n) { return llm__max(x, n, 0); }
void llm_exp_shifted(float *x, int n, float shift) { llm__exp_shifted(x, n, shift); }
/* With a vector max kernel, first the place holding its value (NaNs never
 * win after a number; a NaN first falls through to the scan). 32000 floats
 * on Zen 5: 23 -> 10 us. Without the kernel the scan alone is fewer steps. */
int llm_argmax(const float *x, int n) {
    int best = 0;
#ifdef LLM__HAVE_MAX
    const float max = llm__max(x, n, 0);
    for (int i = 0; i < n; i++)
        if (x[i] == max) return i;
#endif
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* SwiGLU in place: g (n,) = silu(g) * u = g * 1/(1 + e^-g) * u */
LLM__KERNEL void llm__swiglu(float *g, const float *u, int n) {
    int i = 0;
    float e[64];
    for (; i < n; i += 64) {
        int len = n - i < 64 ? n - i : 64;
        for (int j = 0; j < len; j++) e[j] = -g[i + j];
        llm__exp_shifted(e, len, 0.0f);
        for (int j = 0; j < len; j++) g[i + j] = g[i + j] * (1.0f / (1.0f + e[j])) * u[i + j];
    }
}
#ifdef LLM__VL
/* the first len (< VL) elements through a zero-padded copy, where the ISA
 * has no masked load */
#define LLM__DEFINE_LOAD_PART(name, type, load)                  \
    LLM__INLINE llm__vf name(const type *p, int len) {           \
        type t[LLM__VL] = { 0 };                                 \
        memcpy(t, p, (size_t)len * sizeof(type));                \
        return load(t);                                          \
    }
#ifndef llm__vload_part
LLM__DEFINE_LOAD_PART(llm__vload_part, float, llm__vload)
#endif
#ifndef llm__vload_f16_part
LLM__DEFINE_LOAD_PART(llm__vload_f16_part, uint16_t, llm__vload_f16)
#endif
#ifndef LLM__HAVE_VSUM4
LLM__INLINE void llm__vsum4(float *out, llm__vf a, llm__vf b, llm__vf c, llm__vf d) {
    out[0] = llm__vsum(a); out[1] = llm__vsum(b); out[2] = llm__vsum(c); out[3] = llm__vsum(d);
}
#endif
#endif

#if !defined(LLM__HAVE_DOT8) && defined(LLM__VL) && LLM__VL == 4
/* llm__dot8_ref in two vectors of four lanes */
static float llm__dot8(const float *a, const float *b, int n) {
    int n8 = n - n % 8;
    llm__vf lo = llm__vzero(), hi = llm__vzero();
    for (int j = 0; j < n8; j += 8) {
        lo = llm__vfma(llm__vload(a + j), llm__vload(b + j), lo);
        hi = llm__vfma(llm__vload(a + j + 4), llm__vload(b + j + 4), hi);
    }
    float lane[8];
    llm__vstore(lane, lo);
    llm__vstore(lane + 4, hi);
    return llm__dot8_tail(lane, a, b, n8, n);
}
#elif !defined(LLM__HAVE_DOT8)
#define llm__dot8 llm__dot8_ref
#endif

/* max |x| over n >= 1 values, or -1 when one is NaN or infinite (an ISA
 * file may give it, LLM__HAVE_GROUP_AMAX: mcu.h) */
#ifndef LLM__HAVE_GROUP_AMAX
static inline float llm__group_amax(const float *x, int n) {
    return llm__all_finite(x, n) ? llm__max(x, n, 1) : -1.0f;
}
#endif

/* ref.h's llm__quantize_groups_ref by this build's max and rounding
 * kernels (tests/test_kernels.c checks they give its codes and scales) */
static void llm__quantize_groups(void *xq, int code_bytes, float *xs, const float *x, int n, int G) {
    float qmax = code_bytes == 2 ? (float)LLM__Q16_MAX : 127.0f;
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int len = n - g0 < G ? n - g0 : G;
        float amax = llm__group_amax(x + g0, len);
        if (amax < 0.0f) {
            /* NaN or inf: a NaN scale and zero values, so every product the
             * group enters is NaN, as in the float path (no NaN is cast) */
            xs[gi] = NAN;
            memset((unsigned char *)xq + (size_t)g0 * code_bytes, 0, (size_t)len * code_bytes);
            continue;
        }
        float scale = amax / qmax, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        xs[gi] = scale;
        if (code_bytes == 2) llm__round_q16((int16_t *)xq + g0, x + g0, len, inv);
        else llm__round_q8((int8_t *)xq + g0, x + g0, len, inv);
    }
}
static void llm__quantize_q8(int8_t *xq, float *xs, const float *x, int n, int G) {
    llm__quantize_groups(xq, 1, xs, x, n, G);
}
static void llm__quantize_q16(int16_t *xq, float *xs, const float *x, int n) {
    llm__quantize_groups(xq, 2, xs, x, n, LLM__GQ);
}
/* x (n,) -> the activations a product of w's type takes (ref.h's
 * llm__quantize_acts_ref, by the fast quantizers) */
static void llm__quantize_acts(const llm_tensor *w, int8_t *xq, float *xs, const float *x) {
    int a = llm__act_bytes(w->type), n = w->cols;
    if (a == 2) llm__quantize_q16((int16_t *)(void *)xq, xs, x, n);
    else if (a == 1) llm__quantize_q8(xq, xs, x, n, llm__group(w));
    else return;
    llm__pad_acts(w, xq, xs, a);
}

#ifdef LLM__NC
#define LLM__NC_OR_1 LLM__NC
#else
#define LLM__NC_OR_1 1
#endif
#ifndef LLM__NC_FP
#define LLM__NC_FP LLM__NC_OR_1
#endif
/* rows an f32/f16 tile of one token reads side by side (an ISA file may set
 * 1: one row after another, a single stream, where one row's chain of
 * fused multiply-adds still outruns the memory) */
#ifndef LLM__NR_DECODE
#define LLM__NR_DECODE LLM__NR
#endif
#ifndef llm__vkeep
#define llm__vkeep(v) ((void)0)
#endif
/* An f16 (row, token) accumulator is LLM__F16_HALVES vectors, an f32 one
 * LLM__F32_HALVES (an ISA file may set 2, with llm__vadd(a, b)). A step of
 * llm__fp_halves(f16) * LLM__VL columns gives half h's lane l column
 * h VL + l, and at the end the halves add up, 0 + 1, before llm__vsum.
 * AVX2's two ymm so take AVX-512's sixteen lanes and the tree of GCC's
 * _mm512_reduce_add_ps (high + low half, then llm__vsum's): two chains per
 * row where one row at a time (decode) waited on one. */
#ifndef LLM__F16_HALVES
#define LLM__F16_HALVES 1
#endif
/* 1: f16 decode's prefetch goes to L2 (an ISA file's choice), else read-once */
#ifndef LLM__PF_F16_L2
#define LLM__PF_F16_L2 0
#endif
#ifndef LLM__F32_HALVES
#define LLM__F32_HALVES 1
#endif
#define llm__fp_halves(f16) ((f16) ? LLM__F16_HALVES : LLM__F32_HALVES)
#define LLM__FP_HALVES_MAX (LLM__F16_HALVES > LLM__F32_HALVES ? LLM__F16_HALVES : LLM__F32_HALVES)
/* a panel's accumulators in part (llm__gemm_fp_chunked) */
#define LLM__FP_PART(h, a, b) (((h) * LLM__NR + (a)) * LLM__NC_FP + (b))
/* columns a pass of one half takes (several tokens, llm__tile_fp) */
#ifndef LLM__FP_PASS
#define LLM__FP_PASS 512
#endif
/* decode's fetch of W's line at p, pf bytes ahead */
LLM__INLINE void llm__fp_prefetch(const char *p, size_t pf, int f16) {
    (void)p; (void)pf; (void)f16;   /* (no prefetch on the boards) */
    if (f16 && LLM__PF_F16_L2) LLM__PREFETCH_L2(p);
    else LLM__PREFETCH_AHEAD(p, pf);
}
/* the halves waiting their turn stay in memory, not in registers that the
 * pass of the other half needs */
#if defined(__GNUC__)
#define llm__fp_spill(v) __asm__ volatile("" : : "r"(v) : "memory")
#else
#define llm__fp_spill(v) ((void)(v))
#endif
/* rows of w in one of its panels where its tiles read panels (the
 * type's panel_rows; LLMW q8_0's, x86.h), else 0 */
static int llm__panel_rows(const llm_tensor *w) {
#ifdef LLM__HAVE_Q8_PANELS
    if (w->type == LLM_TYPE_Q8_0 && w->panels) return LLM__VL;
#endif
    return llm__traits[w->type].panel_rows;
}
/* rows a product's tiles and threads take together: a panel, else LLM__NR */
static int llm__tile_rows(const llm_tensor *w) {
    return llm__panel_rows(w) ? llm__panel_rows(w) : LLM__NR;
}
/* tokens per tile of a product by w: more for f32 and f16, whose tile
 * needs fewer registers per (row, token) pair than q8_0's */
static int llm__tile_tokens(const llm_tensor *w) {
#ifdef LLM__HAVE_Q8_PANELS
    if (w->type == LLM_TYPE_Q8_0 && w->panels) return LLM__Q8_PANEL_TB;
#endif
#ifdef LLM__PANEL_TOKENS   /* an ISA file's panel tiles take more tokens than its q8_0 tile */
    if (llm__traits[w->type].panel_rows) return LLM__PANEL_TOKENS;
#endif
    return w->type == LLM_TYPE_F32 || w->type == LLM_TYPE_F16 ? LLM__NC_FP : LLM__NC_OR_1;
}

#ifdef LLM__VL
/* L1 bytes (of the 48 KB of Zen 5 and of Intel's recent cores) that a tile's
 * token vectors and two panels of W may fill, so that the next panel can be
 * fetched ahead without evicting the tokens that every panel reuses */
#ifndef LLM__L1_TILE_BYTES
#define LLM__L1_TILE_BYTES (32 * 1024)
#endif
/* cur[a][b] += rows a of w . tokens b of x over columns j0, j0 + S, ... < j1
 * (one half of each step: llm__tile_fp's passes), prefetching the next
 * panel's rows with pre */
LLM__INLINE void llm__fp_pass(llm__vf cur[LLM__NR][LLM__NC_FP], const void *w, int f16, const float *x, int n, int nr,
                              int nc, int j0, int j1, int S, int pre) {
    const float *w32 = (const float *)w;
    const uint16_t *w16 = (const uint16_t *)w;
    for (int j = j0; j < j1; j += S) {
        llm__vf xv[LLM__NC_FP];
        LLM__UNROLL for (int b = 0; b < nc; b++) { xv[b] = llm__vload(x + (size_t)b * n + j); llm__vkeep(xv[b]); }
        LLM__UNROLL for (int a = 0; a < nr; a++) {
            llm__vf wv = f16 ? llm__vload_f16(w16 + (size_t)a * n + j) : llm__vload(w32 + (size_t)a * n + j);
            if (pre) LLM__PREFETCH(f16 ? (const void *)(w16 + (size_t)(nr + a) * n + j) : (const void *)(w32 + (size_t)(nr + a) * n + j));
            LLM__UNROLL for (int b = 0; b < nc; b++) cur[a][b] = llm__vfma(wv, xv[b], cur[a][b]);
        }
    }
}
/* Out[b][a] = W[a] . X[b] for nr rows of W (n values each, f32 or, with
 * f16 = 1, f16) and nc tokens of X. Inlined where nr, nc and f16 are
 * constants, so the accumulators live in registers and the load is one.
 * With several tokens, while the next panel's rows fit in L1 beside these
 * tokens, they are prefetched (its first pass brings W from L3 or DRAM);
 * with one, W's stream whole tiles ahead (llm__pf_ahead).
 * Each (row, token) accumulator is llm__fp_halves(f16) vectors (above)
 * over steps of as many vectors' columns, added half by half before llm__vsum.
 * One token's halves advance side by side (independent chains); several
 * tokens' take one half at a time over a pass of LLM__FP_PASS columns, the
 * other halves' accumulators waiting in memory, so the registers hold the
 * accumulators of one half (each half its own chain: the same bits).
 * Columns k0..k1 only (k0 a multiple of a step; k1 too, or n):
 * the lane accumulators start from part (k0 > 0) and go back to it (k1 < n),
 * so a row taken in column chunks adds the same lanes in the same order. */
LLM__INLINE void llm__tile_fp(float *out, int ldo, const void *w, int f16, const float *x, int n, int nr, int nc,
                              int k0, int k1, llm__vf *part) {
    const float *w32 = (const float *)w;
    const uint16_t *w16 = (const uint16_t *)w;
    size_t eb = f16 ? 2 : 4;
    int ahead = nc > 1 && (size_t)(k1 - k0) * ((size_t)nc * 4 + (size_t)nr * 2 * eb) <= LLM__L1_TILE_BYTES;
    size_t tile = (size_t)nr * n * eb, pf = nc == 1 ? (f16 ? llm__pf_ahead(tile) : LLM__PF_F32_TILES * tile) : 0;   /* decode's prefetch distance */
    const int H = llm__fp_halves(f16), S = H * LLM__VL;
    llm__vf acc[LLM__FP_HALVES_MAX][LLM__NR][LLM__NC_FP];
    for (int h = 0; h < LLM__FP_HALVES_MAX; h++)   /* (halves from H on: zeros never read) */
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nc; b++) acc[h][a][b] = k0 && h < H ? part[LLM__FP_PART(h, a, b)] : llm__vzero();
    int nv = k1 < n ? k1 : n - n % S;
    if (H == 1 || nc == 1) {   /* every half each step */
        for (int j = k0; j < nv; j += S) {
            LLM__UNROLL for (int h = 0; h < H; h++) {
                llm__vf xv[LLM__NC_FP];
                LLM__UNROLL for (int b = 0; b < nc; b++) { xv[b] = llm__vload(x + (size_t)b * n + j + h * LLM__VL); llm__vkeep(xv[b]); }
                LLM__UNROLL for (int a = 0; a < nr; a++) {
                    size_t at = (size_t)a * n + j + h * LLM__VL;
                    llm__vf wv = f16 ? llm__vload_f16(w16 + at) : llm__vload(w32 + at);
                    if (h == 0 && ahead)
                        LLM__PREFETCH(f16 ? (const void *)(w16 + (size_t)(nr + a) * n + j) : (const void *)(w32 + (size_t)(nr + a) * n + j));
                    if (h == 0 && nc == 1 && (size_t)j * eb % 64 < (size_t)S * eb)   /* one per cache line */
                        llm__fp_prefetch((const char *)w + ((size_t)a * n + j) * eb + pf, pf, f16);
                    LLM__UNROLL for (int b = 0; b < nc; b++) acc[h][a][b] = llm__vfma(wv, xv[b], acc[h][a][b]);
                }
            }
        }
    } else {                   /* a half at a time */
#if LLM__FP_HALVES_MAX > 1
        llm__vf wait[LLM__FP_HALVES_MAX][LLM__NR][LLM__NC_FP];   /* the halves not in registers */
        for (int h = 0; h < H; h++)
            for (int a = 0; a < nr; a++)
                for (int b = 0; b < nc; b++) wait[h][a][b] = acc[h][a][b];
        for (int jb = k0; jb < nv; jb += LLM__FP_PASS) {
            int je = nv - jb < LLM__FP_PASS ? nv : jb + LLM__FP_PASS;
            for (int h = 0; h < H; h++) {
                llm__vf cur[LLM__NR][LLM__NC_FP];
                llm__fp_spill(wait);
                for (int a = 0; a < nr; a++)
                    for (int b = 0; b < nc; b++) cur[a][b] = wait[h][a][b];
                if (ahead && h == 0) llm__fp_pass(cur, w, f16, x, n, nr, nc, jb, je, S, 1);
                else llm__fp_pass(cur, w, f16, x, n, nr, nc, jb + h * LLM__VL, je, S, 0);
                for (int a = 0; a < nr; a++)
                    for (int b = 0; b < nc; b++) wait[h][a][b] = cur[a][b];
                llm__fp_spill(wait);
            }
        }
        for (int h = 0; h < H; h++)
            for (int a = 0; a < nr; a++)
                for (int b = 0; b < nc; b++) acc[h][a][b] = wait[h][a][b];
#endif
    }
    if (k1 < n) { /* more columns to come */
        for (int h = 0; h < H; h++)
            for (int a = 0; a < nr; a++)
                for (int b = 0; b < nc; b++) part[LLM__FP_PART(h, a, b)] = acc[h][a][b];
        return;
    }
    if (nv < n) { /* the last columns, zero-padded to a whole step */
        LLM__UNROLL for (int h = 0; h < H; h++) {
            int len = n - nv - h * LLM__VL, at = nv + h * LLM__VL;   /* this half's columns: none, some or all */
            len = len < 0 ? 0 : len > LLM__VL ? LLM__VL : len;
            llm__vf xv[LLM__NC_FP];
            LLM__UNROLL for (int b = 0; b < nc; b++) xv[b] = llm__vload_part(x + (size_t)b * n + at, len);
            LLM__UNROLL for (int a = 0; a < nr; a++) {
                llm__vf wv = f16 ? llm__vload_f16_part(w16 + (size_t)a * n + at, len)
                                 : llm__vload_part(w32 + (size_t)a * n + at, len);
                LLM__UNROLL for (int b = 0; b < nc; b++) acc[h][a][b] = llm__vfma(wv, xv[b], acc[h][a][b]);
            }
        }
    }
#if LLM__FP_HALVES_MAX > 1
    for (int h = 1; h < H; h++)
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nc; b++) acc[0][a][b] = llm__vadd(acc[0][a][b], acc[h][a][b]);
#endif
    for (int b = 0; b < nc; b++) {
        if (nr == 4)
            llm__vsum4(out + (size_t)b * ldo, acc[0][0][b], acc[0][1][b], acc[0][2][b], acc[0][3][b]);
        else
            for (int a = 0; a < nr; a++) out[(size_t)b * ldo + a] = llm__vsum(acc[0][a][b]);
    }
}

/* Any nr x nc tile from the fully unrolled kernels: 4 rows x nc tokens, one
 * instance per nc (the last token tile is as fast as the others), 4 x 1 and
 * 1 x 1 ones at the edges of the rows. Columns k0..k1 with the accumulators
 * in part (llm__tile_fp) for 4 rows only; the edges take whole rows. */
LLM__INLINE void llm__tiles_fp(float *out, int ldo, const llm_tensor *w, int r, const float *x, int t, int nr, int nc,
                               int f16, int k0, int k1, llm__vf *part) {
    int n = w->cols;
    size_t eb = f16 ? 2 : 4;
    const unsigned char *W = (const unsigned char *)w->data + (size_t)r * n * eb;
    x += (size_t)t * n;
#ifdef LLM__HAVE_FP_DECODE   /* an ISA file's rows of one token, in llm__tile_fp's order (neon.h) */
    if (nc == 1 && k0 == 0 && k1 == n) { llm__fp_decode(out, W, f16, x, n, nr); return; }
#endif
    if (nr == LLM__NR) {
        switch (nc) {
#define LLM__TILE_FP(k) case k: llm__tile_fp(out, ldo, W, f16, x, n, LLM__NR, k, k0, k1, part); return;
        LLM__TILE_FP(1)
#if LLM__NC_FP >= 2
        LLM__TILE_FP(2)
#endif
#if LLM__NC_FP >= 3
        LLM__TILE_FP(3)
#endif
#if LLM__NC_FP >= 4
        LLM__TILE_FP(4)
#endif
#if LLM__NC_FP >= 5
        LLM__TILE_FP(5)
#endif
#if LLM__NC_FP >= 6
        LLM__TILE_FP(6)
#endif
#if LLM__NC_FP >= 7
        LLM__TILE_FP(7)
#endif
#if LLM__NC_FP >= 8
        LLM__TILE_FP(8)
#endif
#undef LLM__TILE_FP
        default: break;
        }
    }
    for (int b = 0; b < nc; b++) {
        int a = 0;
        for (; a + LLM__NR_DECODE <= nr; a += LLM__NR_DECODE)
            llm__tile_fp(out + (size_t)b * ldo + a, ldo, W + (size_t)a * n * eb, f16, x + (size_t)b * n, n, LLM__NR_DECODE,
                         1, 0, n, NULL);
        for (; a < nr; a++)
            llm__tile_fp(out + (size_t)b * ldo + a, ldo, W + (size_t)a * n * eb, f16, x + (size_t)b * n, n, 1, 1, 0, n, NULL);
    }
}
LLM__KERNEL void llm__tile_f32(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc) {
    (void)xq; (void)xs;
    llm__tiles_fp(out, ldo, w, r, x, t, nr, nc, 0, 0, w->cols, NULL);
}
LLM__KERNEL void llm__tile_f16(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc) {
    (void)xq; (void)xs;
    llm__tiles_fp(out, ldo, w, r, x, t, nr, nc, 1, 0, w->cols, NULL);
}
#else
/* a + b * c: one fused instruction where the FPU has it (a microcontroller's
 * VFMA), else the plain expression (fmaf would be a slow library call) */
#if defined(__ARM_FEATURE_FMA) || defined(__FMA__)
#define LLM__MADD(a, b, c) fmaf(b, c, a)
#else
#define LLM__MADD(a, b, c) ((a) + (b) * (c))
#endif
/* No vector unit: W rows r..r+7 (f32) . x (n,) with one load of x per column
 * for eight rows; each sum runs over j in order, as the scalar twin's does. */
static void llm__rows8_f32(float *out, const float *w, const float *x, int n) {
    const float *w0 = w, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n, *w4 = w3 + n, *w5 = w4 + n, *w6 = w5 + n, *w7 = w6 + n;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
    for (int j = 0; j < n; j++) {
        float xj = x[j];
        a0 = LLM__MADD(a0, w0[j], xj); a1 = LLM__MADD(a1, w1[j], xj);
        a2 = LLM__MADD(a2, w2[j], xj); a3 = LLM__MADD(a3, w3[j], xj);
        a4 = LLM__MADD(a4, w4[j], xj); a5 = LLM__MADD(a5, w5[j], xj);
        a6 = LLM__MADD(a6, w6[j], xj); a7 = LLM__MADD(a7, w7[j], xj);
    }
    out[0] = a0; out[1] = a1; out[2] = a2; out[3] = a3; out[4] = a4; out[5] = a5; out[6] = a6; out[7] = a7;
}
/* one row the same way */
static float llm__row1_f32(const float *w, const float *x, int n) {
    float a = 0.0f;
    for (int j = 0; j < n; j++) a = LLM__MADD(a, w[j], x[j]);
    return a;
}

/* the traits' tiles: f32 eight rows at a time, f16 by its scalar twin */
LLM__KERNEL void llm__tile_f32(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc) {
    int n = w->cols;
    const float *W = (const float *)w->data + (size_t)r * n;
    (void)xq; (void)xs;
    for (int b = 0; b < nc; b++) {
        float *o = out + (size_t)b * ldo;
        const float *xb = x + (size_t)(t + b) * n;
        int a = 0;
        for (; a + 8 <= nr; a += 8) llm__rows8_f32(o + a, W + (size_t)a * n, xb, n);
        for (; a < nr; a++) o[a] = llm__row1_f32(W + (size_t)a * n, xb, n);
    }
}
LLM__KERNEL void llm__tile_f16(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc) {
    for (int b = 0; b < nc; b++)
        for (int a = 0; a < nr; a++)
            out[(size_t)b * ldo + a] = llm__row_dot_f16(w, r + a, x + (size_t)(t + b) * w->cols, xq, xs);
}
#endif /* LLM__VL */



#ifdef LLM__Q8_SIMD
/* 32 int8 from p, zero-padded past len */
LLM__INLINE llm__i8x32 llm__load32_i8(const int8_t *p, int len) {
    if (len == 32) return llm__i8x32_load(p);
    int8_t buf[32] = { 0 };
    memcpy(buf, p, (size_t)len);
    return llm__i8x32_load(buf);
}

/* Weights prepared once per chunk for all the tile's tokens, and a
 * correction per token added to each sum: VNNI's unsigned-times-signed
 * trick (x86.h); plain llm__dot32_i8 elsewhere. */
#ifndef LLM__HAVE_Q8_PREP
#define llm__q8_wprep(w) (w)
#define llm__q8_xcorr(x) llm__i32x8_zero()
#define llm__q8_addcorr(isum, c) ((void)(c), (isum))
#define llm__q8_dot32 llm__dot32_i8
#endif

/* q8_0 tile: nr weight rows (int8 in groups of G, scales ws) times nc
 * quantized tokens (xq, xs), nr * nc <= 16 pairs, in ref.h's order: per
 * group each pair's integer lanes (llm__dot32_i8, exact), then eight pairs
 * at a time their lanes' totals and one vector step, a lane per pair:
 * acc = fma(isum, ws * xs, acc). Any G and any n (short last groups) work;
 * whole = 1 promises whole 32-byte chunks (G and n multiples of 32). */
#define LLM__Q8_PAIRS 16
LLM__INLINE void llm__tile_q8_pairs(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                                    const float *xs, int n, int G, int nr, int nc, int whole) {
    int groups = (n + G - 1) / G, nv = (nr * nc + 7) / 8;
    llm__f32x8 acc[LLM__Q8_PAIRS / 8];
    LLM__UNROLL for (int v = 0; v < nv; v++) acc[v] = llm__f32x8_zero();
    for (int g = 0; g < groups; g++) {
        int g0 = g * G, glen = n - g0 < G ? n - g0 : G;
        llm__i32x8 isum[LLM__Q8_PAIRS];      /* pair p = a nc + b; past nr nc: zero */
        float scale[LLM__Q8_PAIRS];
        LLM__UNROLL for (int p = 0; p < 8 * nv; p++) { isum[p] = llm__i32x8_zero(); scale[p] = 0.0f; }
        for (int c0 = 0; c0 < glen; c0 += 32) {
            int len = whole || glen - c0 >= 32 ? 32 : glen - c0;
            llm__i8x32 xv[LLM__NC];
            llm__i32x8 xc[LLM__NC];
            LLM__UNROLL for (int b = 0; b < nc; b++) {
                xv[b] = llm__load32_i8(xq + (size_t)b * n + g0 + c0, len);
                xc[b] = llm__q8_xcorr(xv[b]);
            }
            LLM__UNROLL for (int a = 0; a < nr; a++) {
                if (nc == 1) LLM__PREFETCH(w + (size_t)(a + 8) * n + g0 + c0);   /* decode: the next tile's rows */
                llm__i8x32 wv = llm__q8_wprep(llm__load32_i8(w + (size_t)a * n + g0 + c0, len));
                LLM__UNROLL for (int b = 0; b < nc; b++)
                    isum[a * nc + b] = llm__q8_dot32(llm__q8_addcorr(isum[a * nc + b], xc[b]), wv, xv[b]);
            }
        }
        LLM__UNROLL for (int a = 0; a < nr; a++)
            LLM__UNROLL for (int b = 0; b < nc; b++) scale[a * nc + b] = ws[(size_t)a * groups + g] * xs[(size_t)b * groups + g];
        LLM__UNROLL for (int v = 0; v < nv; v++) acc[v] = llm__q8_steps8(acc[v], isum + 8 * v, scale + 8 * v);
    }
    float total[LLM__Q8_PAIRS];
    LLM__UNROLL for (int v = 0; v < nv; v++) llm__f32x8_store(total + 8 * v, acc[v]);
    for (int a = 0; a < nr; a++)
        for (int b = 0; b < nc; b++) out[(size_t)b * ldo + a] = total[a * nc + b];
}

/* Any nr x nc tile from the fully unrolled ones: the full NR x NC tile in
 * the hot loop, else token by token 16 x 1 tiles where the ISA file has them
 * (groups of 32), 8 x 1 tiles (decode: eight rows fill one step's vector),
 * then 4 x 1 and 1 x 1 ones at the edges. */
/* rows of one token's q8_0 product side by side (an ISA file may set fewer) */
#ifndef LLM__Q8_DECODE_ROWS
#define LLM__Q8_DECODE_ROWS 8
#endif
LLM__INLINE void llm__tiles_q8(float *out, int ldo, const int8_t *w, const float *ws, const int8_t *xq,
                               const float *xs, int n, int G, int nr, int nc, int whole) {
    int groups = (n + G - 1) / G;
#ifdef LLM__HAVE_Q8_TILE_4X4
    if (nr == 4 && nc == 4 && whole) { llm__tile_q8_4x4(out, ldo, w, ws, xq, xs, n, G); return; }
#endif
    if (nr == LLM__NR && nc == LLM__NC) { llm__tile_q8_pairs(out, ldo, w, ws, xq, xs, n, G, LLM__NR, LLM__NC, whole); return; }
    for (int b = 0; b < nc; b++) {
        const int8_t *xb = xq + (size_t)b * n;
        const float *sb = xs + (size_t)b * groups;
        float *o = out + (size_t)b * ldo;
        int a = 0;
#ifdef LLM__HAVE_Q8_TILE_16X1
        if (G == 32 && whole)
            for (; a + 16 <= nr; a += 16) llm__tile_q8_16x1(o + a, w + (size_t)a * n, ws + (size_t)a * groups, xb, sb, n);
#endif
#define LLM__Q8_ROWS(k) llm__tile_q8_pairs(o + a, ldo, w + (size_t)a * n, ws + (size_t)a * groups, xb, sb, n, G, k, 1, whole)
        if (nc == 1 && LLM__Q8_DECODE_ROWS < 8)   /* decode: fewer streams of W at once (x86.h) */
            for (; a + LLM__Q8_DECODE_ROWS <= nr; a += LLM__Q8_DECODE_ROWS) LLM__Q8_ROWS(LLM__Q8_DECODE_ROWS);
        for (; a + 8 <= nr; a += 8) LLM__Q8_ROWS(8);
        for (; a + 4 <= nr; a += 4) LLM__Q8_ROWS(4);
        for (; a < nr; a++) LLM__Q8_ROWS(1);
#undef LLM__Q8_ROWS
    }
}
/* The q8_0 tile: groups of 32 (the usual), whole chunks, or any */
LLM__KERNEL void llm__tile_q8(float *out, int ldo, const llm_tensor *wt, int r, const float *x, const int8_t *xq,
                              const float *xs, int t, int nr, int nc) {
    int n = wt->cols, G = wt->group, groups = (n + G - 1) / G;
    const int8_t *w = (const int8_t *)wt->data + (size_t)r * n;
    const float *ws = wt->scale + (size_t)r * groups;
    (void)x;
    xq += (size_t)t * n;
    xs += (size_t)t * groups;
#ifdef LLM__HAVE_Q8_PANELS
    if (wt->panels) { llm__tile_q8_panels(out, ldo, wt, r, nr, nc, xq, xs); return; }   /* x86.h, repack.h */
#endif
    if (G == 32 && n % 32 == 0) llm__tiles_q8(out, ldo, w, ws, xq, xs, n, 32, nr, nc, 1);
    else if (G % 32 == 0 && n % 32 == 0) llm__tiles_q8(out, ldo, w, ws, xq, xs, n, G, nr, nc, 1);
    else llm__tiles_q8(out, ldo, w, ws, xq, xs, n, G, nr, nc, 0);
}
#else   /* no q8_0 vectors: token by token, each by mcu.h's DSP rows or these */
#ifndef LLM__HAVE_TOKEN_Q8
/* Four rows at a time share each load of the activations (llm__isum4_i8:
 * Helium's VMLADAV or plain C), each row stepping along its groups as the
 * twin does. */
static void llm__rows4_q8(float *out, const int8_t *w, const float *ws, const int8_t *xq, const float *xs, int n,
                          int G, int groups) {
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int g0 = 0, g = 0; g0 < n; g0 += G, g++) {
        int32_t isum[4];
        llm__isum4_i8(isum, w + g0, (size_t)n, xq + g0, n - g0 < G ? n - g0 : G);
        a0 = llm__q8_step(isum[0], ws[g], xs[g], a0);
        a1 = llm__q8_step(isum[1], ws[groups + g], xs[g], a1);
        a2 = llm__q8_step(isum[2], ws[2 * groups + g], xs[g], a2);
        a3 = llm__q8_step(isum[3], ws[3 * groups + g], xs[g], a3);
    }
    out[0] = a0; out[1] = a1; out[2] = a2; out[3] = a3;
}
/* one token's products by nr rows of q8_0 (n columns, groups scales each) */
static void llm__token_q8(float *o, const int8_t *w, const float *ws, const int8_t *x, const float *xs, int n, int G,
                          int groups, int nr) {
    int a = 0;
    for (; a + 4 <= nr; a += 4) llm__rows4_q8(o + a, w + (size_t)a * n, ws + (size_t)a * groups, x, xs, n, G, groups);
    for (; a < nr; a++) o[a] = llm__dot_q8(w + (size_t)a * n, ws + (size_t)a * groups, x, xs, n, G);
}
#endif
LLM__KERNEL void llm__tile_q8(float *out, int ldo, const llm_tensor *wt, int r, const float *x, const int8_t *xq,
                              const float *xs, int t, int nr, int nc) {
    int n = wt->cols, G = wt->group, groups = (n + G - 1) / G;
    const int8_t *w = (const int8_t *)wt->data + (size_t)r * n;
    const float *ws = wt->scale + (size_t)r * groups;
    (void)x;
    for (int b = 0; b < nc; b++)
        llm__token_q8(out + (size_t)b * ldo, w, ws, xq + (size_t)(t + b) * n, xs + (size_t)(t + b) * groups, n, G,
                      groups, nr);
}
#endif /* LLM__Q8_SIMD */

/* GGUF's types. bf16: its scalar twin (no vector kernel yet). The block
 * types: each (row, token) by the group sums of the type, then the twin's
 * steps along the row; an ISA file with faster group sums gives
 * llm__blk_sums_<type>(isum, row, xq, groups), all of a row's sums at once,
 * or llm__blk_isum_q8_0(block, x), one group's (LLM__HAVE_BLK_ISUM),
 * and the steps stay the twin's, so the bits do. */
LLM__KERNEL void llm__tile_bf16(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                                const float *xs, int t, int nr, int nc) {
    for (int b = 0; b < nc; b++)
        for (int a = 0; a < nr; a++)
            out[(size_t)b * ldo + a] = llm__row_dot_bf16(w, r + a, x + (size_t)(t + b) * w->cols, xq, xs);
}
/* A row's G group sums, each by an expression of g_ */
#define LLM__BLK_SUMS_EACH(isum, G, sum_of_g) for (int g_ = 0; g_ < (G); g_++) (isum)[g_] = (sum_of_g)
#if defined(LLM__HAVE_BLK_ISUM) && !defined(llm__blk_sums_q8_0)
/* an ISA file's one-group sums of q8_0 (llm__blk_isum_q8_0(block, x), x int16 codes) */
#define llm__blk_sums_q8_0(isum, row, xq, G) \
    LLM__BLK_SUMS_EACH(isum, G, llm__blk_isum_q8_0((row) + (size_t)g_ * LLM__Q8_0_BYTES, (xq) + (size_t)g_ * LLM__GQ))
#endif
/* the twins' sums for what the ISA file leaves out */
#define LLM__BLK_TWIN_SUMS(name, isum, row, xq, G) LLM__BLK_SUMS_EACH(isum, G, llm__gsum_##name(row, g_, (xq) + (size_t)g_ * LLM__GQ))
#ifndef llm__blk_sums_q8_0
#define llm__blk_sums_q8_0(isum, row, xq, G) LLM__BLK_TWIN_SUMS(q8_0, isum, row, xq, G)
#endif
#ifndef llm__blk_sums_q4_0
#define llm__blk_sums_q4_0(isum, row, xq, G) LLM__BLK_TWIN_SUMS(q4_0, isum, row, xq, G)
#endif
#ifndef llm__blk_sums_q4_K
#define llm__blk_sums_q4_K(isum, row, xq, G) LLM__BLK_TWIN_SUMS(q4_K, isum, row, xq, G)
#endif
#ifndef llm__blk_sums_q6_K
#define llm__blk_sums_q6_K(isum, row, xq, G) LLM__BLK_TWIN_SUMS(q6_K, isum, row, xq, G)
#endif
#define LLM__BLK_ROW_SUMS(name, isum, row, xq, G) llm__blk_sums_##name(isum, row, xq, G)
/* na <= 4 rows' sums at once, isum[i][g] for row rc[i]: an ISA file's
 * llm__blk_sums4_<type> (sharing each load of x), else row by row */
#define LLM__BLK_EACH_ROW(name, isum, rc, na, xq, G) \
    for (int i_ = 0; i_ < (na); i_++) LLM__BLK_ROW_SUMS(name, (isum)[i_], (rc)[i_], xq, G)
#ifndef llm__blk_sums4_q8_0
#define llm__blk_sums4_q8_0(isum, rc, na, xq, G) LLM__BLK_EACH_ROW(q8_0, isum, rc, na, xq, G)
#endif
#ifndef llm__blk_sums4_q4_0
#define llm__blk_sums4_q4_0(isum, rc, na, xq, G) LLM__BLK_EACH_ROW(q4_0, isum, rc, na, xq, G)
#endif
#ifndef llm__blk_sums4_q4_K
#define llm__blk_sums4_q4_K(isum, rc, na, xq, G) LLM__BLK_EACH_ROW(q4_K, isum, rc, na, xq, G)
#endif
#ifndef llm__blk_sums4_q6_K
#define llm__blk_sums4_q6_K(isum, rc, na, xq, G) LLM__BLK_EACH_ROW(q6_K, isum, rc, na, xq, G)
#endif
/* out doubles as each row's accumulator between chunks of 64 groups, so a
 * chunk's activation sums (q4_K's) are taken once for all the rows; act_t
 * is the type's activation code (ref.h's twins) */
#define LLM__BLK_TILE(name, with_xsum, act_t)                                                                     \
    LLM__KERNEL void llm__tile_blk_##name(float *out, int ldo, const llm_tensor *w, int r, const float *x,         \
                                       const int8_t *xq, const float *xs, int t, int nr, int nc) {              \
        int n = w->cols, G = n / LLM__GQ;                                                                      \
        size_t chunk_bytes = (size_t)(64 * LLM__GQ / llm__traits[w->type].qblock) *                            \
                             (size_t)llm__traits[w->type].qblock_bytes;                                        \
        int32_t isum[4][64], xsum[64];   /* four rows, a chunk of up to 64 groups (2048 columns) at a time */ \
        (void)x;                                                                                               \
        for (int b = 0; b < nc; b++) {                                                                         \
            const act_t *xb = (const act_t *)(const void *)xq + (size_t)(t + b) * n;                           \
            const float *sb = xs + (size_t)(t + b) * G;                                                        \
            float *o = out + (size_t)b * ldo;                                                                  \
            for (int c0 = 0; c0 < G; c0 += 64) {   /* c0 a multiple of 8: whole 256-blocks */                  \
                int cg = G - c0 < 64 ? G - c0 : 64;                                                            \
                for (int g = 0; g < cg; g++)                                                                   \
                    xsum[g] = with_xsum ? llm__sum_i16((const int16_t *)(const void *)(xb + (size_t)(c0 + g) * LLM__GQ), LLM__GQ) : 0; \
                for (int a0 = 0; a0 < nr; a0 += 4) {                                                           \
                    int na = nr - a0 < 4 ? nr - a0 : 4;                                                        \
                    const unsigned char *rc[4];                                                                \
                    for (int i = 0; i < na; i++)                                                               \
                        rc[i] = llm__block_row(w, r + a0 + i) + (size_t)(c0 / 64) * chunk_bytes;               \
                    llm__blk_sums4_##name(isum, rc, na, xb + (size_t)c0 * LLM__GQ, cg);                         \
                    for (int i = 0; i < na; i++) {                                                             \
                        float acc = c0 ? o[a0 + i] : 0.0f;                                                     \
                        for (int g = 0; g < cg; g++)                                                           \
                            acc = llm__gstep_##name(rc[i], g, isum[i][g], xsum[g], sb[c0 + g], acc);           \
                        o[a0 + i] = acc;                                                                       \
                    }                                                                                          \
                }                                                                                              \
                (void)xsum;                                                                                    \
            }                                                                                                  \
        }                                                                                                      \
    }
/* each type's generic tile unless an ISA file has its own (x86_gguf.h's steps
 * eight rows at a time, mcu.h's DSP and Helium q4_0) */
#ifndef LLM__HAVE_BLK_TILE_Q8_0
LLM__BLK_TILE(q8_0, 0, int16_t)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q4_0
LLM__BLK_TILE(q4_0, 0, int16_t)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q4_K
LLM__BLK_TILE(q4_K, 1, int16_t)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q6_K
LLM__BLK_TILE(q6_K, 0, int16_t)
#endif
#undef LLM__BLK_TILE
/* The types with one sum per group that may carry a row's own min term
 * (ref.h's LLM__BLK2_DOT): each (row, token) is the twin's row product, so
 * the twin's bits, on every target without a tile of its own */
#define LLM__BLK2_TILE(name)                                                                                    \
    LLM__KERNEL void llm__tile_blk_##name(float *out, int ldo, const llm_tensor *w, int r, const float *x,       \
                                       const int8_t *xq, const float *xs, int t, int nr, int nc) {            \
        int n = w->cols, G = n / LLM__GQ;                                                                    \
        (void)x;                                                                                             \
        for (int b = 0; b < nc; b++) {                                                                       \
            const int16_t *xb = (const int16_t *)(const void *)xq + (size_t)(t + b) * n;                     \
            for (int a = 0; a < nr; a++)                                                                     \
                out[(size_t)b * ldo + a] = llm__dot_blk_##name(llm__block_row(w, r + a), xb, xs + (size_t)(t + b) * G, n); \
        }                                                                                                    \
    }
#ifndef LLM__HAVE_BLK_TILE_Q4_1
LLM__BLK2_TILE(q4_1)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q5_0
LLM__BLK2_TILE(q5_0)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q5_1
LLM__BLK2_TILE(q5_1)
#endif
#ifndef LLM__HAVE_BLK_TILE_IQ4_NL
LLM__BLK2_TILE(iq4_nl)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q2_K
LLM__BLK2_TILE(q2_K)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q3_K
LLM__BLK2_TILE(q3_K)
#endif
#ifndef LLM__HAVE_BLK_TILE_Q5_K
LLM__BLK2_TILE(q5_K)
#endif
#ifndef LLM__HAVE_BLK_TILE_IQ4_XS
LLM__BLK2_TILE(iq4_xs)
#endif
#undef LLM__BLK2_TILE

const char *llm_simd_name(void) {
#if defined(__AVX512VNNI__) && defined(LLM__Q8_SIMD)
    return LLM__SIMD "+vnni";
#elif defined(__ARM_FEATURE_DOTPROD) && defined(LLM__Q8_SIMD)
    return LLM__SIMD "+dotprod";
#elif defined(__ARM_FEATURE_DSP) && !defined(LLM__VL) && !defined(MODEL_NO_SIMD)
    return "scalar+dsp";
#else
    return LLM__SIMD;
#endif
}

/* Rows r0..r1 of W times tokens t0..t1 of X into Out (T,d), tile by tile,
 * each tile by the type's traits. */
#ifndef LLM__L2_BLOCK_BYTES
#define LLM__L2_BLOCK_BYTES (256 * 1024)
#endif
#if defined(LLM__VL) && defined(LLM__KC_FP)
/* f32/f16 rows longer than LLM__KC_FP columns, for several tokens: a tile's
 * token vectors over whole rows no longer fit in L1 beside the panels of W
 * streaming past them, so the columns go in chunks of LLM__KC_FP: each
 * chunk of a token tile's vectors stays in L1 while every panel of a small
 * block of rows passes, each panel's lane accumulators kept in part between
 * chunks (the same lanes in the same order: the same bits). */
#define LLM__KC_ROWS 32                /* rows per block: part is 8 panels' accumulators */
static void llm__gemm_fp_chunked(float *out, const llm_tensor *w, const float *x, int r0, int r1, int t0, int t1) {
    int d = w->rows, n = w->cols, f16 = w->type == LLM_TYPE_F16;
    llm__vf part[LLM__KC_ROWS / LLM__NR][LLM__FP_HALVES_MAX * LLM__NR * LLM__NC_FP];
    for (int rb = r0; rb < r1; rb += LLM__KC_ROWS) {
        int rb1 = r1 - rb < LLM__KC_ROWS ? r1 : rb + LLM__KC_ROWS;
        for (int t = t0; t < t1; t += LLM__NC_FP) {
            int nc = t1 - t < LLM__NC_FP ? t1 - t : LLM__NC_FP;
            for (int k0 = 0; k0 < n; k0 += LLM__KC_FP) {
                int k1 = n - k0 <= LLM__KC_FP ? n : k0 + LLM__KC_FP;
                for (int r = rb; r < rb1; r += LLM__NR) {
                    float *o = out + (size_t)t * d + r;
                    if (rb1 - r >= LLM__NR) llm__tiles_fp(o, d, w, r, x, t, LLM__NR, nc, f16, k0, k1, part[(r - rb) / LLM__NR]);
                    else if (k1 == n) llm__tiles_fp(o, d, w, r, x, t, rb1 - r, nc, f16, 0, n, NULL);   /* the last rows whole */
                }
            }
        }
    }
}
#endif

static void llm__gemm_block(float *out, const llm_tensor *w, const float *x, const int8_t *xq,
                            const float *xs, int r0, int r1, int t0, int t1) {
    const llm__type_traits *tr = &llm__traits[w->type];
    int d = w->rows;
#if defined(LLM__VL) && defined(LLM__KC_FP)
    if ((w->type == LLM_TYPE_F32 || w->type == LLM_TYPE_F16) && w->cols > LLM__KC_FP && t1 - t0 > 1) {
        llm__gemm_fp_chunked(out, w, x, r0, r1, t0, t1);
        return;
    }
#endif
#ifdef LLM__VL
    /* a block of rows of W (a few hundred KB) stays in L2 while every token
     * tile passes over it; inside, a panel of rows (the type's, else 4)
     * meets a tile of tokens */
    size_t row_bytes = tr->qblock ? llm__block_row_bytes(w) : (size_t)w->cols * (size_t)tr->value_bytes;
    int panel = llm__tile_rows(w);
    int block = (int)(LLM__L2_BLOCK_BYTES / row_bytes) / panel * panel;
    if (block < panel) block = panel;
    /* one token, or a matrix in panels (whose tile prepares each chunk of a
     * token tile's activations once for all its rows): a whole block of
     * rows per call */
    int step = t1 - t0 == 1 || llm__panel_rows(w) ? block : panel;
    int tokens = llm__tile_tokens(w);
    for (int rb = r0; rb < r1; rb += block) {
      int rb1 = r1 - rb < block ? r1 : rb + block;
      for (int t = t0; t < t1; t += tokens) {
        int nc = t1 - t < tokens ? t1 - t : tokens;
        for (int r = rb; r < rb1; r += step) {
            int nr = rb1 - r < step ? rb1 - r : step;
            tr->tile(out + (size_t)t * d + r, d, w, r, x, xq, xs, t, nr, nc);
        }
      }
    }
#else
    /* no vector unit: each token over all the rows */
    for (int t = t0; t < t1; t++) tr->tile(out + (size_t)t * d + r0, d, w, r0, x, xq, xs, t, r1 - r0, 1);
#endif
}

/* 1 when a batch of T tokens by f32/f16 w goes across threads by rows: while
 * all T tokens' activations stay in L2 beside a block of W (a short prompt),
 * each thread then reads only its share of W, where by tokens every thread
 * would stream all of it, and no thread is left with a sliver of a tile */
#ifndef LLM__SPLIT_ROWS_BYTES
#define LLM__SPLIT_ROWS_BYTES (512 * 1024)
#endif
static int llm__split_rows(const llm_tensor *w, int T) {
    return (w->type == LLM_TYPE_F32 || w->type == LLM_TYPE_F16) && (size_t)T * (size_t)w->cols * 4 <= LLM__SPLIT_ROWS_BYTES;
}

/* W (d,n) @ X (T,n) -> Out (T,d). A prefill batch is split across threads by
 * tokens (each thread runs its tokens through all of W), a short one of
 * f32/f16 (llm__split_rows) and a single token by row blocks. q8_0 first
 * quantizes X per group, as W is. */
/* 1 when products by a and b quantize the same activations alike (the
 * same groups over the same padded columns) */
static int llm__same_act(const llm_tensor *a, const llm_tensor *b) {
    return llm__act_bytes(a->type) && llm__traits[a->type].act_type == llm__traits[b->type].act_type &&
           a->cols == b->cols && llm__group(a) == llm__group(b) && llm__padded_cols(a) == llm__padded_cols(b);
}
/* llm__matmul after a product by prev of the same X (NULL: none): where
 * both quantize X alike, its quantization (act_q, act_scale) is reused */
LLM__KERNEL void llm__matmul_after(float *out, const llm_tensor *w, const float *x, int T, llm_state *s,
                                   const llm_tensor *prev) {
    int d = w->rows, n = w->cols, nt = s->n_threads;
    int8_t *xq = s->act_q;
    float *xs = s->act_scale;
    int64_t work = (int64_t)d * n * T;
    int parallel = nt > 1 && work >= s->parallel_min_work;
    /* a block type's kernels see whole blocks: w's view with its rows'
     * zero padding (an LLMW row of 172 reads as 192), and each token's
     * activations zero-padded to match (the same n for the other types) */
    llm_tensor wp = *w;
    int np = wp.cols = llm__padded_cols(w);
    int code_bytes = llm__act_bytes(w->type);
    if (code_bytes && !(prev && llm__same_act(w, prev))) {
        int G = llm__group(w), groups = (np + G - 1) / G;
        LLM__PARALLEL_FOR(nt, parallel && T > 1,
        for (int t = 0; t < T; t++)
            llm__quantize_acts(w, xq + (size_t)t * np * code_bytes, xs + (size_t)t * groups, x + (size_t)t * n););
    }
    w = &wp;
    if (!parallel) {
        llm__gemm_block(out, w, x, xq, xs, 0, d, 0, T);
        return;
    }
    if (T >= 2 * nt && !llm__split_rows(w, T)) { /* across tokens, in whole tiles */
        int tokens = llm__tile_tokens(w), tiles = (T + tokens - 1) / tokens;
        LLM__PARALLEL_FOR(nt, 1,
        for (int i = 0; i < nt; i++) {
            int t0 = (int)((int64_t)tiles * i / nt) * tokens, t1 = (int)((int64_t)tiles * (i + 1) / nt) * tokens;
            if (t1 > T) t1 = T;
            if (t0 < t1) llm__gemm_block(out, w, x, xq, xs, 0, d, t0, t1);
        });
    } else { /* across rows, in whole panels (the type's, else 4 rows) */
        int panel = llm__tile_rows(w);
        int tiles = (d + panel - 1) / panel;
        LLM__PARALLEL_FOR(nt, 1,
        for (int i = 0; i < nt; i++) {
            int r0 = (int)((int64_t)tiles * i / nt) * panel, r1 = (int)((int64_t)tiles * (i + 1) / nt) * panel;
            if (r1 > d) r1 = d;
            if (r0 < r1) llm__gemm_block(out, w, x, xq, xs, r0, r1, 0, T);
        });
    }
}
LLM__KERNEL void llm__matmul(float *out, const llm_tensor *w, const float *x, int T, llm_state *s) {
    llm__matmul_after(out, w, x, T, s, NULL);
}
