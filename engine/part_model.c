/* engine/part_model.c -- the host build's model part (engine/parts.h): the
 * formats, the plan, the block and its passes, and the public API's
 * helpers. Compiled side by side with part_kernels.c; not for firmware,
 * which includes model.h with MODEL_IMPLEMENTATION. Each part uses some of
 * base.h's and types.h's helpers, hence no warning for the others. */
#define LLM__PART_MODEL 1
#include "../model.h"
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "base.h"
#include "types.h"
#include "parts.h"
#include "config.h"
#include "load_llama2c.h"
#include "load_llmw.h"
#include "gguf.h"
#include "load_gguf.h"
#include "load.h"
#include "plan.h"
#include "forward.h"
#include "batch.h"
