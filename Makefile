# meshsweep — build, deps, data, tests. `make` builds into build/; see README.md.
SHELL := /bin/bash
BUILD ?= build
# the builds that test, sweep and plan start compile one file per core
NPROC := $(shell nproc 2>/dev/null || echo 2)
# tests side by side in `make test` (tests/run.sh JOBS: the suites wait much of their time; the
# manifest keeps timing-sensitive ones alone)
TEST_JOBS ?= 2
CC := mpicc
DEPS_PKGS := libopenmpi-dev openmpi-bin libopenblas-dev libjansson-dev gnuplot-nox bible-kjv-text bible-kjv python3-torch iproute2 util-linux slurmctld slurmd slurm-client munge libpmix-dev
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
# the CUDA runtime: shared here; the kit's older-glibc build (make gpu-kit-compat) links it statically
CUDART_LIB ?= -lcudart
ifneq ($(NVCC),)
ifneq ($(CUDA_SRCS),)
  CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
  CFLAGS += -DMESHSWEEP_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS := -O2 -std=c++17 -DMESHSWEEP_CUDA -I. -I$(CUDA_HOME)/include \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -gencode arch=compute_90,code=compute_90 \
    -Xcompiler -Wall,-Wextra,-fPIC $(filter-out -pthread,$(shell mpicc --showme:compile))
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas $(CUDART_LIB) -lnccl -lstdc++
  CUDA_OBJS := $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o)
endif
endif

