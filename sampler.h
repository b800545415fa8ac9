/* sampler.h -- the next token from logits: llama2.c's sampler (temperature,
 * top-p, xorshift64* seeded generator, argmax at temperature 0), plus top-k,
 * min-p and llama.cpp's repeat penalty.
 *
 * Contract: header-only, C99, no libc beyond <string.h>; the caller owns the
 * struct (zero it first: every field after `candidates` is off at zero) and
 * its buffers: candidates, LLM_SAMPLER_CANDIDATES(vocab) ints, needed when
 * top-p, top-k, min-p or the penalty is on, and for the penalty a window of
 * repeat_last_n ints.
 *
 * The chain, in llama.cpp's order for the steps the two share:
 *   1. repeat penalty: each distinct token among the last repeat_last_n
 *      accepted (llm_sampler_accept, and every token llm_sample returns) has
 *      its logit divided by repeat_penalty if positive, else multiplied;
 *   2. temperature 0: the first largest logit. Otherwise logits / temperature,
 *      softmax, and one coin from the generator, whatever follows;
 *   3. top-k, top-p, min-p: with top-k or top-p on, the candidates in order
 *      (more probable first, ties by the lower index: the order glibc's
 *      stable qsort gives llama2.c); top-k keeps the first k, top-p (with
 *      top-k off, only tokens at or above llama2.c's cutoff (1 - p) / (n - 1)
 *      are candidates) the shortest prefix whose mass exceeds p, min-p those
 *      with probability >= min_p times the largest; each keeps a prefix, so
 *      the shortest wins. Min-p alone keeps the tokens in index order.
 *   4. the draw: the first kept token whose running sum passes coin times
 *      the kept mass; with none of step 3 on, llama2.c's plain draw.
 * With top-k, min-p and the penalty off it draws exactly the tokens
 * llama2.c's run.c draws for the same logits, temperature, top-p and seed,
 * on every target. Only the candidates' probabilities move, not their ids,
 * sorted by the float's bits (which order as integers for p >= 0) in radix
 * passes: counts, no comparisons; the counts of the top digit bound where
 * top-k or top-p must stop, and what lies past it is never sorted. The
 * token drawn is then found by its probability and its rank among equal
 * ones.
 *
 *   llm_sampler s;
 *   memset(&s, 0, sizeof s);
 *   s.vocab_size = vocab; s.temperature = 1.0f; s.topp = 0.9f;
 *   s.rng_state = seed; s.candidates = candidates;
 *   int next = llm_sample(&s, logits);   // overwrites logits with probabilities
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdint.h>
#include <string.h>
#include "model.h"   /* the sampler's hooks: llm_max, llm_exp_shifted, llm_argmax */

/* Vocabularies from LLM__SAMPLER_WIDE tokens on sort by digits of
 * LLM__SAMPLER_WIDE_BITS bits, their counts and the draw's running sums (one
 * every 32 places) in the candidates buffer; smaller ones by 8 bits, the
 * counts on the stack, in a buffer of 2n ints (a board's RAM). */
#define LLM__SAMPLER_WIDE 4096
#define LLM__SAMPLER_WIDE_BITS 13
#define LLM__SAMPLER_EXTRA(n) \
    ((size_t)(n) >= LLM__SAMPLER_WIDE ? 2 * (((size_t)1 << LLM__SAMPLER_WIDE_BITS) + 1) + (size_t)(n) / 32 + 1 : 0)

/* ints in the candidates buffer for a vocabulary of n: the candidates' keys
 * and the radix sort's second half (or the penalty's bit set of seen
 * tokens), then, for a wide vocabulary, the digit counts and running sums */
#define LLM_SAMPLER_CANDIDATES(n) (2 * (size_t)(n) + LLM__SAMPLER_EXTRA(n))

