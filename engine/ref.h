/* engine/ref.h -- the scalar kernels: norms, e^x, softmax, dot products and
 * the q8_0 and KV quantizers, in plain C with no intrinsics. Each fast kernel
 * (simd.h and the ISA files) has its twin here, and the tests compare them;
 * where an ISA file has no fast version, simd.h maps the name to the twin. */

/* y = g * x / sqrt(mean(x^2) + eps)          x (n,) -> out (n,); g NULL: 1 */
void llm_rmsnorm(float *out, const float *x, const float *g, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = (g ? g[i] : 1.0f) * (x[i] * inv);
}

/* y = g * (x - mean) / sqrt(var + eps) + b, biased var   x (n,) -> out (n,); g NULL: 1, b NULL: 0 */
void llm_layernorm(float *out, const float *x, const float *g, const float *b, int n, float eps) {
    float mean = 0.0f, var = 0.0f;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= (float)n;
    for (int i = 0; i < n; i++) { float d = x[i] - mean; var += d * d; }
    var /= (float)n;
    float inv = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < n; i++) out[i] = (g ? g[i] : 1.0f) * ((x[i] - mean) * inv) + (b ? b[i] : 0.0f);
}

/* e^x in float, the engine's own so that every platform (and its vector
 * twin below) computes the same bits: x = n ln2 + r with |r| <= ln2/2,
 * e^r = 1 + r + r^2 P(r) in fused multiply-adds, times 2^n. Within 2 ulp
 * of the true value; flushes results below 2^-126 to zero. */
#define LLM__EXP_LOG2E 1.44269504088896341f
#define LLM__EXP_LN2_HI 0.693145751953125f
#define LLM__EXP_LN2_LO 1.42860682030941723212e-6f
#define LLM__EXP_MIN -87.33654475f
#define LLM__EXP_MAX 88.72283905f
/* e^r = 1 + r + r^2 P(r) with Cephes' minimax coefficients for P */
static const float llm__exp_c[6] = { 5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f, 8.3334519073e-3f,
                                     1.3981999507e-3f, 1.9875691500e-4f };
static inline float llm__expf(float x) {
    if (!(x >= LLM__EXP_MIN && x <= LLM__EXP_MAX)) /* out of range, or NaN */
        return x < LLM__EXP_MIN ? 0.0f : x > LLM__EXP_MAX ? INFINITY : x;
    float t = x * LLM__EXP_LOG2E + 0.5f;
    float n = (float)(int32_t)t;              /* floor(t), without a libm call */
    if (n > t) n -= 1.0f;
    float r = fmaf(n, -LLM__EXP_LN2_HI, x);
    r = fmaf(n, -LLM__EXP_LN2_LO, r);
    float p = llm__exp_c[5];
    for (int i = 4; i >= 0; i--) p = fmaf(p, r, llm__exp_c[i]);
    p = fmaf(p, r * r, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}


/* w_row (n,) . x (n,), f32 */
static float llm__dot_f32(const float *w, const float *x, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc += w[j] * x[j];
    return acc;
}

/* w_row (n,) f16 . x (n,) */
static float llm__dot_f16(const uint16_t *w, const float *x, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc += llm_f16_to_f32(w[j]) * x[j];
    return acc;
}

/* max of x (absolute = 0) or of |x| (absolute = 1) over n values, NaNs
 * skipped, starting from max */
static float llm__max_from(const float *x, int n, int absolute, float max) {
    for (int i = 0; i < n; i++) {
        float v = absolute ? fabsf(x[i]) : x[i];
        if (v > max) max = v;
    }
    return max;
}
/* the same over n >= 1 values */
static inline float llm__max_ref(const float *x, int n, int absolute) {
    return llm__max_from(x, n, absolute, absolute ? 0.0f : x[0]);
}

/* 1 when no x[i] is NaN or infinite */
static int llm__all_finite(const float *x, int n) {
    for (int i = 0; i < n; i++) if (!(fabsf(x[i]) <= FLT_MAX)) return 0;
    return 1;
}

/* xq[j] = round(x[j] * inv), halves away from zero (|x * inv| <= 127) */
static inline void llm__round_q8_ref(int8_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j++) xq[j] = (int8_t)lroundf(x[j] * inv);
}
/* int16 activation codes stay within +-16383, not 32767, so that every
 * group's integer sum fits int32: q6_K's two halves of 16 codes reach
 * 2 * 16 * 32 * 128 * 16383 < 2^31 (with 32767, twice that) */
#define LLM__Q16_MAX 16383
/* the same into int16 (|x * inv| <= LLM__Q16_MAX) */
static inline void llm__round_q16_ref(int16_t *xq, const float *x, int n, float inv) {
    for (int j = 0; j < n; j++) xq[j] = (int16_t)lroundf(x[j] * inv);
}

/* The q8_0 dot product, in the one order every platform computes (x86,
 * ARM and a microcontroller print the same text): int8 row (n,) in groups
 * of G (the last one shorter when G does not divide n) with scales ws .
 * int8 xq with scales xs; per group an exact integer sum (so any lane order
 * or instruction gives it), then one step acc = fma(isum, ws * xs, acc)
 * along the row, group after group -- GGUF's block types' order below. A
 * fast kernel vectorises across rows and tokens, never within the sum.
 * (|isum| <= 127^2 G < 2^31 for G <= 4096; (float)isum rounds to nearest
 * everywhere past 2^24.) */
