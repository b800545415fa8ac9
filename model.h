/* model.h -- a small Llama-style transformer engine behind one #include.
 *
 * Contract: loads a checkpoint from bytes the caller owns (a mapped file, a
 * buffer, or const data in flash) and reads the weights in place; all working
 * memory comes from caller-provided arenas whose sizes are told up front:
 * llm_model_size() for the model's tensor table, llm_state_size() for the
 * activations and KV cache. No I/O, no exit, no malloc, no globals: every
 * function returns a status and leaves a message in the struct it was given.
 * The engine's parts live in engine/ (see the end of this file); this file
 * is the API and the one #include a firmware needs.
 *
 *   #define MODEL_IMPLEMENTATION
 *   #include "model.h"
 *
 *   llm_model m;
 *   size_t model_need = llm_model_size(bytes, n_bytes);   // the layer table, RoPE
 *   if (llm_load(&m, bytes, n_bytes, malloc(model_need), model_need) != LLM_OK) puts(m.error);
 *   llm_state_options o = { ctx_len, max_batch, 0, LLM_KV_F32 };
 *   size_t need = llm_state_size(&m.cfg, &o);
 *   llm_state s;
 *   llm_state_init(&s, &m, &o, arena, need);   // arena: 64-byte aligned
 *   llm_forward(&m, &s, prompt, n_prompt, 0, LLM_LOGITS_LAST);  // batched prefill
 *   llm_forward(&m, &s, &next, 1, n_prompt, LLM_LOGITS_LAST);    // one decode step
 *   // logits of the last token: s.logits (vocab_size floats)
 *
 * The block (norm placement and type come from the checkpoint or the caller):
 *   pre:  h = x + attn(N1(x));          y = h + ffn(N3(h))
 *   post: h = N1(x + attn(x));          y = N3(h + ffn(h))
 *   peri: h = x + N2(attn(N1(x)));      y = h + N4(ffn(N3(h)))   (Gemma 2/3)
 *   out:  h = x + N2(attn(x));          y = h + N4(ffn(h))       (OLMo 2)
 * N1, N3 are attn_norm, ffn_norm; N2, N4 attn_out_norm, ffn_out_norm (weight
 * 1 where the checkpoint has none, LayerNorm's bias 0 where it has none);
 * then an optional final norm and the LM head. Attention: RoPE, grouped-query
 * heads, a KV cache. FFN: SwiGLU.
 *
 * Compile-time hooks: MODEL_ASSERT(x) (default: none), MODEL_NO_OPENMP.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Format and config                                                      */
/* ===================================================================== */

typedef enum llm_status {
    LLM_OK = 0,
    LLM_ERR_FORMAT = -1,    /* not a checkpoint we know, or inconsistent    */
    LLM_ERR_SIZE = -2,      /* file size differs from what the header says  */
    LLM_ERR_CONFIG = -3,    /* a field out of range                         */
    LLM_ERR_VERSION = -4,   /* a newer format version than this reader      */
    LLM_ERR_ARENA = -5,     /* arena too small or misaligned                */
    LLM_ERR_ARG = -6        /* bad argument to forward (token, position...) */
} llm_status;

enum llm_norm_type { LLM_NORM_RMS = 0, LLM_NORM_LAYER = 1 };
enum llm_norm_pos { LLM_NORM_PRE = 0, LLM_NORM_POST = 1, LLM_NORM_PERI = 2, LLM_NORM_OUT = 3 };
/* The weight types: each is one row of the engine's traits table (engine/types.h). */
typedef enum llm_type { LLM_TYPE_F32 = 0, LLM_TYPE_F16 = 1, LLM_TYPE_Q8_0 = 2,
    /* GGUF's types, read in place in GGUF's block layouts (engine/gguf.h) */
    LLM_TYPE_BF16 = 3, LLM_TYPE_GGUF_Q8_0 = 4, LLM_TYPE_GGUF_Q4_0 = 5, LLM_TYPE_GGUF_Q4_K = 6, LLM_TYPE_GGUF_Q6_K = 7,
    LLM_TYPE_GGUF_Q4_1 = 8, LLM_TYPE_GGUF_Q5_0 = 9, LLM_TYPE_GGUF_Q5_1 = 10, LLM_TYPE_GGUF_IQ4_NL = 11,
    LLM_TYPE_GGUF_Q2_K = 12, LLM_TYPE_GGUF_Q3_K = 13, LLM_TYPE_GGUF_Q5_K = 14, LLM_TYPE_GGUF_IQ4_XS = 15,
    LLM_TYPE_COUNT } llm_type;
