/* engine/types.h -- the weight types described by data, as ggml's type
 * traits do: one const row per llm_type, which the loaders, the plan and
 * the products read instead of switching on the type. Also the KV cache's
 * element sizes (its views: attention.h).
 *
 * Names: a type is spelled as ggml spells its block (q4_0, q4_K, iq4_nl;
 * LLMW's own int8 groups are q8); the prefix blk_ / LLM__BLK_ marks the
 * GGUF block kernels, gguf_ the file's parser (gguf.h, load_gguf.h).
 *
 * A new GGUF block type, as a checklist (each of the eight added after
 * q6_K followed it):
 *   1. model.h: its llm_type value (before LLM_TYPE_COUNT).
 *   2. here: its block's size as a named constant with a static assert
 *      that it is the sum of its fields (LLM__*_BYTES below), its
 *      functions' declarations (LLM__BLK_TYPE_FNS) and its row in
 *      llm__traits: qblock, qblock_bytes, act_type (LLM__ACT_Q16: int16
 *      activation codes per group of 32), panel_rows and the panel fields
 *      0 unless a fast tile reads repack.h's panels.
 *   3. ref.h: its scalar twin, written from the format's definition: the
 *      layout in the comment, llm__gsum2_<t> (a group's exact integer
 *      sums) and llm__gstep2_<t> (the group's one fused step), a line
 *      LLM__BLK2_DOT(<t>), and llm__dequant_row_blk_<t>.
 *   4. simd.h: LLM__BLK2_TILE(<t>) under #ifndef LLM__HAVE_BLK_TILE_<T>:
 *      its generic tile (the twin's sums and steps, so the twin's bits),
 *      which every target runs unless its ISA file defines
 *      LLM__HAVE_BLK_TILE_<T> and its own llm__tile_blk_<t> (optional; it must
 *      give the twin's bits: tests/test_kernels.c checks it). x86_gguf.h's, for
 *      most types: an llm__gw_<t> unpacking a group's codes to int16, an
 *      LLM__BLK_SUMS_NC line, and LLM__BLK_TILE8 with the twin's step.
 *   5. gguf.h: its ggml id in llm__ggml_types; load_gguf.h: the refusal
 *      message's list of types (llm__gguf_check_tensor).
 *   6. tests: tests/gguf_writer.py (BLOCK, random_blocks, dequantize, a
 *      quantizer), a hand-worked block in tests/test_gguf.py, the type in
 *      test_kernels.c's GGUF type lists, a seed in tests/fuzz/make_seeds.py.
 */

/* GGUF's blocks: bytes of one block (ggml's layouts, ref.h), each the sum
 * of its fields. LLM__QK: elements of a K-quant (or IQ4_XS) superblock. */