static inline float llm__q8_step(int32_t isum, float ws, float xs, float acc) { return fmaf((float)isum, ws * xs, acc); }
static inline int32_t llm__isum_i8(const int8_t *w, const int8_t *x, int len) {
    int32_t s = 0;
    for (int j = 0; j < len; j++) s += (int32_t)w[j] * (int32_t)x[j];
    return s;
}
static float llm__dot_q8(const int8_t *w, const float *ws, const int8_t *xq, const float *xs, int n, int G) {
    float acc = 0.0f;
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int len = n - g0 < G ? n - g0 : G;
        acc = llm__q8_step(llm__isum_i8(w + g0, xq + g0, len), ws[gi], xs[gi], acc);
    }
    return acc;
}

/* The eight lanes' tree that the attention dot product (llm__dot8) ends in */
static inline float llm__lanes_total(const float *lane) {
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* x[i] = e^(x[i] - shift) */
static inline void llm__exp_shifted_ref(float *x, int n, float shift) {
    for (int i = 0; i < n; i++) x[i] = llm__expf(x[i] - shift);
}

/* lane[0..n-n8) += a[j] * b[j] for the last j (fused), then the lanes' total */
static inline float llm__dot8_tail(float *lane, const float *a, const float *b, int n8, int n) {
    for (int j = n8; j < n; j++) lane[j - n8] = fmaf(a[j], b[j], lane[j - n8]);
    return llm__lanes_total(lane);
}

/* a (n,) . b (n,) in f32 for attention scores, in one order on every
 * platform: eight lanes (lane l takes j = l mod 8, by fused multiply-add; a
 * short tail is zero-padded), added in llm__lanes_total's tree. */
static inline float llm__dot8_ref(const float *a, const float *b, int n) {
    int n8 = n - n % 8;
    float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f, l4 = 0.0f, l5 = 0.0f, l6 = 0.0f, l7 = 0.0f;
    for (int j = 0; j < n8; j += 8) {
        l0 = fmaf(a[j], b[j], l0); l1 = fmaf(a[j + 1], b[j + 1], l1);
        l2 = fmaf(a[j + 2], b[j + 2], l2); l3 = fmaf(a[j + 3], b[j + 3], l3);
        l4 = fmaf(a[j + 4], b[j + 4], l4); l5 = fmaf(a[j + 5], b[j + 5], l5);
        l6 = fmaf(a[j + 6], b[j + 6], l6); l7 = fmaf(a[j + 7], b[j + 7], l7);
    }
    if (n8 == n) return ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
    float lane[8];
    lane[0] = l0; lane[1] = l1; lane[2] = l2; lane[3] = l3; lane[4] = l4; lane[5] = l5; lane[6] = l6; lane[7] = l7;
    return llm__dot8_tail(lane, a, b, n8, n);
}

/* Row r of W (rows, cols) . x (cols,), one function per type (the traits'
 * reference dot); q8_0 takes x quantized, xq/xs. */
LLM__KERNEL float llm__row_dot_f32(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) {
    (void)xq; (void)xs;
    return llm__dot_f32((const float *)w->data + (size_t)r * (size_t)w->cols, x, w->cols);
}
LLM__KERNEL float llm__row_dot_f16(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) {
    (void)xq; (void)xs;
    return llm__dot_f16((const uint16_t *)w->data + (size_t)r * (size_t)w->cols, x, w->cols);
}
LLM__KERNEL float llm__row_dot_q8(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) {
    (void)x;
    return llm__dot_q8((const int8_t *)w->data + (size_t)r * (size_t)w->cols, w->scale + (size_t)r * (size_t)llm__groups(w),
                       xq, xs, w->cols, w->group);
}

/* x (n,) -> groups of G codes xq (n,), int8 (code_bytes 1, |code| <= 127)
 * or int16 (2, |code| <= LLM__Q16_MAX), with scales xs (ceil(n/G),):
 * x ~ xq * xs. A group with NaN or an infinity gets a NaN scale and zero
 * codes, so every product it enters is NaN, as in the float path (no NaN
 * is cast). The twin of simd.h's llm__quantize_groups. */
static void llm__quantize_groups_ref(void *xq, int code_bytes, float *xs, const float *x, int n, int G) {
    float qmax = code_bytes == 2 ? (float)LLM__Q16_MAX : 127.0f;
    for (int g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int len = n - g0 < G ? n - g0 : G;
        if (!llm__all_finite(x + g0, len)) {
            xs[gi] = NAN;
            memset((unsigned char *)xq + (size_t)g0 * code_bytes, 0, (size_t)len * code_bytes);
            continue;
        }
        float amax = llm__max_ref(x + g0, len, 1);
        float scale = amax / qmax, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        xs[gi] = scale;
        if (code_bytes == 2) llm__round_q16_ref((int16_t *)xq + g0, x + g0, len, inv);
        else llm__round_q8_ref((int8_t *)xq + g0, x + g0, len, inv);
    }
}
/* x (n,) -> int8 groups xq (n,) with scales xs (ceil(n/G),) */
static void llm__quantize_q8_ref(int8_t *xq, float *xs, const float *x, int n, int G) {
    llm__quantize_groups_ref(xq, 1, xs, x, n, G);
}
/* x (n,) -> int16 groups of 32, xq (n,) with scales xs (n/32,) */
static void llm__quantize_q16_ref(int16_t *xq, float *xs, const float *x, int n) {
    llm__quantize_groups_ref(xq, 2, xs, x, n, LLM__GQ);
}
/* The activations a product of w's type takes are x quantized in xq/xs for
 * the row as the kernels see it: past column n of a block type's
 * zero-padded row (llm__padded_cols) the codes and scales are 0, so the
 * padded weights (codes that decode to 0) meet finite zeros and add exactly
 * 0. This zeroes that padding, a codes each. */
static void llm__pad_acts(const llm_tensor *w, int8_t *xq, float *xs, int a) {
    int n = w->cols, np = llm__padded_cols(w), G = llm__group(w);
    memset(xq + (size_t)n * (size_t)a, 0, (size_t)(np - n) * (size_t)a);
    for (int g = (n + G - 1) / G; g < np / G; g++) xs[g] = 0.0f;
}
/* x (n,) -> the activations a product of w's type takes (simd.h's
 * llm__quantize_acts is the fast twin) */
static void llm__quantize_acts_ref(const llm_tensor *w, int8_t *xq, float *xs, const float *x) {
    int a = llm__act_bytes(w->type), n = w->cols;
    if (a == 2) llm__quantize_q16_ref((int16_t *)(void *)xq, xs, x, n);
    else if (a == 1) llm__quantize_q8_ref(xq, xs, x, n, llm__group(w));
    else return;
    llm__pad_acts(w, xq, xs, a);
}

/* W (d,n) @ x (n,) -> out (d,); xq/xs: scratch for the quantized activations
 * (int16 codes where the type's act_type is LLM__ACT_Q16; a block type's row
 * padded to whole blocks). The kernels see the padded row: w's view with cols
 * padded to whole blocks. */
void llm_matvec(float *out, const llm_tensor *w, const float *x, int8_t *xq, float *xs) {
    const llm__type_traits *tr = &llm__traits[w->type];
    llm_tensor wp = *w;
    wp.cols = llm__padded_cols(w);
    llm__quantize_acts_ref(w, xq, xs, x);
    for (int r = 0; r < w->rows; r++) out[r] = tr->dot(&wp, r, x, xq, xs);
}

/* Row r of an embedding-like matrix as f32: out (cols,), per type */
LLM__KERNEL void llm__dequant_row_f32(float *out, const llm_tensor *w, int r) {
    memcpy(out, (const float *)w->data + (size_t)r * (size_t)w->cols, (size_t)w->cols * 4);
}
LLM__KERNEL void llm__dequant_row_f16(float *out, const llm_tensor *w, int r) {
    const uint16_t *p = (const uint16_t *)w->data + (size_t)r * (size_t)w->cols;
    for (int j = 0; j < w->cols; j++) out[j] = llm_f16_to_f32(p[j]);
}
LLM__KERNEL void llm__dequant_row_q8(float *out, const llm_tensor *w, int r) {
    size_t n = (size_t)w->cols, G = (size_t)w->group;
    const int8_t *p = (const int8_t *)w->data + (size_t)r * n;
    const float *sc = w->scale + (size_t)r * (size_t)llm__groups(w);
    for (size_t j = 0; j < n; j++) out[j] = (float)p[j] * sc[j / G];
}

/* ---- GGUF's types, read in place (engine/gguf.h) ----
 * bf16: the top half of an f32. The block types, each row a run of blocks
 * (ggml's layouts, little-endian):
 *   q8_0 (34 bytes / 32): f16 d, int8 q[32];                        w = d q
 *   q4_0 (18 bytes / 32): f16 d, uint8 qs[16]; q[j] = qs[j] & 15,
 *        q[j + 16] = qs[j] >> 4;                                     w = d (q - 8)
 *   q4_K (144 bytes / 256): f16 d, f16 dmin, 12 bytes packing eight 6-bit
 *        scales sc[j] and mins m[j], uint8 qs[128]: sub-blocks 2p and 2p + 1
 *        (32 each) are the low and high nibbles of qs[32p .. 32p + 31];
 *                                                                    w = d sc q - dmin m
 *   q6_K (210 bytes / 256): uint8 ql[128] (low four bits), qh[64] (high two),
 *        int8 sc[16] (one per 16), f16 d;                           w = d sc (q - 32)
 * The float order of a product, which every fast kernel reproduces: the
 * activations in groups of 32 with one f32 scale xs each, int16 codes of
 * at most LLM__Q16_MAX (llm__quantize_q16) for every block type, q8_0
 * included (int8 activations were most of the error against a float
 * forward: 0.003 to 0.01 in NLL for q4_0 and the K-quants, and 0.0136 for
 * a Qwen3-shaped model in llama-quantize's Q8_0, against 1e-4 with int16;
 * |isum| <= 32 * 127 * 16383 < 2^27); per group, an integer sum of weight codes times activation
 * codes (exact in int32, so any lane order gives it), then one step
 * acc = fma(isum, d * xs, acc) along the row, group after group. q4_K takes
 * two steps, the scale's then the min's: fma(sc * isum, d * xs, acc), then
 * fma(m * sum(xq), -(dmin * xs), acc). q6_K's group has two scales:
 * isum = sc[2k] * (first 16) + sc[2k + 1] * (last 16). An isum past 2^24
 * rounds once on its way to float, the same on every target. */
/* f16 to f32 is exact, so F16C's instruction gives the portable bits */
#if defined(__F16C__) && !defined(MODEL_NO_SIMD)
#include <immintrin.h>
static inline float llm__blk_half(const unsigned char *p) { return _cvtsh_ss((unsigned short)(p[0] | (unsigned)p[1] << 8)); }
#elif !defined(MODEL_NO_SIMD) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && (__ARM_FP & 4)
/* a Cortex-M FPU's half-precision conversion, VCVTB: exact too, and one
 * instruction where the portable conversion is a call per group */
static inline float llm__blk_half(const unsigned char *p) {
    uint32_t h = (uint32_t)(p[0] | (unsigned)p[1] << 8);
    float in, out;
    memcpy(&in, &h, 4);
    __asm__("vcvtb.f32.f16 %0, %1" : "=t"(out) : "t"(in));
    return out;
}
#else
static inline float llm__blk_half(const unsigned char *p) { return llm_f16_to_f32((uint16_t)(p[0] | (unsigned)p[1] << 8)); }
#endif
static float llm__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
/* q4_K sub-block j's 6-bit scale and min, unpacked from the 12 bytes s */
static inline void llm__q4_K_scale_min(const unsigned char *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63; *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4); *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
/* q6_K block b's code at element e (0..255), -32..31: element 128h + 32q + l
 * takes ql[64h + 32(q & 1) + l]'s low (q < 2) or high nibble and bits 2q, 2q+1
 * of qh[32h + l] */
static inline int llm__q6_K_code(const unsigned char *b, int e) {
    int h = e >> 7, q = (e >> 5) & 3, l = e & 31;
    int lo = b[h * 64 + (q & 1) * 32 + l], hi = b[128 + h * 32 + l];
    return (((q < 2 ? lo : lo >> 4) & 15) | (((hi >> (2 * q)) & 3) << 4)) - 32;
}

/* Group g's integer sums of a row of each block type with 32 activation codes xq */
/* (the weights through an int8_t pointer: GCC 12's loop vectoriser at -O3
 * with AVX-512 VNNI turns a sum of (int8_t)unsigned_char * int8 products
 * into a wrong dot-product instruction) */
static int32_t llm__gsum_q8_0(const unsigned char *row, int g, const int16_t *xq) {
    const int8_t *q = (const int8_t *)(const void *)(row + (size_t)g * LLM__Q8_0_BYTES + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (int32_t)q[j] * (int32_t)xq[j];
    return s;
}
static int32_t llm__gsum_q4_0(const unsigned char *row, int g, const int16_t *xq) {
    const unsigned char *b = row + (size_t)g * LLM__Q4_0_BYTES + 2;
    int32_t s = 0;
    for (int j = 0; j < 16; j++) s += ((b[j] & 15) - 8) * xq[j] + ((b[j] >> 4) - 8) * xq[j + 16];
    return s;
}
static int32_t llm__gsum_q4_K(const unsigned char *row, int g, const int16_t *xq) {   /* codes 0..15, no scale */
    const unsigned char *qs = row + (size_t)(g / 8) * LLM__Q4_K_BYTES + 16 + 32 * ((g % 8) / 2);
    int shift = (g & 1) * 4;
    int32_t s = 0;
    for (int l = 0; l < 32; l++) s += ((qs[l] >> shift) & 15) * xq[l];
    return s;
}
static int32_t llm__gsum_q6_K(const unsigned char *row, int g, const int16_t *xq) {   /* with its two scales */
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q6_K_BYTES;
    int k = g % 8;
    int32_t s0 = 0, s1 = 0;
    for (int l = 0; l < 16; l++) s0 += llm__q6_K_code(b, 32 * k + l) * xq[l];
    for (int l = 16; l < 32; l++) s1 += llm__q6_K_code(b, 32 * k + l) * xq[l];
    return (int32_t)(int8_t)b[192 + 2 * k] * s0 + (int32_t)(int8_t)b[192 + 2 * k + 1] * s1;
}
static int32_t llm__sum_i16(const int16_t *xq, int n) {
    int32_t s = 0;
    for (int j = 0; j < n; j++) s += xq[j];
    return s;
}

/* Group g's step along the row, given its integer sums (isum; q4_K also
 * xsum, the activation codes' sum) */
static inline float llm__gstep_d(const unsigned char *d, int32_t isum, float xs, float acc) {
    return llm__q8_step(isum, llm__blk_half(d), xs, acc);
}
#define llm__gstep_q8_0(row, g, isum, xsum, xs, acc) llm__gstep_d((row) + (size_t)(g) * LLM__Q8_0_BYTES, isum, xs, acc)
#define llm__gstep_q4_0(row, g, isum, xsum, xs, acc) llm__gstep_d((row) + (size_t)(g) * LLM__Q4_0_BYTES, isum, xs, acc)
#define llm__gstep_q6_K(row, g, isum, xsum, xs, acc) llm__gstep_d((row) + (size_t)((g) / 8) * LLM__Q6_K_BYTES + 208, isum, xs, acc)
static inline float llm__gstep_q4_K(const unsigned char *row, int g, int32_t isum, int32_t xsum, float xs, float acc) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q4_K_BYTES;
    int sc, m;
    llm__q4_K_scale_min(b + 4, g % 8, &sc, &m);
    acc = fmaf((float)(sc * isum), llm__blk_half(b) * xs, acc);
    return fmaf((float)(m * xsum), -(llm__blk_half(b + 2) * xs), acc);
}

/* The twins: row (n,) . activations xq (n,) of type act_t (int8_t or
 * int16_t, the traits' act_type) with scales xs (n/32,) */
#define LLM__BLK_DOT(name, with_xsum, act_t)                                                            \
    static float llm__dot_blk_##name(const unsigned char *row, const act_t *xq, const float *xs, int n) { \
        float acc = 0.0f;                                                                              \
        for (int g = 0; g < n / LLM__GQ; g++) {                                                        \
            const act_t *x = xq + (size_t)g * LLM__GQ;                                                 \
            int32_t xsum = with_xsum ? llm__sum_i16((const int16_t *)(const void *)x, LLM__GQ) : 0;    \
            (void)xsum;                                                                                \
            acc = llm__gstep_##name(row, g, llm__gsum_##name(row, g, x), xsum, xs[g], acc);            \
        }                                                                                              \
        return acc;                                                                                    \
    }                                                                                                  \
    LLM__KERNEL float llm__row_dot_blk_##name(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) { \
        (void)x;                                                                                       \
        return llm__dot_blk_##name(llm__block_row(w, r), (const act_t *)(const void *)xq, xs, w->cols);   \
    }