/* The FFN gate's activation: SwiGLU's silu, or GELU's tanh form (Gemma). */
enum llm_ffn_act { LLM_FFN_SILU = 0, LLM_FFN_GELU_TANH = 1 };
enum llm_rope_layout { LLM_ROPE_INTERLEAVED = 0, LLM_ROPE_HALF = 1 };
/* How the RoPE frequencies are rescaled for long contexts (applied at load). */
enum llm_rope_scaling { LLM_ROPE_SCALING_NONE = 0, LLM_ROPE_SCALING_LINEAR = 1, LLM_ROPE_SCALING_LLAMA3 = 2 };
enum llm_format { LLM_FORMAT_LEGACY = 0, LLM_FORMAT_LLMW = 1, LLM_FORMAT_AK42_V1 = 2, LLM_FORMAT_AK42_V2 = 3, LLM_FORMAT_GGUF = 4 };
enum llm_logits { LLM_LOGITS_LAST = 0, LLM_LOGITS_ALL = 1 };
/* The KV cache's element types (int8 here: one f16 scale per head and position). */
enum llm_kv_type { LLM_KV_F32 = 0, LLM_KV_F16 = 1, LLM_KV_Q8 = 2 };

#define LLM_MAGIC "LLMW"
#define LLM_VERSION 2               /* LLMW versions 1 and 2 are read */
#define LLM_HEADER_SIZE 256
#define LLM_ALIGN 64
#define LLM_MAX_DIM (1 << 16)       /* limits that reject hostile headers */
#define LLM_MAX_HIDDEN (8 << 16)
#define LLM_MAX_LAYERS 1024
#define LLM_MAX_VOCAB (1 << 22)
#define LLM_MAX_SEQ (1 << 20)
#define LLM_MAX_BATCH 8192          /* tokens in one forward call */
#ifndef LLM_MAX_HEAD_SIZE
#define LLM_MAX_HEAD_SIZE 256       /* attention keeps one head's row on the stack */
#endif
/* Threads pay only above this many multiply-adds: below it, waking a
 * sleeping thread costs more than the work (all of stories260K's products,
 * and a 15M model's per-layer ones in decode, stay on one thread). The
 * state's parallel_min_work starts here; with threads that spin while idle
 * (answering in a microsecond or so), 1 << 16 pays. */
#ifndef LLM_PARALLEL_MIN_WORK
#define LLM_PARALLEL_MIN_WORK (1L << 19)
#endif

