/* tests/test_kernels_blocks.h -- test_kernels.c's GGUF block-type tests
 * (included by it, after its harness and helpers: one translation unit,
 * as the engine is): every block type's tiles, decode rows and threads
 * against the scalar twin bit for bit, the twin against its definition,
 * hand-made extremes, padded blocks, awkward sizes. */
/* GGUF's block types (random blocks: any bytes are a valid block, with sane
 * f16 scales): the fast tile, decode and threads against the scalar twin bit
 * for bit (integer group sums, then the twin's steps), and the twin against
 * its definition in double, sum_g xs_g sum_j w_j xq_j with w_j from
 * dequant_row, over awkward shapes (rows not a multiple of 4 or 16, 72
 * groups: past the tile's 64-group chunk). */
static void test_gguf_blocks(void) {
    int types[] = { LLM_TYPE_GGUF_Q8_0, LLM_TYPE_GGUF_Q4_0, LLM_TYPE_GGUF_Q4_K, LLM_TYPE_GGUF_Q6_K,
                    LLM_TYPE_GGUF_Q4_1, LLM_TYPE_GGUF_Q5_0, LLM_TYPE_GGUF_Q5_1, LLM_TYPE_GGUF_IQ4_NL,
                    LLM_TYPE_GGUF_Q2_K, LLM_TYPE_GGUF_Q3_K, LLM_TYPE_GGUF_Q5_K, LLM_TYPE_GGUF_IQ4_XS };
    int d_at[][2] = { { 0, -1 }, { 0, -1 }, { 0, 2 }, { 208, -1 }, { 0, 2 }, { 0, -1 }, { 0, 2 }, { 0, -1 },
                      { 80, 82 }, { 108, -1 }, { 0, 2 }, { 0, -1 } };
    int cols_k[] = { 1, 3, 9 };   /* blocks per row (q8_0/q4_0: x8 for the same shapes) */
    int Ts[] = { 1, 3, 7 };
    for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
        const llm__type_traits *tr = &llm__traits[types[ti]];
        for (int ci = 0; ci < 3; ci++) {
            for (int k = 0; k < 3; k++) {
                for (int threads = 1; threads <= 2; threads++) {
                    /* 37 rows: two of x86's 16-row q4_0 tiles and edge rows */
                    int rows = k == 1 ? 37 : 13, cols = cols_k[ci] * 256, T = Ts[k], ng = cols / 32;
                    size_t row_bytes = (size_t)(cols / tr->qblock) * (size_t)tr->qblock_bytes;
                    unsigned char *w = random_blocks(tr, rows, row_bytes, d_at[ti]);
                    llm_tensor t = llm__tensor(w, NULL, types[ti], rows, cols, 0);
                    llm_state s;
                    memset(&s, 0, sizeof s);
                    s.n_threads = threads;
                    int code_bytes = llm__act_bytes(types[ti]);   /* int8 or int16 activations */
                    s.act_q = malloc((size_t)T * cols * code_bytes);
                    s.act_scale = malloc((size_t)T * ng * 4);
                    float *x = malloc((size_t)T * cols * 4), *y = malloc((size_t)T * rows * 4);
                    float *y1 = malloc(rows * 4), *ys = malloc(rows * 4), *xs = malloc(ng * 4), *row = malloc(cols * 4);
                    int8_t *xq = malloc((size_t)cols * code_bytes);
                    fill(x, T * cols, 1.5f);
                    llm__matmul(y, &t, x, T, &s);
                    double batch_vs_one = 0, fast_vs_twin = 0, twin_vs_def = 0;
                    for (int tt = 0; tt < T; tt++) {
                        const float *xt = x + (size_t)tt * cols;
                        llm__matmul(y1, &t, xt, 1, &s);
                        llm_matvec(ys, &t, xt, xq, xs);
                        for (int r = 0; r < rows; r++) {
                            batch_vs_one = worse(batch_vs_one, fabs(y[(size_t)tt * rows + r] - y1[r]));
                            fast_vs_twin = worse(fast_vs_twin, fabs(y1[r] - ys[r]));
                            tr->dequant_row(row, &t, r);
                            double want = 0, mag = 0;
                            for (int g = 0; g < ng; g++) {
                                double gs = 0;
                                for (int j = 0; j < 32; j++) {
                                    int e = 32 * g + j;
                                    double code = code_bytes == 2 ? ((const int16_t *)(const void *)xq)[e] : xq[e];
                                    gs += (double)row[e] * code;
                                    mag += fabs(row[e] * code * xs[g]);
                                }
                                want += gs * xs[g];
                            }
                            twin_vs_def = worse(twin_vs_def, fabs(ys[r] - want) / (mag > 0 ? mag : 1));
                        }
                    }
                    char name[112];
                    snprintf(name, sizeof name, "gguf_%s_%dx%d_T%d_threads%d_batch_eq_single", tr->name, rows, cols, T, threads);
                    check(batch_vs_one == 0.0, name, "max abs diff %g (want %g: bit for bit)", batch_vs_one, 0.0);
                    snprintf(name, sizeof name, "gguf_%s_%dx%d_T%d_threads%d_fast_eq_twin", tr->name, rows, cols, T, threads);
                    check(fast_vs_twin == 0.0, name, "max abs diff %g (want %g: bit for bit)", fast_vs_twin, 0.0);
                    snprintf(name, sizeof name, "gguf_%s_%dx%d_T%d_threads%d_twin_vs_definition", tr->name, rows, cols, T, threads);
                    check(twin_vs_def <= TOL_F32, name, "max rel diff %g (tol %g)", twin_vs_def, TOL_F32);
                    void *panels = attach_panels(&t);   /* the same products from the panels */
                    if (panels) {
                        double batch_vs_file = 0, one_vs_file = 0;
                        llm__matmul(y1, &t, x, 1, &s);   /* y1: token 0 alone, y: the batch, from the file */
                        for (int r = 0; r < rows; r++) one_vs_file = worse(one_vs_file, fabs(y1[r] - y[r]));
                        float *yp = malloc((size_t)T * rows * 4);
                        llm__matmul(yp, &t, x, T, &s);
                        for (size_t i = 0; i < (size_t)T * rows; i++) batch_vs_file = worse(batch_vs_file, fabs(yp[i] - y[i]));
                        snprintf(name, sizeof name, "gguf_%s_%dx%d_T%d_threads%d_panels_eq_file", tr->name, rows, cols, T, threads);
                        check(batch_vs_file == 0.0 && one_vs_file == 0.0, name, "max abs diff %g (want %g: bit for bit)",
                              batch_vs_file > one_vs_file ? batch_vs_file : one_vs_file, 0.0);
                        free(yp); free(panels);
                    }
                    free(s.act_q); free(s.act_scale); free(x); free(y); free(y1); free(ys); free(xs); free(xq); free(row); free(w);
                }
            }
        }
    }
}