# What every run record says it was built from (env.git, env.compiler): the revision with a dirty flag
# ("unknown" outside a git checkout of this tree, e.g. a tarball) and the compiler's version line.
# $(BUILD)/gen/buildinfo.h is rewritten only when they change, and only core/run/run_record.c includes
# it, so a new commit or a first edit recompiles one file and relinks; nothing else is rebuilt.
GIT_REV := $(shell [ "$$(git -C "$(CURDIR)" rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && \
  git -C "$(CURDIR)" describe --always --dirty --abbrev=12 2>/dev/null | tr -cd '[:alnum:]._-' || echo unknown)
CC_VERSION := $(shell $(CC) --version 2>/dev/null | head -1 | tr -d '"\\')
BUILDINFO := $(BUILD)/gen/buildinfo.h
BUILDINFO_TEXT := \#define MESHSWEEP_GIT "$(or $(GIT_REV),unknown)"\n\#define MESHSWEEP_COMPILER "$(or $(CC_VERSION),unknown)"
$(shell mkdir -p $(BUILD)/gen && printf '%b\n' '$(BUILDINFO_TEXT)' > $(BUILDINFO).new && \
  { cmp -s $(BUILDINFO).new $(BUILDINFO) && rm -f $(BUILDINFO).new || mv -f $(BUILDINFO).new $(BUILDINFO); })
CFLAGS += -I$(BUILD)/gen

LIB_SRCS := $(wildcard core/*/*.c) $(wildcard kernels/cpu/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CUDA_OBJS)
BINS := $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*.c))

.PHONY: all deps data test test-gpu sweep plan calibrate tune clean fuzz lint lint-tools gpu-kit gpu-kit-compat gpu-kit-compat-test cuda-tools
all: $(BINS) $(TEST_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@
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

# cuobjdump/nvdisasm (tests/t_cuda_sass.sh reads the kernels' SASS with them): CUDA installs without them
# get the PyPI wheels in a project-local prefix, $(BUILD)/tools/py; nothing to do without nvcc.
CUDA_TOOL_WHEELS := nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
cuda-tools:
	@if [ -z "$(NVCC)" ]; then echo "cuda-tools: no nvcc, nothing to do"; exit 0; fi; \
	if command -v cuobjdump >/dev/null 2>&1 || [ -x "$(dir $(NVCC))cuobjdump" ] || ls $(BUILD)/tools/py/nvidia/*/bin/cuobjdump >/dev/null 2>&1; then \
	  echo "cuda-tools: cuobjdump present"; exit 0; fi; \
	pip=$$(command -v pip3 || command -v pip); \
	if [ -z "$$pip" ]; then echo "cuda-tools: no pip; install $(CUDA_TOOL_WHEELS) or t_cuda_sass.sh skips"; exit 0; fi; \
	echo "cuda-tools: pip-installing $(CUDA_TOOL_WHEELS) into $(BUILD)/tools/py"; \
	$$pip install -q --no-deps --target $(BUILD)/tools/py $(CUDA_TOOL_WHEELS) || echo "cuda-tools: pip install failed; t_cuda_sass.sh skips"

data: $(BUILD)/data/kjv/train.bin
$(BUILD)/data/kjv/train.bin: $(BUILD)/mkdata
	@mkdir -p $(BUILD)/data/kjv
	bible -l200 Gen1:1-Rev22:21 > $(BUILD)/data/kjv/kjv.txt.tmp && mv $(BUILD)/data/kjv/kjv.txt.tmp $(BUILD)/data/kjv/kjv.txt
	$(BUILD)/mkdata $(BUILD)/data/kjv/kjv.txt $(BUILD)/data/kjv

test: deps
	$(MAKE) -j$(NPROC) all
	$(MAKE) cuda-tools
	$(MAKE) data
	BUILD=$(BUILD) NVCC="$(NVCC)" JOBS=$(TEST_JOBS) bash tests/run.sh

test-gpu: all
	BUILD=$(BUILD) bash gpukit/run_gpu.sh

# `make gpu-kit`: the binaries + the Debian runtime packages they need, for a bare CUDA machine
# (docs/gpu.md, "Running on a GPU machine that lacks the packages"); tests/t_gpu_kit.sh checks it.
gpu-kit: all
	BUILD=$(BUILD) bash gpukit/make_kit.sh
# `make gpu-kit-compat`: $(BUILD)/gpu-kit-compat/, the same kit for glibc 2.31 and CUDA 12 or 13 machines:
# two binary sets built in Debian 11 roots kept under COMPAT_DIR (default ~/.cache/meshsweep/compat;
# root, network and minutes the first time; never part of `make test`)
gpu-kit-compat:
	BUILD=$(BUILD) $(if $(COMPAT_DIR),COMPAT_DIR=$(COMPAT_DIR)) NVCC="$(NVCC)" bash gpukit/compat_build.sh
# `make gpu-kit-compat-test`: that kit in a bare Debian 11 chroot (tests/t_gpu_kit.sh with its compat checks)
gpu-kit-compat-test: all
	BUILD=$(BUILD) $(if $(COMPAT_DIR),COMPAT_DIR=$(COMPAT_DIR)) NVCC="$(NVCC)" MESHSWEEP_KIT_COMPAT=1 ONLY=t_gpu_kit.sh bash tests/run.sh

SWEEP ?= sweeps/default.json
sweep: deps
	$(MAKE) -j$(NPROC) all
	$(MAKE) data
	$(BUILD)/sweep $(SWEEP)

# `make calibrate`: measure this host for the step-time model (docs/cost-model.md): the steps of CALIBRATE_SPECS,
# a GEMM grid, how ranks share the cores and the collectives of every group size of 8 ranks, under the default
# sweep's launcher, into $(BUILD)/machines/HOST-Nc.json (about a minute; a sweep without one does this itself).
# A loaded host is refused (load average or timing spread beyond docs/cost-model.md's limits); FORCE=1 calibrates
# anyway and the file records that it was forced, with the load.
CALIBRATE_SPECS ?= sweeps/default.json,sweeps/cpu-small.json
calibrate: deps
	$(MAKE) -j$(NPROC) all
	OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
	  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 8 $(BUILD)/calibrate \
	  --spec $(CALIBRATE_SPECS) --build "$$(git describe --always --dirty 2>/dev/null || echo unknown)" --verbose 1 $(if $(FORCE),--force)

# `make plan SWEEP=...`: the same spec as plans only (build/sweep --plan-only): nothing is launched
plan: deps
	$(MAKE) -j$(NPROC) all
	$(BUILD)/sweep $(SWEEP) --plan-only

# `make tune`: build/tune on this host (docs/tune.md): every mesh x micro-batch x accumulation x checkpointing x SP x
# reduce x prefetch of TUNE_ARGS planned and priced, into results/tune/<UTC timestamp>/. The step-time model is this
# host's machine file: `make calibrate` runs first when there is none (about a minute, once).
TUNE_ARGS ?= --model small --world 8 --seq-len 256 --global-batch 64
tune: deps
	$(MAKE) -j$(NPROC) all
	@[ -f "$(BUILD)/machines/$$(hostname)-$$(getconf _NPROCESSORS_ONLN)c.json" ] || $(MAKE) calibrate
	$(BUILD)/tune $(TUNE_ARGS)

# ---- fuzzing and static analysis (docs/bad-input.md, docs/testing.md) ------------------------------------------------
# Install one tool's Debian package when it is missing (root), else say what to run.
need_pkg = command -v $(1) >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ]; then echo "installing $(2)"; \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >/dev/null 2>&1 || \
  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2); }; \
  else echo "$(1) missing; run: sudo apt-get install -y $(2)"; exit 1; fi; }