typedef struct llm_config {
    int dim;            /* residual stream width                       */
    int hidden_dim;     /* FFN inner width                             */
    int n_layers;
    int n_heads;        /* query heads                                 */
    int n_kv_heads;     /* key/value heads (grouped-query attention)   */
    int vocab_size;
    int seq_len;        /* the model's context length                  */
    int head_size;      /* usually dim / n_heads; q is n_heads*head_size */
    int norm_type;      /* llm_norm_type                               */
    int norm_pos;       /* llm_norm_pos: the block's norm placement    */
    int final_norm;     /* 1: norm before the LM head                  */
    float norm_eps;
    float rope_theta;
    int rope_layout;    /* llm_rope_layout                             */
    int shared_classifier;
    int weight_type;    /* llm_type of the file's matrices (each tensor
                           carries its own; this sizes the activations) */
    int group_size;     /* q8_0 group length                           */
    int norm_bias;      /* 1: LayerNorm biases are stored              */
    int format;         /* llm_format the file came in                 */
    int rope_scaling;   /* llm_rope_scaling                            */
    float rope_factor;  /* linear and llama3: the scaling factor       */
    float rope_low_freq_factor, rope_high_freq_factor;  /* llama3      */
    int rope_orig_ctx;  /* llama3: original_max_position_embeddings    */
    int qkv_bias;       /* 1: q, k and v biases are stored (Qwen2)     */
    int qk_norm;        /* 1: RMSNorm over each head's q and k before
                           RoPE (Qwen3); the weights are stored        */
    int out_norm;       /* 1: attn_out_norm, ffn_out_norm are stored    */
    int qk_norm_whole;  /* 1: the q/k norm spans the whole q and k
                           projections, not each head (OLMo 2)        */
    int ffn_act;        /* llm_ffn_act: the gate's activation          */
    float embed_scale;  /* 0: none; else x = embedding[token] * this
                           (Gemma: sqrt(dim) in the checkpoint's dtype) */
    float query_scalar; /* 0: scores / sqrt(head_size); else scores /
                           sqrt(this) (Gemma's query_pre_attn_scalar)  */
    int sliding_window; /* 0: none; else a local layer's query i sees
                           key j only when i - j < sliding_window       */
    uint64_t local_layers;  /* with sliding_window: bit l set = layer l
                           is local (sliding window, rope_local_theta) */
    float rope_local_theta; /* the local layers' RoPE base; global ones
                           keep rope_theta (and rope scaling)          */
} llm_config;

/* One tensor, read in place: (rows, cols) values of its type, row-major.
 * A tensor the checkpoint does not have has data NULL. */
typedef struct llm_tensor {
    const void *data;       /* f32, f16 (uint16) or int8 values; NULL: absent */
    const float *scale;     /* q8_0: (rows, ceil(cols/group)) scales, stored apart */
    int type;               /* llm_type                                     */
    int rows, cols, group;  /* group: q8_0's values per scale              */
    const void *panels;     /* the rows laid out again by llm_repack for this
                               build's tiles (NULL: the products read data) */
} llm_tensor;

/* One transformer block's tensors. */
typedef struct llm_layer {
    llm_tensor attn_norm, attn_norm_bias;   /* (dim,) f32; biases only with norm_bias */
    llm_tensor wq;                  /* (n_heads*head_size, dim)           */
    llm_tensor wk, wv;              /* (n_kv_heads*head_size, dim)        */
    llm_tensor wo;                  /* (dim, n_heads*head_size)           */
    llm_tensor ffn_norm, ffn_norm_bias;     /* (dim,)                     */
    llm_tensor w1, w3;              /* (hidden_dim, dim) gate, up         */
    llm_tensor w2;                  /* (dim, hidden_dim) down             */
    llm_tensor q_bias;              /* (n_heads*head_size,) f32, with qkv_bias */
    llm_tensor k_bias, v_bias;      /* (n_kv_heads*head_size,)            */
    llm_tensor q_norm, k_norm;      /* (head_size,) f32, with qk_norm; with
                                       qk_norm_whole (n_heads*head_size,),
                                       (n_kv_heads*head_size,)           */
} llm_layer;

/* peri's and out's N2, N4 of layer l: out_norms[4 l + LLM_OUT_*] */
enum { LLM_OUT_ATTN, LLM_OUT_ATTN_BIAS, LLM_OUT_FFN, LLM_OUT_FFN_BIAS };