/* The block types' tiles called directly, as the driver does, with every
 * token count of a tile and beyond (nc 1..7: x86 runs four tokens at once,
 * a short tile padded) and row counts around the 16-row blocks (x86's last
 * short block overlaps the one before; 13 and 37: AVX2's eight-row panels
 * and a part) and one row, rows short of the 64-group chunk
 * and past it (q4_0, q8_0, q5_0 and q5_1 also in groups not a multiple of their
 * eight at once: 3, 9 and 73), inside a larger matrix (a row offset, ldo wider than nr):
 * each value the twin's bit for bit, and nothing written outside the tile.
 * Then again from the matrix's panels where the build repacks the type
 * (at a row offset of one panel, LLM__PANEL_ROWS: sixteen rows with
 * AVX-512, eight with AVX2, four with NEON; the driver's are whole panels),
 * and at two rows past it (a range starting inside a panel: the file's
 * rows). */
static void test_gguf_tile_shapes(void) {
    int types[] = { LLM_TYPE_GGUF_Q4_0, LLM_TYPE_GGUF_Q4_K, LLM_TYPE_GGUF_Q6_K, LLM_TYPE_GGUF_Q4_1,
                    LLM_TYPE_GGUF_Q5_0, LLM_TYPE_GGUF_Q5_1, LLM_TYPE_GGUF_IQ4_NL, LLM_TYPE_GGUF_Q2_K,
                    LLM_TYPE_GGUF_Q3_K, LLM_TYPE_GGUF_Q5_K, LLM_TYPE_GGUF_IQ4_XS, LLM_TYPE_GGUF_Q8_0 };
    int d_at[][2] = { { 0, -1 }, { 0, 2 }, { 208, -1 }, { 0, 2 }, { 0, -1 }, { 0, 2 }, { 0, -1 }, { 80, 82 },
                      { 108, -1 }, { 0, 2 }, { 0, -1 }, { 0, -1 } };
    int colss[][3] = { { 96, 256, 2336 }, { 256, 2304, 0 }, { 256, 2304, 0 }, { 96, 288, 2336 }, { 96, 288, 2336 },
                       { 96, 288, 2336 }, { 96, 288, 2336 }, { 256, 2304, 0 }, { 256, 2304, 0 }, { 256, 2304, 0 },
                       { 256, 2304, 0 }, { 96, 288, 2336 } }, nrs[] = { 1, 5, 13, 16, 21, 37, 40 };
    enum { ROWS = 64, T = 9, T0 = 1, LDO = 50 };
    for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
        const llm__type_traits *tr = &llm__traits[types[ti]];
        for (int ci = 0; ci < 3 && colss[ti][ci]; ci++) {
            int cols = colss[ti][ci], ng = cols / 32;
            size_t row_bytes = (size_t)(cols / tr->qblock) * (size_t)tr->qblock_bytes;
            unsigned char *w = random_blocks(tr, ROWS, row_bytes, d_at[ti]);
            llm_tensor t = llm__tensor(w, NULL, types[ti], ROWS, cols, 0);
            int16_t *xq = malloc((size_t)T * cols * 2);
            float *x = malloc((size_t)cols * 4), *xs = malloc((size_t)T * ng * 4), *out = malloc((size_t)T * LDO * 4);
            for (int b = 0; b < T; b++) {
                fill(x, cols, 1.5f);
                llm__quantize_acts(&t, (int8_t *)(void *)(xq + (size_t)b * cols), xs + (size_t)b * ng, x);
            }
            void *panels = NULL;
            for (int pan = 0; pan < 3; pan++) {   /* 2: panels attached, rows starting inside one */
              if (pan == 1 && !(panels = attach_panels(&t))) break;
              int R0 = pan == 1 ? LLM__PANEL_ROWS : pan == 2 ? LLM__PANEL_ROWS + 2 : 3;
              for (int ni = 0; ni < (int)(sizeof nrs / sizeof nrs[0]); ni++) {
                for (int nc = 1; nc <= 7; nc++) {
                    int nr = nrs[ni], stray = 0;
                    double worst = 0;
                    for (int i = 0; i < T * LDO; i++) out[i] = 12345.0f;
                    tr->tile(out, LDO, &t, R0, NULL, (const int8_t *)(const void *)xq, xs, T0, nr, nc);
                    for (int b = 0; b < T - T0; b++)
                        for (int a = 0; a < LDO; a++) {
                            float got = out[(size_t)b * LDO + a];
                            if (b >= nc || a >= nr) { stray |= got != 12345.0f; continue; }
                            const int8_t *xb = (const int8_t *)(const void *)(xq + (size_t)(T0 + b) * cols);
                            float want = tr->dot(&t, R0 + a, NULL, xb, xs + (size_t)(T0 + b) * ng);
                            worst = worse(worst, fabs(got - want));
                        }
                    char name[112];
                    const char *from = pan == 1 ? "_panels" : pan == 2 ? "_panels_inside" : "";
                    snprintf(name, sizeof name, "gguf_%s_tile%s_%dx%d_nc%d_eq_twin", tr->name, from, nr, cols, nc);
                    check(worst == 0.0, name, "max abs diff %g (want %g: bit for bit)", worst, 0.0);
                    snprintf(name, sizeof name, "gguf_%s_tile%s_%dx%d_nc%d_writes_only_its_tile", tr->name, from, nr, cols, nc);
                    check(!stray, name, "stray writes %g (want %g)", stray, 0.0);
                }
              }
            }
            free(panels); free(w); free(xq); free(x); free(xs); free(out);
        }
    }
}