#define LLM__QK 256
#define LLM__Q8_0_BYTES 34      /* f16 d, int8 q[32] */
#define LLM__Q4_0_BYTES 18      /* f16 d, u8 qs[16] */
#define LLM__Q4_1_BYTES 20      /* f16 d, f16 m, u8 qs[16] */
#define LLM__Q5_0_BYTES 22      /* f16 d, u8 qh[4], u8 qs[16] */
#define LLM__Q5_1_BYTES 24      /* f16 d, f16 m, u8 qh[4], u8 qs[16] */
#define LLM__IQ4_NL_BYTES 18    /* f16 d, u8 qs[16] */
#define LLM__Q2_K_BYTES 84      /* u8 scales[16], u8 qs[64], f16 d, f16 dmin */
#define LLM__Q3_K_BYTES 110     /* u8 hmask[32], u8 qs[64], u8 scales[12], f16 d */
#define LLM__Q4_K_BYTES 144     /* f16 d, f16 dmin, u8 scales[12], u8 qs[128] */
#define LLM__Q5_K_BYTES 176     /* f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128] */
#define LLM__Q6_K_BYTES 210     /* u8 ql[128], u8 qh[64], int8 scales[16], f16 d */
#define LLM__IQ4_XS_BYTES 136   /* f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128] */
LLM__STATIC_ASSERT(LLM__Q8_0_BYTES == 2 + 32 && LLM__Q4_0_BYTES == 2 + 16 && LLM__Q4_1_BYTES == 2 + 2 + 16, q8_0_q4_blocks);
LLM__STATIC_ASSERT(LLM__Q5_0_BYTES == 2 + 4 + 16 && LLM__Q5_1_BYTES == 2 + 2 + 4 + 16 && LLM__IQ4_NL_BYTES == 2 + 16, q5_iq4_nl_blocks);
LLM__STATIC_ASSERT(LLM__Q2_K_BYTES == LLM__QK / 16 + LLM__QK / 4 + 2 + 2, q2_K_block);
LLM__STATIC_ASSERT(LLM__Q3_K_BYTES == LLM__QK / 8 + LLM__QK / 4 + 12 + 2, q3_K_block);
LLM__STATIC_ASSERT(LLM__Q4_K_BYTES == 2 + 2 + 12 + LLM__QK / 2, q4_K_block);
LLM__STATIC_ASSERT(LLM__Q5_K_BYTES == 2 + 2 + 12 + LLM__QK / 8 + LLM__QK / 2, q5_K_block);
LLM__STATIC_ASSERT(LLM__Q6_K_BYTES == LLM__QK / 2 + LLM__QK / 4 + LLM__QK / 16 + 2, q6_K_block);
LLM__STATIC_ASSERT(LLM__IQ4_XS_BYTES == 2 + 2 + LLM__QK / 64 + LLM__QK / 2, iq4_xs_block);
/* a q6_K block in a panel (repack.h): its 210 bytes in whole words; a
 * q8_0 block's 34 likewise in 36 */
#define LLM__Q6_K_SLOT 212
#define LLM__Q8_0_SLOT 36
#define LLM__Q5_0_SLOT 24   /* a q5_0 block's 22 bytes in six words, as q5_1's 24 */
LLM__STATIC_ASSERT(LLM__Q5_0_SLOT == LLM__Q5_1_BYTES, q5_slots);
/* the panels' runs for the types read whole rows at a time: eight groups
 * (eight q4_0 blocks, one q4_K block) */
#define LLM__PANEL_RUN 144
LLM__STATIC_ASSERT(LLM__PANEL_RUN == 8 * LLM__Q4_0_BYTES && LLM__PANEL_RUN == 8 * LLM__IQ4_NL_BYTES &&
                   LLM__PANEL_RUN == LLM__Q4_K_BYTES, panel_run);

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
    /* rows of W a prefill tile takes (0: LLM__NR): q8_0, q5_0, q5_1, q4_0, iq4_nl, q4_K, q5_K and q6_K
     * unpack a group's weights for sixteen rows (x86_gguf.h; AVX2's
     * panels are eight, two to a tile) and run them against the tile's
     * tokens, so they take sixteen; a type with
     * panel_rows is the one repack.h puts in panels where the build has
     * their tiles (LLM__HAVE_PANELS) */
    int panel_rows;
    /* a panel row's geometry: runs of panel_unit bytes of the file's row
     * (0: the whole row is one run), each padded to whole runs of
     * panel_slot bytes (llm__panel_row_bytes) */
    int panel_unit, panel_slot;
} llm__type_traits;

