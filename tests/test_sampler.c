/* test_sampler.c -- sampler.h's draws against a plain reference.
 *
 * The reference is llama2.c's sampler written out the slow way: softmax, then
 * (top-k) a full sort, or (top-p) the cutoff, a full sort and the prefix
 * whose mass exceeds top-p, then the draw. Its sort is a stable merge sort on
 * (probability descending, index ascending): the order glibc's stable qsort
 * gives llama2.c; min-p then keeps the tokens of that prefix with p >=
 * min_p * max p (min-p alone: every such token, in index order). The engine's
 * sampler orders only what the draw reaches, through buckets; both must pick
 * the same token for every seed, distribution and setting (flat, ties, a
 * spike, equal probabilities across the top-p boundary, a bucket crowded with
 * near-equal values, probabilities down to zero; vocabularies up to 151,936),
 * and leave the generator in the same state. The repeat penalty is checked
 * against a reference that keeps the whole history and penalises each distinct
 * token of its last N (--quick: fewer kinds of logits for the largest
 * vocabulary). The probabilities llm_sample leaves in the logits
 * must be llm_softmax's bits. Prints one line per failure and ends with
 * "N passed, N failed".
 */
#define MODEL_IMPLEMENTATION
#include "model.h"
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

typedef struct prob_index { float prob; int index; } prob_index;

static void check(int ok, const char *what, const char *fmt, int a, int b) {
    if (ok) { passed++; return; }
    failed++;
    printf("FAIL %s: ", what);
    printf(fmt, a, b);
    printf("\n");
}

/* the reference's order: larger probability first, then the lower index */
static int before(const prob_index *a, const prob_index *b) {
    return a->prob > b->prob || (a->prob == b->prob && a->index < b->index);
}

/* a stable top-down merge sort in the reference's order (tmp: n entries) */
static void merge_sort(prob_index *c, prob_index *tmp, int n) {
    if (n < 2) return;
    int h = n / 2, i = 0, j = h, k = 0;
    merge_sort(c, tmp, h);
    merge_sort(c + h, tmp, n - h);
    while (i < h && j < n) tmp[k++] = before(&c[j], &c[i]) ? c[j++] : c[i++];
    while (i < h) tmp[k++] = c[i++];
    while (j < n) tmp[k++] = c[j++];
    memcpy(c, tmp, (size_t)n * sizeof *c);
}

static int ref_sample(float *logits, int n, float temperature, float topp, int topk, float minp, uint64_t *rng) {
    if (temperature == 0.0f) {
        int best = 0;
        for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }
    for (int i = 0; i < n; i++) logits[i] /= temperature;
    llm_softmax(logits, n);
    float coin = llm__random_f32(rng);
    int use_topp = topp > 0.0f && topp < 1.0f, use_topk = topk > 0 && topk < n;
    float pmax = 0.0f;
    for (int i = 0; i < n; i++) if (logits[i] > pmax) pmax = logits[i];
    const float minthr = minp * pmax;
    if (!use_topp && !use_topk && minp > 0.0f) {   /* min-p alone: index order */
        float mass = 0.0f, cdf = 0.0f;
        int last = -1;
        for (int i = 0; i < n; i++) if (logits[i] >= minthr) { mass += logits[i]; last = i; }
        float r = coin * mass;
        for (int i = 0; i <= last; i++)
            if (logits[i] >= minthr) { cdf += logits[i]; if (r < cdf) return i; }
        return last;
    }
    if (!use_topp && !use_topk) {
        float cdf = 0.0f;
        for (int i = 0; i < n; i++) { cdf += logits[i]; if (coin < cdf) return i; }
        return n - 1;
    }
    prob_index *c = malloc((size_t)n * sizeof *c), *tmp = malloc((size_t)n * sizeof *tmp);
    int n0 = 0;
    if (use_topk) {
        for (int i = 0; i < n; i++) { c[i].prob = logits[i]; c[i].index = i; }
        merge_sort(c, tmp, n);
        n0 = topk;
    } else {
        float cutoff = (1.0f - topp) / (float)(n - 1);
        for (int i = 0; i < n; i++) if (logits[i] >= cutoff) { c[n0].prob = logits[i]; c[n0].index = i; n0++; }
        if (n0 == 0) {   /* nothing passes the cutoff: the most probable */
            free(c); free(tmp);
            int best = 0;
            for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
            return best;
        }
        merge_sort(c, tmp, n0);
    }
    float mass = 0.0f;
    int last = n0 - 1;
    for (int i = 0; i < n0; i++) {
        mass += c[i].prob;
        if (use_topp && mass > topp) { last = i; break; }
    }
    if (minp > 0.0f) {   /* min-p: the prefix with p >= minp * max p */
        int keep = 0;
        while (keep <= last && c[keep].prob >= minthr) keep++;
        if (keep - 1 < last) {
            last = keep - 1;
            mass = 0.0f;
            for (int i = 0; i <= last; i++) mass += c[i].prob;
        }
    }
    float r = coin * mass, cdf = 0.0f;
    int pick = c[last].index;
    for (int i = 0; i <= last; i++) {
        cdf += c[i].prob;
        if (r < cdf) { pick = c[i].index; break; }
    }
    free(c); free(tmp);
    return pick;
}