LLM__BLK_DOT(q8_0, 0, int16_t)
LLM__BLK_DOT(q4_0, 0, int16_t)
LLM__BLK_DOT(q4_K, 1, int16_t)
LLM__BLK_DOT(q6_K, 0, int16_t)
#undef LLM__BLK_DOT

/* ---- the types added after q6_K, each from its definition ----
 *   q4_1 (20 bytes / 32): f16 d, f16 m, uint8 qs[16]; q as q4_0's (0..15);
 *                                                                    w = d q + m
 *   q5_0 (22 bytes / 32): f16 d, uint8 qh[4] (a little-endian u32 h), qs[16];
 *        q[j] = (qs[j] & 15) | bit j of h << 4, q[j + 16] = (qs[j] >> 4) |
 *        bit j + 16 of h << 4;                                       w = d (q - 16)
 *   q5_1 (24 bytes / 32): f16 d, f16 m, qh[4], qs[16]; q as q5_0's;  w = d q + m
 *   iq4_nl (18 bytes / 32): f16 d, qs[16]; q as q4_0's;             w = d kv[q]
 *        with kv the non-linear table llm__iq4_values
 *   q2_K (84 bytes / 256): uint8 sc[16] (scale low 4 bits, min high 4 bits,
 *        one per 16), qs[64], f16 d, f16 dmin; element 128h + 32j + l has
 *        q = (qs[32h + l] >> 2j) & 3 and sub-block s = e / 16;
 *                                                       w = d (sc[s] & 15) q - dmin (sc[s] >> 4)
 *   q3_K (110 bytes / 256): uint8 hmask[32], qs[64], 12 bytes packing
 *        sixteen 6-bit scales (llm__q3_K_scale), f16 d; element 128h + 32j + l
 *        has low bits (qs[32h + l] >> 2j) & 3, less 4 where bit 4h + j of
 *        hmask[l] is clear (q -4..3);                            w = d (sc[e / 16] - 32) q
 *   q5_K (176 bytes / 256): f16 d, f16 dmin, 12 bytes of scales and mins as
 *        q4_K's, uint8 qh[32], qs[128]; sub-block j's element l: q4_K's
 *        nibble | bit j of qh[l] << 4;                       w = d sc q - dmin m
 *   iq4_xs (136 bytes / 256): f16 d, u16 scales_h, uint8 scales_l[4],
 *        qs[128]; sub-block j (32) has ls = (scales_l[j / 2] >> 4 (j & 1)) & 15
 *        | ((scales_h >> 2j) & 3) << 4, its codes as iq4_nl's at qs + 16 j;
 *                                                                    w = d (ls - 32) kv[q]
 * Their products: a group's integer sums, isum (weight codes, with their
 * integer sub-scales, times activation codes) and msum (the mins' part:
 * sum(x) for q4_1 and q5_1; m sum(x) for q5_K; the two halves' mins times
 * their sums of x for q2_K), exact in int32 (|isum| < 2^31 at
 * LLM__Q16_MAX: iq4_xs 32 * 127 * 32 * 16383 is the largest); then one
 * step per group along the row: acc = fma(isum, d xs, acc), and for the
 * types with a min fma(msum, m xs, acc) (q4_1, q5_1), or fma(msum,
 * -(dmin xs), acc) (q2_K, q5_K). */
