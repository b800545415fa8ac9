/* tests/logits.c -- dump the engine's logits for a token sequence, for
 * comparison with the PyTorch reference (tests/reference.py).
 *
 *   build/logits CKPT --tokens 1,5,9 [--norm rms|layer] [--norm-pos pre|post|peri|out]
 *                [--final-norm on|off] [--norm-eps E] [--qk-norm on|off] [--mode prefill|decode|chunked]
 *                [--threads N] [--kv f32|f16|q8] [--ctx N] [--repack on|off] --out FILE
 * Writes float32 (T, vocab) row-major. prefill: one batch from position 0;
 * decode: one token per call; chunked: batches of 5 tokens. --repack on
 * (the default, as run's) reads the 4-bit matrices from llm_repack's panels
 * where the build has them.
 *
 * seqs: llm_forward_batch with three sequences in each call: A takes the
 * tokens one a step (its rows are written), B the same tokens three a step
 * (each chunk's last row must equal A's row there, bit for bit, else the
 * program fails), C the tokens reversed, two a step; each its own cache.
 *
 *   build/logits CKPT --mode dequant --out FILE
 * Writes every matrix as the engine decodes its rows (the traits'
 * dequant_row), float32, in file order: tok_embeddings, per layer wq wk wv
 * wo w1 w2 w3, then classifier when it is not shared.
 */
#define _POSIX_C_SOURCE 200809L
#define MODEL_IMPLEMENTATION
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "error: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* every matrix's rows through the type's dequant_row, appended to f */
static void dump_matrix(FILE *f, const llm_tensor *t) {
    float *row = malloc((size_t)t->cols * sizeof(float) + 1);
    for (int r = 0; r < t->rows; r++) {
        llm__traits[t->type].dequant_row(row, t, r);
        if (fwrite(row, sizeof(float), (size_t)t->cols, f) != (size_t)t->cols) fail("cannot write", "dequant");
    }
    free(row);
}
static void dump_matrices(const llm_model *m, const char *out) {
    FILE *f = fopen(out, "wb");
    if (!f) fail("cannot write", out);
    dump_matrix(f, &m->w.tok_embeddings);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const llm_layer *L = &m->w.layers[l];
        const llm_tensor *ts[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w1, &L->w2, &L->w3 };
        for (int i = 0; i < 7; i++) dump_matrix(f, ts[i]);
    }
    if (!m->cfg.shared_classifier) dump_matrix(f, &m->w.classifier);
    fclose(f);
}

static void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = NULL;
    if (size <= 0 || posix_memalign(&p, LLM_ALIGN, (size_t)size) != 0) fail("cannot read", path);
    if (fread(p, 1, (size_t)size, f) != (size_t)size) fail("short read", path);
    fclose(f);
    *n = (size_t)size;
    return p;
}