static uint64_t lcg;
static float uniform(void) { lcg = lcg * 6364136223846793005ull + 1442695040888963407ull; return (float)(lcg >> 40) / 16777216.0f; }

#define KINDS 10
/* logits of one kind: 0 random, 1 flat, 2 peaked, 3 few distinct values
 * (many ties), 4 one spike (the rest near zero probability), 5 ten equal
 * tokens on top, the rest equal (top-p's boundary inside a tie), 6 a
 * flat-ish bell (a random model's), 7 two values alternating, 8 logits over
 * [-100, 0] (probabilities down to zero), 9 a spike over values apart by
 * about an ulp (one crowded bucket) */
static void make_logits(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float u = uniform(), v;
        switch (kind) {
        case 0: v = 4.0f * u - 2.0f; break;
        case 1: v = 0.25f; break;
        case 2: v = i % 97 == 3 ? 9.0f : u; break;
        case 3: v = (float)(int)(u * 4.0f); break;
        case 4: v = i == n / 3 ? 40.0f : u; break;
        case 5: v = i % (n / 10 + 1) == 1 ? 2.0f : 0.0f; break;
        case 6: v = 0.3f * (u + uniform() + uniform() - 1.5f); break;
        case 7: v = (float)(i & 1); break;
        case 8: v = -100.0f * u; break;
        default: v = i == 0 ? 3.0f : 1.0f + 1e-6f * (float)(int)(u * 64.0f); break;
        }
        x[i] = v;
    }
}

/* the repeat penalty over a history, against a plain reference */
static void test_penalty(void) {
    enum { N = 512, H = 300 };
    static float logits[N], a[N], b[N];
    static int cand[2 * N], history[H + 8], window[256];
    static const int lasts[] = { 1, 7, 64, 256 };
    static const float penalties[] = { 0.5f, 1.3f, 3.0f };
    static const float temps[] = { 0.0f, 1.0f };
    for (size_t li = 0; li < 4; li++)
        for (size_t ri = 0; ri < 3; ri++)
            for (size_t ti = 0; ti < 2; ti++) {
                llm_sampler s;
                memset(&s, 0, sizeof s);
                s.vocab_size = N; s.temperature = temps[ti]; s.topp = 0.9f; s.rng_state = 99; s.candidates = cand;
                s.repeat_penalty = penalties[ri]; s.repeat_last_n = lasts[li]; s.recent = window;
                uint64_t rng = s.rng_state;
                int nh = 0, same = 1, want = 0, got = 0;
                for (int h = 0; h < 40; h++) {   /* a prompt, with repeats */
                    history[nh++] = (int)(uniform() * 60.0f);
                    llm_sampler_accept(&s, history[nh - 1]);
                }
                for (int d = 0; d < 24 && same; d++) {
                    make_logits(logits, N, d % 4 == 0 ? 6 : 0);
                    for (int i = 0; i < 60; i++) logits[i] += 1.0f;   /* the prompt's tokens likely */
                    memcpy(a, logits, sizeof a);
                    memcpy(b, logits, sizeof b);
                    int from = nh - lasts[li] < 0 ? 0 : nh - lasts[li];
                    for (int i = from; i < nh; i++) {
                        int t = history[i], seen = 0;
                        for (int j = from; j < i; j++) seen |= history[j] == t;
                        if (!seen) a[t] = a[t] <= 0.0f ? a[t] * penalties[ri] : a[t] / penalties[ri];
                    }
                    want = ref_sample(a, N, temps[ti], 0.9f, 0, 0.0f, &rng);
                    got = llm_sample(&s, b);
                    same = want == got && rng == s.rng_state;
                    history[nh++] = want;
                    if (nh == H) { memmove(history, history + H - 256, 256 * sizeof *history); nh = 256; }
                }
                char what[120];
                snprintf(what, sizeof what, "penalty %g last %d t %g", (double)penalties[ri], lasts[li], (double)temps[ti]);
                check(same, what, "reference drew %d, sampler %d", want, got);
            }
}