typedef struct llm_weights {
    llm_tensor tok_embeddings;      /* (vocab, dim)                       */
    llm_layer *layers;              /* (n_layers,) in the model arena     */
    llm_tensor final_norm, final_norm_bias;  /* (dim,)                    */
    const float **out_norms;        /* with out_norm: (n_layers, 4) (dim,) f32 vectors
                                       (biases NULL without norm_bias) in the model
                                       arena; NULL without. Apart from llm_layer, so a
                                       checkpoint without them pays no RAM: the compact
                                       Cortex-M build has under 200 bytes to spare */
    llm_tensor classifier;          /* (vocab, dim)                       */
} llm_weights;

typedef struct llm_model {
    llm_config cfg;
    llm_weights w;
    float *rope_freq;               /* (head_size/2,) RoPE frequencies (with sliding_window
                                       the local layers' head_size/2 after them), computed at load
                                       (in the model arena): where rope scaling goes */
    char error[200];
} llm_model;

/* What a state is planned for. Zeros mean the defaults. */
typedef struct llm_state_options {
    int ctx_len;            /* KV-cache positions, <= seq_len (0: seq_len)       */
    int max_batch;          /* tokens one forward call may take (0: 1)          */
    int all_logits;         /* 1: forward may return every token's logits        */
    int kv_type;            /* llm_kv_type: f32, f16, or int8 with per-head scales */
} llm_state_options;

/* Byte sizes of everything the state carves from the arena, in 64 bits on
 * every host: a plan is stated exactly (and refused by llm_state_init) even
 * where it exceeds a 32-bit address space. */
typedef struct llm_plan {
    uint64_t x, xb, xb2, q, kv_new, hb, hb2, rope, logits, act_q, key_cache, value_cache, kv_scales;
    uint64_t total;         /* sum, each part rounded up to LLM_ALIGN     */
} llm_plan;

/* Activations and KV cache for one sequence. */
typedef struct llm_state {
    int ctx_len;            /* positions the KV cache holds               */
    int max_batch;          /* tokens one forward call may take           */
    int all_logits;         /* 1: logits has room for every token's row    */
    int kv_type;            /* llm_kv_type of the cache                   */
    int n_threads;          /* OpenMP threads (1 = serial)                */
    long parallel_min_work; /* a step runs on threads only above this many
                               multiply-adds (LLM_PARALLEL_MIN_WORK at init) */
    float *x;               /* (B, dim) residual stream                   */
    float *xb;              /* (B, dim) normed input / attention output   */
    float *xb2;             /* (B, dim) projection output                 */
    float *q;               /* (B, n_heads*head_size) queries             */
    float *k_new, *v_new;   /* (B, n_kv_heads*head_size) this batch's k, v */
    float *hb, *hb2;        /* (B, hidden_dim) FFN gate and up            */
    float *rope;            /* (B, head_size) cos,sin pairs per position  */
    float *logits;          /* (B, vocab) with LLM_LOGITS_ALL, else (vocab,) */
    int8_t *act_q;          /* (B, max(dim,hidden)) quantized activations:
                               int8 codes, or int16 for the types whose
                               act_type is int16 (GGUF q4_0 and the K-quants...) */
    float *act_scale;       /* their group scales                         */
    void *key_cache;        /* (layer, ctx, n_kv_heads*head_size) of kv_type */
    void *value_cache;
    uint16_t *key_scale;    /* int8 cache: (layer, ctx, n_kv_heads) f16 scales */
    uint16_t *value_scale;
    llm_config cfg;         /* the config the state was planned for: forward
                               refuses a model of another shape */
    char error[200];
} llm_state;

/* Bytes of arena llm_load needs for this checkpoint (the per-layer tensor
 * table and the RoPE frequencies, plus alignment: any address will do), or
 * 0 when llm_load would refuse the bytes (call it for the message). */
size_t llm_model_size(const void *bytes, size_t n_bytes);
/* Parse and validate a checkpoint (llama2.c legacy, ak42, LLMW or GGUF) in place;
 * the tensor table is carved from the arena, which must outlive the model. */
