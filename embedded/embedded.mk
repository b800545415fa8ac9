# embedded.mk -- the engine bare-metal on Cortex-M under QEMU, and ./run on aarch64.
# Include it from the top Makefile, or use it alone from the repo root:
#   make -f embedded/embedded.mk embedded-test      build every board and aarch64, run, compare
#   make -f embedded/embedded.mk embedded-figures   flash, RAM and instructions per token (markdown)
#   make -f embedded/embedded.mk embedded-run EMB_BOARD=an547 EMB_TEMPERATURE=0 EMB_STEPS=200
#   make -f embedded/embedded.mk embedded-kernels EMB_BOARD=an386   tests/test_kernels.c on a board
#   make -f embedded/embedded.mk embedded-deps      install the Debian packages (root)
#   make -f embedded/embedded.mk arm-insns          aarch64 instructions per decode token, per weight type
# One image: EMB_BOARD (an386 | an547), the checkpoint and tokenizer it links
# (EMB_CKPT, EMB_TOK), and the parameters fixed at build time: EMB_CTX (0 = the
# model's seq_len), EMB_KV (f32 | f16 | q8), EMB_TEMPERATURE, EMB_TOPP, EMB_TOPK,
# EMB_SEED, EMB_STEPS, EMB_PROMPT; EMB_STACK and EMB_RAM_BUDGET (bytes) bound
# the RAM at link time. Images live in build/embedded/EMB_NAME/EMB_BOARD/.
# included from another Makefile: its default goal stays the default (restored at the end)
EMB_INCLUDED := $(filter-out embedded/embedded.mk,$(firstword $(MAKEFILE_LIST)))
EMB_SAVED_GOAL := $(.DEFAULT_GOAL)
ifndef SRC
include sources.mk   # used alone: ./run's sources, as the top Makefile has them
endif
EMB_PYTHON ?= /usr/bin/python3
EMB_MODELS ?= $(if $(LLM_MODELS),$(LLM_MODELS),../shared/models)
EMB_CKPT ?= $(EMB_MODELS)/stories260K.bin
EMB_TOK ?= $(EMB_MODELS)/tok512.bin
EMB_BOARD ?= an386
EMB_NAME ?= custom
EMB_CTX ?= 256
EMB_KV ?= f32
EMB_TEMPERATURE ?= 1.0
EMB_TOPP ?= 0.9
EMB_TOPK ?= 0
EMB_SEED ?= 42
EMB_STEPS ?= 256
EMB_PROMPT ?=
EMB_STACK ?= 8192
EMB_RAM_BUDGET ?=
EMB_OPT ?= -O2

EMB_CC = arm-none-eabi-gcc
EMB_SIZE = arm-none-eabi-size
EMB_HOSTCC ?= cc
EMB_CPU_an386 = -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16
EMB_CPU_an547 = -mcpu=cortex-m55 -mthumb -mfloat-abi=hard
EMB_QEMU_an386 = qemu-system-arm -M mps2-an386 -cpu cortex-m4
EMB_QEMU_an547 = qemu-system-arm -M mps3-an547 -cpu cortex-m55
EMB_QEMU_FLAGS = -nographic -monitor none -serial null -semihosting-config enable=on,target=native
# the engine's sources build with the strictest flags; startup.c needs GNU C (asm, naked)
EMB_STRICT = -std=c99 -pedantic -Wall -Wextra -Werror -ffp-contract=off -DMODEL_NO_STDIO
EMB_CFLAGS = $(EMB_CPU_$(EMB_BOARD)) $(EMB_OPT) -g -ffunction-sections -fdata-sections -DEMB_BOARD='"$(EMB_BOARD)"'
EMB_LDFLAGS = $(EMB_CPU_$(EMB_BOARD)) -nostartfiles --specs=nano.specs --specs=rdimon.specs \
  -Lembedded -T embedded/$(EMB_BOARD).ld -Wl,--gc-sections -Wl,--defsym=EMB_STACK=$(EMB_STACK) \
  $(if $(EMB_RAM_BUDGET),-Wl$(EMB_COMMA)--defsym=EMB_RAM_BUDGET=$(EMB_RAM_BUDGET))
