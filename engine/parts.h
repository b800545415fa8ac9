/* engine/parts.h -- the engine's two parts and the calls between them.
 *
 * With MODEL_IMPLEMENTATION (firmware, the tests) the whole engine is one
 * translation unit and every function in it is static. The host's ./run
 * compiles it as two, side by side (make -j):
 *   engine/part_kernels.c  ref.h, simd.h and its ISA files, repack.h,
 *                          attention.h: the products, the activations, the
 *                          KV cache and attention;
 *   engine/part_model.c    load.h, gguf.h, plan.h, forward.h, batch.h: the
 *                          formats, the plan, the block and its passes.
 * Both read base.h and types.h. What the model part calls in the kernels
 * part is declared here and in types.h (the traits table's functions), with
 * the storage class LLM__KERNEL (compiler.h): static in one translation
 * unit, extern and hidden in two. The public API is defined once: base.h's
 * and types.h's functions in the model part (the kernels part keeps its own
 * static f16 conversions), the others where they are. The same code runs
 * either way, so the same floats. */

/* out (T, w->rows) = X (T, w->cols) W^T (simd.h); _after: after a product
 * of the same X by prev (NULL: none), reusing its quantized X */
LLM__KERNEL void llm__matmul(float *out, const llm_tensor *w, const float *x, int T, llm_state *s);
LLM__KERNEL void llm__matmul_after(float *out, const llm_tensor *w, const float *x, int T, llm_state *s,
                                   const llm_tensor *prev);
/* SwiGLU in place: g (n,) = silu(g) * u (simd.h) */
LLM__KERNEL void llm__swiglu(float *g, const float *u, int n);
/* row v (n_heads*hs,) into position pos of one layer's K or V cache (attention.h) */
LLM__KERNEL void llm__kv_store(void *cache, uint16_t *scales, int kv_type, size_t pos, const float *v, int n_heads, int hs);
/* layer l's attention for one sequence's n tokens at pos.. (attention.h) */
LLM__KERNEL void llm__attend_sequence(const llm_model *m, llm_state *w, const llm_state *s, int l, int o, int n, int pos);
