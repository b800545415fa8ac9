/* engine/repack.h -- load-time repacking into the panels x86_gguf.h's
 * tiles read. A panel holds P = LLM__PANEL_ROWS rows of a matrix (the
 * build's lanes: sixteen with AVX-512 VNNI, eight with AVX2), Pp .. Pp +
 * P - 1, as their words side by side: its vector k (4P bytes) holds bytes
 * 4k .. 4k + 3 of each of the P rows, row Pp + i in lane i. That is what
 * the AVX-512 tiles build from the file's rows with a transpose per 16
 * bytes of each row, out of sixteen streams the hardware prefetcher loses
 * track of; from a panel they load each vector as it is, out of one
 * stream. Rows past the
 * matrix's end and bytes past a row's end are zeros (llm__panel_row_bytes:
 * rows padded to whole runs of eight groups, which a tile takes at once; a
 * q6_K block's 210 bytes each in 212, so its words stay whole). The
 * tiles compute the same integer sums and the same float steps, so the
 * bits are those of the file's layout (a q8_0 block's 34 bytes each in 36,
 * a q5_0 block's 22 in 24).
 * Only the products' matrices are repacked; the file's bytes stay their
 * data. NEON with dotprod has its own four-row layout, for q4_0, iq4_nl
 * and q4_K only (neon.h: llm__neon_repacks, _panels_size, _repack); the
 * boards repack nothing. */
#ifndef LLM__PANEL_ROWS
#define LLM__PANEL_ROWS 16   /* no panels in this build: the sizes below are never asked */
#endif

/* LLMW's own q8_0 in groups of 32 (x86.h's LLM__HAVE_Q8_PANELS): its
 * decode reads panels too, each group a unit of LLM__Q8_PANEL_SLOT bytes:
 * the row's f32 scale, then its 32 codes (plus LLM__Q8_PANEL_BIAS) */
static int llm__q8_panels(const llm_tensor *w) {
#ifdef LLM__HAVE_Q8_PANELS
    return w->data && w->scale && w->type == LLM_TYPE_Q8_0 && w->group == 32 && w->cols % 32 == 0;
#else
    (void)w;
    return 0;
#endif
}
#ifdef LLM__HAVE_Q8_PANELS
/* group u of row r of LLMW q8_0 w as a panel unit, in buf */
static const unsigned char *llm__q8_panel_unit(unsigned char *buf, const llm_tensor *w, int r, size_t u) {
    const int8_t *codes = (const int8_t *)w->data + (size_t)r * (size_t)w->cols + 32 * u;
    memcpy(buf, w->scale + (size_t)r * (size_t)(w->cols / 32) + u, 4);
    for (int j = 0; j < 32; j++) buf[4 + j] = (unsigned char)((unsigned char)codes[j] ^ LLM__Q8_PANEL_BIAS);
    return buf;
}
#define LLM__Q8_UNIT LLM__Q8_PANEL_SLOT
LLM__STATIC_ASSERT(LLM__PANEL_ROWS == LLM__VL, q8_panels_are_the_lanes);
#else
#define llm__q8_panel_unit(buf, w, r, u) ((void)(w), (void)(r), (void)(u), (const unsigned char *)(buf))
#define LLM__Q8_UNIT 36
#endif

/* 1 when this build repacks w: q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K, where it has the panel
 * tiles, and LLMW's q8_0 (above) (x86); NEON's: q4_0, iq4_nl and q4_K */
static int llm__repacks(const llm_tensor *w) {
    if (llm__q8_panels(w)) return 1;
#if defined(LLM__NEON_PANELS)   /* NEON's own four-row panels, for the types neon.h names */
    return w->data && llm__neon_repacks(w->type);
#elif defined(LLM__HAVE_PANELS)
    return w->data && llm__traits[w->type].panel_rows;
#else
    (void)w;
    return 0;
#endif
}

/* bytes of a row of w in a panel */
static size_t llm__repack_row_bytes(const llm_tensor *w) {
    return llm__q8_panels(w) ? (size_t)(w->cols / 32) * LLM__Q8_UNIT : llm__panel_row_bytes(w);
}

/* bytes of w's panels (0: not repacked) */
static uint64_t llm__panels_size(const llm_tensor *w) {
    if (!llm__repacks(w)) return 0;
#ifdef LLM__NEON_PANELS
    return llm__neon_panels_size(w);
#else
    return llm__mul(((uint64_t)w->rows + LLM__PANEL_ROWS - 1) / LLM__PANEL_ROWS * LLM__PANEL_ROWS, llm__repack_row_bytes(w));
#endif
}