EMB_DIR = build/embedded/$(EMB_NAME)/$(EMB_BOARD)
# the tokenizer's objects (TOK_SRC: sources.mk)
EMB_TOK_HDR = $(wildcard tokenizer/*.h) tokenizer_unicode.h
EMB_TOK_OBJ = $(TOK_SRC:%.c=$(EMB_DIR)/%.o)
EMB_COMMA := ,
EMB_SQ = '$(subst ','\'',$(1))'
EMB_PARAMS = -DEMB_TEMPERATURE='($(EMB_TEMPERATURE))' -DEMB_TOPP='($(EMB_TOPP))' -DEMB_TOPK='($(EMB_TOPK))' \
  -DEMB_SEED='($(EMB_SEED))' -DEMB_STEPS='($(EMB_STEPS))'
EMB_CONFIG = $(EMB_BOARD) | $(EMB_CKPT) | $(EMB_TOK) | ctx $(EMB_CTX) | kv $(EMB_KV) | $(EMB_PARAMS) | \
  prompt $(EMB_PROMPT) | stack $(EMB_STACK) | budget $(EMB_RAM_BUDGET) | $(EMB_OPT)

.PHONY: arm-insns embedded-elf embedded-run embedded-kernels embedded-test embedded-figures embedded-deps embedded-aarch64 embedded-clean FORCE

embedded-elf: $(EMB_DIR)/demo.elf

# build/embedded/plan: the host program that sizes the arenas from the engine's own plan
build/embedded/plan: embedded/plan.c model.h $(wildcard engine/*.h) tokenizer.h $(EMB_TOK_HDR) $(TOK_SRC)
	@mkdir -p $(@D)
	$(EMB_HOSTCC) -std=c99 -O1 -Wall -Wextra -I. -o $@ embedded/plan.c $(TOK_SRC) -lm

# the configuration as a file that changes only when a parameter does
$(EMB_DIR)/config: FORCE
	@mkdir -p $(@D)
	@echo $(call EMB_SQ,$(EMB_CONFIG)) | cmp -s - $@ || echo $(call EMB_SQ,$(EMB_CONFIG)) > $@

$(EMB_DIR)/plan.h: build/embedded/plan $(EMB_DIR)/config $(EMB_CKPT) $(EMB_TOK)
	build/embedded/plan $(EMB_CKPT) $(EMB_TOK) $(EMB_CTX) $(EMB_KV) $(call EMB_SQ,$(EMB_PROMPT)) \
	  $(EMB_TEMPERATURE) $(EMB_TOPP) $(EMB_TOPK) > $@.tmp && mv $@.tmp $@

$(EMB_DIR)/main.o: embedded/main.c embedded/board.h model.h $(wildcard engine/*.h) tokenizer.h sampler.h $(EMB_DIR)/plan.h $(EMB_DIR)/config
	$(EMB_CC) $(EMB_CFLAGS) $(EMB_STRICT) $(EMB_PARAMS) -I. -Iembedded -I$(EMB_DIR) -c -o $@ embedded/main.c

# the tokenizer: one object per source (tokenizer.c and tokenizer/*.c)
$(EMB_TOK_OBJ): $(EMB_DIR)/%.o: %.c tokenizer.h $(EMB_TOK_HDR) engine/fmt.h $(EMB_DIR)/config
	@mkdir -p $(@D)
	$(EMB_CC) $(EMB_CFLAGS) $(EMB_STRICT) -I. -c -o $@ $<

$(EMB_DIR)/startup.o: embedded/startup.c embedded/board.h $(EMB_DIR)/config
	$(EMB_CC) $(EMB_CFLAGS) -std=gnu99 -Wall -Wextra -Werror -c -o $@ embedded/startup.c

$(EMB_DIR)/model.o: embedded/model.S $(EMB_CKPT) $(EMB_TOK) $(EMB_DIR)/config
	$(EMB_CC) $(EMB_CFLAGS) -DEMB_CKPT_FILE='"$(EMB_CKPT)"' -DEMB_TOK_FILE='"$(EMB_TOK)"' -c -o $@ embedded/model.S

$(EMB_DIR)/demo.elf: $(addprefix $(EMB_DIR)/,startup.o main.o model.o) $(EMB_TOK_OBJ) embedded/$(EMB_BOARD).ld embedded/common.ld
	$(EMB_CC) $(EMB_LDFLAGS) -Wl,-Map=$(EMB_DIR)/demo.map -o $@ $(filter %.o,$^) -lm
	@$(EMB_SIZE) -A $@ | awk '/^\.(text|vectors|model|data|bss|noinit|stack) /{printf "  %-9s %9d\n", $$1, $$2}'

embedded-run: $(EMB_DIR)/demo.elf
	$(EMB_QEMU_$(EMB_BOARD)) $(EMB_QEMU_FLAGS) -kernel $<

# tests/test_kernels.c on a board (embedded/test_kernels_board.c): the board's
# own kernels against their twins, the model read from the host through
# semihosting; newlib's stdio (librdimon) and a heap, which the demo never links
EMB_KT_DIR = build/embedded/test_kernels/$(EMB_BOARD)
EMB_KT_CFLAGS = $(EMB_CPU_$(EMB_BOARD)) -O2 -g -std=c99 -Wall -Wextra -Werror -ffp-contract=off -I. -Iembedded
embedded-kernels: $(EMB_KT_DIR)/test_kernels.elf
	$(EMB_QEMU_$(EMB_BOARD)) $(EMB_QEMU_FLAGS) -kernel $<
$(EMB_KT_DIR)/test_kernels.o: tests/test_kernels.c tests/test_kernels_blocks.h model.h $(wildcard engine/*.h)
	@mkdir -p $(@D)
	$(EMB_CC) $(EMB_KT_CFLAGS) -Wno-unused-function -Dmain=test_kernels_main -DTEST_MODEL_POOL=65536 -c -o $@ $<
$(EMB_KT_DIR)/board.o: embedded/test_kernels_board.c embedded/board.h
	@mkdir -p $(@D)
	$(EMB_CC) $(EMB_KT_CFLAGS) -DEMB_TEST_MODELS='"$(abspath $(EMB_MODELS))"' -c -o $@ $<
$(EMB_KT_DIR)/startup.o: embedded/startup.c embedded/board.h
	@mkdir -p $(@D)
	$(EMB_CC) $(EMB_CPU_$(EMB_BOARD)) -O2 -g -DEMB_BOARD='"$(EMB_BOARD)"' -std=gnu99 -Wall -Wextra -Werror -c -o $@ $<
$(EMB_KT_DIR)/test_kernels.elf: $(addprefix $(EMB_KT_DIR)/,startup.o board.o test_kernels.o) embedded/$(EMB_BOARD).ld embedded/common.ld
	$(EMB_CC) $(EMB_CPU_$(EMB_BOARD)) -nostartfiles --specs=nano.specs --specs=rdimon.specs -u _printf_float \
	  -Lembedded -T embedded/$(EMB_BOARD).ld -Wl,--gc-sections -Wl,--defsym=EMB_STACK=65536 -o $@ $(filter %.o,$^) -lm

# ./run for aarch64 Linux (NEON path), run under qemu-aarch64
EMB_A64_CC = aarch64-linux-gnu-gcc
# (static without OpenMP; the OpenMP build is dynamic: qemu-aarch64 -L /usr/aarch64-linux-gnu)
EMB_A64_FLAGS = -std=c99 -O2 -march=armv8.2-a+dotprod+fp16 -ffp-contract=off -Wall -Wextra
embedded-aarch64: build/embedded/run-aarch64 build/embedded/run-aarch64-omp build/embedded/test_kernels-aarch64 \
  build/embedded/test_kernels-aarch64-i8mm
build/embedded/run-aarch64: $(SRC) $(HDR)
	@mkdir -p $(@D)
	$(EMB_A64_CC) $(EMB_A64_FLAGS) -static -o $@ $(SRC) $(LIBS)
build/embedded/run-aarch64-omp: $(SRC) $(HDR)
	@mkdir -p $(@D)
	$(EMB_A64_CC) $(EMB_A64_FLAGS) -fopenmp -o $@ $(SRC) $(LIBS)
# the kernel tests on NEON (GCC 12's aarch64 loop vectoriser crashes on the test
# program's own loops: it is built without it; model.h's kernels are intrinsics)
build/embedded/test_kernels-aarch64: tests/test_kernels.c tests/test_kernels_blocks.h model.h $(wildcard engine/*.h)
	@mkdir -p $(@D)
	$(EMB_A64_CC) $(EMB_A64_FLAGS) -fno-tree-loop-vectorize -Wno-unused-function -I. -static -o $@ tests/test_kernels.c -lm
# the same with i8mm (smmla: q8_0's 4 x 4 prefill tile); qemu-aarch64's default CPU has it
build/embedded/test_kernels-aarch64-i8mm: tests/test_kernels.c tests/test_kernels_blocks.h model.h $(wildcard engine/*.h)
	@mkdir -p $(@D)
	$(EMB_A64_CC) $(EMB_A64_FLAGS) -march=armv8.2-a+dotprod+fp16+i8mm -fno-tree-loop-vectorize -Wno-unused-function -I. -static -o $@ tests/test_kernels.c -lm

# the QEMU plugin that counts guest instructions (Debian's QEMU ships none)
build/embedded/libinsncount.so: ../shared/tools/qemu-insncount.c
	@mkdir -p $(@D)
	$(EMB_HOSTCC) -O2 -shared -fPIC -o $@ $<

# ./run on aarch64, instructions per decode token of a random 15M in each
# weight type (embedded/arm_insns.py: ARM_STEPS, ARM_TYPES), a markdown table
arm-insns: build/embedded/run-aarch64 build/embedded/libinsncount.so
	LLM_MODELS=$(EMB_MODELS) $(EMB_PYTHON) embedded/arm_insns.py build/embedded/run-aarch64 build/embedded/libinsncount.so

embedded-test:
	$(MAKE) -f Makefile all portable
	LLM_MODELS=$(EMB_MODELS) $(EMB_PYTHON) embedded/test_embedded.py

embedded-figures:
	$(MAKE) -f Makefile all portable
	LLM_MODELS=$(EMB_MODELS) $(EMB_PYTHON) embedded/test_embedded.py --figures

embedded-deps:
	apt-get install -y --no-install-recommends qemu-system-arm qemu-user gcc-arm-none-eabi \
	  libnewlib-arm-none-eabi binutils-arm-none-eabi gcc-aarch64-linux-gnu libc6-dev-arm64-cross

embedded-clean:
	rm -rf build/embedded

FORCE:

ifneq ($(EMB_INCLUDED),)
.DEFAULT_GOAL := $(EMB_SAVED_GOAL)
else
.DEFAULT_GOAL := embedded-test
endif
