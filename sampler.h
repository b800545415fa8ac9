/* sampler.h -- the next token from logits: llama2.c's sampler (temperature,
 * top-p, xorshift64* seeded generator, argmax at temperature 0), plus top-k.
 *
 * Contract: header-only, C99, no libc beyond <stdint.h>; the caller owns the
 * struct and its candidates buffer of LLM_SAMPLER_CANDIDATES(vocab) entries.
 * With top-k off it draws exactly the tokens llama2.c's run.c draws for the
 * same logits, temperature, top-p and seed, on every target: candidates are
 * ordered by probability, ties by the lower index first, which is the order
 * glibc's qsort (a stable merge sort) gives llama2.c. The order comes from a
 * stable radix sort, O(vocab) per token, so a flat distribution costs no
 * more than a peaked one.
 *
 *   llm_sampler s = { vocab, temperature, topp, topk, seed, candidates };
 *   int next = llm_sample(&s, logits);   // overwrites logits with probabilities
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdint.h>
#include <string.h>
#include "model.h"   /* llm_softmax */

/* Entries of the candidates buffer for a vocabulary of n: the candidates and
 * the radix sort's second buffer. */
#define LLM_SAMPLER_CANDIDATES(n) (2 * (size_t)(n))

typedef struct llm_prob_index {
    float prob;
    int index;
} llm_prob_index;

typedef struct llm_sampler {
    int vocab_size;
    float temperature;      /* 0: argmax                                   */
    float topp;             /* nucleus mass; <= 0 or >= 1: off              */
    int topk;               /* keep the k most probable; 0: off             */
    uint64_t rng_state;     /* xorshift64*                                  */
    llm_prob_index *candidates; /* (vocab,) scratch                         */
} llm_sampler;

static inline uint32_t llm__random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static inline float llm__random_f32(uint64_t *state) { return (float)(llm__random_u32(state) >> 8) / 16777216.0f; }

static inline int llm__sample_argmax(const float *p, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (p[i] > p[best]) best = i;
    return best;
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

/* Sort c (n,) by probability, largest first, equal probabilities in their
 * order in c: a stable LSD radix sort on the float's bits (probabilities are
 * >= 0, so their bits order as unsigned integers), one byte a pass, a pass
 * skipped when every key shares its byte. tmp has n entries. */
static inline void llm__sort_prob_desc(llm_prob_index *c, llm_prob_index *tmp, int n) {
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257];
        memset(count, 0, sizeof count);
        for (int i = 0; i < n; i++) {
            uint32_t key;
            memcpy(&key, &c[i].prob, 4);
            count[((~key >> shift) & 0xff) + 1]++;   /* ~key: descending */
        }
        int all_one = 0;
        for (int d = 1; d <= 256; d++) all_one |= count[d] == (size_t)n;
        if (all_one) continue;
        for (int d = 1; d <= 256; d++) count[d] += count[d - 1];
        for (int i = 0; i < n; i++) {
            uint32_t key;
            memcpy(&key, &c[i].prob, 4);
            tmp[count[(~key >> shift) & 0xff]++] = c[i];
        }
        memcpy(c, tmp, (size_t)n * sizeof *c);
    }
}

/* Top-k then top-p over p (n,): sort the candidates by probability, keep the
 * k best (if k > 0), then the smallest prefix whose mass exceeds topp (if on),
 * and draw with coin scaled to the kept mass. With top-k off this is exactly
 * llama2.c's sample_topp, including its cutoff that skips tiny probabilities.
 * cand has 2n entries. */
static inline int llm__sample_top(const float *p, int n, int topk, float topp, float coin, llm_prob_index *cand) {
    int n0 = 0;
    int use_topp = topp > 0.0f && topp < 1.0f;
    if (topk > 0 && topk < n) {
        for (int i = 0; i < n; i++) { cand[i].index = i; cand[i].prob = p[i]; }
        llm__sort_prob_desc(cand, cand + n, n);
        n0 = topk;
    } else {
        const float cutoff = (1.0f - topp) / (float)(n - 1);
        for (int i = 0; i < n; i++) {
            if (p[i] >= cutoff) { cand[n0].index = i; cand[n0].prob = p[i]; n0++; }
        }
        /* llama2.c reads before its array here; a tiny topp over a flat
         * distribution can leave no candidate: then the most probable */
        if (n0 == 0) return llm__sample_argmax(p, n);
        llm__sort_prob_desc(cand, cand + n, n0);
    }
    float mass = 0.0f;
    int last = n0 - 1;
    for (int i = 0; i < n0; i++) {
        mass += cand[i].prob;
        if (use_topp && mass > topp) { last = i; break; }
    }
    float r = coin * mass, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += cand[i].prob;
        if (r < cdf) return cand[i].index;
    }
    return cand[last].index;
}

/* Next token from logits (vocab,), which it overwrites with probabilities. */
static inline int llm_sample(llm_sampler *s, float *logits) {
    if (s->temperature == 0.0f) return llm__sample_argmax(logits, s->vocab_size);
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= s->temperature;
    llm_softmax(logits, s->vocab_size);
    float coin = llm__random_f32(&s->rng_state);
    int use_topp = s->topp > 0.0f && s->topp < 1.0f;
    if (!use_topp && (s->topk <= 0 || s->topk >= s->vocab_size))
        return llm__sample_multinomial(logits, s->vocab_size, coin);
    return llm__sample_top(logits, s->vocab_size, s->topk, s->topp, coin, s->candidates);
}

#endif /* SAMPLER_H */