/* q4_0 blocks whose f16 d is no ordinary number: subnormal, zero of either
 * sign, the largest finite, infinity and NaN (Helium converts four at once
 * with its vector VCVTB, the twin one by one), on 1 to 7 rows, so that a
 * tile of four rows has 1, 2 and 3 left over: each value the twin's bit
 * for bit (NaN where the twin's is NaN), and nothing written past nr. */
static void test_gguf_q4_0_odd_scales(void) {
    const llm__type_traits *tr = &llm__traits[LLM_TYPE_GGUF_Q4_0];
    uint16_t ds[] = { 0x0001, 0x03FF, 0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x7C00, 0x7E00, 0x8001, 0x3C00, 0x0400 };
    enum { ROWS = 7, COLS = 96, NG = COLS / 32, ND = sizeof ds / sizeof ds[0] };
    int no_d[2] = { -1, -1 }, wrong = 0, stray = 0;
    unsigned char *w = random_blocks(tr, ROWS, NG * 18, no_d);
    for (int b = 0; b < ROWS * NG; b++) memcpy(w + (size_t)b * 18, &ds[b % ND], 2);
    llm_tensor t = llm__tensor(w, NULL, LLM_TYPE_GGUF_Q4_0, ROWS, COLS, 0);
    float x[COLS], xs[NG], out[ROWS + 1];
    /* room for four tokens: GCC's -Warray-bounds follows x86's tile into tokens nc never reaches */
    int16_t *xq = calloc(4 * COLS, 2);
    fill(x, COLS, 1.5f);
    llm__quantize_acts(&t, (int8_t *)(void *)xq, xs, x);
    for (int nr = 1; nr <= ROWS; nr++) {
        for (int a = 0; a <= ROWS; a++) out[a] = 12345.0f;
        tr->tile(out, ROWS, &t, 0, NULL, (const int8_t *)(const void *)xq, xs, 0, nr, 1);
        for (int a = 0; a < nr; a++) {
            float want = tr->dot(&t, a, NULL, (const int8_t *)(const void *)xq, xs);
            wrong += isnan(want) ? !isnan(out[a]) : memcmp(&want, &out[a], 4) != 0;
        }
        for (int a = nr; a <= ROWS; a++) stray += out[a] != 12345.0f;
    }
    check(wrong == 0, "gguf_q4_0_odd_scales_eq_twin", "%g values differ (want %g: bit for bit)", wrong, 0);
    check(stray == 0, "gguf_q4_0_odd_scales_writes_only_nr", "%g stray writes (want %g)", stray, 0);
    free(w); free(xq);
}

