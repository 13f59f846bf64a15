# meshsweep — build, deps, data, tests. `make` builds into build/; see README.md.
SHELL := /bin/bash
BUILD ?= build
CC := mpicc
DEPS_PKGS := libopenmpi-dev openmpi-bin libopenblas-dev libjansson-dev gnuplot-nox bible-kjv-text bible-kjv
BLAS_INC := /usr/include/x86_64-linux-gnu/openblas-pthread
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -I$(BLAS_INC) -MMD -MP
LDLIBS := -lopenblas -ljansson -lm
SAN ?=
ifeq ($(SAN),1)
  BUILD := build-san
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
  NO_CUDA := 1
endif

NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifeq ($(NO_CUDA),1)
  NVCC :=
endif
CUDA_SRCS := $(wildcard kernels/cuda/*.cu)
ifneq ($(NVCC),)
ifneq ($(CUDA_SRCS),)
  CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
  CFLAGS += -DMESHSWEEP_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS := -O2 -std=c++17 -DMESHSWEEP_CUDA -I. -I$(CUDA_HOME)/include \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -Xcompiler -Wall,-Wextra,-fPIC $(shell mpicc --showme:compile)
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lnccl -lstdc++
  CUDA_OBJS := $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o)
endif
endif

LIB_SRCS := $(wildcard core/*.c) $(wildcard kernels/cpu/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CUDA_OBJS)
BINS := $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*.c))

.PHONY: all deps data test test-gpu sweep clean
all: $(BINS) $(TEST_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(BUILD)/libmeshsweep.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/%: bench/%.c $(BUILD)/libmeshsweep.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libmeshsweep.a $(LDLIBS) -o $@
$(BUILD)/tests/%: tests/%.c $(BUILD)/libmeshsweep.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libmeshsweep.a $(LDLIBS) -o $@

# Install what is missing of the Debian packages (root), or print the command (non-root).
deps:
	@missing=""; for p in $(DEPS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "deps: all present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps: missing:$$missing; run: sudo apt-get update && sudo apt-get install -y$$missing"; exit 1; fi; \
	echo "deps: installing$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing; }

data: $(BUILD)/data/kjv/train.bin
$(BUILD)/data/kjv/train.bin: $(BUILD)/mkdata
	@mkdir -p $(BUILD)/data/kjv
	bible -l200 Gen1:1-Rev22:21 > $(BUILD)/data/kjv/kjv.txt.tmp && mv $(BUILD)/data/kjv/kjv.txt.tmp $(BUILD)/data/kjv/kjv.txt
	$(BUILD)/mkdata $(BUILD)/data/kjv/kjv.txt $(BUILD)/data/kjv

test: deps
	$(MAKE) all
	$(MAKE) data
	BUILD=$(BUILD) NVCC="$(NVCC)" bash tests/run.sh

test-gpu: all
	BUILD=$(BUILD) bash tests/run_gpu.sh

SWEEP ?= sweeps/default.json
sweep: deps
	$(MAKE) all
	$(MAKE) data
	$(BUILD)/sweep $(SWEEP)

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
