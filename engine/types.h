/* engine/types.h -- the weight types described by data, as ggml's type
 * traits do: one const row per llm_type, which the loaders, the plan and
 * the products read instead of switching on the type. A new type (4-bit,
 * K-quants) is a row here, its scalar twins in ref.h and its tiles in
 * simd.h. Also the KV cache's layouts. */

/* Values (per element) and scales (per block, stored after all the
 * values: LLMW's q8_0 layout) of a tensor of each type. */
typedef struct llm__type_traits {
    const char *name;
    int block;              /* elements per block (scale group); 0: the tensor's group */
    int value_bytes;        /* bytes per element of the values            */
    int scale_bytes;        /* bytes per block's scale (0: no scales)     */
    int act_type;           /* what a product converts the activations to:
                               f32 as they are, q8_0 in the tensor's groups, or
                               LLM__ACT_Q16 (int16 codes in groups of 32) */
    /* row r as f32: out (cols,) */
    void (*dequant_row)(float *out, const llm_tensor *w, int r);
    /* the scalar twin: row r . x (f32), or . xq/xs (q8_0 activations) */
    float (*dot)(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
    /* the fast tile: Out[b][a] = W[r + a] . X[t + b] for a < nr, b < nc,
     * out (nc, ldo); x (T, cols) f32, or xq/xs the q8_0 activations */
    void (*tile)(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                 const float *xs, int t, int nr, int nc);
    /* GGUF's block types: elements and bytes of one stored block (values and
     * scales together, a row a run of blocks); 0 for the others */
    int qblock, qblock_bytes;
    /* rows of W a prefill tile takes (0: LLM__NR): the 4-bit types unpack
     * a group's weights for sixteen rows (x86.h) and run them against the
     * tile's tokens, so they take sixteen */
    int panel_rows;
} llm__type_traits;

/* the functions of each row: the twins in ref.h, the tiles in simd.h */
static void llm__dequant_row_f32(float *out, const llm_tensor *w, int r);
static void llm__dequant_row_f16(float *out, const llm_tensor *w, int r);
static void llm__dequant_row_q8(float *out, const llm_tensor *w, int r);
static float llm__row_dot_f32(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
static float llm__row_dot_f16(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
static float llm__row_dot_q8(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
static void llm__tile_f32(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                          const float *xs, int t, int nr, int nc);
static void llm__tile_f16(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                          const float *xs, int t, int nr, int nc);
static void llm__tile_q8(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                         const float *xs, int t, int nr, int nc);
/* GGUF's types: bf16, and the block types whose twins multiply activations
 * quantized in groups of LLM__GQ (engine/ref.h): int8 codes for q8_0,
 * int16 codes (LLM__ACT_Q16, not a weight type) for q4_0 and the K-quants,
 * where int8 activations were most of the error */
#define LLM__GQ 32
#define LLM__ACT_Q16 LLM_TYPE_COUNT
#define LLM__GG_TYPE_FNS(name)                                                                                  \
    static void llm__dequant_row_##name(float *out, const llm_tensor *w, int r);                                \
    static float llm__row_dot_##name(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs); \
    static void llm__tile_##name(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq, \
                                 const float *xs, int t, int nr, int nc);
LLM__GG_TYPE_FNS(bf16)
LLM__GG_TYPE_FNS(gq8_0)
LLM__GG_TYPE_FNS(gq4_0)
LLM__GG_TYPE_FNS(gq4_k)
LLM__GG_TYPE_FNS(gq6_k)
#undef LLM__GG_TYPE_FNS

static const llm__type_traits llm__traits[LLM_TYPE_COUNT] = {
    /* name    block value scale activations    row to f32            scalar dot        fast tile */
    { "f32",   1,    4,    0,    LLM_TYPE_F32,  llm__dequant_row_f32, llm__row_dot_f32, llm__tile_f32, 0, 0, 0 },
    { "f16",   1,    2,    0,    LLM_TYPE_F32,  llm__dequant_row_f16, llm__row_dot_f16, llm__tile_f16, 0, 0, 0 },
    { "q8_0",  0,    1,    4,    LLM_TYPE_Q8_0, llm__dequant_row_q8,  llm__row_dot_q8,  llm__tile_q8, 0, 0, 0 },
    /* GGUF's: value_bytes 1 is only the L2 blocking's estimate of a row     qblock, bytes, panel */
    { "bf16",  1,    2,    0,    LLM_TYPE_F32,  llm__dequant_row_bf16,  llm__row_dot_bf16,  llm__tile_bf16,  0, 0, 0 },
    { "gguf-q8_0", 32, 1,  0,    LLM_TYPE_Q8_0, llm__dequant_row_gq8_0, llm__row_dot_gq8_0, llm__tile_gq8_0, 32, 34, 0 },
    { "gguf-q4_0", 32, 1,  0,    LLM__ACT_Q16,  llm__dequant_row_gq4_0, llm__row_dot_gq4_0, llm__tile_gq4_0, 32, 18, 16 },
    { "gguf-q4_K", 32, 1,  0,    LLM__ACT_Q16,  llm__dequant_row_gq4_k, llm__row_dot_gq4_k, llm__tile_gq4_k, 256, 144, 16 },
    { "gguf-q6_K", 32, 1,  0,    LLM__ACT_Q16,  llm__dequant_row_gq6_k, llm__row_dot_gq6_k, llm__tile_gq6_k, 256, 210, 16 },
};
LLM__STATIC_ASSERT(sizeof(float) == 4 && sizeof(uint16_t) == 2, f32_f16_sizes);
LLM__STATIC_ASSERT(sizeof llm__traits / sizeof llm__traits[0] == LLM_TYPE_COUNT, one_row_per_type);

const char *llm_type_name(int t) { return t >= 0 && t < LLM_TYPE_COUNT ? llm__traits[t].name : "unknown"; }

/* bytes per activation code a product of type t quantizes to: 0 (f32 as
 * they are), 1 (int8) or 2 (int16); 0 for a type the file got wrong */
static int llm__act_bytes(int t) {
    if (t < 0 || t >= LLM_TYPE_COUNT) return 0;
    int a = llm__traits[t].act_type;
    return a == LLM__ACT_Q16 ? 2 : a == LLM_TYPE_Q8_0 ? 1 : 0;
}

/* elements per scale of tensor w, and scales per row (0 for unscaled types) */
static int llm__group(const llm_tensor *w) { return llm__traits[w->type].block ? llm__traits[w->type].block : w->group; }
static int llm__groups(const llm_tensor *w) {
    return llm__traits[w->type].scale_bytes ? (w->cols + llm__group(w) - 1) / llm__group(w) : 0;
}

/* Columns a product of w reads: a block type's rows are whole blocks (an
 * LLMW row that is not is zero-padded to them, FORMAT.md), others cols. */
static int llm__padded_cols(const llm_tensor *w) {
    int qb = llm__traits[w->type].qblock;
    return qb ? (w->cols + qb - 1) / qb * qb : w->cols;
}
/* bytes of one row of a GGUF block type (whole blocks, the last perhaps padded), and row r */
static size_t llm__block_row_bytes(const llm_tensor *w) {
    return (size_t)(llm__padded_cols(w) / llm__traits[w->type].qblock) * (size_t)llm__traits[w->type].qblock_bytes;
}
static const unsigned char *llm__block_row(const llm_tensor *w, int r) {
    return (const unsigned char *)w->data + (size_t)r * llm__block_row_bytes(w);
}
/* A row in repack.h's panels: runs of `unit` bytes of the file's row (a
 * q6_K block; else the whole row) each at the start of a slot of whole
 * words, and the slots padded to whole runs of eight groups, which a tile
 * takes at once (144 bytes: eight q4_0 blocks, one q4_K block; a q6_K
 * block's 210 bytes in 212) */
static size_t llm__panel_unit(const llm_tensor *w) {
    return w->type == LLM_TYPE_GGUF_Q6_K ? (size_t)llm__traits[w->type].qblock_bytes : llm__block_row_bytes(w);
}
/* A GGUF q8_0 matrix's copy in LLMW's q8_0 layout (repack.h): its int8
 * codes, (rows, cols), then at this offset its f32 scales, (rows, cols/32) */
static size_t llm__q8_copy_scales_at(const llm_tensor *w) { return (size_t)llm__align((uint64_t)w->rows * (uint64_t)w->cols); }
static size_t llm__panel_row_bytes(const llm_tensor *w) {
    if (w->type == LLM_TYPE_GGUF_Q6_K) return llm__block_row_bytes(w) / 210 * 212;
    return (llm__block_row_bytes(w) + 143) / 144 * 144;
}

/* A tensor view: (rows, cols) of `type` at data, scales at scale (or NULL). */
static llm_tensor llm__tensor(const void *data, const float *scale, int type, int rows, int cols, int group) {
    llm_tensor w;
    w.data = data; w.scale = scale; w.type = type; w.rows = rows; w.cols = cols; w.group = group;
    w.panels = NULL;
    return w;
}

/* ---- the KV cache ---- */
static size_t llm__kv_elem_bytes(int kv_type) { return kv_type == LLM_KV_F32 ? 4 : kv_type == LLM_KV_F16 ? 2 : 1; }

/* One layer's cache for the attention of one head. */
typedef struct llm__kv_view {
    const void *k, *v;
    const uint16_t *k_scale, *v_scale;
    int type, n_heads, hs;
    int prefetch;   /* 1: each block of keys asks for the next block's rows (decode) */
} llm__kv_view;

#define LLM__KEY_BLOCK 32
