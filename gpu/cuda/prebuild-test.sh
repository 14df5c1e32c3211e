#!/usr/bin/env bash
# prebuild-test.sh: build the -tags cuda test binary HERE (a machine with Go, and nvcc ≥ 11.8 or just gcc)
# for a GPU machine that has CUDA but no Go, when carrying a Go toolchain (.gotool, ~35 MB) would
# push the working tree over the device tool's 64 MiB limit.
#
#   bash gpu/cuda/prebuild-test.sh        # from the project root; writes .devbin/
#
# The test binary links the kernels dynamically (libt2cuda.so) and nothing of CUDA itself
# (--as-needed drops cuBLAS(Lt)/cudart, which only the kernels use), so the stand-in library built
# here against the local CUDA is swapped at run time for the real one that device-check.sh builds
# on the GPU machine with its own nvcc (DEVBIN=.devbin bash gpu/cuda/device-check.sh ...).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
excl=$(git rev-parse --git-path info/exclude) # a worktree's .git is a file
grep -qx '/.devbin/' "$excl" 2>/dev/null || echo '/.devbin/' >> "$excl"
mkdir -p .devbin/stub
# A usable nvcc compiles a kernel for the default GPU_ARCH (a partial toolkit, or one older than the
# sm_90a target, does not: CUDA 11.8 or a toolkit without cicc): otherwise the stub library below
# stands in.
nvcc_works() {
  command -v nvcc >/dev/null || return 1
  echo '__global__ void t2_probe_kernel() {}' > .devbin/stub/probe.cu
  # shellcheck disable=SC2086 # GPU_ARCH is a list of flags
  nvcc -std=c++17 ${GPU_ARCH:--gencode arch=compute_90a,code=sm_90a} -c .devbin/stub/probe.cu \
    -o .devbin/stub/probe.o >/dev/null 2>&1
}
if nvcc_works; then
  cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  make -f gpu/cuda/gpu.mk -j"$(nproc)" gpu/cuda/build/libt2cuda.so NVCC="$(command -v nvcc)" CUDA_HOME="$cuda" >/dev/null
  cp gpu/cuda/build/libt2cuda.so .devbin/stub/
else
  # No CUDA here: the binary only needs the t2_* symbols to link (the GPU machine's real library
  # replaces this one at run time), so stand-ins from the header (gpu/stub-libs.sh).
  bash gpu/stub-libs.sh .devbin/stub
fi
CGO_ENABLED=1 CGO_LDFLAGS="-Wl,--as-needed -L$root/.devbin/stub" \
  go test -tags cuda -c -ldflags='-s -w' -o .devbin/cuda.test ./gpu/cuda/
echo "prebuild-test: $(du -h .devbin/cuda.test | cut -f1) .devbin/cuda.test needs:" \
  $(readelf -d .devbin/cuda.test | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