/* w's rows into panels at dst (llm__panels_size bytes) */
static void llm__repack_panels(unsigned char *dst, const llm_tensor *w) {
#ifdef LLM__NEON_PANELS
    llm__neon_repack(dst, w);
#else
    int q8 = llm__q8_panels(w);
    size_t rb = q8 ? (size_t)(w->cols / 32) * LLM__Q8_UNIT : llm__block_row_bytes(w), words = llm__repack_row_bytes(w) / 4;
    size_t unit = q8 ? LLM__Q8_UNIT : llm__panel_unit(w), slot_words = (unit + 3) / 4, vb = 4 * LLM__PANEL_ROWS;   /* vb: a vector's bytes */
    unsigned char buf[LLM__Q8_UNIT];
    memset(dst, 0, (size_t)llm__panels_size(w));   /* the padding: rows past the end, bytes past a row's or unit's */
    for (int r = 0; r < w->rows; r++) {
        const unsigned char *row = q8 ? NULL : llm__block_row(w, r);
        unsigned char *lane = dst + (size_t)(r / LLM__PANEL_ROWS) * words * vb + 4 * (size_t)(r % LLM__PANEL_ROWS);
        for (size_t u = 0; u < rb / unit; u++) {   /* word k of unit u to word (slot u, k) of the lane */
            const unsigned char *from = q8 ? llm__q8_panel_unit(buf, w, r, u) : row + u * unit;
            unsigned char *to = lane + u * slot_words * vb;
            size_t k = 0;
            for (; 4 * k + 4 <= unit; k++) memcpy(to + vb * k, from + 4 * k, 4);
            if (4 * k < unit) memcpy(to + vb * k, from + 4 * k, unit - 4 * k);   /* a unit not of whole words */
        }
    }
#endif
}

/* The matrices the products read: each layer's seven, then the classifier
 * (i up to 7 n_layers; another tensor than tok_embeddings even when the
 * classifier shares its bytes, so the lookup keeps reading the file) */
static llm_tensor *llm__product_matrix(llm_model *m, int i) {
    if (i == 7 * m->cfg.n_layers) return &m->w.classifier;
    llm_layer *l = &m->w.layers[i / 7];
    llm_tensor *all[7] = { &l->wq, &l->wk, &l->wv, &l->wo, &l->w1, &l->w2, &l->w3 };
    return all[i % 7];
}

/* The panels' bytes in all, each tensor's 64-aligned; at dst (when not NULL)
 * each repacked tensor is copied and pointed at its panels. all_logits
 * (whether a batch computes every token's logits) changes nothing now that
 * no q8_0 copy is made; the API keeps it. */
static uint64_t llm__repack_walk(llm_model *m, unsigned char *dst, int all_logits) {
    uint64_t at = 0;
    (void)all_logits;
    for (int i = 0; m->w.layers && i <= 7 * m->cfg.n_layers; i++) {
        llm_tensor *w = llm__product_matrix(m, i);
        uint64_t bytes = llm__panels_size(w);
        if (!bytes) continue;
        if (dst) {
            llm__repack_panels(dst + (size_t)at, w);
            w->panels = dst + (size_t)at;
        }
        at = llm__add(at, llm__align(bytes));
    }
    return at;
}

size_t llm_repack_size(const llm_model *m, int all_logits) {
    llm_model view = *m;   /* the walk only counts: a copy's tensors, the same layers */
    uint64_t total = llm__repack_walk(&view, NULL, all_logits);
    return total > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)total;
}

int llm_repack(llm_model *m, void *arena, size_t arena_size, int all_logits) {
    uint64_t need = llm__repack_walk(m, NULL, all_logits);
    if (!need) return LLM_OK;
    if (!arena || (uintptr_t)arena % LLM_ALIGN || (uint64_t)arena_size < need) {
        llm__fmt(m->error, sizeof m->error, "repacking arena of %zu bytes at %p is too small or not %d-aligned: need %llu",
                 arena_size, arena, LLM_ALIGN, (unsigned long long)need);
        return LLM_ERR_ARENA;
    }
    llm__repack_walk(m, (unsigned char *)arena, all_logits);
    return LLM_OK;
}
