/* engine/types.h -- the types the kernels work on: the KV cache's layouts
 * (f32, f16, or int8 with one f16 scale per head and position). */

static size_t llm__kv_elem_bytes(int kv_type) { return kv_type == LLM_KV_F32 ? 4 : kv_type == LLM_KV_F16 ? 2 : 1; }

/* One layer's cache for the attention of one head. */
typedef struct llm__kv_view {
    const void *k, *v;
    const uint16_t *k_scale, *v_scale;
    int type, n_heads, hs;
} llm__kv_view;

#define LLM__KEY_BLOCK 32