static const int8_t llm__iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
static inline uint32_t llm__le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* element j (0..31) of a 32-block's 4-bit codes at qs (q4_0's order) */
static inline int llm__nib(const unsigned char *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
/* q5_0/q5_1's code j (0..31): the nibble and bit j of h */
static inline int llm__q5_code(const unsigned char *qs, uint32_t h, int j) { return llm__nib(qs, j) | (int)((h >> j) & 1) << 4; }
/* q3_K's sixteen 6-bit scales (less 32: -32..31) from its 12 bytes s:
 * low four bits from s[i] (i < 8, low nibble) or s[i - 8] (high nibble),
 * the top two from s[8 + i % 4] >> 2 (i / 4) */
static inline int llm__q3_K_scale(const unsigned char *s, int i) {
    int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    return (lo | ((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
}
/* q3_K block b's code at element e, -4..3 */
static inline int llm__q3_K_code(const unsigned char *b, int e) {
    int h = e >> 7, j = (e >> 5) & 3, l = e & 31;
    return ((b[32 + 32 * h + l] >> (2 * j)) & 3) - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4);
}
/* q2_K block b's code at element e, 0..3 */
static inline int llm__q2_K_code(const unsigned char *b, int e) { return (b[16 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3; }
/* q5_K block b's code at element e (sub-block e / 32), 0..31 */
static inline int llm__q5_K_code(const unsigned char *b, int e) {
    int j = e >> 5, l = e & 31;
    return ((b[48 + 32 * (j / 2) + l] >> (4 * (j & 1))) & 15) | ((b[16 + l] >> j) & 1) << 4;
}
/* iq4_xs block b's sub-block j scale, less 32 */
static inline int llm__iq4xs_scale(const unsigned char *b, int j) {
    int h = b[2] | b[3] << 8;
    return (((b[4 + j / 2] >> (4 * (j & 1))) & 15) | ((h >> (2 * j)) & 3) << 4) - 32;
}

/* group g's sums (isum returned, msum through the pointer) */
static int32_t llm__gsum2_q4_1(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *qs = row + (size_t)g * LLM__Q4_1_BYTES + 4;
    int32_t s = 0, sx = 0;
    for (int j = 0; j < 32; j++) { s += llm__nib(qs, j) * xq[j]; sx += xq[j]; }
    *msum = sx;
    return s;
}
static int32_t llm__gsum2_q5_0(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)g * LLM__Q5_0_BYTES;
    uint32_t h = llm__le32(b + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (llm__q5_code(b + 6, h, j) - 16) * xq[j];
    *msum = 0;
    return s;
}
static int32_t llm__gsum2_q5_1(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)g * LLM__Q5_1_BYTES;
    uint32_t h = llm__le32(b + 4);
    int32_t s = 0, sx = 0;
    for (int j = 0; j < 32; j++) { s += llm__q5_code(b + 8, h, j) * xq[j]; sx += xq[j]; }
    *msum = sx;
    return s;
}
static int32_t llm__gsum2_iq4_nl(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *qs = row + (size_t)g * LLM__IQ4_NL_BYTES + 2;
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += llm__iq4_values[llm__nib(qs, j)] * xq[j];
    *msum = 0;
    return s;
}
static int32_t llm__gsum2_q2_K(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q2_K_BYTES;
    int k = g % 8;
    int32_t s[2] = { 0, 0 }, sx[2] = { 0, 0 };
    for (int l = 0; l < 32; l++) { s[l >> 4] += llm__q2_K_code(b, 32 * k + l) * xq[l]; sx[l >> 4] += xq[l]; }
    int c0 = b[2 * k], c1 = b[2 * k + 1];
    *msum = (c0 >> 4) * sx[0] + (c1 >> 4) * sx[1];
    return (c0 & 15) * s[0] + (c1 & 15) * s[1];
}
static int32_t llm__gsum2_q3_K(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q3_K_BYTES;
    int k = g % 8;
    int32_t s[2] = { 0, 0 };
    for (int l = 0; l < 32; l++) s[l >> 4] += llm__q3_K_code(b, 32 * k + l) * xq[l];
    *msum = 0;
    return llm__q3_K_scale(b + 96, 2 * k) * s[0] + llm__q3_K_scale(b + 96, 2 * k + 1) * s[1];
}
static int32_t llm__gsum2_q5_K(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__Q5_K_BYTES;
    int k = g % 8, sc, m;
    int32_t s = 0, sx = 0;
    for (int l = 0; l < 32; l++) { s += llm__q5_K_code(b, 32 * k + l) * xq[l]; sx += xq[l]; }
    llm__q4_K_scale_min(b + 4, k, &sc, &m);
    *msum = m * sx;
    return sc * s;
}
static int32_t llm__gsum2_iq4_xs(const unsigned char *row, int g, const int16_t *xq, int32_t *msum) {
    const unsigned char *b = row + (size_t)(g / 8) * LLM__IQ4_XS_BYTES;
    int k = g % 8;
    const unsigned char *qs = b + 8 + 16 * k;
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += llm__iq4_values[llm__nib(qs, j)] * xq[j];
    *msum = 0;
    return llm__iq4xs_scale(b, k) * s;
}
/* group g's step: d (and the min's scale) at their offsets in the group's block */
static inline float llm__gstep2_dm(const unsigned char *d, const unsigned char *m, float sign, int32_t isum,
                                   int32_t msum, float xs, float acc) {
    acc = fmaf((float)isum, llm__blk_half(d) * xs, acc);
    return m ? fmaf((float)msum, sign * (llm__blk_half(m) * xs), acc) : acc;
}
#define LLM__BLK2_STEP(name, bytes, per, d_at, m_at, sign)                                                         \
    static inline float llm__gstep2_##name(const unsigned char *row, int g, int32_t isum, int32_t msum, float xs, \
                                           float acc) {                                                           \
        const unsigned char *b = row + (size_t)(g / (per)) * (bytes);                                             \
        return llm__gstep2_dm(b + (d_at), (m_at) < 0 ? NULL : b + (m_at), sign, isum, msum, xs, acc);            \
    }
LLM__BLK2_STEP(q4_1, LLM__Q4_1_BYTES, 1, 0, 2, 1.0f)
LLM__BLK2_STEP(q5_0, LLM__Q5_0_BYTES, 1, 0, -1, 1.0f)
LLM__BLK2_STEP(q5_1, LLM__Q5_1_BYTES, 1, 0, 2, 1.0f)
LLM__BLK2_STEP(iq4_nl, LLM__IQ4_NL_BYTES, 1, 0, -1, 1.0f)
LLM__BLK2_STEP(q2_K, LLM__Q2_K_BYTES, 8, 80, 82, -1.0f)
LLM__BLK2_STEP(q3_K, LLM__Q3_K_BYTES, 8, 108, -1, 1.0f)
LLM__BLK2_STEP(q5_K, LLM__Q5_K_BYTES, 8, 0, 2, -1.0f)
LLM__BLK2_STEP(iq4_xs, LLM__IQ4_XS_BYTES, 8, 0, -1, 1.0f)
#undef LLM__BLK2_STEP
/* their twins: row (n,) . int16 activation codes xq (n,) with scales xs (n/32,) */
#define LLM__BLK2_DOT(name)                                                                                     \
    static float llm__dot_blk_##name(const unsigned char *row, const int16_t *xq, const float *xs, int n) {     \
        float acc = 0.0f;                                                                                    \
        for (int g = 0; g < n / LLM__GQ; g++) {                                                              \
            int32_t msum, isum = llm__gsum2_##name(row, g, xq + (size_t)g * LLM__GQ, &msum);                 \
            acc = llm__gstep2_##name(row, g, isum, msum, xs[g], acc);                                        \
        }                                                                                                    \
        return acc;                                                                                          \
    }                                                                                                        \
    LLM__KERNEL float llm__row_dot_blk_##name(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) { \
        (void)x;                                                                                             \
        return llm__dot_blk_##name(llm__block_row(w, r), (const int16_t *)(const void *)xq, xs, w->cols);       \
    }
LLM__BLK2_DOT(q4_1)
LLM__BLK2_DOT(q5_0)
LLM__BLK2_DOT(q5_1)
LLM__BLK2_DOT(iq4_nl)
LLM__BLK2_DOT(q2_K)
LLM__BLK2_DOT(q3_K)
LLM__BLK2_DOT(q5_K)
LLM__BLK2_DOT(iq4_xs)
#undef LLM__BLK2_DOT

LLM__KERNEL float llm__row_dot_bf16(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs) {
    const uint16_t *p = (const uint16_t *)w->data + (size_t)r * (size_t)w->cols;
    float acc = 0.0f;
    (void)xq; (void)xs;
    for (int j = 0; j < w->cols; j++) acc += llm__bf16_to_f32(p[j]) * x[j];
    return acc;
}

/* Rows as f32 (the embedding lookup), in ggml's dequantizers' order */
LLM__KERNEL void llm__dequant_row_bf16(float *out, const llm_tensor *w, int r) {
    const uint16_t *p = (const uint16_t *)w->data + (size_t)r * (size_t)w->cols;
    for (int j = 0; j < w->cols; j++) out[j] = llm__bf16_to_f32(p[j]);
}
LLM__KERNEL void llm__dequant_row_blk_q8_0(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int g = 0; g < w->cols / 32; g++, b += LLM__Q8_0_BYTES)
        for (int j = 0; j < 32; j++) out[32 * g + j] = (float)(int8_t)b[2 + j] * llm__blk_half(b);
}
/* (q4_0 and q4_K rows may end in an LLMW file's padding: only the real
 * columns are written) */
