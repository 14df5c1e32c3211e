#!/usr/bin/env bash
# device-test.sh: gpu/dp's -tags cuda tests (docs/MULTIGPU.md) on a GPU machine without Go.
#
#   bash gpu/dp/device-test.sh prebuild   # HERE (Go + gcc, no CUDA needed): writes .devbin/dp.test
#   bash gpu/dp/device-test.sh run        # on the GPU machine (nvcc, NCCL): builds the kernels and
#                                         # the NCCL shim as shared libraries, runs the tests
#
# prebuild links the test binary against stand-ins of libt2cuda.so and libt2nccl.so (the t2_* and
# t2n_* symbols of the two plain-C headers) with --as-needed, so the binary needs nothing of CUDA
# or NCCL itself; run builds the real libraries with the machine's nvcc and NCCL (NCCL_HOME, by
# default the nvidia-nccl wheel next to PyTorch) and puts them first on LD_LIBRARY_PATH.
# Where Go is on the GPU machine, `make gpu-dp-test` does the same in one step.
set -euo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || (cd "$(dirname "$0")/../.." && pwd))"
case ${1:-} in
prebuild)
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.devbin/' "$exclude" 2>/dev/null || echo '/.devbin/' >>"$exclude"
  stub=.devbin/dpstub
  mkdir -p "$stub"
  for h in gpu/cuda/csrc/t2cuda.h:t2_:t2cuda gpu/collective/nccl/csrc/t2nccl.h:t2n_:t2nccl; do
    IFS=: read -r header prefix lib <<<"$h"
    grep -o "${prefix}[a-z0-9_]*(" "$header" | tr -d '(' | sort -u | grep -vx "${prefix}status" |
      awk '{print "void "$1"(void){}"}' >"$stub/$lib.c"
    gcc -shared -fPIC -o "$stub/lib$lib.so" "$stub/$lib.c"
  done
  echo 'void t2_no_cuda_(void){}' >"$stub/empty.c"
  for l in cublas cudart nccl; do gcc -shared -fPIC -o "$stub/lib$l.so" "$stub/empty.c"; done
  CGO_ENABLED=1 CGO_LDFLAGS="-Wl,--as-needed -L$PWD/$stub" \
    go test -tags cuda -c -ldflags='-s -w' -o .devbin/dp.test ./gpu/dp/
  echo "device-test: .devbin/dp.test ($(du -h .devbin/dp.test | cut -f1)) needs:" \
    $(readelf -d .devbin/dp.test | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
  ;;
run)
  export NCCL_NVLS_ENABLE=0 # never NVLink SHARP multicast (docs/MULTIGPU.md)
  OUT=${OUT:-$PWD/gpu-report}
  mkdir -p "$OUT" .devbin/lib
  cuda=${CUDA_HOME:-/usr/local/cuda}
  nccl=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || echo "$cuda")}
  nccllib=$(dirname "$(ls "$nccl"/lib*/libnccl.so* 2>/dev/null | head -1)")
  make -f gpu/cuda/gpu.mk -j16 gpu/cuda/build/libt2cuda.a >"$OUT/dp-build.log" 2>&1 || { tail -20 "$OUT/dp-build.log"; exit 1; }
  g++ -shared -o .devbin/lib/libt2cuda.so gpu/cuda/build/*.o -L"$cuda/lib64" -lcublas -lcudart
  nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -I"$nccl/include" gpu/collective/nccl/csrc/t2nccl.cu \
    -o .devbin/lib/libt2nccl.so -L"$nccllib" -l:"$(basename "$(ls "$nccllib"/libnccl.so* | head -1)")" -lcudart
  export LD_LIBRARY_PATH=$PWD/.devbin/lib:$nccllib:$cuda/lib64:${LD_LIBRARY_PATH:-}
  cd gpu/dp
  ../../.devbin/dp.test -test.v -test.count=1 -test.run "${T2_TEST_RUN:-CUDA|NCCL}" 2>&1 | tee "$OUT/dp-test.log"
  ;;
*)
  echo "usage: $0 prebuild|run" >&2
  exit 2
  ;;
esac
