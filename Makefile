# Build, test and benchmark the engine.
#   make            optimised ./run for this machine (OpenMP where the compiler has it)
#   make portable   ./run-portable: plain C99, no OpenMP, no arch flags
#   make asan       ./run-asan: AddressSanitizer + UndefinedBehaviorSanitizer
#   make test       the host suite (optimised, asan and portable builds)
#   make check      embedded-test (Cortex-M under QEMU, aarch64) and then make test
#   make run        build and tell a story with the default model
#   make bench      speed against the machine's limits (README's table)
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
CFLAGS_ASAN = -std=c99 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all $(FP) $(OPENMP) $(WARN)
SRC = run.c tokenizer.c
HDR = model.h $(wildcard engine/*.h) tokenizer.h sampler.h
LIBS = -lm

.PHONY: all portable asan test test-bins run bench clean norm-table check
all: build/run.stamp

# ./run is the binary, `make run` the story: the binary's rule keys on a stamp
build/run.stamp: $(SRC) $(HDR)
	@mkdir -p build
	$(CC) $(CFLAGS_FAST) -o run $(SRC) $(LIBS)
	@touch $@

portable: run-portable
run-portable: $(SRC) $(HDR)
	$(CC) $(CFLAGS_PORTABLE) -o $@ $(SRC) $(LIBS)

run-avx2: $(SRC) $(HDR)
	$(CC) $(CFLAGS_AVX2) -o $@ $(SRC) $(LIBS)

asan: run-asan
run-asan: $(SRC) $(HDR)
	$(CC) $(CFLAGS_ASAN) -o $@ $(SRC) $(LIBS)

# test programs: fast, asan and portable twins
build/%: tests/%.c $(HDR) tokenizer.c
	@mkdir -p build
	$(CC) $(CFLAGS_FAST) -Wno-unused-function -I. -o $@ $< tokenizer.c $(LIBS)
build/%-asan: tests/%.c $(HDR) tokenizer.c
	@mkdir -p build
	$(CC) $(CFLAGS_ASAN) -Wno-unused-function -I. -o $@ $< tokenizer.c $(LIBS)
build/%-portable: tests/%.c $(HDR) tokenizer.c
	@mkdir -p build
	$(CC) $(CFLAGS_PORTABLE) -Wno-unused-function -I. -o $@ $< tokenizer.c $(LIBS)
build/%-avx2: tests/%.c $(HDR) tokenizer.c
	@mkdir -p build
	$(CC) $(CFLAGS_AVX2) -Wno-unused-function -I. -o $@ $< tokenizer.c $(LIBS)

TEST_PROGS = test_kernels logits test_tokenizer_unit test_sampler
AVX2_ARGS = --variant "avx2:RUN=./run-avx2,LOGITS=build/logits-avx2,KERNELS=build/test_kernels-avx2,TOKUNIT=build/test_tokenizer_unit-avx2"
test-bins: build/run.stamp run-asan run-portable $(foreach p,$(TEST_PROGS),build/$(p) build/$(p)-asan build/$(p)-portable) \
	   $(if $(HAVE_AVX2),run-avx2 $(foreach p,$(TEST_PROGS),build/$(p)-avx2))

# One run, three builds (four with the AVX2 one); ends with the line "N passed, N failed".
test: test-bins
	@$(if $(HAVE_AVX2),,echo "note: this CPU lacks AVX2/FMA/F16C, so the avx2 variant does not run")
	LLM_MODELS=$(MODELS) $(PYTHON) tests/run_tests.py \
	  --variant "opt:RUN=./run,LOGITS=build/logits,KERNELS=build/test_kernels,TOKUNIT=build/test_tokenizer_unit" \
	  --variant "asan:RUN=./run-asan,LOGITS=build/logits-asan,KERNELS=build/test_kernels-asan,TOKUNIT=build/test_tokenizer_unit-asan" \
	  --variant "portable:RUN=./run-portable,LOGITS=build/logits-portable,KERNELS=build/test_kernels-portable,TOKUNIT=build/test_tokenizer_unit-portable,PORTABLE=1" \
	  $(if $(HAVE_AVX2),$(AVX2_ARGS))

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
	rm -rf run run-portable run-asan run-avx2 build

# Bare metal (Cortex-M4F and M55 under QEMU) and aarch64: embedded-test, embedded-figures
include embedded/embedded.mk

# Everything CI runs: the devices first, then the host suite (its summary line last).
check:
	$(MAKE) --no-print-directory embedded-test
	$(MAKE) --no-print-directory test

# Prefill and decode tok/s for stories260K and the TinyStories shapes in f32/f16/q8_0,
# 1 and 2 threads, against the machine's bandwidth and FMA peak measured in the same run.
bench: build/run.stamp
	LLM_MODELS=$(MODELS) $(PYTHON) bench/bench.py

# Perplexity of stories260K on tests/data/stories.txt under the 8 norm variants (README's table).
NORM_TEXT ?= tests/data/stories.txt
norm-table: build/run.stamp
	@echo "| norm | position | final norm | tokens | mean NLL | perplexity |"
	@echo "| --- | --- | --- | --- | --- | --- |"
	@for n in rms layer; do for p in pre post; do for f in on off; do \
	  ./run $(MODELS)/stories260K.bin -z $(MODELS)/tok512.bin -m eval -f $(NORM_TEXT) \
	    --norm $$n --norm-pos $$p --final-norm $$f 2>/dev/null | \
	  awk -v n=$$n -v p=$$p -v f=$$f '{ printf "| %s | %s | %s | %s | %s | %s |\n", n, p, f, $$2, $$4, $$6 }'; \
	done; done; done

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
# The GGUF metadata reader's harness comes with the GGUF reader.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_HARNESSES = checkpoint tokenizer chat
FUZZ_SRC = tests/fuzz/fuzz_common.c tokenizer.c
FUZZ_DEPS = tests/fuzz/fuzz.h tests/fuzz/fuzz_common.c $(HDR) tokenizer.c
CFLAGS_FUZZ = -std=c99 -g -O1 -march=native -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(FP) $(WARN)
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