typedef struct llm_sampler {
    int vocab_size;
    float temperature;      /* 0: argmax                                    */
    float topp;             /* nucleus mass; <= 0 or >= 1: off               */
    int topk;               /* keep the k most probable; 0: off              */
    uint64_t rng_state;     /* xorshift64*                                   */
    int *candidates;        /* LLM_SAMPLER_CANDIDATES(vocab) ints of scratch */
    float min_p;            /* keep p >= min_p * max p (after temperature); 0: off */
    float repeat_penalty;   /* > 0; 0 or 1: off                              */
    int repeat_last_n;      /* the window: the last n accepted tokens        */
    int *recent;            /* repeat_last_n ints of the caller's; NULL: off */
    int n_recent, recent_next;   /* the window's fill and next slot (a ring) */
} llm_sampler;

static inline uint32_t llm__random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static inline float llm__random_f32(uint64_t *state) { return (float)(llm__random_u32(state) >> 8) / 16777216.0f; }

/* Remember a token for the repeat penalty's window (the prompt's tokens;
 * llm_sample remembers the tokens it returns itself). */
static inline void llm_sampler_accept(llm_sampler *s, int token) {
    if (!s->recent || s->repeat_last_n <= 0) return;
    s->recent[s->recent_next] = token;
    s->recent_next = s->recent_next + 1 == s->repeat_last_n ? 0 : s->recent_next + 1;
    if (s->n_recent < s->repeat_last_n) s->n_recent++;
}

/* The first largest of p (n,): llama2.c's scan, by the engine's vector max
 * kernel where it has one (model.h's llm_argmax). */
static inline int llm__sample_argmax(const float *p, int n) { return llm_argmax(p, n); }

/* llama.cpp's repeat penalty on logits (vocab,): once per distinct token in
 * the window, x / R where x > 0, else x * R. A bit set of the vocabulary in
 * the candidates buffer marks the tokens done. */
static inline void llm__penalize(llm_sampler *s, float *logits) {
    unsigned *seen = (unsigned *)s->candidates;
    const float R = s->repeat_penalty;
    const int n = s->vocab_size;
    for (int j = 0; j < s->n_recent; j++) {
        int t = s->recent[j];
        if (t >= 0 && t < n) seen[t >> 5] = 0;
    }
    for (int j = 0; j < s->n_recent; j++) {
        int t = s->recent[j];
        if (t < 0 || t >= n || (seen[t >> 5] >> (t & 31) & 1u)) continue;
        seen[t >> 5] |= 1u << (t & 31);
        logits[t] = logits[t] <= 0.0f ? logits[t] * R : logits[t] / R;
    }
}

/* softmax in place, x (n,), with llm_softmax's floats (e^(x - max) by the
 * engine's kernel, their sum in index order, then the division), the
 * exponentials 32 at a time: the out-of-order core computes the next ones
 * while the serial sum, the critical path, runs (flat 32k logits on Zen 5:
 * 33 -> 24 us). Meanwhile it asks for the lines of `warm` (warm_bytes: the
 * sampler's scratch, which the decode step's stream of weights has pushed
 * out to DRAM) a few per block, so the sort finds them in cache (a flat 32k
 * vocabulary, scratch evicted: top-p 134-143 -> 117-124 us). The max and
 * the exponentials are model.h's hooks, llm_softmax's own kernels. */
