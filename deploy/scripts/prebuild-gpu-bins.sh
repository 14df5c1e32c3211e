#!/usr/bin/env bash
# prebuild-gpu-bins.sh: build every tau2rl binary HERE, the CUDA ones (tau2-trainer, tau2-sampler)
# with -tags cuda, for a GPU machine that has nvcc and the CUDA libraries but no Go toolchain.
#
#   bash deploy/scripts/prebuild-gpu-bins.sh         # from the project root; writes .devbin/bins.tar.xz
#
# No CUDA is needed here: the cuda-tagged binaries link libt2cuda.so dynamically, and at link time a
# stand-in library generated from csrc/t2cuda.h (every t2_* function returning an error) satisfies
# the linker; empty cuBLAS/cudart/NCCL stand-ins satisfy the -l flags (--as-needed drops them, since
# only the kernels use them). On the GPU machine, gpu/cuda/device-run.sh builds the real
# libt2cuda.so with nvcc from the same sources and puts it on LD_LIBRARY_PATH, so the binaries run
# the real kernels. A machine with Go and nvcc needs none of this: `make gpu-trainer gpu-sampler`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.devbin/' .git/info/exclude 2>/dev/null || echo '/.devbin/' >> .git/info/exclude
stub=$root/.devbin/pgb-stub
out=$root/.devbin/bin
rm -rf "$out" && mkdir -p "$stub" "$out"

python3 - "$root/gpu/cuda/csrc/t2cuda.h" > "$stub/t2stub.c" <<'EOF'
import re, sys
h = open(sys.argv[1]).read()
body = re.sub(r'/\*.*?\*/', '', h, flags=re.S)
body = re.sub(r'//[^\n]*', '', body)
print('#include "t2cuda.h"')
for d in re.findall(r'(t2_status\s+\w+\s*\([^;{]*\))\s*;', body):
    print(d + ' { t2_status s = {-1, "stub", "prebuild-gpu-bins.sh", 0, '
          '"the stand-in libt2cuda.so is loaded: put the real one on LD_LIBRARY_PATH"}; return s; }')
EOF
gcc -shared -fPIC -I"$root/gpu/cuda/csrc" -o "$stub/libt2cuda.so" "$stub/t2stub.c"
for l in cublas cudart nccl; do echo "" | gcc -shared -fPIC -x c -o "$stub/lib$l.so" -; done

ldflags='-s -w'
for d in cmd/*/; do
  b=$(basename "$d")
  [[ $b == internal ]] && continue
  tags=""
  [[ $b == tau2-trainer || $b == tau2-sampler ]] && tags="-tags cuda"
  echo "prebuild-gpu-bins: $b ${tags}" >&2
  CGO_ENABLED=1 CGO_LDFLAGS="-Wl,--as-needed -L$stub" \
    go build -trimpath $tags -ldflags="$ldflags" -o "$out/$b" "./$d"
done
tar -C "$root/.devbin" -cf - bin | xz -T0 -6 > "$root/.devbin/bins.tar.xz"
rm -rf "$out"
echo "prebuild-gpu-bins: $(du -h "$root/.devbin/bins.tar.xz" | cut -f1) .devbin/bins.tar.xz" >&2
