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
 * on every target. Only the candidates the draw reaches are put in order,
 * and only their probabilities move, not their ids: one counting pass
 * spreads them over 256 buckets (by the float's bits, which order as
 * integers for p >= 0), and the buckets are sorted one at a time from the
 * most probable until top-k or top-p stops; the token drawn is then found
 * by its probability and its rank among equal ones.
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

/* The keys k (n,) sorted in place, largest first, by insertion, for keys
 * already close to their place; gives up (returns 0) after `moves` moves. */
static inline int llm__insertion_sort_desc(uint32_t *k, int n, long moves) {
    for (int i = 1; i < n; i++) {
        uint32_t v = k[i];
        int j = i;
        for (; j > 0 && k[j - 1] < v; j--) k[j] = k[j - 1];
        k[j] = v;
        if ((moves -= i - j) < 0) return 0;
    }
    return 1;
}

/* The keys k (n,) sorted largest first: an LSD radix sort on the low `bits`
 * bits of d = hi - key (the higher ones equal), one byte a pass, a pass
 * skipped when every key shares its byte. tmp has n entries. */
static inline void llm__radix_sort_desc(uint32_t *k, uint32_t *tmp, int n, uint32_t hi, int bits) {
    uint32_t *src = k, *dst = tmp;
    for (int shift = 0; shift < bits; shift += 8) {
        int count[257];
        memset(count, 0, sizeof count);
        for (int i = 0; i < n; i++) count[(((hi - src[i]) >> shift) & 0xff) + 1]++;
        int all_one = 0;
        for (int d = 1; d <= 256; d++) all_one |= count[d] == n;
        if (all_one) continue;
        for (int d = 1; d <= 256; d++) count[d] += count[d - 1];
        for (int i = 0; i < n; i++) dst[count[((hi - src[i]) >> shift) & 0xff]++] = src[i];
        uint32_t *t = src; src = dst; dst = t;
    }
    if (src != k) memcpy(k, src, (size_t)n * sizeof *k);
}

/* One bucket's keys k (n,), whose d = hi - key agree from bit s up, sorted
 * largest first. Usually spread by d's next w bits over 2^w sub-buckets,
 * about two a key (through tmp, `room` ints: the keys, then the counts),
 * then one insertion pass in which a key moves within its sub-bucket only;
 * where that meets crowded sub-buckets (many near-equal values), the radix
 * sort instead, whose cost has no worst case. */
static inline void llm__sort_bucket_desc(uint32_t *k, uint32_t *tmp, int n, int room, uint32_t hi, int s) {
    int w = 0;
    while (w < s && w < 24 && (1 << w) < 2 * n && n + (2 << w) + 1 <= room) w++;
    if (n > 16 && w > 0) {
        int t = s - w, *start = (int *)(tmp + n);
        uint32_t mask = (1u << w) - 1u;
        memset(start, 0, ((size_t)mask + 2) * sizeof *start);
        for (int i = 0; i < n; i++) start[(((hi - k[i]) >> t) & mask) + 1]++;
        for (uint32_t d = 1; d <= mask + 1; d++) start[d] += start[d - 1];
        for (int i = 0; i < n; i++) tmp[start[((hi - k[i]) >> t) & mask]++] = k[i];
        memcpy(k, tmp, (size_t)n * sizeof *k);
    }
    if (!llm__insertion_sort_desc(k, n, 4L * n + 64)) llm__radix_sort_desc(k, tmp, n, hi, s);
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
 * coin; cand has 2n ints. The candidates (p >= thr: llama2.c's cutoff, or
 * min-p's bound if higher) go into 256 buckets by the high bits of d = hi -
 * key (hi: their largest key), most probable first (one counting pass, one
 * placing pass); only their keys move, not their ids: the running
 * sum that top-p and the draw read depends on the probabilities in order,
 * not on which of several equal ones comes first. Bucket by bucket, the keys
 * are sorted (a few to a bucket) and added up until top-k or top-p stops;
 * what lies past the stop is never sorted. The draw then walks the same
 * prefix again, and the key it stops at, and its rank among the equal keys
 * before it, name the token: the rank-th such in index order, as llama2.c's
 * stable sort orders ties. So the token is llama2.c's, including its cutoff
 * and, where that leaves nothing, the most probable token. */
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
    const int nb = 256;   /* bucket (hi - key) >> s */
    int s = 0;
    while (s < 32 && ((uint64_t)(hi - lo) >> s) >= (uint64_t)nb) s++;
    uint32_t *keys = (uint32_t *)cand, *tmp = keys + n;   /* the placed keys; scratch */
    int start[257];   /* counts, then bucket b ends at start[b] */
    memset(start, 0, sizeof start);
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) start[((hi - llm__prob_key(p[i])) >> s) + 1]++;
    for (int b = 1; b <= nb; b++) start[b] += start[b - 1];
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) {
            uint32_t k = llm__prob_key(p[i]);
            keys[start[(hi - k) >> s]++] = k;
        }
    float mass = 0.0f;
    int last = n0 - 1, pos = 0;
    for (int b = 0; b < nb && pos < n0; b++) {
        int end = start[b];
        llm__sort_bucket_desc(keys + pos, tmp, end - pos, n, hi, s);
        for (; pos < end; pos++) {
            float v;
            memcpy(&v, &keys[pos], 4);
            mass += v;
            if ((use_topk && pos == topk - 1) || (use_topp && mass > topp)) break;
        }
        if (pos < end) { last = pos; break; }
    }
    float r = coin * mass, cdf = 0.0f;
    int at = last;
    for (int i = 0; i < last; i++) {
        float v;
        memcpy(&v, &keys[i], 4);
        cdf += v;
        if (r < cdf) { at = i; break; }
    }
    int first = at;
    while (first > 0 && keys[first - 1] == keys[at]) first--;
    return llm__nth_equal(p, n, keys[at], at - first);
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
        if (s->temperature != 1.0f)   /* x / 1 is x: the pass changes nothing */
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
