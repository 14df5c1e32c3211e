#!/usr/bin/env bash
# device-check.sh: everything the GPU machine checks in one call (it has nvcc, cuBLAS, PyTorch and
# transformers but no Go of its own: pack one first with ../shared/device/pack-go ./gpu/...).
#
#   bash gpu/cuda/device-check.sh [test|sanitize|bench|torch]...   (default: all four)
#
# Logs and JSON reports go to $OUT (or ./gpu-report); each stage has its own time limit (T_TEST,
# T_SAN, T_BENCH, T_TORCH seconds) so one slow stage cannot eat the others' time; T2_BENCH_SHAPES
# and T2_TORCH_SHAPES narrow the benchmarks.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-report}
mkdir -p "$OUT"
export T2_REPORT_DIR=$OUT PYTHONUNBUFFERED=1
[[ -f .gotool/enter.sh ]] && source .gotool/enter.sh
stages=("$@")
((${#stages[@]})) || stages=(test sanitize bench torch)
has() { [[ " ${stages[*]} " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/device.txt"
nvcc --version | tail -1 | tee -a "$OUT/device.txt"
make -f gpu/cuda/gpu.mk -j8 gpu 2>&1 | tail -5 || { echo "BUILD FAILED"; exit 1; }
export CGO_ENABLED=1 CGO_LDFLAGS="-L${CUDA_HOME:-/usr/local/cuda}/lib64 ${CGO_LDFLAGS:-}"
go test -tags cuda -c -o /tmp/cuda.test ./gpu/cuda/ || { echo "TEST BUILD FAILED"; exit 1; }
rc=0
if has test; then
  timeout ${T_TEST:-300} /tmp/cuda.test -test.v -test.count=1 2>&1 | tee "$OUT/test.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|check.py|go .*torch|PASS|FAIL|error' | head -80
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    tests='TestMatchesCPUReference|TestRecomputeAndChunking|TestStepIsAdamW'
    [[ $tool == racecheck ]] && tests='TestRecomputeAndChunking|TestStepIsAdamW'
    timeout ${T_SAN:-240} compute-sanitizer --tool $tool --error-exitcode 3 /tmp/cuda.test -test.count=1 \
      -test.run "$tests" >"$OUT/sanitize-$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $?"; grep -E 'SUMMARY|^(ok|PASS|FAIL|--- FAIL)' "$OUT/sanitize-$tool.log" | tail -4
  done
fi
if has bench; then
  timeout ${T_BENCH:-420} /tmp/cuda.test -test.run '^$' -test.bench . -test.benchtime ${GPU_BENCHTIME:-3x} 2>&1 | tee "$OUT/bench.log" | grep -E 'Benchmark|ok|FAIL'
fi
if has torch; then
  timeout ${T_TORCH:-420} python3 gpu/cuda/pytorch/bench.py 2>&1 | tail -12 | tee "$OUT/torch-bench.log"
fi
exit $rc
