# gpu/cuda/gpu.mk: the CUDA backend's build, tests and benchmarks; included by the top Makefile.
#
#   make gpu        nvcc csrc/*.cu -> gpu/cuda/build/libt2cuda.a and gpu/collective/nccl/csrc/t2nccl.cu ->
#                   gpu/collective/nccl/build/libt2nccl.a, then go build -tags cuda of gpu/cuda, the NCCL
#                   collectives and gpu/dp
#   make gpu-dp-test  the -tags cuda tests of gpu/dp: NCCL world 1 = plain CUDA, the memory model
#                   against the allocator (docs/MULTIGPU.md)
#   make gpu-test   the -tags cuda tests: kernels vs gpu/cpu, tree-packed vs unpacked, and the PyTorch
#                   check (gpu/cuda/pytorch/check.py: transformers Qwen3ForCausalLM, autograd,
#                   torch.optim.AdamW) when python3 has torch and transformers
#   make gpu-bench  training-step benchmarks (Go, -tags cuda) and the same shapes in PyTorch, the
#                   decoder's (BenchmarkDecode, BenchmarkPrefill) and the τ²-shaped serving load
#                   through the real engine (BenchmarkServeTau2; serve-bench.sh runs it alone)
#   make gpu-trainer  bin/tau2-trainer with the CUDA backend (backend=cuda)
#   make gpu-sampler  bin/tau2-sampler with the CUDA decoder (backend=cuda)
#
# Needs nvcc (CUDA ≥ 12.0; sm_90a by default — Hopper's arch-specific features, which the wgmma
# attention kernels use; GPU_ARCH='-gencode arch=compute_80,code=sm_80' for A100, where those
# kernels compile to nothing and Options.Attention "auto" picks the FA2 ones) and cuBLAS. Nothing
# here runs in CI: without the cuda tag no Go file of gpu/cuda uses cgo.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
GPU_ARCH ?= -gencode arch=compute_90a,code=sm_90a
GPU_NVCCFLAGS ?= -O3 -std=c++17 -lineinfo -Xcompiler -fPIC $(GPU_ARCH)
GPU_DIR := gpu/cuda
GPU_SRC := $(wildcard $(GPU_DIR)/csrc/*.cu)
GPU_OBJ := $(patsubst $(GPU_DIR)/csrc/%.cu,$(GPU_DIR)/build/%.o,$(GPU_SRC))
GPU_LIB := $(GPU_DIR)/build/libt2cuda.a
GPU_CGO_LDFLAGS := $(if $(wildcard $(CUDA_HOME)/lib64),-L$(CUDA_HOME)/lib64)
GPU_BENCHTIME ?= 5x
GPU_BENCH_TITLE ?= make gpu-bench: SM clock and power during the Go benchmarks

# NCCL: headers and library from NCCL_HOME (default: the nvidia-nccl wheel next to PyTorch, else
# CUDA_HOME). The wheel ships libnccl.so.2 without the libnccl.so link the linker looks for, so the
# build directory gets one; the rpath lets the binaries find the library at run time.
NCCL_HOME ?= $(or $(shell python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null),$(CUDA_HOME))
NCCL_SO = $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so* $(NCCL_HOME)/lib/libnccl.so*))
NCCL_LIBDIR = $(if $(NCCL_SO),$(dir $(NCCL_SO)),/usr/lib/x86_64-linux-gnu/)
NCCL_CGO_LDFLAGS = -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR)
NCCL_GO_DIR := gpu/collective/nccl
NCCL_LIB := $(NCCL_GO_DIR)/build/libt2nccl.a

$(NCCL_LIB): $(NCCL_GO_DIR)/csrc/t2nccl.cu $(NCCL_GO_DIR)/csrc/t2nccl.h
	@mkdir -p $(@D)
	$(NVCC) $(GPU_NVCCFLAGS) $(if $(wildcard $(NCCL_HOME)/include/nccl.h),-I$(NCCL_HOME)/include) -c $< -o $(@D)/t2nccl.o
	rm -f $@ && ar rcs $@ $(@D)/t2nccl.o
	@[ -e $(NCCL_LIBDIR)libnccl.so ] || ln -sf $$(ls $(NCCL_LIBDIR)libnccl.so.* | head -1) $(@D)/libnccl.so

GPU_HDR := $(wildcard $(GPU_DIR)/csrc/*.h $(GPU_DIR)/csrc/*.cuh)

$(GPU_DIR)/build/%.o: $(GPU_DIR)/csrc/%.cu $(GPU_HDR)
	@mkdir -p $(@D)
	$(NVCC) $(GPU_NVCCFLAGS) -c $< -o $@

$(GPU_LIB): $(GPU_OBJ)
	rm -f $@
	ar rcs $@ $^

# GPU_SO: the kernels as one shared library, for test binaries and commands built on another
# machine against stand-ins (prebuild-test.sh, device-check.sh, gpu/dp/device-test.sh,
# deploy/scripts/learn-prebuilt.sh): the whole archive, so every t2_* symbol is there, linked
# against what the kernels call. GPU_LINK_LIBS must match cgo.go's LDFLAGS.
GPU_LINK_LIBS := -lcublasLt -lcublas -lcudart
GPU_SO := $(GPU_DIR)/build/libt2cuda.so

$(GPU_SO): $(GPU_LIB)
	g++ -shared -o $@ -Wl,--whole-archive $< -Wl,--no-whole-archive $(GPU_CGO_LDFLAGS) $(GPU_LINK_LIBS)

.PHONY: gpu gpu-test gpu-bench gpu-clean gpu-dp-test
gpu: $(GPU_LIB) $(NCCL_LIB)
	CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(NCCL_CGO_LDFLAGS) $(CGO_LDFLAGS)" go build -tags cuda ./gpu/cuda/ ./gpu/collective/... ./gpu/dp/

gpu-dp-test: gpu
	NCCL_NVLS_ENABLE=0 CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(NCCL_CGO_LDFLAGS) $(CGO_LDFLAGS)" go test -tags cuda -count=1 -v \
		-run 'CUDA|NCCL' ./gpu/dp/

gpu-test: gpu
	CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(NCCL_CGO_LDFLAGS) $(CGO_LDFLAGS)" go test -tags cuda -count=1 -v ./gpu/cuda/

# gpu-bench writes its records (go_bench.jsonl, torch_bench.json, profiles with T2_PROFILE=1) and
# the GPU's clock and power samples over the Go benchmarks (clocks-bench.csv, drawn as
# clocks-bench.png, summarized on the terminal) into GPU_REPORT: the step is power-bound on
# H100/H200, and a number means little without the clock it ran at (docs/PERFORMANCE.md).
GPU_REPORT ?= gpu-report
gpu-bench: gpu
	mkdir -p $(GPU_REPORT)
	T2_REPORT_DIR=$(abspath $(GPU_REPORT)) CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(NCCL_CGO_LDFLAGS) $(CGO_LDFLAGS)" \
		bash $(GPU_DIR)/sample-clocks.sh $(GPU_REPORT)/clocks-bench.csv \
		go test -tags cuda -count=1 -run '^$$' -bench . -benchtime $(GPU_BENCHTIME) -timeout 60m ./gpu/cuda/
	go run ./gpu/cuda/powertrace/powerplot -o $(GPU_REPORT)/clocks-bench.png \
		-title "$(GPU_BENCH_TITLE)" $(GPU_REPORT)/clocks-bench.csv
	T2_REPORT_DIR=$(abspath $(GPU_REPORT)) python3 $(GPU_DIR)/pytorch/bench.py

gpu-clean:
	rm -rf $(GPU_DIR)/build $(NCCL_GO_DIR)/build

# gpu-trainer builds bin/tau2-trainer with the CUDA backend linked in (backend=cuda).
.PHONY: gpu-trainer
gpu-trainer: $(GPU_LIB) $(NCCL_LIB)
	@mkdir -p $(BIN)
	CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(NCCL_CGO_LDFLAGS) $(CGO_LDFLAGS)" go build -tags cuda -o $(BIN)/tau2-trainer ./cmd/tau2-trainer

# gpu-sampler builds bin/tau2-sampler with the CUDA decoder linked in (backend=cuda).
.PHONY: gpu-sampler
gpu-sampler: $(GPU_LIB)
	@mkdir -p $(BIN)
	CGO_ENABLED=1 CGO_LDFLAGS="$(GPU_CGO_LDFLAGS) $(CGO_LDFLAGS)" go build -tags cuda -o $(BIN)/tau2-sampler ./cmd/tau2-sampler