static inline void llm__softmax_overlapped(float *x, int n, const char *warm, size_t warm_bytes) {
    float max = llm_max(x, n), sum = 0.0f;
    size_t step = (warm_bytes / ((size_t)n / 32 + 1) + 63) & ~(size_t)63, w = 0;
    for (int i = 0; i < n; i += 32) {
        int len = n - i < 32 ? n - i : 32;
        llm_exp_shifted(x + i, len, max);
#ifdef __GNUC__
        for (size_t end = w + step; w < end && w < warm_bytes; w += 64) __builtin_prefetch(warm + w, 1, 3);
#endif
        for (int j = i; j < i + len; j++) sum += x[j];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* Draw from the whole distribution p (n,) with coin in [0,1). */
static inline int llm__sample_multinomial(const float *p, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += p[i];
        if (coin < cdf) return i;
    }
    return n - 1;
}

static inline uint32_t llm__prob_key(float p) {
    uint32_t k;
    memcpy(&k, &p, 4);
    return k;
}

/* The largest of the probabilities p (n,): the largest key, as they order
 * as integers. */
static inline float llm__prob_max(const float *p, int n) {
    uint32_t kmax = 0;
    float pmax;
    for (int i = 0; i < n; i++) {
        uint32_t k = llm__prob_key(p[i]);
        kmax = k > kmax ? k : kmax;
    }
    memcpy(&pmax, &kmax, 4);
    return pmax;
}

/* An LSD radix sort's counts of the digit ((hi - key) >> shift) & mask over
 * src (m,), in count[digit + 1] (count: mask + 2 ints). */
static inline void llm__radix_count(int *count, const uint32_t *src, int m, uint32_t hi, int shift, uint32_t mask) {
    memset(count, 0, ((size_t)mask + 2) * sizeof *count);
    for (int i = 0; i < m; i++) count[((hi - src[i]) >> shift & mask) + 1]++;
}

/* One stable pass of an LSD radix sort, larger keys first: src (m,) into dst
 * (m,) by that digit, from its counts (llm__radix_count's, used up). */
static inline void llm__radix_scatter(uint32_t *dst, const uint32_t *src, int m, uint32_t hi, int shift, uint32_t mask,
                                      int *count) {
    for (uint32_t d = 1; d <= mask; d++) count[d] += count[d - 1];
    for (int i = 0; i < m; i++) dst[count[(hi - src[i]) >> shift & mask]++] = src[i];
}

/* The top digit b (keys with (hi - key) >> shift == b, counted in count[b + 1])
 * through which the kept prefix surely ends: top-k's k-th key, or a mass past
 * topp even for the smallest key each digit allows and the float sum's
 * rounding (at most 2 n0 2^-24 of the total for n0 <= 2^22 terms); the last
 * digit if neither is sure. */
static inline uint32_t llm__top_digit_bound(const int *count, uint32_t top, uint32_t hi, uint32_t span, int shift, int n0,
                                            int topk, float topp) {
    double mass = 0.0, slack = n0 <= (1 << 22) ? 1.0 - 2.0 * (double)n0 / 16777216.0 : 0.0;
    long kept = 0;
    for (uint32_t b = 0; b < top; b++) {
        uint64_t dmax = ((uint64_t)(b + 1) << shift) - 1u;
        uint32_t kmin = hi - (uint32_t)(dmax < span ? dmax : span);
        float vmin;
        memcpy(&vmin, &kmin, 4);
        kept += count[b + 1];
        mass += (double)count[b + 1] * (double)vmin;
        if ((topk > 0 && kept >= topk) || (topp > 0.0f && mass * slack > (double)topp)) return b;
    }
    return top;
}

/* The draw over the sorted keys (last + 1,) with r = coin times their mass:
 * the first i < last whose running sum passes r, else last, as a walk from
 * 0 finds it. sums (NULL: none) holds the running sum after each complete
 * run of 32 (the same additions, so the same floats): the walk starts at
 * the run whose sum passes r. */
static inline int llm__draw_sorted(const uint32_t *keys, int last, const uint32_t *sums, float r) {
    int i = 0;
    float cdf = 0.0f;
    if (sums)
        for (; i + 31 < last; i += 32) {
            float sum;
            memcpy(&sum, &sums[i >> 5], 4);
            if (r < sum) break;
            cdf = sum;
        }
    for (; i < last; i++) {
        float v;
        memcpy(&v, &keys[i], 4);
        cdf += v;
        if (r < cdf) return i;
    }
    return last;
}

/* The id holding the rank-th (from 0) of the probabilities equal to key in p
 * (n,), in index order: the token at that place of the stable order. */
static inline int llm__nth_equal(const float *p, int n, uint32_t key, int rank) {
    int last = 0;
    for (int i = 0; i < n; i++)
        if (llm__prob_key(p[i]) == key) {
            if (rank-- == 0) return i;
            last = i;
        }
    return last;
}

/* Top-k, top-p and min-p over p (n,) as step 3 above, then the draw with
 * coin; cand has LLM_SAMPLER_CANDIDATES(n) ints. Only the candidates' keys
 * move (p >= thr: llama2.c's cutoff, or min-p's bound if higher), not their
 * ids: the running sum that top-p and the draw read depends on the
 * probabilities in order, not on which of several equal ones comes first.
 * One pass gathers them and counts their top radix digit (of d = hi - key,
 * hi their largest key); the counts bound where top-k or top-p must stop,
 * and the keys past that digit are dropped unsorted. An LSD radix sort
 * (digits of up to 8 bits, 13 for a wide vocabulary: two passes for a flat
 * 32k one; counting passes, no comparisons to mispredict) orders the rest,
 * which are added up until top-k or top-p stops. The draw walks the same
 * prefix, and the key it stops at, and its rank among the equal keys before
 * it, name the token: the rank-th such in index order, as llama2.c's stable
 * sort orders ties. So the token is llama2.c's, including its cutoff and,
 * where that leaves nothing, the most probable token. */
static inline int llm__sample_top(const float *p, int n, int topk, float topp, float minp, float coin, int *cand) {
    int use_topp = topp > 0.0f && topp < 1.0f, use_topk = topk > 0 && topk < n;
    float thr = use_topp && !use_topk ? (1.0f - topp) / (float)(n - 1) : 0.0f;
    if (minp > 0.0f) {
        float bound = minp * llm__prob_max(p, n);
        if (bound > thr) thr = bound;
    }
    /* the candidates' count and key range (branch-free: it vectorizes) */
    int n0 = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < n; i++) {
        uint32_t k = llm__prob_key(p[i]), in = 0u - (uint32_t)(p[i] >= thr);
        n0 += (int)(in & 1u);
        lo = (k | ~in) < lo ? (k | ~in) : lo;
        hi = (k & in) > hi ? (k & in) : hi;
    }
    /* llama2.c reads before its array here; a tiny topp over a flat
     * distribution can leave no candidate: then the most probable */
    if (n0 == 0) return llm__sample_argmax(p, n);
    int wide = n >= LLM__SAMPLER_WIDE, local[257];
    uint32_t *keys = (uint32_t *)cand, *tmp = keys + n, span = hi - lo;
    /* the top digit's counts; a wide vocabulary's lower digits count apart
     * (the counts of two digits are gathered in one pass) */
    int *count = wide ? (int *)(tmp + n) : local, *low = wide ? count + (1 << LLM__SAMPLER_WIDE_BITS) + 1 : NULL;
    uint32_t *sums = wide ? (uint32_t *)(low + (1 << LLM__SAMPLER_WIDE_BITS) + 1) : NULL;
    /* digits: `passes` of `width` bits cover d = hi - key in [0, span] */
    int bits = 0, passes, width, maxw = wide ? LLM__SAMPLER_WIDE_BITS : 8;
    while (bits < 32 && (span >> bits) != 0) bits++;
    passes = (bits + maxw - 1) / maxw;
    width = passes ? (bits + passes - 1) / passes : 0;
    int top_shift = passes ? (passes - 1) * width : 0, low_ready = low && passes == 2, top_ready = 1;
    uint32_t mask = (1u << width) - 1u, top = span >> top_shift;
    /* gather the candidates' keys, counting their top digit (and, with two
     * digits, the low one); branch-free: which tokens pass is a coin toss to
     * the branch predictor (the others count in slot 0, then cleared) */
    memset(count, 0, ((size_t)mask + 2) * sizeof *count);
    if (low_ready) memset(low, 0, ((size_t)mask + 2) * sizeof *low);
    int m = 0;
    for (int i = 0; i < n; i++) {
        uint32_t k = llm__prob_key(p[i]), in = p[i] >= thr;
        keys[m] = k;
        m += (int)in;
        count[in ? ((hi - k) >> top_shift) + 1 : 0]++;
        if (low_ready) low[in ? ((hi - k) & mask) + 1 : 0]++;
    }
    count[0] = 0;
    if (low_ready) low[0] = 0;
    uint32_t bound = llm__top_digit_bound(count, top, hi, span, top_shift, n0, use_topk ? topk : 0, use_topp ? topp : 0.0f);
    int kept = 0;
    for (uint32_t b = 0; b <= bound; b++) kept += count[b + 1];
    /* the keys past the bound's digit are never read: dropped unsorted,
     * unless most are kept and the low digit's counts (all keys') serve */
    if (kept < m && !(low_ready && 2 * kept >= m)) {
        int j = 0;
        for (int i = 0; i < m; i++) {
            keys[j] = keys[i];
            j += ((hi - keys[i]) >> top_shift) <= bound;
        }
        m = kept;
        memset(count + bound + 2, 0, (size_t)(mask - bound) * sizeof *count);
        low_ready = 0;
    }
    uint32_t *sorted = keys, *other = tmp;
    for (int d = 0; d < passes; d++) {
        int is_top = d == passes - 1, *c = is_top || !low ? count : low;
        if (is_top ? !top_ready : !(d == 0 && low_ready)) llm__radix_count(c, sorted, m, hi, d * width, mask);
        if (!is_top && c == count) top_ready = 0;
        llm__radix_scatter(other, sorted, m, hi, d * width, mask, c);
        uint32_t *t = sorted; sorted = other; other = t;
    }
    float mass = 0.0f;
    int last = m - 1;
    for (int pos = 0; pos < m; pos++) {
        float v;
        memcpy(&v, &sorted[pos], 4);
        mass += v;
        if (sums && (pos & 31) == 31) memcpy(&sums[pos >> 5], &mass, 4);
        if ((use_topk && pos == topk - 1) || (use_topp && mass > topp)) { last = pos; break; }
    }
    int at = llm__draw_sorted(sorted, last, sums, coin * mass), first = at;
    while (first > 0 && sorted[first - 1] == sorted[at]) first--;
    return llm__nth_equal(p, n, sorted[at], at - first);
}