/* --mode seqs (see the top) */
static void seqs(const llm_model *m, const int *tokens, int T, int ctx, int kv, int threads, const char *out) {
    int V = m->cfg.vocab_size;
    llm_state_options wo = { 6, 6, 1, kv }, so = { ctx, 1, 0, kv };
    size_t wneed = llm_state_size(&m->cfg, &wo), sneed = llm_state_size(&m->cfg, &so);
    void *arena[4];
    llm_state work, seq[3];
    for (int i = 0; i < 4; i++) {
        if (posix_memalign(&arena[i], LLM_ALIGN, i ? sneed : wneed) != 0) fail("out of memory", NULL);
        llm_state *st = i ? &seq[i - 1] : &work;
        if (llm_state_init(st, m, i ? &so : &wo, arena[i], i ? sneed : wneed) != LLM_OK) fail("state", st->error);
    }
    work.n_threads = threads;
    int *rev = malloc((size_t)T * sizeof(int));
    for (int t = 0; t < T; t++) rev[t] = tokens[T - 1 - t];
    float *all = malloc((size_t)T * V * sizeof(float)), *brow = malloc((size_t)T * V * sizeof(float));
    char *bset = calloc((size_t)T, 1);
    int b_done = 0, c_done = 0;
    for (int a = 0; a < T; a++) {
        llm_batch_item it[3];
        int n = 0, b_item = -1;
        if (c_done < T) {   /* C first, so A and B are not at row 0 of the batch */
            it[n].state = &seq[2]; it[n].tokens = rev + c_done; it[n].n = T - c_done < 2 ? T - c_done : 2; it[n].pos = c_done;
            c_done += it[n++].n;
        }
        it[n].state = &seq[0]; it[n].tokens = tokens + a; it[n].n = 1; it[n].pos = a;
        int a_item = n++;
        if (b_done < T && b_done <= a) {
            it[n].state = &seq[1]; it[n].tokens = tokens + b_done; it[n].n = T - b_done < 3 ? T - b_done : 3; it[n].pos = b_done;
            b_item = n;
            b_done += it[n++].n;
        }
        if (llm_forward_batch(m, &work, it, n) != LLM_OK) fail("forward_batch", work.error);
        memcpy(all + (size_t)a * V, work.logits + (size_t)a_item * V, (size_t)V * sizeof(float));
        if (b_item >= 0) {   /* B's chunk's last row: checked against A's below */
            memcpy(brow + (size_t)(b_done - 1) * V, work.logits + (size_t)b_item * V, (size_t)V * sizeof(float));
            bset[b_done - 1] = 1;
        }
    }
    for (int t = 0; t < T; t++)
        if (bset[t] && memcmp(brow + (size_t)t * V, all + (size_t)t * V, (size_t)V * sizeof(float)))
            fail("seqs", "in a batch with other sequences, a chunk's logits differ from the one-token row at the same position");
    /* B again, alone in its calls, checked against A's rows */
    llm_state_init(&seq[1], m, &so, arena[2], sneed);
    for (int b = 0; b < T; b += 3) {
        llm_batch_item it = { &seq[1], tokens + b, T - b < 3 ? T - b : 3, b };
        if (llm_forward_batch(m, &work, &it, 1) != LLM_OK) fail("forward_batch", work.error);
        if (memcmp(work.logits, all + (size_t)(b + it.n - 1) * V, (size_t)V * sizeof(float)))
            fail("seqs", "a chunk's logits differ from the one-token row at the same position");
    }
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(all, sizeof(float), (size_t)T * V, f) != (size_t)T * V) fail("cannot write", out);
    fclose(f);
    for (int i = 0; i < 4; i++) free(arena[i]);
    free(all); free(rev); free(brow); free(bset);
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *tokens_arg = NULL, *out = NULL, *mode = "prefill";
    int norm = -1, pos_ = -1, fin = -1, qk = -1, threads = 1, kv = LLM_KV_F32, ctx = 0, repack = 1;
    float eps = 0.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') { ckpt = a; continue; }
        if (i + 1 >= argc) fail("missing value for", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--tokens")) tokens_arg = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--norm")) { if ((norm = llm_parse_norm_type(v)) < 0) fail("bad --norm", v); }
        else if (!strcmp(a, "--norm-pos")) { if ((pos_ = llm_parse_norm_pos(v)) < 0) fail("bad --norm-pos", v); }
        else if (!strcmp(a, "--final-norm")) { if ((fin = llm_parse_on_off(v)) < 0) fail("bad --final-norm", v); }
        else if (!strcmp(a, "--norm-eps")) eps = strtof(v, NULL);
        else if (!strcmp(a, "--qk-norm")) { if ((qk = llm_parse_on_off(v)) < 0) fail("bad --qk-norm", v); }
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--kv")) { if ((kv = llm_parse_kv_type(v)) < 0) fail("bad --kv", v); }
        else if (!strcmp(a, "--ctx")) ctx = atoi(v);
        else if (!strcmp(a, "--repack")) { if ((repack = llm_parse_on_off(v)) < 0) fail("bad --repack", v); }
        else fail("unknown option", a);
    }
    int dequant = !strcmp(mode, "dequant");
    if (!ckpt || (!tokens_arg && !dequant) || !out) fail("usage: logits CKPT --tokens 1,2,3 --out FILE", NULL);
    if (dequant) tokens_arg = "";

    int T = 0, cap = 16, *tokens = malloc(cap * sizeof(int));
    for (const char *p = tokens_arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) fail("bad --tokens", tokens_arg);
        if (T == cap) tokens = realloc(tokens, (cap *= 2) * sizeof(int));
        tokens[T++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }

    size_t n;
    void *bytes = read_file(ckpt, &n);
    llm_model m;
    size_t model_bytes = llm_model_size(bytes, n);
    void *model_arena = malloc(model_bytes ? model_bytes : 1);
    if (llm_load(&m, bytes, n, model_arena, model_bytes) != LLM_OK) fail(ckpt, m.error);
    if (norm >= 0) m.cfg.norm_type = norm;
    if (pos_ >= 0) { m.cfg.norm_pos = pos_; m.cfg.final_norm = pos_ != LLM_NORM_POST; }
    if (fin >= 0) m.cfg.final_norm = fin;
    if (eps > 0.0f) m.cfg.norm_eps = eps;
    if (qk >= 0) m.cfg.qk_norm = qk;
    if (llm_check_config(&m) != LLM_OK) fail("config", m.error);
    if (dequant) {
        dump_matrices(&m, out);
        free(model_arena); free(bytes); free(tokens);
        return 0;
    }

    size_t panel_bytes = repack ? llm_repack_size(&m, 1) : 0;   /* every token's logits, below */
    void *panels = NULL;
    if (panel_bytes && posix_memalign(&panels, LLM_ALIGN, panel_bytes) != 0) fail("out of memory", NULL);
    if (panel_bytes && llm_repack(&m, panels, panel_bytes, 1) != LLM_OK) fail("repack", m.error);

    if (!strcmp(mode, "seqs")) {
        seqs(&m, tokens, T, ctx ? ctx : m.cfg.seq_len, kv, threads, out);
        free(panels); free(model_arena); free(bytes); free(tokens);
        return 0;
    }
    int batch = !strcmp(mode, "prefill") ? T : !strcmp(mode, "chunked") ? 5 : 1;
    if (batch > T) batch = T;
    llm_state_options so = { ctx ? ctx : m.cfg.seq_len, batch, 1, kv };
    size_t need = llm_state_size(&m.cfg, &so);
    void *arena = NULL;
    if (posix_memalign(&arena, LLM_ALIGN, need) != 0) fail("out of memory", NULL);
    llm_state s;
    if (llm_state_init(&s, &m, &so, arena, need) != LLM_OK) fail("state", s.error);
    s.n_threads = threads;

    int V = m.cfg.vocab_size;
    float *all = malloc((size_t)T * V * sizeof(float));
    for (int done = 0; done < T; done += batch) {
        int chunk = T - done < batch ? T - done : batch;
        if (llm_forward(&m, &s, tokens + done, chunk, done, LLM_LOGITS_ALL) != LLM_OK) fail("forward", s.error);
        memcpy(all + (size_t)done * V, s.logits, (size_t)chunk * V * sizeof(float));
    }
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(all, sizeof(float), (size_t)T * V, f) != (size_t)T * V) fail("cannot write", out);
    fclose(f);
    free(all); free(arena); free(panels); free(model_arena); free(bytes); free(tokens);
    return 0;
}
