# sources.mk -- what ./run is built from, for the top Makefile and for
# embedded/embedded.mk used alone (its aarch64 ./run).
TOK_SRC = tokenizer.c $(wildcard tokenizer/*.c)
# the engine: two translation units (engine/parts.h), compiled side by side for ./run
ENGINE_SRC = engine/part_kernels.c engine/part_model.c
SRC = run.c options.c platform.c $(TOK_SRC) server/http.c server/json.c server/serve.c server/slots.c $(ENGINE_SRC)
HDR = model.h $(wildcard engine/*.h) tokenizer.h $(wildcard tokenizer/*.h) tokenizer_unicode.h sampler.h platform.h options.h $(wildcard server/*.h)
LIBS = -lm -lpthread