/* LLMW's q4_0 and q4_K rows of any length, zero-padded to whole blocks in
 * the file: the products run the block kernels on the padded row with the
 * activations' codes zero-padded, so the padding adds nothing whatever its
 * bytes hold (random here, where the writer puts zeros). Tile, decode and
 * threads against the twin bit for bit; the twin against its definition
 * over the real columns only; dequant_row writes the real columns only. */
static void test_padded_blocks(void) {
    int types[] = { LLM_TYPE_GGUF_Q4_0, LLM_TYPE_GGUF_Q4_K }, d_at[][2] = { { 0, -1 }, { 0, 2 } };
    int colss[] = { 64, 100, 172, 300 }, Ts[] = { 1, 5 };
    for (int ti = 0; ti < 2; ti++) {
        const llm__type_traits *tr = &llm__traits[types[ti]];
        for (int ci = 0; ci < 4; ci++) {
            for (int k = 0; k < 2; k++) {
                for (int threads = 1; threads <= 2; threads++) {
                    int rows = 13, cols = colss[ci], T = Ts[k];
                    int np = (cols + tr->qblock - 1) / tr->qblock * tr->qblock, ng = np / 32;
                    size_t row_bytes = (size_t)(np / tr->qblock) * (size_t)tr->qblock_bytes;
                    unsigned char *w = random_blocks(tr, rows, row_bytes, d_at[ti]);
                    llm_tensor t = llm__tensor(w, NULL, types[ti], rows, cols, 32);
                    llm_state s;
                    memset(&s, 0, sizeof s);
                    s.n_threads = threads;
                    int cb = llm__act_bytes(types[ti]);   /* bytes per activation code */
                    s.act_q = malloc((size_t)T * np * cb);
                    s.act_scale = malloc((size_t)T * ng * 4);
                    float *x = malloc((size_t)T * cols * 4), *y = malloc((size_t)T * rows * 4);
                    float *y1 = malloc(rows * 4), *ys = malloc(rows * 4), *xs = malloc(ng * 4), *row = malloc((np + 1) * 4);
                    int8_t *xq = malloc((size_t)np * cb);
                    const int16_t *xq16 = (const int16_t *)(const void *)xq;
                    fill(x, T * cols, 1.5f);
                    llm__matmul(y, &t, x, T, &s);
                    double batch_vs_one = 0, fast_vs_twin = 0, twin_vs_def = 0;
                    int past_end = 0;
                    for (int tt = 0; tt < T; tt++) {
                        const float *xt = x + (size_t)tt * cols;
                        llm__matmul(y1, &t, xt, 1, &s);
                        llm_matvec(ys, &t, xt, xq, xs);
                        for (int r = 0; r < rows; r++) {
                            batch_vs_one = worse(batch_vs_one, fabs(y[(size_t)tt * rows + r] - y1[r]));
                            fast_vs_twin = worse(fast_vs_twin, fabs(y1[r] - ys[r]));
                            row[cols] = 12345.0f;
                            tr->dequant_row(row, &t, r);
                            past_end |= row[cols] != 12345.0f;
                            double want = 0, mag = 0;
                            for (int j = 0; j < cols; j++) {
                                double code = cb == 2 ? xq16[j] : xq[j];
                                want += (double)row[j] * code * xs[j / 32];
                                mag += fabs((double)row[j] * code * xs[j / 32]);
                            }
                            twin_vs_def = worse(twin_vs_def, fabs(ys[r] - want) / (mag > 0 ? mag : 1));
                        }
                    }
                    char name[112];
                    snprintf(name, sizeof name, "padded_%s_%dx%d_T%d_threads%d_batch_eq_single", tr->name, rows, cols, T, threads);
                    check(batch_vs_one == 0.0, name, "max abs diff %g (want %g: bit for bit)", batch_vs_one, 0.0);
                    snprintf(name, sizeof name, "padded_%s_%dx%d_T%d_threads%d_fast_eq_twin", tr->name, rows, cols, T, threads);
                    check(fast_vs_twin == 0.0, name, "max abs diff %g (want %g: bit for bit)", fast_vs_twin, 0.0);
                    snprintf(name, sizeof name, "padded_%s_%dx%d_T%d_threads%d_twin_vs_real_columns", tr->name, rows, cols, T, threads);
                    check(twin_vs_def <= TOL_F32, name, "max rel diff %g (tol %g)", twin_vs_def, TOL_F32);
                    snprintf(name, sizeof name, "padded_%s_%dx%d_dequant_stops_at_cols", tr->name, rows, cols);
                    check(!past_end, name, "dequant_row wrote past column %g (want %g: none)", (double)cols, 0.0);
                    free(s.act_q); free(s.act_scale); free(x); free(y); free(y1); free(ys); free(xs); free(xq); free(row); free(w);
                }
            }
        }
    }
}

