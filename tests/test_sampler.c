/* test_sampler.c -- sampler.h's draws against a plain reference.
 *
 * The reference is llama2.c's sampler written out the slow way: softmax, then
 * (top-k) a full sort, or (top-p) the cutoff, a full sort and the prefix
 * whose mass exceeds top-p, then the draw. Its sort is a stable merge sort on
 * (probability descending, index ascending): the order glibc's stable qsort
 * gives llama2.c. The engine's sampler uses a radix sort instead; both must
 * pick the same token for every seed, distribution and setting, and leave
 * the generator in the same state. Prints one line per failure and ends with
 * "N passed, N failed".
 */
#define MODEL_IMPLEMENTATION
#include "model.h"
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *what, const char *fmt, int a, int b) {
    if (ok) { passed++; return; }
    failed++;
    printf("FAIL %s: ", what);
    printf(fmt, a, b);
    printf("\n");
}

/* the reference's order: larger probability first, then the lower index */
static int before(const llm_prob_index *a, const llm_prob_index *b) {
    return a->prob > b->prob || (a->prob == b->prob && a->index < b->index);
}

/* a stable top-down merge sort in the reference's order (tmp: n entries) */
static void merge_sort(llm_prob_index *c, llm_prob_index *tmp, int n) {
    if (n < 2) return;
    int h = n / 2, i = 0, j = h, k = 0;
    merge_sort(c, tmp, h);
    merge_sort(c + h, tmp, n - h);
    while (i < h && j < n) tmp[k++] = before(&c[j], &c[i]) ? c[j++] : c[i++];
    while (i < h) tmp[k++] = c[i++];
    while (j < n) tmp[k++] = c[j++];
    memcpy(c, tmp, (size_t)n * sizeof *c);
}

static int ref_sample(float *logits, int n, float temperature, float topp, int topk, uint64_t *rng) {
    if (temperature == 0.0f) {
        int best = 0;
        for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }
    for (int i = 0; i < n; i++) logits[i] /= temperature;
    llm_softmax(logits, n);
    float coin = llm__random_f32(rng);
    int use_topp = topp > 0.0f && topp < 1.0f, use_topk = topk > 0 && topk < n;
    if (!use_topp && !use_topk) {
        float cdf = 0.0f;
        for (int i = 0; i < n; i++) { cdf += logits[i]; if (coin < cdf) return i; }
        return n - 1;
    }
    llm_prob_index *c = malloc((size_t)n * sizeof *c), *tmp = malloc((size_t)n * sizeof *tmp);
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

/* logits of one kind: 0 random, 1 flat, 2 peaked, 3 few distinct values (many ties) */
static void make_logits(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float u = uniform();
        x[i] = kind == 0 ? 4.0f * u - 2.0f : kind == 1 ? 0.25f : kind == 2 ? (i % 97 == 3 ? 9.0f : u) : (float)(int)(u * 4.0f);
    }
}

int main(void) {
    static const int vocabs[] = { 1, 2, 3, 17, 512, 32000 };
    static const float temps[] = { 0.0f, 0.5f, 1.0f, 2.0f };
    static const float topps[] = { 0.0f, 0.001f, 0.5f, 0.9f, 0.99f, 1.0f };
    static const int topks[] = { 0, 1, 5, 40, 100000 };
    const char *kinds[] = { "random", "flat", "peaked", "ties" };
    lcg = 42;
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        int n = vocabs[v];
        float *logits = malloc((size_t)n * sizeof *logits), *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        llm_prob_index *cand = malloc(LLM_SAMPLER_CANDIDATES(n) * sizeof *cand);
        for (int kind = 0; kind < 4; kind++)
            for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++)
                for (size_t pi = 0; pi < sizeof topps / sizeof *topps; pi++)
                    for (size_t ki = 0; ki < sizeof topks / sizeof *topks; ki++) {
                        llm_sampler s = { n, temps[ti], topps[pi], topks[ki], 1234567 + n, cand };
                        uint64_t ref_rng = s.rng_state;
                        int draws = n >= 32000 ? 3 : 12, same = 1, want = 0, got = 0;
                        for (int d = 0; d < draws && same; d++) {
                            make_logits(logits, n, kind);
                            memcpy(a, logits, (size_t)n * sizeof *a);
                            memcpy(b, logits, (size_t)n * sizeof *b);
                            want = ref_sample(a, n, temps[ti], topps[pi], topks[ki], &ref_rng);
                            got = llm_sample(&s, b);
                            same = want == got && ref_rng == s.rng_state;
                        }
                        char what[160];
                        snprintf(what, sizeof what, "vocab %d %s t %g p %g k %d", n, kinds[kind], (double)temps[ti],
                                 (double)topps[pi], topks[ki]);
                        check(same, what, "reference drew %d, sampler %d", want, got);
                    }
        free(logits); free(a); free(b); free(cand);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