int llm_load(llm_model *m, const void *bytes, size_t n_bytes, void *arena, size_t arena_size);
/* Load-time repacking, for builds whose tiles read a layout faster than the
 * file's (x86 with AVX-512 VNNI or AVX2: GGUF's q8_0, q5_0, q5_1, q4_0,
 * iq4_nl, q4_K, q5_K and q6_K, and LLMW's own q8_0 in groups of 32, in
 * panels of sixteen or eight rows; NEON with dotprod: q4_0, iq4_nl and
 * q4_K in panels of four; engine/repack.h).
 * llm_repack_size: the bytes it takes (0: nothing this build repacks);
 * llm_repack copies those matrices into a 64-byte-aligned arena of that
 * size, which must outlive the model, and points their panels at it. The
 * products then read the copies, with the same bits; the file's bytes stay
 * each tensor's data (the embedding lookup, the scalar twins). A model
 * loaded again is read in place until repacked. all_logits: kept for the
 * API (the same 0 or 1 for both calls); it changes nothing now. */
size_t llm_repack_size(const llm_model *m, int all_logits);
int llm_repack(llm_model *m, void *arena, size_t arena_size, int all_logits);
/* Check the config after the caller changed norm settings. */
int llm_check_config(llm_model *m);
/* The arena plan for these options: every buffer's size, and the total. */
llm_plan llm_state_plan(const llm_config *c, const llm_state_options *o);
/* The KV cache rows (positions) layer l keeps with a context of ctx_len,
 * stored layer after layer: a local layer's ring (sliding_window), or ctx_len. */
size_t llm_kv_layer_rows(const llm_config *c, int ctx_len, int l);
size_t llm_state_size(const llm_config *c, const llm_state_options *o);
/* Carve the state from a 64-byte-aligned arena of at least llm_state_size()
 * (SIZE_MAX when the plan exceeds this host's address space). The
 * activations are zeroed; the KV cache is not touched until it is written,
 * so a large cache costs memory only as far as the context fills. */
int llm_state_init(llm_state *s, const llm_model *m, const llm_state_options *o,
                   void *arena, size_t arena_size);
/* Run n tokens at positions pos..pos+n-1 as one batch; logits in s->logits. */
int llm_forward(const llm_model *m, llm_state *s, const int *tokens, int n, int pos,
                int which_logits);
/* One sequence's share of a batch across sequences: n tokens at positions
 * pos..pos+n-1 of state's KV cache (engine/batch.h). */
typedef struct llm_batch_item {
    llm_state *state;       /* the sequence's KV cache                    */
    const int *tokens;
    int n, pos;
} llm_batch_item;
/* Run the items' tokens as one batch through the model (all tokens
 * together at most work->max_batch; work planned with all_logits): logits
 * row i of work->logits is item i's last token's, bit for bit what
 * llm_forward on that sequence alone gives. */
int llm_forward_batch(const llm_model *m, llm_state *work, const llm_batch_item *items, int n_items);
const char *llm_status_text(int status);
/* Parse "rms"/"layer", "pre"/"post", "on"/"off": the value, or -1. */
int llm_parse_norm_type(const char *s);
int llm_parse_norm_pos(const char *s);
int llm_parse_on_off(const char *s);
const char *llm_norm_type_name(int t);
const char *llm_norm_pos_name(int p);
const char *llm_type_name(int t);       /* "f32", "f16", "q8_0" */
const char *llm_kv_type_name(int t);
int llm_parse_kv_type(const char *s);   /* "f32", "f16", "q8", or -1 */
const char *llm_simd_name(void);        /* the kernels this build runs: "avx512", "neon", ... */

/* GGUF metadata, for what the engine itself does not read (the tokenizer's
 * arrays): llm_gguf_find returns 1 and the value (an array: its element type
 * and count), 0 when the key is absent, -1 when the file is not a sound GGUF. */