/* q6_K's largest group sums: codes -32 with scales -128 against activations
 * all at the int16 code limit (2 * 16 * 32 * 128 * 16383, just below 2^31):
 * twin and tile give 256 * 128 * 32 per block, so no int32 overflowed */
static void test_gguf_q6_K_extremes(void) {
    int rows = 21, cols = 512;   /* x86's 16-row tile and its edge */
    unsigned char *w = calloc((size_t)rows * 2, 210);
    uint16_t one = llm_f32_to_f16(1.0f);
    for (int b = 0; b < rows * 2; b++) {
        memset(w + (size_t)b * 210 + 192, 0x80, 16);   /* sc = -128; ql = qh = 0: code -32 */
        memcpy(w + (size_t)b * 210 + 208, &one, 2);
    }
    llm_tensor t = llm__tensor(w, NULL, LLM_TYPE_GGUF_Q6_K, rows, cols, 0);
    llm_state s;
    memset(&s, 0, sizeof s);
    s.n_threads = 1;
    s.act_q = malloc((size_t)cols * 2);
    s.act_scale = malloc((size_t)cols / 32 * 4);
    float x[512], y[21], ys[21], xs[16], worst = 0.0f;
    int16_t xq[512];
    for (int j = 0; j < cols; j++) x[j] = 0.75f;
    llm__matmul(y, &t, x, 1, &s);
    llm_matvec(ys, &t, x, (int8_t *)(void *)xq, xs);
    for (int r = 0; r < rows; r++) {
        float want = 2 * 256 * 128 * 32 * 0.75f;
        worst = fmaxf(worst, fmaxf(fabsf(y[r] - want), fabsf(ys[r] - want)) / want);
    }
    check(worst <= 1e-6f && xq[0] == 16383, "gguf_q6_K_largest_sums_fit_int32", "max rel diff %g (tol %g)", worst, 1e-6);
    free(s.act_q); free(s.act_scale); free(w);
}