# `make fuzz`: libFuzzer targets (tests/fuzz/fuzz_*.c) built with clang around the project's own
# parsers, each run for FUZZ_RUNS executions (default 1M) or FUZZ_TIME seconds, whichever ends first;
# fails on any crash, sanitizer report, oracle failure, or fewer executions than FUZZ_RUNS.
FUZZ_TARGETS := size hf_config sweep_spec safetensors
FUZZ_SRCS := core/formats/config.c core/sweep/spec.c core/sweep/grid.c core/formats/safetensors.c core/common/errmsg.c core/common/cleanup.c \
  core/common/parse.c core/job/catalog.c
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_RUNS ?= 1000000
FUZZ_TIME ?= 900
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_SRCS) core/formats/config.h core/sweep/spec.h core/sweep/grid.h core/formats/safetensors.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $< $(FUZZ_SRCS) -ljansson -lm -o $@
fuzz:
	@$(call need_pkg,clang,clang)
	$(MAKE) $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
	FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_TIME=$(FUZZ_TIME) bash tests/fuzz/run.sh $(FUZZ_TARGETS)

# `make lint`: cppcheck and clang-tidy (clang-analyzer-* and bugprone-*) over the engine, kernels and
# programs, with the include paths mpicc uses; any finding fails. Suppressions: tests/lint/. Then
# tests/lint/names.py: no name both static and public, and the function and file sizes.
LINT_SRCS := $(wildcard core/*/*.c) $(wildcard kernels/cpu/*.c) $(wildcard bench/*.c)
LINT_INC := -I. -I$(BLAS_INC) $(shell mpicc --showme:incdirs 2>/dev/null | tr ' ' '\n' | sed '/^$$/d; s/^/-I/')
# the analysers, installed when missing (.ci/run installs them first, then runs lint beside the sanitizer pass)
lint-tools:
	@$(call need_pkg,cppcheck,cppcheck)
	@$(call need_pkg,clang-tidy,clang-tidy)

lint: lint-tools
	cppcheck -j $(NPROC) --quiet --error-exitcode=1 --std=c11 --enable=warning,portability,performance --inline-suppr \
	  --suppressions-list=tests/lint/cppcheck.supp -D_GNU_SOURCE -D__x86_64__ -D__GNUC__ -D__linux__ \
	  -I. $(LINT_SRCS)
	printf '%s\n' $(LINT_SRCS) | xargs -P $(NPROC) -n 4 sh -c 'clang-tidy --quiet --config-file=tests/lint/clang-tidy.yaml "$$@" \
	  -- -std=c11 -D_GNU_SOURCE $(LINT_INC)' clang-tidy
	python3 tests/lint/names.py

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(wildcard $(BUILD)/*.d $(BUILD)/tests/*.d)