typedef struct llm_gguf_value {
    int type;                   /* GGUF value type (8: string); an array's element type */
    int is_array;
    uint64_t count;             /* elements (1 for a scalar) */
    const unsigned char *data;  /* the first element; bytes to the file's end */
    uint64_t bytes;
} llm_gguf_value;
int llm_gguf_find(const void *bytes, size_t n_bytes, const char *key, llm_gguf_value *out);
int llm_gguf_int(const llm_gguf_value *v, uint64_t i, int64_t *out);     /* 1: element i read */
int llm_gguf_float(const llm_gguf_value *v, uint64_t i, float *out);
/* the string at byte *pos of a string value (start at 0), advancing *pos */
int llm_gguf_next_string(const llm_gguf_value *v, uint64_t *pos, const char **s, uint64_t *len);

/* Scalar kernels, public so tests can check them against their formulas. */
void llm_rmsnorm(float *out, const float *x, const float *g, int n, float eps);
void llm_layernorm(float *out, const float *x, const float *g, const float *b, int n,
                   float eps);
/* xq: scratch for the quantized activations: cols codes (a block type's cols
 * rounded up to its block: 32, q4_K 256), 2 bytes each where the type
 * quantizes to int16; xs: one scale per 32 (or per group) */
void llm_matvec(float *out, const llm_tensor *w, const float *x, int8_t *xq, float *xs);
void llm_softmax(float *x, int n);
float llm_f16_to_f32(uint16_t h);
uint16_t llm_f32_to_f16(float f);
/* The sampler's hooks (sampler.h), on this build's vector kernels:
 * llm_max: the largest of x (n >= 1), NaNs skipped (llm_softmax's max);
 * llm_exp_shifted: x[i] = e^(x[i] - shift), llm_softmax's exponentials;
 * llm_argmax: the first index of the largest of x (n >= 1), as the scan
 *   `if (x[i] > x[best]) best = i` gives it. */
float llm_max(const float *x, int n);
void llm_exp_shifted(float *x, int n, float shift);
int llm_argmax(const float *x, int n);

#ifdef __cplusplus
}
#endif
#endif /* MODEL_H */

/* ===================================================================== */
/* Implementation: the engine's parts, in reading order                  */
/* ===================================================================== */
#ifdef MODEL_IMPLEMENTATION
#ifndef MODEL_IMPLEMENTATION_DONE
#define MODEL_IMPLEMENTATION_DONE
#include "engine/base.h"     /* formatting, checked size math, little-endian reads, f16 */
#include "engine/types.h"    /* the type traits table, the KV cache's element sizes     */
#include "engine/parts.h"    /* what the split build's two parts call across            */
#include "engine/config.h"   /* the config's range checks, the model arena              */
#include "engine/load_llama2c.h" /* llama2.c's legacy and ak42 checkpoints              */
#include "engine/load_llmw.h" /* LLMW versions 1 and 2 (FORMAT.md)                      */
#include "engine/gguf.h"     /* GGUF v2/v3: metadata, tensor table, the tokenizer arrays */
#include "engine/load_gguf.h" /* a GGUF file's model: config, tensors checked, bound    */
#include "engine/load.h"     /* llm_load: the magic picks the reader                    */
#include "engine/plan.h"     /* options, the arena plan, state init                     */
#include "engine/ref.h"      /* the scalar kernels: every fast kernel's twin            */
#include "engine/simd.h"     /* the vector mapping, tiles, matmul (ISA files inside)    */
#include "engine/repack.h"   /* load-time repacking into the tiles' panels              */
#include "engine/attention.h" /* the KV cache views, attention and its passes          */
#include "engine/forward.h"  /* norms, RoPE, the attention block, FFN, llm_forward       */
#include "engine/batch.h"    /* llm_forward_batch: several sequences' tokens in one pass */
#endif /* MODEL_IMPLEMENTATION_DONE */
#endif /* MODEL_IMPLEMENTATION */