/* q5_K's largest group sums: every code 31 (nibbles 15, fifth bits set),
 * scales and mins 63, against activations all at the int16 code limit,
 * +0.75 and -0.75: x86's panel tiles keep a code's pair at 256 times the
 * code (16 * 256 * 31 * 16383, just below 2^31), so an overflow, or a lost
 * fifth bit, shows. Each row (21: a 16-row tile and its edge) is
 * 512 * 0.75 * (d * 63 * 31 - dmin * 63) with d = 1, dmin = 0.5, from
 * the file's rows, one token and three, and from the panels where the
 * build repacks q5_K; the twin the same. */
static void test_gguf_q5_K_extremes(void) {
    enum { ROWS = 21, COLS = 512, NB = COLS / 256, T = 3 };
    const llm__type_traits *tr = &llm__traits[LLM_TYPE_GGUF_Q5_K];
    unsigned char *w = malloc((size_t)ROWS * NB * LLM__Q5_K_BYTES);
    uint16_t one = llm_f32_to_f16(1.0f), half = llm_f32_to_f16(0.5f);
    for (int b = 0; b < ROWS * NB; b++) {
        unsigned char *blk = w + (size_t)b * LLM__Q5_K_BYTES;
        memset(blk, 0xFF, LLM__Q5_K_BYTES);   /* scales, mins 63; qh, qs all ones: codes 31 */
        memcpy(blk, &one, 2);
        memcpy(blk + 2, &half, 2);
    }
    llm_tensor t = llm__tensor(w, NULL, LLM_TYPE_GGUF_Q5_K, ROWS, COLS, 0);
    llm_state s;
    memset(&s, 0, sizeof s);
    s.n_threads = 1;
    s.act_q = malloc((size_t)T * COLS * 2);
    s.act_scale = malloc((size_t)T * COLS / 32 * 4);
    float *x = malloc((size_t)T * COLS * 4), y[T * ROWS], ys[ROWS], xs[COLS / 32];
    int16_t xq[COLS];
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int j = 0; j < T * COLS; j++) x[j] = 0.75f * (float)sign;
        float want = (float)sign * 0.75f * COLS * (63.0f * 31.0f - 0.5f * 63.0f), worst = 0.0f;
        for (int pan = 0; pan < 2; pan++) {
            void *panels = pan ? attach_panels(&t) : NULL;
            if (pan && !panels) break;
            for (int nc = 1; nc <= T; nc += T - 1) {
                llm__matmul(y, &t, x, nc, &s);
                for (int i = 0; i < nc * ROWS; i++) worst = fmaxf(worst, fabsf(y[i] - want) / fabsf(want));
            }
            free(panels);
            t.panels = NULL;
        }
        llm_matvec(ys, &t, x, (int8_t *)(void *)xq, xs);
        for (int r = 0; r < ROWS; r++) worst = fmaxf(worst, fabsf(ys[r] - want) / fabsf(want));
        char name[80];
        snprintf(name, sizeof name, "gguf_q5_K_largest_sums_fit_int32_sign%+d", sign);
        check(worst <= 1e-6f && xq[0] == sign * 16383 && tr->qblock == 256, name, "max rel diff %g (tol %g)", worst, 1e-6);
    }
    free(s.act_q); free(s.act_scale); free(x); free(w);
}

