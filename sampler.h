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
 * on every target. Only the candidates the draw reaches are put in order:
 * one counting pass spreads them over 256 buckets of probability (by the
 * float's bits, which order as integers for p >= 0), and the buckets are
 * radix-sorted a run at a time from the most probable until top-k or top-p
 * stops.
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
#include "model.h"   /* llm_softmax */

/* ints in the candidates buffer for a vocabulary of n: the candidates' ids
 * and the radix sort's second half (or the penalty's bit set of seen tokens) */
#define LLM_SAMPLER_CANDIDATES(n) (2 * (size_t)(n))

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

static inline int llm__sample_argmax(const float *p, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (p[i] > p[best]) best = i;
    return best;
}

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

/* Sort ids (n,) by their probability p[id], largest first, equal
 * probabilities in their order in ids: a stable LSD radix sort on the low
 * `bits` bits of hi - key (the float's bits; for p >= 0 they order as the
 * values), one byte a pass, a pass skipped when every id shares its byte.
 * tmp has n entries. */
static inline void llm__sort_by_prob(int *ids, int *tmp, int n, const float *p, uint32_t hi, int bits) {
    int *src = ids, *dst = tmp;
    for (int shift = 0; shift < bits; shift += 8) {
        int count[257];
        memset(count, 0, sizeof count);
        for (int i = 0; i < n; i++) count[(((hi - llm__prob_key(p[src[i]])) >> shift) & 0xff) + 1]++;
        int all_one = 0;
        for (int d = 1; d <= 256; d++) all_one |= count[d] == n;
        if (all_one) continue;
        for (int d = 1; d <= 256; d++) count[d] += count[d - 1];
        for (int i = 0; i < n; i++) dst[count[((hi - llm__prob_key(p[src[i]])) >> shift) & 0xff]++] = src[i];
        int *t = src; src = dst; dst = t;
    }
    if (src != ids) memcpy(ids, src, (size_t)n * sizeof *ids);
}

/* Top-k, top-p and min-p over p (n,) as step 3 above, then the draw with
 * coin; cand has 2n ints. The candidates (p >= thr: llama2.c's cutoff, or
 * min-p's bound if higher) go into 256 buckets by the high byte of d = hi -
 * key (hi: their largest key), most probable first, in index order within
 * each (one counting pass, one placing pass). The buckets are then ordered a
 * run at a time (runs of whole buckets, doubling in size) by a stable radix
 * sort on d's low bits, and their mass added up until top-k or top-p stops:
 * the prefix the draw reads is in the order a full stable sort gives, so the
 * token is llama2.c's, including its cutoff and, where that leaves nothing,
 * the most probable token; what lies past the stop is never sorted. */
static inline int llm__sample_top(const float *p, int n, int topk, float topp, float minp, float coin, int *cand) {
    int use_topp = topp > 0.0f && topp < 1.0f, use_topk = topk > 0 && topk < n;
    float thr = use_topp && !use_topk ? (1.0f - topp) / (float)(n - 1) : 0.0f;
    if (minp > 0.0f) {
        uint32_t kmax = 0;
        for (int i = 0; i < n; i++) {
            uint32_t k = llm__prob_key(p[i]);
            kmax = k > kmax ? k : kmax;
        }
        float pmax, bound;
        memcpy(&pmax, &kmax, 4);
        bound = minp * pmax;
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
    int s = 0;   /* bucket (hi - key) >> s, 256 at most */
    while (s < 32 && ((uint64_t)(hi - lo) >> s) > 255u) s++;
    int start[257];
    memset(start, 0, sizeof start);
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) start[((hi - llm__prob_key(p[i])) >> s) + 1]++;
    for (int b = 1; b <= 256; b++) start[b] += start[b - 1];
    int *ids = cand + n, *tmp = cand;   /* the placed ids; the radix sort's other half */
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) ids[start[(hi - llm__prob_key(p[i])) >> s]++] = i;
    /* now bucket b ends at start[b] */
    float mass = 0.0f;
    int last = n0 - 1, pos = 0, b = 0, run = 64;
    while (pos < n0) {
        while (b < 255 && start[b] - pos < run) b++;   /* whole buckets */
        int end = start[b++];
        run *= 2;
        if (end - pos > 1) llm__sort_by_prob(ids + pos, tmp + pos, end - pos, p, hi, s + 8 < 32 ? s + 8 : 32);
        for (; pos < end; pos++) {
            mass += p[ids[pos]];
            if ((use_topk && pos == topk - 1) || (use_topp && mass > topp)) break;
        }
        if (pos < end) { last = pos; break; }
    }
    float r = coin * mass, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += p[ids[i]];
        if (r < cdf) return ids[i];
    }
    return ids[last];
}

/* Min-p alone over p (n,): the tokens with p >= minp * max p, in index order. */
static inline int llm__sample_min_p(const float *p, int n, float minp, float coin) {
    uint32_t kmax = 0;
    for (int i = 0; i < n; i++) {
        uint32_t k = llm__prob_key(p[i]);
        kmax = k > kmax ? k : kmax;
    }
    float pmax, mass = 0.0f;
    memcpy(&pmax, &kmax, 4);
    const float thr = minp * pmax;
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
        for (int i = 0; i < n; i++) logits[i] /= s->temperature;
        llm_softmax(logits, n);
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