LLM__KERNEL void llm__dequant_row_blk_q4_0(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    int n = w->cols;
    for (int g = 0; g < (n + 31) / 32; g++, b += LLM__Q4_0_BYTES) {
        float d = llm__blk_half(b);
        for (int j = 0; j < 16; j++) {
            if (32 * g + j < n) out[32 * g + j] = (float)((b[2 + j] & 15) - 8) * d;
            if (32 * g + j + 16 < n) out[32 * g + j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
    }
}
LLM__KERNEL void llm__dequant_row_blk_q4_K(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    int n = w->cols;
    for (int k = 0; k < (n + 255) / 256; k++, b += LLM__Q4_K_BYTES) {
        float d = llm__blk_half(b), dmin = llm__blk_half(b + 2);
        for (int j = 0; j < 8 && 256 * k + 32 * j < n; j++) {
            int sc, m, len = n - (256 * k + 32 * j) < 32 ? n - (256 * k + 32 * j) : 32;
            llm__q4_K_scale_min(b + 4, j, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            const unsigned char *qs = b + 16 + 32 * (j / 2);
            for (int l = 0; l < len; l++) out[256 * k + 32 * j + l] = d1 * (float)((qs[l] >> ((j & 1) * 4)) & 15) - m1;
        }
    }
}
LLM__KERNEL void llm__dequant_row_blk_q6_K(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int k = 0; k < w->cols / 256; k++, b += LLM__Q6_K_BYTES) {
        float d = llm__blk_half(b + 208);
        for (int e = 0; e < 256; e++) out[256 * k + e] = d * (float)(int8_t)b[192 + e / 16] * (float)llm__q6_K_code(b, e);
    }
}
/* the types added after q6_K, in ggml's dequantizers' order (d times the
 * sub-scale first, then times the code, then the min) */
LLM__KERNEL void llm__dequant_row_blk_q4_1(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int g = 0; g < w->cols / 32; g++, b += LLM__Q4_1_BYTES) {
        float d = llm__blk_half(b), m = llm__blk_half(b + 2);
        for (int j = 0; j < 32; j++) out[32 * g + j] = (float)llm__nib(b + 4, j) * d + m;
    }
}
LLM__KERNEL void llm__dequant_row_blk_q5_0(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int g = 0; g < w->cols / 32; g++, b += LLM__Q5_0_BYTES) {
        float d = llm__blk_half(b);
        uint32_t h = llm__le32(b + 2);
        for (int j = 0; j < 32; j++) out[32 * g + j] = (float)(llm__q5_code(b + 6, h, j) - 16) * d;
    }
}
LLM__KERNEL void llm__dequant_row_blk_q5_1(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int g = 0; g < w->cols / 32; g++, b += LLM__Q5_1_BYTES) {
        float d = llm__blk_half(b), m = llm__blk_half(b + 2);
        uint32_t h = llm__le32(b + 4);
        for (int j = 0; j < 32; j++) out[32 * g + j] = (float)llm__q5_code(b + 8, h, j) * d + m;
    }
}
LLM__KERNEL void llm__dequant_row_blk_iq4_nl(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int g = 0; g < w->cols / 32; g++, b += LLM__IQ4_NL_BYTES) {
        float d = llm__blk_half(b);
        for (int j = 0; j < 32; j++) out[32 * g + j] = d * (float)llm__iq4_values[llm__nib(b + 2, j)];
    }
}
LLM__KERNEL void llm__dequant_row_blk_q2_K(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int k = 0; k < w->cols / LLM__QK; k++, b += LLM__Q2_K_BYTES) {
        float d = llm__blk_half(b + 80), dmin = llm__blk_half(b + 82);
        for (int e = 0; e < LLM__QK; e++) {
            int sc = b[e / 16];
            out[LLM__QK * k + e] = d * (float)(sc & 15) * (float)llm__q2_K_code(b, e) - dmin * (float)(sc >> 4);
        }
    }
}
LLM__KERNEL void llm__dequant_row_blk_q3_K(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int k = 0; k < w->cols / LLM__QK; k++, b += LLM__Q3_K_BYTES) {
        float d = llm__blk_half(b + 108);
        for (int e = 0; e < LLM__QK; e++)
            out[LLM__QK * k + e] = d * (float)llm__q3_K_scale(b + 96, e / 16) * (float)llm__q3_K_code(b, e);
    }
}
LLM__KERNEL void llm__dequant_row_blk_q5_K(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int k = 0; k < w->cols / LLM__QK; k++, b += LLM__Q5_K_BYTES) {
        float d = llm__blk_half(b), dmin = llm__blk_half(b + 2);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            llm__q4_K_scale_min(b + 4, j, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            for (int l = 0; l < 32; l++) out[LLM__QK * k + 32 * j + l] = d1 * (float)llm__q5_K_code(b, 32 * j + l) - m1;
        }
    }
}
LLM__KERNEL void llm__dequant_row_blk_iq4_xs(float *out, const llm_tensor *w, int r) {
    const unsigned char *b = llm__block_row(w, r);
    for (int k = 0; k < w->cols / LLM__QK; k++, b += LLM__IQ4_XS_BYTES) {
        float d = llm__blk_half(b);
        for (int j = 0; j < 8; j++) {
            float dl = d * (float)llm__iq4xs_scale(b, j);
            for (int l = 0; l < 32; l++) out[LLM__QK * k + 32 * j + l] = dl * (float)llm__iq4_values[llm__nib(b + 8 + 16 * j, l)];
        }
    }
}