/* ---- every block type's tile and the f32/f16 decode rows at awkward sizes ----
 * (NEON runs q8_0, q4_0 and q4_1 eight rows at a time, the other types four, f32
 * and f16 decode eight rows side by side, sixteen columns a step: here rows
 * 1, 3, 6, 7, 9, 17 leave remainders 1, 2, 3 of four and 1, 3, 6, 7 of
 * eight.) The block types' tiles called directly, at a row offset and with
 * ldo wider than nr, tokens 1 and 3 at
 * once: each value the twin's bit for bit (widths of 288, one group, 65 and
 * 72 groups: past the 64-group chunk), nothing written outside the tile.
 * f32/f16: a token alone (decode's rows) against the same token inside a
 * tile of four rows and three tokens (prefill's tile), bit for bit, and
 * both against the scalar twin within TOL_SIMD. */
static void test_tiles_awkward(void) {
    int types[] = { LLM_TYPE_GGUF_Q8_0, LLM_TYPE_GGUF_Q4_0, LLM_TYPE_GGUF_Q4_K, LLM_TYPE_GGUF_Q6_K,
                    LLM_TYPE_GGUF_Q5_0, LLM_TYPE_GGUF_Q5_1, LLM_TYPE_GGUF_Q5_K, LLM_TYPE_GGUF_IQ4_NL,
                    LLM_TYPE_GGUF_Q4_1, LLM_TYPE_GGUF_Q3_K, LLM_TYPE_GGUF_Q2_K, LLM_TYPE_GGUF_IQ4_XS };
    int d_at[][2] = { { 0, -1 }, { 0, -1 }, { 0, 2 }, { 208, -1 }, { 0, -1 }, { 0, 2 }, { 0, 2 }, { 0, -1 },
                      { 0, 2 }, { 108, -1 }, { 80, 82 }, { 0, -1 } };
    int colss[][3] = { { 288, 32, 2080 }, { 288, 32, 2080 }, { 256, 768, 2304 }, { 256, 768, 2304 },
                       { 288, 32, 2080 }, { 288, 32, 2080 }, { 256, 768, 2304 }, { 288, 32, 2080 },
                       { 288, 32, 2080 }, { 256, 768, 2304 }, { 256, 768, 2304 }, { 256, 768, 2304 } };
    int nrs[] = { 1, 3, 6, 7, 9, 17 };
    enum { ROWS = 24, R0 = 2, T = 4, LDO = 21 };
    for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
        const llm__type_traits *tr = &llm__traits[types[ti]];
        int code_bytes = llm__act_bytes(types[ti]);
        for (int ci = 0; ci < 3; ci++) {
            int cols = colss[ti][ci], ng = cols / 32;
            size_t row_bytes = (size_t)(cols / tr->qblock) * (size_t)tr->qblock_bytes;
            unsigned char *w = random_blocks(tr, ROWS, row_bytes, d_at[ti]);
            llm_tensor t = llm__tensor(w, NULL, types[ti], ROWS, cols, 0);
            int8_t *xq = malloc((size_t)T * cols * code_bytes);
            float *x = malloc((size_t)cols * 4), *xs = malloc((size_t)T * ng * 4), *out = malloc((size_t)T * LDO * 4);
            for (int b = 0; b < T; b++) {
                fill(x, cols, 1.5f);
                llm__quantize_acts(&t, xq + (size_t)b * cols * code_bytes, xs + (size_t)b * ng, x);
            }
            for (int ni = 0; ni < (int)(sizeof nrs / sizeof nrs[0]); ni++) {
                for (int nc = 1; nc <= 3; nc += 2) {
                    int nr = nrs[ni], stray = 0;
                    double worst = 0;
                    for (int i = 0; i < T * LDO; i++) out[i] = 12345.0f;
                    tr->tile(out, LDO, &t, R0, NULL, xq, xs, 1, nr, nc);
                    for (int b = 0; b < T - 1; b++)
                        for (int a = 0; a < LDO; a++) {
                            float got = out[(size_t)b * LDO + a];
                            if (b >= nc || a >= nr) { stray |= got != 12345.0f; continue; }
                            float want = tr->dot(&t, R0 + a, NULL, xq + (size_t)(1 + b) * cols * code_bytes, xs + (size_t)(1 + b) * ng);
                            worst = worse(worst, fabs(got - want));
                        }
                    char name[112];
                    snprintf(name, sizeof name, "awkward_%s_tile_%dx%d_nc%d_eq_twin", tr->name, nr, cols, nc);
                    check(worst == 0.0, name, "max abs diff %g (want %g: bit for bit)", worst, 0.0);
                    snprintf(name, sizeof name, "awkward_%s_tile_%dx%d_nc%d_writes_only_its_tile", tr->name, nr, cols, nc);
                    check(!stray, name, "stray writes %g (want %g)", stray, 0.0);
                }
            }
            free(w); free(xq); free(x); free(xs); free(out);
        }
    }
    int fp_types[] = { LLM_TYPE_F32, LLM_TYPE_F16 }, fp_cols[] = { 1, 3, 4, 15, 16, 17, 31, 288 };
    for (int ti = 0; ti < 2; ti++) {
        for (int ci = 0; ci < 8; ci++) {
            int cols = fp_cols[ci];
            test_matrix m = make_matrix(fp_types[ti], 20, cols, 32);
            float *x = malloc((size_t)3 * cols * 4), one[17], tile[3 * 4];
            fill(x, 3 * cols, 1.5f);
            for (int ni = 0; ni < 5; ni++) {
                int nr = nrs[ni];
                double batch_vs_one = 0, vs_scalar = 0;
                for (int b = 0; b < 3; b++) {
                    const float *xb = x + (size_t)b * cols;
                    llm__traits[fp_types[ti]].tile(one, nr, &m.m, 1, x, NULL, NULL, b, nr, 1);   /* decode's rows */
                    for (int a0 = 0; a0 < nr; a0 += 4) {
                        int na = nr - a0 < 4 ? nr - a0 : 4;
                        llm__traits[fp_types[ti]].tile(tile, 4, &m.m, 1 + a0, x, NULL, NULL, 0, na, 3);   /* prefill's tile */
                        for (int a = 0; a < na; a++) batch_vs_one = worse(batch_vs_one, fabs(tile[b * 4 + a] - one[a0 + a]));
                    }
                    for (int a = 0; a < nr; a++) {
                        double mag = 0;
                        for (int c = 0; c < cols; c++) mag += fabs(m.ref[(size_t)(1 + a) * cols + c] * xb[c]);
                        float ys = llm__traits[fp_types[ti]].dot(&m.m, 1 + a, xb, NULL, NULL);
                        vs_scalar = worse(vs_scalar, fabs(one[a] - ys) / (mag > 0 ? mag : 1));
                    }
                }
                char name[112];
                snprintf(name, sizeof name, "awkward_%s_decode_rows_%dx%d_eq_prefill_tile", llm_type_name(fp_types[ti]), nr, cols);
                check(batch_vs_one == 0.0, name, "max abs diff %g (want %g: bit for bit)", batch_vs_one, 0.0);
                snprintf(name, sizeof name, "awkward_%s_decode_rows_%dx%d_vs_scalar", llm_type_name(fp_types[ti]), nr, cols);
                check(vs_scalar <= TOL_SIMD, name, "max rel diff %g (tol %g)", vs_scalar, TOL_SIMD);
            }
            free(x); free_matrix(&m);
        }
    }
}

