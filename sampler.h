/* sampler.h -- the next token from logits: llama2.c's sampler (temperature,
 * top-p, xorshift64* seeded generator, argmax at temperature 0), plus top-k.
 *
 * Contract: header-only, C99, libc's qsort only; the caller owns the struct
 * and its (vocab,) candidates buffer. With top-k off it draws exactly the
 * tokens llama2.c's run.c draws for the same logits, temperature, top-p and seed.
 *
 *   llm_sampler s = { vocab, temperature, topp, topk, seed, candidates };
 *   int next = llm_sample(&s, logits);   // overwrites logits with probabilities
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdint.h>
#include <stdlib.h>
#include "model.h"   /* llm_softmax */

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

static inline int llm__compare_prob_desc(const void *a, const void *b) {
    const llm_prob_index *x = (const llm_prob_index *)a, *y = (const llm_prob_index *)b;
    if (x->prob > y->prob) return -1;
    if (x->prob < y->prob) return 1;
    return 0;
}

/* Top-k then top-p over p (n,): sort the candidates by probability, keep the
 * k best (if k > 0), then the smallest prefix whose mass exceeds topp (if on),
 * and draw with coin scaled to the kept mass. With top-k off this is exactly
 * llama2.c's sample_topp, including its cutoff that skips tiny probabilities. */
static inline int llm__sample_top(const float *p, int n, int topk, float topp, float coin, llm_prob_index *cand) {
    int n0 = 0;
    int use_topp = topp > 0.0f && topp < 1.0f;
    if (topk > 0 && topk < n) {
        for (int i = 0; i < n; i++) { cand[i].index = i; cand[i].prob = p[i]; }
        qsort(cand, (size_t)n, sizeof *cand, llm__compare_prob_desc);
        n0 = topk;
    } else {
        const float cutoff = (1.0f - topp) / (float)(n - 1);
        for (int i = 0; i < n; i++) {
            if (p[i] >= cutoff) { cand[n0].index = i; cand[n0].prob = p[i]; n0++; }
        }
        qsort(cand, (size_t)n0, sizeof *cand, llm__compare_prob_desc);
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