/* the functions of each row: the twins in ref.h, the tiles in simd.h */
LLM__KERNEL void llm__dequant_row_f32(float *out, const llm_tensor *w, int r);
LLM__KERNEL void llm__dequant_row_f16(float *out, const llm_tensor *w, int r);
LLM__KERNEL void llm__dequant_row_q8(float *out, const llm_tensor *w, int r);
LLM__KERNEL float llm__row_dot_f32(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
LLM__KERNEL float llm__row_dot_f16(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
LLM__KERNEL float llm__row_dot_q8(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs);
LLM__KERNEL void llm__tile_f32(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc);
LLM__KERNEL void llm__tile_f16(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                               const float *xs, int t, int nr, int nc);
LLM__KERNEL void llm__tile_q8(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq,
                              const float *xs, int t, int nr, int nc);
/* GGUF's types: bf16, and the block types whose twins multiply activations
 * quantized in groups of LLM__GQ (engine/ref.h): int16 codes (LLM__ACT_Q16,
 * not a weight type) for all of them, q8_0 included, where int8 activations
 * were most of the error (LLMW's own q8 keeps int8) */
#define LLM__GQ 32
#define LLM__ACT_Q16 LLM_TYPE_COUNT
#define LLM__BLK_TYPE_FNS(name)                                                                                       \
    LLM__KERNEL void llm__dequant_row_##name(float *out, const llm_tensor *w, int r);                                \
    LLM__KERNEL float llm__row_dot_##name(const llm_tensor *w, int r, const float *x, const int8_t *xq, const float *xs); \
    LLM__KERNEL void llm__tile_##name(float *out, int ldo, const llm_tensor *w, int r, const float *x, const int8_t *xq, \
                                      const float *xs, int t, int nr, int nc);
LLM__BLK_TYPE_FNS(bf16)
LLM__BLK_TYPE_FNS(blk_q8_0)
LLM__BLK_TYPE_FNS(blk_q4_0)
LLM__BLK_TYPE_FNS(blk_q4_K)
LLM__BLK_TYPE_FNS(blk_q6_K)
LLM__BLK_TYPE_FNS(blk_q4_1)
LLM__BLK_TYPE_FNS(blk_q5_0)
LLM__BLK_TYPE_FNS(blk_q5_1)
LLM__BLK_TYPE_FNS(blk_iq4_nl)
LLM__BLK_TYPE_FNS(blk_q2_K)
LLM__BLK_TYPE_FNS(blk_q3_K)
LLM__BLK_TYPE_FNS(blk_q5_K)
LLM__BLK_TYPE_FNS(blk_iq4_xs)
#undef LLM__BLK_TYPE_FNS

static const llm__type_traits llm__traits[LLM_TYPE_COUNT] = {
    /* name    block value scale activations    row to f32            scalar dot        fast tile */
    { "f32",   1,    4,    0,    LLM_TYPE_F32,  llm__dequant_row_f32, llm__row_dot_f32, llm__tile_f32, 0, 0, 0, 0, 0 },
    { "f16",   1,    2,    0,    LLM_TYPE_F32,  llm__dequant_row_f16, llm__row_dot_f16, llm__tile_f16, 0, 0, 0, 0, 0 },
    { "q8_0",  0,    1,    4,    LLM_TYPE_Q8_0, llm__dequant_row_q8,  llm__row_dot_q8,  llm__tile_q8, 0, 0, 0, 0, 0 },
    /* GGUF's: value_bytes 1 is only the L2 blocking's estimate of a row
     *                                                                          qblock, bytes, panel rows, unit, slot */
#define LLM__BLK_ROW(name, fn, act, qb, bytes, pr, pu, ps) \
    { name, 32, 1, 0, act, llm__dequant_row_##fn, llm__row_dot_##fn, llm__tile_##fn, qb, bytes, pr, pu, ps }
    { "bf16",  1,    2,    0,    LLM_TYPE_F32,  llm__dequant_row_bf16,  llm__row_dot_bf16,  llm__tile_bf16,  0, 0, 0, 0, 0 },
    LLM__BLK_ROW("gguf-q8_0", blk_q8_0, LLM__ACT_Q16, 32, LLM__Q8_0_BYTES, 16, LLM__Q8_0_BYTES, LLM__Q8_0_SLOT),
    LLM__BLK_ROW("gguf-q4_0", blk_q4_0, LLM__ACT_Q16, 32, LLM__Q4_0_BYTES, 16, 0, LLM__PANEL_RUN),
    LLM__BLK_ROW("gguf-q4_K", blk_q4_K, LLM__ACT_Q16, LLM__QK, LLM__Q4_K_BYTES, 16, 0, LLM__PANEL_RUN),
    LLM__BLK_ROW("gguf-q6_K", blk_q6_K, LLM__ACT_Q16, LLM__QK, LLM__Q6_K_BYTES, 16, LLM__Q6_K_BYTES, LLM__Q6_K_SLOT),
    LLM__BLK_ROW("gguf-q4_1", blk_q4_1, LLM__ACT_Q16, 32, LLM__Q4_1_BYTES, 0, 0, 0),
    LLM__BLK_ROW("gguf-q5_0", blk_q5_0, LLM__ACT_Q16, 32, LLM__Q5_0_BYTES, 16, LLM__Q5_0_BYTES, LLM__Q5_0_SLOT),
    LLM__BLK_ROW("gguf-q5_1", blk_q5_1, LLM__ACT_Q16, 32, LLM__Q5_1_BYTES, 16, LLM__Q5_1_BYTES, LLM__Q5_1_BYTES),
    LLM__BLK_ROW("gguf-iq4_nl", blk_iq4_nl, LLM__ACT_Q16, 32, LLM__IQ4_NL_BYTES, 16, 0, LLM__PANEL_RUN),
    LLM__BLK_ROW("gguf-q2_K", blk_q2_K, LLM__ACT_Q16, LLM__QK, LLM__Q2_K_BYTES, 0, 0, 0),
    LLM__BLK_ROW("gguf-q3_K", blk_q3_K, LLM__ACT_Q16, LLM__QK, LLM__Q3_K_BYTES, 0, 0, 0),
    LLM__BLK_ROW("gguf-q5_K", blk_q5_K, LLM__ACT_Q16, LLM__QK, LLM__Q5_K_BYTES, 16, 0, LLM__Q5_K_BYTES),
    LLM__BLK_ROW("gguf-iq4_xs", blk_iq4_xs, LLM__ACT_Q16, LLM__QK, LLM__IQ4_XS_BYTES, 0, 0, 0),
#undef LLM__BLK_ROW
};
LLM__STATIC_ASSERT(sizeof(float) == 4 && sizeof(uint16_t) == 2, f32_f16_sizes);
LLM__STATIC_ASSERT(sizeof llm__traits / sizeof llm__traits[0] == LLM_TYPE_COUNT, one_row_per_type);

#ifndef LLM__PART_KERNELS   /* the split build's model part defines the API (engine/parts.h) */
const char *llm_type_name(int t) { return t >= 0 && t < LLM_TYPE_COUNT ? llm__traits[t].name : "unknown"; }
#endif

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
/* A row in repack.h's panels: runs of `unit` bytes of the file's row (the
 * traits' panel_unit, else the whole row) each at the start of a slot of
 * whole words, the slots padded to whole runs of panel_slot bytes, which a
 * tile takes at once (LLM__PANEL_RUN: eight q4_0 blocks, one q4_K block;
 * a q6_K block's 210 bytes in 212, a q8_0 block's 34 in 36, a q5_0
 * block's 22 in 24) */
static size_t llm__panel_unit(const llm_tensor *w) {
    int u = llm__traits[w->type].panel_unit;
    return u ? (size_t)u : llm__block_row_bytes(w);
}
static size_t llm__panel_row_bytes(const llm_tensor *w) {
    size_t unit = llm__panel_unit(w), slot = (size_t)llm__traits[w->type].panel_slot;
    return llm__block_row_bytes(w) / unit * ((unit + slot - 1) / slot * slot);
}

/* A tensor view: (rows, cols) of `type` at data, scales at scale (or NULL). */
static llm_tensor llm__tensor(const void *data, const float *scale, int type, int rows, int cols, int group) {
    llm_tensor w;
    w.data = data; w.scale = scale; w.type = type; w.rows = rows; w.cols = cols; w.group = group;
    w.panels = NULL;
    return w;
}

/* ---- the KV cache: bytes per element (the views and layouts: attention.h) ---- */
static size_t llm__kv_elem_bytes(int kv_type) { return kv_type == LLM_KV_F32 ? 4 : kv_type == LLM_KV_F16 ? 2 : 1; }
