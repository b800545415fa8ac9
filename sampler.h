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
 * one counting pass spreads them over buckets of probability (by the float's
 * bits, which order as integers for p >= 0), and the buckets are sorted a
 * run at a time from the most probable until top-k or top-p stops.
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
 * and the buckets' bounds (or the penalty's bit set of seen tokens) */
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

/* v (n,) ascending: insertion sort for a few, else (unless already in
 * order) heapsort: no memory, no recursion, n log n whatever the values */
static inline void llm__sift_down(uint32_t *v, int root, int n) {
    for (;;) {
        int child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && v[child + 1] > v[child]) child++;
        if (v[root] >= v[child]) return;
        uint32_t t = v[root]; v[root] = v[child]; v[child] = t;
        root = child;
    }
}
static inline void llm__sort_u32(uint32_t *v, int n) {
    if (n <= 32) {
        for (int i = 1; i < n; i++) {
            uint32_t x = v[i];
            int j = i;
            for (; j > 0 && x < v[j - 1]; j--) v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    int sorted = 1;
    for (int i = 1; i < n && sorted; i++) sorted = v[i - 1] <= v[i];
    if (sorted) return;
    for (int i = n / 2 - 1; i >= 0; i--) llm__sift_down(v, i, n);
    for (int end = n - 1; end > 0; end--) {
        uint32_t t = v[0]; v[0] = v[end]; v[end] = t;
        llm__sift_down(v, 0, end);
    }
}

/* Top-k, top-p and min-p over p (n,) as step 3 above, then the draw with
 * coin; cand has 2n ints. The order: a candidate's key is its float's bits
 * (for p >= 0 they order as the values), d = hi - key (hi: the largest
 * key), so the order is d ascending, then the id. A bucket holds the ids
 * with the same high bits of d (how many bits depends on where d falls, see
 * below), most probable bucket first; within it each candidate is one
 * 32-bit value: a parity bit telling neighbouring buckets apart, the rest
 * of d's bits, the id's bits; sorting those values orders the bucket
 * exactly (the rest is at most 31 minus the id's bits, which the
 * probabilities' range, keys below 2^30, allows with fewer than n
 * buckets). One counting pass sizes the
 * buckets, one pass places the values; the buckets are then sorted a run at
 * a time (the runs double) and their mass added up, until top-k or top-p
 * stops: the prefix the draw reads is in the order a full stable sort gives,
 * so the token is llama2.c's, including its cutoff and, where that leaves
 * nothing, the most probable token. */
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
    if (n0 == 1) {
        int i = 0;
        while (!(p[i] >= thr)) i++;
        return i;
    }
    int idbits = 1;
    while ((1 << idbits) < n) idbits++;
    /* keys of p <= 1 are below 2^30; a larger p (not from a softmax) is
     * clamped there, which keeps every index in range */
    const uint32_t kcap = (1u << 30) - 1u, idmask = (1u << idbits) - 1u;
    if (hi > kcap) hi = kcap;
    if (lo > hi) lo = hi;
    const uint32_t span = hi - lo;
    /* The buckets follow the candidates' spread: 64 coarse bins of d (bin
     * d >> cs), each cut into 2^f[c] buckets (bucket base[c] + (d & cmask) >>
     * (cs - f[c])) in proportion to a sample of the candidates, so about one
     * candidate a bucket wherever they crowd; every cs - f[c] <= 31 - idbits,
     * and nb within the 2n ints (n0 + nb + 1) */
    const int cap = 2 * n - n0 - 1;
    int nc = 64;
    while (nc > cap) nc /= 2;
    int cs = 0;
    while ((span >> cs) >= (uint32_t)nc) cs++;
    const uint32_t cmask = (1u << cs) - 1u;
    int fmin = cs - (31 - idbits) > 0 ? cs - (31 - idbits) : 0;
    int sample[64], f[64], base[65];
    memset(sample, 0, sizeof sample);
    const int step = n / 1024 > 1 ? n / 1024 : 1;
    int taken = 0;
    for (int i = 0; i < n; i += step)
        if (p[i] >= thr) {
            uint32_t k = llm__prob_key(p[i]);
            sample[(hi - (k < kcap ? k : kcap)) >> cs]++;
            taken++;
        }
    for (int c = 0; c < nc; c++) {
        /* want about sample[c] * n0 / taken buckets, rounded up to a power of two */
        double want = taken ? (double)sample[c] * n0 / taken : 1.0;
        int fc = 0;
        while (fc < cs && (double)(1 << fc) < want) fc++;
        f[c] = fc < fmin ? fmin : fc;
    }
    for (;;) {
        long total = 0;
        int top = 0;
        for (int c = 0; c < nc; c++) { total += 1L << f[c]; top = f[c] > top ? f[c] : top; }
        if (total <= cap || top <= fmin) break;
        for (int c = 0; c < nc; c++) if (f[c] == top) f[c]--;
    }
    base[0] = 0;
    for (int c = 0; c < nc; c++) base[c + 1] = base[c] + (1 << f[c]);
    const int nb = base[nc];
    uint32_t *val = (uint32_t *)cand;
    int *bound = cand + n0;
    memset(bound, 0, (size_t)(nb + 1) * sizeof *bound);
#define LLM__BUCKET(d) (base[(d) >> cs] + (int)(((d) & cmask) >> (cs - f[(d) >> cs])))
    for (int i = 0; i < n; i++)
        if (p[i] >= thr) {
            uint32_t k = llm__prob_key(p[i]), d = hi - (k < kcap ? k : kcap);
            bound[LLM__BUCKET(d) + 1]++;
        }
    /* starts, with the parity of the bucket's rank among the non-empty ones
     * in bit 30 (n0 < 2^30): it goes to bit 31 of the bucket's values */
    int parity = 0;
    for (int b = 1; b <= nb; b++) {
        int count = bound[b];
        bound[b] = bound[b - 1] + count;
        bound[b - 1] |= parity << 30;
        parity ^= count > 0;
    }
    const int slot = (1 << 30) - 1;
    int used = nb;
    if (use_topk) {   /* only the buckets that hold the first k */
        int b = 0;
        while (b + 1 < nb && (bound[b + 1] & slot) < topk) b++;
        used = b + 1;
    }
    for (int i = 0; i < n; i++) {
        if (!(p[i] >= thr)) continue;
        uint32_t k = llm__prob_key(p[i]), d = hi - (k < kcap ? k : kcap);
        int b = LLM__BUCKET(d), sh = cs - f[d >> cs];
        if (b < used) {
            int at = bound[b]++;
            val[at & slot] = (uint32_t)(at >> 30) << 31 | (d & ((1u << sh) - 1u)) << idbits | (uint32_t)i;
        }
    }
    /* Bucket b is now val[bound[b - 1] .. bound[b]) (bound[-1] = 0, the
     * flag masked off), in index order; neighbours from different buckets
     * differ in bit 31. Put them in order a run of whole buckets at a time
     * (the runs double) and add up their mass, until top-k or top-p stops.
     * In a run: an insertion sort, whose values move only within their
     * bucket (about one value a bucket: little to do); should it find much
     * to do (crowded buckets), each bucket of the run is sorted on its own
     * (heapsort past 32 values). */
    const int placed = bound[used - 1] & slot;
    float mass = 0.0f;
    int last = placed - 1, pos = 0, b = 0, run = 64;
    while (pos < placed) {
        int end = pos + run < placed ? pos + run : placed;
        run *= 2;
        int lo_b = b, hi_b = used - 1;   /* the first bucket ending at or past end */
        while (lo_b < hi_b) {
            int mid = lo_b + (hi_b - lo_b) / 2;
            if ((bound[mid] & slot) >= end) hi_b = mid; else lo_b = mid + 1;
        }
        int b_first = b;
        b = lo_b;
        end = bound[b++] & slot;
        long work = 0, budget = 8L * (end - pos) + 256;
        for (int i = pos + 1; i < end && work <= budget; i++) {
            uint32_t x = val[i];
            int j = i;
            for (; j > pos && !((x ^ val[j - 1]) >> 31) && x < val[j - 1]; j--) val[j] = val[j - 1];
            val[j] = x;
            work += i - j;
        }
        if (work > budget)
            for (int c = b_first, b0 = pos; c < b; c++) {
                int b1 = bound[c] & slot;
                llm__sort_u32(val + b0, b1 - b0);   /* one parity: plain order */
                b0 = b1;
            }
        for (; pos < end; pos++) {
            mass += p[val[pos] & idmask];
            if ((use_topk && pos == topk - 1) || (use_topp && mass > topp)) break;
        }
        if (pos < end) { last = pos; break; }
    }
#undef LLM__BUCKET
    float r = coin * mass, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        int id = (int)(val[i] & idmask);
        cdf += p[id];
        if (r < cdf) return id;
    }
    return (int)(val[last] & idmask);
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
