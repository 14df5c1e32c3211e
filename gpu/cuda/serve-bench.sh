#!/usr/bin/env bash
# serve-bench.sh: the serving checks and the τ²-shaped serving benchmark on a GPU machine in one
# call (issue 28). Run from the repository root with a Go toolchain (.gotool, see device-check.sh):
#
#   bash gpu/cuda/serve-bench.sh [tests] [bench]      (default: both)
#
# tests: the decoder's and the serving kernels' checks (T2_SERVE_TESTS narrows them);
# bench: BenchmarkServeTau2 (T2_BENCH_SHAPES, T2_SERVE_LOADS, T2_SERVE_CAPTURE_AFTER,
# T2_SERVE_PROFILE as documented there). Logs and JSON lines go to $OUT (or ./gpu-report), the
# clocks and power over the benchmark to clocks-serve.csv.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-report}
mkdir -p "$OUT"
export T2_REPORT_DIR=$OUT
[[ -f .gotool/enter.sh ]] && source .gotool/enter.sh
stages=("$@")
((${#stages[@]})) || stages=(tests bench)
has() { [[ " ${stages[*]} " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv | tee "$OUT/device.txt"
t0=$(date +%s)
make -f gpu/cuda/gpu.mk -j16 gpu/cuda/build/libt2cuda.a >"$OUT/build.log" 2>&1 || { grep -E -A3 'error' "$OUT/build.log" | head -40; echo "BUILD FAILED"; exit 1; }
export CGO_ENABLED=1 CGO_LDFLAGS="-L${CUDA_HOME:-/usr/local/cuda}/lib64 ${CGO_LDFLAGS:-}"
go test -tags cuda -c -o /tmp/cuda.test ./gpu/cuda/ >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; echo "TEST BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
cd gpu/cuda
rc=0
if has tests; then
  timeout ${T_TEST:-240} /tmp/cuda.test -test.count=1 -test.v -test.run "${T2_SERVE_TESTS:-TestServe|TestDecoder|TestSampler}" >"$OUT/test.log" 2>&1
  trc=$?
  grep -E '^(--- |PASS|FAIL|ok)' "$OUT/test.log" | head -40
  echo "tests exit $trc"; [[ $trc == 0 ]] || rc=1
fi
if has bench; then
  bash sample-clocks.sh "$OUT/clocks-serve.csv" timeout ${T_BENCH:-420} /tmp/cuda.test -test.run '^$' -test.bench 'BenchmarkServeTau2' \
    -test.benchtime 1x -test.timeout 30m -test.v >"$OUT/bench.log" 2>&1
  echo "bench exit $?"
  grep -vE '^(=== RUN|goos|goarch|pkg|cpu)' "$OUT/bench.log" | head -150
fi
exit $rc
