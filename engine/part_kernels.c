/* engine/part_kernels.c -- the host build's kernels part (engine/parts.h):
 * the products, the activations, the KV cache and attention. Compiled side
 * by side with part_model.c; not for firmware, which includes model.h with
 * MODEL_IMPLEMENTATION. Each part uses some of base.h's and types.h's
 * helpers, hence no warning for the others. */
#define LLM__PART_KERNELS 1
#include "../model.h"
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "base.h"
#include "types.h"
#include "parts.h"
#include "ref.h"
#include "simd.h"
#include "repack.h"
#include "attention.h"