/* temperature 0 over the values argmax can trip on: NaNs (first, inside,
 * everywhere), infinities, signed zeros and equal maxima, at lengths around
 * the max kernel's vector width; llama2.c's scan is the reference */
static void test_argmax_edges(void) {
    static const float odd[] = { NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 3.5f, FLT_MAX, -FLT_MAX };
    enum { K = sizeof odd / sizeof *odd };
    float x[40], y[40];
    int cand[2 * 40];
    for (int n = 1; n <= 40; n++)
        for (int trial = 0; trial < 300; trial++) {
            for (int i = 0; i < n; i++) x[i] = uniform() < 0.3f ? odd[(int)(uniform() * K) % K] : uniform() - 0.5f;
            if (trial % 7 == 0) for (int i = 0; i < n; i++) x[i] = i % 3 ? 0.0f : -0.0f;   /* only zeros */
            if (trial % 11 == 0) x[trial % n] = NAN;
            int want = 0;
            for (int i = 1; i < n; i++) if (x[i] > x[want]) want = i;
            llm_sampler s;
            memset(&s, 0, sizeof s);
            s.vocab_size = n; s.rng_state = 7; s.candidates = cand;
            memcpy(y, x, (size_t)n * sizeof *x);
            int got = llm_sample(&s, y);
            char what[80];
            snprintf(what, sizeof what, "argmax n %d trial %d", n, trial);
            check(got == want, what, "llama2.c's scan %d, sampler %d", want, got);
        }
}

/* --quick (the emulated i386 build): the largest vocabulary with the random
 * and the widest logits only; every kind still runs on the others (32000 is
 * as wide a vocabulary to the sampler's code) */
int main(int argc, char **argv) {
    int quick = argc == 2 && strcmp(argv[1], "--quick") == 0;
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
        return 2;
    }
    static const int vocabs[] = { 1, 2, 3, 17, 512, 32000, 151936 };
    static const float temps[] = { 0.0f, 0.5f, 1.0f, 2.0f };
    static const float topps[] = { 0.0f, 0.001f, 0.5f, 0.9f, 0.99f, 0.999999f, 1.0f };
    static const int topks[] = { 0, 1, 5, 40, 100000 };
    static const float minps[] = { 0.0f, 0.05f, 0.9f };
    lcg = 42;
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        int n = vocabs[v], big = n >= 32000;
        float *logits = malloc((size_t)n * sizeof *logits), *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        int *cand = malloc(LLM_SAMPLER_CANDIDATES(n) * sizeof *cand);
        for (int kind = 0; kind < KINDS; kind++) {
            if (quick && n > 100000 && kind != 0 && kind != 8) continue;
            for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++)
                for (size_t pi = 0; pi < sizeof topps / sizeof *topps; pi++)
                    for (size_t ki = 0; ki < sizeof topks / sizeof *topks; ki++)
                        for (size_t mi = 0; mi < sizeof minps / sizeof *minps; mi++) {
                            /* the large vocabularies: temperature 1, top-k up to 40, min-p without top-k */
                            if (big && (temps[ti] != 1.0f || ki > 3 || (mi && ki))) continue;
                            llm_sampler s;
                            memset(&s, 0, sizeof s);
                            s.vocab_size = n; s.temperature = temps[ti]; s.topp = topps[pi]; s.topk = topks[ki];
                            s.rng_state = 1234567 + (uint64_t)n; s.candidates = cand; s.min_p = minps[mi];
                            uint64_t ref_rng = s.rng_state;
                            int draws = n > 100000 ? 1 : n >= 32000 ? 2 : 12, same = 1, want = 0, got = 0;
                            for (int d = 0; d < draws && same; d++) {
                                make_logits(logits, n, kind);
                                memcpy(a, logits, (size_t)n * sizeof *a);
                                memcpy(b, logits, (size_t)n * sizeof *b);
                                want = ref_sample(a, n, temps[ti], topps[pi], topks[ki], minps[mi], &ref_rng);
                                got = llm_sample(&s, b);
                                /* and the probabilities it leaves are llm_softmax's, bit for bit */
                                same = want == got && ref_rng == s.rng_state &&
                                       (temps[ti] == 0.0f || memcmp(a, b, (size_t)n * sizeof *a) == 0);
                            }
                            char what[160];
                            snprintf(what, sizeof what, "vocab %d kind %d t %g p %g k %d min-p %g", n, kind, (double)temps[ti],
                                     (double)topps[pi], topks[ki], (double)minps[mi]);
                            check(same, what, "reference drew %d, sampler %d", want, got);
                        }
        }
        free(logits); free(a); free(b); free(cand);
    }
    test_penalty();
    test_argmax_edges();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