/* Min-p alone over p (n,): the tokens with p >= minp * max p, in index order. */
static inline int llm__sample_min_p(const float *p, int n, float minp, float coin) {
    const float thr = minp * llm__prob_max(p, n);
    float mass = 0.0f;
    int last = -1;
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) { mass += p[i]; last = i; }
    if (last < 0) return llm__sample_argmax(p, n);
    float r = coin * mass, cdf = 0.0f;
    for (int i = 0; i < last; i++) {
        if (!(p[i] >= thr)) continue;
        cdf += p[i];
        if (r < cdf) return i;
    }
    return last;
}

/* Next token from logits (vocab,), which it overwrites with probabilities
 * (with the penalty, the penalized logits at temperature 0). */
static inline int llm_sample(llm_sampler *s, float *logits) {
    const int n = s->vocab_size;
    int next;
    if (s->recent && s->candidates && s->n_recent > 0 && s->repeat_penalty > 0.0f && s->repeat_penalty != 1.0f)
        llm__penalize(s, logits);
    if (s->temperature == 0.0f) {
        next = llm__sample_argmax(logits, n);
    } else {
        if (s->temperature != 1.0f)   /* x / 1 is x: the pass changes nothing */
            for (int i = 0; i < n; i++) logits[i] /= s->temperature;
        llm__softmax_overlapped(logits, n, (const char *)s->candidates, s->candidates ? LLM_SAMPLER_CANDIDATES(n) * sizeof(int) : 0);
        float coin = llm__random_f32(&s->rng_state);
        int use_topp = s->topp > 0.0f && s->topp < 1.0f, use_topk = s->topk > 0 && s->topk < n;
        int use_minp = s->min_p > 0.0f;
        if (use_topp || use_topk) next = llm__sample_top(logits, n, s->topk, s->topp, use_minp ? s->min_p : 0.0f, coin, s->candidates);
        else if (use_minp) next = llm__sample_min_p(logits, n, s->min_p, coin);
        else next = llm__sample_multinomial(logits, n, coin);
    }
    llm_sampler_accept(s, next);
    return next;
}

#endif /* SAMPLER_H */
